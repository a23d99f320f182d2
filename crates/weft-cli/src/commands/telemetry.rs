//! OpenTelemetry traces of `weft run`, `weft chat` and `weft resume` (feature `otel`, on by
//! default): set up when an OTLP endpoint is configured — the standard `OTEL_EXPORTER_OTLP_*`
//! variables, or `[telemetry] endpoint` in the project's `weft.toml` — and flushed by
//! [`finish`] before the process exits, whatever its exit code.

/// Sets up the exporter for `settings` (the project's `[telemetry]`) over the environment.
/// Without an endpoint nothing is set up, and runs pay one branch per model or tool call. An
/// exporter that cannot be built is reported and the run goes on untraced.
pub(crate) fn start(settings: &weft_otel::Settings) {
    #[cfg(feature = "otel")]
    {
        let env = |name: &str| std::env::var(name).ok();
        if let Some(config) = weft_otel::Config::resolve(settings, env)
            && let Err(error) = weft_otel::export::init(&config)
        {
            eprintln!("weft: warning: {error}; the run is not traced");
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = settings;
}

/// Exports the spans not yet sent and stops the exporter (at most a few seconds). Does
/// nothing when tracing was not set up.
pub(crate) fn finish() {
    #[cfg(feature = "otel")]
    weft_otel::export::shutdown();
}
