//! Delegation (runtime spec §5.4) through `weft run`: a `[runtime.delegation]` table offers
//! `delegate_to_agent`, whose call runs a child of a role as a child run (own thread,
//! lineage, usage, events under `a/ROLE`), with a registry constrained by role, the depth
//! and count limits, its artifacts registered with the parent, and notices over the run
//! tree's message bus. Driven by scripted models (the children's: `child.json`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{output_text, weft};

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"toolCalls": [{"id": id, "name": name, "arguments": arguments}]})
}

fn complete(id: &str, summary: &str) -> Value {
    call(id, "complete_task", json!({ "summary": summary }))
}

/// A project whose agent `a` has `tools` and answers with `parent`, its delegated
/// children with `child`; `runtime` is appended to `weft.toml` after `[runtime]` settings
/// that make the children's model `child.json` (batch mode: nothing asks).
fn project(dir: &Path, runtime: &str, tools: &[&str], parent: Value, child: Value) {
    common::scripted_project(
        dir,
        &format!(
            "[runtime.policy]\nmode = \"batch\"\n[runtime.delegation]\nmodel = \"scripted-turns:child.json\"\n{runtime}"
        ),
        tools,
        &json!({ "responses": parent }),
    );
    std::fs::write(
        dir.join("child.json"),
        json!({ "responses": child }).to_string(),
    )
    .unwrap();
}

/// `response` reporting 7 input and 1 output tokens.
fn with_usage(mut response: Value) -> Value {
    response["usage"] = json!({"inputTokens": 7, "outputTokens": 1});
    response
}

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `(tool, agentPath, isError, result)` of every ended call of `tool`.
fn ends<'a>(events: &'a [Value], tool: &str) -> Vec<(&'a str, bool, &'a Value)> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_call_end" && e["payload"]["tool"] == tool)
        .map(|e| {
            (
                e["agentPath"].as_str().unwrap_or_default(),
                e["payload"]["isError"].as_bool().unwrap_or_default(),
                &e["payload"]["result"],
            )
        })
        .collect()
}

/// What the model read of every call of `tool` that ended in an error (refused or failed),
/// with the agent path of the caller.
fn errors(events: &[Value], tool: &str) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| {
            e["type"] == "tool_call_end"
                && e["payload"]["tool"] == tool
                && e["payload"]["isError"] == true
        })
        .map(|e| {
            (
                e["agentPath"].as_str().unwrap_or_default().to_owned(),
                e["payload"]["result"].to_string(),
            )
        })
        .collect()
}

/// `(role, depth, status, parent is the root)` of the run's lineage below the root.
fn lineage(dir: &Path) -> Vec<(String, i64, String, bool)> {
    let root = root_agent(dir);
    let db = rusqlite::Connection::open(dir.join(".weft/weft.db")).unwrap();
    let mut stmt = db
        .prepare(
            "SELECT role, depth, status, parent_agent_id FROM agent_lineage \
             WHERE parent_agent_id IS NOT NULL ORDER BY depth, created_at",
        )
        .unwrap();
    stmt.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get::<_, String>(3)? == root,
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The lineage id of the run's root agent.
fn root_agent(dir: &Path) -> String {
    let db = rusqlite::Connection::open(dir.join(".weft/weft.db")).unwrap();
    db.query_row(
        "SELECT id FROM agent_lineage WHERE parent_agent_id IS NULL",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

fn run_end(events: &[Value]) -> &Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "run_end")
        .map(|e| &e["payload"])
        .expect("run_end")
}

#[test]
fn delegation_runs_a_child_with_its_own_thread_and_returns_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "",
        &["read_file", "write_file"],
        json!([
            call(
                "d1",
                "delegate_to_agent",
                json!({"role": "coder", "task": "write the note", "constraints": ["one line"], "expectedOutput": "the file"})
            ),
            complete("c1", "delegated the note"),
        ]),
        json!([
            with_usage(call(
                "w1",
                "write_file",
                json!({"path": "note.txt", "content": "one\n"})
            )),
            with_usage(call(
                "c2",
                "complete_task",
                json!({"summary": "wrote note.txt", "artifacts": ["note.txt"]})
            )),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    assert_eq!(run_end(&events)["output"], "delegated the note");
    // The child's usage rolls up into the run's (the parent's own calls report none).
    assert_eq!(
        (
            run_end(&events)["inputTokens"].as_u64(),
            run_end(&events)["outputTokens"].as_u64()
        ),
        (Some(14), Some(2))
    );
    assert_eq!(
        std::fs::read_to_string(p.join("note.txt")).unwrap(),
        "one\n"
    );
    // The child's own calls are logged under `a/coder`.
    assert_eq!(ends(&events, "write_file")[0].0, "a/coder");
    // The parent's call returned the child's summary and its artifact (copied to the parent).
    let delegated = ends(&events, "delegate_to_agent");
    assert_eq!(delegated.len(), 1, "{events:?}");
    let (path, is_error, result) = delegated[0];
    assert_eq!((path, is_error), ("a", false), "{result}");
    let result: Value = match result {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| json!(s)),
        other => other.clone(),
    };
    assert_eq!(result["role"], "coder");
    assert_eq!(result["summary"], "wrote note.txt");
    let reference = result["reference"].as_str().unwrap().to_owned();
    let copy = format!("attachments/from-{reference}/note.txt");
    assert_eq!(result["artifacts"], json!([copy]));
    assert_eq!(std::fs::read_to_string(p.join(&copy)).unwrap(), "one\n");
    // One child in the lineage, at depth 1, completed, on its own thread linked to the
    // root's.
    assert_eq!(lineage(p), [("coder".into(), 1, "completed".into(), true)]);
    let db = rusqlite::Connection::open(p.join(".weft/weft.db")).unwrap();
    let child_usage: (i64, i64) = db
        .query_row(
            "SELECT usage_input_tokens, usage_output_tokens FROM agent_lineage WHERE id = ?1",
            [&reference],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        child_usage,
        (14, 2),
        "the child's own usage in its lineage node"
    );
    let parent_thread: Option<String> = db
        .query_row(
            "SELECT parent_thread_id FROM threads WHERE id = ?1",
            [&reference],
            |r| r.get(0),
        )
        .unwrap();
    assert!(parent_thread.is_some());
    // The child's artifact is registered for the child and, as the copy, for the parent.
    let mut stmt = db
        .prepare("SELECT agent_id, path FROM artifacts ORDER BY created_at")
        .unwrap();
    let artifacts: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        artifacts
            .iter()
            .any(|(agent, path)| agent == &reference && path.ends_with("note.txt")),
        "{artifacts:?}"
    );
    assert!(
        artifacts
            .iter()
            .any(|(agent, path)| agent == &root_agent(p) && path.ends_with(&copy)),
        "{artifacts:?}"
    );
    // The notices the parent received over the run tree's bus: the delegation, then the
    // child's start and finish on its topic.
    let notices: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] == "delegation")
        .map(|e| {
            (
                e["payload"]["status"].as_str().unwrap().to_owned(),
                e["payload"]["topic"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let topic = format!("child.{reference}");
    assert_eq!(
        notices,
        [
            ("delegated".into(), "delegation".into()),
            ("started".into(), topic.clone()),
            ("finished".into(), topic),
        ]
    );
}

#[test]
fn bad_delegation_input_is_a_tool_error_the_model_reads() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "",
        &["read_file"],
        json!([
            call(
                "d1",
                "delegate_to_agent",
                json!({"role": "poet", "task": "a sonnet"})
            ),
            call("d2", "delegate_to_agent", json!({"role": "coder"})),
            call(
                "d3",
                "delegate_to_agent",
                json!({"role": "coder", "task": "x", "model": "big"})
            ),
            complete("c1", "gave up delegating"),
        ]),
        json!([complete("c2", "never")]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    let errors = errors(&events, "delegate_to_agent");
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].1.contains("poet"), "{errors:?}");
    assert!(errors[1].1.contains("task"), "{errors:?}");
    assert!(errors[2].1.contains("model"), "{errors:?}");
    assert!(lineage(p).is_empty(), "no child started");
    assert_eq!(run_end(&events)["output"], "gave up delegating");
}

#[test]
fn a_child_has_only_its_roles_tools_that_its_parent_has_unless_granted() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // A reviewer never writes, though its parent may.
    project(
        p,
        "",
        &["read_file", "write_file"],
        json!([
            call(
                "d1",
                "delegate_to_agent",
                json!({"role": "reviewer", "task": "review"})
            ),
            complete("c1", "reviewed"),
        ]),
        json!([
            call(
                "w1",
                "write_file",
                json!({"path": "x.txt", "content": "no\n"})
            ),
            complete("c2", "could not write"),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(!p.join("x.txt").exists());
    let events = events(&out);
    let refused = errors(&events, "write_file");
    assert_eq!(refused.len(), 1, "{events:?}");
    assert_eq!(refused[0].0, "a/reviewer");

    // A coder whose parent cannot write cannot either (no elevated permission inherited)…
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let parent = json!([
        call(
            "d1",
            "delegate_to_agent",
            json!({"role": "coder", "task": "write"})
        ),
        complete("c1", "done"),
    ]);
    let child = json!([
        call(
            "w1",
            "write_file",
            json!({"path": "x.txt", "content": "yes\n"})
        ),
        complete("c2", "tried"),
    ]);
    project(p, "", &["read_file"], parent.clone(), child.clone());
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(!p.join("x.txt").exists());
    assert_eq!(errors(&events_of(&out), "write_file")[0].0, "a/coder");

    // … unless the project grants it explicitly.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    project(
        p,
        "[runtime.delegation.grants]\ncoder = [\"write_file\"]\n",
        &["read_file"],
        parent,
        child,
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(std::fs::read_to_string(p.join("x.txt")).unwrap(), "yes\n");
}

fn events_of(out: &Output) -> Vec<Value> {
    events(out)
}

#[test]
fn delegation_stops_at_max_depth_3() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // Every child delegates again: the children at depths 1, 2 and 3 run; the one at depth
    // 3 is refused a child at depth 4 and completes itself.
    project(
        p,
        "",
        &["read_file"],
        json!([
            call(
                "d1",
                "delegate_to_agent",
                json!({"role": "analyst", "task": "dig"})
            ),
            complete("c1", "top"),
        ]),
        json!([
            call(
                "d2",
                "delegate_to_agent",
                json!({"role": "analyst", "task": "dig deeper"})
            ),
            complete("c2", "level done"),
        ]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let depths: Vec<i64> = lineage(p).into_iter().map(|(_, d, _, _)| d).collect();
    assert_eq!(depths, [1, 2, 3]);
    let events = events(&out);
    let errors = errors(&events, "delegate_to_agent");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "a/analyst/analyst/analyst");
    assert!(errors[0].1.contains("maxDepth = 3"), "{errors:?}");
    assert_eq!(run_end(&events)["output"], "top");
}

#[test]
fn an_agent_delegates_at_most_max_children_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let delegate = |id: &str| {
        call(
            id,
            "delegate_to_agent",
            json!({"role": "researcher", "task": id}),
        )
    };
    project(
        p,
        "maxChildren = 2\n",
        &["read_file"],
        json!([
            delegate("d1"),
            delegate("d2"),
            delegate("d3"),
            complete("c1", "enough"),
        ]),
        json!([complete("c2", "found it")]),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(lineage(p).len(), 2);
    let events = events(&out);
    let errors = errors(&events, "delegate_to_agent");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].1.contains("maxChildren = 2"), "{errors:?}");
    assert_eq!(ends(&events, "delegate_to_agent").len(), 3);
}

#[test]
fn without_a_delegation_table_the_tool_is_not_offered() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    common::scripted_project(
        p,
        "[runtime.policy]\nmode = \"batch\"\n",
        &["read_file"],
        &json!({"responses": [
            call("d1", "delegate_to_agent", json!({"role": "coder", "task": "x"})),
            complete("c1", "alone"),
        ]}),
    );
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let events = events(&out);
    let refused: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_refused" && e["payload"]["tool"] == "delegate_to_agent")
        .collect();
    assert_eq!(refused.len(), 1, "an unknown tool: {events:?}");
    assert!(lineage(p).is_empty());
}

#[test]
fn a_delegated_childs_approval_surfaces_on_the_root_run_and_runs_once_when_approved() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    // Interactive mode (the default): the coder's write_file asks a person first.
    common::scripted_project(
        p,
        "[runtime.delegation]\nmodel = \"scripted-turns:child.json\"\n",
        &["read_file", "write_file"],
        &json!({"responses": [
            call("d1", "delegate_to_agent", json!({"role": "coder", "task": "write x"})),
            complete("c1", "the coder wrote x"),
        ]}),
    );
    std::fs::write(
        p.join("child.json"),
        json!({"responses": [
            call("w1", "write_file", json!({"path": "x.txt", "content": "x"})),
            complete("c2", "wrote x"),
        ]})
        .to_string(),
    )
    .unwrap();
    // No terminal: nobody can approve now, so the whole run suspends (exit 4), nothing written.
    let out = weft(p, &["run", "--json", "go"]);
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    assert!(!p.join("x.txt").exists());
    let events = events(&out);
    let pending = events
        .iter()
        .find(|e| e["type"] == "decision_pending")
        .expect("a pending decision");
    assert_eq!(pending["agentPath"], "a/coder");
    let statuses: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "delegation")
        .filter_map(|e| e["payload"]["status"].as_str())
        .collect();
    assert_eq!(statuses, ["delegated", "started", "suspended"]);
    // Approved on the root run, the resume goes on with the child: the write runs once and
    // the parent completes with the child's result.
    let run = events[0]["runId"].as_str().unwrap().to_owned();
    let decision = pending["payload"]["decision"].as_str().unwrap().to_owned();
    let approved = weft(p, &["approve", &run, &decision]);
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        output_text(&approved)
    );
    let resumed = weft(p, &["resume", &run, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", output_text(&resumed));
    assert_eq!(std::fs::read_to_string(p.join("x.txt")).unwrap(), "x");
    let resumed = events_of(&resumed);
    assert_eq!(run_end(&resumed)["output"], "the coder wrote x");
    let writes: Vec<_> = ends(&resumed, "write_file");
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(lineage(p), [("coder".into(), 1, "completed".into(), true)]);
}
