//! Test and demo building blocks, usable from any process (so `weft resume` can rebuild a
//! run a test started):
//!
//! * the `append_line` tool ([`append_line_tool`]): a side-effecting tool that appends
//!   `CALL_ID PID` to an execution log (every execution, so tests can count them) and writes
//!   `CALL_ID LINE` to an output file **idempotently** (keyed by the call id);
//! * the `scripted-turns:PATH` model ([`scripted_turns_provider`]): a scripted model (same
//!   file format as `scripted:PATH`) that picks its response from the conversation — the
//!   number of assistant messages so far — instead of a cursor, so a run resumed in another
//!   process gets the same answers.

use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use weft_provider::adapters::scripted::{Script, ScriptedModel, answer_tag};
use weft_provider::provider::{LlmModel, Provider};
use weft_provider::{ErrorCode, Message, Tool, ToolContext, ToolError, UppError};

/// The registry name of the demo tool.
pub const APPEND_LINE: &str = "append_line";
/// The provider name of the conversation-driven scripted model.
pub const SCRIPTED_TURNS: &str = "scripted-turns";

/// Builds the `append_line` tool from its configuration:
/// `{"out": PATH, "log": PATH, "delay_ms": N, "idempotent": BOOL}` (`delay_ms`: a pause after
/// the side effect, to widen the window between it and the next checkpoint).
///
/// # Errors
/// When `out` or `log` is missing.
pub fn append_line_tool(config: &Value) -> Result<Tool, String> {
    let out = config["out"]
        .as_str()
        .ok_or("config.out (a file path) is required")?;
    let log = config["log"]
        .as_str()
        .ok_or("config.log (a file path) is required")?;
    let (out, log) = (PathBuf::from(out), PathBuf::from(log));
    let delay = Duration::from_millis(config["delay_ms"].as_u64().unwrap_or(0));
    let idempotent = config["idempotent"].as_bool().unwrap_or(false);
    Ok(Tool::new(
        APPEND_LINE,
        "Appends a line to the output file.",
        json!({"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]}),
        move |args: Value, ctx: ToolContext| {
            let (out, log) = (out.clone(), log.clone());
            async move {
                let line = args["line"].as_str().unwrap_or_default().to_owned();
                let id = ctx.tool_call_id.clone();
                let (o, l, i, ln) = (out.clone(), log.clone(), id.clone(), line.clone());
                tokio::task::spawn_blocking(move || write_line(&o, &l, &i, &ln))
                    .await
                    .map_err(|e| ToolError::new(e.to_string()))?
                    .map_err(|e| ToolError::transient(e.to_string()))?;
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok(json!({"ok": true, "line": line}))
            }
        },
    )
    .with_side_effects(true)
    .with_idempotent(idempotent)
    .with_sequential(true))
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_data()
}

fn write_line(out: &Path, log: &Path, id: &str, line: &str) -> std::io::Result<()> {
    append(log, &format!("{id} {}\n", std::process::id()))?;
    let prefix = format!("{id} ");
    let done = match std::fs::File::open(out) {
        Ok(file) => std::io::BufReader::new(file)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.starts_with(&prefix)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    if !done {
        append(out, &format!("{id} {line}\n"))?;
    }
    Ok(())
}

/// The metadata key (value `true`) of an assistant message that holds tool calls a run took
/// from its thread's queue (`queueTool()`): not a model's answer, so `scripted-turns` does
/// not count it.
pub const QUEUED_CALLS_KEY: &str = "queued";

/// The `scripted-turns` provider: `scripted-turns:PATH` loads the script at `PATH`; model
/// call k (k = the number of assistant messages in the request, less those holding queued
/// tool calls, [`QUEUED_CALLS_KEY`]) gets response k.
pub fn scripted_turns_provider() -> Arc<Provider> {
    Arc::new(
        Provider::new(SCRIPTED_TURNS, env!("CARGO_PKG_VERSION")).with_llm(
            |model_id: &str, _options: &Value| {
                let script = Script::load(Path::new(model_id)).map_err(|e| {
                    UppError::llm(ErrorCode::InvalidRequest, SCRIPTED_TURNS, e.to_string())
                })?;
                let id = model_id.to_owned();
                let fresh_ids = script.fresh_ids;
                let model: Arc<dyn LlmModel> = Arc::new(
                    ScriptedModel::from_fn(model_id, move |request| {
                        // This script's answers so far: after a handoff the conversation
                        // holds another script's answers too, which do not count. (Answers
                        // recorded before answers were tagged count as this script's.)
                        let k = request
                            .messages()
                            .filter(|m| match m {
                                Message::Assistant(a) => {
                                    let queued = a
                                        .metadata
                                        .as_ref()
                                        .and_then(|m| m.get(QUEUED_CALLS_KEY))
                                        .and_then(Value::as_bool)
                                        .unwrap_or(false);
                                    !queued && answer_tag(a).is_none_or(|tag| tag == id.as_str())
                                }
                                _ => false,
                            })
                            .count();
                        script.responses.get(k).cloned().ok_or_else(|| {
                            UppError::llm(
                                ErrorCode::InvalidRequest,
                                SCRIPTED_TURNS,
                                format!(
                                    "the script {id} has {} responses; turn {} has none",
                                    script.responses.len(),
                                    k + 1
                                ),
                            )
                        })
                    })
                    .with_fresh_ids(fresh_ids)
                    .with_answer_tag(model_id),
                );
                Ok(model)
            },
        ),
    )
}
