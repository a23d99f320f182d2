//! Resolving a tool return's `content_ref` (TP-072, implementation guide › ContentRef
//! Client-Side Resolution).
//!
//! - **Inline wins:** a [`ToolReturnPart`] whose `content` is present (even `null`) resolves to
//!   it; the reference is not fetched.
//! - **Integrity:** fetched bytes are checked against the reference's `hash` (`sha256:<hex>`,
//!   or the bare 64 hex digits the guide's example writes); a mismatch fails with
//!   [`ContentRefError::IntegrityCheckFailed`] ("Content integrity check failed"). A hash in
//!   any other form fails too ([`ContentRefError::UnsupportedHash`]): content is never
//!   accepted as verified when it was not. A reference without a hash is accepted as fetched.
//!
//! The crate does no I/O: the caller supplies the transport as a [`ContentFetcher`] (an HTTP
//! client for `https://`, an object store client for `s3://`, a file read for `file://`).
//!
//! # Example
//!
//! ```
//! use std::convert::Infallible;
//! use weft_thread::content_ref::{ContentFetcher, ContentRefError, resolve_tool_return};
//! use weft_thread::{ContentRef, ToolReturnPart, hash::hash_bytes};
//!
//! /// Serves one document from memory.
//! struct Fixed(Vec<u8>);
//! impl ContentFetcher for Fixed {
//!     type Error = Infallible;
//!     async fn fetch(&self, _: &ContentRef) -> Result<Vec<u8>, Infallible> {
//!         Ok(self.0.clone())
//!     }
//! }
//!
//! # fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     let mut f = std::pin::pin!(f);
//! #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
//! # }
//! let body = br#"{"rows": 3}"#.to_vec();
//! let part: ToolReturnPart = serde_json::from_value(serde_json::json!({
//!     "tool_name": "report", "tool_call_id": "c1", "status": "success",
//!     "content_ref": {"uri": "s3://bucket/report.json", "hash": hash_bytes(&body).to_string()}
//! }))?;
//! let content = block_on(resolve_tool_return(&part, &Fixed(body)))?;
//! assert_eq!(content, Some(serde_json::json!({"rows": 3})));
//!
//! // Other bytes than the hash names: refused.
//! let error = block_on(resolve_tool_return(&part, &Fixed(b"{}".to_vec()))).unwrap_err();
//! assert!(matches!(error, ContentRefError::IntegrityCheckFailed { .. }));
//! assert!(error.to_string().starts_with("Content integrity check failed"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::future::Future;

use serde_json::Value;

use crate::hash::hash_bytes;
use crate::types::{ContentRef, ToolReturnPart};

/// Fetches the bytes a [`ContentRef`] points to. Implemented by the caller for the URI
/// schemes it serves.
pub trait ContentFetcher {
    /// Why a fetch failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The content at `content_ref.uri`, as stored (the bytes the `hash` was taken of).
    fn fetch(
        &self,
        content_ref: &ContentRef,
    ) -> impl Future<Output = Result<Vec<u8>, Self::Error>> + Send;
}

/// Why a `content_ref` could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContentRefError {
    /// The fetcher failed.
    #[error("fetching {uri} failed: {source}")]
    Fetch {
        /// The reference's URI.
        uri: String,
        /// The fetcher's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The fetched bytes do not have the reference's hash.
    #[error("Content integrity check failed for {uri}: expected {expected}, got {actual}")]
    IntegrityCheckFailed {
        /// The reference's URI.
        uri: String,
        /// The hash the reference names.
        expected: String,
        /// The hash of the fetched bytes (`sha256:<hex>`).
        actual: String,
    },
    /// The reference's hash is not a SHA-256 digest this crate can check.
    #[error("content reference to {uri} has hash {hash:?}: expected \"sha256:\" and 64 hex digits")]
    UnsupportedHash {
        /// The reference's URI.
        uri: String,
        /// The hash as written.
        hash: String,
    },
    /// The verified bytes are not JSON ([`resolve_tool_return`] parses them).
    #[error("the content at {uri} is not JSON: {source}")]
    NotJson {
        /// The reference's URI.
        uri: String,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// Checks `bytes` against `content_ref.hash` (nothing to check without one).
///
/// # Errors
/// [`ContentRefError::IntegrityCheckFailed`] when the digest differs,
/// [`ContentRefError::UnsupportedHash`] when the hash is not a SHA-256 digest.
pub fn verify(content_ref: &ContentRef, bytes: &[u8]) -> Result<(), ContentRefError> {
    let Some(expected) = &content_ref.hash else {
        return Ok(());
    };
    let hex = match (expected.get(..7), expected.get(7..)) {
        (Some(prefix), Some(rest)) if prefix.eq_ignore_ascii_case("sha256:") => rest,
        _ => expected.as_str(),
    };
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ContentRefError::UnsupportedHash {
            uri: content_ref.uri.clone(),
            hash: expected.clone(),
        });
    }
    let actual = hash_bytes(bytes).to_string();
    if actual
        .strip_prefix("sha256:")
        .is_some_and(|digest| digest.eq_ignore_ascii_case(hex))
    {
        Ok(())
    } else {
        Err(ContentRefError::IntegrityCheckFailed {
            uri: content_ref.uri.clone(),
            expected: expected.clone(),
            actual,
        })
    }
}

/// Fetches the content `content_ref` points to and checks it against its hash: the bytes
/// returned are the verified ones (use this for binary content).
///
/// # Errors
/// [`ContentRefError::Fetch`], and those of [`verify`].
pub async fn fetch_verified<F: ContentFetcher>(
    content_ref: &ContentRef,
    fetcher: &F,
) -> Result<Vec<u8>, ContentRefError> {
    let bytes = fetcher
        .fetch(content_ref)
        .await
        .map_err(|source| ContentRefError::Fetch {
            uri: content_ref.uri.clone(),
            source: Box::new(source),
        })?;
    verify(content_ref, &bytes)?;
    Ok(bytes)
}

/// The result of a tool return: its inline `content` when present (the reference is not
/// fetched), else the JSON its `content_ref` points to, fetched and verified; `None` when it
/// has neither.
///
/// # Errors
/// Those of [`fetch_verified`]; [`ContentRefError::NotJson`] when the verified bytes do not
/// parse as JSON.
pub async fn resolve_tool_return<F: ContentFetcher>(
    part: &ToolReturnPart,
    fetcher: &F,
) -> Result<Option<Value>, ContentRefError> {
    if let Some(content) = &part.content {
        return Ok(Some(content.clone()));
    }
    let Some(content_ref) = &part.content_ref else {
        return Ok(None);
    };
    let bytes = fetch_verified(content_ref, fetcher).await?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| ContentRefError::NotJson {
            uri: content_ref.uri.clone(),
            source,
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn reference(hash: Option<&str>) -> ContentRef {
        ContentRef {
            uri: "s3://b/k".into(),
            size_bytes: None,
            hash: hash.map(str::to_owned),
            media_type: None,
            extra: crate::types::JsonMap::new(),
        }
    }

    #[test]
    fn verify_accepts_prefixed_bare_and_uppercase_digests() {
        let digest = hash_bytes(b"abc").to_string();
        let bare = digest.strip_prefix("sha256:").unwrap().to_owned();
        for hash in [
            digest.clone(),
            bare.clone(),
            bare.to_uppercase(),
            format!("SHA256:{bare}"),
        ] {
            assert!(verify(&reference(Some(&hash)), b"abc").is_ok(), "{hash}");
        }
        assert!(verify(&reference(None), b"anything").is_ok());
    }

    #[test]
    fn verify_rejects_other_bytes_and_unknown_digests() {
        let digest = hash_bytes(b"abc").to_string();
        assert!(matches!(
            verify(&reference(Some(&digest)), b"abd"),
            Err(ContentRefError::IntegrityCheckFailed { .. })
        ));
        for hash in [
            "md5:900150983cd24fb0d6963f7d28e17f72",
            "sha256:abcd1234",
            "",
            "sha256:",
        ] {
            assert!(
                matches!(
                    verify(&reference(Some(hash)), b"abc"),
                    Err(ContentRefError::UnsupportedHash { .. })
                ),
                "{hash}"
            );
        }
    }
}
