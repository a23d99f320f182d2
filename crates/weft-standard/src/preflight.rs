//! What `weft run` and `weft serve` check before they record a run: every model the run may call resolves
//! (a known provider, `PROVIDER:MODEL`), its script file loads (`scripted:`,
//! `scripted-turns:`), its key is set, its endpoint is known (`openai-compatible` needs a base
//! URL) and well formed, and the build can run it (`local:` needs the `local` feature). A
//! problem here is a definition error: exit 2, no run record, the file and key named.
//!
//! It also settles each provider's base URL for the run, highest first: `--base-url`, the
//! project's `[providers.NAME] baseUrl`, the project's `[env]`, the environment. The result is
//! recorded with the run (`SessionProgram::base_urls`), so `weft resume` reaches the same
//! server without the environment that started it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use weft_provider::adapters::openai_chat::COMPATIBLE_BASE_URL_ENV;
use weft_provider::{ModelReference, ProviderRegistry};

use crate::{AgentDefinition, ModelSite, Project};

/// A check of one model that this build of Weft adds (`weft` without the `local` feature
/// cannot run the embedded model): `Some(sentence)` when the model cannot be used.
pub type ModelCheck = fn(&ModelReference) -> Option<String>;

/// The provider that has no default endpoint.
const COMPATIBLE: &str = "openai-compatible";

/// The base URLs of the run, or every problem found (one line each, file and key first).
/// `model_check` adds what this build cannot run (see [`ModelCheck`]).
///
/// # Errors
/// Every problem found, each a line naming the file and key.
pub fn check(
    project: &Project,
    agent: &AgentDefinition,
    model_override: Option<&str>,
    base_url_flag: Option<&str>,
    registry: &ProviderRegistry,
    model_check: ModelCheck,
) -> Result<BTreeMap<String, String>, Vec<String>> {
    let mut problems = Vec::new();
    let config_file = project.config_file();
    let sites = match model_override {
        Some(model) => vec![ModelSite {
            file: PathBuf::from("--model"),
            key: String::new(),
            reference: model.to_owned(),
        }],
        None => project.model_sites(agent),
    };
    if let Some(url) = base_url_flag
        && let Err(problem) = check_base_url(url)
    {
        problems.push(format!("--base-url: {problem}"));
    }
    for name in project.config().providers.keys() {
        if registry.provider(name).is_none() {
            problems.push(format!(
                "{config_file}: providers.{name}: unknown provider {name:?}; known providers: {}",
                registry.names().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    // The models of the agent's routing rules (`[runtime.routing]`): the safe default must
    // be usable like any model; the others get their endpoints settled, and a problem with
    // one is a failed route at run time (the default is used, the event says why).
    let routing: Vec<(ModelSite, bool)> = project
        .runtime_profile(agent, true)
        .and_then(|profile| profile.routing)
        .map(|routing| {
            routing
                .models()
                .into_iter()
                .map(|reference| {
                    let strict = reference == routing.default;
                    let key = if strict {
                        "runtime.routing.default"
                    } else {
                        "runtime.routing"
                    };
                    let site = ModelSite {
                        file: PathBuf::from(config_file.to_string()),
                        key: key.to_owned(),
                        reference,
                    };
                    (site, strict)
                })
                .collect()
        })
        .unwrap_or_default();
    let mut base_urls = BTreeMap::new();
    for (site, strict) in sites
        .iter()
        .map(|s| (s, true))
        .chain(routing.iter().map(|(s, strict)| (s, *strict)))
    {
        let mut note = |problem: String| {
            if strict {
                problems.push(problem);
            }
        };
        let at = if site.key.is_empty() {
            site.file.display().to_string()
        } else {
            format!("{}: {}", site.file.display(), site.key)
        };
        let reference = project.model_reference(&site.reference);
        let resolved = match registry.resolve(&reference) {
            Ok(resolved) => resolved,
            Err(error) => {
                note(format!("{at}: {error}"));
                continue;
            }
        };
        let provider = resolved.provider.name.clone();
        if let Some(problem) = unusable(&resolved).or_else(|| model_check(&resolved)) {
            note(format!("{at}: {problem}"));
        }
        if let Some(variable) = missing_key(&provider) {
            note(format!(
                "{at}: the model {} needs an API key: set {variable} in the environment",
                site.reference
            ));
        }
        if base_urls.contains_key(&provider) {
            continue;
        }
        let settled = base_url_flag
            .map(|url| (url.to_owned(), "--base-url".to_owned()))
            .or_else(|| {
                let url = project
                    .config()
                    .providers
                    .get(&provider)?
                    .base_url
                    .clone()?;
                Some((url, format!("{config_file}: providers.{provider}.baseUrl")))
            })
            .or_else(|| {
                let url = (provider == COMPATIBLE)
                    .then(|| project.config().env.get(COMPATIBLE_BASE_URL_ENV).cloned())??;
                Some((url, format!("{config_file}: env.{COMPATIBLE_BASE_URL_ENV}")))
            })
            .or_else(|| {
                let url = (provider == COMPATIBLE)
                    .then(|| std::env::var(COMPATIBLE_BASE_URL_ENV).ok())??;
                Some((url, COMPATIBLE_BASE_URL_ENV.to_owned()))
            })
            .filter(|(url, _)| !url.trim().is_empty());
        match settled {
            Some((url, from)) => {
                if from != "--base-url"
                    && let Err(problem) = check_base_url(&url)
                {
                    note(format!("{from}: {problem}"));
                }
                base_urls.insert(provider, url);
            }
            None if provider == COMPATIBLE => note(format!(
                "{at}: {COMPATIBLE} needs a base URL: pass --base-url, set [providers.{COMPATIBLE}] baseUrl in {config_file}, \
                 or set {COMPATIBLE_BASE_URL_ENV} (e.g. http://127.0.0.1:11434/v1 for Ollama)"
            )),
            None => {}
        }
    }
    if problems.is_empty() {
        Ok(base_urls)
    } else {
        Err(problems)
    }
}

/// Why `model` cannot be used, when a script file does not load (`scripted:`,
/// `scripted-turns:`).
pub fn unusable(model: &ModelReference) -> Option<String> {
    match model.provider.name.as_str() {
        "scripted" | "scripted-turns" => {
            weft_provider::adapters::scripted::Script::load(std::path::Path::new(&model.model_id))
                .err()
                .map(|error| error.to_string())
        }
        _ => None,
    }
}

/// `weft llm`'s and `weft embed`'s check of `model`: a definition problem that no request
/// would fix (see [`unusable`] and `model_check`), or an `openai-compatible` model without a
/// base URL.
pub fn check_one(
    model: &ModelReference,
    base_url: Option<&str>,
    model_check: ModelCheck,
) -> Option<String> {
    if let Some(problem) = unusable(model).or_else(|| model_check(model)) {
        return Some(problem);
    }
    let known = base_url.is_some()
        || std::env::var(COMPATIBLE_BASE_URL_ENV).is_ok_and(|u| !u.trim().is_empty());
    (model.provider.name == COMPATIBLE && !known).then(|| {
        format!(
            "{COMPATIBLE} needs a base URL: pass --base-url or set {COMPATIBLE_BASE_URL_ENV} \
             (e.g. http://127.0.0.1:11434/v1 for Ollama)"
        )
    })
}

/// A base URL must be `http://HOST…` or `https://HOST…`.
///
/// # Errors
/// The sentence saying what is wrong.
pub fn check_base_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        Some(_) => Err(format!("the base URL {url:?} has no host")),
        None => Err(format!(
            "the base URL {url:?} has no scheme: write it as http://{0} or https://{0}",
            url.split("://").last().unwrap_or(url)
        )),
    }
}

/// The environment variable a provider's key is read from, when it is not set.
fn missing_key(provider: &str) -> Option<&'static str> {
    let variables: &[&'static str] = match provider {
        "openai" | "openai-responses" => &["OPENAI_API_KEY"],
        "anthropic" => &["ANTHROPIC_API_KEY"],
        "google" | "gemini" => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        _ => return None,
    };
    let set = variables
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|k| !k.trim().is_empty()));
    (!set).then(|| variables[0])
}

#[cfg(test)]
mod tests {
    use super::check_base_url;

    #[test]
    fn base_urls_need_a_scheme_and_a_host() {
        assert!(check_base_url("http://127.0.0.1:11434/v1").is_ok());
        assert!(check_base_url("https://proxy.example/v1").is_ok());
        let error = check_base_url("localhost:11434/v1").expect_err("no scheme");
        assert!(error.contains("http://localhost:11434/v1"), "{error}");
        assert!(check_base_url("http://").is_err());
        assert!(check_base_url("ftp://x").is_err());
    }
}
