//! `logging()` (UAP-1.0 §9.3): one line when a run starts and one when it ends or fails.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{Middleware, MiddlewareContext};
use crate::agent::GenerateResult;
use crate::error::AgentError;

/// Log severity, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum LogLevel {
    /// Details.
    Debug,
    /// Normal progress (the default).
    #[default]
    Info,
    /// Something odd.
    Warn,
    /// A failure.
    Error,
}

impl LogLevel {
    /// `"debug"`, `"info"`, `"warn"`, `"error"`.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// A log sink: receives the level and the line.
pub type Logger = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

/// Options of `logging()`.
#[derive(Clone)]
pub struct LoggingOptions {
    /// The lowest level written (default `Info`).
    pub level: LogLevel,
    /// Where lines go (default: standard output).
    pub logger: Option<Logger>,
    /// Also log the input and the reply text (default false).
    pub include_messages: bool,
    /// Log the run's duration (default true).
    pub include_timing: bool,
}

impl Default for LoggingOptions {
    fn default() -> Self {
        LoggingOptions {
            level: LogLevel::Info,
            logger: None,
            include_messages: false,
            include_timing: true,
        }
    }
}

impl fmt::Debug for LoggingOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoggingOptions")
            .field("level", &self.level)
            .field("logger", &self.logger.as_ref().map(|_| "custom"))
            .field("include_messages", &self.include_messages)
            .field("include_timing", &self.include_timing)
            .finish()
    }
}

/// The logging middleware.
#[derive(Debug, Clone)]
pub struct Logging {
    options: LoggingOptions,
}

/// `logging(options)`.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use weft_agent::middleware::{logging, LogLevel, LoggingOptions};
///
/// let lines = Arc::new(Mutex::new(Vec::new()));
/// let sink = lines.clone();
/// let middleware = logging(LoggingOptions {
///     level: LogLevel::Debug,
///     logger: Some(Arc::new(move |level, line: &str| {
///         sink.lock().unwrap().push(format!("{}: {line}", level.as_str()));
///     })),
///     ..LoggingOptions::default()
/// });
/// # let _ = middleware;
/// ```
pub fn logging(options: LoggingOptions) -> Logging {
    Logging { options }
}

const START_KEY: &str = "logging.startMs";

impl Logging {
    fn log(&self, level: LogLevel, line: &str) {
        if level < self.options.level {
            return;
        }
        match &self.options.logger {
            Some(logger) => logger(level, line),
            None => println!("[{}] {line}", level.as_str()),
        }
    }
}

#[async_trait]
impl Middleware for Logging {
    fn name(&self) -> &str {
        "logging"
    }

    async fn before(&self, ctx: &mut MiddlewareContext) -> Result<(), AgentError> {
        ctx.metadata.insert(
            START_KEY.into(),
            Value::from(chrono::Utc::now().timestamp_millis()),
        );
        let mut line = format!(
            "agent {} start: strategy {}, state {} (step {}, {} messages)",
            ctx.agent.id(),
            ctx.agent.execution_name(),
            ctx.state.id(),
            ctx.state.step(),
            ctx.state.message_count()
        );
        if self.options.include_messages {
            line.push_str(&format!(", input: {:?}", ctx.input.text()));
        }
        self.log(LogLevel::Info, &line);
        Ok(())
    }

    async fn after(
        &self,
        ctx: &mut MiddlewareContext,
        result: GenerateResult,
    ) -> Result<GenerateResult, AgentError> {
        let mut line = format!(
            "agent {} done: step {}, {} tool executions, {} tokens",
            ctx.agent.id(),
            result.state.step(),
            result.turn.tool_executions.len(),
            result.turn.usage.total_tokens
        );
        if self.options.include_timing
            && let Some(start) = ctx.metadata.get(START_KEY).and_then(Value::as_i64)
        {
            line.push_str(&format!(
                ", {} ms",
                chrono::Utc::now().timestamp_millis() - start
            ));
        }
        if self.options.include_messages {
            line.push_str(&format!(", response: {:?}", result.turn.text()));
        }
        self.log(LogLevel::Info, &line);
        Ok(result)
    }

    async fn on_error(
        &self,
        ctx: &mut MiddlewareContext,
        error: &AgentError,
    ) -> Option<GenerateResult> {
        self.log(
            LogLevel::Error,
            &format!("agent {} failed: {error}", ctx.agent.id()),
        );
        None
    }
}
