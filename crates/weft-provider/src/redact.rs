//! Secret scrubbing for anything that may be logged or shown: error bodies, messages.
//!
//! API keys must never be logged (UPP-1.2 §17.1). Vendors sometimes echo part of a key in an
//! error ("Incorrect API key provided: sk-abc…"); every token that looks like a key is replaced
//! by `[REDACTED]` before an error leaves the provider layer.

const PREFIXES: [&str; 5] = ["sk-", "AIza", "Bearer ", "xai-", "gsk_"];

/// Replaces every token that starts like an API key, and every occurrence of `known` (the key
/// actually used, when longer than 8 characters), with `[REDACTED]`.
///
/// # Examples
///
/// ```
/// use weft_provider::redact::redact;
///
/// let text = "Incorrect API key provided: sk-proj-abc123. Bearer xyz";
/// assert_eq!(redact(text, None), "Incorrect API key provided: [REDACTED]. [REDACTED]");
/// ```
pub fn redact(text: &str, known: Option<&str>) -> String {
    let mut out = match known {
        Some(key) if key.len() > 8 => text.replace(key, "[REDACTED]"),
        _ => text.to_owned(),
    };
    for prefix in PREFIXES {
        let mut from = 0;
        while let Some(pos) = out[from..].find(prefix) {
            let start = from + pos;
            let boundary_ok = start == 0
                || !out[..start]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_ascii_alphanumeric());
            let body_start = start + prefix.len();
            let end = out[body_start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '*'))
                .map_or(out.len(), |e| body_start + e);
            if boundary_ok && end - body_start >= 3 {
                out.replace_range(start..end, "[REDACTED]");
                from = start + "[REDACTED]".len();
            } else {
                from = body_start;
            }
            if from >= out.len() {
                break;
            }
        }
    }
    out
}

/// Whether [`redact`] could change `text`: it holds a key-shaped prefix or `known` (when
/// longer than 8 characters). `false` is exact: `redact` would return `text` unchanged. A
/// JSON text can be checked whole before parsing it, since none of these are escaped in JSON
/// (a `known` key with a quote, backslash or control character makes this answer `true`).
///
/// # Examples
///
/// ```
/// use weft_provider::redact::may_contain_secret;
///
/// assert!(!may_contain_secret(r#"{"text":"hello"}"#, None));
/// assert!(may_contain_secret(r#"{"key":"sk-proj-abc123"}"#, None));
/// ```
pub fn may_contain_secret(text: &str, known: Option<&str>) -> bool {
    PREFIXES.iter().any(|p| text.contains(p))
        || known.is_some_and(|key| {
            key.len() > 8
                && (text.contains(key) || key.chars().any(|c| c == '"' || c == '\\' || c < ' '))
        })
}

/// [`redact`] applied to every string inside a JSON value.
pub fn redact_json(value: &mut serde_json::Value, known: Option<&str>) {
    match value {
        serde_json::Value::String(s) => {
            let cleaned = redact(s, known);
            if cleaned != *s {
                *s = cleaned;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| redact_json(v, known)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| redact_json(v, known)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_key_and_patterns_are_removed() {
        assert_eq!(
            redact("key=mysecretkey123 end", Some("mysecretkey123")),
            "key=[REDACTED] end"
        );
        assert_eq!(redact("AIzaSyD-abc_def ok", None), "[REDACTED] ok");
        assert_eq!(
            redact("task-force and desk-top", None),
            "task-force and desk-top"
        );
        assert_eq!(redact("sk-ant-api03-xx***yy.", None), "[REDACTED].");
    }

    #[test]
    fn may_contain_secret_is_false_only_when_redact_changes_nothing() {
        let key = "mysecretkey123";
        for text in [
            "plain text",
            "task-force and desk-top",
            "key=mysecretkey123 end",
            "AIzaSyD-abc_def ok",
            "Bearer abcdef",
            "xai-1234 gsk_5678",
            "sk-",
            "",
        ] {
            if !may_contain_secret(text, Some(key)) {
                assert_eq!(redact(text, Some(key)), text, "{text}");
            }
        }
        assert!(may_contain_secret("key=mysecretkey123 end", Some(key)));
        assert!(!may_contain_secret("short key", Some("short")));
        assert!(may_contain_secret("{}", Some("needs\"escaping")));
    }
}
