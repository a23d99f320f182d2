//! What Weft sends to and receives from providers over HTTP, for a user pointing it at a proxy
//! or a local server (`weft --verbose`, `WEFT_LOG=debug`): every request (method, URL,
//! headers, body), every response's status and headers, and its body (a JSON body whole, a
//! stream one server-sent event at a time, an error body whole).
//!
//! Secrets never reach the observer: the values of authentication headers (`authorization`,
//! `x-api-key`, `x-goog-api-key`, `api-key`, and any header whose name says `key`, `token`
//! or `secret`) are replaced by `[REDACTED]`, and every text goes through
//! [`crate::redact::redact`] with the key in use.
//!
//! The observer is process-wide and set once ([`set_http_trace`]); with none set, tracing
//! costs one atomic load per request.

use std::sync::{Arc, OnceLock};

use reqwest::header::HeaderMap;

use crate::redact::redact;

/// One traced HTTP exchange step; every string is already redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpTrace {
    /// A request about to be sent (one per attempt).
    Request {
        /// The provider.
        provider: String,
        /// `POST`, `GET`.
        method: String,
        /// The URL (a `key=` query parameter redacted).
        url: String,
        /// The headers, secrets redacted.
        headers: Vec<(String, String)>,
        /// The body as text.
        body: Option<String>,
    },
    /// A response's status line and headers.
    Response {
        /// The provider.
        provider: String,
        /// The status code.
        status: u16,
        /// The headers, secrets redacted.
        headers: Vec<(String, String)>,
    },
    /// A response body, or one server-sent event of a streamed body.
    Body {
        /// The provider.
        provider: String,
        /// The text (an event: its `event:` name and `data:`).
        text: String,
    },
}

impl HttpTrace {
    /// The trace as lines for a terminal: `→` what was sent, `←` what came back.
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_provider::trace::HttpTrace;
    ///
    /// let trace = HttpTrace::response("openai", 200, Vec::new());
    /// assert_eq!(trace.describe(), "openai ← 200");
    /// ```
    pub fn describe(&self) -> String {
        match self {
            HttpTrace::Request {
                provider,
                method,
                url,
                headers,
                body,
            } => {
                let mut out = format!("{provider} → {method} {url}");
                for (name, value) in headers {
                    out.push_str(&format!("\n{provider} → {name}: {value}"));
                }
                if let Some(body) = body {
                    out.push_str(&format!("\n{provider} → {body}"));
                }
                out
            }
            HttpTrace::Response {
                provider,
                status,
                headers,
            } => {
                let mut out = format!("{provider} ← {status}");
                for (name, value) in headers {
                    out.push_str(&format!("\n{provider} ← {name}: {value}"));
                }
                out
            }
            HttpTrace::Body { provider, text } => format!("{provider} ← {text}"),
        }
    }

    /// A response trace (for tests and tools that build traces themselves).
    pub fn response(provider: &str, status: u16, headers: Vec<(String, String)>) -> Self {
        HttpTrace::Response {
            provider: provider.to_owned(),
            status,
            headers,
        }
    }
}

/// Told about every traced step ([`set_http_trace`]).
pub type HttpTraceObserver = Arc<dyn Fn(&HttpTrace) + Send + Sync>;

static OBSERVER: OnceLock<HttpTraceObserver> = OnceLock::new();

/// Sets the process-wide HTTP trace observer, once; a CLI sets it at start when asked to be
/// verbose. Returns `false` if one was set already.
pub fn set_http_trace(observer: HttpTraceObserver) -> bool {
    OBSERVER.set(observer).is_ok()
}

/// Whether an observer is set (callers skip building traces otherwise).
pub(crate) fn enabled() -> bool {
    OBSERVER.get().is_some()
}

fn emit(trace: &HttpTrace) {
    if let Some(observer) = OBSERVER.get() {
        observer(trace);
    }
}

/// Whether a header's value is a secret.
fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    matches!(
        name.as_str(),
        "authorization" | "proxy-authorization" | "x-api-key" | "x-goog-api-key" | "api-key"
    ) || name.contains("key")
        || name.contains("token")
        || name.contains("secret")
        || name.contains("cookie")
}

fn headers_of(map: &HeaderMap, key: Option<&str>) -> Vec<(String, String)> {
    map.iter()
        .map(|(name, value)| {
            let value = if is_secret_header(name.as_str()) {
                "[REDACTED]".to_owned()
            } else {
                redact(&String::from_utf8_lossy(value.as_bytes()), key)
            };
            (name.as_str().to_owned(), value)
        })
        .collect()
}

/// The URL with a `key=` query parameter's value redacted.
fn redact_url(url: &str, key: Option<&str>) -> String {
    let url = redact(url, key);
    let Some((base, query)) = url.split_once('?') else {
        return url;
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if is_secret_header(name) => format!("{name}=[REDACTED]"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

/// Traces a request about to be sent.
pub(crate) fn request(
    provider: &str,
    method: &reqwest::Method,
    url: &str,
    headers: &HeaderMap,
    body: Option<&[u8]>,
    key: Option<&str>,
) {
    if !enabled() {
        return;
    }
    emit(&HttpTrace::Request {
        provider: provider.to_owned(),
        method: method.as_str().to_owned(),
        url: redact_url(url, key),
        headers: headers_of(headers, key),
        body: body.map(|b| redact(&String::from_utf8_lossy(b), key)),
    });
}

/// Traces a response's status and headers.
pub(crate) fn response(provider: &str, status: u16, headers: &HeaderMap, key: Option<&str>) {
    if !enabled() {
        return;
    }
    emit(&HttpTrace::Response {
        provider: provider.to_owned(),
        status,
        headers: headers_of(headers, key),
    });
}

/// Traces a body, or one event of a streamed body.
pub(crate) fn body(provider: &str, text: &str, key: Option<&str>) {
    if !enabled() {
        return;
    }
    emit(&HttpTrace::Body {
        provider: provider.to_owned(),
        text: redact(text, key),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted() {
        let mut map = HeaderMap::new();
        map.insert(
            "authorization",
            "Bearer sk-abcdef123456".parse().expect("header"),
        );
        map.insert("x-goog-api-key", "AIzaSecret123".parse().expect("header"));
        map.insert("content-type", "application/json".parse().expect("header"));
        let headers = headers_of(&map, None);
        assert_eq!(
            headers,
            vec![
                ("authorization".to_owned(), "[REDACTED]".to_owned()),
                ("x-goog-api-key".to_owned(), "[REDACTED]".to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ]
        );
        assert_eq!(
            redact_url("https://h/v1/models?alt=sse&key=AIzaSecret123", None),
            "https://h/v1/models?alt=sse&key=[REDACTED]"
        );
        assert_eq!(
            redact_url(
                "https://h/v1?x=my-own-secret-key-1",
                Some("my-own-secret-key-1")
            ),
            "https://h/v1?x=[REDACTED]"
        );
    }
}
