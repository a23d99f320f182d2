//! The spec's state machine (§6) as a type: [`RunState`], the [`Trigger`]s, and
//! [`StateMachine::fire`], which allows exactly these transitions and refuses any other:
//!
//! ```text
//! IDLE        --user_input-->        THINKING
//! THINKING    --llm_response-->      TOOL_WAIT     (the response asks for tools)
//! THINKING    --llm_response-->      OBSERVATION   (the response asks for none)
//! TOOL_WAIT   --tool_results-->      OBSERVATION
//! TOOL_WAIT   --awaiting_decision--> IDLE          (a call waits for a person)
//! OBSERVATION --more_work-->         THINKING
//! OBSERVATION --complete_task-->     DONE
//! OBSERVATION --limit_reached-->     RECOVERY
//! RECOVERY    --complete_task-->     DONE
//! RECOVERY    --failed-->            ERROR
//! OBSERVATION --stopped-->           ERROR         (§5.1(4): stopped without complete_task)
//! THINKING, TOOL_WAIT, OBSERVATION --failed--> ERROR   (the model or the runtime failed)
//! ```
//!
//! The diagram of §6 draws the first ten; §5.1(4) adds the eleventh ("an agent that stops
//! without calling `complete_task` is in ERROR state"), and a run whose model or runtime
//! fails must end somewhere: ERROR, by the diagram's `failed` trigger. DONE and ERROR are
//! terminal. The model calls of the grace period happen in RECOVERY (the diagram leaves
//! RECOVERY only for DONE or ERROR).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A state of one agent task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RunState {
    /// Waiting for input (a new task, or a person's decision).
    Idle,
    /// The model is asked.
    Thinking,
    /// Tool calls run (one, or several in `batch` mode).
    ToolWait,
    /// The step's results are in; what comes next is decided.
    Observation,
    /// The grace period after the Final Warning: only `complete_task` may be called.
    Recovery,
    /// The task ended with `complete_task` (terminal).
    Done,
    /// The task failed (terminal).
    Error,
}

impl RunState {
    /// The name events use (`TOOL_WAIT`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Idle => "IDLE",
            RunState::Thinking => "THINKING",
            RunState::ToolWait => "TOOL_WAIT",
            RunState::Observation => "OBSERVATION",
            RunState::Recovery => "RECOVERY",
            RunState::Done => "DONE",
            RunState::Error => "ERROR",
        }
    }

    /// Whether no transition leaves this state.
    pub fn is_terminal(self) -> bool {
        matches!(self, RunState::Done | RunState::Error)
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What moves the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// Input arrived (the task, or a decision a run waited for).
    UserInput,
    /// The model answered.
    LlmResponse,
    /// The step's tool calls ended.
    ToolResults,
    /// A call waits for a person's decision.
    AwaitingDecision,
    /// The task goes on.
    MoreWork,
    /// `complete_task` was called alone and accepted.
    CompleteTask,
    /// The turn limit's grace period begins.
    LimitReached,
    /// The agent stopped without `complete_task`.
    Stopped,
    /// Recovery, the model or the runtime failed.
    Failed,
}

impl Trigger {
    /// The name events use (`llm_response`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::UserInput => "user_input",
            Trigger::LlmResponse => "llm_response",
            Trigger::ToolResults => "tool_results",
            Trigger::AwaitingDecision => "awaiting_decision",
            Trigger::MoreWork => "more_work",
            Trigger::CompleteTask => "complete_task",
            Trigger::LimitReached => "limit_reached",
            Trigger::Stopped => "stopped",
            Trigger::Failed => "failed",
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A transition the machine does not have (a bug of the runtime: the run stops).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "impossible state transition: {from} --{trigger}--> (the state machine of runtime spec §6 has no such edge)"
)]
pub struct IllegalTransition {
    /// The state it was in.
    pub from: RunState,
    /// The trigger it got.
    pub trigger: Trigger,
}

/// The state `trigger` leads to from `from`, when the machine has that edge (`llm_response`
/// has two, chosen by the response: see [`StateMachine::respond`]).
///
/// # Examples
///
/// ```
/// use weft_runtime::profile::state::{RunState, Trigger, next};
///
/// assert_eq!(next(RunState::Idle, Trigger::UserInput), Some(RunState::Thinking));
/// assert_eq!(next(RunState::Recovery, Trigger::MoreWork), None);
/// assert_eq!(next(RunState::Done, Trigger::UserInput), None);
/// ```
pub fn next(from: RunState, trigger: Trigger) -> Option<RunState> {
    use RunState as S;
    use Trigger as T;
    Some(match (from, trigger) {
        (S::Idle, T::UserInput) => S::Thinking,
        (S::ToolWait, T::ToolResults) => S::Observation,
        (S::ToolWait, T::AwaitingDecision) => S::Idle,
        (S::Observation, T::MoreWork) => S::Thinking,
        (S::Observation | S::Recovery, T::CompleteTask) => S::Done,
        (S::Observation, T::LimitReached) => S::Recovery,
        (S::Observation, T::Stopped) => S::Error,
        (S::Thinking | S::ToolWait | S::Observation | S::Recovery, T::Failed) => S::Error,
        _ => return None,
    })
}

/// One transition taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The state left.
    pub from: RunState,
    /// The state entered.
    pub to: RunState,
    /// Why.
    pub trigger: Trigger,
}

/// The machine of one agent task: its state, moved only along the spec's edges.
///
/// # Examples
///
/// ```
/// use weft_runtime::profile::state::{RunState, StateMachine, Trigger};
///
/// let mut machine = StateMachine::new();
/// machine.fire(Trigger::UserInput)?;
/// machine.respond(true)?; // the model asked for tools
/// machine.fire(Trigger::ToolResults)?;
/// let done = machine.fire(Trigger::CompleteTask)?;
/// assert_eq!((done.from, done.to), (RunState::Observation, RunState::Done));
/// assert!(machine.fire(Trigger::MoreWork).is_err()); // DONE is terminal
/// # Ok::<(), weft_runtime::profile::state::IllegalTransition>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateMachine {
    state: RunState,
}

impl Default for StateMachine {
    fn default() -> Self {
        StateMachine::new()
    }
}

impl StateMachine {
    /// A machine in IDLE.
    pub fn new() -> Self {
        StateMachine {
            state: RunState::Idle,
        }
    }

    /// The current state.
    pub fn state(&self) -> RunState {
        self.state
    }

    /// Takes the edge `trigger` names from the current state.
    ///
    /// # Errors
    /// [`IllegalTransition`] when the state has no such edge (the state is unchanged).
    pub fn fire(&mut self, trigger: Trigger) -> Result<Transition, IllegalTransition> {
        let from = self.state;
        let to = next(from, trigger).ok_or(IllegalTransition { from, trigger })?;
        self.state = to;
        Ok(Transition { from, to, trigger })
    }

    /// THINKING --llm_response--> TOOL_WAIT when the response asks for tools, else
    /// OBSERVATION.
    ///
    /// # Errors
    /// [`IllegalTransition`] outside THINKING.
    pub fn respond(&mut self, with_tools: bool) -> Result<Transition, IllegalTransition> {
        let from = self.state;
        if from != RunState::Thinking {
            return Err(IllegalTransition {
                from,
                trigger: Trigger::LlmResponse,
            });
        }
        let to = if with_tools {
            RunState::ToolWait
        } else {
            RunState::Observation
        };
        self.state = to;
        Ok(Transition {
            from,
            to,
            trigger: Trigger::LlmResponse,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const STATES: [RunState; 7] = [
        RunState::Idle,
        RunState::Thinking,
        RunState::ToolWait,
        RunState::Observation,
        RunState::Recovery,
        RunState::Done,
        RunState::Error,
    ];
    const TRIGGERS: [Trigger; 9] = [
        Trigger::UserInput,
        Trigger::LlmResponse,
        Trigger::ToolResults,
        Trigger::AwaitingDecision,
        Trigger::MoreWork,
        Trigger::CompleteTask,
        Trigger::LimitReached,
        Trigger::Stopped,
        Trigger::Failed,
    ];

    #[test]
    fn exactly_the_specs_edges_exist() {
        let mut edges = Vec::new();
        for from in STATES {
            for trigger in TRIGGERS {
                let mut m = StateMachine { state: from };
                let t = if trigger == Trigger::LlmResponse {
                    [m.clone().respond(true), m.respond(false)]
                        .into_iter()
                        .filter_map(Result::ok)
                        .collect()
                } else {
                    m.fire(trigger).into_iter().collect::<Vec<_>>()
                };
                edges.extend(
                    t.into_iter()
                        .map(|t| (t.from.as_str(), t.trigger.as_str(), t.to.as_str())),
                );
            }
        }
        edges.sort_unstable();
        let mut expected = vec![
            ("IDLE", "user_input", "THINKING"),
            ("THINKING", "llm_response", "TOOL_WAIT"),
            ("THINKING", "llm_response", "OBSERVATION"),
            ("TOOL_WAIT", "tool_results", "OBSERVATION"),
            ("TOOL_WAIT", "awaiting_decision", "IDLE"),
            ("OBSERVATION", "more_work", "THINKING"),
            ("OBSERVATION", "complete_task", "DONE"),
            ("OBSERVATION", "limit_reached", "RECOVERY"),
            ("RECOVERY", "complete_task", "DONE"),
            ("RECOVERY", "failed", "ERROR"),
            ("OBSERVATION", "stopped", "ERROR"),
            ("THINKING", "failed", "ERROR"),
            ("TOOL_WAIT", "failed", "ERROR"),
            ("OBSERVATION", "failed", "ERROR"),
        ];
        expected.sort_unstable();
        assert_eq!(edges, expected);
    }

    #[test]
    fn terminal_states_have_no_way_out_and_refusals_change_nothing() {
        for from in [RunState::Done, RunState::Error] {
            assert!(from.is_terminal());
            for trigger in TRIGGERS {
                let mut m = StateMachine { state: from };
                let err = m.fire(trigger).unwrap_err();
                assert_eq!(err, IllegalTransition { from, trigger });
                assert_eq!(m.state(), from);
            }
        }
        let mut m = StateMachine::new();
        assert!(m.fire(Trigger::ToolResults).is_err());
        assert_eq!(m.state(), RunState::Idle);
        assert!(m.respond(true).is_err());
    }
}
