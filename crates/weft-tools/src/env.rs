//! [`ToolEnv`]: the variables a session gives its tools through their context.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Variables a session hands its tools in `ToolContext::extensions` (Standard Agents
/// `variables` declared by the agent, its prompts and tools, resolved for the thread).
/// `run_command` passes them to the command's environment; any tool reads them with
/// `ctx.extensions.get::<ToolEnv>()`. `Debug` shows the names only.
///
/// # Examples
///
/// ```
/// let env = weft_tools::ToolEnv::new([("REGION".to_owned(), "eu-west-1".to_owned())]);
/// assert_eq!(env.get("REGION"), Some("eu-west-1"));
/// assert_eq!(format!("{env:?}"), "ToolEnv([\"REGION\"])");
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ToolEnv(Arc<BTreeMap<String, String>>);

impl ToolEnv {
    /// The variables `values`.
    pub fn new(values: impl IntoIterator<Item = (String, String)>) -> Self {
        ToolEnv(Arc::new(values.into_iter().collect()))
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Every variable, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for ToolEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ToolEnv")
            .field(&self.0.keys().collect::<Vec<_>>())
            .finish()
    }
}
