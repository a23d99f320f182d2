//! The next command after a run stops without completing: the exact `weft resume` that
//! works. An interrupted run whose side-effecting call was in flight needs
//! `--rerun-uncertain` (a plain resume would stop at once, exit 3); a run that failed on a
//! provider error (a network error, a spent quota, a bad key, a server that was down) resumes
//! from its recorded steps once the cause is fixed. A run the agent itself failed
//! (`sessionFail`, a budget) has no hint: resuming it would end the same way.

use weft_provider::ErrorCode;
use weft_runtime::RunEnd;
use weft_store::{Store, ToolCallStatus, ToolLedger as _};

/// The command that goes on with a run, and what to know before running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hint {
    /// The exact command.
    pub(crate) command: String,
    /// Why it is that command, or what it does (`None`: nothing to add).
    pub(crate) note: Option<String>,
}

/// The command that goes on with `run_id` after `end`, and why, when there is one.
pub(crate) async fn next_command(store: &Store, run_id: &str, end: &RunEnd) -> Option<Hint> {
    match end {
        RunEnd::Interrupted => {
            let calls = store.tool_calls(run_id).await.unwrap_or_default();
            let uncertain: Vec<String> = calls
                .iter()
                .filter(|c| c.status == ToolCallStatus::Pending && c.side_effects && !c.idempotent)
                .map(|c| format!("{} ({})", c.tool_call_id, c.tool_name))
                .collect();
            if uncertain.is_empty() {
                Some(Hint {
                    command: format!("weft resume {run_id}"),
                    note: None,
                })
            } else {
                Some(Hint {
                    command: format!("weft resume {run_id} --rerun-uncertain"),
                    note: Some(format!(
                        "tool call {} was running when the run stopped and may have had its effect: \
                         --rerun-uncertain runs it again (a plain `weft resume` stops there, exit 3)",
                        uncertain.join(", ")
                    )),
                })
            }
        }
        RunEnd::NeedsApproval { .. } => Some(Hint {
            command: format!("weft resume {run_id} --rerun-uncertain"),
            note: Some(format!(
                "or decide each uncertain call: weft approve {run_id} ID / weft deny {run_id} ID --reason \"…\", then weft resume {run_id}"
            )),
        }),
        // The pending decisions are listed with their commands just before.
        RunEnd::AwaitingDecision { .. } => Some(Hint {
            command: format!("weft resume {run_id}"),
            note: None,
        }),
        RunEnd::Failed { error } => {
            let code = provider_error(error)?;
            Some(Hint {
                command: format!("weft resume {run_id}"),
                note: Some(format!(
                    "the model call failed ({code}); once the cause is fixed, the resume keeps the recorded steps and asks the model again"
                )),
            })
        }
        // Completed, or an end this version does not know a command for.
        _ => None,
    }
}

/// The provider error code a failure message starts with (`NETWORK_ERROR: …`).
fn provider_error(message: &str) -> Option<ErrorCode> {
    let (code, _) = message.split_once(':')?;
    let code: ErrorCode =
        serde_json::from_value(serde_json::Value::String(code.to_owned())).ok()?;
    (code != ErrorCode::Cancelled).then_some(code)
}

#[cfg(test)]
mod tests {
    use super::provider_error;
    use weft_provider::ErrorCode;

    #[test]
    fn provider_failures_are_told_from_agent_failures() {
        assert_eq!(
            provider_error("NETWORK_ERROR: error sending request"),
            Some(ErrorCode::NetworkError)
        );
        assert_eq!(
            provider_error("QUOTA_EXCEEDED: you exceeded your quota"),
            Some(ErrorCode::QuotaExceeded)
        );
        assert_eq!(provider_error("cannot: the task is impossible"), None);
        assert_eq!(provider_error("the run reached its budget"), None);
    }
}
