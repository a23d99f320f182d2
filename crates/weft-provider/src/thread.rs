//! `Thread`: a convenience wrapper around a message list (UPP-1.2 §8).
//!
//! A thread is accepted wherever history is: it dereferences to `[Message]`.

use std::ops::Deref;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::message::{Message, MessageType, new_id};
use crate::turn::Turn;

/// The JSON form of a thread (§8.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadJson {
    /// The thread id.
    pub id: String,
    /// The messages.
    pub messages: Vec<Message>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// An ordered list of messages with an id.
///
/// # Examples
///
/// ```
/// use weft_provider::{MessageType, Thread};
///
/// let mut thread = Thread::new();
/// thread.user("Hi");
/// thread.assistant("Hello!");
/// assert_eq!(thread.len(), 2);
/// assert_eq!(thread.filter(MessageType::User).len(), 1);
/// let copy = Thread::from_json(thread.to_json());
/// assert_eq!(copy.messages(), thread.messages());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Thread {
    id: String,
    messages: Vec<Message>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl Default for Thread {
    fn default() -> Self {
        Thread::new()
    }
}

impl Thread {
    /// An empty thread with a new id.
    pub fn new() -> Self {
        let now = Utc::now();
        Thread {
            id: new_id(),
            messages: Vec::new(),
            created_at: now,
            updated_at: now,
        }
    }

    /// A thread holding `messages`.
    pub fn from_messages(messages: Vec<Message>) -> Self {
        Thread {
            messages,
            ..Thread::new()
        }
    }

    /// The id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The messages (read-only).
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Number of messages (`length`).
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    fn touch(&mut self) {
        self.updated_at = Utc::now();
    }

    /// Appends every message of a turn.
    pub fn append(&mut self, turn: &Turn) {
        self.messages.extend(turn.messages().cloned());
        self.touch();
    }

    /// Appends messages.
    pub fn push(&mut self, messages: impl IntoIterator<Item = Message>) {
        self.messages.extend(messages);
        self.touch();
    }

    /// Appends a user text message.
    pub fn user(&mut self, content: impl Into<String>) {
        self.push([Message::user(content)]);
    }

    /// Appends an assistant text message.
    pub fn assistant(&mut self, content: impl Into<String>) {
        self.push([Message::assistant(content)]);
    }

    /// The messages of one type.
    pub fn filter(&self, message_type: MessageType) -> Vec<&Message> {
        self.messages
            .iter()
            .filter(|m| m.message_type() == message_type)
            .collect()
    }

    /// The last `n` messages.
    pub fn tail(&self, n: usize) -> &[Message] {
        &self.messages[self.messages.len().saturating_sub(n)..]
    }

    /// A new thread (new id) with the messages in `start..end` (clamped).
    pub fn slice(&self, start: Option<usize>, end: Option<usize>) -> Thread {
        let len = self.messages.len();
        let end = end.unwrap_or(len).min(len);
        let start = start.unwrap_or(0).min(end);
        Thread::from_messages(self.messages[start..end].to_vec())
    }

    /// Removes every message.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.touch();
    }

    /// A copy of the messages.
    pub fn to_messages(&self) -> Vec<Message> {
        self.messages.clone()
    }

    /// The JSON form.
    pub fn to_json(&self) -> ThreadJson {
        ThreadJson {
            id: self.id.clone(),
            messages: self.messages.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// Restores a thread with the same id, messages and times.
    pub fn from_json(json: ThreadJson) -> Self {
        Thread {
            id: json.id,
            messages: json.messages,
            created_at: json.created_at,
            updated_at: json.updated_at,
        }
    }
}

impl Deref for Thread {
    type Target = [Message];

    fn deref(&self) -> &[Message] {
        &self.messages
    }
}

impl<'a> IntoIterator for &'a Thread {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.messages.iter()
    }
}

impl Serialize for Thread {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Thread {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ThreadJson::deserialize(deserializer).map(Thread::from_json)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tail_and_slice_clamp() {
        let mut thread = Thread::new();
        for i in 0..5 {
            thread.user(format!("m{i}"));
        }
        assert_eq!(thread.tail(2).len(), 2);
        assert_eq!(thread.tail(99).len(), 5);
        let part = thread.slice(Some(1), Some(3));
        assert_eq!(part.len(), 2);
        assert_ne!(part.id(), thread.id());
        assert_eq!(thread.slice(Some(4), Some(2)).len(), 0);
        assert_eq!(thread.iter().count(), 5);
    }

    #[test]
    fn json_round_trip_keeps_ids_and_times() {
        let mut thread = Thread::new();
        thread.user("a");
        thread.assistant("b");
        let text = serde_json::to_string(&thread).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in ["id", "messages", "createdAt", "updatedAt"] {
            assert!(value.get(key).is_some(), "{key}");
        }
        let back: Thread = serde_json::from_str(&text).unwrap();
        assert_eq!(back, thread);
    }
}
