//! HTTP plumbing shared by the adapters (UPP-1.2 §15.4 `doFetch`, `normalizeHttpError`,
//! `parseSSEStream`): retries, timeouts, header merging, cancellation, and the mapping of HTTP
//! failures to [`UppError`] (§16.2.1).

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_core::Stream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::ProviderConfig;
use crate::error::{ErrorCode, Modality, UppError};
use crate::redact::{redact, redact_json};
use crate::retry::{RetryStrategy, default_strategy};
use crate::sse::{SseDecoder, SseEvent};

/// The process-wide default client (connection pooling), built on first use with the `ring`
/// TLS provider.
pub fn default_client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            install_crypto_provider();
            reqwest::Client::builder()
                .connect_timeout(crate::config::DEFAULT_CONNECT_TIMEOUT)
                .build()
                .unwrap_or_else(|_| reqwest::Client::new())
        })
        .clone()
}

/// Installs rustls' `ring` provider as the process default (idempotent). reqwest is built
/// without a provider of its own, so this must run before the first TLS connection.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// One JSON POST (or GET) to a provider API.
#[derive(Debug, Clone)]
pub struct HttpRequest<'a> {
    /// Provider name, for errors.
    pub provider: &'a str,
    /// Modality, for errors.
    pub modality: Modality,
    /// `POST` or `GET`.
    pub method: reqwest::Method,
    /// Full URL.
    pub url: String,
    /// Headers the provider requires (auth, version). `config.headers` override them.
    pub headers: Vec<(String, String)>,
    /// The body (JSON bytes), if any.
    pub body: Option<Vec<u8>>,
    /// The key in use, so it can be scrubbed from error text.
    pub api_key: Option<&'a str>,
}

/// Sends `request` with the config's client, timeout, headers and retry strategy, and
/// returns the successful response (status 2xx). Errors are normalized; retryable ones are
/// retried as the strategy says; cancellation wins at any point.
///
/// # Errors
/// The normalized error of the last attempt, or `CANCELLED`.
pub async fn send(
    request: &HttpRequest<'_>,
    config: &ProviderConfig,
    signal: &CancellationToken,
) -> Result<reqwest::Response, UppError> {
    let client = match (&config.http_client, config.connect_timeout) {
        (Some(client), _) => client.clone(),
        (None, Some(connect)) if connect != crate::config::DEFAULT_CONNECT_TIMEOUT => {
            install_crypto_provider();
            reqwest::Client::builder()
                .connect_timeout(connect)
                .build()
                .unwrap_or_else(|_| default_client())
        }
        (None, _) => default_client(),
    };
    let idle = config.effective_idle_timeout();
    let strategy: Arc<dyn RetryStrategy> = config
        .retry_strategy
        .clone()
        .unwrap_or_else(default_strategy);
    let headers = merge_headers(
        &request.headers,
        &config.headers,
        request.provider,
        request.modality,
    )?;
    let mut attempt = 0u32;
    loop {
        if let Some(delay) = strategy.before_request() {
            sleep_or_cancel(delay, signal, request).await?;
        }
        attempt += 1;
        let mut builder = client
            .request(request.method.clone(), &request.url)
            .headers(headers.clone());
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        if let Some(timeout) = config.timeout {
            builder = builder.timeout(timeout);
        }
        crate::trace::request(
            request.provider,
            &request.method,
            &request.url,
            &headers,
            request.body.as_deref(),
            request.api_key,
        );
        let outcome = tokio::select! {
            biased;
            () = signal.cancelled() => return Err(UppError::cancelled(request.provider, request.modality)),
            result = tokio::time::timeout(idle, builder.send()) => result,
        };
        if let Ok(Ok(response)) = &outcome {
            crate::trace::response(
                request.provider,
                response.status().as_u16(),
                response.headers(),
                request.api_key,
            );
        }
        let error = match outcome {
            Ok(Ok(response)) if response.status().is_success() => {
                strategy.reset();
                return Ok(response);
            }
            Ok(Ok(response)) => error_from_response(response, request).await,
            Ok(Err(error)) => transport_error(&error, request.provider, request.modality),
            Err(_) => UppError::new(
                ErrorCode::Timeout,
                format!(
                    "no response from {} within {} s (idle timeout)",
                    request.provider,
                    idle.as_secs_f64()
                ),
                request.provider,
                request.modality,
            ),
        };
        if signal.is_cancelled() {
            return Err(UppError::cancelled(request.provider, request.modality));
        }
        match strategy.on_retry(&error, attempt) {
            Some(delay) if error.is_retryable() => {
                tracing::debug!(provider = request.provider, code = %error.code, attempt, ?delay, "retrying");
                let observer: Option<&crate::retry::RetryObserver> = match &config.retry_observer {
                    Some(own) => Some(own),
                    None => crate::retry::global_retry_observer(),
                };
                if let Some(observer) = observer {
                    observer(&crate::retry::RetryNotice {
                        provider: request.provider.to_owned(),
                        code: error.code,
                        message: error.message.clone(),
                        next_attempt: attempt + 1,
                        max_attempts: strategy.max_attempts(),
                        delay,
                    });
                }
                sleep_or_cancel(delay, signal, request).await?;
            }
            _ => return Err(error),
        }
    }
}

async fn sleep_or_cancel(
    delay: Duration,
    signal: &CancellationToken,
    request: &HttpRequest<'_>,
) -> Result<(), UppError> {
    tokio::select! {
        biased;
        () = signal.cancelled() => Err(UppError::cancelled(request.provider, request.modality)),
        () = tokio::time::sleep(delay) => Ok(()),
    }
}

fn merge_headers(
    required: &[(String, String)],
    custom: &[(String, String)],
    provider: &str,
    modality: Modality,
) -> Result<HeaderMap, UppError> {
    let mut map = HeaderMap::new();
    for (name, value) in required.iter().chain(custom) {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            UppError::new(
                ErrorCode::InvalidRequest,
                format!("invalid header name {name:?}"),
                provider,
                modality,
            )
        })?;
        let value = HeaderValue::from_str(value).map_err(|_| {
            UppError::new(
                ErrorCode::InvalidRequest,
                format!("invalid value for header {name}"),
                provider,
                modality,
            )
        })?;
        map.insert(name, value);
    }
    Ok(map)
}

/// Maps a transport failure to `TIMEOUT` or `NETWORK_ERROR`.
pub fn transport_error(error: &reqwest::Error, provider: &str, modality: Modality) -> UppError {
    let code = if error.is_timeout() {
        ErrorCode::Timeout
    } else {
        ErrorCode::NetworkError
    };
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    let text = redact(&text, None);
    UppError::new(code, text.clone(), provider, modality)
        .with_cause(serde_json::json!({ "message": text }))
}

async fn error_from_response(response: reqwest::Response, request: &HttpRequest<'_>) -> UppError {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = match response.bytes().await {
        Ok(bytes) => bytes,
        Err(error) => return transport_error(&error, request.provider, request.modality),
    };
    crate::trace::body(
        request.provider,
        &String::from_utf8_lossy(&body),
        request.api_key,
    );
    normalize_http_error(
        status,
        &headers,
        &body,
        request.provider,
        request.modality,
        request.api_key,
    )
}

/// Maps an HTTP error response to a [`UppError`] (§16.2.1): 400 → `INVALID_REQUEST` (or
/// `CONTEXT_LENGTH_EXCEEDED` when the vendor says the input is too long), 401 →
/// `AUTHENTICATION_FAILED`, 403 → `AUTHENTICATION_FAILED` or `QUOTA_EXCEEDED`, 404 →
/// `MODEL_NOT_FOUND`, 408/504 → `TIMEOUT`, 429 → `RATE_LIMITED` (`QUOTA_EXCEEDED` for
/// OpenAI's `insufficient_quota`), 5xx and 529 →
/// `PROVIDER_ERROR`, other 4xx → `INVALID_REQUEST`. The message comes from the body's
/// `error.message` when present; the body (scrubbed of keys) is the `cause`; `Retry-After`,
/// `retry-after-ms` and Gemini's `RetryInfo` become `retry_after`.
pub fn normalize_http_error(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    provider: &str,
    modality: Modality,
    api_key: Option<&str>,
) -> UppError {
    let mut json: Option<Value> = serde_json::from_slice(body).ok();
    if let Some(value) = json.as_mut() {
        redact_json(value, api_key);
    }
    let raw_text = redact(&String::from_utf8_lossy(body), api_key);
    let vendor_message = json.as_ref().and_then(error_message);
    let vendor_kind = json.as_ref().and_then(error_kind).unwrap_or_default();
    let message = vendor_message
        .clone()
        .unwrap_or_else(|| truncate(raw_text.trim(), 500));
    let message = if message.is_empty() {
        format!("HTTP {status} from {provider}")
    } else {
        message
    };
    let lower = format!(
        "{} {}",
        message.to_ascii_lowercase(),
        vendor_kind.to_ascii_lowercase()
    );
    let code = match status {
        400 | 413 | 422 if is_context_overflow(&lower) => ErrorCode::ContextLengthExceeded,
        400 | 413 | 422
            if lower.contains("content_filter")
                || lower.contains("content policy")
                || lower.contains("safety") =>
        {
            ErrorCode::ContentFiltered
        }
        400 => ErrorCode::InvalidRequest,
        401 => ErrorCode::AuthenticationFailed,
        402 => ErrorCode::QuotaExceeded,
        403 if lower.contains("quota") || lower.contains("billing") || lower.contains("credit") => {
            ErrorCode::QuotaExceeded
        }
        403 => ErrorCode::AuthenticationFailed,
        404 => ErrorCode::ModelNotFound,
        408 | 504 => ErrorCode::Timeout,
        // OpenAI's "insufficient_quota" (and alike) is a spent budget, not a rate: final.
        429 if lower.contains("insufficient_quota") || lower.contains("billing") => {
            ErrorCode::QuotaExceeded
        }
        429 => ErrorCode::RateLimited,
        500..=599 => ErrorCode::ProviderError,
        _ => ErrorCode::InvalidRequest,
    };
    let mut error = UppError::new(code, message, provider, modality).with_status(status);
    error.cause =
        Some(json.unwrap_or_else(|| serde_json::json!({ "body": truncate(&raw_text, 2000) })));
    if let Some(delay) =
        retry_after(headers).or_else(|| error.cause.as_ref().and_then(gemini_retry_delay))
    {
        error.retry_after = Some(delay);
    }
    error
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn error_message(body: &Value) -> Option<String> {
    let candidates = [
        body.pointer("/error/message"),
        body.get("message"),
        body.get("detail"),
        body.get("error").filter(|e| e.is_string()),
        body.pointer("/0/error/message"),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(|v| v.as_str().map(str::to_owned))
}

fn error_kind(body: &Value) -> Option<String> {
    [
        body.pointer("/error/type"),
        body.pointer("/error/code"),
        body.pointer("/error/status"),
        body.get("type"),
        body.get("code"),
    ]
    .into_iter()
    .flatten()
    .find_map(|v| v.as_str().map(str::to_owned))
}

/// Whether an error text says the input was too long for the model.
pub fn is_context_overflow(lower: &str) -> bool {
    [
        "context_length_exceeded",
        "context length",
        "context window",
        "maximum context",
        "prompt is too long",
        "too many tokens",
        "input is too long",
        "exceeds the maximum number of tokens",
        "input token count",
        "reduce the length",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// Parses `retry-after-ms`, then `retry-after` (seconds or an HTTP date).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

fn gemini_retry_delay(body: &Value) -> Option<Duration> {
    body.pointer("/error/details")?
        .as_array()?
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("RetryInfo"))
        })
        .find_map(|d| d.get("retryDelay")?.as_str())
        .and_then(|text| text.strip_suffix('s')?.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The server-sent events of a successful streaming response. Ends after the last complete
/// event; yields `INVALID_RESPONSE` when the body ends inside an event, `NETWORK_ERROR` when
/// reading fails, `TIMEOUT` when no chunk arrives within `idle_timeout`, and `CANCELLED` when
/// `signal` fires.
pub fn sse_events(
    response: reqwest::Response,
    provider: String,
    modality: Modality,
    idle_timeout: Option<Duration>,
    signal: CancellationToken,
) -> impl Stream<Item = Result<SseEvent, UppError>> + Send + 'static {
    struct State {
        response: reqwest::Response,
        decoder: SseDecoder,
        ready: VecDeque<SseEvent>,
        scratch: Vec<SseEvent>,
        done: bool,
    }
    let state = State {
        response,
        decoder: SseDecoder::new(),
        ready: VecDeque::new(),
        scratch: Vec::new(),
        done: false,
    };
    futures_util::stream::unfold(state, move |mut state| {
        let provider = provider.clone();
        let signal = signal.clone();
        async move {
            loop {
                if let Some(event) = state.ready.pop_front() {
                    return Some((Ok(event), state));
                }
                if state.done {
                    return None;
                }
                let chunk = tokio::select! {
                    biased;
                    () = signal.cancelled() => {
                        state.done = true;
                        return Some((Err(UppError::cancelled(provider, modality)), state));
                    }
                    chunk = next_chunk(&mut state.response, idle_timeout) => chunk,
                };
                match chunk {
                    Ok(Some(bytes)) => {
                        state.decoder.push(&bytes, &mut state.scratch);
                        if crate::trace::enabled() {
                            for event in &state.scratch {
                                let text = match &event.event {
                                    Some(name) => format!("event: {name} data: {}", event.data),
                                    None => format!("data: {}", event.data),
                                };
                                crate::trace::body(&provider, &text, None);
                            }
                        }
                        state.ready.extend(state.scratch.drain(..));
                    }
                    Ok(None) => {
                        state.done = true;
                        if state.decoder.has_partial() {
                            let error = UppError::new(
                                ErrorCode::InvalidResponse,
                                "the stream ended in the middle of an event",
                                provider,
                                modality,
                            );
                            return Some((Err(error), state));
                        }
                    }
                    Err(ChunkError::Timeout) => {
                        state.done = true;
                        let error = UppError::new(
                            ErrorCode::Timeout,
                            "no data from the stream within the timeout",
                            provider,
                            modality,
                        );
                        return Some((Err(error), state));
                    }
                    Err(ChunkError::Http(error)) => {
                        state.done = true;
                        let mut error = transport_error(&error, &provider, modality);
                        error.code = ErrorCode::NetworkError;
                        error.message = format!("the stream was interrupted: {}", error.message);
                        return Some((Err(error), state));
                    }
                }
            }
        }
    })
}

enum ChunkError {
    Timeout,
    Http(reqwest::Error),
}

async fn next_chunk(
    response: &mut reqwest::Response,
    idle_timeout: Option<Duration>,
) -> Result<Option<bytes::Bytes>, ChunkError> {
    match idle_timeout {
        Some(limit) => match tokio::time::timeout(limit, response.chunk()).await {
            Ok(result) => result.map_err(ChunkError::Http),
            Err(_) => Err(ChunkError::Timeout),
        },
        None => response.chunk().await.map_err(ChunkError::Http),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_for(status: u16, body: &str) -> UppError {
        normalize_http_error(
            status,
            &HeaderMap::new(),
            body.as_bytes(),
            "p",
            Modality::Llm,
            None,
        )
    }

    #[test]
    fn statuses_map_to_codes() {
        let table = [
            (400, ErrorCode::InvalidRequest),
            (401, ErrorCode::AuthenticationFailed),
            (403, ErrorCode::AuthenticationFailed),
            (404, ErrorCode::ModelNotFound),
            (429, ErrorCode::RateLimited),
            (500, ErrorCode::ProviderError),
            (502, ErrorCode::ProviderError),
            (503, ErrorCode::ProviderError),
            (529, ErrorCode::ProviderError),
            (504, ErrorCode::Timeout),
        ];
        for (status, code) in table {
            assert_eq!(error_for(status, "{}").code, code, "status {status}");
        }
    }

    #[test]
    fn context_overflow_and_quota_are_recognized() {
        let e = error_for(
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#,
        );
        assert_eq!(e.code, ErrorCode::ContextLengthExceeded);
        assert!(e.message.starts_with("This model's maximum context length"));
        let e = error_for(
            403,
            r#"{"error":{"message":"You exceeded your current quota"}}"#,
        );
        assert_eq!(e.code, ErrorCode::QuotaExceeded);
    }

    #[test]
    fn cause_keeps_the_body_without_keys() {
        let e = error_for(
            401,
            r#"{"error":{"message":"Incorrect API key provided: sk-abc123456"}}"#,
        );
        assert!(!e.message.contains("sk-abc"));
        assert!(
            !e.cause
                .map(|c| c.to_string())
                .unwrap_or_default()
                .contains("sk-abc")
        );
    }

    #[test]
    fn retry_hints_from_headers_and_gemini_body() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        let body = r#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}"#;
        let e = error_for(429, body);
        assert_eq!(e.retry_after, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn custom_headers_win() {
        let map = merge_headers(
            &[("authorization".into(), "Bearer a".into())],
            &[("Authorization".into(), "Bearer b".into())],
            "p",
            Modality::Llm,
        )
        .unwrap_or_default();
        assert_eq!(
            map.get("authorization").and_then(|v| v.to_str().ok()),
            Some("Bearer b")
        );
        assert_eq!(map.len(), 1);
    }
}
