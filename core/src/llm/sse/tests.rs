use super::*;

fn ev(event: &str, data: &str) -> Event {
    Event {
        event: event.into(),
        data: data.into(),
    }
}

/// All events of `stream` fed in the pieces that `cuts` (ascending offsets) make.
fn parse_cut(stream: &[u8], cuts: &[usize]) -> Vec<Event> {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    let mut from = 0;
    for &to in cuts.iter().chain([stream.len()].iter()) {
        events.extend(parser.feed(&stream[from..to]).unwrap());
        from = to;
    }
    events
}

fn parse(stream: &[u8]) -> Vec<Event> {
    parse_cut(stream, &[])
}

/// A small deterministic generator (xorshift), for reproducible random chunkings.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

#[test]
fn fields_comments_and_multi_line_data() {
    let stream = b": a comment\nevent: delta\ndata: {\"a\":1}\n\ndata:first\ndata: second\ndata\n\nevent: named-only\n\nid: 7\nretry: 10\nfoo: bar\ndata:  two spaces\n\n";
    assert_eq!(
        parse(stream),
        [
            ev("delta", "{\"a\":1}"),
            ev("message", "first\nsecond\n"),
            ev("message", " two spaces"),
        ]
    );
}

#[test]
fn an_empty_data_field_is_an_event_and_a_name_alone_is_not() {
    assert_eq!(parse(b"data:\n\n"), [ev("message", "")]);
    assert_eq!(parse(b"event: ping\n\n\n\n"), []);
    // The name does not leak into the next event.
    assert_eq!(parse(b"event: a\n\ndata: x\n\n"), [ev("message", "x")]);
}

#[test]
fn every_line_ending_reads_the_same() {
    let lf = b"event: e\ndata: 1\ndata: 2\n\n: c\ndata: 3\n\n";
    let crlf = b"event: e\r\ndata: 1\r\ndata: 2\r\n\r\n: c\r\ndata: 3\r\n\r\n";
    let cr = b"event: e\rdata: 1\rdata: 2\r\r: c\rdata: 3\r\r";
    let mixed = b"event: e\r\ndata: 1\rdata: 2\n\r\n: c\rdata: 3\n\r";
    let want = [ev("e", "1\n2"), ev("message", "3")];
    for stream in [&lf[..], crlf, cr, mixed] {
        assert_eq!(parse(stream), want, "{:?}", String::from_utf8_lossy(stream));
    }
}

#[test]
fn a_leading_byte_order_mark_is_dropped_once() {
    assert_eq!(parse(b"\xEF\xBB\xBFdata: x\n\n"), [ev("message", "x")]);
    // Split inside the mark.
    assert_eq!(
        parse_cut(b"\xEF\xBB\xBFdata: x\n\n", &[1, 2]),
        [ev("message", "x")]
    );
    // A second mark is part of the line: an unknown field, ignored.
    assert_eq!(parse(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n"), []);
    // Bytes that only start like a mark are kept.
    assert_eq!(parse_cut(b"\xEFdata: x\n\ndata: y\n\n", &[1]).len(), 1);
}

/// A stream with everything that can be split badly: a BOM, CRLF, lone CR, multi-byte UTF-8.
const AWKWARD: &[u8] = "\u{feff}: hi\r\nevent: content_block_delta\r\ndata: {\"text\":\"héllo wörld ✓ 😀\"}\r\n\r\ndata: a\rdata: b\r\rdata: [DONE]\n\n".as_bytes();

#[test]
fn every_split_position_gives_the_same_events() {
    let want = parse(AWKWARD);
    assert_eq!(
        want,
        [
            ev("content_block_delta", "{\"text\":\"héllo wörld ✓ 😀\"}"),
            ev("message", "a\nb"),
            ev("message", "[DONE]"),
        ]
    );
    for i in 0..=AWKWARD.len() {
        assert_eq!(parse_cut(AWKWARD, &[i]), want, "cut at {i}");
        for j in i..=AWKWARD.len() {
            assert_eq!(parse_cut(AWKWARD, &[i, j]), want, "cuts at {i}, {j}");
        }
    }
    let bytes: Vec<usize> = (1..AWKWARD.len()).collect();
    assert_eq!(parse_cut(AWKWARD, &bytes), want, "byte by byte");
}

#[test]
fn random_chunkings_give_the_same_events() {
    let want = parse(AWKWARD);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..500 {
        let mut cuts = Vec::new();
        let mut at = 0;
        while at < AWKWARD.len() {
            at += 1 + rng.below(8);
            cuts.push(at.min(AWKWARD.len()));
        }
        assert_eq!(parse_cut(AWKWARD, &cuts), want, "{cuts:?}");
    }
}

#[test]
fn lines_and_events_are_bounded() {
    let mut parser = SseParser::with_limits(16, 32);
    assert_eq!(parser.feed(b"data: 0123456789").unwrap(), []);
    assert_eq!(
        parser.feed(b"abcdef\n"),
        Err(SseError::LineTooLong(16)),
        "a line grown over several chunks"
    );
    let mut parser = SseParser::with_limits(16, 32);
    let err = parser
        .feed(b"data: 0123456789\ndata: 0123456789\ndata: 0123456789\n")
        .unwrap_err();
    assert_eq!(err, SseError::EventTooLarge(32));
    assert!(err.to_string().contains("32 bytes"), "{err}");
    // Comments count as lines too: no endless line without an end.
    let mut parser = SseParser::with_limits(16, 32);
    assert!(parser.feed(&[b':'; 17]).is_err());
}

#[test]
fn an_event_cut_by_the_end_of_the_stream_is_dropped() {
    let mut parser = SseParser::new();
    assert_eq!(
        parser.feed(b"data: done\n\ndata: {\"partial\"").unwrap(),
        [ev("message", "done")]
    );
    assert!(parser.finish(), "something was pending");
    let mut parser = SseParser::new();
    parser.feed(b"data: done\n\n").unwrap();
    assert!(!parser.finish());
}
