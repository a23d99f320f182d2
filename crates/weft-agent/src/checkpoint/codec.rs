//! Codecs applied to checkpoint bytes at rest: compression ([`GzipCodec`], feature
//! `compression`) or your own encryption (UAP-1.0 §12.4.8(3), §15.3).

use std::fmt;

use super::CheckpointError;

/// Transforms the serialized checkpoint before it is stored and after it is read.
pub trait CheckpointCodec: Send + Sync + fmt::Debug {
    /// A short name (for errors).
    fn name(&self) -> &str;
    /// The file-name suffix of encoded files (e.g. `.gz`); empty for none.
    fn extension(&self) -> &str;
    /// Encodes bytes for storage.
    ///
    /// # Errors
    /// [`CheckpointError::Codec`].
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CheckpointError>;
    /// Decodes stored bytes.
    ///
    /// # Errors
    /// [`CheckpointError::Codec`].
    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CheckpointError>;
}

/// Stores bytes as they are (plain JSON).
#[derive(Debug, Clone, Copy, Default)]
pub struct IdentityCodec;

impl CheckpointCodec for IdentityCodec {
    fn name(&self) -> &str {
        "identity"
    }
    fn extension(&self) -> &str {
        ""
    }
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CheckpointError> {
        Ok(bytes)
    }
    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CheckpointError> {
        Ok(bytes)
    }
}

/// gzip compression (pure Rust), files end in `.gz`.
#[cfg(feature = "compression")]
#[derive(Debug, Clone, Copy)]
pub struct GzipCodec {
    /// Compression level 0–9.
    pub level: u32,
}

#[cfg(feature = "compression")]
impl Default for GzipCodec {
    fn default() -> Self {
        GzipCodec { level: 6 }
    }
}

#[cfg(feature = "compression")]
impl CheckpointCodec for GzipCodec {
    fn name(&self) -> &str {
        "gzip"
    }
    fn extension(&self) -> &str {
        ".gz"
    }
    fn encode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CheckpointError> {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(
            Vec::with_capacity(bytes.len() / 4),
            flate2::Compression::new(self.level.min(9)),
        );
        encoder
            .write_all(&bytes)
            .and_then(|()| encoder.finish())
            .map_err(|e| CheckpointError::Codec {
                codec: self.name().into(),
                message: e.to_string(),
            })
    }
    fn decode(&self, bytes: Vec<u8>) -> Result<Vec<u8>, CheckpointError> {
        use std::io::Read as _;
        let mut out = Vec::with_capacity(bytes.len() * 4);
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| CheckpointError::Codec {
                codec: self.name().into(),
                message: e.to_string(),
            })?;
        Ok(out)
    }
}
