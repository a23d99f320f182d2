//! UAP-1.0 §7, §12.2: thread trees (level 3).
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use serde_json::json;
use weft_agent::{AgentOptions, AgentState, ThreadTree, ThreadTreeError, agent};
use weft_provider::Message;

use common::*;

#[test]
fn uap_068_tree_interface() {
    let mut tree = ThreadTree::new();
    let root = tree.root().id.clone();
    assert_eq!(tree.current().id, root);
    assert_eq!(tree.nodes().len(), 1);
    let b = tree.branch(&root, Some("b")).unwrap();
    assert_eq!(tree.current().id, root);
    tree.checkout(&b).unwrap();
    assert_eq!(tree.current().id, b);
    assert_eq!(tree.history().message_count(), 0);
    assert!(!tree.to_json().nodes.is_empty());
    assert!(matches!(
        tree.checkout("nope"),
        Err(ThreadTreeError::UnknownNode(_))
    ));
    assert!(tree.branch("nope", None).is_err());
}

#[test]
fn uap_069_node_fields() {
    let mut tree = ThreadTree::new();
    let root = tree.root().id.clone();
    let child = tree.branch(&root, Some("alt")).unwrap();
    assert!(is_uuid_v4(&root) && is_uuid_v4(&child));
    assert!(tree.root().parent_id.is_none());
    let node = tree.node(&child).unwrap();
    assert_eq!(node.parent_id.as_deref(), Some(root.as_str()));
    assert_eq!(node.name.as_deref(), Some("alt"));
    assert_eq!(tree.root().children, vec![child.clone()]);
    let _state: &AgentState = &node.state;
}

#[tokio::test]
async fn uap_070_history_runs_from_root_to_current() {
    let a = agent(AgentOptions::new(texts(&["r1", "a1", "b1"]))).unwrap();
    let mut tree = ThreadTree::new();
    let s1 = a.generate("First", &tree.history()).await.unwrap().state;
    tree.set_current_state(s1);
    let root = tree.root().id.clone();
    let alt = tree.branch(&root, Some("alternative")).unwrap();
    tree.checkout(&alt).unwrap();
    let s2 = a
        .generate("Alternative path", &tree.history())
        .await
        .unwrap()
        .state;
    tree.set_current_state(s2);
    let deeper = tree.branch(&alt, None).unwrap();
    tree.checkout(&deeper).unwrap();
    let s3 = a.generate("Deeper", &tree.history()).await.unwrap().state;
    tree.set_current_state(s3);
    let texts: Vec<String> = tree.history().messages().map(|m| m.text()).collect();
    assert_eq!(
        texts,
        ["First", "r1", "Alternative path", "a1", "Deeper", "b1"]
    );
    tree.checkout(&root).unwrap();
    assert_eq!(tree.history().message_count(), 2);
    // A node holding only its own messages works too.
    let own = tree.branch(&root, None).unwrap();
    tree.checkout(&own).unwrap();
    tree.set_current_state(AgentState::initial().with_message(Message::user("delta only")));
    let texts: Vec<String> = tree.history().messages().map(|m| m.text()).collect();
    assert_eq!(texts, ["First", "r1", "delta only"]);
}

#[test]
fn uap_071_tree_json_round_trip_preserves_ids() {
    let mut tree = ThreadTree::new();
    tree.set_current_state(AgentState::initial().with_message(Message::user("hi")));
    let root = tree.root().id.clone();
    let b = tree.branch(&root, Some("b")).unwrap();
    tree.checkout(&b).unwrap();
    let json = serde_json::to_value(tree.to_json()).unwrap();
    assert_eq!(json["rootId"], json!(root));
    assert_eq!(json["currentId"], json!(b));
    assert!(json["nodes"].is_array());
    let back: weft_agent::ThreadTreeJson = serde_json::from_value(json).unwrap();
    let restored = ThreadTree::from_json(back).unwrap();
    assert_eq!(restored, tree);
    assert_eq!(
        restored.history().message(0).unwrap().id(),
        tree.history().message(0).unwrap().id()
    );
}

#[test]
fn thread_tree_json_is_validated() {
    let mut tree = ThreadTree::new();
    let root = tree.root().id.clone();
    tree.branch(&root, None).unwrap();
    let good = tree.to_json();
    let mut bad = good.clone();
    bad.current_id = "missing".into();
    assert!(ThreadTree::from_json(bad).is_err());
    let mut bad = good.clone();
    bad.nodes[1].parent_id = Some("ghost".into());
    assert!(ThreadTree::from_json(bad).is_err());
    let mut bad = good.clone();
    bad.nodes[0].children.clear();
    assert!(ThreadTree::from_json(bad).is_err());
    let mut bad = good;
    let dup = bad.nodes[1].clone();
    bad.nodes.push(dup);
    assert!(ThreadTree::from_json(bad).is_err());
}

#[tokio::test]
async fn uap_142_level_3_thread_trees() {
    let a = agent(AgentOptions::new(texts(&["x", "y"]))).unwrap();
    let mut tree = ThreadTree::new();
    let s = a.generate("1", &tree.history()).await.unwrap().state;
    tree.set_current_state(s);
    let current = tree.current_id().to_owned();
    let b = tree.branch(&current, Some("b")).unwrap();
    tree.checkout(&b).unwrap();
    let s = a.generate("2", &tree.history()).await.unwrap().state;
    tree.set_current_state(s);
    assert_eq!(tree.history().message_count(), 4);
    let restored = ThreadTree::from_json(tree.to_json()).unwrap();
    assert_eq!(restored.history().message_count(), 4);
}
