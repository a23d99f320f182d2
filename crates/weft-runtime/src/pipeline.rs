//! The runtime's stages of the tool pipeline ([`weft_provider::pipeline`], RUNTIME.md §1):
//!
//! * **replay** ([`Stage::Replay`]): finds the call's position in the run; a result recorded
//!   there (same tool, same arguments) is returned at once — nothing below runs, validates or
//!   asks again. It also logs every call refused below it (`tool_call_refused`: schema,
//!   hooks, skips, denials), so every outcome is in the run's event log;
//! * **hooks** ([`Stage::Hooks`]): the policy's external pre-tool-use scripts
//!   ([`crate::hooks`]);
//! * **approval** ([`Stage::Approval`]): tools the policy lists wait for a person. A decision
//!   taken earlier (`weft approve` / `weft deny`) is used once; otherwise the [`Approver`]
//!   is asked, and when nobody can answer now the decision is recorded as pending and the
//!   call is deferred: the run suspends after the step (exit code 4);
//! * **record** ([`Stage::Record`]): the pending record is durable before the handler starts
//!   (sync durability), the result is recorded after; a cancelled handler leaves the call
//!   pending (uncertain), never a recorded result, and so does a tool that reports an
//!   uncertain end ([`ToolError::uncertain`]: an MCP server that exited mid-call) — the run
//!   then stops on a decision of kind `uncertain` (exit code 3).
//!
//! [`Approver`]: crate::approval::Approver

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use weft_provider::pipeline::{Invocation, Next, Stage, ToolLayer, ToolOutcome};
use weft_provider::tool::BoxFuture;
use weft_provider::{ToolCall, ToolError, ToolExecution};
use weft_store::{
    DecisionKind, DecisionRecord, DecisionStatus, Decisions as _, ToolCallRecord, ToolCallStatus,
    ToolLedger as _, Verdict, now_string,
};

use crate::approval::{ApprovalRequest, NeedsApproval, RetryPolicy, ToolPolicy};
use crate::event::EventKind;
use crate::hooks::HooksLayer;
use crate::ledger::{INLINE_RESULT_BYTES, RunContext, args_hash};

/// The runtime's layers for the tools of one agent of `run`, under `policy`.
pub fn layers(run: &Arc<RunContext>, policy: &ToolPolicy) -> Vec<Arc<dyn ToolLayer>> {
    let mut layers: Vec<Arc<dyn ToolLayer>> = vec![
        Arc::new(ReplayLayer(run.clone())),
        Arc::new(RecordLayer(run.clone())),
    ];
    if weft_otel::enabled() {
        // Same stage as record, added after it: inside it, around the handler (and retries).
        layers.push(Arc::new(crate::trace::TraceLayer(run.clone())));
    }
    if policy.max_retries > 0 {
        // Same stage as record, added after it: inside it (one ledger record per call).
        layers.push(Arc::new(RetryLayer {
            run: run.clone(),
            max_retries: policy.max_retries,
            policy: policy.retry.clone(),
            seen: std::sync::Mutex::new(std::collections::HashSet::new()),
        }));
    }
    if !policy.requires_approval.is_empty() || policy.confirmations {
        layers.push(Arc::new(ApprovalLayer {
            run: run.clone(),
            policy: policy.clone(),
        }));
    }
    if !policy.pre_tool_use.is_empty() {
        layers.push(Arc::new(HooksLayer::new(
            run.clone(),
            policy.pre_tool_use.clone(),
        )));
    }
    layers
}

/// The position of `inv` in the run (set by the replay stage).
fn position(run: &RunContext, inv: &mut Invocation<'_>) -> String {
    match &inv.key {
        Some(key) => key.clone(),
        None => {
            let key = run.position_of(&inv.call.tool_call_id);
            inv.key = Some(key.clone());
            key
        }
    }
}

struct ReplayLayer(Arc<RunContext>);

impl ToolLayer for ReplayLayer {
    fn stage(&self) -> Stage {
        Stage::Replay
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let run = &*self.0;
            let position = position(run, inv);
            // A tool that starts a child run names it after the call's position.
            inv.context.extensions.insert(crate::child::CallSite {
                position: position.clone(),
            });
            let id = inv.call.tool_call_id.clone();
            run.emit_call(
                &id,
                EventKind::ToolCallStart {
                    tool: inv.tool.name.clone(),
                    arguments: inv.arguments.clone(),
                    side: None,
                },
            )
            .await;
            if let Some(record) = run.recorded(&position) {
                let hash = args_hash(&inv.arguments);
                if record.tool_name != inv.tool.name
                    || (!record.args_hash.is_empty() && record.args_hash != hash)
                {
                    let message = format!(
                        "the run diverged from its record at call {position}: the record holds {} with other \
                         arguments, now {} was called; nothing was replayed or run",
                        record.tool_name, inv.tool.name
                    );
                    run.fail(message.clone());
                    return ToolOutcome::Failed(ToolError::new(message));
                }
                run.emit_call(
                    &id,
                    EventKind::ToolCallReplayed {
                        tool: inv.tool.name.clone(),
                        is_error: record.is_error,
                        position: position.clone(),
                    },
                )
                .await;
                let result = record.result.clone().unwrap_or(Value::Null);
                let outcome = if record.is_error {
                    ToolOutcome::Failed(ToolError::new(match result {
                        Value::String(s) => s,
                        other => other.to_string(),
                    }))
                } else {
                    ToolOutcome::Done(result)
                };
                call_ended(run, inv, &position, &outcome).await;
                return outcome;
            }
            let outcome = next.run(inv).await;
            match &outcome {
                ToolOutcome::Refused { stage, reason } => {
                    run.emit_call(
                        &id,
                        EventKind::ToolCallRefused {
                            tool: inv.tool.name.clone(),
                            stage: stage.as_str().to_owned(),
                            reason: Value::String(reason.clone()),
                            arguments: inv.arguments.clone(),
                            sub_agent: false,
                        },
                    )
                    .await;
                }
                // Waits for a decision (logged by the approval stage): it ends after the
                // resume, in the process that runs it.
                ToolOutcome::Deferred { .. } => return outcome,
                // Interrupted: whether the effect happened is unknown; the call has no end.
                ToolOutcome::Failed(_) if inv.context.signal.is_cancelled() => return outcome,
                _ => {}
            }
            call_ended(run, inv, &position, &outcome).await;
            outcome
        })
    }
}

/// Logs `tool_call_end` with what the model is sent for the call: a result larger than
/// [`INLINE_RESULT_BYTES`] is referred to (it is in the run's ledger), not copied.
async fn call_ended(run: &RunContext, inv: &Invocation<'_>, position: &str, outcome: &ToolOutcome) {
    let (result, is_error) = outcome.to_result();
    let size = serde_json::to_string(&result).map_or(0, |text| text.len());
    let large = size > INLINE_RESULT_BYTES;
    let end = EventKind::ToolCallEnd {
        tool: inv.tool.name.clone(),
        is_error,
        result_bytes: large.then_some(size as u64),
        result_ref: large.then(|| json!({"toolCall": position})),
        result: (!large).then_some(result),
        side: None,
    };
    run.emit_call(&inv.call.tool_call_id, end).await;
}

/// Asks the run's approver, if it has one, about `inv` (`None`: nobody can answer now).
async fn ask(run: &RunContext, decision_id: &str, inv: &Invocation<'_>) -> Option<Verdict> {
    let approver = run.approver()?;
    approver
        .decide(&ApprovalRequest {
            run_id: run.run_id().to_owned(),
            decision_id: decision_id.to_owned(),
            tool_call_id: inv.call.tool_call_id.clone(),
            tool: inv.tool.name.clone(),
            arguments: inv.arguments.clone(),
        })
        .await
}

struct ApprovalLayer {
    run: Arc<RunContext>,
    policy: ToolPolicy,
}

impl ApprovalLayer {
    fn denied(tool: &str, reason: &str) -> ToolOutcome {
        ToolOutcome::Refused {
            stage: Stage::Approval,
            reason: if reason.is_empty() {
                format!("the user denied this call to {tool}")
            } else {
                format!("the user denied this call to {tool}: {reason}")
            },
        }
    }
}

impl ToolLayer for ApprovalLayer {
    fn stage(&self) -> Stage {
        Stage::Approval
    }

    fn for_child(&self) -> Option<Arc<dyn ToolLayer>> {
        Some(Arc::new(ChildApprovalLayer {
            run: self.run.clone(),
            policy: self.policy.clone(),
        }))
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        if !self.policy.requires_approval(&inv.tool.name)
            && inv.context.extensions.get::<NeedsApproval>().is_none()
        {
            return next.run(inv);
        }
        Box::pin(async move {
            let run = &*self.run;
            let position = position(run, inv);
            let hash = args_hash(&inv.arguments);
            let id = inv.call.tool_call_id.clone();
            let tool = inv.tool.name.clone();
            let verdict = match run.take_decision(&position) {
                Some(taken) if taken.tool_name == tool && taken.args_hash == hash => {
                    match taken.status {
                        DecisionStatus::Approved => {
                            if let Err(error) =
                                run.store().use_decision(run.run_id(), &taken.id).await
                            {
                                return ToolOutcome::Failed(ToolError::transient(format!(
                                    "the approval could not be recorded as used, so the call was not run: {error}"
                                )));
                            }
                            Some((taken.id, Verdict::Approve))
                        }
                        _ => Some((taken.id, Verdict::Deny(taken.reason.unwrap_or_default()))),
                    }
                }
                _ => None,
            };
            let (decision_id, verdict) = match verdict {
                Some(found) => found,
                None => {
                    let decision = DecisionRecord::pending(
                        run.run_id(),
                        position.clone(),
                        id.clone(),
                        tool.clone(),
                        inv.arguments.clone(),
                        hash,
                        DecisionKind::Approval,
                        run.agent_id(),
                    );
                    if let Err(error) = run.store().raise_decision(&decision).await {
                        return ToolOutcome::Failed(ToolError::transient(format!(
                            "the approval request could not be recorded, so the call was not run: {error}"
                        )));
                    }
                    let asked = ask(run, &decision.id, inv).await;
                    let Some(verdict) = asked else {
                        run.emit_call(
                            &id,
                            EventKind::DecisionPending {
                                decision: decision.id.clone(),
                                kind: "approval".into(),
                                tool: tool.clone(),
                                arguments: inv.arguments.clone(),
                                position,
                                reason: None,
                            },
                        )
                        .await;
                        let reason = format!("waiting for approval (decision {})", decision.id);
                        run.raise(decision);
                        return ToolOutcome::Deferred { reason };
                    };
                    let recorded = async {
                        run.store()
                            .decide(run.run_id(), &decision.id, &verdict)
                            .await?;
                        if verdict == Verdict::Approve {
                            run.store().use_decision(run.run_id(), &decision.id).await?;
                        }
                        Ok::<_, weft_store::StoreError>(())
                    };
                    if let Err(error) = recorded.await {
                        return ToolOutcome::Failed(ToolError::transient(format!(
                            "the decision could not be recorded, so the call was not run: {error}"
                        )));
                    }
                    (decision.id, verdict)
                }
            };
            let (approved, reason) = match &verdict {
                Verdict::Approve => (true, None),
                Verdict::Deny(reason) => (false, Some(reason.clone())),
            };
            run.emit_call(
                &id,
                EventKind::Decision {
                    decision: decision_id,
                    tool: tool.clone(),
                    approved,
                    reason,
                },
            )
            .await;
            inv.approved = Some(approved);
            match verdict {
                Verdict::Approve => next.run(inv).await,
                Verdict::Deny(reason) => Self::denied(&tool, &reason),
            }
        })
    }
}

/// The approval stage for the calls of a sub-agent the runtime does not run as a child run
/// (a hand-written sub-agent tool that runs its agent itself with a `parent_context`; a
/// `SubagentTool` is a child run, [`crate::subagent`], whose calls pass [`ApprovalLayer`]):
/// the same policy, asked of the same person. Such a sub-agent's step cannot be given up and
/// taken again like the run's own (its model responses are not recorded), so when nobody can
/// answer now the call is refused — the model hears why — rather than run without the
/// approval the policy asks for.
struct ChildApprovalLayer {
    run: Arc<RunContext>,
    policy: ToolPolicy,
}

impl ToolLayer for ChildApprovalLayer {
    fn stage(&self) -> Stage {
        Stage::Approval
    }

    fn for_child(&self) -> Option<Arc<dyn ToolLayer>> {
        Some(Arc::new(ChildApprovalLayer {
            run: self.run.clone(),
            policy: self.policy.clone(),
        }))
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        if !self.policy.requires_approval(&inv.tool.name)
            && inv.context.extensions.get::<NeedsApproval>().is_none()
        {
            return next.run(inv);
        }
        Box::pin(async move {
            let run = &*self.run;
            let id = inv.call.tool_call_id.clone();
            let tool = inv.tool.name.clone();
            let verdict = ask(run, &format!("sub-agent call {id}"), inv).await;
            let outcome = match verdict {
                Some(Verdict::Approve) => {
                    inv.approved = Some(true);
                    return next.run(inv).await;
                }
                Some(Verdict::Deny(reason)) => {
                    inv.approved = Some(false);
                    ApprovalLayer::denied(&tool, &reason)
                }
                None => ToolOutcome::Refused {
                    stage: Stage::Approval,
                    reason: format!(
                        "{tool} needs a person's approval, and a sub-agent's call cannot wait for a decision: \
                         it was not run (approve it inline on a terminal, or do it outside the sub-agent)"
                    ),
                },
            };
            if let ToolOutcome::Refused { stage, reason } = &outcome {
                run.emit_call(
                    &id,
                    EventKind::ToolCallRefused {
                        tool: tool.clone(),
                        stage: stage.as_str().to_owned(),
                        reason: Value::String(reason.clone()),
                        arguments: inv.arguments.clone(),
                        sub_agent: true,
                    },
                )
                .await;
            }
            outcome
        })
    }
}

struct RecordLayer(Arc<RunContext>);

impl ToolLayer for RecordLayer {
    fn stage(&self) -> Stage {
        Stage::Record
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let run = &*self.0;
            let position = position(run, inv);
            let id = inv.call.tool_call_id.clone();
            let tool = inv.tool;
            let call = ToolCall::new(id.clone(), tool.name.clone(), inv.arguments.clone());
            let (pending, completed) = run.snapshot(|s| s.pending.push(call));
            let record = ToolCallRecord {
                run_id: run.run_id().to_owned(),
                position: position.clone(),
                tool_call_id: id.clone(),
                // The model's arguments, as the replay stage compares them (a stage between
                // may have rewritten the ones the handler runs with: sanitized, replaced).
                args_hash: args_hash(&inv.call.arguments),
                thread_id: run.thread_id().to_owned(),
                tool_name: tool.name.clone(),
                arguments: inv.arguments.clone(),
                status: ToolCallStatus::Pending,
                result: None,
                is_error: false,
                attempts: 1,
                side_effects: tool.side_effects,
                idempotent: tool.idempotent,
                turn: run.turn(),
                started_at: now_string(),
                ended_at: None,
            };
            // Sync durability: this commit happens before the side effect.
            if let Err(error) = run.store().tool_call_started(&record).await {
                if tool.side_effects {
                    return ToolOutcome::Failed(ToolError::transient(format!(
                        "the call could not be recorded before running, so it was not run: {error}"
                    )));
                }
                tracing::warn!(%error, "recording a pending tool call failed");
            }
            let _ = run
                .store()
                .save_tool_checkpoint(run.thread_id(), &pending, &completed)
                .await;
            let started = Instant::now();
            let signal = inv.context.signal.clone();
            let outcome = next.run(inv).await;
            if run.take_deferred(&position) {
                // A child run of the call waits for a decision: the call stays pending and
                // the run suspends; the resume runs it again, and the child goes on.
                return ToolOutcome::Deferred {
                    reason: format!("{} waits for a decision in its child run", tool.name),
                };
            }
            if matches!(outcome, ToolOutcome::Failed(_)) && signal.is_cancelled() {
                // Interrupted: whether the effect happened is unknown. The call stays
                // pending (uncertain) — its cancellation error is not its result.
                return outcome;
            }
            if let ToolOutcome::Failed(error) = &outcome
                && error.uncertain
            {
                return uncertain(run, inv, &position, &error.message).await;
            }
            let (result, is_error) = outcome.to_result();
            // Sync durability: committed before the next model call.
            if let Err(error) = run
                .store()
                .tool_call_finished(run.run_id(), &position, &result, is_error)
                .await
            {
                tracing::warn!(%error, "recording a tool result failed");
            }
            let execution = ToolExecution {
                tool_name: tool.name.clone(),
                tool_call_id: id.clone(),
                arguments: inv.arguments.clone(),
                result,
                is_error,
                duration: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                approved: inv.approved,
            };
            let (pending, completed) = run.snapshot(|s| {
                s.pending.retain(|c| c.tool_call_id != id);
                s.completed.push(execution);
            });
            if let Err(error) = run
                .store()
                .save_tool_checkpoint(run.thread_id(), &pending, &completed)
                .await
            {
                tracing::warn!(%error, "tool-result checkpoint failed");
            }
            outcome
        })
    }
}

/// A call that ended without an answer and may have had its effect (its tool said so:
/// [`ToolError::uncertain`]): it stays pending, a decision of kind `uncertain` is raised, and
/// the run stops after the step, as after a crash mid-call (`weft approve` re-runs it on
/// `weft resume`, `weft deny` gives the model the reason instead).
async fn uncertain(
    run: &RunContext,
    inv: &Invocation<'_>,
    position: &str,
    message: &str,
) -> ToolOutcome {
    let id = inv.call.tool_call_id.clone();
    let decision = DecisionRecord::pending(
        run.run_id(),
        position.to_owned(),
        id.clone(),
        inv.tool.name.clone(),
        inv.arguments.clone(),
        args_hash(&inv.arguments),
        DecisionKind::Uncertain,
        run.agent_id(),
    );
    if let Err(error) = run.store().raise_decision(&decision).await {
        let reason = format!(
            "{message}; the call is uncertain and its decision could not be recorded: {error}"
        );
        run.fail(reason.clone());
        return ToolOutcome::Failed(ToolError::new(reason));
    }
    run.emit_call(
        &id,
        EventKind::DecisionPending {
            decision: decision.id.clone(),
            kind: "uncertain".into(),
            tool: inv.tool.name.clone(),
            arguments: inv.arguments.clone(),
            position: position.to_owned(),
            reason: Some(message.to_owned()),
        },
    )
    .await;
    let reason = format!(
        "{message}; whether the call had its effect is unknown (decision {})",
        decision.id
    );
    run.raise(decision);
    ToolOutcome::Deferred { reason }
}

/// Runs a call again after a transient failure (`ToolError::transient`), with exponential
/// backoff, each retry logged (`tool_call_retry`); a cancelled call is not retried, nor is a
/// failure identical to the one before it. With a [`RetryPolicy`] (the runtime profile,
/// §5.10) the backoff is the policy's, the errors it lists are retried too, a failure whose
/// signature (tool and error) was seen before in the task is never retried, and the error the
/// model finally gets says what was tried.
struct RetryLayer {
    run: Arc<RunContext>,
    max_retries: u32,
    policy: Option<RetryPolicy>,
    /// Error signatures seen (the spec's `errorSignatureCache`), with a policy.
    seen: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// The wait before retry `attempt` (1-based): 100 ms, 200 ms, 400 ms, … (at most 5 s).
fn backoff(attempt: u32) -> std::time::Duration {
    std::time::Duration::from_millis(100u64.saturating_mul(1 << attempt.saturating_sub(1).min(6)))
        .min(std::time::Duration::from_secs(5))
}

impl RetryLayer {
    /// Whether the signature of `error` of `tool` was seen before (and remembers it).
    fn repeated(&self, tool: &str, error: &ToolError) -> bool {
        if self.policy.is_none() {
            return false;
        }
        let signature = format!("{tool}\u{0}{}", error.message);
        let mut seen = match self.seen.lock() {
            Ok(seen) => seen,
            Err(poisoned) => poisoned.into_inner(),
        };
        !seen.insert(signature)
    }
}

impl ToolLayer for RetryLayer {
    fn stage(&self) -> Stage {
        Stage::Record
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let mut attempt = 0;
            let mut last: Option<String> = None;
            let mut waits: Vec<u64> = Vec::new();
            loop {
                let outcome = next.run(inv).await;
                let ToolOutcome::Failed(error) = &outcome else {
                    return outcome;
                };
                let signal = &inv.context.signal;
                let retryable = error.transient
                    || self
                        .policy
                        .as_ref()
                        .is_some_and(|p| p.retryable(&error.message));
                let repeated = self.repeated(&inv.tool.name, error)
                    || last.as_deref() == Some(error.message.as_str());
                let why_not = if error.uncertain || signal.is_cancelled() {
                    return outcome;
                } else if !retryable {
                    Some("not retried: a permanent error")
                } else if repeated {
                    Some("not retried again: the same error as an earlier attempt")
                } else if attempt >= self.max_retries {
                    Some("the retries are used up")
                } else {
                    None
                };
                if let Some(why_not) = why_not {
                    return match &self.policy {
                        Some(_) => ToolOutcome::Failed(ToolError {
                            message: error_context(&error.message, attempt, &waits, why_not),
                            ..error.clone()
                        }),
                        None => outcome,
                    };
                }
                attempt += 1;
                let wait = self
                    .policy
                    .as_ref()
                    .map_or_else(|| backoff(attempt), |p| p.wait(attempt));
                let delay_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                waits.push(delay_ms);
                self.run
                    .emit_call(
                        &inv.call.tool_call_id,
                        EventKind::ToolCallRetry {
                            tool: inv.tool.name.clone(),
                            attempt,
                            error: error.message.clone(),
                            delay_ms,
                        },
                    )
                    .await;
                last = Some(error.message.clone());
                tokio::select! {
                    () = signal.cancelled() => return outcome,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        })
    }
}

/// The error the model gets after the runtime's retries (§5.10(4)): the last error, how often
/// the call was tried, and why it is not tried again.
fn error_context(message: &str, retries: u32, waits: &[u64], why_not: &str) -> String {
    let tried = match retries {
        0 => "the call was tried once".to_owned(),
        n => format!(
            "the call was tried {} times (retried after {} ms)",
            n + 1,
            waits
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" ms, ")
        ),
    };
    format!(
        "{message} [runtime: {tried}; {why_not}; this is the last error — change the arguments or the approach]"
    )
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(2), Duration::from_millis(200));
        assert_eq!(backoff(3), Duration::from_millis(400));
        assert_eq!(backoff(30), Duration::from_secs(5));
    }
}
