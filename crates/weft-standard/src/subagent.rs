//! Subagents (agents §7): a `dual_ai` agent with `exposeAsTool`, listed in a prompt's
//! tools, is a tool whose call runs that agent's session as a **child run** of the calling
//! session (`weft_runtime::child`): its own thread linked to the parent's, its own
//! checkpoints, its model calls recorded under its thread and counted in the run's usage,
//! its events in the run's log under the agent path `parent/child`, its span under the
//! call's span, its own folder as its workspace ([`crate::filesystem`]). It stops when its
//! thread is terminated, by this process or another one. The call is blocking and the child
//! non-resumable (§7.3): the parent waits, and the child ends with its result.
//!
//! The call's result is the spec's canonical child → parent payload (§7.9, §7.10): the
//! `sessionStop` message of the child as
//!
//! ```text
//! Subagent (reference: {uuid}) has returned the following result:
//!
//! {result}
//! ```
//!
//! and a `sessionFail` (or any other failure of the child) as an error result
//! `Subagent (reference: {uuid}) has reported a failure:` + blank line + the details.
//!
//! The tool's schema is explicit: the agent's `toolParameters`, or one string argument
//! named by the caller's `initUserMessageProperty` (`message` when unset); that argument is
//! the child's first message (without one configured, a call with no `message` argument
//! sends its whole arguments as JSON text). The caller's `initAttachmentsProperty` names the
//! argument whose files are copied to the child, and the files a child returns are copied back
//! ([`crate::attachments`]).

use std::sync::Arc;

use serde_json::{Value, json};
use weft_provider::{Tool, ToolContext, ToolError};
use weft_runtime::child::ChildRun;
use weft_runtime::event::AgentPath;

use crate::attachments::Files;
use crate::definition::{AgentDefinition, SubagentToolConfig};
use crate::filesystem::ChildFiles;
use crate::project::Project;
use crate::session::{Durable, SessionOptions, SessionStatus, run_session};

/// How deep subagents may nest (a guard against an agent that calls itself).
pub const MAX_SUBAGENT_DEPTH: usize = 8;

/// The argument a subagent tool takes when neither the agent's `toolParameters` nor the
/// caller's `initUserMessageProperty` names one.
pub const DEFAULT_MESSAGE_PROPERTY: &str = "message";

/// The message a parent gets when its child ends by `sessionStop` (agents §7.10).
///
/// # Examples
///
/// ```
/// assert_eq!(
///     weft_standard::subagent::result_message("abc", "done"),
///     "Subagent (reference: abc) has returned the following result:\n\ndone"
/// );
/// ```
pub fn result_message(reference: &str, result: &str) -> String {
    format!("Subagent (reference: {reference}) has returned the following result:\n\n{result}")
}

/// The message a parent gets when its child ends by `sessionFail` (agents §7.10).
///
/// # Examples
///
/// ```
/// assert_eq!(
///     weft_standard::subagent::failure_message("abc", "no luck"),
///     "Subagent (reference: abc) has reported a failure:\n\nno luck"
/// );
/// ```
pub fn failure_message(reference: &str, details: &str) -> String {
    format!("Subagent (reference: {reference}) has reported a failure:\n\n{details}")
}

/// What a subagent tool of a session needs from it to start children.
#[derive(Debug, Clone)]
pub(crate) struct Parent {
    pub(crate) project: Arc<Project>,
    pub(crate) options: SessionOptions,
    /// The calling agent's path (events of a session outside a durable run).
    pub(crate) agent: AgentPath,
    /// Values handed to the child's env whatever it scopes (an immediate tool's
    /// `scopedEnv`): runtime-only, never in a model's context.
    pub(crate) transfer: crate::variables::Env,
    /// Whose files its children work on: their own folders (subagents), or its workspace
    /// (delegated roles).
    pub(crate) child_files: ChildFiles,
}

impl Parent {
    /// The parent's confinement, its children's folders hidden.
    fn confinement(&self) -> weft_tools::Confinement {
        let mut confinement = self.options.confinement.clone();
        crate::filesystem::hide_children(&mut confinement, &self.options.workspace);
        confinement
    }

    /// Checks that the parent may attach `files` (paths in its workspace), copying nothing.
    pub(crate) async fn check_attachments(&self, files: &[String]) -> Result<(), ToolError> {
        let confinement = self.confinement();
        let own = Files {
            root: &self.options.workspace,
            confinement: &confinement,
        };
        crate::attachments::check(own, files)
            .await
            .map_err(ToolError::new)
    }

    /// The filesystem of its child `reference` (its folder made when missing): the child's
    /// workspace and confinement.
    async fn child_files(
        &self,
        reference: &str,
    ) -> Result<(std::path::PathBuf, weft_tools::Confinement), ToolError> {
        match self.child_files {
            ChildFiles::Own => crate::filesystem::open_child(
                &self.options.workspace,
                &self.options.confinement,
                reference,
            )
            .await
            .map_err(|e| {
                ToolError::transient(format!(
                    "the folder of the subagent {reference} could not be made: {e}"
                ))
            }),
            ChildFiles::Shared => Ok((
                self.options.workspace.clone(),
                self.options.confinement.clone(),
            )),
        }
    }
}

/// The name of the argument that becomes the child's first message.
fn message_property(config: Option<&SubagentToolConfig>) -> Option<&str> {
    config.and_then(|c| c.init_user_message_property.as_deref())
}

/// The arguments' schema of a tool that starts a child (`who`: `subagent`, `prompt`) without
/// an explicit one: one required string, the argument `property` (`message` when `None`), the
/// child's first message; and with `attachments`, that argument's files to copy to the child.
pub(crate) fn call_schema(property: Option<&str>, attachments: Option<&str>, who: &str) -> Value {
    let property = property.unwrap_or(DEFAULT_MESSAGE_PROPERTY);
    let mut schema = json!({
        "type": "object",
        "properties": {property: {"type": "string", "description": format!("The {who}'s task: its first message.")}},
        "required": [property],
    });
    if let (Some(files), Some(properties)) = (
        attachments,
        schema.get_mut("properties").and_then(Value::as_object_mut),
    ) {
        properties.insert(
            files.to_owned(),
            crate::attachments::schema(&format!(
                "Files (paths relative to the workspace) the {who} gets copies of."
            )),
        );
    }
    schema
}

/// The tool that calls `target` (a `dual_ai` agent) as a subagent of `parent`, configured by
/// `config` (`None`: the tool listed by name, every setting at its default).
pub(crate) fn subagent_tool(
    target: &AgentDefinition,
    config: Option<&SubagentToolConfig>,
    parent: Parent,
) -> Tool {
    let name = target.name.clone();
    let description = target
        .tool_description
        .clone()
        .or_else(|| target.description.clone())
        .unwrap_or_else(|| format!("Give a task to the subagent {name}."));
    let property = message_property(config).map(str::to_owned);
    let attachments = config.and_then(|c| c.init_attachments_property.clone());
    let blocking = config.is_none_or(|c| c.blocking);
    let summary = description.clone();
    let parameters = target
        .tool_parameters
        .clone()
        .unwrap_or_else(|| call_schema(property.as_deref(), attachments.as_deref(), "subagent"));
    let parent = Arc::new(parent);
    Tool::new(
        name.clone(),
        description,
        parameters,
        move |args: Value, ctx: ToolContext| {
            let (parent, name, property) = (parent.clone(), name.clone(), property.clone());
            let (summary, attachments) = (summary.clone(), attachments.clone());
            async move {
                if blocking {
                    call(
                        &parent,
                        &name,
                        property.as_deref(),
                        attachments.as_deref(),
                        &args,
                        ctx,
                    )
                    .await
                } else {
                    let input = first_message(property.as_deref(), &args)?;
                    let files = crate::attachments::paths_of(&args, attachments.as_deref())?;
                    start_in_background(&parent, &name, &summary, (&input, &files), &args, ctx)
                        .await
                }
            }
        },
    )
    // The child's own calls are recorded and replayed: running the call again after a
    // crash replays the child, it repeats no side effect.
    .with_side_effects(false)
    .with_idempotent(true)
}

/// Runs the immediate subagent tool `config` (agents §7.6) of a prompt that just became
/// active, as the call `call_id` with the arguments `args`: the same call as the model's,
/// with `transfer` (the `scopedEnv` values) added to the child's env.
pub(crate) async fn call_immediate(
    parent: &Parent,
    config: &SubagentToolConfig,
    args: &Value,
    call_id: &str,
    signal: tokio_util::sync::CancellationToken,
    transfer: crate::variables::Env,
) -> Result<Value, ToolError> {
    let parent = Parent {
        transfer,
        ..parent.clone()
    };
    let ctx = ToolContext {
        tool_call_id: call_id.to_owned(),
        signal,
        extensions: weft_provider::tool::Extensions::new(),
    };
    call(
        &parent,
        &config.name,
        message_property(Some(config)),
        config.init_attachments_property.as_deref(),
        args,
        ctx,
    )
    .await
}

/// The child's first message, from the call's arguments.
pub(crate) fn first_message(property: Option<&str>, args: &Value) -> Result<String, ToolError> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match property {
        Some(property) => args.get(property).map(text).ok_or_else(|| {
            ToolError::new(format!(
                "the call needs the argument {property:?}: the task it gives"
            ))
        }),
        None => Ok(args
            .get(DEFAULT_MESSAGE_PROPERTY)
            .map_or_else(|| text(args), text)),
    }
}

async fn call(
    parent: &Parent,
    name: &str,
    property: Option<&str>,
    attachments: Option<&str>,
    args: &Value,
    ctx: ToolContext,
) -> Result<Value, ToolError> {
    let input = first_message(property, args)?;
    let files = crate::attachments::paths_of(args, attachments)?;
    let reference = call_reference(parent, &ctx);
    let input = give_attachments(parent, &reference, &input, &files).await?;
    let ended = run_child(parent, name, &ChildThread::PerCall, &input, ctx).await?;
    ended.into_result()
}

/// The reference (thread id) of the child a blocking call `ctx` of `parent` starts: derived
/// from the call's position in a durable run (the same after a crash), the call's id outside
/// one.
pub(crate) fn call_reference(parent: &Parent, ctx: &ToolContext) -> String {
    match &parent.options.durable {
        Some(durable) => weft_runtime::child::child_reference(
            durable.run.run_id(),
            &weft_runtime::child::call_position(&durable.run, ctx),
        ),
        None => ctx.tool_call_id.clone(),
    }
}

/// Starts a non-blocking, non-resumable child of `parent` (the agent `name`, described by
/// `summary`) on `input`: registered in the parent thread's registry, run in the
/// background; the call's result says it started.
async fn start_in_background(
    parent: &Parent,
    name: &str,
    summary: &str,
    (input, files): (&str, &[String]),
    args: &Value,
    ctx: ToolContext,
) -> Result<Value, ToolError> {
    let durable = parent.options.durable.as_ref().ok_or_else(|| {
        ToolError::new(
            "non-blocking subagents report to the run's thread queue: this session has none",
        )
    })?;
    let position = weft_runtime::child::call_position(&durable.run, &ctx);
    let reference = weft_runtime::child::child_reference(durable.run.run_id(), &position);
    let call_site = format!("{} {position}", durable.run.run_id());
    // The attachments are copied before anything is registered: a refused path starts no
    // child.
    let input = &give_attachments(parent, &reference, input, files).await?;
    let entry = weft_store::SubagentRegistryEntry {
        reference: reference.clone(),
        name: name.to_owned(),
        title: None,
        description: summary.to_owned(),
        resumable: Some(false),
        blocking: Some(false),
        thread_name: Some(name.to_owned()),
        spawn_group_id: None,
        created_at: Some(chrono::Utc::now().timestamp_micros()),
        status: "running".into(),
        parent_communication: Some("implicit".into()),
        agent: name.to_owned(),
    };
    // The child's thread is recorded before its registry entry: whoever sees the child in
    // the registry can address its thread (terminate it, read its state) at once.
    crate::background::note_pending(
        durable,
        &reference,
        name,
        (&call_site, input, crate::definition::Side::A),
    )
    .await
    .map_err(|e| ToolError::transient(format!("the subagent {name} could not start: {e}")))?;
    use weft_store::Subagents as _;
    durable
        .store
        .register_child(durable.run.thread_id(), &entry, args, Some(&call_site))
        .await
        .map_err(|e| ToolError::transient(format!("the subagent {name} could not start: {e}")))?;
    spawn_child(
        parent,
        name,
        ChildThread::PerCall,
        input,
        ctx,
        call_site,
        false,
    )?;
    Ok(Value::String(started_message(name, &reference)))
}

/// Copies the attachments `files` of the parent's workspace into the filesystem of the
/// child `reference` (agents §7.12) and gives the child's message: `input` followed by the
/// copies' paths in the child's filesystem. A refused path is a tool error, and nothing is
/// copied.
pub(crate) async fn give_attachments(
    parent: &Parent,
    reference: &str,
    input: &str,
    files: &[String],
) -> Result<String, ToolError> {
    if files.is_empty() {
        return Ok(input.to_owned());
    }
    // Every source is checked before the child's folder is made.
    parent.check_attachments(files).await?;
    let (root, confinement) = parent.child_files(reference).await?;
    let folder = match parent.child_files {
        ChildFiles::Own => crate::attachments::GIVEN_FOLDER.to_owned(),
        ChildFiles::Shared => crate::attachments::child_folder(reference),
    };
    let own = parent.confinement();
    let copies = crate::attachments::copy(
        Files {
            root: &parent.options.workspace,
            confinement: &own,
        },
        Files {
            root: &root,
            confinement: &confinement,
        },
        files,
        &folder,
    )
    .await
    .map_err(ToolError::new)?;
    Ok(crate::attachments::listed(input, &copies))
}

/// The result of a call that started a child in the background.
///
/// # Examples
///
/// ```
/// assert_eq!(
///     weft_standard::subagent::started_message("writer", "r-1"),
///     "Subagent writer (reference: r-1) is working in the background; its result will arrive as a message."
/// );
/// ```
pub fn started_message(name: &str, reference: &str) -> String {
    format!(
        "Subagent {name} (reference: {reference}) is working in the background; its result will arrive as a message."
    )
}

/// Runs a session of the child `name` on `thread` in the background of `parent`'s run,
/// reporting its end to the parent thread (unless `explicit`).
pub(crate) fn spawn_child(
    parent: &Parent,
    name: &str,
    thread: ChildThread,
    input: &str,
    ctx: ToolContext,
    call_site: String,
    explicit: bool,
) -> Result<(), ToolError> {
    let (Some(background), Some(durable)) = (
        parent.options.background.clone(),
        parent.options.durable.clone(),
    ) else {
        return Err(ToolError::new(
            "non-blocking subagents need a durable run that waits for them: this session has none",
        ));
    };
    // The child lives as long as the run, not as the call: it stops with the session.
    let ctx = ToolContext {
        tool_call_id: ctx.tool_call_id,
        signal: parent.options.signal.child_token(),
        extensions: ctx.extensions,
    };
    let reference = match &thread {
        ChildThread::Resumable { reference, .. } => reference.clone(),
        ChildThread::PerCall => {
            let position = call_site
                .strip_prefix(durable.run.run_id())
                .map_or(call_site.as_str(), str::trim_start);
            weft_runtime::child::child_reference(durable.run.run_id(), position)
        }
    };
    let (parent, name, input) = (parent.clone(), name.to_owned(), input.to_owned());
    background.spawn(&call_site.clone(), async move {
        match run_child(&parent, &name, &thread, &input, ctx).await {
            Ok(ended) => crate::background::report(&durable, &ended, &call_site, explicit).await,
            Err(error) => {
                // It could not start (too deep, storage): the parent hears of it like of a
                // failure.
                tracing::warn!(%error, "a background subagent could not start");
                let ended = ChildEnd {
                    reference,
                    outcome: ChildOutcome::Broken(error.to_string()),
                    returned: Vec::new(),
                };
                crate::background::report(&durable, &ended, &call_site, explicit).await;
            }
        }
    });
    Ok(())
}

/// Which thread a child run goes on.
#[derive(Debug, Clone)]
pub(crate) enum ChildThread {
    /// A non-resumable subagent's: a thread of its own per call (its reference derived
    /// from the call).
    PerCall,
    /// A resumable subagent's thread `reference`, the message going to `side` (each
    /// message is a new session of the child, continued from its checkpoints).
    Resumable {
        /// The child's reference (its thread id).
        reference: String,
        /// The side that takes the message.
        side: crate::definition::Side,
        /// `parentCommunication = "explicit"`: the child gets `notify_parent` / `set_status`.
        explicit: bool,
    },
}

/// The state metadata key of a resumable child's side that took a message: the call that
/// sent it (`RUN_ID POSITION`), so a replay of that call goes on with the child instead of
/// giving it the message twice.
pub const DELIVERED_KEY: &str = "weftSubagentMessage";

/// How a child run ended.
#[derive(Debug)]
pub(crate) struct ChildEnd {
    pub(crate) reference: String,
    pub(crate) outcome: ChildOutcome,
    /// The parent-local paths of the attachments the child returned (copied into
    /// `attachments/from-REFERENCE/`), or why they were not copied.
    pub(crate) returned: Vec<String>,
}

/// What became of a child's session.
#[derive(Debug)]
pub(crate) enum ChildOutcome {
    /// It ended: completed (`sessionStop`, a response) or failed.
    Ended(Box<crate::session::SessionOutcome>),
    /// It could not run (the failure's details).
    Broken(String),
    /// It waits for a decision, or was interrupted: it goes on when its call runs again.
    Pending(String),
    /// Its thread was terminated while it ran (why): it ended for good, and reports nothing.
    Terminated(String),
}

impl ChildEnd {
    /// The spec's child → parent text (agents §7.10): `Ok` the result text, `Err` the
    /// failure text, each followed by the returned attachments' parent-local paths;
    /// `None` while the child has not ended.
    pub(crate) fn payload(&self) -> Option<Result<String, String>> {
        let listed = |text: String| crate::attachments::listed(&text, &self.returned);
        Some(match self.text()? {
            Ok(text) => Ok(listed(text)),
            Err(text) => Err(listed(text)),
        })
    }

    /// The spec's text, without the attachments.
    fn text(&self) -> Option<Result<String, String>> {
        match &self.outcome {
            ChildOutcome::Ended(o) if o.status == SessionStatus::Completed => {
                Some(Ok(result_message(&self.reference, &o.message)))
            }
            ChildOutcome::Ended(o) => Some(Err(failure_message(&self.reference, &o.message))),
            ChildOutcome::Broken(details) => Some(Err(failure_message(&self.reference, details))),
            ChildOutcome::Pending(_) | ChildOutcome::Terminated(_) => None,
        }
    }

    /// The registry status the end gives the child (`None`: unchanged).
    pub(crate) fn status(&self) -> Option<&'static str> {
        match self.payload()? {
            Ok(_) => Some("completed"),
            Err(_) => Some("failed"),
        }
    }

    /// The call's result: the spec's result text, or its failure text as an error.
    pub(crate) fn into_result(self) -> Result<Value, ToolError> {
        match self.payload() {
            Some(Ok(text)) => Ok(Value::String(text)),
            Some(Err(text)) => Err(ToolError::new(text)),
            None => match self.outcome {
                ChildOutcome::Pending(why) | ChildOutcome::Terminated(why) => {
                    Err(ToolError::new(why))
                }
                _ => Err(ToolError::new("the subagent did not end")),
            },
        }
    }
}

/// Runs one session of the subagent `name` as a child run of `parent`'s call `ctx`, on
/// `thread`, with `input` as its message.
pub(crate) async fn run_child(
    parent: &Parent,
    name: &str,
    thread: &ChildThread,
    input: &str,
    ctx: ToolContext,
) -> Result<ChildEnd, ToolError> {
    if parent.agent.depth() >= MAX_SUBAGENT_DEPTH {
        return Err(ToolError::new(format!(
            "subagents nest at most {MAX_SUBAGENT_DEPTH} deep: {name} was not started"
        )));
    }
    let target = parent
        .project
        .agent(name)
        .ok_or_else(|| ToolError::new(format!("there is no agent {name:?}")))?;
    // The child's env: the parent's, minus what the child scopes (agents tools §3). A
    // required variable without a value stops the call before any child exists.
    let scoped = crate::variables::scoped_names(&parent.project, target);
    let mut own = parent.transfer.clone();
    if let (ChildThread::Resumable { reference, .. }, Some(durable)) =
        (thread, &parent.options.durable)
    {
        // A resumable instance's own values (given when its deferred creation booted).
        use weft_store::ThreadVariables as _;
        let stored = durable
            .store
            .variable_values(reference)
            .await
            .map_err(|e| {
                ToolError::transient(format!("the variables of {name} could not be read: {e}"))
            })?;
        own = crate::variables::Env::from_store(stored).for_child(own, &Default::default());
    }
    let child_env = parent.options.variables.for_child(own, &scoped);
    let missing = crate::variables::missing(&parent.project, target, &child_env);
    if !missing.is_empty()
        && matches!(thread, ChildThread::PerCall)
        && let (Some(durable), Some(parent_thread)) =
            (&parent.options.durable, &parent.options.thread_id)
    {
        // A durable run: the call is deferred until a person gives the variables (agents
        // §7.8, the bootstrap endpoints of `weft serve`); the request keeps the child's
        // first message. (A resumable instance is not deferred: its creation is refused
        // with the missing names.)
        // The call's attachments were copied into the folder of the child it would have
        // started: the booted child works there.
        let folder = weft_runtime::child::child_reference(
            durable.run.run_id(),
            &weft_runtime::child::call_position(&durable.run, &ctx),
        );
        let error = crate::variables::defer_subagent(
            &durable.store,
            parent_thread,
            name,
            crate::variables::DeferredCall {
                arguments: &serde_json::json!({ DEFAULT_MESSAGE_PROPERTY: input }),
                message_property: None,
                creation: None,
                folder: Some(&folder),
            },
            &missing,
        )
        .await
        .map_err(|e| {
            ToolError::transient(format!("the subagent {name} could not be deferred: {e}"))
        })?;
        return Err(ToolError::new(error));
    }
    if !missing.is_empty() {
        return Err(ToolError::new(
            crate::variables::MissingVariables {
                agent: name.to_owned(),
                thread: parent.options.thread_id.clone(),
                missing,
            }
            .to_string(),
        ));
    }
    let mut options = parent.options.clone();
    options.variables = child_env;
    // The child has a signal of its own: its thread's termination (agents §7.13) stops it
    // alone, not its parent.
    let stop = ctx.signal.child_token();
    options.signal = stop.clone();
    options.initial_state = weft_agent::AgentState::initial();
    options.initial_state_b = None;
    options.agent_path = Some(parent.agent.child(name));
    options.input_side = crate::definition::Side::A;
    options.escalation = None;
    let mut input = input.to_owned();
    let child = match &parent.options.durable {
        Some(durable) => {
            let opened = match thread {
                ChildThread::PerCall => ChildRun::open(&durable.run, name, &ctx).await,
                ChildThread::Resumable { reference, .. } => {
                    ChildRun::open_as(&durable.run, name, reference, &ctx).await
                }
            };
            let child = opened.map_err(|e| {
                ToolError::transient(format!("the subagent {name} could not start: {e}"))
            })?;
            let thread_id = child.reference().to_owned();
            let latest = |scope: String| {
                let store = durable.store.clone();
                async move { store.latest_checkpoint(&scope).await.ok().flatten() }
            };
            let state_a = latest(thread_id.clone()).await.map(|a| a.checkpoint.state);
            let state_b = latest(format!("{thread_id}.sideB"))
                .await
                .map(|b| b.checkpoint.state);
            match thread {
                ChildThread::PerCall => {
                    // A resumed run goes on with the child from its checkpoints (its model
                    // calls and tool calls replay from the run's record).
                    if let Some(a) = state_a {
                        options.initial_state = a;
                        options.initial_state_b = state_b;
                        input.clear();
                    }
                }
                ChildThread::Resumable { side, explicit, .. } => {
                    if *explicit {
                        options.escalation = Some(crate::background::Escalation {
                            parent: durable.clone(),
                            reference: thread_id.clone(),
                        });
                    }
                    let site = Value::from(child.call_site());
                    let took = |s: &Option<weft_agent::AgentState>| {
                        s.as_ref()
                            .is_some_and(|s| s.metadata().get(DELIVERED_KEY) == Some(&site))
                    };
                    let delivered = took(&state_a) || took(&state_b);
                    options.initial_state = state_a.unwrap_or_else(weft_agent::AgentState::initial);
                    options.initial_state_b = state_b;
                    if delivered {
                        // A replay of this call: the child goes on where it stopped.
                        input.clear();
                    } else {
                        // The side that takes the message remembers which call sent it.
                        options.input_side = *side;
                        match side {
                            crate::definition::Side::A => {
                                options.initial_state =
                                    options.initial_state.with_metadata(DELIVERED_KEY, site);
                            }
                            crate::definition::Side::B => {
                                options.initial_state_b = Some(
                                    options
                                        .initial_state_b
                                        .take()
                                        .unwrap_or_else(weft_agent::AgentState::initial)
                                        .with_metadata(DELIVERED_KEY, site),
                                );
                            }
                        }
                    }
                }
            }
            options.thread_id = Some(thread_id);
            options.durable = Some(Durable {
                run: child.context().clone(),
                store: durable.store.clone(),
                mode: durable.mode,
                base_usage: weft_provider::TokenUsage::default(),
            });
            Some(child)
        }
        None => {
            if matches!(thread, ChildThread::Resumable { .. }) {
                return Err(ToolError::new(
                    "resumable subagents keep their thread in the run's store: this session has none",
                ));
            }
            options.thread_id = None;
            None
        }
    };
    let reference = child
        .as_ref()
        .map_or_else(|| ctx.tool_call_id.clone(), |c| c.reference().to_owned());
    // The child works in its own filesystem (agents §7.1), or in its parent's.
    let (workspace, confinement) = parent.child_files(&reference).await?;
    options.workspace = workspace;
    options.confinement = confinement;
    let end = |outcome| ChildEnd {
        reference: reference.clone(),
        outcome,
        returned: Vec::new(),
    };
    let session = Box::pin(run_session(&parent.project, name, &input, &options));
    let (outcome, terminated) = match &parent.options.durable {
        Some(durable) => watched(session, &durable.store, &reference, &stop).await,
        None => (session.await, false),
    };
    if terminated {
        // Terminated in flight (by this process or another): it ends here, for good; its
        // registry entry says `terminated`, and nothing is reported to the parent.
        if let Some(child) = child
            && let Err(error) = child.end(false).await
        {
            tracing::warn!(%error, "recording the end of a subagent failed");
        }
        return Ok(end(ChildOutcome::Terminated(format!(
            "the subagent {name} (reference: {reference}) was terminated"
        ))));
    }
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => {
            if let Some(child) = child {
                let _ = child.end(false).await;
            }
            return Ok(end(ChildOutcome::Broken(error.to_string())));
        }
    };
    let child = match child {
        Some(child) if child.is_suspended() => {
            // A call of the child waits for a decision: so does the parent's call (the run
            // suspends, and the decision surfaces on it).
            child.defer();
            return Ok(end(ChildOutcome::Pending(format!(
                "the subagent {name} waits for a decision"
            ))));
        }
        other => other,
    };
    if outcome.status == SessionStatus::Interrupted {
        // The call stays pending (uncertain): a resume goes on with the child.
        return Ok(end(ChildOutcome::Pending(format!(
            "the subagent {name} was interrupted"
        ))));
    }
    let succeeded = outcome.status == SessionStatus::Completed;
    if let Some(child) = child
        && let Err(error) = child.end(succeeded).await
    {
        tracing::warn!(%error, "recording the end of a subagent failed");
    }
    // The attachments the child returned (paths in its filesystem) are copied into the
    // parent's folder for them (agents §7.12): the parent gets their parent-local paths.
    let mut ended = end(ChildOutcome::Ended(Box::new(outcome)));
    if let ChildOutcome::Ended(outcome) = &mut ended.outcome
        && !outcome.attachments.is_empty()
    {
        let own = parent.confinement();
        match crate::attachments::copy(
            Files {
                root: &options.workspace,
                confinement: &options.confinement,
            },
            Files {
                root: &parent.options.workspace,
                confinement: &own,
            },
            &outcome.attachments,
            &crate::attachments::returned_folder(&reference),
        )
        .await
        {
            Ok(copies) => ended.returned = copies,
            Err(error) => {
                outcome.message = format!(
                    "{}\n\n(The returned attachments were not copied: {error})",
                    outcome.message
                );
            }
        }
    }
    Ok(ended)
}

/// Runs `session` (a child's) to its end; when the child's thread `reference` is terminated
/// meanwhile, `stop` (the session's signal) is cancelled and the session winds down. Gives
/// its outcome and whether it was terminated.
async fn watched<T>(
    session: impl std::future::Future<Output = T>,
    store: &weft_store::Store,
    reference: &str,
    stop: &tokio_util::sync::CancellationToken,
) -> (T, bool) {
    tokio::pin!(session);
    tokio::select! {
        out = &mut session => (out, false),
        () = weft_runtime::thread_state::until_terminated(store, reference) => {
            stop.cancel();
            (session.await, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_message_is_the_mapped_argument() {
        let args = json!({"task": "review", "message": "other"});
        assert_eq!(
            first_message(Some("task"), &args).ok().as_deref(),
            Some("review")
        );
        assert_eq!(first_message(None, &args).ok().as_deref(), Some("other"));
        assert!(first_message(Some("missing"), &args).is_err());
        let whole = json!({"a": 1});
        assert_eq!(
            first_message(None, &whole).ok().as_deref(),
            Some("{\"a\":1}")
        );
    }
}
