//! The sandbox's seals, through the real binary as its helper: a command ends at its deadline
//! and when the bot is gone; it changes nothing outside its workspace and holds no privilege,
//! even as root; it has no terminal to type into; and without the network it reaches no Unix
//! socket by its path. Where this machine lacks namespaces, the checks are said and skipped,
//! unless `CLAWLESS_REQUIRE_SANDBOX` is set (CI sets it: its machine has them all).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use clawless_native::exec::ShellExec;
use clawless_native::{fence, sandbox};
use clawless_platform::{Exec, ExecRequest};

fn dir() -> PathBuf {
    clawless_testkit::scratch::dir("sealed")
}

/// The system's Python (a virtualenv's, first on a CI's PATH, lives where Landlock lets no
/// command read).
const PYTHON: &str = "/usr/bin/python3";

fn required() -> bool {
    std::env::var_os("CLAWLESS_REQUIRE_SANDBOX").is_some()
}

/// Runs `command` in the workspace; its status and its output (stdout, then stderr).
async fn run(exec: &ShellExec, command: &str, network: bool) -> (Option<i32>, String) {
    let out = exec
        .run(ExecRequest {
            command: command.into(),
            workdir: "workspace/a/main/user-1".into(),
            timeout: Duration::from_secs(20),
            max_output: 64 * 1024,
            network,
            require_sandbox: false,
        })
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, text)
}

/// A directory of its own for one test, its workspace, and an exec rooted there; the helper
/// named.
fn setup(test: &str) -> (PathBuf, PathBuf, ShellExec) {
    let root = dir().join(test);
    let files = root.join("files");
    let workspace = files.join("workspace/a/main/user-1");
    std::fs::create_dir_all(&workspace).unwrap();
    // `.ci/run` runs this file again as an unprivileged user, with a copy of the binary that
    // user may run.
    let exe = std::env::var_os("CLAWLESS_TEST_HELPER").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_clawless")),
        PathBuf::from,
    );
    sandbox::set_exe(exe);
    let exec = ShellExec::new(&files);
    (root, workspace, exec)
}

/// Whether this machine gives commands the namespaces (and, with `CLAWLESS_REQUIRE_SANDBOX`,
/// fails the test when it does not).
fn namespaces() -> bool {
    let namespaces = matches!(fence::fence(), fence::Fence::Namespace { .. });
    if required() {
        assert!(namespaces, "this machine must allow namespaces");
    }
    if !namespaces {
        eprintln!("NOTE: no namespaces here: the check is skipped");
    }
    namespaces
}

/// How many processes run with `tag` in their command line.
fn running(tag: &str) -> usize {
    let out = std::process::Command::new("pgrep")
        .args(["-f", tag])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// Waits (up to a minute: a loaded machine) until `done` holds; says whether it did.
async fn until(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..1200 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn limits(workspace: &std::path::Path, deadline: Option<Duration>) -> sandbox::Limits {
    sandbox::Limits {
        rw: workspace.to_path_buf(),
        also: Vec::new(),
        network: false,
        cpu_secs: 0,
        require: false,
        cgroup: None,
        deadline,
    }
}

#[tokio::test]
async fn a_command_ends_when_the_bot_is_gone_and_at_its_deadline_whoever_keeps_time() {
    let (root, workspace, _) = setup("gone");
    if !namespaces() {
        return;
    }
    // The bot is gone (`kill -9`): nobody reads the command's output, nobody kills it.
    let tag = format!("{}", 20_000 + std::process::id() % 20_000);
    let script = format!("setsid sleep {tag}1 & ( ( sleep {tag}2 & ) & ); sleep {tag}3");
    let mut cmd = fence::command(
        "/bin/sh",
        &["-c".into(), script],
        &[],
        &limits(&workspace, None),
    );
    cmd.current_dir(&workspace)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    assert!(
        until(|| (1..=3).all(|n| running(&format!("sleep {tag}{n}")) > 0)).await,
        "the command's three sleeps did not start"
    );
    drop(child.stdout.take());
    // Dropped without a kill: as a crashed bot leaves it.
    std::mem::forget(child);
    assert!(
        until(|| running(&tag) == 0).await,
        "still running after the bot is gone: {} processes",
        running(&tag)
    );

    // The deadline, kept by the sandbox itself (this process does not time it).
    let tag = format!("{}", 40_000 + std::process::id() % 20_000);
    let mut cmd = fence::command(
        "/bin/sh",
        &["-c".into(), format!("setsid sleep {tag} & sleep {tag}")],
        &[],
        &limits(&workspace, Some(Duration::from_millis(300))),
    );
    cmd.current_dir(&workspace)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let out = cmd.output().await.unwrap();
    assert_eq!(out.status.code(), Some(sandbox::DEADLINE.into()), "{out:?}");
    assert!(
        until(|| running(&tag) == 0).await,
        "the deadline left processes"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn a_command_changes_no_file_outside_its_workspace_and_holds_no_privilege() {
    let (root, workspace, exec) = setup("metadata");
    if !namespaces() {
        return;
    }
    let outside = root.join("outside.txt");
    std::fs::write(&outside, "the bot's file").unwrap();
    let meta = |p: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p)
            .map(|m| (m.mode(), m.uid(), m.gid(), m.mtime(), m.atime(), m.len()))
            .ok()
    };
    let before = meta(&outside);
    let listing = || {
        let mut names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let listed = listing();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let f = outside.display().to_string();
    let d = root.display();
    let attempts = [
        format!("chmod 666 {f}"),
        format!("chmod 4755 {f}"),
        format!("chown 1234 {f}"),
        format!("chgrp 1234 {f}"),
        format!("touch -d 2001-01-01 {f}"),
        format!("touch -a {f}"),
        format!("{PYTHON} -c \"import os; os.setxattr('{f}', 'user.x', b'1')\""),
        format!("truncate -s 0 {f}"),
        format!("mv {f} {f}.moved"),
        format!("ln {f} {d}/hard"),
        format!("ln -s {f} {d}/soft"),
        format!("rm -f {f}"),
        format!("mkdir {d}/planted"),
        "mknod ./device c 1 3".to_owned(),
        "mkfifo /usr/planted-fifo".to_owned(),
        "hostname clawless-was-here".to_owned(),
        "cat /etc/shadow".to_owned(),
        "cat /etc/gshadow".to_owned(),
        "dmesg".to_owned(),
    ];
    let dmesg_restricted =
        std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict").is_ok_and(|v| v.trim() == "1");
    let mut refused = 0;
    for attempt in &attempts {
        let (status, out) = run(&exec, attempt, false).await;
        if attempt.contains("shadow") {
            // Hidden (read as empty where the mount view covers it, else refused): never
            // the accounts' hashes.
            assert!(!out.contains("root:"), "{attempt} read: {out}");
        } else {
            let may_pass = attempt == "dmesg" && !dmesg_restricted;
            assert!(status != Some(0) || may_pass, "{attempt} succeeded: {out}");
            // The interpreter ran and the kernel said no (not: it did not start).
            if attempt.starts_with(PYTHON) {
                assert!(out.contains("Errno"), "{attempt}: {out}");
            }
        }
        refused += 1;
    }
    assert_eq!(meta(&outside), before, "the file outside changed");
    assert_eq!(listing(), listed, "the directory outside changed");
    assert!(!workspace.join("device").exists());
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap(),
        host,
        "the host name changed"
    );
    let (_, caps) = run(
        &exec,
        "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status",
        false,
    )
    .await;
    assert_eq!(caps.lines().count(), 4, "{caps}");
    assert!(
        caps.lines().all(|l| l.ends_with("0000000000000000")),
        "capabilities held: {caps}"
    );
    // Its own workspace is still its own.
    let (status, out) = run(
        &exec,
        "echo exit 0 > mine && chmod 700 mine && touch -d 2001-01-01 mine && mkdir -p a/b && ./mine; echo $?",
        false,
    )
    .await;
    assert_eq!((status, out.trim()), (Some(0), "0"), "{out}");
    eprintln!(
        "{refused} of {} changes outside the workspace or privileged calls refused",
        attempts.len()
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn a_command_has_no_terminal_to_type_into() {
    let (root, workspace, _) = setup("terminal");
    if !namespaces() {
        return;
    }
    // Started as from an operator's shell: `script` gives the fence a terminal of its own,
    // controlling it, as the bot's would be.
    std::fs::write(
        workspace.join("tiocsti.py"),
        "import fcntl, termios\n\
         try:\n    fcntl.ioctl(1, termios.TIOCSTI, b'x')\n    print('INJECTED')\n\
         except OSError as e:\n    print('TIOCSTI-REFUSED', e.errno)\n",
    )
    .unwrap();
    std::fs::write(
        workspace.join("probe.sh"),
        format!("( : </dev/tty ) 2>/dev/null && echo OPENED-TTY\n{PYTHON} tiocsti.py\necho probe-done\n"),
    )
    .unwrap();
    let argv = fence::argv(
        "/bin/sh",
        &["probe.sh".into()],
        &limits(&workspace, Some(Duration::from_secs(60))),
    );
    let line: Vec<String> = argv
        .iter()
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', "'\\''")))
        .collect();
    let out = tokio::process::Command::new("script")
        .args(["-qec", &line.join(" "), "/dev/null"])
        .current_dir(&workspace)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("util-linux `script` runs the fence in a terminal");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("probe-done"), "{said}");
    assert!(!said.contains("OPENED-TTY"), "/dev/tty opened: {said}");
    assert!(
        !said.contains("INJECTED"),
        "typed into the terminal: {said}"
    );
    assert!(
        said.contains("TIOCSTI-REFUSED"),
        "the probe did not run: {said}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn without_the_network_no_unix_socket_is_reached_by_its_path() {
    let (root, _, exec) = setup("unix");
    if !namespaces() {
        return;
    }
    let path = root.join("service.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let connect = format!(
        "{PYTHON} -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); s.send(b'hi')\"",
        path.display()
    );
    let (status, out) = run(&exec, &connect, false).await;
    assert_ne!(status, Some(0), "{out}");
    assert!(
        out.contains("Errno 13"),
        "refused by the filter, not otherwise: {out}"
    );
    assert!(
        listener.accept().is_err(),
        "reached without the network: {out}"
    );
    let (status, out) = run(&exec, &connect, true).await;
    assert_eq!(status, Some(0), "with the network: {out}");
    assert!(
        listener.accept().is_ok(),
        "the network allowed, the socket is reached"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn a_program_is_refused_paths_the_sandbox_cannot_give_it() {
    let (root, _, exec) = setup("paths");
    let data = root.join("data");
    std::fs::create_dir_all(data.join("files")).unwrap();
    sandbox::protect([data.clone()]);
    let argv = ["true".to_owned()];
    let file = root.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let cases = [
        (data.clone(), "would open the bot's own"),
        (data.join("files"), "would open the bot's own"),
        (root.clone(), "would open the bot's own"),
        (root.join("missing"), "cannot be used"),
        (file, "is not a directory"),
    ];
    for (path, why) in &cases {
        let reach = clawless_platform::Reach {
            network: false,
            paths: vec![path.display().to_string()],
        };
        let e = exec.start(&argv, &[], &reach).await.err().expect("refused");
        assert_eq!(e.kind, clawless_platform::ErrorKind::Invalid, "{e}");
        assert!(
            e.message.contains(why) && e.message.contains(&path.display().to_string()),
            "{e}"
        );
    }
    eprintln!(
        "{} of {} paths the sandbox cannot honour refused",
        cases.len(),
        cases.len()
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn doctor_names_each_missing_part_and_here_none_is() {
    setup("doctor");
    let lacks = fence::missing(false);
    let check = fence::check();
    eprintln!("sandbox: {:?}: {}", check.status, check.detail);
    if required() {
        // Only root can make a pids cgroup here (an unprivileged user gets no delegation).
        let expected: &[&str] = match is_root() {
            true => &[],
            false => &["a cap on its processes (a pids cgroup)"],
        };
        assert_eq!(lacks, expected, "this machine must hold the whole sandbox");
    }
    assert_eq!(
        lacks.is_empty(),
        check.status == clawless_core::doctor::Status::Ok
    );
    for part in &lacks {
        assert!(
            check.detail.contains(part.as_str()),
            "{part} not named: {}",
            check.detail
        );
    }
}

#[test]
fn a_killed_bots_cgroups_and_what_runs_in_them_are_swept_at_the_next_start() {
    if !sandbox::PidsGroup::available() {
        assert!(
            !required() || !is_root(),
            "root here must be able to make a pids cgroup"
        );
        eprintln!("NOTE: no pids cgroup can be made here: the sweep is not checked");
        return;
    }
    // A bot's pid that no process has any more.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let base = ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"]
        .into_iter()
        .map(std::path::Path::new)
        .find(|b| b.join("cgroup.procs").exists())
        .unwrap();
    let group = base.join(format!("clawless-{dead}-0"));
    std::fs::create_dir(&group).unwrap();
    // A command the dead bot left running in its group.
    let mut left = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    std::fs::write(group.join("cgroup.procs"), left.id().to_string()).unwrap();
    // A live bot's group (this process's) is left alone.
    let mine = sandbox::PidsGroup::new().unwrap();
    assert!(sandbox::sweep() >= 1);
    assert!(!group.exists(), "the dead bot's group is still there");
    let status = left.wait().unwrap();
    assert!(!status.success(), "what ran in it was ended: {status:?}");
    assert!(mine.path().exists(), "a live bot's group was swept");
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}
