//! Shared by the CLI tests: a Standard Agents project driven by a scripted model.

use std::path::Path;

use serde_json::Value;

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
#[allow(dead_code)]
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
