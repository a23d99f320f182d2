//! Where the store is: `--store`, else `WEFT_DATABASE_URL`, else the project's `.weft/weft.db`
//! whatever the current folder (the project is the one given, or the nearest folder upward
//! holding `weft.toml` or `weft.json`, else the current folder). A store found in the current
//! folder that is not the project's is reported on stderr, not used. Read-only commands never
//! create a store: a missing one is an error naming the path.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use weft_store::{Store, StoreOptions, StoreUrl, default_sqlite_path};

/// Whether `dir` is a project folder (it holds `weft.toml` or `weft.json`).
pub(crate) fn is_project(dir: &Path) -> bool {
    dir.join("weft.toml").is_file() || dir.join("weft.json").is_file()
}

/// The nearest folder from `start` upward that holds a project file.
pub(crate) fn find_project(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| is_project(dir))
        .map(Path::to_path_buf)
}

/// The store location for `url` (from `--store`) and the project in `project` (or found from
/// the current folder).
pub(crate) fn store_url(url: Option<&str>, project: Option<&Path>) -> anyhow::Result<StoreUrl> {
    let cwd = std::env::current_dir().context("no working directory")?;
    let from_env = std::env::var("WEFT_DATABASE_URL").is_ok_and(|u| !u.trim().is_empty());
    if url.is_some() || from_env {
        return Ok(StoreUrl::resolve(url, &cwd)?);
    }
    let project = match project {
        Some(dir) => cwd.join(dir),
        None => find_project(&cwd).unwrap_or_else(|| cwd.clone()),
    };
    let project = project.canonicalize().unwrap_or(project);
    let chosen = default_sqlite_path(&project);
    let here = default_sqlite_path(&cwd);
    let cwd_canonical = cwd.canonicalize().unwrap_or(cwd);
    if cwd_canonical != project && here.is_file() {
        eprintln!(
            "weft: note: {} is a store in the current folder, not the project's; using {} (pass --store sqlite:{} to use the other)",
            here.display(),
            chosen.display(),
            here.display()
        );
    }
    Ok(StoreUrl::Sqlite(chosen))
}

/// Opens the store at `url`, creating it if needed (`weft run`). Besides key-shaped text,
/// the values of this process's secret variables (`…_KEY`, `…_TOKEN`, `…_PASSWORD`, …) are
/// redacted from everything the store records; a run adds its project's runtime profile
/// `secretPatterns` when it starts or resumes (weft-standard's sessions).
pub(crate) async fn open_or_create(url: &StoreUrl) -> anyhow::Result<Store> {
    let redactor: std::sync::Arc<dyn weft_store::Redactor> = std::sync::Arc::new(
        weft_store::DefaultRedactor::with_secrets_from(std::env::vars()),
    );
    let options = StoreOptions {
        redactor: Some(redactor),
        ..StoreOptions::default()
    };
    Store::open_with(url, options)
        .await
        .with_context(|| format!("cannot open the store {url}"))
}

/// Opens the store at `url`, which must exist (every command that only reads or goes on).
pub(crate) async fn open_existing(url: &StoreUrl) -> anyhow::Result<Store> {
    if let StoreUrl::Sqlite(path) = url
        && !path.is_file()
    {
        anyhow::bail!(
            "there is no store at {}: nothing has run in this project yet (`weft run` creates it); pass --store or set WEFT_DATABASE_URL to use another",
            path.display()
        );
    }
    open_or_create(url).await
}

/// Loads the project in `dir` for a command: `Ok(Err(code))` (exit 2, the problems printed)
/// when its definitions are invalid.
pub(crate) fn load_project(
    dir: &Path,
) -> anyhow::Result<Result<weft_standard::Project, std::process::ExitCode>> {
    match weft_standard::Project::load(dir) {
        Ok(project) => Ok(Ok(project)),
        Err(error @ weft_standard::ProjectError::Invalid(_)) => {
            eprintln!("weft: {} is not a valid project: {error}", dir.display());
            Ok(Err(std::process::ExitCode::from(2)))
        }
        Err(error) => Err(error.into()),
    }
}
