//! Multimodal user content (Pydantic AI's `UserContent`) and external content references.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::serde_util::{from_body, serialize_tagged, split_tag};
use crate::types::JsonMap;

/// An item of a `user-prompt` content list: a string or a media item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[allow(
    clippy::large_enum_variant,
    reason = "mirrors the JSON; boxing would only add indirection"
)]
pub enum UserContent {
    /// Plain text.
    Text(String),
    /// An image, audio, video, document or binary item (or an unknown kind, kept raw).
    Media(MultiModalContent),
}

/// A media item, tagged by `kind`.
#[derive(Debug, Clone, PartialEq)]
pub enum MultiModalContent {
    /// `kind: "image-url"`.
    ImageUrl(UrlContent),
    /// `kind: "audio-url"`.
    AudioUrl(UrlContent),
    /// `kind: "video-url"`.
    VideoUrl(UrlContent),
    /// `kind: "document-url"`.
    DocumentUrl(UrlContent),
    /// `kind: "binary"`.
    Binary(BinaryContent),
    /// Any other kind (e.g. Pydantic AI's `text-content`), kept unchanged including `kind`.
    Other(JsonMap),
}

impl MultiModalContent {
    const URL_KINDS: [&'static str; 4] = ["image-url", "audio-url", "video-url", "document-url"];
}

impl Serialize for MultiModalContent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::ImageUrl(url) => serialize_tagged(serializer, "kind", "image-url", url),
            Self::AudioUrl(url) => serialize_tagged(serializer, "kind", "audio-url", url),
            Self::VideoUrl(url) => serialize_tagged(serializer, "kind", "video-url", url),
            Self::DocumentUrl(url) => serialize_tagged(serializer, "kind", "document-url", url),
            Self::Binary(binary) => binary.serialize(serializer),
            Self::Other(map) => map.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for MultiModalContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut map = JsonMap::deserialize(deserializer)?;
        let kind = match map.get("kind") {
            Some(Value::String(kind)) => kind.clone(),
            _ => return Ok(Self::Other(map)),
        };
        if kind == "binary" {
            return from_body(map).map(Self::Binary);
        }
        if !Self::URL_KINDS.contains(&kind.as_str()) {
            return Ok(Self::Other(map));
        }
        map.remove("kind");
        let url = from_body(map)?;
        Ok(match kind.as_str() {
            "image-url" => Self::ImageUrl(url),
            "audio-url" => Self::AudioUrl(url),
            "video-url" => Self::VideoUrl(url),
            _ => Self::DocumentUrl(url),
        })
    }
}

/// A media item given by URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UrlContent {
    /// Where the item is.
    pub url: String,
    /// Identifier used by tools to refer to the item.
    pub identifier: String,
    /// Whether to download the item rather than pass the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_download: Option<bool>,
    /// Provider-specific metadata (`null` is kept).
    #[serde(
        default,
        deserialize_with = "crate::serde_util::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub vendor_metadata: Option<Value>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// Inline binary data (`kind: "binary"`).
#[derive(Debug, Clone, PartialEq)]
pub struct BinaryContent {
    /// Base64-encoded bytes.
    pub data: String,
    /// MIME type.
    pub media_type: String,
    /// Identifier used by tools to refer to the item.
    pub identifier: String,
    /// Provider-specific metadata (`null` is kept).
    pub vendor_metadata: Option<Value>,
    /// Members this version does not define, kept unchanged.
    pub extra: JsonMap,
}

#[derive(Serialize, Deserialize)]
struct BinaryBody {
    data: String,
    media_type: String,
    identifier: String,
    #[serde(
        default,
        deserialize_with = "crate::serde_util::present",
        skip_serializing_if = "Option::is_none"
    )]
    vendor_metadata: Option<Value>,
    #[serde(flatten)]
    extra: JsonMap,
}

impl Serialize for BinaryContent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let body = BinaryBody {
            data: self.data.clone(),
            media_type: self.media_type.clone(),
            identifier: self.identifier.clone(),
            vendor_metadata: self.vendor_metadata.clone(),
            extra: self.extra.clone(),
        };
        serialize_tagged(serializer, "kind", "binary", &body)
    }
}

impl<'de> Deserialize<'de> for BinaryContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (kind, body) = split_tag(deserializer, "kind")?;
        if kind != "binary" {
            return Err(serde::de::Error::unknown_variant(&kind, &["binary"]));
        }
        let body: BinaryBody = from_body(body)?;
        Ok(Self {
            data: body.data,
            media_type: body.media_type,
            identifier: body.identifier,
            vendor_metadata: body.vendor_metadata,
            extra: body.extra,
        })
    }
}

/// A reference to content stored outside the thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentRef {
    /// Where the content is (`https`, `s3`, `gs`, `azure`, `file` or a documented custom scheme).
    pub uri: String,
    /// Size of the content in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// SHA-256 of the content, e.g. `sha256:…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Members this version does not define, kept unchanged.
    #[serde(flatten)]
    pub extra: JsonMap,
}
