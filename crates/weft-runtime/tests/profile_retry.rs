//! Error recovery under the runtime profile's retry policy (runtime spec §5.10, RT-051…058):
//! transient failures retried with the policy's exponential backoff, errors the policy lists
//! retried too, permanent ones never, a repeated error signature never, and the error the
//! model finally gets carries what was tried. Runs driven by `Runtime` with a scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use weft_provider::{Message, ToolError};
use weft_runtime::approval::RetryPolicy;
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{Runtime, ToolRegistry};
use weft_store::{EventLog, EventQuery, Runs, Store};

/// Runs one call of `flaky`, whose n-th run (from 0) answers `answers(n)`, under a retry
/// policy; returns the retries logged, how often it ran, and the result the model got.
async fn run_flaky(
    dir: &Path,
    answers: fn(usize) -> Result<Value, ToolError>,
    retryable: &[&str],
) -> (Vec<Value>, usize, (Value, bool)) {
    let store = Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut registry = ToolRegistry::new();
    let counter = runs.clone();
    registry.register("flaky", move |_config: &Value| {
        let counter = counter.clone();
        Ok(weft_provider::Tool::new(
            "flaky",
            "fails, then maybe works",
            json!({"type": "object"}),
            move |_args: Value, _ctx| {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move { answers(n) }
            },
        ))
    });
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [{"toolCalls": [{"id": "f1", "name": "flaky", "arguments": {}}]}, {"text": "done"}]})
            .to_string(),
    )
    .unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", script.display()));
    program.tools = vec![ToolSpec {
        name: "flaky".into(),
        config: json!({}),
    }];
    program.policy.max_retries = 2;
    program.policy.retry = Some(RetryPolicy {
        backoff_ms: 5,
        backoff_multiplier: 3.0,
        retryable_errors: retryable.iter().map(|s| (*s).to_owned()).collect(),
    });
    let outcome = Runtime::new(store.clone())
        .with_tools(registry)
        .start(RunSpec::new("go", Program::Agent(program)), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    let retries = store
        .events(&EventQuery {
            run_id: Some(outcome.run_id.clone()),
            types: vec!["tool_call_retry".into()],
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.payload)
        .collect();
    let record = store.run(&outcome.run_id).await.unwrap().unwrap();
    let latest = store
        .latest_checkpoint(&record.thread_id)
        .await
        .unwrap()
        .unwrap();
    let result = latest
        .checkpoint
        .state
        .messages()
        .find_map(|m| match &*m {
            Message::ToolResult(r) => r.results.first().map(|r| (r.result.clone(), r.is_error)),
            _ => None,
        })
        .unwrap();
    (retries, runs.load(Ordering::SeqCst), result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_are_retried_with_the_policys_exponential_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let (retries, ran, result) = run_flaky(
        dir.path(),
        |n| match n {
            0 => Err(ToolError::transient("connection reset")),
            1 => Err(ToolError::transient("rate limited")),
            _ => Ok(json!("ok")),
        },
        &[],
    )
    .await;
    assert_eq!(ran, 3);
    let delays: Vec<&Value> = retries.iter().map(|r| &r["delayMs"]).collect();
    assert_eq!(delays, [&json!(5), &json!(15)], "backoffMs 5, multiplier 3");
    assert_eq!(result, (json!("ok"), false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_error_signature_is_not_retried_and_the_model_gets_the_context() {
    let dir = tempfile::tempdir().unwrap();
    let (retries, ran, (result, is_error)) = run_flaky(
        dir.path(),
        |_| Err(ToolError::transient("connection reset")),
        &[],
    )
    .await;
    // Retried once; the second failure has the first's signature.
    assert_eq!((retries.len(), ran), (1, 2));
    assert!(is_error);
    let text = result.as_str().unwrap();
    assert!(
        text.starts_with(
            "connection reset [runtime: the call was tried 2 times (retried after 5 ms)"
        ),
        "{text}"
    );
    assert!(
        text.contains("the same error as an earlier attempt"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_errors_are_not_retried_unless_the_policy_lists_them() {
    let dir = tempfile::tempdir().unwrap();
    let (retries, ran, (result, _)) =
        run_flaky(dir.path(), |_| Err(ToolError::new("no such file")), &[]).await;
    assert_eq!((retries.len(), ran), (0, 1));
    assert!(
        result
            .as_str()
            .unwrap()
            .contains("not retried: a permanent error"),
        "{result}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (retries, ran, (result, is_error)) = run_flaky(
        dir.path(),
        |n| match n {
            0 => Err(ToolError::new("database is locked (try 1)")),
            _ => Ok(json!("ok")),
        },
        &["database is locked"],
    )
    .await;
    assert_eq!((retries.len(), ran), (1, 2));
    assert_eq!((result, is_error), (json!("ok"), false));
}
