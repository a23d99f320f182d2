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
use weft_runtime::{RunEnd, RunOutcome, Runtime, ToolRegistry};
use weft_store::{EventLog, EventQuery, Runs, Store};

/// Runs `calls` calls of `flaky` (one per step), whose n-th run (from 0) answers
/// `answers(n)`, with `max_retries` and `policy`; returns the store, the run's outcome and
/// how often the tool ran.
async fn run_calls(
    dir: &Path,
    answers: fn(usize) -> Result<Value, ToolError>,
    calls: usize,
    (max_retries, policy): (u32, Option<RetryPolicy>),
) -> (Store, RunOutcome, usize) {
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
    let mut responses: Vec<Value> = (0..calls)
        .map(|i| json!({"toolCalls": [{"id": format!("f{i}"), "name": "flaky", "arguments": {}}]}))
        .collect();
    responses.push(json!({"text": "done"}));
    std::fs::write(&script, json!({ "responses": responses }).to_string()).unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", script.display()));
    program.tools = vec![ToolSpec {
        name: "flaky".into(),
        config: json!({}),
    }];
    program.policy.max_retries = max_retries;
    program.policy.retry = policy;
    let outcome = Runtime::new(store.clone())
        .with_tools(registry)
        .start(RunSpec::new("go", Program::Agent(program)), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    let ran = runs.load(Ordering::SeqCst);
    (store, outcome, ran)
}

/// The policy of these tests: 5 ms, then ×3; `retryable` listed.
fn policy(retryable: &[&str]) -> RetryPolicy {
    RetryPolicy {
        backoff_ms: 5,
        backoff_multiplier: 3.0,
        retryable_errors: retryable.iter().map(|s| (*s).to_owned()).collect(),
    }
}

async fn retries_logged(store: &Store, run: &str) -> Vec<Value> {
    store
        .events(&EventQuery {
            run_id: Some(run.to_owned()),
            types: vec!["tool_call_retry".into()],
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.payload)
        .collect()
}

/// Runs one call of `flaky`, whose n-th run (from 0) answers `answers(n)`, under a retry
/// policy; returns the retries logged, how often it ran, and the result the model got.
async fn run_flaky(
    dir: &Path,
    answers: fn(usize) -> Result<Value, ToolError>,
    retryable: &[&str],
) -> (Vec<Value>, usize, (Value, bool)) {
    let (store, outcome, ran) = run_calls(dir, answers, 1, (2, Some(policy(retryable)))).await;
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    let retries = retries_logged(&store, &outcome.run_id).await;
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
    (retries, ran, result)
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

/// The signature cache spans the task: a later call failing with an error signature seen
/// before is not retried at all (the first call was retried once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_signature_seen_in_an_earlier_call_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let (store, outcome, ran) = run_calls(
        dir.path(),
        |_| Err(ToolError::transient("connection reset")),
        2,
        (2, Some(policy(&[]))),
    )
    .await;
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(ran, 3, "the first call twice, the second once");
    assert_eq!(retries_logged(&store, &outcome.run_id).await.len(), 1);
}

/// Without a retry policy a transient failure is retried, but a failure identical to the
/// one before it is not (the tool is failing, not flaking).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_policy_the_same_failure_twice_ends_the_retries() {
    let dir = tempfile::tempdir().unwrap();
    let (store, outcome, ran) = run_calls(
        dir.path(),
        |_| Err(ToolError::transient("connection reset")),
        1,
        (3, None),
    )
    .await;
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(ran, 2, "of up to four");
    assert_eq!(retries_logged(&store, &outcome.run_id).await.len(), 1);
}

/// A call whose effect is unknown (`ToolError::uncertain`) is never retried, even when the
/// policy lists its error: the run stops on it for a person to decide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncertain_failure_is_never_retried_even_when_the_policy_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, outcome, ran) = run_calls(
        dir.path(),
        |_| Err(ToolError::uncertain("the server exited during the call")),
        1,
        (2, Some(policy(&["exited"]))),
    )
    .await;
    assert_eq!(ran, 1);
    let RunEnd::NeedsApproval { calls, decisions } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert_eq!((calls.len(), decisions.len()), (1, 1));
    assert_eq!(decisions[0].kind, weft_store::DecisionKind::Uncertain);
    assert_eq!(decisions[0].status, weft_store::DecisionStatus::Pending);
    assert!(retries_logged(&store, &outcome.run_id).await.is_empty());
}
