//! `weft runs show --expand`: the history the runtime profile's context compression replaced
//! (runtime spec §5.11(3)), restored from the earlier checkpoints that hold it. A compressed
//! checkpoint keeps only a small marker on the message that stands for the replaced messages
//! (`weftCompression`: the agent step whose checkpoint holds them, their index ranges and
//! ids); the messages themselves are the rows the store already had.

use serde_json::{Value, json};
use weft_provider::Message;
use weft_runtime::profile::context::{Marker, expand};
use weft_store::{CheckpointSummary, Store, StoreError};

/// One message of the latest checkpoint that stands for compressed history, and what it
/// replaced (expanded all the way: a summary of a summary gives the original messages).
pub(crate) struct Expanded {
    /// The stand-in (summary, truncation note or cleared tool output).
    pub(crate) stand_in: Message,
    /// Its marker.
    pub(crate) marker: Marker,
    /// The messages it replaced.
    pub(crate) originals: Vec<Message>,
}

/// The compressions of `thread`'s latest checkpoint, expanded.
pub(crate) async fn of_thread(store: &Store, thread: &str) -> Result<Vec<Expanded>, StoreError> {
    let Some(latest) = store.latest_checkpoint(thread).await? else {
        return Ok(Vec::new());
    };
    let summaries = store.list_checkpoints(thread).await?;
    let mut out = Vec::new();
    for message in latest.checkpoint.state.messages() {
        let Some(marker) = Marker::of(&message) else {
            continue;
        };
        let message = message.into_owned();
        let (originals, _) = expand(vec![message.clone()], |agent_step| {
            history_at(store, &summaries, agent_step)
        })
        .await?;
        let expanded = originals.len() != 1 || originals[0].id() != message.id();
        out.push(Expanded {
            stand_in: message,
            marker,
            originals: if expanded { originals } else { Vec::new() },
        });
    }
    Ok(out)
}

/// The history of the step-end checkpoint of `agent_step` (the latest one, when a step was
/// checkpointed more than once).
async fn history_at(
    store: &Store,
    summaries: &[CheckpointSummary],
    agent_step: u64,
) -> Result<Option<Vec<Message>>, StoreError> {
    let Some(summary) = summaries
        .iter()
        .rev()
        .find(|s| s.agent_step == agent_step && s.kind == "step")
    else {
        return Ok(None);
    };
    Ok(store
        .checkpoint_at(&summary.thread_id, summary.step)
        .await?
        .map(|c| c.checkpoint.state.messages_vec()))
}

/// The text lines of `expanded`.
pub(crate) fn lines(expanded: &[Expanded]) -> Vec<String> {
    let mut lines = Vec::new();
    for e in expanded {
        let m = &e.marker;
        lines.push(format!(
            "compression {} ({}, {}) at step {}: {} message(s) replaced by {}",
            m.generation,
            m.strategy,
            m.kind,
            m.agent_step,
            m.count(),
            e.stand_in.id()
        ));
        lines.push(format!("  now: {}", one_line(&e.stand_in)));
        if e.originals.is_empty() {
            lines.push("  (the checkpoint that held them is gone)".to_owned());
        }
        for original in &e.originals {
            lines.push(format!("  was: {}", one_line(original)));
        }
    }
    lines
}

/// `expanded` as JSON.
pub(crate) fn json(expanded: &[Expanded]) -> Value {
    expanded
        .iter()
        .map(|e| {
            json!({
                "standIn": e.stand_in,
                "marker": e.marker,
                "replaced": e.originals,
            })
        })
        .collect()
}

fn one_line(message: &Message) -> String {
    let text = match message {
        Message::User(_) => format!("user: {}", message.text()),
        Message::Assistant(a) => {
            let mut text = format!("assistant: {}", message.text());
            for call in &a.tool_calls {
                text.push_str(&format!(" [{} {}]", call.tool_name, call.arguments));
            }
            text
        }
        Message::ToolResult(results) => format!(
            "tool result: {}",
            results
                .results
                .iter()
                .map(|r| match &r.result {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" | ")
        ),
    };
    super::run::clip(&text.replace('\n', " "), 160)
}
