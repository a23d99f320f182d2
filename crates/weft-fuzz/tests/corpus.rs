//! Replays every committed seed of `fuzz/seeds/TARGET/`, every saved crash of
//! `fuzz/regressions/TARGET/`, and the recorded provider bodies of `testdata/fixtures/weft/`
//! through the targets' bodies, on stable: the seeds keep passing the invariants, and a crash
//! once fixed stays fixed. (`fuzz/seed.sh` builds the larger working corpora for fuzzing.)

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_target_passes_its_seeds_and_regressions() {
    let mut replayed = 0;
    for (name, body) in weft_fuzz::TARGETS {
        let mut seeds = files(&fuzz_dir().join("seeds").join(name));
        assert!(!seeds.is_empty(), "{name} has no committed seed");
        seeds.extend(files(&fuzz_dir().join("regressions").join(name)));
        let recorded = fuzz_dir().join("../testdata/fixtures/weft");
        let extension = match *name {
            "sse_decode" | "provider_stream" => "sse",
            "provider_body" => "json",
            _ => "",
        };
        seeds.extend(
            files(&recorded)
                .into_iter()
                .filter(|p| !extension.is_empty() && p.extension().is_some_and(|e| e == extension)),
        );
        for path in &seeds {
            let data = std::fs::read(path).expect("reads the seed");
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(outcome.is_ok(), "{name}: {} fails", path.display());
            replayed += 1;
        }
    }
    assert!(replayed >= weft_fuzz::TARGETS.len());
}

#[test]
fn every_target_is_a_cargo_fuzz_binary() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for (name, _) in weft_fuzz::TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "{name} is not a [[bin]] of fuzz/Cargo.toml"
        );
        let source = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source).expect("the target's source");
        assert!(
            text.contains(&format!("weft_fuzz::{name}(")),
            "{} does not call weft_fuzz::{name}",
            source.display()
        );
    }
}
