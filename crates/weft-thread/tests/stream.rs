//! Stream → thread behaviour from the spec's bijection table and critical rules, and the
//! implementation guide's consistency tests (server and client produce identical threads;
//! interrupted streams yield no turn on either side).
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use weft_thread::clock::{FixedClock, SteppingClock};
use weft_thread::ui_stream::{
    self, Assembler, AssemblerOptions, AssemblyEvent, EncodeOptions, InterruptionReason,
    ThreadDefaults, UiChunk,
};
use weft_thread::{AgentTurn, MessagePart, Timestamp, Turn, TurnMessage, pydantic_ai};

fn clock() -> SteppingClock {
    SteppingClock::new(Timestamp::parse("2025-01-20T10:00:00Z").unwrap(), 1)
}

fn chunks(values: &[Value]) -> Vec<UiChunk> {
    values
        .iter()
        .map(|value| UiChunk::from_value(value.clone()).unwrap())
        .collect()
}

fn run(values: &[Value]) -> Vec<AssemblyEvent> {
    let mut assembler = Assembler::with_clock(AssemblerOptions::default(), clock());
    let mut events = Vec::new();
    for chunk in chunks(values) {
        events.extend(assembler.push(chunk));
    }
    events.extend(assembler.finish());
    events
}

fn only_turn(events: &[AssemblyEvent]) -> &AgentTurn {
    let turns: Vec<&AgentTurn> = events
        .iter()
        .filter_map(|event| match event {
            AssemblyEvent::AgentTurn(turn) => Some(turn),
            _ => None,
        })
        .collect();
    assert_eq!(turns.len(), 1, "{events:#?}");
    turns[0]
}

fn parts(message: &TurnMessage) -> &[MessagePart] {
    match message {
        TurnMessage::Thread(message) => &message.parts,
        TurnMessage::System(_) => &[],
    }
}

/// The guide's "Consistency Testing": the server's Pydantic AI messages and the client's SSE
/// events give the same turn.
#[test]
fn server_and_client_events_give_identical_threads() {
    let agent = "assistant";
    // Server side: what the Pydantic AI run recorded.
    let server_messages = json!([
        {"kind": "response", "timestamp": "2025-01-20T10:00:00.000Z", "parts": [
            {"part_kind": "text", "content": "Hello", "id": "1"},
            {"part_kind": "tool-call", "tool_name": "search", "tool_call_id": "tc1", "args": {"q": "weather"}}]},
        {"kind": "request", "timestamp": "2025-01-20T10:00:00.000Z", "parts": [
            {"part_kind": "tool-return", "tool_name": "search", "tool_call_id": "tc1", "content": {"results": ["sunny"]}, "outcome": "success"}]},
        {"kind": "response", "timestamp": "2025-01-20T10:00:00.000Z", "parts": [{"part_kind": "text", "content": "It's sunny", "id": "2"}]}
    ]);
    let server_turn = pydantic_ai::from_agent_run(&server_messages, agent).unwrap();

    // Client side: the guide's exact event list (no start, no steps). The events carry no
    // timestamps, so both sides read the same time source.
    let client_events = [
        json!({"type": "text-start", "id": "1"}),
        json!({"type": "text-delta", "id": "1", "delta": "Hello"}),
        json!({"type": "text-end", "id": "1"}),
        json!({"type": "tool-input-available", "toolCallId": "tc1", "toolName": "search", "input": {"q": "weather"}}),
        json!({"type": "tool-output-available", "toolCallId": "tc1", "output": {"results": ["sunny"]}}),
        json!({"type": "text-start", "id": "2"}),
        json!({"type": "text-delta", "id": "2", "delta": "It's sunny"}),
        json!({"type": "text-end", "id": "2"}),
        json!({"type": "finish"}),
    ];
    let fixed = FixedClock(Timestamp::parse("2025-01-20T10:00:00.000Z").unwrap());
    let mut assembler = Assembler::with_clock(AssemblerOptions::default(), fixed);
    let events: Vec<AssemblyEvent> = chunks(&client_events)
        .into_iter()
        .flat_map(|chunk| assembler.push(chunk))
        .collect();
    let client_turn = only_turn(&events);
    assert_eq!(client_turn, &server_turn);

    // And the server's own encoding of its turn, received by a client, is the same turn.
    let mut tool_names = Default::default();
    let encoded =
        ui_stream::encode_agent_turn(&server_turn, &EncodeOptions::default(), &mut tool_names);
    let sse = ui_stream::to_sse(&encoded);
    let received = ui_stream::assemble_thread(
        ui_stream::parse_stream(&sse).unwrap(),
        AssemblerOptions::default(),
        &ThreadDefaults::default(),
        clock(),
    )
    .unwrap();
    assert_eq!(received.thread.turns, vec![Turn::Agent(server_turn)]);
}

/// The guide's second consistency test: partial events yield no turn.
#[test]
fn interrupted_stream_yields_no_turn() {
    let events = run(&[
        json!({"type": "text-start", "id": "1"}),
        json!({"type": "text-delta", "id": "1", "delta": "Hello"}),
    ]);
    assert!(
        events
            .iter()
            .all(|event| !matches!(event, AssemblyEvent::AgentTurn(_)))
    );
    match events.as_slice() {
        [AssemblyEvent::Interrupted(interruption)] => {
            assert_eq!(interruption.reason, InterruptionReason::IncompleteStream);
            assert_eq!(interruption.partial_text, "Hello");
        }
        other => panic!("{other:#?}"),
    }
    let server = pydantic_ai::from_agent_run(&json!([]), "assistant");
    assert!(
        server.is_err(),
        "a run with no complete messages gives no turn either"
    );
}

#[test]
fn start_without_end_discards_the_part_not_the_turn() {
    let events = run(&[
        json!({"type": "start", "messageId": "m1"}),
        json!({"type": "text-start", "id": "a"}),
        json!({"type": "text-delta", "id": "a", "delta": "kept"}),
        json!({"type": "text-end", "id": "a"}),
        json!({"type": "reasoning-start", "id": "r"}),
        json!({"type": "reasoning-delta", "id": "r", "delta": "lost"}),
        json!({"type": "tool-input-start", "toolCallId": "t", "toolName": "x"}),
        json!({"type": "tool-input-delta", "toolCallId": "t", "inputTextDelta": "{"}),
        json!({"type": "finish"}),
    ]);
    let turn = only_turn(&events);
    assert_eq!(turn.messages.len(), 1);
    assert_eq!(parts(&turn.messages[0]).len(), 1);
    assert_eq!(
        turn.extra.get("meta:ui_message_id"),
        Some(&json!("m1")),
        "message id kept (TP-029)"
    );
}

#[test]
fn abort_and_new_start_discard_the_pending_turn() {
    let events = run(&[
        json!({"type": "start"}),
        json!({"type": "text-start", "id": "a"}),
        json!({"type": "text-end", "id": "a"}),
        json!({"type": "abort", "reason": "user cancelled"}),
        json!({"type": "start"}),
        json!({"type": "text-start", "id": "b"}),
        json!({"type": "text-end", "id": "b"}),
        json!({"type": "start"}),
        json!({"type": "finish"}),
    ]);
    let reasons: Vec<&InterruptionReason> = events
        .iter()
        .filter_map(|event| match event {
            AssemblyEvent::Interrupted(interruption) => Some(&interruption.reason),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasons,
        [
            &InterruptionReason::Aborted(Some("user cancelled".into())),
            &InterruptionReason::Superseded
        ]
    );
    assert!(only_turn(&events).messages.is_empty());
}

#[test]
fn every_bijection_row() {
    let events = run(&[
        json!({"type": "start", "messageId": "m"}),
        json!({"type": "start-step"}),
        json!({"type": "reasoning-start", "id": "r", "providerMetadata": {"anthropic": {"signature": "sig=="}}}),
        json!({"type": "reasoning-delta", "id": "r", "delta": "think"}),
        json!({"type": "reasoning-end", "id": "r"}),
        json!({"type": "text-start", "id": "t"}),
        json!({"type": "text-delta", "id": "t", "delta": "Hel"}),
        json!({"type": "text-delta", "id": "t", "delta": "lo"}),
        json!({"type": "text-end", "id": "t"}),
        json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "get"}),
        json!({"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{\"a\":"}),
        json!({"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "1}"}),
        json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "get", "input": {"a": 1}}),
        json!({"type": "file", "url": "data:image/png;base64,iVBORw==", "mediaType": "image/png"}),
        json!({"type": "source-url", "sourceId": "s", "url": "https://example.com", "title": "Ex"}),
        json!({"type": "data-weather", "data": {"t": 21}}),
        json!({"type": "data-progress", "data": {"p": 1}, "transient": true}),
        json!({"type": "tool-output-available", "toolCallId": "c", "output": {"ok": true}}),
        json!({"type": "error", "errorText": "tool hiccup"}),
        json!({"type": "finish-step"}),
        json!({"type": "source-document", "sourceId": "d", "mediaType": "application/pdf", "title": "Doc"}),
        json!({"type": "finish", "finishReason": "stop"}),
    ]);
    let turn = only_turn(&events);
    let kinds: Vec<String> = turn
        .messages
        .iter()
        .map(|message| match message {
            TurnMessage::Thread(message) => {
                format!(
                    "{:?}[{}]",
                    message.message_type,
                    message
                        .parts
                        .iter()
                        .map(MessagePart::kind)
                        .collect::<Vec<_>>()
                        .join(",")
                )
            }
            TurnMessage::System(message) => message.event_type.clone(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "Response[thinking,text,tool-call,file]",
            "source.url",
            "data-weather",
            "Request[tool-return]",
            "error",
            "source.document"
        ]
    );
    let TurnMessage::Thread(response) = &turn.messages[0] else {
        panic!()
    };
    let [
        MessagePart::Thinking(thinking),
        MessagePart::Text(text),
        MessagePart::ToolCall(call),
        MessagePart::File(file),
    ] = response.parts.as_slice()
    else {
        panic!("{:#?}", response.parts)
    };
    assert_eq!(
        (
            thinking.provider_name.as_str(),
            thinking.signature.as_deref()
        ),
        ("anthropic", Some("sig=="))
    );
    assert_eq!(text.content, "Hello");
    assert_eq!(call.args, json!({"a": 1}));
    assert_eq!(file.content.data, "iVBORw==");
    let TurnMessage::Thread(request) = &turn.messages[3] else {
        panic!()
    };
    let MessagePart::ToolReturn(result) = &request.parts[0] else {
        panic!()
    };
    assert_eq!(
        (result.tool_name.as_str(), result.status),
        ("get", weft_thread::ToolReturnStatus::Success)
    );
    assert_eq!(
        response.finish_reason,
        Some(weft_thread::FinishReason::Stop),
        "finishReason goes to the last response message"
    );
    let TurnMessage::System(error) = &turn.messages[4] else {
        panic!()
    };
    assert_eq!(error.event_data, json!({"errorText": "tool hiccup"}));
    // Receipt times are non-decreasing and within the turn.
    let mut previous = Timestamp::parse(&turn.started_at).unwrap();
    for message in &turn.messages {
        let timestamp = Timestamp::parse(message.timestamp()).unwrap();
        assert!(timestamp >= previous);
        previous = timestamp;
    }
    assert!(Timestamp::parse(&turn.completed_at).unwrap() >= previous);
}

#[test]
fn error_outside_a_turn_is_reported_not_stored() {
    let events = run(&[json!({"type": "error", "errorText": "boom"})]);
    assert_eq!(events, [AssemblyEvent::StreamError("boom".into())]);
}

#[test]
fn sse_and_json_lines_give_the_same_chunks() {
    let lines = [
        r#"{"type":"start"}"#,
        r#"{"type":"text-start","id":"1"}"#,
        r#"{"type":"text-delta","id":"1","delta":"a\nb"}"#,
        r#"{"type":"text-end","id":"1"}"#,
        r#"{"type":"finish"}"#,
    ];
    let json_lines = lines.join("\n");
    let sse: String = lines
        .iter()
        .map(|line| format!("data: {line}\n\n"))
        .collect::<String>()
        + ": keep-alive\n\nevent: ping\ndata: \n\ndata: [DONE]\n\n";
    assert_eq!(
        ui_stream::parse_stream(&json_lines).unwrap(),
        ui_stream::parse_stream(&sse).unwrap()
    );
    assert!(ui_stream::parse_stream("data: {nope}\n\n").is_err());
}

#[test]
fn encoder_emits_only_v5_chunks_and_headers_are_documented() {
    let thread_text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/corpus/valid/full.json"
    ))
    .unwrap();
    let thread = weft_thread::Thread::from_json(&thread_text).unwrap();
    let chunks = ui_stream::encode_thread(&thread, &EncodeOptions::default());
    let v5 = [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-output-available",
        "tool-output-error",
        "source-url",
        "source-document",
        "file",
        "finish-step",
        "finish",
        "error",
    ];
    for chunk in &chunks {
        let value = chunk.to_value();
        let chunk_type = value["type"].as_str().unwrap();
        assert!(
            v5.contains(&chunk_type) || chunk_type.starts_with("data-"),
            "{chunk_type}"
        );
        assert!(value.get("finishReason").is_none());
    }
    let sse = ui_stream::to_sse(&chunks);
    assert!(sse.ends_with("data: [DONE]\n\n"));
    assert!(
        ui_stream::UI_MESSAGE_STREAM_HEADERS.contains(&("x-vercel-ai-ui-message-stream", "v1"))
    );
    assert!(ui_stream::UI_MESSAGE_STREAM_HEADERS.contains(&("content-type", "text/event-stream")));
    let back = ui_stream::assemble_thread(
        ui_stream::parse_stream(&sse).unwrap(),
        AssemblerOptions::default(),
        &ThreadDefaults::default(),
        clock(),
    )
    .unwrap();
    assert_eq!(back.thread, thread);
}

/// Found by the `stream_assemble` fuzz target: the output of a tool call the stream never
/// announced became a tool-return part naming an unknown `tool_call_id`, so the built thread
/// failed validation. It is now a stream error, and the turn keeps everything else.
#[test]
fn a_tool_output_for_an_unannounced_call_is_a_stream_error_not_a_dangling_part() {
    let events = run(&[
        json!({"type": "start", "messageId": "m1"}),
        json!({"type": "text-start", "id": "t"}),
        json!({"type": "text-delta", "id": "t", "delta": "hi"}),
        json!({"type": "text-end", "id": "t"}),
        json!({"type": "tool-output-available", "toolCallId": "ghost", "output": 2}),
        json!({"type": "tool-output-error", "toolCallId": "ghost2", "errorText": "x"}),
        json!({"type": "finish"}),
    ]);
    let errors: Vec<&String> = events
        .iter()
        .filter_map(|event| match event {
            AssemblyEvent::StreamError(text) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 2, "{events:#?}");
    assert!(errors[0].contains("`ghost`"), "{}", errors[0]);
    let turn = only_turn(&events);
    let all: Vec<&MessagePart> = turn.messages.iter().flat_map(parts).collect();
    assert_eq!(all.len(), 1, "only the text part: {all:#?}");

    // An announced call's output is still a tool-return part.
    let events = run(&[
        json!({"type": "start", "messageId": "m2"}),
        json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "add", "input": {"a": 1}}),
        json!({"type": "tool-output-available", "toolCallId": "c1", "output": 2}),
        json!({"type": "finish"}),
    ]);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AssemblyEvent::StreamError(_))),
        "{events:#?}"
    );
    let turn = only_turn(&events);
    let all: Vec<&MessagePart> = turn.messages.iter().flat_map(parts).collect();
    assert_eq!(all.len(), 2, "{all:#?}");
}
