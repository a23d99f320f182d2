//! The Universal Agent Protocol's gates for Weft's own runs (issue 23 item 7): with
//! `[gates] runs = true` in `weft.toml`, every tool call of the project's runs — the agents'
//! own and their sub-agents' — passes the same gates `weft hook pre-tool-use` applies to
//! Claude Code or Cursor (the worktree gate for edits, the dangerous-command guard, the
//! policy database's REQUIRED policies), as a stage of the runtime's tool pipeline. A denial
//! is an error result the model reads; the run goes on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weft_gate::{GateConfig, GateDb, Gates, ToolInvocation};
use weft_provider::pipeline::{Invocation, Next, Stage, ToolLayer, ToolOutcome};
use weft_provider::tool::BoxFuture;

/// The gates stage of one agent's tool calls.
#[derive(Clone)]
pub(crate) struct GateLayer {
    gates: Arc<Gates>,
    /// Where relative paths of the calls resolve (the workspace).
    cwd: PathBuf,
}

impl GateLayer {
    /// The gates of the project at `root` for calls working in `cwd`, the policies of its
    /// gate database (when there is one) included.
    ///
    /// # Errors
    /// A `weft.toml` or gate database the gates cannot read.
    pub(crate) fn for_project(root: &Path, cwd: &Path) -> Result<Self, String> {
        let config = GateConfig::load(root).map_err(|e| e.to_string())?;
        let policies = {
            let path = GateDb::path_for(root);
            if path.exists() {
                GateDb::open(&path)
                    .and_then(|db| db.policies())
                    .map_err(|e| e.to_string())?
            } else {
                Vec::new()
            }
        };
        Ok(GateLayer {
            gates: Arc::new(Gates::new(root, config).with_policies(policies)),
            cwd: cwd.to_owned(),
        })
    }
}

impl ToolLayer for GateLayer {
    fn stage(&self) -> Stage {
        Stage::Hooks
    }

    fn for_child(&self) -> Option<Arc<dyn ToolLayer>> {
        Some(Arc::new(self.clone()))
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut Invocation<'t>,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let invocation =
                ToolInvocation::new(inv.tool.name.clone(), inv.arguments.clone(), &self.cwd);
            let gates = self.gates.clone();
            // A policy may run an external enforcer: off the async threads.
            let verdict = tokio::task::spawn_blocking(move || gates.check(&invocation)).await;
            match verdict {
                Ok(verdict) if verdict.allowed() => next.run(inv).await,
                Ok(verdict) => ToolOutcome::Refused {
                    stage: Stage::Hooks,
                    reason: format!("denied by the project's gates: {}", verdict.reason()),
                },
                Err(error) => ToolOutcome::Refused {
                    stage: Stage::Hooks,
                    reason: format!(
                        "the gates could not judge this call, so it was not run: {error}"
                    ),
                },
            }
        })
    }
}
