//! The thread hash: `sha256:<hex>` over the canonical bytes of [`crate::canonical`].
//!
//! **Invariant:** the hash depends only on the JCS bytes, so it is the same on every platform,
//! for every key order and whitespace of the input, and across serde versions.

use std::fmt;

use serde_json::{Map, Value};

use crate::canonical::{CanonicalOptions, canonicalize};

/// What the hash covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HashScope {
    /// The whole thread document (default).
    #[default]
    Thread,
    /// Only `version` and `turns`, as in the implementation guide's consistency check (TP-066).
    Turns,
}

/// Options of [`hash_thread`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HashOptions {
    /// Include `meta:*` members, events and parts (default: excluded).
    pub include_meta: bool,
    /// What the hash covers.
    pub scope: HashScope,
}

/// A SHA-256 digest, displayed as `sha256:<lowercase hex>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThreadHash(pub [u8; 32]);

impl fmt::Display for ThreadHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// Hashes a thread given as JSON.
pub fn hash_thread(thread: &Value, options: HashOptions) -> ThreadHash {
    let canonical = CanonicalOptions {
        include_meta: options.include_meta,
    };
    let bytes = match options.scope {
        HashScope::Thread => canonicalize(thread, canonical),
        HashScope::Turns => {
            let mut subset = Map::new();
            for key in ["version", "turns"] {
                if let Some(value) = thread.get(key) {
                    subset.insert(key.to_owned(), value.clone());
                }
            }
            canonicalize(&Value::Object(subset), canonical)
        }
    };
    hash_bytes(&bytes)
}

/// SHA-256 of bytes as a [`ThreadHash`].
///
/// Computed with `ring`'s assembly SHA-256 (SHA-NI, AVX2 or SSSE3, chosen at run time), about
/// twice as fast as a portable implementation on CPUs without SHA instructions.
pub fn hash_bytes(bytes: &[u8]) -> ThreadHash {
    ThreadHash(sha256(bytes))
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// A deterministic UUID (version 8, RFC 9562) derived from bytes: the first 16 bytes of their
/// SHA-256 with the version and variant bits set. Used for thread IDs built from content.
pub fn content_uuid(bytes: &[u8]) -> String {
    let digest = sha256(bytes);
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id[6] = (id[6] & 0x0f) | 0x80;
    id[8] = (id[8] & 0x3f) | 0x80;
    let hex: String = id.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// FIPS 180-2's "abc" vector: the digest is SHA-256 itself, not merely some function that
    /// is stable and differs between inputs.
    const ABC: &str = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn hash_bytes_is_sha256_displayed_as_lowercase_hex() {
        assert_eq!(hash_bytes(b"abc").to_string(), ABC);
        assert_eq!(
            hash_bytes(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn hash_thread_is_sha256_of_the_canonical_bytes() {
        let thread = json!({"version": "0.0.3", "turns": [], "title": "t"});
        assert_eq!(
            hash_thread(&thread, HashOptions::default()),
            hash_bytes(br#"{"title":"t","turns":[],"version":"0.0.3"}"#)
        );
        let turns = HashOptions {
            scope: HashScope::Turns,
            ..HashOptions::default()
        };
        assert_eq!(
            hash_thread(&thread, turns),
            hash_bytes(br#"{"turns":[],"version":"0.0.3"}"#)
        );
    }

    #[test]
    fn content_uuid_is_a_version_8_uuid_of_the_digest() {
        // The first 16 bytes of SHA-256("abc") (ba7816bf 8f01 cfea 4141 40de5dae2223) with the
        // version nibble set to 8 and the variant bits to 10.
        assert_eq!(content_uuid(b"abc"), "ba7816bf-8f01-8fea-8141-40de5dae2223");
        // Bytes whose version and variant bits are all ones before masking.
        for input in [&b""[..], b"weft", b"\xff\xff"] {
            let id = content_uuid(input);
            let bytes: Vec<char> = id.chars().collect();
            assert_eq!(bytes[14], '8', "{id}: version 8");
            assert!(
                matches!(bytes[19], '8' | '9' | 'a' | 'b'),
                "{id}: variant 10"
            );
        }
    }
}
