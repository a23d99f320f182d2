//! Responses API `status` / `incomplete_details.reason` → UPP stop reason.

/// `completed` → `tool_use` when the output has function calls, else `end_turn`;
/// `incomplete` with `max_output_tokens` → `max_tokens`, with `content_filter` →
/// `content_filter`; any other reason passes through.
pub(crate) fn map<'a>(
    status: &'a str,
    incomplete_reason: Option<&'a str>,
    has_calls: bool,
) -> &'a str {
    match (status, incomplete_reason) {
        ("incomplete", Some("max_output_tokens")) => "max_tokens",
        ("incomplete", Some("content_filter")) => "content_filter",
        ("incomplete", Some(other)) => other,
        _ if has_calls => "tool_use",
        _ => "end_turn",
    }
}
