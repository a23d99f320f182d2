//! Streamed function-call arguments (Gemini 3 with
//! `toolConfig.functionCallingConfig.streamFunctionCallArguments`).
//!
//! A streamed call arrives as one part with the name and `willContinue: true`, then parts whose
//! `functionCall.partialArgs` hold `{jsonPath, stringValue | numberValue | boolValue | nullValue,
//! willContinue}` items: `jsonPath` is an RFC 9535 path into the arguments object
//! (`$.recipe.ingredients[0].name`), and a string may come in several pieces for the same path
//! (each piece appended). [`ArgumentsBuilder`] rebuilds the arguments object and, at the same
//! time, the JSON text of it, piece by piece, for `tool_call_delta` events: the concatenated
//! fragments (ending with [`ArgumentsBuilder::finish`]'s) are the arguments' JSON, as long as
//! Gemini streams each container's members together (it does: in document order). The object,
//! not the text, is what the call carries.

use serde_json::{Map, Number, Value};

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// A member name.
    Key(String),
    /// An array position.
    Index(usize),
}

/// Parses the subset of RFC 9535 Gemini uses: `$`, then `.name`, `[N]`, `['name']` or
/// `["name"]` steps. `None` when the path is not of that form or names the root itself.
pub(crate) fn parse_path(path: &str) -> Option<Vec<Segment>> {
    let mut rest = path.trim().strip_prefix('$')?;
    let mut segments = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty()
                || name.contains([']', '\'', '"'])
                || name.contains(char::is_whitespace)
            {
                return None;
            }
            segments.push(Segment::Key(after[..end].to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let quote = after.chars().next()?;
            if quote == '\'' || quote == '"' {
                let (name, used) = quoted(&after[1..], quote)?;
                segments.push(Segment::Key(name));
                rest = after[1 + used..].strip_prefix(']')?;
            } else {
                let end = after.find(']')?;
                segments.push(Segment::Index(after[..end].trim().parse().ok()?));
                rest = &after[end + 1..];
            }
        } else {
            return None;
        }
    }
    (!segments.is_empty()).then_some(segments)
}

/// A quoted name up to its closing `quote` (backslash escapes the next character): the name
/// and the bytes used, closing quote included.
fn quoted(text: &str, quote: char) -> Option<(String, usize)> {
    let mut name = String::new();
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        if escaped {
            name.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return Some((name, at + c.len_utf8()));
        } else {
            name.push(c);
        }
    }
    None
}

/// An open container of the JSON text.
#[derive(Debug)]
struct Frame {
    /// Where it sits in its parent (`None` for the root object).
    segment: Option<Segment>,
    is_array: bool,
    children: usize,
}

/// Rebuilds one call's arguments from its `partialArgs` items.
#[derive(Debug, Default)]
pub(crate) struct ArgumentsBuilder {
    args: Map<String, Value>,
    /// The open containers of the text written so far, the root object first.
    frames: Vec<Frame>,
    /// The path of the string whose closing quote is not written yet.
    open_string: Option<Vec<Segment>>,
}

impl ArgumentsBuilder {
    /// Applies one `partialArgs` item and returns the JSON text it adds.
    ///
    /// # Errors
    /// A message when the item has no usable `jsonPath`, a number that is not finite, or a
    /// path that contradicts an earlier one (a member of a string, an index of an object).
    pub(crate) fn apply(&mut self, item: &Value) -> Result<String, String> {
        let path = item
            .get("jsonPath")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("a partial argument has no jsonPath: {item}"))?;
        let segments = parse_path(path)
            .ok_or_else(|| format!("unsupported partial argument path {path:?}"))?;
        let value = if let Some(text) = item.get("stringValue").and_then(Value::as_str) {
            Value::String(text.to_owned())
        } else if let Some(number) = item.get("numberValue").and_then(Value::as_f64) {
            number_value(number).ok_or_else(|| format!("{path}: {number} is not a JSON number"))?
        } else if let Some(flag) = item.get("boolValue").and_then(Value::as_bool) {
            Value::Bool(flag)
        } else if item.get("nullValue").is_some() {
            Value::Null
        } else {
            // A piece with no value (only `willContinue`): nothing to add.
            return Ok(String::new());
        };
        if let (Value::String(piece), Some(Value::String(joined))) =
            (&value, existing(&mut self.args, &segments))
        {
            // The next piece of a string.
            joined.push_str(piece);
            return Ok(if self.open_string.as_ref() == Some(&segments) {
                escaped(piece)
            } else {
                String::new()
            });
        }
        set(&mut self.args, &segments, value.clone())
            .ok_or_else(|| format!("partial argument {path} contradicts an earlier one"))?;
        Ok(self.write(segments, &value))
    }

    /// The JSON text that places `value` at `segments`: closes what the previous value left
    /// open, opens the containers down to it, and writes the member (a string without its
    /// closing quote, since more pieces may follow).
    fn write(&mut self, segments: Vec<Segment>, value: &Value) -> String {
        let mut text = String::new();
        if self.open_string.take().is_some() {
            text.push('"');
        }
        if self.frames.is_empty() {
            text.push('{');
            self.frames.push(Frame {
                segment: None,
                is_array: false,
                children: 0,
            });
        }
        let (leaf, containers) = match segments.split_last() {
            Some(split) => split,
            None => return text,
        };
        let common = self.frames[1..]
            .iter()
            .zip(containers)
            .take_while(|(frame, segment)| frame.segment.as_ref() == Some(*segment))
            .count();
        while self.frames.len() > common + 1 {
            if let Some(frame) = self.frames.pop() {
                text.push(if frame.is_array { ']' } else { '}' });
            }
        }
        for (at, segment) in containers.iter().enumerate().skip(common) {
            let next = containers.get(at + 1).unwrap_or(leaf);
            self.member(segment, &mut text);
            let is_array = matches!(next, Segment::Index(_));
            text.push(if is_array { '[' } else { '{' });
            self.frames.push(Frame {
                segment: Some(segment.clone()),
                is_array,
                children: 0,
            });
        }
        self.member(leaf, &mut text);
        match value {
            Value::String(piece) => {
                text.push('"');
                text.push_str(&escaped(piece));
                self.open_string = Some(segments);
            }
            other => text.push_str(&other.to_string()),
        }
        text
    }

    /// The separator and (in an object) the key of a new member of the innermost container.
    fn member(&mut self, segment: &Segment, text: &mut String) {
        if let Some(frame) = self.frames.last_mut() {
            if frame.children > 0 {
                text.push(',');
            }
            frame.children += 1;
        }
        if let Segment::Key(key) = segment {
            text.push_str(&Value::String(key.clone()).to_string());
            text.push(':');
        }
    }

    /// The arguments object and the JSON text that closes what is still open (`{}` when no
    /// argument came).
    pub(crate) fn finish(mut self) -> (Value, String) {
        let mut text = String::new();
        if self.open_string.take().is_some() {
            text.push('"');
        }
        if self.frames.is_empty() {
            text.push_str("{}");
        }
        while let Some(frame) = self.frames.pop() {
            text.push(if frame.is_array { ']' } else { '}' });
        }
        (Value::Object(self.args), text)
    }
}

/// A streamed number: integral values within the exact range of a double become integers
/// (as Gemini's `args` would have them), so tools reading `as_i64` see what they would see
/// without streaming.
fn number_value(number: f64) -> Option<Value> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if number.fract() == 0.0 && number.abs() <= EXACT {
        // In range and integral, so the conversion is exact.
        #[allow(clippy::cast_possible_truncation)]
        return Some(Value::Number(Number::from(number as i64)));
    }
    Number::from_f64(number).map(Value::Number)
}

/// A string's JSON text without the surrounding quotes.
fn escaped(piece: &str) -> String {
    let quoted = Value::String(piece.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

/// The value at `segments`, if there is one.
fn existing<'a>(root: &'a mut Map<String, Value>, segments: &[Segment]) -> Option<&'a mut Value> {
    let (first, rest) = segments.split_first()?;
    let Segment::Key(key) = first else {
        return None;
    };
    let mut current = root.get_mut(key)?;
    for segment in rest {
        current = match (current, segment) {
            (Value::Object(map), Segment::Key(key)) => map.get_mut(key)?,
            (Value::Array(items), Segment::Index(index)) => items.get_mut(*index)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Puts `value` at `segments` in `root`, creating the containers on the way (arrays padded
/// with `null` up to the index). `None` when a step goes through a value of the other kind.
fn set(root: &mut Map<String, Value>, segments: &[Segment], value: Value) -> Option<()> {
    let (first, rest) = segments.split_first()?;
    let Segment::Key(key) = first else {
        return None;
    };
    let Some((next, _)) = rest.split_first() else {
        root.insert(key.clone(), value);
        return Some(());
    };
    let mut current = root.entry(key.clone()).or_insert_with(|| empty_for(next));
    for (at, segment) in rest.iter().enumerate() {
        if current.is_null() {
            *current = empty_for(segment);
        }
        let slot = match (current, segment) {
            (Value::Object(map), Segment::Key(key)) => {
                map.entry(key.clone()).or_insert(Value::Null)
            }
            (Value::Array(items), Segment::Index(index)) => {
                if items.len() <= *index {
                    items.resize(*index + 1, Value::Null);
                }
                &mut items[*index]
            }
            _ => return None,
        };
        if at + 1 == rest.len() {
            *slot = value;
            return Some(());
        }
        current = slot;
    }
    None
}

fn empty_for(next: &Segment) -> Value {
    match next {
        Segment::Key(_) => Value::Object(Map::new()),
        Segment::Index(_) => Value::Array(Vec::new()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(name: &str) -> Segment {
        Segment::Key(name.to_owned())
    }

    #[test]
    fn paths_of_names_indices_and_quoted_names() {
        assert_eq!(
            parse_path("$.recipe.ingredients[10].name"),
            Some(vec![
                key("recipe"),
                key("ingredients"),
                Segment::Index(10),
                key("name")
            ])
        );
        assert_eq!(
            parse_path("$['a.b'][\"c\\\"d\"][0]"),
            Some(vec![key("a.b"), key("c\"d"), Segment::Index(0)])
        );
        for bad in ["", "$", "a", "$.", "$..a", "$[x]", "$['open", "$[1", "$.a]"] {
            assert_eq!(parse_path(bad), None, "{bad:?}");
        }
    }

    /// Applies `items` one by one and returns the arguments and the joined text.
    fn build(items: &[Value]) -> (Value, String) {
        let mut builder = ArgumentsBuilder::default();
        let mut text = String::new();
        for item in items {
            text.push_str(&builder.apply(item).unwrap());
        }
        let (args, closing) = builder.finish();
        (args, text + &closing)
    }

    #[test]
    fn the_text_fragments_add_up_to_the_arguments() {
        let (args, text) = build(&[
            json!({"jsonPath": "$.a.b[0].c", "stringValue": "x\ny", "willContinue": true}),
            json!({"jsonPath": "$.a.b[0].c", "stringValue": "\u{e9}\""}),
            json!({"jsonPath": "$.a.b[0].d", "numberValue": 1e300}),
            json!({"jsonPath": "$.a.b[1]", "numberValue": -4.0}),
            json!({"jsonPath": "$.a.b[2][0]", "boolValue": false}),
            json!({"jsonPath": "$.a.e", "nullValue": "NULL_VALUE"}),
            json!({"jsonPath": "$.f", "stringValue": ""}),
            json!({"jsonPath": "$.g", "willContinue": true}),
        ]);
        let want = json!({"a": {"b": [{"c": "x\ny\u{e9}\"", "d": 1e300}, -4, [false]], "e": null}, "f": ""});
        assert_eq!(args, want);
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            want,
            "{text}"
        );
        assert_eq!(args["a"]["b"][1].as_i64(), Some(-4));
    }

    #[test]
    fn no_arguments_is_an_empty_object() {
        assert_eq!(build(&[]), (json!({}), "{}".to_owned()));
    }

    #[test]
    fn contradicting_paths_and_bad_numbers_are_errors() {
        let mut builder = ArgumentsBuilder::default();
        assert!(
            builder
                .apply(&json!({"jsonPath": "$.a", "numberValue": 1}))
                .is_ok()
        );
        assert!(
            builder
                .apply(&json!({"jsonPath": "$.a.b", "numberValue": 1}))
                .is_err()
        );
        assert!(
            builder
                .apply(&json!({"jsonPath": "$[0]", "numberValue": 1}))
                .is_err()
        );
        assert!(builder.apply(&json!({"stringValue": "x"})).is_err());
        assert_eq!(number_value(f64::NAN), None);
        assert_eq!(number_value(0.5), Some(json!(0.5)));
        assert_eq!(number_value(1e20), Some(json!(1e20)));
    }
}
