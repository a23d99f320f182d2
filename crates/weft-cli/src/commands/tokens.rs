//! `weft tokens create NAME [--read-only]`, `weft tokens list`, `weft tokens revoke ID_OR_NAME`:
//! the bearer tokens `weft serve` checks on every request, kept in the project's store (the one
//! `weft serve PROJECT` uses; weft-store's `Tokens`). The secret is printed once, at creation:
//! the store keeps only its hash. Exit codes: 0 done, 2 a usage error (a bad or taken name, an
//! unknown token, no project or no store).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::json;
use weft_store::{Store, StoreError, TokenRecord, TokenScope, Tokens as _};

use super::runs::runtime;

/// Where the tokens are: `--project`, `--store`, `--json`.
#[derive(Debug, Args)]
pub(crate) struct TokenStoreArgs {
    /// The project whose `weft serve` the token is for (default: the nearest folder upward
    /// holding `weft.toml`). Its store is `PROJECT/.weft/weft.db` unless --store or
    /// WEFT_DATABASE_URL says otherwise.
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
    /// project's `.weft/weft.db`). Give `weft serve` the same one.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `weft tokens` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum TokensCommand {
    /// Create a token and print its secret, once.
    #[command(
        after_help = "The secret (weft_…) is printed once, alone on standard output (the rest goes to standard error, \
so TOKEN=$(weft tokens create ci) works); the store keeps only its SHA-256 hash, so a lost secret cannot be shown \
again: revoke the token and create another. Two active tokens cannot share a name; the name of a revoked token \
can be given to a new one.\n\n\
Examples:\n  weft tokens create laptop                    full access: read, start, stop and decide runs\n  \
weft tokens create dashboard --read-only     read routes only (weft serve answers 403 to a write)\n  \
weft tokens create ci --project ./my-agents --json   {\"id\",\"name\",\"scope\",\"token\"}\n\n\
Exit codes: 0 created, 2 a usage error (an invalid name, a name an active token has, no project found)."
    )]
    Create {
        #[command(flatten)]
        store: TokenStoreArgs,
        /// Only read routes (threads, runs, events, history); starting, stopping or deciding
        /// a run is refused with 403.
        #[arg(long)]
        read_only: bool,
        /// A name to tell tokens apart (who or what holds it): 1 to 64 characters.
        name: String,
    },
    /// List the tokens: id, name, scope, when created, last used and revoked. Never a secret.
    #[command(after_help = "Exit codes: 0 listed, 2 no store (nothing created one yet).")]
    List {
        #[command(flatten)]
        store: TokenStoreArgs,
    },
    /// Revoke a token: `weft serve` refuses it (401) from its next request on.
    #[command(
        after_help = "ID_OR_NAME is the token's id (t-…, see weft tokens list) or the name of an active token.\n\n\
Examples:\n  weft tokens revoke laptop\n  weft tokens revoke t-1a2b3c4d\n\n\
Exit codes: 0 revoked (or already revoked), 2 no such token (or no store)."
    )]
    Revoke {
        #[command(flatten)]
        store: TokenStoreArgs,
        /// The token's id (`t-…`) or the name of an active token.
        id_or_name: String,
    },
}

/// The store the tokens of `args` live in. `create` may create it; the others need it to exist.
async fn open(args: &TokenStoreArgs, create: bool) -> anyhow::Result<Store> {
    let from_env = std::env::var("WEFT_DATABASE_URL").is_ok_and(|u| !u.trim().is_empty());
    if let Some(dir) = &args.project {
        anyhow::ensure!(
            super::location::is_project(dir),
            "{} is not a project folder (it has no weft.toml)",
            dir.display()
        );
    } else if create && args.store.is_none() && !from_env {
        let cwd = std::env::current_dir().context("no working directory")?;
        anyhow::ensure!(
            super::location::find_project(&cwd).is_some(),
            "no project here (no weft.toml in {} or above): pass --project DIR (the folder `weft serve` serves) or --store URL",
            cwd.display()
        );
    }
    let url = super::location::store_url(args.store.as_deref(), args.project.as_deref())?;
    if create {
        super::location::open_or_create(&url).await
    } else {
        super::location::open_existing(&url).await
    }
}

/// Runs `weft tokens …`.
pub(crate) fn run(command: TokensCommand) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async move {
        match command {
            TokensCommand::Create {
                store,
                read_only,
                name,
            } => create(&store, &name, read_only).await,
            TokensCommand::List { store } => list(&store).await,
            TokensCommand::Revoke { store, id_or_name } => revoke(&store, &id_or_name).await,
        }
    })
}

/// How a scope reads in text.
fn scope_text(scope: TokenScope) -> &'static str {
    match scope {
        TokenScope::Full => "full access",
        TokenScope::Read => "read-only",
    }
}

async fn create(args: &TokenStoreArgs, name: &str, read_only: bool) -> anyhow::Result<ExitCode> {
    let store = open(args, true).await?;
    let scope = if read_only {
        TokenScope::Read
    } else {
        TokenScope::Full
    };
    let (token, secret) = match store.create_token(name, scope).await {
        Ok(created) => created,
        Err(StoreError::AlreadyExists { id, .. }) => anyhow::bail!(
            "an active token is already named {id:?}: pick another name, or revoke it first (weft tokens revoke {id:?})"
        ),
        Err(error) => return Err(error.into()),
    };
    if args.json {
        println!(
            "{}",
            json!({"id": token.id, "name": token.name, "scope": token.scope, "token": secret.expose()})
        );
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "created token {} {:?} ({}) in {}:",
        token.id,
        token.name,
        scope_text(token.scope),
        store.location()
    );
    println!("{}", secret.expose());
    eprintln!(
        "This secret will not be shown again: copy it now (the store keeps only its hash).\n\
         Clients of `weft serve` send it as `Authorization: Bearer TOKEN`; revoke it with `weft tokens revoke {}`.",
        token.id
    );
    Ok(ExitCode::SUCCESS)
}

/// A time as `YYYY-MM-DD HH:MM` (UTC), or `-`.
fn when(at: Option<&str>) -> String {
    at.map_or_else(
        || "-".to_owned(),
        |at| {
            chrono::DateTime::parse_from_rfc3339(at).map_or_else(
                |_| at.to_owned(),
                |t| t.format("%Y-%m-%d %H:%M").to_string(),
            )
        },
    )
}

fn status(token: &TokenRecord) -> String {
    match &token.revoked_at {
        None => "active".to_owned(),
        Some(at) => format!("revoked {}", when(Some(at))),
    }
}

async fn list(args: &TokenStoreArgs) -> anyhow::Result<ExitCode> {
    let store = open(args, false).await?;
    let tokens = store.tokens().await?;
    if args.json {
        println!("{}", serde_json::to_string(&tokens)?);
        return Ok(ExitCode::SUCCESS);
    }
    if tokens.is_empty() {
        println!(
            "no tokens in {}: create one with `weft tokens create NAME`",
            store.location()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 6]> = tokens
        .iter()
        .map(|t| {
            [
                t.id.clone(),
                t.name.clone(),
                t.scope.as_str().to_owned(),
                when(Some(&t.created_at)),
                when(t.last_used_at.as_deref()),
                status(t),
            ]
        })
        .collect();
    let header = ["ID", "NAME", "SCOPE", "CREATED", "LAST USED", "STATUS"];
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    println!("{}", line(&header));
    for row in &rows {
        println!(
            "{}",
            line(&row.iter().map(String::as_str).collect::<Vec<_>>())
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn revoke(args: &TokenStoreArgs, id_or_name: &str) -> anyhow::Result<ExitCode> {
    let store = open(args, false).await?;
    let before = store.tokens().await?;
    // A name whose tokens are all revoked already: said, not an error.
    let revoked_named = before
        .iter()
        .rev()
        .find(|t| t.name == id_or_name.trim() && !t.is_active());
    let token = match store.revoke_token(id_or_name).await {
        Ok(token) => token,
        Err(StoreError::NotFound { .. }) if let Some(token) = revoked_named => token.clone(),
        Err(StoreError::NotFound { .. }) => {
            let active: Vec<String> = before
                .iter()
                .filter(|t| t.is_active())
                .map(|t| format!("{} {:?}", t.id, t.name))
                .collect();
            anyhow::bail!(
                "no token has the id {id_or_name:?} and no active token that name in {}{}",
                store.location(),
                if active.is_empty() {
                    String::from(" (it has no active token)")
                } else {
                    format!("; active: {}", active.join(", "))
                }
            )
        }
        Err(error) => return Err(error.into()),
    };
    let was_active = before.iter().any(|t| t.id == token.id && t.is_active());
    if args.json {
        println!(
            "{}",
            json!({"id": token.id, "name": token.name, "revokedAt": token.revoked_at, "alreadyRevoked": !was_active})
        );
    } else if was_active {
        println!(
            "revoked {} {:?}: weft serve refuses it from now on",
            token.id, token.name
        );
    } else {
        println!(
            "{} {:?} was already revoked ({})",
            token.id,
            token.name,
            when(token.revoked_at.as_deref())
        );
    }
    Ok(ExitCode::SUCCESS)
}
