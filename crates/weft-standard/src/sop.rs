//! The SOP roles' quality gates (runtime spec §7) checked against a project's workspace
//! ([`ProjectGates`]), and what an agent with a role gets besides its prompt's tools.
//!
//! * `tests_exist`: the workspace has a test file — a file under a `tests`, `test`,
//!   `__tests__` or `spec` folder, `test_*.py`, a `*_test.*`, `*.test.*`, `*_spec.*`,
//!   `*.spec.*` or `*Test.*` file, or a Rust file with a `#[test]` function;
//! * `tests_pass`: the project's test command (`[project] testCommand`, the key the
//!   completion gates of `weft-gate` use) exits 0, run like `run_command` — in the workspace,
//!   in the project's sandbox, with its environment scrubbed; no command is a failure that
//!   says so;
//! * `diagram_exists`: the workspace has a diagram — a `.mmd`, `.mermaid`, `.puml`,
//!   `.plantuml`, `.dot`, `.gv`, `.d2`, `.drawio`, `.excalidraw` or `.svg` file, or a
//!   Markdown / AsciiDoc / reStructuredText file with a Mermaid, PlantUML, Graphviz or D2
//!   block.
//!
//! Hidden folders (`.git`, `.weft`, …), `target` and `node_modules` are not searched.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_provider::Tool;
use weft_runtime::profile::sop::{GateCheck, GateChecker, GateVerdict};
use weft_tools::Workspace;

/// The most files a gate looks at.
const MAX_FILES: usize = 20_000;

/// How long `tests_pass` lets the test command run.
const TEST_TIMEOUT: Duration = Duration::from_secs(600);

/// The gates of one agent task, checked in its workspace.
///
/// ```
/// use weft_runtime::profile::sop::{GateCheck, GateChecker};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let workspace = weft_tools::Workspace::new(dir.path())?;
/// let gates = weft_standard::sop::ProjectGates::new(workspace, None);
/// assert!(!gates.check(GateCheck::TestsExist).await.passed);
/// std::fs::create_dir(dir.path().join("tests"))?;
/// std::fs::write(dir.path().join("tests/add.py"), "assert 1 + 1 == 2\n")?;
/// assert!(gates.check(GateCheck::TestsExist).await.passed);
/// // No `[project] testCommand`: tests_pass fails and says so.
/// let verdict = gates.check(GateCheck::TestsPass).await;
/// assert!(!verdict.passed && verdict.detail.contains("testCommand"));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ProjectGates {
    workspace: Workspace,
    test_command: Option<String>,
}

impl ProjectGates {
    /// Gates for `workspace`, running `test_command` for `tests_pass`.
    pub fn new(workspace: Workspace, test_command: Option<String>) -> Self {
        ProjectGates {
            workspace,
            test_command,
        }
    }

    async fn files(&self) -> Vec<PathBuf> {
        let root = self.workspace.root().to_path_buf();
        tokio::task::spawn_blocking(move || walk(&root))
            .await
            .unwrap_or_default()
    }

    async fn tests_exist(&self) -> GateVerdict {
        let root = self.workspace.root().to_path_buf();
        let found: Vec<String> = tokio::task::spawn_blocking({
            let files = self.files().await;
            move || {
                files
                    .into_iter()
                    .filter(|f| is_test_file(&root, f))
                    .map(|f| relative(&root, &f))
                    .collect()
            }
        })
        .await
        .unwrap_or_default();
        if found.is_empty() {
            GateVerdict {
                passed: false,
                detail: "no test files in the workspace (looked for tests/ and test/ folders, test_*.py, \
                         *_test.*, *.test.*, *.spec.*, *Test.* files and Rust #[test] functions); write the tests"
                    .to_owned(),
            }
        } else {
            GateVerdict {
                passed: true,
                detail: format!("test files: {}", listed(&found)),
            }
        }
    }

    async fn diagram_exists(&self) -> GateVerdict {
        let root = self.workspace.root().to_path_buf();
        let found: Vec<String> = tokio::task::spawn_blocking({
            let files = self.files().await;
            move || {
                files
                    .into_iter()
                    .filter(|f| is_diagram(f))
                    .map(|f| relative(&root, &f))
                    .collect()
            }
        })
        .await
        .unwrap_or_default();
        if found.is_empty() {
            GateVerdict {
                passed: false,
                detail: "no diagram in the workspace (a .mmd, .puml, .dot, .d2, .drawio or .svg file, or a \
                         Markdown file with a ```mermaid, ```plantuml, ```dot or ```d2 block); draw one"
                    .to_owned(),
            }
        } else {
            GateVerdict {
                passed: true,
                detail: format!("diagrams: {}", listed(&found)),
            }
        }
    }

    async fn tests_pass(&self) -> GateVerdict {
        let Some(command) = &self.test_command else {
            return GateVerdict {
                passed: false,
                detail: "the project has no test command to run: set testCommand under [project] in weft.toml"
                    .to_owned(),
            };
        };
        let tool: Tool = weft_tools::run_command(
            &self.workspace,
            weft_tools::CommandLimits {
                default_timeout: TEST_TIMEOUT,
                max_timeout: TEST_TIMEOUT,
                output_cap: 16 * 1024,
            },
        );
        let context = weft_provider::ToolContext {
            tool_call_id: "sop-gate-tests_pass".to_owned(),
            signal: Default::default(),
            extensions: Default::default(),
        };
        match tool.run(json!({"command": command}), context).await {
            Ok(result) => {
                let code = result.get("exit_code").and_then(Value::as_i64);
                let tail = |key: &str| {
                    let text = result.get(key).and_then(Value::as_str).unwrap_or("");
                    let start = text.len().saturating_sub(1500);
                    let start = (start..=text.len())
                        .find(|i| text.is_char_boundary(*i))
                        .unwrap_or(text.len());
                    text[start..].trim().to_owned()
                };
                let (out, err) = (tail("stdout"), tail("stderr"));
                let mut detail = format!(
                    "`{command}` exited with {}",
                    code.map_or_else(|| "no code".to_owned(), |c| c.to_string())
                );
                if code != Some(0) {
                    for (name, text) in [("stdout", out), ("stderr", err)] {
                        if !text.is_empty() {
                            detail.push_str(&format!("; {name}: {text}"));
                        }
                    }
                }
                GateVerdict {
                    passed: code == Some(0),
                    detail,
                }
            }
            Err(error) => GateVerdict {
                passed: false,
                detail: format!("`{command}` could not run: {}", error.message),
            },
        }
    }
}

#[async_trait]
impl GateChecker for ProjectGates {
    async fn check(&self, check: GateCheck) -> GateVerdict {
        match check {
            GateCheck::TestsExist => self.tests_exist().await,
            GateCheck::TestsPass => self.tests_pass().await,
            GateCheck::DiagramExists => self.diagram_exists().await,
        }
    }
}

fn listed(files: &[String]) -> String {
    let mut text = files.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if files.len() > 5 {
        text.push_str(&format!(" and {} more", files.len() - 5));
    }
    text
}

fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

/// The workspace's files (not following links), hidden folders, `target` and
/// `node_modules` left out, at most [`MAX_FILES`].
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "node_modules" {
                    folders.push(entry.path());
                }
            } else if kind.is_file() {
                files.push(entry.path());
                if files.len() >= MAX_FILES {
                    return files;
                }
            }
        }
    }
    files
}

const SOURCE: [&str; 16] = [
    "rs", "py", "js", "mjs", "cjs", "ts", "tsx", "jsx", "go", "java", "kt", "rb", "c", "cc", "cpp",
    "sh",
];

fn is_test_file(root: &Path, file: &Path) -> bool {
    let ext = extension(file);
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.rsplit_once('.').map_or(name.as_str(), |(s, _)| s);
    let in_test_folder = file
        .strip_prefix(root)
        .unwrap_or(file)
        .parent()
        .is_some_and(|parent| {
            parent.components().any(|c| {
                matches!(
                    c.as_os_str().to_str(),
                    Some("tests" | "test" | "__tests__" | "spec" | "specs")
                )
            })
        });
    if !SOURCE.contains(&ext.as_str()) {
        return false;
    }
    if in_test_folder
        || stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || stem.ends_with(".test")
        || stem.ends_with(".spec")
        || stem.ends_with("Test")
        || stem.ends_with("Tests")
    {
        return true;
    }
    ext == "rs"
        && std::fs::read_to_string(file)
            .is_ok_and(|text| text.contains("#[test]") || text.contains("#[tokio::test"))
}

fn is_diagram(file: &Path) -> bool {
    let ext = extension(file);
    match ext.as_str() {
        "mmd" | "mermaid" | "puml" | "plantuml" | "pu" | "dot" | "gv" | "d2" | "drawio"
        | "excalidraw" | "svg" => true,
        "md" | "markdown" | "adoc" | "rst" => std::fs::read_to_string(file).is_ok_and(|text| {
            ["```mermaid", "```plantuml", "```dot", "```d2", "@startuml"]
                .iter()
                .any(|marker| text.contains(marker))
        }),
        _ => false,
    }
}

fn extension(file: &Path) -> String {
    file.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn test_files_and_diagrams_are_recognized() {
        let root = Path::new("/w");
        for (path, test) in [
            ("/w/tests/cli.rs", true),
            ("/w/pkg/test_math.py", true),
            ("/w/src/add.test.ts", true),
            ("/w/calc_test.go", true),
            ("/w/src/CalcTest.java", true),
            ("/w/README.md", false),
            ("/w/src/lib.py", false),
            ("/w/tests/data.json", false),
        ] {
            assert_eq!(is_test_file(root, Path::new(path)), test, "{path}");
        }
        assert!(is_diagram(Path::new("/w/docs/flow.mmd")));
        assert!(is_diagram(Path::new("/w/arch.PUML")));
        assert!(!is_diagram(Path::new("/w/notes.txt")));
    }
}
