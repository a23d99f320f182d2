//! Child runs: a tool call of a run that runs another agent (a Standard Agents subagent, a
//! delegation) as a **child run** of it — one mechanism, whatever configures it.
//!
//! A [`ChildRun`] is opened by the tool's handler, from the [`ToolContext`] the runtime's
//! pipeline handed it, and gives the child:
//!
//! * its own **thread**, linked to the run's (`ThreadRecord::parent_thread_id`), whose id is
//!   the child's **reference**: derived from the run id and the position of the parent's
//!   call ([`CallSite`]), so a resumed run opens the same child again;
//! * a node in the run's **agent lineage** (`AgentNode`, parent: the run's agent, depth
//!   one deeper), completed or failed when the child ends;
//! * a **context** ([`RunContext::child`]): the child's model calls are recorded and
//!   replayed under its thread and count against the run's budget and usage; its tool calls
//!   pass the run's pipeline stages (replay, hooks, approval, record) under its own
//!   positions; its events go to the run's log with the agent path `parent/child`;
//! * an `invoke_agent {child}` **span**, child of the parent call's `execute_tool` span
//!   ([`ToolSpan`]), parent of the child's `chat` and `execute_tool` spans;
//! * **notifications** on the run tree's message bus ([`crate::bus`], topic
//!   `child.REFERENCE`): started when it opens, then finished, failed or suspended.
//!
//! **Invariant:** a child run is part of its parent run: same run id, same ledger. Its
//! side effects are recorded before they happen like the run's own, so a parent resumed
//! after a crash runs the child again by replaying it, and nothing of it runs twice.
//!
//! # Examples
//!
//! ```no_run
//! # use std::sync::Arc;
//! # async fn demo(run: Arc<weft_runtime::ledger::RunContext>, call: weft_provider::ToolContext) -> Result<(), weft_store::StoreError> {
//! use weft_runtime::child::ChildRun;
//! let child = ChildRun::open(&run, "reviewer", &call).await?;
//! // … run the child's agent with `child.context()` as its run context …
//! child.end(true).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use sha2::{Digest as _, Sha256};
use weft_otel::{GenAiSpan, SpanParent};
use weft_provider::ToolContext;
use weft_store::{
    AgentNode, AgentStatus, Lineage as _, Responses as _, StoreError, ThreadRecord, Threads as _,
};

use crate::ledger::RunContext;

/// The position of a tool call in its run (`SCOPE@N#I`), handed to the tool by the
/// runtime's replay stage in [`ToolContext::extensions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    /// The call's position.
    pub position: String,
}

/// The `execute_tool` span of the running call, handed to the tool by the runtime's trace
/// stage in [`ToolContext::extensions`] (the parent of a child run's `invoke_agent` span).
#[derive(Debug, Clone)]
pub struct ToolSpan(pub SpanParent);

/// The key of a child run's thread metadata naming its agent (beside `runId`, the run it
/// belongs to): what tells a subagent's thread from a fork (both have a parent thread).
pub const SUBAGENT_KEY: &str = "subagent";

/// The reference of the child run started by the call at `position` of run `run_id`: a
/// UUID-shaped name derived from both (the same on every resume of the run).
///
/// # Examples
///
/// ```
/// let a = weft_runtime::child::child_reference("run-1", "t@3#0");
/// assert_eq!(a, weft_runtime::child::child_reference("run-1", "t@3#0"));
/// assert_ne!(a, weft_runtime::child::child_reference("run-1", "t@3#1"));
/// assert_eq!(a.len(), 36);
/// ```
pub fn child_reference(run_id: &str, position: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(run_id.as_bytes());
    hasher.update([0]);
    hasher.update(position.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hasher.finalize()[..16]);
    // Version 8 (custom), RFC 9562 variant.
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = crate::spec::hex(&bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The position of `call` in `parent`'s run (its [`CallSite`], or the thread and call id of a
/// call made outside the runtime's pipeline).
pub fn call_position(parent: &RunContext, call: &ToolContext) -> String {
    call.extensions.get::<CallSite>().map_or_else(
        || format!("{}:{}", parent.thread_id(), call.tool_call_id),
        |site| site.position.clone(),
    )
}

/// A child run in progress (see the module docs).
#[derive(Debug)]
pub struct ChildRun {
    context: Arc<RunContext>,
    reference: String,
    /// The position of the parent's call.
    position: String,
    name: String,
    parent_agent: String,
    depth: u32,
    created_at: String,
    span: GenAiSpan,
}

impl ChildRun {
    /// Opens the child run `name` of `parent` for the call `call`: records its thread and
    /// its lineage node (again, unchanged, on a resume) and opens its span.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn open(
        parent: &Arc<RunContext>,
        name: &str,
        call: &ToolContext,
    ) -> Result<ChildRun, StoreError> {
        let position = call_position(parent, call);
        let reference = child_reference(parent.run_id(), &position);
        Self::open_as(parent, name, &reference, call).await
    }

    /// Opens the child run `name` of `parent` on the child thread `reference` (a resumable
    /// subagent's, which outlives the call: each message to it is a child run of the run
    /// that sends it), for the call `call`; the thread is recorded when it does not exist.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn open_as(
        parent: &Arc<RunContext>,
        name: &str,
        reference: &str,
        call: &ToolContext,
    ) -> Result<ChildRun, StoreError> {
        let position = call_position(parent, call);
        let reference = reference.to_owned();
        let store = parent.store();
        let thread = match store.thread(&reference).await? {
            Some(thread) => thread,
            None => {
                let mut thread = ThreadRecord::new(&reference);
                thread.parent_thread_id = Some(parent.thread_id().to_owned());
                thread.title = Some(name.to_owned());
                thread
                    .metadata
                    .insert(SUBAGENT_KEY.to_owned(), serde_json::Value::from(name));
                thread
                    .metadata
                    .insert("runId".to_owned(), serde_json::Value::from(parent.run_id()));
                store.put_thread(&thread).await?;
                thread
            }
        };
        let depth = u32::try_from(parent.agent().depth()).unwrap_or(u32::MAX) + 1;
        let span = if weft_otel::enabled() {
            let under = call
                .extensions
                .get::<ToolSpan>()
                .map_or_else(|| parent.trace().clone(), |s| s.0.clone());
            GenAiSpan::invoke_agent(name, &reference, &reference, under.traceparent().as_deref())
        } else {
            GenAiSpan::inert()
        };
        span.set(weft_otel::semconv::WEFT_RUN_ID, parent.run_id().to_owned());
        let context = Arc::new(parent.child(name, &reference, &reference, span.parent()));
        let child = ChildRun {
            context,
            name: name.to_owned(),
            parent_agent: parent.agent_id().to_owned(),
            depth,
            created_at: thread.created_at,
            span,
            reference,
            position,
        };
        child
            .record(AgentStatus::Active, weft_store::Usage::default(), None)
            .await?;
        child.notify(crate::bus::BusMessage::ChildStarted {
            reference: child.reference.clone(),
            name: child.name.clone(),
            depth: child.depth,
        });
        Ok(child)
    }

    /// Publishes `message` on the child's topic of the run tree's bus, as its parent.
    fn notify(&self, message: crate::bus::BusMessage) {
        let from = self
            .context
            .agent()
            .as_str()
            .rsplit_once('/')
            .map_or("", |(parent, _)| parent)
            .to_owned();
        self.context
            .bus()
            .publish(&crate::bus::child_topic(&self.reference), &from, message);
    }

    /// The child's depth in the lineage (1: a child of the root agent).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The child's run context (its model calls, tool calls and events go through it).
    pub fn context(&self) -> &Arc<RunContext> {
        &self.context
    }

    /// The child's reference: its thread id and its agent id in the lineage.
    pub fn reference(&self) -> &str {
        &self.reference
    }

    /// The call that opened the child: `RUN_ID POSITION` (the same on every replay of the
    /// call), e.g. to recognise a message the child already took.
    pub fn call_site(&self) -> String {
        format!("{} {}", self.context.run_id(), self.position)
    }

    async fn record(
        &self,
        status: AgentStatus,
        usage: weft_store::Usage,
        completed_at: Option<String>,
    ) -> Result<(), StoreError> {
        self.context
            .store()
            .put_agent(&AgentNode {
                id: self.reference.clone(),
                run_id: self.context.run_id().to_owned(),
                parent_agent_id: Some(self.parent_agent.clone()),
                role: self.name.clone(),
                status,
                depth: self.depth,
                created_at: self.created_at.clone(),
                completed_at,
                usage,
            })
            .await
    }

    /// Whether the child waits for a decision (a call of it needs an approval nobody could
    /// give now): then it must be [deferred](ChildRun::defer), not ended.
    pub fn is_suspended(&self) -> bool {
        self.context.is_suspended()
    }

    /// Leaves the child waiting for its decision: the parent's call stays pending (the run
    /// suspends after the step; a resume runs the call again and the child goes on from its
    /// checkpoints), the child's lineage node stays active, its span ends as `suspended`.
    pub fn defer(self) {
        self.notify(crate::bus::BusMessage::ChildSuspended {
            reference: self.reference.clone(),
            name: self.name.clone(),
        });
        self.context.defer_call(&self.position);
        self.span.set(weft_otel::semconv::WEFT_RUN_END, "suspended");
        self.span.end();
    }

    /// What the child's own model calls spent, every process's: the responses recorded under
    /// its thread (both sides; a grandchild's are under its own thread), each at its price.
    async fn own_usage(&self) -> Result<weft_store::Usage, StoreError> {
        let (a, b) = (
            format!("{}@", self.reference),
            format!("{}.sideB@", self.reference),
        );
        let responses = self
            .context
            .store()
            .recorded_responses(self.context.run_id())
            .await?;
        Ok(responses
            .iter()
            .filter(|r| r.position.starts_with(&a) || r.position.starts_with(&b))
            .fold(weft_store::Usage::default(), |total, r| {
                let (usage, cost) = crate::cost::recorded_spend(&r.response);
                total.plus(weft_store::Usage {
                    input_tokens: usage.input_tokens,
                    output_tokens: usage.output_tokens,
                    cost,
                })
            }))
    }

    /// Ends the child: its lineage node completed (`succeeded`) or failed, with the usage
    /// of its own model calls (its children's are theirs), and its span ended.
    ///
    /// # Errors
    /// Storage failures (the span is ended all the same).
    pub async fn end(self, succeeded: bool) -> Result<(), StoreError> {
        let (status, end) = if succeeded {
            (AgentStatus::Completed, "completed")
        } else {
            (AgentStatus::Failed, "failed")
        };
        self.span.set(weft_otel::semconv::WEFT_RUN_END, end);
        if !succeeded {
            self.span
                .set_error(weft_otel::semconv::ERROR_OTHER, "the child run failed");
        }
        self.span.end();
        self.notify(if succeeded {
            crate::bus::BusMessage::ChildFinished {
                reference: self.reference.clone(),
                name: self.name.clone(),
            }
        } else {
            crate::bus::BusMessage::ChildFailed {
                reference: self.reference.clone(),
                name: self.name.clone(),
            }
        });
        let usage = self.own_usage().await?;
        self.record(status, usage, Some(weft_store::now_string()))
            .await
    }
}
