//! Server-sent events framing: an incremental decoder (bytes in any split → events) and the
//! encoder's framing (`data: <json>\n\n`, then `data: [DONE]\n\n`).

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any (e.g. `ping` heartbeats).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental SSE decoder (WHATWG HTML §9.2.6): feed bytes as they arrive, however split.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    event: Option<String>,
    started: bool,
    after_cr: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in bytes {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    self.end_line(&mut events);
                }
                _ => self.line.push(byte),
            }
        }
        events
    }

    /// Ends the stream. Unlike a browser, an event that lacks only its final blank line is
    /// still dispatched (a truncated `finish` chunk would otherwise vanish silently).
    pub fn finish(mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut events);
        }
        if self.has_data {
            events.push(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            });
        }
        events
    }

    fn end_line(&mut self, events: &mut Vec<SseEvent>) {
        let mut line = std::mem::take(&mut self.line);
        if !self.started {
            self.started = true;
            if line.starts_with(&[0xEF, 0xBB, 0xBF]) {
                line.drain(..3);
            }
        }
        if line.is_empty() {
            if self.has_data {
                events.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.has_data = false;
            self.event = None;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
    }
}

/// Frames one JSON text as an SSE event: `data: <json>\n\n`.
pub fn frame(json: &str, out: &mut String) {
    out.push_str("data: ");
    out.push_str(json);
    out.push_str("\n\n");
}

/// The end-of-stream marker the AI SDK sends: `data: [DONE]\n\n`.
pub const DONE: &str = "data: [DONE]\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_split_gives_same_events() {
        let stream = b"\xEF\xBB\xBFdata: {\"a\":1}\r\n\r\n: comment\nevent: ping\ndata: \n\ndata: x\ndata: y\n\ndata: [DONE]\n\n";
        let mut whole = SseDecoder::new();
        let expected = whole.push(stream);
        assert_eq!(expected.len(), 4);
        assert_eq!(expected[0].data, "{\"a\":1}");
        assert_eq!(expected[1].event.as_deref(), Some("ping"));
        assert_eq!(expected[2].data, "x\ny");
        for split in 0..stream.len() {
            let mut decoder = SseDecoder::new();
            let mut events = decoder.push(&stream[..split]);
            events.extend(decoder.push(&stream[split..]));
            assert_eq!(events, expected, "split at {split}");
        }
    }
}
