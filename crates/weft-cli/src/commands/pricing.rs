//! Prices and costs on the command line: the prices a command charges model calls at
//! (Weft's built-in table, then the project's `pricing` key, then `--pricing FILE`, which
//! wins), how a cost is printed (`$0.0123`, or `cost unknown` — never `$0` for a price Weft
//! does not know), and what a run's recorded calls cost (for `weft runs`).

use std::path::Path;

use serde_json::{Value, json};
use weft_provider::pricing::{PriceSource, PriceTable, Prices, Quote};
use weft_runtime::cost::CallCost;
use weft_standard::Project;
use weft_store::{Responses as _, RunRecord, RunStatus, Store, Usage};

/// The prices of a command: the built-in table, with `project`'s `pricing` over it and the
/// `--pricing` file over both.
///
/// # Errors
/// A message naming the file and the key at fault: a usage error (exit 2).
pub(crate) fn prices(project: Option<&Project>, file: Option<&Path>) -> Result<Prices, String> {
    let mut prices = project_prices(project)?;
    if let Some(table) = pricing_file(file)? {
        prices = prices.with_override(table);
    }
    Ok(prices)
}

/// The built-in table with `project`'s `pricing` over it.
///
/// # Errors
/// As [`prices`].
pub(crate) fn project_prices(project: Option<&Project>) -> Result<Prices, String> {
    let prices = Prices::builtin();
    match project.map(Project::prices) {
        Some(Ok(Some(table))) => Ok(prices.with_override(table)),
        Some(Err(problem)) => Err(format!("the project's pricing: {problem}")),
        Some(Ok(None)) | None => Ok(prices),
    }
}

/// The table of a `--pricing FILE` flag.
///
/// # Errors
/// As [`prices`].
pub(crate) fn pricing_file(file: Option<&Path>) -> Result<Option<PriceTable>, String> {
    let Some(file) = file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read the pricing file {}: {e}", file.display()))?;
    PriceTable::parse(&text, PriceSource::Override)
        .map(Some)
        .map_err(|e| format!("the pricing file {}: {e}", file.display()))
}

/// A cost for people: `$0.0123` (six decimals under a cent), or `cost unknown`.
pub(crate) fn cost_text(cost: Option<f64>) -> String {
    match cost {
        Some(c) if c != 0.0 && c.abs() < 0.01 => format!("${c:.6}"),
        Some(c) => format!("${c:.4}"),
        None => "cost unknown".to_owned(),
    }
}

/// A price for people: `$2.50 in / $10.00 out / $1.25 cache read / $2.50 cache write per
/// Mtok (table of 2026-11-24)`.
fn price_text(quote: &Quote) -> String {
    format!(
        "${} in / ${} out / ${} cache read / ${} cache write per Mtok ({})",
        quote.input,
        quote.output,
        quote.cache_read,
        quote.cache_write,
        quote.origin()
    )
}

/// The recorded calls of a run, by model and price: how many, their tokens and cost.
#[derive(Debug, Default)]
pub(crate) struct RunCalls {
    groups: Vec<(Option<String>, Option<Quote>, u64, Usage)>,
}

impl RunCalls {
    /// The calls recorded for `run_id`.
    pub(crate) async fn of(store: &Store, run_id: &str) -> anyhow::Result<RunCalls> {
        let mut calls = RunCalls::default();
        for response in store.recorded_responses(run_id).await? {
            let call = CallCost::of(&response);
            let usage = Usage {
                input_tokens: call.usage.input_tokens,
                output_tokens: call.usage.output_tokens,
                cost: call.cost,
            };
            match calls
                .groups
                .iter_mut()
                .find(|(m, p, _, _)| *m == call.model && *p == call.price)
            {
                Some((_, _, n, total)) => {
                    *n += 1;
                    *total = total.plus(usage);
                }
                None => calls.groups.push((call.model, call.price, 1, usage)),
            }
        }
        Ok(calls)
    }

    /// The usage of every recorded call together.
    pub(crate) fn total(&self) -> Option<Usage> {
        (!self.groups.is_empty()).then(|| {
            self.groups
                .iter()
                .fold(Usage::default(), |sum, (_, _, _, usage)| sum.plus(*usage))
        })
    }

    /// One line per model and price.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.groups
            .iter()
            .map(|(model, price, n, usage)| {
                let model = model.as_deref().unwrap_or("(recorded before prices)");
                let calls = if *n == 1 {
                    "1 call".to_owned()
                } else {
                    format!("{n} calls")
                };
                match price {
                    Some(quote) => format!(
                        "{model}: {calls}, {}, at {}",
                        cost_text(usage.cost),
                        price_text(quote)
                    ),
                    None => format!("{model}: {calls}, no price (cost unknown)"),
                }
            })
            .collect()
    }

    /// The groups as JSON: `[{"model", "calls", "inputTokens", "outputTokens", "cost",
    /// "price"}]` (`cost` and `price` null when unknown).
    pub(crate) fn json(&self) -> Value {
        Value::Array(
            self.groups
                .iter()
                .map(|(model, price, n, usage)| {
                    json!({"model": model, "calls": n, "inputTokens": usage.input_tokens,
                       "outputTokens": usage.output_tokens, "cost": usage.cost, "price": price})
                })
                .collect(),
        )
    }
}

/// A run's usage as it stands: the record's, or — for a run whose record was not closed
/// (running, or stopped by a kill) — what its recorded calls add up to when that is more.
pub(crate) async fn current_usage(store: &Store, run: &RunRecord) -> anyhow::Result<Usage> {
    if matches!(run.status, RunStatus::Running | RunStatus::Interrupted)
        && let Some(total) = RunCalls::of(store, &run.run_id).await?.total()
        && total.input_tokens + total.output_tokens
            > run.usage.input_tokens + run.usage.output_tokens
    {
        return Ok(total);
    }
    Ok(run.usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_print_as_dollars_or_as_unknown_never_as_zero_for_unknown() {
        assert_eq!(cost_text(Some(1.5)), "$1.5000");
        assert_eq!(cost_text(Some(0.000_042)), "$0.000042");
        assert_eq!(cost_text(Some(0.0)), "$0.0000");
        assert_eq!(cost_text(None), "cost unknown");
    }
}
