//! Starting, resuming and stopping runs for requests. The runs themselves are the
//! runtime's (`weft_runtime::Runtime`): this module only decides which to start, on which
//! thread, for whom, and lets them go on when the request that started them is gone.

use axum::http::StatusCode;
use weft_runtime::ownership::effective_status;
use weft_runtime::{ResumeOptions, RunHandle};
use weft_store::{EventLog as _, RunRecord, RunStatus, Runs as _, ThreadRecord, Threads as _};

use std::sync::Arc;

use weft_runtime::queue_driver::{LaunchError, QueueInput, QueueRuns};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::{AppState, RunPermit};

/// Longest thread id a client may choose.
const MAX_THREAD_ID: usize = 128;

/// A run a request started or resumed: its id and the `seq` its new events come after.
#[derive(Debug, Clone)]
pub struct Started {
    /// The run.
    pub run_id: String,
    /// The thread.
    pub thread_id: String,
    /// The events of this drive are those after this `seq`.
    pub after_seq: u64,
}

/// Whether `id` may name a thread (letters, digits, `-`, `_`, `.`, `:`; not `.` or `..`).
pub fn valid_thread_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_THREAD_ID
        && id != "."
        && id != ".."
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

impl AppState {
    /// The thread's newest run, if any.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn latest_run(&self, thread: &str) -> Result<Option<RunRecord>, ApiError> {
        Ok(self.store().thread_runs(thread).await?.into_iter().next())
    }

    /// The thread's run in progress (driven here or by another live process), if any.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn active_run(&self, thread: &str) -> Result<Option<RunRecord>, ApiError> {
        Ok(self
            .latest_run(thread)
            .await?
            .filter(|run| self.is_running(run)))
    }

    /// Whether `run` is being driven now.
    pub fn is_running(&self, run: &RunRecord) -> bool {
        self.runtime().is_live(&run.run_id)
            || effective_status(self.store(), run) == RunStatus::Running
    }

    /// Starts a run of `agent` on `thread` (created when new) with `input` as the next user
    /// message; `input_id` is the id the client gave that message.
    ///
    /// # Errors
    /// 400 for a bad thread id or input, 422 when the project cannot run the agent (a
    /// missing key, an unknown model: the preflight's problems), 429 when the caller
    /// drives as many runs as it may; runtime and storage failures.
    pub async fn start_run(
        &self,
        caller: &Caller,
        agent: Option<&str>,
        thread: &str,
        input: String,
        input_id: Option<String>,
    ) -> Result<Started, ApiError> {
        self.start_run_as(caller, agent, thread, input, input_id, None)
            .await
    }

    /// [`AppState::start_run`] with the run's id chosen beforehand (`Some`): the id a client
    /// was handed for a run queued behind the thread's run in progress.
    ///
    /// # Errors
    /// As [`AppState::start_run`].
    pub async fn start_run_as(
        &self,
        caller: &Caller,
        agent: Option<&str>,
        thread: &str,
        input: String,
        input_id: Option<String>,
        run_id: Option<String>,
    ) -> Result<Started, ApiError> {
        self.check_input(&input)?;
        let input = Input {
            text: input,
            client_id: input_id,
            queued: None,
        };
        self.launch(caller, agent, thread, input, run_id, true)
            .await
    }

    async fn launch(
        &self,
        caller: &Caller,
        agent: Option<&str>,
        thread: &str,
        input: Input,
        run_id: Option<String>,
        follow: bool,
    ) -> Result<Started, ApiError> {
        if !valid_thread_id(thread) {
            return Err(ApiError::bad_request(format!(
                "{thread:?} is not a valid thread id: use letters, digits, '-', '_', '.' or ':' (at most {MAX_THREAD_ID})"
            )));
        }
        let agent = self.agent(agent)?;
        let base_urls = weft_standard::preflight::check(
            self.project(),
            agent,
            self.config().launch.model.as_deref(),
            None,
            self.runtime().providers(),
            self.config().model_check,
        )
        .map_err(|problems| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "cannot_run",
                format!(
                    "the agent {} cannot run: {}",
                    agent.name,
                    problems.join("; ")
                ),
            )
        })?;
        let permit = self.permit(caller)?;
        let mut launch = self.config().launch.clone();
        launch.base_urls.extend(base_urls);
        let mut spec = launch
            .spec(self.project(), agent, input.text)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        spec.input_id = input.client_id;
        spec.queued_input = input.queued;
        if self.store().thread(thread).await?.is_none() {
            self.store().put_thread(&ThreadRecord::new(thread)).await?;
        }
        let handle = match run_id {
            Some(id) => {
                self.runtime()
                    .start_on_as(id, Some(thread), spec, true)
                    .await?
            }
            None => self.runtime().start_on(Some(thread), spec, true).await?,
        };
        Ok(self.let_run(
            handle,
            thread,
            0,
            permit,
            (caller.clone(), agent.name.clone()),
            follow,
        ))
    }

    /// Resumes `run` (its decisions taken), streaming from its next event.
    ///
    /// # Errors
    /// 429 at the caller's limit; runtime and storage failures.
    pub async fn resume_run(&self, caller: &Caller, run: &RunRecord) -> Result<Started, ApiError> {
        let permit = self.permit(caller)?;
        let after = self.store().last_event_seq(&run.run_id).await?;
        let handle = self
            .runtime()
            .resume(&run.run_id, ResumeOptions::default(), true)
            .await?;
        let agent = run
            .spec
            .pointer("/program/agent")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(self.let_run(
            handle,
            &run.thread_id,
            after,
            permit,
            (caller.clone(), agent),
            true,
        ))
    }

    /// Rejects a message longer than the limit.
    pub(crate) fn check_input(&self, input: &str) -> Result<(), ApiError> {
        if input.trim().is_empty() {
            return Err(ApiError::bad_request("the message is empty"));
        }
        let limit = self.config().limits.message_chars;
        if input.chars().count() > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "message_too_large",
                format!("the message is longer than {limit} characters"),
            ));
        }
        Ok(())
    }

    fn permit(&self, caller: &Caller) -> Result<RunPermit, ApiError> {
        self.admit(caller).ok_or_else(|| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_runs",
                format!(
                    "this caller already drives {} runs, the most it may at once",
                    self.config().limits.runs_per_token
                ),
            )
        })
    }

    /// Lets a started run go on without the request: its events are read from the log by
    /// whoever streams them, and its permit is given back when it stops. When it completes
    /// with messages left in the thread's queue (queued during its last model call), the
    /// next run starts for them, as `caller`, with the same agent (`follow`; a run the queue
    /// driver started is followed by the driver).
    fn let_run(
        &self,
        mut handle: RunHandle,
        thread: &str,
        after_seq: u64,
        permit: RunPermit,
        (caller, agent): (Caller, String),
        follow: bool,
    ) -> Started {
        if let Some(mut events) = handle.take_events() {
            events.detach();
        }
        let run_id = handle.id().to_owned();
        let state = self.clone();
        let thread_id = thread.to_owned();
        tokio::spawn(async move {
            let completed = match handle.outcome().await {
                Ok(outcome) => {
                    tracing::info!(run = %outcome.run_id, code = outcome.exit_code(), "run stopped");
                    matches!(outcome.end, weft_runtime::RunEnd::Completed { .. })
                }
                Err(error) => {
                    tracing::warn!(%error, "a run failed to drive");
                    false
                }
            };
            drop(permit);
            if completed && follow {
                state.run_the_queue(&caller, &agent, &thread_id).await;
            }
        });
        Started {
            run_id,
            thread_id: thread.to_owned(),
            after_seq,
        }
    }

    /// Starts a run for what is left in `thread`'s queue, if anything and no run is in
    /// progress (weft-runtime's [`QueueDriver`](weft_runtime::queue_driver::QueueDriver)
    /// decides; its runs start as `caller`, with `agent`: [`ServeRuns`]).
    async fn run_the_queue(&self, caller: &Caller, agent: &str, thread: &str) {
        let runs = self.queue_runs(caller, (!agent.is_empty()).then_some(agent));
        if let Err(error) = Box::pin(self.queue_driver().run_the_queue(thread, &runs)).await {
            tracing::warn!(%error, "the thread's queue could not start a run; it stays queued");
        }
    }

    /// How the queue driver starts this server's runs: as `caller`, with `agent` (`None`:
    /// the agent of the thread's latest run, else the project's default agent).
    pub fn queue_runs(&self, caller: &Caller, agent: Option<&str>) -> Arc<dyn QueueRuns> {
        Arc::new(ServeRuns {
            state: self.clone(),
            caller: caller.clone(),
            agent: agent.map(str::to_owned),
        })
    }

    /// Stops the thread's run in progress, if this process drives it; waits (briefly) for it
    /// to record its end. Returns the run stopped.
    ///
    /// # Errors
    /// 409 when another process drives it; storage failures.
    pub async fn stop_thread(&self, thread: &str) -> Result<Option<String>, ApiError> {
        let Some(run) = self.active_run(thread).await? else {
            return Ok(None);
        };
        if !self.runtime().stop(&run.run_id) {
            return Err(ApiError::conflict(format!(
                "run {} is driven by another process; stop it there",
                run.run_id
            )));
        }
        // The run records `interrupted` at its next safe point; wait for that so a client
        // that asks right after sees it stopped.
        for _ in 0..200 {
            if !self.runtime().is_live(&run.run_id) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        Ok(Some(run.run_id))
    }
}

/// A run's input message and the ids it goes by.
struct Input {
    text: String,
    /// The id the client gave the message (a chat's UI message id).
    client_id: Option<String>,
    /// The thread-queue entry it is ([`weft_runtime::spec::RunSpec::queued_input`]).
    queued: Option<String>,
}

/// The queue driver's way to start this server's runs ([`AppState::queue_runs`]): a run of
/// the thread's agent as the caller that queued the work, counted against its limit.
struct ServeRuns {
    state: AppState,
    caller: Caller,
    agent: Option<String>,
}

#[async_trait::async_trait]
impl QueueRuns for ServeRuns {
    async fn start(&self, thread: &str, input: QueueInput) -> Result<String, LaunchError> {
        let agent = match &self.agent {
            Some(agent) => Some(agent.clone()),
            None => self
                .state
                .latest_run(thread)
                .await?
                .and_then(|run| {
                    run.spec
                        .pointer("/program/agent")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_owned)
                })
                .filter(|agent| self.state.project().agent(agent).is_some()),
        };
        let input = match input {
            // The queue entry's id is the message's: the client that queued it knows it.
            QueueInput::Message { text, id } => Input {
                text,
                client_id: Some(id.clone()),
                queued: Some(id),
            },
            QueueInput::Queue => Input {
                text: String::new(),
                client_id: None,
                queued: None,
            },
        };
        let started =
            Box::pin(
                self.state
                    .launch(&self.caller, agent.as_deref(), thread, input, None, false),
            )
            .await?;
        Ok(started.run_id)
    }
}
