//! Chat Completions `finish_reason` → UPP stop reason.

/// Maps `stop`, `tool_calls`/`function_call`, `length`, `content_filter`; other values pass.
pub(crate) fn map(finish_reason: &str) -> &str {
    match finish_reason {
        "stop" => "end_turn",
        "tool_calls" | "function_call" => "tool_use",
        "length" => "max_tokens",
        "content_filter" => "content_filter",
        other => other,
    }
}
