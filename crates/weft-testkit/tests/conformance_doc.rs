//! `docs/CONFORMANCE.md` stays honest: every test it names exists somewhere in `crates/`.
//! (A renamed or deleted test makes this fail until the document is fixed.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `fn name` in the workspace's Rust sources.
fn function_names() -> HashSet<String> {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    rust_files(&root().join("fuzz"), &mut files);
    let mut names = HashSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (i, _) in text.match_indices("fn ") {
            let name: String = text[i + 3..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// Test-like names in a cell: snake_case with at least two underscores (a `file::` or
/// `module::` prefix is dropped), outside parentheses, which hold explanations.
fn named_tests(cell: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut depth = 0u32;
    for c in cell.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '`' => plain.push(' '),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    plain
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .map(|t| t.rsplit("::").next().unwrap_or(t))
        .filter(|t| {
            t.matches('_').count() >= 2
                && t.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && t.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_test_named_in_conformance_md_exists() {
    let doc =
        std::fs::read_to_string(root().join("docs/CONFORMANCE.md")).expect("docs/CONFORMANCE.md");
    let functions = function_names();
    let mut missing = Vec::new();
    let mut named = 0;
    for line in doc.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 5 {
            continue;
        }
        for test in named_tests(cells[3]) {
            named += 1;
            if !functions.contains(&test) {
                missing.push(format!("{}: {test}", cells[0]));
            }
        }
    }
    assert!(named > 100, "the document names only {named} tests");
    assert!(
        missing.is_empty(),
        "tests named in docs/CONFORMANCE.md that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn names_are_extracted_outside_explanations() {
    assert_eq!(
        named_tests(
            "foo_bar_baz, `mod_x::api_name_here` (see other_test_name), file::a_b_c, `Type::method`"
        ),
        ["foo_bar_baz", "api_name_here", "a_b_c"]
    );
}

#[test]
fn every_requirement_has_a_row() {
    let requirements = root().join("../shared/specs/REQUIREMENTS.md");
    let Ok(text) = std::fs::read_to_string(&requirements) else {
        eprintln!(
            "skipped: {} is not present (it lives beside the repository)",
            requirements.display()
        );
        return;
    };
    let doc = std::fs::read_to_string(root().join("docs/CONFORMANCE.md")).unwrap();
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(' ').next())
        .filter(|id| {
            id.contains('-')
                && id
                    .split('-')
                    .nth(1)
                    .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    let missing: Vec<&&str> = ids
        .iter()
        .filter(|id| !doc.contains(&format!("| {id} |")))
        .collect();
    assert!(
        missing.is_empty(),
        "requirements without a row: {missing:?} (run scripts/conformance.py)"
    );
}
