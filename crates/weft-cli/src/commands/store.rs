//! `weft store gc`: collects what no run or checkpoint refers to any more (history rows of
//! deleted threads, ledger rows of deleted runs) and gives the space back to the file system
//! (SQLite `VACUUM`; PostgreSQL `VACUUM` of Weft's tables). With `weft runs delete` and
//! `weft runs prune --older-than 7d`, the store does not grow without bound.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;
use weft_store::StoreUrl;

use super::runs::{StoreArgs, open_store, runtime};

/// `weft store` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum StoreCommand {
    /// Drop orphaned rows and compact the store (safe while runs are being driven).
    Gc {
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// The bytes a SQLite store takes on disk (the database and its write-ahead log).
fn sqlite_bytes(url: &StoreUrl) -> Option<u64> {
    let StoreUrl::Sqlite(path) = url else {
        return None;
    };
    let mut wal = path.clone().into_os_string();
    wal.push("-wal");
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    Some(size(path) + size(std::path::Path::new(&wal)))
}

/// Runs `weft store …`.
pub(crate) fn run(command: StoreCommand) -> anyhow::Result<ExitCode> {
    let StoreCommand::Gc { store } = command;
    runtime()?.block_on(async move {
        let url = super::location::store_url(store.store.as_deref(), None)?;
        let s = open_store(&store).await?;
        let before = sqlite_bytes(&url);
        let report = s.gc().await?;
        let after = sqlite_bytes(&url);
        if store.json {
            println!(
                "{}",
                json!({"historyRows": report.history_rows, "ledgerRows": report.ledger_rows,
                       "bytesBefore": before, "bytesAfter": after})
            );
        } else {
            println!(
                "removed {} orphaned row{} ({} history, {} ledger)",
                report.total(),
                if report.total() == 1 { "" } else { "s" },
                report.history_rows,
                report.ledger_rows
            );
            if let (Some(before), Some(after)) = (before, after) {
                println!("{}: {before} bytes → {after} bytes", s.location());
            } else {
                println!("{}: vacuumed", s.location());
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
