//! BERT's uncased WordPiece tokenizer over `vocab.txt`: clean the text, split CJK characters,
//! whitespace and punctuation, lower-case, strip accents (NFD, combining marks dropped), then
//! greedy longest-match-first word pieces (`##` continues a word; a word longer than 100
//! characters or with no match is `[UNK]`). `[CLS] … [SEP]` around it.

use std::collections::HashMap;

use unicode_categories::UnicodeCategories as _;
use unicode_normalization::UnicodeNormalization as _;

const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary.
#[derive(Debug, Clone)]
pub(crate) struct WordPiece {
    ids: HashMap<String, u32>,
    cls: u32,
    sep: u32,
    unk: u32,
}

impl WordPiece {
    /// Reads `vocab.txt` (one token per line, the line number is the id).
    pub(crate) fn from_vocab(text: &str) -> Result<WordPiece, String> {
        let ids: HashMap<String, u32> = text
            .lines()
            .enumerate()
            .map(|(i, t)| {
                (
                    t.trim_end_matches('\r').to_owned(),
                    u32::try_from(i).unwrap_or(u32::MAX),
                )
            })
            .collect();
        let special = |t: &str| {
            ids.get(t)
                .copied()
                .ok_or_else(|| format!("vocab.txt has no {t}"))
        };
        Ok(WordPiece {
            cls: special("[CLS]")?,
            sep: special("[SEP]")?,
            unk: special("[UNK]")?,
            ids,
        })
    }

    /// The ids of `text` with `[CLS]` and `[SEP]`, at most `max_len` in all.
    pub(crate) fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let mut out = vec![self.cls];
        for word in basic_tokens(text) {
            self.word_pieces(&word, &mut out);
            if out.len() >= max_len.saturating_sub(1) {
                break;
            }
        }
        out.truncate(max_len.saturating_sub(1).max(1));
        out.push(self.sep);
        out
    }

    fn word_pieces(&self, word: &str, out: &mut Vec<u32>) {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > MAX_WORD_CHARS {
            out.push(self.unk);
            return;
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while start < end {
                let piece: String = chars[start..end].iter().collect();
                let piece = if start > 0 {
                    format!("##{piece}")
                } else {
                    piece
                };
                if let Some(id) = self.ids.get(&piece) {
                    found = Some(*id);
                    break;
                }
                end -= 1;
            }
            let Some(id) = found else {
                out.push(self.unk);
                return;
            };
            pieces.push(id);
            start = end;
        }
        out.extend(pieces);
    }
}

fn is_cjk(c: char) -> bool {
    matches!(u32::from(c),
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

fn is_punctuation(c: char) -> bool {
    let code = u32::from(c);
    (33..=47).contains(&code)
        || (58..=64).contains(&code)
        || (91..=96).contains(&code)
        || (123..=126).contains(&code)
        || c.is_punctuation()
}

fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    c.is_other_control() || c.is_other_format()
}

/// Cleaning, CJK and punctuation splitting, lower-casing and accent stripping.
fn basic_tokens(text: &str) -> Vec<String> {
    let mut spaced = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if c.is_whitespace() {
            spaced.push(' ');
        } else if is_cjk(c) {
            spaced.push(' ');
            spaced.push(c);
            spaced.push(' ');
        } else {
            spaced.push(c);
        }
    }
    let mut tokens = Vec::new();
    for word in spaced.split_whitespace() {
        let lowered: String = word
            .to_lowercase()
            .nfd()
            .filter(|c| !c.is_mark_nonspacing())
            .collect();
        let mut current = String::new();
        for c in lowered.chars() {
            if is_punctuation(c) {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
                tokens.push(c.to_string());
            } else {
                current.push(c);
            }
        }
        if !current.is_empty() {
            tokens.push(current);
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_pieces_split_longest_first() {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nun\n##aff\n##able\nhello\n,\n!\nworld\n";
        let wp = WordPiece::from_vocab(vocab).expect("vocab");
        assert_eq!(
            wp.encode("Unaffable, héllo WORLD!", 64),
            vec![2, 4, 5, 6, 8, 7, 10, 9, 3]
        );
        assert_eq!(wp.encode("xyz", 64), vec![2, 1, 3]);
        assert_eq!(wp.encode("hello hello hello", 3), vec![2, 7, 3]);
    }
}
