//! Content blocks: the pieces a message is made of (UPP-1.2 §6.3).
//!
//! Blocks are discriminated by `type` on the wire. Binary payloads are [`Blob`]s, which
//! serialize as base64 strings (§14.1).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::message::Metadata;

/// Owned bytes whose JSON form is a base64 string.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Blob(pub Vec<u8>);

impl Blob {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Standard base64 (with padding) of the bytes.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(&self.0)
    }

    /// Decodes standard base64.
    ///
    /// # Errors
    /// When `text` is not valid base64.
    pub fn from_base64(text: &str) -> Result<Self, base64::DecodeError> {
        STANDARD.decode(text.trim()).map(Blob)
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Blob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Blob({} bytes)", self.0.len())
    }
}

impl From<Vec<u8>> for Blob {
    fn from(bytes: Vec<u8>) -> Self {
        Blob(bytes)
    }
}

impl Serialize for Blob {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Blob::from_base64(&text).map_err(serde::de::Error::custom)
    }
}

/// Names of the block types, as exported constants (§14.5.1 `ContentBlockType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentBlockType {
    /// `text`
    Text,
    /// `reasoning`
    Reasoning,
    /// `image`
    Image,
    /// `document`
    Document,
    /// `audio`
    Audio,
    /// `video`
    Video,
    /// `binary`
    Binary,
}

/// One piece of message content.
///
/// # Examples
///
/// ```
/// use weft_provider::ContentBlock;
///
/// let block = ContentBlock::text("Hello");
/// assert_eq!(serde_json::to_string(&block)?, r#"{"type":"text","text":"Hello"}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentBlock {
    /// Plain text.
    Text(TextBlock),
    /// Model reasoning ("thinking").
    Reasoning(ReasoningBlock),
    /// An image.
    Image(ImageBlock),
    /// A PDF or plain-text document.
    Document(DocumentBlock),
    /// Audio.
    Audio(AudioBlock),
    /// Video.
    Video(VideoBlock),
    /// Arbitrary file data (user content only).
    Binary(BinaryBlock),
}

impl ContentBlock {
    /// A text block. The text's spare capacity is given back: a text built piece by piece
    /// (streamed deltas, formatting) can hold up to twice its length, and conversations keep
    /// their messages for a long time.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextBlock {
            text: exact(text.into()),
        })
    }

    /// A reasoning block without signature (spare capacity given back, as [`ContentBlock::text`]).
    pub fn reasoning(text: impl Into<String>) -> Self {
        ContentBlock::Reasoning(ReasoningBlock {
            text: exact(text.into()),
            signature: None,
            metadata: None,
        })
    }

    /// The block's type.
    pub fn block_type(&self) -> ContentBlockType {
        match self {
            ContentBlock::Text(_) => ContentBlockType::Text,
            ContentBlock::Reasoning(_) => ContentBlockType::Reasoning,
            ContentBlock::Image(_) => ContentBlockType::Image,
            ContentBlock::Document(_) => ContentBlockType::Document,
            ContentBlock::Audio(_) => ContentBlockType::Audio,
            ContentBlock::Video(_) => ContentBlockType::Video,
            ContentBlock::Binary(_) => ContentBlockType::Binary,
        }
    }

    /// The text of a text block, `None` for every other kind.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(block) => Some(&block.text),
            _ => None,
        }
    }
}

/// `text` without spare capacity (a no-op when it has none).
fn exact(mut text: String) -> String {
    text.shrink_to_fit();
    text
}

impl From<&str> for ContentBlock {
    fn from(text: &str) -> Self {
        ContentBlock::text(text)
    }
}

impl From<String> for ContentBlock {
    fn from(text: String) -> Self {
        ContentBlock::text(text)
    }
}

/// `{ type: "text", text }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
}

/// `{ type: "reasoning", text }`, plus what a provider needs to send the reasoning back.
///
/// UPP-1.2 keeps multi-turn reasoning context in provider metadata (§6.3 note). Weft gives the
/// common case a field of its own: `signature` is the provider's opaque proof of the reasoning
/// (Anthropic `thinking.signature`, Gemini `thoughtSignature`), passed back byte for byte.
/// Anything else (Anthropic redacted thinking `data`, OpenAI Responses reasoning item id and
/// `encrypted_content`) lives in `metadata.{provider}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningBlock {
    /// The visible reasoning text (empty for redacted or encrypted reasoning).
    pub text: String,
    /// The provider's signature over this reasoning, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Provider-namespaced extras.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Where image bytes come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ImageSource {
    /// Base64 text, kept as given.
    Base64 {
        /// The base64 data.
        data: String,
    },
    /// A URL; never fetched by Weft.
    Url {
        /// The URL.
        url: String,
    },
    /// Raw bytes (base64 on the wire).
    Bytes {
        /// The bytes.
        data: Blob,
    },
}

/// Names of image source kinds (§14.5.1 `ImageSourceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageSourceType {
    /// `base64`
    Base64,
    /// `url`
    Url,
    /// `bytes`
    Bytes,
}

/// `{ type: "image", source, mimeType, width?, height? }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageBlock {
    /// The image data or URL.
    pub source: ImageSource,
    /// e.g. `image/png`.
    pub mime_type: String,
    /// Width in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Height in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

/// Where a document comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum DocumentSource {
    /// Base64 (PDF).
    Base64 {
        /// The base64 data.
        data: String,
    },
    /// A URL (PDF only); never fetched by Weft.
    Url {
        /// The URL.
        url: String,
    },
    /// Plain text.
    Text {
        /// The text.
        data: String,
    },
}

/// Names of document source kinds (§14.5.1 `DocumentSourceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DocumentSourceType {
    /// `base64`
    Base64,
    /// `url`
    Url,
    /// `text`
    Text,
}

/// `{ type: "document", source, mimeType, title? }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentBlock {
    /// The document data or URL.
    pub source: DocumentSource,
    /// `application/pdf` or `text/plain`.
    pub mime_type: String,
    /// Optional title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `{ type: "audio", data, mimeType, duration? }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AudioBlock {
    /// The audio bytes.
    pub data: Blob,
    /// e.g. `audio/mp3`.
    pub mime_type: String,
    /// Duration in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
}

/// `{ type: "video", data, mimeType, duration?, width?, height? }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VideoBlock {
    /// The video bytes.
    pub data: Blob,
    /// e.g. `video/mp4`.
    pub mime_type: String,
    /// Duration in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// Width in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Height in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

/// `{ type: "binary", data, mimeType, metadata? }`: arbitrary file data in user content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BinaryBlock {
    /// The bytes.
    pub data: Blob,
    /// Its media type.
    pub mime_type: String,
    /// Free-form metadata (e.g. a file name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_are_tagged_by_type_and_bytes_are_base64() {
        let block = ContentBlock::Audio(AudioBlock {
            data: Blob(vec![1, 2, 3]),
            mime_type: "audio/wav".into(),
            duration: Some(1.5),
        });
        let json = serde_json::to_value(&block).unwrap();
        assert_eq!(
            json,
            json!({"type": "audio", "data": "AQID", "mimeType": "audio/wav", "duration": 1.5})
        );
        let back: ContentBlock = serde_json::from_value(json).unwrap();
        assert_eq!(back, block);
    }

    #[test]
    fn text_blocks_keep_no_spare_capacity() {
        let mut built = String::with_capacity(1000);
        built.push_str("streamed text");
        let ContentBlock::Text(block) = ContentBlock::text(built) else {
            panic!("not a text block")
        };
        assert_eq!(block.text, "streamed text");
        assert_eq!(block.text.capacity(), block.text.len());
        let mut built = String::with_capacity(500);
        built.push_str("thinking");
        let ContentBlock::Reasoning(block) = ContentBlock::reasoning(built) else {
            panic!("not a reasoning block")
        };
        assert_eq!(block.text.capacity(), block.text.len());
    }

    #[test]
    fn invalid_base64_is_a_clear_error() {
        let error = serde_json::from_value::<ContentBlock>(
            json!({"type": "binary", "data": "!!!", "mimeType": "x/y"}),
        )
        .unwrap_err();
        assert!(error.to_string().contains("Invalid"), "{error}");
    }

    #[test]
    fn image_sources_have_three_forms() {
        for source in [
            json!({"type": "base64", "data": "iVBOR"}),
            json!({"type": "url", "url": "https://example.com/a.png"}),
            json!({"type": "bytes", "data": "AQID"}),
        ] {
            let block = json!({"type": "image", "source": source, "mimeType": "image/png"});
            let parsed: ContentBlock = serde_json::from_value(block.clone()).unwrap();
            assert_eq!(serde_json::to_value(parsed).unwrap(), block);
        }
    }

    #[test]
    fn reasoning_keeps_signature_and_metadata() {
        let block = json!({"type": "reasoning", "text": "hmm", "signature": "sig==",
            "metadata": {"anthropic": {"x": 1}}});
        let parsed: ContentBlock = serde_json::from_value(block.clone()).unwrap();
        assert_eq!(serde_json::to_value(parsed).unwrap(), block);
    }
}
