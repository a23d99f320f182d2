//! Proptest generators of valid threads, shared by the property and robustness tests.
#![allow(dead_code, clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use weft_thread::Timestamp;

pub(crate) fn json_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ]
    .boxed()
}

pub(crate) fn json_value() -> BoxedStrategy<Value> {
    json_leaf()
        .prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-z:_é😀]{0,6}", inner), 0..4)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
        .boxed()
}

fn text() -> BoxedStrategy<String> {
    prop_oneof!["[a-zA-Z0-9 ]{0,12}", "\\PC{0,10}"].boxed()
}

/// 0–2 members that the spec does not define (extension rule 1), some in `meta:`.
fn extras() -> BoxedStrategy<Map<String, Value>> {
    prop::collection::vec(
        (
            prop::sample::select(vec!["x-ext", "meta:note", "vendor_info"]),
            json_value(),
        ),
        0..2,
    )
    .prop_map(|members| {
        members
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect()
    })
    .boxed()
}

fn with_extras(mut base: Value, extra: Map<String, Value>) -> Value {
    if let Value::Object(map) = &mut base {
        for (key, value) in extra {
            map.entry(key).or_insert(value);
        }
    }
    base
}

fn optional<T: std::fmt::Debug + Clone + 'static>(
    inner: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop::option::of(inner).boxed()
}

fn base64() -> BoxedStrategy<String> {
    prop::sample::select(vec!["", "iVBORw==", "R0lGODlh", "AAEC", "/+8="])
        .prop_map(str::to_owned)
        .boxed()
}

fn media_item() -> BoxedStrategy<Value> {
    prop_oneof![
        text().prop_map(Value::String),
        (prop::sample::select(vec!["image-url", "audio-url", "video-url", "document-url"]), optional(any::<bool>()), optional(json_value()))
            .prop_map(|(kind, force, vendor)| {
                let mut item = json!({"kind": kind, "url": "https://example.com/x", "identifier": "abc123"});
                if let Some(force) = force {
                    item["force_download"] = json!(force);
                }
                if let Some(vendor) = vendor {
                    item["vendor_metadata"] = vendor;
                }
                item
            }),
        base64().prop_map(|data| json!({"kind": "binary", "data": data, "media_type": "image/png", "identifier": "4effda"})),
    ]
    .boxed()
}

fn user_prompt() -> BoxedStrategy<Value> {
    (
        prop_oneof![
            text().prop_map(Value::String),
            prop::collection::vec(media_item(), 0..3).prop_map(Value::Array)
        ],
        extras(),
    )
        .prop_map(|(content, extra)| {
            with_extras(
                json!({"part_kind": "user-prompt", "content": content}),
                extra,
            )
        })
        .boxed()
}

fn response_part() -> BoxedStrategy<Value> {
    prop_oneof![
        (text(), optional("[a-z_0-9]{1,6}"), extras()).prop_map(|(content, id, extra)| {
            let mut part = json!({"part_kind": "text", "content": content});
            if let Some(id) = id {
                part["id"] = json!(id);
            }
            with_extras(part, extra)
        }),
        (optional(text()), optional("[a-zA-Z0-9=]{1,8}"), prop::sample::select(vec!["anthropic", "openai"]), optional("rs_[0-9]{1,3}"), extras())
            .prop_map(|(content, signature, provider, id, extra)| {
                let mut part = json!({"part_kind": "thinking", "provider_name": provider});
                if let Some(content) = content {
                    part["content"] = json!(content);
                }
                if let Some(signature) = signature {
                    part["signature"] = json!(signature);
                }
                if let Some(id) = id {
                    part["thinking_id"] = json!(id);
                }
                with_extras(part, extra)
            }),
        (prop::sample::select(vec!["search", "get_weather"]), json_value(), extras()).prop_map(|(name, args, extra)| {
            with_extras(json!({"part_kind": "tool-call", "tool_name": name, "tool_call_id": "__CALL__", "args": args}), extra)
        }),
        (base64(), optional("[a-z]{1,4}"), extras()).prop_map(|(data, id, extra)| {
            let mut part = json!({"part_kind": "file", "content": {"kind": "binary", "data": data, "media_type": "image/gif", "identifier": "25c9b3"}});
            if let Some(id) = id {
                part["id"] = json!(id);
            }
            with_extras(part, extra)
        }),
        json_value().prop_map(|payload| json!({"part_kind": "custom:planning-step", "payload": payload})),
        json_value().prop_map(|payload| json!({"part_kind": "meta:debug", "payload": payload})),
    ]
    .boxed()
}

fn request_part() -> BoxedStrategy<Value> {
    prop_oneof![
        user_prompt(),
        (
            prop::sample::select(vec!["success", "error", "validation_error"]),
            optional(json_value()),
            any::<bool>(),
            optional(json_value()),
            extras()
        )
            .prop_map(|(status, content, has_ref, metadata, extra)| {
                let mut part = json!({"part_kind": "tool-return", "tool_name": "__NAME__", "tool_call_id": "__RETURN__", "status": status});
                if let Some(content) = content {
                    part["content"] = content;
                }
                if has_ref {
                    part["content_ref"] = json!({"uri": "s3://bucket/key", "size_bytes": 12, "hash": "sha256:00"});
                }
                if let Some(metadata) = metadata {
                    part["metadata"] = metadata;
                }
                with_extras(part, extra)
            }),
        (prop_oneof![text().prop_map(Value::String), prop::collection::vec(json_value(), 0..2).prop_map(Value::Array)], optional("[a-z]{1,5}"))
            .prop_map(|(content, tool)| {
                let mut part = json!({"part_kind": "retry-prompt", "content": content});
                if let Some(tool) = tool {
                    part["tool_name"] = json!(tool);
                }
                part
            }),
    ]
    .boxed()
}

fn usage() -> BoxedStrategy<Value> {
    (
        optional(0u64..1000),
        optional(0u64..1000),
        optional(0u64..100),
        optional(0u64..2000),
    )
        .prop_map(|(input, output, thinking, total)| {
            let mut usage = Map::new();
            for (key, value) in [
                ("input_tokens", input),
                ("output_tokens", output),
                ("thinking_tokens", thinking),
                ("total_tokens", total),
            ] {
                if let Some(value) = value {
                    usage.insert(key.into(), json!(value));
                }
            }
            Value::Object(usage)
        })
        .boxed()
}

fn system_message() -> BoxedStrategy<Value> {
    let event = prop_oneof![
        (
            prop::sample::select(vec![
                "agent.handoff",
                "thread.spawn",
                "thread.end",
                "data-foo",
                "data-weft",
                "meta:perf",
                "state.update",
                "stream.interrupted"
            ]),
            json_value()
        )
            .prop_map(|(kind, data)| (kind.to_owned(), data)),
        text().prop_map(|text| ("error".to_owned(), json!({"errorText": text}))),
        json_value().prop_map(|data| ("error".to_owned(), data)),
        (text(), any::<bool>()).prop_map(|(title, with_title)| {
            let mut data = json!({"sourceId": "s1", "url": "https://example.com"});
            if with_title {
                data["title"] = json!(title);
            }
            ("source.url".to_owned(), data)
        }),
        text().prop_map(|title| (
            "source.document".to_owned(),
            json!({"sourceId": "d1", "mediaType": "application/pdf", "title": title})
        )),
    ];
    (event, any::<bool>(), any::<bool>(), extras())
        .prop_map(|((event_type, event_data), source, targets, extra)| {
            let mut message = json!({"message_type": "system", "timestamp": "__TIME__", "event_type": event_type, "event_data": event_data});
            if source {
                message["source_agent"] = json!("__AGENT__");
            }
            if targets {
                message["target_agents"] = json!(["__AGENT__"]);
            }
            with_extras(message, extra)
        })
        .boxed()
}

fn message() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => (prop::collection::vec(request_part(), 0..3), extras()).prop_map(|(parts, extra)| {
            with_extras(json!({"message_type": "request", "timestamp": "__TIME__", "parts": parts, "agent_id": "__AGENT__"}), extra)
        }),
        4 => (
            prop::collection::vec(response_part(), 0..4),
            optional("[a-z0-9-]{1,8}"),
            optional(usage()),
            optional(prop::sample::select(vec!["stop", "length", "content_filter", "tool_call", "error"])),
            extras()
        )
            .prop_map(|(parts, model, usage, finish, extra)| {
                let mut message = json!({"message_type": "response", "timestamp": "__TIME__", "parts": parts, "agent_id": "__AGENT__"});
                if let Some(model) = model {
                    message["model_name"] = json!(model);
                    message["provider_name"] = json!("openai");
                    message["provider_response_id"] = json!("resp_1");
                }
                if let Some(usage) = usage {
                    message["usage"] = usage;
                }
                if let Some(finish) = finish {
                    message["finish_reason"] = json!(finish);
                }
                with_extras(message, extra)
            }),
        2 => system_message(),
    ]
    .boxed()
}

fn turn() -> BoxedStrategy<Value> {
    prop_oneof![
        (prop::collection::vec(user_prompt(), 1..3), optional(prop::collection::vec(("[a-z]{1,4}[:./_-][a-z]{1,4}", json_value()), 0..3)), extras())
            .prop_map(|(parts, metadata, extra)| {
                let mut turn = json!({"turn_type": "user", "submitted_at": "__TIME__", "parts": parts});
                if let Some(metadata) = metadata {
                    turn["client_metadata"] = Value::Object(metadata.into_iter().collect());
                }
                with_extras(turn, extra)
            }),
        (prop::collection::vec(message(), 0..5), optional(usage()), extras(), optional("[a-z0-9]{4}")).prop_map(|(messages, usage, extra, ui_id)| {
            let mut turn = json!({"turn_type": "agent", "agent_id": "__AGENT__", "started_at": "__TIME__", "completed_at": "__TIME__", "messages": messages});
            if let Some(usage) = usage {
                turn["total_usage"] = usage;
            }
            if let Some(ui_id) = ui_id {
                turn["meta:ui_message_id"] = json!(ui_id);
            }
            with_extras(turn, extra)
        }),
    ]
    .boxed()
}

const AGENTS: [&str; 3] = [
    "550e8400-e29b-41d4-a716-446655440001",
    "550e8400-e29b-41d4-a716-446655440002",
    "assistant",
];

struct Filler {
    clock_ms: i64,
    step: i64,
    agent: usize,
    calls: Vec<(String, String)>,
    selector: usize,
}

impl Filler {
    fn time(&mut self) -> Value {
        self.clock_ms += self.step;
        let text = Timestamp::from_unix_nanos(i128::from(self.clock_ms) * 1_000_000).to_string();
        Value::String(text)
    }

    fn fill_message(&mut self, message: &mut Value) {
        if let Some(timestamp) = message.get_mut("timestamp") {
            *timestamp = self.time();
        }
        if message.get("agent_id").is_some() {
            message["agent_id"] = json!(AGENTS[self.agent]);
        }
        if message.get("source_agent").is_some() {
            message["source_agent"] = json!(AGENTS[(self.agent + 1) % 3]);
        }
        if message.get("target_agents").is_some() {
            message["target_agents"] = json!([AGENTS[(self.agent + 2) % 3]]);
        }
        if let Some(Value::Array(parts)) = message.get_mut("parts") {
            self.fill_parts(parts);
        }
    }

    fn fill_parts(&mut self, parts: &mut Vec<Value>) {
        let mut index = 0;
        while index < parts.len() {
            let part = &mut parts[index];
            match part.get("tool_call_id").and_then(Value::as_str) {
                Some("__CALL__") => {
                    let id = format!("call_{}", self.calls.len());
                    part["tool_call_id"] = json!(id);
                    self.calls
                        .push((id, part["tool_name"].as_str().unwrap().to_owned()));
                }
                Some("__RETURN__") => {
                    if self.calls.is_empty() {
                        parts.remove(index);
                        continue;
                    }
                    self.selector = self.selector.wrapping_mul(31).wrapping_add(7);
                    let (id, name) = self.calls[self.selector % self.calls.len()].clone();
                    part["tool_call_id"] = json!(id);
                    part["tool_name"] = json!(name);
                }
                _ => {}
            }
            index += 1;
        }
    }
}

/// Valid threads (checked by the property tests themselves).
pub(crate) fn thread() -> BoxedStrategy<Value> {
    (prop::collection::vec((turn(), 0usize..3), 0..5), 0i64..2, optional("\\PC{0,10}"), optional(json_value()), any::<bool>(), extras())
        .prop_map(|(turns, step, title, metadata, links, extra)| {
            let mut filler = Filler { clock_ms: 1_737_367_200_000, step, agent: 0, calls: Vec::new(), selector: 0 };
            let created_at = filler.time();
            let mut built = Vec::new();
            for (mut turn, agent) in turns {
                filler.agent = agent;
                if turn["turn_type"] == "user" {
                    turn["submitted_at"] = filler.time();
                    if let Some(Value::Array(parts)) = turn.get_mut("parts") {
                        filler.fill_parts(parts);
                    }
                } else {
                    turn["agent_id"] = json!(AGENTS[agent]);
                    turn["started_at"] = filler.time();
                    if let Some(Value::Array(messages)) = turn.get_mut("messages") {
                        for message in messages {
                            filler.fill_message(message);
                        }
                    }
                    turn["completed_at"] = filler.time();
                }
                built.push(turn);
            }
            let updated_at = filler.time();
            let agents: Map<String, Value> = AGENTS
                .iter()
                .map(|id| ((*id).to_owned(), json!({"agent_id": id, "agent_name": format!("agent {id}"), "created_at": "2025-01-01T00:00:00Z"})))
                .collect();
            let mut thread = json!({
                "version": "0.0.3",
                "thread_id": "550e8400-e29b-41d4-a716-446655440000",
                "created_at": created_at,
                "updated_at": updated_at,
                "agents": agents,
                "turns": built,
            });
            if let Some(title) = title {
                thread["title"] = json!(title);
            }
            if let Some(Value::Object(metadata)) = metadata {
                thread["metadata"] = Value::Object(metadata);
            }
            if links {
                thread["relationships"] = json!({"links": [{"thread_id": "550e8400-e29b-41d4-a716-446655440099", "relation": "spawned_from", "metadata": null}]});
            }
            with_extras(thread, extra)
        })
        .boxed()
}

/// Reorders every object's members (reversed), to test order independence.
pub(crate) fn reorder(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .rev()
                .map(|(key, value)| (key.clone(), reorder(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(reorder).collect()),
        other => other.clone(),
    }
}
