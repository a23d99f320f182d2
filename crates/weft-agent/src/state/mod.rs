//! `AgentState`: the immutable snapshot of an agent's execution (UAP-1.0 §6, §8.8).
//!
//! **Invariant:** an `AgentState` is a value. Every `with_*` method returns a new state with a
//! new UUIDv4 id and leaves `self` untouched; no method takes `&mut self`.
//!
//! **Representation:** the message history is a [`History`](history): compact records in a
//! few contiguous, shared segments (a 200-character message costs 228 bytes; messages with
//! tool calls, tool results, media or reasoning, and messages a run's `Turn` shares, are kept
//! as shared `Arc<Message>`s beside the records). Reading decodes, so [`AgentState::messages`]
//! yields `Cow<Message>`. The reasoning traces and the sub-agent traces are persistent vectors
//! (`imbl::Vector`) of `Arc`ed items. Cloning a state or forking it into two branches is
//! O(1); appending copies at most the history's last segment, never the messages before it.
//! Metadata, reasoning traces, the plan and the
//! sub-agent traces sit together behind one `Arc` (one pointer in the state; most states have
//! none of them and share one empty set), copied only when one of them changes. The state id
//! is kept inline (its 36 characters, no allocation per derived state).
//!
//! **Invariant (history lineage):** no operation removes, reorders or rewrites messages or
//! traces: appends extend a shared history (a segment's first records never change once
//! written), `with_context` builds a new one. A reasoning or sub-agent trace gets its `Arc`
//! when it is inserted, so two states holding the same `Arc` at the same position share
//! everything before it; for messages the history's segments record where they were copied
//! from. That is what makes [`AgentState::extends`] O(log n).

mod history;
mod json;
mod plan;
mod trace;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};
use weft_provider::Message;

pub(crate) use history::History;
pub use json::{AgentStateJson, FromJsonOptions, STATE_VERSION};
pub(crate) use plan::topological_order;
pub use plan::{PlanStep, PlanStepStatus};
pub(crate) use trace::value_text;
pub use trace::{SubagentExecutionTrace, ToolExecutionTrace};

/// The metadata key under which the session id is kept (UAP-1.0 §3.4).
pub const SESSION_ID_KEY: &str = "sessionId";

/// A fresh UUIDv4 string.
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A state's id: a generated UUID kept inline as its 36 characters (no allocation: every
/// `with_*` makes one), or an id given by `from_json`, kept as is.
#[derive(Clone)]
enum StateId {
    Generated([u8; 36]),
    Given(Arc<str>),
}

impl StateId {
    /// A fresh UUIDv4. The random bits come from a per-thread generator seeded from the OS (no
    /// system call per id): ids must be unique, not secret.
    fn new() -> Self {
        let mut text = [0u8; 36];
        uuid::Builder::from_random_bytes(fastrand::u128(..).to_le_bytes())
            .into_uuid()
            .hyphenated()
            .encode_lower(&mut text);
        StateId::Generated(text)
    }

    fn as_str(&self) -> &str {
        match self {
            // Always ASCII (written by `encode_lower`), so the check never fails.
            StateId::Generated(text) => std::str::from_utf8(text).unwrap_or_default(),
            StateId::Given(id) => id,
        }
    }
}

impl From<String> for StateId {
    fn from(id: String) -> Self {
        StateId::Given(Arc::from(id))
    }
}

/// The parts of a state most states leave empty: one shared allocation instead of four fields.
#[derive(Clone, PartialEq)]
struct Extras {
    metadata: Arc<Map<String, Value>>,
    reasoning: imbl::Vector<Arc<str>>,
    plan: Option<Arc<[PlanStep]>>,
    subagent_traces: imbl::Vector<Arc<SubagentExecutionTrace>>,
}

/// The extras of every state that has none (one allocation per process).
fn no_extras() -> Arc<Extras> {
    static EMPTY: std::sync::LazyLock<Arc<Extras>> = std::sync::LazyLock::new(|| {
        Arc::new(Extras {
            metadata: Arc::new(Map::new()),
            reasoning: imbl::Vector::new(),
            plan: None,
            subagent_traces: imbl::Vector::new(),
        })
    });
    EMPTY.clone()
}

/// An immutable snapshot of agent execution state (UAP-1.0 §6).
///
/// # Examples
///
/// ```
/// use weft_agent::AgentState;
/// use weft_provider::Message;
///
/// let s0 = AgentState::initial();
/// let s1 = s0.with_message(Message::user("Hello")).with_message(Message::assistant("Hi"));
/// let appended = s1.with_messages([Message::user("Goodbye")]);
/// let replaced = s1.with_context([Message::user("Fresh start")]);
///
/// assert_eq!(s0.message_count(), 0);          // s0 never changes
/// assert_eq!(s1.message_count(), 2);
/// assert_eq!(appended.message_count(), 3);    // with_messages appends
/// assert_eq!(replaced.message_count(), 1);    // with_context replaces
/// assert_ne!(s1.id(), appended.id());         // every derived state has a new id
///
/// let restored = AgentState::from_json(appended.to_json())?;
/// assert_eq!(restored, appended);             // same id, same content
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct AgentState {
    id: StateId,
    step: u64,
    messages: History,
    extras: Arc<Extras>,
}

impl Default for AgentState {
    fn default() -> Self {
        AgentState::initial()
    }
}

impl fmt::Debug for AgentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentState")
            .field("id", &self.id())
            .field("messages", &self.messages.len())
            .field("step", &self.step)
            .field("metadata", &self.extras.metadata)
            .field("reasoning", &self.extras.reasoning.len())
            .field("plan", &self.extras.plan.as_ref().map(|p| p.len()))
            .field("subagent_traces", &self.extras.subagent_traces.len())
            .finish()
    }
}

impl PartialEq for AgentState {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id() && self.same_content(other)
    }
}

impl AgentState {
    /// The empty state: no messages, step 0, empty metadata and reasoning, no plan.
    pub fn initial() -> Self {
        AgentState {
            id: StateId::new(),
            step: 0,
            messages: History::default(),
            extras: no_extras(),
        }
    }

    /// A copy with a new id: the starting point of every `with_*`.
    fn derive(&self) -> Self {
        AgentState {
            id: StateId::new(),
            ..self.clone()
        }
    }

    // ----- reading -----

    /// The state's id (a UUIDv4 for states made here; kept as given by `from_json`).
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The conversation history, oldest first: each message borrowed when the history keeps
    /// it whole, else decoded from its compact record (see the module documentation).
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_agent::AgentState;
    /// use weft_provider::Message;
    ///
    /// let state = AgentState::initial().with_messages([Message::user("a"), Message::assistant("b")]);
    /// let texts: Vec<String> = state.messages().map(|m| m.text()).collect();
    /// assert_eq!(texts, ["a", "b"]);
    /// assert!(matches!(&*state.messages().next_back().unwrap(), Message::Assistant(_)));
    /// ```
    pub fn messages(
        &self,
    ) -> impl DoubleEndedIterator<Item = Cow<'_, Message>> + ExactSizeIterator + '_ {
        self.messages.iter()
    }

    /// The number of messages.
    pub fn message_count(&self) -> usize {
        self.messages.len()
    }

    /// The message at `index` (borrowed or decoded, as [`AgentState::messages`]).
    pub fn message(&self, index: usize) -> Option<Cow<'_, Message>> {
        self.messages.get(index)
    }

    /// The last message.
    pub fn last_message(&self) -> Option<Cow<'_, Message>> {
        self.messages
            .len()
            .checked_sub(1)
            .and_then(|last| self.messages.get(last))
    }

    /// The history as an owned list, for `LlmInstance::generate` (clones or decodes every
    /// message).
    pub fn messages_vec(&self) -> Vec<Message> {
        self.messages.iter().map(Cow::into_owned).collect()
    }

    /// The step number: an integer sequence, 0 before any step.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// User metadata.
    pub fn metadata(&self) -> &Map<String, Value> {
        &self.extras.metadata
    }

    /// The session id recorded by checkpointing (`metadata.sessionId`).
    pub fn session_id(&self) -> Option<&str> {
        self.extras
            .metadata
            .get(SESSION_ID_KEY)
            .and_then(Value::as_str)
    }

    /// The reasoning traces (ReAct), oldest first.
    pub fn reasoning(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator + '_ {
        self.extras.reasoning.iter().map(|r| &**r)
    }

    /// The plan (`plan()` strategy), if any.
    pub fn plan(&self) -> Option<&[PlanStep]> {
        self.extras.plan.as_deref()
    }

    /// The sub-agent traces, oldest first.
    pub fn subagent_traces(
        &self,
    ) -> impl DoubleEndedIterator<Item = &SubagentExecutionTrace> + ExactSizeIterator + '_ {
        self.extras.subagent_traces.iter().map(|t| &**t)
    }

    /// Whether both states hold the same content (ids of the states themselves ignored;
    /// message ids compared).
    pub fn same_content(&self, other: &Self) -> bool {
        self.step == other.step
            && self.messages == other.messages
            && (Arc::ptr_eq(&self.extras, &other.extras) || self.extras == other.extras)
    }

    /// Whether this state's history (messages, reasoning traces and sub-agent traces) starts
    /// with all of `earlier`'s: true when `self` was derived from `earlier` by appending, false after a
    /// `with_context` replacement or for unrelated states. O(log n): it compares the shared
    /// items at `earlier`'s last positions, never the whole history (see the lineage
    /// invariant above). Stores use it to write only what a step added.
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_agent::AgentState;
    /// use weft_provider::Message;
    ///
    /// let s1 = AgentState::initial().with_message(Message::user("Hello"));
    /// let s2 = s1.with_message(Message::assistant("Hi")).with_step(1);
    /// assert!(s2.extends(&s1));
    /// assert!(!s1.extends(&s2));
    /// assert!(!s2.with_context([Message::user("Hello")]).extends(&s1));
    /// ```
    pub fn extends(&self, earlier: &AgentState) -> bool {
        fn prefix<T: ?Sized>(
            longer: &imbl::Vector<Arc<T>>,
            shorter: &imbl::Vector<Arc<T>>,
        ) -> bool {
            match shorter.len().checked_sub(1) {
                None => true,
                Some(last) => {
                    longer.len() > last
                        && longer
                            .get(last)
                            .zip(shorter.get(last))
                            .is_some_and(|(a, b)| Arc::ptr_eq(a, b))
                }
            }
        }
        self.messages.extends(&earlier.messages)
            && prefix(&self.extras.reasoning, &earlier.extras.reasoning)
            && prefix(
                &self.extras.subagent_traces,
                &earlier.extras.subagent_traces,
            )
    }

    // ----- deriving -----

    /// Appends one message.
    #[must_use]
    pub fn with_message(&self, message: Message) -> Self {
        self.with_messages([message])
    }

    /// Appends several messages: owned `Message`s, or `Arc<Message>`s shared with their other
    /// owners (a [`weft_provider::Turn`]'s messages), which are then not copied (kept shared
    /// instead of compacted).
    #[must_use]
    pub fn with_messages<M: Into<Arc<Message>>>(
        &self,
        messages: impl IntoIterator<Item = M>,
    ) -> Self {
        let mut next = self.derive();
        next.messages.extend(messages.into_iter().map(Into::into));
        // The tail was copied or built here: an idle state keeps no spare capacity.
        next.messages.shrink();
        next
    }

    /// Replaces the whole history (context-window management).
    #[must_use]
    pub fn with_context(&self, messages: impl IntoIterator<Item = Message>) -> Self {
        let mut next = self.derive();
        next.messages = History::from_messages(messages.into_iter().map(Arc::new));
        next
    }

    /// Sets the step number.
    #[must_use]
    pub fn with_step(&self, step: u64) -> Self {
        let mut next = self.derive();
        next.step = step;
        next
    }

    /// Sets one metadata entry.
    #[must_use]
    pub fn with_metadata(&self, key: impl Into<String>, value: Value) -> Self {
        let mut next = self.derive();
        Arc::make_mut(&mut Arc::make_mut(&mut next.extras).metadata).insert(key.into(), value);
        next
    }

    /// Appends one reasoning trace.
    #[must_use]
    pub fn with_reasoning(&self, reasoning: impl Into<String>) -> Self {
        let mut next = self.derive();
        Arc::make_mut(&mut next.extras)
            .reasoning
            .push_back(Arc::from(reasoning.into()));
        next
    }

    /// Sets the plan.
    #[must_use]
    pub fn with_plan(&self, plan: impl Into<Vec<PlanStep>>) -> Self {
        let mut next = self.derive();
        Arc::make_mut(&mut next.extras).plan = Some(Arc::from(plan.into()));
        next
    }

    /// Appends one sub-agent trace.
    #[must_use]
    pub fn with_subagent_trace(&self, trace: SubagentExecutionTrace) -> Self {
        let mut next = self.derive();
        Arc::make_mut(&mut next.extras)
            .subagent_traces
            .push_back(Arc::new(trace));
        next
    }

    /// Several changes under one new id (used by strategies at step ends).
    /// The shared history (for O(1) "same history?" checks with [`History::ptr_eq`]).
    pub(crate) fn message_vector(&self) -> &History {
        &self.messages
    }

    pub(crate) fn with_step_result(
        &self,
        step: u64,
        messages: impl IntoIterator<Item = Arc<Message>>,
        traces: Vec<SubagentExecutionTrace>,
    ) -> Self {
        self.clone().into_step_result(step, messages, traces)
    }

    /// [`AgentState::with_step_result`] consuming this state: when nothing else shares the
    /// history's last segment, the messages are appended in place (the derived state is still a
    /// new value with a new id; only this one, which nobody can see any more, is reused).
    pub(crate) fn into_step_result(
        self,
        step: u64,
        messages: impl IntoIterator<Item = Arc<Message>>,
        traces: Vec<SubagentExecutionTrace>,
    ) -> Self {
        let mut next = self;
        next.id = StateId::new();
        next.step = step;
        next.messages.extend(messages);
        if !traces.is_empty() {
            Arc::make_mut(&mut next.extras)
                .subagent_traces
                .extend(traces.into_iter().map(Arc::new));
        }
        next
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_state_is_small_and_states_without_extras_share_them() {
        // id (36 characters inline), step, the history (40 bytes), one pointer to the extras.
        assert!(std::mem::size_of::<AgentState>() <= 96);
        let a = AgentState::initial().with_step(3);
        let b = AgentState::initial();
        assert!(Arc::ptr_eq(&a.extras, &b.extras));
        let c = a.with_metadata("k", Value::from(1));
        assert!(!Arc::ptr_eq(&a.extras, &c.extras));
        assert!(a.metadata().is_empty());
        assert_eq!(c.metadata()["k"], 1);
        assert_eq!(a.id().len(), 36);
        assert_eq!(
            uuid::Uuid::parse_str(a.id())
                .map(|u| u.get_version_num())
                .ok(),
            Some(4)
        );
    }

    #[test]
    fn derived_states_share_messages() {
        let mut state = AgentState::initial();
        for i in 0..100 {
            state = state.with_message(Message::user(format!("m{i}")));
        }
        let a = state.with_message(Message::user("a"));
        let b = state.with_message(Message::user("b"));
        assert!(a.messages.extends(&state.messages) && b.messages.extends(&state.messages));
        assert!(!a.messages.extends(&b.messages) && !b.messages.extends(&a.messages));
        assert_eq!(state.message_count(), 100);
        assert_eq!(a.last_message().unwrap().text(), "a");
        assert_eq!(b.last_message().unwrap().text(), "b");
    }
}
