//! Issue 17, "honesty": errors say what and where, exit codes mean what the help says, and
//! every stop prints the command that goes on. Each test drives the `weft` binary.

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn weft_command(cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("WEFT_DATABASE_URL")
        .env_remove("WEFT_OPENAI_COMPATIBLE_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("WEFT_OPENAI_COMPATIBLE_API_KEY");
    command
}

fn weft(cwd: &Path, args: &[&str]) -> Output {
    weft_command(cwd, args)
        .stdin(Stdio::null())
        .output()
        .expect("weft runs")
}

fn weft_with_stdin(cwd: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = weft_command(cwd, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn say(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

fn hello() -> Value {
    json!({"responses": [{"text": "hello"}]})
}

/// Runs `weft run p hi` in the parent of the project `p` and checks it is a definition error:
/// exit 2, each of `expected` on stderr, and no store (so no run record) created.
fn assert_definition_error(parent: &Path, extra_args: &[&str], expected: &[&str]) {
    let mut args = vec!["run", "p"];
    args.extend_from_slice(extra_args);
    args.push("hi");
    let out = weft(parent, &args);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    let stderr = text(&out.stderr);
    for want in expected {
        assert!(stderr.contains(want), "missing {want:?}: {}", say(&out));
    }
    assert!(
        !parent.join("p/.weft/weft.db").exists(),
        "a definition error created the store: {}",
        say(&out)
    );
}

#[test]
fn definition_errors_exit_2_name_the_file_and_key_and_record_no_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("p");
    common::scripted_project(&project, "", &[], &hello());

    // An unknown provider and a model without a provider, from --model.
    assert_definition_error(
        dir.path(),
        &["--model", "foo:bar"],
        &["--model: unknown provider \"foo\"", "known providers:"],
    );
    assert_definition_error(
        dir.path(),
        &["--model", "gpt-4o"],
        &["--model: model reference \"gpt-4o\" is not of the form PROVIDER:MODEL"],
    );
    // A misspelt provider in weft.toml.
    std::fs::write(
        project.join("weft.toml"),
        "model = \"opneai:gpt-4o-mini\"\n",
    )
    .expect("write");
    assert_definition_error(
        dir.path(),
        &[],
        &["weft.toml: model: unknown provider \"opneai\""],
    );
    // A prompt's own model is named with the prompt's file.
    std::fs::write(
        project.join("prompts/p.toml"),
        "name = \"p\"\nmodel = \"anthropc:claude\"\n",
    )
    .expect("write");
    assert_definition_error(
        dir.path(),
        &[],
        &["prompts/p.toml: model: unknown provider \"anthropc\""],
    );
    std::fs::write(project.join("prompts/p.toml"), "name = \"p\"\n").expect("write");
    // A missing script file, and one with a typo in a key.
    std::fs::write(
        project.join("weft.toml"),
        "model = \"scripted-turns:missing.json\"\n",
    )
    .expect("write");
    assert_definition_error(
        dir.path(),
        &[],
        &["weft.toml: model: cannot read script", "missing.json"],
    );
    std::fs::write(
        project.join("weft.toml"),
        "model = \"scripted-turns:script.json\"\n",
    )
    .expect("write");
    std::fs::write(
        project.join("script.json"),
        r#"{"responses": [{"txt": "hi"}]}"#,
    )
    .expect("write");
    assert_definition_error(
        dir.path(),
        &[],
        &[
            "weft.toml: model: invalid script",
            "script.json",
            "unknown field `txt`",
        ],
    );
    std::fs::write(project.join("script.json"), "{not json").expect("write");
    assert_definition_error(dir.path(), &[], &["invalid script", "line 1"]);
    std::fs::write(project.join("script.json"), hello().to_string()).expect("write");
    // openai-compatible without a base URL, and a misspelt [providers.NAME] table.
    assert_definition_error(
        dir.path(),
        &["--model", "openai-compatible:llama3.2"],
        &["openai-compatible needs a base URL", "--base-url"],
    );
    std::fs::write(
        project.join("weft.toml"),
        "model = \"scripted-turns:script.json\"\n[providers.opnai]\nbaseUrl = \"http://127.0.0.1:1/v1\"\n",
    )
    .expect("write");
    assert_definition_error(
        dir.path(),
        &[],
        &["weft.toml: providers.opnai: unknown provider \"opnai\""],
    );
    // A missing key, said with the variable to set.
    std::fs::write(
        project.join("weft.toml"),
        "model = \"scripted-turns:script.json\"\n",
    )
    .expect("write");
    assert_definition_error(
        dir.path(),
        &["--model", "anthropic:claude-sonnet-4-5"],
        &["set ANTHROPIC_API_KEY"],
    );
    // The fixed project runs.
    let out = weft(dir.path(), &["run", "p", "hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
}

#[test]
fn tool_definitions_are_checked_at_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("p");
    common::scripted_project(&project, "", &["approve"], &hello());
    std::fs::create_dir_all(project.join("tools")).expect("mkdir");
    // A name no provider accepts and parameters that are no schema.
    std::fs::write(
        project.join("tools/approve.toml"),
        "name = \"app rove!\"\nparameters = { type = \"object\", properties = \"summary\" }\n",
    )
    .expect("write");
    let out = weft(dir.path(), &["run", "p", "hi"]);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("tools/approve.toml: name: \"app rove!\" is not a tool name"),
        "{}",
        say(&out)
    );
    assert!(
        stderr.contains("tools/approve.toml: parameters.properties: not a valid JSON Schema"),
        "{}",
        say(&out)
    );
    // A file whose tool has another name: said as that, not as an unknown tool.
    std::fs::write(
        project.join("tools/approve.toml"),
        "name = \"approval\"\nparameters = { type = \"object\", properties = { summary = { type = \"string\" } } }\n",
    )
    .expect("write");
    let out = weft(dir.path(), &["run", "p", "hi"]);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    assert!(
        text(&out.stderr).contains(
            "prompts/p.toml: tools[0]: unknown tool \"approve\": tools/approve.toml names its tool \"approval\""
        ),
        "{}",
        say(&out)
    );
    assert!(!project.join(".weft/weft.db").exists());
}

#[test]
fn init_names_the_project_and_run_reads_stdin_from_the_parent_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = weft(dir.path(), &["init", "shop"]);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    let config = std::fs::read_to_string(dir.path().join("shop/weft.toml")).expect("weft.toml");
    assert!(config.contains("name = \"shop\""), "{config}");
    assert!(config.contains("PROJECT_NAME = \"shop\""), "{config}");
    // `echo msg | weft run shop`: the lone argument is the project folder.
    let out = weft_with_stdin(dir.path(), &["run", "shop"], "Add a greeting file\n");
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(dir.path().join("shop/hello.txt").is_file(), "{}", say(&out));
}

#[test]
fn llm_reads_the_prompt_from_stdin_and_checks_its_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.json");
    std::fs::write(&script, hello().to_string()).expect("write");
    let model = format!("scripted:{}", script.display());
    let out = weft_with_stdin(dir.path(), &["llm", "--model", &model], "Say hi\n");
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert_eq!(text(&out.stdout).trim(), "hello");
    // No prompt at all (stdin is empty): a usage error.
    let out = weft(dir.path(), &["llm", "--model", &model]);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    // A base URL without a scheme is a usage error, before any request.
    let out = weft(
        dir.path(),
        &[
            "llm",
            "--model",
            "openai-compatible:llama3.2",
            "--base-url",
            "127.0.0.1:11434/v1",
            "hi",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    assert!(
        text(&out.stderr).contains("has no scheme: write it as http://127.0.0.1:11434/v1"),
        "{}",
        say(&out)
    );
    // Definition problems of the model are usage errors too, before any request.
    for (model, want) in [
        ("scripted:missing.json", "cannot read script"),
        ("openai-compatible:llama3.2", "needs a base URL"),
        ("foo:bar", "unknown provider \"foo\""),
    ] {
        let out = weft(dir.path(), &["llm", "--model", model, "hi"]);
        assert_eq!(out.status.code(), Some(2), "{model}: {}", say(&out));
        assert!(text(&out.stderr).contains(want), "{model}: {}", say(&out));
    }
    // --param values are JSON: a bare word is refused, a quoted string passes.
    let out = weft(
        dir.path(),
        &["llm", "--model", &model, "--param", "user=me", "hi"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    assert!(
        text(&out.stderr).contains("the value is not JSON"),
        "{}",
        say(&out)
    );
    let out = weft(
        dir.path(),
        &["llm", "--model", &model, "--param", "user=\"me\"", "hi"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
}

#[test]
fn run_refuses_a_base_url_without_a_scheme() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("p");
    common::scripted_project(&project, "", &[], &hello());
    assert_definition_error(
        dir.path(),
        &["--base-url", "localhost:8080"],
        &["--base-url: the base URL \"localhost:8080\" has no scheme"],
    );
}

#[cfg(not(feature = "local"))]
#[test]
fn llm_without_a_key_says_the_build_lacks_the_local_feature() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = weft(dir.path(), &["llm", "hi"]);
    assert_eq!(out.status.code(), Some(2), "{}", say(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("built without the `local` feature"),
        "{}",
        say(&out)
    );
    assert!(
        stderr.contains("cargo install --path crates/weft-cli --features local"),
        "{}",
        say(&out)
    );
    assert!(!stderr.contains("pip install"), "{}", say(&out));
}

#[test]
fn a_provider_failure_prints_the_resume_command_that_then_works() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("p");
    common::scripted_project(
        &project,
        "",
        &[],
        &json!({"responses": [{"error": {"code": "AUTHENTICATION_FAILED", "message": "bad key"}}]}),
    );
    let out = weft(dir.path(), &["run", "p", "hi"]);
    assert_eq!(out.status.code(), Some(1), "{}", say(&out));
    let stdout = text(&out.stdout);
    let run_id = stdout
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("run id")
        .to_owned();
    assert!(
        stdout.contains(&format!("resume with: weft resume {run_id}\n")),
        "{}",
        say(&out)
    );
    // The cause is fixed (the provider answers now): the printed command completes the run.
    std::fs::write(project.join("script.json"), hello().to_string()).expect("write");
    let out = weft(&project, &["resume", &run_id]);
    assert_eq!(out.status.code(), Some(0), "{}", say(&out));
    assert!(text(&out.stdout).contains("hello"), "{}", say(&out));
    // An agent that fails on its own gets no resume hint: resuming would end alike.
    let failing = dir.path().join("f");
    common::scripted_project(
        &failing,
        "",
        &["give_up"],
        &json!({"responses": [{"toolCalls": [{"id": "1", "name": "give_up", "arguments": {"reason": "cannot"}}]}]}),
    );
    std::fs::create_dir_all(failing.join("tools")).expect("mkdir");
    std::fs::write(
        failing.join("tools/give_up.toml"),
        "name = \"give_up\"\nparameters = { type = \"object\", properties = { reason = { type = \"string\" } } }\n",
    )
    .expect("write");
    std::fs::write(
        failing.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\nsessionFail = { name = \"give_up\", messageProperty = \"reason\" }\n",
    )
    .expect("write");
    let out = weft(dir.path(), &["run", "f", "hi"]);
    assert_eq!(out.status.code(), Some(1), "{}", say(&out));
    assert!(!text(&out.stdout).contains("resume with"), "{}", say(&out));
}
