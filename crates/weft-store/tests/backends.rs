//! The shared backend suite: every case runs against SQLite and PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;

use serde_json::{Value, json};
use weft_agent::AgentState;
use weft_agent::checkpoint::{Checkpoint, CheckpointMetadata, CheckpointStore};
use weft_provider::{Message, TokenUsage, ToolCall, ToolExecution};
use weft_store::{
    AgentNode, AgentStatus, ArtifactType, Artifacts, Durability, EventLog, EventQuery, Lineage,
    NewArtifact, NewEvent, Retention, RunRecord, RunStatus, Runs, SCHEMA_VERSION, Store,
    ThreadRecord, Threads, ToolCallRecord, ToolCallStatus, ToolLedger, Usage, new_id, now_string,
};
use weft_store::{Lease, RecordedResponse, Responses as _, StoreError};
use weft_store::{TokenScope, Tokens as _};

fn checkpoint_of(thread: &str, state: &AgentState, usage: u64) -> Checkpoint {
    Checkpoint {
        metadata: CheckpointMetadata {
            session_id: thread.into(),
            checkpoint_id: new_id(),
            timestamp: chrono::Utc::now(),
            step: state.step(),
            agent_id: "agent-1".into(),
        },
        state: state.clone(),
        pending_tool_calls: vec![ToolCall::new("c9", "write", json!({"path": "a"}))],
        completed_tool_calls: vec![ToolExecution {
            tool_name: "read".into(),
            tool_call_id: "c8".into(),
            arguments: json!({}),
            result: json!("ok"),
            is_error: false,
            duration: 3,
            approved: None,
        }],
        usage: Some(TokenUsage {
            input_tokens: usage,
            output_tokens: usage / 2,
            total_tokens: usage + usage / 2,
            ..TokenUsage::default()
        }),
    }
}

fn event(run: &str, kind: &str, turn: u64, call: Option<&str>, payload: Value) -> NewEvent {
    NewEvent {
        event_type: kind.into(),
        run_id: run.into(),
        thread_id: format!("thread-of-{run}"),
        agent_id: "agent-1".into(),
        turn,
        tool_call_id: call.map(str::to_owned),
        payload,
        seq: None,
        timestamp: None,
    }
}

async fn checkpoint_roundtrip(store: &Store) {
    let thread = "t-roundtrip";
    let state = AgentState::initial()
        .with_message(Message::user("hello"))
        .with_message(Message::assistant("hi"))
        .with_metadata("sopPhase", json!("implement"))
        .with_metadata("ticket", json!(42))
        .with_reasoning("think first")
        .with_step(1);
    let cp = checkpoint_of(thread, &state, 100);
    CheckpointStore::save(store, thread, cp.clone())
        .await
        .unwrap();
    let loaded = CheckpointStore::load(store, thread).await.unwrap().unwrap();
    assert_eq!(loaded.state, cp.state);
    assert_eq!(loaded.pending_tool_calls, cp.pending_tool_calls);
    assert_eq!(loaded.completed_tool_calls, cp.completed_tool_calls);
    assert_eq!(
        loaded
            .usage
            .as_ref()
            .map(|u| (u.input_tokens, u.output_tokens)),
        Some((100, 50))
    );
    assert_eq!(loaded.metadata, cp.metadata);
    assert_eq!(loaded.state, state);
    let stored = store.latest_checkpoint(thread).await.unwrap().unwrap();
    assert_eq!(stored.sop_phase, Some(json!("implement")));
    assert_eq!(stored.context_variables().get("ticket"), Some(&json!(42)));
    let meta = store.load_metadata(thread).await.unwrap().unwrap();
    assert_eq!(meta.checkpoint_id, cp.metadata.checkpoint_id);
    assert!(store.list().await.unwrap().contains(&thread.to_owned()));
    assert!(
        CheckpointStore::load(store, "unknown")
            .await
            .unwrap()
            .is_none()
    );
    store.delete(thread).await.unwrap();
    assert!(
        CheckpointStore::load(store, thread)
            .await
            .unwrap()
            .is_none()
    );
    store.delete("unknown").await.unwrap();
}

/// Regression (found by `checkpoint_props`): a checkpoint's usage came back as its input and
/// output tokens only (cache tokens lost, no usage read as zero usage), and a step beyond
/// `i64::MAX` came back as `i64::MAX`.
async fn checkpoint_usage_and_step_load_back_exactly(store: &Store) {
    let thread = "t-usage";
    let state = AgentState::initial()
        .with_message(Message::user("hi"))
        .with_step(u64::MAX - 1);
    let mut cp = checkpoint_of(thread, &state, 100);
    cp.usage = Some(TokenUsage {
        input_tokens: 100,
        output_tokens: 50,
        total_tokens: 150,
        cache_read_tokens: 70,
        cache_write_tokens: 30,
        ..TokenUsage::default()
    });
    store.save_checkpoint(thread, &cp).await.unwrap();
    let loaded = store.latest_checkpoint(thread).await.unwrap().unwrap();
    assert_eq!(loaded.checkpoint.usage, cp.usage);
    assert_eq!(loaded.checkpoint.state.step(), u64::MAX - 1);
    assert_eq!(loaded.checkpoint.metadata.step, u64::MAX - 1);
    assert_eq!(loaded.checkpoint, cp);
    let mut none = checkpoint_of(thread, &state.with_step(2), 0);
    none.usage = None;
    store.save_checkpoint(thread, &none).await.unwrap();
    let loaded = store.latest_checkpoint(thread).await.unwrap().unwrap();
    assert_eq!(loaded.checkpoint.usage, None);
    assert_eq!(loaded.checkpoint.state.step(), 2);
}

async fn checkpoints_store_history_once(store: &Store) {
    let thread = "t-incremental";
    let mut state = AgentState::initial().with_message(Message::user("start"));
    let mut saved = Vec::new();
    let mut bytes = Vec::new();
    for step in 1..=40u64 {
        state = state
            .with_step(step)
            .with_message(Message::assistant(format!(
                "answer {step} {}",
                "x".repeat(200)
            )))
            .with_message(Message::user(format!("more {step}")));
        let stats = store
            .save_checkpoint(thread, &checkpoint_of(thread, &state, step))
            .await
            .unwrap();
        assert_eq!(
            stats.new_items,
            if step == 1 { 3 } else { 2 },
            "step {step}"
        );
        bytes.push(stats.bytes);
        saved.push(state.clone());
    }
    // Flat cost: step 40 writes about what step 2 wrote.
    let (early, late) = (bytes[1], bytes[39]);
    assert!(
        late < early + 64,
        "bytes per checkpoint grew: {early} -> {late}"
    );
    // Every checkpoint still loads its full state.
    let list = store.list_checkpoints(thread).await.unwrap();
    assert_eq!(list.len(), 40);
    assert_eq!(
        list.iter().map(|c| c.step).collect::<Vec<_>>(),
        (1..=40).collect::<Vec<_>>()
    );
    for (i, summary) in list.iter().enumerate() {
        let cp = store
            .checkpoint_at(thread, summary.step)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(cp.checkpoint.state, saved[i]);
    }
    // A replaced history (context compression) keeps working and keeps old rows intact.
    let compressed = state
        .with_context([Message::user("summary of everything")])
        .with_step(41);
    store
        .save_checkpoint(thread, &checkpoint_of(thread, &compressed, 41))
        .await
        .unwrap();
    let latest = store.latest_checkpoint(thread).await.unwrap().unwrap();
    assert_eq!(latest.checkpoint.state, compressed);
    let old = store.checkpoint_at(thread, 20).await.unwrap().unwrap();
    assert_eq!(old.checkpoint.state, saved[19]);
}

/// Saves that branch from an older state, replace the history, or continue a state loaded
/// from the database each write exactly the items the thread lacks, and load back exactly.
async fn branches_and_replacements_load_exactly(store: &Store) {
    let thread = "t-branches";
    let save = |state: AgentState, step: u64| async move {
        store
            .save_checkpoint(thread, &checkpoint_of(thread, &state, step))
            .await
            .unwrap()
            .new_items
    };
    let s0 = AgentState::initial()
        .with_message(Message::user("start"))
        .with_reasoning("plan it")
        .with_step(1);
    assert_eq!(save(s0.clone(), 1).await, 2);
    let a = s0.with_message(Message::assistant("branch a")).with_step(2);
    assert_eq!(save(a.clone(), 2).await, 1);
    // A sibling branch of `a`: only its own message is new.
    let b = s0.with_message(Message::assistant("branch b")).with_step(2);
    assert_eq!(save(b.clone(), 3).await, 1);
    let b2 = b
        .with_reasoning("then this")
        .with_message(Message::user("go on"))
        .with_step(3);
    assert_eq!(save(b2.clone(), 4).await, 2);
    let replaced = b2
        .with_context([Message::user("summary"), Message::user("go on")])
        .with_step(4);
    assert_eq!(save(replaced.clone(), 5).await, 2);
    let after = replaced
        .with_message(Message::assistant("done"))
        .with_step(5);
    assert_eq!(save(after.clone(), 6).await, 1);
    for (step, expected) in [
        (1, &s0),
        (2, &a),
        (3, &b),
        (4, &b2),
        (5, &replaced),
        (6, &after),
    ] {
        let cp = store.checkpoint_at(thread, step).await.unwrap().unwrap();
        assert_eq!(&cp.checkpoint.state, expected, "checkpoint {step}");
    }
    // A state read back from the database (its items are new allocations) continues: only
    // what it added is written.
    let loaded = store.latest_checkpoint(thread).await.unwrap().unwrap();
    let next = loaded
        .checkpoint
        .state
        .with_message(Message::user("next"))
        .with_step(6);
    assert_eq!(save(next.clone(), 7).await, 1);
    let cp = store.latest_checkpoint(thread).await.unwrap().unwrap();
    assert_eq!(cp.checkpoint.state, next);

    // Sub-agent traces are history items too: stored once, and a sibling with the same
    // messages but another trace is not mistaken for an extension.
    let trace = |name: &str| weft_agent::SubagentExecutionTrace {
        subagent_id: format!("sub-{name}"),
        subagent_type: "explorer".into(),
        parent_tool_call_id: format!("call-{name}"),
        prompt: format!("look for {name}"),
        start_time: 1,
        end_time: 2,
        success: true,
        result: Some(name.to_owned()),
        error: None,
        tool_executions: None,
        usage: None,
    };
    let x = next.with_subagent_trace(trace("x")).with_step(7);
    assert_eq!(save(x.clone(), 8).await, 1);
    let y = next.with_subagent_trace(trace("y")).with_step(7);
    assert_eq!(save(y.clone(), 9).await, 1);
    let y2 = y
        .with_subagent_trace(trace("z"))
        .with_message(Message::user("after z"))
        .with_step(8);
    assert_eq!(save(y2.clone(), 10).await, 2);
    for (step, expected) in [(8, &x), (9, &y), (10, &y2)] {
        let cp = store.checkpoint_at(thread, step).await.unwrap().unwrap();
        assert_eq!(&cp.checkpoint.state, expected, "checkpoint {step}");
    }
}

async fn tool_checkpoints_and_retention(store: &Store) {
    let thread = "t-tools";
    let state = AgentState::initial()
        .with_message(Message::user("go"))
        .with_step(1);
    store
        .save_checkpoint(thread, &checkpoint_of(thread, &state, 10))
        .await
        .unwrap();
    let pending = vec![ToolCall::new("c2", "write", json!({"n": 2}))];
    let id = store
        .save_tool_checkpoint(thread, &pending, &[])
        .await
        .unwrap();
    assert!(id.is_some());
    let latest = store.latest_checkpoint(thread).await.unwrap().unwrap();
    assert_eq!(latest.summary.kind, "tool");
    assert_eq!(latest.checkpoint.pending_tool_calls, pending);
    assert_eq!(latest.checkpoint.state, state);
    assert!(
        store
            .save_tool_checkpoint("no-such-thread", &pending, &[])
            .await
            .unwrap()
            .is_none()
    );

    let mut s = state;
    for step in 2..=6 {
        s = s
            .with_step(step)
            .with_message(Message::assistant(format!("a{step}")));
        store
            .save_checkpoint(thread, &checkpoint_of(thread, &s, 10))
            .await
            .unwrap();
        store
            .save_tool_checkpoint(thread, &pending, &[])
            .await
            .unwrap();
    }
    let before = store.list_checkpoints(thread).await.unwrap().len();
    assert_eq!(before, 12);
    let dropped = store
        .prune_checkpoints(
            thread,
            &Retention {
                keep_last: None,
                drop_superseded_tool_checkpoints: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(dropped, 5);
    let dropped = store
        .prune_checkpoints(
            thread,
            &Retention {
                keep_last: Some(2),
                drop_superseded_tool_checkpoints: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(dropped, 5);
    let latest = store.latest_checkpoint(thread).await.unwrap().unwrap();
    assert_eq!(latest.checkpoint.state, s);
}

async fn async_durability_keeps_order(store: &Store) {
    let fast = store.with_durability(Durability::Async);
    let thread = "t-async";
    let mut state = AgentState::initial();
    for step in 1..=200u64 {
        state = state
            .with_step(step)
            .with_message(Message::user(format!("m{step}")));
        fast.save_checkpoint(thread, &checkpoint_of(thread, &state, step))
            .await
            .unwrap();
    }
    fast.flush().await.unwrap();
    let latest = store.latest_checkpoint(thread).await.unwrap().unwrap();
    assert_eq!(latest.summary.step, 200);
    assert_eq!(latest.checkpoint.state, state);
}

async fn events_are_ordered_queryable_and_redacted(store: &Store) {
    let secret = "sk-proj-ABCDEF1234567890abcdef";
    let events = vec![
        event("r1", "turn_start", 1, None, json!({})),
        event(
            "r1",
            "tool_call_start",
            1,
            Some("c1"),
            json!({"arguments": {"api_key": secret, "q": "x"}}),
        ),
        event(
            "r1",
            "tool_call_end",
            1,
            Some("c1"),
            json!({"result": format!("used {secret}")}),
        ),
        event("r1", "turn_end", 1, None, json!({})),
        event("r2", "turn_start", 1, None, json!({})),
        event("r1", "completion", 2, None, json!({"summary": "done"})),
    ];
    store.append_events(events).await.unwrap();
    store
        .append_event(event(
            "r1",
            "error",
            2,
            None,
            json!({"message": "Bearer abcdef123456"}),
        ))
        .await
        .unwrap();
    let all = store
        .events(&EventQuery {
            run_id: Some("r1".into()),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    let kinds: Vec<&str> = all.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "turn_start",
            "tool_call_start",
            "tool_call_end",
            "turn_end",
            "completion",
            "error"
        ]
    );
    assert!(
        all.windows(2)
            .all(|w| w[0].seq < w[1].seq && w[0].timestamp <= w[1].timestamp)
    );
    let text = serde_json::to_string(&all).unwrap();
    assert!(
        !text.contains(secret),
        "secret leaked into the event log: {text}"
    );
    assert!(!text.contains("abcdef123456"));
    assert!(text.contains("[REDACTED]"));
    assert_eq!(all[1].tool_call_id.as_deref(), Some("c1"));
    let tools = store
        .events(&EventQuery {
            types: vec!["tool_call_start".into(), "tool_call_end".into()],
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(tools.len(), 2);
    let by_thread = store
        .events(&EventQuery {
            thread_id: Some("thread-of-r2".into()),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(by_thread.len(), 1);
    let after = store
        .events(&EventQuery {
            run_id: Some("r1".into()),
            after_seq: Some(all[3].seq),
            limit: Some(1),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].event_type, "completion");
    let later = store
        .events(&EventQuery {
            since: Some(all[5].timestamp.clone()),
            run_id: Some("r1".into()),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert!(later.iter().any(|e| e.event_type == "error"));
    let none = store
        .events(&EventQuery {
            until: Some("2000-01-01T00:00:00Z".into()),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert!(none.is_empty());
}

async fn artifacts_carry_metadata_and_checkpoint(store: &Store) {
    let thread = "t-artifacts";
    let state = AgentState::initial()
        .with_message(Message::user("x"))
        .with_step(1);
    let cp = checkpoint_of(thread, &state, 1);
    store.save_checkpoint(thread, &cp).await.unwrap();
    let inline = store
        .put_artifact(NewArtifact {
            run_id: "run-a".into(),
            agent_id: "agent-1".into(),
            checkpoint_id: Some(cp.metadata.checkpoint_id.clone()),
            artifact_type: ArtifactType::Report,
            path: None,
            content: Some("abc".into()),
            media_type: Some("text/markdown".into()),
        })
        .await
        .unwrap();
    assert_eq!(inline.metadata.size, 3);
    assert_eq!(
        inline.metadata.hash,
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.txt");
    std::fs::write(&file, "hello").unwrap();
    let on_disk = store
        .put_artifact(NewArtifact {
            run_id: "run-a".into(),
            agent_id: "agent-2".into(),
            checkpoint_id: None,
            artifact_type: ArtifactType::File,
            path: Some(file.display().to_string()),
            content: None,
            media_type: None,
        })
        .await
        .unwrap();
    assert_eq!(on_disk.metadata.size, 5);
    let listed = store.artifacts("run-a").await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&inline) && listed.contains(&on_disk));
    assert!(
        store
            .put_artifact(NewArtifact {
                run_id: "run-a".into(),
                agent_id: "a".into(),
                checkpoint_id: None,
                artifact_type: ArtifactType::Plan,
                path: None,
                content: None,
                media_type: None,
            })
            .await
            .is_err()
    );
    // Deleting the thread's checkpoints keeps the artifact, unlinked.
    store.delete_checkpoints(thread).await.unwrap();
    let listed = store.artifacts("run-a").await.unwrap();
    assert!(listed.iter().all(|a| a.artifact.checkpoint_id.is_none()));
}

async fn lineage_rolls_usage_up(store: &Store) {
    let node = |id: &str, parent: Option<&str>, depth: u32, tokens: u64| AgentNode {
        id: id.into(),
        run_id: "run-l".into(),
        parent_agent_id: parent.map(str::to_owned),
        role: if depth == 0 {
            "architect".into()
        } else {
            "coder".into()
        },
        status: AgentStatus::Active,
        depth,
        created_at: now_string(),
        completed_at: None,
        usage: Usage {
            input_tokens: tokens,
            output_tokens: 1,
            cost: Some(0.5),
        },
    };
    store.put_agent(&node("root", None, 0, 10)).await.unwrap();
    store
        .put_agent(&node("child-a", Some("root"), 1, 20))
        .await
        .unwrap();
    store
        .put_agent(&node("child-b", Some("root"), 1, 30))
        .await
        .unwrap();
    store
        .put_agent(&node("grandchild", Some("child-a"), 2, 40))
        .await
        .unwrap();
    assert!(
        store
            .put_agent(&node("orphan", Some("missing"), 1, 1))
            .await
            .is_err()
    );
    let mut done = node("child-b", Some("root"), 1, 35);
    done.status = AgentStatus::Completed;
    done.completed_at = Some(now_string());
    store.put_agent(&done).await.unwrap();
    let tree = store.lineage("run-l").await.unwrap();
    assert_eq!(tree.len(), 4);
    assert_eq!(tree[0].id, "root");
    assert_eq!(
        tree.iter().find(|n| n.id == "child-b").map(|n| n.status),
        Some(AgentStatus::Completed)
    );
    let total = store.rolled_up_usage("root").await.unwrap();
    assert_eq!(total.input_tokens, 10 + 20 + 35 + 40);
    assert!((total.cost.unwrap_or_default() - 2.0).abs() < 1e-9);
    assert_eq!(
        store.rolled_up_usage("child-a").await.unwrap().input_tokens,
        60
    );
    assert!(store.rolled_up_usage("nobody").await.is_err());
}

async fn threads_and_runs(store: &Store) {
    let mut thread = ThreadRecord::new("th-1");
    thread.title = Some("first".into());
    thread.retention = Some(Retention {
        keep_last: Some(5),
        drop_superseded_tool_checkpoints: true,
    });
    store.put_thread(&thread).await.unwrap();
    assert_eq!(store.thread("th-1").await.unwrap(), Some(thread.clone()));
    thread.title = Some("renamed".into());
    store.put_thread(&thread).await.unwrap();
    assert_eq!(store.threads().await.unwrap().len(), 1);
    assert_eq!(
        store
            .thread("th-1")
            .await
            .unwrap()
            .and_then(|t| t.title)
            .as_deref(),
        Some("renamed")
    );

    let run = |id: &str, started: &str| RunRecord {
        run_id: id.into(),
        thread_id: "th-1".into(),
        agent_id: "agent-1".into(),
        status: RunStatus::Running,
        spec: json!({"model": "scripted:x"}),
        started_at: started.into(),
        updated_at: started.into(),
        ended_at: None,
        steps: 0,
        usage: Usage::default(),
        owner_pid: Some(1),
        owner_host: Some("h".into()),
        error: None,
        output: None,
        parent_run_id: None,
        lease: Lease::default(),
    };
    store
        .put_run(&run("run-old", "2026-01-01T00:00:00.000000Z"))
        .await
        .unwrap();
    let mut newer = run("run-new", "2026-02-01T00:00:00.000000Z");
    store.put_run(&newer).await.unwrap();
    newer.status = RunStatus::Completed;
    newer.steps = 7;
    newer.output = Some("done".into());
    store.put_run(&newer).await.unwrap();
    let runs = store.runs(None).await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        ["run-new", "run-old"]
    );
    assert_eq!(runs[0], newer);
    assert_eq!(store.runs(Some(1)).await.unwrap().len(), 1);
    // A known cost and an unknown one (never stored as 0) both read back as written.
    newer.usage = Usage {
        input_tokens: 12,
        output_tokens: 3,
        cost: Some(0.25),
    };
    store.put_run(&newer).await.unwrap();
    assert_eq!(
        store.run("run-new").await.unwrap().unwrap().usage,
        newer.usage
    );
    newer.usage.cost = None;
    store.put_run(&newer).await.unwrap();
    assert_eq!(
        store.run("run-new").await.unwrap().unwrap().usage.cost,
        None
    );
    assert!(store.run("nope").await.unwrap().is_none());
}

async fn delete_thread_removes_it_whole(store: &Store) {
    let run = |id: &str, thread: &str| RunRecord {
        run_id: id.into(),
        thread_id: thread.into(),
        agent_id: "agent-1".into(),
        status: RunStatus::Completed,
        spec: json!({}),
        started_at: now_string(),
        updated_at: now_string(),
        ended_at: None,
        steps: 1,
        usage: Usage::default(),
        owner_pid: None,
        owner_host: None,
        error: None,
        output: None,
        parent_run_id: None,
        lease: Lease::default(),
    };
    for thread in ["del-1", "keep-1"] {
        store.put_thread(&ThreadRecord::new(thread)).await.unwrap();
        let state = AgentState::initial().with_message(Message::user(thread));
        store
            .save_checkpoint(thread, &checkpoint_of(thread, &state, 1))
            .await
            .unwrap();
    }
    // Side B of the deleted thread, and two runs on it with their events.
    let side_b = AgentState::initial().with_message(Message::user("b"));
    store
        .save_checkpoint("del-1.sideB", &checkpoint_of("del-1.sideB", &side_b, 1))
        .await
        .unwrap();
    for (id, thread) in [("dr-1", "del-1"), ("dr-2", "del-1"), ("kr-1", "keep-1")] {
        store.put_run(&run(id, thread)).await.unwrap();
        store
            .append_event(event(id, "turn_start", 1, None, json!({})))
            .await
            .unwrap();
    }
    store.flush().await.unwrap();

    assert!(store.delete_thread("del-1").await.unwrap());
    assert!(store.thread("del-1").await.unwrap().is_none());
    assert!(store.list_checkpoints("del-1").await.unwrap().is_empty());
    assert!(
        store
            .list_checkpoints("del-1.sideB")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.run("dr-1").await.unwrap().is_none());
    assert!(store.run("dr-2").await.unwrap().is_none());
    let query = |run: &str| EventQuery {
        run_id: Some(run.to_owned()),
        ..EventQuery::default()
    };
    assert!(store.events(&query("dr-1")).await.unwrap().is_empty());
    // The other thread is untouched.
    assert!(store.thread("keep-1").await.unwrap().is_some());
    assert_eq!(store.list_checkpoints("keep-1").await.unwrap().len(), 1);
    assert!(store.run("kr-1").await.unwrap().is_some());
    assert_eq!(store.events(&query("kr-1")).await.unwrap().len(), 1);
    // A thread that is not there.
    assert!(!store.delete_thread("del-1").await.unwrap());
}

async fn tool_ledger(store: &Store) {
    let record = ToolCallRecord {
        run_id: "run-t".into(),
        position: "th@3#0".into(),
        args_hash: "h".into(),
        tool_call_id: "call-1".into(),
        thread_id: "th".into(),
        tool_name: "deploy".into(),
        arguments: json!({"token": "sk-live-0123456789abcdef", "n": 1}),
        status: ToolCallStatus::Pending,
        result: None,
        is_error: false,
        attempts: 1,
        side_effects: true,
        idempotent: false,
        turn: 3,
        started_at: now_string(),
        ended_at: None,
    };
    let store = store.with_durability(Durability::Sync);
    store.tool_call_started(&record).await.unwrap();
    store.tool_call_started(&record).await.unwrap();
    let calls = store.tool_calls("run-t").await.unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].status, ToolCallStatus::Pending);
    assert_eq!(calls[0].attempts, 2);
    assert!(!calls[0].arguments.to_string().contains("0123456789abcdef"));
    store
        .tool_call_finished("run-t", "th@3#0", &json!({"ok": true}), false)
        .await
        .unwrap();
    let calls = store.tool_calls("run-t").await.unwrap();
    assert_eq!(calls[0].status, ToolCallStatus::Completed);
    assert_eq!(calls[0].result, Some(json!({"ok": true})));
    assert!(calls[0].side_effects && !calls[0].idempotent && calls[0].turn == 3);
    // The same call id at another position (id-less models repeat `call_0`) is another call.
    let mut later = record.clone();
    later.position = "th@5#0".into();
    store.tool_call_started(&later).await.unwrap();
    let calls = store.tool_calls("run-t").await.unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].status, ToolCallStatus::Pending);
}

async fn leases_fence_stale_owners(store: &Store) {
    use weft_store::lease::{Claim, Fence, Leases as _};
    let mut record = RunRecord {
        run_id: "run-lease".into(),
        thread_id: "th-lease".into(),
        agent_id: "a".into(),
        status: RunStatus::Running,
        spec: json!({}),
        started_at: now_string(),
        updated_at: now_string(),
        ended_at: None,
        steps: 0,
        usage: Usage::default(),
        owner_pid: None,
        owner_host: None,
        error: None,
        output: None,
        parent_run_id: None,
        lease: Lease::default(),
    };
    store.put_run(&record).await.unwrap();
    let claim = |owner: &str, host: &str, dead: bool, now_ms: i64| Claim {
        owner: owner.into(),
        host: host.into(),
        local_owner_dead: dead,
        ttl_ms: 1_000,
        now_ms,
    };
    let a = store
        .claim("run-lease", &claim("h1/1/a", "h1", false, 0))
        .await
        .unwrap()
        .expect("a free run is claimed");
    assert_eq!(a.epoch, 1);
    // Another machine while the lease holds: refused, with the holder named.
    let refused = store
        .claim("run-lease", &claim("h2/2/b", "h2", true, 500))
        .await
        .unwrap()
        .expect_err("a live lease holds");
    assert_eq!(refused.owner.as_deref(), Some("h1/1/a"));
    // After it lapsed: taken over, epoch 2.
    let b = store
        .claim("run-lease", &claim("h2/2/b", "h2", false, 2_000))
        .await
        .unwrap()
        .expect("a lapsed lease is taken over");
    assert_eq!(b.epoch, 2);
    // The stale owner's next write is rejected and its fence fires — sync and async alike.
    let fence_a = Arc::new(Fence::new("run-lease", a.epoch));
    record.steps = 99;
    let stale = store
        .with_durability(Durability::Sync)
        .fenced(fence_a.clone());
    assert!(matches!(
        stale.put_run(&record).await,
        Err(StoreError::Fenced {
            held: 1,
            current: 2,
            ..
        })
    ));
    assert!(fence_a.lost().is_cancelled());
    let fence_a2 = Arc::new(Fence::new("run-lease", a.epoch));
    let queued = store
        .with_durability(Durability::Async)
        .fenced(fence_a2.clone());
    queued
        .append_event(NewEvent {
            event_type: "turn_start".into(),
            run_id: "run-lease".into(),
            thread_id: "th-lease".into(),
            agent_id: "a".into(),
            turn: 1,
            tool_call_id: None,
            payload: json!({"stale": true}),
            seq: None,
            timestamp: None,
        })
        .await
        .unwrap();
    queued.flush().await.unwrap();
    assert!(
        fence_a2.lost().is_cancelled(),
        "an async stale write fires the fence"
    );
    assert_ne!(store.run("run-lease").await.unwrap().unwrap().steps, 99);
    // The current owner writes.
    let fence_b = Arc::new(Fence::new("run-lease", b.epoch));
    let owner = store
        .with_durability(Durability::Sync)
        .fenced(fence_b.clone());
    owner.put_run(&record).await.unwrap();
    assert_eq!(store.run("run-lease").await.unwrap().unwrap().steps, 99);
    // An owner on this host known dead (its OS lock was free) is taken over at once.
    let c = store
        .claim("run-lease", &claim("h2/3/c", "h2", true, 2_100))
        .await
        .unwrap()
        .expect("a dead local owner's run is taken over");
    assert_eq!(c.epoch, 3);
    store
        .release(&Arc::new(Fence::new("run-lease", c.epoch)))
        .await
        .unwrap();
    assert_eq!(store.lease("run-lease").await.unwrap().unwrap().owner, None);
    // Responses: recorded once, the first record kept.
    let response = |n: i64| RecordedResponse {
        run_id: "run-lease".into(),
        position: "th-lease@1".into(),
        fingerprint: "f".into(),
        response: json!({"n": n}),
    };
    let store = store.with_durability(Durability::Sync);
    store.record_response(&response(1)).await.unwrap();
    store.record_response(&response(2)).await.unwrap();
    let got = store
        .recorded_response("run-lease", "th-lease@1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.response, json!({"n": 1}));
    assert_eq!(
        store.recorded_responses("run-lease").await.unwrap().len(),
        1
    );
}

/// API tokens: a secret verifies until its token is revoked; a read-only token says so; the
/// secret (and its hash) never appear in what is listed; two active tokens never share a name,
/// a revoked token's name can be reused.
async fn api_tokens(store: &Store) {
    assert!(store.tokens().await.unwrap().is_empty());
    let (laptop, secret) = store
        .create_token(" laptop ", TokenScope::Full)
        .await
        .unwrap();
    assert_eq!(laptop.name, "laptop");
    assert!(
        laptop.id.starts_with("t-") && laptop.id.len() == 10,
        "{}",
        laptop.id
    );
    assert!(laptop.is_active() && laptop.last_used_at.is_none());
    assert!(secret.expose().starts_with("weft_"));
    assert!(!format!("{secret:?}").contains(&secret.expose()[5..]));

    // Verify: the token's record, its use recorded.
    let checked = store.verify_token(secret.expose()).await.unwrap().unwrap();
    assert_eq!(checked.id, laptop.id);
    assert_eq!(checked.scope, TokenScope::Full);
    assert!(checked.scope.allows_write());
    let listed = store.tokens().await.unwrap();
    assert_eq!(listed.len(), 1);
    let first_use = listed[0].last_used_at.clone().expect("use recorded");
    // A second use within the minute does not write again.
    store.verify_token(secret.expose()).await.unwrap().unwrap();
    assert_eq!(
        store.tokens().await.unwrap()[0].last_used_at.as_deref(),
        Some(first_use.as_str())
    );

    // Wrong, malformed and empty secrets are refused.
    let mut wrong = secret.expose().to_owned();
    let last = if wrong.ends_with('A') { "B" } else { "A" };
    wrong.replace_range(wrong.len() - 1.., last);
    for refused in [
        wrong.as_str(),
        "",
        "weft_",
        "Bearer x",
        &secret.expose()[1..],
    ] {
        assert_eq!(
            store.verify_token(refused).await.unwrap(),
            None,
            "{refused:?}"
        );
    }

    // A read-only token round-trips its scope.
    let (dashboard, read_secret) = store
        .create_token("dashboard", TokenScope::Read)
        .await
        .unwrap();
    assert_eq!(dashboard.scope, TokenScope::Read);
    let checked = store
        .verify_token(read_secret.expose())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(checked.scope, TokenScope::Read);
    assert!(!checked.scope.allows_write());

    // Names: an active token's name is refused; bad names are refused.
    let error = store
        .create_token("laptop", TokenScope::Read)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, StoreError::AlreadyExists { kind: "token", id } if id == "laptop"),
        "{error}"
    );
    assert!(matches!(
        store.create_token("", TokenScope::Full).await,
        Err(StoreError::Invalid(_))
    ));

    // Nothing listed holds a secret or its hash.
    let listed = store.tokens().await.unwrap();
    assert_eq!(listed.len(), 2);
    let shown = format!("{listed:?} {}", serde_json::to_string(&listed).unwrap());
    for s in [&secret, &read_secret] {
        let hash: String = {
            use sha2::Digest as _;
            sha2::Sha256::digest(s.expose().as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        assert!(
            !shown.contains(s.expose()) && !shown.contains(&hash),
            "{shown}"
        );
    }
    let json = serde_json::to_value(&listed[1]).unwrap();
    assert_eq!(json["scope"], "read");
    assert!(json.get("createdAt").is_some() && json.get("revokedAt").is_some());

    // Revoke by name: refused from then on, listed as revoked.
    let revoked = store.revoke_token("laptop").await.unwrap();
    assert_eq!(revoked.id, laptop.id);
    let revoked_at = revoked.revoked_at.clone().expect("revoked");
    assert_eq!(store.verify_token(secret.expose()).await.unwrap(), None);
    assert!(
        store
            .verify_token(read_secret.expose())
            .await
            .unwrap()
            .is_some()
    );
    // Revoking again by id changes nothing; by name there is no active `laptop` any more.
    let again = store.revoke_token(&laptop.id).await.unwrap();
    assert_eq!(again.revoked_at.as_deref(), Some(revoked_at.as_str()));
    assert!(matches!(
        store.revoke_token("laptop").await,
        Err(StoreError::NotFound { kind: "token", .. })
    ));
    assert!(matches!(
        store.revoke_token("nope").await,
        Err(StoreError::NotFound { kind: "token", .. })
    ));

    // The revoked token's name is free again (rotation); the old secret stays refused.
    let (rotated, new_secret) = store
        .create_token("laptop", TokenScope::Full)
        .await
        .unwrap();
    assert_ne!(rotated.id, laptop.id);
    assert_eq!(
        store
            .verify_token(new_secret.expose())
            .await
            .unwrap()
            .map(|t| t.id),
        Some(rotated.id.clone())
    );
    assert_eq!(store.verify_token(secret.expose()).await.unwrap(), None);

    // Revoke by id.
    store.revoke_token(&dashboard.id).await.unwrap();
    assert_eq!(
        store.verify_token(read_secret.expose()).await.unwrap(),
        None
    );
    let states: Vec<(String, bool)> = store
        .tokens()
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.name.clone(), t.is_active()))
        .collect();
    assert_eq!(
        states,
        vec![
            ("laptop".to_owned(), false),
            ("dashboard".to_owned(), false),
            ("laptop".to_owned(), true)
        ]
    );
}

async fn thread_queues_keep_order_per_thread(store: &Store) {
    use weft_store::ThreadQueue as _;
    let first = store.queue_message("q1", "first").await.unwrap();
    let second = store.queue_message("q1", "second").await.unwrap();
    let other = store.queue_message("q2", "elsewhere").await.unwrap();
    let texts = |messages: Vec<weft_store::QueuedMessage>| {
        messages.into_iter().map(|m| m.text).collect::<Vec<_>>()
    };
    assert_eq!(
        texts(store.queued("q1").await.unwrap()),
        ["first", "second"]
    );
    store
        .dequeue("q1", &[first.id.clone(), other.id.clone()])
        .await
        .unwrap();
    assert_eq!(
        texts(store.queued("q1").await.unwrap()),
        ["second"],
        "only q1's first left"
    );
    assert_eq!(texts(store.queued("q2").await.unwrap()), ["elsewhere"]);
    store.dequeue("q1", &[second.id]).await.unwrap();
    assert!(store.queued("q1").await.unwrap().is_empty());
    // A message queued once stays queued once, even after it left the queue.
    assert!(
        store
            .queue_message_once("q1", "q-once", "result")
            .await
            .unwrap()
    );
    assert!(
        !store
            .queue_message_once("q1", "q-once", "result")
            .await
            .unwrap()
    );
    assert_eq!(texts(store.queued("q1").await.unwrap()), ["result"]);
    // A message queued once (a child's result) is silent; one the user queued is not.
    let user = store.queue_message("q1", "typed").await.unwrap();
    assert!(!user.silent);
    let flags: Vec<(String, bool)> = store
        .queued("q1")
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.text, m.silent))
        .collect();
    assert_eq!(
        flags,
        [("result".to_owned(), true), ("typed".to_owned(), false)]
    );
    store.dequeue("q1", &[user.id]).await.unwrap();
    store.dequeue("q1", &["q-once".to_owned()]).await.unwrap();
    assert!(
        !store
            .queue_message_once("q1", "q-once", "result")
            .await
            .unwrap()
    );
    assert!(store.queued("q1").await.unwrap().is_empty());
}

async fn child_registry_per_parent_thread(store: &Store) {
    use weft_store::{SubagentRegistryEntry, Subagents as _};
    let entry = |reference: &str, name: &str, at: i64| SubagentRegistryEntry {
        reference: reference.into(),
        name: name.into(),
        title: Some("Writer".into()),
        description: "Writes drafts.".into(),
        resumable: Some(true),
        blocking: Some(false),
        thread_name: Some(name.into()),
        spawn_group_id: None,
        created_at: Some(at),
        status: "running".into(),
        parent_communication: Some("implicit".into()),
        agent: "writer".into(),
    };
    let (a, b) = (entry("ref-a", "alice", 10), entry("ref-b", "bob", 20));
    let args = json!({"name": "alice", "message": "draft"});
    let first = store
        .register_child("parent", &a, &args, Some("run-1 t@1#0"))
        .await
        .unwrap();
    assert_eq!(first.entry, a);
    // The same creating call again (a replay after a crash): the same child, no second one.
    let again = store
        .register_child(
            "parent",
            &entry("ref-x", "alice", 30),
            &json!({}),
            Some("run-1 t@1#0"),
        )
        .await
        .unwrap();
    assert_eq!(again.entry.reference, "ref-a");
    assert_eq!(again.arguments, args);
    store
        .register_child("parent", &b, &json!({}), None)
        .await
        .unwrap();
    store
        .register_child("other", &entry("ref-c", "carol", 5), &json!({}), None)
        .await
        .unwrap();
    store.set_child_status("ref-a", "idle").await.unwrap();
    let children = store.children("parent").await.unwrap();
    let names: Vec<(&str, &str)> = children
        .iter()
        .map(|c| (c.name.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(names, [("alice", "idle"), ("bob", "running")]);
    let record = store.child("ref-b").await.unwrap().unwrap();
    assert_eq!(record.parent_thread_id, "parent");
    assert_eq!(record.created_by, None);
    assert!(store.child("nope").await.unwrap().is_none());
    // Deleting the parent thread deletes its registry.
    store
        .put_thread(&ThreadRecord::new("parent"))
        .await
        .unwrap();
    store.delete_thread("parent").await.unwrap();
    assert!(store.children("parent").await.unwrap().is_empty());
    assert_eq!(store.children("other").await.unwrap().len(), 1);
}

async fn scheduled_effects_fire_once_into_the_queue(store: &Store) {
    use weft_store::{QueuedTool, ScheduledEffects as _, ThreadQueue as _};
    let call = |n: i64| QueuedTool {
        name: "remind".into(),
        arguments: json!({"n": n}),
    };
    let late = store.schedule_effect("fx", &call(2), 2_000).await.unwrap();
    let soon = store.schedule_effect("fx", &call(1), 1_000).await.unwrap();
    let other = store.schedule_effect("fy", &call(3), 1_500).await.unwrap();
    assert_eq!(
        store.scheduled_effects("fx").await.unwrap(),
        [soon.clone(), late.clone()],
        "soonest first, per thread"
    );
    assert_eq!(store.next_effect_due().await.unwrap(), Some(1_000));
    assert!(store.due_effects(999, 10).await.unwrap().is_empty());
    assert_eq!(
        store.due_effects(1_500, 10).await.unwrap(),
        [soon.clone(), other.clone()]
    );
    assert_eq!(
        store.due_effects(5_000, 1).await.unwrap(),
        std::slice::from_ref(&soon)
    );
    // Firing moves it into its thread's queue, behind what waits there, under its own id.
    store.queue_message("fx", "before").await.unwrap();
    store.fire_effect(&soon.id).await.unwrap();
    let queued = store.queued("fx").await.unwrap();
    assert_eq!(queued.len(), 2);
    assert_eq!(queued[1].id, soon.id);
    assert_eq!(queued[1].tool, Some(call(1)));
    assert!(store.scheduled_effect(&soon.id).await.unwrap().is_none());
    assert_eq!(store.threads_with_fired_effects().await.unwrap(), ["fx"]);
    // Fired again (a second scheduler, a retry): nothing more, even after the run took it.
    store.fire_effect(&soon.id).await.unwrap();
    assert_eq!(store.queued("fx").await.unwrap().len(), 2);
    store
        .dequeue("fx", std::slice::from_ref(&soon.id))
        .await
        .unwrap();
    store.fire_effect(&soon.id).await.unwrap();
    assert_eq!(store.queued("fx").await.unwrap().len(), 1);
    // Removed: it never fires.
    assert!(store.remove_scheduled_effect(&late.id).await.unwrap());
    assert!(!store.remove_scheduled_effect(&late.id).await.unwrap());
    store.fire_effect(&late.id).await.unwrap();
    assert_eq!(store.queued("fx").await.unwrap().len(), 1);
    // A thread's effects go with it (termination, deletion).
    store.remove_thread_effects("fy").await.unwrap();
    assert!(store.scheduled_effects("fy").await.unwrap().is_empty());
    assert_eq!(store.next_effect_due().await.unwrap(), None);
    // Under a given id: once, whatever is asked again.
    let once = store
        .schedule_effect_once("e-00000000000000aa", "fy", &call(5), 7_000)
        .await
        .unwrap();
    let again = store
        .schedule_effect_once("e-00000000000000aa", "fy", &call(6), 9_000)
        .await
        .unwrap();
    assert_eq!(again, once);
    assert_eq!(store.scheduled_effects("fy").await.unwrap(), [once]);
    store.remove_thread_effects("fy").await.unwrap();
    let kept = store.schedule_effect("fz", &call(4), 10).await.unwrap();
    store.put_thread(&ThreadRecord::new("fz")).await.unwrap();
    store.delete_thread("fz").await.unwrap();
    assert!(store.scheduled_effect(&kept.id).await.unwrap().is_none());
}

async fn schema_is_current(store: &Store) {
    assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
}

macro_rules! backend_suite {
    ($backend:ident) => {
        mod $backend {
            macro_rules! case {
                ($name:ident) => {
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $name() {
                        let Some(h) = crate::common::$backend().await else {
                            return;
                        };
                        super::$name(&h.store).await;
                        h.finish().await;
                    }
                };
            }
            case!(checkpoint_roundtrip);
            case!(checkpoint_usage_and_step_load_back_exactly);
            case!(checkpoints_store_history_once);
            case!(branches_and_replacements_load_exactly);
            case!(tool_checkpoints_and_retention);
            case!(async_durability_keeps_order);
            case!(events_are_ordered_queryable_and_redacted);
            case!(artifacts_carry_metadata_and_checkpoint);
            case!(lineage_rolls_usage_up);
            case!(threads_and_runs);
            case!(delete_thread_removes_it_whole);
            case!(tool_ledger);
            case!(leases_fence_stale_owners);
            case!(api_tokens);
            case!(thread_queues_keep_order_per_thread);
            case!(child_registry_per_parent_thread);
            case!(scheduled_effects_fire_once_into_the_queue);
            case!(schema_is_current);
        }
    };
}

backend_suite!(sqlite);
backend_suite!(postgres);
