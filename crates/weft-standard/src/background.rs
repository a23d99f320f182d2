//! Non-blocking subagents (agents §7.3): a call with `blocking = false` returns at once, the
//! child runs concurrently as a child run of the same run (its own thread, checkpoints and
//! recorded model calls, like a blocking one), and its end reaches the parent thread as a
//! **queued message** with the spec's text (`result_message` / `failure_message`), queued
//! once (its id derives from the child and the call that started it) on the parent
//! thread's durable queue:
//!
//! * while the parent works, its next model step takes the message (the thread queue's
//!   inbox);
//! * when the parent's session has ended, the run does not end with it: it waits for its
//!   background children ([`Background::next`]) and every message queued meanwhile starts
//!   the parent's next turn ([`crate::runner`] — the thread is driven until it is settled:
//!   no child running and nothing queued).
//!
//! With `parentCommunication = "explicit"` nothing is queued: the child's status in the
//! registry is all the parent sees.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;
use weft_store::{Subagents as _, ThreadQueue as _};

use crate::session::Durable;
use crate::subagent::ChildEnd;

/// The children a run started in the background, which it waits for before it ends.
///
/// # Examples
///
/// ```
/// # async fn demo() {
/// let background = weft_standard::Background::new();
/// assert!(!background.next().await); // nothing runs: settled
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Background {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    running: AtomicUsize,
    /// How many children were started in all.
    started: AtomicUsize,
    ended: Notify,
    /// The calls whose children run now (`RUN_ID POSITION`): a call is never run twice at
    /// once (a resume restarts a child, and the replayed call would start it again).
    calls: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Counts a background child as ended when its task ends, however it ends.
struct Running(Arc<Inner>, String);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.0.calls.lock() {
            calls.remove(&self.1);
        }
        self.0.running.fetch_sub(1, Ordering::AcqRel);
        self.0.ended.notify_one();
    }
}

impl Background {
    /// No children yet.
    pub fn new() -> Self {
        Background::default()
    }

    /// Runs `child`, started by the call `call_site`, as a background child (nothing when
    /// that call's child runs already).
    pub(crate) fn spawn(&self, call_site: &str, child: impl Future<Output = ()> + Send + 'static) {
        if let Ok(mut calls) = self.inner.calls.lock()
            && !calls.insert(call_site.to_owned())
        {
            return;
        }
        self.inner.running.fetch_add(1, Ordering::AcqRel);
        self.inner.started.fetch_add(1, Ordering::AcqRel);
        let guard = Running(self.inner.clone(), call_site.to_owned());
        tokio::spawn(async move {
            let _guard = guard;
            child.await;
        });
    }

    /// How many background children were started in all.
    pub fn started(&self) -> usize {
        self.inner.started.load(Ordering::Acquire)
    }

    /// How many background children run now.
    pub fn running(&self) -> usize {
        self.inner.running.load(Ordering::Acquire)
    }

    /// Waits until a background child ends; `false` at once when none runs.
    pub async fn next(&self) -> bool {
        if self.running() == 0 {
            return false;
        }
        self.inner.ended.notified().await;
        true
    }
}

/// The id of the message that reports the end of the child `reference` started (or
/// messaged) by the call `call_site`: the same on every replay, so it is queued once.
pub(crate) fn report_id(reference: &str, call_site: &str) -> String {
    let hash = weft_runtime::child::child_reference(reference, call_site).replace('-', "");
    format!("q-{}", &hash[..16])
}

/// Records how the background child `ended` (its registry status) and, unless `explicit`,
/// queues the spec's text on the parent's thread, waking the parent's next step.
pub(crate) async fn report(parent: &Durable, ended: &ChildEnd, call_site: &str, explicit: bool) {
    let store = &parent.store;
    // An explicit child's status is its own to set: its end replaces only `running`.
    let keep = explicit
        && store
            .child(&ended.reference)
            .await
            .ok()
            .flatten()
            .is_some_and(|c| c.entry.status != "running");
    if let Some(status) = ended.status().filter(|_| !keep)
        && let Err(error) = store.set_child_status(&ended.reference, status).await
    {
        tracing::warn!(%error, "recording a subagent's status failed");
    }
    if explicit {
        return;
    }
    let Some(payload) = ended.payload() else {
        return;
    };
    if terminated(parent).await {
        // A terminated thread takes no queued message.
        return;
    }
    let text = payload.unwrap_or_else(|failure| failure);
    let id = report_id(&ended.reference, call_site);
    match store
        .queue_message_once(parent.run.thread_id(), &id, &text)
        .await
    {
        Ok(_) => parent.run.wake_inbox(),
        Err(error) => tracing::warn!(%error, "queuing a subagent's result failed"),
    }
}

/// Whether the parent's thread was terminated.
async fn terminated(parent: &Durable) -> bool {
    use weft_store::Threads as _;
    parent
        .store
        .thread(parent.run.thread_id())
        .await
        .ok()
        .flatten()
        .is_some_and(|t| {
            t.metadata
                .contains_key(weft_runtime::thread_state::TERMINATED_KEY)
        })
}

/// The child thread metadata key of the message a background child works on:
/// `{"callSite", "text", "side"}`, so a resumed run starts the child again on it.
pub(crate) const PENDING_KEY: &str = "weftPendingMessage";

/// Notes on the child thread `reference` that it works on `text` for the call `call_site`
/// (recording the thread when it does not exist yet).
pub(crate) async fn note_pending(
    parent: &Durable,
    reference: &str,
    name: &str,
    (call_site, text, side): (&str, &str, crate::definition::Side),
) -> Result<(), weft_store::StoreError> {
    use weft_store::Threads as _;
    let store = &parent.store;
    let mut thread = match store.thread(reference).await? {
        Some(thread) => thread,
        None => {
            let mut thread = weft_store::ThreadRecord::new(reference);
            thread.parent_thread_id = Some(parent.run.thread_id().to_owned());
            thread.title = Some(name.to_owned());
            thread.metadata.insert(
                weft_runtime::child::SUBAGENT_KEY.to_owned(),
                serde_json::Value::from(name),
            );
            thread.metadata.insert(
                "runId".to_owned(),
                serde_json::Value::from(parent.run.run_id()),
            );
            thread
        }
    };
    thread.metadata.insert(
        PENDING_KEY.to_owned(),
        serde_json::json!({"callSite": call_site, "text": text, "side": side}),
    );
    thread.updated_at = weft_store::now_string();
    store.put_thread(&thread).await
}

/// Starts again, in the background of a resumed run, the children this run left working
/// (registry status `running`, not blocking, started by a call of this run): each goes on
/// from its checkpoints on the message it worked on. Returns whether this run started
/// children in the background before (its thread is then driven until it is settled).
pub(crate) async fn restart(
    parent: &crate::subagent::Parent,
) -> Result<bool, weft_store::StoreError> {
    use weft_store::Threads as _;
    let Some(durable) = &parent.options.durable else {
        return Ok(false);
    };
    let run_id = durable.run.run_id();
    let mut had = false;
    for child in durable.store.children(durable.run.thread_id()).await? {
        if child.blocking != Some(false) {
            continue;
        }
        let Some(thread) = durable.store.thread(&child.reference).await? else {
            continue;
        };
        let Some(pending) = thread.metadata.get(PENDING_KEY) else {
            continue;
        };
        let (Some(call_site), Some(text)) =
            (pending["callSite"].as_str(), pending["text"].as_str())
        else {
            continue;
        };
        let Some(position) = call_site
            .strip_prefix(run_id)
            .and_then(|rest| rest.strip_prefix(' '))
        else {
            // Started by another run of the thread: that run goes on with it.
            continue;
        };
        had = true;
        if child.status != "running" {
            continue;
        }
        let side =
            serde_json::from_value(pending["side"].clone()).unwrap_or(crate::definition::Side::A);
        let which = if child.resumable == Some(true) {
            crate::subagent::ChildThread::Resumable {
                reference: child.reference.clone(),
                side,
                explicit: child.parent_communication.as_deref() == Some("explicit"),
            }
        } else {
            crate::subagent::ChildThread::PerCall
        };
        let mut extensions = weft_provider::Extensions::default();
        extensions.insert(weft_runtime::child::CallSite {
            position: position.to_owned(),
        });
        let ctx = weft_provider::ToolContext {
            tool_call_id: position.to_owned(),
            signal: parent.options.signal.child_token(),
            extensions,
        };
        let explicit = matches!(
            which,
            crate::subagent::ChildThread::Resumable { explicit: true, .. }
        );
        if let Err(error) = crate::subagent::spawn_child(
            parent,
            &child.agent,
            which,
            text,
            ctx,
            call_site.to_owned(),
            explicit,
        ) {
            tracing::warn!(%error, "a background subagent could not start again");
        }
    }
    Ok(had)
}

/// The name of the tool that queues a message to an explicit subagent's parent.
pub const NOTIFY_PARENT: &str = "notify_parent";
/// The name of the tool that sets an explicit subagent's status in its parent's registry.
pub const SET_STATUS: &str = "set_status";

/// Where an explicit subagent escalates (agents §7.10): its parent's run and its own
/// reference in the parent's registry.
#[derive(Debug, Clone)]
pub struct Escalation {
    pub(crate) parent: Durable,
    pub(crate) reference: String,
}

impl Escalation {
    /// The tools an explicit subagent gets: `notify_parent {content}` queues `content` on
    /// the parent's thread (once per call), `set_status {status}` sets its registry status.
    pub(crate) fn tools(&self) -> Vec<weft_provider::Tool> {
        use serde_json::{Value, json};
        use weft_provider::{Tool, ToolContext, ToolError};
        let notify = {
            let me = self.clone();
            Tool::new(
                NOTIFY_PARENT,
                "Send a message to the agent that started you (it arrives in its conversation).",
                json!({"type": "object", "properties": {"content": {"type": "string", "description": "The message."}}, "required": ["content"]}),
                move |args: Value, ctx: ToolContext| {
                    let me = me.clone();
                    async move {
                        let content =
                            args.get("content").and_then(Value::as_str).ok_or_else(|| {
                                ToolError::new("notify_parent needs \"content\": the message")
                            })?;
                        let site = format!("notify {}", ctx.tool_call_id);
                        let site = match ctx.extensions.get::<weft_runtime::child::CallSite>() {
                            Some(call) => format!("notify {}", call.position),
                            None => site,
                        };
                        let id = report_id(&me.reference, &site);
                        me.parent
                            .store
                            .queue_message_once(me.parent.run.thread_id(), &id, content)
                            .await
                            .map_err(|e| {
                                ToolError::transient(format!(
                                    "the message could not be queued: {e}"
                                ))
                            })?;
                        me.parent.run.wake_inbox();
                        Ok(Value::String("Sent to your parent.".into()))
                    }
                },
            )
        };
        let status = {
            let me = self.clone();
            Tool::new(
                SET_STATUS,
                "Set your status as the agent that started you sees it.",
                json!({"type": "object", "properties": {"status": {"type": "string", "description": "The status text."}}, "required": ["status"]}),
                move |args: Value, _ctx: ToolContext| {
                    let me = me.clone();
                    async move {
                        let status =
                            args.get("status").and_then(Value::as_str).ok_or_else(|| {
                                ToolError::new("set_status needs \"status\": the status text")
                            })?;
                        me.parent
                            .store
                            .set_child_status(&me.reference, status)
                            .await
                            .map_err(|e| {
                                ToolError::transient(format!("the status could not be set: {e}"))
                            })?;
                        Ok(Value::String(format!("Status set: {status}")))
                    }
                },
            )
        };
        // Queued once per call and set idempotently: a replay repeats nothing.
        [notify, status]
            .into_iter()
            .map(|t| t.with_side_effects(false).with_idempotent(true))
            .collect()
    }
}
