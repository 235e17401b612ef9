//! A terminal UI driven as a person would: a tmux server of the test's own, keys sent with
//! `send-keys`, the screen read with `capture-pane`.

#![allow(clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of one test (its own socket), killed when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// A server on a socket named for `name` and this process.
    pub fn new(name: &str) -> Tmux {
        Tmux {
            socket: format!("clawless-{name}-{}", std::process::id()),
        }
    }

    /// Runs a tmux command on this server; panics with its error when it fails.
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts `command` (a shell line) in a detached session of 130×40.
    pub fn start(&self, session: &str, command: &str) {
        self.run(&[
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "130",
            "-y",
            "40",
            command,
        ]);
    }

    /// The session's screen as text.
    pub fn screen_of(&self, session: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", session])
    }

    /// Sends keys (tmux key names or text) to the session.
    pub fn keys_to(&self, session: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", session];
        args.extend(keys);
        self.run(&args);
    }

    /// Captures until `cond` holds (within 30 s); returns that screen.
    pub async fn until_in(&self, session: &str, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen_of(session);
            if cond(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `clawless tui --remote URL` (the binary `bin`, the admin token `admin`) in a session
    /// named `remote`: it opens read-only, its panels show `trace`'s run with `outcome`, and
    /// searching for `trace` lists its events up to `turn_ended`. Returns the panels' screen
    /// and the events' screen.
    pub async fn remote_cockpit_shows(
        &self,
        bin: &str,
        url: &str,
        admin: &str,
        trace: &str,
        outcome: &str,
    ) -> (String, String) {
        let command = format!(
            "env -i PATH=/usr/bin:/bin TERM=xterm-256color CLAWLESS_ADMIN_TOKEN={admin} {bin} tui --remote {url}"
        );
        self.start("remote", &command);
        self.until_in("remote", "the remote chat screen", |s| {
            s.contains("read-only")
        })
        .await;
        self.keys_to("remote", &["Tab"]);
        let panels = self
            .until_in("remote", "the run, remotely", |s| {
                s.contains(trace) && s.contains(outcome) && s.contains("attached to")
            })
            .await;
        self.keys_to("remote", &["/", trace, "Enter"]);
        let events = self
            .until_in("remote", "its events, remotely", |s| {
                s.contains(&format!("Events of {trace}")) && s.contains("turn_ended")
            })
            .await;
        assert!(events.contains("accepted"), "{events}");
        self.keys_to("remote", &["q"]);
        (panels, events)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}
