//! UAP-135: failed checkpoint saves are logged through `tracing`. Alone in its binary so no
//! other test races the tracing callsite cache.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

mod common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use weft_agent::checkpoint::{
    Checkpoint, CheckpointError, CheckpointMetadata, CheckpointMode, CheckpointStore,
};
use weft_agent::{AgentOptions, AgentState, agent};

use common::*;

#[derive(Debug)]
struct Broken;

#[async_trait]
impl CheckpointStore for Broken {
    async fn save(&self, _: &str, _: Checkpoint) -> Result<(), CheckpointError> {
        Err(CheckpointError::Backend("disk on fire".into()))
    }
    async fn load(&self, _: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        Ok(None)
    }
    async fn load_metadata(&self, _: &str) -> Result<Option<CheckpointMetadata>, CheckpointError> {
        Ok(None)
    }
    async fn delete(&self, _: &str) -> Result<(), CheckpointError> {
        Ok(())
    }
    async fn list(&self) -> Result<Vec<String>, CheckpointError> {
        Ok(vec![])
    }
}

#[tokio::test]
async fn uap_135_failed_saves_are_logged() {
    // Captures tracing output with a minimal subscriber.
    use std::io::Write;
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    struct Collect(Arc<Mutex<Vec<String>>>);
    impl tracing::Subscriber for Collect {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            self.0.lock().unwrap().push(format!(
                "{} {}",
                event.metadata().level(),
                event.metadata().target()
            ));
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }
    let _ = Buffer::default();
    let events = Arc::new(Mutex::new(Vec::new()));
    tracing::subscriber::set_global_default(Collect(events.clone())).unwrap();
    let a = agent(
        AgentOptions::new(texts(&["x"]))
            .checkpoints(Broken)
            .checkpoint_mode(CheckpointMode::Sync),
    )
    .unwrap();
    a.generate("go", &AgentState::initial()).await.unwrap();
    let events = events.lock().unwrap().clone();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("WARN") && e.contains("weft_agent")),
        "{events:?}"
    );
}
