//! Model routing (`agent-runtime-spec-2026.1.md` §5.7): `[runtime.routing]`.
//!
//! Before each model call (a *turn*: one model call and its tool round) a concrete model is
//! resolved from the task's **phase** (`work`, or `recovery` in the grace period), the
//! **policy** (`cost`, `latency` or `quality`) and the run's **remaining budget**; the decision
//! (`requested`, `resolved`, `reason`, `policy`) is logged as a `routing` event. When routing
//! fails (no rule gives a model, or the model it gives cannot be used) the configured safe
//! `default` is used and the event says so. When the resolved model is out (connection
//! refused, a 5xx or a timeout after the provider's own retries), the call goes to the model's
//! `fallbacks` (then the default), with a `routing` event saying so. A turn's model never
//! changes once the turn has an answer: a call of the same turn again (a retry, a resumed run
//! replaying it) keeps it.
//!
//! # Examples
//!
//! ```
//! use weft_runtime::profile::routing::{Remaining, RoutingConfig, RoutingPolicy};
//!
//! let routing: RoutingConfig = serde_json::from_value(serde_json::json!({
//!     "default": "openai:small",
//!     "policy": "quality",
//!     "models": {"quality": "openai:large", "cost": "openai:small"},
//!     "phases": {"recovery": {"policy": "cost"}},
//!     "budget": [{"remainingTokens": 1000, "model": "openai:small"}]
//! }))?;
//! assert!(routing.problems().is_empty());
//!
//! let plenty = Remaining { tokens: Some((5000, 10_000)), ..Remaining::default() };
//! let route = routing.route(Some("openai:mid"), "work", &plenty).expect("a rule");
//! assert_eq!((route.model.as_str(), route.policy), ("openai:large", RoutingPolicy::Quality));
//!
//! let low = Remaining { tokens: Some((900, 10_000)), ..Remaining::default() };
//! let route = routing.route(Some("openai:mid"), "work", &low).expect("a rule");
//! assert_eq!(route.model, "openai:small");
//! assert!(route.reason.starts_with("budget"), "{}", route.reason);
//!
//! let route = routing.route(None, "recovery", &plenty).expect("a rule");
//! assert_eq!((route.model.as_str(), route.policy), ("openai:small", RoutingPolicy::Cost));
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use weft_provider::tool::BoxFuture;
use weft_provider::{
    ErrorCode, LlmCapabilities, LlmModel, LlmRequest, LlmResponse, LlmStream, ProviderConfig,
    UppError,
};

use crate::event::{EventKind, Side};
use crate::ledger::RunContext;

/// The phase of a task outside its grace period.
pub const WORK_PHASE: &str = "work";
/// The phase of a task in its grace period (§5.2).
pub const RECOVERY_PHASE: &str = "recovery";

/// The spec's routing policies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutingPolicy {
    /// The cheapest model that will do.
    Cost,
    /// The fastest.
    Latency,
    /// The best (the default).
    #[default]
    Quality,
}

impl RoutingPolicy {
    /// The policy's name (`cost`, `latency`, `quality`).
    pub fn as_str(self) -> &'static str {
        match self {
            RoutingPolicy::Cost => "cost",
            RoutingPolicy::Latency => "latency",
            RoutingPolicy::Quality => "quality",
        }
    }
}

/// `[runtime.routing.models]`: the model of each policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyModels {
    /// The model of the `cost` policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
    /// The model of the `latency` policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<String>,
    /// The model of the `quality` policy (absent: the agent's own model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<String>,
}

impl PolicyModels {
    /// The model configured for `policy`.
    pub fn of(&self, policy: RoutingPolicy) -> Option<&str> {
        match policy {
            RoutingPolicy::Cost => self.cost.as_deref(),
            RoutingPolicy::Latency => self.latency.as_deref(),
            RoutingPolicy::Quality => self.quality.as_deref(),
        }
    }
}

/// `[runtime.routing.phases.NAME]`: a phase's policy or model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PhaseRule {
    /// The model of the phase (wins over its policy's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The policy of the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RoutingPolicy>,
}

/// `[[runtime.routing.budget]]`: when the run's remaining budget falls below a threshold,
/// use a model (or a policy). Exactly one threshold per rule; the first rule that matches
/// wins. A threshold on a limit the run does not have (`remainingCost` without `maxCost`)
/// does not match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetRule {
    /// Matches when fewer tokens than this are left of `maxTotalTokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_tokens: Option<u64>,
    /// Matches when less than this (dollars) is left of `maxCost`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_cost: Option<f64>,
    /// Matches when fewer model calls than this are left of `maxSteps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_steps: Option<u64>,
    /// Matches when less than this share (0 to 1) of any of the run's limits is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_share: Option<f64>,
    /// The model to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The policy to use (its model, when the rule names none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RoutingPolicy>,
}

/// `[runtime.routing]`: the project's (and an agent's) routing rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutingConfig {
    /// The safe default model (`PROVIDER:MODEL`): used when routing fails, and the last
    /// fallback of an outage. Required.
    #[serde(default)]
    pub default: String,
    /// The policy outside the phases and budget rules that set one (default `quality`).
    #[serde(default)]
    pub policy: RoutingPolicy,
    /// The model of each policy.
    #[serde(default)]
    pub models: PolicyModels,
    /// Per phase (`work`, `recovery`): a policy or a model.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phases: BTreeMap<String, PhaseRule>,
    /// Budget thresholds, first match wins (they win over phases).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budget: Vec<BudgetRule>,
    /// Per model, the models to try in order when it is out (then the default).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fallbacks: BTreeMap<String, Vec<String>>,
}

/// What is left of the run's budget: `(left, limit)` of each limit the run has.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Remaining {
    /// Tokens of `maxTotalTokens`.
    pub tokens: Option<(u64, u64)>,
    /// Dollars of `maxCost` (`None` also when the spend is unknown).
    pub cost: Option<(f64, f64)>,
    /// Model calls of `maxSteps`.
    pub steps: Option<(u64, u64)>,
}

impl Remaining {
    /// What is left of `run`'s budget now.
    pub fn of(run: &RunContext) -> Remaining {
        let budget = run.budget();
        let usage = run.spent_usage();
        let tokens = usage.input_tokens + usage.output_tokens;
        Remaining {
            tokens: budget
                .max_total_tokens
                .map(|max| (max.saturating_sub(tokens), max)),
            cost: budget
                .max_cost
                .and_then(|max| Some(((max - run.spent_cost()?).max(0.0), max))),
            steps: budget
                .max_steps
                .map(|max| (max.saturating_sub(run.spent_calls()), max)),
        }
    }

    /// The smallest share left of any limit (1 without limits).
    fn share(&self) -> Option<f64> {
        let shares = [
            self.tokens.map(|(l, m)| ratio(l as f64, m as f64)),
            self.cost.map(|(l, m)| ratio(l, m)),
            self.steps.map(|(l, m)| ratio(l as f64, m as f64)),
        ];
        shares.into_iter().flatten().reduce(f64::min)
    }
}

fn ratio(left: f64, max: f64) -> f64 {
    if max <= 0.0 { 0.0 } else { left / max }
}

/// A routing decision: the model, the policy it was chosen under, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// The model (`PROVIDER:MODEL`).
    pub model: String,
    /// The policy.
    pub policy: RoutingPolicy,
    /// Why, in a few words (`budget: …`, `phase recovery`, `policy cost`, `requested`).
    pub reason: String,
}

impl BudgetRule {
    /// Why this rule matches `remaining`, or `None`.
    fn matches(&self, remaining: &Remaining) -> Option<String> {
        if let (Some(below), Some((left, max))) = (self.remaining_tokens, remaining.tokens)
            && left < below
        {
            return Some(format!(
                "{left} tokens left of {max} (remainingTokens < {below})"
            ));
        }
        if let (Some(below), Some((left, max))) = (self.remaining_cost, remaining.cost)
            && left < below
        {
            return Some(format!(
                "${left:.4} left of ${max} (remainingCost < {below})"
            ));
        }
        if let (Some(below), Some((left, max))) = (self.remaining_steps, remaining.steps)
            && left < below
        {
            return Some(format!(
                "{left} model calls left of {max} (remainingSteps < {below})"
            ));
        }
        if let (Some(below), Some(share)) = (self.remaining_share, remaining.share())
            && share < below
        {
            return Some(format!(
                "{:.0}% of the budget left (remainingShare < {below})",
                share * 100.0
            ));
        }
        None
    }
}

impl RoutingConfig {
    /// What is wrong with these rules (keys under `runtime.routing.`); empty when fine.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut model = |key: String, reference: &str| {
            if let Some(problem) = reference_problem(reference) {
                problems.push((key, problem));
            }
        };
        if self.default.trim().is_empty() {
            model(
                "routing.default".into(),
                "", // reported below with a clearer message
            );
        } else {
            model("routing.default".into(), &self.default);
        }
        for (name, reference) in [
            ("cost", &self.models.cost),
            ("latency", &self.models.latency),
            ("quality", &self.models.quality),
        ] {
            if let Some(reference) = reference {
                model(format!("routing.models.{name}"), reference);
            }
        }
        for (phase, rule) in &self.phases {
            if let Some(reference) = &rule.model {
                model(format!("routing.phases.{phase}.model"), reference);
            }
        }
        for (i, rule) in self.budget.iter().enumerate() {
            if let Some(reference) = &rule.model {
                model(format!("routing.budget[{i}].model"), reference);
            }
        }
        for (from, to) in &self.fallbacks {
            model(format!("routing.fallbacks.{from:?}"), from);
            for reference in to {
                model(format!("routing.fallbacks.{from:?}"), reference);
            }
        }
        if self.default.trim().is_empty() {
            problems.retain(|(key, _)| key != "routing.default");
            problems.push((
                "routing.default".into(),
                "is required: the safe model used when routing fails (PROVIDER:MODEL)".into(),
            ));
        }
        for (phase, rule) in &self.phases {
            if phase.trim().is_empty() {
                problems.push(("routing.phases".into(), "a phase needs a name".into()));
            }
            if rule.model.is_none() && rule.policy.is_none() {
                problems.push((
                    format!("routing.phases.{phase}"),
                    "needs a model or a policy".into(),
                ));
            }
        }
        for (i, rule) in self.budget.iter().enumerate() {
            let key = format!("routing.budget[{i}]");
            let thresholds = [
                rule.remaining_tokens.is_some(),
                rule.remaining_cost.is_some(),
                rule.remaining_steps.is_some(),
                rule.remaining_share.is_some(),
            ];
            if thresholds.iter().filter(|t| **t).count() != 1 {
                problems.push((
                    key.clone(),
                    "needs exactly one of remainingTokens, remainingCost, remainingSteps, remainingShare"
                        .into(),
                ));
            }
            if rule.remaining_tokens == Some(0) || rule.remaining_steps == Some(0) {
                problems.push((key.clone(), "a threshold of 0 never matches".into()));
            }
            if let Some(cost) = rule.remaining_cost
                && !(cost.is_finite() && cost > 0.0)
            {
                problems.push((
                    format!("{key}.remainingCost"),
                    "must be a number above 0".into(),
                ));
            }
            if let Some(share) = rule.remaining_share
                && !(share.is_finite() && share > 0.0 && share <= 1.0)
            {
                problems.push((
                    format!("{key}.remainingShare"),
                    "must be above 0 and at most 1".into(),
                ));
            }
            if rule.model.is_none() && rule.policy.is_none() {
                problems.push((key, "needs a model or a policy".into()));
            }
        }
        for (from, to) in &self.fallbacks {
            if to.iter().any(|m| m == from) {
                problems.push((
                    format!("routing.fallbacks.{from:?}"),
                    "a model cannot be its own fallback".into(),
                ));
            }
        }
        problems
    }

    /// Every model reference of the rules rewritten by `f` (a project resolves relative
    /// script paths so).
    pub fn map_models(&mut self, f: impl Fn(&str) -> String) {
        self.default = f(&self.default);
        for model in [
            &mut self.models.cost,
            &mut self.models.latency,
            &mut self.models.quality,
        ]
        .into_iter()
        .flatten()
        {
            *model = f(model);
        }
        for rule in self.phases.values_mut() {
            if let Some(model) = &mut rule.model {
                *model = f(model);
            }
        }
        for rule in &mut self.budget {
            if let Some(model) = &mut rule.model {
                *model = f(model);
            }
        }
        self.fallbacks = std::mem::take(&mut self.fallbacks)
            .into_iter()
            .map(|(from, to)| (f(&from), to.iter().map(|m| f(m)).collect()))
            .collect();
    }

    /// Every model the rules name (the default first), each once.
    pub fn models(&self) -> Vec<String> {
        let mut all = vec![self.default.clone()];
        all.extend(
            [
                &self.models.cost,
                &self.models.latency,
                &self.models.quality,
            ]
            .into_iter()
            .flatten()
            .cloned(),
        );
        all.extend(self.phases.values().filter_map(|r| r.model.clone()));
        all.extend(self.budget.iter().filter_map(|r| r.model.clone()));
        for (from, to) in &self.fallbacks {
            all.push(from.clone());
            all.extend(to.iter().cloned());
        }
        let mut seen = std::collections::HashSet::new();
        all.retain(|m| seen.insert(m.clone()));
        all
    }

    /// The model of a call in `phase` with `remaining` budget, the agent's own model being
    /// `requested`: the first budget rule that matches, else the phase's model, else the
    /// model of the policy in force (the budget rule's, the phase's or the configured one),
    /// else `requested`.
    ///
    /// # Errors
    /// When no rule gives a model and nothing was requested (the caller uses the default).
    pub fn route(
        &self,
        requested: Option<&str>,
        phase: &str,
        remaining: &Remaining,
    ) -> Result<Route, String> {
        let phase_rule = self.phases.get(phase);
        if let Some((rule, why)) = self
            .budget
            .iter()
            .find_map(|r| r.matches(remaining).map(|why| (r, why)))
        {
            let policy = rule
                .policy
                .or(phase_rule.and_then(|p| p.policy))
                .unwrap_or(self.policy);
            let model = rule
                .model
                .as_deref()
                .or_else(|| self.models.of(policy))
                .or(requested);
            return match model {
                Some(model) => Ok(Route {
                    model: model.to_owned(),
                    policy,
                    reason: format!("budget: {why}"),
                }),
                None => Err(format!(
                    "no rule matches: the budget rule ({why}) gives no model for policy {}",
                    policy.as_str()
                )),
            };
        }
        if let Some(rule) = phase_rule {
            let policy = rule.policy.unwrap_or(self.policy);
            if let Some(model) = &rule.model {
                return Ok(Route {
                    model: model.clone(),
                    policy,
                    reason: format!("phase {phase}"),
                });
            }
            if let Some(model) = self.models.of(policy) {
                return Ok(Route {
                    model: model.to_owned(),
                    policy,
                    reason: format!("phase {phase}: policy {}", policy.as_str()),
                });
            }
        }
        let policy = phase_rule.and_then(|r| r.policy).unwrap_or(self.policy);
        if let Some(model) = self.models.of(policy) {
            return Ok(Route {
                model: model.to_owned(),
                policy,
                reason: format!("policy {}", policy.as_str()),
            });
        }
        match requested {
            Some(model) => Ok(Route {
                model: model.to_owned(),
                policy,
                reason: "requested".into(),
            }),
            None => Err(format!(
                "no rule matches: no model for policy {} in phase {phase}, and the agent names none",
                policy.as_str()
            )),
        }
    }
}

/// Why `reference` is not a model reference (`PROVIDER:MODEL`), if it is not.
fn reference_problem(reference: &str) -> Option<String> {
    match reference.split_once(':') {
        Some((provider, model)) if !provider.trim().is_empty() && !model.trim().is_empty() => None,
        _ => Some(format!(
            "{reference:?} is not a model reference: write PROVIDER:MODEL"
        )),
    }
}

/// Whether `error` says the model is out (after the provider's own retries): the server
/// cannot be reached, fails (5xx) or does not answer in time.
pub fn is_outage(error: &UppError) -> bool {
    matches!(
        error.code,
        ErrorCode::NetworkError | ErrorCode::ProviderError | ErrorCode::Timeout
    )
}

/// A model the router may call: bound, with the provider configuration its calls carry.
#[derive(Clone)]
pub struct Candidate {
    /// The bound model (recorded in a durable run).
    pub model: Arc<dyn LlmModel>,
    /// Its provider's configuration (key, endpoint, headers).
    pub config: Arc<ProviderConfig>,
}

impl std::fmt::Debug for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Candidate")
            .field("model", &self.model.model_id())
            .finish_non_exhaustive()
    }
}

/// The model of a task under `[runtime.routing]`: each call (a turn) is routed, logged and,
/// when its model is out, sent to the fallbacks.
pub struct RoutedModel {
    config: RoutingConfig,
    /// The agent's own model (`None`: it names none).
    requested: Option<String>,
    /// Every model of the rules and the requested one: bound, or why it cannot be.
    candidates: HashMap<String, Result<Candidate, String>>,
    /// The default's candidate (checked at start: it must be usable).
    default: Candidate,
    /// The task's phase now.
    phase: Arc<dyn Fn() -> String + Send + Sync>,
    run: Option<Arc<RunContext>>,
    side: Option<Side>,
    /// The model of the current turn, by the turn's position (its message count): pinned
    /// when the turn has an answer.
    turn: Mutex<Option<(usize, String, bool)>>,
}

impl std::fmt::Debug for RoutedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutedModel")
            .field("default", &self.config.default)
            .field("requested", &self.requested)
            .finish_non_exhaustive()
    }
}

impl RoutedModel {
    /// The router of one task. `candidates` holds every model of `config` (and
    /// `requested`): bound, or why it cannot be; `phase` says the task's phase at each call.
    ///
    /// # Errors
    /// When the default model cannot be used (nothing would be safe to fall back on).
    pub fn new(
        config: RoutingConfig,
        requested: Option<String>,
        candidates: HashMap<String, Result<Candidate, String>>,
        phase: Arc<dyn Fn() -> String + Send + Sync>,
        run: Option<Arc<RunContext>>,
        side: Option<Side>,
    ) -> Result<RoutedModel, String> {
        let default = match candidates.get(&config.default) {
            Some(Ok(candidate)) => candidate.clone(),
            Some(Err(why)) => {
                return Err(format!(
                    "runtime.routing.default {:?} cannot be used: {why}",
                    config.default
                ));
            }
            None => {
                return Err(format!(
                    "runtime.routing.default {:?} was not bound",
                    config.default
                ));
            }
        };
        Ok(RoutedModel {
            config,
            requested,
            candidates,
            default,
            phase,
            run,
            side,
            turn: Mutex::new(None),
        })
    }

    /// The route of a call of `position` (its message count): the turn's pinned model when
    /// the turn has one (and whether the turn had an answer already), else a new decision,
    /// logged.
    async fn resolve(&self, position: usize) -> (String, Candidate, bool) {
        let pinned = self
            .turn
            .lock()
            .ok()
            .and_then(|t| t.clone())
            .filter(|(at, _, _)| *at == position);
        if let Some((_, model, answered)) = pinned
            && let Some(Ok(candidate)) = self.candidates.get(&model)
        {
            // The same turn again (a retry, a continuation): its model stays.
            return (model, candidate.clone(), answered);
        }
        let remaining = self.run.as_deref().map(Remaining::of).unwrap_or_default();
        let phase = (self.phase)();
        let requested = self.requested.as_deref();
        let (model, candidate, policy, reason) = match self
            .config
            .route(requested, &phase, &remaining)
        {
            Ok(route) => match self.candidates.get(&route.model) {
                Some(Ok(candidate)) => (route.model, candidate.clone(), route.policy, route.reason),
                Some(Err(why)) => self.safe(
                    route.policy,
                    format!("routing failed: {} ({why})", route.model),
                ),
                None => self.safe(
                    route.policy,
                    format!("routing failed: unknown model {}", route.model),
                ),
            },
            Err(why) => self.safe(self.config.policy, format!("routing failed: {why}")),
        };
        if let Ok(mut turn) = self.turn.lock() {
            *turn = Some((position, model.clone(), false));
        }
        self.log(
            requested.unwrap_or(&self.config.default),
            &model,
            reason,
            policy,
        )
        .await;
        (model, candidate, false)
    }

    fn safe(
        &self,
        policy: RoutingPolicy,
        why: String,
    ) -> (String, Candidate, RoutingPolicy, String) {
        (
            self.config.default.clone(),
            self.default.clone(),
            policy,
            format!("{why}; the safe default is used"),
        )
    }

    async fn log(&self, requested: &str, resolved: &str, reason: String, policy: RoutingPolicy) {
        if let Some(run) = &self.run {
            run.emit(EventKind::Routing {
                requested: requested.to_owned(),
                resolved: resolved.to_owned(),
                reason,
                policy: policy.as_str().to_owned(),
                side: self.side,
            })
            .await;
        }
    }

    /// The models to try, in order, when `model` is out: its fallbacks, then the default.
    fn fallbacks(&self, model: &str) -> Vec<String> {
        let mut next: Vec<String> = self
            .config
            .fallbacks
            .get(model)
            .cloned()
            .unwrap_or_default();
        next.push(self.config.default.clone());
        next.retain(|m| m != model);
        let mut seen = std::collections::HashSet::new();
        next.retain(|m| seen.insert(m.clone()));
        next
    }

    /// Marks the turn at `position` answered by `model` (its model is pinned from now on).
    fn answered(&self, position: usize, model: &str) {
        if let Ok(mut turn) = self.turn.lock() {
            if let Some((at, pinned, true)) = turn.as_ref() {
                // RT-043: a turn's model never changes once it answered.
                debug_assert!(
                    *at != position || pinned == model,
                    "the model changed within a turn: {pinned} then {model}"
                );
            }
            *turn = Some((position, model.to_owned(), true));
        }
    }

    /// Runs `call` on the turn's model, then on its fallbacks while the model is out.
    async fn call<'a, T, F>(&'a self, request: LlmRequest, call: F) -> Result<T, UppError>
    where
        F: Fn(Arc<dyn LlmModel>, LlmRequest) -> BoxFuture<'a, Result<T, UppError>>,
    {
        let position = request.messages.len();
        let (mut model, mut candidate, answered) = self.resolve(position).await;
        // A turn that had an answer keeps its model even when it is out (RT-043): the
        // error is the turn's.
        let mut fallbacks = if answered {
            Vec::new().into_iter()
        } else {
            self.fallbacks(&model).into_iter()
        };
        loop {
            let mut attempt = request.clone();
            attempt.config = candidate.config.clone();
            match call(candidate.model.clone(), attempt).await {
                Ok(answer) => {
                    self.answered(position, &model);
                    return Ok(answer);
                }
                Err(error) if is_outage(&error) => {
                    let Some((next, next_candidate)) = fallbacks.by_ref().find_map(|m| match self
                        .candidates
                        .get(&m)
                    {
                        Some(Ok(c)) => Some((m, c.clone())),
                        _ => None,
                    }) else {
                        return Err(error);
                    };
                    let policy = self.config.policy;
                    self.log(
                        &model,
                        &next,
                        format!(
                            "outage of {model} ({}: {}); fallback to {next}",
                            error.code.as_str(),
                            error.message
                        ),
                        policy,
                    )
                    .await;
                    if let Ok(mut turn) = self.turn.lock() {
                        *turn = Some((position, next.clone(), false));
                    }
                    model = next;
                    candidate = next_candidate;
                }
                Err(error) => return Err(error),
            }
        }
    }
}

impl LlmModel for RoutedModel {
    fn model_id(&self) -> &str {
        self.default.model.model_id()
    }

    fn provider(&self) -> &str {
        self.default.model.provider()
    }

    fn capabilities(&self) -> LlmCapabilities {
        self.default.model.capabilities()
    }

    fn complete(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmResponse, UppError>> {
        Box::pin(self.call(request, |model, request| {
            Box::pin(async move { model.complete(request).await })
        }))
    }

    fn stream(&self, request: LlmRequest) -> BoxFuture<'_, Result<LlmStream, UppError>> {
        Box::pin(self.call(request, |model, request| {
            Box::pin(async move { model.stream(request).await })
        }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn config(value: serde_json::Value) -> RoutingConfig {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn rules_are_checked() {
        let c = config(json!({}));
        assert_eq!(c.problems()[0].0, "routing.default");
        let c = config(json!({"default": "nocolon"}));
        assert!(c.problems()[0].1.contains("PROVIDER:MODEL"));
        let c = config(json!({"default": "a:b", "budget": [{"model": "a:c"}]}));
        assert!(
            c.problems()[0].1.contains("exactly one"),
            "{:?}",
            c.problems()
        );
        let c =
            config(json!({"default": "a:b", "budget": [{"remainingShare": 2.0, "model": "a:c"}]}));
        assert_eq!(c.problems()[0].0, "routing.budget[0].remainingShare");
        let c = config(json!({"default": "a:b", "phases": {"work": {}}}));
        assert_eq!(c.problems()[0].0, "routing.phases.work");
        let c = config(json!({"default": "a:b", "fallbacks": {"a:c": ["a:c"]}}));
        assert!(c.problems()[0].1.contains("own fallback"));
        assert!(
            serde_json::from_value::<RoutingConfig>(json!({"default": "a:b", "policy": "fast"}))
                .is_err()
        );
    }

    #[test]
    fn budget_rules_win_then_phases_then_policy_then_requested() {
        let c = config(json!({
            "default": "p:safe",
            "policy": "quality",
            "models": {"cost": "p:cheap"},
            "phases": {"recovery": {"policy": "cost"}, "plan": {"model": "p:planner"}},
            "budget": [{"remainingSteps": 2, "policy": "cost"}]
        }));
        let plenty = Remaining {
            steps: Some((5, 10)),
            ..Remaining::default()
        };
        let r = c.route(Some("p:own"), "work", &plenty).unwrap();
        assert_eq!(
            (r.model.as_str(), r.reason.as_str()),
            ("p:own", "requested")
        );
        let r = c.route(Some("p:own"), "plan", &plenty).unwrap();
        assert_eq!(r.model, "p:planner");
        let r = c.route(Some("p:own"), "recovery", &plenty).unwrap();
        assert_eq!(
            (r.model.as_str(), r.policy),
            ("p:cheap", RoutingPolicy::Cost)
        );
        let low = Remaining {
            steps: Some((1, 10)),
            ..Remaining::default()
        };
        let r = c.route(Some("p:own"), "plan", &low).unwrap();
        assert_eq!(r.model, "p:cheap");
        assert!(r.reason.contains("remainingSteps < 2"), "{}", r.reason);
        // Nothing requested, no model for the policy: no rule matches.
        assert!(
            c.route(None, "work", &plenty)
                .unwrap_err()
                .contains("no rule")
        );
        // A threshold on a limit the run does not have does not match.
        let c = config(
            json!({"default": "p:safe", "budget": [{"remainingCost": 1.0, "model": "p:cheap"}]}),
        );
        assert_eq!(
            c.route(Some("p:own"), "work", &plenty).unwrap().model,
            "p:own"
        );
    }

    /// A model that answers from a list (an `Err` is an outage), counting its calls.
    #[derive(Debug)]
    struct Fake {
        id: &'static str,
        answers: Mutex<std::collections::VecDeque<bool>>,
        calls: std::sync::atomic::AtomicUsize,
    }

    impl Fake {
        fn new(id: &'static str, answers: &[bool]) -> Arc<Fake> {
            Arc::new(Fake {
                id,
                answers: Mutex::new(answers.iter().copied().collect()),
                calls: Default::default(),
            })
        }
        fn calls(&self) -> usize {
            self.calls.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl LlmModel for Fake {
        fn model_id(&self) -> &str {
            self.id
        }
        fn provider(&self) -> &str {
            "fake"
        }
        fn capabilities(&self) -> LlmCapabilities {
            LlmCapabilities::default()
        }
        fn complete(&self, _request: LlmRequest) -> BoxFuture<'_, Result<LlmResponse, UppError>> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let ok = self.answers.lock().unwrap().pop_front().unwrap_or(false);
            Box::pin(async move {
                if ok {
                    Ok(LlmResponse {
                        message: weft_provider::AssistantMessage::text(self.id),
                        usage: Default::default(),
                        stop_reason: "end_turn".into(),
                        data: None,
                    })
                } else {
                    Err(UppError::llm(ErrorCode::ProviderError, "fake", "down"))
                }
            })
        }
        fn stream(&self, _request: LlmRequest) -> BoxFuture<'_, Result<LlmStream, UppError>> {
            Box::pin(async {
                Err(UppError::llm(
                    ErrorCode::InvalidRequest,
                    "fake",
                    "no stream",
                ))
            })
        }
    }

    fn request(messages: usize) -> LlmRequest {
        LlmRequest {
            messages: Arc::new(
                (0..messages)
                    .map(|_| Arc::new(weft_provider::Message::user("hi")))
                    .collect(),
            ),
            system: None,
            params: None,
            tools: Arc::new([]),
            tool_choice: Default::default(),
            structure: None,
            signal: Default::default(),
            config: Default::default(),
        }
    }

    fn router(big: &Arc<Fake>, small: &Arc<Fake>) -> RoutedModel {
        let candidate = |m: &Arc<Fake>| {
            Ok(Candidate {
                model: m.clone() as Arc<dyn LlmModel>,
                config: Default::default(),
            })
        };
        let candidates = HashMap::from([
            ("p:big".to_owned(), candidate(big)),
            ("p:small".to_owned(), candidate(small)),
        ]);
        RoutedModel::new(
            config(json!({"default": "p:small"})),
            Some("p:big".into()),
            candidates,
            Arc::new(|| WORK_PHASE.to_owned()),
            None,
            None,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn a_turn_keeps_its_model_once_it_answered() {
        // An outage before the turn's answer falls back to the default...
        let (big, small) = (
            Fake::new("big", &[false]),
            Fake::new("small", &[true, true]),
        );
        let routed = router(&big, &small);
        let answer = routed.complete(request(1)).await.unwrap();
        assert!(format!("{:?}", answer.message.content).contains("\"small\""));
        // ... and the turn's model is now the fallback: the same turn asked again stays on it
        // (the requested model is not asked again).
        routed.complete(request(1)).await.unwrap();
        assert_eq!((big.calls(), small.calls()), (1, 2));
        // A turn that answered keeps its model when it is out: the error is the turn's, no
        // fallback within a turn (RT-043).
        let (big, small) = (
            Fake::new("big", &[true, false]),
            Fake::new("small", &[true]),
        );
        let routed = router(&big, &small);
        routed.complete(request(3)).await.unwrap();
        let error = routed.complete(request(3)).await.unwrap_err();
        assert_eq!(error.code, ErrorCode::ProviderError);
        assert_eq!((big.calls(), small.calls()), (2, 0));
        // The next turn is routed afresh: the requested model, out, then its fallback.
        routed.complete(request(5)).await.unwrap();
        assert_eq!((big.calls(), small.calls()), (3, 1));
    }

    #[test]
    fn shares_take_the_tightest_limit() {
        let r = Remaining {
            tokens: Some((900, 1000)),
            steps: Some((1, 10)),
            cost: None,
        };
        assert!((r.share().unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(Remaining::default().share(), None);
    }
}
