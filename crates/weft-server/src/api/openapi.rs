//! `GET /openapi.json`: the run API's OpenAPI 3.1 document, generated from the handlers'
//! `#[utoipa::path]` annotations and [`super::model`]'s types. A test checks that every
//! route of [`super::ROUTES`] is in it.

use axum::Json;
use utoipa::OpenApi;

use super::{assistants, effects, model, queue, runs, threads, variables};

/// The document's definition: every handler of the run API.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "Weft run API",
        description = "Threads, runs and assistants (the project's agents) in the shape the LangGraph SDK clients use. Authenticate with `Authorization: Bearer TOKEN` or `x-api-key: TOKEN`.",
    ),
    paths(
        document,
        assistants::search,
        assistants::count,
        assistants::get,
        threads::create,
        threads::search,
        threads::count,
        threads::import,
        threads::get,
        threads::patch,
        threads::delete,
        threads::state,
        threads::state_at,
        threads::state_checkpoint,
        threads::history,
        threads::copy,
        threads::export,
        variables::get,
        variables::set,
        variables::request_get,
        variables::request_post,
        threads::thread_state,
        threads::terminate,
        queue::queue_tool,
        effects::schedule,
        effects::list,
        effects::remove,
        runs::create,
        runs::list,
        runs::stream,
        runs::wait,
        runs::get,
        runs::join,
        runs::join_stream,
        runs::cancel,
    ),
    components(schemas(
        model::Assistant,
        queue::QueueTool,
        queue::QueuedToolView,
        effects::ScheduleEffect,
        effects::EffectView,
        model::Thread,
        model::ThreadStatus,
        model::ThreadState,
        model::ThreadTask,
        model::Checkpoint,
        model::Interrupt,
        model::InterruptValue,
        model::Run,
        model::RunStatus,
        model::RunCreate,
        model::Command,
        crate::config::Busy,
        variables::ThreadVariablesView,
        variables::VariableInfo,
        variables::SetVariable,
        variables::VariablesPost,
        variables::VariableInput,
        variables::VariableRequestView,
    )),
    tags(
        (name = "assistants", description = "The project's agents"),
        (name = "threads", description = "Weft threads: state, history, copy, ThreadProtocol export and import"),
        (name = "runs", description = "Weft runs on a thread"),
    )
)]
pub struct ApiDoc;

/// `GET /openapi.json`.
#[utoipa::path(get, operation_id = "openapi", path = "/openapi.json", tag = "assistants",
    responses((status = 200, description = "This document", body = Object)))]
pub(crate) async fn document() -> Json<utoipa::openapi::OpenApi> {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    Json(doc)
}
