//! `PlanStep`: one step of a `plan()` strategy's plan (UAP-1.0 §5.4).

use serde::{Deserialize, Serialize};

/// The status of a plan step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStepStatus {
    /// Not started.
    #[default]
    Pending,
    /// Running now.
    InProgress,
    /// Done.
    Completed,
    /// Failed.
    Failed,
}

/// One step of a plan.
///
/// # Examples
///
/// ```
/// use weft_agent::{PlanStep, PlanStepStatus};
///
/// let step = PlanStep::new("s2", "Write the file").tool("write_file").depends_on(["s1"]);
/// assert_eq!(step.status, PlanStepStatus::Pending);
/// assert_eq!(serde_json::to_value(&step)?["dependsOn"][0], "s1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    /// Step identifier, unique within the plan.
    pub id: String,
    /// What this step does.
    pub description: String,
    /// The tool to use, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Ids of the steps that must complete first.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Where the step is.
    #[serde(default)]
    pub status: PlanStepStatus,
}

impl PlanStep {
    /// A pending step without tool or dependencies.
    pub fn new(id: impl Into<String>, description: impl Into<String>) -> Self {
        PlanStep {
            id: id.into(),
            description: description.into(),
            tool: None,
            depends_on: Vec::new(),
            status: PlanStepStatus::Pending,
        }
    }

    /// Sets the tool.
    #[must_use]
    pub fn tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// Sets the dependencies.
    #[must_use]
    pub fn depends_on(mut self, ids: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.depends_on = ids.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the status.
    #[must_use]
    pub fn with_status(mut self, status: PlanStepStatus) -> Self {
        self.status = status;
        self
    }
}

/// Checks a plan: unique ids, known dependencies, no cycle. Returns the indices in
/// topological order (ties keep plan order).
///
/// # Errors
/// A message naming the first problem found.
pub(crate) fn topological_order(plan: &[PlanStep]) -> Result<Vec<usize>, String> {
    let mut index = std::collections::HashMap::with_capacity(plan.len());
    for (i, step) in plan.iter().enumerate() {
        if step.id.is_empty() {
            return Err(format!("plan step {i} has an empty id"));
        }
        if index.insert(step.id.as_str(), i).is_some() {
            return Err(format!("plan step id {:?} is used twice", step.id));
        }
    }
    let mut indegree = vec![0usize; plan.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); plan.len()];
    for (i, step) in plan.iter().enumerate() {
        for dep in &step.depends_on {
            let Some(&j) = index.get(dep.as_str()) else {
                return Err(format!(
                    "plan step {:?} depends on unknown step {dep:?}",
                    step.id
                ));
            };
            if j == i {
                return Err(format!("plan step {:?} depends on itself", step.id));
            }
            indegree[i] += 1;
            dependents[j].push(i);
        }
    }
    let mut order = Vec::with_capacity(plan.len());
    let mut ready: std::collections::BTreeSet<usize> =
        (0..plan.len()).filter(|&i| indegree[i] == 0).collect();
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &d in &dependents[i] {
            indegree[d] -= 1;
            if indegree[d] == 0 {
                ready.insert(d);
            }
        }
    }
    if order.len() != plan.len() {
        let stuck: Vec<&str> = (0..plan.len())
            .filter(|i| !order.contains(i))
            .map(|i| plan[i].id.as_str())
            .collect();
        return Err(format!(
            "the dependencies of plan steps {} form a cycle",
            stuck.join(", ")
        ));
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_dependencies_and_keeps_plan_order_for_ties() {
        let plan = vec![
            PlanStep::new("c", "c").depends_on(["a", "b"]),
            PlanStep::new("a", "a"),
            PlanStep::new("b", "b").depends_on(["a"]),
            PlanStep::new("d", "d"),
        ];
        assert_eq!(topological_order(&plan), Ok(vec![1, 2, 0, 3]));
    }

    #[test]
    fn rejects_cycles_unknown_and_duplicate_ids() {
        let cycle = vec![
            PlanStep::new("a", "a").depends_on(["b"]),
            PlanStep::new("b", "b").depends_on(["a"]),
        ];
        assert!(topological_order(&cycle).is_err_and(|e| e.contains("cycle")));
        let unknown = vec![PlanStep::new("a", "a").depends_on(["zz"])];
        assert!(topological_order(&unknown).is_err_and(|e| e.contains("unknown")));
        let dup = vec![PlanStep::new("a", "a"), PlanStep::new("a", "b")];
        assert!(topological_order(&dup).is_err_and(|e| e.contains("twice")));
    }
}
