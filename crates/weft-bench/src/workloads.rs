//! The four workloads, each returning its JSON line.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};
use weft_agent::checkpoint::{CheckpointMode, CheckpointStore, file_checkpoints};
use weft_agent::{Agent, AgentOptions, AgentState, SESSION_ID_KEY, agent};
use weft_provider::adapters::scripted::{self, ScriptedResponse, ScriptedToolCall};
use weft_provider::{AssistantMessage, LlmRequest, Message, Tool, ToolError, UppError};

use crate::memory::{peak_rss_bytes, rss_bytes};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How W3's checkpoints are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Fire and forget (the UAP default).
    Async,
    /// The step waits for the write.
    Sync,
}

/// Executions of `add` across the whole process (the harness checks `runs × N`).
static CALLS: AtomicU64 = AtomicU64::new(0);

#[derive(Deserialize)]
struct AddArgs {
    a: i64,
    b: i64,
}

/// `add(a: int, b: int) -> int`, validated by serde like any Rust tool would.
fn add_tool() -> Tool {
    Tool::new(
        "add",
        "Add two integers.",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        |args: Value, _ctx| async move {
            let AddArgs { a, b } = serde_json::from_value(args)
                .map_err(|e| ToolError::new(format!("invalid arguments: {e}")))?;
            CALLS.fetch_add(1, Ordering::Relaxed);
            Ok(json!(a + b))
        },
    )
}

/// The stateless scripted model of WORKLOAD.md: it reads the last message of the input.
fn respond(request: &LlmRequest, n: u64) -> Result<ScriptedResponse, UppError> {
    let step = match request.messages().last() {
        Some(Message::ToolResult(results)) => results
            .results
            .first()
            .and_then(|r| r.tool_call_id.strip_prefix("call_"))
            .and_then(|k| k.parse::<u64>().ok())
            .map_or(0, |k| k + 1),
        _ => 0,
    };
    Ok(if step < n {
        ScriptedResponse {
            tool_calls: vec![ScriptedToolCall {
                id: Some(format!("call_{step}")),
                name: "add".into(),
                arguments: json!({"a": step, "b": 1}),
                after: Vec::new(),
            }],
            ..ScriptedResponse::default()
        }
    } else {
        ScriptedResponse::text("done")
    })
}

fn build_agent(
    n: u64,
    store: Option<Arc<dyn CheckpointStore>>,
    durability: Durability,
) -> Result<Agent, BoxError> {
    let model = scripted::function_model(move |request| respond(request, n));
    let mut options = AgentOptions::new(model).tool(add_tool());
    if let Some(store) = store {
        options = options
            .checkpoints_arc(store)
            .checkpoint_mode(match durability {
                Durability::Async => CheckpointMode::Async,
                Durability::Sync => CheckpointMode::Sync,
            });
    }
    Ok(agent(options)?)
}

async fn one_run(agent: &Agent, state: &AgentState) -> Result<(), BoxError> {
    let result = agent.generate("start", state).await?;
    let text = result.turn.text();
    if text != "done" {
        return Err(format!("run ended with {text:?}, not \"done\"").into());
    }
    Ok(())
}

struct Stats {
    median_us: f64,
    min_us: f64,
    p90_us: f64,
}

fn stats(mut samples_ns: Vec<u128>) -> Stats {
    samples_ns.sort_unstable();
    let at = |q: f64| {
        let i = ((samples_ns.len() as f64 - 1.0) * q).round() as usize;
        samples_ns[i.min(samples_ns.len() - 1)] as f64 / 1000.0
    };
    Stats {
        median_us: at(0.5),
        min_us: at(0.0),
        p90_us: at(0.9),
    }
}

fn runtime_current() -> Result<tokio::runtime::Runtime, BoxError> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn header(workload: &str) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    map.insert("framework".into(), json!("weft"));
    map.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    map.insert(
        "rustc".into(),
        json!(option_env!("WEFT_RUSTC_VERSION").unwrap_or("1.95")),
    );
    map.insert("workload".into(), json!(workload));
    map
}

/// W1: sequential tool loop, N = 10 and N = 100.
pub(crate) fn w1() -> Result<String, BoxError> {
    let runtime = runtime_current()?;
    let mut line = header("w1");
    let runs: usize = std::env::var("PEERS_W1_N100_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    for n in [10u64, 100] {
        let r = if n == 100 { runs } else { 200 };
        let agent = build_agent(n, None, Durability::Async)?;
        let warmup = (200 / n).max(5);
        let start_calls = CALLS.load(Ordering::Relaxed);
        let samples = runtime.block_on(async {
            for _ in 0..warmup {
                one_run(&agent, &AgentState::initial()).await?;
            }
            let mut samples = Vec::with_capacity(r);
            for _ in 0..r {
                let state = AgentState::initial();
                let started = Instant::now();
                one_run(&agent, &state).await?;
                samples.push(started.elapsed().as_nanos());
            }
            Ok::<_, BoxError>(samples)
        })?;
        let executed = CALLS.load(Ordering::Relaxed) - start_calls;
        if executed != (warmup + r as u64) * n {
            return Err(format!(
                "add ran {executed} times, expected {}",
                (warmup + r as u64) * n
            )
            .into());
        }
        let s = stats(samples);
        eprintln!(
            "w1 n={n}: median {:.1} µs per run, {:.2} µs per step",
            s.median_us,
            s.median_us / n as f64
        );
        line.insert(format!("w1_n{n}_run_us"), json!(s.median_us));
        line.insert(format!("w1_n{n}_step_us"), json!(s.median_us / n as f64));
        line.insert(format!("w1_n{n}_min_us"), json!(s.min_us));
        line.insert(format!("w1_n{n}_p90_us"), json!(s.p90_us));
    }
    line.insert("w1_n100_runs".into(), json!(runs));
    Ok(Value::Object(line).to_string())
}

/// The runtime of `w1rt`: the bench's model as provider `benchN` (`benchN:w1` answers as W1's
/// model with that N) and `add` as a registered tool, on a SQLite store in `dir`.
#[cfg(feature = "runtime")]
async fn bench_runtime(
    dir: &Path,
    durability: Durability,
) -> Result<weft_runtime::Runtime, BoxError> {
    let store = weft_store::Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await?
        .with_durability(match durability {
            Durability::Async => weft_store::Durability::Async,
            Durability::Sync => weft_store::Durability::Sync,
        });
    let mut providers = weft_provider::ProviderRegistry::new();
    for n in [10u64, 100] {
        let provider = scripted::function_model(move |request| respond(request, n)).provider;
        providers.register(format!("bench{n}"), move || provider.clone());
    }
    let mut tools = weft_runtime::ToolRegistry::new();
    tools.register("add", |_config: &Value| Ok(add_tool()));
    Ok(weft_runtime::Runtime::new(store)
        .with_providers(providers)
        .with_tools(tools))
}

/// One run of `w1rt`: a fresh thread, `start`, the model's N tool steps, `"done"`.
#[cfg(feature = "runtime")]
async fn one_runtime_run(
    runtime: &weft_runtime::Runtime,
    n: u64,
    durability: Durability,
) -> Result<(), BoxError> {
    use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
    let mut program = AgentProgram::new(format!("bench{n}:w1"));
    program.tools = vec![ToolSpec {
        name: "add".into(),
        config: json!({}),
    }];
    program.max_steps = Some(n + 10);
    let mut spec = RunSpec::new("start", Program::Agent(program));
    spec.durability = match durability {
        Durability::Async => weft_store::Durability::Async,
        Durability::Sync => weft_store::Durability::Sync,
    };
    let handle = runtime.start(spec, false).await?;
    match handle.outcome().await?.end {
        weft_runtime::RunEnd::Completed { output } if output == "done" => Ok(()),
        end => Err(format!("run ended with {end:?}, not \"done\"").into()),
    }
}

/// W1 through `Runtime::start` (`w1rt`): the same model, tool, N and run counts as W1, each
/// run a durable run on SQLite (a new thread, argument validation against the tool's schema,
/// the event log, the tool ledger and a checkpoint per step, in `durability`).
#[cfg(feature = "runtime")]
pub(crate) fn w1_runtime(durability: Durability) -> Result<String, BoxError> {
    let tokio = runtime_current()?;
    let temp = tempfile::tempdir()?;
    let runtime = tokio.block_on(bench_runtime(temp.path(), durability))?;
    let mut line = header("w1rt");
    let runs: usize = std::env::var("PEERS_W1_N100_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    for n in [10u64, 100] {
        let r = if n == 100 { runs } else { 200 };
        let warmup = (200 / n).max(5);
        let start_calls = CALLS.load(Ordering::Relaxed);
        let samples = tokio.block_on(async {
            for _ in 0..warmup {
                one_runtime_run(&runtime, n, durability).await?;
            }
            let mut samples = Vec::with_capacity(r);
            for _ in 0..r {
                let started = Instant::now();
                one_runtime_run(&runtime, n, durability).await?;
                samples.push(started.elapsed().as_nanos());
            }
            Ok::<_, BoxError>(samples)
        })?;
        let executed = CALLS.load(Ordering::Relaxed) - start_calls;
        if executed != (warmup + r as u64) * n {
            return Err(format!(
                "add ran {executed} times, expected {}",
                (warmup + r as u64) * n
            )
            .into());
        }
        let s = stats(samples);
        eprintln!(
            "w1rt n={n}: median {:.1} µs per run, {:.2} µs per step",
            s.median_us,
            s.median_us / n as f64
        );
        line.insert(format!("w1rt_n{n}_run_us"), json!(s.median_us));
        line.insert(format!("w1rt_n{n}_step_us"), json!(s.median_us / n as f64));
        line.insert(format!("w1rt_n{n}_min_us"), json!(s.min_us));
        line.insert(format!("w1rt_n{n}_p90_us"), json!(s.p90_us));
    }
    line.insert("w1rt_n100_runs".into(), json!(runs));
    line.insert(
        "w1rt_durability".into(),
        json!(match durability {
            Durability::Async => "async",
            Durability::Sync => "sync",
        }),
    );
    Ok(Value::Object(line).to_string())
}

/// W2: 1,000 concurrent runs of N = 10 on a multi-threaded runtime with the machine's cores.
pub(crate) fn w2() -> Result<String, BoxError> {
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()?;
    let agent = build_agent(10, None, Durability::Async)?;
    let (wall, before) = runtime.block_on(async {
        for _ in 0..10 {
            one_run(&agent, &AgentState::initial()).await?;
        }
        let before = rss_bytes();
        let started = Instant::now();
        let runs = (0..1000).map(|_| {
            let agent = agent.clone();
            tokio::spawn(async move {
                one_run(&agent, &AgentState::initial())
                    .await
                    .map_err(|e| e.to_string())
            })
        });
        for joined in futures_util::future::join_all(runs).await {
            joined??;
        }
        Ok::<_, BoxError>((started.elapsed(), before))
    })?;
    let peak = peak_rss_bytes();
    let mut line = header("w2");
    let per_s = 1000.0 / wall.as_secs_f64();
    eprintln!(
        "w2: 1000 runs in {:.1} ms = {per_s:.0} runs/s, peak RSS {:.1} MiB",
        wall.as_secs_f64() * 1000.0,
        peak as f64 / 1048576.0
    );
    line.insert("w2_wall_ms".into(), json!(wall.as_secs_f64() * 1000.0));
    line.insert("w2_runs_per_s".into(), json!(per_s));
    line.insert("w2_peak_rss_mib".into(), json!(peak as f64 / 1048576.0));
    line.insert("w2_rss_before_mib".into(), json!(before as f64 / 1048576.0));
    line.insert("w2_workers".into(), json!(cores));
    Ok(Value::Object(line).to_string())
}

fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The size of `dir` once its store has closed: waits (at most 5 s) for SQLite's WAL file to
/// go away, which happens when the store's threads close their connections.
fn closed_bytes(dir: &Path) -> u64 {
    let wal = dir.join("weft.db-wal");
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while wal.exists() && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    dir_bytes(dir)
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), BoxError> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)?.flatten() {
        let target = to.join(entry.file_name());
        if entry.metadata()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// The checkpoint stores W3 measures: adding one is one line here.
async fn stores(
    dir: &Path,
) -> Result<Vec<(&'static str, Option<Arc<dyn CheckpointStore>>)>, BoxError> {
    let sqlite = weft_store::Store::open(&format!(
        "sqlite:{}",
        dir.join("sqlite").join("weft.db").display()
    ))
    .await?;
    Ok(vec![
        ("none", None),
        ("file", Some(Arc::new(file_checkpoints(dir.join("file"))))),
        ("sqlite", Some(Arc::new(sqlite))),
    ])
}

/// W3: N = 100, 10 timed runs after 2 warm-ups, each on a new session, per store.
pub(crate) fn w3(durability: Durability) -> Result<String, BoxError> {
    let runtime = runtime_current()?;
    let temp = tempfile::tempdir()?;
    // `WEFT_BENCH_KEEP=<dir>`: the stores' files are copied there (after closing) for a look
    // at where their bytes go (`sqlite3 <dir>/sqlite/weft.db` with `dbstat`).
    let keep = std::env::var_os("WEFT_BENCH_KEEP").map(std::path::PathBuf::from);
    let mut line = header("w3");
    line.insert(
        "w3_durability".into(),
        json!(match durability {
            Durability::Async => "async",
            Durability::Sync => "sync",
        }),
    );
    let mut baseline = None;
    // `WEFT_BENCH_W3_STORES=none,sqlite`: only these stores (say, to profile one).
    let only = std::env::var("WEFT_BENCH_W3_STORES").ok();
    for (name, store) in runtime.block_on(stores(temp.path()))? {
        if only
            .as_deref()
            .is_some_and(|only| !only.split(',').any(|o| o == name))
        {
            continue;
        }
        let agent = build_agent(100, store.clone(), durability)?;
        let samples = runtime.block_on(async {
            let mut samples = Vec::new();
            for run in 0..12 {
                let state = AgentState::initial()
                    .with_metadata(SESSION_ID_KEY, json!(uuid::Uuid::new_v4().to_string()));
                let started = Instant::now();
                one_run(&agent, &state).await?;
                // Every checkpoint of the run is on disk before the clock stops.
                agent.flush_checkpoints().await;
                if run >= 2 {
                    samples.push(started.elapsed().as_nanos());
                }
            }
            Ok::<_, BoxError>(samples)
        })?;
        let step_us = stats(samples).median_us / 100.0;
        eprintln!("w3 {name}: {step_us:.2} µs per step");
        line.insert(format!("w3_{name}_step_us"), json!(step_us));
        if name == "none" {
            baseline = Some(step_us);
        } else {
            line.insert(
                format!("w3_{name}_file_kib"),
                json!(dir_bytes(&temp.path().join(name)) as f64 / 1024.0),
            );
            if let Some(base) = baseline {
                line.insert(format!("w3_{name}_overhead_us"), json!(step_us - base));
            }
            // What is left on disk once the store is closed (SQLite folds its WAL back into
            // the database file and removes it when the last connection closes).
            drop(agent);
            drop(store);
            let dir = temp.path().join(name);
            let closed = closed_bytes(&dir);
            line.insert(
                format!("w3_{name}_closed_kib"),
                json!(closed as f64 / 1024.0),
            );
            if let Some(keep) = &keep {
                copy_dir(&dir, &keep.join(name))?;
            }
        }
    }
    Ok(Value::Object(line).to_string())
}

const FILLER: &str = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua ";

fn content(i: usize, j: usize) -> String {
    let mut text = format!("c{i:05}m{j:02} ");
    while text.len() < 200 {
        text.push_str(FILLER);
    }
    text.truncate(200);
    text
}

/// W4: 10,000 conversations of 20 messages held as `AgentState`s.
pub(crate) fn w4() -> Result<String, BoxError> {
    let before = rss_bytes();
    let mut conversations = Vec::with_capacity(10_000);
    for i in 0..10_000 {
        let messages = (0..20).map(|j| {
            let text = content(i, j);
            if j % 2 == 0 {
                Message::user(text)
            } else {
                Message::Assistant(AssistantMessage::text(text))
            }
        });
        conversations.push(AgentState::initial().with_messages(messages));
    }
    let after = rss_bytes();
    let total: usize = conversations.iter().map(|c| c.messages().len()).sum();
    if total != 200_000 {
        return Err(format!("built {total} messages, expected 200000").into());
    }
    let per_conv = after.saturating_sub(before) as f64 / 10_000.0;
    eprintln!(
        "w4: {per_conv:.0} bytes per conversation, {:.0} per message",
        per_conv / 20.0
    );
    let mut line = header("w4");
    line.insert("w4_bytes_per_conv".into(), json!(per_conv));
    line.insert("w4_bytes_per_msg".into(), json!(per_conv / 20.0));
    drop(conversations);
    Ok(Value::Object(line).to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn w4_strings_are_exactly_200_characters_with_their_prefix() {
        let text = content(42, 7);
        assert_eq!(text.len(), 200);
        assert!(text.starts_with("c00042m07 lorem ipsum"));
    }

    #[test]
    fn percentiles() {
        let s = stats(vec![5_000, 1_000, 3_000, 2_000, 4_000]);
        assert_eq!((s.min_us, s.median_us, s.p90_us), (1.0, 3.0, 5.0));
    }

    #[tokio::test]
    async fn a_run_makes_n_tool_calls_through_the_stateless_model_and_ends_with_done() {
        let before = CALLS.load(Ordering::SeqCst);
        let agent = build_agent(3, None, Durability::Async).unwrap();
        let result = agent
            .generate("start", &AgentState::initial())
            .await
            .unwrap();
        assert_eq!(result.turn.text(), "done");
        assert_eq!(result.turn.cycles, 4);
        let ids: Vec<_> = result
            .turn
            .tool_executions
            .iter()
            .map(|e| e.tool_call_id.clone())
            .collect();
        assert_eq!(ids, ["call_0", "call_1", "call_2"]);
        assert_eq!(result.turn.tool_executions[2].result, json!(3));
        assert!(CALLS.load(Ordering::SeqCst) - before >= 3);
    }

    #[cfg(feature = "runtime")]
    #[tokio::test]
    async fn a_runtime_run_makes_n_tool_calls_and_ends_with_done() {
        let temp = tempfile::tempdir().unwrap();
        let before = CALLS.load(Ordering::SeqCst);
        let runtime = bench_runtime(temp.path(), Durability::Sync).await.unwrap();
        one_runtime_run(&runtime, 10, Durability::Sync)
            .await
            .unwrap();
        assert!(CALLS.load(Ordering::SeqCst) - before >= 10);
    }

    #[tokio::test]
    async fn w3_file_store_writes_checkpoints_for_each_session() {
        let temp = tempfile::tempdir().unwrap();
        let (name, store) = stores(temp.path()).await.unwrap().remove(1);
        assert_eq!(name, "file");
        let agent = build_agent(2, store, Durability::Sync).unwrap();
        let state = AgentState::initial().with_metadata(SESSION_ID_KEY, json!("bench-session"));
        one_run(&agent, &state).await.unwrap();
        agent.flush_checkpoints().await;
        assert!(dir_bytes(&temp.path().join("file")) > 0);
    }
}

#[cfg(test)]
mod store_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn w3_measures_the_sqlite_store_too() {
        let temp = tempfile::tempdir().unwrap();
        let names: Vec<&str> = stores(temp.path())
            .await
            .unwrap()
            .iter()
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(names, ["none", "file", "sqlite"]);
        let (_, store) = stores(temp.path()).await.unwrap().remove(2);
        let agent = build_agent(2, store, Durability::Sync).unwrap();
        let state = AgentState::initial().with_metadata(SESSION_ID_KEY, json!("bench-sqlite"));
        one_run(&agent, &state).await.unwrap();
        agent.flush_checkpoints().await;
        assert!(dir_bytes(&temp.path().join("sqlite")) > 0);
    }
}
