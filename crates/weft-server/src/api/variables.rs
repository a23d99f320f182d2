//! Thread variables (Standard Agents `variables`, see `weft_standard::variables`) and the
//! bootstrap of deferred subagents (agents §7.8):
//!
//! * `GET /threads/{thread_id}/variables`: what the thread's agent declares (required,
//!   secret, scoped), what the thread has set, what required ones are missing — never a
//!   secret's value.
//! * `POST /threads/{thread_id}/variables`: sets values on the thread (`{"values": {"NAME":
//!   "value" | {"value", "type"}}}`; a variable any agent declares `secret` is stored as one).
//! * `GET /threads/{parent_thread_id}/variables/{request_id}`: a subagent call deferred for
//!   missing variables (the `subagent_env_required` error its parent's model read): the
//!   variables its agent requires, which are still missing.
//! * `POST /threads/{parent_thread_id}/variables/{request_id}`: stores the values on the
//!   deferred child's thread and boots the child at once with the call's original arguments;
//!   its result is queued on the parent thread as the spec's completion message.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use weft_standard::variables::{self, BootError, Declared};
use weft_store::{ThreadVariables as _, VariableKind, VariableRequests as _};

use super::{parse_body, thread_record};
use crate::error::ApiError;
use crate::state::AppState;

/// One declared variable of a thread's agent.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VariableInfo {
    /// Its name.
    pub name: String,
    /// `text` or `secret`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Execution waits until it has a value.
    pub required: bool,
    /// Not inherited from the parent thread.
    pub scoped: bool,
    /// What it is.
    pub description: String,
    /// Where it is declared (`agent NAME`, `prompt NAME`, `tool NAME`).
    pub declared_by: Vec<String>,
    /// Whether it has a value for the thread (its own, inherited, or from the definitions
    /// and the environment).
    pub resolved: bool,
    /// Required and without a value.
    pub missing: bool,
}

/// A variable set on the thread itself (never its value).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SetVariable {
    /// Its name.
    pub name: String,
    /// `text` or `secret`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When it was set.
    pub updated_at: String,
}

/// `GET /threads/{thread_id}/variables`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadVariablesView {
    /// The thread.
    pub thread_id: String,
    /// The agent whose declarations are listed.
    pub assistant_id: String,
    /// Its declared variables.
    pub variables: Vec<VariableInfo>,
    /// What the thread itself has set.
    pub set: Vec<SetVariable>,
    /// The required variables without a value.
    pub missing: Vec<String>,
}

/// A value to set: the text, or `{"value", "type": "text" | "secret"}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum VariableInput {
    /// A value of the declared type (text when undeclared).
    Text(String),
    /// A value with its type.
    Typed {
        /// The value.
        value: String,
        /// `text` or `secret` (a variable declared secret is stored as one anyway).
        #[serde(rename = "type", default)]
        kind: Option<String>,
    },
}

/// The body of the `POST`s: the values by name.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct VariablesPost {
    /// The values by name.
    #[serde(default)]
    pub values: BTreeMap<String, VariableInput>,
}

/// A deferred subagent call waiting for variables.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VariableRequestView {
    /// The request.
    pub request_id: String,
    /// The thread whose call it was.
    pub parent_thread_id: String,
    /// The child's thread (where the posted values go).
    pub thread_id: String,
    /// The subagent.
    pub assistant_id: String,
    /// `pending` or `completed`.
    pub status: String,
    /// The variables the subagent requires.
    pub required: Vec<String>,
    /// The required ones still without a value.
    pub missing: Vec<String>,
    /// The child's run, once booted by this request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

fn info(d: &Declared, env_missing: &[String], resolved: bool) -> VariableInfo {
    VariableInfo {
        name: d.name.clone(),
        kind: d.kind.as_str().to_owned(),
        required: d.required,
        scoped: d.scoped,
        description: d.description.clone(),
        declared_by: d.declared_by.clone(),
        resolved,
        missing: env_missing.contains(&d.name),
    }
}

/// The agent of a thread: `?assistant_id=`, else its newest run's, else the default.
async fn thread_agent(
    state: &AppState,
    thread: &str,
    query: Option<&str>,
) -> Result<String, ApiError> {
    let asked = query.and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("assistant_id="))
            .map(str::to_owned)
    });
    if let Some(name) = asked {
        return Ok(state.agent(Some(&name))?.name.clone());
    }
    if let Some(run) = state.latest_run(thread).await?
        && let Some(agent) = state
            .project()
            .agent(run.agent_id.rsplit('/').next().unwrap_or(&run.agent_id))
    {
        return Ok(agent.name.clone());
    }
    Ok(state.agent(None)?.name.clone())
}

async fn view(
    state: &AppState,
    thread: &str,
    agent_name: &str,
) -> Result<ThreadVariablesView, ApiError> {
    let project = state.project();
    let agent = state.agent(Some(agent_name))?;
    let env = variables::thread_env(state.store(), project, thread, agent).await?;
    let missing: Vec<String> = variables::missing(project, agent, &env)
        .into_iter()
        .map(|d| d.name)
        .collect();
    let variables = variables::declared(project, agent)
        .iter()
        .map(|d| {
            info(
                d,
                &missing,
                variables::resolves_for(project, &env, agent, &d.name),
            )
        })
        .collect();
    let set = state
        .store()
        .thread_variables(thread)
        .await?
        .into_iter()
        .map(|v| SetVariable {
            name: v.name,
            kind: v.kind.as_str().to_owned(),
            updated_at: v.updated_at,
        })
        .collect();
    Ok(ThreadVariablesView {
        thread_id: thread.to_owned(),
        assistant_id: agent.name.clone(),
        variables,
        set,
        missing,
    })
}

/// The kind a value is stored as: secret when asked, or when any agent declares it secret.
fn kind_of(state: &AppState, name: &str, input: &VariableInput) -> Result<VariableKind, ApiError> {
    let asked = match input {
        VariableInput::Typed {
            kind: Some(kind), ..
        } => Some(
            kind.parse::<VariableKind>()
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
        ),
        _ => None,
    };
    let declared_secret = state.project().agents().any(|agent| {
        variables::declared(state.project(), agent)
            .iter()
            .any(|d| d.name == name && d.kind == VariableKind::Secret)
    });
    Ok(if declared_secret {
        VariableKind::Secret
    } else {
        asked.unwrap_or_default()
    })
}

async fn store_values(
    state: &AppState,
    thread: &str,
    values: &BTreeMap<String, VariableInput>,
) -> Result<(), ApiError> {
    for (name, input) in values {
        let kind = kind_of(state, name, input)?;
        let value = match input {
            VariableInput::Text(value) | VariableInput::Typed { value, .. } => value,
        };
        state
            .store()
            .set_variable(thread, name, value, kind)
            .await
            .map_err(|e| match e {
                weft_store::StoreError::Invalid(message) => ApiError::bad_request(message),
                other => other.into(),
            })?;
    }
    Ok(())
}

/// `GET /threads/{thread_id}/variables`.
#[utoipa::path(get, operation_id = "threads_variables_get", path = "/threads/{thread_id}/variables", tag = "threads",
    params(("thread_id" = String, Path, description = "The thread"),
        ("assistant_id" = Option<String>, Query, description = "The agent whose declarations count (default: the thread's newest run's, else the default agent)")),
    responses((status = 200, body = ThreadVariablesView), (status = 404, description = "No such thread or agent")))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(thread): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<ThreadVariablesView>, ApiError> {
    thread_record(&state, &thread).await?;
    let agent = thread_agent(&state, &thread, query.as_deref()).await?;
    Ok(Json(view(&state, &thread, &agent).await?))
}

/// `POST /threads/{thread_id}/variables`.
#[utoipa::path(post, operation_id = "threads_variables_set", path = "/threads/{thread_id}/variables", tag = "threads",
    request_body = VariablesPost,
    params(("thread_id" = String, Path, description = "The thread"),
        ("assistant_id" = Option<String>, Query, description = "The agent whose declarations the answer lists")),
    responses((status = 200, body = ThreadVariablesView), (status = 400, description = "A bad name or type"),
        (status = 404, description = "No such thread")))]
pub(crate) async fn set(
    State(state): State<AppState>,
    Path(thread): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Json<ThreadVariablesView>, ApiError> {
    let request: VariablesPost = parse_body(&body)?;
    thread_record(&state, &thread).await?;
    store_values(&state, &thread, &request.values).await?;
    let agent = thread_agent(&state, &thread, query.as_deref()).await?;
    Ok(Json(view(&state, &thread, &agent).await?))
}

async fn request_view(
    state: &AppState,
    parent: &str,
    request_id: &str,
) -> Result<VariableRequestView, ApiError> {
    let request = state
        .store()
        .variable_request(parent, request_id)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no variable request {request_id} on thread {parent}"
            ))
        })?;
    let (declared, missing) =
        variables::request_status(state.store(), state.project(), &request).await?;
    let status = match request.status {
        weft_store::RequestStatus::Pending => "pending",
        weft_store::RequestStatus::Completed => "completed",
    };
    let thread = variables::deferred_thread(&request);
    let run_id = state.latest_run(&thread).await?.map(|r| r.run_id);
    Ok(VariableRequestView {
        request_id: request.id.clone(),
        parent_thread_id: request.parent_thread_id.clone(),
        thread_id: thread,
        assistant_id: request.agent.clone(),
        status: status.to_owned(),
        required: declared
            .into_iter()
            .filter(|d| d.required)
            .map(|d| d.name)
            .collect(),
        missing,
        run_id,
    })
}

/// `GET /threads/{parent_thread_id}/variables/{request_id}`.
#[utoipa::path(get, operation_id = "threads_variable_request_get", path = "/threads/{parent_thread_id}/variables/{request_id}", tag = "threads",
    params(("parent_thread_id" = String, Path, description = "The thread whose subagent call was deferred"),
        ("request_id" = String, Path, description = "The request (`requestId` of the subagent_env_required error)")),
    responses((status = 200, body = VariableRequestView), (status = 404, description = "No such request on that thread")))]
pub(crate) async fn request_get(
    State(state): State<AppState>,
    Path((parent, request_id)): Path<(String, String)>,
) -> Result<Json<VariableRequestView>, ApiError> {
    Ok(Json(request_view(&state, &parent, &request_id).await?))
}

/// `POST /threads/{parent_thread_id}/variables/{request_id}`: stores the values and boots the
/// deferred subagent with its original arguments.
#[utoipa::path(post, operation_id = "threads_variable_request_post", path = "/threads/{parent_thread_id}/variables/{request_id}", tag = "threads",
    request_body = VariablesPost,
    params(("parent_thread_id" = String, Path, description = "The thread whose subagent call was deferred"),
        ("request_id" = String, Path, description = "The request")),
    responses((status = 202, description = "Stored; the subagent runs", body = VariableRequestView),
        (status = 400, description = "A variable the subagent does not declare, a bad name or type"),
        (status = 404, description = "No such request on that thread"),
        (status = 409, description = "The request booted already"),
        (status = 422, description = "Required variables are still missing (the values given were stored)")))]
pub(crate) async fn request_post(
    State(state): State<AppState>,
    Path((parent, request_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<(StatusCode, Json<VariableRequestView>), ApiError> {
    let posted: VariablesPost = parse_body(&body)?;
    let lock = state.thread_lock(&parent);
    let _guard = lock.lock().await;
    let request = state
        .store()
        .variable_request(&parent, &request_id)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "no variable request {request_id} on thread {parent}"
            ))
        })?;
    if request.status != weft_store::RequestStatus::Pending {
        return Err(ApiError::conflict(format!(
            "the variable request {request_id} was completed already"
        )));
    }
    let agent = state.agent(Some(&request.agent))?;
    let declared = variables::declared(state.project(), agent);
    if let Some(unknown) = posted
        .values
        .keys()
        .find(|name| !declared.iter().any(|d| &&d.name == name))
    {
        return Err(ApiError::bad_request(format!(
            "the subagent {} declares no variable {unknown:?}",
            agent.name
        )));
    }
    store_values(
        &state,
        &variables::deferred_thread(&request),
        &posted.values,
    )
    .await?;
    let base_urls = weft_standard::preflight::check(
        state.project(),
        agent,
        state.config().launch.model.as_deref(),
        None,
        state.runtime().providers(),
        state.config().model_check,
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
    let mut launch = state.config().launch.clone();
    launch.base_urls.extend(base_urls);
    let booted = variables::boot_deferred(
        state.runtime(),
        state.project(),
        &launch,
        &parent,
        &request_id,
    )
    .await;
    let (request, handle) = match booted {
        Ok(booted) => booted,
        Err(BootError::Missing(missing)) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "variables_required",
                missing.to_string(),
            ));
        }
        Err(BootError::Completed(_)) => {
            return Err(ApiError::conflict(format!(
                "the variable request {request_id} was completed already"
            )));
        }
        Err(BootError::Unknown(id)) => {
            return Err(ApiError::not_found(format!("no variable request {id}")));
        }
        Err(error @ BootError::Duplicate(_)) => {
            return Err(ApiError::conflict(error.to_string()));
        }
        Err(error @ BootError::Attachments(_)) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "attachments",
                error.to_string(),
            ));
        }
        Err(BootError::Run(error)) => return Err(error.into()),
        Err(BootError::Store(error)) => return Err(error.into()),
        Err(other) => return Err(ApiError::internal(other.to_string())),
    };
    let run_id = handle.id().to_owned();
    let store = state.store().clone();
    let delivered = request.clone();
    // The child goes on without the request; its result goes to the parent's queue.
    tokio::spawn(async move {
        match handle.outcome().await {
            Ok(outcome) => {
                if let Err(error) =
                    variables::deliver_deferred(&store, &delivered, &outcome.end).await
                {
                    tracing::warn!(%error, "queueing a deferred subagent's result failed");
                }
            }
            Err(error) => tracing::warn!(%error, "a deferred subagent's run failed"),
        }
    });
    let mut answer = request_view(&state, &parent, &request_id).await?;
    answer.run_id = Some(run_id);
    Ok((StatusCode::ACCEPTED, Json(answer)))
}
