//! `complete_task`: the explicit end of a task (Agent Runtime Spec §5.1).

use serde::Deserialize;
use serde_json::{Value, json};
use weft_provider::{Tool, ToolError};

use crate::parse_args;

/// The tool's name.
pub const COMPLETE_TASK: &str = "complete_task";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CompleteArgs {
    summary: String,
    #[serde(default)]
    artifacts: Vec<String>,
    #[serde(default)]
    next_steps: Option<String>,
}

/// `complete_task {summary, artifacts?, nextSteps?}`: validates the completion output and
/// echoes it as `{status: "completed", …}`; the runtime ends the task when it sees it.
pub fn complete_task() -> Tool {
    Tool::new(
        COMPLETE_TASK,
        "Finish the task. Call it alone, with a summary of the result; list created files in artifacts.",
        json!({"type": "object", "properties": {
            "summary": {"type": "string", "minLength": 1, "description": "The final answer or summary"},
            "artifacts": {"type": "array", "items": {"type": "string"}, "description": "Paths of created files"},
            "nextSteps": {"type": "string", "description": "Recommendations for follow-up"}},
            "required": ["summary"], "additionalProperties": false}),
        |arguments: Value, _ctx| async move {
            let args: CompleteArgs = parse_args(COMPLETE_TASK, arguments)?;
            if args.summary.trim().is_empty() {
                return Err(ToolError::new("summary must not be empty"));
            }
            let mut result = json!({"status": "completed", "summary": args.summary, "artifacts": args.artifacts});
            if let Some(next) = args.next_steps {
                result["nextSteps"] = json!(next);
            }
            Ok(result)
        },
    )
}
