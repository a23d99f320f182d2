//! Tool-output compression for the MCP router: a smaller view of the same result, never a
//! different one (the protocol's "compressed, not altered in meaning").
//!
//! Only transformations that lose no information a reader can use are applied:
//!
//! 1. terminal control sequences are removed (ANSI colours and cursor moves, OSC titles and
//!    links), and a line rewritten with carriage returns keeps what a terminal would show
//!    (the text after the last `\r`);
//! 2. a result that is JSON as a whole is minified (same value, no layout);
//! 3. otherwise, per line: trailing blanks are cut, runs of blank lines become one, and a
//!    line repeated three or more times in a row is kept once followed by
//!    `[previous line repeated N more times]` when that is shorter — the count keeps the
//!    information ([`expand`] restores the lines).
//!
//! Nothing is truncated or selected: unlike the reference router's FTS5 snippet search,
//! every line and value of the result reaches the model.

use std::fmt::Write as _;

use serde_json::Value;

/// A compressed output and its sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compressed {
    /// The text the model gets.
    pub text: String,
    /// Bytes before.
    pub original_bytes: usize,
    /// Bytes after.
    pub compressed_bytes: usize,
}

/// Runs of identical lines at least this long are folded.
const FOLD_AT: usize = 3;

fn fold_marker(more: usize) -> String {
    format!("[previous line repeated {more} more times]")
}

/// Compresses a tool's text output.
///
/// ```
/// let pretty = "{\n  \"id\": 7,\n  \"tags\": [\n    \"a\"\n  ]\n}\n";
/// let out = weft_mcp::compress_output(pretty);
/// assert_eq!(out.text, r#"{"id":7,"tags":["a"]}"#);
/// assert!(out.compressed_bytes < out.original_bytes);
///
/// let wait = "waiting for the database to accept connections";
/// let log = format!("\u{1b}[32mok\u{1b}[0m   \n{wait}\n{wait}\n{wait}\n{wait}\n\n\n\ndone");
/// let out = weft_mcp::compress_output(&log);
/// assert_eq!(out.text, format!("ok\n{wait}\n[previous line repeated 3 more times]\n\ndone"));
/// assert_eq!(
///     weft_mcp::expand(&out.text),
///     format!("ok\n{wait}\n{wait}\n{wait}\n{wait}\n\ndone")
/// );
/// ```
pub fn compress_output(text: &str) -> Compressed {
    let plain = strip_terminal(text);
    let trimmed = plain.trim();
    let json = (trimmed.starts_with('{') || trimmed.starts_with('['))
        .then(|| serde_json::from_str::<Value>(trimmed).ok())
        .flatten();
    let out = match json {
        Some(value) => serde_json::to_string(&value).unwrap_or_else(|_| fold_lines(&plain)),
        None => fold_lines(&plain),
    };
    // Never make it bigger (minified JSON, folded lines are never longer than `plain`).
    let out = if out.len() <= text.len() { out } else { plain };
    Compressed {
        original_bytes: text.len(),
        compressed_bytes: out.len(),
        text: out,
    }
}

/// Undoes the line folding of [`compress_output`] (for checking it).
pub fn expand(text: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        let more = line
            .strip_prefix("[previous line repeated ")
            .and_then(|rest| rest.strip_suffix(" more times]"))
            .and_then(|n| n.parse::<usize>().ok());
        match (more, lines.last().copied()) {
            (Some(n), Some(previous)) => lines.extend(std::iter::repeat_n(previous, n)),
            _ => lines.push(line),
        }
    }
    lines.join("\n")
}

/// Removes CSI and OSC sequences and other C0 controls except tab and newline; resolves
/// carriage-return rewrites.
fn strip_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                Some('[') => {
                    chars.next();
                    // Parameters and intermediates, then one final byte in @..~.
                    for n in chars.by_ref() {
                        if ('@'..='~').contains(&n) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    chars.next();
                    // Until BEL or ESC \.
                    while let Some(n) = chars.next() {
                        if n == '\u{7}' {
                            break;
                        }
                        if n == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' => {
                // What follows overwrites the line so far.
                let start = out.rfind('\n').map_or(0, |i| i + 1);
                out.truncate(start);
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn fold_lines(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').map(str::trim_end).collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut first = true;
    let mut push = |out: &mut String, line: &str| {
        if !std::mem::take(&mut first) {
            out.push('\n');
        }
        out.push_str(line);
    };
    while i < lines.len() {
        let line = lines[i];
        let mut run = 1;
        while i + run < lines.len() && lines[i + run] == line {
            run += 1;
        }
        if line.is_empty() {
            // A run of blank lines is one blank line (inner runs only; the ends are trimmed).
            if i > 0 && i + run < lines.len() {
                push(&mut out, "");
            }
        } else if run >= FOLD_AT && (run - 1) * (line.len() + 1) > fold_marker(run - 1).len() + 1 {
            push(&mut out, line);
            push(&mut out, &fold_marker(run - 1));
        } else {
            for _ in 0..run {
                push(&mut out, line);
            }
        }
        i += run;
    }
    out
}

/// A one-line account of the savings, e.g. for a log.
pub(crate) fn savings(c: &Compressed) -> String {
    let mut s = String::new();
    let pct = (c.compressed_bytes * 100)
        .checked_div(c.original_bytes)
        .map_or(0, |kept| 100usize.saturating_sub(kept));
    let _ = write!(
        s,
        "{} → {} bytes ({pct}% smaller)",
        c.original_bytes, c.compressed_bytes
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_and_rewrites_are_resolved() {
        let text = "\u{1b}]0;title\u{7}\u{1b}[1;31merror\u{1b}[0m: x\r\n 10%\r 50%\r100% done\n";
        assert_eq!(strip_terminal(text), "error: x\n100% done\n");
    }

    #[test]
    fn folding_is_reversible_and_short_runs_stay() {
        let c = "compiling crate number 7 of the workspace";
        let text = format!("a\nb\nb\n{c}\n{c}\n{c}\n{c}\n{c}\n\n\n\nd\nd\nd");
        let out = compress_output(&text);
        assert_eq!(
            out.text,
            format!("a\nb\nb\n{c}\n[previous line repeated 4 more times]\n\nd\nd\nd"),
            "short lines are not folded: the marker would be longer"
        );
        assert_eq!(
            expand(&out.text),
            format!("a\nb\nb\n{c}\n{c}\n{c}\n{c}\n{c}\n\nd\nd\nd")
        );
    }

    #[test]
    fn json_is_minified_to_the_same_value_and_text_that_only_looks_like_json_is_not() {
        let pretty = "[\n  {\"k\": \"v  w\"},\n  2.5\n]";
        let out = compress_output(pretty);
        assert_eq!(out.text, "[{\"k\":\"v  w\"},2.5]");
        assert_eq!(
            serde_json::from_str::<Value>(&out.text).ok(),
            serde_json::from_str::<Value>(pretty).ok()
        );
        let broken = "{ not json\n  indented line";
        assert_eq!(compress_output(broken).text, broken);
        assert_eq!(
            savings(&compress_output(pretty)),
            format!(
                "{} → 18 bytes ({}% smaller)",
                pretty.len(),
                100 - 1800 / pretty.len()
            )
        );
    }
}
