//! [`Launch`]: the recorded [`RunSpec`] of a session run of a project's agent — what
//! `weft run` and `weft serve` start, built in one place so both record the same thing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use weft_provider::pricing::PriceTable;
use weft_runtime::budget::{Budget, DEFAULT_SESSION_MAX_STEPS};
use weft_runtime::spec::{Program, RunSpec, SessionProgram};
use weft_store::Durability;

use crate::{AgentDefinition, Project, ProjectError};

/// How to start a session run of a project's agent; [`Launch::spec`] makes its [`RunSpec`].
///
/// Every field is what a caller chose for the run (a command's flags, a request's
/// settings); what the caller leaves unset the project decides when the run starts.
///
/// # Examples
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # std::fs::write(dir.path().join("weft.toml"), "name = \"demo\"\nmodel = \"scripted:s.json\"\n[budget]\nmaxSteps = 7\n")?;
/// # std::fs::create_dir(dir.path().join("agents"))?;
/// # std::fs::create_dir(dir.path().join("prompts"))?;
/// # std::fs::write(dir.path().join("agents/helper.toml"), "name = \"helper\"\n[sideA]\nprompt = \"helper\"\n")?;
/// # std::fs::write(dir.path().join("prompts/helper.toml"), "name = \"helper\"\nsystem = \"You help.\"\n")?;
/// let project = weft_standard::Project::load(dir.path())?;
/// let agent = project.default_agent().expect("one agent");
/// let spec = weft_standard::Launch::default().spec(&project, agent, "Hello".into())?;
/// assert_eq!(spec.input, "Hello");
/// assert_eq!(spec.budget.max_steps, Some(7)); // the project's [budget]
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// The folder the agent's tools work in (default: the project folder).
    pub workspace: Option<PathBuf>,
    /// A model for every prompt of the run (`--model`).
    pub model: Option<String>,
    /// `workspace`, `strict` or `none` (default: the project's `sandbox` key).
    pub sandbox: Option<String>,
    /// Each provider's endpoint, as [`preflight::check`](crate::preflight::check) settled it.
    pub base_urls: BTreeMap<String, String>,
    /// When the run's records are committed (default: queued).
    pub durability: Durability,
    /// Prices recorded with the run (a resume keeps charging at them).
    pub pricing: Option<PriceTable>,
    /// Limits of the run; what is unset comes from the project's `[budget]`, then the
    /// sessions' default step limit.
    pub budget: Budget,
    /// `--profile` (`runtime`: the Agent Runtime Spec's profile even without a `[runtime]`
    /// table).
    pub profile: Option<String>,
}

impl Launch {
    /// The spec of a run of `agent` on `input`, with a snapshot of the project's definitions.
    ///
    /// # Errors
    /// [`ProjectError::Io`] when the project folder cannot be resolved or its definitions
    /// read; [`ProjectError::Workspace`] when the workspace folder cannot be resolved.
    pub fn spec(
        &self,
        project: &Project,
        agent: &AgentDefinition,
        input: String,
    ) -> Result<RunSpec, ProjectError> {
        let project_dir =
            std::fs::canonicalize(project.dir()).map_err(|source| ProjectError::Io {
                path: project.dir().to_owned(),
                source,
            })?;
        let workspace = match &self.workspace {
            Some(path) => {
                std::fs::canonicalize(path).map_err(|source| ProjectError::Workspace {
                    path: path.clone(),
                    source,
                })?
            }
            None => project_dir.clone(),
        };
        let program = SessionProgram {
            project: Some(project.snapshot()?),
            project_dir: (project_dir != workspace).then_some(project_dir),
            workspace,
            agent: agent.name.clone(),
            model_override: self.model.clone(),
            sandbox: self.sandbox.clone(),
            base_urls: self.base_urls.clone(),
            profile: self.profile.clone(),
        };
        let mut spec = RunSpec::new(input, Program::Session(program));
        spec.durability = self.durability;
        spec.pricing = self.pricing.clone();
        spec.budget = self
            .budget
            .or(project.config().budget.unwrap_or_default())
            .or(Budget {
                max_steps: Some(DEFAULT_SESSION_MAX_STEPS),
                ..Budget::default()
            });
        Ok(spec)
    }
}
