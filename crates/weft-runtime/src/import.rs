//! Importing a ThreadProtocol thread: the inverse of [`crate::transcript::Transcript::to_thread`]
//! for the conversation. The thread is validated with `weft_thread`'s validator; its turns
//! become one conversation (user turns as user messages, agent turns as their assistant and
//! tool-result messages, in order — system messages such as handoffs have no message form and
//! are left out), saved as the first checkpoint of a new Weft thread. Runs then go on from it
//! with [`crate::Runtime::start_on`], like a fork's.
//!
//! ```no_run
//! # async fn demo(store: weft_store::Store, json: serde_json::Value) -> Result<(), weft_runtime::import::ImportError> {
//! let imported = weft_runtime::import::import_thread(&store, &json).await?;
//! println!("thread {} holds {} messages", imported.thread_id, imported.messages);
//! # Ok(()) }
//! ```

use serde::Serialize;
use serde_json::{Value, json};
use weft_agent::AgentState;
use weft_agent::checkpoint::{Checkpoint, CheckpointMetadata};
use weft_provider::{Message, TokenUsage};
use weft_store::{Store, ThreadRecord, Threads as _, new_id};
use weft_thread::types::{Thread, Turn};
use weft_thread::weft_messages;

use crate::error::RunError;

/// The agent id an imported thread's first checkpoint names.
pub const IMPORT_AGENT: &str = "import";

/// Why a thread could not be imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The document is not a valid ThreadProtocol thread, or holds content Weft cannot
    /// represent; each string is one problem (a JSON pointer and a sentence).
    #[error("the thread is not valid: {}", .0.join("; "))]
    Invalid(Vec<String>),
    /// Storing it failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// A thread made by [`import_thread`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Imported {
    /// The new Weft thread.
    pub thread_id: String,
    /// The imported document's `thread_id`.
    pub source_thread_id: String,
    /// The checkpoint holding its conversation.
    pub checkpoint_id: String,
    /// Messages in it.
    pub messages: u64,
}

/// The conversation of a ThreadProtocol `thread` as Weft messages, in turn order.
///
/// # Errors
/// [`ImportError::Invalid`] for content Weft cannot represent (a bad timestamp, an unknown
/// content kind).
pub fn thread_messages(thread: &Thread) -> Result<Vec<Message>, ImportError> {
    let mut messages = Vec::new();
    for (index, turn) in thread.turns.iter().enumerate() {
        let problem = |e: weft_messages::ConversionError| {
            ImportError::Invalid(vec![format!("/turns/{index}: {e}")])
        };
        match turn {
            Turn::User(user) => {
                messages.push(Message::User(
                    weft_messages::user_message(user).map_err(problem)?,
                ));
            }
            Turn::Agent(agent) => messages.extend(weft_messages::messages(agent).map_err(problem)?),
        }
    }
    Ok(messages)
}

/// Validates `document` as a ThreadProtocol thread and stores its conversation as the first
/// checkpoint of a new thread (a new id; the thread record's metadata names the source:
/// `importedFrom`).
///
/// # Errors
/// [`ImportError::Invalid`] with the validator's errors, or for content Weft cannot
/// represent; storage failures.
pub async fn import_thread(store: &Store, document: &Value) -> Result<Imported, ImportError> {
    let report = weft_thread::validate(document);
    if !report.is_valid() {
        return Err(ImportError::Invalid(
            report
                .errors()
                .map(|f| format!("{}: {}", f.pointer, f.message))
                .collect(),
        ));
    }
    let thread = Thread::from_value(document.clone())
        .map_err(|e| ImportError::Invalid(vec![e.to_string()]))?;
    let messages = thread_messages(&thread)?;
    let store = &store.with_durability(weft_store::Durability::Sync);
    let thread_id = new_id();
    let mut record = ThreadRecord::new(&thread_id);
    record.title.clone_from(&thread.title);
    record.metadata.insert(
        "importedFrom".into(),
        json!({"threadId": thread.thread_id, "version": thread.version}),
    );
    store.put_thread(&record).await.map_err(RunError::from)?;
    let state = AgentState::initial()
        .with_messages(messages)
        .with_metadata(weft_agent::SESSION_ID_KEY, Value::String(thread_id.clone()));
    let count = u64::try_from(state.message_count()).unwrap_or(u64::MAX);
    let checkpoint_id = new_id();
    let checkpoint = Checkpoint {
        metadata: CheckpointMetadata {
            session_id: thread_id.clone(),
            checkpoint_id: checkpoint_id.clone(),
            timestamp: chrono::Utc::now(),
            step: 0,
            agent_id: IMPORT_AGENT.to_owned(),
        },
        state,
        pending_tool_calls: Vec::new(),
        completed_tool_calls: Vec::new(),
        usage: Some(TokenUsage::default()),
    };
    store
        .save_checkpoint(&thread_id, &checkpoint)
        .await
        .map_err(RunError::from)?;
    store.flush().await.map_err(RunError::from)?;
    let checkpoint_id = store
        .list_checkpoints(&thread_id)
        .await
        .map_err(RunError::from)?
        .first()
        .map_or(checkpoint_id, |c| c.id.clone());
    Ok(Imported {
        thread_id,
        source_thread_id: thread.thread_id,
        checkpoint_id,
        messages: count,
    })
}
