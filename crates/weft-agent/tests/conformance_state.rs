//! UAP-1.0 §6, §12.1–§12.3, §15.3: the immutable `AgentState` and its JSON form.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use proptest::prelude::*;
use serde_json::json;
use weft_agent::{
    AgentState, FromJsonOptions, PlanStep, PlanStepStatus, StateError, SubagentExecutionTrace,
    ToolExecutionTrace,
};
use weft_provider::{
    AssistantMessage, BinaryBlock, Blob, ContentBlock, Message, MessageOptions, ToolCall,
    ToolResult, ToolResultMessage, UserMessage,
};

use common::is_uuid_v4;

fn trace(id: &str) -> SubagentExecutionTrace {
    SubagentExecutionTrace {
        subagent_id: id.into(),
        subagent_type: "explorer".into(),
        parent_tool_call_id: "call_1".into(),
        prompt: "find".into(),
        start_time: 1,
        end_time: 2,
        success: true,
        result: Some("found".into()),
        error: None,
        tool_executions: Some(vec![ToolExecutionTrace {
            tool_name: "grep".into(),
            tool_call_id: Some("g1".into()),
            arguments: json!({"q": "x"}),
            result: "hit".into(),
            is_error: Some(false),
            duration: Some(3),
        }]),
        usage: None,
    }
}

fn rich_state() -> AgentState {
    let mut metadata = serde_json::Map::new();
    metadata.insert(
        "anthropic".into(),
        json!({"cache_control": {"type": "ephemeral"}}),
    );
    let user = UserMessage::with_options(
        vec![
            ContentBlock::text("look"),
            ContentBlock::Binary(BinaryBlock {
                data: Blob(vec![0, 1, 2, 255]),
                mime_type: "application/octet-stream".into(),
                metadata: None,
            }),
        ],
        MessageOptions {
            id: Some("user-1".into()),
            metadata: Some(metadata),
        },
    );
    let assistant = AssistantMessage::new(
        vec![ContentBlock::text("calling")],
        vec![ToolCall::new("c1", "add", json!({"a": 1}))],
        MessageOptions::default(),
    )
    .unwrap();
    AgentState::initial()
        .with_message(Message::User(user))
        .with_message(Message::Assistant(assistant))
        .with_message(Message::ToolResult(ToolResultMessage::new(vec![
            ToolResult {
                tool_call_id: "c1".into(),
                result: json!(1),
                is_error: false,
            },
        ])))
        .with_step(3)
        .with_metadata("taskComplete", json!(false))
        .with_reasoning("think")
        .with_plan(vec![
            PlanStep::new("s1", "do").with_status(PlanStepStatus::Completed),
        ])
        .with_subagent_trace(trace("sub-1"))
}

#[test]
fn uap_005_every_operation_returns_a_new_instance() {
    let s = AgentState::initial();
    let derived = [
        s.with_message(Message::user("a")),
        s.with_messages([Message::user("a")]),
        s.with_context([Message::user("a")]),
        s.with_step(1),
        s.with_metadata("k", json!(1)),
        s.with_reasoning("r"),
        s.with_plan(vec![]),
        s.with_subagent_trace(trace("t")),
    ];
    for d in &derived {
        assert_ne!(d.id(), s.id());
    }
}

#[test]
fn uap_006_operations_never_mutate_the_original() {
    let s = rich_state();
    let before = s.to_json();
    let _ = s
        .with_message(Message::user("x"))
        .with_context([])
        .with_step(9);
    let _ = s
        .with_metadata("taskComplete", json!(true))
        .with_reasoning("more");
    let _ = s.with_plan(vec![]).with_subagent_trace(trace("t2"));
    assert_eq!(s.to_json(), before);
}

#[test]
fn uap_020_every_derived_state_has_a_unique_id() {
    let mut ids = std::collections::HashSet::new();
    let mut s = AgentState::initial();
    ids.insert(s.id().to_owned());
    for i in 0..1000 {
        s = s.with_step(i);
        assert!(ids.insert(s.id().to_owned()));
    }
}

#[test]
fn uap_019_state_ids_are_uuid_v4() {
    let s = AgentState::initial();
    assert!(is_uuid_v4(s.id()));
    assert!(is_uuid_v4(s.with_step(1).id()));
}

#[test]
fn uap_021_step_is_an_integer_sequence_number() {
    let s = AgentState::initial().with_step(7);
    assert_eq!(s.step(), 7u64);
    assert_eq!(s.to_json().step, 7);
    assert_eq!(serde_json::to_value(s.to_json()).unwrap()["step"], json!(7));
}

#[test]
fn uap_061_state_has_every_field() {
    let s = rich_state();
    assert!(!s.id().is_empty());
    assert_eq!(s.message_count(), 3);
    assert_eq!(s.step(), 3);
    assert_eq!(s.metadata()["taskComplete"], json!(false));
    assert_eq!(s.reasoning().collect::<Vec<_>>(), ["think"]);
    assert_eq!(s.plan().unwrap()[0].id, "s1");
    assert_eq!(s.subagent_traces().count(), 1);
}

#[test]
fn uap_062_initial_state_is_empty() {
    let s = AgentState::initial();
    assert_eq!(s.message_count(), 0);
    assert_eq!(s.step(), 0);
    assert!(s.metadata().is_empty());
    assert_eq!(s.reasoning().count(), 0);
    assert!(s.plan().is_none());
    assert_eq!(s.subagent_traces().count(), 0);
}

#[test]
fn uap_063_with_message_and_with_messages_append() {
    let s = AgentState::initial()
        .with_message(Message::user("Hello"))
        .with_message(Message::assistant("Hi"));
    let s2 = s.with_messages([Message::user("Goodbye"), Message::assistant("Bye")]);
    let texts: Vec<String> = s2.messages().map(|m| m.text()).collect();
    assert_eq!(texts, ["Hello", "Hi", "Goodbye", "Bye"]);
}

#[test]
fn uap_064_with_context_replaces_the_history() {
    let s = AgentState::initial()
        .with_message(Message::user("Hello"))
        .with_message(Message::assistant("Hi"));
    let s2 = s.with_context([Message::user("Fresh start")]);
    let texts: Vec<String> = s2.messages().map(|m| m.text()).collect();
    assert_eq!(texts, ["Fresh start"]);
    assert_eq!(s.message_count(), 2);
}

#[test]
fn uap_065_each_with_changes_only_its_field() {
    let s = rich_state();
    let check = |d: &AgentState, changed: &str| {
        let a = serde_json::to_value(s.to_json()).unwrap();
        let b = serde_json::to_value(d.to_json()).unwrap();
        for field in [
            "messages",
            "step",
            "metadata",
            "reasoning",
            "plan",
            "subagentTraces",
        ] {
            if field == changed {
                assert_ne!(a[field], b[field], "{field} should change");
            } else {
                assert_eq!(a[field], b[field], "{field} should not change");
            }
        }
    };
    check(&s.with_step(4), "step");
    check(&s.with_metadata("x", json!(1)), "metadata");
    check(&s.with_reasoning("again"), "reasoning");
    check(&s.with_plan(vec![PlanStep::new("s9", "other")]), "plan");
    check(&s.with_subagent_trace(trace("sub-2")), "subagentTraces");
    check(&s.with_message(Message::user("m")), "messages");
}

#[test]
fn uap_066_to_json_serializes_the_whole_state() {
    let json = serde_json::to_value(rich_state().to_json()).unwrap();
    for field in [
        "version",
        "id",
        "messages",
        "step",
        "metadata",
        "reasoning",
        "plan",
        "subagentTraces",
    ] {
        assert!(json.get(field).is_some(), "missing {field}");
    }
}

#[test]
fn uap_067_from_json_restores_exactly() {
    let s = rich_state();
    let restored = AgentState::from_json(s.to_json()).unwrap();
    assert_eq!(restored, s);
    let text = s.to_json_string().unwrap();
    assert_eq!(AgentState::from_json_str(&text).unwrap(), s);
}

#[test]
fn uap_120_state_json_has_required_and_optional_fields() {
    let json = serde_json::to_value(AgentState::initial().to_json()).unwrap();
    assert_eq!(json["version"], "1.0");
    assert!(json["id"].is_string());
    assert!(json["messages"].is_array());
    assert!(json["step"].is_u64());
    assert!(json["metadata"].is_object());
    // optional ones may be absent and are accepted when absent
    let minimal = json!({"version": "1.0", "id": "s", "messages": [], "step": 0, "metadata": {}});
    let s = AgentState::from_json_value(minimal).unwrap();
    assert_eq!(s.reasoning().count(), 0);
    assert!(s.plan().is_none());
}

#[test]
fn uap_121_ids_survive_a_round_trip() {
    let s = rich_state();
    let text = s.to_json_string().unwrap();
    let r = AgentState::from_json_str(&text).unwrap();
    assert_eq!(r.id(), s.id());
    let a: Vec<String> = s.messages().map(|m| m.id().to_owned()).collect();
    let b: Vec<String> = r.messages().map(|m| m.id().to_owned()).collect();
    assert_eq!(a, b);
    assert_eq!(r.message(0).unwrap().id(), "user-1");
    assert_eq!(r.subagent_traces().next().unwrap().subagent_id, "sub-1");
}

#[test]
fn uap_122_message_metadata_survives_a_round_trip() {
    let s = rich_state();
    let r = AgentState::from_json_str(&s.to_json_string().unwrap()).unwrap();
    assert_eq!(
        r.message(0).unwrap().metadata().unwrap()["anthropic"]["cache_control"]["type"],
        "ephemeral"
    );
}

#[test]
fn uap_123_timestamps_are_iso_8601() {
    let json = serde_json::to_value(rich_state().to_json()).unwrap();
    let ts = json["messages"][0]["timestamp"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{ts}");
}

#[test]
fn uap_124_binary_data_is_base64() {
    let json = serde_json::to_value(rich_state().to_json()).unwrap();
    let block = &json["messages"][0]["content"][1];
    assert_eq!(block["data"], "AAEC/w==");
}

#[test]
fn uap_125_version_is_checked() {
    let mut json = serde_json::to_value(AgentState::initial().to_json()).unwrap();
    json["version"] = json!("2.0");
    assert!(matches!(
        AgentState::from_json_value(json.clone()),
        Err(StateError::UnsupportedVersion { .. })
    ));
    json["version"] = json!(1);
    assert!(AgentState::from_json_value(json).is_err());
}

#[test]
fn uap_146_malformed_input_is_rejected_with_an_error() {
    let cases = [
        "not json",
        "[]",
        r#"{"version": "1.0"}"#,
        r#"{"version": "1.0", "id": "x", "messages": {}, "step": 0, "metadata": {}}"#,
        r#"{"version": "1.0", "id": "x", "messages": [{"type": "robot"}], "step": 0, "metadata": {}}"#,
        r#"{"version": "1.0", "id": "", "messages": [], "step": 0, "metadata": {}}"#,
        r#"{"version": "1.0", "id": "x", "messages": [], "step": "one", "metadata": {}}"#,
        r#"{"version": "1.0", "id": "x", "messages": [], "step": 0, "metadata": []}"#,
        r#"{"version": "1.0", "id": "x", "messages": [], "step": 0, "metadata": {}, "plan": [{"id": 3}]}"#,
    ];
    for case in cases {
        let error = AgentState::from_json_str(case).unwrap_err();
        assert!(!error.to_string().is_empty(), "{case}");
    }
}

#[test]
fn uap_147_untrusted_input_has_limits() {
    let big = AgentState::initial().with_messages((0..20).map(|i| Message::user(format!("m{i}"))));
    let text = big.to_json_string().unwrap();
    let tight = FromJsonOptions {
        max_bytes: Some(100),
        max_messages: None,
    };
    assert!(matches!(
        AgentState::from_json_str_with(&text, &tight),
        Err(StateError::TooLarge { .. })
    ));
    let few = FromJsonOptions {
        max_bytes: None,
        max_messages: Some(10),
    };
    assert!(AgentState::from_json_str_with(&text, &few).is_err());
    assert!(AgentState::from_json_str_with(&text, &FromJsonOptions::untrusted()).is_ok());
}

#[test]
fn branching_a_large_state_shares_structure() {
    let mut s = AgentState::initial();
    for i in 0..10_000 {
        s = s.with_message(Message::user(format!("m{i}")));
    }
    let a = s.with_message(Message::user("a"));
    let b = s.with_message(Message::user("b"));
    assert_eq!(s.message_count(), 10_000);
    assert_eq!(a.last_message().unwrap().text(), "a");
    assert_eq!(b.last_message().unwrap().text(), "b");
    assert_eq!(a.message(0), b.message(0));
}

// ----- properties (generated states: every message kind and content block, metadata,
// reasoning, plans, sub-agent traces) -----

#[path = "common/states.rs"]
mod states;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// A tree of states (each operation applied to a random earlier state, so states fork):
    /// no operation changes any earlier state, and `extends` follows the lineage.
    #[test]
    fn uap_005_prop_no_with_operation_changes_an_earlier_state(steps in prop::collection::vec((any::<prop::sample::Index>(), states::op()), 1..20)) {
        let mut tree = vec![AgentState::initial()];
        let mut snapshots = vec![tree[0].to_json_string().unwrap()];
        // For each state: its parent and the operation that made it.
        let mut made: Vec<Option<(usize, &states::Op)>> = vec![None];
        for (parent, op) in &steps {
            let parent = parent.index(tree.len());
            let next = states::apply(&tree[parent], op);
            prop_assert_ne!(next.id(), tree[parent].id());
            snapshots.push(next.to_json_string().unwrap());
            tree.push(next);
            made.push(Some((parent, op)));
        }
        for (state, snapshot) in tree.iter().zip(&snapshots) {
            prop_assert_eq!(&state.to_json_string().unwrap(), snapshot);
        }
        for (index, state) in tree.iter().enumerate() {
            // Up the lineage while the operations kept the history: each ancestor is extended.
            let mut at = index;
            while let Some((parent, op)) = made[at] {
                if !op.appends() {
                    // A replaced history never extends one that had messages.
                    if tree[parent].message_count() > 0 {
                        prop_assert!(!tree[at].extends(&tree[parent]));
                    }
                    break;
                }
                prop_assert!(state.extends(&tree[parent]), "state {} does not extend ancestor {}", index, parent);
                at = parent;
            }
        }
        // Siblings that each appended a message extend neither each other.
        for (a, made_a) in made.iter().enumerate() {
            for (b, made_b) in made.iter().enumerate().skip(a + 1) {
                if let (Some((pa, states::Op::Message(_))), Some((pb, states::Op::Message(_)))) = (made_a, made_b)
                    && pa == pb
                {
                    prop_assert!(!tree[a].extends(&tree[b]) && !tree[b].extends(&tree[a]));
                }
            }
        }
    }

    #[test]
    fn uap_067_prop_from_json_of_to_json_is_identity(state in states::state(20)) {
        let restored = AgentState::from_json(state.to_json()).unwrap();
        prop_assert_eq!(&restored, &state);
        let text = state.to_json_string().unwrap();
        prop_assert_eq!(&AgentState::from_json_str(&text).unwrap(), &state);
        // And through serde, as a checkpoint embeds it.
        let value = serde_json::to_value(&state).unwrap();
        prop_assert_eq!(&serde_json::from_value::<AgentState>(value).unwrap(), &state);
    }
}
