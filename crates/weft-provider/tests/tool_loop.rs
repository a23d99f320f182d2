//! The `llm()` core with the scripted provider: the tool loop (§5.8, §10), strategy hooks,
//! approval, ordering, abort (§9.5), capability checks (§5.10.5), structured output (§11),
//! and streaming/generate equivalence (§9).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::Barrier;
use weft_provider::adapters::scripted::{
    self, Script, ScriptedModel, ScriptedResponse, ScriptedToolCall,
};
use weft_provider::{
    AfterCallResult, BeforeCall, BeforeCallResult, ContentBlock, ErrorCode, ExecutionMode, Image,
    LlmCapabilities, LlmOptions, Message, StreamEventType, Tool, ToolError, ToolUseStrategy, Turn,
    llm,
};

fn calls(calls: &[(&str, &str, Value)]) -> ScriptedResponse {
    ScriptedResponse {
        tool_calls: calls
            .iter()
            .map(|(id, name, args)| ScriptedToolCall {
                id: Some((*id).into()),
                name: (*name).into(),
                arguments: args.clone(),
                after: Vec::new(),
            })
            .collect(),
        ..ScriptedResponse::default()
    }
}

fn script(responses: Vec<ScriptedResponse>) -> Script {
    Script {
        responses,
        fresh_ids: false,
    }
}

fn echo(name: &str) -> Tool {
    Tool::new(
        name,
        "echoes",
        json!({"type": "object"}),
        |args: Value, _ctx| async move { Ok(args) },
    )
}

#[tokio::test]
async fn upp_099_a_turn_without_tools_has_two_messages_and_one_cycle() {
    let instance = llm(LlmOptions::new(scripted::model(Script::texts(["hello"])))).unwrap();
    let turn = instance.generate(&[], "hi").await.unwrap();
    assert_eq!(turn.messages.len(), 2);
    assert!(turn.messages[0].is_user() && turn.messages[1].is_assistant());
    assert_eq!(turn.cycles, 1);
    assert!(turn.tool_executions.is_empty());
    assert_eq!(
        *turn.messages[1],
        Message::Assistant((*turn.response).clone())
    );
}

#[tokio::test]
async fn upp_046_049_098_100_tool_rounds_collect_messages_usage_and_cycles() {
    let mut first = calls(&[("c1", "echo", json!({"x": 1}))]);
    first.usage = Some(scripted::ScriptedUsage {
        input_tokens: 10,
        output_tokens: 2,
        cache_read_tokens: 4,
        cache_write_tokens: 1,
    });
    let mut second = calls(&[("c2", "echo", json!({"x": 2}))]);
    second.usage = Some(scripted::ScriptedUsage {
        input_tokens: 20,
        output_tokens: 3,
        ..Default::default()
    });
    let mut last = ScriptedResponse::text("done");
    last.usage = Some(scripted::ScriptedUsage {
        input_tokens: 30,
        output_tokens: 4,
        ..Default::default()
    });
    let instance =
        llm(LlmOptions::new(scripted::model(script(vec![first, second, last]))).tool(echo("echo")))
            .unwrap();
    let history = vec![Message::user("earlier"), Message::assistant("sure")];
    let turn = instance.generate(&history, "go").await.unwrap();
    assert_eq!(history.len(), 2, "UPP-004: history untouched");
    assert_eq!(turn.cycles, 3);
    let kinds: Vec<_> = turn.messages().map(Message::message_type).collect();
    use weft_provider::MessageType::{Assistant, ToolResult, User};
    assert_eq!(
        kinds,
        [
            User, Assistant, ToolResult, Assistant, ToolResult, Assistant
        ]
    );
    assert_eq!(
        (
            turn.usage.input_tokens,
            turn.usage.output_tokens,
            turn.usage.total_tokens
        ),
        (60, 9, 69)
    );
    assert_eq!(
        (turn.usage.cache_read_tokens, turn.usage.cache_write_tokens),
        (4, 1)
    );
    assert_eq!(turn.usage.cycles.as_ref().unwrap().len(), 3);
    assert_eq!(turn.tool_executions.len(), 2);
    assert_eq!(turn.tool_executions[1].result, json!({"x": 2}));
}

#[tokio::test]
async fn upp_045_the_provider_sees_history_then_input_then_each_round() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let model = scripted::function_model(move |request| {
        let texts: Vec<String> = request
            .messages()
            .map(|m| format!("{:?}", m.message_type()))
            .collect();
        log.lock().unwrap().push(texts);
        let rounds = request.messages().filter(|m| m.is_tool_result()).count();
        Ok(if rounds == 0 {
            calls(&[("c1", "echo", json!({}))])
        } else {
            ScriptedResponse::text("ok")
        })
    });
    let instance = llm(LlmOptions::new(model).tool(echo("echo"))).unwrap();
    instance
        .generate(&[Message::user("h")], "now")
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], ["User", "User"]);
    assert_eq!(seen[1], ["User", "User", "Assistant", "ToolResult"]);
}

#[tokio::test]
async fn upp_051_calls_of_one_round_run_in_parallel_and_results_keep_call_order() {
    // Both tools wait on one barrier: run one after the other, they would never finish.
    let barrier = Arc::new(Barrier::new(2));
    let make = |name: &'static str, barrier: Arc<Barrier>| {
        Tool::new(name, "", json!({"type": "object"}), move |_a: Value, _c| {
            let barrier = barrier.clone();
            async move {
                tokio::time::timeout(Duration::from_secs(5), barrier.wait())
                    .await
                    .map_err(|_| ToolError::new("not run in parallel"))?;
                Ok(json!(name))
            }
        })
    };
    let instance = llm(LlmOptions::new(scripted::model(script(vec![
        calls(&[("a", "slow_a", json!({})), ("b", "slow_b", json!({}))]),
        ScriptedResponse::text("done"),
    ])))
    .tool(make("slow_a", barrier.clone()))
    .tool(make("slow_b", barrier)))
    .unwrap();
    let turn = instance.generate(&[], "go").await.unwrap();
    let Message::ToolResult(results) = &*turn.messages[2] else {
        panic!()
    };
    assert_eq!(results.results[0].tool_call_id, "a");
    assert_eq!(results.results[1].tool_call_id, "b");
    assert!(results.results.iter().all(|r| !r.is_error), "{results:?}");
}

fn recording_tool(name: &'static str, log: Arc<Mutex<Vec<String>>>) -> Tool {
    Tool::new(
        name,
        "",
        json!({"type": "object"}),
        move |_a: Value, ctx: weft_provider::ToolContext| {
            let log = log.clone();
            async move {
                log.lock()
                    .unwrap()
                    .push(format!("start {}", ctx.tool_call_id));
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(5)).await;
                log.lock()
                    .unwrap()
                    .push(format!("end {}", ctx.tool_call_id));
                Ok(Value::Null)
            }
        },
    )
}

#[tokio::test]
async fn sequential_mode_runs_calls_one_after_another() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let instance = llm(LlmOptions::new(scripted::model(script(vec![
        calls(&[("1", "t", json!({})), ("2", "t", json!({}))]),
        ScriptedResponse::text("done"),
    ])))
    .tool(recording_tool("t", log.clone()))
    .execution_mode(ExecutionMode::Sequential))
    .unwrap();
    instance.generate(&[], "go").await.unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        ["start 1", "end 1", "start 2", "end 2"]
    );
}

#[tokio::test]
async fn after_constraints_order_calls_and_cycles_fail_cleanly() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut round = calls(&[("1", "t", json!({})), ("2", "t", json!({}))]);
    round.tool_calls[0].after = vec!["2".into()];
    let instance = llm(LlmOptions::new(scripted::model(script(vec![
        round,
        ScriptedResponse::text("ok"),
    ])))
    .tool(recording_tool("t", log.clone())))
    .unwrap();
    instance.generate(&[], "go").await.unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        ["start 2", "end 2", "start 1", "end 1"]
    );

    let mut cyclic = calls(&[("1", "t", json!({})), ("2", "t", json!({}))]);
    cyclic.tool_calls[0].after = vec!["2".into()];
    cyclic.tool_calls[1].after = vec!["1".into()];
    let instance = llm(LlmOptions::new(scripted::model(script(vec![
        cyclic,
        ScriptedResponse::text("ok"),
    ])))
    .tool(echo("t")))
    .unwrap();
    let turn = tokio::time::timeout(Duration::from_secs(5), instance.generate(&[], "go"))
        .await
        .unwrap()
        .unwrap();
    assert!(turn.tool_executions.iter().all(|e| e.is_error));
    assert!(
        turn.tool_executions[0]
            .result
            .as_str()
            .unwrap()
            .contains("cycle")
    );
}

#[tokio::test]
async fn upp_050_136_max_iterations_fires_the_hook_and_fails_with_the_partial_turn() {
    let fired = Arc::new(AtomicUsize::new(0));
    let seen = fired.clone();
    let instance = llm(LlmOptions::new(scripted::model(script(vec![
        calls(&[("1", "echo", json!({}))]),
        calls(&[("2", "echo", json!({}))]),
        calls(&[("3", "echo", json!({}))]),
    ])))
    .tool(echo("echo"))
    .tool_strategy(
        ToolUseStrategy::default()
            .max_iterations(Some(2))
            .on_max_iterations(move |n| {
                seen.store(n as usize, Ordering::SeqCst);
            }),
    ))
    .unwrap();
    let error = instance.generate(&[], "go").await.unwrap_err();
    assert_eq!(fired.load(Ordering::SeqCst), 2);
    assert_eq!(error.code, ErrorCode::InvalidResponse);
    let partial: Turn = serde_json::from_value(error.cause.unwrap()["turn"].clone()).unwrap();
    assert_eq!(partial.tool_executions.len(), 2);
    assert_eq!(partial.cycles, 3);
}

#[tokio::test]
async fn upp_130_default_limit_is_ten_rounds_and_none_is_unbounded() {
    let looping = || {
        scripted::function_model(|request| {
            let rounds = request.messages().filter(|m| m.is_tool_result()).count();
            Ok(if rounds < 12 {
                calls(&[(&format!("c{rounds}"), "echo", json!({}))])
            } else {
                ScriptedResponse::text("done")
            })
        })
    };
    let error = llm(LlmOptions::new(looping()).tool(echo("echo")))
        .unwrap()
        .generate(&[], "go")
        .await
        .unwrap_err();
    assert!(error.message.contains("maxIterations (10)"), "{error}");
    let turn = llm(LlmOptions::new(looping())
        .tool(echo("echo"))
        .tool_strategy(ToolUseStrategy::unbounded()))
    .unwrap()
    .generate(&[], "go")
    .await
    .unwrap();
    assert_eq!(turn.cycles, 13);
}

#[tokio::test]
async fn upp_137_max_iterations_zero_returns_calls_unexecuted() {
    let ran = Arc::new(AtomicUsize::new(0));
    let count = ran.clone();
    let tool = Tool::new("t", "", json!({"type": "object"}), move |_a: Value, _c| {
        count.fetch_add(1, Ordering::SeqCst);
        async { Ok(Value::Null) }
    });
    let turn = llm(LlmOptions::new(scripted::model(script(vec![calls(&[(
        "1",
        "t",
        json!({"q": 1}),
    )])])))
    .tool(tool)
    .tool_strategy(ToolUseStrategy::default().max_iterations(Some(0))))
    .unwrap()
    .generate(&[], "go")
    .await
    .unwrap();
    assert!(turn.response.has_tool_calls());
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(turn.messages.len(), 2);
}

#[tokio::test]
async fn upp_131_to_135_strategy_hooks_observe_skip_and_transform() {
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let (e1, e2, e3) = (events.clone(), events.clone(), events.clone());
    let failing = Tool::new(
        "fail",
        "",
        json!({"type": "object"}),
        |_a: Value, _c| async { Err(ToolError::new("disk full")) },
    );
    let strategy = ToolUseStrategy::default()
        .on_tool_call(move |tool, _| e1.lock().unwrap().push(format!("call {}", tool.name)))
        .on_before_call(|tool, args| match tool.name.as_str() {
            "skipped" => BeforeCall::Skip,
            "echo" => BeforeCall::Result(BeforeCallResult {
                proceed: true,
                params: Some(json!({"rewritten": args["x"]})),
            }),
            _ => BeforeCall::Proceed,
        })
        .on_after_call(move |tool, _args, result| {
            e2.lock().unwrap().push(format!("after {}", tool.name));
            (tool.name == "echo").then(|| AfterCallResult {
                result: json!({"wrapped": result}),
            })
        })
        .on_error(move |tool, _args, error| {
            e3.lock()
                .unwrap()
                .push(format!("error {} {}", tool.name, error))
        });
    let turn = llm(LlmOptions::new(scripted::model(script(vec![
        calls(&[
            ("1", "echo", json!({"x": 7})),
            ("2", "skipped", json!({})),
            ("3", "fail", json!({})),
        ]),
        ScriptedResponse::text("done"),
    ])))
    .tool(echo("echo"))
    .tool(echo("skipped"))
    .tool(failing)
    .tool_strategy(strategy))
    .unwrap()
    .generate(&[], "go")
    .await
    .unwrap();
    let by_id = |id: &str| {
        turn.tool_executions
            .iter()
            .find(|e| e.tool_call_id == id)
            .unwrap()
            .clone()
    };
    assert_eq!(by_id("1").arguments, json!({"rewritten": 7}));
    assert_eq!(by_id("1").result, json!({"wrapped": {"rewritten": 7}}));
    assert!(by_id("2").is_error && by_id("2").result.as_str().unwrap().contains("skipped"));
    assert!(
        by_id("3").is_error,
        "UPP-127: a failing run becomes an error result"
    );
    assert_eq!(by_id("3").result, json!("disk full"));
    let events = events.lock().unwrap().clone();
    for expected in [
        "call echo",
        "call skipped",
        "call fail",
        "after echo",
        "error fail disk full",
    ] {
        assert!(
            events.contains(&expected.to_string()),
            "{expected} missing from {events:?}"
        );
    }
    assert_eq!(turn.text(), "done", "the loop continued after the error");
}

#[tokio::test]
async fn upp_123_125_approval_refuses_or_aborts() {
    let ran = Arc::new(AtomicUsize::new(0));
    let count = ran.clone();
    let guarded = Tool::new("rm", "", json!({"type": "object"}), move |_a: Value, _c| {
        count.fetch_add(1, Ordering::SeqCst);
        async { Ok(json!("removed")) }
    })
    .with_approval(|args: &Value| {
        let verdict = match args["path"].as_str() {
            Some("/") => Err(ToolError::new("approval service down")),
            Some(p) => Ok(p.starts_with("/tmp")),
            None => Ok(false),
        };
        async move { verdict }
    });
    let turn = llm(LlmOptions::new(scripted::model(script(vec![
        calls(&[
            ("1", "rm", json!({"path": "/etc"})),
            ("2", "rm", json!({"path": "/tmp/x"})),
        ]),
        ScriptedResponse::text("ok"),
    ])))
    .tool(guarded.clone()))
    .unwrap()
    .generate(&[], "go")
    .await
    .unwrap();
    assert_eq!(turn.tool_executions[0].approved, Some(false));
    assert!(turn.tool_executions[0].is_error);
    assert_eq!(turn.tool_executions[1].approved, Some(true));
    assert_eq!(ran.load(Ordering::SeqCst), 1);

    let error = llm(LlmOptions::new(scripted::model(script(vec![calls(&[(
        "1",
        "rm",
        json!({"path": "/"}),
    )])])))
    .tool(guarded))
    .unwrap()
    .generate(&[], "go")
    .await
    .unwrap_err();
    assert!(error.message.contains("approval service down"), "{error}");
}

#[tokio::test]
async fn unknown_tools_become_error_results_the_model_can_read() {
    let turn = llm(LlmOptions::new(scripted::model(script(vec![
        calls(&[("1", "nope", json!({}))]),
        ScriptedResponse::text("sorry"),
    ])))
    .tool(echo("echo")))
    .unwrap()
    .generate(&[], "go")
    .await
    .unwrap();
    assert!(turn.tool_executions[0].is_error);
    assert!(
        turn.tool_executions[0]
            .result
            .as_str()
            .unwrap()
            .contains("available tools: echo")
    );
}

#[tokio::test]
async fn upp_115_to_117_abort_reaches_the_running_tool_and_skips_pending_ones() {
    let saw_cancel = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(tokio::sync::Notify::new());
    let (flag, notify) = (saw_cancel.clone(), started.clone());
    let blocking = Tool::new(
        "wait",
        "",
        json!({"type": "object"}),
        move |_a: Value, ctx: weft_provider::ToolContext| {
            let (flag, notify) = (flag.clone(), notify.clone());
            async move {
                notify.notify_one();
                let watcher = ctx.signal.clone();
                tokio::spawn(async move {
                    watcher.cancelled().await;
                    flag.fetch_add(1, Ordering::SeqCst);
                });
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(Value::Null)
            }
        },
    )
    .with_sequential(true);
    let later = Arc::new(AtomicUsize::new(0));
    let later_count = later.clone();
    let pending = Tool::new(
        "later",
        "",
        json!({"type": "object"}),
        move |_a: Value, _c| {
            later_count.fetch_add(1, Ordering::SeqCst);
            async { Ok(Value::Null) }
        },
    );
    let instance = llm(LlmOptions::new(scripted::model(script(vec![
        calls(&[("1", "wait", json!({})), ("2", "later", json!({}))]),
        ScriptedResponse::text("never"),
    ])))
    .tool(blocking)
    .tool(pending))
    .unwrap();
    let stream = instance.stream(&[], "go").unwrap();
    started.notified().await;
    stream.abort();
    let error = tokio::time::timeout(Duration::from_secs(5), stream.turn())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Cancelled);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        saw_cancel.load(Ordering::SeqCst),
        1,
        "the in-flight tool saw the signal"
    );
    assert_eq!(
        later.load(Ordering::SeqCst),
        0,
        "the pending call was skipped"
    );
}

#[tokio::test]
async fn generate_with_signal_cancels_a_slow_model() {
    let mut slow = ScriptedResponse::text("late");
    slow.delay_ms = Some(10_000);
    let instance = llm(LlmOptions::new(scripted::model(script(vec![slow])))).unwrap();
    let signal = tokio_util::sync::CancellationToken::new();
    let cancel = signal.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        cancel.cancel();
    });
    let error = instance
        .generate_with_signal(&[], "hi", signal)
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Cancelled);
}

#[tokio::test]
async fn upp_062_065_068_capability_checks_refuse_what_the_provider_cannot_do() {
    let none = LlmCapabilities::default();
    let model = || {
        scripted::from_model(
            ScriptedModel::from_script("m", Script::texts(["x"])).with_capabilities(none),
        )
    };
    let error = llm(LlmOptions::new(model()).tool(echo("t"))).unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidRequest);
    let error = llm(LlmOptions::new(model()).structure(json!({"type": "object"}))).unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidRequest);
    let instance = llm(LlmOptions::new(model())).unwrap();
    assert_eq!(
        instance.stream(&[], "hi").unwrap_err().code,
        ErrorCode::InvalidRequest
    );
    let image = Image::from_url("https://example.com/x.png", "image/png").to_block();
    let error = instance
        .generate(&[], vec![ContentBlock::text("look"), image])
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidRequest, "UPP-066");
    let doc = weft_provider::Document::from_text("hi").to_block();
    assert_eq!(
        instance.generate(&[], doc).await.unwrap_err().code,
        ErrorCode::InvalidRequest,
        "UPP-067"
    );
    // A model that takes every other kind of content refuses the one it lacks, and takes
    // the others.
    let blocks = [
        (
            "image input",
            Image::from_url("https://example.com/x.png", "image/png").to_block(),
        ),
        (
            "document input",
            weft_provider::Document::from_text("hi").to_block(),
        ),
        (
            "audio input",
            weft_provider::Audio::from_bytes(vec![1, 2], "audio/wav").to_block(),
        ),
        (
            "video input",
            weft_provider::Video::from_bytes(vec![1, 2], "video/mp4").to_block(),
        ),
    ];
    for (lacking, _) in &blocks {
        let caps = LlmCapabilities {
            image_input: *lacking != "image input",
            document_input: *lacking != "document input",
            audio_input: *lacking != "audio input",
            video_input: *lacking != "video input",
            ..LlmCapabilities::default()
        };
        let instance = llm(LlmOptions::new(scripted::from_model(
            ScriptedModel::from_script("m", Script::texts(["x"; 4])).with_capabilities(caps),
        )))
        .unwrap();
        for (kind, block) in &blocks {
            let asked = instance.generate(&[], block.clone()).await;
            if kind == lacking {
                let error = asked.unwrap_err();
                assert_eq!(error.code, ErrorCode::InvalidRequest);
                assert!(
                    error.message.contains(&format!("does not support {kind}")),
                    "{error}"
                );
            } else {
                assert!(asked.is_ok(), "{kind} without {lacking}: {asked:?}");
            }
        }
    }
}

/// A policy stage that binds sub-agents too (it hands itself down).
struct Binding;

impl weft_provider::pipeline::ToolLayer for Binding {
    fn stage(&self) -> weft_provider::pipeline::Stage {
        weft_provider::pipeline::Stage::Policy
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut weft_provider::pipeline::Invocation<'t>,
        next: weft_provider::pipeline::Next<'a>,
    ) -> weft_provider::tool::BoxFuture<'a, weft_provider::pipeline::ToolOutcome> {
        next.run(inv)
    }

    fn for_child(&self) -> Option<Arc<dyn weft_provider::pipeline::ToolLayer>> {
        Some(Arc::new(Binding))
    }
}

#[test]
fn an_instance_lists_its_tools_and_hands_its_binding_stages_to_sub_agents() {
    let instance = llm(LlmOptions::new(scripted::model(Script::texts(["x"])))
        .tool(echo("a"))
        .tool(echo("b"))
        .tool_layer(Arc::new(Binding)))
    .unwrap();
    let names: Vec<&str> = instance.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    let handed = instance.child_layers();
    assert_eq!(handed.len(), 1);
    assert_eq!(handed[0].stage(), weft_provider::pipeline::Stage::Policy);
}

#[tokio::test]
async fn upp_119_121_144_option_checks() {
    let model = || scripted::model(Script::texts(["x"]));
    let error = llm(LlmOptions::new(model()).tool(echo("t")).tool(echo("t"))).unwrap_err();
    assert!(error.message.contains("more than one tool"));
    let bad = Tool::new("b", "", json!({"type": "string"}), |_a: Value, _c| async {
        Ok(Value::Null)
    });
    assert!(llm(LlmOptions::new(model()).tool(bad)).is_err());
    assert!(llm(LlmOptions::new(model()).structure(json!({"type": "array"}))).is_err());
}

#[tokio::test]
async fn upp_063_147_148_structured_output_is_parsed_not_validated() {
    let schema =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let turn = llm(LlmOptions::new(scripted::model(script(vec![
        calls(&[("1", "echo", json!({}))]),
        ScriptedResponse::text("```json\n{\"city\": \"Paris\"}\n```"),
    ])))
    .tool(echo("echo"))
    .structure(schema.clone()))
    .unwrap()
    .generate(&[], "go")
    .await
    .unwrap();
    assert_eq!(turn.data, Some(json!({"city": "Paris"})));
    // A schema mismatch is returned as is (UPP-064: no validation, no retry).
    let turn = llm(
        LlmOptions::new(scripted::model(Script::texts(["{\"town\": 1}"])))
            .structure(schema.clone()),
    )
    .unwrap()
    .generate(&[], "go")
    .await
    .unwrap();
    assert_eq!(turn.data, Some(json!({"town": 1})));
    let error =
        llm(LlmOptions::new(scripted::model(Script::texts(["not json"]))).structure(schema))
            .unwrap()
            .generate(&[], "go")
            .await
            .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidResponse);
}

fn normalized(turn: &Turn) -> Value {
    let mut value = serde_json::to_value(turn).unwrap();
    fn scrub(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for key in ["id", "timestamp", "duration"] {
                    if map.contains_key(key) {
                        map.insert(key.into(), Value::Null);
                    }
                }
                map.values_mut().for_each(scrub);
            }
            Value::Array(items) => items.iter_mut().for_each(scrub),
            _ => {}
        }
    }
    scrub(&mut value);
    value
}

/// Each form of input a caller passes becomes the user message the model is asked with; no
/// input (`()`) goes on from the history alone.
#[tokio::test]
async fn every_form_of_input_becomes_the_user_message_of_the_turn() {
    use weft_provider::InferenceInput;
    let instance =
        llm(LlmOptions::new(scripted::model(Script::texts(["ok"; 5]))).system("Be brief."))
            .unwrap();
    let owned = String::from("from a String");
    let asked = [
        instance.generate(&[], owned.clone()).await.unwrap(),
        instance.generate(&[], &owned).await.unwrap(),
        instance
            .generate(&[], InferenceInput::Text("an input".into()))
            .await
            .unwrap(),
    ];
    let texts: Vec<String> = asked.iter().map(|t| t.messages[0].text()).collect();
    assert_eq!(texts, ["from a String", "from a String", "an input"]);
    assert!(asked.iter().all(|t| t.messages[0].is_user()));
    let history: Vec<Message> = vec![asked[0].messages[0].as_ref().clone()];
    let went_on = instance.generate(&history, ()).await.unwrap();
    // The turn holds what it added: the answer only.
    assert_eq!(went_on.messages.len(), 1, "{:?}", went_on.messages);
    assert!(went_on.messages[0].is_assistant());
    // An instance prints its model, system text and tools (the tools by name).
    let shown = format!(
        "{:?}",
        llm(LlmOptions::new(scripted::model(Script::texts(["ok"])))
            .system("Be brief.")
            .tool(echo("echo")))
        .unwrap()
    );
    assert!(
        shown.starts_with("LlmInstance { model: ")
            && shown.contains("system: Some(\"Be brief.\")")
            && shown.contains("tools: [\"echo\"]"),
        "{shown}"
    );
}

/// A stream tap sees every event of a streamed turn — the model's and the tool executions' —
/// in the order the stream's reader gets them.
#[tokio::test]
async fn a_stream_tap_sees_every_event_the_reader_sees_in_order() {
    let responses = vec![
        calls(&[("1", "echo", json!({"a": 1}))]),
        ScriptedResponse::text("all done now"),
    ];
    let seen: Arc<Mutex<Vec<StreamEventType>>> = Arc::default();
    let tap = {
        let seen = seen.clone();
        weft_provider::StreamTap::new(move |event| {
            seen.lock().unwrap().push(event.event_type);
        })
    };
    let options = LlmOptions::new(scripted::model(script(responses)))
        .tool(echo("echo"))
        .stream_tap(tap);
    let mut stream = llm(options).unwrap().stream(&[], "go").unwrap();
    let mut read = Vec::new();
    while let Some(event) = stream.next().await {
        read.push(event.unwrap().event_type);
    }
    assert!(
        read.contains(&StreamEventType::ToolExecutionEnd),
        "{read:?}"
    );
    assert!(read.contains(&StreamEventType::TextDelta), "{read:?}");
    assert_eq!(*seen.lock().unwrap(), read);
    // Options print their tap by name (a closure has no Debug form of its own).
    let shown = format!("{:?}", weft_provider::StreamTap::new(|_| {}));
    assert_eq!(shown, "StreamTap");
}

#[tokio::test]
async fn upp_109_112_114_stream_events_are_ordered_and_the_turn_equals_generate() {
    let responses = vec![
        ScriptedResponse {
            reasoning: Some("let me see".into()),
            ..calls(&[("1", "echo", json!({"a": [1, 2]}))])
        },
        ScriptedResponse::text("all done now"),
    ];
    let options = || LlmOptions::new(scripted::model(script(responses.clone()))).tool(echo("echo"));
    let generated = llm(options()).unwrap().generate(&[], "go").await.unwrap();
    let mut stream = llm(options()).unwrap().stream(&[], "go").unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    let streamed = stream.turn().await.unwrap();
    assert_eq!(normalized(&generated), normalized(&streamed));
    use StreamEventType::*;
    let types: Vec<_> = events.iter().map(|e| e.event_type).collect();
    assert_eq!(
        types,
        [
            MessageStart,
            ContentBlockStart,
            ReasoningDelta,
            ReasoningDelta,
            ReasoningDelta,
            ContentBlockStop,
            ContentBlockStart,
            ToolCallDelta,
            ToolCallDelta,
            ToolCallDelta,
            ContentBlockStop,
            MessageStop,
            ToolExecutionStart,
            ToolExecutionEnd,
            MessageStart,
            ContentBlockStart,
            TextDelta,
            TextDelta,
            TextDelta,
            ContentBlockStop,
            MessageStop,
        ]
    );
    let start = &events[12].delta;
    assert_eq!(
        (start.tool_call_id.as_deref(), start.tool_name.as_deref()),
        (Some("1"), Some("echo"))
    );
    assert!(start.timestamp.is_some());
    let end = &events[13].delta;
    assert_eq!(end.result, Some(json!({"a": [1, 2]})));
    assert_eq!(end.is_error, Some(false));
    let text: String = events
        .iter()
        .filter(|e| e.event_type == TextDelta)
        .filter_map(|e| e.delta.text.clone())
        .collect();
    assert_eq!(text, streamed.text());
}

#[tokio::test]
async fn scripted_errors_and_an_exhausted_script_are_clear() {
    let rate_limited = ScriptedResponse {
        error: Some(scripted::ScriptedError {
            code: ErrorCode::RateLimited,
            message: "slow down".into(),
        }),
        ..ScriptedResponse::default()
    };
    let instance = llm(LlmOptions::new(scripted::model(script(vec![rate_limited])))).unwrap();
    assert_eq!(
        instance.generate(&[], "a").await.unwrap_err().code,
        ErrorCode::RateLimited
    );
    let error = instance.generate(&[], "b").await.unwrap_err();
    assert!(error.message.contains("all were used"), "{error}");
}

/// A layer that logs its stage and either passes the call on or answers it.
struct Probe {
    stage: weft_provider::pipeline::Stage,
    log: Arc<Mutex<Vec<String>>>,
    answer: Option<weft_provider::pipeline::ToolOutcome>,
}

impl weft_provider::pipeline::ToolLayer for Probe {
    fn stage(&self) -> weft_provider::pipeline::Stage {
        self.stage
    }

    fn call<'a, 't>(
        &'a self,
        inv: &'a mut weft_provider::pipeline::Invocation<'t>,
        next: weft_provider::pipeline::Next<'a>,
    ) -> weft_provider::tool::BoxFuture<'a, weft_provider::pipeline::ToolOutcome> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:{}", self.stage, inv.call.tool_call_id));
        match self.answer.clone() {
            Some(answer) if inv.call.tool_call_id == "c2" => Box::pin(async move { answer }),
            _ => next.run(inv),
        }
    }
}

#[tokio::test]
async fn the_pipeline_runs_layers_in_stage_order_and_a_replay_answers_before_validation() {
    use weft_provider::pipeline::{Stage, ToolOutcome};
    let log = Arc::new(Mutex::new(Vec::new()));
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let tool = Tool::new(
        "count",
        "counts",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        move |_args: Value, _ctx| {
            let counter = counter.clone();
            async move { Ok(json!(counter.fetch_add(1, Ordering::SeqCst))) }
        },
    );
    let probe = |stage, answer| {
        Arc::new(Probe {
            stage,
            log: log.clone(),
            answer,
        }) as Arc<dyn weft_provider::pipeline::ToolLayer>
    };
    // Added out of order: the instance sorts them by stage.
    let options = LlmOptions::new(scripted::model(script(vec![
        calls(&[
            ("c1", "count", json!({"n": 1})),
            ("c2", "count", json!({"n": "bad"})),
        ]),
        ScriptedResponse::text("done"),
    ])))
    .tool(tool)
    .validate_arguments(true)
    .execution_mode(ExecutionMode::Sequential)
    .tool_layer(probe(Stage::Record, None))
    .tool_layer(probe(Stage::Hooks, None))
    .tool_layer(probe(
        Stage::Replay,
        Some(ToolOutcome::Done(json!("recorded"))),
    ));
    let turn = llm(options).unwrap().generate(&[], "go").await.unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        ["replay:c1", "hooks:c1", "record:c1", "replay:c2"],
        "c1 passes every stage in order; c2 is answered by the replay stage before validation"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only c1 ran");
    let results: Vec<(Value, bool)> = turn
        .tool_executions
        .iter()
        .map(|e| (e.result.clone(), e.is_error))
        .collect();
    assert_eq!(results, [(json!(0), false), (json!("recorded"), false)]);
}

#[tokio::test]
async fn a_skipped_call_is_visible_in_the_stream() {
    let options = LlmOptions::new(scripted::model(script(vec![
        calls(&[("c1", "echo", json!({}))]),
        ScriptedResponse::text("done"),
    ])))
    .tool(echo("echo"))
    .tool_strategy(ToolUseStrategy::default().on_before_call(|_, _| BeforeCall::Skip));
    let mut stream = llm(options).unwrap().stream(&[], "go").unwrap();
    let mut ends = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.unwrap();
        if event.event_type == StreamEventType::ToolExecutionEnd {
            ends.push((event.delta.tool_call_id.clone(), event.delta.is_error));
        }
    }
    assert_eq!(ends, [(Some("c1".to_owned()), Some(true))]);
}

#[tokio::test]
async fn a_tool_loop_shares_each_message_with_the_model_and_the_turn_instead_of_copying_it() {
    // Every request's conversation, as the model received it.
    type Seen = Arc<Mutex<Vec<Arc<Vec<Arc<Message>>>>>>;
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let model = scripted::function_model(move |request| {
        log.lock().unwrap().push(request.messages.clone());
        let rounds = request.messages().filter(|m| m.is_tool_result()).count();
        let mut response = if rounds < 2 {
            calls(&[(&format!("c{rounds}"), "echo", json!({"round": rounds}))])
        } else {
            ScriptedResponse::text("done")
        };
        response.usage = Some(scripted::ScriptedUsage {
            input_tokens: 10 + rounds as u64,
            output_tokens: 1,
            ..Default::default()
        });
        Ok(response)
    });
    let instance = llm(LlmOptions::new(model).tool(echo("echo"))).unwrap();
    let turn = instance.generate(&[], "go").await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    // The last request holds the input and both rounds: the very messages the turn hands
    // back, not copies of them.
    let last = &seen[2];
    assert_eq!(last.len(), 5);
    for (i, message) in last.iter().enumerate() {
        assert!(
            Arc::ptr_eq(message, &turn.messages[i]),
            "message {i} was copied into the conversation"
        );
    }
    // An earlier request's messages are the same ones again.
    assert!(Arc::ptr_eq(&seen[1][1], &turn.messages[1]));
    // The final response is the turn's last message, shared.
    assert!(Arc::ptr_eq(turn.response.message(), &turn.messages[5]));
    // Usage keeps one entry per model call, in order, as the calls reported it.
    let cycles: Vec<(u64, u64)> = turn
        .usage
        .cycles
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.input_tokens, c.output_tokens))
        .collect();
    assert_eq!(cycles, [(10, 1), (11, 1), (12, 1)]);
    assert_eq!((turn.usage.input_tokens, turn.usage.total_tokens), (33, 36));
}

/// An approval stage that can answer nobody now: every call waits for a decision.
struct Waits;

impl weft_provider::pipeline::ToolLayer for Waits {
    fn stage(&self) -> weft_provider::pipeline::Stage {
        weft_provider::pipeline::Stage::Approval
    }

    fn call<'a, 't>(
        &'a self,
        _inv: &'a mut weft_provider::pipeline::Invocation<'t>,
        _next: weft_provider::pipeline::Next<'a>,
    ) -> weft_provider::tool::BoxFuture<'a, weft_provider::pipeline::ToolOutcome> {
        Box::pin(async {
            weft_provider::pipeline::ToolOutcome::Deferred {
                reason: "waits for a person".into(),
            }
        })
    }
}

fn call_then_text() -> Vec<ScriptedResponse> {
    vec![
        calls(&[("1", "echo", json!({"a": 1}))]),
        ScriptedResponse::text("done"),
    ]
}

/// A call that waits for a decision ends the turn after its round, whatever the loop's mode:
/// the model is not asked again until the decision is made.
#[tokio::test]
async fn a_call_waiting_for_a_decision_ends_the_turn_after_its_round() {
    let instance = llm(LlmOptions::new(scripted::model(script(call_then_text())))
        .tool(echo("echo"))
        .tool_layer(Arc::new(Waits)))
    .unwrap();
    let turn = instance.generate(&[], "go").await.unwrap();
    assert_eq!(turn.cycles, 1);
    assert_eq!(turn.messages.len(), 3, "{:?}", turn.messages);
    let Message::ToolResult(results) = &*turn.messages[2] else {
        panic!("the round's results last: {:?}", turn.messages)
    };
    assert_eq!(results.results[0].result, json!("waits for a person"));
}

/// One step is one model call and its round of tools; the next step is the caller's.
#[tokio::test]
async fn a_step_is_one_model_call_and_its_round() {
    let instance =
        llm(LlmOptions::new(scripted::model(script(call_then_text()))).tool(echo("echo"))).unwrap();
    let turn = instance
        .generate_step(
            Vec::new(),
            "go",
            0,
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(turn.cycles, 1);
    assert_eq!(turn.tool_executions.len(), 1);
    assert!(turn.messages.last().unwrap().is_tool_result());
}

/// A turn of several model calls adds up their usage, one cycle each.
#[tokio::test]
async fn a_turns_usage_is_the_sum_of_its_model_calls_one_cycle_each() {
    let mut responses = call_then_text();
    for (response, (input, output)) in responses.iter_mut().zip([(10, 1), (20, 2)]) {
        response.usage = Some(scripted::ScriptedUsage {
            input_tokens: input,
            output_tokens: output,
            ..Default::default()
        });
    }
    let instance =
        llm(LlmOptions::new(scripted::model(script(responses))).tool(echo("echo"))).unwrap();
    let turn = instance.generate(&[], "go").await.unwrap();
    assert_eq!((turn.usage.input_tokens, turn.usage.output_tokens), (30, 3));
    let cycles = turn.usage.cycles.as_deref().unwrap_or_default();
    assert_eq!(cycles.len(), 2, "{:?}", turn.usage);
    assert_eq!(cycles[0].input_tokens, 10);
    assert_eq!(cycles[1].input_tokens, 20);
}

/// The abort handle of a stream stops its turn: `CANCELLED`, not the model's late answer.
#[tokio::test(start_paused = true)]
async fn a_streams_abort_handle_cancels_its_turn() {
    let slow = ScriptedResponse {
        delay_ms: Some(60_000),
        ..ScriptedResponse::text("late")
    };
    let instance = llm(LlmOptions::new(scripted::model(script(vec![slow])))).unwrap();
    let stream = instance.stream(&[], "go").unwrap();
    let handle = stream.abort_handle();
    handle.cancel();
    let error = stream.turn().await.unwrap_err();
    assert_eq!(error.code, ErrorCode::Cancelled);
}

#[test]
fn a_tool_use_strategy_shows_its_limit_and_which_hooks_it_has() {
    let shown = format!("{:?}", ToolUseStrategy::default());
    assert!(
        shown.starts_with("ToolUseStrategy { max_iterations: "),
        "{shown}"
    );
    assert!(shown.contains("on_tool_call: false"), "{shown}");
}

/// A model of another crate, reporting its usage without a per-call breakdown.
#[derive(Debug)]
struct Bare;

impl weft_provider::provider::LlmModel for Bare {
    fn model_id(&self) -> &str {
        "bare"
    }

    fn provider(&self) -> &str {
        "bare"
    }

    fn capabilities(&self) -> LlmCapabilities {
        LlmCapabilities::default()
    }

    fn complete(
        &self,
        _request: weft_provider::LlmRequest,
    ) -> weft_provider::tool::BoxFuture<
        '_,
        Result<weft_provider::LlmResponse, weft_provider::UppError>,
    > {
        Box::pin(async {
            Ok(weft_provider::LlmResponse {
                message: weft_provider::AssistantMessage::text("hi"),
                usage: weft_provider::TokenUsage {
                    input_tokens: 5,
                    output_tokens: 1,
                    total_tokens: 6,
                    ..Default::default()
                },
                stop_reason: "end_turn".into(),
                data: None,
            })
        })
    }

    fn stream(
        &self,
        _request: weft_provider::LlmRequest,
    ) -> weft_provider::tool::BoxFuture<
        '_,
        Result<weft_provider::provider::LlmStream, weft_provider::UppError>,
    > {
        Box::pin(async {
            Err(weft_provider::UppError::llm(
                ErrorCode::InvalidRequest,
                "bare",
                "no streaming",
            ))
        })
    }
}

/// A model call whose usage has no per-call breakdown is still one cycle of the turn's.
#[tokio::test]
async fn a_calls_usage_without_its_cycle_becomes_one_cycle_of_the_turn() {
    let instance = llm(LlmOptions::new(scripted::from_shared(Arc::new(Bare)))).unwrap();
    let turn = instance.generate(&[], "go").await.unwrap();
    assert_eq!(turn.usage.input_tokens, 5);
    let cycles = turn.usage.cycles.as_deref().unwrap_or_default();
    assert_eq!(cycles.len(), 1, "{:?}", turn.usage);
    assert_eq!(cycles[0].input_tokens, 5);
}
