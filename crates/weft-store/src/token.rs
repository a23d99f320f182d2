//! API tokens: the bearer tokens `weft serve` checks on every request (`weft tokens create`,
//! `list`, `revoke`).
//!
//! A token is a random secret (`weft_` and 32 random bytes in unpadded base64url, 48
//! characters) handed to its holder once, when it is created. The store keeps only its
//! SHA-256 (hex) in `api_tokens.secret_hash`, with a short id (`t-` and 8 hex digits), a name,
//! a scope (`full`, or `read`: read routes only), and when it was created, last used and
//! revoked. Checking a presented secret hashes it and looks the hash up: the secret itself is
//! never stored, logged or listed ([`TokenSecret`]'s `Debug` hides it, [`TokenRecord`] has no
//! field for it).
//!
//! **Names.** Two *active* tokens never share a name (a partial unique index on
//! `api_tokens(name) WHERE revoked_at IS NULL`), so `weft tokens revoke NAME` always means one
//! token; the name of a revoked token can be given to a new one (rotation: revoke `ci`, create
//! `ci` again).
//!
//! **Writes per request.** [`Tokens::verify_token`] is one indexed read; it records
//! `last_used_at` at most once a minute per token, as a queued (not awaited) write.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use ring::rand::{SecureRandom as _, SystemRandom};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::error::{StoreError, corrupt};
use crate::model::now_string;
use crate::sql::{Row, stmt};
use crate::store::Store;

/// What every token secret starts with (so a leaked one is recognisable, e.g. by secret scanners).
pub const TOKEN_PREFIX: &str = "weft_";

/// Random bytes in a secret.
const SECRET_BYTES: usize = 32;

/// Characters of a secret: the prefix and 32 bytes in unpadded base64 (43 characters).
const SECRET_LEN: usize = TOKEN_PREFIX.len() + 43;

/// The longest name a token may have, in characters.
const MAX_NAME_CHARS: usize = 64;

/// `last_used_at` is written when it is older than this (or unset).
const LAST_USED_EVERY_SECONDS: i64 = 60;

/// What a token may do.
///
/// # Examples
///
/// ```
/// use weft_store::TokenScope;
///
/// let scope: TokenScope = "read".parse()?;
/// assert!(!scope.allows_write());
/// assert!(TokenScope::Full.allows_write());
/// assert_eq!(scope.as_str(), "read");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenScope {
    /// Every route: reading, and starting, stopping and deciding runs.
    Full,
    /// Read routes only (`weft serve` answers 403 to a write).
    Read,
}

impl TokenScope {
    /// The stored word: `full` or `read`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Full => "full",
            TokenScope::Read => "read",
        }
    }

    /// Whether the token may call routes that change something (start, stop or decide a
    /// run, create or delete a thread).
    pub fn allows_write(self) -> bool {
        matches!(self, TokenScope::Full)
    }
}

impl fmt::Display for TokenScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TokenScope {
    type Err = StoreError;

    /// Parses `full` or `read`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(TokenScope::Full),
            "read" => Ok(TokenScope::Read),
            other => Err(StoreError::Invalid(format!(
                "token scope {other:?}: use full or read"
            ))),
        }
    }
}

/// A stored API token, as listed: never its secret, nor the secret's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord {
    /// The short id (`t-` and 8 hex digits).
    pub id: String,
    /// The name given at creation (unique among active tokens).
    pub name: String,
    /// What it may do.
    pub scope: TokenScope,
    /// When it was created (RFC 3339, UTC).
    pub created_at: String,
    /// When a request last presented it (recorded at most once a minute).
    pub last_used_at: Option<String>,
    /// When it was revoked; a revoked token is refused.
    pub revoked_at: Option<String>,
}

impl TokenRecord {
    /// Whether the token is still accepted (not revoked).
    pub fn is_active(&self) -> bool {
        self.revoked_at.is_none()
    }

    fn from_row(row: &Row) -> Result<Self, StoreError> {
        Ok(TokenRecord {
            id: row.text(0)?,
            name: row.text(1)?,
            scope: row
                .text(2)?
                .parse()
                .map_err(|_| corrupt("api_tokens", "unknown scope"))?,
            created_at: row.text(3)?,
            last_used_at: row.opt_text(4)?,
            revoked_at: row.opt_text(5)?,
        })
    }
}

/// The columns [`TokenRecord::from_row`] reads, in its order.
const RECORD_COLUMNS: &str = "id, name, scope, created_at, last_used_at, revoked_at";

/// A token's secret, handed out once by [`Tokens::create_token`]. Its `Debug` shows only the
/// prefix; [`TokenSecret::expose`] gives the text to show the user (once) or to send.
///
/// # Examples
///
/// ```no_run
/// # async fn example(store: &weft_store::Store) -> Result<(), weft_store::StoreError> {
/// use weft_store::{TokenScope, Tokens as _};
///
/// let (record, secret) = store.create_token("laptop", TokenScope::Full).await?;
/// assert_eq!(format!("{secret:?}"), "TokenSecret(weft_…)");
/// let checked = store.verify_token(secret.expose()).await?;
/// assert_eq!(checked.map(|t| t.id), Some(record.id));
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(String);

impl TokenSecret {
    /// A new random secret.
    fn generate(random: &SystemRandom) -> Result<Self, StoreError> {
        let mut bytes = [0u8; SECRET_BYTES];
        random.fill(&mut bytes).map_err(|_| StoreError::Random)?;
        Ok(TokenSecret(format!(
            "{TOKEN_PREFIX}{}",
            URL_SAFE_NO_PAD.encode(bytes)
        )))
    }

    /// The secret's text: show it once, or send it as `Authorization: Bearer …`.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenSecret({TOKEN_PREFIX}…)")
    }
}

/// Whether `text` has the shape of a secret (so anything else is refused without a lookup).
fn well_formed(text: &str) -> bool {
    text.len() == SECRET_LEN
        && text.starts_with(TOKEN_PREFIX)
        && text[TOKEN_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The stored form of a secret: its SHA-256, lowercase hex.
fn hash_secret(secret: &str) -> String {
    sha2::Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Equality whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A new token id: `t-` and 8 random hex digits.
fn new_token_id(random: &SystemRandom) -> Result<String, StoreError> {
    let mut bytes = [0u8; 4];
    random.fill(&mut bytes).map_err(|_| StoreError::Random)?;
    Ok(format!(
        "t-{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// Whether `text` has the shape of a token id (`t-` and 8 lowercase hex digits).
fn is_token_id(text: &str) -> bool {
    text.len() == 10
        && text.starts_with("t-")
        && text[2..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Checks a token name: 1 to 64 characters once trimmed, no control characters, not shaped
/// like a token id (revoking by name or id must mean one token) nor like a secret.
fn valid_name(name: &str) -> Result<&str, StoreError> {
    let name = name.trim();
    let invalid = |why: &str| Err(StoreError::Invalid(format!("token name {name:?}: {why}")));
    if name.is_empty() {
        return invalid("it is empty");
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return invalid("longer than 64 characters");
    }
    if name.chars().any(char::is_control) {
        return invalid("it holds a control character");
    }
    if is_token_id(name) {
        return invalid("it looks like a token id (t-…); pick a name people can tell apart");
    }
    if name.starts_with(TOKEN_PREFIX) {
        return invalid("it looks like a token secret (weft_…); a name is shown in lists");
    }
    Ok(name)
}

/// Whether `last_used_at` is old enough (or unset, or unreadable) to be written again at `now`.
fn last_used_due(last_used_at: Option<&str>, now: DateTime<Utc>) -> bool {
    match last_used_at.map(DateTime::parse_from_rfc3339) {
        Some(Ok(at)) => (now - at.with_timezone(&Utc)).num_seconds() >= LAST_USED_EVERY_SECONDS,
        _ => true,
    }
}

/// Durable API tokens (see the module docs).
#[async_trait]
pub trait Tokens: Send + Sync {
    /// Creates a token named `name` (trimmed) with `scope`, and returns its record and its
    /// secret. The secret is not kept: show it to the user now, it cannot be read again.
    /// Committed before it returns.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for a bad name (empty, over 64 characters, control characters,
    /// shaped like a token id or a secret); [`StoreError::AlreadyExists`] when an active token
    /// has the name; [`StoreError::Random`]; database failures.
    async fn create_token(
        &self,
        name: &str,
        scope: TokenScope,
    ) -> Result<(TokenRecord, TokenSecret), StoreError>;

    /// Every token, revoked ones included, oldest first. Records hold no secret and no hash.
    ///
    /// # Errors
    /// Database failures.
    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;

    /// Revokes the token with id `id_or_name`, else the active token with that name, and
    /// returns its record. Revoking a revoked token (by id) changes nothing and returns it.
    /// Committed before it returns: the next [`verify_token`](Tokens::verify_token) refuses it.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (`kind` `token`) when no token has that id and no active
    /// token that name; database failures.
    async fn revoke_token(&self, id_or_name: &str) -> Result<TokenRecord, StoreError>;

    /// The active token whose secret is `secret`, or `None` (unknown, malformed or revoked).
    /// Records the use in `last_used_at` when the last one recorded is a minute old or more
    /// (a queued write: a failure to record it does not refuse the token).
    ///
    /// # Errors
    /// Database failures (a caller answering HTTP should refuse the request, not let it in).
    ///
    /// # Cancel safety
    /// Dropping the future loses at most the `last_used_at` update.
    async fn verify_token(&self, secret: &str) -> Result<Option<TokenRecord>, StoreError>;
}

impl Store {
    async fn token_where(
        &self,
        condition: &'static str,
        value: &str,
    ) -> Result<Option<TokenRecord>, StoreError> {
        let sql = format!("SELECT {RECORD_COLUMNS} FROM api_tokens WHERE {condition}");
        let rows = self.query(stmt!(sql, value)).await?;
        rows.first().map(TokenRecord::from_row).transpose()
    }

    async fn active_token_named(&self, name: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.token_where("name = $1 AND revoked_at IS NULL", name)
            .await
    }
}

#[async_trait]
impl Tokens for Store {
    async fn create_token(
        &self,
        name: &str,
        scope: TokenScope,
    ) -> Result<(TokenRecord, TokenSecret), StoreError> {
        let name = valid_name(name)?;
        let taken = || StoreError::AlreadyExists {
            kind: "token",
            id: name.to_owned(),
        };
        if self.active_token_named(name).await?.is_some() {
            return Err(taken());
        }
        let random = SystemRandom::new();
        let secret = TokenSecret::generate(&random)?;
        let record = TokenRecord {
            id: new_token_id(&random)?,
            name: name.to_owned(),
            scope,
            created_at: now_string(),
            last_used_at: None,
            revoked_at: None,
        };
        let inserted = self
            .commit(
                None,
                vec![stmt!(
                    "INSERT INTO api_tokens (id, name, scope, secret_hash, created_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                    record.id.as_str(),
                    record.name.as_str(),
                    scope.as_str(),
                    hash_secret(secret.expose()),
                    record.created_at.as_str()
                )],
            )
            .await;
        match inserted {
            Ok(()) => Ok((record, secret)),
            // Another process created one with this name in between (the unique index).
            Err(_) if self.active_token_named(name).await?.is_some() => Err(taken()),
            Err(error) => Err(error),
        }
    }

    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        // Queued `last_used_at` writes first.
        self.flush().await?;
        let sql = format!("SELECT {RECORD_COLUMNS} FROM api_tokens ORDER BY created_at, id");
        let rows = self.query(stmt!(sql)).await?;
        rows.iter().map(TokenRecord::from_row).collect()
    }

    async fn revoke_token(&self, id_or_name: &str) -> Result<TokenRecord, StoreError> {
        let found = match self.token_where("id = $1", id_or_name).await? {
            Some(token) => Some(token),
            None => self.active_token_named(id_or_name.trim()).await?,
        };
        let Some(token) = found else {
            return Err(StoreError::NotFound {
                kind: "token",
                id: id_or_name.to_owned(),
            });
        };
        if !token.is_active() {
            return Ok(token);
        }
        self.commit(
            None,
            vec![stmt!(
                "UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
                now_string(),
                token.id.as_str()
            )],
        )
        .await?;
        self.token_where("id = $1", &token.id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: "token",
                id: token.id.clone(),
            })
    }

    async fn verify_token(&self, secret: &str) -> Result<Option<TokenRecord>, StoreError> {
        if !well_formed(secret) {
            return Ok(None);
        }
        let hash = hash_secret(secret);
        let rows = self
            .query(stmt!(
                "SELECT id, name, scope, created_at, last_used_at, revoked_at, secret_hash \
                 FROM api_tokens WHERE secret_hash = $1",
                hash.as_str()
            ))
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        // The lookup found it by hash; comparing again, in constant time, keeps the check
        // correct whatever the database's collation does.
        if !constant_time_eq(row.text(6)?.as_bytes(), hash.as_bytes()) {
            return Ok(None);
        }
        let mut token = TokenRecord::from_row(row)?;
        if !token.is_active() {
            return Ok(None);
        }
        let now = Utc::now();
        if last_used_due(token.last_used_at.as_deref(), now) {
            let at = now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            let cutoff = (now - chrono::Duration::seconds(LAST_USED_EVERY_SECONDS))
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            self.write_later(vec![stmt!(
                "UPDATE api_tokens SET last_used_at = $1 \
                 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)",
                at.as_str(),
                token.id.as_str(),
                cutoff
            )])
            .await?;
            token.last_used_at = Some(at);
        }
        Ok(Some(token))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn secrets_are_prefixed_random_base64url() {
        let random = SystemRandom::new();
        let a = TokenSecret::generate(&random).unwrap();
        let b = TokenSecret::generate(&random).unwrap();
        assert_ne!(a, b);
        for secret in [&a, &b] {
            let text = secret.expose();
            assert_eq!(text.len(), SECRET_LEN);
            assert!(well_formed(text), "{text}");
            let decoded = URL_SAFE_NO_PAD.decode(&text[TOKEN_PREFIX.len()..]).unwrap();
            assert_eq!(decoded.len(), SECRET_BYTES);
        }
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let secret = TokenSecret::generate(&SystemRandom::new()).unwrap();
        let shown = format!("{secret:?} {:?}", Some(&secret));
        assert!(!shown.contains(&secret.expose()[TOKEN_PREFIX.len()..]));
        assert_eq!(format!("{secret:?}"), "TokenSecret(weft_…)");
    }

    #[test]
    fn malformed_secrets_are_not_well_formed() {
        let good = format!("{TOKEN_PREFIX}{}", "A".repeat(43));
        assert!(well_formed(&good));
        for bad in [
            String::new(),
            "weft_".into(),
            format!("{TOKEN_PREFIX}{}", "A".repeat(42)),
            format!("{TOKEN_PREFIX}{}", "A".repeat(44)),
            format!("xeft_{}", "A".repeat(43)),
            format!("{TOKEN_PREFIX}{}=", "A".repeat(42)),
            format!("{TOKEN_PREFIX}{}é", "A".repeat(41)),
        ] {
            assert!(!well_formed(&bad), "{bad:?}");
        }
    }

    #[test]
    fn the_hash_is_sha256_hex() {
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn constant_time_eq_compares_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn ids_are_short_and_recognised() {
        let id = new_token_id(&SystemRandom::new()).unwrap();
        assert!(is_token_id(&id), "{id}");
        for not_id in [
            "t-1234567",
            "t-123456789",
            "t-ABCDEF12",
            "x-12345678",
            "laptop",
        ] {
            assert!(!is_token_id(not_id), "{not_id}");
        }
    }

    #[test]
    fn scopes_round_trip_and_only_full_writes() {
        for scope in [TokenScope::Full, TokenScope::Read] {
            assert_eq!(scope.as_str().parse::<TokenScope>().unwrap(), scope);
            assert_eq!(scope.to_string(), scope.as_str());
        }
        assert!(TokenScope::Full.allows_write());
        assert!(!TokenScope::Read.allows_write());
        assert!("admin".parse::<TokenScope>().is_err());
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(valid_name("  ci bot ").unwrap(), "ci bot");
        assert_eq!(valid_name(&"é".repeat(64)).unwrap().chars().count(), 64);
        for bad in [
            String::new(),
            "   ".into(),
            "é".repeat(65),
            "a\nb".into(),
            "t-0a1b2c3d".into(),
            "weft_abc".into(),
        ] {
            assert!(
                matches!(valid_name(&bad), Err(StoreError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn last_used_is_written_at_most_once_a_minute() {
        let now = Utc::now();
        let ago = |s: i64| {
            (now - chrono::Duration::seconds(s))
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        };
        assert!(last_used_due(None, now));
        assert!(!last_used_due(Some(&ago(0)), now));
        assert!(!last_used_due(Some(&ago(59)), now));
        assert!(last_used_due(Some(&ago(60)), now));
        assert!(last_used_due(Some(&ago(3600)), now));
        assert!(last_used_due(Some("not a time"), now));
    }
}
