//! The helper's command line: what the bot asks ([`args`], or [`request`] for a helper made
//! ahead, [`SPARE`]) and what the helper reads back ([`parse`]), one written for the other.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Helper, Limits};

/// The argument of a helper made ahead of its command (`__sandbox --spare`): it waits, in its
/// namespaces, for its request on standard input ([`request`]), read to its end.
pub const SPARE: &str = "--spare";

/// The most a request may hold, bytes (the kernel takes no argument over 128 KiB anyway).
pub const MAX_REQUEST: usize = 4 << 20;

/// The helper's arguments: `__sandbox --rw DIR [--protect P]… [--require] [--cgroup G]
/// [--view] [--no-network] [--deadline MS] --cpu N -- program args…`; `view`: the fence made
/// a mount namespace the helper may seal ([`view`]).
pub fn args(
    helper: &Helper,
    limits: &Limits,
    view: bool,
    program: &str,
    args: &[String],
) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["__sandbox".into()];
    out.extend(options(helper, limits, view));
    out.push("--".into());
    out.push(program.into());
    out.extend(args.iter().map(OsString::from));
    out
}

/// What a spare helper is sent: the options of [`args`], `--cd DIR` (where the program runs)
/// and `--env K=V` for each variable the program gets beyond the helper's own, then `--` and
/// the program; each argument ended by a NUL. Refused when an argument holds a NUL (no
/// command line can) or the whole is over [`MAX_REQUEST`].
pub fn request(
    helper: &Helper,
    limits: &Limits,
    view: bool,
    dir: &Path,
    env: &[(OsString, OsString)],
    program: &str,
    args: &[String],
) -> Result<Vec<u8>, String> {
    let mut all = options(helper, limits, view);
    all.push("--cd".into());
    all.push(dir.into());
    for (k, v) in env {
        all.push("--env".into());
        let mut pair = k.clone();
        pair.push("=");
        pair.push(v);
        all.push(pair);
    }
    all.push("--".into());
    all.push(program.into());
    all.extend(args.iter().map(OsString::from));
    let mut out = Vec::new();
    for a in &all {
        if a.as_bytes().contains(&0) {
            return Err("the command line holds a NUL byte, which no program can be given".into());
        }
        out.extend_from_slice(a.as_bytes());
        out.push(0);
    }
    if out.len() > MAX_REQUEST {
        return Err(format!(
            "the command line is {} bytes, over the {MAX_REQUEST} a command may have",
            out.len()
        ));
    }
    Ok(out)
}

/// A request as the spare read it (see [`request`]): its arguments, for [`parse`]; none when
/// it is empty (the bot went away before asking).
pub(super) fn split(request: &[u8]) -> Vec<OsString> {
    let body = request.strip_suffix(&[0]).unwrap_or(request);
    if body.is_empty() {
        return Vec::new();
    }
    body.split(|&b| b == 0)
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect()
}

/// The options before `--`, for both forms.
fn options(helper: &Helper, limits: &Limits, view: bool) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["--rw".into(), limits.rw.clone().into()];
    for p in &limits.also {
        out.push("--rw".into());
        out.push(p.clone().into());
    }
    for p in &helper.protected {
        out.push("--protect".into());
        out.push(p.clone().into());
    }
    if limits.require {
        out.push("--require".into());
    }
    if let Some(group) = &limits.cgroup {
        out.push("--cgroup".into());
        out.push(group.clone().into());
    }
    if view {
        out.push("--view".into());
    }
    if !limits.network {
        out.push("--no-network".into());
    }
    if let Some(deadline) = limits.deadline {
        out.push("--deadline".into());
        out.push(deadline.as_millis().to_string().into());
    }
    out.push("--cpu".into());
    out.push(limits.cpu_secs.to_string().into());
    out
}

/// What the helper was asked, read back from its arguments (after `__sandbox`).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Asked {
    pub(super) rw: Vec<PathBuf>,
    pub(super) protect: Vec<PathBuf>,
    pub(super) require: bool,
    pub(super) cpu: u64,
    pub(super) cgroup: Option<PathBuf>,
    pub(super) view: bool,
    pub(super) no_network: bool,
    pub(super) deadline: Option<Duration>,
    /// Where the program runs (a spare's request; else where the helper was started).
    pub(super) dir: Option<PathBuf>,
    /// Variables the program gets beyond the helper's own (a spare's request).
    pub(super) env: Vec<(OsString, OsString)>,
    /// Read by a spare from its standard input (the program gets none).
    pub(super) spare: bool,
    pub(super) program: Vec<OsString>,
}

pub(super) fn parse(args: &[OsString]) -> Result<Asked, String> {
    let mut asked = Asked::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let number = |v: OsString, name: &str| {
            v.to_str()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(format!("{name} needs a number"))
        };
        match a.to_str() {
            Some("--rw") => asked.rw.push(value("--rw")?.into()),
            Some("--protect") => asked.protect.push(value("--protect")?.into()),
            Some("--require") => asked.require = true,
            Some("--cgroup") => asked.cgroup = Some(value("--cgroup")?.into()),
            Some("--view") => asked.view = true,
            Some("--no-network") => asked.no_network = true,
            Some("--deadline") => {
                let ms = number(value("--deadline")?, "--deadline")?;
                asked.deadline = Some(Duration::from_millis(ms));
            }
            Some("--cpu") => asked.cpu = number(value("--cpu")?, "--cpu")?,
            Some("--cd") => asked.dir = Some(value("--cd")?.into()),
            Some("--env") => {
                let pair = value("--env")?.into_vec();
                let at = pair
                    .iter()
                    .position(|&b| b == b'=')
                    .ok_or("--env needs NAME=VALUE")?;
                asked.env.push((
                    OsString::from_vec(pair[..at].to_vec()),
                    OsString::from_vec(pair[at + 1..].to_vec()),
                ));
            }
            Some("--") => {
                asked.program = it.cloned().collect();
                break;
            }
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    if asked.program.is_empty() {
        return Err("no program after --".into());
    }
    Ok(asked)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn arguments_read_back_as_written() {
        let helper = Helper {
            exe: "/x/clawless".into(),
            protected: vec!["/etc/clawless".into()],
        };
        let limits = Limits {
            rw: "/data/files/workspace/a".into(),
            also: vec!["/srv/shared".into()],
            network: false,
            cpu_secs: 31,
            require: true,
            cgroup: Some("/sys/fs/cgroup/pids/clawless-1-0".into()),
            deadline: Some(Duration::from_millis(30_500)),
        };
        let written = args(
            &helper,
            &limits,
            true,
            "/bin/sh",
            &["-c".into(), "echo --rw".into()],
        );
        assert_eq!(written[0], "__sandbox");
        let asked = parse(&written[1..]).unwrap();
        assert_eq!(
            asked,
            Asked {
                rw: vec![limits.rw.clone(), "/srv/shared".into()],
                protect: vec!["/etc/clawless".into()],
                require: true,
                cpu: 31,
                cgroup: limits.cgroup.clone(),
                view: true,
                no_network: true,
                deadline: limits.deadline,
                program: vec!["/bin/sh".into(), "-c".into(), "echo --rw".into()],
                ..Asked::default()
            }
        );
        // The same sent to a spare, with where it runs and its variables.
        let sent = request(
            &helper,
            &limits,
            true,
            Path::new("/data/files/workspace/a"),
            &[("HOME".into(), "/w".into()), ("X".into(), "a=b\nc".into())],
            "/bin/sh",
            &["-c".into(), "echo --cd; printf '\\0'".into()],
        )
        .unwrap();
        let mut spared = parse(&split(&sent)).unwrap();
        assert_eq!(spared.dir, Some("/data/files/workspace/a".into()));
        assert_eq!(
            spared.env,
            [("HOME".into(), "/w".into()), ("X".into(), "a=b\nc".into())]
        );
        assert_eq!(spared.program[2], "echo --cd; printf '\\0'");
        (spared.dir, spared.env, spared.program) = (None, Vec::new(), asked.program.clone());
        assert_eq!(spared, asked);
        assert!(split(b"").is_empty(), "the bot went away before asking");
        let nul = request(
            &helper,
            &limits,
            true,
            Path::new("/w"),
            &[],
            "/bin/sh",
            &["a\0b".into()],
        );
        assert!(nul.unwrap_err().contains("NUL"));
        let huge = "x".repeat(MAX_REQUEST);
        let over = request(
            &helper,
            &limits,
            true,
            Path::new("/w"),
            &[],
            "/bin/sh",
            &[huge],
        );
        assert!(over.unwrap_err().contains("over the"));
        assert!(parse(&[
            "--env".into(),
            "NOEQUALS".into(),
            "--".into(),
            "true".into()
        ])
        .is_err());
        assert!(parse(&["--rw".into()]).is_err());
        assert!(parse(&["--rw".into(), "/a".into()]).is_err(), "no program");
        assert!(parse(&["--bogus".into(), "--".into(), "true".into()]).is_err());
        let no_number = [
            "--deadline".into(),
            "soon".into(),
            "--".into(),
            "true".into(),
        ];
        assert!(parse(&no_number).is_err());
    }
}
