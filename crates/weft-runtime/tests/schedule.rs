//! Scheduled effects and the queue driver (Standard Agents SA-081, SA-065): the scheduler
//! fires an effect when it is due (not before), wakes early for a sooner one, never fires a
//! removed effect or one of a terminated thread, and stops on shutdown — with tokio's paused
//! time; and, through real runs, work queued on an idle thread with the driver starts a run
//! that takes it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use weft_runtime::queue_driver::{LaunchError, QueueDriver, QueueInput, QueueRuns, QueueTaken};
use weft_runtime::schedule::{Clock, EffectScheduler};
use weft_runtime::spec::{AgentProgram, Program, RunSpec, ToolSpec};
use weft_runtime::{RunError, Runtime, ToolRegistry};
use weft_store::{
    RunStatus, Runs as _, ScheduledEffects as _, Store, ThreadQueue as _, ThreadRecord,
    Threads as _,
};

async fn sqlite(dir: &Path) -> Store {
    Store::open(&format!("sqlite:{}", dir.join("weft.db").display()))
        .await
        .unwrap()
}

/// A launcher that starts nothing: it reports the thread, the input and the clock's time
/// (after refusing as many starts as `refuse` says, as a server at its limit of runs does).
struct Recorder {
    clock: Clock,
    started: mpsc::Sender<(String, QueueInput, i64)>,
    refuse: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl QueueRuns for Recorder {
    async fn start(&self, thread: &str, input: QueueInput) -> Result<String, LaunchError> {
        let refused = self
            .refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if refused.is_ok() {
            return Err("the caller drives as many runs as it may".into());
        }
        self.started
            .send((thread.to_owned(), input, (self.clock)()))
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!("run-for-{thread}"))
    }
}

/// A clock the test moves by hand: under tokio's paused time the store's I/O lets the
/// runtime's clock jump ahead, so what is due is decided by this one only.
fn manual_clock() -> (Clock, Arc<AtomicI64>) {
    let now = Arc::new(AtomicI64::new(1_000_000_000_000));
    let read = now.clone();
    (Arc::new(move || read.load(Ordering::SeqCst)), now)
}

struct Fixture {
    _dir: tempfile::TempDir,
    runtime: Runtime,
    clock: Clock,
    time: Arc<AtomicI64>,
    started: mpsc::Receiver<(String, QueueInput, i64)>,
    refuse: Arc<AtomicUsize>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn scheduler(threads: &[&str], max_idle: Duration) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path()).await;
    for thread in threads {
        store.put_thread(&ThreadRecord::new(*thread)).await.unwrap();
    }
    let runtime = Runtime::new(store);
    let (clock, time) = manual_clock();
    let (tx, started) = mpsc::channel(16);
    let refuse = Arc::new(AtomicUsize::new(0));
    let runs: Arc<dyn QueueRuns> = Arc::new(Recorder {
        clock: clock.clone(),
        started: tx,
        refuse: refuse.clone(),
    });
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(
        EffectScheduler::new(QueueDriver::new(runtime.clone()), runs)
            .with_clock(clock.clone())
            .with_max_idle(max_idle)
            .run(shutdown.clone()),
    );
    Fixture {
        _dir: dir,
        runtime,
        clock,
        time,
        started,
        refuse,
        shutdown,
        task,
    }
}

impl Fixture {
    /// The next run started (no deadline: under paused time a timer of the test's own
    /// would race the store's I/O; a hang is the test harness's timeout).
    async fn next_start(&mut self) -> (String, QueueInput, i64) {
        self.started.recv().await.expect("the launcher lives")
    }

    /// Lets the scheduler make many passes (paused time: its sleeps end at once).
    async fn idle_passes(&mut self) {
        tokio::time::sleep(Duration::from_secs(600)).await;
    }

    fn set_time(&self, micros: i64) {
        self.time.store(micros, Ordering::SeqCst);
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("the scheduler stops on shutdown")
            .unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn an_effect_fires_into_the_queue_when_due_and_not_before() {
    let mut f = scheduler(&["t1"], Duration::from_secs(30)).await;
    let due = (f.clock)() + 90_000_000;
    let effect = f
        .runtime
        .schedule_effect("t1", "remind", json!({"about": "tea"}), due)
        .await
        .unwrap();
    f.set_time(due - 10_000_000);
    f.idle_passes().await;
    assert!(
        f.started.try_recv().is_err(),
        "nothing fires before its time"
    );
    assert_eq!(
        f.runtime.scheduled_effects("t1", None).await.unwrap(),
        std::slice::from_ref(&effect)
    );
    f.set_time(due);
    let (thread, input, at) = f.next_start().await;
    assert_eq!((thread.as_str(), &input), ("t1", &QueueInput::Queue));
    assert_eq!(at, due);
    let queued = f.runtime.store().queued("t1").await.unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].id, effect.id, "queued under the effect's id");
    assert_eq!(queued[0].tool.as_ref(), Some(&effect.call));
    assert!(
        f.runtime
            .scheduled_effects("t1", None)
            .await
            .unwrap()
            .is_empty()
    );
    f.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_fired_effect_whose_run_cannot_start_is_tried_again_until_one_does() {
    let mut f = scheduler(&["t1"], Duration::from_secs(30)).await;
    f.refuse.store(3, Ordering::SeqCst);
    let at = tokio::time::Instant::now();
    let effect = f
        .runtime
        .schedule_effect("t1", "remind", json!({}), (f.clock)())
        .await
        .unwrap();
    // Refused three times (the tries 1 s, 2 s and 4 s apart), started at the fourth.
    let (thread, input, _) = f.next_start().await;
    assert_eq!((thread.as_str(), &input), ("t1", &QueueInput::Queue));
    assert_eq!(f.refuse.load(Ordering::SeqCst), 0);
    assert!(
        at.elapsed() >= Duration::from_secs(7),
        "tried again after 1 + 2 + 4 s, not at once: {:?}",
        at.elapsed()
    );
    let queued = f.runtime.store().queued("t1").await.unwrap();
    assert_eq!(queued.len(), 1, "the call waited in the queue all along");
    assert_eq!(queued[0].id, effect.id);
    // Started: no more tries.
    f.idle_passes().await;
    assert!(f.started.try_recv().is_err());
    f.stop().await;
}

/// In real time (the wake must not come from a jump of paused time): the scheduler sleeps
/// for an hour, and an effect scheduled meanwhile fires well before the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sooner_effect_wakes_the_sleeping_scheduler() {
    let hour = Duration::from_secs(3600);
    let mut f = scheduler(&["t1"], hour).await;
    let later = (f.clock)() + 2 * 3_600_000_000;
    f.runtime
        .schedule_effect("t1", "later", json!({}), later)
        .await
        .unwrap();
    // The scheduler now sleeps for its longest idle time (an hour).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let soon = (f.clock)();
    f.runtime
        .schedule_effect("t1", "soon", json!({}), soon)
        .await
        .unwrap();
    let (_, _, at) = tokio::time::timeout(Duration::from_secs(60), f.next_start())
        .await
        .expect("woken for the sooner effect, not after its hour");
    assert_eq!(at, soon);
    let names: Vec<String> = f
        .runtime
        .scheduled_effects("t1", None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.call.name)
        .collect();
    assert_eq!(names, ["later"]);
    assert_eq!(
        f.runtime
            .scheduled_effects("t1", Some("later"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        f.runtime
            .scheduled_effects("t1", Some("soon"))
            .await
            .unwrap()
            .is_empty()
    );
    f.stop().await;
}

#[tokio::test(start_paused = true)]
async fn removed_effects_and_those_of_terminated_threads_never_fire() {
    let mut f = scheduler(&["kept", "removed", "ended"], Duration::from_secs(30)).await;
    let now = (f.clock)();
    let removed = f
        .runtime
        .schedule_effect("removed", "remind", json!({}), now + 5_000_000)
        .await
        .unwrap();
    f.runtime
        .schedule_effect("ended", "remind", json!({}), now + 5_000_000)
        .await
        .unwrap();
    f.runtime
        .schedule_effect("kept", "remind", json!({}), now + 20_000_000)
        .await
        .unwrap();
    assert!(
        f.runtime
            .remove_scheduled_effect(&removed.id)
            .await
            .unwrap()
    );
    assert!(
        !f.runtime
            .remove_scheduled_effect(&removed.id)
            .await
            .unwrap()
    );
    f.runtime.terminate("ended").await.unwrap();
    assert!(matches!(
        f.runtime
            .schedule_effect("ended", "remind", json!({}), now)
            .await,
        Err(RunError::Terminated(_))
    ));
    f.set_time(now + 30_000_000);
    let (thread, _, _) = f.next_start().await;
    assert_eq!(
        thread, "kept",
        "the first (and only) run is the kept effect's"
    );
    let store = f.runtime.store();
    assert!(store.queued("removed").await.unwrap().is_empty());
    assert!(store.queued("ended").await.unwrap().is_empty());
    assert_eq!(store.next_effect_due().await.unwrap(), None);
    f.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_effect_of_a_thread_terminated_by_another_process_is_dropped() {
    let mut f = scheduler(&["ended", "kept"], Duration::from_secs(30)).await;
    let now = (f.clock)();
    // Scheduled straight into the store, then the thread's record says terminated, as if a
    // process died between setting the timestamp and dropping the thread's effects.
    let store = f.runtime.store().clone();
    let call = weft_store::QueuedTool {
        name: "remind".into(),
        arguments: json!({}),
    };
    store
        .schedule_effect("ended", &call, now + 1_000_000)
        .await
        .unwrap();
    let mut record = store.thread("ended").await.unwrap().unwrap();
    record.metadata.insert("terminated".into(), json!(now));
    store.put_thread(&record).await.unwrap();
    f.runtime
        .schedule_effect("kept", "remind", json!({}), now + 2_000_000)
        .await
        .unwrap();
    f.set_time(now + 2_000_000);
    let (thread, _, _) = f.next_start().await;
    assert_eq!(thread, "kept");
    assert!(store.queued("ended").await.unwrap().is_empty());
    assert!(store.scheduled_effects("ended").await.unwrap().is_empty());
    f.stop().await;
}

#[tokio::test(start_paused = true)]
async fn effects_are_refused_for_unknown_threads_and_bad_arguments() {
    let f = scheduler(&["t1"], Duration::from_secs(30)).await;
    assert!(matches!(
        f.runtime
            .schedule_effect("nope", "remind", json!({}), 0)
            .await,
        Err(RunError::UnknownThread(_))
    ));
    assert!(matches!(
        f.runtime
            .schedule_effect("t1", "remind", json!([1]), 0)
            .await,
        Err(RunError::Refused(_))
    ));
    assert!(matches!(
        f.runtime.schedule_effect("t1", " ", json!({}), 0).await,
        Err(RunError::Refused(_))
    ));
    f.stop().await;
}

// ---- The library path of SA-065: real runs started by the driver ----

/// A scripted model that appends one line, then answers (as `tests/queue.rs`).
fn spec(dir: &Path, input: &str) -> RunSpec {
    let responses = json!([
        {"toolCalls": [{"id": "call-1", "name": "append_line", "arguments": {"line": "a"}}]},
        {"text": "finished"},
        {"text": "again"},
        {"text": "and again"},
        {"text": "and once more"},
    ]);
    let script = dir.join("script.json");
    std::fs::write(&script, json!({"responses": responses}).to_string()).unwrap();
    let mut program = AgentProgram::new(format!("scripted-turns:{}", script.display()));
    program.tools = vec![ToolSpec {
        name: "append_line".into(),
        config: json!({"out": dir.join("out.txt"), "log": dir.join("log.txt"), "delay_ms": 0}),
    }];
    RunSpec::new(input, Program::Agent(program))
}

/// A library program's launcher: the thread's next run of the scripted agent.
struct Library {
    runtime: Runtime,
    dir: std::path::PathBuf,
    started: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl QueueRuns for Library {
    async fn start(&self, thread: &str, input: QueueInput) -> Result<String, LaunchError> {
        let (text, id) = match input {
            QueueInput::Message { text, id } => (text, Some(id)),
            QueueInput::Queue => (String::new(), None),
        };
        let mut spec = spec(&self.dir, &text);
        spec.queued_input = id;
        let handle = self.runtime.start_on(Some(thread), spec, false).await?;
        let id = handle.id().to_owned();
        self.started.lock().unwrap().push(id.clone());
        Ok(id)
    }
}

fn library(runtime: &Runtime, dir: &Path) -> Arc<Library> {
    Arc::new(Library {
        runtime: runtime.clone(),
        dir: dir.to_owned(),
        started: Mutex::new(Vec::new()),
    })
}

/// A store and runtime in `dir` and the thread of one completed run of the scripted agent.
async fn thread_after_one_run(dir: &Path) -> (Store, Runtime, String) {
    let store = sqlite(dir).await;
    let runtime = Runtime::new(store.clone()).with_tools(ToolRegistry::with_builtins());
    let first = runtime.start(spec(dir, "go"), false).await.unwrap();
    let run = first.id().to_owned();
    first.outcome().await.unwrap();
    let thread = store.run(&run).await.unwrap().unwrap().thread_id;
    (store, runtime, thread)
}

async fn completed(runtime: &Runtime, run: &str) {
    for _ in 0..1200 {
        runtime.settled(run).await;
        if let Some(record) = runtime.store().run(run).await.unwrap()
            && record.status != RunStatus::Running
        {
            assert_eq!(record.status, RunStatus::Completed, "{record:?}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {run} did not end");
}

async fn texts(store: &Store, thread: &str) -> Vec<String> {
    let latest = store.latest_checkpoint(thread).await.unwrap().unwrap();
    latest
        .checkpoint
        .state
        .messages()
        .map(|m| m.text())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_queued_on_an_idle_thread_through_the_driver_starts_a_run_that_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime, thread) = thread_after_one_run(dir.path()).await;
    let library = library(&runtime, dir.path());
    let runs: Arc<dyn QueueRuns> = library.clone();
    let driver = QueueDriver::new(runtime.clone());

    // A message queued on the idle thread: a run starts with it as its input.
    let (queued, taken) = driver
        .queue_message(&thread, "queued while idle", &runs)
        .await
        .unwrap();
    let QueueTaken::Started(second) = taken else {
        panic!("no run started: {taken:?}");
    };
    completed(&runtime, &second).await;
    let said = texts(&store, &thread).await;
    let at = said
        .iter()
        .position(|t| t == "queued while idle")
        .unwrap_or_else(|| panic!("{said:?}"));
    assert_eq!(
        said.iter().filter(|t| **t == "queued while idle").count(),
        1
    );
    assert_eq!(said[at + 1], "again", "{said:?}");
    assert!(store.queued(&thread).await.unwrap().is_empty());
    assert!(!queued.id.is_empty());

    // A tool call queued on the idle thread: a run starts and its first step runs it.
    let before = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
    let (queued_call, taken) = driver
        .queue_tool(&thread, "append_line", json!({"line": "queued"}), &runs)
        .await
        .unwrap();
    let QueueTaken::Started(third) = taken else {
        panic!("no run started: {taken:?}");
    };
    completed(&runtime, &third).await;
    let after = std::fs::read_to_string(dir.path().join("out.txt")).unwrap();
    assert_eq!(after, format!("{before}{} queued\n", queued_call.id));
    assert!(store.queued(&thread).await.unwrap().is_empty());
    assert_eq!(library.started.lock().unwrap().len(), 2);

    // Nothing queued: nothing starts.
    assert_eq!(
        driver.run_the_queue(&thread, &runs).await.unwrap(),
        QueueTaken::Empty
    );
}

/// A launcher that cannot start runs (a project that stopped loading, a full server).
struct Failing;

#[async_trait::async_trait]
impl QueueRuns for Failing {
    async fn start(&self, _: &str, _: QueueInput) -> Result<String, LaunchError> {
        Err("the project does not load".into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_whose_run_cannot_start_stays_queued_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime, thread) = thread_after_one_run(dir.path()).await;
    let driver = QueueDriver::new(runtime.clone());
    let failing: Arc<dyn QueueRuns> = Arc::new(Failing);

    let one = store.queue_message(&thread, "first").await.unwrap();
    let two = store.queue_message(&thread, "second").await.unwrap();
    let error = driver.run_the_queue(&thread, &failing).await.unwrap_err();
    assert!(matches!(error, RunError::Launch(_)), "{error}");
    let ids: Vec<String> = store
        .queued(&thread)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, [one.id.clone(), two.id.clone()]);

    // Once runs can start again, the first message is the run's input, with its entry's id,
    // and the second is taken before the run's first step: each once, in order.
    let library: Arc<dyn QueueRuns> = library(&runtime, dir.path());
    let QueueTaken::Started(next) = driver.run_the_queue(&thread, &library).await.unwrap() else {
        panic!("no run started");
    };
    completed(&runtime, &next).await;
    let latest = store.latest_checkpoint(&thread).await.unwrap().unwrap();
    let said: Vec<(String, String)> = latest
        .checkpoint
        .state
        .messages()
        .map(|m| (m.id().to_owned(), m.text()))
        .collect();
    let at = said
        .iter()
        .position(|(_, t)| t == "first")
        .unwrap_or_else(|| panic!("{said:?}"));
    assert_eq!(said[at], (one.id, "first".to_owned()));
    assert_eq!(said[at + 1], (two.id, "second".to_owned()));
    assert_eq!(said.iter().filter(|(_, t)| t == "first").count(), 1);
    assert!(store.queued(&thread).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_a_cut_off_run_already_holds_is_not_taken_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime, thread) = thread_after_one_run(dir.path()).await;

    // What a process killed between a queued run's first checkpoint and taking its input
    // out of the queue leaves: the checkpoint holds the message, the queue still has it.
    let entry = store.queue_message(&thread, "taken once").await.unwrap();
    let mut latest = store
        .latest_checkpoint(&thread)
        .await
        .unwrap()
        .unwrap()
        .checkpoint;
    latest.state = latest.state.with_message(weft_provider::Message::User(
        weft_provider::UserMessage::with_options(
            vec![weft_provider::ContentBlock::text("taken once")],
            weft_provider::MessageOptions {
                id: Some(entry.id.clone()),
                metadata: None,
            },
        ),
    ));
    latest.metadata.checkpoint_id = "cut-off".to_owned();
    latest.metadata.step += 1;
    store.save_checkpoint(&thread, &latest).await.unwrap();

    let driver = QueueDriver::new(runtime.clone());
    let library: Arc<dyn QueueRuns> = library(&runtime, dir.path());
    let QueueTaken::Started(next) = driver.run_the_queue(&thread, &library).await.unwrap() else {
        panic!("no run started");
    };
    completed(&runtime, &next).await;
    let said = texts(&store, &thread).await;
    assert_eq!(
        said.iter().filter(|t| *t == "taken once").count(),
        1,
        "{said:?}"
    );
    let at = said.iter().position(|t| t == "taken once").unwrap();
    assert_eq!(said[at + 1], "again", "{said:?}");
    assert!(store.queued(&thread).await.unwrap().is_empty());
}
