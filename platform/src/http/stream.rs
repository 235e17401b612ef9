//! A response body read piece by piece ([`crate::Http::send_streaming`]): the [`BodyStream`]
//! trait, the streamed response, the byte cap every adapter wraps its body in, and the fake's
//! scripted streams.

use async_trait::async_trait;

use crate::error::{PortError, Result};

/// The most bytes a streamed body may carry when the request sets no tighter cap (an
/// [`crate::Outside`] request is capped at its `max_body`). A server that sends more gets an
/// `Invalid` error instead of more pieces.
pub const MAX_STREAM_BODY: usize = 8 * 1024 * 1024;

/// A response body arriving in pieces.
#[async_trait]
pub trait BodyStream: Send {
    /// The next piece of the body, `None` once it has ended.
    ///
    /// # Behavior
    /// Pieces come in order and together are the whole body; a piece may be empty. The
    /// request's `timeout` counts from sending it to the end of the body, and its `idle`
    /// bound (when set) from one piece to the next: past either, `Timeout`. A body longer
    /// than its cap ([`MAX_STREAM_BODY`], or `max_body` for a request from outside) is
    /// `Invalid` at the piece that would pass it. A connection lost mid-body is `Unavailable`.
    /// After an error or the end, the stream stays ended.
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>>;
}

/// A response whose body is read piece by piece.
pub struct HttpStreamResponse {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Box<dyn BodyStream>,
}

impl std::fmt::Debug for HttpStreamResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpStreamResponse")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl HttpStreamResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Reads the rest of the body, keeping at most `max` bytes (an error body to quote): the
    /// pieces past `max` are not read.
    pub async fn read_to_end(&mut self, max: usize) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        while let Some(piece) = self.body.next_chunk().await? {
            let room = max - body.len();
            body.extend_from_slice(&piece[..piece.len().min(room)]);
            if body.len() >= max {
                break;
            }
        }
        Ok(body)
    }
}

/// A body that is one piece (what [`crate::Http::send_streaming`]'s default yields).
pub struct OnePiece(Option<Vec<u8>>);

impl OnePiece {
    pub fn new(body: Vec<u8>) -> Self {
        Self(Some(body))
    }
}

#[async_trait]
impl BodyStream for OnePiece {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.0.take())
    }
}

/// A body cut off with `Invalid` at the piece that passes `max` bytes; every adapter wraps
/// its stream in one.
pub struct Capped {
    inner: Box<dyn BodyStream>,
    left: usize,
    max: usize,
    ended: bool,
}

impl Capped {
    pub fn new(inner: Box<dyn BodyStream>, max: usize) -> Self {
        Self {
            inner,
            left: max,
            max,
            ended: false,
        }
    }
}

#[async_trait]
impl BodyStream for Capped {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>> {
        if self.ended {
            return Ok(None);
        }
        match self.inner.next_chunk().await {
            Ok(Some(piece)) if piece.len() > self.left => {
                self.ended = true;
                Err(PortError::invalid(format!(
                    "the response body is longer than {} bytes",
                    self.max
                )))
            }
            Ok(Some(piece)) => {
                self.left -= piece.len();
                Ok(Some(piece))
            }
            other => {
                self.ended = !matches!(other, Ok(Some(_)));
                other
            }
        }
    }
}

/// What a streaming route of [`crate::FakeHttp`] answers: a status, headers and the body's
/// pieces in order; an `Err` piece ends the body with that error (a connection lost
/// mid-body), and pieces after it are never read.
#[derive(Debug, Clone)]
pub struct FakeStream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub pieces: Vec<Result<Vec<u8>>>,
}

impl FakeStream {
    pub fn new<P: Into<Vec<u8>>>(status: u16, pieces: impl IntoIterator<Item = P>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            pieces: pieces.into_iter().map(|p| Ok(p.into())).collect(),
        }
    }
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }
    /// Ends the body with `error` after the pieces so far.
    pub fn then_fail(mut self, error: PortError) -> Self {
        self.pieces.push(Err(error));
        self
    }
}

/// The pieces of a [`FakeStream`], handed out one by one.
pub(crate) struct Pieces(std::vec::IntoIter<Result<Vec<u8>>>);

impl Pieces {
    pub(crate) fn new(pieces: Vec<Result<Vec<u8>>>) -> Self {
        Self(pieces.into_iter())
    }
}

#[async_trait]
impl BodyStream for Pieces {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>> {
        match self.0.next() {
            None => Ok(None),
            Some(Ok(piece)) => Ok(Some(piece)),
            Some(Err(e)) => {
                self.0 = Vec::new().into_iter();
                Err(e)
            }
        }
    }
}
