//! The sandbox of `exec`, through the real binary as its helper: a command writes its own
//! workspace and reads the system, and cannot read the data directory, another workspace or
//! the bot's environment, nor reach a socket on loopback unless its agent allows the network.
//! Where this machine lacks a part (no Landlock, no namespaces), that part is said and not
//! checked, unless `CLAWLESS_REQUIRE_SANDBOX` is set (CI sets it: its machine has them all).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use clawless_native::exec::ShellExec;
use clawless_native::{fence, sandbox};
use clawless_platform::{Exec, ExecRequest};

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("clawless-sandbox-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

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

fn required() -> bool {
    std::env::var_os("CLAWLESS_REQUIRE_SANDBOX").is_some()
}

/// Whether a connection reached `listener` (non-blocking).
fn reached(listener: &std::net::TcpListener) -> bool {
    listener.set_nonblocking(true).unwrap();
    listener.accept().is_ok()
}

#[tokio::test]
async fn a_command_reaches_only_its_workspace_and_no_network_unless_allowed() {
    let root = dir();
    let data = root.join("data");
    let files = data.join("files");
    std::fs::create_dir_all(files.join("workspace/a/main/user-2")).unwrap();
    std::fs::write(data.join("clawless.db"), "the database").unwrap();
    std::fs::write(
        files.join("workspace/a/main/user-2/note.txt"),
        "someone else's note",
    )
    .unwrap();
    sandbox::set_exe(PathBuf::from(env!("CARGO_BIN_EXE_clawless")));
    sandbox::protect([data.clone()]);
    // Read by a command that reads its parent's environment, were it visible.
    std::env::set_var("CLAWLESS_SANDBOX_CANARY", "bot-environment-canary");
    let exec = ShellExec::new(&files);

    let landlock = sandbox::enforced();
    let namespaces = matches!(fence::fence(), fence::Fence::Namespace { .. });
    if required() {
        assert!(landlock, "this machine must enforce Landlock");
        assert!(namespaces, "this machine must allow namespaces");
    }
    if !landlock {
        eprintln!("NOTE: this kernel does not enforce Landlock: the file checks are skipped");
    }

    // Its own workspace: written and read; the system: read and run.
    let (status, out) = run(
        &exec,
        "echo kept > mine.txt && cat mine.txt && ls /usr/bin >/dev/null && echo ok",
        false,
    )
    .await;
    assert_eq!(status, Some(0), "{out}");
    assert!(out.contains("kept") && out.contains("ok"), "{out}");
    let mine = files.join("workspace/a/main/user-1/mine.txt");
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "kept\n");

    // Its limits are set.
    let (_, limits) = run(&exec, "cat /proc/self/limits", false).await;
    let line = |name: &str| {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {limits}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(line("Max cpu time").contains(" 21 21 "), "{limits}");
    assert!(
        line("Max file size").contains(&format!(" {} ", sandbox::FILE_SIZE)),
        "{limits}"
    );
    assert!(
        line("Max data size").contains(&format!(" {} ", sandbox::MEMORY)),
        "{limits}"
    );

    // Its processes are capped, in a cgroup of its own that is gone after it.
    let capped = sandbox::PidsGroup::available();
    if required() {
        assert!(capped, "this machine must allow a pids cgroup");
    }
    if capped {
        // 400 sleeps at once, seen from outside through the group's own counts.
        let mine = format!("clawless-{}-", std::process::id());
        let groups = || -> Vec<PathBuf> {
            ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"]
                .iter()
                .filter_map(|b| std::fs::read_dir(b).ok())
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
                .map(|e| e.path())
                .collect()
        };
        let read = |p: PathBuf| -> u64 {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0)
        };
        let watch = async {
            let (mut max, mut peak) = (0, 0);
            for _ in 0..100 {
                for g in groups() {
                    max = max.max(read(g.join("pids.max")));
                    peak = peak.max(read(g.join("pids.current")));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (max, peak)
        };
        let command = run(
            &exec,
            "grep -c clawless- /proc/self/cgroup; seq 400 | xargs -P 400 -I{} sleep 1 2>/dev/null; echo done",
            false,
        );
        let ((_, out), (max, peak)) = tokio::join!(command, watch);
        assert!(out.starts_with("1\n"), "in a group of its own: {out}");
        assert_eq!(max, sandbox::PROCESSES, "its pids.max");
        assert!(
            peak > 100 && peak <= sandbox::PROCESSES,
            "{peak} processes at once"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(groups().is_empty(), "groups left: {:?}", groups());

        // A local program (an MCP server's `command:`) too, for as long as it runs.
        let argv = ["bash".to_owned(), "-c".to_owned(), "sleep 30".to_owned()];
        let reach = clawless_platform::Reach::default();
        let program = exec.start(&argv, &[], &reach).await.unwrap();
        let max = groups().into_iter().map(|g| read(g.join("pids.max"))).max();
        assert_eq!(max, Some(sandbox::PROCESSES), "a program's pids.max");
        drop(program);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(groups().is_empty(), "groups left: {:?}", groups());
    } else {
        eprintln!("NOTE: no pids cgroup can be made here: the process cap is not checked");
    }

    if landlock {
        for path in [
            data.join("clawless.db"),
            files.join("workspace/a/main/user-2/note.txt"),
        ] {
            let (status, out) = run(&exec, &format!("cat {}", path.display()), false).await;
            assert_ne!(status, Some(0), "{} was read: {out}", path.display());
            assert!(
                !out.contains("the database") && !out.contains("someone else"),
                "{out}"
            );
        }
        let (status, out) = run(&exec, "ls /tmp", false).await;
        assert_ne!(status, Some(0), "/tmp is not its own: {out}");
        let (status, out) = run(
            &exec,
            &format!("echo x > {}/planted", data.display()),
            false,
        )
        .await;
        assert_ne!(status, Some(0), "{out}");
        assert!(!data.join("planted").exists());
    }

    if namespaces {
        // The bot's process and environment are out of sight.
        let me = std::process::id();
        let (_, out) = run(
            &exec,
            &format!("cat /proc/{me}/environ; cat /proc/*/environ 2>/dev/null; true"),
            true,
        )
        .await;
        assert!(!out.contains("bot-environment-canary"), "{out}");

        // No network unless allowed: a socket on loopback sees nothing; allowed, it does.
        let canary = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = canary.local_addr().unwrap().port();
        let connect = format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}' 2>&1; echo done");
        let (_, out) = run(&exec, &connect, false).await;
        assert!(
            !reached(&canary),
            "reached loopback without the network: {out}"
        );
        let (_, out) = run(&exec, &connect, true).await;
        assert!(
            reached(&canary),
            "the network allowed, the socket is reached: {out}"
        );

        // A local program (an MCP server's `command:`) likewise, by its `network:`, and it
        // reaches a directory of its own only when its `paths:` name it.
        let shared = root.join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        let mark = shared.join("from-program");
        let line = format!(
            "echo hello > /dev/tcp/127.0.0.1/{port}; echo x > {}; sleep 5",
            mark.display()
        );
        for (network, paths) in [(false, vec![]), (true, vec![shared.display().to_string()])] {
            let _ = std::fs::remove_file(&mark);
            let argv = ["bash".to_owned(), "-c".to_owned(), line.clone()];
            let reach = clawless_platform::Reach {
                network,
                paths: paths.clone(),
            };
            let program = exec.start(&argv, &[], &reach).await.unwrap();
            let mut got = false;
            for _ in 0..50 {
                if reached(&canary) {
                    got = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            drop(program);
            assert_eq!(got, network, "a program with network: {network}");
            if landlock {
                assert_eq!(mark.exists(), !paths.is_empty(), "paths: {paths:?}");
            }
        }
    } else {
        eprintln!("NOTE: no namespaces here: the process and network checks are skipped");
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A directory of its own for one test, its workspace, and an exec rooted there; the helper
/// named.
fn setup(test: &str) -> (PathBuf, PathBuf, ShellExec) {
    let root = dir().join(test);
    let files = root.join("files");
    let workspace = files.join("workspace/a/main/user-1");
    std::fs::create_dir_all(&workspace).unwrap();
    sandbox::set_exe(PathBuf::from(env!("CARGO_BIN_EXE_clawless")));
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
    assert!(until(|| running(&tag) == 0).await, "the deadline left processes");
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
        format!("python3 -c \"import os; os.setxattr('{f}', 'user.x', b'1')\""),
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
    let dmesg_restricted = std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict")
        .is_ok_and(|v| v.trim() == "1");
    let mut refused = 0;
    for attempt in &attempts {
        let (status, out) = run(&exec, attempt, false).await;
        let may_pass = (attempt.contains("shadow") && !std::path::Path::new("/etc/shadow").exists())
            || (attempt == "dmesg" && !dmesg_restricted);
        assert!(status != Some(0) || may_pass, "{attempt} succeeded: {out}");
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
    let (_, caps) = run(&exec, "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status", false).await;
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
    eprintln!("{refused} of {} changes outside the workspace or privileged calls refused", attempts.len());
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
        workspace.join("probe.sh"),
        "( : </dev/tty ) 2>/dev/null && echo OPENED-TTY\n\
         python3 -c 'import fcntl, termios; fcntl.ioctl(1, termios.TIOCSTI, b\"x\")' 2>/dev/null && echo INJECTED\n\
         echo probe-done\n",
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
    assert!(!said.contains("INJECTED"), "typed into the terminal: {said}");
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
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); s.send(b'hi')\"",
        path.display()
    );
    let (status, out) = run(&exec, &connect, false).await;
    assert_ne!(status, Some(0), "{out}");
    assert!(listener.accept().is_err(), "reached without the network: {out}");
    let (status, out) = run(&exec, &connect, true).await;
    assert_eq!(status, Some(0), "with the network: {out}");
    assert!(listener.accept().is_ok(), "the network allowed, the socket is reached");
    let _ = std::fs::remove_dir_all(&root);
}
