//! Prompt tools (tools §1, §4; SA-094): a prompt with `exposeAsTool` called from another
//! prompt runs a nested invocation on a child run — checked on the exact requests the models
//! receive, for each `include*` flag, across a suspend and resume; and images left out of the
//! requests of a model without vision (SA-090).

mod common;

use common::{Requests, Seen, call, calls, recording, runtime};

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use weft_provider::{ContentBlock, Image, Message, ProviderRegistry};
use weft_runtime::event::{EventKind, RunEvent};
use weft_runtime::spec::RunSpec;
use weft_runtime::{RunEnd, RunOutcome};
use weft_standard::{Project, SessionOptions, SessionStatus, run_session};
use weft_store::Store;

/// A lead (`ai_human`) whose prompt lists `entry` (the prompt tool `search`); `search` looks a
/// term up (`lookup`, a project tool) and reads files.
fn write_project(
    dir: &Path,
    (entry, extra, search_keys): (&str, &str, &str),
    lead: &[Value],
    search: &[Value],
) -> Project {
    let script = |name: &str| format!("recording:{}", dir.join(name).display());
    let files = [
        (
            "weft.toml",
            format!("name = \"t\"\nmodel = \"{}\"\n{extra}", script("lead.json")),
        ),
        (
            "tools/lookup.toml",
            "name = \"lookup\"\nparameters = { type = \"object\", properties = { term = { type = \"string\" } } }\n".into(),
        ),
        ("agents/lead.toml", "name = \"lead\"\n[sideA]\nprompt = \"lead\"\n".into()),
        (
            "prompts/lead.toml",
            format!("name = \"lead\"\nsystem = \"You lead.\"\ntools = [{entry}]\n"),
        ),
        (
            "prompts/search.toml",
            format!(
                "name = \"search\"\nexposeAsTool = true\ntoolDescription = \"Searches the notes.\"\nsystem = \"You search.\"\nmodel = \"{}\"\ntools = [\"lookup\", \"read_file\"]\n{search_keys}",
                script("search.json")
            ),
        ),
        ("lead.json", json!({ "responses": lead }).to_string()),
        ("search.json", json!({ "responses": search }).to_string()),
        ("notes/plan.txt", "the plan".into()),
    ];
    common::write_files(dir, files);
    Project::load(dir).expect("valid project")
}

struct Ran {
    dir: tempfile::TempDir,
    store: Store,
    outcome: RunOutcome,
    seen: Requests,
}

async fn run(entry: &str, extra: &str, lead: &[Value], search: &[Value]) -> Ran {
    run_with((entry, extra, ""), lead, search).await
}

/// [`run`] with `search_keys` added to the prompt tool's definition.
async fn run_with(keys: (&str, &str, &str), lead: &[Value], search: &[Value]) -> Ran {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(dir.path(), keys, lead, search);
    let store = common::sqlite_store(dir.path()).await;
    let seen: Requests = Arc::default();
    let spec = lead_spec(&project, "find the plan");
    let outcome = runtime(&store, &seen)
        .start(spec, false)
        .await
        .expect("start")
        .outcome()
        .await
        .expect("outcome");
    Ran {
        dir,
        store,
        outcome,
        seen,
    }
}

impl Ran {
    fn requests(&self, script: &str) -> Vec<Seen> {
        common::requests(&self.seen, script)
    }

    /// The result the lead's model received for its call `id`: (result, is_error).
    fn lead_received(&self, id: &str) -> (Value, bool) {
        self.requests("lead.json")
            .iter()
            .flat_map(|s| s.messages.clone())
            .find_map(|m| match m {
                Message::ToolResult(r) => r
                    .results
                    .into_iter()
                    .find(|r| r.tool_call_id == id)
                    .map(|r| (r.result, r.is_error)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("the lead's model received no result for {id}"))
    }

    async fn events(&self) -> Vec<RunEvent> {
        common::events(&self.store, &self.outcome.run_id).await
    }
}

/// The nested invocation: it looks the term up and reads a file it does not have, then
/// answers.
fn search_script() -> Vec<Value> {
    vec![
        calls(&[
            call("s1", "lookup", json!({"term": "plan"})),
            call("s2", "read_file", json!({"path": "missing.txt"})),
        ]),
        json!({"text": "the plan is in notes/plan.txt"}),
    ]
}

fn lead_script(args: Value) -> Vec<Value> {
    vec![
        calls(&[call("l1", "search", args)]),
        json!({"text": "done"}),
    ]
}

#[tokio::test]
async fn a_prompt_tool_runs_a_nested_invocation_and_returns_its_final_text() {
    let ran = run(
        "\"search\"",
        "",
        &lead_script(json!({"message": "where is the plan?"})),
        &search_script(),
    )
    .await;
    assert_eq!(
        ran.outcome.end,
        RunEnd::Completed {
            output: "done".into()
        }
    );
    // The lead's model is offered the prompt as a tool, with one string argument.
    let lead = ran.requests("lead.json");
    let (_, schema) = lead[0]
        .tools
        .iter()
        .find(|(name, _)| name == "search")
        .expect("the prompt tool is offered");
    assert_eq!(schema["required"], json!(["message"]));
    assert_eq!(schema["properties"]["message"]["type"], "string");
    // The nested invocation: the prompt's own system text and tools, a fresh conversation
    // whose only message is the call's argument.
    let search = ran.requests("search.json");
    assert_eq!(search.len(), 2, "asked once per step");
    assert_eq!(search[0].system.as_deref(), Some("You search."));
    let tools: Vec<&str> = search[0].tools.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(tools, ["lookup", "read_file"]);
    assert_eq!(search[0].messages.len(), 1);
    assert_eq!(search[0].messages[0].text(), "where is the plan?");
    // The caller's model receives the final text, byte for byte (by default nothing else).
    assert_eq!(
        ran.lead_received("l1"),
        (json!("the plan is in notes/plan.txt"), false)
    );
    // The invocation's events are under the caller's agent path.
    let events = ran.events().await;
    let nested: Vec<&str> = events
        .iter()
        .filter(|e| e.agent.as_str() == "lead/search")
        .filter_map(|e| match &e.kind {
            EventKind::ToolCallEnd { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nested, ["lookup", "read_file"]);
}

#[tokio::test]
async fn the_include_flags_shape_what_the_callers_model_receives() {
    let lookup =
        json!({"name": "lookup", "arguments": {"term": "plan"}, "result": {"term": "plan"}});
    let text = json!("the plan is in notes/plan.txt");
    let cases = [
        (
            "includeToolCalls = true",
            json!({"text": text, "toolCalls": [lookup]}),
        ),
        (
            "includeErrors = true",
            json!({"text": text, "errors": [null]}),
        ),
        (
            "includeTextResponse = false, includeToolCalls = true, includeErrors = true",
            json!({"toolCalls": [lookup], "errors": [null]}),
        ),
        ("includeTextResponse = false", json!({})),
    ];
    for (flags, mut expected) in cases {
        let entry =
            format!("{{ name = \"search\", initUserMessageProperty = \"query\", {flags} }}");
        let ran = run(
            &entry,
            "",
            &lead_script(json!({"query": "where is the plan?"})),
            &search_script(),
        )
        .await;
        assert!(
            matches!(ran.outcome.end, RunEnd::Completed { .. }),
            "{flags}: {:?}",
            ran.outcome.end
        );
        // The mapped argument is the first message, and the schema asks for it.
        let search = ran.requests("search.json");
        assert_eq!(
            search[0].messages[0].text(),
            "where is the plan?",
            "{flags}"
        );
        let lead = ran.requests("lead.json");
        let (_, schema) = lead[0]
            .tools
            .iter()
            .find(|(n, _)| n == "search")
            .expect("offered");
        assert_eq!(schema["required"], json!(["query"]), "{flags}");
        let (received, is_error) = ran.lead_received("l1");
        assert!(!is_error, "{flags}");
        // The failed read's error is the one the nested model received.
        if let Some(errors) = expected.get_mut("errors") {
            let error = search[1]
                .messages
                .iter()
                .find_map(|m| match m {
                    Message::ToolResult(r) => {
                        r.results.iter().find(|r| r.tool_call_id == "s2").cloned()
                    }
                    _ => None,
                })
                .expect("the nested model got the read's result");
            assert!(error.is_error);
            errors[0] = json!({"name": "read_file", "arguments": {"path": "missing.txt"}, "error": error.result});
        }
        assert_eq!(
            serde_json::to_string(&received).expect("json"),
            serde_json::to_string(&expected).expect("json"),
            "{flags}"
        );
    }
}

#[tokio::test]
async fn a_failed_nested_invocation_is_a_clear_tool_error_and_the_caller_goes_on() {
    // The nested model has no second answer: the invocation fails after its tool round.
    let nested = &search_script()[..1];
    for (entry, with_errors) in [
        ("\"search\"", false),
        ("{ name = \"search\", includeErrors = true }", true),
    ] {
        let ran = run(
            entry,
            "",
            &lead_script(json!({"message": "where is the plan?"})),
            nested,
        )
        .await;
        assert_eq!(
            ran.outcome.end,
            RunEnd::Completed {
                output: "done".into()
            },
            "{entry}: the caller's session goes on"
        );
        let (received, is_error) = ran.lead_received("l1");
        assert!(is_error, "{entry}");
        let text = received.as_str().expect("an error text").to_owned();
        assert!(
            text.starts_with("Prompt tool search (reference: ")
                && text.contains(") failed (error): "),
            "{entry}: {text}"
        );
        assert!(text.contains("has no answer 2"), "{entry}: {text}");
        assert_eq!(
            text.contains("Tool errors: [{\"name\":\"read_file\""),
            with_errors,
            "{entry}: {text}"
        );
    }
}

#[tokio::test]
async fn a_resumed_run_does_not_ask_the_nested_model_again() {
    use weft_store::{Decisions as _, ToolLedger as _, Verdict};
    // The nested invocation's `lookup` waits for a person: the run suspends inside it.
    let ran = run(
        "\"search\"",
        "requiresApproval = [\"lookup\"]\n",
        &lead_script(json!({"message": "where is the plan?"})),
        &search_script(),
    )
    .await;
    let RunEnd::AwaitingDecision { decisions } = &ran.outcome.end else {
        panic!(
            "the run waits for the nested call's decision: {:?}",
            ran.outcome.end
        )
    };
    let [decision] = decisions.as_slice() else {
        panic!("one decision: {decisions:?}")
    };
    assert_eq!(decision.tool_name, "lookup");
    assert_eq!(ran.requests("search.json").len(), 1);
    assert_eq!(ran.requests("lead.json").len(), 1);
    let run_id = ran.outcome.run_id.clone();
    ran.store
        .decide(&run_id, &decision.id, &Verdict::Approve)
        .await
        .expect("approve");
    let resumed = runtime(&ran.store, &ran.seen)
        .resume(&run_id, weft_runtime::ResumeOptions::default(), false)
        .await
        .expect("resume")
        .outcome()
        .await
        .expect("outcome");
    assert_eq!(
        resumed.end,
        RunEnd::Completed {
            output: "done".into()
        }
    );
    // Each model was asked each question once: the resumed process replayed the recorded
    // answers (the lead's call, the nested model's first step) and asked only what was new.
    let search = ran.requests("search.json");
    assert_eq!(search.len(), 2, "{search:#?}");
    assert_eq!(search[1].messages.len(), 3);
    assert_eq!(ran.requests("lead.json").len(), 2);
    assert_eq!(
        ran.lead_received("l1"),
        (json!("the plan is in notes/plan.txt"), false)
    );
    // The approved call ran once.
    let ledger = ran.store.tool_calls(&run_id).await.expect("ledger");
    let lookups: Vec<_> = ledger.iter().filter(|c| c.tool_name == "lookup").collect();
    assert_eq!(lookups.len(), 1);
    assert_eq!(lookups[0].status, weft_store::ToolCallStatus::Completed);
}

#[tokio::test]
async fn a_required_schema_is_the_tools_schema_and_its_arguments_the_first_message() {
    let schema = json!({
        "type": "object",
        "properties": {"topic": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["topic"],
    });
    let keys = "requiredSchema = { type = \"object\", properties = { topic = { type = \"string\" }, limit = { type = \"integer\" } }, required = [\"topic\"] }\n";
    let ran = run_with(
        ("\"search\"", "", keys),
        &lead_script(json!({"topic": "plans", "limit": 2})),
        &search_script(),
    )
    .await;
    assert!(matches!(ran.outcome.end, RunEnd::Completed { .. }));
    let lead = ran.requests("lead.json");
    let (_, offered) = lead[0]
        .tools
        .iter()
        .find(|(n, _)| n == "search")
        .expect("offered");
    assert_eq!(offered, &schema);
    // Without a mapped argument, the whole arguments (JSON text) are the first message.
    let search = ran.requests("search.json");
    assert_eq!(
        search[0].messages[0].text(),
        r#"{"topic":"plans","limit":2}"#
    );
}

#[tokio::test]
async fn the_attachments_argument_is_copied_into_the_nested_invocations_folder() {
    let entry = "{ name = \"search\", initUserMessageProperty = \"query\", initAttachmentsProperty = \"files\" }";
    let nested = vec![
        calls(&[call(
            "s1",
            "read_file",
            json!({"path": "attachments/plan.txt"}),
        )]),
        json!({"text": "read it"}),
    ];
    let ran = run(
        entry,
        "",
        &lead_script(json!({"query": "read the plan", "files": ["notes/plan.txt"]})),
        &nested,
    )
    .await;
    assert!(matches!(ran.outcome.end, RunEnd::Completed { .. }));
    let search = ran.requests("search.json");
    assert_eq!(
        search[0].messages[0].text(),
        "read the plan\n\nAttachments:\n- attachments/plan.txt"
    );
    // The copy is what the nested read_file read, in the invocation's own folder.
    let read = search[1]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) => r.results.first().cloned(),
            _ => None,
        })
        .expect("a read result");
    assert!(!read.is_error, "{read:?}");
    assert!(read.result.to_string().contains("the plan"), "{read:?}");
    assert_eq!(ran.lead_received("l1"), (json!("read it"), false));
    // The parent's file is where it was.
    assert!(ran.dir.path().join("notes/plan.txt").is_file());
}

/// A session of `lead` whose history holds a user message with an image, on a model with or
/// without vision: what the model received, and the session's final history.
async fn session_with_an_image(vision: bool) -> (Vec<Seen>, Vec<Message>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = write_project(
        dir.path(),
        ("\"lookup\"", "", ""),
        // The scripted model answers by the count of assistant messages in the request:
        // the history's one tool call is the first.
        &[
            json!({"text": "(the earlier answer)"}),
            json!({"text": "a cat"}),
        ],
        &[],
    );
    let seen: Requests = Arc::default();
    let mut providers = ProviderRegistry::with_builtins();
    providers.register("recording", recording(seen.clone(), vision));
    let mut options = SessionOptions::new(project.dir());
    options.providers = Arc::new(providers);
    let image = Image::from_bytes(vec![137, 80, 78, 71], "image/png").to_block();
    // A tool that answered with a picture among content parts (an MCP screenshot).
    let screenshot =
        weft_provider::Message::ToolResult(weft_provider::ToolResultMessage::new(vec![
            weft_provider::ToolResult {
                tool_call_id: "shot-1".into(),
                result: json!([
                    {"type": "text", "text": "the screen"},
                    {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
                ]),
                is_error: false,
            },
        ]));
    let asked = weft_provider::Message::Assistant(
        weft_provider::AssistantMessage::new(
            Vec::new(),
            vec![weft_provider::ToolCall::new("shot-1", "lookup", json!({}))],
            weft_provider::MessageOptions::default(),
        )
        .expect("no binary content"),
    );
    options.initial_state = options
        .initial_state
        .with_message(Message::User(weft_provider::UserMessage::new(vec![
            ContentBlock::text("look at this"),
            image,
        ])))
        .with_message(asked)
        .with_message(screenshot);
    let outcome = run_session(&project, "lead", "what is it?", &options)
        .await
        .expect("session");
    assert_eq!(
        outcome.status,
        SessionStatus::Completed,
        "{}",
        outcome.message
    );
    let seen = seen.lock().expect("lock").clone();
    (seen, outcome.state_a.messages_vec())
}

#[tokio::test]
async fn a_model_without_vision_gets_a_note_for_each_image_and_the_history_keeps_it() {
    let (seen, history) = session_with_an_image(false).await;
    let [request] = seen.as_slice() else {
        panic!("one request: {seen:#?}")
    };
    let sent = &request.messages[0];
    assert_eq!(
        sent.content(),
        [
            ContentBlock::text("look at this"),
            ContentBlock::text(weft_standard::vision::IMAGE_OMITTED)
        ]
    );
    // The tool's picture too; its other parts stay.
    let Message::ToolResult(shot) = &request.messages[2] else {
        panic!("the tool result: {:#?}", request.messages)
    };
    assert_eq!(
        shot.results[0].result,
        json!([
            {"type": "text", "text": "the screen"},
            {"type": "text", "text": weft_standard::vision::IMAGE_OMITTED}
        ])
    );
    assert_eq!(request.messages[3].text(), "what is it?");
    // The stored conversation still has the images.
    assert_eq!(history[0].images().len(), 1);
    assert_eq!(history[0].content().len(), 2);
    let Message::ToolResult(kept) = &history[2] else {
        panic!("{history:#?}")
    };
    assert_eq!(kept.results[0].result[1]["type"], "image");

    // A model with vision receives the images themselves.
    let (seen, _) = session_with_an_image(true).await;
    assert_eq!(seen[0].messages[0].images().len(), 1);
    assert!(!seen[0].messages[0].text().contains("image omitted"));
    let Message::ToolResult(shot) = &seen[0].messages[2] else {
        panic!("the tool result")
    };
    assert_eq!(shot.results[0].result[1]["type"], "image");
}

/// A run of the project's agent `lead` with `input`.
fn lead_spec(project: &Project, input: &str) -> RunSpec {
    common::session_spec(project, "lead", input)
}

/// A durable run of `lead` on `thread` (a new one when `None`) of the project in `dir`.
async fn run_lead(dir: &Path, store: &Store, seen: &Requests, thread: Option<&str>) -> RunOutcome {
    let project = Project::load(dir).expect("valid project");
    let spec = lead_spec(&project, "remind me");
    runtime(store, seen)
        .start_on(thread, spec, false)
        .await
        .expect("start")
        .outcome()
        .await
        .expect("outcome")
}

#[tokio::test]
async fn the_model_schedules_lists_and_removes_effects_of_its_thread() {
    use weft_store::{Decisions as _, ScheduledEffects as _, Verdict};
    let before = chrono::Utc::now().timestamp_micros();
    let lead = vec![
        calls(&[
            call(
                "l1",
                "schedule_effect",
                json!({"name": "lookup", "arguments": {"term": "tea"}, "delay": 60000}),
            ),
            call("l2", "schedule_effect", json!({"name": "nope"})),
            // Waits for a person: the run suspends after l1 ran, and a resume replays it.
            call("l3", "lookup", json!({"term": "now"})),
        ]),
        calls(&[
            call("l4", "get_scheduled_effects", json!({})),
            call(
                "l5",
                "remove_scheduled_effect",
                json!({"id": "e-0000000000000000"}),
            ),
        ]),
        json!({"text": "done"}),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    write_project(
        dir.path(),
        (
            "\"lookup\", \"schedule_effect\", \"get_scheduled_effects\", \"remove_scheduled_effect\"",
            "requiresApproval = [\"lookup\"]\n",
            "",
        ),
        &lead,
        &[],
    );
    let store = common::sqlite_store(dir.path()).await;
    let seen: Requests = Arc::default();
    let first = run_lead(dir.path(), &store, &seen, None).await;
    let RunEnd::AwaitingDecision { decisions } = &first.end else {
        panic!("waits for l3's decision: {:?}", first.end)
    };
    store
        .decide(&first.run_id, &decisions[0].id, &Verdict::Approve)
        .await
        .expect("approve");
    let resumed = runtime(&store, &seen)
        .resume(&first.run_id, weft_runtime::ResumeOptions::default(), false)
        .await
        .expect("resume")
        .outcome()
        .await
        .expect("outcome");
    assert_eq!(
        resumed.end,
        RunEnd::Completed {
            output: "done".into()
        }
    );
    let after = chrono::Utc::now().timestamp_micros();
    let ran = Ran {
        dir,
        store: store.clone(),
        outcome: resumed,
        seen: seen.clone(),
    };

    // The model is offered the tools, `name` limited to the prompt's tools.
    let offered = &ran.requests("lead.json")[0].tools;
    let (_, schema) = offered
        .iter()
        .find(|(n, _)| n == "schedule_effect")
        .expect("offered");
    let names = schema["properties"]["name"]["enum"]
        .as_array()
        .expect("enum");
    assert!(names.contains(&json!("lookup")), "{names:?}");
    assert!(!names.contains(&json!("read_file")), "{names:?}");

    // One effect, on the run's thread, once (the resume replayed l1), a minute out.
    let thread = common::thread_of(&store, &first.run_id).await;
    let effects = store.scheduled_effects(&thread).await.expect("effects");
    let [effect] = effects.as_slice() else {
        panic!("one effect: {effects:#?}")
    };
    assert_eq!(effect.call.name, "lookup");
    assert_eq!(effect.call.arguments, json!({"term": "tea"}));
    assert!(
        (before + 60_000_000..=after + 60_000_000).contains(&effect.due_at),
        "{effect:?}"
    );
    let (scheduled, failed) = ran.lead_received("l1");
    assert!(!failed);
    assert_eq!(scheduled["id"], effect.id.as_str());
    assert_eq!(scheduled["name"], "lookup");
    // A tool the prompt does not have is an error the model reads; nothing is scheduled.
    let (refused, failed) = ran.lead_received("l2");
    assert!(failed, "{refused}");
    assert!(refused.to_string().contains("nope"), "{refused}");
    let (listed, _) = ran.lead_received("l4");
    assert_eq!(listed, json!([scheduled]));
    assert_eq!(
        ran.lead_received("l5").0,
        json!({"id": "e-0000000000000000", "removed": false, "reason": "no such effect is still scheduled on this conversation"})
    );

    // The next run of the thread removes it by the id it was given.
    let mut lead = lead;
    lead.push(calls(&[call(
        "l6",
        "remove_scheduled_effect",
        json!({"id": effect.id}),
    )]));
    lead.push(json!({"text": "removed"}));
    std::fs::write(
        ran.dir.path().join("lead.json"),
        json!({"responses": lead}).to_string(),
    )
    .expect("script");
    let second = run_lead(ran.dir.path(), &store, &seen, Some(&thread)).await;
    assert_eq!(
        second.end,
        RunEnd::Completed {
            output: "removed".into()
        }
    );
    assert_eq!(
        ran.lead_received("l6").0,
        json!({"id": effect.id, "removed": true})
    );
    assert!(
        store
            .scheduled_effects(&thread)
            .await
            .expect("effects")
            .is_empty()
    );
}

/// A nested invocation is not the conversation's own agent: its `schedule_effect` call is an
/// error its model reads (and can answer), and nothing is scheduled on the thread.
#[tokio::test]
async fn a_nested_invocation_cannot_schedule_effects() {
    use weft_store::ScheduledEffects as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let search = [
        calls(&[call(
            "s1",
            "schedule_effect",
            json!({"name": "lookup", "arguments": {"term": "tea"}, "delay": 60000}),
        )]),
        json!({"text": "could not schedule it"}),
    ];
    write_project(
        dir.path(),
        ("\"search\"", "", ""),
        &lead_script(json!({"message": "remind me"})),
        &search,
    );
    // The prompt tool offers schedule_effect to its nested model.
    let path = dir.path().join("prompts/search.toml");
    let text = std::fs::read_to_string(&path)
        .expect("search.toml")
        .replace(
            "tools = [\"lookup\", \"read_file\"]",
            "tools = [\"lookup\", \"read_file\", \"schedule_effect\"]",
        );
    std::fs::write(&path, text).expect("search.toml");
    let store = common::sqlite_store(dir.path()).await;
    let seen: Requests = Arc::default();
    let outcome = run_lead(dir.path(), &store, &seen, None).await;
    assert_eq!(
        outcome.end,
        RunEnd::Completed {
            output: "done".into()
        }
    );
    let ran = Ran {
        dir,
        store: store.clone(),
        outcome,
        seen,
    };
    let search = ran.requests("search.json");
    assert!(
        search[0].tool_names().contains(&"schedule_effect"),
        "offered: {:?}",
        search[0].tool_names()
    );
    let refused = search[1]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) => r.results.iter().find(|r| r.tool_call_id == "s1").cloned(),
            _ => None,
        })
        .expect("s1's result");
    assert!(refused.is_error, "{refused:?}");
    assert!(
        refused
            .result
            .to_string()
            .contains("only the conversation's own agent schedules effects"),
        "{refused:?}"
    );
    assert_eq!(
        ran.lead_received("l1"),
        (json!("could not schedule it"), false)
    );
    let thread = common::thread_of(&store, &ran.outcome.run_id).await;
    assert!(
        store
            .scheduled_effects(&thread)
            .await
            .expect("effects")
            .is_empty()
    );
}
