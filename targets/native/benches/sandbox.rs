//! `cargo bench -p native --bench sandbox`: what the sandbox costs a command and a local
//! program, through the real binary as the helper (as the bot runs them).
//!
//! Prints, over 40 runs each after 3 to warm up: `exec` of `true` (the fence, the helper, the
//! sandbox, `/bin/sh -c true`, to its output read and its end), from the call to its result,
//! once 20 ms after the last (as commands come in a conversation, between model calls: the
//! sandbox made ahead is ready) and once back to back (the next is still being made);
//! a local program started and its first line read (an echo loop in `sh`); and one line to it
//! and back once it runs (an MCP call's round trip, without the server's own work). Median,
//! p90 and min in milliseconds. `CLAWLESS_BENCH_BIN=<path>` runs another build's binary as the
//! helper.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clawless_native::exec::ShellExec;
use clawless_native::{fence, sandbox};
use clawless_platform::{Exec, ExecRequest};

const RUNS: usize = 40;
const WARM: usize = 3;

fn summary(name: &str, mut ms: Vec<f64>) {
    ms.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    println!(
        "{name:<38} median {:>7.2} ms   p90 {:>7.2} ms   min {:>7.2} ms   ({} runs)",
        at(0.5),
        at(0.9),
        ms[0],
        ms.len()
    );
}

async fn timed<F: std::future::Future>(f: F) -> f64 {
    let t = Instant::now();
    f.await;
    t.elapsed().as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let bin = std::env::var("CLAWLESS_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_clawless").into());
    sandbox::set_exe(PathBuf::from(bin));
    let root = std::env::temp_dir().join(format!("clawless-sandbox-bench-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let exec = ShellExec::new(&root);
    println!(
        "fence: {:?}; missing: {:?}",
        fence::fence(),
        fence::missing(false)
    );

    let request = || ExecRequest {
        command: "true".into(),
        workdir: "workspace/a/main/user-1".into(),
        timeout: Duration::from_secs(30),
        max_output: 16 * 1024,
        network: false,
        require_sandbox: false,
    };
    for (name, pause) in [
        (
            "exec `true`, 20 ms after the last",
            Duration::from_millis(20),
        ),
        ("exec `true`, back to back", Duration::ZERO),
    ] {
        let mut ms = Vec::new();
        for i in 0..WARM + RUNS {
            tokio::time::sleep(pause).await;
            let t = timed(async {
                let out = exec.run(request()).await.unwrap();
                assert_eq!(out.status, Some(0), "{out:?}");
            })
            .await;
            if i >= WARM {
                ms.push(t);
            }
        }
        summary(name, ms);
    }

    let argv = [
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        "echo ready; while read l; do echo \"$l\"; done".to_owned(),
    ];
    let reach = clawless_platform::Reach::default();
    let (mut start, mut round) = (Vec::new(), Vec::new());
    for i in 0..WARM + RUNS {
        let t = Instant::now();
        let program = exec.start(&argv, &[], &reach).await.unwrap();
        assert_eq!(
            program
                .next_line(Duration::from_secs(10), 100)
                .await
                .unwrap(),
            "ready"
        );
        let started = t.elapsed().as_secs_f64() * 1000.0;
        let trip = timed(async {
            program.send("ping").await.unwrap();
            assert_eq!(
                program
                    .next_line(Duration::from_secs(10), 100)
                    .await
                    .unwrap(),
                "ping"
            );
        })
        .await;
        drop(program);
        if i >= WARM {
            start.push(started);
            round.push(trip);
        }
    }
    summary("local program: start to first line", start);
    summary("local program: a line there and back", round);
    let _ = std::fs::remove_dir_all(&root);
}
