//! The `RuntimeMessageBus` (runtime spec §4.2): in-process publish/subscribe by topic
//! between the agents of one run tree.
//!
//! One bus belongs to a run and every child run of it (subagents, delegations: a child's
//! [`RunContext`](crate::ledger::RunContext) shares its root's). What goes over it today:
//!
//! * **child notifications** — every child run ([`crate::child::ChildRun`]) publishes
//!   [`BusMessage::ChildStarted`] when it opens, then [`BusMessage::ChildFinished`],
//!   [`BusMessage::ChildFailed`] or [`BusMessage::ChildSuspended`], on the topic
//!   [`child_topic`]`(reference)`;
//! * **delegation** — `delegate_to_agent` publishes [`BusMessage::Delegated`] on
//!   [`DELEGATION_TOPIC`] before its child starts, and subscribes to its child's topic: the
//!   notices it receives are what the run's log records of the child (`delegation` events);
//! * [`BusMessage::Note`]: free JSON any agent of the run may publish on a topic of its own.
//!
//! **Delivery.** Each subscription is a bounded channel ([`DEFAULT_CAPACITY`] messages
//! unless [`RuntimeMessageBus::with_capacity`] says otherwise). Publishing never waits: a
//! message for a subscriber whose channel is full is dropped for that subscriber and counted
//! ([`Subscription::dropped`]), so a slow reader never stalls a run. Subscriptions that were
//! dropped are forgotten at the next publish. Messages are not stored: a subscriber sees
//! what is published after it subscribed, in publish order. A resumed run has a new bus.
//!
//! **Beyond one process.** The bus is in-process; the workers issue carries the same topics
//! and messages over NATS (JetStream) so that agents of one run tree on several machines
//! talk alike. Nothing here is durable: what must survive a crash is in the store.
//!
//! # Examples
//!
//! ```
//! use weft_runtime::bus::{BusMessage, RuntimeMessageBus};
//!
//! let bus = RuntimeMessageBus::new();
//! let mut all = bus.subscribe("child.*");
//! let mut one = bus.subscribe("child.r-1");
//! let delivered = bus.publish(
//!     "child.r-1",
//!     "a",
//!     BusMessage::ChildStarted { reference: "r-1".into(), name: "coder".into(), depth: 1 },
//! );
//! assert_eq!(delivered, 2);
//! bus.publish("child.r-2", "a", BusMessage::Note { body: serde_json::json!(1) });
//! assert_eq!(one.try_recv().map(|e| e.topic), Some("child.r-1".to_owned()));
//! assert!(one.try_recv().is_none());
//! assert_eq!(all.try_recv().map(|e| e.seq), Some(1));
//! assert_eq!(all.try_recv().map(|e| e.from), Some("a".to_owned()));
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// Messages a subscription holds before further ones are dropped for it.
pub const DEFAULT_CAPACITY: usize = 64;

/// The topic of `delegate_to_agent`'s requests ([`BusMessage::Delegated`]).
pub const DELEGATION_TOPIC: &str = "delegation";

/// The topic of the child run `reference`'s notifications (`child.REFERENCE`); subscribe to
/// `child.*` for every child of the run tree.
///
/// # Examples
///
/// ```
/// assert_eq!(weft_runtime::bus::child_topic("r-1"), "child.r-1");
/// ```
pub fn child_topic(reference: &str) -> String {
    format!("child.{reference}")
}

/// A typed message of the bus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum BusMessage {
    /// A child run opened (a subagent's or a delegation's; again on a resume).
    ChildStarted {
        /// Its reference (thread id and lineage id).
        reference: String,
        /// Its agent (a subagent's name, a delegation's role).
        name: String,
        /// Its depth in the lineage (1: a child of the root agent).
        depth: u32,
    },
    /// A child run ended completed.
    ChildFinished {
        /// Its reference.
        reference: String,
        /// Its agent.
        name: String,
    },
    /// A child run ended failed.
    ChildFailed {
        /// Its reference.
        reference: String,
        /// Its agent.
        name: String,
    },
    /// A child run waits for a decision (its parent's call stays pending).
    ChildSuspended {
        /// Its reference.
        reference: String,
        /// Its agent.
        name: String,
    },
    /// `delegate_to_agent` is about to start the child `reference`.
    Delegated {
        /// The child's reference.
        reference: String,
        /// The spec's role (`researcher`, `coder`, `reviewer`, `analyst`).
        role: String,
        /// The task.
        task: String,
        /// The child's depth.
        depth: u32,
    },
    /// Anything else an agent of the run publishes.
    Note {
        /// The payload.
        body: serde_json::Value,
    },
}

/// A message as a subscriber receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// Its number on this bus (1, 2, …, in publish order).
    pub seq: u64,
    /// The topic it was published on.
    pub topic: String,
    /// The agent path of the publisher.
    pub from: String,
    /// The message.
    pub message: BusMessage,
}

struct Subscriber {
    pattern: String,
    tx: mpsc::Sender<Arc<Envelope>>,
    dropped: Arc<AtomicU64>,
}

/// The bus of one run tree (see the module docs).
pub struct RuntimeMessageBus {
    subscribers: Mutex<Vec<Subscriber>>,
    capacity: usize,
    seq: AtomicU64,
}

impl std::fmt::Debug for RuntimeMessageBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeMessageBus")
            .field("capacity", &self.capacity)
            .field("published", &self.seq.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for RuntimeMessageBus {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether `topic` matches `pattern`: equal, `*` (everything), or `PREFIX.*` (every topic
/// under `PREFIX.`).
///
/// # Examples
///
/// ```
/// use weft_runtime::bus::topic_matches;
/// assert!(topic_matches("child.*", "child.r-1"));
/// assert!(!topic_matches("child.*", "children"));
/// assert!(topic_matches("*", "delegation"));
/// assert!(topic_matches("delegation", "delegation"));
/// assert!(!topic_matches("delegation", "delegation.x"));
/// ```
pub fn topic_matches(pattern: &str, topic: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_suffix('*') {
        Some(prefix) if prefix.ends_with('.') => topic.starts_with(prefix),
        _ => pattern == topic,
    }
}

impl RuntimeMessageBus {
    /// A bus whose subscriptions hold [`DEFAULT_CAPACITY`] messages.
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// A bus whose subscriptions hold `capacity` messages (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        RuntimeMessageBus {
            subscribers: Mutex::new(Vec::new()),
            capacity: capacity.max(1),
            seq: AtomicU64::new(0),
        }
    }

    /// Subscribes to the topics `pattern` matches ([`topic_matches`]).
    pub fn subscribe(&self, pattern: &str) -> Subscription {
        let (tx, rx) = mpsc::channel(self.capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Subscriber {
                pattern: pattern.to_owned(),
                tx,
                dropped: dropped.clone(),
            });
        Subscription { rx, dropped }
    }

    /// Publishes `message` on `topic` as the agent `from`; returns how many subscribers it
    /// was delivered to (never waits: a full subscription loses it, see the module docs).
    pub fn publish(&self, topic: &str, from: &str, message: BusMessage) -> usize {
        let envelope = Arc::new(Envelope {
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            topic: topic.to_owned(),
            from: from.to_owned(),
            message,
        });
        let mut subscribers = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        subscribers.retain(|s| !s.tx.is_closed());
        let mut delivered = 0;
        for subscriber in subscribers.iter() {
            if !topic_matches(&subscriber.pattern, topic) {
                continue;
            }
            match subscriber.tx.try_send(envelope.clone()) {
                Ok(()) => delivered += 1,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    subscriber.dropped.fetch_add(1, Ordering::Relaxed);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        delivered
    }

    /// How many subscriptions are open.
    pub fn subscribers(&self) -> usize {
        let mut subscribers = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        subscribers.retain(|s| !s.tx.is_closed());
        subscribers.len()
    }
}

/// What a subscriber reads from (dropping it unsubscribes).
#[derive(Debug)]
pub struct Subscription {
    rx: mpsc::Receiver<Arc<Envelope>>,
    dropped: Arc<AtomicU64>,
}

impl Subscription {
    /// The next message, waiting for it (`None` once the bus is gone and every message
    /// was read).
    pub async fn recv(&mut self) -> Option<Envelope> {
        self.rx.recv().await.map(|e| (*e).clone())
    }

    /// The next message if one is there.
    pub fn try_recv(&mut self) -> Option<Envelope> {
        self.rx.try_recv().ok().map(|e| (*e).clone())
    }

    /// Messages lost because this subscription was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(n: i64) -> BusMessage {
        BusMessage::Note {
            body: serde_json::json!(n),
        }
    }

    #[tokio::test]
    async fn subscribers_get_their_topics_in_publish_order() {
        let bus = RuntimeMessageBus::new();
        let mut children = bus.subscribe("child.*");
        let mut delegation = bus.subscribe(DELEGATION_TOPIC);
        assert_eq!(bus.publish(&child_topic("r"), "a/coder", note(1)), 1);
        assert_eq!(bus.publish(DELEGATION_TOPIC, "a", note(2)), 1);
        assert_eq!(bus.publish(&child_topic("s"), "a/coder", note(3)), 1);
        assert_eq!(bus.publish("other", "a", note(4)), 0);
        let got: Vec<(u64, String)> = [children.recv().await, children.recv().await]
            .into_iter()
            .flatten()
            .map(|e| (e.seq, e.topic))
            .collect();
        assert_eq!(got, [(1, "child.r".into()), (3, "child.s".into())]);
        let d = delegation.recv().await.map(|e| (e.from, e.message));
        assert_eq!(d, Some(("a".into(), note(2))));
        assert!(children.try_recv().is_none() && delegation.try_recv().is_none());
    }

    #[tokio::test]
    async fn a_full_subscription_drops_and_counts_without_blocking_the_publisher() {
        let bus = RuntimeMessageBus::with_capacity(2);
        let mut slow = bus.subscribe("*");
        let mut fast = bus.subscribe("*");
        for n in 0..2 {
            assert_eq!(bus.publish("t", "a", note(n)), 2);
            assert!(fast.recv().await.is_some());
        }
        // `slow` holds two: the third is lost for it only.
        assert_eq!(bus.publish("t", "a", note(2)), 1);
        assert_eq!((slow.dropped(), fast.dropped()), (1, 0));
        assert_eq!(fast.recv().await.map(|e| e.message), Some(note(2)));
        let kept: Vec<BusMessage> = [slow.try_recv(), slow.try_recv(), slow.try_recv()]
            .into_iter()
            .flatten()
            .map(|e| e.message)
            .collect();
        assert_eq!(kept, [note(0), note(1)]);
    }

    #[tokio::test]
    async fn a_dropped_subscription_is_forgotten_and_messages_cross_tasks() {
        let bus = Arc::new(RuntimeMessageBus::new());
        let gone = bus.subscribe("*");
        drop(gone);
        let mut sub = bus.subscribe("child.*");
        assert_eq!(bus.subscribers(), 1);
        let publisher = bus.clone();
        let task = tokio::spawn(async move {
            publisher.publish(
                &child_topic("r"),
                "a/researcher",
                BusMessage::ChildFinished {
                    reference: "r".into(),
                    name: "researcher".into(),
                },
            )
        });
        assert_eq!(task.await.ok(), Some(1));
        let got = sub.recv().await.map(|e| e.message);
        assert!(
            matches!(got, Some(BusMessage::ChildFinished { ref reference, .. }) if reference == "r")
        );
    }

    #[test]
    fn messages_serialize_with_a_type_tag() {
        let m = BusMessage::Delegated {
            reference: "r".into(),
            role: "coder".into(),
            task: "t".into(),
            depth: 1,
        };
        assert_eq!(
            serde_json::to_value(&m).ok(),
            Some(
                serde_json::json!({"type": "delegated", "reference": "r", "role": "coder", "task": "t", "depth": 1})
            )
        );
    }
}
