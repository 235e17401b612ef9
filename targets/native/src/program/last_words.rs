//! What a local program says on its standard error: each line into this process's log (as it
//! comes, cut at [`MAX_LINE`] bytes), the last [`KEPT`] kept, so that when the program exits
//! the error says its last words and the likely cause in the sandbox (a path it may not
//! read, no network) instead of only "it exited".

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

/// Lines kept.
pub const KEPT: usize = 5;
/// Bytes of a line kept and logged.
pub const MAX_LINE: usize = 200;

/// The tail of a program's standard error, filled by a task of its own.
pub struct LastWords {
    tail: Arc<Mutex<VecDeque<String>>>,
    ended: tokio::sync::watch::Receiver<bool>,
}

impl LastWords {
    /// Reads `stderr` to its end on a task: each line logged under `program`'s name.
    pub fn watch(stderr: impl AsyncRead + Unpin + Send + 'static, program: String) -> LastWords {
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(KEPT)));
        let (done, ended) = tokio::sync::watch::channel(false);
        let kept = tail.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                line.clear();
                // At most a line's worth (and one byte more) per read: a program writing
                // without newlines fills no memory.
                match (&mut reader)
                    .take(MAX_LINE as u64 + 1)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                // The rest of a longer line is passed over.
                if !line.ends_with(b"\n") && !skip_line(&mut reader).await {
                    break;
                }
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end();
                if text.is_empty() {
                    continue;
                }
                let cut: String = text.chars().take(MAX_LINE).collect();
                tracing::info!(program = %program, "{cut}");
                let mut tail = kept.lock().unwrap_or_else(|e| e.into_inner());
                if tail.len() == KEPT {
                    tail.pop_front();
                }
                tail.push_back(cut);
            }
            let _ = done.send(true);
        });
        LastWords { tail, ended }
    }

    /// Its last lines and the likely cause, for an error saying it exited (waits a moment for
    /// the end of its standard error, which may come after the end of its output).
    pub async fn explain(&self) -> String {
        let mut ended = self.ended.clone();
        let _ = tokio::time::timeout(Duration::from_millis(500), ended.wait_for(|e| *e)).await;
        let lines: Vec<String> = self
            .tail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        if lines.is_empty() {
            return String::new();
        }
        let mut said = format!("; its last words: «{}»", lines.join(" / "));
        if let Some(cause) = likely_cause(&lines.join("\n")) {
            said.push_str("; likely: ");
            said.push_str(cause);
        }
        said
    }
}

/// Reads to the end of the line; false at the end of the stream.
async fn skip_line(reader: &mut (impl tokio::io::AsyncBufRead + Unpin)) -> bool {
    loop {
        let Ok(buf) = reader.fill_buf().await else {
            return false;
        };
        if buf.is_empty() {
            return false;
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return true;
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

/// The sandbox's part in what a program said before it exited, where its words show one.
pub fn likely_cause(words: &str) -> Option<&'static str> {
    let words = words.to_lowercase();
    // A needle counts where a word starts: `FileNotFoundError` holds no `ENOTFOUND`.
    let any = |needles: &[&str]| {
        needles.iter().any(|n| {
            words.match_indices(n).any(|(at, _)| {
                !words[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric())
            })
        })
    };
    if any(&[
        "enotfound",
        "eai_again",
        "getaddrinfo",
        "name resolution",
        "could not resolve",
        "network is unreachable",
        "enetunreach",
    ]) {
        return Some("it has no network (its entry says `network: false`, the default): a program that downloads itself, such as `npx -y`, needs `network: true`");
    }
    if any(&[
        "eacces",
        "permission denied",
        "eperm",
        "operation not permitted",
        "read-only file system",
        "erofs",
    ]) {
        return Some("the sandbox refused it a file: a local program reads only the system's directories and writes only files/ and its `paths:` (one installed under a home directory, such as /root, needs that directory in `paths:`)");
    }
    if any(&["not found", "no such file"]) {
        return Some("a program or file it names is not there (is it installed, and on PATH?)");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::likely_cause;

    #[test]
    fn each_cause_is_told_by_its_own_words_not_by_part_of_another() {
        let cause = |w: &str| likely_cause(w).unwrap_or("none");
        assert!(cause("npm ERR! getaddrinfo ENOTFOUND registry.npmjs.org").contains("no network"));
        assert!(cause("Error: EACCES: permission denied, open '/root/x'").contains("refused it"));
        let python = "FileNotFoundError: [Errno 2] No such file or directory: '/root/.config'";
        assert!(cause(python).contains("is not there"), "{}", cause(python));
        assert_eq!(cause("all fine, then it quit"), "none");
    }
}
