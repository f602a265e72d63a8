//! Bounded framing of the bytes a server sends: newline-delimited JSON-RPC (stdio) and
//! Server-Sent Events (legacy SSE), both with a limit on the size of one message.
//!
//! A server is not trusted: it may send a line that never ends, an event of gigabytes, or
//! a reply nested so deep that no parser accepts it. The framers here are pure state
//! machines fed with whatever chunks the transport reads, so they are easy to fuzz
//! (`fuzz/fuzz_targets/stdio_framing.rs`, `sse.rs`) and to test without a socket. They
//! are ours because the line and SSE crates we know keep a whole line or event in memory,
//! without a limit.
//!
//! Invariants:
//! - **bounded memory**: at most `max` bytes of one message are ever buffered. Past the
//!   limit the rest of the message is only *scanned* by an [`EnvelopeScan`] (constant
//!   memory) and then dropped;
//! - **no silent waits**: an oversized message that is a reply to one of our requests is
//!   reported as [`Frame::Oversized`] with its `id`, as soon as the scan has seen the id
//!   and a `result`/`error` member (or at the end of the message), so the transport can
//!   fail that request at once with [`error_reply`] instead of letting it time out;
//! - the framing stays in step: after an oversized message the next one is read normally.
//!
//! The limit is the server's `maxMessageBytes` ([`DEFAULT_MAX_MESSAGE_BYTES`], 16 MiB, by
//! default); a message nested deeper than [`MAX_PARSE_DEPTH`] (128) levels is unreadable
//! and fails its request the same way, with code [`UNREADABLE_REPLY_CODE`].

use serde_json::{Value, json};

/// The default limit for one message from a server: 16 MiB, as rmcp's Streamable HTTP
/// client uses for one SSE event. Settings may change it per server (`maxMessageBytes`).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The JSON-RPC error code of a reply that Switchboard synthesizes because the server's
/// own reply was too large or unreadable (JSON-RPC's "Internal error").
pub const UNREADABLE_REPLY_CODE: i64 = -32603;

/// The deepest nesting serde_json parses (its recursion limit); a deeper message is
/// unreadable.
pub const MAX_PARSE_DEPTH: usize = 128;

/// How many bytes of an `id` value are kept; real ids are short numbers or strings.
const MAX_ID_BYTES: usize = 256;
/// The longest member name the scan needs to recognise (`result`, `method`).
const MAX_KEY_BYTES: usize = 8;

/// What the top level of a JSON-RPC message says, learned without parsing it whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Envelope {
    /// The top-level `id`, when it is a number or a string.
    pub id: Option<Value>,
    /// The message has a top-level `method` (a request or notification).
    pub has_method: bool,
    /// The message has a top-level `result` or `error` (a reply).
    pub has_outcome: bool,
}

impl Envelope {
    /// The id of the request this message answers, when it is a reply.
    pub fn reply_id(&self) -> Option<&Value> {
        if self.has_outcome && !self.has_method {
            self.id.as_ref()
        } else {
            None
        }
    }
}

/// Which top-level member's value the scan is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Member {
    #[default]
    None,
    Id,
    Other,
}

/// A streaming scan of a JSON object's top level in constant memory: finds `id`,
/// `method`, `result` and `error` however large or deep the rest is.
#[derive(Debug, Default, Clone)]
pub struct EnvelopeScan {
    depth: usize,
    max_depth: usize,
    in_string: bool,
    escaped: bool,
    started: bool,
    done: bool,
    expect_key: bool,
    key_capturing: bool,
    key_ready: bool,
    key: Vec<u8>,
    key_long: bool,
    member: Member,
    id: Vec<u8>,
    id_long: bool,
    envelope: Envelope,
}

impl EnvelopeScan {
    /// A scan at the start of a message.
    pub fn new() -> Self {
        Self::default()
    }

    /// The scan of a whole message.
    pub fn of(bytes: &[u8]) -> Envelope {
        let mut scan = Self::new();
        scan.feed(bytes);
        scan.envelope().clone()
    }

    /// What has been learned so far.
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// The deepest nesting of arrays and objects seen so far (the top level is 1).
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Feeds the next bytes of the message.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.done {
                return;
            }
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if self.in_string {
            let closing = !self.escaped && b == b'"';
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            }
            if self.key_capturing {
                if closing {
                    self.key_capturing = false;
                    self.key_ready = true;
                } else if self.key.len() < MAX_KEY_BYTES {
                    self.key.push(b);
                } else {
                    self.key_long = true;
                }
            } else {
                self.capture(b);
            }
            if closing {
                self.in_string = false;
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.expect_key = false;
                    self.key_capturing = true;
                    self.key.clear();
                    self.key_long = false;
                } else {
                    self.capture(b);
                }
            }
            b'{' | b'[' => {
                if self.depth == 0 {
                    if b == b'{' && !self.started {
                        self.started = true;
                        self.expect_key = true;
                    } else {
                        // Not a JSON object: there is no envelope to find.
                        self.done = true;
                        return;
                    }
                } else {
                    self.capture(b);
                }
                self.depth = self.depth.saturating_add(1);
                self.max_depth = self.max_depth.max(self.depth);
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.end_member();
                    self.done = true;
                } else {
                    self.capture(b);
                }
            }
            b':' if self.depth == 1 && self.key_ready => {
                self.key_ready = false;
                self.member = if self.key_long {
                    Member::Other
                } else {
                    match self.key.as_slice() {
                        b"id" => Member::Id,
                        b"method" => {
                            self.envelope.has_method = true;
                            Member::Other
                        }
                        b"result" | b"error" => {
                            self.envelope.has_outcome = true;
                            Member::Other
                        }
                        _ => Member::Other,
                    }
                };
            }
            b',' if self.depth == 1 => {
                self.end_member();
                self.expect_key = true;
            }
            _ => self.capture(b),
        }
    }

    fn capture(&mut self, b: u8) {
        if self.member == Member::Id {
            if self.id.len() < MAX_ID_BYTES {
                self.id.push(b);
            } else {
                self.id_long = true;
            }
        }
    }

    fn end_member(&mut self) {
        if self.member == Member::Id
            && !self.id_long
            && let Ok(v @ (Value::Number(_) | Value::String(_))) =
                serde_json::from_slice::<Value>(&self.id)
        {
            self.envelope.id = Some(v);
        }
        self.id.clear();
        self.id_long = false;
        self.member = Member::None;
    }
}

/// One message cut out of the byte stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A whole message within the limit (a line without its line ending).
    Message(Vec<u8>),
    /// A message over the limit, dropped; `bytes` is how much of it was seen when it was
    /// reported (the whole size if reported at its end).
    Oversized { envelope: Envelope, bytes: usize },
}

/// State of a message that went over the limit.
#[derive(Debug)]
struct Overflow {
    scan: EnvelopeScan,
    bytes: usize,
    reported: bool,
}

impl Overflow {
    fn start(parts: &[&[u8]]) -> Self {
        let mut scan = EnvelopeScan::new();
        let mut bytes = 0;
        for part in parts {
            scan.feed(part);
            bytes += part.len();
        }
        Overflow {
            scan,
            bytes,
            reported: false,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.scan.feed(bytes);
        self.bytes = self.bytes.saturating_add(bytes.len());
    }

    /// Reports the message (through `make`, the framer's oversized frame) as soon as it
    /// is known to be a reply with an id.
    fn report_early<F>(&mut self, out: &mut Vec<F>, make: fn(Envelope, usize) -> F) {
        if !self.reported && self.scan.envelope().reply_id().is_some() {
            self.reported = true;
            out.push(make(self.scan.envelope().clone(), self.bytes));
        }
    }

    /// Reports the message at its end, unless it was reported already.
    fn report_end<F>(self, out: &mut Vec<F>, make: fn(Envelope, usize) -> F) {
        if !self.reported {
            out.push(make(self.scan.envelope().clone(), self.bytes));
        }
    }
}

fn oversized_line(envelope: Envelope, bytes: usize) -> Frame {
    Frame::Oversized { envelope, bytes }
}

fn oversized_event(envelope: Envelope, bytes: usize) -> SseFrame {
    SseFrame::Oversized { envelope, bytes }
}

/// Newline-delimited framing (the stdio transport) with a limit per line.
#[derive(Debug)]
pub struct LineFramer {
    max: usize,
    line: Vec<u8>,
    over: Option<Overflow>,
}

impl LineFramer {
    /// A framer that keeps at most `max` bytes of one line.
    pub fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            line: Vec::new(),
            over: None,
        }
    }

    /// Feeds the next chunk read from the stream; complete frames are appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Frame>) {
        while !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.append(&chunk[..i], out);
                    self.end_line(out);
                    chunk = &chunk[i + 1..];
                }
                None => {
                    self.append(chunk, out);
                    chunk = &[];
                }
            }
        }
    }

    /// Frames one read of the stream: `bytes` as read, or the stream's end when
    /// `bytes` is empty (what `read` returns there).
    pub fn read(&mut self, bytes: &[u8], out: &mut Vec<Frame>) {
        if bytes.is_empty() {
            self.finish(out);
        } else {
            self.push(bytes, out);
        }
    }

    /// The stream ended: a last line without a newline is still a frame.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        if self.over.is_some() || !self.line.is_empty() {
            self.end_line(out);
        }
    }

    fn append(&mut self, part: &[u8], out: &mut Vec<Frame>) {
        if let Some(over) = &mut self.over {
            over.feed(part);
            over.report_early(out, oversized_line);
        } else if self.line.len() + part.len() > self.max {
            let mut over = Overflow::start(&[&self.line, part]);
            self.line = Vec::new();
            over.report_early(out, oversized_line);
            self.over = Some(over);
        } else {
            self.line.extend_from_slice(part);
        }
    }

    fn end_line(&mut self, out: &mut Vec<Frame>) {
        if let Some(over) = self.over.take() {
            over.report_end(out, oversized_line);
            return;
        }
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        out.push(Frame::Message(line));
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (`None` means the default type, `message`).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field.
    pub id: Option<String>,
    /// The `retry:` field, in milliseconds.
    pub retry: Option<u64>,
}

/// A frame of an SSE stream.
#[derive(Debug, Clone, PartialEq)]
pub enum SseFrame {
    /// A complete event within the limit.
    Event(SseEvent),
    /// An event whose data went over the limit, dropped (see [`Frame::Oversized`]).
    Oversized { envelope: Envelope, bytes: usize },
}

/// Where an over-the-limit line of an SSE stream is.
#[derive(Debug)]
enum LineField {
    /// The field name is not known yet (its first bytes).
    Name(Vec<u8>),
    /// Inside a `data:` value; `true` while the optional space after the colon may come.
    Data(bool),
    /// Inside another field or a comment: ignored.
    Other,
}

#[derive(Debug)]
struct SseOverflow {
    over: Overflow,
    field: LineField,
    line_empty: bool,
    data_lines: usize,
}

/// Server-Sent Events parsing (the WHATWG `text/event-stream` rules) with a limit on the
/// size of one event's data plus the line being read.
#[derive(Debug)]
pub struct SseParser {
    max: usize,
    line: Vec<u8>,
    pending_cr: bool,
    data: Vec<u8>,
    data_lines: usize,
    event: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
    over: Option<SseOverflow>,
}

impl SseParser {
    /// A parser that keeps at most `max` bytes of one event.
    pub fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            line: Vec::new(),
            pending_cr: false,
            data: Vec::new(),
            data_lines: 0,
            event: None,
            id: None,
            retry: None,
            over: None,
        }
    }

    /// Feeds the next chunk of the stream; complete events are appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<SseFrame>) {
        if self.pending_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.pending_cr = false;
        while !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    self.append(&chunk[..i], out);
                    self.end_line(out);
                    let cr = chunk[i] == b'\r';
                    chunk = &chunk[i + 1..];
                    if cr {
                        if chunk.is_empty() {
                            self.pending_cr = true;
                        } else if chunk[0] == b'\n' {
                            chunk = &chunk[1..];
                        }
                    }
                }
                None => {
                    self.append(chunk, out);
                    chunk = &[];
                }
            }
        }
    }

    fn append(&mut self, part: &[u8], out: &mut Vec<SseFrame>) {
        if part.is_empty() {
            return;
        }
        if let Some(sse) = &mut self.over {
            sse.line_empty = false;
            feed_overflow_line(sse, part);
            sse.over.report_early(out, oversized_event);
            return;
        }
        if self.line.len() + self.data.len() + part.len() <= self.max {
            self.line.extend_from_slice(part);
            return;
        }
        // Over the limit: scan what the event's data is so far, then this line.
        let mut sse = SseOverflow {
            over: Overflow::start(&[&self.data]),
            field: LineField::Name(Vec::new()),
            line_empty: false,
            data_lines: self.data_lines,
        };
        let line = std::mem::take(&mut self.line);
        feed_overflow_line(&mut sse, &line);
        feed_overflow_line(&mut sse, part);
        sse.over.report_early(out, oversized_event);
        self.data = Vec::new();
        self.over = Some(sse);
    }

    fn end_line(&mut self, out: &mut Vec<SseFrame>) {
        if let Some(sse) = &mut self.over {
            if sse.line_empty {
                // The blank line ends the oversized event.
                if let Some(sse) = self.over.take() {
                    sse.over.report_end(out, oversized_event);
                }
                self.reset_event();
            } else {
                sse.line_empty = true;
                sse.field = LineField::Name(Vec::new());
            }
            return;
        }
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        match name {
            b"data" => {
                if self.data_lines > 0 {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.data_lines += 1;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            b"id" if !value.contains(&0) => {
                self.id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" => {
                if let Some(ms) = std::str::from_utf8(value)
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse().ok())
                {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseFrame>) {
        if self.data_lines == 0 && self.retry.is_none() {
            self.reset_event();
            return;
        }
        let data = std::mem::take(&mut self.data);
        out.push(SseFrame::Event(SseEvent {
            event: self.event.take().filter(|e| !e.is_empty()),
            data: String::from_utf8_lossy(&data).into_owned(),
            id: self.id.take(),
            retry: self.retry.take(),
        }));
        self.reset_event();
    }

    fn reset_event(&mut self) {
        self.data = Vec::new();
        self.data_lines = 0;
        self.event = None;
        self.id = None;
        self.retry = None;
        self.line = Vec::new();
    }
}

/// Feeds bytes of one line of an oversized event: only `data:` values reach the scan.
fn feed_overflow_line(sse: &mut SseOverflow, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match &mut sse.field {
            LineField::Other => return,
            LineField::Data(space_allowed) => {
                if *space_allowed {
                    *space_allowed = false;
                    if bytes[0] == b' ' {
                        bytes = &bytes[1..];
                        continue;
                    }
                }
                sse.over.feed(bytes);
                return;
            }
            LineField::Name(name) => {
                let b = bytes[0];
                bytes = &bytes[1..];
                if b != b':' {
                    if name.len() >= 5 {
                        sse.field = LineField::Other;
                    } else {
                        name.push(b);
                    }
                    continue;
                }
                if name.as_slice() == b"data" {
                    if sse.data_lines > 0 {
                        sse.over.feed(b"\n");
                    }
                    sse.data_lines += 1;
                    sse.field = LineField::Data(true);
                } else {
                    sse.field = LineField::Other;
                }
            }
        }
    }
}

/// [`error_reply`] as the message type `T` a transport yields (`None` when `id` is not a
/// valid request id for it).
pub(crate) fn stand_in<T: serde::de::DeserializeOwned>(id: &Value, message: String) -> Option<T> {
    serde_json::from_value(error_reply(id, message)).ok()
}

/// A JSON-RPC error reply for `id`, standing in for the server's own reply that could not
/// be read, so the request fails at once with `message` instead of waiting for its
/// timeout.
fn error_reply(id: &Value, message: String) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": UNREADABLE_REPLY_CODE, "message": message },
    })
}

/// The message for a reply over the limit.
pub fn oversized_message(server: &str, bytes: usize, max: usize) -> String {
    format!(
        "server '{server}' sent a reply larger than {} ({} bytes seen; the limit for one \
         message is `maxMessageBytes`); the reply was dropped. If such large replies are \
         expected, raise `maxMessageBytes` in this server's settings",
        human_bytes(max),
        bytes
    )
}

/// The message for a reply that is not readable JSON-RPC (too deep, or malformed).
pub fn unreadable_message(server: &str, reason: &str) -> String {
    format!("server '{server}' sent a reply that cannot be read ({reason}); the reply was dropped")
}

/// `16 MiB`, `512 KiB`, `100 bytes`.
pub fn human_bytes(n: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(max: usize, chunks: &[&[u8]]) -> Vec<Frame> {
        let mut framer = LineFramer::new(max);
        let mut out = Vec::new();
        for c in chunks {
            framer.push(c, &mut out);
        }
        framer.finish(&mut out);
        out
    }

    fn events(max: usize, chunks: &[&[u8]]) -> Vec<SseFrame> {
        let mut parser = SseParser::new(max);
        let mut out = Vec::new();
        for c in chunks {
            parser.push(c, &mut out);
        }
        out
    }

    #[test]
    fn envelope_finds_id_wherever_it_is() {
        let e = EnvelopeScan::of(br#"{"jsonrpc":"2.0","id":7,"result":{"a":[1,{"id":9}]}}"#);
        assert_eq!(e.reply_id(), Some(&json!(7)));
        let e = EnvelopeScan::of(
            br#"{"result":{"id":"inner","x":"\"id\":3"},"jsonrpc":"2.0","id":"r-1"}"#,
        );
        assert_eq!(e.reply_id(), Some(&json!("r-1")));
        let e = EnvelopeScan::of(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert_eq!(e.reply_id(), None);
        assert!(e.has_method);
        let e = EnvelopeScan::of(br#"[{"id":1,"result":{}}]"#);
        assert_eq!(e, Envelope::default());
    }

    #[test]
    fn envelope_ignores_ids_that_are_not_numbers_or_strings() {
        let e = EnvelopeScan::of(br#"{"id":{"a":1},"result":{}}"#);
        assert_eq!(e.reply_id(), None);
        let long = format!(r#"{{"id":"{}","result":1}}"#, "x".repeat(1000));
        assert_eq!(EnvelopeScan::of(long.as_bytes()).reply_id(), None);
    }

    #[test]
    fn envelope_scan_of_deep_nesting_needs_no_stack() {
        let mut msg = br#"{"jsonrpc":"2.0","id":3,"result":"#.to_vec();
        msg.extend(std::iter::repeat_n(b'[', 1_000_000));
        msg.extend(std::iter::repeat_n(b']', 1_000_000));
        msg.push(b'}');
        assert_eq!(EnvelopeScan::of(&msg).reply_id(), Some(&json!(3)));
    }

    #[test]
    fn lines_split_across_chunks_and_crlf() {
        let out = lines(100, &[b"{\"a\":", b"1}\r\n\n{\"b\"", b":2}"]);
        assert_eq!(
            out,
            vec![
                Frame::Message(b"{\"a\":1}".to_vec()),
                Frame::Message(vec![]),
                Frame::Message(b"{\"b\":2}".to_vec()),
            ]
        );
    }

    #[test]
    fn an_oversized_line_is_reported_with_its_id_and_the_next_line_survives() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":42,"result":{{"text":"{}"}}}}"#,
            "x".repeat(5000)
        );
        let mut chunks: Vec<&[u8]> = big.as_bytes().chunks(300).collect();
        chunks.push(b"\n{\"jsonrpc\":\"2.0\",\"id\":43,\"result\":{}}\n");
        let out = lines(1000, &chunks);
        assert_eq!(out.len(), 2, "{out:?}");
        match &out[0] {
            Frame::Oversized { envelope, bytes } => {
                assert_eq!(envelope.reply_id(), Some(&json!(42)));
                assert!(*bytes > 1000);
            }
            other => panic!("expected oversized, got {other:?}"),
        }
        assert_eq!(
            out[1],
            Frame::Message(b"{\"jsonrpc\":\"2.0\",\"id\":43,\"result\":{}}".to_vec())
        );
    }

    #[test]
    fn an_id_at_the_end_is_reported_at_the_end() {
        let big = format!(r#"{{"result":{{"text":"{}"}},"id":5}}"#, "y".repeat(3000));
        let out = lines(100, &[big.as_bytes(), b"\n"]);
        match out.as_slice() {
            [Frame::Oversized { envelope, bytes }] => {
                assert_eq!(envelope.reply_id(), Some(&json!(5)));
                assert_eq!(*bytes, big.len());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_endless_line_keeps_memory_bounded() {
        let mut framer = LineFramer::new(1024);
        let mut out = Vec::new();
        framer.push(br#"{"jsonrpc":"2.0","id":1,"result":"#, &mut out);
        let chunk = vec![b'a'; 64 * 1024];
        for _ in 0..200 {
            framer.push(&chunk, &mut out);
            assert!(framer.line.capacity() <= 1024 * 2);
        }
        assert!(
            matches!(out.as_slice(), [Frame::Oversized { .. }]),
            "{out:?}"
        );
    }

    #[test]
    fn sse_events_follow_the_whatwg_rules() {
        let out = events(
            1000,
            &[
                b": comment\r\nevent: endpoint\r\ndata: /messages?s=1\r",
                b"\n\r\ndata:a\ndata: b\nid: 7\nretry: 30\n\n",
                b"data\n\nevent: x\n\n",
            ],
        );
        assert_eq!(
            out,
            vec![
                SseFrame::Event(SseEvent {
                    event: Some("endpoint".into()),
                    data: "/messages?s=1".into(),
                    ..Default::default()
                }),
                SseFrame::Event(SseEvent {
                    event: None,
                    data: "a\nb".into(),
                    id: Some("7".into()),
                    retry: Some(30),
                }),
                SseFrame::Event(SseEvent::default()),
            ]
        );
    }

    #[test]
    fn an_oversized_sse_event_is_reported_and_the_stream_goes_on() {
        let body = format!(
            "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":9,\ndata: \"result\":\"{}\"}}\n\n\
             data: {{\"jsonrpc\":\"2.0\",\"id\":10,\"result\":{{}}}}\n\n",
            "z".repeat(4000)
        );
        let chunks: Vec<&[u8]> = body.as_bytes().chunks(7).collect();
        let out = events(512, &chunks);
        assert_eq!(out.len(), 2, "{out:?}");
        match &out[0] {
            SseFrame::Oversized { envelope, .. } => {
                assert_eq!(envelope.reply_id(), Some(&json!(9)));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            out[1],
            SseFrame::Event(SseEvent {
                data: r#"{"jsonrpc":"2.0","id":10,"result":{}}"#.into(),
                ..Default::default()
            })
        );
    }

    #[test]
    fn an_endless_sse_line_keeps_memory_bounded() {
        let mut parser = SseParser::new(4096);
        let mut out = Vec::new();
        parser.push(b"data: ", &mut out);
        let chunk = vec![b'q'; 64 * 1024];
        for _ in 0..100 {
            parser.push(&chunk, &mut out);
            assert!(parser.line.capacity() + parser.data.capacity() <= 4096 * 2);
        }
        parser.push(b"\n\n", &mut out);
        assert!(
            matches!(out.as_slice(), [SseFrame::Oversized { .. }]),
            "{out:?}"
        );
    }

    #[test]
    fn error_reply_is_a_jsonrpc_error() {
        let v = error_reply(&json!(4), oversized_message("big", 99, 16 * 1024 * 1024));
        assert_eq!(v["id"], json!(4));
        assert_eq!(v["error"]["code"], json!(UNREADABLE_REPLY_CODE));
        let text = v["error"]["message"].as_str().unwrap();
        assert!(
            text.contains("'big'") && text.contains("16 MiB") && text.contains("maxMessageBytes")
        );
    }
}
