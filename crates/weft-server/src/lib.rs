//! `weft serve`: a project's agents over HTTP.
//!
//! * **The Vercel AI SDK chat contract** ([`chat`]): `useChat` with `DefaultChatTransport`
//!   works against `/api/chat` unchanged — UI message streams live from the runtime's
//!   events, resumable streams served from the durable event log, stop, and tool approvals
//!   the AI SDK v6 way, checked against the run's pending decisions in the store.
//! * **Run events** ([`runs`]): a run's record, its events as SSE, deciding pending calls.
//! * **A run and thread API for programs** ([`api`]), in the shape the LangGraph SDK clients
//!   use: assistants (the project's agents), threads, runs, with its OpenAPI document at
//!   `/openapi.json`.
//! * **The web page** at `/`.
//!
//! Every request passes the guard ([`auth`]) first: `Host` and `Origin` checks, a token
//! (generated at start or made with `weft tokens create`) and its scope. The server holds
//! no run logic: it starts, resumes and stops runs of `weft_runtime::Runtime` and reads
//! their events back.
//!
//! ```no_run
//! # async fn demo(project: weft_standard::Project, runtime: weft_runtime::Runtime) -> std::io::Result<()> {
//! let config = weft_server::ServerConfig::new("127.0.0.1:4111".parse().expect("an address"));
//! let server = weft_server::Server::new(config, project, runtime);
//! let listener = tokio::net::TcpListener::bind(server.config().addr).await?;
//! server.serve(listener, std::future::pending()).await
//! # }
//! ```

pub mod api;
pub mod auth;
pub mod chat;
mod config;
pub mod driver;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod page;
pub mod runs;
pub mod sse;
mod state;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tokio::net::TcpListener;

pub use config::{Auth, Busy, Limits, ServerConfig, StreamSettings};
pub use error::ApiError;
pub use state::AppState;

/// A server of one project.
#[derive(Debug, Clone)]
pub struct Server {
    state: AppState,
}

impl Server {
    /// A server of `project` driving runs with `runtime`.
    pub fn new(
        config: ServerConfig,
        project: weft_standard::Project,
        runtime: weft_runtime::Runtime,
    ) -> Self {
        Server {
            state: AppState::new(config, project, runtime),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &ServerConfig {
        self.state.config()
    }

    /// Its shared state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Every route, behind the guard.
    pub fn router(&self) -> Router {
        let state = self.state.clone();
        let api = Router::new()
            .route("/api/info", get(runs::info))
            .route("/api/chat", post(chat::post_default))
            .route("/api/agents/{agent}/chat", post(chat::post_agent))
            .route("/api/chat/{id}/stream", get(chat::stream))
            .route("/api/agents/{agent}/chat/{id}/stream", get(chat::stream))
            .route("/api/chat/{id}/stop", post(chat::stop))
            .route("/api/agents/{agent}/chat/{id}/stop", post(chat::stop))
            .route("/api/chat/{id}/messages", get(chat::messages))
            .route("/api/runs/{run}", get(runs::get))
            .route("/api/runs/{run}/events", get(runs::events))
            .route("/api/runs/{run}/decisions/{id}", post(runs::decide))
            .merge(page::router())
            .merge(api::router());
        api.layer(DefaultBodyLimit::max(state.config().limits.body_bytes))
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                auth::guard,
            ))
            .with_state(state)
    }

    /// Serves on `listener` until `shutdown` resolves; then stops taking requests, stops
    /// the runs this process drives (they end `interrupted`, resumable: `weft resume` or the
    /// next server goes on with them) and waits for them to record it.
    ///
    /// # Errors
    /// I/O errors of the listener.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let runtime = self.state.runtime().clone();
        // Runs a previous server queued start when their turn comes.
        tokio::spawn(api::runs::restart_queues(self.state.clone()));
        let closing = self.state.closing().clone();
        // Scheduled effects fire while the server runs (weft-runtime's scheduler; runs for
        // idle threads start as the server, with the thread's agent). It stops with the
        // server: an effect it was firing is fired or still scheduled.
        let scheduler = tokio::spawn(
            weft_runtime::schedule::EffectScheduler::new(
                self.state.queue_driver().clone(),
                self.state.queue_runs(&auth::Caller::server(), None),
            )
            .run(closing.clone()),
        );
        let router = self.router();
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                shutdown.await;
                closing.cancel();
                // Open streams end when their runs do: stop the runs first.
                for run in runtime.live_runs() {
                    runtime.stop(&run);
                }
            })
            .await?;
        if let Err(error) = scheduler.await {
            tracing::warn!(%error, "the effect scheduler failed");
        }
        let runtime = self.state.runtime();
        for _ in 0..400 {
            if runtime.live_runs().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        runtime
            .store()
            .flush()
            .await
            .map_err(std::io::Error::other)?;
        Ok(())
    }
}
