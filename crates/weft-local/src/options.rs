//! Generation options read from a request's `params`.
//!
//! | param | type | default | meaning |
//! |---|---|---|---|
//! | `max_tokens` (also `max_output_tokens`, `max_completion_tokens`, `maxOutputTokens`) | integer ≥ 1 | 512 | output token limit |
//! | `temperature` | number ≥ 0 | 0 (greedy) | softmax temperature |
//! | `top_k` (also `topK`) | integer ≥ 0 | none | keep the k most likely tokens |
//! | `top_p` (also `topP`) | number in (0, 1] | 1 | nucleus sampling |
//! | `seed` | integer ≥ 0 | random | seed of the sampler (reproducible sampling) |
//! | `stop` (also `stop_sequences`, `stopSequences`) | string or array of strings | none | stop sequences (not included in the output) |
//! | `parallel_tool_calls` | boolean | true | allow more than one tool call per reply |
//! | `tool_choice` | `"auto"`, `"required"` (also `"any"`) or `"none"` | `"auto"` | whether the reply may be text, must be tool calls, or must not call tools |
//!
//! Other params are ignored (they belong to other providers). Values of the wrong type are an
//! `INVALID_REQUEST` error rather than being silently dropped.
//!
//! The request's typed [`weft_provider::ToolChoice`] maps onto `tool_choice` when `params` has
//! none (an explicit param wins): `Auto`, `Required` and `None` to the same, `Tool(name)` to
//! `required` with only `name` offered to the grammar ([`GenerationOptions::from_request`]).

use serde_json::{Map, Value};
use weft_provider::{ErrorCode, UppError};

use crate::NAME;
use crate::sampling::SamplingParams;

/// The default output token limit.
pub const DEFAULT_MAX_TOKENS: usize = 512;

/// Options of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationOptions {
    /// Output token limit.
    pub max_tokens: usize,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Sampling parameters.
    pub sampling: SamplingParams,
    /// Whether a reply may hold several tool calls.
    pub parallel_tool_calls: bool,
    /// Whether tools may, must or must not be called.
    pub tool_choice: ToolChoice,
    /// The one tool a reply may call (a typed `ToolChoice::Tool(name)`); `None`: any offered.
    pub only_tool: Option<String>,
}

/// The `tool_choice` param.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// Text or tool calls (the default).
    #[default]
    Auto,
    /// Tool calls only.
    Required,
    /// Text only: the tools are not offered.
    None,
}

impl Default for GenerationOptions {
    fn default() -> Self {
        GenerationOptions {
            max_tokens: DEFAULT_MAX_TOKENS,
            stop: Vec::new(),
            sampling: SamplingParams::default(),
            parallel_tool_calls: true,
            tool_choice: ToolChoice::Auto,
            only_tool: None,
        }
    }
}

fn invalid(message: String) -> UppError {
    UppError::llm(ErrorCode::InvalidRequest, NAME, message)
}

fn first<'a>(
    params: &'a Map<String, Value>,
    names: &[&'static str],
) -> Option<(&'static str, &'a Value)> {
    names.iter().find_map(|name| {
        params
            .get(*name)
            .filter(|v| !v.is_null())
            .map(|v| (*name, v))
    })
}

fn uint(name: &str, value: &Value) -> Result<u64, UppError> {
    value.as_u64().ok_or_else(|| {
        invalid(format!(
            "param {name} must be a non-negative integer, got {value}"
        ))
    })
}

fn number(name: &str, value: &Value) -> Result<f64, UppError> {
    value
        .as_f64()
        .filter(|v| v.is_finite())
        .ok_or_else(|| invalid(format!("param {name} must be a number, got {value}")))
}

impl GenerationOptions {
    /// Reads the options from `params`, then applies the request's typed `choice` unless
    /// `params` set `tool_choice` (or `toolChoice`) explicitly.
    ///
    /// # Errors
    /// As [`GenerationOptions::from_params`].
    pub fn from_request(
        params: Option<&Map<String, Value>>,
        choice: &weft_provider::ToolChoice,
    ) -> Result<Self, UppError> {
        let mut options = Self::from_params(params)?;
        if params.is_some_and(|p| first(p, &["tool_choice", "toolChoice"]).is_some()) {
            return Ok(options);
        }
        options.tool_choice = match choice {
            weft_provider::ToolChoice::Auto => ToolChoice::Auto,
            weft_provider::ToolChoice::Required => ToolChoice::Required,
            weft_provider::ToolChoice::None => ToolChoice::None,
            weft_provider::ToolChoice::Tool(name) => {
                options.only_tool = Some(name.clone());
                ToolChoice::Required
            }
        };
        Ok(options)
    }

    /// Reads the options from `params` (`None`: the defaults).
    ///
    /// # Errors
    /// `INVALID_REQUEST` when a known param has the wrong type or range.
    pub fn from_params(params: Option<&Map<String, Value>>) -> Result<Self, UppError> {
        let mut options = GenerationOptions::default();
        let Some(params) = params else {
            return Ok(options);
        };
        if let Some((name, value)) = first(
            params,
            &[
                "max_tokens",
                "max_output_tokens",
                "max_completion_tokens",
                "maxOutputTokens",
            ],
        ) {
            let max = uint(name, value)?;
            if max == 0 {
                return Err(invalid(format!("param {name} must be at least 1")));
            }
            options.max_tokens = usize::try_from(max).unwrap_or(usize::MAX);
        }
        if let Some((name, value)) = first(params, &["temperature"]) {
            let t = number(name, value)?;
            if t < 0.0 {
                return Err(invalid(format!("param {name} must be >= 0, got {t}")));
            }
            options.sampling.temperature = t as f32;
        }
        if let Some((name, value)) = first(params, &["top_k", "topK"]) {
            let k = uint(name, value)?;
            options.sampling.top_k = (k > 0).then(|| usize::try_from(k).unwrap_or(usize::MAX));
        }
        if let Some((name, value)) = first(params, &["top_p", "topP"]) {
            let p = number(name, value)?;
            if !(p > 0.0 && p <= 1.0) {
                return Err(invalid(format!("param {name} must be in (0, 1], got {p}")));
            }
            options.sampling.top_p = p as f32;
        }
        if let Some((name, value)) = first(params, &["seed"]) {
            options.sampling.seed = Some(uint(name, value)?);
        }
        if let Some((name, value)) = first(params, &["stop", "stop_sequences", "stopSequences"]) {
            options.stop = match value {
                Value::String(s) => vec![s.clone()],
                Value::Array(items) => items
                    .iter()
                    .map(|item| {
                        item.as_str().map(str::to_owned).ok_or_else(|| {
                            invalid(format!("param {name} must hold strings, got {item}"))
                        })
                    })
                    .collect::<Result<_, _>>()?,
                other => {
                    return Err(invalid(format!(
                        "param {name} must be a string or an array of strings, got {other}"
                    )));
                }
            };
            options.stop.retain(|s| !s.is_empty());
        }
        if let Some((name, value)) = first(params, &["parallel_tool_calls"]) {
            options.parallel_tool_calls = value
                .as_bool()
                .ok_or_else(|| invalid(format!("param {name} must be a boolean, got {value}")))?;
        }
        if let Some((name, value)) = first(params, &["tool_choice", "toolChoice"]) {
            // Also accept the object forms `{"type": "auto" | "required" | "any" | "none"}`.
            let choice = value
                .as_str()
                .or_else(|| value.get("type").and_then(Value::as_str));
            options.tool_choice = match choice {
                Some("auto") => ToolChoice::Auto,
                Some("required" | "any") => ToolChoice::Required,
                Some("none") => ToolChoice::None,
                _ => {
                    return Err(invalid(format!(
                        "param {name} must be \"auto\", \"required\" or \"none\", got {value}"
                    )));
                }
            };
        }
        Ok(options)
    }
}

/// Finds stop sequences in generated text and says how much of it is safe to stream.
#[derive(Debug, Clone)]
pub struct StopMatcher {
    stops: Vec<String>,
}

impl StopMatcher {
    /// A matcher for `stops` (empty strings ignored).
    pub fn new(stops: &[String]) -> Self {
        StopMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
        }
    }

    /// The byte offset where the earliest stop sequence starts in `text`, if one occurs.
    pub fn find(&self, text: &str) -> Option<usize> {
        self.stops
            .iter()
            .filter_map(|s| text.find(s.as_str()))
            .min()
    }

    /// How many leading bytes of `text` can be shown without risk: the text minus the longest
    /// tail that is a prefix of a stop sequence (always on a character boundary).
    pub fn safe_len(&self, text: &str) -> usize {
        let mut held = 0;
        for stop in &self.stops {
            // Proper prefixes only: a whole stop sequence is found by `find`.
            for (len, _) in stop.char_indices().skip(1) {
                if len > held && text.ends_with(&stop[..len]) {
                    held = len;
                }
            }
        }
        let mut safe = text.len() - held;
        while !text.is_char_boundary(safe) {
            safe -= 1;
        }
        safe
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> Result<GenerationOptions, UppError> {
        GenerationOptions::from_params(value.as_object())
    }

    #[test]
    fn params_are_read_with_their_aliases() {
        let options = parse(
            json!({"max_output_tokens": 7, "temperature": 0.7, "topK": 40,
            "top_p": 0.9, "seed": 3, "stop": "END", "parallel_tool_calls": false, "tool_choice": "required", "other": 1}),
        )
        .unwrap();
        assert_eq!(options.max_tokens, 7);
        assert_eq!(options.sampling.top_k, Some(40));
        assert_eq!(options.sampling.seed, Some(3));
        assert!((options.sampling.top_p - 0.9).abs() < 1e-6);
        assert_eq!(options.stop, vec!["END"]);
        assert!(!options.parallel_tool_calls);
        assert_eq!(options.tool_choice, ToolChoice::Required);
        assert_eq!(
            GenerationOptions::from_params(None).unwrap(),
            GenerationOptions::default()
        );
    }

    #[test]
    fn the_typed_tool_choice_applies_unless_a_param_sets_one() {
        use weft_provider::ToolChoice as Typed;
        let read = |params: Value, choice: Typed| {
            let options = GenerationOptions::from_request(params.as_object(), &choice).unwrap();
            (options.tool_choice, options.only_tool)
        };
        assert_eq!(read(json!({}), Typed::Auto), (ToolChoice::Auto, None));
        assert_eq!(
            read(json!({}), Typed::Required),
            (ToolChoice::Required, None)
        );
        assert_eq!(read(json!({}), Typed::None), (ToolChoice::None, None));
        assert_eq!(
            read(json!({}), Typed::tool("complete_task")),
            (ToolChoice::Required, Some("complete_task".to_owned()))
        );
        // The project's own param wins over the typed choice.
        assert_eq!(
            read(json!({"tool_choice": "none"}), Typed::tool("complete_task")),
            (ToolChoice::None, None)
        );
        assert_eq!(
            read(json!({"toolChoice": "auto"}), Typed::Required),
            (ToolChoice::Auto, None)
        );
    }

    #[test]
    fn wrong_types_are_invalid_requests() {
        for bad in [
            json!({"max_tokens": "ten"}),
            json!({"max_tokens": 0}),
            json!({"temperature": -1}),
            json!({"top_p": 1.5}),
            json!({"stop": [1]}),
            json!({"seed": -2}),
            json!({"tool_choice": "sometimes"}),
        ] {
            let error = parse(bad.clone()).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidRequest, "{bad}");
            assert_eq!(
                (error.modality, error.provider.as_str()),
                (weft_provider::Modality::Llm, NAME),
                "{bad}"
            );
        }
    }

    #[test]
    fn stop_sequences_are_found_and_held_back_while_partial() {
        let stops = StopMatcher::new(&["\nUser:".to_owned(), "END".to_owned()]);
        assert_eq!(stops.find("hello END there"), Some(6));
        assert_eq!(stops.find("hello"), None);
        assert_eq!(stops.safe_len("hello\nUs"), 5);
        assert_eq!(stops.safe_len("hello EN"), 6);
        assert_eq!(stops.safe_len("hello"), 5);
        assert_eq!(StopMatcher::new(&[]).safe_len("abc"), 3);
    }
}
