//! The OTLP/HTTP exporter (feature `export`): protobuf over the blocking reqwest client,
//! spans batched on the SDK's own export thread (the async reqwest client is known to drop
//! every span exported from that thread).
//!
//! A binary calls [`init`] once with the resolved [`Config`] before it starts runs, and
//! [`shutdown`] before it exits — on every exit path — so the batch is flushed.
//!
//! # Examples
//!
//! ```no_run
//! let settings = weft_otel::Settings::default();
//! if let Some(config) = weft_otel::Config::resolve(&settings, |name| std::env::var(name).ok()) {
//!     weft_otel::export::init(&config)?;
//! }
//! // … runs …
//! weft_otel::export::shutdown();
//! # Ok::<(), weft_otel::TelemetryError>(())
//! ```

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::InstrumentationScope;
use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::{Config, TelemetryError, install};

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// How long [`shutdown`] waits for the last batch to be exported.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Sets up the exporter and installs Weft's tracer (once per process; later calls do
/// nothing). Safe to call inside or outside a tokio runtime.
///
/// # Errors
/// [`TelemetryError::Exporter`] when the endpoint or a header is not valid.
pub fn init(config: &Config) -> Result<(), TelemetryError> {
    if PROVIDER.get().is_some() {
        return Ok(());
    }
    // reqwest has no crypto provider of its own (an `https` endpoint needs one); idempotent.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary);
    if let Some(endpoint) = &config.traces_endpoint {
        builder = builder.with_endpoint(endpoint.clone());
    }
    if !config.headers.is_empty() {
        builder = builder.with_headers(
            config
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<HashMap<_, _>>(),
        );
    }
    let exporter = builder
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(config.service_name.clone())
                .build(),
        )
        .build();
    let scope = InstrumentationScope::builder("weft")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let tracer = BoxedTracer::new(Box::new(provider.tracer_with_scope(scope)));
    if PROVIDER.set(provider).is_ok() {
        install(tracer, config.capture_content);
    }
    Ok(())
}

/// Flushes the spans not yet exported and stops the exporter (waits up to 5 s). Does
/// nothing when [`init`] was not called. Blocks: call it as the process ends.
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.force_flush();
        let _ = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
    }
}
