//! `sse_decode`: weft-provider's SSE decoder.

use weft_provider::sse::{SseDecoder, SseEvent};

fn decode(chunks: &[&[u8]]) -> (Vec<SseEvent>, bool) {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        decoder.push(chunk, &mut events);
    }
    (events, decoder.has_partial())
}

/// Any bytes: the same events (and the same "cut" verdict) whether the input arrives whole,
/// in two chunks cut anywhere, or byte by byte; no event's fields contain a line ending
/// (they end lines), and no `id` contains NUL.
pub fn sse_decode(data: &[u8]) {
    let whole = decode(&[data]);
    for point in crate::splits::points(data) {
        let (a, b) = data.split_at(point);
        assert_eq!(decode(&[a, b]), whole, "cut at {point}");
    }
    if data.len() <= 4096 {
        let bytes: Vec<&[u8]> = data.chunks(1).collect();
        assert_eq!(decode(&bytes), whole, "byte by byte");
    }
    for event in &whole.0 {
        assert!(!event.data.contains('\r'), "CR inside data: {event:?}");
        for field in [event.event.as_deref(), event.id.as_deref()]
            .into_iter()
            .flatten()
        {
            assert!(
                !field.contains(['\r', '\n']),
                "line ending in a field: {event:?}"
            );
        }
        assert!(!event.id.as_deref().unwrap_or("").contains('\0'));
    }
}
