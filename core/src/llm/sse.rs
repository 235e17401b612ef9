//! Server-sent events, parsed incrementally: bytes in any chunking → [`Event`]s, as the
//! WHATWG `text/event-stream` rules say (lines end in CRLF, LF or CR; a leading byte-order mark
//! is dropped; `:` starts a comment; `data:` lines join with `\n`; a field's value loses one
//! leading space; `id:` and `retry:` are not used here), with a bound on the length of a line
//! and of an event's data, so a hostile stream cannot grow memory without end.

/// One dispatched event: its `event:` name (`message` when it gave none) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: String,
    pub data: String,
}

/// Why a stream could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("a server-sent event line is longer than {0} bytes")]
    LineTooLong(usize),
    #[error("a server-sent event's data is longer than {0} bytes")]
    EventTooLarge(usize),
}

/// The longest line [`SseParser::new`] accepts.
pub const MAX_LINE: usize = 4 * 1024 * 1024;
/// The most data one event may carry with [`SseParser::new`].
pub const MAX_EVENT: usize = 4 * 1024 * 1024;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The parser's state between chunks.
#[derive(Debug)]
pub struct SseParser {
    /// The current line, not yet ended.
    line: Vec<u8>,
    /// The last chunk ended in CR: an LF starting the next one belongs to that line end.
    after_cr: bool,
    /// Bytes seen at the very start, while they may still be a byte-order mark.
    start: Option<Vec<u8>>,
    event: String,
    data: String,
    /// Whether a `data:` field was seen since the last dispatch (data may be empty).
    has_data: bool,
    max_line: usize,
    max_event: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    pub fn new() -> Self {
        Self::with_limits(MAX_LINE, MAX_EVENT)
    }

    /// A parser refusing lines over `max_line` bytes and events with over `max_event` bytes of
    /// data.
    pub fn with_limits(max_line: usize, max_event: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            start: Some(Vec::new()),
            event: String::new(),
            data: String::new(),
            has_data: false,
            max_line,
            max_event,
        }
    }

    /// Takes the next bytes of the stream; returns the events they complete, in order. After
    /// an error the parser is spent: the stream cannot be trusted further.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<Vec<Event>, SseError> {
        let mut events = Vec::new();
        if let Some(start) = &mut self.start {
            // Hold the first bytes back until they are known to be, or not be, a BOM.
            start.extend_from_slice(bytes);
            if start.len() < BOM.len() && BOM.starts_with(start) {
                return Ok(events);
            }
            let held = std::mem::take(start);
            self.start = None;
            let rest = held.strip_prefix(BOM).unwrap_or(&held);
            self.feed_lines(rest, &mut events)?;
            return Ok(events);
        }
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        self.feed_lines(bytes, &mut events)?;
        Ok(events)
    }

    /// The stream has ended. An event not closed by a blank line is dropped, as the standard
    /// says: the stream was cut in it. Returns whether anything was pending.
    pub fn finish(&mut self) -> bool {
        let held = self.start.as_ref().is_some_and(|s| !s.is_empty());
        let pending = held || !self.line.is_empty() || self.has_data || !self.event.is_empty();
        *self = Self::with_limits(self.max_line, self.max_event);
        self.start = None;
        pending
    }

    fn feed_lines(&mut self, mut bytes: &[u8], events: &mut Vec<Event>) -> Result<(), SseError> {
        while let Some(end) = bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.extend_line(&bytes[..end])?;
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, events)?;
            self.line = line;
            self.line.clear();
            let cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.extend_line(bytes)
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > self.max_line {
            return Err(SseError::LineTooLong(self.max_line));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], events: &mut Vec<Event>) -> Result<(), SseError> {
        if line.is_empty() {
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                data.pop(); // the last line's `\n`
                let event = match std::mem::take(&mut self.event) {
                    name if name.is_empty() => "message".to_owned(),
                    name => name,
                };
                events.push(Event { event, data });
            }
            self.event.clear();
            self.has_data = false;
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max_event {
                    return Err(SseError::EventTooLarge(self.max_event));
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
                self.has_data = true;
            }
            _ => {} // id, retry and unknown fields
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
