//! Anthropic `stop_reason` → UPP stop reason.

/// Maps `end_turn`, `tool_use`, `max_tokens`, `stop_sequence`, and `refusal` (→
/// `content_filter`); other values (`pause_turn`, `model_context_window_exceeded`, …) pass
/// through unchanged.
pub(crate) fn map(stop_reason: &str) -> &str {
    match stop_reason {
        "end_turn" => "end_turn",
        "tool_use" => "tool_use",
        "max_tokens" => "max_tokens",
        "stop_sequence" => "stop_sequence",
        "refusal" => "content_filter",
        other => other,
    }
}
