//! The versioned schema. Each migration is written once in SQLite's dialect;
//! [`postgres_ddl`] maps its four type names for PostgreSQL (`INTEGER` → `BIGINT`, `REAL` →
//! `DOUBLE PRECISION`, `INTEGER PRIMARY KEY AUTOINCREMENT` → `BIGSERIAL PRIMARY KEY`).
//!
//! The runtime spec's tables (§8.1 `checkpoints` with `UNIQUE(thread_id, step)` and
//! `idx_thread_step`, §8.2 `events`, §8.3 `artifacts`, §8.4 `agent_lineage`) keep their
//! specified columns; Weft's own columns are added after them, and its own tables sit beside
//! them (`checkpoint_items` and `checkpoint_threads`, `threads`, `runs`, `tool_calls`).
//!
//! **Invariant:** migrations are append-only. A released migration is never edited (the
//! fixture `tests/fixtures/weft-v1.db` proves that a version-1 file keeps opening); a change
//! is a new migration. The applied versions are rows of `weft_schema_migrations`.
//!
//! Meaning of `checkpoints.step`: the checkpoint's ordinal within its thread (1, 2, 3, …;
//! one per step end *and* one per tool result), so `UNIQUE(thread_id, step)` holds for the
//! runtime spec's "after every tool result" checkpoints. The agent's own step number is
//! `agent_step`.

/// One migration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

/// The newest schema version this build writes.
pub const SCHEMA_VERSION: i64 = 13;

pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial schema (runtime spec §8 tables + threads, runs, tool_calls, messages)",
        sql: V1,
    },
    Migration {
        version: 2,
        name: "tool call status index, run parent link",
        sql: V2,
    },
    Migration {
        version: 3,
        name: "run leases, recorded model responses, tool calls keyed by position",
        sql: V3,
    },
    Migration {
        version: 4,
        name: "whether a run's (and an agent's) cost is known",
        sql: V4,
    },
    Migration {
        version: 5,
        name: "pending decisions (approvals and uncertain calls)",
        sql: V5,
    },
    Migration {
        version: 6,
        name: "events numbered per run (gap-free seq), indexed by run and seq",
        sql: V6,
    },
    Migration {
        version: 7,
        name: "API tokens for weft serve (hashed secrets, scope, revocation)",
        sql: V7,
    },
    Migration {
        version: 8,
        name: "thread queue (messages a thread's run takes before its next model step)",
        sql: V8,
    },
    Migration {
        version: 9,
        name: "thread variables (secret values encrypted) and deferred variable requests",
        sql: V9,
    },
    Migration {
        version: 10,
        name: "child registry of subagents (ThreadState.children), ids of messages queued once",
        sql: V10,
    },
    Migration {
        version: 11,
        name: "compact checkpoint history (integer thread keys, timestamps as integers)",
        sql: V11,
    },
    Migration {
        version: 12,
        name: "queued tool calls in the thread queue (Standard Agents queueTool)",
        sql: V12,
    },
    Migration {
        version: 13,
        name: "scheduled effects (Standard Agents scheduleEffect)",
        sql: V13,
    },
];

const V1: &str = r"
CREATE TABLE checkpoints (
  id TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL,
  step INTEGER NOT NULL,
  timestamp TEXT NOT NULL,
  state_blob TEXT NOT NULL,
  pending_tools TEXT,
  completed_tools TEXT,
  usage_tokens INTEGER,
  usage_cost REAL,
  kind TEXT NOT NULL DEFAULT 'step',
  agent_id TEXT NOT NULL DEFAULT '',
  agent_step INTEGER NOT NULL DEFAULT 0,
  run_id TEXT,
  message_count INTEGER NOT NULL DEFAULT 0,
  min_message_seq INTEGER NOT NULL DEFAULT 0,
  usage_input_tokens INTEGER NOT NULL DEFAULT 0,
  usage_output_tokens INTEGER NOT NULL DEFAULT 0,
  UNIQUE(thread_id, step)
);
CREATE INDEX idx_thread_step ON checkpoints(thread_id, step DESC);

CREATE TABLE checkpoint_messages (
  thread_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  item_key TEXT NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (thread_id, seq)
);

CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  thread_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  timestamp TEXT NOT NULL,
  payload TEXT NOT NULL,
  event_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  turn INTEGER NOT NULL DEFAULT 0,
  tool_call_id TEXT
);
CREATE INDEX idx_events_run ON events(run_id, id);
CREATE INDEX idx_events_thread ON events(thread_id, id);
CREATE INDEX idx_events_type ON events(event_type, id);

CREATE TABLE artifacts (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  checkpoint_id TEXT,
  artifact_type TEXT NOT NULL,
  path TEXT,
  content TEXT,
  metadata TEXT,
  created_at TEXT NOT NULL,
  FOREIGN KEY (checkpoint_id) REFERENCES checkpoints(id)
);
CREATE INDEX idx_artifact_run ON artifacts(run_id);
CREATE INDEX idx_artifact_agent ON artifacts(agent_id);

CREATE TABLE agent_lineage (
  id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  parent_agent_id TEXT,
  role TEXT NOT NULL,
  status TEXT NOT NULL,
  depth INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  completed_at TEXT,
  usage_input_tokens INTEGER DEFAULT 0,
  usage_output_tokens INTEGER DEFAULT 0,
  usage_cost REAL DEFAULT 0,
  FOREIGN KEY (parent_agent_id) REFERENCES agent_lineage(id)
);
CREATE INDEX idx_lineage_run ON agent_lineage(run_id);

CREATE TABLE threads (
  id TEXT PRIMARY KEY,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  parent_thread_id TEXT,
  title TEXT,
  metadata TEXT NOT NULL DEFAULT '{}',
  retention TEXT
);

CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  status TEXT NOT NULL,
  spec TEXT NOT NULL,
  started_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  ended_at TEXT,
  steps INTEGER NOT NULL DEFAULT 0,
  usage_input_tokens INTEGER NOT NULL DEFAULT 0,
  usage_output_tokens INTEGER NOT NULL DEFAULT 0,
  usage_cost REAL NOT NULL DEFAULT 0,
  owner_pid INTEGER,
  owner_host TEXT,
  error TEXT,
  output TEXT
);
CREATE INDEX idx_runs_started ON runs(started_at DESC);
CREATE INDEX idx_runs_thread ON runs(thread_id);

CREATE TABLE tool_calls (
  run_id TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  thread_id TEXT NOT NULL,
  tool_name TEXT NOT NULL,
  arguments TEXT NOT NULL,
  status TEXT NOT NULL,
  result TEXT,
  is_error INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 1,
  side_effects INTEGER NOT NULL DEFAULT 0,
  idempotent INTEGER NOT NULL DEFAULT 0,
  turn INTEGER NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL,
  ended_at TEXT,
  PRIMARY KEY (run_id, tool_call_id)
);
";

const V2: &str = r"
CREATE INDEX idx_tool_calls_status ON tool_calls(run_id, status);
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
";

// Runs are owned through a lease (owner, deadline in ms since the epoch, fencing epoch);
// model responses are recorded before their tools run; the ledger identifies a call by its
// position in the run (rows of earlier versions keep their call id as a `legacy:` position).
const V3: &str = r"
ALTER TABLE runs ADD COLUMN lease_owner TEXT;
ALTER TABLE runs ADD COLUMN lease_until INTEGER;
ALTER TABLE runs ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
CREATE TABLE model_responses (
  run_id TEXT NOT NULL,
  position TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  response TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (run_id, position)
);
CREATE TABLE tool_calls_v3 (
  run_id TEXT NOT NULL,
  position TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  args_hash TEXT NOT NULL DEFAULT '',
  thread_id TEXT NOT NULL,
  tool_name TEXT NOT NULL,
  arguments TEXT NOT NULL,
  status TEXT NOT NULL,
  result TEXT,
  is_error INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 1,
  side_effects INTEGER NOT NULL DEFAULT 0,
  idempotent INTEGER NOT NULL DEFAULT 0,
  turn INTEGER NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL,
  ended_at TEXT,
  PRIMARY KEY (run_id, position)
);
INSERT INTO tool_calls_v3 (run_id, position, tool_call_id, args_hash, thread_id, tool_name, arguments, status,
  result, is_error, attempts, side_effects, idempotent, turn, started_at, ended_at)
  SELECT run_id, 'legacy:' || tool_call_id, tool_call_id, '', thread_id, tool_name, arguments, status,
  result, is_error, attempts, side_effects, idempotent, turn, started_at, ended_at FROM tool_calls;
DROP TABLE tool_calls;
ALTER TABLE tool_calls_v3 RENAME TO tool_calls;
CREATE INDEX idx_tool_calls_status ON tool_calls(run_id, status);
";

// A cost is known only when every model call of the run had a price; rows written before
// (whose cost was never computed: 0 by default) read as unknown.
const V4: &str = r"
ALTER TABLE runs ADD COLUMN usage_priced INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_lineage ADD COLUMN usage_priced INTEGER NOT NULL DEFAULT 0;
";

// A tool call waiting for a person: an approval or an uncertain call after a crash.
const V5: &str = r"
CREATE TABLE decisions (
  run_id TEXT NOT NULL,
  id TEXT NOT NULL,
  position TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  tool_name TEXT NOT NULL,
  arguments TEXT NOT NULL,
  args_hash TEXT NOT NULL,
  kind TEXT NOT NULL,
  status TEXT NOT NULL,
  reason TEXT,
  agent_id TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  decided_at TEXT,
  PRIMARY KEY (run_id, id)
);
CREATE INDEX idx_decisions_status ON decisions(run_id, status);
";

// Each run's events are numbered 1, 2, 3, … (`run_seq`), so a viewer can rejoin a run after
// the last event it saw; rows written before are numbered in their log order. The per-run
// index replaces the one on (run_id, id).
const V6: &str = r"
ALTER TABLE events ADD COLUMN run_seq INTEGER NOT NULL DEFAULT 0;
UPDATE events SET run_seq = numbered.n FROM
  (SELECT id, ROW_NUMBER() OVER (PARTITION BY run_id ORDER BY id) AS n FROM events) AS numbered
  WHERE events.id = numbered.id;
DROP INDEX idx_events_run;
CREATE UNIQUE INDEX idx_events_run_seq ON events(run_id, run_seq);
";

// Bearer tokens of `weft serve` (`src/token.rs`): only the secret's SHA-256 is kept. Two
// active tokens never share a name (revoking by name means one token); a revoked token's name
// can be reused.
const V7: &str = r"
CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  scope TEXT NOT NULL,
  secret_hash TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  revoked_at TEXT,
  last_used_at TEXT
);
CREATE UNIQUE INDEX idx_api_tokens_active_name ON api_tokens(name) WHERE revoked_at IS NULL;
";

// A thread's queue (Standard Agents): messages queued while a run of the thread works, taken
// in order before its next model step (`src/queue.rs`). `position` orders them.
const V8: &str = r"
CREATE TABLE thread_queue (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  thread_id TEXT NOT NULL,
  text TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX idx_thread_queue_thread ON thread_queue(thread_id, position);
";

// Standard Agents variables (`src/variables.rs`): a thread's own values (`kind` `text` or
// `secret`; a secret's `value` is its ciphertext, never the plain text), and the requests
// that wait for variables before they boot deferred work (`status` `pending` or `completed`).
const V9: &str = r"
CREATE TABLE thread_variables (
  thread_id TEXT NOT NULL,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  value TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (thread_id, name)
);
CREATE TABLE variable_requests (
  id TEXT PRIMARY KEY,
  parent_thread_id TEXT NOT NULL,
  agent TEXT NOT NULL,
  payload TEXT NOT NULL,
  missing TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at TEXT NOT NULL,
  completed_at TEXT,
  claimed_by TEXT
);
CREATE INDEX idx_variable_requests_parent ON variable_requests(parent_thread_id);
";

// The child registry of Standard Agents threads (`src/children.rs`): one row per child a
// parent thread started; `entry` is the spec's `SubagentRegistryEntry` (JSON; its `status`
// is the column), `created_by` the call that created it (`RUN_ID POSITION`). `queue_sent`:
// the ids of messages queued once (`ThreadQueue::queue_message_once`), kept after the
// message leaves the queue so a repeated sender queues nothing.
const V10: &str = r"
CREATE TABLE subagent_children (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  reference TEXT NOT NULL UNIQUE,
  parent_thread_id TEXT NOT NULL,
  entry TEXT NOT NULL,
  status TEXT NOT NULL,
  arguments TEXT NOT NULL,
  created_by TEXT UNIQUE,
  created_at INTEGER NOT NULL
);
CREATE INDEX idx_subagent_children_parent ON subagent_children(parent_thread_id, created_at);
CREATE TABLE queue_sent (
  id TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL,
  created_at TEXT NOT NULL
);
";

// The checkpoint history, compact (issue 19): `checkpoint_messages` repeated the 36-byte thread
// id in every row and again in its primary-key index. Its rows move to `checkpoint_items`,
// keyed by a small integer per thread (`checkpoint_threads`), so the key index holds two
// integers a row. (`WITHOUT ROWID` would save that index too — measured: under 1 % of W3's
// file — but keeps large rows' bodies in index-sized cells, and messages are often large.)
// `ts` holds a message's timestamp as Unix nanoseconds when its body leaves it out; `kind`
// `m` is a message whose body keeps its `"type"`, `mu` / `ma` / `mr` one whose body leaves
// out `user` / `assistant` / `tool_result` (rows moved here keep both in the body).

const V11: &str = r"
CREATE TABLE checkpoint_threads (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  thread_id TEXT NOT NULL UNIQUE
);
CREATE TABLE checkpoint_items (
  thread_key INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL,
  item_key TEXT NOT NULL,
  body TEXT NOT NULL,
  ts INTEGER,
  PRIMARY KEY (thread_key, seq)
);
INSERT INTO checkpoint_threads (thread_id)
  SELECT DISTINCT thread_id FROM checkpoint_messages ORDER BY thread_id;
INSERT INTO checkpoint_items (thread_key, seq, kind, item_key, body)
  SELECT t.id, m.seq, m.kind, m.item_key, m.body
  FROM checkpoint_messages m JOIN checkpoint_threads t ON t.thread_id = m.thread_id;
DROP TABLE checkpoint_messages;
";

// Queued tool calls (Standard Agents `queueTool()`, `src/queue.rs`): a queue entry whose `tool`
// is set is a tool call (`{"name", "arguments"}` as JSON), taken in order with the messages.
const V12: &str = r"
ALTER TABLE thread_queue ADD COLUMN tool TEXT;
";

// Scheduled effects (Standard Agents `scheduleEffect`, `src/effects.rs`): a call (`tool`, the
// queue's `{"name", "arguments"}` JSON; `name` repeated for filtering) due on a thread at
// `due_at` (microseconds since the epoch). Firing moves the row into `thread_queue` under the
// same id, in one transaction.
const V13: &str = r"
CREATE TABLE scheduled_effects (
  id TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL,
  name TEXT NOT NULL,
  tool TEXT NOT NULL,
  due_at INTEGER NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX idx_scheduled_effects_due ON scheduled_effects(due_at);
CREATE INDEX idx_scheduled_effects_thread ON scheduled_effects(thread_id, due_at);
";

/// The DDL of a migration for PostgreSQL.
pub(crate) fn postgres_ddl(sql: &str) -> String {
    sql.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
        .replace("INTEGER", "BIGINT")
        .replace("REAL", "DOUBLE PRECISION")
}

/// The bookkeeping table (same text in both dialects).
pub(crate) const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS weft_schema_migrations (
  version BIGINT PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at TEXT NOT NULL
)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_dense_and_end_at_the_current_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i64::try_from(i).unwrap_or(-1) + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(SCHEMA_VERSION));
    }

    #[test]
    fn postgres_types() {
        let ddl = postgres_ddl(V1);
        assert!(ddl.contains("id BIGSERIAL PRIMARY KEY"));
        assert!(ddl.contains("usage_cost DOUBLE PRECISION"));
        assert!(!ddl.contains("AUTOINCREMENT"));
        let ddl = postgres_ddl(V11);
        assert!(ddl.contains("id BIGSERIAL PRIMARY KEY"));
        assert!(ddl.contains("thread_key BIGINT NOT NULL"));
    }
}
