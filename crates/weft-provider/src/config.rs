//! Provider configuration, API keys and key strategies (UPP-1.2 §4.1–§4.2, §15.4).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::error::{ErrorCode, Modality, UppError};
use crate::retry::RetryStrategy;
use crate::tool::BoxFuture;

/// A source of API keys (§4.2): called once per request.
pub trait KeyStrategy: Send + Sync {
    /// The key to use for the next request.
    fn get_key(&self) -> BoxFuture<'_, Result<String, UppError>>;
}

/// Cycles through keys in order, wrapping around.
///
/// # Examples
///
/// ```
/// use futures_util::FutureExt as _;
/// use weft_provider::{KeyStrategy, RoundRobinKeys};
///
/// let keys = RoundRobinKeys::new(["sk-1", "sk-2"]);
/// let mut next = || keys.get_key().now_or_never().transpose();
/// assert_eq!(next()?.as_deref(), Some("sk-1"));
/// assert_eq!(next()?.as_deref(), Some("sk-2"));
/// assert_eq!(next()?.as_deref(), Some("sk-1"));
/// # Ok::<(), weft_provider::UppError>(())
/// ```
#[derive(Debug)]
pub struct RoundRobinKeys {
    keys: Vec<String>,
    next: AtomicUsize,
}

impl RoundRobinKeys {
    /// Keys used in list order.
    pub fn new(keys: impl IntoIterator<Item = impl Into<String>>) -> Self {
        RoundRobinKeys {
            keys: keys.into_iter().map(Into::into).collect(),
            next: AtomicUsize::new(0),
        }
    }
}

impl KeyStrategy for RoundRobinKeys {
    fn get_key(&self) -> BoxFuture<'_, Result<String, UppError>> {
        Box::pin(async move {
            if self.keys.is_empty() {
                return Err(no_key("RoundRobinKeys has no keys"));
            }
            let i = self.next.fetch_add(1, Ordering::Relaxed) % self.keys.len();
            Ok(self.keys[i].clone())
        })
    }
}

/// Picks a key at random with probability proportional to its weight.
#[derive(Debug)]
pub struct WeightedKeys {
    keys: Vec<(String, f64)>,
    total: f64,
}

impl WeightedKeys {
    /// `(key, weight)` pairs; non-positive weights are never picked.
    pub fn new(keys: impl IntoIterator<Item = (impl Into<String>, f64)>) -> Self {
        let keys: Vec<(String, f64)> = keys
            .into_iter()
            .map(|(k, w)| (k.into(), if w.is_finite() && w > 0.0 { w } else { 0.0 }))
            .collect();
        let total = keys.iter().map(|(_, w)| w).sum();
        WeightedKeys { keys, total }
    }

    fn pick(&self, roll: f64) -> Option<&str> {
        let mut point = roll * self.total;
        for (key, weight) in &self.keys {
            if *weight > 0.0 && point < *weight {
                return Some(key);
            }
            point -= weight;
        }
        self.keys
            .iter()
            .rev()
            .find(|(_, w)| *w > 0.0)
            .map(|(k, _)| k.as_str())
    }
}

impl KeyStrategy for WeightedKeys {
    fn get_key(&self) -> BoxFuture<'_, Result<String, UppError>> {
        Box::pin(async move {
            self.pick(fastrand::f64())
                .map(str::to_owned)
                .ok_or_else(|| no_key("WeightedKeys has no key with a positive weight"))
        })
    }
}

/// Asks a user function for the key every time one is needed (secret stores, vaults).
pub struct DynamicKey {
    fetch: Box<dyn Fn() -> BoxFuture<'static, Result<String, UppError>> + Send + Sync>,
}

impl DynamicKey {
    /// Wraps an async key function.
    pub fn new<F, Fut>(fetch: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<String, UppError>> + Send + 'static,
    {
        DynamicKey {
            fetch: Box::new(move || Box::pin(fetch())),
        }
    }
}

impl fmt::Debug for DynamicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DynamicKey(..)")
    }
}

impl KeyStrategy for DynamicKey {
    fn get_key(&self) -> BoxFuture<'_, Result<String, UppError>> {
        (self.fetch)()
    }
}

fn no_key(message: &str) -> UppError {
    UppError::new(
        ErrorCode::AuthenticationFailed,
        message,
        "config",
        Modality::Llm,
    )
}

/// An API key: a fixed string or a strategy. `Debug` never shows the key.
#[derive(Clone)]
pub enum ApiKey {
    /// One fixed key.
    Static(String),
    /// A key strategy (round robin, weighted, dynamic, or your own).
    Strategy(Arc<dyn KeyStrategy>),
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiKey::Static(_) => f.write_str("ApiKey::Static(<redacted>)"),
            ApiKey::Strategy(_) => f.write_str("ApiKey::Strategy(..)"),
        }
    }
}

impl From<&str> for ApiKey {
    fn from(key: &str) -> Self {
        ApiKey::Static(key.to_owned())
    }
}

impl From<String> for ApiKey {
    fn from(key: String) -> Self {
        ApiKey::Static(key)
    }
}

/// The default connect timeout of one attempt.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The default idle timeout: the longest the server may stay silent within an attempt
/// (before the response headers, or between two chunks of a stream).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Shared settings of every provider (§4.1). None is required.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weft_provider::ProviderConfig;
///
/// let config = ProviderConfig::default()
///     .api_key("sk-test")
///     .base_url("http://127.0.0.1:11434/v1")
///     .timeout(Duration::from_secs(30))
///     .header("OpenAI-Organization", "org-1");
/// assert_eq!(config.headers.len(), 1);
/// ```
#[derive(Clone, Default)]
pub struct ProviderConfig {
    /// The API key; when `None`, the provider's environment variable is read.
    pub api_key: Option<ApiKey>,
    /// Overrides the provider's endpoint (proxies, local servers, test servers).
    pub base_url: Option<String>,
    /// Timeout of one HTTP attempt (→ `TIMEOUT`), not of the whole call: a call retries
    /// (3 attempts by default), so it may take up to about `attempts × timeout` plus the
    /// waits between them. For streams it also bounds the wait for each next chunk. `None`:
    /// no overall bound, but the connect and idle timeouts still apply.
    pub timeout: Option<Duration>,
    /// Connecting to the server (per attempt; `None`: [`DEFAULT_CONNECT_TIMEOUT`]).
    pub connect_timeout: Option<Duration>,
    /// The longest silence of the server within an attempt: waiting for the response
    /// headers, and between two chunks of a stream (`None`: [`DEFAULT_IDLE_TIMEOUT`]). A
    /// non-streamed body is bounded only by `timeout`.
    pub idle_timeout: Option<Duration>,
    /// Told about every retry before its wait (`None`: the process-wide observer of
    /// [`crate::retry::set_retry_observer`], if any).
    pub retry_observer: Option<crate::retry::RetryObserver>,
    /// A custom HTTP client (the spec's `fetch`): logging, proxies, custom TLS.
    pub http_client: Option<reqwest::Client>,
    /// API version override (e.g. Anthropic's `anthropic-version`).
    pub api_version: Option<String>,
    /// Retry strategy; `None` means [`crate::retry::default_strategy`].
    pub retry_strategy: Option<Arc<dyn RetryStrategy>>,
    /// Extra headers sent with every request; they win over the provider's own headers.
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("api_key", &self.api_key)
            .field("base_url", &self.base_url)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("retry_observer", &self.retry_observer.is_some())
            .field("http_client", &self.http_client.is_some())
            .field("api_version", &self.api_version)
            .field("retry_strategy", &self.retry_strategy.is_some())
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl ProviderConfig {
    /// Sets the API key.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<ApiKey>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets a key strategy.
    #[must_use]
    pub fn key_strategy(mut self, strategy: impl KeyStrategy + 'static) -> Self {
        self.api_key = Some(ApiKey::Strategy(Arc::new(strategy)));
        self
    }

    /// Sets the base URL.
    #[must_use]
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Sets the request timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the connect timeout (per attempt).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Sets the idle timeout (the longest silence of the server within an attempt).
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// The idle timeout in force: the configured one or [`DEFAULT_IDLE_TIMEOUT`], and never
    /// longer than `timeout`.
    pub fn effective_idle_timeout(&self) -> Duration {
        let idle = self.idle_timeout.unwrap_or(DEFAULT_IDLE_TIMEOUT);
        self.timeout.map_or(idle, |t| t.min(idle))
    }

    /// Sets the retry observer.
    #[must_use]
    pub fn retry_observer(
        mut self,
        observer: impl Fn(&crate::retry::RetryNotice) + Send + Sync + 'static,
    ) -> Self {
        self.retry_observer = Some(Arc::new(observer));
        self
    }

    /// Sets the retry strategy.
    #[must_use]
    pub fn retry_strategy(mut self, strategy: impl RetryStrategy + 'static) -> Self {
        self.retry_strategy = Some(Arc::new(strategy));
        self
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Uses a custom HTTP client.
    #[must_use]
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }
}

/// Resolves the key to use for one request (§15.4 `resolveApiKey`): the configured key or
/// strategy, else the first of `env_vars` that is set and non-empty.
///
/// # Errors
/// `AUTHENTICATION_FAILED` naming the variables to set, when no key is available.
pub async fn resolve_api_key(
    config: &ProviderConfig,
    env_vars: &[&str],
    provider: &str,
) -> Result<String, UppError> {
    match &config.api_key {
        Some(ApiKey::Static(key)) => Ok(key.clone()),
        Some(ApiKey::Strategy(strategy)) => strategy.get_key().await.map_err(|mut e| {
            e.provider = provider.to_owned();
            e
        }),
        None => {
            for var in env_vars {
                if let Ok(value) = std::env::var(var)
                    && !value.trim().is_empty()
                {
                    return Ok(value);
                }
            }
            Err(UppError::llm(
                ErrorCode::AuthenticationFailed,
                provider,
                format!(
                    "no API key for {provider}: set {} (or pass one in the provider config)",
                    env_vars.join(" or ")
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn round_robin_wraps_around() {
        let keys = RoundRobinKeys::new(["sk-1", "sk-2", "sk-3"]);
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(keys.get_key().await.unwrap());
        }
        assert_eq!(got, ["sk-1", "sk-2", "sk-3", "sk-1"]);
    }

    #[test]
    fn weighted_keys_follow_their_weights() {
        let keys = WeightedKeys::new([("a", 1.0), ("b", 3.0), ("never", 0.0)]);
        assert_eq!(keys.pick(0.0), Some("a"));
        assert_eq!(keys.pick(0.24), Some("a"));
        assert_eq!(keys.pick(0.26), Some("b"));
        assert_eq!(keys.pick(0.999_999), Some("b"));
        let mut b = 0;
        for _ in 0..4000 {
            if keys.pick(fastrand::f64()) == Some("b") {
                b += 1;
            }
        }
        assert!((2700..3300).contains(&b), "b picked {b} of 4000 times");
    }

    #[tokio::test]
    async fn dynamic_key_is_asked_every_time() {
        let counter = Arc::new(AtomicUsize::new(0));
        let c = counter.clone();
        let key = DynamicKey::new(move || {
            let n = c.fetch_add(1, Ordering::SeqCst);
            async move { Ok(format!("key-{n}")) }
        });
        assert_eq!(key.get_key().await.unwrap(), "key-0");
        assert_eq!(key.get_key().await.unwrap(), "key-1");
    }

    #[tokio::test]
    async fn missing_key_names_the_variable() {
        let error = resolve_api_key(
            &ProviderConfig::default(),
            &["WEFT_TEST_SURELY_UNSET_KEY"],
            "openai",
        )
        .await
        .unwrap_err();
        assert_eq!(error.code, ErrorCode::AuthenticationFailed);
        assert!(error.message.contains("WEFT_TEST_SURELY_UNSET_KEY"));
    }

    #[test]
    fn debug_never_prints_the_key() {
        let config = ProviderConfig::default().api_key("sk-secret-value");
        assert!(!format!("{config:?}").contains("sk-secret-value"));
    }
}
