//! Thread trees (UAP-1.0 §7, §12.2, level 3): branches of conversation built on
//! [`AgentState`].
//!
//! Each [`ThreadNode`] holds a state snapshot. A node's *own* messages are its state's
//! messages minus the history of its parent path when the state starts with that history
//! (the usual case: you store the state `generate` returned from `tree.history()`); otherwise
//! all of its messages. [`ThreadTree::history`] concatenates the own messages from the root to
//! the current node, so storing full states never duplicates messages. A new branch starts
//! with the parent's state minus its messages (step, metadata and plan carry over).
//!
//! The tree itself is a mutable container of immutable states.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use weft_provider::Message;

use crate::error::StateError;
use crate::state::{AgentState, AgentStateJson, new_id};

/// One node of a [`ThreadTree`].
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadNode {
    /// Node id (UUIDv4).
    pub id: String,
    /// Parent node id (`None` for the root).
    pub parent_id: Option<String>,
    /// The state snapshot at this node.
    pub state: AgentState,
    /// Optional branch name.
    pub name: Option<String>,
    /// Child node ids, in creation order.
    pub children: Vec<String>,
}

/// Why a thread-tree operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadTreeError {
    /// No node has this id.
    #[error("no thread node with id {0:?}")]
    UnknownNode(String),
    /// A serialized tree is inconsistent.
    #[error("invalid thread tree: {0}")]
    Invalid(String),
    /// A node's state is invalid.
    #[error(transparent)]
    State(#[from] StateError),
}

/// The JSON form of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadNodeJson {
    /// Node id.
    pub id: String,
    /// Parent id (null for the root).
    pub parent_id: Option<String>,
    /// The state.
    pub state: AgentStateJson,
    /// Branch name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Child ids.
    #[serde(default)]
    pub children: Vec<String>,
}

/// The JSON form of a tree (UAP-1.0 §12.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTreeJson {
    /// The root's id.
    pub root_id: String,
    /// The current node's id.
    pub current_id: String,
    /// Every node.
    pub nodes: Vec<ThreadNodeJson>,
}

/// A tree of conversation branches.
///
/// # Examples
///
/// ```
/// use weft_agent::{AgentState, ThreadTree};
/// use weft_provider::Message;
///
/// let mut tree = ThreadTree::new();
/// let s1 = tree.history().with_messages([Message::user("First"), Message::assistant("1")]);
/// tree.set_current_state(s1);
///
/// let root = tree.root().id.clone();
/// let alt = tree.branch(&root, Some("alternative"))?;
/// tree.checkout(&alt)?;
/// let s2 = tree.history().with_messages([Message::user("Alt"), Message::assistant("2")]);
/// tree.set_current_state(s2);
/// assert_eq!(tree.history().message_count(), 4);   // root's two + the branch's two
///
/// tree.checkout(&root)?;
/// assert_eq!(tree.history().message_count(), 2);
///
/// let copy = ThreadTree::from_json(tree.to_json())?;
/// assert_eq!(copy, tree);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadTree {
    root_id: String,
    current_id: String,
    nodes: HashMap<String, ThreadNode>,
}

impl Default for ThreadTree {
    fn default() -> Self {
        ThreadTree::new()
    }
}

impl ThreadTree {
    /// A tree with one root node holding `AgentState::initial()`.
    pub fn new() -> Self {
        ThreadTree::with_root(AgentState::initial())
    }

    /// A tree whose root holds `state`.
    pub fn with_root(state: AgentState) -> Self {
        let id = new_id();
        let root = ThreadNode {
            id: id.clone(),
            parent_id: None,
            state,
            name: None,
            children: Vec::new(),
        };
        ThreadTree {
            root_id: id.clone(),
            current_id: id.clone(),
            nodes: HashMap::from([(id, root)]),
        }
    }

    /// The root node.
    pub fn root(&self) -> &ThreadNode {
        // The root is always present: constructors insert it and nothing removes nodes.
        &self.nodes[&self.root_id]
    }

    /// The current node.
    pub fn current(&self) -> &ThreadNode {
        &self.nodes[&self.current_id]
    }

    /// The current node's id.
    pub fn current_id(&self) -> &str {
        &self.current_id
    }

    /// Every node, by id.
    pub fn nodes(&self) -> &HashMap<String, ThreadNode> {
        &self.nodes
    }

    /// One node.
    pub fn node(&self, id: &str) -> Option<&ThreadNode> {
        self.nodes.get(id)
    }

    /// Replaces the current node's state (e.g. with what `generate` returned).
    pub fn set_current_state(&mut self, state: AgentState) {
        if let Some(node) = self.nodes.get_mut(&self.current_id) {
            node.state = state;
        }
    }

    /// Creates a child of `from_id` and returns its id. The current node does not change.
    ///
    /// # Errors
    /// [`ThreadTreeError::UnknownNode`].
    pub fn branch(&mut self, from_id: &str, name: Option<&str>) -> Result<String, ThreadTreeError> {
        let parent = self
            .nodes
            .get_mut(from_id)
            .ok_or_else(|| ThreadTreeError::UnknownNode(from_id.to_owned()))?;
        let id = new_id();
        parent.children.push(id.clone());
        let state = parent.state.with_context(Vec::new());
        self.nodes.insert(
            id.clone(),
            ThreadNode {
                id: id.clone(),
                parent_id: Some(from_id.to_owned()),
                state,
                name: name.map(str::to_owned),
                children: Vec::new(),
            },
        );
        Ok(id)
    }

    /// Makes `node_id` the current node.
    ///
    /// # Errors
    /// [`ThreadTreeError::UnknownNode`].
    pub fn checkout(&mut self, node_id: &str) -> Result<(), ThreadTreeError> {
        if !self.nodes.contains_key(node_id) {
            return Err(ThreadTreeError::UnknownNode(node_id.to_owned()));
        }
        node_id.clone_into(&mut self.current_id);
        Ok(())
    }

    /// The ids from the root to `node_id`.
    fn path(&self, node_id: &str) -> Vec<&ThreadNode> {
        let mut path = Vec::new();
        let mut current = self.nodes.get(node_id);
        while let Some(node) = current {
            path.push(node);
            current = node.parent_id.as_ref().and_then(|p| self.nodes.get(p));
        }
        path.reverse();
        path
    }

    /// The current node's state with the messages from the root to the current node, in
    /// order (UAP-1.0 §7.3).
    pub fn history(&self) -> AgentState {
        let mut messages: Vec<Message> = Vec::new();
        for node in self.path(&self.current_id) {
            let own: Vec<Cow<'_, Message>> = node.state.messages().collect();
            let prefix = messages.len();
            let starts_with_history =
                own.len() >= prefix && own.iter().zip(&messages).all(|(a, b)| a.id() == b.id());
            let skip = if starts_with_history { prefix } else { 0 };
            messages.extend(own.into_iter().skip(skip).map(Cow::into_owned));
        }
        self.current().state.with_context(messages)
    }

    /// Serializes the tree with every id preserved.
    pub fn to_json(&self) -> ThreadTreeJson {
        let mut ids: Vec<&String> = self.nodes.keys().collect();
        ids.sort();
        // Root first, then the rest in a stable order.
        ids.sort_by_key(|id| **id != self.root_id);
        ThreadTreeJson {
            root_id: self.root_id.clone(),
            current_id: self.current_id.clone(),
            nodes: ids
                .into_iter()
                .map(|id| {
                    let node = &self.nodes[id];
                    ThreadNodeJson {
                        id: node.id.clone(),
                        parent_id: node.parent_id.clone(),
                        state: node.state.to_json(),
                        name: node.name.clone(),
                        children: node.children.clone(),
                    }
                })
                .collect(),
        }
    }

    /// Restores a tree, checking that it is one: unique ids, one root without parent,
    /// parents and children agreeing, every node reachable from the root, the current node
    /// present.
    ///
    /// # Errors
    /// [`ThreadTreeError::Invalid`] or a node's [`StateError`].
    pub fn from_json(json: ThreadTreeJson) -> Result<Self, ThreadTreeError> {
        let invalid = |m: String| ThreadTreeError::Invalid(m);
        let mut nodes = HashMap::with_capacity(json.nodes.len());
        for node in json.nodes {
            let id = node.id.clone();
            let state = AgentState::from_json(node.state)?;
            let previous = nodes.insert(
                id.clone(),
                ThreadNode {
                    id: node.id,
                    parent_id: node.parent_id,
                    state,
                    name: node.name,
                    children: node.children,
                },
            );
            if previous.is_some() {
                return Err(invalid(format!("node id {id:?} is used twice")));
            }
        }
        let root = nodes
            .get(&json.root_id)
            .ok_or_else(|| invalid(format!("the root {:?} is not a node", json.root_id)))?;
        if root.parent_id.is_some() {
            return Err(invalid("the root has a parent".into()));
        }
        if !nodes.contains_key(&json.current_id) {
            return Err(invalid(format!(
                "the current node {:?} is not a node",
                json.current_id
            )));
        }
        for node in nodes.values() {
            if node.id != json.root_id {
                let Some(parent_id) = &node.parent_id else {
                    return Err(invalid(format!("node {:?} has no parent", node.id)));
                };
                let Some(parent) = nodes.get(parent_id) else {
                    return Err(invalid(format!(
                        "node {:?} has an unknown parent {parent_id:?}",
                        node.id
                    )));
                };
                if !parent.children.contains(&node.id) {
                    return Err(invalid(format!(
                        "node {:?} is not among its parent's children",
                        node.id
                    )));
                }
            }
            for child in &node.children {
                if nodes.get(child).and_then(|c| c.parent_id.as_ref()) != Some(&node.id) {
                    return Err(invalid(format!(
                        "child {child:?} of node {:?} does not name it as parent",
                        node.id
                    )));
                }
            }
        }
        let mut seen = HashSet::new();
        let mut stack = vec![json.root_id.as_str()];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                return Err(invalid(format!("node {id:?} is reached twice")));
            }
            if let Some(node) = nodes.get(id) {
                stack.extend(node.children.iter().map(String::as_str));
            }
        }
        if seen.len() != nodes.len() {
            return Err(invalid("some nodes are not reachable from the root".into()));
        }
        Ok(ThreadTree {
            root_id: json.root_id,
            current_id: json.current_id,
            nodes,
        })
    }
}
