//! Results beyond JSON: text, images, sounds and resources for the agent
//! ([`Content`]), with or without a structured result ([`Rich`]).
//!
//! A tool whose [`Output`](crate::Tool::Output) is a plain [`Serialize`] type
//! answers with that JSON, as text and as MCP's `structuredContent`. A tool that
//! returns a [`Rich`] answers with its parts, in order, and its structured value
//! besides, if any. Either way the host saves the whole result and replays it byte
//! for byte.
//!
//! ```
//! use justonce_guest::content::{Content, Rich};
//!
//! # const PNG: &[u8] = b"\x89PNG";
//! let chart: Rich = Rich::new()
//!     .with(Content::text("Sales by month:"))
//!     .with(Content::image(PNG.to_vec(), "image/png"));
//! ```

use serde::Serialize;

use crate::__bindings::justonce::tool::content as wit;

/// One part of a result, as MCP's content blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Text for the agent to read.
    Text(String),
    /// An image: its bytes (sent in base64) and MIME type.
    Image {
        /// The raw bytes.
        data: Vec<u8>,
        /// Such as `image/png`.
        mime_type: String,
    },
    /// A sound: its bytes (sent in base64) and MIME type.
    Audio {
        /// The raw bytes.
        data: Vec<u8>,
        /// Such as `audio/wav`.
        mime_type: String,
    },
    /// A link to a resource, for the client to fetch.
    ResourceLink {
        /// Where it is.
        uri: String,
        /// A short name for it.
        name: String,
        /// What it is, for the agent.
        description: Option<String>,
        /// Its MIME type, if known.
        mime_type: Option<String>,
    },
    /// A resource carried in the result itself.
    Resource {
        /// The resource's URI.
        uri: String,
        /// Its MIME type, if known.
        mime_type: Option<String>,
        /// What it holds.
        body: ResourceBody,
    },
}

/// What an embedded [`Content::Resource`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceBody {
    /// Text.
    Text(String),
    /// Bytes (sent in base64).
    Blob(Vec<u8>),
}

impl Content {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// An image part of `data` in `mime_type` (such as `image/png`).
    pub fn image(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An audio part of `data` in `mime_type` (such as `audio/wav`).
    pub fn audio(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self::Audio {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// A link to the resource at `uri`, called `name`; add a description or MIME
    /// type by setting the fields.
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self::ResourceLink {
            uri: uri.into(),
            name: name.into(),
            description: None,
            mime_type: None,
        }
    }

    /// The resource at `uri` carried in the result: `text` of `mime_type`.
    pub fn resource_text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self::Resource {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            body: ResourceBody::Text(text.into()),
        }
    }

    /// The resource at `uri` carried in the result: the bytes `blob` of `mime_type`.
    pub fn resource_blob(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        blob: impl Into<Vec<u8>>,
    ) -> Self {
        Self::Resource {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            body: ResourceBody::Blob(blob.into()),
        }
    }

    fn into_wit(self) -> wit::Part {
        match self {
            Self::Text(text) => wit::Part::Text(text),
            Self::Image { data, mime_type } => wit::Part::Image(wit::Media { data, mime_type }),
            Self::Audio { data, mime_type } => wit::Part::Audio(wit::Media { data, mime_type }),
            Self::ResourceLink {
                uri,
                name,
                description,
                mime_type,
            } => wit::Part::ResourceLink(wit::ResourceLink {
                uri,
                name,
                description,
                mime_type,
            }),
            Self::Resource {
                uri,
                mime_type,
                body,
            } => wit::Part::Embedded(wit::EmbeddedResource {
                uri,
                mime_type,
                body: match body {
                    ResourceBody::Text(text) => wit::ResourceBody::Text(text),
                    ResourceBody::Blob(blob) => wit::ResourceBody::Blob(blob),
                },
            }),
        }
    }
}

/// A result in parts, and optionally a structured value `T` besides them (MCP's
/// `structuredContent`; declare its schema with
/// [`Tool::output_schema`](crate::Tool::output_schema)).
#[derive(Debug, Clone, PartialEq)]
pub struct Rich<T = ()> {
    parts: Vec<Content>,
    structured: Option<T>,
}

impl Rich<()> {
    /// A result of no parts yet and no structured value.
    pub fn new() -> Self {
        Self {
            parts: Vec::new(),
            structured: None,
        }
    }
}

impl Default for Rich<()> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Rich<T> {
    /// A result whose structured value is `value`, and no parts yet.
    pub fn structured(value: T) -> Self {
        Self {
            parts: Vec::new(),
            structured: Some(value),
        }
    }

    /// This result with `part` after the parts it has.
    #[must_use]
    pub fn with(mut self, part: Content) -> Self {
        self.parts.push(part);
        self
    }

    /// Adds `part` after the parts this result has.
    pub fn push(&mut self, part: Content) {
        self.parts.push(part);
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Content] {
        &self.parts
    }
}

impl From<Content> for Rich<()> {
    fn from(part: Content) -> Self {
        Self::new().with(part)
    }
}

impl From<Vec<Content>> for Rich<()> {
    fn from(parts: Vec<Content>) -> Self {
        Self {
            parts,
            structured: None,
        }
    }
}

/// What a tool's [`Output`](crate::Tool::Output) can be: any [`Serialize`] type (a
/// plain JSON result), or a [`Rich`] result.
pub trait ToolOutput {
    /// Hands the parts to the host and returns the JSON result.
    #[doc(hidden)]
    fn into_json(self) -> Result<String, serde_json::Error>;
}

impl<T: Serialize> ToolOutput for T {
    fn into_json(self) -> Result<String, serde_json::Error> {
        serde_json::to_string(&self)
    }
}

impl<T: Serialize> ToolOutput for Rich<T> {
    fn into_json(self) -> Result<String, serde_json::Error> {
        let json = match &self.structured {
            Some(value) => serde_json::to_string(value)?,
            None => "null".to_owned(),
        };
        for part in self.parts {
            wit::add(&part.into_wit());
        }
        Ok(json)
    }
}
