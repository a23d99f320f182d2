//! Retry strategies (UPP-1.2 §4.3).
//!
//! The HTTP layer asks the strategy after every failed attempt whether and when to try again.
//! Only retryable errors ([`UppError::is_retryable`]) reach `on_retry`; a server's
//! `Retry-After` is carried on the error and honoured by the built-in strategies.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::UppError;

/// Decides whether and when a failed request is retried.
pub trait RetryStrategy: Send + Sync {
    /// The delay before attempt `attempt + 1`, or `None` to give up. `attempt` counts the
    /// attempts made so far (1 after the first failure).
    fn on_retry(&self, error: &UppError, attempt: u32) -> Option<Duration>;

    /// A delay to wait before every request (pre-emptive rate limiting). Default: none.
    fn before_request(&self) -> Option<Duration> {
        None
    }

    /// Called after a successful request. Default: nothing.
    fn reset(&self) {}

    /// The most attempts this strategy makes in all, when it has a fixed bound (shown to
    /// users as `(2/3)`). Default: unknown.
    fn max_attempts(&self) -> Option<u32> {
        None
    }
}

/// What the HTTP layer is about to do after a failed attempt: wait `delay`, then try again.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    /// The provider.
    pub provider: String,
    /// Why the last attempt failed.
    pub code: crate::error::ErrorCode,
    /// The error's message.
    pub message: String,
    /// The attempt about to be made (2 for the first retry).
    pub next_attempt: u32,
    /// The strategy's bound on attempts, when it has one.
    pub max_attempts: Option<u32>,
    /// The wait before it.
    pub delay: Duration,
}

impl RetryNotice {
    /// One line for users, e.g. `rate limited; retrying in 30 s (2/3)`.
    pub fn describe(&self) -> String {
        use crate::error::ErrorCode;
        let why = match self.code {
            ErrorCode::RateLimited => "rate limited".to_owned(),
            ErrorCode::Timeout => "timed out".to_owned(),
            ErrorCode::NetworkError => "network error".to_owned(),
            ErrorCode::ProviderError => "provider error".to_owned(),
            other => other.as_str().to_ascii_lowercase(),
        };
        let delay = if self.delay >= Duration::from_secs(1) {
            format!("{} s", (self.delay.as_secs_f64() * 10.0).round() / 10.0)
        } else {
            format!("{} ms", self.delay.as_millis())
        };
        let count = match self.max_attempts {
            Some(max) => format!("{}/{max}", self.next_attempt),
            None => format!("attempt {}", self.next_attempt),
        };
        format!("{}: {why}; retrying in {delay} ({count})", self.provider)
    }
}

/// Told about every retry before its wait ([`crate::ProviderConfig::retry_observer`], or the
/// process-wide one of [`set_retry_observer`]).
pub type RetryObserver = Arc<dyn Fn(&RetryNotice) + Send + Sync>;

static GLOBAL_OBSERVER: std::sync::OnceLock<RetryObserver> = std::sync::OnceLock::new();

/// Sets the process-wide retry observer (used by configs without their own), once; a CLI
/// sets it at start to announce retries. Returns `false` if one was set already.
pub fn set_retry_observer(observer: RetryObserver) -> bool {
    GLOBAL_OBSERVER.set(observer).is_ok()
}

/// The process-wide retry observer, if one was set.
pub fn global_retry_observer() -> Option<&'static RetryObserver> {
    GLOBAL_OBSERVER.get()
}

/// The strategy used when the config names none: exponential backoff, 3 attempts in all,
/// 500 ms initial delay, 30 s cap, jitter, `Retry-After` honoured.
pub fn default_strategy() -> Arc<dyn RetryStrategy> {
    Arc::new(ExponentialBackoff {
        max_attempts: 3,
        initial_delay: Duration::from_millis(500),
        max_delay: Duration::from_secs(30),
        jitter: true,
    })
}

/// Exponentially growing delays (`initial · 2^(attempt-1)`, capped at `max_delay`), with
/// optional full jitter (a random delay in `[delay/2, delay]`). A server-given `Retry-After`
/// replaces the computed delay.
#[derive(Debug, Clone)]
pub struct ExponentialBackoff {
    /// Total attempts, the first included.
    pub max_attempts: u32,
    /// Delay before the second attempt.
    pub initial_delay: Duration,
    /// Upper bound of a computed delay.
    pub max_delay: Duration,
    /// Randomize delays.
    pub jitter: bool,
}

impl Default for ExponentialBackoff {
    fn default() -> Self {
        ExponentialBackoff {
            max_attempts: 5,
            initial_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            jitter: true,
        }
    }
}

impl ExponentialBackoff {
    fn computed(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
        let delay = self
            .initial_delay
            .saturating_mul(factor)
            .min(self.max_delay);
        if self.jitter {
            let half = delay / 2;
            half + delay.mul_f64(fastrand::f64() * 0.5)
        } else {
            delay
        }
    }
}

impl RetryStrategy for ExponentialBackoff {
    fn on_retry(&self, error: &UppError, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_attempts || !error.is_retryable() {
            return None;
        }
        Some(error.retry_after.unwrap_or_else(|| self.computed(attempt)))
    }

    fn max_attempts(&self) -> Option<u32> {
        Some(self.max_attempts)
    }
}

/// A constant delay between attempts; `Retry-After` wins when present.
#[derive(Debug, Clone)]
pub struct LinearBackoff {
    /// Total attempts, the first included.
    pub max_attempts: u32,
    /// The delay.
    pub delay: Duration,
}

impl RetryStrategy for LinearBackoff {
    fn on_retry(&self, error: &UppError, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_attempts || !error.is_retryable() {
            return None;
        }
        Some(error.retry_after.unwrap_or(self.delay))
    }

    fn max_attempts(&self) -> Option<u32> {
        Some(self.max_attempts)
    }
}

/// Never retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRetry;

impl RetryStrategy for NoRetry {
    fn on_retry(&self, _error: &UppError, _attempt: u32) -> Option<Duration> {
        None
    }
}

/// Waits for the server's `Retry-After`, else `fallback_delay`; at most `max_attempts`.
#[derive(Debug, Clone)]
pub struct RetryAfterStrategy {
    /// Delay when the server gave none.
    pub fallback_delay: Duration,
    /// Total attempts, the first included.
    pub max_attempts: u32,
}

impl RetryAfterStrategy {
    /// With the given fallback and 3 attempts.
    pub fn new(fallback_delay: Duration) -> Self {
        RetryAfterStrategy {
            fallback_delay,
            max_attempts: 3,
        }
    }
}

impl RetryStrategy for RetryAfterStrategy {
    fn on_retry(&self, error: &UppError, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_attempts || !error.is_retryable() {
            return None;
        }
        Some(error.retry_after.unwrap_or(self.fallback_delay))
    }

    fn max_attempts(&self) -> Option<u32> {
        Some(self.max_attempts)
    }
}

/// Token-bucket rate limiting before requests: `capacity` tokens, refilled at `refill_rate`
/// tokens per second; a request takes one token and waits when none is left. Failed requests
/// are not retried by the bucket itself.
pub struct TokenBucket {
    capacity: f64,
    refill_rate: f64,
    state: Mutex<(f64, Instant)>,
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucket")
            .field("capacity", &self.capacity)
            .field("refill_rate", &self.refill_rate)
            .finish_non_exhaustive()
    }
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(capacity: u32, refill_rate: f64) -> Self {
        let capacity = f64::from(capacity.max(1));
        TokenBucket {
            capacity,
            refill_rate: if refill_rate.is_finite() && refill_rate > 0.0 {
                refill_rate
            } else {
                1.0
            },
            state: Mutex::new((capacity, Instant::now())),
        }
    }
}

impl RetryStrategy for TokenBucket {
    fn on_retry(&self, _error: &UppError, _attempt: u32) -> Option<Duration> {
        None
    }

    fn before_request(&self) -> Option<Duration> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let (tokens, last) = *state;
        let tokens =
            (tokens + now.duration_since(last).as_secs_f64() * self.refill_rate).min(self.capacity);
        // Take the token now (possibly going negative): concurrent callers queue up fairly.
        *state = (tokens - 1.0, now);
        if tokens >= 1.0 {
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - tokens) / self.refill_rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn err(code: ErrorCode) -> UppError {
        UppError::llm(code, "p", "m")
    }

    #[test]
    fn exponential_backoff_grows_caps_and_stops() {
        let s = ExponentialBackoff {
            max_attempts: 5,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
            jitter: false,
        };
        let e = err(ErrorCode::RateLimited);
        let delays: Vec<_> = (1..=5).map(|a| s.on_retry(&e, a)).collect();
        assert_eq!(
            delays,
            vec![
                Some(Duration::from_millis(100)),
                Some(Duration::from_millis(200)),
                Some(Duration::from_millis(300)),
                Some(Duration::from_millis(300)),
                None
            ]
        );
        assert_eq!(s.on_retry(&err(ErrorCode::AuthenticationFailed), 1), None);
    }

    #[test]
    fn jitter_stays_within_half_to_full_delay() {
        let s = ExponentialBackoff {
            max_attempts: 10,
            initial_delay: Duration::from_millis(1000),
            max_delay: Duration::from_secs(10),
            jitter: true,
        };
        for _ in 0..200 {
            let d = s.on_retry(&err(ErrorCode::Timeout), 2).unwrap_or_default();
            assert!(
                d >= Duration::from_millis(1000) && d <= Duration::from_millis(2000),
                "{d:?}"
            );
        }
    }

    #[test]
    fn retry_after_wins_over_computed_delay() {
        let e = err(ErrorCode::RateLimited).with_retry_after(Duration::from_secs(7));
        assert_eq!(
            ExponentialBackoff::default().on_retry(&e, 1),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            RetryAfterStrategy::new(Duration::from_secs(1)).on_retry(&e, 1),
            Some(Duration::from_secs(7))
        );
        let plain = err(ErrorCode::RateLimited);
        assert_eq!(
            RetryAfterStrategy::new(Duration::from_secs(1)).on_retry(&plain, 1),
            Some(Duration::from_secs(1))
        );
    }

    #[test]
    fn linear_and_no_retry() {
        let s = LinearBackoff {
            max_attempts: 3,
            delay: Duration::from_millis(50),
        };
        let e = err(ErrorCode::ProviderError);
        assert_eq!(s.on_retry(&e, 1), Some(Duration::from_millis(50)));
        assert_eq!(s.on_retry(&e, 2), Some(Duration::from_millis(50)));
        assert_eq!(s.on_retry(&e, 3), None);
        assert_eq!(NoRetry.on_retry(&e, 1), None);
    }

    #[test]
    fn token_bucket_waits_when_empty() {
        let bucket = TokenBucket::new(2, 10.0);
        assert_eq!(bucket.before_request(), None);
        assert_eq!(bucket.before_request(), None);
        let wait = bucket.before_request().unwrap_or_default();
        assert!(
            wait > Duration::from_millis(50) && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
    }
}
