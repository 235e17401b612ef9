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
    clawless_testkit::scratch::dir("sandbox")
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
        // Less the group of the sandbox made ahead for the next command.
        let groups = || -> Vec<PathBuf> {
            let spare = exec.spare().and_then(|(_, group)| group);
            ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"]
                .iter()
                .filter_map(|b| std::fs::read_dir(b).ok())
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
                .map(|e| e.path())
                .filter(|p| Some(p) != spare.as_ref())
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

/// Waits (up to a minute: a loaded machine) for the sandbox made ahead; its process id.
async fn spare(exec: &ShellExec) -> u32 {
    for _ in 0..1200 {
        if let Some((id, _)) = exec.spare() {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no sandbox was made ahead");
}

#[tokio::test]
async fn the_next_command_runs_in_a_sandbox_made_ahead_and_none_outlives_the_bot() {
    let root = dir().join("spare");
    let files = root.join("files");
    let workspace = files.join("workspace/a/main/user-1");
    std::fs::create_dir_all(&workspace).unwrap();
    sandbox::set_exe(PathBuf::from(env!("CARGO_BIN_EXE_clawless")));
    let exec = ShellExec::new(&files);
    let namespaces = matches!(fence::fence(), fence::Fence::Namespace { .. });
    let ws = std::fs::canonicalize(&workspace).unwrap();
    let probe =
        "echo \"$HOME|$TMPDIR|$(pwd -P)\"; readlink /proc/self/fd/0; readlink /proc/self/ns/net";

    // The first is made for it; the next one beside it.
    let (status, out) = run(&exec, probe, false).await;
    assert_eq!(status, Some(0), "{out}");
    let mut lines = out.lines();
    let ws = ws.display();
    assert_eq!(
        lines.next(),
        Some(format!("{ws}|{ws}|{ws}").as_str()),
        "{out}"
    );
    assert_eq!(lines.next(), Some("/dev/null"), "no input: {out}");
    let first_net = lines.next().unwrap_or_default().to_owned();

    // The next runs in the namespaces made ahead (the spare's own network namespace), as the
    // first did: the same place, variables and input, a namespace of its own.
    let id = spare(&exec).await;
    let made_ahead = std::fs::read_link(format!("/proc/{id}/ns/net")).ok();
    let (status, out) = run(&exec, probe, false).await;
    assert_eq!(status, Some(0), "{out}");
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(format!("{ws}|{ws}|{ws}").as_str()),
        "{out}"
    );
    assert_eq!(lines.next(), Some("/dev/null"), "{out}");
    if namespaces {
        let net = lines.next().unwrap_or_default();
        let made_ahead = made_ahead.expect("the spare's namespace");
        assert_eq!(net, made_ahead.to_string_lossy(), "{out}");
        assert_ne!(net, first_net, "each command has a namespace of its own");
        let mine = std::fs::read_link("/proc/self/ns/net").unwrap();
        assert_ne!(net, mine.to_string_lossy(), "not the bot's network");
    }

    // One killed from outside before its command: the command still runs, in one made now.
    let gone = |id: u32| {
        std::fs::read_to_string(format!("/proc/{id}/stat")).map_or(true, |s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
    };
    let id = spare(&exec).await;
    let pid = rustix::process::Pid::from_raw(id as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    for _ in 0..1200 {
        if gone(id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, out) = run(&exec, "echo after", false).await;
    assert_eq!((status, out.as_str()), (Some(0), "after\n"));

    // A command line no program can be given is refused with a sentence.
    let nul = exec
        .run(ExecRequest {
            command: "echo a\0b".into(),
            workdir: "workspace/a/main/user-1".into(),
            timeout: Duration::from_secs(20),
            max_output: 1000,
            network: false,
            require_sandbox: false,
        })
        .await
        .unwrap_err();
    assert!(nul.to_string().contains("NUL byte"), "{nul}");

    // The bot gone (`kill -9`: nothing killed, nothing closed but by the kernel): a spare
    // that waits ends, and so does one whose command runs.
    let tag = format!("{}", 30_000 + std::process::id() % 20_000);
    let limits = sandbox::Limits {
        rw: workspace.clone(),
        also: Vec::new(),
        network: false,
        cpu_secs: 0,
        require: false,
        cgroup: None,
        deadline: None,
    };
    let request = fence::request(
        "/bin/sh",
        &["-c".into(), format!("setsid sleep {tag} & sleep {tag}")],
        &[],
        &workspace,
        &limits,
    )
    .unwrap();
    let group = sandbox::PidsGroup::new();
    let group = group.as_ref().map(sandbox::PidsGroup::path);
    let mut waiting = fence::spare(false, None).unwrap().spawn().unwrap();
    let mut running = fence::spare(false, group).unwrap().spawn().unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut input = running.stdin.take().unwrap();
        input.write_all(&request).await.unwrap();
    }
    let count = || {
        let out = std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {tag}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let mut seen = false;
    for _ in 0..1200 {
        if count() >= 2 {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen, "the command did not start");
    let ids = [waiting.id().unwrap(), running.id().unwrap()];
    for child in [&mut waiting, &mut running] {
        drop(child.stdin.take());
        drop(child.stdout.take());
        drop(child.stderr.take());
    }
    std::mem::forget(waiting);
    std::mem::forget(running);
    let mut ended = false;
    for _ in 0..1200 {
        if ids.iter().all(|&id| gone(id)) && count() == 0 {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ended, "left running after the bot: {} sleeps", count());
    let _ = std::fs::remove_dir_all(&root);
}
