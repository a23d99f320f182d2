//! Model prices: a dated table of what the built-in providers charge per million tokens
//! (`data/prices.toml`, loaded once), override tables in the same format, and the cost of a
//! call's [`TokenUsage`].
//!
//! A model that no table lists has **no price**: [`Prices::quote`] returns `None` and its
//! cost is unknown — never `$0`. A price of 0 exists only as a deliberate entry (the
//! embedded `local:` model, or an override pricing a local server).
//!
//! # Examples
//!
//! ```
//! use weft_provider::pricing::{PriceSource, PriceTable, Prices};
//! use weft_provider::TokenUsage;
//!
//! let prices = Prices::builtin();
//! let quote = prices.quote("openai", "gpt-4o-2024-08-06").ok_or("gpt-4o has a price")?;
//! assert_eq!(quote.model, "openai:gpt-4o");
//! let usage = TokenUsage { input_tokens: 1_000_000, output_tokens: 100_000, ..TokenUsage::default() };
//! assert!((quote.cost(&usage) - 3.5).abs() < 1e-9);
//! assert!(prices.quote("scripted", "demo.json").is_none());
//!
//! // An override in the same format wins over the built-in table.
//! let mine = PriceTable::parse("[openai]\n\"gpt-4o\" = { input = 1, output = 2 }\n", PriceSource::Override)?;
//! let quote = prices.with_override(mine).quote("openai", "gpt-4o").ok_or("overridden")?;
//! assert_eq!((quote.input, quote.source), (1.0, PriceSource::Override));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Serialize};

use crate::turn::TokenUsage;

/// The built-in table's text.
const BUILTIN: &str = include_str!("../data/prices.toml");

/// The only currency the tables use.
pub const CURRENCY: &str = "USD";

static BUILTIN_TABLE: LazyLock<PriceTable> = LazyLock::new(|| {
    // The built-in file is tested to parse (`the_builtin_table_parses`).
    PriceTable::parse(BUILTIN, PriceSource::Table).unwrap_or_default()
});

/// Where a price comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PriceSource {
    /// Weft's built-in table.
    #[default]
    Table,
    /// An override (`--pricing FILE`, the project's `pricing` key, a caller's table).
    Override,
}

/// One model's prices, in the table's currency per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Price {
    /// Input tokens neither read from nor written to the prompt cache.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the prompt cache (`None`: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Input tokens written to the prompt cache (`None`: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

/// The price a model call is charged at: the numbers per million tokens, the entry they
/// come from and the table's date. Recorded with each call, so a later table change does
/// not rewrite what a run cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Quote {
    /// The entry that matched, `PROVIDER:MODEL` (`openai:gpt-4o` for `gpt-4o-2024-08-06`).
    pub model: String,
    /// Per million input tokens outside the cache.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
    /// Per million cache-read tokens.
    pub cache_read: f64,
    /// Per million cache-write tokens.
    pub cache_write: f64,
    /// The currency (`USD`).
    pub currency: String,
    /// The built-in table or an override.
    pub source: PriceSource,
    /// When the table's prices were taken (`None`: an override without a date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

impl Quote {
    /// The cost of `usage` at this price. Cache reads and writes are priced as such; the
    /// rest of `input_tokens` (which counts them too) at the input price.
    #[allow(clippy::cast_precision_loss)]
    pub fn cost(&self, usage: &TokenUsage) -> f64 {
        let cached = usage.cache_read_tokens + usage.cache_write_tokens;
        let plain = usage.input_tokens.saturating_sub(cached);
        (plain as f64 * self.input
            + usage.cache_read_tokens as f64 * self.cache_read
            + usage.cache_write_tokens as f64 * self.cache_write
            + usage.output_tokens as f64 * self.output)
            / 1e6
    }

    /// Where the price comes from, for people: `table of 2026-11-24`, `override`.
    pub fn origin(&self) -> String {
        match (self.source, &self.date) {
            (PriceSource::Table, Some(date)) => format!("table of {date}"),
            (PriceSource::Table, None) => "table".to_owned(),
            (PriceSource::Override, Some(date)) => format!("override of {date}"),
            (PriceSource::Override, None) => "override".to_owned(),
        }
    }
}

/// A malformed price table, naming the key at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct PricingError {
    /// The key (`openai.gpt-4o.input`), or `(file)` when the text is not TOML.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl PricingError {
    fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        PricingError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// A price table: a date, the currency, and prices by provider and model id. Serializable,
/// so a run can record the overrides it was started with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    date: Option<String>,
    #[serde(default)]
    source: PriceSource,
    #[serde(default)]
    providers: BTreeMap<String, BTreeMap<String, Price>>,
}

impl PriceTable {
    /// Weft's built-in table (parsed once).
    pub fn builtin() -> &'static PriceTable {
        &BUILTIN_TABLE
    }

    /// Parses a table in the format of `data/prices.toml`: `date`, `currency = "USD"`, then
    /// `[PROVIDER]` tables of `"MODEL" = { input, output, cacheRead, cacheWrite }`.
    ///
    /// # Errors
    /// A [`PricingError`] naming the first key that is wrong: not TOML, an unknown key, a
    /// price that is missing, not a number or negative, a currency other than USD.
    pub fn parse(text: &str, source: PriceSource) -> Result<PriceTable, PricingError> {
        let root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| PricingError::new("(file)", e.message().to_owned()))?;
        let mut table = PriceTable {
            date: None,
            source,
            providers: BTreeMap::new(),
        };
        for (key, value) in &root {
            match (key.as_str(), value) {
                ("date", toml::Value::String(date)) => table.date = Some(date.clone()),
                ("date", toml::Value::Datetime(date)) => table.date = Some(date.to_string()),
                ("date", _) => return Err(PricingError::new("date", "expected a date")),
                ("currency", toml::Value::String(c)) if c == CURRENCY => {}
                ("currency", _) => {
                    return Err(PricingError::new(
                        "currency",
                        format!("only {CURRENCY} is supported"),
                    ));
                }
                (provider, toml::Value::Table(models)) => {
                    let mut entries = BTreeMap::new();
                    for (model, entry) in models {
                        let at = format!("{provider}.{model}");
                        entries.insert(model.clone(), parse_price(&at, entry)?);
                    }
                    table.providers.insert(provider.to_owned(), entries);
                }
                (other, _) => {
                    return Err(PricingError::new(
                        other,
                        "expected a table of model prices ([PROVIDER] with \"MODEL\" = { input, output })",
                    ));
                }
            }
        }
        Ok(table)
    }

    /// An empty table of `source`, without a date.
    pub fn new(source: PriceSource) -> PriceTable {
        PriceTable {
            date: None,
            source,
            providers: BTreeMap::new(),
        }
    }

    /// This table with `price` for `provider`'s `model` (`"*"`: every model of `provider`).
    #[must_use]
    pub fn with_price(
        mut self,
        provider: impl Into<String>,
        model: impl Into<String>,
        price: Price,
    ) -> PriceTable {
        self.providers
            .entry(provider.into())
            .or_default()
            .insert(model.into(), price);
        self
    }

    /// When the prices were taken.
    pub fn date(&self) -> Option<&str> {
        self.date.as_deref()
    }

    /// Whether the table lists no model.
    pub fn is_empty(&self) -> bool {
        self.providers.values().all(BTreeMap::is_empty)
    }

    /// The price of `provider`'s `model`: the exact entry, else the entry of the model a
    /// dated snapshot id belongs to (by the vendor's naming, see [`snapshot_base`]), else the
    /// provider's `"*"` entry. `openai-responses` reads `openai`'s prices.
    pub fn quote(&self, provider: &str, model: &str) -> Option<Quote> {
        let provider = match provider {
            "openai-responses" => "openai",
            other => other,
        };
        let models = self.providers.get(provider)?;
        let (key, price) = models
            .get_key_value(model)
            .or_else(|| snapshot_base(provider, model).and_then(|b| models.get_key_value(b)))
            .or_else(|| models.get_key_value("*"))?;
        Some(Quote {
            model: format!("{provider}:{key}"),
            input: price.input,
            output: price.output,
            cache_read: price.cache_read.unwrap_or(price.input),
            cache_write: price.cache_write.unwrap_or(price.input),
            currency: CURRENCY.to_owned(),
            source: self.source,
            date: self.date.clone(),
        })
    }
}

fn parse_price(at: &str, entry: &toml::Value) -> Result<Price, PricingError> {
    let toml::Value::Table(fields) = entry else {
        return Err(PricingError::new(
            at,
            "expected { input = …, output = … } (per million tokens)",
        ));
    };
    let mut price = Price::default();
    let (mut input, mut output) = (false, false);
    for (name, value) in fields {
        let key = format!("{at}.{name}");
        let number = match value {
            toml::Value::Float(f) => *f,
            #[allow(clippy::cast_precision_loss)]
            toml::Value::Integer(i) => *i as f64,
            _ => return Err(PricingError::new(key, "expected a number")),
        };
        if !number.is_finite() || number < 0.0 {
            return Err(PricingError::new(key, "expected a price of 0 or more"));
        }
        match name.as_str() {
            "input" => (price.input, input) = (number, true),
            "output" => (price.output, output) = (number, true),
            "cacheRead" => price.cache_read = Some(number),
            "cacheWrite" => price.cache_write = Some(number),
            _ => {
                return Err(PricingError::new(
                    key,
                    "unknown key (expected input, output, cacheRead, cacheWrite)",
                ));
            }
        }
    }
    match (input, output) {
        (true, true) => Ok(price),
        (false, _) => Err(PricingError::new(format!("{at}.input"), "missing")),
        (_, false) => Err(PricingError::new(format!("{at}.output"), "missing")),
    }
}

/// The model a dated snapshot id belongs to, where the vendor's naming makes that safe:
///
/// * `openai`: a `-YYYY-MM-DD` suffix (`gpt-4o-2024-08-06` → `gpt-4o`);
/// * `anthropic`: a `-YYYYMMDD` or `-latest` suffix (`claude-sonnet-4-5-20250929` →
///   `claude-sonnet-4-5`);
/// * `google`: a `models/` prefix and a three-digit version suffix (`gemini-2.0-flash-001` →
///   `gemini-2.0-flash`).
///
/// A snapshot with its own price is listed in the table, and the exact entry wins.
pub fn snapshot_base<'a>(provider: &str, model: &'a str) -> Option<&'a str> {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    match provider {
        "openai" => {
            let (base, date) = model.split_at_checked(model.len().checked_sub(11)?)?;
            let date = date.strip_prefix('-')?;
            let parts: Vec<&str> = date.split('-').collect();
            let dated = matches!(parts.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2));
            (dated && !base.is_empty()).then_some(base)
        }
        "anthropic" => {
            if let Some(base) = model.strip_suffix("-latest") {
                return (!base.is_empty()).then_some(base);
            }
            let (base, date) = model.rsplit_once('-')?;
            (digits(date, 8) && !base.is_empty()).then_some(base)
        }
        "google" => {
            let model = model.strip_prefix("models/").unwrap_or(model);
            match model.rsplit_once('-') {
                Some((base, version)) if digits(version, 3) && !base.is_empty() => Some(base),
                _ => Some(model),
            }
        }
        _ => None,
    }
}

/// Prices to look models up in: override tables first (the latest added wins), then the
/// built-in table. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Prices {
    overrides: Arc<Vec<PriceTable>>,
    builtin: bool,
}

impl Default for Prices {
    fn default() -> Self {
        Prices::builtin()
    }
}

impl Prices {
    /// The built-in table alone.
    pub fn builtin() -> Prices {
        Prices {
            overrides: Arc::new(Vec::new()),
            builtin: true,
        }
    }

    /// No prices at all (every model's cost is unknown).
    pub fn none() -> Prices {
        Prices {
            overrides: Arc::new(Vec::new()),
            builtin: false,
        }
    }

    /// These prices with `table` over them: its entries win.
    #[must_use]
    pub fn with_override(self, table: PriceTable) -> Prices {
        let mut overrides = Vec::with_capacity(self.overrides.len() + 1);
        overrides.push(table);
        overrides.extend(self.overrides.iter().cloned());
        Prices {
            overrides: Arc::new(overrides),
            builtin: self.builtin,
        }
    }

    /// The price of `provider`'s `model` (see [`PriceTable::quote`]), `None` when unknown.
    pub fn quote(&self, provider: &str, model: &str) -> Option<Quote> {
        self.overrides
            .iter()
            .chain(self.builtin.then(PriceTable::builtin))
            .find_map(|table| table.quote(provider, model))
    }

    /// The price of a `PROVIDER:MODEL` reference, `None` when unknown.
    pub fn quote_reference(&self, reference: &str) -> Option<Quote> {
        let (provider, model) = reference.split_once(':')?;
        self.quote(provider, model)
    }

    /// The built-in table's date.
    pub fn table_date() -> Option<&'static str> {
        PriceTable::builtin().date()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn usage(input: u64, output: u64, read: u64, write: u64) -> TokenUsage {
        TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            cycles: None,
        }
    }

    #[test]
    fn the_builtin_table_parses_with_a_date_and_prices_of_every_builtin_provider() {
        let table = PriceTable::parse(BUILTIN, PriceSource::Table).unwrap();
        assert_eq!(table.date(), Some("2026-11-24"));
        assert_eq!(PriceTable::builtin(), &table);
        for provider in ["openai", "anthropic", "google", "local"] {
            assert!(table.providers.get(provider).is_some_and(|m| !m.is_empty()));
        }
        let quote = table.quote("anthropic", "claude-sonnet-4-5").unwrap();
        assert_eq!(
            (
                quote.input,
                quote.output,
                quote.cache_read,
                quote.cache_write
            ),
            (3.0, 15.0, 0.3, 3.75)
        );
        assert_eq!(quote.origin(), "table of 2026-11-24");
    }

    #[test]
    fn costs_count_cache_reads_and_writes_at_their_prices() {
        let quote = PriceTable::builtin()
            .quote("anthropic", "claude-sonnet-4-5")
            .unwrap();
        // 1M input of which 200k read from and 100k written to the cache, 10k output.
        let cost = quote.cost(&usage(1_000_000, 10_000, 200_000, 100_000));
        let expected = 0.7 * 3.0 + 0.2 * 0.3 + 0.1 * 3.75 + 0.01 * 15.0;
        assert!((cost - expected).abs() < 1e-9, "{cost} vs {expected}");
        // Without a cache price, cached tokens cost the input price.
        let quote = PriceTable::builtin().quote("openai", "gpt-5").unwrap();
        let cost = quote.cost(&usage(1_000_000, 0, 500_000, 0));
        assert!((cost - 1.25).abs() < 1e-9);
    }

    #[test]
    fn openai_dated_snapshots_take_their_models_price_unless_listed() {
        let table = PriceTable::builtin();
        assert_eq!(
            table.quote("openai", "gpt-4o-2024-08-06").unwrap().model,
            "openai:gpt-4o"
        );
        assert_eq!(
            table
                .quote("openai", "gpt-4o-mini-2024-07-18")
                .unwrap()
                .model,
            "openai:gpt-4o-mini"
        );
        // The first gpt-4o snapshot kept its own price.
        let first = table.quote("openai", "gpt-4o-2024-05-13").unwrap();
        assert_eq!((first.input, first.output), (5.0, 15.0));
        assert_eq!(snapshot_base("openai", "gpt-4o-2024-8-6"), None);
        assert_eq!(snapshot_base("openai", "gpt-4o-mini"), None);
        // The Responses API reads OpenAI's prices.
        assert!(table.quote("openai-responses", "gpt-5").is_some());
    }

    #[test]
    fn anthropic_dated_and_latest_ids_take_their_models_price() {
        let table = PriceTable::builtin();
        for (id, model) in [
            ("claude-sonnet-4-5-20250929", "anthropic:claude-sonnet-4-5"),
            ("claude-sonnet-4-20250514", "anthropic:claude-sonnet-4"),
            ("claude-3-5-haiku-latest", "anthropic:claude-3-5-haiku"),
        ] {
            assert_eq!(table.quote("anthropic", id).unwrap().model, model);
        }
        assert_eq!(snapshot_base("anthropic", "claude-sonnet-4-5"), None);
    }

    #[test]
    fn google_versions_and_model_paths_take_their_models_price() {
        let table = PriceTable::builtin();
        assert_eq!(
            table.quote("google", "gemini-2.0-flash-001").unwrap().model,
            "google:gemini-2.0-flash"
        );
        assert_eq!(
            table
                .quote("google", "models/gemini-2.5-flash")
                .unwrap()
                .model,
            "google:gemini-2.5-flash"
        );
    }

    #[test]
    fn unknown_models_and_providers_have_no_price() {
        let prices = Prices::builtin();
        assert!(prices.quote("openai", "gpt-unknown").is_none());
        assert!(prices.quote("scripted", "script.json").is_none());
        assert!(prices.quote("openai-compatible", "llama3.2").is_none());
        assert!(prices.quote_reference("no-colon").is_none());
        assert!(Prices::none().quote("openai", "gpt-4o").is_none());
        // The embedded model is free by a deliberate entry.
        let local = prices.quote_reference("local:gemma3-270m").unwrap();
        assert_eq!(local.cost(&usage(1000, 1000, 0, 0)), 0.0);
    }

    #[test]
    fn overrides_win_and_a_star_entry_prices_a_whole_provider() {
        let table = PriceTable::parse(
            "[openai-compatible]\n\"*\" = { input = 0, output = 0 }\n[openai]\n\"gpt-4o\" = { input = 1, output = 2 }\n",
            PriceSource::Override,
        )
        .unwrap();
        let prices = Prices::builtin().with_override(table);
        let local = prices.quote("openai-compatible", "llama3.2").unwrap();
        assert_eq!(
            (local.model.as_str(), local.input),
            ("openai-compatible:*", 0.0)
        );
        let gpt = prices.quote("openai", "gpt-4o-2024-11-20").unwrap();
        assert_eq!((gpt.input, gpt.source), (1.0, PriceSource::Override));
        assert_eq!(gpt.origin(), "override");
        // Models the override does not list keep the built-in price.
        assert_eq!(
            prices.quote("openai", "gpt-5").unwrap().source,
            PriceSource::Table
        );
    }

    #[test]
    fn malformed_tables_name_the_key() {
        let bad = |text: &str| {
            PriceTable::parse(text, PriceSource::Override)
                .unwrap_err()
                .key
        };
        assert_eq!(
            bad("[openai]\n\"gpt-4o\" = { input = \"x\", output = 1 }"),
            "openai.gpt-4o.input"
        );
        assert_eq!(
            bad("[openai]\n\"gpt-4o\" = { input = 1 }"),
            "openai.gpt-4o.output"
        );
        assert_eq!(
            bad("[openai]\n\"gpt-4o\" = { input = -1, output = 1 }"),
            "openai.gpt-4o.input"
        );
        assert_eq!(
            bad("[openai]\n\"gpt-4o\" = { input = 1, output = 1, cached = 1 }"),
            "openai.gpt-4o.cached"
        );
        assert_eq!(bad("[openai]\n\"gpt-4o\" = 3"), "openai.gpt-4o");
        assert_eq!(bad("currency = \"EUR\""), "currency");
        assert_eq!(bad("openai = 1"), "openai");
        assert_eq!(bad("[openai"), "(file)");
    }
}
