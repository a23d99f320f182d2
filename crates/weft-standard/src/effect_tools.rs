//! Scheduled effects from the model: the tools `schedule_effect`, `get_scheduled_effects`
//! and `remove_scheduled_effect` (Standard Agents' `scheduleEffect(name, args, delay)` /
//! `getScheduledEffects(name?)` / `removeScheduledEffect(id)`, which a tool's code calls on
//! its `ThreadState`; Weft runs no tool code, so a prompt that lists these names offers them
//! to its model instead). An effect is a later call of one of the prompt's own tools on the
//! session's thread: it waits in the store (weft-store's `scheduled_effects`) until a
//! scheduler fires it (`weft serve` runs one), then runs through the tool pipeline like a
//! call of the model, in a run of the thread (weft-runtime's `schedule` module).
//!
//! The effect's id is derived from the run and the call's position, so a call replayed after
//! a crash schedules nothing twice. The tools need a durable run (they write to the run's
//! store); outside one, a call is an error the model reads.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use weft_provider::{Tool, ToolContext, ToolError};
use weft_store::{QueuedTool, ScheduledEffect, ScheduledEffects as _};

use crate::session::Durable;

/// `schedule_effect {name, arguments?, delay?}`: calls the tool `name` with `arguments`
/// after `delay` milliseconds.
pub const SCHEDULE_EFFECT: &str = "schedule_effect";
/// `get_scheduled_effects {name?}`: the thread's effects still to come.
pub const GET_SCHEDULED_EFFECTS: &str = "get_scheduled_effects";
/// `remove_scheduled_effect {id}`: an effect that should not happen.
pub const REMOVE_SCHEDULED_EFFECT: &str = "remove_scheduled_effect";

/// The three names, as a prompt lists them.
pub const EFFECT_TOOLS: [&str; 3] = [
    SCHEDULE_EFFECT,
    GET_SCHEDULED_EFFECTS,
    REMOVE_SCHEDULED_EFFECT,
];

/// The longest delay a model may ask for: a year, in milliseconds.
pub const MAX_DELAY_MS: u64 = 365 * 24 * 3600 * 1000;

/// The tool `name` (one of [`EFFECT_TOOLS`]) for a prompt whose tools are `tools` (what an
/// effect may call), on the run `durable` (`None`: not a durable run).
pub(crate) fn effect_tool(
    name: &str,
    tools: BTreeSet<String>,
    durable: Option<Durable>,
) -> Option<Tool> {
    let effects = Effects { tools, durable };
    Some(match name {
        SCHEDULE_EFFECT => Tool::new(
            SCHEDULE_EFFECT,
            "Schedule a later call of one of your tools on this conversation (a reminder, a \
             follow-up, a retry): it runs after `delay` milliseconds, even if the conversation \
             is idle then. Returns the effect's id.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool to call.", "enum": effects.tools.iter().collect::<Vec<_>>()},
                    "arguments": {"type": "object", "description": "Its arguments."},
                    "delay": {"type": "integer", "minimum": 0, "maximum": MAX_DELAY_MS, "description": "Milliseconds from now (0: as soon as possible)."}
                },
                "required": ["name"]
            }),
            move |args: Value, ctx: ToolContext| {
                let effects = effects.clone();
                async move { effects.schedule(&args, &ctx).await }
            },
        )
        .with_idempotent(true),
        GET_SCHEDULED_EFFECTS => Tool::new(
            GET_SCHEDULED_EFFECTS,
            "The effects scheduled on this conversation that have not happened yet, soonest \
             first (only those calling `name` when given).",
            json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "Only effects calling this tool."}}
            }),
            move |args: Value, _ctx: ToolContext| {
                let effects = effects.clone();
                async move { effects.list(&args).await }
            },
        )
        .with_side_effects(false)
        .with_idempotent(true),
        REMOVE_SCHEDULED_EFFECT => Tool::new(
            REMOVE_SCHEDULED_EFFECT,
            "Remove a scheduled effect (by the id `schedule_effect` returned) so it never happens.",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The effect's id."}},
                "required": ["id"]
            }),
            move |args: Value, _ctx: ToolContext| {
                let effects = effects.clone();
                async move { effects.remove(&args).await }
            },
        )
        .with_idempotent(true),
        _ => return None,
    })
}

/// What the three tools share: the tools an effect may call and the run.
#[derive(Clone)]
struct Effects {
    tools: BTreeSet<String>,
    durable: Option<Durable>,
}

impl Effects {
    fn durable(&self) -> Result<&Durable, ToolError> {
        let durable = self.durable.as_ref().ok_or_else(|| {
            ToolError::new(
                "scheduled effects need a durable run (they are kept in the run's store); this \
                 session has none",
            )
        })?;
        // A child's thread has no runs of its own to start for a fired effect (its runs are
        // its parent's calls).
        if durable.run.agent().depth() > 0 {
            return Err(ToolError::new(
                "only the conversation's own agent schedules effects, not a subagent or a nested \
                 prompt: return what should happen later to the agent that called you",
            ));
        }
        Ok(durable)
    }

    async fn schedule(&self, args: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let durable = self.durable()?;
        let name = args.get("name").and_then(Value::as_str).unwrap_or("");
        if !self.tools.contains(name) {
            return Err(ToolError::new(format!(
                "\"name\" must be one of your tools ({}), not {name:?}",
                self.tools.iter().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let arguments = match args.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(object @ Value::Object(_)) => object.clone(),
            Some(_) => return Err(ToolError::new("\"arguments\" must be a JSON object")),
        };
        let delay = match args.get("delay") {
            None | Some(Value::Null) => 0,
            Some(delay) => delay
                .as_u64()
                .filter(|ms| *ms <= MAX_DELAY_MS)
                .ok_or_else(|| {
                    ToolError::new(format!(
                        "\"delay\" must be a whole number of milliseconds from 0 to {MAX_DELAY_MS} (a year)"
                    ))
                })?,
        };
        let run = &durable.run;
        let position = weft_runtime::child::call_position(run, ctx);
        let id = effect_id(run.run_id(), &position);
        let due_at = chrono::Utc::now().timestamp_micros()
            + i64::try_from(delay.saturating_mul(1000)).unwrap_or(i64::MAX / 2);
        let call = QueuedTool {
            name: name.to_owned(),
            arguments,
        };
        let effect = durable
            .store
            .schedule_effect_once(&id, run.thread_id(), &call, due_at)
            .await
            .map_err(|e| ToolError::transient(format!("the effect could not be scheduled: {e}")))?;
        Ok(view(&effect))
    }

    async fn list(&self, args: &Value) -> Result<Value, ToolError> {
        let durable = self.durable()?;
        let name = args.get("name").and_then(Value::as_str);
        let effects = durable
            .store
            .scheduled_effects(durable.run.thread_id())
            .await
            .map_err(|e| ToolError::transient(format!("the effects could not be read: {e}")))?;
        Ok(Value::Array(
            effects
                .iter()
                .filter(|e| name.is_none_or(|n| e.call.name == n))
                .map(view)
                .collect(),
        ))
    }

    async fn remove(&self, args: &Value) -> Result<Value, ToolError> {
        let durable = self.durable()?;
        let id = args
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::new("\"id\" is required: the id schedule_effect returned"))?;
        let store = &durable.store;
        // Only this thread's: an id of another conversation is not found.
        let own = store
            .scheduled_effect(id)
            .await
            .map_err(|e| ToolError::transient(format!("the effect could not be read: {e}")))?
            .is_some_and(|e| e.thread_id == durable.run.thread_id());
        if !own {
            return Ok(
                json!({"id": id, "removed": false, "reason": "no such effect is still scheduled on this conversation"}),
            );
        }
        let removed = store
            .remove_scheduled_effect(id)
            .await
            .map_err(|e| ToolError::transient(format!("the effect could not be removed: {e}")))?;
        Ok(json!({"id": id, "removed": removed}))
    }
}

/// The id of the effect scheduled by the call at `position` of run `run_id`: `e-` and 16 hex
/// digits (the store's form), the same on every replay of the call.
fn effect_id(run_id: &str, position: &str) -> String {
    let reference = weft_runtime::child::child_reference(run_id, &format!("effect {position}"));
    let hex: String = reference.chars().filter(|c| *c != '-').take(16).collect();
    format!("e-{hex}")
}

/// An effect as the model reads it.
fn view(effect: &ScheduledEffect) -> Value {
    let due = chrono::DateTime::from_timestamp_micros(effect.due_at)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    json!({
        "id": effect.id,
        "name": effect.call.name,
        "arguments": effect.call.arguments,
        "dueAt": due,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_effects_id_is_the_stores_form_and_the_same_for_the_same_call() {
        let id = effect_id("run-1", "t@3#0");
        assert_eq!(id, effect_id("run-1", "t@3#0"));
        assert_ne!(id, effect_id("run-1", "t@3#1"));
        assert_ne!(id, effect_id("run-2", "t@3#0"));
        assert_eq!(id.len(), 18);
        assert!(id.starts_with("e-") && id[2..].chars().all(|c| c.is_ascii_hexdigit()));
    }
}
