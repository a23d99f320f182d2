//! Who may call the server, checked on every request before any route (streams included):
//! the `Host` the request names (DNS rebinding), its `Origin` (cross-site requests, CORS),
//! and its token — the one generated at start, or one made with `weft tokens create` — with
//! its scope (a read-only token cannot start, stop or decide anything).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::Auth;
use crate::error::ApiError;
use crate::state::AppState;

/// The cookie the page's URL (`/?token=…`) sets, so the page's own requests carry the token.
pub const COOKIE: &str = "weft_token";

/// A new random token (256 bits, as 64 hex digits).
pub fn new_token() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 32];
    // The system's random source does not fail on the platforms Weft runs on; if it ever
    // did, a token of zeros would be guessable, so fall back to a clock-derived one that is
    // at least not fixed.
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes[..16].copy_from_slice(&nanos.to_le_bytes());
    }
    let mut text = String::with_capacity(64);
    for b in bytes {
        use std::fmt::Write as _;
        let _ = write!(text, "{b:02x}");
    }
    text
}

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything.
    Full,
    /// Only reading (threads, runs, events, streams).
    Read,
}

/// The caller of a request, as the guard established it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who: `server` for the token generated at start or no auth, else the stored token's id.
    pub id: String,
    /// What it may do.
    pub scope: Scope,
}

impl Caller {
    /// The server itself (work it starts on its own: queues a previous server left, fired
    /// effects), with full scope.
    pub fn server() -> Self {
        Caller {
            id: "server".into(),
            scope: Scope::Full,
        }
    }
}

/// Paths anyone may read: the page and its assets (they hold no data).
fn is_public(method: &Method, path: &str) -> bool {
    method == Method::GET
        && (path == "/"
            || path == "/index.html"
            || path == "/favicon.svg"
            || path == "/openapi.json"
            || path.starts_with("/assets/"))
}

/// Whether a request changes something (a read-only token may not make it). Searches and
/// history listings are POSTs that only read.
fn is_write(method: &Method, path: &str) -> bool {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return false;
    }
    let read_posts = path == "/threads/search"
        || path == "/threads/count"
        || path == "/assistants/search"
        || path == "/assistants/count"
        || (path.starts_with("/threads/")
            && (path.ends_with("/history") || path.ends_with("/state/checkpoint")));
    !read_posts
}

/// The guard: host, origin, token, scope; CORS headers for allowed origins.
pub(crate) async fn guard(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let headers = request.headers().clone();
    if let Err(error) = check_host(&state, &headers) {
        return error.into_response();
    }
    let origin = match check_origin(&state, &headers) {
        Ok(origin) => origin,
        Err(error) => return error.into_response(),
    };
    if method == Method::OPTIONS {
        // A CORS preflight: answered here, for an allowed origin only.
        let mut response = StatusCode::NO_CONTENT.into_response();
        if let Some(origin) = &origin {
            cors_headers(response.headers_mut(), origin, true);
        }
        return response;
    }
    let presented = token_of(&headers, request.uri().query());
    let caller = match (&state.config().auth, &presented) {
        (Auth::Disabled, _) => Some(Caller {
            id: "server".into(),
            scope: Scope::Full,
        }),
        (Auth::Token(expected), Some(token)) if constant_time_eq(expected, token) => Some(Caller {
            id: "server".into(),
            scope: Scope::Full,
        }),
        (Auth::Token(_), Some(token)) => state.verify_stored_token(token).await,
        (Auth::Token(_), None) => None,
    };
    let mut response = match caller {
        None if is_public(&method, &path) => next.run(request).await,
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            if presented.is_some() {
                "the token is not valid (or was revoked)"
            } else {
                "a token is required: send `Authorization: Bearer TOKEN` (the token weft serve printed, or one made with `weft tokens create`)"
            },
        )
        .into_response(),
        Some(caller) if caller.scope == Scope::Read && is_write(&method, &path) => ApiError::new(
            StatusCode::FORBIDDEN,
            "read_only",
            "this token is read-only: it cannot start, stop or decide runs",
        )
        .into_response(),
        Some(caller) => {
            let from_query = query_token(request.uri().query()).is_some();
            request.extensions_mut().insert(caller);
            let mut response = next.run(request).await;
            // The page's URL carries the token once; the cookie keeps it for the page's
            // own requests (same site only).
            if from_query
                && path == "/"
                && let Some(token) = &presented
                && let Ok(value) = HeaderValue::from_str(&format!(
                    "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
                ))
            {
                response.headers_mut().append(header::SET_COOKIE, value);
            }
            response
        }
    };
    if let Some(origin) = &origin {
        cors_headers(response.headers_mut(), origin, false);
    }
    response
}

fn cors_headers(headers: &mut HeaderMap, origin: &str, preflight: bool) {
    if let Ok(value) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
    }
    headers.insert(header::VARY, HeaderValue::from_static("origin"));
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("x-vercel-ai-ui-message-stream, content-location, location"),
    );
    if preflight {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PATCH, PUT, DELETE, OPTIONS"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type, last-event-id, x-api-key"),
        );
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
    }
}

/// The `Host` must name this server: on loopback, a loopback name (`localhost`,
/// `127.0.0.1`, `[::1]`) or a configured host; elsewhere, the address or a configured host
/// when any is configured.
fn check_host(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let config = state.config();
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return Err(ApiError::bad_request("the request has no Host header"));
    };
    let name = host_name(host);
    let allowed = config
        .allowed_hosts
        .iter()
        .any(|h| h.eq_ignore_ascii_case(name))
        || name.eq_ignore_ascii_case("localhost")
        || name == "127.0.0.1"
        || name == "[::1]"
        || name == config.addr.ip().to_string()
        || (!config.is_loopback() && config.allowed_hosts.is_empty());
    if allowed {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            format!(
                "this server does not answer to the host {name:?} (allow it with --allow-host)"
            ),
        ))
    }
}

/// `host:port` → `host` (`[::1]:80` → `[::1]`).
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

/// A request from a browser page of another origin is refused unless that origin is
/// allowed; `Ok(Some(origin))` for an allowed cross origin (it gets CORS headers).
fn check_origin(state: &AppState, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok()) else {
        return Ok(None);
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let same = origin
        .split_once("://")
        .is_some_and(|(_, rest)| rest.eq_ignore_ascii_case(host));
    if same {
        return Ok(None);
    }
    if state
        .config()
        .allowed_origins
        .iter()
        .any(|o| o == origin || o == "*")
    {
        return Ok(Some(origin.to_owned()));
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "origin_not_allowed",
        format!(
            "requests from the origin {origin:?} are not allowed (allow it with --allow-origin)"
        ),
    ))
}

/// The token a request presents: `Authorization: Bearer`, `x-api-key` (the LangGraph SDK's
/// header), `?token=`, or the page's cookie.
fn token_of(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    if let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        && let Some(token) = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
    {
        return Some(token.trim().to_owned());
    }
    // The LangGraph SDK clients send their `api_key` as `x-api-key`.
    if let Some(token) = headers
        .get("x-api-key")
        .and_then(|h| h.to_str().ok())
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        return Some(token.to_owned());
    }
    if let Some(token) = query_token(query) {
        return Some(token);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| value.to_owned())
        })
}

fn query_token(query: Option<&str>) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        (name == "token" && !value.is_empty()).then(|| value.to_owned())
    })
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_drop_the_port() {
        assert_eq!(host_name("localhost:4111"), "localhost");
        assert_eq!(host_name("[::1]:4111"), "[::1]");
        assert_eq!(host_name("example.test"), "example.test");
    }

    #[test]
    fn searches_are_reads_and_runs_are_writes() {
        assert!(!is_write(&Method::POST, "/threads/search"));
        assert!(!is_write(&Method::POST, "/threads/t1/history"));
        assert!(!is_write(&Method::POST, "/threads/count"));
        assert!(!is_write(&Method::POST, "/threads/t1/state/checkpoint"));
        assert!(is_write(&Method::POST, "/threads/t1/copy"));
        assert!(is_write(&Method::POST, "/threads/t1/runs/t2/cancel"));
        assert!(is_write(&Method::POST, "/threads/t1/runs"));
        assert!(is_write(&Method::POST, "/api/chat"));
        assert!(!is_write(&Method::GET, "/api/chat/t1/stream"));
    }

    #[test]
    fn tokens_are_random_and_compared_whole() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert!(constant_time_eq(&a, &a.clone()));
        assert!(!constant_time_eq(&a, &a[..63]));
    }

    #[test]
    fn a_token_comes_from_the_header_the_query_or_the_cookie() {
        let mut headers = HeaderMap::new();
        assert_eq!(token_of(&headers, Some("a=1&token=q")), Some("q".into()));
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("x=1; weft_token=c"),
        );
        assert_eq!(token_of(&headers, None), Some("c".into()));
        headers.insert("x-api-key", HeaderValue::from_static("k"));
        assert_eq!(token_of(&headers, Some("token=q")), Some("k".into()));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer h"));
        assert_eq!(token_of(&headers, Some("token=q")), Some("h".into()));
    }
}
