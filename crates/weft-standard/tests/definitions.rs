//! Definition loading: the valid projects under `tests/projects/valid/` load, and each
//! broken project under `tests/projects/broken/` (one per validation rule) fails with the
//! message in its `expected.txt`.

use std::path::{Path, PathBuf};

use weft_standard::{AgentType, Project, ProjectError, SessionToolBinding};

fn projects(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/projects")
        .join(kind)
}

#[test]
fn valid_projects_load() {
    for entry in std::fs::read_dir(projects("valid")).expect("corpus") {
        let dir = entry.expect("entry").path();
        if let Err(e) = Project::load(&dir) {
            panic!("{} should load: {e}", dir.display());
        }
    }
}

#[test]
fn json_project_keeps_every_field_of_the_spec() {
    let project = Project::load(projects("valid/json_project")).expect("loads");
    let pair = project.agent("pair").expect("pair");
    assert_eq!(pair.agent_type, AgentType::DualAi);
    assert_eq!(pair.max_session_turns, Some(4));
    assert_eq!(pair.package_name.as_deref(), Some("@demo/pair"));
    assert_eq!(pair.license.as_deref(), Some("MIT"));
    assert_eq!(pair.hooks, vec!["h1".to_owned()]);
    let b = pair.side_b.as_ref().expect("sideB");
    assert!(!b.stop_on_response);
    assert_eq!(b.stop_tool_response_property.as_deref(), Some("feedback"));
    assert_eq!(
        b.session_stop,
        Some(SessionToolBinding::Name("approve".into()))
    );
    assert_eq!(
        pair.side_a
            .session_fail
            .as_ref()
            .and_then(|s| s.attachments_property()),
        Some("files")
    );
    let worker = project.prompt("worker").expect("worker");
    assert_eq!(
        project.system_text(&weft_standard::variables::Env::default(), pair, worker),
        "Worker for json."
    );
}

#[test]
fn defaults_follow_the_spec() {
    let project = Project::load(projects("valid/minimal_toml")).expect("loads");
    let helper = project.agent("helper").expect("helper");
    assert_eq!(helper.agent_type, AgentType::AiHuman);
    assert!(!helper.expose_as_tool);
    assert!(helper.side_a.stop_on_response);
}

#[test]
fn every_broken_project_reports_its_problem() {
    let mut count = 0;
    for entry in std::fs::read_dir(projects("broken")).expect("corpus") {
        let dir = entry.expect("entry").path();
        let expected = std::fs::read_to_string(dir.join("expected.txt")).expect("expected.txt");
        let expected = expected.trim();
        match Project::load(&dir) {
            Ok(_) => panic!("{} should not load", dir.display()),
            Err(error @ ProjectError::Invalid(_)) => {
                let lines: Vec<String> = error.problems().iter().map(ToString::to_string).collect();
                assert!(
                    lines.iter().any(|l| l.starts_with(expected)),
                    "{}: expected a problem starting with {expected:?}, got {lines:#?}",
                    dir.display()
                );
            }
            Err(other) => panic!("{}: {other}", dir.display()),
        }
        count += 1;
    }
    assert!(count >= 25, "the broken corpus has {count} projects");
}

#[test]
fn all_problems_are_reported_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path();
    std::fs::write(p.join("weft.toml"), "model = \"scripted:x\"\n").expect("write");
    std::fs::create_dir_all(p.join("agents")).expect("mkdir");
    std::fs::write(
        p.join("agents/a.toml"),
        "name = \"a\"\ntype = \"dual_ai\"\n[sideA]\nprompt = \"nope\"\n",
    )
    .expect("write");
    let error = Project::load(p).expect_err("invalid");
    assert_eq!(error.problems().len(), 2, "{error}");
    assert!(error.to_string().starts_with("the project has 2 problems:"));
}

#[test]
fn a_dual_ai_agent_without_max_session_turns_loads_with_a_warning() {
    let project = Project::load(projects("valid/json_project")).expect("loads");
    assert!(
        project.warnings("pair").is_empty(),
        "maxSessionTurns is set"
    );
    assert!(project.warnings("no_such_agent").is_empty());

    let dir = tempfile::tempdir().expect("tempdir");
    for (path, body) in [
        ("weft.toml", "model = \"scripted:s.json\"\n"),
        (
            "agents/pair.toml",
            "name = \"pair\"\ntype = \"dual_ai\"\n[sideA]\nprompt = \"p\"\n[sideB]\nprompt = \"p\"\n",
        ),
        ("prompts/p.toml", "name = \"p\"\n"),
    ] {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, body).expect("write");
    }
    let project = Project::load(dir.path()).expect("a warning does not stop loading");
    let warnings: Vec<String> = project
        .warnings("pair")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        warnings,
        [
            "agents/pair.toml: maxSessionTurns: a dual_ai agent should set maxSessionTurns so the session is bounded; without it only sessionStop or sessionFail ends it"
        ]
    );
}

#[test]
fn weft_toml_gate_tables_load_beside_the_project_settings() {
    // weft-gate reads [project], [gates] and [completion] from the same weft.toml; a
    // project that configures them must still load for `weft run`.
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, body) in [
        (
            "weft.toml",
            "model = \"scripted:s.json\"\n[project]\ntestCommand = \"cargo test\"\n[gates]\nworktree = true\n[completion]\nbuild = \"cargo build\"\n",
        ),
        ("agents/a.toml", "name = \"a\"\n[sideA]\nprompt = \"p\"\n"),
        ("prompts/p.toml", "name = \"p\"\n"),
    ] {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, body).expect("write");
    }
    let project = Project::load(dir.path()).expect("gate tables are accepted");
    let test_command = project
        .config()
        .project
        .as_ref()
        .and_then(|p| p.get("testCommand"))
        .and_then(|v| v.as_str());
    assert_eq!(test_command, Some("cargo test"));
}

#[test]
fn mcp_servers_load_and_resolve_for_a_run() {
    let dir = projects("valid/mcp_servers");
    let project = Project::load(&dir).expect("loads");
    let prompt = project.prompt("helper").expect("prompt");
    assert_eq!(project.mcp_servers_of(prompt), ["files", "tickets"]);
    let hub = project.mcp_hub(&project.confinement(None, None), &dir);
    let servers: std::collections::BTreeMap<&str, &weft_mcp::ServerConfig> =
        hub.servers().collect();
    let files = servers["files"];
    assert_eq!(files.env["TOKEN"], "t-123");
    assert_eq!(files.read_only, [dir.join("vendor/python")]);
    assert!(files.trusted && files.network);
    assert_eq!(servers["tickets"].headers["Authorization"], "Bearer t-123");
    assert_eq!(servers["tickets"].call_timeout().as_secs(), 60);
}
