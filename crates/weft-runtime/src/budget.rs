//! Run budgets (`--max-steps`, `--max-total-tokens`, `--max-cost`, `--max-time`, and the
//! same keys in a project's `[budget]`): limits on a whole run, recorded in its spec, so a
//! resumed run keeps them. The runtime counts every model call of the run (recorded or
//! replayed) and its tokens from the run's usage so far; a limit reached before the next
//! model call — or `maxTime` at any moment — ends the run **failed**, with the limit named,
//! never with a half-run step.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The steps a Standard Agents session may take when neither the project nor the command
/// sets `maxSteps`: a runaway pair of agents stops here instead of spending without end.
pub const DEFAULT_SESSION_MAX_STEPS: u64 = 100;

/// Limits on one run (children included, once runs have children).
///
/// # Examples
///
/// ```
/// use weft_runtime::budget::Budget;
///
/// let budget: Budget = serde_json::from_value(serde_json::json!({"maxSteps": 20, "maxTime": "10m"}))?;
/// assert_eq!(budget.max_steps, Some(20));
/// assert_eq!(budget.max_time, Some(std::time::Duration::from_secs(600)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// Most model calls (steps) of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// Most input + output tokens of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_tokens: Option<u64>,
    /// Most cost of the run, in the price table's currency (needs known prices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// Longest wall time of one drive of the run (`"90s"`, `"10m"`, `"2h"`, or seconds).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "duration_text"
    )]
    pub max_time: Option<Duration>,
}

impl Budget {
    /// `self`, with the limits it leaves unset taken from `fallback`.
    #[must_use]
    pub fn or(self, fallback: Budget) -> Budget {
        Budget {
            max_steps: self.max_steps.or(fallback.max_steps),
            max_total_tokens: self.max_total_tokens.or(fallback.max_total_tokens),
            max_cost: self.max_cost.or(fallback.max_cost),
            max_time: self.max_time.or(fallback.max_time),
        }
    }

    /// The limit `steps` and `tokens` have reached, as a sentence, if any.
    pub fn exceeded(&self, steps: u64, tokens: u64) -> Option<String> {
        if let Some(max) = self.max_steps
            && steps >= max
        {
            return Some(format!(
                "the run reached its budget of {max} steps (maxSteps)"
            ));
        }
        if let Some(max) = self.max_total_tokens
            && tokens >= max
        {
            return Some(format!(
                "the run reached its budget of {max} tokens (maxTotalTokens): {tokens} used"
            ));
        }
        None
    }
}

/// A duration as people write it: `90s`, `10m`, `1h30m`.
pub fn format_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match (seconds / 3600, seconds % 3600 / 60, seconds % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// Parses `"90s"`, `"10m"`, `"2h"`, `"1h30m"`, `"7d"`, `"2w"` or a number of seconds.
///
/// # Errors
/// A sentence naming what is wrong.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return seconds_to_duration(seconds, text);
    }
    let mut total = 0.0;
    let mut number = String::new();
    for c in text.chars() {
        match c {
            '0'..='9' | '.' => number.push(c),
            'w' | 'd' | 'h' | 'm' | 's' => {
                let value: f64 = number
                    .parse()
                    .map_err(|_| format!("{text:?} is not a duration like 90s, 10m, 2h or 7d"))?;
                total += value
                    * match c {
                        'w' => 604_800.0,
                        'd' => 86_400.0,
                        'h' => 3600.0,
                        'm' => 60.0,
                        _ => 1.0,
                    };
                number.clear();
            }
            _ => {
                return Err(format!(
                    "{text:?} is not a duration like 90s, 10m, 2h or 7d"
                ));
            }
        }
    }
    if !number.is_empty() || text.is_empty() {
        return Err(format!(
            "{text:?} is not a duration like 90s, 10m, 2h or 7d"
        ));
    }
    seconds_to_duration(total, text)
}

fn seconds_to_duration(seconds: f64, text: &str) -> Result<Duration, String> {
    if seconds.is_finite() && seconds > 0.0 {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(format!("{text:?} is not a positive duration"))
    }
}

mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    #[allow(clippy::ref_option)]
    pub(super) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => serializer.serialize_str(&format!("{}s", d.as_secs_f64())),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Text {
            Number(f64),
            Text(String),
        }
        match Option::<Text>::deserialize(deserializer)? {
            None => Ok(None),
            Some(Text::Number(n)) => super::seconds_to_duration(n, &n.to_string())
                .map(Some)
                .map_err(serde::de::Error::custom),
            Some(Text::Text(t)) => super::parse_duration(&t)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(parse_duration("1w").unwrap(), Duration::from_secs(604_800));
        assert_eq!(parse_duration("2.5").unwrap(), Duration::from_millis(2500));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("10").is_ok());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5x").is_err());
    }

    #[test]
    fn limits_name_themselves_and_fall_back() {
        let b = Budget {
            max_steps: Some(3),
            ..Budget::default()
        }
        .or(Budget {
            max_steps: Some(9),
            max_total_tokens: Some(100),
            ..Budget::default()
        });
        assert_eq!((b.max_steps, b.max_total_tokens), (Some(3), Some(100)));
        assert!(b.exceeded(2, 99).is_none());
        assert!(b.exceeded(3, 0).unwrap().contains("maxSteps"));
        assert!(b.exceeded(0, 100).unwrap().contains("maxTotalTokens"));
    }
}
