//! The README cannot drift (issue 17 item 12): every `sh` example of `README.md` runs,
//! in order, against the built `weft` (first on `PATH`), in one scratch folder that is a fresh
//! git repository, with no API key in the environment. A block runs under `sh -e`, so each
//! command must succeed, unless the line before its fence says otherwise:
//!
//! - `<!-- readme-test: skip (REASON) -->`: not run (a real key, the network, a build); the
//!   reason is required and the skipped blocks are listed on stderr;
//! - `<!-- readme-test: exit N (REASON) -->`: the block must end with exit code `N`.
//!
//! An unmarked block that fails fails the test, with its line, output and error.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the marker before a block asks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    Success,
    Skip(String),
    Exit(i32, String),
}

/// One `sh` block: its line in the README, its text, what it must do.
#[derive(Debug)]
struct Block {
    line: usize,
    script: String,
    expect: Expect,
}

fn parse_marker(line: &str) -> Option<Expect> {
    let body = line
        .trim()
        .strip_prefix("<!-- readme-test:")?
        .strip_suffix("-->")?
        .trim();
    let reason = |rest: &str| {
        let rest = rest.trim();
        assert!(
            rest.starts_with('(') && rest.ends_with(')') && rest.len() > 2,
            "a readme-test marker needs a reason in parentheses: {line:?}"
        );
        rest[1..rest.len() - 1].to_owned()
    };
    if let Some(rest) = body.strip_prefix("skip") {
        return Some(Expect::Skip(reason(rest)));
    }
    if let Some(rest) = body.strip_prefix("exit") {
        let rest = rest.trim();
        let (code, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let code = code
            .parse()
            .unwrap_or_else(|_| panic!("readme-test: exit needs a number: {line:?}"));
        return Some(Expect::Exit(code, reason(rest)));
    }
    panic!("unknown readme-test marker {line:?}: use `skip (REASON)` or `exit N (REASON)`");
}

fn blocks(readme: &str) -> Vec<Block> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let is_shell = ["```sh", "```bash", "```shell", "```console"]
            .iter()
            .any(|f| fence.split_whitespace().next() == Some(f));
        if fence.starts_with("```") {
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                body.push(lines[i]);
                i += 1;
            }
            if is_shell {
                let marker = start
                    .checked_sub(1)
                    .and_then(|j| parse_marker(lines[j]))
                    .unwrap_or(Expect::Success);
                out.push(Block {
                    line: start + 1,
                    script: body.join("\n"),
                    expect: marker,
                });
            }
        }
        i += 1;
    }
    out
}

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(path).expect("README.md")
}

/// A folder holding `weft` (the binary under test), first on `PATH`.
fn bin_dir(root: &Path) -> PathBuf {
    let dir = root.join("bin");
    std::fs::create_dir_all(&dir).expect("bin");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_weft"), dir.join("weft")).expect("symlink");
    dir
}

fn shell(root: &Path, work: &Path, bin: &Path, script: &str) -> std::process::Output {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("sh");
    command
        .args(["-e", "-c", script])
        .current_dir(work)
        .env("PATH", path)
        .env("HOME", root.join("home"))
        .env("XDG_CACHE_HOME", root.join("home/.cache"))
        .env("NO_COLOR", "1")
        .env("GIT_AUTHOR_NAME", "readme")
        .env("GIT_AUTHOR_EMAIL", "readme@example.invalid")
        .env("GIT_COMMITTER_NAME", "readme")
        .env("GIT_COMMITTER_EMAIL", "readme@example.invalid")
        .stdin(std::process::Stdio::null());
    for variable in [
        "WEFT_DATABASE_URL",
        "WEFT_LOG",
        "WEFT_MODEL_PATH",
        "WEFT_OPENAI_COMPATIBLE_BASE_URL",
        "WEFT_OPENAI_COMPATIBLE_API_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
    ] {
        command.env_remove(variable);
    }
    command.output().expect("sh runs")
}

#[test]
fn markers_are_read() {
    assert_eq!(
        parse_marker("<!-- readme-test: skip (needs a key) -->"),
        Some(Expect::Skip("needs a key".into()))
    );
    assert_eq!(
        parse_marker("<!-- readme-test: exit 1 (fails on purpose) -->"),
        Some(Expect::Exit(1, "fails on purpose".into()))
    );
    assert_eq!(parse_marker("Some text."), None);
    let parsed = blocks(
        "intro\n\n```sh\nweft a\n```\n<!-- readme-test: skip (x) -->\n```sh\nweft b\n```\n```toml\nx = 1\n```\n",
    );
    assert_eq!(parsed.len(), 2);
    assert_eq!(parsed[0].script, "weft a");
    assert_eq!(parsed[0].expect, Expect::Success);
    assert_eq!(parsed[1].expect, Expect::Skip("x".into()));
}

#[test]
fn every_shell_example_of_the_readme_runs() {
    let root = tempfile::tempdir().expect("tempdir");
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).expect("work");
    std::fs::create_dir_all(root.path().join("home")).expect("home");
    let bin = bin_dir(root.path());
    let setup = shell(
        root.path(),
        &work,
        &bin,
        "git init -q . && git commit -q --allow-empty -m init",
    );
    assert!(setup.status.success(), "git: {setup:?}");
    let blocks = blocks(&readme());
    let (mut ran, mut skipped) = (0, Vec::new());
    for block in &blocks {
        let expected = match &block.expect {
            Expect::Skip(reason) => {
                skipped.push(format!("README.md:{} ({reason})", block.line));
                continue;
            }
            Expect::Success => 0,
            Expect::Exit(code, _) => *code,
        };
        let out = shell(root.path(), &work, &bin, &block.script);
        assert_eq!(
            out.status.code(),
            Some(expected),
            "the example at README.md:{} exited {:?}, not {expected}:\n{}\n--- stdout\n{}\n--- stderr\n{}",
            block.line,
            out.status.code(),
            block.script,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    for skip in &skipped {
        eprintln!("skipped: {skip}");
    }
    // The README shows the main job and its inspection: those must always be tested.
    assert!(ran >= 4, "only {ran} README examples ran");
    assert!(
        blocks
            .iter()
            .any(|b| b.expect == Expect::Success && b.script.contains("weft init demo")),
        "the main example is tested"
    );
    // What the examples promise happened.
    assert!(work.join("demo/hello.txt").is_file());
}
