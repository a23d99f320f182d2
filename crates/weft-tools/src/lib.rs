//! Weft's built-in tools, each a [`weft_provider::Tool`] confined to a workspace root.
//!
//! | tool | does | side effects | idempotent |
//! |---|---|---|---|
//! | `read_file` | reads a text file (optionally a line range) | no | yes |
//! | `write_file` | writes a whole file, creating folders | yes | yes |
//! | `list_dir` | lists a folder, recursively honouring `.gitignore` | no | yes |
//! | `search_code` | regex search over files, `.gitignore`-aware | no | yes |
//! | `run_command` | runs `sh -c COMMAND` in the OS sandbox (`weft-sandbox`) with a timeout, an output cap and a scrubbed environment | yes | no |
//! | `read_url` | HTTP GET of a page, size-capped, HTML turned into text (the network policy applies) | no | yes |
//! | `search_web` | a web search through the Brave Search API's wire format (the network policy applies) | no | yes |
//! | `complete_task` | ends the task (the runtime spec's completion contract) | no | yes |
//!
//! Every path argument is relative to the workspace root; absolute paths, `..` that leaves
//! the root, and symlinks that point outside it are refused with an error result the model can
//! read ([`Workspace::resolve`]). A [`Confinement`] adds protected paths (the run store is
//! hidden, the project's definition files read-only) and says how commands are sandboxed.
//! Every output is capped in bytes at the source, with a visible marker ([`cap`]). Arguments are untrusted input (UPP-1.2 §17.2): each tool
//! parses them into a typed struct and reports what is wrong.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let workspace = weft_tools::Workspace::new(dir.path())?;
//! let tools = weft_tools::builtin_tools(&workspace);
//! assert!(tools.iter().any(|t| t.name == "run_command" && t.side_effects && !t.idempotent));
//! assert!(workspace.resolve("../etc/passwd").is_err());
//! # Ok(())
//! # }
//! ```

pub mod cap;
mod command;
mod complete;
mod env;
mod files;
mod search;
mod web;
mod workspace;

use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_provider::{Tool, ToolError};

pub use command::{CommandLimits, run_command};
pub use complete::{COMPLETE_TASK, complete_task};
pub use env::ToolEnv;
pub use files::{list_dir, read_file, write_file};
pub use search::search_code;
pub use web::{
    BRAVE_SEARCH_URL, MAX_DOWNLOAD_BYTES, MAX_TEXT_BYTES, SEARCH_KEY_VARIABLE, SEARCH_URL_VARIABLE,
    html_to_text, read_url, search_web,
};
pub use workspace::{
    CommandSandbox, Confinement, Limits, Mode, Protection, SandboxError, Workspace,
};

/// Every built-in tool, bound to `workspace`.
pub fn builtin_tools(workspace: &Workspace) -> Vec<Tool> {
    vec![
        cap::capped(read_file(workspace)),
        cap::capped(write_file(workspace)),
        cap::capped(list_dir(workspace)),
        cap::capped(search_code(workspace)),
        cap::capped(run_command(workspace, CommandLimits::default())),
        cap::capped(read_url(workspace)),
        cap::capped(search_web(workspace)),
        complete_task(),
    ]
}

/// The built-in tool called `name`, if there is one.
pub fn builtin_tool(workspace: &Workspace, name: &str) -> Option<Tool> {
    builtin_tools(workspace)
        .into_iter()
        .find(|t| t.name == name)
}

/// Parses a tool's arguments, with an error the model can act on.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    arguments: Value,
) -> Result<T, ToolError> {
    serde_json::from_value(arguments)
        .map_err(|e| ToolError::new(format!("invalid arguments for {tool}: {e}")))
}
