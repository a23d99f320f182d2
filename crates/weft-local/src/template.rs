//! The chat template: system prompt, tools and history rendered in Gemma's turn format.
//!
//! Gemma 3 270M is a **base** model: it was not instruction-tuned on a chat format. The
//! template below is the convention of the instruction-tuned Gemma models, which the base
//! model has seen enough of to follow loosely:
//!
//! ```text
//! <bos><start_of_turn>user
//! {system prompt}\n\n{tool and output instructions}\n\n{first user message}<end_of_turn>
//! <start_of_turn>model
//! {assistant reply, tool calls as JSON lines}<end_of_turn>
//! <start_of_turn>user
//! Tool result (get_weather, call c1): {"temp": 21}<end_of_turn>
//! <start_of_turn>model
//! ```
//!
//! Gemma has no system role, so the system prompt and the instructions go at the top of the
//! first user turn (as Gemma's own template does). Tool results have no role either: they are a
//! user turn. Consecutive user-side messages share one turn. Only text is rendered (and
//! plain-text documents); the provider declares no media capabilities, so the `llm()` core
//! rejects other content before it gets here.
//!
//! Control tokens are [`Segment::Control`]s and are added by id, never by tokenizing text, so
//! text that spells `<end_of_turn>` stays text.

use std::borrow::Borrow;

use serde_json::Value;
use weft_provider::{ContentBlock, DocumentSource, Message};

use crate::calls::{CallFormat, render_call};

/// The beginning-of-sequence control token.
pub const BOS: &str = "<bos>";
/// Opens a turn.
pub const START_OF_TURN: &str = "<start_of_turn>";
/// Closes a turn; the model emits it to finish its reply.
pub const END_OF_TURN: &str = "<end_of_turn>";

/// A piece of the rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A control token, added by id.
    Control(&'static str),
    /// Text, tokenized normally.
    Text(String),
}

/// A tool as the template shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name.
    pub name: String,
    /// The description.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub parameters: Value,
}

/// What the reply must look like, which the instructions describe.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputMode {
    /// Free text.
    Text,
    /// Text or tool calls.
    Tools {
        /// The tools.
        tools: Vec<ToolSpec>,
        /// Whether several calls may be made in one reply.
        parallel: bool,
        /// Whether the reply must be tool calls.
        required: bool,
        /// A structured-output schema for the final answer, if any.
        structure: Option<Value>,
    },
    /// One JSON value matching the schema.
    Structured(Value),
}

/// The instructions put after the system prompt for `mode` (empty for text).
pub fn instructions(mode: &OutputMode) -> String {
    match mode {
        OutputMode::Text => String::new(),
        OutputMode::Structured(schema) => {
            format!("Answer with only a JSON value that matches this JSON schema:\n{schema}")
        }
        OutputMode::Tools {
            tools,
            parallel,
            required,
            structure,
        } => {
            let mut text = String::from("You can call these tools:\n");
            for tool in tools {
                let line = serde_json::json!({
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                });
                text.push_str(&line.to_string());
                text.push('\n');
            }
            text.push_str(&format!(
                "To call a tool, answer with only a JSON object: {}",
                CallFormat::EXAMPLE
            ));
            if *parallel {
                text.push_str("\nTo call several tools at once, write one such object per line.");
            }
            match structure {
                _ if *required => text.push_str("\nAnswer with tool calls only."),
                Some(schema) => text.push_str(&format!(
                    "\nOtherwise answer with only a JSON value that matches this JSON schema:\n{schema}"
                )),
                None => text.push_str("\nIf no tool is needed, answer in plain text."),
            }
            text
        }
    }
}

/// Renders the prompt: `<bos>`, the turns, and the opening of the model's turn. `messages`
/// are owned or shared (`Arc<Message>`, as a request holds them).
pub fn render<M: Borrow<Message>>(
    system: Option<&str>,
    messages: &[M],
    mode: &OutputMode,
) -> Vec<Segment> {
    let mut preamble = String::new();
    if let Some(system) = system.filter(|s| !s.trim().is_empty()) {
        preamble.push_str(system.trim_end());
    }
    let instructions = instructions(mode);
    if !instructions.is_empty() {
        if !preamble.is_empty() {
            preamble.push_str("\n\n");
        }
        preamble.push_str(&instructions);
    }
    let mut turns: Vec<(Role, String)> = Vec::new();
    let mut push = |role: Role, text: String| match turns.last_mut() {
        Some((last, body)) if *last == role && role == Role::User => {
            if !body.is_empty() && !text.is_empty() {
                body.push_str("\n\n");
            }
            body.push_str(&text);
        }
        _ => turns.push((role, text)),
    };
    for (index, message) in messages.iter().enumerate() {
        match message.borrow() {
            Message::User(user) => push(Role::User, user_text(&user.content)),
            Message::Assistant(assistant) => {
                let mut body = text_of(&assistant.content);
                for call in &assistant.tool_calls {
                    if !body.is_empty() {
                        body.push('\n');
                    }
                    body.push_str(&render_call(&call.tool_name, &call.arguments));
                }
                push(Role::Model, body);
            }
            Message::ToolResult(results) => {
                let mut body = String::new();
                for result in &results.results {
                    let name = tool_name_for(&messages[..index], &result.tool_call_id);
                    let value = match &result.result {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    if !body.is_empty() {
                        body.push('\n');
                    }
                    let error = if result.is_error { " error" } else { "" };
                    body.push_str(&format!(
                        "Tool{error} result ({name}, call {}): {value}",
                        result.tool_call_id
                    ));
                }
                push(Role::User, body);
            }
        }
    }
    // The preamble goes into the first user turn (one is made when the history starts with
    // the model).
    if !preamble.is_empty() {
        match turns.first_mut() {
            Some((Role::User, body)) => {
                let joined = if body.is_empty() {
                    preamble
                } else {
                    format!("{preamble}\n\n{body}")
                };
                *body = joined;
            }
            _ => turns.insert(0, (Role::User, preamble)),
        }
    }
    let mut segments = vec![Segment::Control(BOS)];
    for (role, body) in turns {
        segments.push(Segment::Control(START_OF_TURN));
        segments.push(Segment::Text(format!("{}\n{body}", role.name())));
        segments.push(Segment::Control(END_OF_TURN));
        segments.push(Segment::Text("\n".to_owned()));
    }
    segments.push(Segment::Control(START_OF_TURN));
    segments.push(Segment::Text("model\n".to_owned()));
    segments
}

/// The rendered prompt as one string (control tokens spelled out), for tests and debugging.
pub fn to_display_string(segments: &[Segment]) -> String {
    segments
        .iter()
        .map(|s| match s {
            Segment::Control(c) => *c,
            Segment::Text(t) => t.as_str(),
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Model,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Model => "model",
        }
    }
}

fn text_of(blocks: &[ContentBlock]) -> String {
    let texts: Vec<&str> = blocks.iter().filter_map(ContentBlock::as_text).collect();
    texts.join("\n\n")
}

fn user_text(blocks: &[ContentBlock]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::Document(document) => {
                if let DocumentSource::Text { data } = &document.source {
                    let title = document.title.as_deref().unwrap_or("document");
                    parts.push(format!("[{title}]\n{data}"));
                }
            }
            _ => {}
        }
    }
    parts.join("\n\n")
}

fn tool_name_for<M: Borrow<Message>>(earlier: &[M], call_id: &str) -> String {
    earlier
        .iter()
        .rev()
        .filter_map(|m| match m.borrow() {
            Message::Assistant(a) => a.tool_calls.iter().find(|c| c.tool_call_id == call_id),
            _ => None,
        })
        .map(|c| c.tool_name.clone())
        .next()
        .unwrap_or_else(|| "tool".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_provider::{
        AssistantMessage, MessageOptions, ToolCall, ToolResult, ToolResultMessage,
    };

    #[test]
    fn a_single_user_message_becomes_one_turn_and_the_model_prompt() {
        let rendered = render(None, &[Message::user("Hi")], &OutputMode::Text);
        assert_eq!(
            to_display_string(&rendered),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
        );
        assert_eq!(rendered[0], Segment::Control(BOS));
    }

    #[test]
    fn the_system_prompt_opens_the_first_user_turn() {
        let messages = [
            Message::user("Hi"),
            Message::assistant("Hello!"),
            Message::user("Bye"),
        ];
        let rendered = to_display_string(&render(Some("Be brief."), &messages, &OutputMode::Text));
        assert_eq!(
            rendered,
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n\
             <start_of_turn>model\nHello!<end_of_turn>\n\
             <start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn tools_calls_and_results_are_rendered() {
        let call = ToolCall::new("c1", "get_weather", json!({"city": "Paris"}));
        let assistant = AssistantMessage::new(vec![], vec![call], MessageOptions::default())
            .unwrap_or_else(|_| AssistantMessage::text(""));
        let messages = [
            Message::user("Weather in Paris?"),
            Message::Assistant(assistant),
            Message::ToolResult(ToolResultMessage::new(vec![ToolResult {
                tool_call_id: "c1".into(),
                result: json!({"temp": 21}),
                is_error: false,
            }])),
        ];
        let mode = OutputMode::Tools {
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: "Weather for a city.".into(),
                parameters: json!({"type": "object"}),
            }],
            parallel: false,
            required: false,
            structure: None,
        };
        let rendered = to_display_string(&render(None, &messages, &mode));
        assert!(rendered.starts_with(
            "<bos><start_of_turn>user\nYou can call these tools:\n{\"name\":\"get_weather\""
        ));
        assert!(rendered.contains(
            "If no tool is needed, answer in plain text.\n\nWeather in Paris?<end_of_turn>"
        ));
        assert!(rendered.contains(
            "<start_of_turn>model\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}<end_of_turn>"
        ));
        assert!(rendered.ends_with(
            "<start_of_turn>user\nTool result (get_weather, call c1): {\"temp\":21}<end_of_turn>\n<start_of_turn>model\n"
        ));
        assert!(!rendered.contains("several tools"));
    }

    #[test]
    fn structured_output_instructions_include_the_schema() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let rendered = to_display_string(&render(
            None,
            &[Message::user("x")],
            &OutputMode::Structured(schema),
        ));
        assert!(
            rendered.contains("JSON schema:\n{\"type\":\"object\""),
            "{rendered}"
        );
    }

    #[test]
    fn a_history_starting_with_the_model_gets_a_user_turn_for_the_preamble() {
        let rendered = to_display_string(&render(
            Some("S"),
            &[Message::assistant("A")],
            &OutputMode::Text,
        ));
        assert!(
            rendered
                .starts_with("<bos><start_of_turn>user\nS<end_of_turn>\n<start_of_turn>model\nA")
        );
    }
}
