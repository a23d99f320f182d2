//! Constrained decoding with llguidance: a token trie over the GGUF vocabulary, a parser
//! factory built once per loaded model, and one matcher per request.
//!
//! Token bytes for the trie come from [`Tokenizer::trie_bytes`]: `▁` is a space, `<0xNN>`
//! its byte, and control pieces are prefixed with `0xFF` so no grammar can produce them as
//! text. The end-of-sequence set is the model's stop tokens (`<end_of_turn>`, `<eos>`): the
//! mask allows them exactly when the grammar may end.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;
use toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};

use crate::tokenizer::Tokenizer;

/// A grammar for one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Grammar {
    /// Lark text (may embed JSON schemas with `%json`).
    Lark(String),
    /// A JSON schema for the whole output.
    JsonSchema(Value),
}

/// The parser factory of one vocabulary.
pub(crate) struct Constraints {
    factory: ParserFactory,
}

impl std::fmt::Debug for Constraints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraints").finish_non_exhaustive()
    }
}

impl Constraints {
    /// Builds the trie and the factory (about a second for a 262k vocabulary).
    pub(crate) fn new(tokenizer: &Tokenizer, stop_tokens: &[u32]) -> Result<Self, String> {
        let vocab = tokenizer.vocab_size();
        let words: Vec<Vec<u8>> = (0..vocab as u32)
            .map(|id| tokenizer.trie_bytes(id))
            .collect();
        let eos = stop_tokens
            .first()
            .copied()
            .unwrap_or_else(|| tokenizer.eos());
        let info = TokRxInfo {
            vocab_size: vocab as u32,
            tok_eos: eos,
            tok_bos: Some(tokenizer.bos()),
            tok_pad: None,
            tok_unk: None,
            tok_end_of_turn: Some(eos),
        };
        let trie = TokTrie::from(&info, &words).with_eos_tokens(stop_tokens);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
        factory.quiet();
        Ok(Constraints { factory })
    }

    /// A matcher for `grammar`.
    ///
    /// # Errors
    /// The grammar's compile error (e.g. an unsupported JSON-schema feature).
    pub(crate) fn matcher(&self, grammar: &Grammar) -> Result<Matcher, String> {
        let top = match grammar {
            Grammar::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
            Grammar::JsonSchema(schema) => TopLevelGrammar::from_json_schema(schema.clone()),
        };
        let matcher = Matcher::new(self.factory.create_parser(top));
        match matcher.get_error() {
            Some(error) => Err(error),
            None => Ok(matcher),
        }
    }
}

/// Sets every logit the matcher forbids to `-inf`.
///
/// # Errors
/// The matcher's error, when it is in an error state.
pub(crate) fn apply_mask(matcher: &mut Matcher, logits: &mut [f32]) -> Result<(), String> {
    let mask = matcher.compute_mask_or_eos().map_err(|e| e.to_string())?;
    for (id, logit) in logits.iter_mut().enumerate() {
        if !mask.is_allowed(id as u32) {
            *logit = f32::NEG_INFINITY;
        }
    }
    Ok(())
}
