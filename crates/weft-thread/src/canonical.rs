//! Canonical JSON: RFC 8785 (JSON Canonicalization Scheme, JCS), written here rather than taken
//! from a crate so the bytes depend on nothing but this file.
//!
//! - Object members are sorted by the UTF-16 code units of their names; no whitespace.
//! - Strings escape only `"`, `\` and U+0000–U+001F (`\b \t \n \f \r` short forms, otherwise
//!   `\u00xx` in lowercase hex); everything else is written as UTF-8.
//! - Numbers are IEEE 754 doubles written as ECMAScript's `Number.prototype.toString` does
//!   (shortest round-trip digits; exponent form below 1e-6 and from 1e21; `-0` is `0`).
//!   Integers beyond 2^53 are therefore rounded to the nearest double, as JCS requires.
//!
//! [`canonicalize`] applies the thread's `meta:*` rule on top: unless
//! [`CanonicalOptions::include_meta`] is set, it drops, at the protocol's own positions (the
//! thread, agent configurations, turns, messages, parts, usage, content references,
//! relationships, links and their `metadata` / `client_metadata` maps), every member whose name
//! starts with `meta:`, every system message whose `event_type` starts with `meta:` and every
//! part whose `part_kind` starts with `meta:`. Opaque payloads (`args`, `content`, `event_data`,
//! `vendor_metadata`, unknown members) are never altered. [`write_jcs`] is plain RFC 8785.

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

/// Options of [`canonicalize`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CanonicalOptions {
    /// Keep `meta:*` members, events and parts (default: drop them).
    pub include_meta: bool,
}

/// The canonical bytes of a thread (JCS, with the `meta:*` rule of the module docs).
pub fn canonicalize(thread: &Value, options: CanonicalOptions) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    let context = if options.include_meta {
        Context::Opaque
    } else {
        Context::Thread
    };
    write_value(thread, context, &mut out);
    out
}

/// The canonical form as a string (see [`canonicalize`]).
pub fn canonicalize_to_string(thread: &Value, options: CanonicalOptions) -> String {
    // JCS output is built from valid UTF-8 pieces only.
    String::from_utf8(canonicalize(thread, options)).unwrap_or_default()
}

/// Writes any JSON value as RFC 8785 canonical JSON.
pub fn write_jcs(value: &Value, out: &mut Vec<u8>) {
    write_value(value, Context::Opaque, out);
}

/// Any JSON value as an RFC 8785 canonical string.
pub fn to_jcs_string(value: &Value) -> String {
    let mut out = Vec::new();
    write_jcs(value, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Where a value sits in a thread, for the `meta:*` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    /// Written unchanged.
    Opaque,
    Thread,
    Agents,
    /// A protocol object whose members are opaque (agent config, usage, metadata maps, …).
    Record,
    Turns,
    Turn,
    Messages,
    Message,
    Parts,
    Part,
    Relationships,
    Links,
    Link,
}

impl Context {
    fn drops_meta_keys(self) -> bool {
        !matches!(self, Context::Opaque | Context::Agents)
    }

    fn member(self, key: &str) -> Context {
        match (self, key) {
            (Context::Thread, "agents") => Context::Agents,
            (Context::Thread, "turns") => Context::Turns,
            (Context::Thread, "relationships") => Context::Relationships,
            (Context::Thread, "metadata") | (Context::Agents, _) => Context::Record,
            (Context::Turn, "parts") | (Context::Message, "parts") => Context::Parts,
            (Context::Turn, "messages") => Context::Messages,
            (Context::Turn, "client_metadata" | "total_usage") => Context::Record,
            (Context::Message, "usage") => Context::Record,
            (Context::Part, "content_ref" | "metadata") => Context::Record,
            (Context::Relationships, "links") => Context::Links,
            (Context::Link, "metadata") => Context::Record,
            _ => Context::Opaque,
        }
    }

    fn element(self) -> Context {
        match self {
            Context::Turns => Context::Turn,
            Context::Messages => Context::Message,
            Context::Parts => Context::Part,
            Context::Links => Context::Link,
            _ => Context::Opaque,
        }
    }

    /// Whether an array element is a `meta:*` event or part to drop.
    fn drops_element(self, element: &Value) -> bool {
        let tag = match self {
            Context::Messages => "event_type",
            Context::Parts => "part_kind",
            _ => return false,
        };
        element
            .get(tag)
            .and_then(Value::as_str)
            .is_some_and(|value| value.starts_with("meta:"))
    }
}

fn write_value(value: &Value, context: Context, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(number, out),
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push(b'[');
            let element = context.element();
            let mut first = true;
            for item in items {
                if context.drops_element(item) {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                write_value(item, element, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(map, context, out),
    }
}

fn write_object(map: &Map<String, Value>, context: Context, out: &mut Vec<u8>) {
    let mut members: Vec<(&String, &Value)> = if context.drops_meta_keys() {
        map.iter()
            .filter(|(key, _)| !key.starts_with("meta:"))
            .collect()
    } else {
        map.iter().collect()
    };
    members.sort_unstable_by(|(a, _), (b, _)| compare_utf16(a, b));
    out.push(b'{');
    for (index, (key, value)) in members.into_iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_string(key, out);
        out.push(b':');
        write_value(value, context.member(key), out);
    }
    out.push(b'}');
}

/// Orders strings by their UTF-16 code units, as RFC 8785 §3.2.3 requires.
pub fn compare_utf16(a: &str, b: &str) -> Ordering {
    let (left, right) = (a.as_bytes(), b.as_bytes());
    let Some(mismatch) = left.iter().zip(right).position(|(x, y)| x != y) else {
        return left.len().cmp(&right.len());
    };
    if left[mismatch] < 0x80 && right[mismatch] < 0x80 {
        return left[mismatch].cmp(&right[mismatch]);
    }
    // Back up to the start of the differing characters (the prefix is shared, so both strings
    // have a char boundary at the same index).
    let start = a.floor_char_boundary(mismatch);
    let tail_a = a.get(start..).unwrap_or("");
    let tail_b = b.get(start..).unwrap_or("");
    tail_a.encode_utf16().cmp(tail_b.encode_utf16())
}

/// Which bytes need escaping: `"`, `\\` and U+0000–U+001F.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

fn write_string(text: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(text.len() + 2);
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        if !NEEDS_ESCAPE[usize::from(byte)] {
            continue;
        }
        out.extend_from_slice(&bytes[start..index]);
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0a => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            0x0d => out.extend_from_slice(b"\\r"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]),
        }
        start = index + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

const MAX_SAFE_INTEGER: u64 = 1 << 53;

fn write_number(number: &Number, out: &mut Vec<u8>) {
    if let Some(value) = number.as_u64()
        && value <= MAX_SAFE_INTEGER
    {
        write_integer(value, false, out);
    } else if let Some(value) = number.as_i64()
        && value.unsigned_abs() <= MAX_SAFE_INTEGER
    {
        write_integer(value.unsigned_abs(), value < 0, out);
    } else {
        write_f64(number.as_f64().unwrap_or(0.0), out);
    }
}

fn write_integer(mut value: u64, negative: bool, out: &mut Vec<u8>) {
    if value == 0 {
        out.push(b'0');
        return;
    }
    if negative {
        out.push(b'-');
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while value > 0 {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
    }
    out.extend_from_slice(&digits[at..]);
}

/// Writes a double as ECMAScript's `Number::toString` (ECMA-262 §6.1.6.1.20) does.
pub(crate) fn write_f64(value: f64, out: &mut Vec<u8>) {
    if value == 0.0 || !value.is_finite() {
        // -0 is "0"; non-finite numbers cannot occur in JSON.
        out.push(b'0');
        return;
    }
    if value < 0.0 {
        out.push(b'-');
    }
    // Rust's `{:e}` yields the shortest digits that round-trip, closest to the value.
    let mut scientific = String::with_capacity(32);
    let _ = write!(scientific, "{:e}", value.abs());
    let (mantissa, _) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let shortest_len = mantissa.bytes().filter(u8::is_ascii_digit).count();
    // Among the shortest candidates ECMAScript wants the one closest to the value, ties to even
    // (ECMA-262 Number::toString, note 2). The correctly rounded decimal with that many digits
    // (Rust's precision formatting rounds the exact value half to even) is that candidate
    // whenever it still round-trips; Rust's shortest mode may pick the other one of a tie.
    let mut rounded = String::with_capacity(32);
    let _ = write!(
        rounded,
        "{:.*e}",
        shortest_len.saturating_sub(1),
        value.abs()
    );
    if rounded != scientific && rounded.parse::<f64>() == Ok(value.abs()) {
        scientific = rounded;
    }
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    let k = digits.len() as i32;
    let n = exponent + 1;
    if k <= n && n <= 21 {
        out.extend_from_slice(&digits);
        out.extend(std::iter::repeat_n(b'0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.extend_from_slice(&digits[..n as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-n) as usize));
        out.extend_from_slice(&digits);
    } else {
        out.push(digits[0]);
        if k > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if n > 0 { b'+' } else { b'-' });
        let _ = write!(FmtBytes(out), "{}", (n - 1).abs());
    }
}

struct FmtBytes<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for FmtBytes<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.0.extend_from_slice(text.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn number(bits: u64) -> String {
        let mut out = Vec::new();
        write_f64(f64::from_bits(bits), &mut out);
        String::from_utf8(out).unwrap()
    }

    /// RFC 8785 Appendix B.
    #[test]
    fn rfc8785_number_vectors() {
        let vectors: [(u64, &str); 24] = [
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, expected) in vectors {
            assert_eq!(number(bits), expected, "{bits:#x}");
        }
    }

    /// RFC 8785 §3.2.2 example.
    #[test]
    fn rfc8785_example() {
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        let value: Value = serde_json::from_str(input).unwrap();
        assert_eq!(
            to_jcs_string(&value),
            "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}"
        );
    }

    /// RFC 8785 §3.2.3 sorting example.
    #[test]
    fn rfc8785_sorting() {
        let input = r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#;
        let value: Value = serde_json::from_str(input).unwrap();
        let keys: Vec<String> = {
            let text = to_jcs_string(&value);
            let reparsed: Value = serde_json::from_str(&text).unwrap();
            reparsed.as_object().unwrap().keys().cloned().collect()
        };
        assert_eq!(
            keys,
            [
                "\r",
                "1",
                "\u{80}",
                "\u{f6}",
                "\u{20ac}",
                "\u{1f600}",
                "\u{fb33}"
            ]
        );
    }

    /// Strings that first differ inside a multi-byte character, or at one, order by their
    /// UTF-16 code units: the characters' own order, not their UTF-8 bytes'.
    #[test]
    fn strings_differing_inside_a_character_order_by_utf16_code_units() {
        for (lower, higher) in [
            ("è", "é"),                   // C3 A8 < C3 A9: differ at the second byte
            ("aè", "aé"),                 // the same after an ASCII prefix
            ("\u{20ac}", "\u{20ad}"),     // three-byte characters, differ at the last byte
            ("\u{1f600}", "\u{fb33}"),    // a surrogate pair sorts before U+FB33
            ("x\u{1f600}y", "x\u{fb33}"), // … after a shared prefix too
            ("é", "ée"),                  // a prefix sorts first
        ] {
            assert_eq!(
                compare_utf16(lower, higher),
                Ordering::Less,
                "{lower} < {higher}"
            );
            assert_eq!(
                compare_utf16(higher, lower),
                Ordering::Greater,
                "{higher} > {lower}"
            );
            assert_eq!(compare_utf16(lower, lower), Ordering::Equal);
        }
    }

    /// The control characters JSON has short escapes for use them; the others are `\u00xx`
    /// in lowercase hex.
    #[test]
    fn control_characters_escape_short_where_json_has_a_short_form() {
        let text: String = [0x08u8, 0x09, 0x0a, 0x0c, 0x0d, 0x01, 0x1f, 0x0b]
            .iter()
            .map(|&b| char::from(b))
            .collect();
        assert_eq!(
            to_jcs_string(&Value::String(text)),
            r#""\b\t\n\f\r\u0001\u001f\u000b""#
        );
    }

    /// At a power of two the double's interval is lopsided: the correctly rounded decimal of
    /// the shortest length can fall outside it, and then the shortest round-trip digits win.
    #[test]
    fn a_double_whose_nearest_decimal_does_not_round_trip_keeps_its_shortest_digits() {
        let value: Value = serde_json::from_str("7.120236347223045e-307").unwrap();
        assert_eq!(value.as_f64(), Some(2f64.powi(-1017)));
        assert_eq!(to_jcs_string(&value), "7.120236347223045e-307");
    }

    /// ECMAScript writes a fraction in plain notation (`0.` first) down to 1e-6, in exponent
    /// form below.
    #[test]
    fn fractions_turn_to_exponent_form_below_one_millionth() {
        let jcs = |text: &str| to_jcs_string(&serde_json::from_str::<Value>(text).unwrap());
        assert_eq!(jcs("0.5"), "0.5");
        assert_eq!(jcs("-0.125"), "-0.125");
        assert_eq!(jcs("0.000001"), "0.000001");
        assert_eq!(jcs("0.0000012"), "0.0000012");
        assert_eq!(jcs("0.0000001"), "1e-7");
        assert_eq!(jcs("0.00000012"), "1.2e-7");
    }

    #[test]
    fn meta_rule() {
        let thread = serde_json::json!({
            "version": "0.0.3", "meta:x": 1, "metadata": {"meta:cache-hit": true, "a": 1},
            "turns": [{"turn_type": "agent", "messages": [
                {"message_type": "system", "event_type": "meta:perf", "event_data": {}},
                {"message_type": "response", "parts": [{"part_kind": "meta:p"}, {"part_kind": "text", "content": "hi", "meta:k": 2}],
                 "usage": {"meta:u": 1}},
                {"message_type": "system", "event_type": "data-x", "event_data": {"meta:kept": 1}}
            ]}]
        });
        let excluded = canonicalize_to_string(&thread, CanonicalOptions::default());
        assert_eq!(
            excluded,
            r#"{"metadata":{"a":1},"turns":[{"messages":[{"message_type":"response","parts":[{"content":"hi","part_kind":"text"}],"usage":{}},{"event_data":{"meta:kept":1},"event_type":"data-x","message_type":"system"}],"turn_type":"agent"}],"version":"0.0.3"}"#
        );
        let included = canonicalize_to_string(&thread, CanonicalOptions { include_meta: true });
        assert_eq!(included, to_jcs_string(&thread));
    }

    /// `meta:*` members go at every position of the protocol the module docs list, and stay
    /// in every opaque payload; `meta:*` parts and events go only from part and message lists.
    #[test]
    fn meta_rule_at_every_protocol_position_and_no_opaque_one() {
        let agent = "550e8400-e29b-41d4-a716-446655440001";
        let thread = serde_json::json!({
            "version": "0.0.3", "meta:thread": 1,
            "metadata": {"meta:m": 1, "kept": 1},
            "agents": {agent: {"agent_name": "a", "meta:agent": 1,
                               "config": {"meta:in-config": 1}}},
            "turns": [
                {"turn_type": "agent", "meta:turn": 1,
                 "client_metadata": {"meta:cm": 1, "ui": 1},
                 "total_usage": {"meta:tu": 1, "input_tokens": 1},
                 "messages": [
                    {"message_type": "response", "meta:message": 1,
                     "usage": {"meta:u": 1, "output_tokens": 1},
                     "parts": [
                        {"part_kind": "tool-call", "meta:part": 1,
                         "args": {"meta:arg": 1, "parts": [{"part_kind": "meta:in-args"}]}},
                        {"part_kind": "tool-return", "content": {"meta:c": 1},
                         "content_ref": {"meta:cr": 1, "uri": "file:///x"},
                         "metadata": {"meta:pm": 1, "k": 1}}]}],
                 "parts": [{"part_kind": "meta:turn-part"}, {"part_kind": "text", "meta:tp": 1}]},
                {"turn_type": "user", "event_type": "meta:not-a-message-list"}],
            "relationships": {"meta:rel": 1, "links": [
                {"type": "fork", "meta:link": 1, "metadata": {"meta:lm": 1, "why": 1}},
                {"type": "meta:not-a-part"}]},
            "custom:ext": {"meta:opaque": 1}
        });
        let canonical = canonicalize_to_string(&thread, CanonicalOptions::default());
        let kept: Value = serde_json::from_str(&canonical).unwrap();
        // Every protocol position lost its `meta:*` member, and nothing else.
        for (pointer, gone, stays) in [
            ("", "meta:thread", "version"),
            ("/metadata", "meta:m", "kept"),
            (
                &format!("/agents/{agent}") as &str,
                "meta:agent",
                "agent_name",
            ),
            ("/turns/0", "meta:turn", "turn_type"),
            ("/turns/0/client_metadata", "meta:cm", "ui"),
            ("/turns/0/total_usage", "meta:tu", "input_tokens"),
            ("/turns/0/messages/0", "meta:message", "message_type"),
            ("/turns/0/messages/0/usage", "meta:u", "output_tokens"),
            ("/turns/0/messages/0/parts/0", "meta:part", "args"),
            ("/turns/0/messages/0/parts/1/content_ref", "meta:cr", "uri"),
            ("/turns/0/messages/0/parts/1/metadata", "meta:pm", "k"),
            ("/turns/0/parts/0", "meta:tp", "part_kind"),
            ("/relationships", "meta:rel", "links"),
            ("/relationships/links/0", "meta:link", "type"),
            ("/relationships/links/0/metadata", "meta:lm", "why"),
        ] {
            let object = kept
                .pointer(pointer)
                .unwrap_or_else(|| panic!("{pointer}: {canonical}"));
            assert!(
                object.get(gone).is_none(),
                "{pointer} kept {gone}: {canonical}"
            );
            assert!(
                object.get(stays).is_some(),
                "{pointer} lost {stays}: {canonical}"
            );
        }
        // A `meta:*` part of a part list goes; other lists keep their elements.
        assert_eq!(kept["turns"][0]["parts"].as_array().unwrap().len(), 1);
        assert_eq!(kept["turns"].as_array().unwrap().len(), 2);
        assert_eq!(kept["relationships"]["links"].as_array().unwrap().len(), 2);
        // Opaque payloads are written as they are.
        for (pointer, member) in [
            (&format!("/agents/{agent}/config") as &str, "meta:in-config"),
            ("/turns/0/messages/0/parts/0/args", "meta:arg"),
            ("/turns/0/messages/0/parts/1/content", "meta:c"),
            ("/custom:ext", "meta:opaque"),
        ] {
            assert!(
                kept.pointer(pointer).and_then(|o| o.get(member)).is_some(),
                "{pointer} lost {member}: {canonical}"
            );
        }
        assert_eq!(
            kept["turns"][0]["messages"][0]["parts"][0]["args"]["parts"][0]["part_kind"],
            "meta:in-args"
        );
    }
}
