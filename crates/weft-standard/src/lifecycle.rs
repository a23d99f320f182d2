//! Resumable subagents (agents §7.7, §7.11): a prompt that lists a `dual_ai` agent with
//! `resumable = { receives_messages, maxInstances?, parentCommunication? }` offers the
//! built-in lifecycle tools instead of a tool named after the agent:
//!
//! * `subagent_create {name, message, agent?, description?}` starts a named **instance**:
//!   a child thread with a random UUID as its reference, linked to the parent thread, in the
//!   parent thread's child registry (weft-store's `Subagents`), its creation arguments kept
//!   with it; the message is its first. `name` must be non-empty and unique among the parent
//!   thread's instances; past `maxInstances` the call is a tool error that names the
//!   instances to message instead. (`agent` picks the subagent when the prompt lists several.)
//! * `subagent_message {reference | name, message}` sends an instance a message: a new
//!   session of the child, continued from its checkpoints, the message taken by the side
//!   `receives_messages` names (`side_a`: as the user's; `side_b`: as side A's, which side B
//!   answers).
//!
//! Each message is a child run of the run that sends it (`weft_runtime::child::ChildRun`).
//! Blocking (the default), the call's result is the spec's result text (or its failure text
//! as an error); with `blocking = false` the call returns at once and the result arrives as
//! a queued message (see `crate::background`), unless `parentCommunication = "explicit"`.
//! The registry's status follows the child: `running` while a message is worked on, then
//! `completed` or `failed` (the outcome of its latest session), and the parent's context
//! lists the registry at every step ([`registry_message`]).

use std::sync::Arc;

use serde_json::{Map, Value, json};
use weft_provider::{Tool, ToolContext, ToolError};
use weft_store::{SubagentRegistryEntry, Subagents as _};

use crate::definition::{AgentDefinition, ResumableConfig, SubagentToolConfig};
use crate::subagent::{ChildThread, DEFAULT_MESSAGE_PROPERTY, Parent, run_child};

/// The name of the tool that starts a resumable subagent's instance.
pub const SUBAGENT_CREATE: &str = "subagent_create";
/// The name of the tool that sends an instance a message.
pub const SUBAGENT_MESSAGE: &str = "subagent_message";

/// The argument of `subagent_message` holding attachment paths (agents §7.12): copied into
/// the instance's folder `attachments/REFERENCE/` before the message is given.
pub const ATTACHMENTS_PROPERTY: &str = "attachments";

/// A resumable subagent a prompt offers.
#[derive(Debug, Clone)]
pub(crate) struct Offered {
    pub(crate) agent: AgentDefinition,
    pub(crate) config: SubagentToolConfig,
    pub(crate) resumable: ResumableConfig,
}

impl Offered {
    fn property(&self) -> &str {
        self.config
            .init_user_message_property
            .as_deref()
            .unwrap_or(DEFAULT_MESSAGE_PROPERTY)
    }
}

/// The text the parent's context gets when its thread has children (agents §7.11): one line
/// per instance with its name, reference, agent, status and modes. `None` without children.
///
/// # Examples
///
/// ```
/// let entry = weft_store::SubagentRegistryEntry {
///     reference: "r-1".into(), name: "alice".into(), title: None,
///     description: "Writes drafts.".into(), resumable: Some(true), blocking: Some(true),
///     thread_name: None, spawn_group_id: None, created_at: None, status: "completed".into(),
///     parent_communication: None, agent: "writer".into(),
/// };
/// assert_eq!(
///     weft_standard::lifecycle::registry_message(&[entry]).as_deref(),
///     Some("Subagent instances of this thread (message one with subagent_message, by reference or name):\n\
///           - alice (reference: r-1) — agent writer, status: completed, resumable, blocking — Writes drafts.")
/// );
/// ```
pub fn registry_message(children: &[SubagentRegistryEntry]) -> Option<String> {
    if children.is_empty() {
        return None;
    }
    let mut text = String::from(
        "Subagent instances of this thread (message one with subagent_message, by reference or name):",
    );
    for child in children {
        let resumable = if child.resumable == Some(true) {
            "resumable"
        } else {
            "not resumable"
        };
        let blocking = if child.blocking == Some(false) {
            "non-blocking"
        } else {
            "blocking"
        };
        text.push_str(&format!(
            "\n- {} (reference: {}) — agent {}, status: {}, {resumable}, {blocking} — {}",
            child.name, child.reference, child.agent, child.status, child.description
        ));
    }
    Some(text)
}

/// Whether the variables the new instance of `target` requires are all set (agents §7.8):
/// its env is the parent's minus what it scopes, so a required scoped variable has no value
/// until a person gives it one. When some are missing, the creation is deferred: a
/// variable request keeps the original `subagent_create` arguments (and what the registry
/// entry needs), and the model reads the structured `subagent_env_required` error naming
/// the request, the missing variables and the bootstrap endpoint
/// (`POST /threads/{parent}/variables/{request}`, `weft variables`), which creates the
/// instance and boots it with those arguments.
pub(crate) async fn check_scoped_variables(
    parent: &Parent,
    target: &Offered,
    (name, arguments): (&str, &Value),
    (store, parent_thread): (&weft_store::Store, &str),
) -> Result<(), ToolError> {
    let scoped = crate::variables::scoped_names(&parent.project, &target.agent);
    let env = parent
        .options
        .variables
        .for_child(parent.transfer.clone(), &scoped);
    let missing = crate::variables::missing(&parent.project, &target.agent, &env);
    if missing.is_empty() {
        return Ok(());
    }
    let creation = json!({
        "name": name,
        "description": arguments.get("description").and_then(Value::as_str),
        "blocking": target.config.blocking,
        "parentCommunication": target
            .resumable
            .parent_communication
            .unwrap_or(crate::definition::ParentCommunication::Implicit)
            .as_str(),
        // Its attachments are copied into its folder when it boots.
        "attachmentsProperty": target.config.init_attachments_property,
    });
    let error = crate::variables::defer_subagent(
        store,
        parent_thread,
        &target.agent.name,
        crate::variables::DeferredCall {
            arguments,
            message_property: Some(target.property()),
            creation: Some(&creation),
            folder: None,
        },
        &missing,
    )
    .await
    .map_err(|e| {
        ToolError::transient(format!("the creation of {name} could not be deferred: {e}"))
    })?;
    Err(ToolError::new(error))
}

/// The lifecycle tools of the resumable subagents `offered` of a prompt, for `parent`.
pub(crate) fn lifecycle_tools(offered: Vec<Offered>, parent: Parent) -> Vec<Tool> {
    let offered = Arc::new(offered);
    let parent = Arc::new(parent);
    let create = {
        let (offered, parent) = (offered.clone(), parent.clone());
        Tool::new(
            SUBAGENT_CREATE,
            create_description(&offered),
            create_schema(&offered),
            move |args: Value, ctx: ToolContext| {
                let (offered, parent) = (offered.clone(), parent.clone());
                async move { create(&parent, &offered, &args, ctx).await }
            },
        )
    };
    let message = Tool::new(
        SUBAGENT_MESSAGE,
        "Send a message to an existing subagent instance (by its reference or its name) and \
         get its answer."
            .to_owned(),
        json!({
            "type": "object",
            "properties": {
                "reference": {"type": "string", "description": "The instance's reference (a UUID)."},
                "name": {"type": "string", "description": "The instance's name (when no reference is given)."},
                "message": {"type": "string", "description": "The message."},
                ATTACHMENTS_PROPERTY: crate::attachments::schema("Files (paths relative to the workspace) the instance gets copies of."),
            },
            "required": ["message"],
        }),
        move |args: Value, ctx: ToolContext| {
            let (offered, parent) = (offered.clone(), parent.clone());
            async move { message(&parent, &offered, &args, ctx).await }
        },
    );
    // The children's own calls are recorded and replayed: a call run again after a crash
    // goes on with the child, it repeats no side effect.
    [create, message]
        .into_iter()
        .map(|tool| tool.with_side_effects(false).with_idempotent(true))
        .collect()
}

fn create_description(offered: &[Offered]) -> String {
    let mut text = String::from(
        "Create a named, persistent subagent instance and give it its first message; message \
         it later with subagent_message.",
    );
    for o in offered {
        let what = o
            .agent
            .tool_description
            .as_deref()
            .or(o.agent.description.as_deref())
            .unwrap_or("a subagent");
        text.push_str(&format!("\n- {}: {what}", o.agent.name));
    }
    text
}

fn create_schema(offered: &[Offered]) -> Value {
    let mut properties = Map::new();
    let mut required = vec![Value::from("name")];
    if offered.len() > 1 {
        let names: Vec<Value> = offered
            .iter()
            .map(|o| Value::from(o.agent.name.clone()))
            .collect();
        properties.insert(
            "agent".into(),
            json!({"type": "string", "enum": names, "description": "Which subagent to create."}),
        );
        required.push("agent".into());
    }
    properties.insert(
        "name".into(),
        json!({"type": "string", "minLength": 1, "description": "The new instance's name (non-empty, unique in this thread)."}),
    );
    properties.insert(
        "description".into(),
        json!({"type": "string", "description": "What this instance is for (shown in the registry)."}),
    );
    for o in offered {
        properties.entry(o.property().to_owned()).or_insert_with(
            || json!({"type": "string", "description": "The instance's first message."}),
        );
        if let Some(files) = &o.config.init_attachments_property {
            properties.entry(files.clone()).or_insert_with(|| {
                crate::attachments::schema(
                    "Files (paths relative to the workspace) the instance gets copies of.",
                )
            });
        }
    }
    if let [only] = offered {
        required.push(only.property().into());
    }
    json!({"type": "object", "properties": properties, "required": required})
}

/// The parent's thread and run, which a resumable subagent needs.
fn durable(parent: &Parent) -> Result<&crate::session::Durable, ToolError> {
    parent.options.durable.as_ref().ok_or_else(|| {
        ToolError::new(
            "resumable subagents keep their thread in the run's store: this session has none",
        )
    })
}

fn storage(e: weft_store::StoreError) -> ToolError {
    ToolError::transient(format!(
        "the child registry could not be read or written: {e}"
    ))
}

fn listing(children: &[SubagentRegistryEntry]) -> String {
    children
        .iter()
        .map(|c| format!("{} (reference: {})", c.name, c.reference))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn create(
    parent: &Parent,
    offered: &[Offered],
    args: &Value,
    ctx: ToolContext,
) -> Result<Value, ToolError> {
    let name = args
        .get("name")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    if name.is_empty() {
        return Err(ToolError::new(
            "subagent_create needs a non-empty \"name\" for the new instance",
        ));
    }
    let target = match (args.get("agent").and_then(Value::as_str), offered) {
        (None, [only]) => only,
        (Some(agent), _) => offered
            .iter()
            .find(|o| o.agent.name == agent)
            .ok_or_else(|| {
                ToolError::new(format!(
                    "no resumable subagent {agent:?}; this prompt offers: {}",
                    offered
                        .iter()
                        .map(|o| o.agent.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?,
        (None, _) => {
            return Err(ToolError::new(
                "subagent_create needs \"agent\": which subagent to create",
            ));
        }
    };
    let input = args
        .get(target.property())
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .ok_or_else(|| {
            ToolError::new(format!(
                "subagent_create needs the argument {:?}: the instance's first message",
                target.property()
            ))
        })?;
    // The attachments are checked before an instance exists: a refused path creates none.
    let files =
        crate::attachments::paths_of(args, target.config.init_attachments_property.as_deref())?;
    parent.check_attachments(&files).await?;
    let durable = durable(parent)?;
    let store = &durable.store;
    let parent_thread = durable.run.thread_id().to_owned();
    let created_by = format!(
        "{} {}",
        durable.run.run_id(),
        weft_runtime::child::call_position(&durable.run, &ctx)
    );
    let children = store.children(&parent_thread).await.map_err(storage)?;
    // A replay of this call (after a crash) finds the instance it created.
    let existing = store.child_created_by(&created_by).await.map_err(storage)?;
    let reference = match existing {
        Some(record) => record.entry.reference,
        None => {
            if let Some(same) = children.iter().find(|c| c.name == name) {
                return Err(ToolError::new(format!(
                    "an instance named {name:?} already exists (reference: {}): send it your message with subagent_message",
                    same.reference
                )));
            }
            // A creation deferred for its variables holds its name until it boots.
            use weft_store::VariableRequests as _;
            let waiting = store
                .pending_variable_requests(&parent_thread)
                .await
                .map_err(storage)?;
            if let Some(same) = waiting
                .iter()
                .find(|r| r.payload["create"]["name"].as_str() == Some(name))
            {
                return Err(ToolError::new(format!(
                    "an instance named {name:?} is already waiting for its variables (request {}): it starts when a person gives them; choose another name",
                    same.id
                )));
            }
            let live: Vec<SubagentRegistryEntry> = children
                .iter()
                .filter(|c| c.agent == target.agent.name && c.status != "terminated")
                .cloned()
                .collect();
            if let Some(max) = target.resumable.max_instances
                && live.len() as u64 >= max
            {
                return Err(ToolError::new(format!(
                    "{} allows at most {max} instance(s) (maxInstances) and has {}: no new instance was created. \
                     Send your message to an existing instance with subagent_message instead: {}",
                    target.agent.name,
                    live.len(),
                    listing(&live)
                )));
            }
            check_scoped_variables(parent, target, (name, args), (store, &parent_thread)).await?;
            let reference = weft_store::new_id();
            let entry = SubagentRegistryEntry {
                reference: reference.clone(),
                name: name.to_owned(),
                title: target.agent.title.clone(),
                description: args
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| target.agent.tool_description.clone())
                    .or_else(|| target.agent.description.clone())
                    .unwrap_or_default(),
                resumable: Some(true),
                blocking: Some(target.config.blocking),
                thread_name: Some(name.to_owned()),
                spawn_group_id: None,
                created_at: Some(chrono::Utc::now().timestamp_micros()),
                status: "running".into(),
                parent_communication: Some(
                    target
                        .resumable
                        .parent_communication
                        .unwrap_or(crate::definition::ParentCommunication::Implicit)
                        .as_str()
                        .to_owned(),
                ),
                agent: target.agent.name.clone(),
            };
            let mut thread = weft_store::ThreadRecord::new(&reference);
            thread.parent_thread_id = Some(parent_thread.clone());
            thread.title = Some(name.to_owned());
            for (key, value) in [
                (
                    weft_runtime::child::SUBAGENT_KEY,
                    Value::from(target.agent.name.clone()),
                ),
                ("runId", Value::from(durable.run.run_id())),
                ("arguments", args.clone()),
            ] {
                thread.metadata.insert(key.to_owned(), value);
            }
            use weft_store::Threads as _;
            store.put_thread(&thread).await.map_err(storage)?;
            store
                .register_child(&parent_thread, &entry, args, Some(&created_by))
                .await
                .map_err(storage)?;
            reference
        }
    };
    deliver(parent, target, &reference, (&input, &files), ctx).await
}

/// Runs the instance `reference` of `target` on `input` (with copies of the attachments
/// `files`, agents §7.12) and records its status.
async fn deliver(
    parent: &Parent,
    target: &Offered,
    reference: &str,
    (input, files): (&str, &[String]),
    ctx: ToolContext,
) -> Result<Value, ToolError> {
    let input = &crate::subagent::give_attachments(parent, reference, input, files).await?;
    let store = &durable(parent)?.store;
    store
        .set_child_status(reference, "running")
        .await
        .map_err(storage)?;
    let thread = ChildThread::Resumable {
        reference: reference.to_owned(),
        side: target.resumable.receives_messages,
        explicit: target.resumable.explicit(),
    };
    if !target.config.blocking {
        let durable = durable(parent)?;
        let call_site = format!(
            "{} {}",
            durable.run.run_id(),
            weft_runtime::child::call_position(&durable.run, &ctx)
        );
        let name = store
            .child(reference)
            .await
            .map_err(storage)?
            .map_or_else(|| target.agent.name.clone(), |c| c.entry.name);
        crate::background::note_pending(
            durable,
            reference,
            &name,
            (&call_site, input, target.resumable.receives_messages),
        )
        .await
        .map_err(storage)?;
        crate::subagent::spawn_child(
            parent,
            &target.agent.name,
            thread,
            input,
            ctx,
            call_site,
            target.resumable.explicit(),
        )?;
        return Ok(Value::String(crate::subagent::started_message(
            &name, reference,
        )));
    }
    let ended = run_child(parent, &target.agent.name, &thread, input, ctx).await?;
    // Waiting for a decision or interrupted: it goes on when the call runs again.
    if let Some(status) = ended.status()
        && let Err(error) = store.set_child_status(reference, status).await
    {
        tracing::warn!(%error, "recording a subagent's status failed");
    }
    ended.into_result()
}

async fn message(
    parent: &Parent,
    offered: &[Offered],
    args: &Value,
    ctx: ToolContext,
) -> Result<Value, ToolError> {
    let text = args
        .get("message")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::new("subagent_message needs \"message\": the text to send"))?;
    let files = crate::attachments::paths_of(args, Some(ATTACHMENTS_PROPERTY))?;
    let durable = durable(parent)?;
    let children = durable
        .store
        .children(durable.run.thread_id())
        .await
        .map_err(storage)?;
    let wanted = |key: &str| args.get(key).and_then(Value::as_str).map(str::trim);
    let found = match (wanted("reference"), wanted("name")) {
        (Some(reference), _) if !reference.is_empty() => {
            children.iter().find(|c| c.reference == reference)
        }
        (_, Some(name)) if !name.is_empty() => children.iter().find(|c| c.name == name),
        _ => {
            return Err(ToolError::new(
                "subagent_message needs \"reference\" or \"name\": which instance to message",
            ));
        }
    };
    let Some(child) = found else {
        return Err(ToolError::new(if children.is_empty() {
            "this thread has no subagent instances: create one with subagent_create".to_owned()
        } else {
            format!(
                "no such instance; this thread's instances: {}",
                listing(&children)
            )
        }));
    };
    if child.status == "running" && child.blocking == Some(false) {
        return Err(ToolError::new(format!(
            "the instance {} (reference: {}) is still working on its last message: its result will arrive as a message",
            child.name, child.reference
        )));
    }
    if child.status == "terminated" {
        return Err(ToolError::new(format!(
            "the instance {} (reference: {}) was terminated: it takes no more messages",
            child.name, child.reference
        )));
    }
    let target = offered
        .iter()
        .find(|o| o.agent.name == child.agent)
        .ok_or_else(|| {
            ToolError::new(format!(
                "the instance {} runs {}, which this prompt does not offer",
                child.name, child.agent
            ))
        })?;
    deliver(parent, target, &child.reference, (text, &files), ctx).await
}
