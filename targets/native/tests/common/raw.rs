//! A raw TCP client for requests no HTTP client sends: half-sent heads and bodies, declared
//! lengths that never arrive, sockets that just sit there.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Raw(TcpStream);

/// What the server did within a bounded wait: the bytes it sent, whether it closed the
/// connection, and when (since the wait began).
#[derive(Debug)]
pub struct Seen {
    pub text: String,
    pub closed: Option<Duration>,
}

impl Seen {
    /// The status code of the first response, if one arrived.
    pub fn status(&self) -> Option<u16> {
        self.text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
    }

    /// Whether the response carried `Connection: close`.
    pub fn says_close(&self) -> bool {
        self.text
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n")
    }
}

impl Raw {
    /// Connects to `url` (`http://127.0.0.1:PORT`).
    pub async fn connect(url: &str) -> Raw {
        let addr = url.trim_start_matches("http://");
        Raw(TcpStream::connect(addr).await.unwrap())
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).await.unwrap();
    }

    /// Reads until the server closes the connection or `within` passes. A reset counts as
    /// closed.
    pub async fn read_until_closed(&mut self, within: Duration) -> Seen {
        let started = Instant::now();
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        let closed = loop {
            let left = within.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, self.0.read(&mut buf)).await {
                Err(_) => break None,
                Ok(Ok(0)) | Ok(Err(_)) => break Some(started.elapsed()),
                Ok(Ok(n)) => text.extend_from_slice(&buf[..n]),
            }
        };
        Seen {
            text: String::from_utf8_lossy(&text).into_owned(),
            closed,
        }
    }

    /// Reads one response head (up to the blank line), or what came within `within`.
    pub async fn read_head(&mut self, within: Duration) -> String {
        let started = Instant::now();
        let mut text = Vec::new();
        let mut buf = [0u8; 1];
        while !text.ends_with(b"\r\n\r\n") {
            let left = within.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, self.0.read(&mut buf)).await {
                Ok(Ok(1)) => text.push(buf[0]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&text).into_owned()
    }

    /// Whether the server has closed this connection, without waiting.
    pub fn is_closed(&self) -> bool {
        let mut buf = [0u8; 1];
        match self.0.try_read(&mut buf) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }
}

/// A webhook request head for `/telegram/main` declaring `length` body bytes.
pub fn webhook_head(secret: Option<&str>, length: usize) -> String {
    let secret = secret
        .map(|s| format!("X-Telegram-Bot-Api-Secret-Token: {s}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /telegram/main HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{secret}Content-Length: {length}\r\n\r\n"
    )
}
