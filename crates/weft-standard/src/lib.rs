//! Standard Agents for Weft: declarative agent projects and the sessions that run them.
//!
//! * [`Project::load`] reads a project folder (`weft.toml`, `agents/`, `prompts/`, `tools/`,
//!   in TOML or JSON with the spec's keys) and validates it: every problem comes back with
//!   its file, key path and a sentence, and nothing runs on an invalid project.
//! * [`run_session`] runs an agent: `ai_human` or `dual_ai`, with the stop evaluation order
//!   of agents §5, sequential tool calls, `sessionStatus` events, handoff to `ai_human`
//!   agents exposed as tools, and `dual_ai` agents exposed as tools run as blocking subagents
//!   (child runs, see [`subagent`]), and prompts exposed as tools run as nested invocations
//!   on the same child runs (see [`prompt_tool`]). With [`Durable`] it checkpoints into weft-store and routes
//!   tools through its durable wrapper.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("weft.toml"), "name = \"demo\"\nmodel = \"scripted:script.json\"\n")?;
//! std::fs::create_dir(dir.path().join("agents"))?;
//! std::fs::create_dir(dir.path().join("prompts"))?;
//! std::fs::write(dir.path().join("agents/helper.toml"), "name = \"helper\"\n[sideA]\nprompt = \"helper\"\n")?;
//! std::fs::write(dir.path().join("prompts/helper.toml"), "name = \"helper\"\nsystem = \"You help.\"\n")?;
//! let project = weft_standard::Project::load(dir.path())?;
//! assert_eq!(project.default_agent().map(|a| a.name.as_str()), Some("helper"));
//! # Ok(())
//! # }
//! ```
//!
//! # Code map
//!
//! | module | what |
//! |---|---|
//! | `definition` | `AgentDefinition`, `SideConfig`, `SessionToolBinding`, prompts, tools, `weft.toml` |
//! | `project` | loading a folder, validation, variable substitution |
//! | `variables` | variable declarations, resolution for a thread, required / secret / scoped |
//! | `tools` | built-in, project and handoff tools of a prompt |
//! | `side` | one side's turn and the §5 stop evaluation |
//! | `session` | `ai_human` / `dual_ai` sessions, handoff, events |
//! | `subagent` | `dual_ai` agents called as tools: child runs, the canonical result text |
//! | `prompt_tool` | prompts with `exposeAsTool` called as tools: nested invocations on child runs |
//! | `vision` | image parts left out of the requests of a model without image input (SA-090) |
//! | `filesystem` | a child thread's own folder (its workspace) and confinement |
//! | `attachments` | files copied between a parent's and a child's filesystems |
//! | `delegation` | `delegate_to_agent` (runtime spec §5.4): a role's child on the same child runs |
//! | `runtime_profile` | the Agent Runtime Spec's profile for an agent: its settings, tools and stages |
//! | `launch` | `Launch`: the recorded spec of a session run (`weft run`, `weft serve`) |
//! | `preflight` | what is checked before a run is recorded: models, keys, endpoints |
//! | `error` | `ProjectError`, `Problem`, `SessionError` |

pub mod attachments;
mod background;
pub mod definition;
mod delegation;
pub mod effect_tools;
mod error;
pub mod filesystem;
mod gates;
pub mod knowledge;
mod launch;
pub mod lifecycle;
pub mod preflight;
pub mod project;
pub mod prompt_tool;
mod runner;
pub mod runtime_profile;
mod session;
mod side;
pub mod sop;
pub mod subagent;
pub mod tools;
pub mod variables;
pub mod vision;

pub use background::{Background, Escalation, NOTIFY_PARENT, SET_STATUS};
pub use definition::{
    AgentDefinition, AgentType, Immediate, LifecyclePayload, MappedBinding, ParentCommunication,
    ProjectConfig, PromptDefinition, PromptTool, ProviderSettings, Resumable, ResumableConfig,
    SessionToolBinding, Side, SideConfig, SubagentToolConfig, SubpromptConfig, ToolDefinition,
    VariableDefinition,
};
pub use error::{Problem, ProjectError, SessionError};
pub use launch::Launch;
pub use project::{BUILTIN_TOOLS, ModelSite, Project, snapshot_of, valid_tool_name};
pub use runner::{StandardSessions, changed_since_start};
pub use session::{
    Durable, MAX_HANDOFFS, SESSION_MARK_KEY, SessionOptions, SessionOutcome, SessionStatus,
    StopReason, run_session,
};
pub use side::DEFAULT_MAX_STEPS;
