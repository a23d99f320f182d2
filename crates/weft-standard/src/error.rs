//! Errors: [`ProjectError`] (a project that does not load, with every [`Problem`]) and
//! [`SessionError`] (a session that could not run).

use std::fmt;
use std::path::PathBuf;

/// One thing wrong with a project: the file, the key path inside it, and a plain sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file, relative to the project folder (`agents/coder.toml`).
    pub file: PathBuf,
    /// The key path inside the file (`sideA.stopTool`); empty for the whole file.
    pub key: String,
    /// What is wrong, as a sentence.
    pub message: String,
}

impl Problem {
    /// A problem at `key` of `file`.
    pub fn new(
        file: impl Into<PathBuf>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            file: file.into(),
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.key, self.message)
        }
    }
}

/// Why a project did not load. Nothing runs on a project with problems.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProjectError {
    /// The project folder cannot be read.
    #[error("cannot read the project folder {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The workspace folder of a run cannot be resolved.
    #[error("cannot resolve the workspace folder {path}: {source}")]
    Workspace {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The definitions have problems (at least one).
    #[error("{}", render(.0))]
    Invalid(Vec<Problem>),
}

fn render(problems: &[Problem]) -> String {
    let mut text = format!(
        "the project has {} problem{}:",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for problem in problems {
        text.push_str("\n  ");
        text.push_str(&problem.to_string());
    }
    text
}

impl ProjectError {
    /// The problems (empty for an I/O error).
    pub fn problems(&self) -> &[Problem] {
        match self {
            ProjectError::Invalid(problems) => problems,
            ProjectError::Io { .. } | ProjectError::Workspace { .. } => &[],
        }
    }
}

/// Why a session could not run (a session that ran and failed is a
/// [`crate::SessionStatus::Failed`] outcome, not an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The agent does not exist in the project.
    #[error("the project has no agent {0:?}")]
    UnknownAgent(String),
    /// A model reference cannot be resolved.
    #[error("model {reference:?}: {message}")]
    Model {
        /// The reference.
        reference: String,
        /// Why.
        message: String,
    },
    /// The workspace of the built-in tools cannot be opened.
    #[error("workspace: {0}")]
    Workspace(String),
    /// The agent could not be built.
    #[error("agent: {0}")]
    Agent(String),
    /// The input is missing (an `ai_human` session needs the human's message).
    #[error("the session needs an input message")]
    NoInput,
}
