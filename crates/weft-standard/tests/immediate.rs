//! Immediate subagent tools (agents §7.6; SA-039 … SA-043): an `immediate` subagent runs as
//! soon as its prompt becomes active — at a thread's bootstrap and on a handoff — before the
//! first model step, recursively in booted children; `nameEnv` / `descriptionEnv` values are
//! model-visible hints in the child's first message; `scopedEnv` values reach the child's env
//! (its tools) and no model request, ever. Every request every model receives is recorded.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use weft_provider::ProviderRegistry;
use weft_provider::adapters::scripted::{Script, ScriptedModel};
use weft_provider::provider::{LlmModel, Provider};
use weft_standard::variables::Env;
use weft_standard::{Project, SessionOptions, SessionStatus, run_session};
use weft_store::VariableKind;

const SECRET: &str = "tok-SCOPED-7731-never-shown";

/// (model script, the request as text) for every model call.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// `record:PATH` models: answer k of a model's script for its k-th call, and record the
/// whole request (system text, messages, tools) as text.
fn recording_registry(seen: Seen) -> ProviderRegistry {
    let mut registry = ProviderRegistry::with_builtins();
    registry.register("record", move || {
        let seen = seen.clone();
        Arc::new(
            Provider::new("record", "0").with_llm(move |model_id: &str, _: &Value| {
                let script = Script::load(Path::new(model_id)).map_err(|e| {
                    weft_provider::UppError::llm(
                        weft_provider::ErrorCode::InvalidRequest,
                        "record",
                        e.to_string(),
                    )
                })?;
                let (seen, id) = (seen.clone(), model_id.to_owned());
                let cursor = Arc::new(AtomicUsize::new(0));
                let model: Arc<dyn LlmModel> =
                    Arc::new(ScriptedModel::from_fn(model_id, move |request| {
                        let k = cursor.fetch_add(1, Ordering::SeqCst);
                        seen.lock()
                            .expect("lock")
                            .push((id.clone(), format!("{request:?}")));
                        script.responses.get(k).cloned().ok_or_else(|| {
                            weft_provider::UppError::llm(
                                weft_provider::ErrorCode::InvalidRequest,
                                "record",
                                "out of responses",
                            )
                        })
                    }));
                Ok(model)
            }),
        )
    });
    registry
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "name": name, "arguments": args})
}

/// `lead` boots `indexer` at once (hints from INDEX_NAME / INDEX_DESC, INDEX_TOKEN
/// transferred); indexer's worker boots `leaf` at once, then checks its token with a command
/// that does not print it. `front` hands off to `lead` (an `ai_human` agent exposed as a tool).
fn write_project(dir: &Path) -> Project {
    let model = |name: &str| format!("record:{}", dir.join(name).display());
    let files = [
        ("weft.toml", "name = \"t\"\nsandbox = \"none\"\n".to_owned()),
        ("tools/done.toml", "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n".into()),
        ("agents/front.toml", "name = \"front\"\n[sideA]\nprompt = \"front\"\n".into()),
        ("prompts/front.toml", format!("name = \"front\"\nmodel = \"{}\"\ntools = [\"lead\"]\n", model("front.json"))),
        (
            "agents/lead.toml",
            "name = \"lead\"\nexposeAsTool = true\ntoolDescription = \"The lead.\"\n[sideA]\nprompt = \"lead\"\n".into(),
        ),
        (
            "prompts/lead.toml",
            format!(
                "name = \"lead\"\nmodel = \"{}\"\ntools = [{{ name = \"indexer\", initUserMessageProperty = \"task\", \
                 immediate = {{ nameEnv = \"INDEX_NAME\", descriptionEnv = \"INDEX_DESC\", scopedEnv = [\"INDEX_TOKEN\"] }} }}]\n",
                model("lead.json")
            ),
        ),
        (
            "agents/indexer.toml",
            "name = \"indexer\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Indexes.\"\nmaxSessionTurns = 4\n\
             [sideA]\nprompt = \"iw\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\n[sideB]\nprompt = \"ic\"\n\
             [[variables]]\nname = \"INDEX_TOKEN\"\ntype = \"secret\"\nrequired = true\nscoped = true\n".into(),
        ),
        (
            "prompts/iw.toml",
            format!(
                "name = \"iw\"\nmodel = \"{}\"\ntools = [\"done\", \"run_command\", {{ name = \"leaf\", immediate = true }}]\n",
                model("iw.json")
            ),
        ),
        ("prompts/ic.toml", format!("name = \"ic\"\nmodel = \"{}\"\n", model("ic.json"))),
        (
            "agents/leaf.toml",
            "name = \"leaf\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"A leaf.\"\nmaxSessionTurns = 2\n\
             [sideA]\nprompt = \"lw\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\n[sideB]\nprompt = \"ic\"\n".into(),
        ),
        ("prompts/lw.toml", format!("name = \"lw\"\nmodel = \"{}\"\ntools = [\"done\"]\n", model("lw.json"))),
        // A pair whose side A boots `leaf` at once, and takes two turns.
        (
            "agents/pair.toml",
            "name = \"pair\"\ntype = \"dual_ai\"\nmaxSessionTurns = 3\n[sideA]\nprompt = \"pw\"\n[sideB]\nprompt = \"ic\"\n".into(),
        ),
        ("prompts/pw.toml", format!("name = \"pw\"\nmodel = \"{}\"\ntools = [{{ name = \"leaf\", immediate = true }}]\n", model("pw.json"))),
        ("pw.json", json!({"responses": [{"text": "A1"}, {"text": "A2"}]}).to_string()),
        ("front.json", json!({"responses": [{"toolCalls": [call("h1", "lead", json!({"message": "over to you"}))]}]}).to_string()),
        ("lead.json", json!({"responses": [{"text": "lead answered"}]}).to_string()),
        (
            "iw.json",
            json!({"responses": [
                {"toolCalls": [call("r1", "run_command", json!({"command": "test -n \"$INDEX_TOKEN\" && echo token-present || echo token-missing"}))]},
                {"toolCalls": [call("d1", "done", json!({"summary": "indexed"}))]},
                {"toolCalls": [call("r2", "run_command", json!({"command": "test -n \"$INDEX_TOKEN\" && echo token-present || echo token-missing"}))]},
                {"toolCalls": [call("d2", "done", json!({"summary": "indexed again"}))]},
            ]})
            .to_string(),
        ),
        ("ic.json", json!({"responses": [{"text": "ok"}, {"text": "ok"}, {"text": "ok"}]}).to_string()),
        (
            "lw.json",
            json!({"responses": [
                {"toolCalls": [call("l1", "done", json!({"summary": "leaf done"}))]},
                {"toolCalls": [call("l2", "done", json!({"summary": "leaf done"}))]},
            ]})
            .to_string(),
        ),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    Project::load(dir).expect("valid project")
}

async fn run(agent: &str) -> (weft_standard::SessionOutcome, Vec<(String, String)>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(dir.path());
    let seen: Seen = Arc::default();
    let mut options = SessionOptions::new(project.dir());
    options.providers = Arc::new(recording_registry(seen.clone()));
    options.variables = Env::from_values([
        ("INDEX_NAME", "alpha-index", VariableKind::Text),
        ("INDEX_DESC", "the API reference", VariableKind::Text),
        ("INDEX_TOKEN", SECRET, VariableKind::Secret),
    ]);
    let outcome = run_session(&project, agent, "index the docs", &options)
        .await
        .expect("session");
    let seen = seen.lock().expect("lock").clone();
    (outcome, seen)
}

fn first_request<'a>(seen: &'a [(String, String)], script: &str) -> &'a str {
    seen.iter()
        .find(|(model, _)| model.ends_with(script))
        .map(|(_, request)| request.as_str())
        .unwrap_or_else(|| panic!("no request to {script}"))
}

#[tokio::test]
async fn immediate_subagents_boot_before_the_first_model_step_recursively_and_scoped_env_stays_hidden()
 {
    let (outcome, seen) = run("lead").await;
    assert_eq!(
        outcome.status,
        SessionStatus::Completed,
        "{}",
        outcome.message
    );
    // Order of the model calls: the leaf (booted by the indexer's worker) first, then the
    // indexer's worker, and the lead last — its prompt's immediate tool ran before its
    // first model step.
    let order: Vec<&str> = seen
        .iter()
        .map(|(m, _)| m.rsplit('/').next().unwrap_or(m))
        .collect();
    assert_eq!(order.first(), Some(&"lw.json"), "{order:?}");
    assert_eq!(order.last(), Some(&"lead.json"), "{order:?}");
    assert_eq!(order.iter().filter(|m| **m == "lead.json").count(), 1);
    // SA-039: the lead's first request already holds the indexer's result.
    let lead = first_request(&seen, "lead.json");
    assert!(
        lead.contains("has returned the following result:\\n\\nindexed"),
        "{lead}"
    );
    // SA-040: the indexer's worker's first request holds the leaf's result.
    let worker = first_request(&seen, "iw.json");
    assert!(
        worker.contains("has returned the following result:\\n\\nleaf done"),
        "{worker}"
    );
    // SA-041: the hints are in the child's first message, before the task.
    assert!(
        worker.contains("Name: alpha-index\\nDescription: the API reference\\n\\nindex the docs"),
        "{worker}"
    );
    // SA-042: the transferred value reached the child's tools (its scoped, required
    // variable resolved from the transfer, not inherited).
    assert!(
        seen.iter().any(|(_, r)| r.contains("token-present")),
        "the child's command saw no token"
    );
    // SA-043: no model request of any agent ever held the value.
    for (model, request) in &seen {
        assert!(
            !request.contains(SECRET),
            "{model} was sent the scoped value"
        );
    }
}

#[tokio::test]
async fn a_handoff_activates_the_targets_prompt_and_boots_its_immediate_tools() {
    let (outcome, seen) = run("front").await;
    assert_eq!(
        outcome.status,
        SessionStatus::Completed,
        "{}",
        outcome.message
    );
    assert_eq!(outcome.agent, "lead");
    let lead = first_request(&seen, "lead.json");
    assert!(
        lead.contains("has returned the following result:\\n\\nindexed"),
        "{lead}"
    );
    for (model, request) in &seen {
        assert!(
            !request.contains(SECRET),
            "{model} was sent the scoped value"
        );
    }
    // A non-immediate prompt (front's) booted nothing: its first request is the input alone.
    let front = first_request(&seen, "front.json");
    assert!(!front.contains("has returned"), "{front}");
}

/// The immediate tools of a `dual_ai` pair's side A run once, when the thread boots, not
/// again before each of side A's later turns (nor before side B's).
#[tokio::test]
async fn a_pairs_immediate_tools_boot_once_not_before_every_turn() {
    let (outcome, seen) = run("pair").await;
    assert_eq!(outcome.turns, 3, "{}", outcome.message);
    let order: Vec<&str> = seen
        .iter()
        .map(|(m, _)| m.rsplit('/').next().unwrap_or(m))
        .collect();
    // The leaf's one call (its `done`) before anything else; side A's model answered twice.
    assert_eq!(
        order.iter().filter(|m| **m == "lw.json").count(),
        1,
        "{order:?}"
    );
    assert_eq!(order.first(), Some(&"lw.json"), "{order:?}");
    assert_eq!(
        order.iter().filter(|m| **m == "pw.json").count(),
        2,
        "{order:?}"
    );
}
