//! Caps at the source: every built-in tool's output is bounded in bytes, and what is cut is
//! said in the output itself, so the model and the run's log see the same text.

use serde_json::Value;
use weft_provider::Tool;

/// The most bytes of text one tool result carries (a file read, a command's stdout…).
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// The most bytes of a whole tool result, as JSON; past it the result becomes its JSON text,
/// cut, with the marker (a backstop behind each tool's own caps).
pub const MAX_RESULT_BYTES: usize = 2 * MAX_OUTPUT_BYTES + 16 * 1024;

/// `text` cut to at most `max` bytes (on a character boundary) followed by a marker saying
/// how much was left out; unchanged when it fits. `total` is the full size when known (it may
/// exceed `text.len()` when the caller stopped reading early); `hint` is appended to the marker.
pub fn truncate_text(text: &str, max: usize, total: Option<u64>, hint: &str) -> String {
    let total = total.unwrap_or(text.len() as u64);
    if text.len() <= max && total <= text.len() as u64 {
        return text.to_owned();
    }
    let mut cut = max.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[… truncated by Weft: {cut} of {total} bytes shown{hint} …]",
        &text[..cut]
    )
}

/// `result` when its JSON fits [`MAX_RESULT_BYTES`]; else its JSON text, cut, with the marker.
pub fn cap_result(result: Value) -> Value {
    let size = serde_json::to_string(&result).map_or(0, |s| s.len());
    if size <= MAX_RESULT_BYTES {
        return result;
    }
    let text = result.to_string();
    Value::String(truncate_text(&text, MAX_RESULT_BYTES, None, ""))
}

/// `tool` with [`cap_result`] applied to every result.
pub fn capped(tool: Tool) -> Tool {
    let inner = tool.clone();
    let mut wrapped = Tool::new(
        tool.name.clone(),
        tool.description.clone(),
        tool.parameters.clone(),
        move |arguments: Value, ctx: weft_provider::ToolContext| {
            let inner = inner.clone();
            async move { inner.run(arguments, ctx).await.map(cap_result) }
        },
    )
    .with_side_effects(tool.side_effects)
    .with_idempotent(tool.idempotent)
    .with_sequential(tool.sequential)
    .with_depends_on(tool.depends_on.clone());
    wrapped.metadata = tool.metadata.clone();
    wrapped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_boundary_with_a_marker() {
        assert_eq!(truncate_text("short", 10, None, ""), "short");
        let cut = truncate_text("ééééé", 3, None, "");
        assert!(cut.starts_with("é\n[… truncated by Weft: 2 of 10 bytes shown"));
        let early = truncate_text("abc", 10, Some(5000), "; read a range");
        assert!(early.contains("3 of 5000 bytes shown; read a range"));
    }

    #[test]
    fn oversized_results_become_marked_text() {
        let big = Value::String("x".repeat(MAX_RESULT_BYTES * 2));
        let Value::String(capped) = cap_result(serde_json::json!({"a": big})) else {
            unreachable!("a capped result is text");
        };
        assert!(capped.len() < MAX_RESULT_BYTES + 200);
        assert!(capped.contains("truncated by Weft"));
    }
}
