//! `weft init [DIR]`: scaffolds a Standard Agents project that runs with no API key: an
//! `ai_human` coding helper using the built-in tools, a `dual_ai` worker/reviewer pair
//! shaped like agents §8, and scripted models (`scripted-turns:`) for both. `--template
//! subagents`: an editor with a resumable, non-blocking writer subagent. `--template
//! runtime`: an agent under the Agent Runtime Spec's profile (`[runtime]`) that ends its task
//! with `complete_task`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

/// `weft init` flags.
#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// The folder to create (default: the working directory). Existing files are kept.
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
    /// What to scaffold: `starter` (a coding helper and a worker/reviewer pair),
    /// `subagents` (an editor that creates a resumable, non-blocking writer subagent and
    /// messages it again when its first result arrives) or `runtime` (an agent under the
    /// Agent Runtime Spec's profile, docs/runtime-profile.md).
    #[arg(long, value_name = "NAME", default_value = "starter")]
    template: Template,
}

/// The scaffolds of `weft init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Template {
    /// A coding helper and a worker/reviewer pair.
    Starter,
    /// An editor with a resumable, non-blocking writer subagent.
    Subagents,
    /// An agent under the Agent Runtime Spec's profile.
    Runtime,
}

/// The `subagents` scaffold: (path, contents).
const SUBAGENT_FILES: &[(&str, &str)] = &[
    (
        "weft.toml",
        r#"# A Weft project with subagents: the editor (ai_human) creates a resumable,
# non-blocking writer instance (a dual_ai drafter/checker pair on its own thread), goes
# on while it works, and messages it again when its result arrives as a queued message.
# `weft run . "Write a blurb about Weft"`; then `weft runs show RUN` draws the thread tree.
name = "demo"
defaultAgent = "editor"
# Scripted models answer from scripts/, so the project runs without an API key.
model = "scripted-turns:scripts/editor.json"

[budget]
maxSteps = 40
"#,
    ),
    (
        "agents/editor.toml",
        r#"name = "editor"
type = "ai_human"
description = "An editor who delegates drafts to writer instances."

[sideA]
label = "Editor"
prompt = "editor"
"#,
    ),
    (
        "prompts/editor.toml",
        r#"name = "editor"
system = "You edit. Delegate drafts to writer instances: create one with subagent_create, message it with subagent_message; their results arrive as messages."
# A resumable, non-blocking subagent: the lifecycle tools subagent_create and
# subagent_message replace a tool named `writer`; each call returns at once and the
# writer's result arrives later as a queued message.
tools = [{ name = "writer", blocking = false, resumable = { receives_messages = "side_a", maxInstances = 2 } }]
"#,
    ),
    (
        "agents/writer.toml",
        r#"name = "writer"
type = "dual_ai"
exposeAsTool = true
toolDescription = "Drafts short texts; a checker approves them."
maxSessionTurns = 6

[sideA]
label = "Drafter"
prompt = "drafter"

[sideB]
label = "Checker"
prompt = "checker"
stopOnResponse = false
sessionStop = { name = "approve", messageProperty = "summary" }
"#,
    ),
    (
        "prompts/drafter.toml",
        r#"name = "drafter"
model = "scripted-turns:scripts/drafter.json"
system = "You draft short texts."
"#,
    ),
    (
        "prompts/checker.toml",
        r#"name = "checker"
model = "scripted-turns:scripts/checker.json"
system = "You check drafts and approve them."
tools = ["approve"]
"#,
    ),
    (
        "tools/approve.toml",
        r#"name = "approve"
description = "Approve the draft and end the session."
parameters = { type = "object", properties = { summary = { type = "string" } }, required = ["summary"] }
"#,
    ),
    (
        "scripts/editor.json",
        r#"{"responses": [
  {"toolCalls": [{"id": "e1", "name": "subagent_create", "arguments": {"name": "blurb", "message": "Write a one-line blurb about Weft."}}]},
  {"text": "The writer is drafting in the background."},
  {"toolCalls": [{"id": "e2", "name": "subagent_message", "arguments": {"name": "blurb", "message": "Now a shorter one."}}]},
  {"text": "Asked for a shorter version."},
  {"text": "Both versions are in."}
]}
"#,
    ),
    (
        "scripts/drafter.json",
        r#"{"responses": [
  {"text": "Weft runs agents durably: every step is recorded, nothing runs twice.", "delayMs": 200},
  {"text": "Weft: durable agents.", "delayMs": 200}
]}
"#,
    ),
    (
        "scripts/checker.json",
        r#"{"responses": [
  {"toolCalls": [{"id": "c1", "name": "approve", "arguments": {"summary": "Weft runs agents durably: every step is recorded, nothing runs twice."}}]},
  {"toolCalls": [{"id": "c2", "name": "approve", "arguments": {"summary": "Weft: durable agents."}}]}
]}
"#,
    ),
    (".gitignore", ".weft/\n"),
];

/// `weft init --template runtime`: (path, contents).
const RUNTIME_FILES: &[(&str, &str)] = &[
    (
        "weft.toml",
        r#"# A Weft project under the Agent Runtime Spec's profile (docs/runtime-profile.md):
# a task ends only with complete_task, a Final Warning comes at maxTurns - graceTurns,
# and every step of the spec's state machine is logged (`weft events RUN --type state_transition`).
name = "demo"
defaultAgent = "researcher"
# The scripted model answers from a script, so the project runs without an API key.
model = "scripted-turns:scripts/researcher.json"

[runtime]
completion = "complete_task"
maxTurns = 8
graceTurns = 2
graceTimeoutMs = 60000
hardLimit = true

[runtime.policy]
# "interactive" (the profile's default) runs one call per turn and asks before
# write_file / run_command; "batch" runs a response's calls in parallel.
mode = "batch"
maxParallel = 4
deniedTools = ["run_command"]

[runtime.retry]
maxRetries = 2
backoffMs = 1000
backoffMultiplier = 2
"#,
    ),
    (
        "agents/researcher.toml",
        r#"name = "researcher"
type = "ai_human"
description = "Reads the project and writes a summary, then completes its task."

[sideA]
label = "Researcher"
prompt = "researcher"
"#,
    ),
    (
        "prompts/researcher.toml",
        r#"name = "researcher"
system = "You study the files of this folder and write SUMMARY.md. When you are done, call complete_task alone, with a summary and the files you created as artifacts."
tools = ["list_dir", "read_file", "search_code", "write_file", "complete_task"]
"#,
    ),
    (
        "scripts/researcher.json",
        r##"{"responses": [
  {"toolCalls": [{"id": "l1", "name": "list_dir", "arguments": {"path": "."}}]},
  {"toolCalls": [{"id": "w1", "name": "write_file", "arguments": {"path": "SUMMARY.md", "content": "# Summary\n\nA Weft project under the runtime profile.\n"}}]},
  {"toolCalls": [{"id": "c1", "name": "complete_task", "arguments": {"summary": "Wrote SUMMARY.md.", "artifacts": ["SUMMARY.md"], "nextSteps": "Try a real model with --model."}}]}
]}
"##,
    ),
    (
        ".gitignore",
        ".weft/
",
    ),
];

/// The scaffold: (path, contents).
const FILES: &[(&str, &str)] = &[
    (
        "weft.toml",
        r#"# A Weft project: agents/, prompts/ and tools/ hold one definition per file
# (TOML or JSON, same keys). `weft run . "message"` runs the default agent.
name = "demo"
defaultAgent = "coder"
# Prompts without a `model` use this one. The scripted model answers from a script, so
# the project runs without an API key; try `weft run --model openai:gpt-4o-mini`.
model = "scripted-turns:scripts/coder.json"
# Commands the agents run are sandboxed: "workspace" (this folder read-write, except the
# run store in .weft/ and these definition files; no network), "strict" or "none".
# sandbox = "workspace"
# sandboxNetwork = false
# toolsMayEditDefinitions = false

[env]
PROJECT_NAME = "demo"

# Limits on every run (a run that reaches one ends failed; `weft run --max-…` overrides):
# maxSteps (model calls), maxTotalTokens, maxCost (needs known prices), maxTime ("10m").
[budget]
maxSteps = 40
"#,
    ),
    (
        "agents/coder.toml",
        r#"name = "coder"
type = "ai_human"
description = "A coding helper that reads and writes files in this project."

[sideA]
label = "Coder"
prompt = "coder"
stopOnResponse = true
maxSteps = 20
"#,
    ),
    (
        "agents/review_pair.toml",
        r#"# A dual_ai pair like the Standard Agents example (agents §8): the worker drafts, the
# reviewer asks for changes or approves.
name = "review_pair"
type = "dual_ai"
maxSessionTurns = 6
description = "A worker drafts, a reviewer approves or asks for changes."

[sideA]
label = "Worker"
prompt = "worker"
stopOnResponse = true
sessionFail = { name = "fail_task", messageProperty = "reason", attachmentsProperty = "attachments" }

[sideB]
label = "Reviewer"
prompt = "reviewer"
stopOnResponse = false
stopTool = "request_changes"
stopToolResponseProperty = "feedback"
sessionStop = { name = "approve", messageProperty = "summary", attachmentsProperty = "attachments" }
sessionStatus = { name = "update_status", messageProperty = "status" }
"#,
    ),
    (
        "prompts/coder.toml",
        r#"name = "coder"
system = "You are a careful coding helper working in the ${PROJECT_NAME} project. Look before you change anything."
tools = ["list_dir", "read_file", "write_file", "search_code", "run_command"]
"#,
    ),
    (
        "prompts/worker.toml",
        r#"name = "worker"
model = "scripted-turns:scripts/worker.json"
system = "You write short drafts. Revise them when the reviewer asks."
tools = ["fail_task"]
"#,
    ),
    (
        "prompts/reviewer.toml",
        r#"name = "reviewer"
model = "scripted-turns:scripts/reviewer.json"
system = "You review drafts: request changes or approve."
tools = ["update_status", "request_changes", "approve"]
"#,
    ),
    (
        "tools/approve.toml",
        r#"name = "approve"
description = "Approve the draft and end the session."
parameters = { type = "object", properties = { summary = { type = "string" }, attachments = { type = "array", items = { type = "string" } } }, required = ["summary"] }
"#,
    ),
    (
        "tools/request_changes.toml",
        r#"name = "request_changes"
description = "Send feedback to the worker."
parameters = { type = "object", properties = { feedback = { type = "string" } }, required = ["feedback"] }
"#,
    ),
    (
        "tools/update_status.toml",
        r#"name = "update_status"
description = "Publish a short status."
parameters = { type = "object", properties = { status = { type = "string" } }, required = ["status"] }
"#,
    ),
    (
        "tools/fail_task.toml",
        r#"name = "fail_task"
description = "Give up, saying why."
parameters = { type = "object", properties = { reason = { type = "string" }, attachments = { type = "array", items = { type = "string" } } }, required = ["reason"] }
"#,
    ),
    (
        "scripts/coder.json",
        r#"{"responses": [
  {"reasoning": "First I look at what is in the project.", "toolCalls": [{"id": "call_1", "name": "list_dir", "arguments": {"path": "."}}]},
  {"toolCalls": [{"id": "call_2", "name": "write_file", "arguments": {"path": "hello.txt", "content": "Hello from Weft!\n"}}]},
  {"toolCalls": [{"id": "call_3", "name": "read_file", "arguments": {"path": "hello.txt"}}]},
  {"text": "I looked around the project and wrote hello.txt with a greeting."}
]}
"#,
    ),
    (
        "scripts/worker.json",
        r#"{"responses": [
  {"text": "Draft: Weft runs agents."},
  {"text": "Weft: durable agents\n\nWeft runs agents and remembers every step."}
]}
"#,
    ),
    (
        "scripts/reviewer.json",
        r#"{"responses": [
  {"toolCalls": [
    {"id": "r1", "name": "update_status", "arguments": {"status": "reviewing the first draft"}},
    {"id": "r2", "name": "request_changes", "arguments": {"feedback": "Add a title and one more sentence."}}
  ]},
  {"toolCalls": [{"id": "r3", "name": "approve", "arguments": {"summary": "Approved: titled, two sentences.", "attachments": []}}]}
]}
"#,
    ),
    (".gitignore", ".weft/\n"),
];

/// The project's name: the folder's own name (`weft init demo` → `demo`; `weft init` in
/// `~/work/site` → `site`).
fn project_name(dir: &std::path::Path) -> String {
    let absolute = std::env::current_dir()
        .map(|cwd| cwd.join(dir))
        .unwrap_or_else(|_| dir.to_path_buf());
    let absolute = absolute.canonicalize().unwrap_or(absolute);
    absolute
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
        .unwrap_or("demo")
        .to_owned()
}

/// Runs `weft init`.
pub(crate) fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    let name = project_name(&dir);
    let mut written = 0;
    let files = match args.template {
        Template::Starter => FILES,
        Template::Subagents => SUBAGENT_FILES,
        Template::Runtime => RUNTIME_FILES,
    };
    for (path, contents) in files {
        let contents = if *path == "weft.toml" {
            // A JSON string is a TOML basic string.
            let quoted = serde_json::to_string(&name)?;
            contents.replace("\"demo\"", &quoted)
        } else {
            (*contents).to_owned()
        };
        let target = dir.join(path);
        if target.exists() {
            eprintln!("kept {} (it exists)", target.display());
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&target, contents)
            .with_context(|| format!("cannot write {}", target.display()))?;
        written += 1;
    }
    println!(
        "created a Weft project in {} ({written} files)",
        dir.display()
    );
    if args.template == Template::Subagents {
        println!(
            "try:  weft run {} \"Write a blurb about Weft\"",
            dir.display()
        );
        println!(
            "      weft runs show RUN   (the thread tree: the writer instance and its status)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.template == Template::Runtime {
        println!("try:  weft run {} \"Summarize this folder\"", dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    println!("try:  weft run {} \"Add a greeting file\"", dir.display());
    println!(
        "      weft run {} --agent review_pair \"Write a two-line blurb about Weft\"",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
