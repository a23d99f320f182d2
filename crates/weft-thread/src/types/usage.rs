//! Token usage and finish reasons.

use serde::{Deserialize, Serialize};

use crate::types::JsonMap;

/// Token counts of one response or of a whole turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input (prompt) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Reasoning tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_tokens: Option<u64>,
    /// Total tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

impl Usage {
    /// Adds the four counters of `other` to `self`; a counter is present in the result when it is
    /// present in either side. `extra` members are not aggregated.
    pub fn accumulate(&mut self, other: &Usage) {
        fn add(into: &mut Option<u64>, from: Option<u64>) {
            if let Some(from) = from {
                *into = Some(into.unwrap_or(0).saturating_add(from));
            }
        }
        add(&mut self.input_tokens, other.input_tokens);
        add(&mut self.output_tokens, other.output_tokens);
        add(&mut self.thinking_tokens, other.thinking_tokens);
        add(&mut self.total_tokens, other.total_tokens);
    }
}

/// Why a response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model stopped on its own.
    Stop,
    /// The token limit was reached.
    Length,
    /// A content filter stopped the response.
    ContentFilter,
    /// The model called a tool.
    ToolCall,
    /// An error ended the response.
    Error,
}

impl FinishReason {
    /// Every finish reason, in spec order.
    pub const ALL: [FinishReason; 5] = [
        Self::Stop,
        Self::Length,
        Self::ContentFilter,
        Self::ToolCall,
        Self::Error,
    ];

    /// The wire string, e.g. `"tool_call"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
            Self::ToolCall => "tool_call",
            Self::Error => "error",
        }
    }

    /// Parses the wire string.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|reason| reason.as_str() == value)
    }
}
