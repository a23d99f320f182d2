//! Media helpers: `Image`, `Document`, `Audio`, `Video` (UPP-1.2 §6.5–§6.8).
//!
//! They build content blocks from files, bytes, base64 or URLs. URLs are never fetched; a
//! conversion that needs the bytes of a URL source fails with [`MediaError::NoData`].

use std::path::Path;

use crate::content::{
    AudioBlock, Blob, ContentBlock, DocumentBlock, DocumentSource, ImageBlock, ImageSource,
    VideoBlock,
};

/// Why a media conversion failed.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// Reading the file failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The source holds no data (a URL, or another kind than asked).
    #[error("the {kind} source has no {wanted} data")]
    NoData {
        /// The source kind.
        kind: &'static str,
        /// What was asked for.
        wanted: &'static str,
    },
    /// Invalid base64.
    #[error("invalid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// The block is of another kind.
    #[error("the block is not a {0} block")]
    WrongBlock(&'static str),
}

fn read(path: &Path) -> Result<Vec<u8>, MediaError> {
    std::fs::read(path).map_err(|source| MediaError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Guesses a media type from a file extension.
pub fn mime_from_path(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "txt" | "md" => "text/plain",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "ogg" => "audio/ogg",
        "flac" => "audio/flac",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "mov" => "video/quicktime",
        _ => "application/octet-stream",
    }
}

/// An image.
///
/// # Examples
///
/// ```
/// use weft_provider::Image;
///
/// let image = Image::from_bytes(vec![0x89, b'P', b'N', b'G'], "image/png");
/// assert!(image.has_data());
/// assert_eq!(image.to_data_url()?, "data:image/png;base64,iVBORw==");
/// let remote = Image::from_url("https://example.com/cat.png", "image/png");
/// assert!(!remote.has_data());
/// assert!(remote.to_bytes().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Where the image is.
    pub source: ImageSource,
    /// Its media type.
    pub mime_type: String,
    /// Width in pixels.
    pub width: Option<u32>,
    /// Height in pixels.
    pub height: Option<u32>,
}

impl Image {
    /// Reads a file (media type from the extension).
    ///
    /// # Errors
    /// When the file cannot be read.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, MediaError> {
        let path = path.as_ref();
        Ok(Image::from_bytes(read(path)?, mime_from_path(path)))
    }

    /// A URL reference; nothing is fetched.
    pub fn from_url(url: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Image {
            source: ImageSource::Url { url: url.into() },
            mime_type: mime_type.into(),
            width: None,
            height: None,
        }
    }

    /// Raw bytes.
    pub fn from_bytes(bytes: Vec<u8>, mime_type: impl Into<String>) -> Self {
        Image {
            source: ImageSource::Bytes { data: Blob(bytes) },
            mime_type: mime_type.into(),
            width: None,
            height: None,
        }
    }

    /// Base64 text.
    pub fn from_base64(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Image {
            source: ImageSource::Base64 { data: data.into() },
            mime_type: mime_type.into(),
            width: None,
            height: None,
        }
    }

    /// From an image block.
    ///
    /// # Errors
    /// When the block is not an image.
    pub fn from_block(block: &ContentBlock) -> Result<Self, MediaError> {
        match block {
            ContentBlock::Image(b) => Ok(Image {
                source: b.source.clone(),
                mime_type: b.mime_type.clone(),
                width: b.width,
                height: b.height,
            }),
            _ => Err(MediaError::WrongBlock("image")),
        }
    }

    /// Whether the bytes are at hand (false for URLs).
    pub fn has_data(&self) -> bool {
        !matches!(self.source, ImageSource::Url { .. })
    }

    /// Base64 of the bytes.
    ///
    /// # Errors
    /// For URL sources.
    pub fn to_base64(&self) -> Result<String, MediaError> {
        match &self.source {
            ImageSource::Base64 { data } => Ok(data.clone()),
            ImageSource::Bytes { data } => Ok(data.to_base64()),
            ImageSource::Url { .. } => Err(MediaError::NoData {
                kind: "url",
                wanted: "image",
            }),
        }
    }

    /// `data:{mime};base64,{…}`.
    ///
    /// # Errors
    /// For URL sources.
    pub fn to_data_url(&self) -> Result<String, MediaError> {
        Ok(format!(
            "data:{};base64,{}",
            self.mime_type,
            self.to_base64()?
        ))
    }

    /// The bytes.
    ///
    /// # Errors
    /// For URL sources and invalid base64.
    pub fn to_bytes(&self) -> Result<Vec<u8>, MediaError> {
        match &self.source {
            ImageSource::Bytes { data } => Ok(data.0.clone()),
            ImageSource::Base64 { data } => Ok(Blob::from_base64(data)?.0),
            ImageSource::Url { .. } => Err(MediaError::NoData {
                kind: "url",
                wanted: "image",
            }),
        }
    }

    /// The content block.
    pub fn to_block(&self) -> ContentBlock {
        ContentBlock::Image(ImageBlock {
            source: self.source.clone(),
            mime_type: self.mime_type.clone(),
            width: self.width,
            height: self.height,
        })
    }
}

/// A PDF or plain-text document.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Where the document is.
    pub source: DocumentSource,
    /// `application/pdf` or `text/plain`.
    pub mime_type: String,
    /// Optional title.
    pub title: Option<String>,
}

impl Document {
    /// Reads a file: PDFs are base64-encoded, anything else is read as text.
    ///
    /// # Errors
    /// When the file cannot be read.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, MediaError> {
        let path = path.as_ref();
        let bytes = read(path)?;
        let title = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if mime_from_path(path) == "application/pdf" {
            Ok(Document {
                source: DocumentSource::Base64 {
                    data: Blob(bytes).to_base64(),
                },
                mime_type: "application/pdf".into(),
                title,
            })
        } else {
            Ok(Document {
                source: DocumentSource::Text {
                    data: String::from_utf8_lossy(&bytes).into_owned(),
                },
                mime_type: "text/plain".into(),
                title,
            })
        }
    }

    /// A PDF by URL; nothing is fetched.
    pub fn from_url(url: impl Into<String>) -> Self {
        Document {
            source: DocumentSource::Url { url: url.into() },
            mime_type: "application/pdf".into(),
            title: None,
        }
    }

    /// A base64 PDF.
    pub fn from_base64(data: impl Into<String>) -> Self {
        Document {
            source: DocumentSource::Base64 { data: data.into() },
            mime_type: "application/pdf".into(),
            title: None,
        }
    }

    /// Plain text.
    pub fn from_text(text: impl Into<String>) -> Self {
        Document {
            source: DocumentSource::Text { data: text.into() },
            mime_type: "text/plain".into(),
            title: None,
        }
    }

    /// From a document block.
    ///
    /// # Errors
    /// When the block is not a document.
    pub fn from_block(block: &ContentBlock) -> Result<Self, MediaError> {
        match block {
            ContentBlock::Document(b) => Ok(Document {
                source: b.source.clone(),
                mime_type: b.mime_type.clone(),
                title: b.title.clone(),
            }),
            _ => Err(MediaError::WrongBlock("document")),
        }
    }

    /// Whether the content is at hand.
    pub fn has_data(&self) -> bool {
        !matches!(self.source, DocumentSource::Url { .. })
    }

    /// Whether it is a PDF.
    pub fn is_pdf(&self) -> bool {
        self.mime_type == "application/pdf"
    }

    /// Whether it is plain text.
    pub fn is_text(&self) -> bool {
        self.mime_type == "text/plain"
    }

    /// The base64 data.
    ///
    /// # Errors
    /// Unless the source is base64.
    pub fn to_base64(&self) -> Result<String, MediaError> {
        match &self.source {
            DocumentSource::Base64 { data } => Ok(data.clone()),
            _ => Err(MediaError::NoData {
                kind: "non-base64",
                wanted: "base64",
            }),
        }
    }

    /// The text.
    ///
    /// # Errors
    /// Unless the source is text.
    pub fn to_text(&self) -> Result<String, MediaError> {
        match &self.source {
            DocumentSource::Text { data } => Ok(data.clone()),
            _ => Err(MediaError::NoData {
                kind: "non-text",
                wanted: "text",
            }),
        }
    }

    /// The URL.
    ///
    /// # Errors
    /// Unless the source is a URL.
    pub fn to_url(&self) -> Result<String, MediaError> {
        match &self.source {
            DocumentSource::Url { url } => Ok(url.clone()),
            _ => Err(MediaError::NoData {
                kind: "non-url",
                wanted: "url",
            }),
        }
    }

    /// The content block.
    pub fn to_block(&self) -> ContentBlock {
        ContentBlock::Document(DocumentBlock {
            source: self.source.clone(),
            mime_type: self.mime_type.clone(),
            title: self.title.clone(),
        })
    }
}

macro_rules! timed_media {
    ($name:ident, $block:ident, $variant:ident, $what:literal $(, $extra:ident)*) => {
        #[doc = concat!("An ", $what, " clip.")]
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            /// The bytes.
            pub data: Blob,
            /// Media type.
            pub mime_type: String,
            /// Duration in seconds.
            pub duration: Option<f64>,
            $(
                #[doc = concat!("Optional ", stringify!($extra), ".")]
                pub $extra: Option<u32>,
            )*
        }

        impl $name {
            /// Reads a file (media type from the extension).
            ///
            /// # Errors
            /// When the file cannot be read.
            pub fn from_path(path: impl AsRef<Path>) -> Result<Self, MediaError> {
                let path = path.as_ref();
                Ok($name::from_bytes(read(path)?, mime_from_path(path)))
            }

            /// Raw bytes.
            pub fn from_bytes(bytes: Vec<u8>, mime_type: impl Into<String>) -> Self {
                $name { data: Blob(bytes), mime_type: mime_type.into(), duration: None $(, $extra: None)* }
            }

            /// Base64 text.
            ///
            /// # Errors
            /// When the text is not base64.
            pub fn from_base64(data: &str, mime_type: impl Into<String>) -> Result<Self, MediaError> {
                Ok($name::from_bytes(Blob::from_base64(data)?.0, mime_type))
            }

            /// From a block of this kind.
            ///
            /// # Errors
            /// When the block is of another kind.
            pub fn from_block(block: &ContentBlock) -> Result<Self, MediaError> {
                match block {
                    ContentBlock::$variant(b) => Ok($name { data: b.data.clone(), mime_type: b.mime_type.clone(), duration: b.duration $(, $extra: b.$extra)* }),
                    _ => Err(MediaError::WrongBlock($what)),
                }
            }

            /// Size in bytes.
            pub fn size(&self) -> usize {
                self.data.len()
            }

            /// Base64 of the bytes.
            pub fn to_base64(&self) -> String {
                self.data.to_base64()
            }

            /// `data:` URL.
            pub fn to_data_url(&self) -> String {
                format!("data:{};base64,{}", self.mime_type, self.to_base64())
            }

            /// The bytes.
            pub fn to_bytes(&self) -> Vec<u8> {
                self.data.0.clone()
            }

            /// The content block.
            pub fn to_block(&self) -> ContentBlock {
                ContentBlock::$variant($block { data: self.data.clone(), mime_type: self.mime_type.clone(), duration: self.duration $(, $extra: self.$extra)* })
            }
        }
    };
}

timed_media!(Audio, AudioBlock, Audio, "audio");
timed_media!(Video, VideoBlock, Video, "video", width, height);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_image_url_has_no_data_and_its_conversions_fail() {
        // `from_url` does not fetch (an unreachable host is fine); every conversion to data fails.
        let remote = Image::from_url("https://unreachable.invalid/cat.png", "image/png");
        assert!(!remote.has_data());
        assert!(remote.to_base64().is_err());
        assert!(remote.to_data_url().is_err());
        assert!(remote.to_bytes().is_err());
        let local = Image::from_bytes(vec![0x89, b'P', b'N', b'G'], "image/png");
        assert!(local.has_data());
        assert_eq!(local.to_base64().unwrap(), "iVBORw==");
        assert_eq!(
            local.to_data_url().unwrap(),
            "data:image/png;base64,iVBORw=="
        );
        assert_eq!(local.to_bytes().unwrap(), [0x89, b'P', b'N', b'G']);
    }

    #[test]
    fn documents_refuse_the_wrong_conversion() {
        let doc = Document::from_url("https://example.com/a.pdf");
        assert!(doc.is_pdf() && !doc.has_data());
        assert!(doc.to_base64().is_err());
        assert!(doc.to_text().is_err());
        assert_eq!(doc.to_url().unwrap(), "https://example.com/a.pdf");
        assert!(Document::from_text("hi").is_text());
    }

    #[test]
    fn pdf_from_path_is_base64() {
        let dir = std::env::temp_dir().join(format!("weft-media-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pdf");
        std::fs::write(&path, b"%PDF-1.4").unwrap();
        let doc = Document::from_path(&path).unwrap();
        assert_eq!(doc.to_base64().unwrap(), "JVBERi0xLjQ=");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn audio_and_video_round_trip_through_blocks() {
        let audio = Audio::from_bytes(vec![1, 2], "audio/wav");
        assert_eq!(Audio::from_block(&audio.to_block()).unwrap(), audio);
        let mut video = Video::from_bytes(vec![3], "video/mp4");
        video.width = Some(640);
        assert_eq!(Video::from_block(&video.to_block()).unwrap(), video);
        assert_eq!(video.size(), 1);
    }
}
