//! Standard Agents sessions as runs of `weft-runtime`: [`StandardSessions`] implements the
//! runtime's [`Sessions`], so `Runtime::start` / `Runtime::resume` drive a project's agent
//! with the spec's stop rules, handoffs and both `dual_ai` sides — the same code for a new
//! run and for one resumed in another process.

use async_trait::async_trait;
use weft_agent::checkpoint::CheckpointMode;
use weft_provider::TokenUsage;
use weft_runtime::spec::SessionProgram;
use weft_runtime::{ActiveRun, EndStatus, ProgramEnd, RunError, Sessions};
use weft_store::Durability;

use crate::project::{Project, snapshot_of};
use crate::session::{Durable, SessionOptions, SessionStatus, run_session};

/// Runs Standard Agents sessions for the runtime.
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use weft_runtime::Runtime;
/// use weft_standard::StandardSessions;
/// # fn demo(store: weft_store::Store) {
/// let runtime = Runtime::new(store).with_sessions(Arc::new(StandardSessions));
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct StandardSessions;

/// The files of the project of `program` that changed on disk since the run recorded its
/// snapshot (empty when nothing changed, or when the run has no snapshot).
pub fn changed_since_start(program: &SessionProgram) -> Vec<String> {
    let Some(recorded) = &program.project else {
        return Vec::new();
    };
    match snapshot_of(program.project_folder()) {
        Ok(now) if now.hash != recorded.hash => recorded.changed_files(&now),
        _ => Vec::new(),
    }
}

/// The project of `program`: the snapshot the run recorded, else the folder's files.
fn project_of(program: &SessionProgram) -> Result<Project, crate::ProjectError> {
    match &program.project {
        Some(snapshot) => Project::from_snapshot(snapshot, program.project_folder()),
        None => Project::load(program.project_folder()),
    }
}

#[async_trait]
impl Sessions for StandardSessions {
    /// The project's runtime profile `secretPatterns` ([`Project::secret_patterns`]): every
    /// run of the project — `weft run`, `weft resume`, `weft serve` — records nothing that
    /// matches them.
    fn redactor(
        &self,
        program: &SessionProgram,
    ) -> Option<(String, std::sync::Arc<dyn weft_store::Redactor>)> {
        let patterns = project_of(program).ok()?.secret_patterns();
        if patterns.is_empty() {
            return None;
        }
        // The project was validated when it loaded: its patterns compile.
        match weft_runtime::profile::redact::PatternRedactor::new(
            std::sync::Arc::new(weft_store::NoRedaction),
            &patterns,
        ) {
            Ok(redactor) => Some((
                format!("secretPatterns\n{}", patterns.join("\n")),
                std::sync::Arc::new(redactor),
            )),
            Err(error) => {
                tracing::warn!(%error, "the project's secretPatterns do not compile");
                None
            }
        }
    }

    fn models(&self, program: &SessionProgram) -> Vec<String> {
        let project = project_of(program);
        project.map_or_else(
            |_| Vec::new(),
            |p| p.models_of(&program.agent, program.model_override.as_deref()),
        )
    }

    async fn admit(
        &self,
        program: &SessionProgram,
        store: &weft_store::Store,
        thread: Option<&str>,
    ) -> Result<(), RunError> {
        let project =
            project_of(program).map_err(|e| RunError::Agent(format!("the run's project: {e}")))?;
        let Some(agent) = project.agent(&program.agent) else {
            return Ok(());
        };
        match crate::variables::check_required(store, &project, agent, thread).await? {
            Ok(_) => Ok(()),
            Err(missing) => Err(RunError::Refused(missing.to_string())),
        }
    }

    async fn run(&self, program: &SessionProgram, run: ActiveRun) -> Result<ProgramEnd, RunError> {
        let project =
            project_of(program).map_err(|e| RunError::Agent(format!("the run's project: {e}")))?;
        let agent = project.agent(&program.agent).ok_or_else(|| {
            RunError::Agent(format!("the project has no agent {:?}", program.agent))
        })?;
        let thread = run.record.thread_id.clone();
        // Side B's conversation has its own checkpoints (a resumed run, or a run on a thread
        // an earlier run left); the later checkpoint of the two sides holds the larger usage
        // total (checkpoints record the run's usage to them).
        let side_b = run
            .store
            .latest_checkpoint(&format!("{thread}.sideB"))
            .await?;
        let total = |u: &TokenUsage| u.input_tokens + u.output_tokens;
        let base_usage = match side_b.as_ref().and_then(|c| c.checkpoint.usage.clone()) {
            // Only this run's own checkpoints count: side B's of an earlier run on the
            // thread hold that run's usage.
            Some(b) if run.resumed && total(&b) > total(&run.base_usage) => b,
            _ => run.base_usage.clone(),
        };
        let state_b = side_b.map(|c| c.checkpoint.state);
        let steps_before = run.state.step() + state_b.as_ref().map_or(0, |s| s.step());
        let mut options = SessionOptions::new(&program.workspace);
        // The tools' confinement: the run's store hidden, the definition files read-only,
        // commands in the sandbox mode of `--sandbox` or the project's `sandbox` key.
        let store = match weft_store::StoreUrl::parse(run.store.location()) {
            Ok(weft_store::StoreUrl::Sqlite(path)) => Some(path),
            _ => None,
        };
        let mode = program
            .sandbox
            .as_deref()
            .and_then(|m| m.parse::<weft_tools::Mode>().ok());
        options.confinement = project.confinement(store.as_deref(), mode);
        options.model_override = program.model_override.clone();
        options.base_urls = program.base_urls.clone();
        options.runtime_profile =
            program.profile.as_deref() == Some(weft_runtime::profile::PROFILE_NAME);
        options.providers = run.providers.clone();
        options.signal = run.signal.clone();
        // The thread's variables; a required one without a value fails the run (a new run
        // is refused before it is recorded, see `Sessions::admit`).
        options.variables =
            match crate::variables::check_required(&run.store, &project, agent, Some(&thread))
                .await?
            {
                Ok(env) => env,
                Err(missing) => return Err(RunError::Refused(missing.to_string())),
            };
        // A new run with no input is for the thread's queue (a queued tool call on an idle
        // thread, a child's silent result): its first step takes what waits there.
        options.for_queue = run.spec.input.is_empty()
            && !run.resumed
            && !weft_store::ThreadQueue::queued(&run.store, &thread)
                .await?
                .is_empty();
        options.thread_id = Some(thread);
        options.initial_state = run.state.clone();
        options.initial_state_b = state_b;
        options.durable = Some(Durable {
            run: run.ledger.clone(),
            store: run.store.clone(),
            mode: match run.spec.durability {
                Durability::Sync => CheckpointMode::Sync,
                Durability::Async => CheckpointMode::Async,
            },
            base_usage: base_usage.clone(),
        });
        if project.gates_in_runs() {
            // The protocol's session start for Weft's own run: memory and rules in the
            // system prompt, and the decision loop's plan for the run's task (its class, the
            // tool to act with, what to query first); read off the async threads, never fails
            // the run.
            let (root, cwd) = (project.dir().to_owned(), program.workspace.clone());
            let task = run.spec.input.clone();
            options.start_context = tokio::task::spawn_blocking(move || {
                format!(
                    "{}\n<uap-task>\n{}</uap-task>",
                    weft_gate::start_context(&root, &cwd).trim_end(),
                    weft_gate::classify_task(&task).plan()
                )
            })
            .await
            .ok();
        }
        let background = crate::background::Background::new();
        options.background = Some(background.clone());
        let mut had_background = false;
        if run.resumed {
            // The children this run left working in the background go on.
            let parent = crate::subagent::Parent {
                project: std::sync::Arc::new(project.clone()),
                options: options.clone(),
                agent: weft_runtime::event::AgentPath::root(&agent.name),
                transfer: crate::variables::Env::default(),
                child_files: crate::filesystem::ChildFiles::Own,
            };
            had_background = crate::background::restart(&parent).await?;
        }
        let (outcome, usage) = settle(
            &project,
            &agent.name,
            &mut options,
            (&background, had_background),
        )
        .await?;
        let mut status = match outcome.status {
            SessionStatus::Completed => EndStatus::Completed,
            SessionStatus::Failed => EndStatus::Failed,
            SessionStatus::Interrupted => EndStatus::Interrupted,
        };
        let mut message = outcome.message;
        if status == EndStatus::Completed && project.completion_gates_for_runs() {
            // `[gates] completeRuns = true`: "done" only when the completion checklist passes.
            if let Some(refusal) =
                completion_refusal(project.dir(), &program.workspace, &run.ledger).await
            {
                status = EndStatus::Failed;
                message = refusal;
            }
        }
        Ok(ProgramEnd {
            status,
            message,
            steps: outcome.state_a.step() + outcome.state_b.as_ref().map_or(0, |s| s.step()),
            steps_before,
            usage,
        })
    }
}

/// How many of a conversation's last messages are searched for a queued message it holds.
const HELD_LOOKBACK: usize = 64;

/// Runs the session, then — when it started children in the background — drives its thread
/// until it is settled (see `crate::background`): while background children run or messages
/// wait in the thread's queue, every queued message starts the next turn (taken by its first step, so a crash in between loses
/// nothing and takes nothing twice). Returns the last session's outcome and the run's
/// usage.
async fn settle(
    project: &Project,
    agent: &str,
    options: &mut SessionOptions,
    (background, had_background): (&crate::background::Background, bool),
) -> Result<(crate::session::SessionOutcome, TokenUsage), RunError> {
    use weft_store::ThreadQueue as _;
    let mut usage = options
        .durable
        .as_ref()
        .map(|d| d.base_usage.clone())
        .unwrap_or_default();
    let mut outcome = run_session(project, agent, "", options)
        .await
        .map_err(|e| RunError::Agent(e.to_string()))?;
    usage.merge(&outcome.usage);
    usage.cycles = None;
    while let (Some(durable), Some(thread)) = (&options.durable, &options.thread_id) {
        if background.started() == 0 && !had_background {
            // No child works in the background: the run ends with its session (a message
            // queued meanwhile starts the thread's next run, as a driver decides).
            break;
        }
        if outcome.status != SessionStatus::Completed {
            // A failed or interrupted parent takes no more turns; its children end first
            // (an interruption stops them too).
            while background.next().await {}
            break;
        }
        let mut queued = durable.store.queued(thread).await?;
        // A message the conversation already holds (its step was checkpointed just before a
        // crash, the queue not yet emptied) leaves the queue without a new turn.
        let held: Vec<String> = queued
            .iter()
            .filter(|q| {
                outcome
                    .state_a
                    .messages()
                    .rev()
                    .take(HELD_LOOKBACK)
                    .any(|m| {
                        m.id() == q.id
                            || matches!(&*m, weft_provider::Message::Assistant(a)
                                if a.tool_calls.iter().any(|c| c.tool_call_id == q.id))
                    })
            })
            .map(|q| q.id.clone())
            .collect();
        if !held.is_empty() {
            durable.store.dequeue(thread, &held).await?;
            queued.retain(|q| !held.contains(&q.id));
        }
        if queued.is_empty() {
            if background.running() > 0 {
                background.next().await;
                continue;
            }
            // Nothing runs: a child reports (queues) before it counts as ended, so what
            // the children reported is in the queue by now; a last look, then settled.
            if durable.store.queued(thread).await?.is_empty() {
                break;
            }
            continue;
        }
        // The queued messages start the next turn; the first step takes them out of the
        // queue once it is checkpointed (it finds them in the conversation).
        // (A child's result stays silent: flagged for the views, read by the model.)
        // Queued tool calls are taken by the turn's first step (after the messages queued
        // before them): a queue that starts with one starts a turn with no new message.
        let messages: Vec<_> = queued
            .into_iter()
            .take_while(|q| q.tool.is_none())
            .map(weft_runtime::ledger::queued_message)
            .collect();
        options.for_queue = messages.is_empty();
        options.initial_state = outcome.state_a.with_messages(messages);
        options.initial_state_b = outcome.state_b.clone();
        if let Some(durable) = &mut options.durable {
            durable.base_usage = usage.clone();
            durable.run.wake_inbox();
        }
        outcome = run_session(project, agent, "", options)
            .await
            .map_err(|e| RunError::Agent(e.to_string()))?;
        usage.merge(&outcome.usage);
        usage.cycles = None;
    }
    Ok((outcome, usage))
}

/// Runs the project's completion checklist in `workspace` (off the async threads: its checks
/// are commands) and logs it; the reason a run may not end completed, when a required check
/// fails or the checklist cannot be read.
async fn completion_refusal(
    root: &std::path::Path,
    workspace: &std::path::Path,
    run: &weft_runtime::ledger::RunContext,
) -> Option<String> {
    let (root, workspace) = (root.to_owned(), workspace.to_owned());
    let checked = tokio::task::spawn_blocking(move || {
        weft_gate::GateConfig::load(&root)
            .map(|config| weft_gate::run_checklist(&config, &workspace, None, None))
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|checked| checked);
    match checked {
        Ok(checklist) => {
            run.emit(weft_runtime::EventKind::CompletionGates {
                passed: checklist.passed(),
                summary: serde_json::json!(checklist.summary()),
            })
            .await;
            (!checklist.passed()).then(|| checklist.reason())
        }
        Err(error) => Some(format!(
            "the completion checklist could not run, so the run does not end completed: {error}"
        )),
    }
}
