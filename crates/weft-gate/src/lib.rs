//! The Universal Agent Protocol's harness side: the hooks a harness (Claude Code, Cursor,
//! Codex, …) runs around an agent's tool calls, the gates they apply, the worktree
//! convention and the completion checklist.
//!
//! - [`Gates::check`] judges one [`ToolInvocation`] — the worktree gate for edits, the
//!   dangerous-command guard for shell commands, the policy gate for every tool — and returns
//!   a binary [`Verdict`]. It is a plain library call, so Weft's own tool pipeline can use it
//!   as a stage.
//! - [`run_hook`] is `weft hook <event>`: a harness's JSON payload in, its answer (exit code,
//!   stdout, stderr) out, in that harness's contract.
//! - [`GateDb`] keeps the gate's tables (`gate_*`: policies, audit trail, live agents and
//!   claims) in the project's SQLite file, beside the store's, with its own migrations.
//! - [`worktree`], [`install`] and [`compliance`] back `weft worktree`, `weft hooks` and
//!   `weft compliance check`; [`run_checklist`] runs the completion checklist, [`run_ladder`]
//!   the verifier ladder of `weft deliver`; [`schema_diff()`] backs `weft schema-diff` and the
//!   `schemaDiff` check, [`run_review`] the parallel expert review of the `review` check.
//!
//! # Example: one check
//!
//! ```
//! use serde_json::json;
//! use weft_gate::{GateConfig, Gates, ToolInvocation};
//!
//! let root = std::env::temp_dir().join("weft-gate-doc");
//! let gates = Gates::new(&root, GateConfig::default()).with_worktree_override(false);
//! let edit = ToolInvocation::new("Edit", json!({"file_path": "src/lib.rs"}), &root);
//! assert!(!gates.check(&edit).allowed());
//! let inside = ToolInvocation::new(
//!     "Write",
//!     json!({"file_path": ".worktrees/001-fix/src/lib.rs"}),
//!     &root,
//! );
//! assert!(gates.check(&inside).allowed());
//! let push = ToolInvocation::new("Bash", json!({"command": "git push --force origin main"}), &root);
//! assert!(!gates.check(&push).allowed());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod classify;
mod command_guard;
mod completion;
pub mod compliance;
mod config;
mod context;
mod db;
mod error;
mod gates;
mod hook;
pub mod install;
mod invocation;
mod ladder;
mod policy;
mod process;
mod project;
pub mod review;
pub mod schema_diff;
mod shell;
mod verdict;
pub mod worktree;

pub use classify::{TaskClass, classify_task};
pub use completion::{CheckResult, Checklist, run_checklist};
pub use config::{CHECK_NAMES, Check, CheckSpec, CompletionConfig, GateConfig, Reviewer};
pub use context::start_context;
pub use db::{AgentRow, AuditEntry, GateDb, TaskTrace, now_ms};
pub use error::GateError;
pub use gates::{Gates, NO_WORKTREE_ENV, is_worktree_name};
pub use hook::{
    Harness, HookAnswer, HookEvent, PayloadReading, STALE_AFTER, read_payload, run_hook,
};
pub use invocation::{Stage, ToolInvocation, ToolKind};
pub use ladder::{LADDER, LadderResult, RungResult, RungStatus, has_ladder, run_ladder};
pub use policy::{Policy, check_pattern};
pub use project::{Repo, normalize, project_root};
pub use review::{Review, ReviewVerdict, run_review};
pub use schema_diff::{SchemaChange, SchemaDiff, schema_diff};
pub use verdict::{Finding, Level, Verdict};
