//! Variables across threads (SA-073, SA-075): a child thread inherits its parent thread's
//! values, except the ones its agent declares `scoped`; a scoped value set on the declaring
//! thread flows down to that thread's descendants; a subagent whose required variable does not
//! resolve is not started (the call is a tool error naming it).

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use weft_runtime::event::{EventKind, RunEvent};
use weft_runtime::spec::{Program, RunSpec, SessionProgram};
use weft_runtime::{RunEnd, Runtime};
use weft_standard::variables::{Env, missing_scoped, thread_env};
use weft_standard::{Project, StandardSessions};
use weft_store::{
    EventLog as _, Store, ThreadRecord, ThreadVariables as _, Threads as _, VariableKind,
};

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "name": name, "arguments": args})
}

/// `lead` calls the `dual_ai` subagent `reviewer`, whose variables are `reviewer_variables`;
/// reviewer's worker prints `$REGION` and `$DOC_DB` with a command, then ends the session.
/// `leaf` (declaring nothing) and `scoper` (scoping DOC_DB) exist for the thread-chain test.
fn write_project(dir: &Path, reviewer_variables: &str) -> Project {
    let files = [
        (
            "weft.toml",
            "name = \"t\"\nmodel = \"scripted-turns:lead.json\"\nsandbox = \"none\"\n".to_owned(),
        ),
        (
            "tools/done.toml",
            "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n".into(),
        ),
        ("agents/lead.toml", "name = \"lead\"\n[sideA]\nprompt = \"lead\"\n".into()),
        (
            "prompts/lead.toml",
            "name = \"lead\"\ntools = [{ name = \"reviewer\", initUserMessageProperty = \"task\" }]\n".into(),
        ),
        (
            "agents/reviewer.toml",
            format!(
                "name = \"reviewer\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Reviews.\"\nmaxSessionTurns = 4\n\
                 [sideA]\nprompt = \"worker\"\nsessionStop = {{ name = \"done\", messageProperty = \"summary\" }}\n\
                 [sideB]\nprompt = \"checker\"\n{reviewer_variables}"
            ),
        ),
        (
            "prompts/worker.toml",
            "name = \"worker\"\nmodel = \"scripted-turns:worker.json\"\ntools = [\"done\", \"run_command\"]\n".into(),
        ),
        ("prompts/checker.toml", "name = \"checker\"\nmodel = \"scripted-turns:checker.json\"\n".into()),
        ("agents/leaf.toml", "name = \"leaf\"\n[sideA]\nprompt = \"lead\"\n".into()),
        (
            "agents/scoper.toml",
            "name = \"scoper\"\n[sideA]\nprompt = \"lead\"\n[[variables]]\nname = \"DOC_DB\"\nscoped = true\n".into(),
        ),
        (
            "lead.json",
            json!({"responses": [
                {"toolCalls": [call("c1", "reviewer", json!({"task": "check"}))]},
                {"text": "all good"},
            ]})
            .to_string(),
        ),
        (
            "worker.json",
            json!({"responses": [
                {"toolCalls": [call("w1", "run_command", json!({"command": "echo \"region=$REGION db=${DOC_DB:-none}\""}))]},
                {"toolCalls": [call("w2", "done", json!({"summary": "reviewed"}))]},
            ]})
            .to_string(),
        ),
        ("checker.json", json!({"responses": [{"text": "fine"}]}).to_string()),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    Project::load(dir).expect("valid project")
}

/// Runs `lead` on a thread holding REGION and DOC_DB; the run's events.
async fn run_lead(dir: &Path, project: &Project) -> (RunEnd, Vec<RunEvent>) {
    let store = Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .expect("store");
    store
        .put_thread(&ThreadRecord::new("th-lead"))
        .await
        .expect("thread");
    store
        .set_variable("th-lead", "REGION", "eu-west-1", VariableKind::Text)
        .await
        .expect("set");
    store
        .set_variable("th-lead", "DOC_DB", "pg://lead-db", VariableKind::Text)
        .await
        .expect("set");
    let runtime = Runtime::new(store.clone()).with_sessions(Arc::new(StandardSessions));
    let spec = RunSpec::new(
        "review",
        Program::Session(SessionProgram {
            project: Some(project.snapshot().expect("snapshot")),
            workspace: project.dir().to_path_buf(),
            agent: "lead".into(),
            model_override: None,
            project_dir: None,
            sandbox: None,
            base_urls: Default::default(),
            profile: None,
        }),
    );
    let outcome = runtime
        .start_on(Some("th-lead"), spec, false)
        .await
        .expect("start")
        .outcome()
        .await
        .expect("outcome");
    let events = store
        .events(&weft_store::EventQuery {
            run_id: Some(outcome.run_id.clone()),
            ..weft_store::EventQuery::default()
        })
        .await
        .expect("events")
        .into_iter()
        .map(RunEvent::from_record)
        .collect();
    (outcome.end, events)
}

fn tool_result(events: &[RunEvent], tool: &str) -> (String, bool) {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCallEnd {
                tool: t,
                result,
                is_error,
                ..
            } if t == tool => Some((result.clone().unwrap_or(Value::Null).to_string(), *is_error)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a call of {tool}"))
}

/// The JSON object inside a tool error's result (the result is the error's text, as a JSON
/// string or under `error`).
fn error_json(result: &str) -> Value {
    let mut value: Value = serde_json::from_str(result).expect("JSON");
    for _ in 0..3 {
        value = match value {
            Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
            Value::Object(map)
                if map.get("error").is_some_and(Value::is_string)
                    && !map.contains_key("requestId") =>
            {
                map["error"].clone()
            }
            other => return other,
        };
    }
    value
}

#[tokio::test]
async fn a_child_inherits_the_parents_values_but_not_the_ones_it_scopes() {
    // Not scoped: both values flow down to the child's tools.
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(
        dir.path(),
        "[[variables]]\nname = \"REGION\"\nrequired = true\n[[variables]]\nname = \"DOC_DB\"\n",
    );
    let (end, events) = run_lead(dir.path(), &project).await;
    assert!(matches!(end, RunEnd::Completed { .. }), "{end:?}");
    let (printed, _) = tool_result(&events, "run_command");
    assert!(
        printed.contains("region=eu-west-1 db=pg://lead-db"),
        "{printed}"
    );

    // DOC_DB scoped (not required): the child does not see the parent's value.
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(
        dir.path(),
        "[[variables]]\nname = \"REGION\"\nrequired = true\n[[variables]]\nname = \"DOC_DB\"\nscoped = true\n",
    );
    let (end, events) = run_lead(dir.path(), &project).await;
    assert!(matches!(end, RunEnd::Completed { .. }), "{end:?}");
    let (printed, _) = tool_result(&events, "run_command");
    assert!(printed.contains("region=eu-west-1 db=none"), "{printed}");
}

#[tokio::test]
async fn a_subagent_missing_a_required_scoped_variable_is_deferred_then_booted_with_its_arguments()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(
        dir.path(),
        "[[variables]]\nname = \"DOC_DB\"\nrequired = true\nscoped = true\ndescription = \"The child's own database\"\n\
         [[variables]]\nname = \"REGION\"\n",
    );
    let (end, events) = run_lead(dir.path(), &project).await;
    // The lead goes on (the error is the model's to read); the child never ran.
    assert!(matches!(end, RunEnd::Completed { .. }), "{end:?}");
    let (result, is_error) = tool_result(&events, "reviewer");
    assert!(is_error, "{result}");
    assert!(
        !events.iter().any(
            |e| matches!(&e.kind, EventKind::ToolCallEnd { tool, .. } if tool == "run_command")
        ),
        "the child ran"
    );
    // The structured error (agents §7.8): its code, the missing names, the endpoint.
    let error = error_json(&result);
    assert_eq!(error["error"], weft_standard::variables::ENV_REQUIRED);
    assert_eq!(error["missing"], json!(["DOC_DB"]));
    let request_id = error["requestId"]
        .as_str()
        .expect("a request id")
        .to_owned();
    assert_eq!(
        error["endpoint"],
        format!("/threads/th-lead/variables/{request_id}").as_str()
    );

    // The values go to the deferred child's thread; booting runs the child with the
    // original arguments, and its result is queued on the parent as the spec's text.
    let store = Store::open(&format!("sqlite:{}", dir.path().join("weft.db").display()))
        .await
        .expect("store");
    let runtime = Runtime::new(store.clone()).with_sessions(Arc::new(StandardSessions));
    let launch = weft_standard::Launch::default();
    // Still missing: refused, nothing booted.
    let refused = weft_standard::variables::boot_deferred(
        &runtime,
        &project,
        &launch,
        "th-lead",
        &request_id,
    )
    .await;
    assert!(
        matches!(
            refused,
            Err(weft_standard::variables::BootError::Missing(_))
        ),
        "{refused:?}"
    );
    store
        .set_variable(&request_id, "DOC_DB", "pg://child-db", VariableKind::Secret)
        .await
        .expect("set");
    let (request, handle) = weft_standard::variables::boot_deferred(
        &runtime,
        &project,
        &launch,
        "th-lead",
        &request_id,
    )
    .await
    .expect("boots");
    let outcome = handle.outcome().await.expect("outcome");
    assert!(
        matches!(outcome.end, RunEnd::Completed { .. }),
        "{:?}",
        outcome.end
    );
    let child_events: Vec<RunEvent> = store
        .events(&weft_store::EventQuery {
            run_id: Some(outcome.run_id.clone()),
            ..weft_store::EventQuery::default()
        })
        .await
        .expect("events")
        .into_iter()
        .map(RunEvent::from_record)
        .collect();
    let (printed, _) = tool_result(&child_events, "run_command");
    // REGION inherited from the parent; the scoped secret is the child's own, and redacted.
    assert!(printed.contains("region=eu-west-1 db="), "{printed}");
    assert!(!printed.contains("pg://child-db"), "{printed}");
    let child = store
        .thread(&request_id)
        .await
        .expect("thread")
        .expect("child thread");
    assert_eq!(child.parent_thread_id.as_deref(), Some("th-lead"));
    weft_standard::variables::deliver_deferred(&store, &request, &outcome.end)
        .await
        .expect("delivered");
    use weft_store::ThreadQueue as _;
    let queued = store.queued("th-lead").await.expect("queue");
    assert_eq!(queued.len(), 1);
    assert_eq!(
        queued[0].text,
        format!(
            "Subagent (reference: {request_id}) has returned the following result:\n\nreviewed"
        )
    );
    // Once only.
    let again = weft_standard::variables::boot_deferred(
        &runtime,
        &project,
        &launch,
        "th-lead",
        &request_id,
    )
    .await;
    assert!(
        matches!(
            again,
            Err(weft_standard::variables::BootError::Completed(_))
        ),
        "{again:?}"
    );
}

#[tokio::test]
async fn scoped_values_flow_down_from_the_declaring_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(dir.path(), "");
    let store = Store::open(&format!("sqlite:{}", dir.path().join("chain.db").display()))
        .await
        .expect("store");
    // root (leaf agent) → mid (scoper, its own DOC_DB) → low (leaf);
    // root → mid2 (scoper, no value) → low2 (leaf).
    for (id, parent, title) in [
        ("root", None, "leaf"),
        ("mid", Some("root"), "scoper"),
        ("low", Some("mid"), "leaf"),
        ("mid2", Some("root"), "scoper"),
        ("low2", Some("mid2"), "leaf"),
    ] {
        let mut thread = ThreadRecord::new(id);
        thread.parent_thread_id = parent.map(str::to_owned);
        thread.title = Some(title.to_owned());
        store.put_thread(&thread).await.expect("thread");
    }
    store
        .set_variable("root", "DOC_DB", "root-db", VariableKind::Text)
        .await
        .expect("set");
    store
        .set_variable("root", "REGION", "eu", VariableKind::Text)
        .await
        .expect("set");
    store
        .set_variable("mid", "DOC_DB", "mid-db", VariableKind::Text)
        .await
        .expect("set");
    let leaf = project.agent("leaf").expect("leaf");
    let scoper = project.agent("scoper").expect("scoper");
    let env = |thread: &'static str, agent| {
        let (store, project) = (store.clone(), &project);
        async move {
            thread_env(&store, project, thread, agent)
                .await
                .expect("env")
        }
    };
    // The declaring thread's own value flows down to its descendants.
    assert_eq!(env("low", leaf).await.get("DOC_DB"), Some("mid-db"));
    assert_eq!(env("mid", scoper).await.get("DOC_DB"), Some("mid-db"));
    // A scoping thread without a value blocks the ancestors' value, for its subtree too.
    assert_eq!(env("mid2", scoper).await.get("DOC_DB"), None);
    assert_eq!(env("low2", leaf).await.get("DOC_DB"), None);
    // Other names are inherited all the way.
    assert_eq!(env("low2", leaf).await.get("REGION"), Some("eu"));
    assert_eq!(env("root", leaf).await.get("DOC_DB"), Some("root-db"));
    // `missing_scoped` sees the same for a child about to be created.
    let parent = Env::from_values([("DOC_DB", "x", VariableKind::Text)]);
    assert!(missing_scoped(&project, scoper, &parent, Env::default()).is_empty());
}
