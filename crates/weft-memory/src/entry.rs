//! What a memory is: its [`Tier`], its [`Kind`], its [`Status`] and the row, [`Entry`].

use serde::Serialize;

/// Where a memory lives. Memories flow down: the daily log stages every write ("log first,
/// promote later"); promotion moves a significant one to the semantic tier, or a useful
/// observation to the working cache; maintenance archives what has gone cold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Tier 0: every write lands here first.
    Daily,
    /// Tier 1: hot context that decays unless it is used.
    Working,
    /// Tier 2: consolidated learnings, recalled by embedding similarity.
    Semantic,
    /// Tier 3: the durable archive of learnings that went cold (still searchable).
    Archive,
}

impl Tier {
    /// All tiers, in flow order.
    pub const ALL: [Tier; 4] = [Tier::Daily, Tier::Working, Tier::Semantic, Tier::Archive];

    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Daily => "daily",
            Tier::Working => "working",
            Tier::Semantic => "semantic",
            Tier::Archive => "archive",
        }
    }

    /// Parses [`Tier::as_str`].
    pub fn parse(text: &str) -> Option<Tier> {
        Tier::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(text.trim()))
    }
}

/// What a memory records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Something seen (the default).
    Observation,
    /// A decision, ideally with its rationale.
    Decision,
    /// A pattern that prevents a recurring error.
    Pattern,
    /// A configuration choice, ideally with its context.
    Config,
    /// A lesson learned (e.g. the completion gate's memory lesson).
    Lesson,
    /// A session loop: something to do.
    Action,
    /// A session loop: something to reach.
    Goal,
}

impl Kind {
    /// All kinds.
    pub const ALL: [Kind; 7] = [
        Kind::Observation,
        Kind::Decision,
        Kind::Pattern,
        Kind::Config,
        Kind::Lesson,
        Kind::Action,
        Kind::Goal,
    ];

    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Observation => "observation",
            Kind::Decision => "decision",
            Kind::Pattern => "pattern",
            Kind::Config => "config",
            Kind::Lesson => "lesson",
            Kind::Action => "action",
            Kind::Goal => "goal",
        }
    }

    /// Parses [`Kind::as_str`] (also `configuration`).
    pub fn parse(text: &str) -> Option<Kind> {
        let text = text.trim().to_ascii_lowercase();
        if text == "configuration" {
            return Some(Kind::Config);
        }
        Kind::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// Whether an open memory of this kind is a session loop (action, goal, decision).
    pub fn is_loop(self) -> bool {
        matches!(self, Kind::Action | Kind::Goal | Kind::Decision)
    }
}

/// Where a memory stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Live: recalled, injected, open.
    Active,
    /// A daily-log entry whose copy now lives in a higher tier.
    Promoted,
    /// A daily-log entry promotion refused (trivia, transient state); kept for the record.
    Rejected,
    /// Replaced by a correction (see the superseded-entries audit trail) or a duplicate.
    Superseded,
    /// A session loop that was closed.
    Closed,
    /// Evicted from the working cache after it decayed.
    Decayed,
}

impl Status {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Promoted => "promoted",
            Status::Rejected => "rejected",
            Status::Superseded => "superseded",
            Status::Closed => "closed",
            Status::Decayed => "decayed",
        }
    }

    /// Parses [`Status::as_str`].
    pub fn parse(text: &str) -> Option<Status> {
        [
            Status::Active,
            Status::Promoted,
            Status::Rejected,
            Status::Superseded,
            Status::Closed,
            Status::Decayed,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// One memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Its id (unique across tiers).
    pub id: i64,
    /// Its tier.
    pub tier: Tier,
    /// What it records.
    pub kind: Kind,
    /// The text.
    pub content: String,
    /// Free tags.
    pub tags: Vec<String>,
    /// 1 (trivia) to 10 (critical).
    pub importance: u8,
    /// The harness session that wrote it.
    pub session_id: Option<String>,
    /// When it was written (ms since the epoch).
    pub created_at: i64,
    /// When it was last recalled or written (ms): the working cache decays from here.
    pub last_access: i64,
    /// How often it was recalled.
    pub access_count: i64,
    /// Where it stands.
    pub status: Status,
    /// The entry it came from (the daily-log entry it was promoted from, the one it corrects).
    pub source_id: Option<i64>,
    /// For daily-log entries: where the writer suggested it goes.
    pub suggested_tier: Option<Tier>,
    /// Why it was promoted, rejected or superseded.
    pub note: Option<String>,
}

/// A memory to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMemory {
    /// The text.
    pub content: String,
    /// What it records.
    pub kind: Kind,
    /// 1–10 (clamped); the default is 5.
    pub importance: u8,
    /// Free tags.
    pub tags: Vec<String>,
    /// The session writing it.
    pub session_id: Option<String>,
}

impl NewMemory {
    /// An observation of importance 5.
    ///
    /// # Examples
    ///
    /// ```
    /// use weft_memory::{Kind, NewMemory};
    ///
    /// let m = NewMemory::new("Chose SQLite over Postgres for the gate because hooks must start in milliseconds")
    ///     .kind(Kind::Decision)
    ///     .importance(8)
    ///     .tags(["architecture"]);
    /// assert_eq!(m.importance, 8);
    /// ```
    pub fn new(content: impl Into<String>) -> Self {
        NewMemory {
            content: content.into(),
            kind: Kind::Observation,
            importance: 5,
            tags: Vec::new(),
            session_id: None,
        }
    }

    /// Sets the kind.
    #[must_use]
    pub fn kind(mut self, kind: Kind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets the importance (clamped to 1–10).
    #[must_use]
    pub fn importance(mut self, importance: u8) -> Self {
        self.importance = importance.clamp(1, 10);
        self
    }

    /// Sets the tags.
    #[must_use]
    pub fn tags<I, S>(mut self, tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the session.
    #[must_use]
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session_id = Some(session.into());
        self
    }
}
