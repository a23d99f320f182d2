//! The valid / invalid corpus: each invalid file must yield an error with the expected rule at
//! the expected JSON Pointer; each valid file must be valid with exactly the expected warnings,
//! and must survive typed parse → serialize unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;
use weft_thread::{Severity, Thread, validate_json};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn expected() -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(corpus_dir().join("expected.json")).unwrap();
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_object()
        .unwrap()
        .clone()
}

#[test]
fn every_corpus_file_is_listed() {
    let expected = expected();
    for kind in ["valid", "invalid"] {
        for entry in std::fs::read_dir(corpus_dir().join(kind)).unwrap() {
            let name = format!("{kind}/{}", entry.unwrap().file_name().to_string_lossy());
            assert!(
                expected.contains_key(&name),
                "{name} has no entry in expected.json"
            );
        }
    }
}

#[test]
fn invalid_files_report_rule_and_pointer() {
    for (name, expectation) in expected()
        .iter()
        .filter(|(name, _)| name.starts_with("invalid/"))
    {
        let text = std::fs::read_to_string(corpus_dir().join(name)).unwrap();
        let report = validate_json(&text);
        assert!(!report.is_valid(), "{name} should be invalid");
        let rule = expectation["rule"].as_str().unwrap();
        let pointer = expectation["pointer"].as_str().unwrap();
        assert!(
            report
                .errors()
                .any(|finding| finding.rule.code() == rule && finding.pointer == pointer),
            "{name}: expected error {rule} at {pointer:?}, got {:#?}",
            report.findings
        );
        for finding in &report.findings {
            assert!(!finding.message.is_empty());
        }
    }
}

#[test]
fn valid_files_are_valid_with_expected_warnings() {
    for (name, expectation) in expected()
        .iter()
        .filter(|(name, _)| name.starts_with("valid/"))
    {
        let text = std::fs::read_to_string(corpus_dir().join(name)).unwrap();
        let report = validate_json(&text);
        assert!(report.is_valid(), "{name}: {:#?}", report.findings);
        let mut got: Vec<(String, String)> = report
            .warnings()
            .map(|finding| (finding.rule.code().to_owned(), finding.pointer.clone()))
            .collect();
        let mut want: Vec<(String, String)> = expectation["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|warning| {
                (
                    warning["rule"].as_str().unwrap().to_owned(),
                    warning["pointer"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{name}");
        assert!(
            report
                .findings
                .iter()
                .all(|finding| finding.severity == Severity::Warning)
        );

        // Extension rules 1-4: typed parse -> serialize keeps everything.
        let value: Value = serde_json::from_str(&text).unwrap();
        let thread = Thread::from_value(value.clone()).unwrap();
        assert_eq!(
            thread.to_value().unwrap(),
            value,
            "{name}: typed round trip changed the document"
        );
    }
}

#[test]
fn rule_numbers_cover_the_eight_rules() {
    let expected = expected();
    let text =
        std::fs::read_to_string(corpus_dir().join("valid/warning-client-metadata.json")).unwrap();
    let report = validate_json(&text);
    assert_eq!(report.warnings().next().unwrap().rule_number, Some(6));
    let mut numbers: Vec<u8> = expected
        .iter()
        .filter(|(name, _)| name.starts_with("invalid/"))
        .filter_map(|(name, _)| {
            let text = std::fs::read_to_string(corpus_dir().join(name)).unwrap();
            validate_json(&text)
                .errors()
                .filter_map(|finding| finding.rule_number)
                .next()
        })
        .collect();
    numbers.push(6);
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(numbers, [1, 2, 3, 4, 5, 6, 7, 8]);
}
