//! The memory tiers through the public API: the write gate, secrets, promotion rules, decay
//! of the working cache (on an injected clock), corrections with their audit trail,
//! maintenance and the session-start context.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use weft_memory::{
    Assessment, Kind, ManualClock, Memory, MemoryDb, NewMemory, QueryOptions, Ranking, Status, Tier,
};

const START: i64 = 1_700_000_000_000;
const HOUR: Duration = Duration::from_secs(3600);

fn memory() -> (tempfile::TempDir, Memory, ManualClock) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START);
    let memory = Memory::new(MemoryDb::open(&dir.path().join(".weft/weft.db")).unwrap())
        .with_clock(Arc::new(clock.clone()));
    (dir, memory, clock)
}

fn store(memory: &Memory, text: &str, kind: Kind, importance: u8) -> i64 {
    let outcome = memory
        .store(
            NewMemory::new(text).kind(kind).importance(importance),
            false,
        )
        .unwrap();
    assert!(outcome.stored, "{text}: {:?}", outcome.rejection_reason);
    outcome.id.unwrap()
}

#[test]
fn the_write_gate_rejects_empty_short_and_noise_content_unless_forced() {
    let (_dir, memory, _) = memory();
    for (text, reason) in [
        ("", "empty content"),
        ("all good", "too short"),
        ("ok, thanks a lot, that looks good to me", "noise"),
        ("let me look at the failing test output again", "noise"),
    ] {
        let outcome = memory.store(NewMemory::new(text), false).unwrap();
        assert!(!outcome.stored, "{text:?}");
        assert!(
            outcome
                .rejection_reason
                .as_deref()
                .unwrap()
                .starts_with(reason),
            "{text:?}: {:?}",
            outcome.rejection_reason
        );
        let forced = memory.store(NewMemory::new(text), true).unwrap();
        assert!(forced.stored && forced.forced, "--force stores {text:?}");
    }
    let daily = memory.db().counts().unwrap();
    assert_eq!(daily, vec![(Tier::Daily, Status::Active, 4)]);
}

#[test]
fn secrets_are_refused_even_with_force_and_never_promoted() {
    let (_dir, memory, _) = memory();
    for text in [
        "The staging deploy uses AKIAABCDEFGHIJKLMNOP as its access key",
        "Decided to use token ghp_abcdefghijklmnopqrstuvwxyz0123456789 because it has repo scope",
        "db url: postgres://admin:hunter2hunter2@db.internal/app",
    ] {
        for force in [false, true] {
            let outcome = memory
                .store(
                    NewMemory::new(text).kind(Kind::Decision).importance(9),
                    force,
                )
                .unwrap();
            assert!(!outcome.stored, "{text}");
            assert!(outcome.rejection_reason.unwrap().contains("secret"));
        }
    }
    assert!(
        memory.db().counts().unwrap().is_empty(),
        "nothing was written"
    );
    // A correction that would write a secret is refused too.
    store(
        &memory,
        "The staging database password lives in the team vault",
        Kind::Config,
        7,
    );
    let refused = memory
        .correct(
            "staging database password",
            "staging password = Tr0ub4dor&3xx",
            "leak",
            true,
        )
        .unwrap();
    assert!(!refused.corrected);
    assert!(refused.rejection_reason.unwrap().contains("secret"));
}

#[test]
fn promotion_takes_only_significant_learnings_to_the_semantic_tier() {
    let (_dir, memory, _) = memory();
    let decision = store(
        &memory,
        "Chose rusqlite over sqlx because the hook must answer in a few milliseconds",
        Kind::Decision,
        8,
    );
    let weak_decision = store(
        &memory,
        "Chose rusqlite over sqlx because the hook must answer in a few milliseconds today",
        Kind::Decision,
        6,
    );
    let pattern = store(
        &memory,
        "Flaky CI: never share one temp dir between tests that run in parallel",
        Kind::Pattern,
        6,
    );
    let config = store(
        &memory,
        "Set busy_timeout = 5000 because a hook and a run can write at the same time",
        Kind::Config,
        6,
    );
    let debugging = store(
        &memory,
        "Currently adding println! calls to see where the parser stops",
        Kind::Observation,
        8,
    );
    let trivia = store(
        &memory,
        "The README has a title line and two paragraphs of text",
        Kind::Observation,
        2,
    );
    let goal = store(
        &memory,
        "Ship the memory commands with their end-to-end tests",
        Kind::Goal,
        8,
    );
    let report = memory.promote(false).unwrap();
    let action = |id: i64| {
        report
            .reviewed
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.assessment.clone())
            .unwrap()
    };
    assert!(matches!(
        action(decision),
        Assessment::Promote {
            tier: Tier::Semantic,
            ..
        }
    ));
    assert!(matches!(
        action(pattern),
        Assessment::Promote {
            tier: Tier::Semantic,
            ..
        }
    ));
    assert!(matches!(
        action(config),
        Assessment::Promote {
            tier: Tier::Semantic,
            ..
        }
    ));
    assert!(matches!(action(weak_decision), Assessment::Keep { .. }));
    assert!(
        matches!(action(debugging), Assessment::Reject { reason } if reason.contains("transient"))
    );
    assert!(matches!(action(trivia), Assessment::Reject { reason } if reason.contains("trivia")));
    assert!(matches!(
        action(goal),
        Assessment::Promote {
            tier: Tier::Working,
            ..
        }
    ));
    assert_eq!(report.promoted_to(Tier::Semantic), 3);
    // The daily log keeps the record: promoted, rejected, or still pending.
    assert_eq!(memory.db().get(decision).unwrap().status, Status::Promoted);
    assert_eq!(memory.db().get(debugging).unwrap().status, Status::Rejected);
    assert_eq!(
        memory.db().get(weak_decision).unwrap().status,
        Status::Active
    );
    // A second pass only reviews what is still pending.
    assert_eq!(memory.promote(false).unwrap().reviewed.len(), 1);
    // A dry run writes nothing.
    let (_dir2, other, _) = self::memory();
    store(
        &other,
        "Chose WAL mode because readers must not block the hook",
        Kind::Decision,
        9,
    );
    assert_eq!(other.promote(true).unwrap().promoted_to(Tier::Semantic), 1);
    assert_eq!(other.promote(true).unwrap().reviewed.len(), 1);
}

#[test]
fn the_working_cache_decays_with_time_and_recall_refreshes_it() {
    let (_dir, memory, clock) = memory();
    let a = store(
        &memory,
        "The gate database sits in the project's .weft folder",
        Kind::Observation,
        6,
    );
    let b = store(
        &memory,
        "The gate database migrations are append-only rows",
        Kind::Observation,
        6,
    );
    let important = store(
        &memory,
        "The gate database must never be deleted when corrupt",
        Kind::Observation,
        8,
    );
    memory.promote(false).unwrap();
    let working = |id: i64| {
        memory
            .query_lexical(
                "gate database",
                &QueryOptions {
                    tiers: vec![Tier::Working],
                    ..QueryOptions::default()
                },
            )
            .unwrap()
            .results
            .into_iter()
            .find(|h| h.entry.source_id == Some(id))
    };
    let fresh = working(a).unwrap().score;
    // A day later (one half-life) the same memory ranks lower: its weight halved.
    clock.advance(24 * HOUR);
    let aged = working(b).unwrap().score;
    assert!(aged < fresh, "{aged} < {fresh}");
    // Recalling a refreshed it (the query above touched every hit): b was recalled just now,
    // so after another day both have decayed alike; neither is evicted yet.
    clock.advance(24 * HOUR);
    let report = memory.maintain().unwrap();
    assert!(report.decayed.is_empty(), "{report:?}");
    // Nine idle days later the weights are below the eviction line: the important memory is
    // archived, the others are marked decayed.
    clock.advance(9 * 24 * HOUR);
    let report = memory.maintain().unwrap();
    assert_eq!(report.decayed.len(), 3, "{report:?}");
    assert_eq!(report.archived.len(), 1);
    assert_eq!(report.working_size, 0);
    let archived = memory.db().get(report.archived[0]).unwrap();
    assert_eq!(
        (archived.tier, archived.source_id),
        (Tier::Archive, Some(important))
    );
    let found = memory
        .query_lexical("gate database", &QueryOptions::default())
        .unwrap();
    assert!(found.results.iter().all(|h| h.entry.tier != Tier::Working));
    assert!(
        found.results.iter().any(|h| h.entry.tier == Tier::Archive),
        "the archive stays searchable"
    );
}

#[test]
fn corrections_supersede_every_tier_and_leave_an_audit_trail() {
    let (_dir, memory, clock) = memory();
    let old = store(
        &memory,
        "Semantic recall uses pgvector because the store is PostgreSQL",
        Kind::Decision,
        8,
    );
    memory.promote(false).unwrap();
    clock.advance(HOUR);
    let outcome = memory
        .correct(
            "uses pgvector",
            "Semantic recall uses MiniLM vectors in SQLite because hooks read it locally",
            "migrated away from pgvector",
            false,
        )
        .unwrap();
    assert!(outcome.corrected);
    assert_eq!(outcome.tiers_updated, vec![Tier::Daily, Tier::Semantic]);
    assert_eq!(outcome.superseded_count, 2);
    assert_eq!(memory.db().get(old).unwrap().status, Status::Superseded);
    let trail = memory.db().superseded(10).unwrap();
    assert_eq!(trail.len(), 2);
    for row in &trail {
        assert!(row.old_content.contains("pgvector"));
        assert_eq!(row.reason, "migrated away from pgvector");
        assert_eq!(row.superseded_at, START + 3_600_000);
        let new = memory.db().get(row.new_entry_id.unwrap()).unwrap();
        assert!(new.content.contains("MiniLM") && new.tier == row.tier);
    }
    let found = memory
        .query_lexical("semantic recall", &QueryOptions::default())
        .unwrap();
    assert_eq!(found.ranking, Ranking::Lexical);
    assert!(!found.results.is_empty());
    assert!(
        found
            .results
            .iter()
            .all(|h| !h.entry.content.contains("pgvector"))
    );
    let none = memory
        .correct(
            "no such memory anywhere",
            "Whatever it is, it is fixed now because",
            "x",
            false,
        )
        .unwrap();
    assert!(!none.corrected && none.rejection_reason.unwrap().contains("no memory matches"));
}

#[test]
fn maintenance_supersedes_duplicates_and_prunes_the_daily_log() {
    let (_dir, memory, clock) = memory();
    store(
        &memory,
        "Always run cargo fmt before committing, CI fails otherwise",
        Kind::Pattern,
        7,
    );
    memory.promote(false).unwrap();
    clock.advance(HOUR);
    store(
        &memory,
        "Always run cargo fmt before committing, CI fails otherwise.",
        Kind::Pattern,
        7,
    );
    memory.promote(false).unwrap();
    let report = memory.maintain().unwrap();
    assert_eq!(report.duplicates.len(), 1, "{report:?}");
    assert!(
        memory.db().superseded(10).unwrap()[0]
            .reason
            .starts_with("duplicate of #")
    );
    clock.advance(8 * 24 * HOUR);
    let report = memory.maintain().unwrap();
    assert_eq!(
        report.pruned.len(),
        2,
        "promoted daily entries older than a week: {report:?}"
    );
}

#[test]
fn the_session_context_holds_the_last_day_and_open_loops() {
    let (_dir, memory, clock) = memory();
    store(
        &memory,
        "Old news: the first prototype used JSON files for state",
        Kind::Observation,
        9,
    );
    clock.advance(30 * HOUR);
    let decision = store(
        &memory,
        "Chose WAL mode because readers must never block a hook",
        Kind::Decision,
        9,
    );
    let goal = store(
        &memory,
        "Finish the deliver loop and its scripted-agent test",
        Kind::Goal,
        8,
    );
    store(
        &memory,
        "Tidy the README headings at some point this week",
        Kind::Action,
        5,
    );
    let decision_loop = store(
        &memory,
        "Decide whether memory injection also runs for sub-agents",
        Kind::Decision,
        7,
    );
    let context = memory.session_context(10).unwrap();
    let loops: Vec<i64> = context.loops.iter().map(|e| e.id).collect();
    assert_eq!(
        loops,
        vec![decision, goal, decision_loop],
        "importance ≥ 7, action/goal/decision"
    );
    let top: Vec<&str> = context.top.iter().map(|e| e.content.as_str()).collect();
    assert!(
        top.iter().any(|t| t.starts_with("Tidy the README")),
        "{top:?}"
    );
    assert!(
        top.iter().all(|t| !t.starts_with("Old news")),
        "older than 24 hours: {top:?}"
    );
    // Promotion copies the goal to the working cache: still one open loop, not two; the
    // decision with its rationale became a learning (semantic tier), no longer a loop.
    memory.promote(false).unwrap();
    let context = memory.session_context(10).unwrap();
    assert!(
        context
            .loops
            .iter()
            .all(|e| e.kind != Kind::Decision || e.id == decision_loop)
    );
    assert!(
        context
            .top
            .iter()
            .any(|e| e.tier == Tier::Semantic && e.content.starts_with("Chose WAL"))
    );
    assert_eq!(
        context
            .loops
            .iter()
            .filter(|e| e.content.starts_with("Finish the deliver"))
            .count(),
        1
    );
    let working_goal = context
        .loops
        .iter()
        .find(|e| e.content.starts_with("Finish"))
        .unwrap()
        .id;
    memory.close(working_goal).unwrap();
    let context = memory.session_context(10).unwrap();
    assert!(
        context
            .loops
            .iter()
            .all(|e| !e.content.starts_with("Finish"))
    );
}
