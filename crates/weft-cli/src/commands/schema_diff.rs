//! `weft schema-diff BASE [HEAD]`: the built-in schema diff of the completion gate
//! (JSON Schema, OpenAPI, SQL DDL) between two revisions, or a revision and the working tree.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::json;

/// `weft schema-diff`.
#[derive(Debug, Args)]
pub(crate) struct SchemaDiffArgs {
    /// The base revision (a branch, tag or commit).
    base: String,
    /// The head revision (default: the working tree, untracked files included).
    head: Option<String>,
    /// Print JSON: `{"passed", "files", "changes": [{"file", "location", "breaking", "message"}]}`.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: SchemaDiffArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("no working directory")?;
    let diff = match weft_gate::schema_diff(&cwd, &args.base, args.head.as_deref()) {
        Ok(diff) => diff,
        Err(e) => {
            eprintln!("weft schema-diff: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if args.json {
        let changes: Vec<_> = diff
            .changes
            .iter()
            .map(|c| json!({"file": c.file, "location": c.location, "breaking": c.breaking, "message": c.message}))
            .collect();
        println!(
            "{}",
            json!({"passed": diff.passed(), "files": diff.files, "changes": changes})
        );
    } else {
        println!("{}", diff.summary());
    }
    Ok(if diff.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
