//! JSON forms of messages, turns and errors validate against UPP-1.2 Appendix A and round-trip
//! losslessly (UPP-177, UPP-253–255, UPP-108).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use weft_provider::adapters::scripted::{self, Script, ScriptedResponse, ScriptedToolCall};
use weft_provider::{
    AudioBlock, BinaryBlock, Blob, ContentBlock, DocumentBlock, DocumentSource, ErrorCode,
    ImageBlock, ImageSource, LlmOptions, Message, MessageOptions, Modality, ReasoningBlock, Thread,
    Tool, Turn, UppError, UserMessage, VideoBlock, llm,
};

fn schema(name: &str) -> Value {
    let path = format!(
        "{}/../../testdata/schemas/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The turn schema refers to `#/definitions/Message`; give it the message schema's definitions.
fn turn_schema() -> Value {
    let mut turn = schema("upp-1.2-turn.schema.json");
    turn["definitions"] = schema("upp-1.2-message.schema.json")["definitions"].clone();
    turn
}

fn assert_valid(schema: &Value, instance: &Value) {
    let validator = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{instance:#}");
}

fn message_schema(kind: &str) -> Value {
    let mut s = schema("upp-1.2-message.schema.json");
    s["$ref"] = json!(format!("#/definitions/{kind}"));
    s
}

fn every_block() -> Vec<ContentBlock> {
    vec![
        ContentBlock::text("hello"),
        ContentBlock::Image(ImageBlock {
            source: ImageSource::Url {
                url: "https://example.com/a.png".into(),
            },
            mime_type: "image/png".into(),
            width: Some(2),
            height: Some(3),
        }),
        ContentBlock::Image(ImageBlock {
            source: ImageSource::Bytes {
                data: Blob(vec![1, 2]),
            },
            mime_type: "image/png".into(),
            width: None,
            height: None,
        }),
        ContentBlock::Document(DocumentBlock {
            source: DocumentSource::Text { data: "doc".into() },
            mime_type: "text/plain".into(),
            title: Some("t".into()),
        }),
        ContentBlock::Document(DocumentBlock {
            source: DocumentSource::Base64 {
                data: "JVBERg==".into(),
            },
            mime_type: "application/pdf".into(),
            title: None,
        }),
        ContentBlock::Audio(AudioBlock {
            data: Blob(vec![9]),
            mime_type: "audio/wav".into(),
            duration: Some(0.5),
        }),
        ContentBlock::Video(VideoBlock {
            data: Blob(vec![8]),
            mime_type: "video/mp4".into(),
            duration: None,
            width: Some(1),
            height: Some(1),
        }),
        ContentBlock::Binary(BinaryBlock {
            data: Blob(vec![7]),
            mime_type: "application/zip".into(),
            metadata: Some(serde_json::Map::from_iter([(
                "name".to_string(),
                json!("a.zip"),
            )])),
        }),
    ]
}

#[test]
fn upp_253_messages_with_every_block_validate_and_round_trip() {
    let mut metadata = serde_json::Map::new();
    metadata.insert("future".into(), json!({"anything": [1, {"x": null}]}));
    let user = Message::User(UserMessage::with_options(
        every_block(),
        MessageOptions {
            id: Some("u1".into()),
            metadata: Some(metadata),
        },
    ));
    let json = serde_json::to_value(&user).unwrap();
    assert_valid(&message_schema("UserMessage"), &json);
    assert_eq!(
        serde_json::from_value::<Message>(json.clone()).unwrap(),
        user
    );
    assert_eq!(
        json["content"][2]["source"]["data"], "AQI=",
        "bytes are base64"
    );
    assert!(
        json["timestamp"].as_str().unwrap().ends_with('Z'),
        "ISO 8601 UTC"
    );
}

#[tokio::test]
async fn upp_255_a_turn_with_tools_validates_and_round_trips() {
    let model = scripted::model(Script {
        fresh_ids: false,
        responses: vec![
            ScriptedResponse {
                reasoning: Some("thinking".into()),
                text: Some("calling".into()),
                tool_calls: vec![ScriptedToolCall {
                    id: Some("c1".into()),
                    name: "add".into(),
                    arguments: json!({"a": 1}),
                    after: vec![],
                }],
                ..ScriptedResponse::default()
            },
            ScriptedResponse::text("{\"sum\": 1}"),
        ],
    });
    let add = Tool::new(
        "add",
        "",
        json!({"type": "object"}),
        |args: Value, _c| async move { Ok(args["a"].clone()) },
    )
    .with_approval(|_: &Value| async { Ok(true) });
    let turn = llm(LlmOptions::new(model)
        .tool(add)
        .structure(json!({"type": "object"})))
    .unwrap()
    .generate(&[], "add")
    .await
    .unwrap();
    let json = serde_json::to_value(&turn).unwrap();
    assert_valid(&turn_schema(), &json);
    assert_eq!(json["toolExecutions"][0]["approved"], true);
    assert_eq!(json["data"], json!({"sum": 1}));
    let back: Turn = serde_json::from_value(json).unwrap();
    assert_eq!(back, turn);
}

#[test]
fn upp_254_errors_validate() {
    let error = UppError::new(
        ErrorCode::ContextLengthExceeded,
        "too long",
        "openai",
        Modality::Llm,
    )
    .with_status(400)
    .with_cause(json!({"error": {"code": "context_length_exceeded"}}));
    let json = serde_json::to_value(&error).unwrap();
    assert_valid(&schema("upp-1.2-error.schema.json"), &json);
    assert_eq!(serde_json::from_value::<UppError>(json).unwrap(), error);
}

#[test]
fn upp_106_108_thread_json_round_trip() {
    let mut thread = Thread::new();
    thread.user("hi");
    thread.push([Message::Assistant(
        weft_provider::AssistantMessage::new(
            vec![
                ContentBlock::Reasoning(ReasoningBlock {
                    text: "r".into(),
                    signature: Some("sig".into()),
                    metadata: None,
                }),
                ContentBlock::text("a"),
            ],
            vec![],
            MessageOptions::default(),
        )
        .unwrap(),
    )]);
    let json = serde_json::to_value(&thread).unwrap();
    for key in ["id", "messages", "createdAt", "updatedAt"] {
        assert!(json.get(key).is_some());
    }
    let back = Thread::from_json(serde_json::from_value(json).unwrap());
    assert_eq!(back, thread);
}

#[test]
fn malformed_messages_are_errors_not_panics() {
    for bad in [
        json!({"type": "user"}),
        json!({"type": "robot", "id": "x", "timestamp": "2026-01-01T00:00:00Z", "content": []}),
        json!({"type": "user", "id": "x", "timestamp": "yesterday", "content": []}),
        json!({"type": "user", "id": "x", "timestamp": "2026-01-01T00:00:00Z", "content": [{"type": "hologram"}]}),
        json!({"type": "tool_result", "id": "x", "timestamp": "2026-01-01T00:00:00Z", "results": [{"result": 1}]}),
    ] {
        assert!(serde_json::from_value::<Message>(bad).is_err());
    }
}
