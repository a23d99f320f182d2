//! What a validation finding says and where: the type a field has instead of the one it
//! needs, the rule and pointer, and the one-line form `weft thread validate` prints.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use weft_thread::{Rule, Severity, validate};

/// A valid thread whose user prompt carries `item` after its text.
fn thread_with_user_item(item: Value) -> Value {
    let agent = "550e8400-e29b-41d4-a716-446655440001";
    json!({
        "version": "0.0.3", "thread_id": "550e8400-e29b-41d4-a716-446655440000",
        "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:03Z",
        "agents": {agent: {"agent_id": agent, "agent_name": "viewer", "created_at": "2025-01-01T00:00:00Z"}},
        "turns": [{"turn_type": "agent", "agent_id": agent, "started_at": "2025-01-01T00:00:01Z",
            "completed_at": "2025-01-01T00:00:03Z", "messages": [
            {"message_type": "request", "timestamp": "2025-01-01T00:00:01Z", "agent_id": agent,
             "parts": [{"part_kind": "user-prompt", "content": ["look at this", item]}]},
            {"message_type": "response", "timestamp": "2025-01-01T00:00:02Z", "agent_id": agent,
             "parts": [{"part_kind": "text", "content": "a cat"}]}]}]
    })
}

fn image(force_download: Value) -> Value {
    json!({"kind": "image-url", "url": "https://example.com/cat.png", "identifier": "cat",
           "force_download": force_download})
}

#[test]
fn an_optional_boolean_of_another_type_is_a_field_type_error_naming_both() {
    assert!(validate(&thread_with_user_item(image(json!(true)))).is_valid());
    for (value, named) in [
        (json!("yes"), "a string"),
        (json!(1), "a number"),
        (json!(null), "null"),
        (json!([]), "an array"),
        (json!({}), "an object"),
    ] {
        let report = validate(&thread_with_user_item(image(value)));
        let errors: Vec<_> = report.errors().collect();
        let [error] = errors.as_slice() else {
            panic!("one error: {errors:#?}")
        };
        assert_eq!(error.rule, Rule::FieldType);
        assert_eq!(error.severity, Severity::Error);
        assert_eq!(
            error.pointer,
            "/turns/0/messages/0/parts/0/content/1/force_download"
        );
        assert_eq!(
            error.message,
            format!("`force_download` must be a boolean when present, not {named}")
        );
        // The line `weft thread validate` prints: severity, rule, where, what.
        assert_eq!(
            error.to_string(),
            format!(
                "error[{}] /turns/0/messages/0/parts/0/content/1/force_download: {}",
                error.rule, error.message
            )
        );
    }
}

#[test]
fn a_finding_names_its_rule_by_number_when_the_spec_numbers_it() {
    // A document that is not an object: a finding about the root.
    let report = validate(&json!(["not", "a", "thread"]));
    let error = report.errors().next().unwrap();
    assert!(error.to_string().starts_with("error["), "{error}");
    assert!(error.to_string().contains("] (root): "), "{error}");
    assert_eq!(Rule::FieldType.to_string(), "field-type");
    // The spec's rule 2 (a tool return matches a call), with its code.
    let numbered = Rule::ToolCallId;
    assert_eq!(
        numbered.to_string(),
        format!("rule {} ({})", numbered.number().unwrap(), numbered.code())
    );
    assert_eq!(numbered.number(), Some(2));
}

#[test]
fn a_system_event_type_is_known_by_name_or_by_its_extension_prefix() {
    let agent = "550e8400-e29b-41d4-a716-446655440001";
    let with_event = |event_type: &str| {
        json!({
            "version": "0.0.3", "thread_id": "550e8400-e29b-41d4-a716-446655440000",
            "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:03Z",
            "agents": {agent: {"agent_id": agent, "agent_name": "a", "created_at": "2025-01-01T00:00:00Z"}},
            "turns": [{"turn_type": "agent", "agent_id": agent, "started_at": "2025-01-01T00:00:01Z",
                "completed_at": "2025-01-01T00:00:03Z", "messages": [
                {"message_type": "system", "timestamp": "2025-01-01T00:00:02Z",
                 "event_type": event_type, "event_data": {}}]}]
        })
    };
    let unknown = |event_type: &str| {
        let report = validate(&with_event(event_type));
        assert!(report.is_valid(), "{event_type}: {:#?}", report.findings);
        report
            .findings
            .iter()
            .filter(|f| f.rule == Rule::UnknownExtension)
            .count()
    };
    for known in [
        "agent.handoff",
        "thread.end",
        "data-chart",
        "meta:timing",
        "custom:acme",
        "source.url",
    ] {
        assert_eq!(unknown(known), 0, "{known}");
    }
    // Kept unchanged, with a warning.
    assert_eq!(unknown("acme.thing"), 1);
}
