//! The external shapes of a [`RunEvent`]: each is a mapping of it, never a second source.
//!
//! * the runtime spec's `RuntimeEvent` is its JSON form (`serde_json::to_value`);
//! * UAP-1.0's `AgentStreamEvent` ([`RunEvent::to_agent_stream_event`]): steps, actions,
//!   observations and the provider's text and reasoning deltas; a sub-agent's events are
//!   wrapped in `subagent_event`;
//! * ThreadProtocol system messages ([`EventKind::to_system_message`]): a handoff is an
//!   `agent.handoff` message, as a thread export records it.
//!
//! * the Vercel AI SDK's UI message stream: [`UiStreamEncoder`](super::UiStreamEncoder),
//!   incrementally (`weft events RUN --ui-stream`).

use serde_json::{Value, json};
use weft_agent::{AgentStreamEvent, UapEvent, UapEventType};
use weft_provider::{StreamEvent, StreamEventType};
use weft_thread::SystemMessage;

use super::{EventKind, RunEvent};

impl RunEvent {
    /// This event as UAP-1.0 streams it (`None`: an event UAP has no type for, such as a
    /// checkpoint or a routing decision).
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_runtime::event::{AgentPath, EventKind, RunEvent};
    /// let event = RunEvent {
    ///     seq: 3, timestamp: "2026-11-24T10:00:00.000Z".into(), run_id: "R".into(),
    ///     agent: AgentPath::root("main"), turn: 2, tool_call_id: None,
    ///     kind: EventKind::TurnStart { messages: 3, side: None },
    /// };
    /// let uap = serde_json::to_value(event.to_agent_stream_event().unwrap()).unwrap();
    /// assert_eq!((uap["uap"]["type"].as_str(), uap["uap"]["step"].as_u64()), (Some("step_start"), Some(2)));
    /// ```
    pub fn to_agent_stream_event(&self) -> Option<AgentStreamEvent> {
        let agent = self.agent.agent_id().to_owned();
        let uap = |event_type, data| {
            AgentStreamEvent::Uap(UapEvent {
                event_type,
                step: self.turn,
                agent_id: agent.clone(),
                data,
            })
        };
        let call_id = self.tool_call_id.clone().unwrap_or_default();
        let event = match &self.kind {
            EventKind::TurnStart { messages, .. } => {
                uap(UapEventType::StepStart, json!({"messages": messages}))
            }
            EventKind::TurnEnd {
                input_tokens,
                output_tokens,
                ..
            } => uap(
                UapEventType::StepEnd,
                json!({"usage": {"inputTokens": input_tokens, "outputTokens": output_tokens}}),
            ),
            EventKind::ToolCallStart {
                tool, arguments, ..
            } => uap(
                UapEventType::Action,
                json!({"toolCalls": [{"toolCallId": call_id, "toolName": tool, "arguments": arguments}]}),
            ),
            EventKind::ToolCallEnd {
                tool,
                is_error,
                result,
                result_ref,
                ..
            } => uap(
                UapEventType::Observation,
                json!({"toolResults": [{"toolCallId": call_id, "toolName": tool,
                    "result": result.clone().or_else(|| result_ref.clone()).unwrap_or(Value::Null),
                    "isError": is_error}]}),
            ),
            EventKind::TextDelta { text, .. } | EventKind::ReasoningDelta { text, .. } => {
                let kind = if matches!(self.kind, EventKind::TextDelta { .. }) {
                    StreamEventType::TextDelta
                } else {
                    StreamEventType::ReasoningDelta
                };
                let mut event = StreamEvent::new(kind, 0);
                event.delta.text = Some(text.clone());
                AgentStreamEvent::Upp(event)
            }
            _ => return None,
        };
        if self.agent.depth() == 0 {
            return Some(event);
        }
        // A sub-agent's event, as its parent streams it.
        let inner = serde_json::to_value(&event).ok()?;
        Some(uap(
            UapEventType::SubagentEvent,
            json!({"agentPath": self.agent.as_str(), "innerEvent": inner}),
        ))
    }
}

impl EventKind {
    /// This event as a ThreadProtocol system message at `timestamp` (`None`: the thread
    /// record has no message for it).
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_runtime::event::EventKind;
    /// let handoff = EventKind::Handoff { from: "triage".into(), to: "billing".into(), message: "over to you".into(), turn: 1 };
    /// let message = handoff.to_system_message("2026-11-24T10:00:00.000Z").unwrap();
    /// assert_eq!((message.event_type.as_str(), message.target_agents), ("agent.handoff", Some(vec!["billing".to_owned()])));
    /// ```
    pub fn to_system_message(&self, timestamp: &str) -> Option<SystemMessage> {
        match self {
            EventKind::Handoff {
                from,
                to,
                message,
                turn,
            } => Some(SystemMessage {
                timestamp: timestamp.to_owned(),
                event_type: crate::transcript::HANDOFF_EVENT.to_owned(),
                event_data: json!({"from": from, "to": to, "message": message, "turn": turn}),
                source_agent: Some(from.clone()),
                target_agents: Some(vec![to.clone()]),
                extra: weft_thread::JsonMap::default(),
            }),
            _ => None,
        }
    }
}
