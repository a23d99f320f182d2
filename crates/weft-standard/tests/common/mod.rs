//! What weft-standard's behaviour tests share: the `recording:PATH` provider (a scripted model
//! that keeps every request it receives), a runtime that has it, and the spec of a run of a
//! project's agent.
// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use weft_provider::adapters::scripted::{Script, ScriptedModel};
use weft_provider::provider::{LlmCapabilities, LlmModel, Provider};
use weft_provider::{ErrorCode, Message, UppError};
use weft_runtime::Runtime;
use weft_runtime::spec::{Program, RunSpec, SessionProgram};
use weft_standard::{Project, StandardSessions};
use weft_store::Store;

/// A tool call of a scripted response.
pub(crate) fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "name": name, "arguments": args})
}

/// A scripted response making `list`'s calls.
pub(crate) fn calls(list: &[Value]) -> Value {
    json!({"toolCalls": list})
}

/// What one model call received.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// The model id: the script's path.
    pub(crate) model: String,
    pub(crate) system: Option<String>,
    pub(crate) messages: Vec<Message>,
    /// The tools offered: (name, parameters).
    pub(crate) tools: Vec<(String, Value)>,
}

impl Seen {
    /// The names of the tools offered, in order.
    pub(crate) fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|(name, _)| name.as_str()).collect()
    }
}

/// Every request of a test, in the order the models received them.
pub(crate) type Requests = Arc<Mutex<Vec<Seen>>>;

/// The requests of the model whose script is `script` (a file name).
pub(crate) fn requests(seen: &Requests, script: &str) -> Vec<Seen> {
    let seen = seen.lock().expect("lock");
    seen.iter()
        .filter(|s| s.model.ends_with(script))
        .cloned()
        .collect()
}

/// The `recording:PATH` provider: answer k of the script at `PATH` for a request with k
/// assistant messages (like `scripted-turns`), each request recorded in `seen`; `vision =
/// false` declares no image input.
pub(crate) fn recording(
    seen: Requests,
    vision: bool,
) -> impl Fn() -> Arc<Provider> + Send + Sync + 'static {
    move || {
        let seen = seen.clone();
        Arc::new(Provider::new("recording", "0").with_llm(
            move |model_id: &str, _options: &Value| {
                let script = Script::load(Path::new(model_id)).map_err(|e| {
                    UppError::llm(ErrorCode::InvalidRequest, "recording", e.to_string())
                })?;
                let (id, seen) = (model_id.to_owned(), seen.clone());
                let model = ScriptedModel::from_fn(model_id, move |request| {
                    seen.lock().expect("lock").push(Seen {
                        model: id.clone(),
                        system: request.system.clone(),
                        messages: request.messages().cloned().collect(),
                        tools: request
                            .tools
                            .iter()
                            .map(|t| (t.name.clone(), t.parameters.clone()))
                            .collect(),
                    });
                    let k = request.messages().filter(|m| m.is_assistant()).count();
                    script.responses.get(k).cloned().ok_or_else(|| {
                        UppError::llm(
                            ErrorCode::InvalidRequest,
                            "recording",
                            format!("{id} has no answer {}", k + 1),
                        )
                    })
                });
                let model = if vision {
                    model
                } else {
                    model.with_capabilities(LlmCapabilities {
                        streaming: true,
                        tools: true,
                        ..LlmCapabilities::default()
                    })
                };
                Ok(Arc::new(model) as Arc<dyn LlmModel>)
            },
        ))
    }
}

/// A runtime on `store` running Standard Agents sessions, with the `recording` provider.
pub(crate) fn runtime(store: &Store, seen: &Requests) -> Runtime {
    let mut providers = weft_runtime::default_providers();
    providers.register("recording", recording(seen.clone(), true));
    Runtime::new(store.clone())
        .with_providers(providers)
        .with_sessions(Arc::new(StandardSessions))
}

/// The SQLite store `weft.db` in `dir`.
pub(crate) async fn sqlite_store(dir: &Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .expect("store")
}

/// A run of `project`'s agent `agent` with `input`, in the project's folder.
pub(crate) fn session_spec(project: &Project, agent: &str, input: &str) -> RunSpec {
    RunSpec::new(
        input,
        Program::Session(SessionProgram {
            project: Some(project.snapshot().expect("snapshot")),
            workspace: project.dir().to_path_buf(),
            agent: agent.into(),
            model_override: None,
            project_dir: None,
            sandbox: None,
            base_urls: Default::default(),
            profile: None,
        }),
    )
}

/// Writes `files` (path relative to `dir`, text), making their folders.
pub(crate) fn write_files(dir: &Path, files: impl IntoIterator<Item = (&'static str, String)>) {
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
}

/// Run `run`'s events in its log, in order.
pub(crate) async fn events(store: &Store, run: &str) -> Vec<weft_runtime::event::RunEvent> {
    use weft_store::EventLog as _;
    let query = weft_store::EventQuery {
        run_id: Some(run.to_owned()),
        ..weft_store::EventQuery::default()
    };
    store
        .events(&query)
        .await
        .expect("events")
        .into_iter()
        .map(weft_runtime::event::RunEvent::from_record)
        .collect()
}

/// The thread run `run` runs on.
pub(crate) async fn thread_of(store: &Store, run: &str) -> String {
    use weft_store::Runs as _;
    store
        .run(run)
        .await
        .expect("run")
        .expect("recorded")
        .thread_id
}
