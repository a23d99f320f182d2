//! What a run's model calls cost. Each call is priced when its response (with its usage) is
//! recorded, at the price the run's [`Prices`](weft_provider::pricing::Prices) give its model
//! then, and the price is recorded beside the response (`model`, `cost`, `price`), so a later
//! change of the price table or a resume with other prices never rewrites what earlier calls
//! cost. A call whose model has no price has an unknown cost (`"cost": null`), and so has
//! the run's total: unknown is never reported as 0.

use serde_json::{Value, json};
use weft_provider::TokenUsage;
use weft_provider::pricing::Quote;
use weft_store::RecordedResponse;

/// One recorded model call's usage and cost.
///
/// # Examples
///
/// ```
/// use serde_json::json;
/// use weft_runtime::cost::CallCost;
/// use weft_store::RecordedResponse;
///
/// let recorded = RecordedResponse {
///     run_id: "r".into(), position: "t@1".into(), fingerprint: "f".into(),
///     response: json!({"usage": {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12},
///                      "model": "openai:gpt-4o", "cost": 0.000045, "price": null}),
/// };
/// let call = CallCost::of(&recorded);
/// assert_eq!((call.usage.input_tokens, call.cost), (10, Some(0.000045)));
/// assert_eq!(call.model.as_deref(), Some("openai:gpt-4o"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct CallCost {
    /// The model called, `PROVIDER:MODEL` (`None` for calls recorded before prices were).
    pub model: Option<String>,
    /// Its tokens.
    pub usage: TokenUsage,
    /// What it cost, in US dollars (`None`: its model had no price).
    pub cost: Option<f64>,
    /// The price it was charged at.
    pub price: Option<Quote>,
}

impl CallCost {
    /// The usage and cost recorded with `response`.
    pub fn of(response: &RecordedResponse) -> CallCost {
        let value = &response.response;
        let (usage, cost) = recorded_spend(value);
        CallCost {
            model: value["model"].as_str().map(str::to_owned),
            usage,
            cost,
            price: serde_json::from_value(value["price"].clone()).ok(),
        }
    }
}

/// What the run has used so far, against its budget: model calls, tokens, and the cost of
/// each call at the price recorded with it (`None` once a call had no price).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spent {
    pub(crate) steps: u64,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) cache_read_tokens: u64,
    pub(crate) cache_write_tokens: u64,
    pub(crate) cost: Option<f64>,
}

impl Default for Spent {
    fn default() -> Self {
        Spent {
            steps: 0,
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cost: Some(0.0),
        }
    }
}

impl Spent {
    pub(crate) fn add(&mut self, usage: &TokenUsage, cost: Option<f64>) {
        self.steps += 1;
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.cache_read_tokens += usage.cache_read_tokens;
        self.cache_write_tokens += usage.cache_write_tokens;
        self.cost = self.cost.zip(cost).map(|(a, b)| a + b);
    }
}

/// The usage and cost recorded with a response (`cost` is `None` for a call without a
/// price, and for calls recorded before costs were).
pub(crate) fn recorded_spend(response: &Value) -> (TokenUsage, Option<f64>) {
    let usage = &response["usage"];
    let count = |key: &str| usage[key].as_u64().unwrap_or(0);
    let (input_tokens, output_tokens) = (count("inputTokens"), count("outputTokens"));
    let usage = TokenUsage {
        input_tokens,
        output_tokens,
        total_tokens: input_tokens + output_tokens,
        cache_read_tokens: count("cacheReadTokens"),
        cache_write_tokens: count("cacheWriteTokens"),
        cycles: None,
    };
    (usage, response["cost"].as_f64())
}

/// The fields recorded beside a response: its model, its cost at `quote`, and the price.
pub(crate) fn cost_fields(
    model: &str,
    quote: Option<&Quote>,
    usage: &TokenUsage,
) -> (Option<f64>, Value) {
    let cost = quote.map(|q| q.cost(usage));
    (cost, json!({"model": model, "cost": cost, "price": quote}))
}
