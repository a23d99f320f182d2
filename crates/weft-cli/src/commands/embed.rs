//! `weft embed`: vectors for one or more texts from an embedding provider, printed as the
//! UPP-1.2 `EmbeddingResult` in JSON.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use weft_provider::{
    EmbedOptions, EmbeddingInput, EmbeddingInputType, EmbeddingOptions, ProviderRegistry, embedding,
};

use super::llm::{parse_params, provider_config, provider_failure};

/// `weft embed` flags.
#[derive(Debug, Args)]
#[command(after_help = "Embedding models are PROVIDER:MODEL:\n  \
    openai:MODEL                 OpenAI embeddings, e.g. openai:text-embedding-3-small (OPENAI_API_KEY)\n  \
    openai-compatible:MODEL      any /embeddings server (--base-url or WEFT_OPENAI_COMPATIBLE_BASE_URL)\n  \
    google:MODEL                 Gemini embeddings, e.g. google:gemini-embedding-001 (GEMINI_API_KEY)\n\
    Prints {\"embeddings\": [{\"vector\", \"dimensions\", \"index\", …}], \"usage\": {\"totalTokens\"}}.")]
pub(crate) struct EmbedArgs {
    /// The embedding model, as PROVIDER:MODEL (e.g. openai:text-embedding-3-small).
    #[arg(long, short = 'm')]
    model: String,
    /// Override the provider's endpoint (a proxy, a local server).
    #[arg(long)]
    base_url: Option<String>,
    /// Whether the texts are documents to index or search queries (providers that care use it).
    #[arg(long, value_enum)]
    input_type: Option<InputType>,
    /// A vendor parameter passed through unchanged, as KEY=JSON (repeatable), e.g. dimensions=256.
    #[arg(long = "param", value_name = "KEY=JSON")]
    params: Vec<String>,
    /// An HTTP header sent with every request, as NAME:VALUE (repeatable).
    #[arg(long = "header", value_name = "NAME:VALUE")]
    headers: Vec<String>,
    /// Request timeout in seconds.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// The texts to embed, one vector each, in order.
    #[arg(required = true)]
    texts: Vec<String>,
}

/// `--input-type` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum InputType {
    Document,
    Query,
}

/// Runs `weft embed`.
pub(crate) fn run(args: EmbedArgs) -> anyhow::Result<ExitCode> {
    let reference = ProviderRegistry::with_builtins().resolve(&args.model)?;
    let config = provider_config(args.base_url.as_deref(), args.timeout, &args.headers)?;
    let params = parse_params(&args.params)?;
    let instance = match embedding(EmbeddingOptions {
        model: reference,
        config,
        params,
    }) {
        Ok(instance) => instance,
        Err(error) => return Ok(provider_failure(&error)),
    };
    let inputs: Vec<EmbeddingInput> = args.texts.into_iter().map(EmbeddingInput::from).collect();
    let options = EmbedOptions {
        input_type: args.input_type.map(|t| match t {
            InputType::Document => EmbeddingInputType::Document,
            InputType::Query => EmbeddingInputType::Query,
        }),
        ..EmbedOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let result = tokio::select! {
            result = instance.embed(inputs, options) => result,
            _ = tokio::signal::ctrl_c() => {
                eprintln!("weft: interrupted");
                return Ok(ExitCode::from(130));
            }
        };
        match result {
            Ok(result) => {
                println!("{}", serde_json::to_string_pretty(&result)?);
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => Ok(provider_failure(&error)),
        }
    })
}
