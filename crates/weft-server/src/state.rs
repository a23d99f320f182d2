//! [`AppState`]: what every route shares — the configuration, the project, the runtime —
//! and the per-thread locks and per-caller run counts that keep concurrent requests
//! consistent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use weft_runtime::Runtime;
use weft_runtime::queue_driver::QueueDriver;
use weft_standard::{AgentDefinition, Project};
use weft_store::{Store, Tokens as _};

use crate::auth::{Caller, Scope};
use crate::config::ServerConfig;
use crate::error::ApiError;

/// The state shared by every route (cheap to clone).
#[derive(Debug, Clone)]
pub struct AppState(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    config: ServerConfig,
    project: Project,
    runtime: Runtime,
    /// The thread queue's driver (weft-runtime): starts runs for idle threads' queued work,
    /// and holds the per-thread locks: deciding what a message does (start, continue,
    /// queue) and starting the run happen under the thread's.
    driver: QueueDriver,
    /// Runs each caller drives now.
    running: Mutex<HashMap<String, usize>>,
    /// When the server started (ISO 8601).
    started_at: String,
    /// Cancelled when the server stops taking requests: background work (a queued run
    /// waiting for its turn) stops then, and the next server takes it up.
    closing: tokio_util::sync::CancellationToken,
}

impl AppState {
    /// The state of a server of `project`, driving runs with `runtime`.
    pub fn new(config: ServerConfig, project: Project, runtime: Runtime) -> Self {
        AppState(Arc::new(Inner {
            config,
            project,
            driver: QueueDriver::new(runtime.clone()),
            runtime,
            running: Mutex::new(HashMap::new()),
            started_at: weft_store::now_string(),
            closing: tokio_util::sync::CancellationToken::new(),
        }))
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    /// When the server started (ISO 8601).
    pub fn started_at(&self) -> &str {
        &self.0.started_at
    }

    /// Cancelled when the server stops taking requests.
    pub fn closing(&self) -> &tokio_util::sync::CancellationToken {
        &self.0.closing
    }

    /// The project served.
    pub fn project(&self) -> &Project {
        &self.0.project
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.0.runtime
    }

    /// The store.
    pub fn store(&self) -> &Store {
        self.0.runtime.store()
    }

    /// `name`'s agent, or the project's default agent.
    ///
    /// # Errors
    /// 404 for an unknown agent; 400 when none is named and the project has no default.
    pub fn agent(&self, name: Option<&str>) -> Result<&AgentDefinition, ApiError> {
        let project = self.project();
        match name {
            Some(name) => project.agent(name).ok_or_else(|| {
                ApiError::not_found(format!(
                    "the project has no agent {name:?}; it has: {}",
                    agent_names(project)
                ))
            }),
            None => project.default_agent().ok_or_else(|| {
                ApiError::bad_request(format!(
                    "the project has several agents and no defaultAgent: name one ({})",
                    agent_names(project)
                ))
            }),
        }
    }

    /// The thread queue's driver.
    pub fn queue_driver(&self) -> &QueueDriver {
        &self.0.driver
    }

    /// The lock of `thread` (the queue driver's).
    pub(crate) fn thread_lock(&self, thread: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.0.driver.thread_lock(thread)
    }

    /// Counts a run against `caller`'s limit; `None` when the caller is at its limit.
    pub(crate) fn admit(&self, caller: &Caller) -> Option<RunPermit> {
        let mut running = self
            .0
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = running.entry(caller.id.clone()).or_default();
        if *count >= self.config().limits.runs_per_token {
            return None;
        }
        *count += 1;
        Some(RunPermit {
            state: self.clone(),
            caller: caller.id.clone(),
        })
    }

    /// The stored token `secret` names, if it is valid (checked on every request, so a
    /// revoked token is refused from the next one on). A store that cannot be read refuses.
    pub(crate) async fn verify_stored_token(&self, secret: &str) -> Option<Caller> {
        match self.store().verify_token(secret).await {
            Ok(Some(token)) => Some(Caller {
                id: token.id,
                scope: if token.scope.allows_write() {
                    Scope::Full
                } else {
                    Scope::Read
                },
            }),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "checking a token failed; the request is refused");
                None
            }
        }
    }
}

/// A run counted against a caller's limit until it is dropped (when the run stops).
#[derive(Debug)]
pub(crate) struct RunPermit {
    state: AppState,
    caller: String,
}

impl Drop for RunPermit {
    fn drop(&mut self) {
        let mut running = self
            .state
            .0
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = running.get_mut(&self.caller) {
            *count = count.saturating_sub(1);
        }
    }
}

fn agent_names(project: &Project) -> String {
    project
        .agents()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
