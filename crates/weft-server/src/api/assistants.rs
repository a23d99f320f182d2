//! Assistants: the project's agents. An assistant's id is its agent's name (so is its
//! `graph_id`); the UUIDs LangGraph Platform gives assistants do not exist here — a client
//! names the agent (`assistant_id="support"`), and a name the project does not have is 404.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;
use weft_standard::AgentDefinition;

use super::model::Assistant;
use super::parse_body;
use crate::error::ApiError;
use crate::state::AppState;

/// The body of `POST /assistants/search` and `POST /assistants/count`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct AssistantSearch {
    /// Only this agent.
    pub graph_id: Option<String>,
    /// Agents whose name or title contains this.
    pub name: Option<String>,
    /// At most this many (default 10).
    pub limit: Option<usize>,
    /// Skip this many.
    pub offset: Option<usize>,
}

fn assistant(state: &AppState, agent: &AgentDefinition) -> Assistant {
    let at = state.started_at().to_owned();
    Assistant {
        assistant_id: agent.name.clone(),
        graph_id: agent.name.clone(),
        name: agent.title.clone().unwrap_or_else(|| agent.name.clone()),
        description: agent.description.clone(),
        config: json!({}),
        context: json!({}),
        metadata: json!({"kind": serde_json::to_value(agent.agent_type).unwrap_or(Value::Null)}),
        version: 1,
        created_at: at.clone(),
        updated_at: at,
    }
}

fn matching(state: &AppState, search: &AssistantSearch) -> Vec<Assistant> {
    state
        .project()
        .agents()
        .filter(|a| search.graph_id.as_deref().is_none_or(|g| g == a.name))
        .filter(|a| {
            search.name.as_deref().is_none_or(|n| {
                a.name.contains(n) || a.title.as_deref().is_some_and(|t| t.contains(n))
            })
        })
        .map(|a| assistant(state, a))
        .collect()
}

/// `POST /assistants/search`: the project's agents.
#[utoipa::path(post, operation_id = "assistants_search", path = "/assistants/search", tag = "assistants",
    request_body = AssistantSearch,
    responses((status = 200, description = "The matching agents", body = [Assistant])))]
pub(crate) async fn search(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Vec<Assistant>>, ApiError> {
    let search: AssistantSearch = parse_body(&body)?;
    let all = matching(&state, &search);
    Ok(Json(
        all.into_iter()
            .skip(search.offset.unwrap_or(0))
            .take(search.limit.unwrap_or(10))
            .collect(),
    ))
}

/// `POST /assistants/count`.
#[utoipa::path(post, operation_id = "assistants_count", path = "/assistants/count", tag = "assistants",
    request_body = AssistantSearch,
    responses((status = 200, description = "How many agents match", body = usize)))]
pub(crate) async fn count(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<usize>, ApiError> {
    let search: AssistantSearch = parse_body(&body)?;
    Ok(Json(matching(&state, &search).len()))
}

/// `GET /assistants/{assistant_id}`.
#[utoipa::path(get, operation_id = "assistants_get", path = "/assistants/{assistant_id}", tag = "assistants",
    params(("assistant_id" = String, Path, description = "The agent's name")),
    responses((status = 200, body = Assistant), (status = 404, description = "No such agent")))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(assistant_id): Path<String>,
) -> Result<Json<Assistant>, ApiError> {
    let agent = state.agent(Some(&assistant_id))?;
    Ok(Json(assistant(&state, agent)))
}
