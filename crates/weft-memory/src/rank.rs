//! Ranking: cosine similarity of embeddings when an [`crate::Embedder`] is available, else a
//! lexical ranking, and the working cache's decay.
//!
//! **Lexical ranking (the fallback).** Text is cut into lower-case alphanumeric words, common
//! English stop words dropped and a plural or verb ending (`-s`, `-es`, `-ed`, `-ing`) cut.
//! A memory's score is the share of the query's inverse-document-frequency weight that it
//! covers: `Σ idf(t) for query words t found in the memory / Σ idf(t) for all query words`,
//! with `idf(t) = ln(1 + N / (1 + n_t))` over the N memories searched. It finds shared words,
//! never paraphrases; results say which ranking made them (`"ranking": "lexical"`).
//!
//! **Decay.** A working-cache memory's weight is `importance / 10 × 0.5^(age / half-life)`,
//! where age runs from its last recall or write ([`DEFAULT_HALF_LIFE`]: one day). Recalling it
//! resets the age. Other tiers do not decay.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// The working cache's half-life.
pub const DEFAULT_HALF_LIFE: Duration = Duration::from_secs(24 * 60 * 60);

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "do", "does", "for", "from",
    "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "of", "on", "or",
    "our", "so", "than", "that", "the", "their", "them", "then", "there", "these", "this", "those",
    "to", "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with",
    "you", "your",
];

fn stem(word: &str) -> String {
    for suffix in ["ing", "ed", "es", "s"] {
        if let Some(stem) = word.strip_suffix(suffix)
            && stem.chars().count() >= 3
        {
            return stem.to_owned();
        }
    }
    word.to_owned()
}

/// The lexical terms of `text`.
pub(crate) fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// Lexical scores (0–1) of `documents` for `query`, in order.
pub(crate) fn lexical_scores(query: &str, documents: &[&str]) -> Vec<f32> {
    let query_terms: HashSet<String> = terms(query).into_iter().collect();
    if query_terms.is_empty() {
        return vec![0.0; documents.len()];
    }
    let doc_terms: Vec<HashSet<String>> = documents
        .iter()
        .map(|d| terms(d).into_iter().collect())
        .collect();
    let n = documents.len() as f32;
    let mut df: HashMap<&str, f32> = HashMap::new();
    for t in &query_terms {
        let count = doc_terms.iter().filter(|d| d.contains(t)).count() as f32;
        df.insert(t.as_str(), count);
    }
    let idf = |t: &str| (1.0 + n / (1.0 + df.get(t).copied().unwrap_or(0.0))).ln();
    let total: f32 = query_terms.iter().map(|t| idf(t)).sum();
    doc_terms
        .iter()
        .map(|d| {
            let covered: f32 = query_terms
                .iter()
                .filter(|t| d.contains(*t))
                .map(|t| idf(t))
                .sum();
            if total > 0.0 { covered / total } else { 0.0 }
        })
        .collect()
}

/// The cosine similarity of two vectors (0 when either is empty or their lengths differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// The decayed weight (0–1) of a memory of `importance` last touched `age_ms` ago.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use weft_memory::decayed_weight;
///
/// let day = 24 * 60 * 60 * 1000;
/// assert_eq!(decayed_weight(8, 0, Duration::from_secs(86_400)), 0.8);
/// assert!((decayed_weight(8, day, Duration::from_secs(86_400)) - 0.4).abs() < 1e-6);
/// ```
pub fn decayed_weight(importance: u8, age_ms: i64, half_life: Duration) -> f32 {
    let half = half_life.as_millis().max(1) as f64;
    let age = age_ms.max(0) as f64;
    let factor = 0.5f64.powf(age / half);
    (f64::from(importance.clamp(1, 10)) / 10.0 * factor) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_scores_favour_rare_shared_words() {
        let docs = [
            "the sqlite database keeps the gate tables",
            "the worktree gate refuses edits at the root",
            "use tokio paused time for timeouts",
        ];
        let scores = lexical_scores("which database holds the gate tables?", &docs);
        assert!(scores[0] > scores[1] && scores[1] > scores[2], "{scores:?}");
        assert_eq!(scores[2], 0.0);
        assert!(lexical_scores("the of", &docs).iter().all(|s| *s == 0.0));
    }

    #[test]
    fn cosine_of_known_vectors() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-6);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), 0.0);
    }
}
