//! Server-sent events, as both model APIs stream their answers: a parser that accepts
//! input split anywhere, and [`events`], the `data` of each event of a response body in
//! order.
//!
//! Only `data` fields matter to the model APIs; comments and other fields are skipped.
//! One event holds at most 32 MiB (room for a generated image in base64); past that the
//! stream ends with an error naming the limit. Ours, like `switchboard-mcp`'s framers,
//! because the SSE crates we know buffer an event without a limit.

use std::collections::VecDeque;
use std::pin::Pin;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::error::{ApiKind, ModelError};
use crate::http::describe_reqwest;

/// A response body as bytes.
pub(crate) type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// The most one event may hold (its data plus an unfinished line): 32 MiB, room for a
/// generated image in base64. A model server is not trusted to end its events; one
/// that does not is cut off here rather than filling memory.
pub(crate) const MAX_EVENT_BYTES: usize = 32 * 1024 * 1024;

/// The `data` of each event of a body, in order; a broken body, or an event over
/// [`MAX_EVENT_BYTES`], ends it with one [`ModelError::Stream`].
pub(crate) type EventStream = Pin<Box<dyn Stream<Item = Result<String, ModelError>> + Send>>;

struct State {
    body: ByteStream,
    parser: SseParser,
    events: VecDeque<String>,
    done: bool,
}

/// The events of `body`, an answer of the `api`. A last event without its blank line is
/// still delivered at the end of the body.
pub(crate) fn events(api: ApiKind, body: ByteStream) -> EventStream {
    let limit = MAX_EVENT_BYTES;
    let state = State {
        body,
        parser: SseParser::default(),
        events: VecDeque::new(),
        done: false,
    };
    Box::pin(futures::stream::unfold(state, move |mut st| async move {
        loop {
            if let Some(data) = st.events.pop_front() {
                return Some((Ok(data), st));
            }
            if st.done {
                return None;
            }
            match st.body.next().await {
                Some(Ok(bytes)) => {
                    st.parser.feed(&bytes, &mut st.events);
                    if st.parser.pending() > limit {
                        st.done = true;
                        st.events.clear();
                        let message = format!(
                            "an event grew past {} MiB without ending; the server is not sending server-sent events as it should",
                            limit / (1024 * 1024)
                        );
                        return Some((Err(ModelError::Stream { api, message }), st));
                    }
                }
                Some(Err(source)) => {
                    st.done = true;
                    st.events.clear();
                    let message = describe_reqwest(&source);
                    return Some((Err(ModelError::Stream { api, message }), st));
                }
                None => {
                    st.parser.finish(&mut st.events);
                    st.done = true;
                }
            }
        }
    }))
}

/// A server-sent-events parser: lines end in `\n`, `\r` or `\r\n`, a blank line ends an
/// event, and input may be split anywhere (even between `\r` and `\n`). Only `data`
/// fields matter here; comments and other fields are skipped.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    /// The last byte seen was `\r`: a `\n` right after it belongs to the same line end.
    skip_lf: bool,
}

impl SseParser {
    /// Feeds bytes; completed events' data go to `out`.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], out: &mut VecDeque<String>) {
        while !bytes.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            match bytes.iter().position(|b| matches!(b, b'\n' | b'\r')) {
                None => {
                    self.line.extend_from_slice(bytes);
                    break;
                }
                Some(end) => {
                    self.line.extend_from_slice(&bytes[..end]);
                    self.skip_lf = bytes[end] == b'\r';
                    bytes = &bytes[end + 1..];
                    let line = std::mem::take(&mut self.line);
                    self.process_line(&line, out);
                    self.line = line;
                    self.line.clear();
                }
            }
        }
    }

    /// How many bytes wait for the end of their line or event.
    pub(crate) fn pending(&self) -> usize {
        self.line.len() + self.data.len()
    }

    /// End of input: a last event without its blank line is still delivered.
    pub(crate) fn finish(&mut self, out: &mut VecDeque<String>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out);
        }
        self.process_line(b"", out);
    }

    fn process_line(&mut self, line: &[u8], out: &mut VecDeque<String>) {
        if line.is_empty() {
            if self.has_data {
                out.push_back(std::mem::take(&mut self.data));
                self.has_data = false;
            }
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(&String::from_utf8_lossy(value));
            self.has_data = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_split(input: &[u8], cuts: &[usize]) -> Vec<String> {
        let mut parser = SseParser::default();
        let mut out = VecDeque::new();
        let mut start = 0;
        for &cut in cuts {
            parser.feed(&input[start..cut], &mut out);
            start = cut;
        }
        parser.feed(&input[start..], &mut out);
        parser.finish(&mut out);
        out.into_iter().collect()
    }

    #[test]
    fn sse_every_separator_and_every_split_point() {
        for sep in ["\n\n", "\r\r", "\r\n\r\n"] {
            let input = format!(
                "data: {{\"a\":1}}{sep}: comment{sep}event: x\ndata: {{\"b\":\"é\"}}{sep}data: {{\"c\":3}}{sep}"
            );
            let bytes = input.as_bytes();
            let want = vec![r#"{"a":1}"#, r#"{"b":"é"}"#, r#"{"c":3}"#];
            assert_eq!(parse_split(bytes, &[]), want, "sep {sep:?}");
            for cut in 0..=bytes.len() {
                assert_eq!(parse_split(bytes, &[cut]), want, "sep {sep:?} cut {cut}");
            }
            let every: Vec<usize> = (1..bytes.len()).collect();
            assert_eq!(parse_split(bytes, &every), want, "sep {sep:?} byte by byte");
        }
    }

    #[test]
    fn sse_multiline_data_and_missing_final_blank_line() {
        let got = parse_split(b"data: {\"a\":\ndata: 1}\n\ndata:{\"b\":2}", &[]);
        assert_eq!(got, vec!["{\"a\":\n1}", "{\"b\":2}"]);
    }
}
