//! The message history of an [`AgentState`](super::AgentState), stored compactly.
//!
//! A conversation is held in a few contiguous **segments** (up to [`SEGMENT_RECORDS`] messages
//! or about [`SEGMENT_BYTES`] bytes each), not one heap object per message. A segment is a byte
//! buffer of records, one per message:
//!
//! - a **compact record** for a user or assistant message whose content is text blocks only
//!   and that has no tool calls: a tag byte, the id (16 bytes when it is a UUID in its
//!   lowercase hyphenated form, else its length and bytes), the timestamp (8 bytes of
//!   nanoseconds, or seconds and nanoseconds outside 1677–2262), the metadata as JSON when
//!   there is any, and each text block's length and bytes. A 200-character message is 228
//!   bytes;
//! - a **shared record** (one tag byte) for every other message (tool calls and results,
//!   media, reasoning) and for messages someone else still holds: the `Arc<Message>` is kept
//!   beside the bytes, in the segment's `shared` list, in record order.
//!
//! A message becomes a compact record only when the history is its sole owner (an owned
//! `Message`, or an `Arc` nobody else holds): `with_message`, `with_messages`,
//! `with_context` and `from_json` (how a server reloads idle conversations) compact what they
//! are given; a run's step results, which its `Turn` shares, stay shared records, appended
//! without any encoding. Reading decodes: [`History::get`] and [`History::iter`] yield
//! `Cow<Message>`, borrowed for shared records and built for compact ones.
//!
//! **Sharing.** Sealed segments are immutable and shared by every state whose history
//! contains them. The last segment (the tail) is appended to in place when this history is
//! its only holder, else copied first (at most one segment, never the whole history) — so
//! cloning a history is O(1) and appending is O(appended + one segment).
//!
//! **Lineage.** A history gets a process-unique root token when its first message is
//! appended; appending keeps it, `with_context` and `from_json` start new ones. A sealed
//! segment is one object however many histories share it, and holds the same messages at
//! the same positions in all of them. So "this history was derived from `earlier` by
//! appending" is answered at the one segment holding `earlier`'s last message: same root,
//! the same sealed segment before it, and its records up to there equal (the same bytes,
//! the same shared `Arc`s) — O(one segment), never O(history) ([`History::extends`]).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use weft_provider::{AssistantMessage, ContentBlock, Message, TextBlock, UserMessage};

/// A segment is sealed once it holds this many records...
const SEGMENT_RECORDS: u32 = 32;
/// ... or this many bytes: appending to a shared tail copies at most about this much.
const SEGMENT_BYTES: usize = 8 * 1024;

// Tag byte: bits 0–1 the kind, then flags.
const KIND_MASK: u8 = 0b11;
const KIND_SHARED: u8 = 0;
const KIND_USER: u8 = 1;
const KIND_ASSISTANT: u8 = 2;
/// The id is a UUID, stored as its 16 bytes.
const FLAG_UUID: u8 = 1 << 2;
/// The timestamp is 8 bytes of nanoseconds (else 8 bytes of seconds and 4 of nanoseconds).
const FLAG_NANOS: u8 = 1 << 3;
/// Metadata follows, as JSON.
const FLAG_METADATA: u8 = 1 << 4;

/// A process-unique token for a new history.
fn next_root() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Contiguous records of consecutive messages.
#[derive(Clone, Default)]
struct Segment {
    /// Number of records.
    count: u32,
    /// The records.
    bytes: Vec<u8>,
    /// The messages of the shared records, in record order.
    shared: Vec<Arc<Message>>,
}

impl Segment {
    fn is_full(&self) -> bool {
        self.count >= SEGMENT_RECORDS || self.bytes.len() >= SEGMENT_BYTES
    }

    /// Appends a message: a compact record when nobody else holds it and it has one, else a
    /// shared record.
    fn push(&mut self, message: Arc<Message>) {
        let sole = Arc::strong_count(&message) == 1 && Arc::weak_count(&message) == 0;
        if !(sole && encode(&message, &mut self.bytes)) {
            self.bytes.push(KIND_SHARED);
            self.shared.push(message);
        }
        self.count += 1;
    }

    /// The record at `pos` and the position after it.
    fn read(&self, pos: Pos) -> Option<(Cow<'_, Message>, Pos)> {
        let mut reader = Reader::at(&self.bytes, pos.offset);
        let tag = reader.byte()?;
        if tag & KIND_MASK == KIND_SHARED {
            let message = self.shared.get(pos.shared)?;
            let next = Pos {
                offset: reader.offset,
                shared: pos.shared + 1,
            };
            return Some((Cow::Borrowed(&**message), next));
        }
        let message = decode(tag, &mut reader)?;
        let next = Pos {
            offset: reader.offset,
            shared: pos.shared,
        };
        Some((Cow::Owned(message), next))
    }

    /// Every record as a shared message, oldest first: a shared record's own `Arc`, a
    /// compact one decoded into a new one.
    fn shared_messages(&self) -> impl Iterator<Item = Arc<Message>> + '_ {
        let mut pos = Pos::default();
        (0..self.count).map_while(move |_| {
            let mut reader = Reader::at(&self.bytes, pos.offset);
            let tag = reader.byte()?;
            if tag & KIND_MASK == KIND_SHARED {
                let message = self.shared.get(pos.shared)?.clone();
                pos = Pos {
                    offset: reader.offset,
                    shared: pos.shared + 1,
                };
                return Some(message);
            }
            let message = decode(tag, &mut reader)?;
            pos = Pos {
                offset: reader.offset,
                shared: pos.shared,
            };
            Some(Arc::new(message))
        })
    }

    /// The position after the record at `pos`, without decoding it.
    fn skip(&self, pos: Pos) -> Option<Pos> {
        let mut reader = Reader::at(&self.bytes, pos.offset);
        let tag = reader.byte()?;
        if tag & KIND_MASK == KIND_SHARED {
            return Some(Pos {
                offset: reader.offset,
                shared: pos.shared + 1,
            });
        }
        if tag & FLAG_UUID != 0 {
            reader.take(16)?;
        } else {
            let len = reader.len()?;
            reader.take(len)?;
        }
        reader.take(if tag & FLAG_NANOS != 0 { 8 } else { 12 })?;
        if tag & FLAG_METADATA != 0 {
            let len = reader.len()?;
            reader.take(len)?;
        }
        for _ in 0..reader.len()? {
            let len = reader.len()?;
            reader.take(len)?;
        }
        Some(Pos {
            offset: reader.offset,
            shared: pos.shared,
        })
    }

    /// The position of record `index` (scanning from the start: a segment is small).
    fn position(&self, index: u32) -> Option<Pos> {
        (0..index).try_fold(Pos::default(), |pos, _| self.skip(pos))
    }

    /// Whether both segments start with the same `n` records (same bytes, same shared
    /// messages).
    fn same_prefix(&self, other: &Segment, n: u32) -> bool {
        let (Some(mine), Some(theirs)) = (self.position(n), other.position(n)) else {
            return false;
        };
        mine.offset == theirs.offset
            && mine.shared == theirs.shared
            && self.bytes.get(..mine.offset) == other.bytes.get(..theirs.offset)
            && self
                .shared
                .iter()
                .zip(&other.shared)
                .take(mine.shared)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// Where a record starts: its byte offset and how many shared records precede it.
#[derive(Debug, Clone, Copy, Default)]
struct Pos {
    offset: usize,
    shared: usize,
}

/// A sealed segment and the index of its first message in the history.
#[derive(Clone)]
struct Sealed {
    start: usize,
    segment: Arc<Segment>,
}

/// An agent state's messages: compact records in a few shared segments (see the module
/// documentation). Cloning is O(1).
#[derive(Clone, Default)]
pub(crate) struct History {
    /// Full segments, oldest first, each with its start index.
    sealed: Option<Arc<[Sealed]>>,
    /// The segment appended to.
    tail: Option<Arc<Segment>>,
    /// The number of messages.
    len: usize,
    /// The lineage's token (0 before the first message).
    root: u64,
}

impl History {
    /// A history of these messages (each compacted when nobody else holds it).
    pub(crate) fn from_messages(messages: impl IntoIterator<Item = Arc<Message>>) -> Self {
        let mut history = History::default();
        history.extend(messages);
        history.shrink();
        history
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends messages: in place when this history is the tail's only holder, else into a
    /// copy of the tail (the shared part stays shared).
    pub(crate) fn extend(&mut self, messages: impl IntoIterator<Item = Arc<Message>>) {
        for message in messages {
            if self.root == 0 {
                self.root = next_root();
            }
            if self.tail.as_ref().is_some_and(|tail| tail.is_full()) {
                self.seal();
            }
            let tail = self.tail.get_or_insert_with(Arc::default);
            if Arc::get_mut(tail).is_none() {
                // Shared: append to a copy of this one segment.
                *tail = Arc::new(Segment::clone(tail));
            }
            if let Some(segment) = Arc::get_mut(tail) {
                segment.push(message);
                self.len += 1;
            }
        }
    }

    /// Gives back the tail's spare capacity (after a bulk build: an idle history keeps no
    /// slack).
    pub(crate) fn shrink(&mut self) {
        if let Some(segment) = self.tail.as_mut().and_then(Arc::get_mut) {
            segment.bytes.shrink_to_fit();
            segment.shared.shrink_to_fit();
        }
    }

    /// Moves the full tail to the sealed segments.
    fn seal(&mut self) {
        self.shrink();
        let Some(segment) = self.tail.take() else {
            return;
        };
        let start = self.len - segment.count as usize;
        let mut sealed: Vec<Sealed> = self.sealed.as_deref().unwrap_or_default().to_vec();
        sealed.push(Sealed { start, segment });
        self.sealed = Some(sealed.into());
    }

    /// The segment holding message `index` and that segment's start index.
    fn segment_of(&self, index: usize) -> Option<(usize, &Segment)> {
        self.locate(index)
            .map(|(start, segment, _)| (start, segment))
    }

    /// [`History::segment_of`], with the sealed segment before it (if any).
    fn locate(&self, index: usize) -> Option<(usize, &Segment, Option<&Arc<Segment>>)> {
        if index >= self.len {
            return None;
        }
        let sealed = self.sealed.as_deref().unwrap_or_default();
        if let Some(tail) = &self.tail {
            let start = self.len - tail.count as usize;
            if index >= start {
                return Some((start, tail, sealed.last().map(|s| &s.segment)));
            }
        }
        let at = sealed
            .partition_point(|s| s.start <= index)
            .checked_sub(1)?;
        let before = at.checked_sub(1).and_then(|b| sealed.get(b));
        sealed
            .get(at)
            .map(|s| (s.start, &*s.segment, before.map(|b| &b.segment)))
    }

    /// The message at `index`.
    pub(crate) fn get(&self, index: usize) -> Option<Cow<'_, Message>> {
        let (start, segment) = self.segment_of(index)?;
        let pos = segment.position(u32::try_from(index - start).ok()?)?;
        segment.read(pos).map(|(message, _)| message)
    }

    /// The messages, oldest first, as shared messages (what a model request holds): the
    /// `Arc` of a message kept whole, a new one for a compact record.
    pub(crate) fn shared_iter(&self) -> impl Iterator<Item = Arc<Message>> + '_ {
        self.sealed
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|s| &*s.segment)
            .chain(self.tail.as_deref())
            .flat_map(Segment::shared_messages)
    }

    /// The messages, oldest first.
    pub(crate) fn iter(&self) -> Iter<'_> {
        Iter {
            history: self,
            front: 0,
            back: self.len,
            cursor: None,
            back_positions: None,
        }
    }

    /// Whether both are the same history object (same segments): then they hold the same
    /// messages. O(1).
    pub(crate) fn ptr_eq(&self, other: &History) -> bool {
        self.len == other.len
            && match (&self.sealed, &other.sealed) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
            && match (&self.tail, &other.tail) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }

    /// Whether this history starts with all of `earlier`'s messages because it was derived
    /// from it by appending (see the module documentation). O(log n + one segment).
    pub(crate) fn extends(&self, earlier: &History) -> bool {
        let Some(last) = earlier.len.checked_sub(1) else {
            return true;
        };
        if self.root != earlier.root {
            return false;
        }
        let (Some((start, mine, mine_before)), Some((their_start, theirs, theirs_before))) =
            (self.locate(last), earlier.locate(last))
        else {
            return false;
        };
        let same_before = match (mine_before, theirs_before) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        start == their_start
            && same_before
            && (std::ptr::eq(mine, theirs)
                || u32::try_from(last - start + 1).is_ok_and(|n| mine.same_prefix(theirs, n)))
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || (self.len == other.len && self.iter().eq(other.iter()))
    }
}

/// The messages of a [`History`], decoded one at a time.
pub(crate) struct Iter<'a> {
    history: &'a History,
    /// The next index from the front, and one past the next from the back.
    front: usize,
    back: usize,
    /// The front's segment, its start index and the position of message `front` in it.
    cursor: Option<(usize, &'a Segment, Pos)>,
    /// The back's segment, its start index and the positions of its records.
    back_positions: Option<(usize, &'a Segment, Vec<Pos>)>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Cow<'a, Message>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let index = self.front;
        let (start, segment, pos) = match self.cursor {
            Some((start, segment, pos)) if index < start + segment.count as usize => {
                (start, segment, pos)
            }
            _ => {
                let (start, segment) = self.history.segment_of(index)?;
                let pos = segment.position(u32::try_from(index - start).ok()?)?;
                (start, segment, pos)
            }
        };
        let (message, next) = segment.read(pos)?;
        self.cursor = Some((start, segment, next));
        self.front += 1;
        Some(message)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.back.saturating_sub(self.front);
        (left, Some(left))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let index = self.back - 1;
        let cached = matches!(&self.back_positions, Some((start, _, _)) if index >= *start);
        if !cached {
            let (start, segment) = self.history.segment_of(index)?;
            let mut positions = Vec::with_capacity(segment.count as usize);
            let mut pos = Pos::default();
            for _ in 0..segment.count {
                positions.push(pos);
                pos = segment.skip(pos)?;
            }
            self.back_positions = Some((start, segment, positions));
        }
        let (start, segment, positions) = self.back_positions.as_ref()?;
        let pos = *positions.get(index - start)?;
        let (message, _) = segment.read(pos)?;
        self.back -= 1;
        Some(message)
    }
}

impl ExactSizeIterator for Iter<'_> {}

// ----- records -----

/// Appends `message` as a compact record when it has one; false (nothing written) when not.
fn encode(message: &Message, out: &mut Vec<u8>) -> bool {
    let (kind, id, content, timestamp, metadata) = match message {
        Message::User(m) => (KIND_USER, &m.id, &m.content, m.timestamp, &m.metadata),
        Message::Assistant(m) if m.tool_calls.is_empty() => {
            (KIND_ASSISTANT, &m.id, &m.content, m.timestamp, &m.metadata)
        }
        _ => return false,
    };
    if !content.iter().all(|b| matches!(b, ContentBlock::Text(_))) {
        return false;
    }
    let mut tag = kind;
    let uuid = uuid_of(id);
    if uuid.is_some() {
        tag |= FLAG_UUID;
    }
    let nanos = timestamp
        .timestamp_nanos_opt()
        .filter(|&n| DateTime::from_timestamp_nanos(n) == timestamp);
    if nanos.is_some() {
        tag |= FLAG_NANOS;
    } else if DateTime::from_timestamp(timestamp.timestamp(), timestamp.timestamp_subsec_nanos())
        != Some(timestamp)
    {
        return false;
    }
    let metadata = match metadata {
        // Kept only when it reads back: JSON nested deeper than the reader's limit (128)
        // would not, so such a message stays a shared record.
        Some(map) => match serde_json::to_vec(map) {
            Ok(json) if serde_json::from_slice::<Map<String, Value>>(&json).is_ok() => Some(json),
            _ => return false,
        },
        None => None,
    };
    if metadata.is_some() {
        tag |= FLAG_METADATA;
    }
    let text_len: usize = content
        .iter()
        .filter_map(ContentBlock::as_text)
        .map(|t| t.len() + 2)
        .sum();
    out.reserve(1 + 16 + 12 + metadata.as_ref().map_or(0, |m| m.len() + 3) + 1 + text_len);
    out.push(tag);
    match uuid {
        Some(bytes) => out.extend_from_slice(&bytes),
        None => put_bytes(out, id.as_bytes()),
    }
    match nanos {
        Some(n) => out.extend_from_slice(&n.to_le_bytes()),
        None => {
            out.extend_from_slice(&timestamp.timestamp().to_le_bytes());
            out.extend_from_slice(&timestamp.timestamp_subsec_nanos().to_le_bytes());
        }
    }
    if let Some(json) = &metadata {
        put_bytes(out, json);
    }
    put_len(out, content.len());
    for text in content.iter().filter_map(ContentBlock::as_text) {
        put_bytes(out, text.as_bytes());
    }
    true
}

/// The 16 bytes of `id` when it is a UUID written exactly as the lowercase hyphenated form
/// reproduces it.
fn uuid_of(id: &str) -> Option<[u8; 16]> {
    if id.len() != uuid::fmt::Hyphenated::LENGTH {
        return None;
    }
    let uuid = uuid::Uuid::try_parse(id).ok()?;
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    (uuid.hyphenated().encode_lower(&mut text).as_bytes() == id.as_bytes())
        .then(|| *uuid.as_bytes())
}

/// The message of a compact record whose tag was just read.
fn decode(tag: u8, reader: &mut Reader<'_>) -> Option<Message> {
    let id = if tag & FLAG_UUID != 0 {
        let bytes: [u8; 16] = reader.take(16)?.try_into().ok()?;
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        uuid::Uuid::from_bytes(bytes)
            .hyphenated()
            .encode_lower(&mut text)
            .to_owned()
    } else {
        let len = reader.len()?;
        text(reader.take(len)?)
    };
    let timestamp = if tag & FLAG_NANOS != 0 {
        DateTime::from_timestamp_nanos(i64::from_le_bytes(reader.take(8)?.try_into().ok()?))
    } else {
        let secs = i64::from_le_bytes(reader.take(8)?.try_into().ok()?);
        let nanos = u32::from_le_bytes(reader.take(4)?.try_into().ok()?);
        DateTime::<Utc>::from_timestamp(secs, nanos)?
    };
    let metadata = if tag & FLAG_METADATA != 0 {
        let len = reader.len()?;
        Some(serde_json::from_slice::<Map<String, Value>>(reader.take(len)?).ok()?)
    } else {
        None
    };
    let blocks = reader.len()?;
    let mut content = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        let len = reader.len()?;
        content.push(ContentBlock::Text(TextBlock {
            text: text(reader.take(len)?),
        }));
    }
    Some(match tag & KIND_MASK {
        KIND_USER => Message::User(UserMessage {
            id,
            content,
            timestamp,
            metadata,
        }),
        _ => Message::Assistant(AssistantMessage {
            id,
            content,
            tool_calls: Vec::new(),
            timestamp,
            metadata,
        }),
    })
}

/// Bytes that were a `str` when written (checked with the fast validator; the lossy
/// conversion is only a fallback that never runs).
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

fn put_len(out: &mut Vec<u8>, mut len: usize) {
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// Reads a segment's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn at(bytes: &'a [u8], offset: usize) -> Self {
        Reader { bytes, offset }
    }

    fn byte(&mut self) -> Option<u8> {
        let byte = *self.bytes.get(self.offset)?;
        self.offset += 1;
        Some(byte)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.offset..self.offset.checked_add(n)?)?;
        self.offset += n;
        Some(slice)
    }

    /// A LEB128 length.
    fn len(&mut self) -> Option<usize> {
        let mut value = 0usize;
        for shift in (0..usize::BITS).step_by(7) {
            let byte = self.byte()?;
            value |= usize::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use weft_provider::{MessageOptions, ToolCall, ToolResult, ToolResultMessage};

    fn parse(json: Value) -> Message {
        serde_json::from_value(json).unwrap()
    }

    /// Every way a history hands a message out gives back an equal message, and the JSON of
    /// the whole history is the JSON of the list it was built from.
    fn assert_round_trip(messages: &[Message]) -> History {
        let history = History::from_messages(messages.iter().cloned().map(Arc::new));
        assert_eq!(history.len(), messages.len());
        let forward: Vec<Message> = history.iter().map(Cow::into_owned).collect();
        assert_eq!(forward, messages);
        let mut backward: Vec<Message> = history.iter().rev().map(Cow::into_owned).collect();
        backward.reverse();
        assert_eq!(backward, messages);
        for (i, message) in messages.iter().enumerate() {
            assert_eq!(history.get(i).as_deref(), Some(message), "message {i}");
        }
        assert!(history.get(messages.len()).is_none());
        assert_eq!(
            serde_json::to_string(&history.iter().collect::<Vec<_>>()).unwrap(),
            serde_json::to_string(messages).unwrap()
        );
        history
    }

    fn kinds(history: &History) -> Vec<&'static str> {
        history
            .iter()
            .map(|m| match m {
                Cow::Borrowed(_) => "shared",
                Cow::Owned(_) => "compact",
            })
            .collect()
    }

    #[test]
    fn text_messages_become_compact_records_and_decode_equal() {
        let with_id = |id: &str, metadata: Option<Value>| MessageOptions {
            id: Some(id.into()),
            metadata: metadata.map(|m| m.as_object().unwrap().clone()),
        };
        let mut far_future = UserMessage::new(vec![ContentBlock::text("year 2500")]);
        far_future.timestamp = "2500-01-01T00:00:00.123456789Z".parse().unwrap();
        let mut far_past = AssistantMessage::text("year 1000");
        far_past.timestamp = "1000-06-30T12:00:00Z".parse().unwrap();
        let messages = vec![
            Message::user("plain"),
            Message::assistant("reply, ünïcödé ✓"),
            // Ids that are not a lowercase hyphenated UUID are kept as written.
            UserMessage::with_options(vec![ContentBlock::text("x")], with_id("user-1", None))
                .into(),
            UserMessage::with_options(
                vec![ContentBlock::text("x")],
                with_id("6BA7B810-9DAD-11D1-80B4-00C04FD430C8", None),
            )
            .into(),
            UserMessage::with_options(vec![], with_id("", None)).into(),
            // Metadata, floats and key order included.
            AssistantMessage::new(
                vec![
                    ContentBlock::text("a"),
                    ContentBlock::text(""),
                    ContentBlock::text("c"),
                ],
                vec![],
                with_id(
                    "m-2",
                    Some(
                        json!({"z": {"finishReason": "stop", "t": 0.1, "n": [1, -2, 3.5e300]},
                                "a": null}),
                    ),
                ),
            )
            .unwrap()
            .into(),
            far_future.into(),
            far_past.into(),
            Message::user("x".repeat(100_000)),
        ];
        let history = assert_round_trip(&messages);
        assert!(kinds(&history).iter().all(|k| *k == "compact"));
    }

    #[test]
    fn metadata_too_deep_to_read_back_keeps_its_message_whole() {
        // serde_json reads at most 128 levels: such metadata cannot be a compact record
        // (decoding it would fail and cut the history short).
        let mut deep = json!("leaf");
        for _ in 0..200 {
            deep = json!({ "a": deep });
        }
        let options = MessageOptions {
            id: Some("deep".into()),
            metadata: deep.as_object().cloned(),
        };
        let messages = vec![
            UserMessage::with_options(vec![ContentBlock::text("deep")], options).into(),
            Message::user("after"),
        ];
        let history = assert_round_trip(&messages);
        assert_eq!(kinds(&history), ["shared", "compact"]);
    }

    #[test]
    fn other_content_is_kept_whole_and_survives() {
        let messages = vec![
            parse(
                json!({"type": "user", "id": "u", "timestamp": "2026-01-01T00:00:00Z",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"},
                     "mimeType": "image/png", "width": 3},
                    {"type": "document", "source": {"type": "text", "data": "doc"},
                     "mimeType": "text/plain", "title": "t"},
                    {"type": "audio", "data": "AAEC", "mimeType": "audio/wav", "duration": 1.5},
                    {"type": "video", "data": "AAEC", "mimeType": "video/mp4"},
                    {"type": "binary", "data": "AAEC", "mimeType": "application/octet-stream"}
                ]}),
            ),
            parse(
                json!({"type": "assistant", "id": "a", "timestamp": "2026-01-01T00:00:01Z",
                "content": [{"type": "reasoning", "text": "why", "signature": "sig",
                             "metadata": {"anthropic": {"x": 1}}},
                            {"type": "text", "text": "because"}]}),
            ),
            AssistantMessage::new(
                vec![],
                vec![ToolCall::new("c1", "add", json!({"a": 1}))],
                MessageOptions::default(),
            )
            .unwrap()
            .into(),
            ToolResultMessage::new(vec![ToolResult {
                tool_call_id: "c1".into(),
                result: json!(2),
                is_error: false,
            }])
            .into(),
            Message::user("after"),
        ];
        let history = assert_round_trip(&messages);
        assert_eq!(
            kinds(&history),
            ["shared", "shared", "shared", "shared", "compact"]
        );
    }

    #[test]
    fn a_200_character_message_is_one_228_byte_record() {
        let text = "x".repeat(200);
        let history = History::from_messages((0..20).map(|j| {
            Arc::new(if j % 2 == 0 {
                Message::user(text.clone())
            } else {
                Message::assistant(text.clone())
            })
        }));
        let tail = history.tail.as_ref().unwrap();
        assert!(history.sealed.is_none());
        // Tag, 16-byte id, 8-byte timestamp, block count, 2-byte length, the text.
        assert_eq!(tail.bytes.len(), 20 * 228);
        assert_eq!(tail.bytes.capacity(), tail.bytes.len());
        assert!(tail.shared.is_empty());
    }

    #[test]
    fn messages_someone_else_holds_stay_shared() {
        let held = Arc::new(Message::user("held"));
        let history = History::from_messages([held.clone(), Arc::new(Message::user("mine"))]);
        assert_eq!(kinds(&history), ["shared", "compact"]);
        let Some(Cow::Borrowed(first)) = history.get(0) else {
            panic!("not borrowed")
        };
        assert!(std::ptr::eq(first, &*held));
    }

    #[test]
    fn long_histories_span_segments_read_from_both_ends() {
        let messages: Vec<Message> = (0..200)
            .map(|i| match i % 3 {
                0 => Message::user(format!("u{i} {}", "y".repeat(i * 10))),
                1 => Message::assistant(format!("a{i}")),
                _ => ToolResultMessage::new(vec![]).into(),
            })
            .collect();
        let history = assert_round_trip(&messages);
        let sealed = history.sealed.as_deref().unwrap();
        assert!(sealed.len() >= 6, "{} sealed segments", sealed.len());
        // Both ends meet in the middle without repeating or skipping a message.
        let mut iter = history.iter();
        let mut seen = Vec::new();
        while let (Some(a), Some(b)) = (iter.next(), iter.next_back()) {
            seen.push(a.id().to_owned());
            seen.push(b.id().to_owned());
        }
        assert_eq!(seen.len(), 200);
        assert_eq!(iter.len(), 0);
    }

    #[test]
    fn appending_copies_only_a_shared_tail_and_extends_follows_lineage() {
        let base = History::from_messages((0..40).map(|i| Arc::new(Message::user(format!("{i}")))));
        let sealed_before = base.sealed.clone().unwrap();
        // Two branches of one history: each sees its own message, both extend the base.
        let mut a = base.clone();
        a.extend([Arc::new(Message::user("a"))]);
        let mut b = base.clone();
        b.extend([Arc::new(Message::user("b"))]);
        assert_eq!(a.get(40).unwrap().text(), "a");
        assert_eq!(b.get(40).unwrap().text(), "b");
        assert_eq!(base.len(), 40);
        assert!(Arc::ptr_eq(a.sealed.as_ref().unwrap(), &sealed_before));
        assert!(a.extends(&base) && b.extends(&base) && base.extends(&base));
        assert!(!a.extends(&b) && !b.extends(&a) && !base.extends(&a));
        // The base's own segment grows in place once nobody else holds it; the branches'
        // copies still extend only the records they copied.
        let mut grown = base;
        let tail = Arc::as_ptr(grown.tail.as_ref().unwrap());
        grown.extend([Arc::new(Message::user("c"))]);
        assert_eq!(Arc::as_ptr(grown.tail.as_ref().unwrap()), tail);
        assert!(!a.extends(&grown) && !grown.extends(&a));
        // A new history with equal messages is not a continuation.
        let copy = History::from_messages(grown.iter().map(|m| Arc::new(m.into_owned())));
        assert_eq!(copy, grown);
        assert!(!copy.extends(&grown) && !copy.ptr_eq(&grown));
        // Across a seal: the sealed segment is a copy of the tail the earlier history held.
        let mut long = a.clone();
        long.extend((0..40).map(|i| Arc::new(Message::user(format!("more {i}")))));
        assert!(long.sealed.as_ref().unwrap().len() > sealed_before.len());
        assert!(long.extends(&a) && !long.extends(&b));
        assert!(History::default().extends(&History::default()));
        assert!(long.extends(&History::default()));
    }
}
