//! `standard_project` and `scripted_script`: Standard Agents project loading (weft-standard)
//! and scripted model files (weft-provider's `scripted:` provider).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use weft_provider::adapters::scripted::Script;
use weft_runtime::spec::ProjectSnapshot;
use weft_standard::{Project, ProjectError, snapshot_of};

/// The separator of files in a `standard_project` input: a line `=== PATH`.
const FILE_MARK: &str = "=== ";

/// The project files of an input: `=== PATH` lines start a file; text before the first one
/// is `weft.toml`. Only paths a project reads are kept (`weft.toml`, `weft.json`,
/// `agents|prompts|tools/NAME.toml|json`).
pub(crate) fn project_files(text: &str) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut name = "weft.toml".to_owned();
    let mut body = String::new();
    for line in text.split_inclusive('\n') {
        if let Some(path) = line.strip_prefix(FILE_MARK) {
            files.insert(std::mem::take(&mut name), std::mem::take(&mut body));
            path.trim().clone_into(&mut name);
        } else {
            body.push_str(line);
        }
    }
    files.insert(name, body);
    files.retain(|path, body| allowed(path) && !body.is_empty());
    files
}

fn allowed(path: &str) -> bool {
    if matches!(path, "weft.toml" | "weft.json") {
        return true;
    }
    let Some((folder, file)) = path.split_once('/') else {
        return false;
    };
    let Some((stem, ext)) = file.rsplit_once('.') else {
        return false;
    };
    matches!(folder, "agents" | "prompts" | "tools")
        && matches!(ext, "toml" | "json")
        && (1..=40).contains(&stem.len())
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("weft-fuzz-project-{}", std::process::id()))
}

fn write_project(dir: &Path, files: &BTreeMap<String, String>) -> std::io::Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    for folder in ["agents", "prompts", "tools"] {
        std::fs::create_dir_all(dir.join(folder))?;
    }
    for (path, body) in files {
        std::fs::write(dir.join(path), body)?;
    }
    Ok(())
}

/// What a load says, comparable across two loads.
fn outcome(result: &Result<Project, ProjectError>) -> Result<Vec<String>, String> {
    match result {
        Ok(project) => Ok(project.agents().map(|a| a.name.clone()).collect()),
        Err(error) => Err(error.to_string()),
    }
}

/// Any text as a project's definition files (`=== PATH` lines start a file): loading never panics;
/// loading from disk and from the recorded snapshot of the same files agree (agents, or the
/// same problems); a failed load names at least one problem; for a loaded project, every
/// agent's model sites, tool policy, warnings and system text can be computed.
pub fn standard_project(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let files = project_files(text);
    let dir = scratch_dir();
    if write_project(&dir, &files).is_err() {
        return;
    }
    let from_disk = Project::load(&dir);
    let snapshot = snapshot_of(&dir).expect("the files just written read back");
    assert_eq!(snapshot.files, files, "the snapshot holds the files");
    let from_snapshot = Project::from_snapshot(&ProjectSnapshot::new(files), &dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(outcome(&from_disk), outcome(&from_snapshot));
    match from_snapshot {
        Ok(project) => {
            for agent in project.agents() {
                let _ = project.model_sites(agent);
                let _ = project.tool_policy(agent);
                let _ = project.warnings(&agent.name);
                for (_, side) in agent.sides() {
                    if let Some(prompt) = project.prompt(&side.prompt) {
                        let _ = project.system_text(
                            &weft_standard::variables::Env::default(),
                            agent,
                            prompt,
                        );
                        let _ = project.model_of(prompt);
                    }
                }
            }
            let _ = project.default_agent();
        }
        Err(ProjectError::Invalid(problems)) => {
            assert!(!problems.is_empty(), "an invalid project names a problem");
        }
        Err(other) => panic!("a snapshot load fails only with problems: {other}"),
    }
}

/// Any bytes as a scripted model file (`scripted:PATH`): no panic; a script that parses
/// serializes and parses back to the same script.
pub fn scripted_script(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(script) = serde_json::from_str::<Script>(text) else {
        return;
    };
    let json = serde_json::to_string(&script).expect("a script serializes");
    let back: Script = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("a script does not read back: {e}\n{json}"));
    assert_eq!(back, script);
}

#[cfg(test)]
mod tests {
    #[test]
    fn inputs_split_into_project_files() {
        let files = super::project_files(
            "[project]\n=== agents/a.toml\nname = 1\n=== ../x.toml\nbad\n=== prompts/p.json\n{}\n",
        );
        let names: Vec<&str> = files.keys().map(String::as_str).collect();
        assert_eq!(names, ["agents/a.toml", "prompts/p.json", "weft.toml"]);
        assert_eq!(files["weft.toml"], "[project]\n");
    }
}
