//! The command's view of the file system, in the mount namespace its fence made (`unshare`
//! makes one, private: nothing here reaches the machine's mounts). Every mount is made
//! read-only, and only the directories it may write are bound writable again (no set-uid, no
//! devices there). So a command, even run by root, changes nothing outside its workspace: no
//! `chmod`, `chown`, extended attributes or times of a file elsewhere (Landlock governs
//! opening files, not their metadata), no files written through a path Landlock would allow.
//! Devices still work (`/dev/null`): writing a device does not write its mount.

use std::path::PathBuf;

use rustix::io::Errno;
use rustix::mount::MountFlags;

/// One line of `/proc/self/mountinfo`: where the mount is and the flags a remount must keep.
#[derive(Debug, PartialEq)]
struct Mount {
    point: PathBuf,
    keep: MountFlags,
}

/// Makes every mount read-only but `writable` (each bound onto itself first, then kept
/// writable, without set-uid or devices), and empties each of `hidden` that exists (a file
/// reads as empty, a directory as empty). Fails when a mount the command could reach cannot
/// be made read-only: the command does not run half-sealed.
pub fn seal(writable: &[PathBuf], hidden: &[&str]) -> Result<(), String> {
    hide(hidden)?;
    let writable: Vec<PathBuf> = writable
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    for dir in &writable {
        rustix::mount::mount_bind(dir, dir)
            .map_err(|e| format!("binding {} writable: {e}", dir.display()))?;
    }
    let table = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("reading the mount table: {e}"))?;
    for mount in table.lines().take(10_000).filter_map(parse) {
        let open = writable.contains(&mount.point);
        let flags = mount.keep
            | MountFlags::BIND
            | match open {
                true => MountFlags::NOSUID | MountFlags::NODEV,
                false => MountFlags::RDONLY,
            };
        match rustix::mount::mount_remount(&mount.point, flags, "") {
            Ok(()) => {}
            // Covered by a later mount (the fence's own /proc over the machine's): out of
            // reach, and its path now names a directory of the mount above it, or nothing.
            Err(Errno::INVAL | Errno::NOENT | Errno::ACCESS) => {}
            Err(e) => return Err(format!("making {} read-only: {e}", mount.point.display())),
        }
    }
    // The working directory was entered before its writable mount was made: entered again
    // by its path, it is on that mount.
    if let Ok(cwd) = std::env::current_dir() {
        std::env::set_current_dir(&cwd)
            .map_err(|e| format!("entering {} again: {e}", cwd.display()))?;
    }
    Ok(())
}

/// Covers each existing path of `hidden`: a file with `/dev/null`, a directory with an empty
/// read-only tmpfs.
fn hide(hidden: &[&str]) -> Result<(), String> {
    for path in hidden {
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        let covered = match meta.is_dir() {
            true => rustix::mount::mount(
                "none",
                *path,
                "tmpfs",
                MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                c"mode=000",
            ),
            false => rustix::mount::mount_bind("/dev/null", *path),
        };
        covered.map_err(|e| format!("hiding {path}: {e}"))?;
    }
    Ok(())
}

/// A mountinfo line: `id parent major:minor root point options …`; the options a remount of
/// a bind must repeat (in a user namespace the kernel refuses to change locked ones).
fn parse(line: &str) -> Option<Mount> {
    let mut fields = line.split(' ');
    let point = fields.nth(4)?;
    let options = fields.next()?;
    let mut keep = MountFlags::empty();
    let mut atime = false;
    for option in options.split(',') {
        keep |= match option {
            "nosuid" => MountFlags::NOSUID,
            "nodev" => MountFlags::NODEV,
            "noexec" => MountFlags::NOEXEC,
            "nodiratime" => MountFlags::NODIRATIME,
            "noatime" => MountFlags::NOATIME,
            "relatime" => MountFlags::RELATIME,
            _ => continue,
        };
        atime |= matches!(option, "noatime" | "relatime");
    }
    if !atime {
        keep |= MountFlags::STRICTATIME;
    }
    Some(Mount {
        point: unescape(point),
        keep,
    })
}

/// mountinfo writes space, tab, newline and backslash in a path as `\ooo` (octal).
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_mountinfo_line_gives_its_point_and_the_flags_to_keep() {
        let line = "36 35 98:0 /mnt1 /mnt/my\\040disk rw,nosuid,noatime master:1 - ext3 /dev/root rw,errors=continue";
        assert_eq!(
            parse(line),
            Some(Mount {
                point: "/mnt/my disk".into(),
                keep: MountFlags::NOSUID | MountFlags::NOATIME,
            })
        );
        let proc = "60 24 0:5 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw";
        assert_eq!(
            parse(proc).unwrap().keep,
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC | MountFlags::RELATIME
        );
        let strict = "61 24 0:6 / /dev rw - devtmpfs udev rw";
        assert_eq!(parse(strict).unwrap().keep, MountFlags::STRICTATIME);
        assert_eq!(parse("too short"), None);
        assert_eq!(unescape("a\\134b\\011c\\"), PathBuf::from("a\\b\tc\\"));
    }
}
