//! The helper's command line: what the bot asks ([`args`]) and what the helper reads back
//! ([`parse`]), one written for the other.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::{Helper, Limits};

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
    let mut out: Vec<OsString> = vec!["__sandbox".into(), "--rw".into(), limits.rw.clone().into()];
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
    out.push("--".into());
    out.push(program.into());
    out.extend(args.iter().map(OsString::from));
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
            }
        );
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
