//! UAP-1.0 §3.4, §12.4, §15.3: checkpoints.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use weft_agent::checkpoint::{
    Checkpoint, CheckpointError, CheckpointMetadata, CheckpointMode, CheckpointStore,
    FileCheckpointOptions, FileCheckpoints, file_checkpoints,
};
use weft_agent::{AgentOptions, AgentState, SubagentTool, agent};

use common::*;

fn tool_model() -> weft_provider::ModelReference {
    script(vec![
        call("c1", "add", json!({"a": 1, "b": 2})),
        text("three"),
    ])
}

/// An in-memory store recording every save.
#[derive(Debug, Default)]
struct Memory {
    saves: Mutex<Vec<(String, Checkpoint)>>,
}

#[async_trait]
impl CheckpointStore for Memory {
    async fn save(&self, session_id: &str, checkpoint: Checkpoint) -> Result<(), CheckpointError> {
        self.saves
            .lock()
            .unwrap()
            .push((session_id.to_owned(), checkpoint));
        Ok(())
    }
    async fn load(&self, session_id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        Ok(self
            .saves
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(s, _)| s == session_id)
            .map(|(_, c)| c.clone()))
    }
    async fn load_metadata(
        &self,
        session_id: &str,
    ) -> Result<Option<CheckpointMetadata>, CheckpointError> {
        Ok(self.load(session_id).await?.map(|c| c.metadata))
    }
    async fn delete(&self, session_id: &str) -> Result<(), CheckpointError> {
        self.saves.lock().unwrap().retain(|(s, _)| s != session_id);
        Ok(())
    }
    async fn list(&self) -> Result<Vec<String>, CheckpointError> {
        let mut ids: Vec<String> = self
            .saves
            .lock()
            .unwrap()
            .iter()
            .map(|(s, _)| s.clone())
            .collect();
        ids.dedup();
        Ok(ids)
    }
}

/// A store that always fails, slowly.
#[derive(Debug)]
struct Broken;

#[async_trait]
impl CheckpointStore for Broken {
    async fn save(&self, _: &str, _: Checkpoint) -> Result<(), CheckpointError> {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        Err(CheckpointError::Backend("disk on fire".into()))
    }
    async fn load(&self, _: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        Err(CheckpointError::Backend("x".into()))
    }
    async fn load_metadata(&self, _: &str) -> Result<Option<CheckpointMetadata>, CheckpointError> {
        Err(CheckpointError::Backend("x".into()))
    }
    async fn delete(&self, _: &str) -> Result<(), CheckpointError> {
        Ok(())
    }
    async fn list(&self) -> Result<Vec<String>, CheckpointError> {
        Ok(vec![])
    }
}

#[tokio::test]
async fn uap_022_session_id_is_generated_with_checkpoints() {
    let a = agent(AgentOptions::new(texts(&["x"])).checkpoints(Memory::default())).unwrap();
    assert!(a.session_id().is_some());
    let without = agent(AgentOptions::new(texts(&["x"]))).unwrap();
    assert!(without.session_id().is_none());
}

#[tokio::test]
async fn uap_023_generated_session_ids_are_uuid_v4_and_given_ones_kept() {
    let a = agent(AgentOptions::new(texts(&["x"])).checkpoints(Memory::default())).unwrap();
    assert!(is_uuid_v4(a.session_id().unwrap()));
    let b = agent(
        AgentOptions::new(texts(&["x"]))
            .checkpoints(Memory::default())
            .session_id("my-session"),
    )
    .unwrap();
    assert_eq!(b.session_id(), Some("my-session"));
}

#[tokio::test]
async fn uap_024_state_metadata_holds_the_session_id() {
    let a = agent(AgentOptions::new(texts(&["x"])).checkpoints(Memory::default())).unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    assert_eq!(r.state.session_id(), a.session_id());
    assert_eq!(
        r.state.metadata()["sessionId"],
        json!(a.session_id().unwrap())
    );
}

#[tokio::test]
async fn uap_126_store_interface() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_checkpoints(dir.path());
    let a = agent(
        AgentOptions::new(texts(&["x"]))
            .checkpoints(store.clone())
            .session_id("s1"),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    assert_eq!(store.list().await.unwrap(), ["s1"]);
    assert!(store.load("s1").await.unwrap().is_some());
    assert_eq!(
        store.load_metadata("s1").await.unwrap().unwrap().session_id,
        "s1"
    );
    assert!(store.load("s2").await.unwrap().is_none());
    assert!(store.load_metadata("s2").await.unwrap().is_none());
    store.delete("s1").await.unwrap();
    store.delete("s1").await.unwrap();
    assert!(store.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn uap_127_checkpoint_metadata_fields() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_checkpoints(dir.path());
    let a = agent(
        AgentOptions::new(tool_model())
            .tool(add_tool())
            .checkpoints(store.clone()),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    let session = a.session_id().unwrap();
    let m = store.load_metadata(session).await.unwrap().unwrap();
    assert_eq!(m.session_id, session);
    assert!(is_uuid_v4(&m.checkpoint_id));
    assert_eq!(m.step, 2);
    assert_eq!(m.agent_id, a.id());
    let text = std::fs::read_to_string(store.metadata_path(session)).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(json["timestamp"].as_str().unwrap()).is_ok());
}

#[tokio::test]
async fn uap_128_file_layout() {
    let dir = tempfile::tempdir().unwrap();
    let a = agent(
        AgentOptions::new(texts(&["x"]))
            .checkpoints(file_checkpoints(dir.path()))
            .session_id("sess"),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    let session_dir = dir.path().join("sess");
    let mut names: Vec<String> = std::fs::read_dir(&session_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["checkpoint.json", "metadata.json"]);
    let bytes = std::fs::read(session_dir.join("checkpoint.json")).unwrap();
    let raw: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(raw["state"]["version"], "1.0");
    let checkpoint: Checkpoint = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(checkpoint.state.step(), 1);
}

#[test]
fn uap_129_dir_defaults_to_dot_checkpoints() {
    assert_eq!(
        FileCheckpointOptions::default().dir,
        std::path::PathBuf::from(".checkpoints")
    );
    assert_eq!(
        FileCheckpoints::default().dir(),
        std::path::Path::new(".checkpoints")
    );
}

#[tokio::test]
async fn uap_130_saved_after_each_step_end() {
    let memory = Arc::new(Memory::default());
    let a = agent(
        AgentOptions::new(tool_model())
            .tool(add_tool())
            .checkpoints_arc(memory.clone()),
    )
    .unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    let saves = memory.saves.lock().unwrap();
    let steps: Vec<u64> = saves.iter().map(|(_, c)| c.metadata.step).collect();
    assert_eq!(steps, [1, 2]);
    assert_eq!(saves[1].1.state, r.state);
    assert_eq!(saves[0].1.completed_tool_calls.len(), 1);
    assert!(saves[1].1.usage.is_some());
    assert!(saves[1].1.pending_tool_calls.is_empty());
}

#[tokio::test]
async fn uap_131_saves_never_block_execution() {
    let a = agent(
        AgentOptions::new(tool_model())
            .tool(add_tool())
            .checkpoints(Broken),
    )
    .unwrap();
    let started = std::time::Instant::now();
    a.generate("go", &AgentState::initial()).await.unwrap();
    // Two saves of 200 ms each would take 400 ms if awaited.
    assert!(
        started.elapsed() < std::time::Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    a.flush_checkpoints().await;
    // Sync mode, by contrast, waits.
    let a = agent(
        AgentOptions::new(texts(&["x"]))
            .checkpoints(Broken)
            .checkpoint_mode(CheckpointMode::Sync),
    )
    .unwrap();
    let started = std::time::Instant::now();
    a.generate("go", &AgentState::initial()).await.unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(200));
}

#[tokio::test]
async fn uap_132_session_id_survives_checkpoint_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_checkpoints(dir.path());
    let a = agent(AgentOptions::new(texts(&["one"])).checkpoints(store.clone())).unwrap();
    let session = a.session_id().unwrap().to_owned();
    a.generate("go", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    // A new process: a new agent (with its own generated id) resumes the saved state.
    let restored = store.load(&session).await.unwrap().unwrap().state;
    assert_eq!(restored.session_id(), Some(session.as_str()));
    let b = agent(AgentOptions::new(texts(&["two"])).checkpoints(store.clone())).unwrap();
    assert_ne!(b.session_id(), Some(session.as_str()));
    let r = b.generate("again", &restored).await.unwrap();
    b.flush_checkpoints().await;
    assert_eq!(r.state.session_id(), Some(session.as_str()));
    assert_eq!(store.list().await.unwrap(), vec![session.clone()]);
    assert_eq!(
        store.load_metadata(&session).await.unwrap().unwrap().step,
        2
    );
}

#[tokio::test]
async fn uap_133_restored_state_is_indistinguishable() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_checkpoints(dir.path());
    let a = agent(
        AgentOptions::new(tool_model())
            .tool(add_tool())
            .checkpoints(store.clone())
            .session_id("s"),
    )
    .unwrap();
    let live = a
        .generate("go", &AgentState::initial())
        .await
        .unwrap()
        .state;
    a.flush_checkpoints().await;
    let restored = store.load("s").await.unwrap().unwrap().state;
    assert_eq!(restored, live);
    let next = || {
        agent(
            AgentOptions::new(texts(&["continued"]))
                .checkpoints(Memory::default())
                .session_id("s"),
        )
        .unwrap()
    };
    let from_live = next().generate("Continue", &live).await.unwrap();
    let from_restored = next().generate("Continue", &restored).await.unwrap();
    assert_eq!(content(&from_live.state), content(&from_restored.state));
    assert_eq!(from_live.state.step(), from_restored.state.step());
}

#[tokio::test]
async fn uap_134_failed_saves_never_throw() {
    let a = agent(
        AgentOptions::new(tool_model())
            .tool(add_tool())
            .checkpoints(Broken),
    )
    .unwrap();
    assert!(a.generate("go", &AgentState::initial()).await.is_ok());
    a.flush_checkpoints().await;
}

#[tokio::test]
async fn uap_136_any_store_implementation_is_accepted() {
    let memory = Arc::new(Memory::default());
    let a = agent(
        AgentOptions::new(texts(&["x"]))
            .checkpoints_arc(memory.clone())
            .session_id("custom"),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    assert_eq!(memory.list().await.unwrap(), ["custom"]);
}

#[tokio::test]
async fn uap_137_file_reference_store_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_checkpoints(dir.path());
    let state = AgentState::initial()
        .with_message(weft_provider::Message::user("hi"))
        .with_step(4);
    let checkpoint = Checkpoint {
        metadata: CheckpointMetadata {
            session_id: "s".into(),
            checkpoint_id: "c".into(),
            timestamp: chrono::Utc::now(),
            step: 4,
            agent_id: "a".into(),
        },
        state: state.clone(),
        pending_tool_calls: vec![weft_provider::ToolCall::new("p", "t", json!({}))],
        completed_tool_calls: vec![],
        usage: None,
    };
    store.save("s", checkpoint.clone()).await.unwrap();
    assert_eq!(store.load("s").await.unwrap().unwrap(), checkpoint);
    assert!(matches!(
        store.save("../evil", checkpoint.clone()).await,
        Err(CheckpointError::InvalidSessionId(_))
    ));
    assert!(store.load("a/b").await.is_err());
    // A corrupt file is a clear error, not a panic.
    std::fs::write(store.checkpoint_path("s"), b"{not json").unwrap();
    assert!(matches!(
        store.load("s").await,
        Err(CheckpointError::Corrupt { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uap_138_concurrent_access_is_safe() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_checkpoints(dir.path());
    let mut tasks = Vec::new();
    for i in 0..40u64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let state = AgentState::initial()
                .with_messages((0..50).map(|j| weft_provider::Message::user(format!("{i}-{j}"))))
                .with_step(i);
            let checkpoint = Checkpoint {
                metadata: CheckpointMetadata {
                    session_id: "shared".into(),
                    checkpoint_id: format!("{i}"),
                    timestamp: chrono::Utc::now(),
                    step: i,
                    agent_id: "a".into(),
                },
                state: state.clone(),
                pending_tool_calls: vec![],
                completed_tool_calls: vec![],
                usage: None,
            };
            store.save("shared", checkpoint).await.unwrap();
            // Readers never see a torn file (decoding validates the state).
            store.load("shared").await.unwrap().unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let names: Vec<String> = std::fs::read_dir(dir.path().join("shared"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no temporary files left: {names:?}");
}

#[cfg(feature = "compression")]
#[tokio::test]
async fn uap_139_compression_codec() {
    use weft_agent::checkpoint::GzipCodec;
    let dir = tempfile::tempdir().unwrap();
    let store = file_checkpoints(dir.path()).with_codec(GzipCodec::default());
    let a = agent(
        AgentOptions::new(texts(&["x"]))
            .checkpoints(store.clone())
            .session_id("z"),
    )
    .unwrap();
    let state = AgentState::initial()
        .with_messages((0..200).map(|i| weft_provider::Message::user(format!("same text {i}"))));
    let r = a.generate("go", &state).await.unwrap();
    a.flush_checkpoints().await;
    let path = store.checkpoint_path("z");
    assert!(path.to_string_lossy().ends_with("checkpoint.json.gz"));
    let compressed = std::fs::metadata(&path).unwrap().len();
    let plain = serde_json::to_vec(&r.state.to_json()).unwrap().len() as u64;
    assert!(compressed * 3 < plain, "{compressed} vs {plain}");
    let restored = store.load("z").await.unwrap().unwrap().state;
    assert_eq!(restored, r.state);
    assert_eq!(store.list().await.unwrap(), ["z"]);
}

/// A checkpoint file that cannot be read is an error naming the file (and the codec that
/// decoded it), never "no checkpoint": a session must not silently start over.
#[cfg(feature = "compression")]
#[tokio::test]
async fn a_checkpoint_that_cannot_be_read_is_an_error_that_names_its_file_and_codec() {
    use weft_agent::checkpoint::{CheckpointCodec as _, GzipCodec};
    let dir = tempfile::tempdir().unwrap();
    let gzip = file_checkpoints(dir.path()).with_codec(GzipCodec::default());
    let path = gzip.checkpoint_path("g");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // Compressed, but not a checkpoint.
    let text = GzipCodec::default().encode(b"not json".to_vec()).unwrap();
    std::fs::write(&path, text).unwrap();
    let error = gzip.load("g").await.unwrap_err().to_string();
    assert!(error.contains(&*path.to_string_lossy()), "{error}");
    assert!(error.contains("as the gzip codec decoded it"), "{error}");
    // Not even compressed.
    std::fs::write(&path, b"plain").unwrap();
    let error = gzip.load("g").await.unwrap_err();
    assert!(
        matches!(&error, CheckpointError::Codec { codec, .. } if codec == "gzip"),
        "{error}"
    );
    // Stored as it is: the parser's message alone.
    let plain = file_checkpoints(dir.path());
    let path = plain.checkpoint_path("p");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"not json").unwrap();
    let error = plain.load("p").await.unwrap_err().to_string();
    assert!(error.contains(&*path.to_string_lossy()), "{error}");
    assert!(!error.contains("codec"), "{error}");
    // Something there that cannot be read is not "no checkpoint".
    let path = plain.checkpoint_path("d");
    std::fs::create_dir_all(&path).unwrap();
    assert!(plain.load("d").await.is_err());
    assert!(plain.load("nothing-here").await.unwrap().is_none());
}

/// The file store lists only sessions that have a checkpoint, and what it cannot read or
/// remove is an error, not an empty answer.
#[tokio::test]
async fn the_file_store_lists_only_checkpoints_and_reports_what_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_checkpoints(dir.path().join("cp"));
    let a = agent(
        AgentOptions::new(texts(&["x"]))
            .checkpoints(store.clone())
            .session_id("kept"),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    // A folder without a checkpoint (a session being written, something else's) and a
    // checkpoint-named file under a name no session has are not sessions.
    std::fs::create_dir_all(store.dir().join("empty")).unwrap();
    std::fs::create_dir_all(store.dir().join("bad name")).unwrap();
    std::fs::write(store.dir().join("bad name/checkpoint.json"), b"{}").unwrap();
    assert_eq!(store.list().await.unwrap(), ["kept"]);
    // A file where a session's folder would be cannot be deleted as a session.
    std::fs::write(store.dir().join("stray"), b"x").unwrap();
    assert!(store.delete("stray").await.is_err());
    store.delete("kept").await.unwrap();
    store.delete("kept").await.unwrap();
    assert!(store.list().await.unwrap().is_empty());
    // A store whose folder is a file: listing fails, where a missing folder lists nothing.
    std::fs::write(dir.path().join("not-a-dir"), b"x").unwrap();
    assert!(
        file_checkpoints(dir.path().join("not-a-dir"))
            .list()
            .await
            .is_err()
    );
    assert!(
        file_checkpoints(dir.path().join("missing"))
            .list()
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn uap_145_codecs_allow_encryption_at_rest() {
    // A toy XOR codec stands in for real encryption: the bytes on disk are not plain JSON.
    #[derive(Debug)]
    struct Xor;
    impl weft_agent::checkpoint::CheckpointCodec for Xor {
        fn name(&self) -> &str {
            "xor"
        }
        fn extension(&self) -> &str {
            ".enc"
        }
        fn encode(&self, b: Vec<u8>) -> Result<Vec<u8>, CheckpointError> {
            Ok(b.into_iter().map(|x| x ^ 0x5a).collect())
        }
        fn decode(&self, b: Vec<u8>) -> Result<Vec<u8>, CheckpointError> {
            self.encode(b)
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let store = file_checkpoints(dir.path()).with_codec(Xor);
    let a = agent(
        AgentOptions::new(texts(&["secret"]))
            .checkpoints(store.clone())
            .session_id("e"),
    )
    .unwrap();
    let r = a.generate("go", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    let raw = std::fs::read(store.checkpoint_path("e")).unwrap();
    assert!(!String::from_utf8_lossy(&raw).contains("secret"));
    assert_eq!(store.load("e").await.unwrap().unwrap().state, r.state);
}

#[tokio::test]
async fn traces_are_in_checkpoints() {
    // UAP-095/096 through a checkpoint.
    let explorer = agent(AgentOptions::new(texts(&["found"]))).unwrap();
    let tool = SubagentTool::new(
        "explore",
        "d",
        json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        explorer,
    )
    .build();
    let memory = Arc::new(Memory::default());
    let a = agent(
        AgentOptions::new(script(vec![
            call("p", "explore", json!({"query": "x"})),
            text("done"),
        ]))
        .tool(tool)
        .checkpoints_arc(memory.clone())
        .session_id("t"),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    let first = memory.saves.lock().unwrap()[0].1.clone();
    let restored = first.state;
    assert_eq!(restored.subagent_traces().count(), 1);
}

#[tokio::test]
async fn query_leaves_no_checkpoint() {
    let memory = Arc::new(Memory::default());
    let a = agent(AgentOptions::new(texts(&["x"])).checkpoints_arc(memory.clone())).unwrap();
    a.query("go").await.unwrap();
    a.flush_checkpoints().await;
    assert!(memory.saves.lock().unwrap().is_empty());
}

/// Many conversations on one agent, at once: each gets its own session, and each session's
/// checkpoints hold only its own conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_conversations_on_one_agent_never_mix() {
    let store = Arc::new(Slow::default());
    let a = echo_agent(store.clone());
    let runs = (0..8).map(|i| {
        let a = a.clone();
        async move {
            a.generate(format!("conversation {i}"), &AgentState::initial())
                .await
                .unwrap()
        }
    });
    let results = futures_util::future::join_all(runs).await;
    a.flush_checkpoints().await;
    let sessions: std::collections::HashSet<_> = results
        .iter()
        .map(|r| r.state.session_id().unwrap().to_owned())
        .collect();
    assert_eq!(sessions.len(), 8, "every conversation has its own session");
    for (i, result) in results.iter().enumerate() {
        let session = result.state.session_id().unwrap();
        let saved = store.load(session).await.unwrap().unwrap();
        let texts: Vec<String> = saved.state.messages().map(|m| m.text()).collect();
        assert_eq!(
            texts,
            [format!("conversation {i}"), format!("re: conversation {i}")],
            "session {session} holds another conversation"
        );
    }
}

#[path = "common/states.rs"]
mod states;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, .. proptest::prelude::ProptestConfig::default() })]

    /// Generated checkpoints (every message kind and content block, metadata, reasoning,
    /// plans, sub-agent traces, pending and completed calls, usage) load back equal from the
    /// file store, plain and gzip-compressed.
    #[test]
    fn uap_137_prop_file_checkpoints_load_back_equal(
        checkpoint in proptest::strategy::Strategy::prop_flat_map(states::state(16), |state| states::checkpoint_of("session-1", state)),
        gzip in proptest::prelude::any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = if gzip {
            file_checkpoints(dir.path()).with_codec(weft_agent::checkpoint::GzipCodec::default())
        } else {
            file_checkpoints(dir.path())
        };
        let (loaded, metadata) = runtime.block_on(async {
            store.save("session-1", checkpoint.clone()).await.unwrap();
            (store.load("session-1").await.unwrap(), store.load_metadata("session-1").await.unwrap())
        });
        proptest::prop_assert_eq!(loaded.as_ref(), Some(&checkpoint));
        proptest::prop_assert_eq!(metadata.as_ref(), Some(&checkpoint.metadata));
    }
}

/// A store whose saves of a conversation that last said "slow" take a minute (under paused
/// time, a minute nobody waits for); every other save is [`Memory`]'s.
#[derive(Debug, Default)]
struct Slow(Memory);

#[async_trait]
impl CheckpointStore for Slow {
    async fn save(&self, session_id: &str, checkpoint: Checkpoint) -> Result<(), CheckpointError> {
        let last_said = checkpoint
            .state
            .messages()
            .rev()
            .find(|m| matches!(&**m, weft_provider::Message::User(_)))
            .map(|m| m.text());
        if last_said.as_deref() == Some("slow") {
            tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        }
        self.0.save(session_id, checkpoint).await
    }
    async fn load(&self, session_id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        self.0.load(session_id).await
    }
    async fn load_metadata(
        &self,
        session_id: &str,
    ) -> Result<Option<CheckpointMetadata>, CheckpointError> {
        self.0.load_metadata(session_id).await
    }
    async fn delete(&self, session_id: &str) -> Result<(), CheckpointError> {
        self.0.delete(session_id).await
    }
    async fn list(&self) -> Result<Vec<String>, CheckpointError> {
        self.0.list().await
    }
}

/// An agent answering `re: ` and the last user message, saving to `store` in the background.
fn echo_agent(store: Arc<Slow>) -> weft_agent::Agent {
    let echo = weft_provider::adapters::scripted::function_model(|request| {
        let last = request
            .messages()
            .rev()
            .find(|m| matches!(m, weft_provider::Message::User(_)))
            .map(weft_provider::Message::text)
            .unwrap_or_default();
        Ok(weft_provider::adapters::scripted::ScriptedResponse::text(
            format!("re: {last}"),
        ))
    });
    agent(
        AgentOptions::new(echo)
            .checkpoints_arc(store)
            .checkpoint_mode(weft_agent::checkpoint::CheckpointMode::Async),
    )
    .unwrap()
}

/// `flush_checkpoints` waits for every save in flight, a slow one of another conversation
/// included.
#[tokio::test(start_paused = true)]
async fn a_flush_waits_for_every_save_in_flight() {
    let store = Arc::new(Slow::default());
    let a = echo_agent(store.clone());
    let slow = a.generate("slow", &AgentState::initial()).await.unwrap();
    let fast = a.generate("fast", &AgentState::initial()).await.unwrap();
    a.flush_checkpoints().await;
    for run in [slow, fast] {
        let session = run.state.session_id().unwrap();
        assert!(
            store.load(session).await.unwrap().is_some(),
            "{session} not saved"
        );
    }
}

/// Two saves of one conversation land in order even while the agent forgets idle
/// conversations (it keeps at most ~1,024): the older, slower save never overwrites the newer.
#[tokio::test(start_paused = true)]
async fn an_older_save_never_overwrites_a_newer_one_of_the_same_conversation() {
    let store = Arc::new(Slow::default());
    let a = echo_agent(store.clone());
    // As many idle conversations as the agent remembers (1,024, each saved before the next
    // starts): with the slow one, the next save finds one too many and forgets the idle ones.
    for i in 0..1024 {
        a.generate(format!("filler {i}"), &AgentState::initial())
            .await
            .unwrap();
        a.flush_checkpoints().await;
    }
    let older = a.generate("slow", &AgentState::initial()).await.unwrap();
    // Another conversation's save: the agent forgets idle conversations now — not this one,
    // whose save is still in flight.
    a.generate("another", &AgentState::initial()).await.unwrap();
    let newer = a.generate("newer", &older.state).await.unwrap();
    a.flush_checkpoints().await;
    let session = newer.state.session_id().unwrap();
    let saved = store.load(session).await.unwrap().unwrap();
    assert_eq!(saved.state, newer.state);
}
