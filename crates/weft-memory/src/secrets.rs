//! Secret detection: a memory that holds a credential is refused at every door (store,
//! promotion, correction), `--force` or not.
//!
//! What counts as a secret (the name is reported, never the value):
//!
//! | name | shape |
//! |---|---|
//! | `private key` | a PEM `-----BEGIN … PRIVATE KEY-----` block |
//! | `AWS access key` | `AKIA…` / `ASIA…` + 16 upper-case letters or digits |
//! | `API key (sk-…)` | OpenAI / Anthropic style `sk-…` keys of 20+ characters |
//! | `GitHub token` | `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_` tokens |
//! | `Slack token` | `xoxa-`, `xoxb-`, `xoxp-`, `xoxr-`, `xoxs-` |
//! | `Google API key` | `AIza` + 35 characters |
//! | `Stripe key` | `sk_live_…`, `rk_test_…` |
//! | `JSON Web Token` | three base64url parts, the first two starting `eyJ` |
//! | `bearer token` | `Bearer` + 20+ token characters |
//! | `credentials in a URL` | `scheme://user:password@host` |
//! | `assigned secret` | `password = …`, `api_key: …`, `client_secret=…`, `token=…` with a value of 8+ characters that is not a placeholder (`<…>`, `${…}`, `***`, `xxx`, `changeme`, `redacted`) |

use std::sync::LazyLock;

use regex::Regex;

struct Rule {
    name: &'static str,
    pattern: Regex,
}

#[allow(clippy::expect_used)] // the patterns are constants, checked by the tests
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    [
        ("private key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
        ("AWS access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("API key (sk-…)", r"\bsk-(?:[A-Za-z]+-)?[A-Za-z0-9_\-]{20,}"),
        (
            "GitHub token",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        ),
        ("Slack token", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
        ("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}"),
        ("Stripe key", r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"),
        (
            "JSON Web Token",
            r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        ),
        ("bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{20,}=*"),
        (
            "credentials in a URL",
            r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:[^\s:/@]{3,}@",
        ),
    ]
    .into_iter()
    .map(|(name, pattern)| Rule {
        name,
        pattern: Regex::new(pattern).expect("a constant pattern"),
    })
    .collect()
});

#[allow(clippy::expect_used)] // a constant pattern, checked by the tests
static ASSIGNED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)\b(?:password|passwd|pwd|secret|api[_\-]?key|access[_\-]?key|secret[_\-]?key|access[_\-]?token|auth[_\-]?token|token|client[_\-]?secret|private[_\-]?key)\b["']?\s*[:=]\s*["']?([^\s"',;]{8,})"#,
    )
    .expect("a constant pattern")
});

fn placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    value.starts_with('<')
        || value.starts_with("${")
        || value.starts_with('$')
        || value.starts_with("{{")
        || value.contains("***")
        || lower.contains("xxxx")
        || lower.contains("changeme")
        || lower.contains("redacted")
        || lower.contains("placeholder")
        || lower.contains("example")
        || lower.starts_with("env:")
        || lower.starts_with("os.environ")
        || lower.starts_with("std::env")
        || lower.starts_with("process.env")
}

/// The kind of secret `text` holds, if any (the name only, never the value).
///
/// # Examples
///
/// ```
/// use weft_memory::detect_secret;
///
/// assert_eq!(detect_secret("the deploy key is AKIAIOSFODNN7EXAMPLE"), Some("AWS access key"));
/// assert_eq!(detect_secret("password = hunter2hunter2"), Some("assigned secret"));
/// assert_eq!(detect_secret("set password = ${DB_PASSWORD} from the vault"), None);
/// assert_eq!(detect_secret("we rotate API keys every 90 days"), None);
/// ```
pub fn detect_secret(text: &str) -> Option<&'static str> {
    if let Some(rule) = RULES.iter().find(|r| r.pattern.is_match(text)) {
        return Some(rule.name);
    }
    ASSIGNED
        .captures_iter(text)
        .filter_map(|c| c.get(1))
        .any(|value| !placeholder(value.as_str()))
        .then_some("assigned secret")
}

#[cfg(test)]
mod tests {
    use super::detect_secret;

    #[test]
    fn every_listed_shape_is_caught() {
        let cases = [
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE", "private key"),
            ("-----BEGIN PRIVATE KEY-----", "private key"),
            ("key AKIAABCDEFGHIJKLMNOP here", "AWS access key"),
            (
                "OPENAI_API_KEY is sk-proj-abcdefghijklmnopqrstuvwx",
                "API key (sk-…)",
            ),
            ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "API key (sk-…)"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "GitHub token"),
            ("github_pat_11ABCDEFG0123456789_abcdefghij", "GitHub token"),
            ("xoxb-1234567890-abcdefghij", "Slack token"),
            ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "Google API key"),
            ("sk_live_abcdefghijklmnop1234", "Stripe key"),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "JSON Web Token",
            ),
            (
                "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz'",
                "bearer token",
            ),
            (
                "postgres://admin:s3cretpass@db.internal/app",
                "credentials in a URL",
            ),
            ("DB password: Tr0ub4dor&3x", "assigned secret"),
            ("api_key=\"9f8e7d6c5b4a\"", "assigned secret"),
        ];
        for (text, name) in cases {
            assert_eq!(detect_secret(text), Some(name), "{text}");
        }
    }

    #[test]
    fn talk_about_secrets_is_not_a_secret() {
        for text in [
            "Never log the API key; read it from OPENAI_API_KEY at startup",
            "password = ${DB_PASSWORD}",
            "token: <your token here>",
            "postgres://127.0.0.1:5432/test is the test database",
            "Rotate the deploy token every 90 days because it leaked once",
            "api_key = os.environ[\"KEY\"]",
        ] {
            assert_eq!(detect_secret(text), None, "{text}");
        }
    }
}
