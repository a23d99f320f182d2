//! Thread variables (Standard Agents `VariableDefinition`s given a value for one thread) and
//! the requests that wait for variables before they boot deferred work.
//!
//! * [`ThreadVariables`]: a thread's own values, `text` or `secret`. A **secret** is stored
//!   encrypted (ChaCha20-Poly1305 with a random 96-bit nonce, the thread id and the name as
//!   associated data, so a ciphertext moved to another row does not decrypt), as
//!   `v1:` + base64url(nonce ‖ ciphertext ‖ tag); its plain text is never written. Every
//!   secret value this process sets or reads is added to the store's redactor, so it never
//!   reaches the event log, the tool ledger or checkpoints.
//! * The key ([`SecretKey`]): `WEFT_SECRET_KEY` (32 bytes in base64), else the file named by
//!   `WEFT_SECRET_KEY_FILE`, else — for a SQLite store — `weft-secret.key` beside the
//!   database file, created (mode 0600, 32 random bytes in base64) the first time a secret is
//!   set. A PostgreSQL store has no file beside it: set one of the two variables.
//!   [`Store::set_secret_key`] gives a key directly (embedders, tests).
//! * [`VariableRequests`]: a request for variables (its id, the parent thread, the agent it
//!   boots, the original creation payload, the missing names), `pending` until its values are
//!   posted and it is completed.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{StoreError, corrupt};
use crate::model::now_string;
use crate::sql::{Row, stmt};
use crate::store::{Store, StoreUrl};

/// The variable holding the key (32 bytes, base64).
pub const SECRET_KEY_ENV: &str = "WEFT_SECRET_KEY";
/// The variable naming the key file.
pub const SECRET_KEY_FILE_ENV: &str = "WEFT_SECRET_KEY_FILE";
/// The key file's name beside a SQLite database.
pub const SECRET_KEY_FILE: &str = "weft-secret.key";

/// The prefix of a stored ciphertext (its format's version).
const SEALED_PREFIX: &str = "v1:";

/// Whether a variable's value is plain text or a secret (agents tools §3 `type`).
///
/// ```
/// let kind: weft_store::VariableKind = "secret".parse()?;
/// assert_eq!(kind.as_str(), "secret");
/// # Ok::<(), weft_store::StoreError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VariableKind {
    /// Stored and listed as given.
    #[default]
    Text,
    /// Encrypted at rest, never listed, redacted wherever it appears.
    Secret,
}

impl VariableKind {
    /// `text` or `secret`.
    pub fn as_str(self) -> &'static str {
        match self {
            VariableKind::Text => "text",
            VariableKind::Secret => "secret",
        }
    }
}

impl fmt::Display for VariableKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for VariableKind {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(VariableKind::Text),
            "secret" => Ok(VariableKind::Secret),
            other => Err(StoreError::Invalid(format!(
                "variable type {other:?}: use text or secret"
            ))),
        }
    }
}

/// A thread's variable as listed: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VariableRecord {
    /// The thread.
    pub thread_id: String,
    /// The variable's name.
    pub name: String,
    /// `text` or `secret`.
    pub kind: VariableKind,
    /// When it was last set.
    pub updated_at: String,
}

/// A variable's value, read back (decrypted when secret). `Debug` hides a secret.
#[derive(Clone, PartialEq, Eq)]
pub struct VariableValue {
    /// `text` or `secret`.
    pub kind: VariableKind,
    /// The value.
    pub value: String,
}

impl fmt::Debug for VariableValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = match self.kind {
            VariableKind::Text => self.value.as_str(),
            VariableKind::Secret => "<secret>",
        };
        f.debug_struct("VariableValue")
            .field("kind", &self.kind)
            .field("value", &value)
            .finish()
    }
}

/// The 256-bit key secret variables are encrypted with. `Debug` never shows it.
#[derive(Clone)]
pub struct SecretKey([u8; 32]);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl SecretKey {
    /// A new random key.
    ///
    /// # Errors
    /// [`StoreError::Random`].
    pub fn generate() -> Result<SecretKey, StoreError> {
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| StoreError::Random)?;
        Ok(SecretKey(bytes))
    }

    /// The key written as text (base64, what the key file and `WEFT_SECRET_KEY` hold).
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// Parses a key written as base64 (standard or URL-safe, padded or not).
    ///
    /// ```
    /// let key = weft_store::SecretKey::generate()?;
    /// let again = weft_store::SecretKey::from_base64(&key.to_base64())?;
    /// assert_eq!(again.to_base64(), key.to_base64());
    /// assert!(weft_store::SecretKey::from_base64("short").is_err());
    /// # Ok::<(), weft_store::StoreError>(())
    /// ```
    ///
    /// # Errors
    /// [`StoreError::SecretKey`] when it is not 32 bytes in base64.
    pub fn from_base64(text: &str) -> Result<SecretKey, StoreError> {
        let text = text.trim();
        let bytes = STANDARD
            .decode(text)
            .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')))
            .map_err(|_| StoreError::SecretKey("the key is not base64".to_owned()))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| {
            StoreError::SecretKey("the key is not 32 bytes (256 bits) in base64".to_owned())
        })?;
        Ok(SecretKey(bytes))
    }

    fn sealing(&self) -> Result<LessSafeKey, StoreError> {
        UnboundKey::new(&CHACHA20_POLY1305, &self.0)
            .map(LessSafeKey::new)
            .map_err(|_| StoreError::SecretKey("the key cannot be used".to_owned()))
    }

    /// Encrypts `value` bound to (`thread`, `name`).
    fn seal(&self, thread: &str, name: &str, value: &str) -> Result<String, StoreError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| StoreError::Random)?;
        let mut data = value.as_bytes().to_vec();
        self.sealing()?
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(associated(thread, name)),
                &mut data,
            )
            .map_err(|_| StoreError::SecretKey("encryption failed".to_owned()))?;
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&data);
        Ok(format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(sealed)))
    }

    /// Decrypts what [`SecretKey::seal`] made for (`thread`, `name`).
    fn open(&self, thread: &str, name: &str, sealed: &str) -> Result<String, StoreError> {
        let wrong = || {
            StoreError::SecretKey(format!(
                "the secret {name:?} of thread {thread:?} does not decrypt with this key \
                 (another {SECRET_KEY_ENV} or key file was used to set it)"
            ))
        };
        let bytes = sealed
            .strip_prefix(SEALED_PREFIX)
            .and_then(|text| URL_SAFE_NO_PAD.decode(text).ok())
            .ok_or_else(|| corrupt("thread_variables", "a secret is not in the v1 format"))?;
        if bytes.len() < NONCE_LEN {
            return Err(corrupt("thread_variables", "a secret is too short"));
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| wrong())?;
        let mut data = data.to_vec();
        let plain = self
            .sealing()?
            .open_in_place(nonce, Aad::from(associated(thread, name)), &mut data)
            .map_err(|_| wrong())?;
        String::from_utf8(plain.to_vec()).map_err(|_| wrong())
    }
}

fn associated(thread: &str, name: &str) -> Vec<u8> {
    let mut aad = thread.as_bytes().to_vec();
    aad.push(0);
    aad.extend_from_slice(name.as_bytes());
    aad
}

/// Where the key of a store at `location` comes from, and whether it may be created there.
fn key_source(location: &str) -> Result<(PathBuf, bool), StoreError> {
    if let Ok(path) = std::env::var(SECRET_KEY_FILE_ENV)
        && !path.trim().is_empty()
    {
        return Ok((PathBuf::from(path), true));
    }
    match StoreUrl::parse(location) {
        Ok(StoreUrl::Sqlite(path)) if path.as_os_str() != ":memory:" => {
            let dir = path.parent().unwrap_or_else(|| Path::new("."));
            Ok((dir.join(SECRET_KEY_FILE), true))
        }
        _ => Err(StoreError::SecretKey(format!(
            "this store has no folder for a key file: set {SECRET_KEY_ENV} (32 random bytes in base64, e.g. \
             `openssl rand -base64 32`) or {SECRET_KEY_FILE_ENV} (a file holding such a key)"
        ))),
    }
}

/// Reads the key of the store at `location`; creates the key file (0600) when `create` and it
/// does not exist. `Ok(None)`: no key, and none may be created.
pub(crate) fn load_key(location: &str, create: bool) -> Result<Option<SecretKey>, StoreError> {
    if let Ok(text) = std::env::var(SECRET_KEY_ENV)
        && !text.trim().is_empty()
    {
        return SecretKey::from_base64(&text)
            .map(Some)
            .map_err(|e| StoreError::SecretKey(format!("{SECRET_KEY_ENV}: {e}")));
    }
    let (path, may_create) = key_source(location)?;
    let io = |e: std::io::Error| StoreError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => SecretKey::from_base64(&text)
            .map(Some)
            .map_err(|e| StoreError::SecretKey(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create && may_create => {
            let key = SecretKey::generate()?;
            write_private(&path, &key.to_base64()).map_err(io)?;
            Ok(Some(key))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(e)),
    }
}

/// Writes `text` to a new file only its owner may read (mode 0600 on Unix).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// A variable name: a letter or `_`, then letters, digits and `_` (at most 128).
fn check_name(name: &str) -> Result<(), StoreError> {
    let mut chars = name.chars();
    let first = chars.next();
    let ok = name.len() <= 128
        && first.is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "variable name {name:?}: use letters, digits and _, starting with a letter or _"
        )))
    }
}

/// A thread's own variable values, durable, secrets encrypted.
///
/// # Examples
///
/// ```
/// # async fn demo() -> Result<(), weft_store::StoreError> {
/// use weft_store::{SecretKey, Store, ThreadVariables as _, VariableKind};
/// let store = Store::open("sqlite::memory:").await?;
/// store.set_secret_key(SecretKey::generate()?);
/// store.set_variable("t1", "REGION", "eu-west-1", VariableKind::Text).await?;
/// store.set_variable("t1", "API_TOKEN", "tok-123456789", VariableKind::Secret).await?;
/// let values = store.variable_values("t1").await?;
/// assert_eq!(values["API_TOKEN"].value, "tok-123456789");
/// assert_eq!(store.thread_variables("t1").await?.len(), 2);
/// assert!(store.unset_variable("t1", "REGION").await?);
/// # Ok(()) }
/// ```
#[async_trait]
pub trait ThreadVariables: Send + Sync {
    /// Sets `name` on `thread` (replacing any value). A secret is encrypted first (the key
    /// file is created if needed).
    ///
    /// # Errors
    /// A bad name, [`StoreError::SecretKey`], database failures.
    async fn set_variable(
        &self,
        thread: &str,
        name: &str,
        value: &str,
        kind: VariableKind,
    ) -> Result<VariableRecord, StoreError>;

    /// Removes `name` from `thread`; whether it was set.
    ///
    /// # Errors
    /// Database failures.
    async fn unset_variable(&self, thread: &str, name: &str) -> Result<bool, StoreError>;

    /// The variables set on `thread` (names and kinds, never values), by name.
    ///
    /// # Errors
    /// Database failures.
    async fn thread_variables(&self, thread: &str) -> Result<Vec<VariableRecord>, StoreError>;

    /// The values set on `thread`, secrets decrypted (and added to the redactor).
    ///
    /// # Errors
    /// [`StoreError::SecretKey`] when a secret is stored and the key is missing or wrong;
    /// database failures.
    async fn variable_values(
        &self,
        thread: &str,
    ) -> Result<BTreeMap<String, VariableValue>, StoreError>;
}

#[async_trait]
impl ThreadVariables for Store {
    async fn set_variable(
        &self,
        thread: &str,
        name: &str,
        value: &str,
        kind: VariableKind,
    ) -> Result<VariableRecord, StoreError> {
        check_name(name)?;
        if thread.trim().is_empty() {
            return Err(StoreError::Invalid("the thread id is empty".to_owned()));
        }
        let stored = match kind {
            VariableKind::Text => value.to_owned(),
            VariableKind::Secret => {
                let key = self.secret_key(true)?.ok_or_else(|| {
                    StoreError::SecretKey("no key to encrypt the secret with".to_owned())
                })?;
                self.add_known_secret(value);
                key.seal(thread, name, value)?
            }
        };
        let record = VariableRecord {
            thread_id: thread.to_owned(),
            name: name.to_owned(),
            kind,
            updated_at: now_string(),
        };
        self.write_now(vec![stmt!(
            "INSERT INTO thread_variables (thread_id, name, kind, value, updated_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (thread_id, name) DO UPDATE SET kind = excluded.kind, value = excluded.value, \
             updated_at = excluded.updated_at",
            thread,
            name,
            kind.as_str(),
            stored.as_str(),
            record.updated_at.as_str()
        )])
        .await?;
        Ok(record)
    }

    async fn unset_variable(&self, thread: &str, name: &str) -> Result<bool, StoreError> {
        let existed = !self
            .query(stmt!(
                "SELECT name FROM thread_variables WHERE thread_id = $1 AND name = $2",
                thread,
                name
            ))
            .await?
            .is_empty();
        self.write_now(vec![stmt!(
            "DELETE FROM thread_variables WHERE thread_id = $1 AND name = $2",
            thread,
            name
        )])
        .await?;
        Ok(existed)
    }

    async fn thread_variables(&self, thread: &str) -> Result<Vec<VariableRecord>, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT thread_id, name, kind, updated_at FROM thread_variables WHERE thread_id = $1 ORDER BY name",
                thread
            ))
            .await?;
        rows.iter()
            .map(|row| {
                Ok(VariableRecord {
                    thread_id: row.text(0)?,
                    name: row.text(1)?,
                    kind: row
                        .text(2)?
                        .parse()
                        .map_err(|_| corrupt("thread_variables", "unknown kind"))?,
                    updated_at: row.text(3)?,
                })
            })
            .collect()
    }

    async fn variable_values(
        &self,
        thread: &str,
    ) -> Result<BTreeMap<String, VariableValue>, StoreError> {
        let rows = self
            .query(stmt!(
                "SELECT name, kind, value FROM thread_variables WHERE thread_id = $1 ORDER BY name",
                thread
            ))
            .await?;
        let mut values = BTreeMap::new();
        for row in &rows {
            let name = row.text(0)?;
            let kind: VariableKind = row
                .text(1)?
                .parse()
                .map_err(|_| corrupt("thread_variables", "unknown kind"))?;
            let stored = row.text(2)?;
            let value = match kind {
                VariableKind::Text => stored,
                VariableKind::Secret => {
                    let key = self.secret_key(false)?.ok_or_else(|| {
                        StoreError::SecretKey(format!(
                            "thread {thread:?} has the secret {name:?} but its key is missing (set {SECRET_KEY_ENV} \
                             or {SECRET_KEY_FILE_ENV}, or restore {SECRET_KEY_FILE} beside the database)"
                        ))
                    })?;
                    let plain = key.open(thread, &name, &stored)?;
                    self.add_known_secret(&plain);
                    plain
                }
            };
            values.insert(name, VariableValue { kind, value });
        }
        Ok(values)
    }
}

/// Whether a [`VariableRequest`] still waits for values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestStatus {
    /// Waiting for its variables.
    Pending,
    /// Its values were posted and its work booted.
    Completed,
}

impl RequestStatus {
    fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Pending => "pending",
            RequestStatus::Completed => "completed",
        }
    }
}

/// Deferred work waiting for variables: what boots when they are given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VariableRequest {
    /// Its id (`vr-` and 16 hex digits).
    pub id: String,
    /// The thread whose work it is (the parent of the subagent it boots).
    pub parent_thread_id: String,
    /// The agent it boots.
    pub agent: String,
    /// The original creation payload (the call's arguments and what the booting code needs).
    pub payload: Value,
    /// The variables that were missing when it was made.
    pub missing: Vec<String>,
    /// Pending or completed.
    pub status: RequestStatus,
    /// When it was made.
    pub created_at: String,
    /// When it was completed.
    pub completed_at: Option<String>,
}

impl VariableRequest {
    fn from_row(row: &Row) -> Result<Self, StoreError> {
        let json =
            |text: String| serde_json::from_str(&text).map_err(|e| corrupt("variable_requests", e));
        Ok(VariableRequest {
            id: row.text(0)?,
            parent_thread_id: row.text(1)?,
            agent: row.text(2)?,
            payload: json(row.text(3)?)?,
            missing: serde_json::from_value(json(row.text(4)?)?)
                .map_err(|e| corrupt("variable_requests", e))?,
            status: match row.text(5)?.as_str() {
                "pending" => RequestStatus::Pending,
                "completed" => RequestStatus::Completed,
                _ => return Err(corrupt("variable_requests", "unknown status")),
            },
            created_at: row.text(6)?,
            completed_at: row.opt_text(7)?,
        })
    }
}

/// Durable [`VariableRequest`]s.
///
/// # Examples
///
/// ```
/// # async fn demo() -> Result<(), weft_store::StoreError> {
/// use weft_store::{Store, VariableRequests as _};
/// let store = Store::open("sqlite::memory:").await?;
/// let request = store
///     .create_variable_request("parent", "researcher", &serde_json::json!({"task": "x"}), &["DB_URL".into()])
///     .await?;
/// assert_eq!(store.variable_request("parent", &request.id).await?, Some(request.clone()));
/// assert_eq!(store.pending_variable_requests("parent").await?, [request.clone()]);
/// assert!(store.complete_variable_request("parent", &request.id).await?);
/// assert!(!store.complete_variable_request("parent", &request.id).await?); // once only
/// # Ok(()) }
/// ```
#[async_trait]
pub trait VariableRequests: Send + Sync {
    /// Records a pending request.
    ///
    /// # Errors
    /// Database failures.
    async fn create_variable_request(
        &self,
        parent_thread: &str,
        agent: &str,
        payload: &Value,
        missing: &[String],
    ) -> Result<VariableRequest, StoreError>;

    /// The request `id` of `parent_thread`.
    ///
    /// # Errors
    /// Database failures.
    async fn variable_request(
        &self,
        parent_thread: &str,
        id: &str,
    ) -> Result<Option<VariableRequest>, StoreError>;

    /// The pending requests of `parent_thread`, oldest first.
    ///
    /// # Errors
    /// Database failures.
    async fn pending_variable_requests(
        &self,
        parent_thread: &str,
    ) -> Result<Vec<VariableRequest>, StoreError>;

    /// Marks the request completed; `true` only for the one caller that completed it (a
    /// request boots its work once).
    ///
    /// # Errors
    /// Database failures.
    async fn complete_variable_request(
        &self,
        parent_thread: &str,
        id: &str,
    ) -> Result<bool, StoreError>;
}

const REQUEST_COLUMNS: &str =
    "id, parent_thread_id, agent, payload, missing, status, created_at, completed_at";

#[async_trait]
impl VariableRequests for Store {
    async fn create_variable_request(
        &self,
        parent_thread: &str,
        agent: &str,
        payload: &Value,
        missing: &[String],
    ) -> Result<VariableRequest, StoreError> {
        let request = VariableRequest {
            id: format!("vr-{:016x}", fastrand::u64(..)),
            parent_thread_id: parent_thread.to_owned(),
            agent: agent.to_owned(),
            payload: payload.clone(),
            missing: missing.to_vec(),
            status: RequestStatus::Pending,
            created_at: now_string(),
            completed_at: None,
        };
        let mut stored_payload = payload.clone();
        self.redact(&mut stored_payload);
        self.write_now(vec![stmt!(
            "INSERT INTO variable_requests (id, parent_thread_id, agent, payload, missing, status, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            request.id.as_str(),
            parent_thread,
            agent,
            stored_payload.to_string(),
            serde_json::json!(missing).to_string(),
            RequestStatus::Pending.as_str(),
            request.created_at.as_str()
        )])
        .await?;
        Ok(request)
    }

    async fn variable_request(
        &self,
        parent_thread: &str,
        id: &str,
    ) -> Result<Option<VariableRequest>, StoreError> {
        let rows = self
            .query(stmt!(
                format!("SELECT {REQUEST_COLUMNS} FROM variable_requests WHERE parent_thread_id = $1 AND id = $2"),
                parent_thread,
                id
            ))
            .await?;
        rows.first().map(VariableRequest::from_row).transpose()
    }

    async fn pending_variable_requests(
        &self,
        parent_thread: &str,
    ) -> Result<Vec<VariableRequest>, StoreError> {
        let rows = self
            .query(stmt!(
                format!("SELECT {REQUEST_COLUMNS} FROM variable_requests WHERE parent_thread_id = $1 AND status = $2 ORDER BY created_at, id"),
                parent_thread,
                RequestStatus::Pending.as_str()
            ))
            .await?;
        rows.iter().map(VariableRequest::from_row).collect()
    }

    async fn complete_variable_request(
        &self,
        parent_thread: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        let Some(request) = self.variable_request(parent_thread, id).await? else {
            return Ok(false);
        };
        if request.status != RequestStatus::Pending {
            return Ok(false);
        }
        // The conditional update marks the request with this caller's claim; reading the
        // claim back says who won (two callers racing: exactly one).
        let claim = format!("c-{:016x}", fastrand::u64(..));
        self.write_now(vec![stmt!(
            "UPDATE variable_requests SET status = $1, completed_at = $2, claimed_by = $3 \
             WHERE parent_thread_id = $4 AND id = $5 AND status = $6",
            RequestStatus::Completed.as_str(),
            now_string(),
            claim.as_str(),
            parent_thread,
            id,
            RequestStatus::Pending.as_str()
        )])
        .await?;
        let rows = self
            .query(stmt!(
                "SELECT claimed_by FROM variable_requests WHERE parent_thread_id = $1 AND id = $2",
                parent_thread,
                id
            ))
            .await?;
        let claimed: Vec<_> = rows
            .iter()
            .filter_map(|row| row.opt_text(0).ok().flatten())
            .filter(|by| *by == claim)
            .collect();
        Ok(!claimed.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_for_its_row_and_key() -> Result<(), StoreError> {
        let key = SecretKey::generate()?;
        let sealed = key.seal("t1", "TOKEN", "hunter2-hunter2")?;
        assert!(!sealed.contains("hunter2"));
        assert_eq!(key.open("t1", "TOKEN", &sealed)?, "hunter2-hunter2");
        assert!(key.open("t2", "TOKEN", &sealed).is_err());
        assert!(key.open("t1", "OTHER", &sealed).is_err());
        assert!(SecretKey::generate()?.open("t1", "TOKEN", &sealed).is_err());
        // Two seals of one value differ (a random nonce each time).
        assert_ne!(sealed, key.seal("t1", "TOKEN", "hunter2-hunter2")?);
        Ok(())
    }

    #[test]
    fn names_are_identifiers() {
        assert!(check_name("API_KEY").is_ok());
        assert!(check_name("_x1").is_ok());
        assert!(check_name("1X").is_err());
        assert!(check_name("A-B").is_err());
        assert!(check_name("").is_err());
    }
}
