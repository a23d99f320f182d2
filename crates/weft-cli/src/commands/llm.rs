//! `weft llm`: one prompt to one model, printed as text (optionally streamed) or as the whole
//! UPP-1.2 `Turn` in JSON (with `--stream`, each stream event as a JSON line, then the turn).
//! No tools are offered: tool calls the model makes anyway end the turn, in its
//! `response.toolCalls`.

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
    openai-responses:MODEL       OpenAI Responses (OPENAI_API_KEY)\n  \
    anthropic:MODEL              Anthropic Messages (ANTHROPIC_API_KEY)\n  \
    google:MODEL                 Gemini (GEMINI_API_KEY or GOOGLE_API_KEY)\n  \
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
    /// Print the whole Turn as UPP-1.2 JSON instead of the text; with --stream, every stream
    /// event as one JSON line, then {"type":"turn","turn":TURN}.
    #[arg(long)]
    json: bool,
    /// A vendor parameter passed through unchanged, as KEY=JSON (repeatable), e.g.
    /// temperature=0.2; a string is quoted as JSON: user='"me"'.
    #[arg(long = "param", value_name = "KEY=JSON")]
    params: Vec<String>,
    /// An HTTP header sent with every request, as NAME:VALUE (repeatable), e.g. for a vendor beta.
    #[arg(long = "header", value_name = "NAME:VALUE")]
    headers: Vec<String>,
    /// Structured output: a JSON Schema file (root "type": "object"); the reply is parsed into
    /// the Turn's `data`, which is what is printed.
    #[arg(long, value_name = "FILE")]
    schema: Option<std::path::PathBuf>,
    /// Timeout of one HTTP attempt, in seconds (default: none, but a 10 s connect timeout
    /// and a 120 s idle timeout apply). Failed calls are retried (3 attempts in all, each
    /// announced on stderr), so a call may take about 3 × this plus the waits.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Print the call's tokens and cost on stderr after the reply (`cost unknown` for a
    /// model without a price).
    #[arg(long)]
    cost: bool,
    /// Model prices over Weft's built-in table, as for `weft run --pricing` (implies --cost).
    #[arg(long, value_name = "FILE")]
    pricing: Option<std::path::PathBuf>,
    /// List the registered providers and exit.
    #[arg(long)]
    list_providers: bool,
    /// The prompt (default: standard input, when it is not a terminal).
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
    let prompt = match args.prompt.clone() {
        Some(prompt) => prompt,
        None => read_prompt()?,
    };
    let prompt = prompt.as_str();
    let reference = match args.model.as_deref() {
        Some(model) => registry.resolve(model)?,
        None => super::models::default_model()?,
    };
    if let Some(problem) = weft_standard::preflight::check_one(
        &reference,
        args.base_url.as_deref(),
        super::models::local_model_check,
    ) {
        anyhow::bail!("{}: {problem}", reference.to_reference_string());
    }
    if reference.provider.name == weft_local::NAME {
        // candle sizes its thread pool once, before the runtime's threads start.
        weft_local::configure_threads();
    }
    // The price is looked up before the call: a malformed --pricing file is a usage error.
    let quote = if args.cost || args.pricing.is_some() {
        match super::pricing::prices(None, args.pricing.as_deref()) {
            Ok(prices) => Some(prices.quote(&reference.provider.name, &reference.model_id)),
            Err(message) => {
                eprintln!("weft: {message}");
                return Ok(ExitCode::from(2));
            }
        }
    } else {
        None
    };
    let model_name = format!("{}:{}", reference.provider.name, reference.model_id);
    let config = provider_config(args.base_url.as_deref(), args.timeout, &args.headers)?;
    let mut options = LlmOptions::new(reference).config(config);
    options.system.clone_from(&args.system);
    options.params = parse_params(&args.params)?;
    if let Some(path) = &args.schema {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the schema {}", path.display()))?;
        let schema: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("the schema {} is not JSON", path.display()))?;
        options = options.structure(schema);
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
            let print = if args.json {
                Print::JsonLines
            } else if args.schema.is_some() {
                Print::Nothing
            } else {
                Print::Text
            };
            stream_turn(&instance, prompt, print).await
        } else {
            tokio::select! {
                turn = instance.generate(&[], prompt) => Outcome::from(turn),
                _ = tokio::signal::ctrl_c() => Outcome::Interrupted,
            }
        };
        match outcome {
            Outcome::Done(turn) => {
                if let Some(quote) = &quote {
                    let usage = &turn.usage;
                    let priced = match quote {
                        Some(q) => format!(
                            "{} ({}, {})",
                            super::pricing::cost_text(Some(q.cost(usage))),
                            q.model,
                            q.origin()
                        ),
                        None => format!("cost unknown ({model_name} has no price)"),
                    };
                    eprintln!(
                        "weft: {} in / {} out tokens · {priced}",
                        usage.input_tokens, usage.output_tokens
                    );
                }
                if args.json && args.stream {
                    let line = serde_json::json!({"type": "turn", "turn": turn});
                    println!("{}", serde_json::to_string(&line)?);
                } else if args.json {
                    println!("{}", serde_json::to_string_pretty(&turn)?);
                } else if let Some(data) = &turn.data {
                    println!("{}", serde_json::to_string_pretty(data)?);
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

/// What `stream_turn` prints as events arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Print {
    /// The text deltas.
    Text,
    /// Every event, one JSON object a line.
    JsonLines,
    /// Nothing (the structured data is printed at the end).
    Nothing,
}

async fn stream_turn(instance: &weft_provider::LlmInstance, prompt: &str, print: Print) -> Outcome {
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
            Some(Ok(event)) if print == Print::JsonLines => {
                if let Ok(line) = serde_json::to_string(&event) {
                    let _ = writeln!(stdout, "{line}");
                    let _ = stdout.flush();
                }
            }
            Some(Ok(event))
                if print == Print::Text && event.event_type == StreamEventType::TextDelta =>
            {
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
    if printed_any {
        let _ = writeln!(stdout);
    }
    Outcome::from(stream.turn().await)
}

/// The prompt from standard input (`echo hi | weft llm`); a terminal is not read.
fn read_prompt() -> anyhow::Result<String> {
    use std::io::{IsTerminal as _, Read as _};
    let stdin = std::io::stdin();
    anyhow::ensure!(
        !stdin.is_terminal(),
        "give a prompt: `weft llm \"Say hi\"`, or pipe one in: `echo \"Say hi\" | weft llm`"
    );
    let mut text = String::new();
    stdin
        .lock()
        .read_to_string(&mut text)
        .context("cannot read the prompt from standard input")?;
    let text = text.trim_end().to_owned();
    anyhow::ensure!(
        !text.trim().is_empty(),
        "the prompt is empty: give one as an argument or on standard input"
    );
    Ok(text)
}

/// The provider configuration of the command-line flags shared by `weft llm` and
/// `weft embed`.
///
/// # Errors
/// A usage error for a base URL without `http://` or `https://`, a timeout that is not a
/// positive number or a header without `:`.
pub(crate) fn provider_config(
    base_url: Option<&str>,
    timeout: Option<f64>,
    headers: &[String],
) -> anyhow::Result<ProviderConfig> {
    if let Some(url) = base_url {
        weft_standard::preflight::check_base_url(url)
            .map_err(|problem| anyhow::anyhow!("--base-url: {problem}"))?;
    }
    let mut config = ProviderConfig {
        base_url: base_url.map(str::to_owned),
        ..ProviderConfig::default()
    };
    if let Some(seconds) = timeout {
        anyhow::ensure!(
            seconds.is_finite() && seconds > 0.0,
            "--timeout must be a positive number of seconds"
        );
        config.timeout = Some(Duration::from_secs_f64(seconds));
    }
    for header in headers {
        let (name, value) = header
            .split_once(':')
            .filter(|(name, _)| !name.trim().is_empty())
            .with_context(|| format!("--header {header:?} is not NAME:VALUE"))?;
        config = config.header(name.trim(), value.trim());
    }
    Ok(config)
}

/// `--param KEY=JSON` flags as vendor params. The value must be JSON: `temperature=0.2`,
/// `stop=["\n"]`, and a string in quotes, `user='"me"'`; a bare word is an error rather than
/// silently a string, so a typo in a number or a list is not sent as text.
///
/// # Errors
/// A usage error for a flag without `=` or with a value that is not JSON.
pub(crate) fn parse_params(
    params: &[String],
) -> anyhow::Result<Option<serde_json::Map<String, serde_json::Value>>> {
    let mut map = serde_json::Map::new();
    for param in params {
        let (key, value) = param
            .split_once('=')
            .with_context(|| format!("--param {param:?} is not KEY=JSON"))?;
        let value = serde_json::from_str(value).map_err(|_| {
            anyhow::anyhow!(
                "--param {param:?}: the value is not JSON; quote a string as JSON, e.g. --param '{key}=\"{value}\"'"
            )
        })?;
        map.insert(key.to_owned(), value);
    }
    Ok((!map.is_empty()).then_some(map))
}

pub(crate) fn provider_failure(error: &UppError) -> ExitCode {
    eprintln!(
        "weft: {}: {} (provider {})",
        error.code, error.message, error.provider
    );
    ExitCode::from(1)
}
