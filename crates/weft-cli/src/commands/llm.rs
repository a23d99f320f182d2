//! `weft llm`: one prompt to one model, printed as text (optionally streamed) or as the whole
//! UPP-1.2 `Turn` in JSON.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use futures_util::StreamExt as _;
use weft_provider::{
    LlmOptions, ProviderConfig, ProviderRegistry, StreamEventType, Turn, UppError, llm,
};

/// `weft llm` flags.
#[derive(Debug, Args)]
#[command(after_help = "Model references are PROVIDER:MODEL:\n  \
    openai:MODEL                 OpenAI Chat Completions (OPENAI_API_KEY)\n  \
    openai-compatible:MODEL      any Chat Completions server (--base-url or WEFT_OPENAI_COMPATIBLE_BASE_URL)\n  \
    scripted:PATH                responses from a JSON script file, for tests\n  \
    local:gemma3-270m            the embedded local model (build feature `local`; `weft models list`)\n\
    Without --model and without a provider key, the local model is used when it is installed.\n\
    Run `weft llm --list-providers` for every registered provider.")]
pub(crate) struct LlmArgs {
    /// The model, as PROVIDER:MODEL (e.g. openai:gpt-4o-mini). Default: the local model, when no provider key is set.
    #[arg(long, short = 'm')]
    model: Option<String>,
    /// Override the provider's endpoint (a proxy, a local server).
    #[arg(long)]
    base_url: Option<String>,
    /// The system prompt.
    #[arg(long)]
    system: Option<String>,
    /// Print the reply as it arrives.
    #[arg(long)]
    stream: bool,
    /// Print the whole Turn as UPP-1.2 JSON instead of the text.
    #[arg(long)]
    json: bool,
    /// A vendor parameter passed through unchanged, as KEY=JSON (repeatable), e.g. temperature=0.2.
    #[arg(long = "param", value_name = "KEY=JSON")]
    params: Vec<String>,
    /// Timeout of one HTTP attempt, in seconds (default: none, but a 10 s connect timeout
    /// and a 120 s idle timeout apply). Failed calls are retried (3 attempts in all, each
    /// announced on stderr), so a call may take about 3 × this plus the waits.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// List the registered providers and exit.
    #[arg(long)]
    list_providers: bool,
    /// The prompt.
    #[arg(required_unless_present = "list_providers")]
    prompt: Option<String>,
}

/// Runs `weft llm`.
pub(crate) fn run(args: LlmArgs) -> anyhow::Result<ExitCode> {
    let mut registry = ProviderRegistry::with_builtins();
    registry.register(weft_local::NAME, weft_local::provider);
    if args.list_providers {
        for name in registry.names() {
            println!("{name}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(prompt) = args.prompt.as_deref() else {
        anyhow::bail!("a prompt is required");
    };
    let reference = match args.model.as_deref() {
        Some(model) => registry.resolve(model)?,
        None => super::models::default_model()?,
    };
    if reference.provider.name == weft_local::NAME {
        // candle sizes its thread pool once, before the runtime's threads start.
        weft_local::configure_threads();
    }
    let mut config = ProviderConfig::default();
    if let Some(url) = &args.base_url {
        config.base_url = Some(url.clone());
    }
    if let Some(seconds) = args.timeout {
        anyhow::ensure!(
            seconds.is_finite() && seconds > 0.0,
            "--timeout must be a positive number of seconds"
        );
        config.timeout = Some(Duration::from_secs_f64(seconds));
    }
    let mut options = LlmOptions::new(reference).config(config);
    options.system.clone_from(&args.system);
    for param in &args.params {
        let (key, value) = param
            .split_once('=')
            .with_context(|| format!("--param {param:?} is not KEY=JSON"))?;
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
        options = options.param(key, value);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let instance = match llm(options) {
            Ok(instance) => instance,
            Err(error) => return Ok(provider_failure(&error)),
        };
        let outcome = if args.stream {
            stream_turn(&instance, prompt, !args.json).await
        } else {
            tokio::select! {
                turn = instance.generate(&[], prompt) => Outcome::from(turn),
                _ = tokio::signal::ctrl_c() => Outcome::Interrupted,
            }
        };
        match outcome {
            Outcome::Done(turn) => {
                if args.json {
                    println!("{}", serde_json::to_string_pretty(&turn)?);
                } else if !args.stream {
                    println!("{}", turn.text());
                }
                Ok(ExitCode::SUCCESS)
            }
            Outcome::Failed(error) => Ok(provider_failure(&error)),
            Outcome::Interrupted => {
                eprintln!("weft: interrupted");
                Ok(ExitCode::from(130))
            }
        }
    })
}

enum Outcome {
    Done(Box<Turn>),
    Failed(UppError),
    Interrupted,
}

impl From<Result<Turn, UppError>> for Outcome {
    fn from(result: Result<Turn, UppError>) -> Self {
        match result {
            Ok(turn) => Outcome::Done(Box::new(turn)),
            Err(error) => Outcome::Failed(error),
        }
    }
}

async fn stream_turn(instance: &weft_provider::LlmInstance, prompt: &str, print: bool) -> Outcome {
    let mut stream = match instance.stream(&[], prompt) {
        Ok(stream) => stream,
        Err(error) => return Outcome::Failed(error),
    };
    let mut stdout = std::io::stdout().lock();
    let mut printed_any = false;
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            _ = tokio::signal::ctrl_c() => {
                stream.abort();
                return Outcome::Interrupted;
            }
        };
        match next {
            Some(Ok(event)) if print && event.event_type == StreamEventType::TextDelta => {
                if let Some(text) = &event.delta.text {
                    let _ = stdout.write_all(text.as_bytes());
                    let _ = stdout.flush();
                    printed_any = true;
                }
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => break,
        }
    }
    if print && printed_any {
        let _ = writeln!(stdout);
    }
    Outcome::from(stream.turn().await)
}

fn provider_failure(error: &UppError) -> ExitCode {
    eprintln!(
        "weft: {}: {} (provider {})",
        error.code, error.message, error.provider
    );
    ExitCode::from(1)
}
