//! The runtime layer of Weft (`../shared/design/RUNTIME.md`): between the agent library
//! (`weft-agent`, `weft-provider`) and everything that drives runs (the CLI, a server,
//! workers). It owns the life of a **run**; `weft-store` keeps what a run must not lose.
//!
//! * [`Runtime::start`] / [`Runtime::resume`] → [`RunHandle`] (`id`, events, `abort`,
//!   `outcome`), the same for every driver;
//! * [`spec::RunSpec`]: typed (a plain agent or a Standard Agents session) and portable (a
//!   session records a snapshot of its project's definitions with a content hash), stored
//!   with the run in one write;
//! * recorded model responses ([`recorded`]): a response is stored before its tools run, and
//!   a resumed step continues from it instead of asking the model again;
//! * the durable tool ledger ([`ledger`]), keyed by a call's position in the run (checked
//!   against tool name and argument hash): a recorded result is returned, never re-run; an
//!   interrupted call stays pending (uncertain), never a recorded result;
//! * costs ([`cost`]): each model call priced when its usage is known, the price recorded
//!   with its response, so a later price change never rewrites what a run cost;
//! * child runs ([`child`]): a tool call running another agent (a subagent) in its own child
//!   thread, inside the run's ledger, budget, event log and trace; delegation
//!   ([`delegation`]: `delegate_to_agent`, spec §5.4) and UAP-1.0 sub-agent tools
//!   ([`subagent`]: a `weft_agent::SubagentTool` called in a run) are configurations of them;
//! * the run tree's message bus ([`bus`]: in-process publish/subscribe by topic, spec §4.2);
//! * ownership ([`ownership`]): an OS lock (a dead owner on this machine is known at once),
//!   a lease with heartbeat (owners elsewhere), and fenced writes (a stale owner stops).
//!
//! * the thread queue's driver ([`queue_driver`]): queued work on an idle thread starts a
//!   run; scheduled effects ([`schedule`]) fire into the queue.
//!
//! Standard Agents sessions are run through the [`Sessions`] trait, implemented by
//! `weft-standard` (which sits above this crate).
//!
//! # Example
//!
//! ```no_run
//! use weft_runtime::{ResumeOptions, Runtime};
//! # async fn demo(store: weft_store::Store) -> Result<(), weft_runtime::RunError> {
//! // After a crash, any process goes on with the run; a second one is refused (exit 5).
//! let handle = Runtime::new(store).resume("RUN-ID", ResumeOptions::default(), false).await?;
//! println!("{:?}", handle.outcome().await?.end);
//! # Ok(()) }
//! ```

pub mod agent_program;
pub mod approval;
pub mod budget;
pub mod bus;
pub mod child;
pub mod cost;
pub mod delegation;
mod error;
pub mod event;
pub mod fork;
pub mod hooks;
pub mod import;
pub mod ledger;
pub mod observer;
pub mod ownership;
pub mod pipeline;
pub mod profile;
pub mod queue_driver;
pub mod recorded;
pub mod run;
pub mod schedule;
pub mod spec;
pub mod subagent;
pub mod thread_state;
pub mod trace;
pub mod transcript;
pub mod ui_messages;

pub use agent_program::ToolRegistry;
pub use error::RunError;
pub use event::{EventKind, RunEvent, RunEvents};
pub use run::{
    ActiveRun, EndStatus, ProgramEnd, ResumeOptions, RunEnd, RunHandle, RunOutcome, Runtime,
    Sessions, default_providers, record_root_agent,
};
pub use thread_state::ThreadState;
