//! Shared by the CLI tests: running the `weft` binary hermetically, and a Standard Agents
//! project driven by a scripted model.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The environment a test's `weft` must not inherit from the developer's shell: a store URL,
/// provider keys and base URLs, the server's token, OpenTelemetry settings.
const INHERITED: &[&str] = &[
    "WEFT_DATABASE_URL",
    "WEFT_SERVE_TOKEN",
    "WEFT_OPENAI_COMPATIBLE_BASE_URL",
    "WEFT_OPENAI_COMPATIBLE_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
];

/// `weft ARGS` in `cwd`, hermetic (see [`INHERITED`] and every `OTEL_*` variable), without
/// colour, stdin closed; add what a test needs (`.env(…)`) before running it.
pub(crate) fn weft_command(cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    for name in INHERITED {
        command.env_remove(name);
    }
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OTEL_") {
            command.env_remove(name);
        }
    }
    command
}

/// Runs `weft ARGS` in `cwd` (see [`weft_command`]) to its end.
pub(crate) fn weft(cwd: &Path, args: &[&str]) -> Output {
    weft_command(cwd, args).output().expect("weft runs")
}

/// What a finished `weft` printed: stdout, then stderr.
pub(crate) fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Writes a project into `dir`: one `ai_human` agent `a` whose prompt `p` offers `tools`,
/// answered by the `scripted-turns` model from `script` (`{"responses": [...], "freshIds":
/// bool}`: answer k for the k-th model call of a conversation, so a resumed run gets the
/// same answers). `extra` is appended to `weft.toml`.
pub(crate) fn scripted_project(dir: &Path, extra: &str, tools: &[&str], script: &Value) {
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    std::fs::write(
        dir.join("weft.toml"),
        format!("model = \"scripted-turns:script.json\"\n{extra}"),
    )
    .expect("weft.toml");
    std::fs::write(
        dir.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .expect("agent");
    let tools: Vec<String> = tools.iter().map(|t| format!("{t:?}")).collect();
    std::fs::write(
        dir.join("prompts/p.toml"),
        format!("name = \"p\"\ntools = [{}]\n", tools.join(", ")),
    )
    .expect("prompt");
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
}

/// A `--json` event with its payload's fields beside the envelope's (`type`, `runId`, …), for
/// tests that read a few fields of many event types.
pub(crate) fn flat(event: Value) -> Value {
    match (event.get("seq"), event.get("payload")) {
        (Some(_), Some(Value::Object(payload))) => {
            let mut flat = event.clone();
            for (key, value) in payload {
                flat[key] = value.clone();
            }
            flat
        }
        _ => event,
    }
}
