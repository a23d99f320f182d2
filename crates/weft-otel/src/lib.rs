//! OpenTelemetry traces of Weft's runs, following the GenAI semantic conventions
//! ([`semconv`]): `invoke_agent {agent}` for an agent run in one process, `chat {model}` for
//! each model call (a `CLIENT` span with provider, models, token usage, finish reasons and
//! the conversation id), `execute_tool {tool}` for each tool call that ran (with its call
//! id). Message content (prompts, answers, tool arguments and results) is recorded only when
//! opted in ([`Config::capture_content`]).
//!
//! This crate has two halves:
//!
//! * always: the span helpers ([`GenAiSpan`]), the W3C `traceparent` a run stores with its
//!   spec ([`traceparent`], [`parse_traceparent`]) and the configuration ([`Settings`],
//!   [`Config::resolve`]). Nothing is recorded until a tracer is [`install`]ed: without
//!   one, every helper returns at once after one check of a `OnceLock` (no allocation, no
//!   clock read) — a run without an exporter pays a branch per model or tool call;
//! * feature `export`: the SDK and the OTLP/HTTP (protobuf) exporter over the blocking
//!   reqwest client ([`export::init`], [`export::shutdown`]), for binaries (the `weft` CLI).
//!
//! # Examples
//!
//! ```
//! use weft_otel::{GenAiSpan, SpanParent};
//!
//! // No tracer installed: spans are inert and cost nothing.
//! let agent = GenAiSpan::invoke_agent("planner", "agent-1", "thread-1", None);
//! assert!(agent.traceparent().is_none());
//! let chat = GenAiSpan::chat(&agent.parent(), "openai", "gpt-4o", Some("thread-1"));
//! chat.end();
//! # let _ = SpanParent::none();
//! ```

use std::collections::BTreeMap;
use std::sync::OnceLock;

use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue, StringValue, Value};
use serde::Deserialize;

pub mod semconv;

#[cfg(feature = "export")]
pub mod export;

use semconv::*;

/// Errors of the telemetry configuration and exporter.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The `[telemetry]` table of `weft.toml` is not valid.
    #[error("[telemetry] in weft.toml: {0}")]
    Settings(String),
    /// The exporter could not be built (a bad endpoint or header).
    #[error("the OpenTelemetry exporter could not be set up: {0}")]
    Exporter(String),
}

struct Installed {
    tracer: BoxedTracer,
    capture_content: bool,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Records Weft's spans with `tracer` from now on (once per process: a second call is
/// ignored and returns `false`). `capture_content` opts in to message content.
pub fn install(tracer: BoxedTracer, capture_content: bool) -> bool {
    INSTALLED
        .set(Installed {
            tracer,
            capture_content,
        })
        .is_ok()
}

/// Whether spans are recorded (a tracer was installed).
#[inline]
pub fn enabled() -> bool {
    INSTALLED.get().is_some()
}

/// Whether message content is recorded on spans (opted in).
pub fn capture_content() -> bool {
    INSTALLED.get().is_some_and(|i| i.capture_content)
}

/// The W3C `traceparent` of `context` (`00-TRACE-SPAN-FLAGS`), `None` when it is not valid.
///
/// # Examples
///
/// ```
/// use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
///
/// let context = SpanContext::new(
///     TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736")?,
///     SpanId::from_hex("00f067aa0ba902b7")?,
///     TraceFlags::SAMPLED,
///     false,
///     TraceState::default(),
/// );
/// let header = weft_otel::traceparent(&context).unwrap();
/// assert_eq!(header, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
/// assert_eq!(weft_otel::parse_traceparent(&header).unwrap().span_id(), context.span_id());
/// # Ok::<(), std::num::ParseIntError>(())
/// ```
pub fn traceparent(context: &SpanContext) -> Option<String> {
    context.is_valid().then(|| {
        format!(
            "00-{:032x}-{:016x}-{:02x}",
            context.trace_id(),
            context.span_id(),
            context.trace_flags()
        )
    })
}

/// The span context a W3C `traceparent` names (as a remote context), `None` when the text
/// is not one (wrong version, lengths or hex; all-zero ids).
pub fn parse_traceparent(header: &str) -> Option<SpanContext> {
    let mut parts = header.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || version != "00"
        || trace.len() != 32
        || span.len() != 16
        || flags.len() != 2
    {
        return None;
    }
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    if !(hex(trace) && hex(span) && hex(flags)) {
        return None;
    }
    let context = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

/// What a new span is a child of: a span of this process or a stored (remote) context.
/// Cheap to clone; [`SpanParent::none`] when tracing is off.
#[derive(Clone, Default)]
pub struct SpanParent(Option<Context>);

impl std::fmt::Debug for SpanParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(cx) => write!(f, "SpanParent({:?})", traceparent(cx.span().span_context())),
            None => f.write_str("SpanParent(none)"),
        }
    }
}

impl SpanParent {
    /// No parent (and, when tracing is off, no spans).
    pub fn none() -> Self {
        SpanParent(None)
    }

    /// The stored context `traceparent` as a parent (`none` when tracing is off or the
    /// text is not a `traceparent`).
    pub fn remote(traceparent: &str) -> Self {
        if !enabled() {
            return SpanParent(None);
        }
        SpanParent(
            parse_traceparent(traceparent).map(|sc| Context::new().with_remote_span_context(sc)),
        )
    }

    /// The parent's `traceparent`.
    pub fn traceparent(&self) -> Option<String> {
        self.0
            .as_ref()
            .and_then(|cx| traceparent(cx.span().span_context()))
    }
}

/// A span of Weft's (one of the GenAI operations), ended by [`GenAiSpan::end`] or when
/// dropped. Inert (every method returns at once) when no tracer is installed.
#[derive(Default)]
pub struct GenAiSpan(Option<Context>);

impl std::fmt::Debug for GenAiSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("GenAiSpan")
            .field(&self.parent().traceparent())
            .finish()
    }
}

fn start(
    name: String,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
    parent: Option<&Context>,
) -> Option<Context> {
    let installed = INSTALLED.get()?;
    let root = Context::new();
    let parent = parent.unwrap_or(&root);
    let span = installed
        .tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(&installed.tracer, parent);
    Some(parent.with_span(span))
}

impl GenAiSpan {
    /// A span that records nothing.
    pub fn inert() -> Self {
        GenAiSpan(None)
    }

    /// `invoke_agent {agent}` (`INTERNAL`): one agent run in this process. `parent` is the
    /// `traceparent` stored with the run when an earlier process started it (the resumed
    /// process's span is its child, so the whole run is one trace); `None` starts a trace.
    pub fn invoke_agent(
        agent: &str,
        agent_id: &str,
        conversation_id: &str,
        parent: Option<&str>,
    ) -> Self {
        if !enabled() {
            return GenAiSpan(None);
        }
        let parent = parent.map(SpanParent::remote).unwrap_or_default();
        GenAiSpan(start(
            format!("{OP_INVOKE_AGENT} {agent}"),
            SpanKind::Internal,
            vec![
                KeyValue::new(GEN_AI_OPERATION_NAME, OP_INVOKE_AGENT),
                KeyValue::new(GEN_AI_AGENT_NAME, agent.to_owned()),
                KeyValue::new(GEN_AI_AGENT_ID, agent_id.to_owned()),
                KeyValue::new(GEN_AI_CONVERSATION_ID, conversation_id.to_owned()),
            ],
            parent.0.as_ref(),
        ))
    }

    /// `chat {model}` (`CLIENT`): one model call. `provider` is Weft's provider name
    /// (mapped by [`semconv::provider_name`]).
    pub fn chat(
        parent: &SpanParent,
        provider: &str,
        model: &str,
        conversation_id: Option<&str>,
    ) -> Self {
        if !enabled() {
            return GenAiSpan(None);
        }
        let mut attributes = vec![
            KeyValue::new(GEN_AI_OPERATION_NAME, OP_CHAT),
            KeyValue::new(GEN_AI_PROVIDER_NAME, provider_name(provider).to_owned()),
            KeyValue::new(GEN_AI_REQUEST_MODEL, model.to_owned()),
        ];
        if let Some(id) = conversation_id {
            attributes.push(KeyValue::new(GEN_AI_CONVERSATION_ID, id.to_owned()));
        }
        GenAiSpan(start(
            format!("{OP_CHAT} {model}"),
            SpanKind::Client,
            attributes,
            parent.0.as_ref(),
        ))
    }

    /// `execute_tool {tool}` (`INTERNAL`): one tool call that runs.
    pub fn execute_tool(parent: &SpanParent, tool: &str, call_id: &str, description: &str) -> Self {
        if !enabled() {
            return GenAiSpan(None);
        }
        let mut attributes = vec![
            KeyValue::new(GEN_AI_OPERATION_NAME, OP_EXECUTE_TOOL),
            KeyValue::new(GEN_AI_TOOL_NAME, tool.to_owned()),
            KeyValue::new(GEN_AI_TOOL_CALL_ID, call_id.to_owned()),
            KeyValue::new(GEN_AI_TOOL_TYPE, "function"),
        ];
        if !description.is_empty() {
            attributes.push(KeyValue::new(
                GEN_AI_TOOL_DESCRIPTION,
                description.to_owned(),
            ));
        }
        GenAiSpan(start(
            format!("{OP_EXECUTE_TOOL} {tool}"),
            SpanKind::Internal,
            attributes,
            parent.0.as_ref(),
        ))
    }

    /// Whether the span records (a tracer is installed).
    pub fn is_recording(&self) -> bool {
        self.0.is_some()
    }

    /// This span as the parent of others.
    pub fn parent(&self) -> SpanParent {
        SpanParent(self.0.clone())
    }

    /// The span's W3C `traceparent`.
    pub fn traceparent(&self) -> Option<String> {
        self.parent().traceparent()
    }

    /// Sets an attribute.
    pub fn set(&self, key: &'static str, value: impl Into<Value>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attribute(KeyValue::new(key, value));
        }
    }

    /// Sets a string attribute built only when the span records (content, JSON).
    pub fn set_with(&self, key: &'static str, value: impl FnOnce() -> String) {
        if let Some(cx) = &self.0 {
            cx.span().set_attribute(KeyValue::new(key, value()));
        }
    }

    /// Sets a message-content attribute when content capture is opted in.
    pub fn set_content(&self, key: &'static str, value: impl FnOnce() -> String) {
        if self.0.is_some() && capture_content() {
            self.set_with(key, value);
        }
    }

    /// The response side of a `chat` span: the model that answered, token usage and why it
    /// stopped.
    pub fn set_response(
        &self,
        response_model: Option<&str>,
        input_tokens: u64,
        output_tokens: u64,
        finish_reason: &str,
    ) {
        let Some(cx) = &self.0 else { return };
        let span = cx.span();
        if let Some(model) = response_model {
            span.set_attribute(KeyValue::new(GEN_AI_RESPONSE_MODEL, model.to_owned()));
        }
        span.set_attribute(KeyValue::new(
            GEN_AI_USAGE_INPUT_TOKENS,
            i64::try_from(input_tokens).unwrap_or(i64::MAX),
        ));
        span.set_attribute(KeyValue::new(
            GEN_AI_USAGE_OUTPUT_TOKENS,
            i64::try_from(output_tokens).unwrap_or(i64::MAX),
        ));
        span.set_attribute(KeyValue::new(
            GEN_AI_RESPONSE_FINISH_REASONS,
            Value::Array(vec![StringValue::from(finish_reason.to_owned())].into()),
        ));
    }

    /// Marks the span failed: `error.type` (low cardinality) and the status description.
    pub fn set_error(&self, error_type: &str, message: &str) {
        if let Some(cx) = &self.0 {
            let span = cx.span();
            span.set_attribute(KeyValue::new(ERROR_TYPE, error_type.to_owned()));
            span.set_status(Status::error(message.to_owned()));
        }
    }

    /// Ends the span (once; later calls do nothing).
    pub fn end(&self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }
}

impl Drop for GenAiSpan {
    fn drop(&mut self) {
        self.end();
    }
}

/// `[telemetry]` of `weft.toml`.
///
/// ```toml
/// [telemetry]
/// endpoint = "http://localhost:4318"   # the OTLP/HTTP base URL (`/v1/traces` is added)
/// headers = { authorization = "Bearer …" }
/// serviceName = "weft"
/// captureContent = false                # prompts, answers, tool arguments and results
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// The collector's OTLP/HTTP base URL (as `OTEL_EXPORTER_OTLP_ENDPOINT`).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The traces URL as is (as `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    #[serde(default)]
    pub traces_endpoint: Option<String>,
    /// Headers sent with every export.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `service.name` of the resource (default `weft`).
    #[serde(default)]
    pub service_name: Option<String>,
    /// Record message content (opt-in; default off).
    #[serde(default)]
    pub capture_content: Option<bool>,
}

impl Settings {
    /// Reads the `[telemetry]` table.
    ///
    /// # Errors
    /// [`TelemetryError::Settings`] for unknown keys or wrong types.
    pub fn from_value(value: &serde_json::Value) -> Result<Settings, TelemetryError> {
        Settings::deserialize(value).map_err(|e| TelemetryError::Settings(e.to_string()))
    }
}

/// The resolved telemetry configuration of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The traces URL to export to; `None`: the exporter reads the standard variables
    /// (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` +
    /// `/v1/traces`) itself.
    pub traces_endpoint: Option<String>,
    /// Headers from the settings (the exporter adds `OTEL_EXPORTER_OTLP_HEADERS` itself).
    pub headers: BTreeMap<String, String>,
    /// `service.name`.
    pub service_name: String,
    /// Record message content.
    pub capture_content: bool,
}

fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

impl Config {
    /// The configuration from the standard environment variables (`env`) over the project's
    /// `settings`; `None` when no endpoint is configured anywhere (no exporter: tracing
    /// stays off) or `OTEL_SDK_DISABLED=true` / `OTEL_TRACES_EXPORTER=none`.
    ///
    /// The environment wins: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` over `endpoint`; `OTEL_SERVICE_NAME` over
    /// `serviceName`; `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` over
    /// `captureContent`.
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_otel::{Config, Settings};
    ///
    /// let env = |name: &str| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://127.0.0.1:4318".to_owned());
    /// let config = Config::resolve(&Settings::default(), env).unwrap();
    /// assert_eq!(config.traces_endpoint, None); // the exporter reads the variable itself
    /// assert!(!config.capture_content);
    /// assert!(Config::resolve(&Settings::default(), |_| None).is_none());
    /// ```
    pub fn resolve(settings: &Settings, env: impl Fn(&str) -> Option<String>) -> Option<Config> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if env("OTEL_SDK_DISABLED").is_some_and(|v| truthy(&v))
            || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none")
        {
            return None;
        }
        let from_env = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
        let traces_endpoint = if from_env {
            None
        } else if let Some(url) = settings
            .traces_endpoint
            .as_deref()
            .filter(|u| !u.is_empty())
        {
            Some(url.to_owned())
        } else {
            let base = settings.endpoint.as_deref().filter(|u| !u.is_empty())?;
            Some(format!("{}/v1/traces", base.trim_end_matches('/')))
        };
        Some(Config {
            traces_endpoint,
            headers: settings.headers.clone(),
            service_name: env("OTEL_SERVICE_NAME")
                .or_else(|| settings.service_name.clone())
                .unwrap_or_else(|| "weft".to_owned()),
            capture_content: env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
                .map(|v| truthy(&v))
                .or(settings.capture_content)
                .unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn traceparents_round_trip_and_bad_ones_are_refused() {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(header).unwrap();
        assert!(context.is_remote() && context.is_sampled());
        assert_eq!(traceparent(&context).unwrap(), header);
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_environment_wins_over_the_project_and_nothing_configured_is_off() {
        let settings = Settings {
            endpoint: Some("http://collector:4318/".into()),
            service_name: Some("proj".into()),
            capture_content: Some(true),
            ..Settings::default()
        };
        let config = Config::resolve(&settings, |_| None).unwrap();
        assert_eq!(
            config.traces_endpoint.as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(config.service_name, "proj");
        assert!(config.capture_content);

        let env = |name: &str| match name {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some("http://other:4318/t".to_owned()),
            "OTEL_SERVICE_NAME" => Some("svc".to_owned()),
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" => Some("false".to_owned()),
            _ => None,
        };
        let config = Config::resolve(&settings, env).unwrap();
        assert_eq!(config.traces_endpoint, None);
        assert_eq!(config.service_name, "svc");
        assert!(!config.capture_content);

        assert!(Config::resolve(&Settings::default(), |_| None).is_none());
        let disabled = |name: &str| (name == "OTEL_SDK_DISABLED").then(|| "true".to_owned());
        assert!(Config::resolve(&settings, disabled).is_none());
    }

    #[test]
    fn project_settings_read_camel_case_and_refuse_unknown_keys() {
        let value = serde_json::json!({"endpoint": "http://c:4318", "captureContent": true,
            "headers": {"x-api-key": "k"}});
        let settings = Settings::from_value(&value).unwrap();
        assert_eq!(settings.capture_content, Some(true));
        assert_eq!(settings.headers["x-api-key"], "k");
        assert!(Settings::from_value(&serde_json::json!({"endpont": "x"})).is_err());
    }

    #[test]
    fn without_a_tracer_spans_are_inert() {
        let span = GenAiSpan::chat(&SpanParent::none(), "openai", "m", None);
        assert!(!span.is_recording());
        assert!(span.traceparent().is_none());
        span.set_response(Some("m"), 1, 2, "end_turn");
        span.set_error("x", "y");
        span.end();
    }
}
