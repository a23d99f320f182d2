//! An incremental Server-Sent Events decoder (the WHATWG `text/event-stream` format).
//!
//! Bytes may be split anywhere, including inside a line ending or a UTF-8 sequence. Lines end
//! with CRLF, LF or CR; `:` lines are comments; `data:` lines of one event are joined with
//! `\n`; a blank line dispatches the event; a leading byte-order mark is skipped. An event that
//! is still open when the input ends is not dispatched — [`SseDecoder::has_partial`] tells the
//! caller that the stream was cut.
//!
//! # Examples
//!
//! ```
//! use weft_provider::sse::SseDecoder;
//!
//! let mut decoder = SseDecoder::new();
//! let mut events = Vec::new();
//! decoder.push(b"event: ping\nda", &mut events);
//! decoder.push(b"ta: {\"a\":1}\r\n\r\n: comment\n", &mut events);
//! assert_eq!(events.len(), 1);
//! assert_eq!(events[0].event.as_deref(), Some("ping"));
//! assert_eq!(events[0].data, "{\"a\":1}");
//! assert!(!decoder.has_partial());
//! ```

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The joined `data:` lines.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
    /// The `retry:` field, if it was a number.
    pub retry: Option<u64>,
}

impl SseEvent {
    /// Whether this is OpenAI's end-of-stream marker `data: [DONE]`.
    pub fn is_done(&self) -> bool {
        self.data == "[DONE]"
    }
}

/// The decoder state. Feed it with [`SseDecoder::push`].
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of a line not yet terminated.
    line: Vec<u8>,
    /// The previous chunk ended with CR: a leading LF of the next chunk belongs to it.
    pending_cr: bool,
    /// Still at the very start (a BOM may follow).
    started: bool,
    current: SseEvent,
    has_data: bool,
    /// Any field seen since the last dispatch.
    dirty: bool,
    /// Size of the last event's data: the next one is likely similar, so reserve that much.
    last_data_len: usize,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// Decodes `chunk`, appending every completed event to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) {
        if !self.started {
            // Hold the first bytes until we know whether they are a byte-order mark.
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            let take = (BOM.len() - self.line.len()).min(chunk.len());
            self.line.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if self.line.len() < BOM.len() && BOM.starts_with(&self.line) {
                return;
            }
            self.started = true;
            let held = std::mem::take(&mut self.line);
            let rest = held.strip_prefix(BOM).unwrap_or(&held);
            self.push_bytes(rest, out);
        }
        self.push_bytes(chunk, out);
    }

    fn push_bytes(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) {
        if self.pending_cr && !chunk.is_empty() {
            self.pending_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', chunk) {
            let (line_part, rest) = chunk.split_at(pos);
            let is_cr = rest[0] == b'\r';
            chunk = &rest[1..];
            if is_cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    None => self.pending_cr = true,
                    Some(_) => {}
                }
            }
            if self.line.is_empty() {
                self.process_line(line_part, out);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(line_part);
                self.process_line(&line, out);
                line.clear();
                self.line = line;
            }
        }
        self.line.extend_from_slice(chunk);
    }

    /// Whether the input so far ends inside an event (an unterminated line or fields without
    /// the blank line that dispatches them): the stream was cut if it ends here.
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.dirty
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                self.last_data_len = self.current.data.len();
                out.push(std::mem::take(&mut self.current));
            } else {
                self.current = SseEvent::default();
            }
            self.has_data = false;
            self.dirty = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        self.dirty = true;
        match name {
            b"data" => {
                if self.has_data {
                    self.current.data.push('\n');
                } else if self.current.data.capacity() == 0 {
                    self.current
                        .data
                        .reserve(self.last_data_len.max(value.len()));
                }
                match std::str::from_utf8(value) {
                    Ok(text) => self.current.data.push_str(text),
                    Err(_) => self.current.data.push_str(&String::from_utf8_lossy(value)),
                }
                self.has_data = true;
            }
            b"event" => self.current.event = Some(String::from_utf8_lossy(value).into_owned()),
            b"id" if !value.contains(&0) => {
                self.current.id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" => {
                if let Ok(text) = std::str::from_utf8(value)
                    && let Ok(ms) = text.parse()
                {
                    self.current.retry = Some(ms);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn decode_all(chunks: &[&[u8]]) -> (Vec<SseEvent>, bool) {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.push(c, &mut out);
        }
        (out, d.has_partial())
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let (events, partial) = decode_all(&[b"data: a\ndata: b\ndata\n\n"]);
        assert_eq!(events[0].data, "a\nb\n");
        assert!(!partial);
    }

    #[test]
    fn cr_only_and_crlf_split_across_chunks() {
        let (events, _) = decode_all(&[b"data: x\r", b"\n\r", b"\ndata: y\r\r"]);
        assert_eq!(
            events.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(),
            ["x", "y"]
        );
    }

    #[test]
    fn comments_ids_retry_and_events_without_data() {
        let (events, _) =
            decode_all(&[b": hi\nid: 7\nretry: 1500\nevent: e\n\nevent: only\n\ndata: d\n\n"]);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "d");
        assert_eq!(events[0].event, None);
        let (events, _) = decode_all(&[b"id: 7\nretry: 1500\nevent: e\ndata: z\n\n"]);
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[0].retry, Some(1500));
        assert_eq!(events[0].event.as_deref(), Some("e"));
    }

    #[test]
    fn crlf_split_by_an_empty_chunk_is_one_line_ending() {
        let (events, _) = decode_all(&[b"event: e\r", b"", b"\ndata: x\r\n\r\n"]);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.as_deref(), Some("e"));
    }

    #[test]
    fn bom_is_skipped_even_when_split() {
        let (events, _) = decode_all(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]);
        assert_eq!(events[0].data, "a");
    }

    #[test]
    fn unterminated_event_is_partial_and_not_dispatched() {
        let (events, partial) = decode_all(&[b"data: {\"a\":1}\n\ndata: {\"cut"]);
        assert_eq!(events.len(), 1);
        assert!(partial);
        let (_, partial) = decode_all(&[b"data: whole line but no blank\n"]);
        assert!(partial);
    }

    #[test]
    fn done_marker() {
        let (events, _) = decode_all(&[b"data: [DONE]\n\n"]);
        assert!(events[0].is_done());
    }

    fn arb_event() -> impl Strategy<Value = (Option<String>, Vec<String>)> {
        (
            proptest::option::of("[a-z_.]{1,12}"),
            proptest::collection::vec("[^\r\n]{0,40}", 1..4),
        )
    }

    proptest! {
        #[test]
        fn any_split_and_any_line_ending_decode_the_same(
            events in proptest::collection::vec(arb_event(), 0..8),
            ending in prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let mut text = String::new();
            for (name, lines) in &events {
                text.push_str(": comment");
                text.push_str(ending);
                if let Some(name) = name {
                    text.push_str(&format!("event: {name}{ending}"));
                }
                for line in lines {
                    text.push_str(&format!("data: {line}{ending}"));
                }
                text.push_str(ending);
            }
            let bytes = text.as_bytes();
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&bytes[last..p]);
                last = p;
            }
            chunks.push(&bytes[last..]);
            let (decoded, partial) = decode_all(&chunks);
            prop_assert!(!partial);
            let expected: Vec<(Option<String>, String)> = events
                .iter()
                .map(|(n, l)| (n.clone(), l.join("\n")))
                .collect();
            let got: Vec<(Option<String>, String)> = decoded.into_iter().map(|e| (e.event, e.data)).collect();
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512), split in 0usize..512) {
            let split = split.min(data.len());
            let _ = decode_all(&[&data[..split], &data[split..]]);
        }
    }
}
