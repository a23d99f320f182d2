//! [`ServerConfig`]: what `weft serve` was asked to do — where it listens, who may call it,
//! its limits and its stream timings.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use weft_standard::Launch;
use weft_standard::preflight::ModelCheck;

/// Who may call the server.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    /// A caller presents this token (generated at start and printed with the page's URL)
    /// or a token made with `weft tokens create`.
    Token(String),
    /// Anyone who can reach the address (`--no-auth`; refused on anything but loopback).
    Disabled,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Token(_) => f.write_str("Auth::Token(…)"),
            Auth::Disabled => f.write_str("Auth::Disabled"),
        }
    }
}

/// Request limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body, in bytes (larger: 413).
    pub body_bytes: usize,
    /// Longest user message, in characters (longer: 413).
    pub message_chars: usize,
    /// Most runs one token (or, without auth, the server) drives at once (more: 429).
    pub runs_per_token: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes: 4 * 1024 * 1024,
            message_chars: 200_000,
            runs_per_token: 8,
        }
    }
}

/// Timings of server-sent event streams (ThreadProtocol's recommended defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSettings {
    /// A keep-alive comment (`: ping`) this often (15 s).
    pub ping: Duration,
    /// With no event for this long, the stream checks that the run is still driven; a run
    /// whose driver is gone ends the stream with an error rather than leave it hanging (5 s).
    pub idle_timeout: Duration,
    /// Longest wait for a run's first event before the stream gives up with an error (30 s).
    pub stream_timeout: Duration,
}

impl Default for StreamSettings {
    fn default() -> Self {
        StreamSettings {
            ping: Duration::from_millis(15_000),
            idle_timeout: Duration::from_millis(5_000),
            stream_timeout: Duration::from_millis(30_000),
        }
    }
}

/// What a message does when its thread already has a run in progress (a run API request's
/// `multitask_strategy`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Busy {
    /// Wait for the run in progress, then run (the thread's queue).
    #[default]
    Enqueue,
    /// Refuse it (409).
    Reject,
    /// Stop the run in progress (it stays resumable), then run.
    Interrupt,
}

/// The configuration of a server.
///
/// # Examples
///
/// ```
/// let config = weft_server::ServerConfig::new("127.0.0.1:0".parse().expect("an address"));
/// assert!(config.addr.ip().is_loopback());
/// assert!(matches!(config.auth, weft_server::Auth::Token(_)));
/// ```
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen (default 127.0.0.1:4111).
    pub addr: SocketAddr,
    /// Who may call it (default: a token generated now).
    pub auth: Auth,
    /// Origins allowed to call it from a browser besides its own (CORS; none by default).
    pub allowed_origins: Vec<String>,
    /// Host names the server answers to besides its address and `localhost` (DNS rebinding
    /// protection: a request naming another `Host` is refused).
    pub allowed_hosts: Vec<String>,
    /// Request limits.
    pub limits: Limits,
    /// Stream timings.
    pub stream: StreamSettings,
    /// How every run starts (model, sandbox, budget, durability), as `weft run`'s flags.
    pub launch: Launch,
    /// What this build cannot run (see [`ModelCheck`]).
    pub model_check: ModelCheck,
}

fn no_check(_: &weft_provider::ModelReference) -> Option<String> {
    None
}

impl ServerConfig {
    /// A configuration listening on `addr` with a fresh token and default limits.
    pub fn new(addr: SocketAddr) -> Self {
        ServerConfig {
            addr,
            auth: Auth::Token(crate::auth::new_token()),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            limits: Limits::default(),
            stream: StreamSettings::default(),
            launch: Launch::default(),
            model_check: no_check,
        }
    }

    /// Whether the address is loopback only.
    pub fn is_loopback(&self) -> bool {
        match self.addr.ip() {
            IpAddr::V4(ip) => ip.is_loopback(),
            IpAddr::V6(ip) => ip.is_loopback(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ThreadProtocol's recommended stream timings (TP-067…TP-070) are the defaults.
    #[test]
    fn stream_timings_default_to_the_thread_protocol_recommendations() {
        let settings = StreamSettings::default();
        assert_eq!(settings.ping, Duration::from_secs(15));
        assert_eq!(settings.idle_timeout, Duration::from_secs(5));
        assert_eq!(settings.stream_timeout, Duration::from_secs(30));
        let config = ServerConfig::new("127.0.0.1:0".parse().expect("an address"));
        assert_eq!(config.stream, settings);
    }

    #[test]
    fn a_new_server_binds_loopback_and_needs_a_token() {
        let config = ServerConfig::new("127.0.0.1:4111".parse().expect("an address"));
        assert!(config.is_loopback());
        assert!(matches!(&config.auth, Auth::Token(t) if t.len() >= 32));
        assert!(
            config.allowed_origins.is_empty(),
            "CORS is closed by default"
        );
        let public = ServerConfig::new("0.0.0.0:4111".parse().expect("an address"));
        assert!(!public.is_loopback());
    }
}
