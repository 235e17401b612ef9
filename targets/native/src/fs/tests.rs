//! `FsFiles` and symlinks: a link inside the root, to `/etc`, to a sibling directory or to a
//! file outside, is never read, written, listed or deleted through.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use clawless_platform::{ErrorKind, Files};
use futures::executor::block_on;

use super::FsFiles;

/// A fresh directory holding `root/` (the store) and `outside/` (a sibling with a file).
fn setup(tag: &str) -> (PathBuf, FsFiles) {
    let dir = clawless_testkit::scratch::dir(&format!("fs-{tag}"));
    std::fs::create_dir_all(dir.join("outside")).unwrap();
    std::fs::write(dir.join("outside/secret.txt"), "secret").unwrap();
    let fs = FsFiles::new(dir.join("root")).unwrap();
    (dir, fs)
}

/// Every entry under `dir` with its contents (files) or `/` (directories), links not followed.
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let name = entry.path().display().to_string();
        if kind.is_dir() {
            out.push((name, "/".into()));
            out.extend(snapshot(&entry.path()));
        } else if kind.is_file() {
            out.push((name, std::fs::read_to_string(entry.path()).unwrap()));
        } else {
            out.push((name, "link".into()));
        }
    }
    out.sort();
    out
}

fn invalid<T: std::fmt::Debug>(r: Result<T, clawless_platform::PortError>, what: &str) {
    assert_eq!(r.unwrap_err().kind, ErrorKind::Invalid, "{what}");
}

/// Every operation through `link` (a link in the root) is refused.
fn refused_through(fs: &FsFiles, link: &str, inner: &str) {
    let through = format!("{link}/{inner}");
    invalid(block_on(fs.read(&through)), "read");
    invalid(block_on(fs.write(&through, b"pwned")), "write");
    invalid(
        block_on(fs.write(&format!("{link}/new/deep.txt"), b"pwned")),
        "write deep",
    );
    invalid(block_on(fs.append(&through, b"pwned")), "append");
    invalid(block_on(fs.delete(&through)), "delete");
    invalid(block_on(fs.list(link)), "list");
    invalid(block_on(fs.read(link)), "read the link itself");
    invalid(block_on(fs.write(link, b"over")), "replace the link");
    invalid(block_on(fs.delete(link)), "delete the link");
}

#[test]
fn a_link_to_a_sibling_directory_is_refused() {
    let (dir, fs) = setup("sibling");
    symlink(dir.join("outside"), dir.join("root/link")).unwrap();
    let before = snapshot(&dir);
    refused_through(&fs, "link", "secret.txt");
    assert_eq!(snapshot(&dir), before, "nothing changed anywhere");
    assert!(
        block_on(fs.list("")).unwrap().is_empty(),
        "a listing skips links"
    );
}

#[test]
fn a_link_to_etc_is_refused_and_etc_is_untouched() {
    let (dir, fs) = setup("etc");
    symlink("/etc", dir.join("root/etc")).unwrap();
    invalid(block_on(fs.read("etc/passwd")), "read /etc/passwd");
    // Tests may run as root: what a broken guard would write is a name nothing uses.
    let hostname = std::fs::read("/etc/hostname").ok();
    refused_through(&fs, "etc", "clawless-must-not-exist");
    assert!(!Path::new("/etc/clawless-must-not-exist").exists());
    assert!(!Path::new("/etc/new").exists());
    assert_eq!(std::fs::read("/etc/hostname").ok(), hostname);
    assert!(block_on(fs.list("")).unwrap().is_empty());
}

#[test]
fn a_link_deeper_down_is_refused() {
    let (dir, fs) = setup("deep");
    block_on(fs.write("a/b/keep.txt", b"keep")).unwrap();
    symlink(dir.join("outside"), dir.join("root/a/b/out")).unwrap();
    let before = snapshot(&dir);
    refused_through(&fs, "a/b/out", "secret.txt");
    assert_eq!(snapshot(&dir), before);
    assert_eq!(block_on(fs.list("a")).unwrap(), ["a/b/keep.txt"]);
}

#[test]
fn a_link_to_a_file_outside_is_refused() {
    let (dir, fs) = setup("file");
    symlink(dir.join("outside/secret.txt"), dir.join("root/notes.md")).unwrap();
    let before = snapshot(&dir);
    invalid(block_on(fs.read("notes.md")), "read");
    invalid(block_on(fs.write("notes.md", b"pwned")), "write");
    invalid(block_on(fs.append("notes.md", b"pwned")), "append");
    invalid(block_on(fs.delete("notes.md")), "delete");
    assert_eq!(snapshot(&dir), before);
    assert!(block_on(fs.list("")).unwrap().is_empty());
}

#[test]
fn a_hard_link_to_a_file_outside_is_refused() {
    let (dir, fs) = setup("hardlink");
    std::fs::hard_link(dir.join("outside/secret.txt"), dir.join("root/notes.md")).unwrap();
    let before = snapshot(&dir);
    invalid(block_on(fs.read("notes.md")), "read");
    invalid(block_on(fs.append("notes.md", b"pwned")), "append");
    invalid(block_on(fs.write("notes.md", b"pwned")), "write");
    assert_eq!(snapshot(&dir), before);
    assert_eq!(
        std::fs::read(dir.join("outside/secret.txt")).unwrap(),
        std::fs::read(dir.join("root/notes.md")).unwrap(),
        "the file outside is untouched"
    );
}

#[test]
fn a_link_inside_the_root_is_refused_too() {
    let (dir, fs) = setup("inside");
    block_on(fs.write("real/a.txt", b"a")).unwrap();
    symlink(dir.join("root/real"), dir.join("root/alias")).unwrap();
    refused_through(&fs, "alias", "a.txt");
    assert_eq!(block_on(fs.list("")).unwrap(), ["real/a.txt"]);
}

#[test]
fn directories_and_files_keep_their_kinds() {
    let (_dir, fs) = setup("kinds");
    block_on(fs.write("d/a.txt", b"a")).unwrap();
    assert_eq!(
        block_on(fs.read("d")).unwrap_err().kind,
        ErrorKind::NotFound
    );
    assert_eq!(
        block_on(fs.read("d/a.txt/x")).unwrap_err().kind,
        ErrorKind::NotFound
    );
    assert!(block_on(fs.list("d/a.txt")).unwrap().is_empty());
    block_on(fs.delete("d")).unwrap();
    assert_eq!(block_on(fs.read("d/a.txt")).unwrap(), b"a");
}
