//! A SentencePiece (BPE-by-score) tokenizer built from a GGUF vocabulary.
//!
//! The GGUF file carries `tokenizer.ggml.tokens`, `.scores` and `.token_type`. Encoding follows
//! SentencePiece's BPE model as Gemma uses it:
//!
//! 1. user-defined pieces (type 4: `\n`, `\n\n`, tab runs, …) are matched first, longest
//!    first, and never merged with their neighbours;
//! 2. spaces become `▁` (U+2581); no space is prepended (`add_space_prefix = false`);
//! 3. the text is split into characters, and the adjacent pair whose concatenation is a normal
//!    piece with the highest score is merged, repeatedly (ties: leftmost first);
//! 4. what is not a piece at the end falls back to byte pieces `<0xNN>`.
//!
//! Control pieces (`<bos>`, `<start_of_turn>`, …) never come out of [`Tokenizer::encode`]:
//! text that spells one is encoded as ordinary text, so user content cannot forge a turn
//! boundary. Callers add control tokens by id ([`Tokenizer::control`]).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// What a vocabulary entry is (`tokenizer.ggml.token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// An ordinary piece (1).
    Normal,
    /// The unknown piece (2).
    Unknown,
    /// A control piece such as `<bos>` (3).
    Control,
    /// A user-defined piece, matched before merging (4).
    UserDefined,
    /// An unused slot (5).
    Unused,
    /// A byte-fallback piece `<0xNN>` (6).
    Byte,
}

impl TokenKind {
    /// The kind of a `token_type` value; unknown values count as normal.
    pub fn from_ggml(value: i32) -> Self {
        match value {
            2 => TokenKind::Unknown,
            3 => TokenKind::Control,
            4 => TokenKind::UserDefined,
            5 => TokenKind::Unused,
            6 => TokenKind::Byte,
            _ => TokenKind::Normal,
        }
    }
}

/// Why a vocabulary is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VocabError {
    /// `tokens`, `scores` and `token_type` differ in length.
    #[error(
        "the vocabulary arrays differ in length: {tokens} tokens, {scores} scores, {kinds} types"
    )]
    LengthMismatch {
        /// Number of tokens.
        tokens: usize,
        /// Number of scores.
        scores: usize,
        /// Number of types.
        kinds: usize,
    },
    /// A special token id is outside the vocabulary.
    #[error("the {which} token id {id} is outside the vocabulary of {size}")]
    BadSpecial {
        /// Which special token (`bos`, `eos`).
        which: &'static str,
        /// The id.
        id: u32,
        /// Vocabulary size.
        size: usize,
    },
}

/// The space marker SentencePiece uses inside pieces.
pub const SPACE_MARKER: char = '\u{2581}';

/// A SentencePiece tokenizer over a GGUF vocabulary.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    pieces: Vec<String>,
    scores: Vec<f32>,
    kinds: Vec<TokenKind>,
    /// Normal pieces by text: the only merge targets.
    normal: HashMap<String, u32>,
    /// Control and user-defined pieces by text.
    special: HashMap<String, u32>,
    /// User-defined pieces, longest first, for the pre-split.
    user_defined: Vec<(String, u32)>,
    bytes: [Option<u32>; 256],
    unknown: Option<u32>,
    bos: u32,
    eos: u32,
}

impl Tokenizer {
    /// Builds a tokenizer from the three GGUF arrays and the `bos`/`eos` ids.
    ///
    /// # Errors
    /// When the arrays differ in length or a special id is out of range.
    pub fn new(
        pieces: Vec<String>,
        scores: Vec<f32>,
        kinds: Vec<TokenKind>,
        bos: u32,
        eos: u32,
    ) -> Result<Self, VocabError> {
        if pieces.len() != scores.len() || pieces.len() != kinds.len() {
            return Err(VocabError::LengthMismatch {
                tokens: pieces.len(),
                scores: scores.len(),
                kinds: kinds.len(),
            });
        }
        for (which, id) in [("bos", bos), ("eos", eos)] {
            if id as usize >= pieces.len() {
                return Err(VocabError::BadSpecial {
                    which,
                    id,
                    size: pieces.len(),
                });
            }
        }
        let mut normal = HashMap::with_capacity(pieces.len());
        let mut special = HashMap::new();
        let mut user_defined = Vec::new();
        let mut bytes = [None; 256];
        let mut unknown = None;
        for (id, (piece, kind)) in pieces.iter().zip(&kinds).enumerate() {
            let id = id as u32;
            match kind {
                TokenKind::Normal => {
                    normal.entry(piece.clone()).or_insert(id);
                }
                TokenKind::Byte => {
                    if let Some(byte) = parse_byte_piece(piece) {
                        bytes[byte as usize] = Some(id);
                    }
                }
                TokenKind::UserDefined => {
                    special.insert(piece.clone(), id);
                    if !piece.is_empty() {
                        user_defined.push((piece.clone(), id));
                    }
                }
                TokenKind::Control => {
                    special.insert(piece.clone(), id);
                }
                TokenKind::Unknown => unknown = Some(id),
                TokenKind::Unused => {}
            }
        }
        user_defined.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        Ok(Tokenizer {
            pieces,
            scores,
            kinds,
            normal,
            special,
            user_defined,
            bytes,
            unknown,
            bos,
            eos,
        })
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// The beginning-of-sequence id.
    pub fn bos(&self) -> u32 {
        self.bos
    }

    /// The end-of-sequence id.
    pub fn eos(&self) -> u32 {
        self.eos
    }

    /// The id of a control or user-defined piece, e.g. `<start_of_turn>`.
    pub fn control(&self, piece: &str) -> Option<u32> {
        self.special.get(piece).copied()
    }

    /// The kind of `id` (`None` when out of range).
    pub fn kind(&self, id: u32) -> Option<TokenKind> {
        self.kinds.get(id as usize).copied()
    }

    /// The raw piece of `id`, e.g. `▁France` or `<0x0A>`.
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(String::as_str)
    }

    /// `<bos>` followed by the encoding of `text` (as llama.cpp does with `add_bos`).
    pub fn encode_with_bos(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![self.bos];
        self.encode_into(text, &mut ids);
        ids
    }

    /// Encodes `text` (no `<bos>`).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        self.encode_into(text, &mut ids);
        ids
    }

    /// Encodes `text`, appending the ids to `out`.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        let mut rest = text;
        let mut plain_start = 0;
        let mut offset = 0;
        // Pre-split on user-defined pieces (longest match at each position).
        while !rest.is_empty() {
            let matched = self
                .user_defined
                .iter()
                .find(|(piece, _)| rest.starts_with(piece.as_str()));
            if let Some((piece, id)) = matched {
                self.encode_plain(&text[plain_start..offset], out);
                out.push(*id);
                offset += piece.len();
                plain_start = offset;
                rest = &text[offset..];
            } else {
                let step = rest.chars().next().map_or(1, char::len_utf8);
                offset += step;
                rest = &text[offset..];
            }
        }
        self.encode_plain(&text[plain_start..], out);
    }

    /// BPE over one run of text without user-defined pieces.
    fn encode_plain(&self, text: &str, out: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        let normalized: String = text
            .chars()
            .map(|c| if c == ' ' { SPACE_MARKER } else { c })
            .collect();
        // Symbols as byte ranges into `normalized`, in a doubly linked list.
        let mut symbols: Vec<Symbol> = normalized
            .char_indices()
            .map(|(start, c)| Symbol {
                start,
                len: c.len_utf8(),
                prev: None,
                next: None,
            })
            .collect();
        let count = symbols.len();
        for (i, symbol) in symbols.iter_mut().enumerate() {
            symbol.prev = i.checked_sub(1);
            symbol.next = (i + 1 < count).then_some(i + 1);
        }
        let mut queue = BinaryHeap::new();
        for left in 0..count.saturating_sub(1) {
            self.push_pair(&normalized, &symbols, left, left + 1, &mut queue);
        }
        while let Some(pair) = queue.pop() {
            let (left, right) = (pair.left, pair.right);
            // Skip stale pairs: one side was merged away or changed since it was queued.
            if symbols[left].len == 0
                || symbols[right].len == 0
                || symbols[left].next != Some(right)
                || symbols[left].len + symbols[right].len != pair.len
            {
                continue;
            }
            symbols[left].len += symbols[right].len;
            symbols[right].len = 0;
            symbols[left].next = symbols[right].next;
            if let Some(next) = symbols[right].next {
                symbols[next].prev = Some(left);
            }
            if let Some(prev) = symbols[left].prev {
                self.push_pair(&normalized, &symbols, prev, left, &mut queue);
            }
            if let Some(next) = symbols[left].next {
                self.push_pair(&normalized, &symbols, left, next, &mut queue);
            }
        }
        let mut index = Some(0);
        while let Some(i) = index {
            let symbol = &symbols[i];
            let piece = &normalized[symbol.start..symbol.start + symbol.len];
            match self.normal.get(piece) {
                Some(id) => out.push(*id),
                None => {
                    for byte in piece.bytes() {
                        match (self.bytes[byte as usize], self.unknown) {
                            (Some(id), _) | (None, Some(id)) => out.push(id),
                            (None, None) => {}
                        }
                    }
                }
            }
            index = symbol.next;
        }
    }

    fn push_pair(
        &self,
        text: &str,
        symbols: &[Symbol],
        left: usize,
        right: usize,
        queue: &mut BinaryHeap<Pair>,
    ) {
        let start = symbols[left].start;
        let len = symbols[left].len + symbols[right].len;
        if let Some(&id) = self.normal.get(&text[start..start + len]) {
            queue.push(Pair {
                score: self.scores[id as usize],
                left,
                right,
                len,
            });
        }
    }

    /// The bytes `id` stands for in output text: `▁` becomes a space, `<0xNN>` its byte, and
    /// control pieces nothing.
    pub fn token_bytes(&self, id: u32) -> Cow<'_, [u8]> {
        let Some(piece) = self.pieces.get(id as usize) else {
            return Cow::Borrowed(&[]);
        };
        match self.kinds[id as usize] {
            TokenKind::Control | TokenKind::Unused | TokenKind::Unknown => Cow::Borrowed(&[]),
            TokenKind::Byte => match parse_byte_piece(piece) {
                Some(byte) => Cow::Owned(vec![byte]),
                None => Cow::Borrowed(&[]),
            },
            TokenKind::Normal | TokenKind::UserDefined => {
                if piece.contains(SPACE_MARKER) {
                    Cow::Owned(piece.replace(SPACE_MARKER, " ").into_bytes())
                } else {
                    Cow::Borrowed(piece.as_bytes())
                }
            }
        }
    }

    /// Decodes ids to text (control tokens dropped, invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(&self.token_bytes(id));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Token bytes in the form the constrained decoder's token trie expects: control and unused
    /// pieces are marked with a leading `0xFF` byte so grammars never produce them as text.
    pub fn trie_bytes(&self, id: u32) -> Vec<u8> {
        match self.kinds.get(id as usize) {
            Some(TokenKind::Control | TokenKind::Unused | TokenKind::Unknown) => {
                let mut bytes = vec![0xFF];
                bytes.extend_from_slice(self.pieces[id as usize].as_bytes());
                bytes
            }
            _ => self.token_bytes(id).into_owned(),
        }
    }
}

/// `<0x0A>` → `0x0A`.
fn parse_byte_piece(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge: highest score first, then leftmost.
#[derive(Debug, Clone, Copy)]
struct Pair {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pair {}

impl PartialOrd for Pair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pair {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Turns a stream of token bytes into text deltas that are always valid UTF-8: bytes of an
/// incomplete character are held back until the rest arrives.
#[derive(Debug, Default, Clone)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Adds bytes and returns the text that is complete so far (possibly empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        match std::str::from_utf8(&self.pending) {
            Ok(text) => {
                let text = text.to_owned();
                self.pending.clear();
                text
            }
            Err(error) => {
                let valid = error.valid_up_to();
                if error.error_len().is_some() {
                    // Truly invalid bytes: replace them rather than waiting forever.
                    let text = String::from_utf8_lossy(&self.pending).into_owned();
                    self.pending.clear();
                    return text;
                }
                let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
                self.pending.drain(..valid);
                text
            }
        }
    }

    /// Whatever is left (an incomplete character, replaced).
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A tiny vocabulary: control tokens, bytes, a few merges, and a user-defined newline.
    fn tiny() -> Tokenizer {
        let mut pieces: Vec<(String, f32, TokenKind)> = vec![
            ("<pad>".into(), 0.0, TokenKind::Control),
            ("<eos>".into(), 0.0, TokenKind::Control),
            ("<bos>".into(), 0.0, TokenKind::Control),
            ("<unk>".into(), 0.0, TokenKind::Unknown),
            ("\n".into(), 0.0, TokenKind::UserDefined),
            ("\n\n".into(), 0.0, TokenKind::UserDefined),
        ];
        for byte in 0..=255u8 {
            pieces.push((format!("<0x{byte:02X}>"), 0.0, TokenKind::Byte));
        }
        for (piece, score) in [
            ("h", -1.0),
            ("e", -1.0),
            ("l", -1.0),
            ("o", -1.0),
            ("▁", -1.0),
            ("w", -1.0),
            ("r", -1.0),
            ("d", -1.0),
            ("he", -5.0),
            ("ll", -3.0),
            ("hell", -4.0),
            ("hello", -2.0),
            ("▁w", -6.0),
            ("or", -7.0),
            ("▁wor", -8.0),
            ("▁world", -9.0),
            ("ld", -10.0),
            ("<start_of_turn>", 0.0),
        ] {
            pieces.push((piece.into(), score, TokenKind::Normal));
        }
        // `<start_of_turn>` as a control piece too: the normal entry above must never be
        // reached by merges of its characters (no intermediate pieces exist), and the control
        // entry is only reachable through `control()`.
        pieces.push(("<start_of_turn>".into(), 0.0, TokenKind::Control));
        let (p, (s, k)): (Vec<_>, (Vec<_>, Vec<_>)) =
            pieces.into_iter().map(|(p, s, k)| (p, (s, k))).unzip();
        Tokenizer::new(p, s, k, 2, 1).unwrap()
    }

    fn id(t: &Tokenizer, piece: &str) -> u32 {
        t.normal.get(piece).copied().unwrap()
    }

    #[test]
    fn merges_follow_scores_and_spaces_become_markers() {
        let t = tiny();
        let ids = t.encode("hello world");
        assert_eq!(ids, vec![id(&t, "hello"), id(&t, "▁world")]);
        assert_eq!(t.decode(&ids), "hello world");
        assert_eq!(t.encode_with_bos("hello")[0], 2);
    }

    #[test]
    fn unknown_characters_fall_back_to_bytes() {
        let t = tiny();
        let ids = t.encode("hé");
        // `h` is a piece; `é` is two bytes C3 A9.
        assert_eq!(ids, vec![id(&t, "h"), 6 + 0xC3, 6 + 0xA9]);
        assert_eq!(t.decode(&ids), "hé");
    }

    #[test]
    fn user_defined_pieces_split_first_and_control_text_stays_text() {
        let t = tiny();
        let ids = t.encode("he\n\n\nlo");
        assert_eq!(ids, vec![id(&t, "he"), 5, 4, id(&t, "l"), id(&t, "o")]);
        let forged = t.encode("<start_of_turn>");
        assert!(!forged.contains(&t.control("<start_of_turn>").unwrap()));
        assert_eq!(t.decode(&forged), "<start_of_turn>");
    }

    #[test]
    fn control_tokens_decode_to_nothing_and_trie_bytes_mark_them() {
        let t = tiny();
        assert_eq!(t.decode(&[2, id(&t, "hello"), 1]), "hello");
        assert_eq!(t.trie_bytes(1), b"\xFF<eos>".to_vec());
        assert_eq!(t.trie_bytes(id(&t, "▁w")), b" w".to_vec());
    }

    #[test]
    fn ties_merge_leftmost_first() {
        let t = tiny();
        // "lll": both pairs score "ll" equally; leftmost wins → "ll" + "l".
        assert_eq!(t.encode("lll"), vec![id(&t, "ll"), id(&t, "l")]);
    }

    #[test]
    fn mismatched_arrays_are_rejected() {
        let error =
            Tokenizer::new(vec!["a".into()], vec![], vec![TokenKind::Normal], 0, 0).unwrap_err();
        assert!(matches!(error, VocabError::LengthMismatch { .. }));
    }

    #[test]
    fn utf8_stream_holds_incomplete_characters() {
        let mut stream = Utf8Stream::default();
        let bytes = "é!".as_bytes();
        assert_eq!(stream.push(&bytes[..1]), "");
        assert_eq!(stream.push(&bytes[1..]), "é!");
        assert_eq!(stream.push(&[0xE2]), "");
        assert_eq!(stream.finish(), "\u{FFFD}");
    }
}
