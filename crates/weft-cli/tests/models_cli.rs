//! `weft models list` and the no-model message of `weft llm`, as subprocesses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

fn weft(args: &[&str], home: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env_remove("WEFT_MODEL_PATH")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .output()
        .expect("run weft")
}

#[test]
fn models_list_names_the_model_and_the_cache() {
    let home = tempfile::tempdir().unwrap();
    let out = weft(&["models", "list"], home.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("local:gemma3-270m"), "{text}");
    assert!(text.contains("cache:"), "{text}");
}

#[cfg(not(feature = "local"))]
#[test]
fn without_a_model_or_key_llm_says_both_ways_forward() {
    let home = tempfile::tempdir().unwrap();
    let out = weft(&["llm", "Say hi"], home.path());
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    // The reason is the build, not the weights (issue 17 item 6).
    assert!(
        text.contains("built without the `local` feature")
            && text.contains("cargo install --path crates/weft-cli --features local"),
        "{text}"
    );
    assert!(!text.contains("pip install"), "{text}");
    assert!(text.contains("OPENAI_API_KEY"), "{text}");
}

#[cfg(not(feature = "local"))]
#[test]
fn weft_run_without_any_model_says_both_ways_forward() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("p");
    for sub in ["agents", "prompts"] {
        std::fs::create_dir_all(project.join(sub)).unwrap();
    }
    std::fs::write(project.join("weft.toml"), "").unwrap();
    std::fs::write(
        project.join("agents/a.toml"),
        "name = \"a\"\n[sideA]\nprompt = \"p\"\n",
    )
    .unwrap();
    std::fs::write(
        project.join("prompts/p.toml"),
        "name = \"p\"\nsystem = \"Be brief.\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", "p", "hi"])
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .env_remove("WEFT_MODEL_PATH")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("built without the `local` feature"), "{text}");
    assert!(text.contains("OPENAI_API_KEY"), "{text}");
}
