//! What runs cost, through `Runtime`: each model call priced when made with its price
//! recorded (a resume with other prices keeps the earlier calls' price), cache tokens priced
//! as such, unknown prices reported as unknown (never 0), and failed and interrupted runs
//! reporting what they spent.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use weft_provider::adapters::scripted::{self, ScriptedResponse, ScriptedUsage};
use weft_provider::pricing::{PriceSource, PriceTable, Prices};
use weft_provider::{ErrorCode, Tool, UppError};
use weft_runtime::cost::CallCost;
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{ResumeOptions, RunEnd, Runtime, ToolRegistry};
use weft_store::{Responses as _, Runs as _, Store};

async fn sqlite(dir: &Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap()
}

/// The `metered` provider: answer k of `answers` for the k-th call of a conversation (an
/// `Err` fails the call), each costing 10 input tokens (4 of them read from the cache) and 1
/// output token.
fn metered(answers: Vec<Result<ScriptedResponse, String>>) -> weft_provider::ProviderRegistry {
    let answers = Arc::new(answers);
    let mut providers = weft_runtime::default_providers();
    providers.register("metered", move || {
        let answers = answers.clone();
        Arc::new(weft_provider::Provider::new("metered", "1").with_llm(
            move |id: &str, _options: &Value| {
                let answers = answers.clone();
                let model: Arc<dyn weft_provider::LlmModel> =
                    Arc::new(scripted::ScriptedModel::from_fn(id, move |request| {
                        let k = request
                            .messages()
                            .filter(|m| matches!(m, weft_provider::Message::Assistant(_)))
                            .count();
                        match answers.get(k) {
                            Some(Ok(reply)) => {
                                let mut reply = reply.clone();
                                reply.usage = Some(ScriptedUsage {
                                    input_tokens: 10,
                                    output_tokens: 1,
                                    cache_read_tokens: 4,
                                    ..ScriptedUsage::default()
                                });
                                Ok(reply)
                            }
                            Some(Err(message)) => Err(UppError::llm(
                                ErrorCode::InvalidRequest,
                                "metered",
                                message.clone(),
                            )),
                            None => Err(UppError::llm(
                                ErrorCode::InvalidRequest,
                                "metered",
                                "no answer",
                            )),
                        }
                    }));
                Ok(model)
            },
        ))
    });
    providers
}

/// Prices of `metered:m` per million tokens: `input` (cache reads at a tenth), `output`.
fn prices(input: f64, output: f64) -> Prices {
    let table = PriceTable::parse(
        &format!(
            "[metered]\n\"m\" = {{ input = {input}, output = {output}, cacheRead = {} }}\n",
            input / 10.0
        ),
        PriceSource::Override,
    )
    .unwrap();
    Prices::builtin().with_override(table)
}

/// The cost of one `metered` call at `prices(input, output)`: 6 plain and 4 cached input
/// tokens, 1 output token.
fn call_cost(input: f64, output: f64) -> f64 {
    (6.0 * input + 4.0 * input / 10.0 + output) / 1e6
}

/// The `probe` tool; its first run waits until the run is aborted (`started` counts runs).
fn probe(started: Arc<AtomicUsize>) -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools.register("probe", move |_config: &Value| {
        let started = started.clone();
        Ok(Tool::new(
            "probe",
            "probes",
            json!({"type": "object"}),
            move |_a: Value, ctx: weft_provider::ToolContext| {
                let first = started.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if first {
                        ctx.signal.cancelled().await;
                        return Err(weft_provider::ToolError::new("cancelled"));
                    }
                    Ok(json!("ok"))
                }
            },
        ))
    });
    tools
}

fn spec() -> RunSpec {
    let mut program = AgentProgram::new("metered:m");
    program.tools = vec![ToolSpec {
        name: "probe".into(),
        config: Value::Null,
    }];
    RunSpec::new("go", Program::Agent(program))
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-12)
}

/// An interrupted run reports what its first call cost; the resume, under other prices,
/// charges only its new call at them: the first keeps the price recorded with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_priced_when_made_and_keep_their_price_on_a_resume_with_other_prices() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let answers = vec![
        Ok(ScriptedResponse::tool_call("c1", "probe", json!({}))),
        Ok(ScriptedResponse::text("done")),
    ];
    let started = Arc::new(AtomicUsize::new(0));
    let runtime = Runtime::new(store.clone())
        .with_providers(metered(answers.clone()))
        .with_tools(probe(started.clone()))
        .with_prices(prices(1000.0, 10_000.0));
    let handle = runtime.start(spec(), false).await.unwrap();
    while started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    handle.abort();
    let first = handle.outcome().await.unwrap();
    assert_eq!(first.end, RunEnd::Interrupted);
    assert_eq!(first.usage.input_tokens, 10, "the interrupted run's call");
    assert!(
        close(first.usage.cost, call_cost(1000.0, 10_000.0)),
        "{first:?}"
    );
    let record = store.run(&first.run_id).await.unwrap().unwrap();
    assert_eq!(record.usage, first.usage);

    // The price table changes: the resume's new call is charged at the new prices only.
    let runtime = Runtime::new(store.clone())
        .with_providers(metered(answers))
        .with_tools(probe(started))
        .with_prices(prices(2000.0, 20_000.0));
    let resumed = runtime
        .resume(&first.run_id, ResumeOptions::default(), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(resumed.exit_code(), 0, "{resumed:?}");
    assert_eq!(resumed.usage.input_tokens, 20);
    let total = call_cost(1000.0, 10_000.0) + call_cost(2000.0, 20_000.0);
    assert!(close(resumed.usage.cost, total), "{resumed:?}");

    let mut calls: Vec<CallCost> = store
        .recorded_responses(&first.run_id)
        .await
        .unwrap()
        .iter()
        .map(CallCost::of)
        .collect();
    calls.sort_by_key(|c| c.price.as_ref().map(|p| p.input as u64));
    let prices: Vec<(f64, f64)> = calls
        .iter()
        .map(|c| c.price.as_ref().map(|p| (p.input, p.cache_read)).unwrap())
        .collect();
    assert_eq!(prices, [(1000.0, 100.0), (2000.0, 200.0)]);
    assert_eq!(calls[0].model.as_deref(), Some("metered:m"));
    assert_eq!(calls[0].usage.cache_read_tokens, 4);
    assert_eq!(
        calls[1].price.as_ref().unwrap().source,
        PriceSource::Override
    );
}

/// The failing-turn case: the model's call succeeded, the step after it failed; the failed
/// run still counts that call, tokens and cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_later_step_fails_counts_the_call_that_succeeded() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let started = Arc::new(AtomicUsize::new(1)); // the probe answers at once
    let runtime = Runtime::new(store.clone())
        .with_providers(metered(vec![
            Ok(ScriptedResponse::tool_call("c1", "probe", json!({}))),
            Err("the provider is down".into()),
        ]))
        .with_tools(probe(started))
        .with_prices(prices(1000.0, 10_000.0));
    let outcome = runtime
        .start(spec(), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert!(matches!(outcome.end, RunEnd::Failed { .. }), "{outcome:?}");
    assert_eq!(
        (outcome.usage.input_tokens, outcome.usage.output_tokens),
        (10, 1)
    );
    assert!(close(outcome.usage.cost, call_cost(1000.0, 10_000.0)));
    let record = store.run(&outcome.run_id).await.unwrap().unwrap();
    assert_eq!(record.usage, outcome.usage);
}

/// A model no table prices has an unknown cost — in the outcome, the run record and the
/// recorded call — not $0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_a_price_has_an_unknown_cost() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let runtime = Runtime::new(store.clone())
        .with_providers(metered(vec![Ok(ScriptedResponse::text("hi"))]))
        .with_tools(probe(Arc::new(AtomicUsize::new(1))));
    let outcome = runtime
        .start(spec(), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    assert_eq!(outcome.usage.input_tokens, 10);
    assert_eq!(outcome.usage.cost, None);
    let record = store.run(&outcome.run_id).await.unwrap().unwrap();
    assert_eq!(record.usage.cost, None);
    let responses = store.recorded_responses(&outcome.run_id).await.unwrap();
    assert_eq!(responses[0].response["cost"], Value::Null);
    assert_eq!(responses[0].response["model"], "metered:m");
}

/// A cost budget over a model without a price is refused before the run exists, naming
/// the model and the fix; with a price it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_budget_needs_the_price_of_the_model_and_says_how_to_give_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let mut budgeted = spec();
    budgeted.budget.max_cost = Some(1.0);
    let runtime = Runtime::new(store.clone())
        .with_providers(metered(vec![Ok(ScriptedResponse::text("hi"))]))
        .with_tools(probe(Arc::new(AtomicUsize::new(1))));
    let Err(error) = runtime.start(budgeted.clone(), false).await else {
        panic!("started without a price")
    };
    let message = error.to_string();
    assert_eq!(error.exit_code(), 2);
    assert!(
        message.contains("metered:m") && message.contains("--pricing FILE"),
        "{message}"
    );
    assert!(store.runs(None).await.unwrap().is_empty(), "no run record");
    let outcome = runtime
        .with_prices(prices(1.0, 1.0))
        .start(budgeted, false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    // Its one call (10 input tokens, 1 output) is what it spent, at its price.
    assert_eq!(
        (outcome.usage.input_tokens, outcome.usage.output_tokens),
        (10, 1)
    );
    assert!(
        close(outcome.usage.cost, call_cost(1.0, 1.0)),
        "{outcome:?}"
    );
}

/// A cost budget stops the run, failed, before the model call that would go past it, at the
/// prices the calls were charged at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_budget_stops_the_run_once_reached() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let answers = (0..10)
        .map(|i| {
            Ok(ScriptedResponse::tool_call(
                format!("c{i}"),
                "probe",
                json!({}),
            ))
        })
        .collect();
    let mut budgeted = spec();
    // Three calls cost 3 × $0.0164 ≥ $0.04: no fourth call.
    budgeted.budget.max_cost = Some(0.04);
    let outcome = Runtime::new(store.clone())
        .with_providers(metered(answers))
        .with_tools(probe(Arc::new(AtomicUsize::new(1))))
        .with_prices(prices(1000.0, 10_000.0))
        .start(budgeted, false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    let RunEnd::Failed { error } = &outcome.end else {
        panic!("{outcome:?}")
    };
    assert!(error.contains("maxCost"), "{error}");
    assert_eq!(outcome.usage.input_tokens, 30, "three calls");
    assert!(close(outcome.usage.cost, 3.0 * call_cost(1000.0, 10_000.0)));
}

/// A cost budget on a run resumed where its model has no price any more (the price table
/// lost it): the calls already made were priced, the next one could not be — the run fails
/// before making it, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_budget_fails_a_resume_whose_model_has_no_price_any_more() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    let answers = vec![
        Ok(ScriptedResponse::tool_call("c1", "probe", json!({}))),
        Ok(ScriptedResponse::text("done")),
    ];
    let started = Arc::new(AtomicUsize::new(0));
    let mut budgeted = spec();
    budgeted.budget.max_cost = Some(1.0);
    let handle = Runtime::new(store.clone())
        .with_providers(metered(answers.clone()))
        .with_tools(probe(started.clone()))
        .with_prices(prices(1000.0, 10_000.0))
        .start(budgeted, false)
        .await
        .unwrap();
    while started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    handle.abort();
    let first = handle.outcome().await.unwrap();
    assert_eq!(first.end, RunEnd::Interrupted);
    let resumed = Runtime::new(store.clone())
        .with_providers(metered(answers))
        .with_tools(probe(started))
        .resume(&first.run_id, ResumeOptions::default(), false)
        .await
        .unwrap()
        .outcome()
        .await
        .unwrap();
    let RunEnd::Failed { error } = &resumed.end else {
        panic!("{resumed:?}")
    };
    assert!(
        error.contains("cannot be kept: a model without a price was to be called"),
        "{error}"
    );
    assert_eq!(resumed.usage.input_tokens, 10, "no second call");
}
