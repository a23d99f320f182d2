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

/// The usage and cost recorded with a response (`cost` is `None` for a call without a
/// price, and for calls recorded before costs were).
pub(crate) fn recorded_spend(response: &Value) -> (TokenUsage, Option<f64>) {
    let usage = serde_json::from_value(response["usage"].clone()).unwrap_or_default();
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
