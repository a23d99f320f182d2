//! The tool-call format, the grammars that enforce it, and parsing replies back into calls.
//!
//! A tool call is one JSON object, `{"name": "<tool>", "arguments": {…}}`; parallel calls are
//! one object per line. When tools are offered the reply is constrained (see
//! [`tools_grammar`]) to be **either** plain text that does not start with `{` **or** one or
//! more such objects, where `name` is one of the offered tools and `arguments` validates
//! against that tool's parameter schema. With a structured-output schema as well, the
//! alternative to tool calls is a JSON value matching that schema instead of plain text.
//!
//! The grammars are Lark text with embedded JSON schemas (`%json {…}`), compiled by
//! llguidance in the `constrain` module (feature `candle`). Building them needs no inference
//! stack, so they are unit-tested in the default build.

use serde_json::{Map, Value, json};

use crate::template::ToolSpec;

/// The tool-call format.
#[derive(Debug, Clone, Copy)]
pub struct CallFormat;

impl CallFormat {
    /// How the instructions show a call.
    pub const EXAMPLE: &'static str = r#"{"name": "<tool name>", "arguments": {<arguments>}}"#;
}

/// One call as the model writes it (and as the history shows past calls).
pub fn render_call(name: &str, arguments: &Value) -> String {
    format!(
        "{{\"name\": {}, \"arguments\": {}}}",
        Value::String(name.to_owned()),
        arguments
    )
}

/// The JSON schema of one call to `tool`: `name` is the tool's name and `arguments` the
/// tool's parameter schema (with its `$defs` hoisted into `defs` under a per-tool prefix, so
/// references keep working once the schemas are combined).
fn call_schema(tool: &ToolSpec, index: usize, defs: &mut Map<String, Value>) -> Value {
    let mut parameters = tool.parameters.clone();
    if let Value::Object(object) = &mut parameters {
        object.remove("$schema");
        object.remove("$id");
        let prefix = format!("t{index}_");
        let mut renames = Vec::new();
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(local)) = object.remove(key) {
                for (name, schema) in local {
                    let hoisted = format!("{prefix}{name}");
                    renames.push((format!("#/{key}/{name}"), format!("#/$defs/{hoisted}")));
                    defs.insert(hoisted, schema);
                }
            }
        }
        if !renames.is_empty() {
            rewrite_refs(&mut parameters, &renames);
            for (_, hoisted) in renames {
                if let Some(name) = hoisted.strip_prefix("#/$defs/")
                    && let Some(schema) = defs.get_mut(name)
                {
                    let mut schema = schema.take();
                    rewrite_refs_with_defs(&mut schema, &prefix);
                    defs.insert(name.to_owned(), schema);
                }
            }
        }
    }
    if parameters.as_object().is_some_and(Map::is_empty) || parameters.is_null() {
        parameters = json!({"type": "object"});
    }
    json!({
        "type": "object",
        "properties": {
            "name": {"const": tool.name},
            "arguments": parameters,
        },
        "required": ["name", "arguments"],
        "additionalProperties": false,
    })
}

fn rewrite_refs(value: &mut Value, renames: &[(String, String)]) {
    match value {
        Value::Object(object) => {
            for (key, child) in object.iter_mut() {
                if key == "$ref"
                    && let Value::String(target) = child
                    && let Some((_, to)) = renames.iter().find(|(from, _)| from == target)
                {
                    *target = to.clone();
                } else {
                    rewrite_refs(child, renames);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| rewrite_refs(i, renames)),
        _ => {}
    }
}

/// Inside hoisted definitions, references to sibling definitions get the same prefix.
fn rewrite_refs_with_defs(value: &mut Value, prefix: &str) {
    match value {
        Value::Object(object) => {
            for (key, child) in object.iter_mut() {
                if key == "$ref"
                    && let Value::String(target) = child
                {
                    for local in ["#/$defs/", "#/definitions/"] {
                        if let Some(name) = target.strip_prefix(local)
                            && !name.starts_with(prefix)
                        {
                            *target = format!("#/$defs/{prefix}{name}");
                            break;
                        }
                    }
                } else {
                    rewrite_refs_with_defs(child, prefix);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|i| rewrite_refs_with_defs(i, prefix)),
        _ => {}
    }
}

/// The JSON schema of one call to any of `tools`.
pub fn any_call_schema(tools: &[ToolSpec]) -> Value {
    let mut defs = Map::new();
    let alternatives: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| call_schema(t, i, &mut defs))
        .collect();
    let mut schema = if alternatives.len() == 1 {
        alternatives.into_iter().next().unwrap_or(Value::Null)
    } else {
        json!({"anyOf": alternatives})
    };
    if !defs.is_empty()
        && let Value::Object(object) = &mut schema
    {
        object.insert("$defs".to_owned(), Value::Object(defs));
    }
    schema
}

/// The Lark grammar of a reply when tools are offered: plain text (not starting with `{` or
/// whitespace) or tool calls; with `structure`, a JSON value of that schema instead of text.
///
/// With `required`, the reply must be tool calls (`start: calls`).
pub fn tools_grammar(
    tools: &[ToolSpec],
    parallel: bool,
    required: bool,
    structure: Option<&Value>,
) -> String {
    let call = any_call_schema(tools);
    let calls = if parallel {
        "calls: call (\"\\n\" call)*"
    } else {
        "calls: call"
    };
    let answer = match structure {
        Some(schema) => format!("answer: %json {schema}"),
        None => "answer: TEXT\nTEXT: /[^{\\s][\\s\\S]*/".to_owned(),
    };
    if required {
        return format!("start: calls\n{calls}\ncall: %json {call}\n");
    }
    format!("start: calls | answer\n{calls}\ncall: %json {call}\n{answer}\n")
}

/// Reads a reply as tool calls: one or more JSON objects `{"name", "arguments"}` separated by
/// whitespace, each naming one of `tools`. `None` when the reply is anything else (text, or a
/// structured answer).
pub fn parse_calls(text: &str, tools: &[ToolSpec]) -> Option<Vec<(String, Value)>> {
    let trimmed = text.trim();
    if !trimmed.starts_with('{') {
        return None;
    }
    let mut calls = Vec::new();
    for value in serde_json::Deserializer::from_str(trimmed).into_iter::<Value>() {
        let Value::Object(mut object) = value.ok()? else {
            return None;
        };
        if object.len() != 2 {
            return None;
        }
        let Value::String(name) = object.remove("name")? else {
            return None;
        };
        let arguments = object.remove("arguments")?;
        if !arguments.is_object() || !tools.iter().any(|t| t.name == name) {
            return None;
        }
        calls.push((name, arguments));
    }
    (!calls.is_empty()).then_some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: Value) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters,
        }
    }

    #[test]
    fn calls_round_trip_through_render_and_parse() {
        let tools = [tool("add", json!({})), tool("echo", json!({}))];
        let text = format!(
            "{}\n{}",
            render_call("add", &json!({"a": 1})),
            render_call("echo", &json!({"s": "x"}))
        );
        let calls = parse_calls(&text, &tools);
        assert_eq!(
            calls,
            Some(vec![
                ("add".to_owned(), json!({"a": 1})),
                ("echo".to_owned(), json!({"s": "x"}))
            ])
        );
        assert_eq!(parse_calls("Hello", &tools), None);
        assert_eq!(
            parse_calls(r#"{"name": "nope", "arguments": {}}"#, &tools),
            None
        );
        assert_eq!(parse_calls(r#"{"answer": 42}"#, &tools), None);
    }

    #[test]
    fn the_grammar_names_every_tool_and_the_text_alternative() {
        let tools = [
            tool(
                "get_weather",
                json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            ),
            tool("add", json!({"type": "object"})),
        ];
        let grammar = tools_grammar(&tools, true, false, None);
        assert!(grammar.starts_with(
            "start: calls | answer\ncalls: call (\"\\n\" call)*\ncall: %json {\"anyOf\":"
        ));
        assert!(grammar.contains(r#"{"const":"get_weather"}"#));
        assert!(grammar.contains("TEXT: /[^{\\s][\\s\\S]*/"));
        let single = tools_grammar(&tools[..1], false, false, Some(&json!({"type": "object"})));
        assert!(single.contains("calls: call\n"));
        assert!(single.contains("answer: %json {\"type\":\"object\"}"));
        let required = tools_grammar(&tools, false, true, None);
        assert!(required.starts_with("start: calls\n"));
        assert!(!required.contains("answer"));
    }

    #[test]
    fn local_definitions_are_hoisted_and_references_rewritten() {
        let tools = [tool(
            "t",
            json!({"$schema": "x", "type": "object",
                "properties": {"p": {"$ref": "#/$defs/P"}},
                "$defs": {"P": {"type": "object", "properties": {"q": {"$ref": "#/$defs/Q"}}},
                          "Q": {"type": "integer"}}}),
        )];
        let schema = any_call_schema(&tools);
        assert_eq!(
            schema["properties"]["arguments"]["properties"]["p"]["$ref"],
            "#/$defs/t0_P"
        );
        assert_eq!(
            schema["$defs"]["t0_P"]["properties"]["q"]["$ref"],
            "#/$defs/t0_Q"
        );
        assert!(schema["properties"]["arguments"].get("$schema").is_none());
    }
}
