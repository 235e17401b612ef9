//! The helper's last part: it starts the program as its child and stays, as the fence's init
//! (pid 1 of the command's PID namespace), until the program ends. It ends everything the
//! command started when
//!
//! - the program ends (as init, its end ends the namespace: the kernel kills what is left);
//! - the deadline passes (exit 124, as `timeout` does): the sandbox keeps the command's time
//!   itself, so it holds also when the bot that asked is gone;
//! - nobody reads the command's output any more (exit 125): the bot died (`kill -9`, a crash)
//!   or gave up on it. Its standard output's reading end is held only by the bot, so the
//!   kernel says so on the supervisor's copy of the writing end (a pipe with no reader polls
//!   as an error), at once and without a signal the bot would have to send.
//!
//! Meanwhile it reaps what is handed to it (orphans are reparented to a namespace's init), so
//! the dead never fill the process cap. Outside a PID namespace (the process-group fence) it
//! ends its own process group instead.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, Signal, WaitOptions};

use super::Asked;

/// Exit code when the deadline passed.
pub const DEADLINE: u8 = 124;
/// Exit code when nobody reads the output any more.
pub const ORPHANED: u8 = 125;

/// Runs the program asked to its end, the deadline or the reader's end; the exit code to end
/// with (the program's, 128 + its signal, or one of the above). A spare's program gets the
/// variables of its request and no standard input (the spare's was the request).
pub(super) fn run(asked: &Asked) -> u8 {
    let Some((name, rest)) = asked.program.split_first() else {
        return 126;
    };
    let deadline = asked.deadline;
    // Taken before the program starts: the copy must exist while the reader does.
    let lifeline = rustix::io::dup(std::io::stdout()).ok();
    let mut command = std::process::Command::new(name);
    command
        .args(rest)
        .envs(asked.env.iter().map(|(k, v)| (k, v)));
    if asked.spare {
        command.stdin(std::process::Stdio::null());
    }
    let child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("clawless sandbox: cannot start {name:?}: {e}");
            return if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
        }
    };
    let Some(pid) = Pid::from_raw(child.id() as i32) else {
        return 126;
    };
    // Without a pidfd (kernels before 5.3) the loop wakes every second to look.
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok();
    let until = deadline.map(|d| Instant::now() + d);
    loop {
        if let Some(code) = reap(pid) {
            return code;
        }
        let left = until.map(|u| u.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return end(DEADLINE);
        }
        let wait = left.unwrap_or(Duration::MAX).min(Duration::from_secs(1));
        let mut fds = Vec::with_capacity(2);
        if let Some(fd) = &pidfd {
            fds.push(PollFd::new(fd, PollFlags::IN));
        }
        if let Some(fd) = &lifeline {
            // No events asked: only an error or hang-up wakes it.
            fds.push(PollFd::new(fd, PollFlags::empty()));
        }
        let timeout = rustix::event::Timespec::try_from(wait).unwrap_or(rustix::event::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        });
        let _ = rustix::event::poll(&mut fds, Some(&timeout));
        let orphaned = lifeline.is_some()
            && fds
                .last()
                .is_some_and(|fd| fd.revents().intersects(PollFlags::ERR | PollFlags::HUP));
        if orphaned {
            return end(ORPHANED);
        }
    }
}

/// Reaps every child that has ended; the code to end with once `program` has.
fn reap(program: Pid) -> Option<u8> {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, status))) if pid == program => {
                let status = std::process::ExitStatus::from_raw(status.as_raw());
                return Some(match (status.code(), status.signal()) {
                    (Some(code), _) => code as u8,
                    (None, Some(signal)) => 128u8.saturating_add(signal as u8),
                    (None, None) => 126,
                });
            }
            Ok(Some(_)) => continue,
            // Nothing more has ended, or no child is left.
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Ends everything the command started, and says the code to exit with. As a namespace's
/// init, exiting is enough (the kernel kills the rest); else the process group it leads is
/// killed, this process with it.
fn end(code: u8) -> u8 {
    let me = rustix::process::getpid();
    // Only a group it leads (the fence makes one): never a group it merely joined.
    if me.as_raw_nonzero().get() != 1 && rustix::process::getpgrp() == me {
        let _ = rustix::process::kill_current_process_group(Signal::KILL);
    }
    code
}
