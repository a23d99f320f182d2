//! `weft mcp list PROJECT`: the project's MCP servers (`[mcpServers]` in weft.toml) and the
//! tools each offers, as agents see them (`SERVER__TOOL`), started as a run starts them (stdio
//! servers in the command sandbox). `weft mcp serve PROJECT`: the project's agents as MCP
//! tools on stdin/stdout, so an MCP client (Claude Code, Cursor) can call them; each call is
//! a durable run of the agent (`weft runs list` shows it), whose output is the tool's result.
//! `weft mcp router PROJECT`: the project's MCP servers behind the MCP router (`discover_tools`,
//! `execute_tool`, compressed results).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use weft_mcp::{AgentRunner, ServedAgent};
use weft_runtime::budget::{Budget, DEFAULT_SESSION_MAX_STEPS};
use weft_runtime::spec::{Program, RunSpec, SessionProgram};
use weft_runtime::{RunEnd, Runtime};
use weft_standard::Project;

/// `weft mcp …`.
#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// List the project's MCP servers and their tools (starting each server).
    #[command(
        after_help = "Examples:\n  weft mcp list .\n  weft mcp list my-project --json\n\nExit codes: 0 every server listed its tools, 1 a server could not be started or listed, 2 usage error (an invalid project)."
    )]
    List(ListArgs),
    /// Serve the project's agents as MCP tools over stdio (for Claude Code, Cursor, …).
    #[command(
        after_help = "Each agent is a tool of the same name taking {\"input\": \"…\"}; a call runs the agent (a durable run in the project's store) and returns its output.\n\nExamples:\n  weft mcp serve my-project\n  claude mcp add weft -- weft mcp serve /path/to/my-project"
    )]
    Serve(ServeArgs),
    /// Serve the project's MCP servers behind the MCP router over stdio: two meta-tools
    /// (`discover_tools`, `execute_tool`), results compressed without changing their meaning.
    #[command(
        after_help = "The client sees discover_tools {query, limit} (returns {\"tools\": [{path, description, inputSchema}]}) and execute_tool {path: \"SERVER/TOOL\", args}; the downstream servers are the project's [mcpServers], started as a run starts them (stdio servers in the command sandbox). Text results are compressed: terminal colours removed, JSON minified, blank runs and repeated lines folded with their count.\n\nExamples:\n  weft mcp router my-project\n  claude mcp add weft-router -- weft mcp router /path/to/my-project"
    )]
    Router(RouterArgs),
}

/// `weft mcp router`.
#[derive(Debug, Args)]
pub(crate) struct RouterArgs {
    /// The project folder.
    #[arg(default_value = ".")]
    project: PathBuf,
}

/// `weft mcp list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// The project folder.
    #[arg(default_value = ".")]
    project: PathBuf,
    /// Print JSON: `{"servers": [{"name", "transport", "trusted", "tools": [...], "error"}]}`.
    #[arg(long)]
    json: bool,
}

/// `weft mcp serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The project folder.
    #[arg(default_value = ".")]
    project: PathBuf,
    /// The run store (default: the project's `.weft/weft.db`).
    #[arg(long)]
    store: Option<String>,
}

/// Runs `weft mcp …`.
pub(crate) fn run(command: McpCommand) -> anyhow::Result<ExitCode> {
    match command {
        McpCommand::List(args) => list(args),
        McpCommand::Serve(args) => serve(args),
        McpCommand::Router(args) => router(args),
    }
}

fn load(dir: &std::path::Path) -> anyhow::Result<Result<Project, ExitCode>> {
    match Project::load(dir) {
        Ok(project) => Ok(Ok(project)),
        Err(error @ weft_standard::ProjectError::Invalid(_)) => {
            eprintln!("weft: {} is not a valid project: {error}", dir.display());
            Ok(Err(ExitCode::from(2)))
        }
        Err(error) => Err(error.into()),
    }
}

fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let project = match load(&args.project)? {
        Ok(project) => project,
        Err(code) => return Ok(code),
    };
    let confinement = project.confinement(None, None);
    let hub = project.mcp_hub(&confinement, project.dir());
    let runtime = super::runs::runtime()?;
    let servers = runtime.block_on(async {
        let mut servers = Vec::new();
        for (name, config) in hub.servers() {
            let transport = match config.transport() {
                Some(weft_mcp::Transport::Stdio { command, args }) => {
                    format!("stdio: {command} {}", args.join(" "))
                        .trim_end()
                        .to_owned()
                }
                Some(weft_mcp::Transport::Http { url }) => format!("http: {url}"),
                None => "none".to_owned(),
            };
            let tools = hub.tools(name).await.map(|listed| {
                listed
                    .tools
                    .iter()
                    .map(|tool| {
                        json!({"name": tool.name, "description": tool.description,
                               "sideEffects": tool.side_effects, "parameters": tool.parameters})
                    })
                    .collect::<Vec<_>>()
            });
            servers.push((name.to_owned(), transport, config.trusted, tools));
        }
        hub.shutdown().await;
        servers
    });
    runtime.shutdown_background();
    let failed = servers.iter().any(|(_, _, _, tools)| tools.is_err());
    if args.json {
        let servers: Vec<_> = servers
            .iter()
            .map(|(name, transport, trusted, tools)| match tools {
                Ok(tools) => json!({"name": name, "transport": transport, "trusted": trusted, "tools": tools}),
                Err(error) => json!({"name": name, "transport": transport, "trusted": trusted, "tools": [], "error": error.to_string()}),
            })
            .collect();
        println!("{}", json!({ "servers": servers }));
    } else if servers.is_empty() {
        println!(
            "no MCP servers: declare them in weft.toml as [mcpServers.NAME] (command = … or url = …)"
        );
    } else {
        for (name, transport, trusted, tools) in &servers {
            let trust = if *trusted { ", trusted" } else { "" };
            println!("{name} ({transport}{trust})");
            match tools {
                Ok(tools) => {
                    for tool in tools {
                        let effects = if tool["sideEffects"] == json!(true) {
                            "side-effecting"
                        } else {
                            "read-only"
                        };
                        let description = tool["description"].as_str().unwrap_or_default();
                        let first = description.lines().next().unwrap_or_default();
                        println!(
                            "  {}  [{effects}]  {}",
                            tool["name"].as_str().unwrap_or_default(),
                            super::run::clip(first, 100)
                        );
                    }
                    if tools.is_empty() {
                        println!("  (no tools)");
                    }
                }
                Err(error) => println!("  error: {error}"),
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let project = match load(&args.project)? {
        Ok(project) => project,
        Err(code) => return Ok(code),
    };
    let runtime = super::runs::runtime()?;
    let result = runtime.block_on(async {
        let url = super::location::store_url(args.store.as_deref(), Some(project.dir()))?;
        let store = super::location::open_or_create(&url).await?;
        let prices = super::pricing::project_prices(Some(&project)).map_err(anyhow::Error::msg)?;
        let runner = ProjectAgents {
            runtime: super::run::runtime(store, prices),
            project,
        };
        let (stdin, stdout) = (tokio::io::stdin(), tokio::io::stdout());
        weft_mcp::serve(Arc::new(runner), stdin, stdout)
            .await
            .context("serving MCP on stdio")
    });
    runtime.shutdown_background();
    result.map(|()| ExitCode::SUCCESS)
}

fn router(args: RouterArgs) -> anyhow::Result<ExitCode> {
    let project = match load(&args.project)? {
        Ok(project) => project,
        Err(code) => return Ok(code),
    };
    let confinement = project.confinement(None, None);
    let hub = Arc::new(project.mcp_hub(&confinement, project.dir()));
    let gate: Arc<dyn weft_mcp::RouterGate> = Arc::new(ProjectGate {
        root: weft_gate::project_root(&std::fs::canonicalize(project.dir())?),
    });
    let runtime = super::runs::runtime()?;
    let result = runtime.block_on(async {
        let (stdin, stdout) = (tokio::io::stdin(), tokio::io::stdout());
        let served = weft_mcp::serve_router(hub.clone(), Some(gate), stdin, stdout)
            .await
            .context("serving the MCP router on stdio");
        hub.shutdown().await;
        served
    });
    runtime.shutdown_background();
    result.map(|()| ExitCode::SUCCESS)
}

/// The project's gates for routed calls, as a harness's pre-tool-use hook runs them: the tool
/// is `mcp__SERVER__TOOL` with the call's arguments; every check goes to the audit trail. A
/// policy database that cannot be read refuses (REQUIRED policies fail closed).
struct ProjectGate {
    root: PathBuf,
}

impl weft_mcp::RouterGate for ProjectGate {
    fn check(&self, server: &str, tool: &str, args: &serde_json::Value) -> Result<(), String> {
        // A configuration that cannot be read refuses, like a policy database that cannot be
        // (the gates are not to be skipped because their settings are broken).
        let config = weft_gate::GateConfig::load(&self.root)
            .map_err(|e| format!("the gate configuration cannot be read: {e}"))?;
        let (db, _) = weft_gate::GateDb::open_healing(&weft_gate::GateDb::path_for(&self.root))
            .map_err(|e| format!("the policy database cannot be read: {e}"))?;
        let policies = db
            .policies()
            .map_err(|e| format!("the policy database cannot be read: {e}"))?;
        let invocation = weft_gate::ToolInvocation::new(
            format!("mcp__{server}__{tool}"),
            args.clone(),
            &self.root,
        );
        let verdict = weft_gate::Gates::new(&self.root, config)
            .with_policies(policies)
            .check(&invocation);
        let reason = verdict.reason();
        // As the pre-tool-use hook: a check that cannot be audited does not pass.
        db.audit(&[weft_gate::AuditEntry {
            at: weft_gate::now_ms(),
            harness: "weft-router".into(),
            event: "pre-tool-use".into(),
            tool: Some(invocation.tool.clone()),
            summary: Some(invocation.summary()),
            stage: Some("pre-exec".into()),
            gate: "verdict".into(),
            passed: verdict.allowed(),
            message: reason.clone(),
            ..weft_gate::AuditEntry::default()
        }])
        .map_err(|e| format!("the audit trail cannot be written: {e}"))?;
        if verdict.allowed() {
            Ok(())
        } else {
            Err(reason)
        }
    }
}

/// The agents of a project, each call a run through the runtime (as `weft run` starts one).
struct ProjectAgents {
    runtime: Runtime,
    project: Project,
}

#[async_trait::async_trait]
impl AgentRunner for ProjectAgents {
    fn agents(&self) -> Vec<ServedAgent> {
        self.project
            .agents()
            .filter(|a| weft_standard::valid_tool_name(&a.name))
            .map(|a| ServedAgent {
                name: a.name.clone(),
                description: a
                    .tool_description
                    .clone()
                    .or_else(|| a.description.clone())
                    .unwrap_or_else(|| format!("Runs the Weft agent {}.", a.name)),
            })
            .collect()
    }

    async fn run(
        &self,
        agent: &str,
        input: String,
        signal: CancellationToken,
    ) -> Result<String, String> {
        let project = &self.project;
        let dir = std::fs::canonicalize(project.dir()).map_err(|e| e.to_string())?;
        let program = SessionProgram {
            project: Some(project.snapshot().map_err(|e| e.to_string())?),
            project_dir: None,
            workspace: dir,
            agent: agent.to_owned(),
            model_override: None,
            sandbox: None,
            base_urls: std::collections::BTreeMap::new(),
            profile: None,
        };
        let mut spec = RunSpec::new(input, Program::Session(program));
        spec.budget = project.config().budget.unwrap_or_default().or(Budget {
            max_steps: Some(DEFAULT_SESSION_MAX_STEPS),
            ..Budget::default()
        });
        let handle = self
            .runtime
            .start(spec, false)
            .await
            .map_err(|e| e.to_string())?;
        let run_id = handle.id().to_owned();
        let abort = handle.abort_handle();
        let watch = tokio::spawn(async move {
            signal.cancelled().await;
            abort.cancel();
        });
        let outcome = handle.outcome().await;
        watch.abort();
        let outcome = outcome.map_err(|e| format!("run {run_id}: {e}"))?;
        match outcome.end {
            RunEnd::Completed { output } => Ok(output),
            RunEnd::Failed { error } => Err(format!("run {run_id} failed: {error}")),
            RunEnd::Interrupted => Err(format!("run {run_id} was interrupted")),
            RunEnd::NeedsApproval { .. } | RunEnd::AwaitingDecision { .. } => Err(format!(
                "run {run_id} waits for a decision: weft approve {run_id} ID (see weft runs show {run_id}), then weft resume {run_id}"
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use weft_mcp::RouterGate as _;

    /// A routed call is refused, not let through, when the project's gate settings cannot be
    /// read (the bug: falling back to the default gates).
    #[test]
    fn a_routed_call_is_refused_when_the_gate_configuration_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let gate = ProjectGate {
            root: dir.path().to_path_buf(),
        };
        let args = serde_json::json!({"path": "notes.txt"});
        assert_eq!(gate.check("files", "read", &args), Ok(()));
        std::fs::write(dir.path().join("weft.toml"), "[gates\nbroken").unwrap();
        let refused = gate.check("files", "read", &args).unwrap_err();
        assert!(refused.contains("gate configuration"), "{refused}");
    }
}
