//! Thread variables and the deferred-subagent bootstrap over HTTP (SA-048, SA-049, SA-050,
//! SA-073): `GET`/`POST /threads/{id}/variables` list and set a thread's values (a run
//! missing a required one is refused with 422); a subagent call missing a required scoped
//! variable is deferred, `GET /threads/{parent}/variables/{request}` names what is missing,
//! and `POST` stores the values and boots the child with the call's original arguments, whose
//! result is queued on the parent thread. Secret values are never answered.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;
#[path = "langgraph/support.rs"]
mod support;

use serde_json::{Value, json};
use support::{Served, until};
use weft_store::{EventLog as _, ThreadQueue as _};

const SECRET: &str = "pg://child-secret-db-4411";

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "name": name, "arguments": args})
}

/// Agent `a` needs REGION; it calls the `dual_ai` subagent `reviewer`, which needs its own
/// secret DOC_DB (scoped) and reports what it got.
fn project(p: &std::path::Path) {
    let files = [
        (
            "weft.toml",
            "name = \"t\"\nmodel = \"scripted-turns:lead.json\"\nsandbox = \"none\"\ndefaultAgent = \"a\"\n".to_owned(),
        ),
        (
            "agents/a.toml",
            "name = \"a\"\n[sideA]\nprompt = \"lead\"\n[[variables]]\nname = \"REGION\"\nrequired = true\ndescription = \"Where\"\n".into(),
        ),
        (
            "prompts/lead.toml",
            "name = \"lead\"\ntools = [{ name = \"reviewer\", initUserMessageProperty = \"task\" }]\n".into(),
        ),
        (
            "tools/done.toml",
            "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n".into(),
        ),
        (
            "agents/reviewer.toml",
            "name = \"reviewer\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Reviews.\"\nmaxSessionTurns = 4\n\
             [sideA]\nprompt = \"worker\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\n[sideB]\nprompt = \"checker\"\n\
             [[variables]]\nname = \"DOC_DB\"\ntype = \"secret\"\nrequired = true\nscoped = true\ndescription = \"The reviewer's database\"\n\
             [[variables]]\nname = \"REGION\"\n".into(),
        ),
        (
            "prompts/worker.toml",
            "name = \"worker\"\nmodel = \"scripted-turns:worker.json\"\ntools = [\"done\", \"run_command\"]\n".into(),
        ),
        ("prompts/checker.toml", "name = \"checker\"\nmodel = \"scripted-turns:checker.json\"\n".into()),
        (
            "lead.json",
            json!({"responses": [
                {"toolCalls": [call("c1", "reviewer", json!({"task": "review chapter 2"}))]},
                {"text": "waiting for the reviewer"},
            ]})
            .to_string(),
        ),
        (
            "worker.json",
            json!({"responses": [
                {"toolCalls": [call("w1", "run_command", json!({"command": "echo \"region=$REGION db=$DOC_DB\""}))]},
                {"toolCalls": [call("w2", "done", json!({"summary": "chapter 2 reviewed"}))]},
            ]})
            .to_string(),
        ),
        ("checker.json", json!({"responses": [{"text": "fine"}]}).to_string()),
    ];
    for (path, text) in files {
        let path = p.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_are_set_over_http_and_a_deferred_subagent_boots_when_they_are_posted() {
    let dir = tempfile::tempdir().unwrap();
    project(&dir.path().join("p"));
    let s = Served::serve(dir).await;
    let thread = s.thread().await;
    let mut answers = Vec::new();

    // Declared, missing: the run is refused before it starts.
    let (status, listed) = s.get(&format!("/threads/{thread}/variables")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["assistant_id"], "a");
    assert_eq!(listed["missing"], json!(["REGION"]));
    assert_eq!(listed["variables"][0]["name"], "REGION");
    assert_eq!(listed["variables"][0]["required"], true);
    let run =
        json!({"assistant_id": "a", "input": {"messages": [{"role": "user", "content": "go"}]}});
    let (status, refused) = s.post(&format!("/threads/{thread}/runs/wait"), &run).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "variables_required", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("REGION (Where)")
    );

    // Set: nothing missing; the run goes, and the subagent call is deferred.
    let (status, set) = s
        .post(
            &format!("/threads/{thread}/variables"),
            &json!({"values": {"REGION": "eu-west-1"}}),
        )
        .await;
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["missing"], json!([]));
    assert_eq!(set["set"][0]["name"], "REGION");
    let (status, done) = s.post(&format!("/threads/{thread}/runs/wait"), &run).await;
    assert_eq!(status, 200, "{done}");
    let store = s.store();
    let events = store
        .events(&weft_store::EventQuery {
            thread_id: Some(thread.clone()),
            types: vec!["tool_call_end".into()],
            ..weft_store::EventQuery::default()
        })
        .await
        .unwrap();
    let result = events
        .iter()
        .find(|e| e.payload["tool"] == "reviewer")
        .map(|e| e.payload["result"].to_string())
        .expect("the reviewer call ended");
    let request = result
        .split("vr-")
        .nth(1)
        .map(|rest| format!("vr-{}", &rest[..16]))
        .expect("a request id in the error");
    assert!(result.contains("subagent_env_required"), "{result}");

    // The bootstrap endpoint names what is missing.
    let path = format!("/threads/{thread}/variables/{request}");
    let (status, pending) = s.get(&path).await;
    assert_eq!(status, 200, "{pending}");
    assert_eq!(pending["status"], "pending");
    assert_eq!(pending["required"], json!(["DOC_DB"]));
    assert_eq!(pending["missing"], json!(["DOC_DB"]));
    assert_eq!(pending["assistant_id"], "reviewer");
    assert_eq!(
        s.get(&format!("/threads/other/variables/{request}"))
            .await
            .0,
        404
    );
    // Only what the subagent declares.
    let (status, _) = s
        .post(&path, &json!({"values": {"SOMETHING_ELSE": "x"}}))
        .await;
    assert_eq!(status, 400);

    // POST: stored (as the declared secret) and booted with the original arguments.
    let (status, booted) = s.post(&path, &json!({"values": {"DOC_DB": SECRET}})).await;
    assert_eq!(status, 202, "{booted}");
    answers.push(booted.to_string());
    let child = booted["thread_id"].as_str().unwrap().to_owned();
    let run_id = booted["run_id"].as_str().unwrap().to_owned();
    assert_eq!(booted["status"], "completed");
    let (status, joined) = s.get(&format!("/threads/{child}/runs/{run_id}/join")).await;
    assert_eq!(status, 200, "{joined}");
    // The child's result reaches the parent's queue, as the spec's text.
    until(|| {
        let store = store.clone();
        let thread = thread.clone();
        async move { !store.queued(&thread).await.unwrap().is_empty() }
    })
    .await;
    let queued = store.queued(&thread).await.unwrap();
    assert_eq!(
        queued[0].text,
        format!(
            "Subagent (reference: {child}) has returned the following result:\n\nchapter 2 reviewed"
        )
    );
    // The child saw the parent's REGION and its own secret (redacted in its events).
    let child_events = store
        .events(&weft_store::EventQuery {
            run_id: Some(run_id.clone()),
            types: vec!["tool_call_end".into()],
            ..weft_store::EventQuery::default()
        })
        .await
        .unwrap();
    let printed = child_events
        .iter()
        .find(|e| e.payload["tool"] == "run_command")
        .map(|e| e.payload["result"].to_string())
        .expect("the command ran");
    assert!(
        printed.contains("region=eu-west-1 db=[REDACTED]"),
        "{printed}"
    );
    // A second POST is refused: the request booted once.
    let (status, again) = s.post(&path, &json!({"values": {"DOC_DB": SECRET}})).await;
    assert_eq!(status, 409, "{again}");
    let (_, child_vars) = s
        .get(&format!("/threads/{child}/variables?assistant_id=reviewer"))
        .await;
    answers.push(child_vars.to_string());
    assert_eq!(child_vars["set"][0]["name"], "DOC_DB");
    assert_eq!(child_vars["set"][0]["type"], "secret");
    for answer in answers {
        assert!(!answer.contains(SECRET), "{answer}");
    }
}

/// Agent `a` creates a resumable instance of the `dual_ai` subagent `reviewer`, which needs
/// its own secret DOC_DB (required, scoped).
fn resumable_project(p: &std::path::Path) {
    let files = [
        (
            "weft.toml",
            "name = \"t\"\nmodel = \"scripted-turns:lead.json\"\nsandbox = \"none\"\ndefaultAgent = \"a\"\n".to_owned(),
        ),
        ("agents/a.toml", "name = \"a\"\n[sideA]\nprompt = \"lead\"\n".into()),
        (
            "prompts/lead.toml",
            "name = \"lead\"\ntools = [{ name = \"reviewer\", initUserMessageProperty = \"task\", resumable = { receives_messages = \"side_a\" } }]\n".into(),
        ),
        (
            "tools/done.toml",
            "name = \"done\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n".into(),
        ),
        (
            "agents/reviewer.toml",
            "name = \"reviewer\"\ntype = \"dual_ai\"\nexposeAsTool = true\ntoolDescription = \"Reviews.\"\nmaxSessionTurns = 4\n\
             [sideA]\nprompt = \"worker\"\nsessionStop = { name = \"done\", messageProperty = \"summary\" }\n[sideB]\nprompt = \"checker\"\n\
             [[variables]]\nname = \"DOC_DB\"\ntype = \"secret\"\nrequired = true\nscoped = true\ndescription = \"The reviewer's database\"\n".into(),
        ),
        (
            "prompts/worker.toml",
            "name = \"worker\"\nmodel = \"scripted-turns:worker.json\"\ntools = [\"done\", \"run_command\"]\n".into(),
        ),
        ("prompts/checker.toml", "name = \"checker\"\nmodel = \"scripted-turns:checker.json\"\n".into()),
        (
            "lead.json",
            json!({"responses": [
                {"toolCalls": [call("c1", "subagent_create", json!({"name": "rev", "task": "review chapter 2"}))]},
                {"text": "waiting for the reviewer"},
            ]})
            .to_string(),
        ),
        (
            "worker.json",
            json!({"responses": [
                {"toolCalls": [call("w1", "run_command", json!({"command": "echo \"task db=$DOC_DB\""}))]},
                {"toolCalls": [call("w2", "done", json!({"summary": "chapter 2 reviewed"}))]},
            ]})
            .to_string(),
        ),
        ("checker.json", json!({"responses": [{"text": "fine"}]}).to_string()),
    ];
    for (path, text) in files {
        let path = p.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// SA-048 for `subagent_create`: a resumable instance whose required scoped variable is
/// missing is not created; the model reads `subagent_env_required` with the request, and
/// `POST /threads/{parent}/variables/{request}` creates the instance (in the parent's
/// registry, under its name) and boots it with the original creation arguments; its result
/// comes to the parent as a silent message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumable_subagent_missing_a_scoped_variable_is_created_when_it_is_posted() {
    let dir = tempfile::tempdir().unwrap();
    resumable_project(&dir.path().join("p"));
    let s = Served::serve(dir).await;
    let thread = s.thread().await;
    let run =
        json!({"assistant_id": "a", "input": {"messages": [{"role": "user", "content": "go"}]}});
    let (status, done) = s.post(&format!("/threads/{thread}/runs/wait"), &run).await;
    assert_eq!(status, 200, "{done}");
    let store = s.store();
    let events = store
        .events(&weft_store::EventQuery {
            thread_id: Some(thread.clone()),
            types: vec!["tool_call_end".into()],
            ..weft_store::EventQuery::default()
        })
        .await
        .unwrap();
    let result = events
        .iter()
        .find(|e| e.payload["tool"] == "subagent_create")
        .map(|e| e.payload["result"].to_string())
        .expect("the creation ended");
    assert!(result.contains("subagent_env_required"), "{result}");
    assert!(result.contains("DOC_DB"), "{result}");
    let request = result
        .split("vr-")
        .nth(1)
        .map(|rest| format!("vr-{}", &rest[..16]))
        .expect("a request id in the error");
    // Nothing was created yet.
    let (_, state) = s.get(&format!("/threads/{thread}/thread-state")).await;
    assert_eq!(state["children"], json!([]), "{state}");
    let path = format!("/threads/{thread}/variables/{request}");
    let (status, pending) = s.get(&path).await;
    assert_eq!(status, 200, "{pending}");
    assert_eq!(pending["missing"], json!(["DOC_DB"]));

    let (status, booted) = s.post(&path, &json!({"values": {"DOC_DB": SECRET}})).await;
    assert_eq!(status, 202, "{booted}");
    let child = booted["thread_id"].as_str().unwrap().to_owned();
    let run_id = booted["run_id"].as_str().unwrap().to_owned();
    let (status, joined) = s.get(&format!("/threads/{child}/runs/{run_id}/join")).await;
    assert_eq!(status, 200, "{joined}");
    until(|| {
        let store = store.clone();
        let thread = thread.clone();
        async move { !store.queued(&thread).await.unwrap().is_empty() }
    })
    .await;
    let queued = store.queued(&thread).await.unwrap();
    assert_eq!(
        queued[0].text,
        format!(
            "Subagent (reference: {child}) has returned the following result:\n\nchapter 2 reviewed"
        )
    );
    assert!(queued[0].silent, "the child's result is a silent message");
    // The instance is in the parent's registry under the name it was created with, booted
    // with the original first message.
    let (_, state) = s.get(&format!("/threads/{thread}/thread-state")).await;
    let children = state["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{state}");
    assert_eq!(children[0]["name"], "rev");
    assert_eq!(children[0]["reference"], child.as_str());
    assert_eq!(children[0]["resumable"], true);
    assert_eq!(children[0]["status"], "completed");
    let first = store.latest_checkpoint(&child).await.unwrap().unwrap();
    assert_eq!(
        first.checkpoint.state.messages().next().unwrap().text(),
        "review chapter 2"
    );
}
