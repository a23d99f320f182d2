//! `plan()`: plan with structured output, then execute the steps in dependency order
//! (UAP-1.0 §5.4).
//!
//! 1. **Plan** (one step): the model gets the task and a planning prompt, with no tools and
//!    the plan schema as structured output; the reply's `steps` become `state.plan`.
//! 2. **Execute**: steps run in topological order of `dependsOn` (ties in plan order), one
//!    agent step each, with the agent's tools and the tool loop until the model stops asking
//!    for tools. A step's status goes `pending` → `in_progress` → `completed` | `failed`, each
//!    change recorded with `with_plan`.
//! 3. **Replan**: a step *fails* when a model call of it fails, or when tools ran in it and
//!    none of the executions of the step's named tool (or, without a named tool, none at all)
//!    succeeded. With `allow_replan` (the default) the model then makes a new plan for the
//!    remaining work; without it the run ends with [`AgentError::PlanStepFailed`].
//!
//! `stop_condition` is evaluated after every step and, because one plan step may take many
//! tool rounds, after every tool round inside a plan step.

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_provider::InferenceInput;

use super::step::{Steps, tools_ran};
use super::{ExecutionContext, ExecutionStrategy};
use crate::agent::ExecutionResult;
use crate::error::AgentError;
use crate::state::{PlanStep, PlanStepStatus, topological_order, value_text};

/// Options of `plan()`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// Most steps kept from a plan; `None` (the default) is unbounded.
    pub max_plan_steps: Option<usize>,
    /// Make a new plan when a step fails (default true).
    pub allow_replan: bool,
    /// Most re-plans in one run; `None` (the default) is unbounded.
    pub max_replans: Option<u32>,
    /// The structured-output schema of a plan (root `type: "object"` with a `steps` array).
    pub plan_schema: Value,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            max_plan_steps: None,
            allow_replan: true,
            max_replans: None,
            plan_schema: default_plan_schema(),
        }
    }
}

/// The default plan schema: `{"steps": [{id, description, tool?, dependsOn}]}`.
pub fn default_plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "Unique step id"},
                        "description": {"type": "string", "description": "What this step does"},
                        "tool": {"type": "string", "description": "Tool to use, if any"},
                        "dependsOn": {"type": "array", "items": {"type": "string"},
                                      "description": "Ids of steps that must complete first"}
                    },
                    "required": ["id", "description"]
                }
            }
        },
        "required": ["steps"]
    })
}

/// The `plan()` strategy.
#[derive(Debug, Clone, Default)]
pub struct PlanStrategy {
    options: PlanOptions,
}

/// `plan(options)` (UAP-1.0 §5.4).
///
/// # Examples
///
/// ```
/// use weft_agent::execution::{plan, PlanOptions};
///
/// let strategy = plan(PlanOptions::default());
/// assert!(strategy.options().allow_replan);
/// assert_eq!(strategy.options().max_plan_steps, None);
/// ```
pub fn plan(options: PlanOptions) -> PlanStrategy {
    PlanStrategy { options }
}

impl PlanStrategy {
    /// The options.
    pub fn options(&self) -> &PlanOptions {
        &self.options
    }

    fn planning_prompt(&self, ctx: &ExecutionContext) -> String {
        let tools: Vec<&str> = ctx.tools().iter().map(|t| t.name.as_str()).collect();
        let mut prompt = String::from(
            "Create a step-by-step plan for the task above. Reply with JSON: \
             {\"steps\": [{\"id\": string, \"description\": string, \"tool\": string (optional), \
             \"dependsOn\": [step ids]}]}.",
        );
        if !tools.is_empty() {
            prompt.push_str(&format!(" Available tools: {}.", tools.join(", ")));
        }
        if let Some(max) = self.options.max_plan_steps {
            prompt.push_str(&format!(" Use at most {max} steps."));
        }
        prompt
    }

    async fn make_plan(
        &self,
        run: &mut Steps<'_>,
        planner: &weft_provider::LlmInstance,
        prompt: String,
    ) -> Result<Vec<PlanStep>, AgentError> {
        let step = run.begin_step().await;
        let turn = run
            .call(planner, vec![InferenceInput::Text(prompt)])
            .await?;
        let data = turn.data.clone().unwrap_or(Value::Null);
        let plan = parse_plan(&data, self.options.max_plan_steps)?;
        run.state = run.state.with_plan(plan.clone());
        run.end_step(step).await;
        Ok(plan)
    }

    /// Runs one plan step; `Ok(Err(reason))` when it failed.
    async fn run_plan_step(
        &self,
        run: &mut Steps<'_>,
        step: u64,
        plan_step: &PlanStep,
    ) -> Result<Result<(), String>, AgentError> {
        let ctx = run.ctx;
        let mut prompt = format!(
            "Execute plan step {}: {}",
            plan_step.id, plan_step.description
        );
        if let Some(tool) = &plan_step.tool {
            prompt.push_str(&format!(" (use the tool {tool})"));
        }
        let mut extra = vec![InferenceInput::Text(prompt)];
        let mut executions = Vec::new();
        loop {
            let turn = match run.call(&ctx.llm, std::mem::take(&mut extra)).await {
                Ok(turn) => turn,
                Err(error @ AgentError::Cancelled { .. }) => return Err(error),
                Err(error) => return Ok(Err(error.to_string())),
            };
            run.act_and_observe(step, &turn);
            executions.extend(turn.tool_executions.iter().cloned());
            // A plan step may take many tool rounds: the stop condition is checked after each.
            if !tools_ran(&turn) || ctx.strategy.should_stop(&run.state).await {
                break;
            }
        }
        let relevant: Vec<_> = executions
            .iter()
            .filter(|e| plan_step.tool.as_ref().is_none_or(|t| *t == e.tool_name))
            .collect();
        if !relevant.is_empty() && relevant.iter().all(|e| e.is_error) {
            let last = relevant
                .last()
                .map(|e| value_text(&e.result))
                .unwrap_or_default();
            return Ok(Err(format!(
                "tool {} failed: {last}",
                relevant[0].tool_name
            )));
        }
        Ok(Ok(()))
    }
}

/// Reads a plan from structured output: `{"steps": [...]}` or a bare array.
fn parse_plan(data: &Value, max_steps: Option<usize>) -> Result<Vec<PlanStep>, AgentError> {
    let items = match data {
        Value::Object(object) => object.get("steps").and_then(Value::as_array),
        Value::Array(items) => Some(items),
        _ => None,
    }
    .ok_or_else(|| AgentError::InvalidPlan("the model's plan has no `steps` array".into()))?;
    let id_text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let mut plan = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let id = item
            .get("id")
            .and_then(id_text)
            .ok_or_else(|| AgentError::InvalidPlan(format!("plan step {i} has no id")))?;
        let description = item
            .get("description")
            .and_then(Value::as_str)
            .ok_or_else(|| AgentError::InvalidPlan(format!("plan step {id:?} has no description")))?
            .to_owned();
        let tool = item.get("tool").and_then(Value::as_str).map(str::to_owned);
        let depends_on = item
            .get("dependsOn")
            .and_then(Value::as_array)
            .map(|deps| deps.iter().filter_map(id_text).collect())
            .unwrap_or_default();
        plan.push(PlanStep {
            id,
            description,
            tool,
            depends_on,
            status: PlanStepStatus::Pending,
        });
    }
    if let Some(max) = max_steps
        && plan.len() > max
    {
        plan.truncate(max);
        let kept: Vec<String> = plan.iter().map(|s| s.id.clone()).collect();
        for step in &mut plan {
            step.depends_on.retain(|d| kept.contains(d));
        }
    }
    topological_order(&plan).map_err(AgentError::InvalidPlan)?;
    Ok(plan)
}

#[async_trait]
impl ExecutionStrategy for PlanStrategy {
    fn name(&self) -> &str {
        "plan"
    }

    async fn execute(&self, ctx: ExecutionContext) -> Result<ExecutionResult, AgentError> {
        let mut planner_options = ctx.agent.llm_options().clone();
        planner_options.tools.clear();
        planner_options.structure = Some(self.options.plan_schema.clone());
        let planner = ctx.llm_with(planner_options)?;
        let mut run = Steps::new(&ctx);
        let mut plan = self
            .make_plan(&mut run, &planner, self.planning_prompt(&ctx))
            .await?;
        let mut replans = 0u32;
        'plans: loop {
            if ctx.strategy.should_stop(&run.state).await {
                break;
            }
            let order = topological_order(&plan).map_err(AgentError::InvalidPlan)?;
            for index in order {
                if plan[index].status == PlanStepStatus::Completed {
                    continue;
                }
                plan[index].status = PlanStepStatus::InProgress;
                run.state = run.state.with_plan(plan.clone());
                let step = run.begin_step().await;
                let current = plan[index].clone();
                let outcome = self.run_plan_step(&mut run, step, &current).await?;
                plan[index].status = match outcome {
                    Ok(()) => PlanStepStatus::Completed,
                    Err(_) => PlanStepStatus::Failed,
                };
                run.state = run.state.with_plan(plan.clone());
                run.end_step(step).await;
                if let Err(reason) = outcome {
                    let may_replan = self.options.allow_replan
                        && self.options.max_replans.is_none_or(|max| replans < max);
                    if !may_replan {
                        return Err(AgentError::PlanStepFailed {
                            step_id: current.id,
                            reason,
                            state: Box::new(run.committed.clone()),
                        });
                    }
                    replans += 1;
                    let done: Vec<&str> = plan
                        .iter()
                        .filter(|s| s.status == PlanStepStatus::Completed)
                        .map(|s| s.id.as_str())
                        .collect();
                    let prompt = format!(
                        "Plan step {} ({}) failed: {reason}. Completed steps: [{}]. Create a new \
                         plan for the remaining work, in the same JSON format.",
                        current.id,
                        current.description,
                        done.join(", ")
                    );
                    plan = self.make_plan(&mut run, &planner, prompt).await?;
                    continue 'plans;
                }
                if ctx.strategy.should_stop(&run.state).await {
                    break 'plans;
                }
            }
            break;
        }
        run.finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_numbers_truncates_and_rejects_bad_plans() {
        let plan = parse_plan(
            &json!({"steps": [
                {"id": 1, "description": "a"},
                {"id": "2", "description": "b", "dependsOn": [1], "tool": "t"},
                {"id": "3", "description": "c", "dependsOn": ["2"]}
            ]}),
            Some(2),
        )
        .unwrap();
        assert_eq!(plan.len(), 2);
        assert_eq!(plan[1].depends_on, vec!["1"]);
        assert!(parse_plan(&json!({"nope": 1}), None).is_err());
        assert!(parse_plan(&json!([{"id": "a"}]), None).is_err());
    }
}
