//! Gemini `finishReason` → UPP stop reason.

/// Whether `finish_reason` means the content was blocked by a safety or policy filter.
pub(crate) fn is_filtered(finish_reason: &str) -> bool {
    matches!(
        finish_reason,
        "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
    )
}

/// `STOP` → `tool_use` when the response has function calls, else `end_turn`; `MAX_TOKENS`
/// → `max_tokens`; safety and policy reasons → `content_filter`; others pass through in lower
/// case (`malformed_function_call`, `other`, …).
pub(crate) fn map(finish_reason: &str, has_calls: bool) -> String {
    match finish_reason {
        "STOP" | "FINISH_REASON_UNSPECIFIED" | "" if has_calls => "tool_use".to_owned(),
        "STOP" | "FINISH_REASON_UNSPECIFIED" | "" => "end_turn".to_owned(),
        "MAX_TOKENS" => "max_tokens".to_owned(),
        reason if is_filtered(reason) => "content_filter".to_owned(),
        other => other.to_ascii_lowercase(),
    }
}
