//! `fileCheckpoints()`: the file-based reference store (UAP-1.0 §12.4.3).
//!
//! Layout:
//!
//! ```text
//! {dir}/
//!   {sessionId}/
//!     checkpoint.json     latest checkpoint (state + metadata); `checkpoint.json.gz` with GzipCodec
//!     metadata.json       its metadata
//! ```
//!
//! Every file is written atomically: to a unique temporary file in the same directory,
//! `fsync`ed, renamed over the old file, and the directory `fsync`ed. A crash leaves either the
//! old or the new file, never a torn one. `checkpoint.json` is written before
//! `metadata.json`; if the two disagree after a crash, `checkpoint.json` (which embeds its
//! metadata) is authoritative for `load`. Saves of one session are serialized in-process;
//! across processes the last rename wins. All I/O runs on tokio's blocking pool.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::codec::{CheckpointCodec, IdentityCodec};
use super::{
    Checkpoint, CheckpointError, CheckpointMetadata, CheckpointStore, validate_session_id,
};

const CHECKPOINT_FILE: &str = "checkpoint.json";
const METADATA_FILE: &str = "metadata.json";

/// Options of [`file_checkpoints`] (`dir` defaults to `.checkpoints`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCheckpointOptions {
    /// Directory holding one folder per session.
    pub dir: PathBuf,
}

impl Default for FileCheckpointOptions {
    fn default() -> Self {
        FileCheckpointOptions {
            dir: PathBuf::from(".checkpoints"),
        }
    }
}

/// The file checkpoint store.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use weft_agent::checkpoint::{file_checkpoints, CheckpointStore};
///
/// let dir = std::env::temp_dir().join(format!("weft-doc-{}", std::process::id()));
/// let store = file_checkpoints(&dir);
/// assert!(store.load("no-such-session").await?.is_none());
/// assert!(store.list().await?.is_empty());
/// # let _ = std::fs::remove_dir_all(&dir);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct FileCheckpoints {
    dir: PathBuf,
    codec: Arc<dyn CheckpointCodec>,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// A file store in `dir`.
pub fn file_checkpoints(dir: impl Into<PathBuf>) -> FileCheckpoints {
    FileCheckpoints::new(FileCheckpointOptions { dir: dir.into() })
}

impl Default for FileCheckpoints {
    fn default() -> Self {
        FileCheckpoints::new(FileCheckpointOptions::default())
    }
}

fn io_error(path: &Path, error: &io::Error) -> CheckpointError {
    CheckpointError::Io {
        path: path.display().to_string(),
        message: error.to_string(),
    }
}

fn join_error(error: tokio::task::JoinError) -> CheckpointError {
    CheckpointError::Backend(format!("checkpoint I/O task failed: {error}"))
}

/// Writes `bytes` to `path` atomically (temp file, fsync, rename, fsync directory).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        #[cfg(unix)]
        fs::File::open(dir)?.sync_all()?;
        Ok(())
    })();
    result.map_err(|e: io::Error| {
        let _ = fs::remove_file(&tmp);
        io_error(path, &e)
    })
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, CheckpointError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, &e)),
    }
}

impl FileCheckpoints {
    /// A store with `options`, storing plain JSON.
    pub fn new(options: FileCheckpointOptions) -> Self {
        FileCheckpoints {
            dir: options.dir,
            codec: Arc::new(IdentityCodec),
            locks: Arc::default(),
        }
    }

    /// Encodes checkpoint files with `codec` (e.g. `GzipCodec`, or your encryption).
    #[must_use]
    pub fn with_codec(mut self, codec: impl CheckpointCodec + 'static) -> Self {
        self.codec = Arc::new(codec);
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The checkpoint file of a session (with the codec's extension).
    pub fn checkpoint_path(&self, session_id: &str) -> PathBuf {
        self.dir
            .join(session_id)
            .join(format!("{CHECKPOINT_FILE}{}", self.codec.extension()))
    }

    /// The metadata file of a session.
    pub fn metadata_path(&self, session_id: &str) -> PathBuf {
        self.dir.join(session_id).join(METADATA_FILE)
    }

    fn lock_for(&self, session_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(session_id.to_owned()).or_default().clone()
    }
}

#[async_trait]
impl CheckpointStore for FileCheckpoints {
    async fn save(&self, session_id: &str, checkpoint: Checkpoint) -> Result<(), CheckpointError> {
        validate_session_id(session_id)?;
        let lock = self.lock_for(session_id);
        let _guard = lock.lock().await;
        let checkpoint_path = self.checkpoint_path(session_id);
        let metadata_path = self.metadata_path(session_id);
        let codec = self.codec.clone();
        tokio::task::spawn_blocking(move || {
            let state = serde_json::to_vec(&checkpoint).map_err(|e| CheckpointError::Corrupt {
                path: checkpoint_path.display().to_string(),
                message: e.to_string(),
            })?;
            let metadata = serde_json::to_vec_pretty(&checkpoint.metadata).map_err(|e| {
                CheckpointError::Corrupt {
                    path: metadata_path.display().to_string(),
                    message: e.to_string(),
                }
            })?;
            if let Some(dir) = checkpoint_path.parent() {
                fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
            }
            write_atomic(&checkpoint_path, &codec.encode(state)?)?;
            write_atomic(&metadata_path, &metadata)
        })
        .await
        .map_err(join_error)?
    }

    async fn load(&self, session_id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        validate_session_id(session_id)?;
        let path = self.checkpoint_path(session_id);
        let codec = self.codec.clone();
        tokio::task::spawn_blocking(move || {
            let Some(bytes) = read_optional(&path)? else {
                return Ok(None);
            };
            let bytes = codec.decode(bytes)?;
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| CheckpointError::Corrupt {
                    path: path.display().to_string(),
                    // What a codec gave back (a wrong key decrypts to garbage) is named.
                    message: if codec.name() == "identity" {
                        e.to_string()
                    } else {
                        format!("{e} (as the {} codec decoded it)", codec.name())
                    },
                })
        })
        .await
        .map_err(join_error)?
    }

    async fn load_metadata(
        &self,
        session_id: &str,
    ) -> Result<Option<CheckpointMetadata>, CheckpointError> {
        validate_session_id(session_id)?;
        let path = self.metadata_path(session_id);
        tokio::task::spawn_blocking(move || {
            let Some(bytes) = read_optional(&path)? else {
                return Ok(None);
            };
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| CheckpointError::Corrupt {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })
        })
        .await
        .map_err(join_error)?
    }

    async fn delete(&self, session_id: &str) -> Result<(), CheckpointError> {
        validate_session_id(session_id)?;
        let lock = self.lock_for(session_id);
        let _guard = lock.lock().await;
        let dir = self.dir.join(session_id);
        tokio::task::spawn_blocking(move || match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error(&dir, &e)),
        })
        .await
        .map_err(join_error)?
    }

    async fn list(&self) -> Result<Vec<String>, CheckpointError> {
        let dir = self.dir.clone();
        let file = format!("{CHECKPOINT_FILE}{}", self.codec.extension());
        tokio::task::spawn_blocking(move || {
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(io_error(&dir, &e)),
            };
            let mut sessions = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| io_error(&dir, &e))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if validate_session_id(&name).is_ok() && entry.path().join(&file).is_file() {
                    sessions.push(name);
                }
            }
            sessions.sort();
            Ok(sessions)
        })
        .await
        .map_err(join_error)?
    }
}
