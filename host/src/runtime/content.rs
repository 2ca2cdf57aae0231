//! The host side of the `content` import: a call's result parts, as MCP content
//! blocks, gathered in order and bounded by the result size limit.

use base64::Engine as _;
use rmcp::model::{ContentBlock, Resource, ResourceContents};
use serde_json::Value;

use super::bindings::justonce::tool::content::{Part, ResourceBody};
use super::limiter::LimitHit;

/// The parts a call added so far, as the MCP content blocks they become, and their
/// size as JSON text.
#[derive(Debug, Default)]
pub(crate) struct ResultParts {
    parts: Vec<Value>,
    bytes: usize,
}

impl ResultParts {
    /// Adds `part`, or says which limit it would pass: the parts together may not
    /// exceed `limit` bytes of JSON, as the result may not.
    pub fn add(&mut self, part: Part, limit: usize) -> Result<(), LimitHit> {
        let block = block(part);
        // The comma between blocks counts too.
        let size = self.bytes + block.to_string().len() + 1;
        if size > limit {
            return Err(LimitHit::Result { size, limit });
        }
        self.bytes = size;
        self.parts.push(block);
        Ok(())
    }

    /// The blocks, in the order added; `None` when the call added none.
    pub fn take(&mut self) -> Option<Vec<Value>> {
        self.bytes = 0;
        (!self.parts.is_empty()).then(|| std::mem::take(&mut self.parts))
    }
}

/// `part` as an MCP content block: rmcp's model of one, saved as its JSON.
fn block(part: Part) -> Value {
    let block = match part {
        Part::Text(text) => ContentBlock::text(text),
        Part::Image(media) => ContentBlock::image(base64(&media.data), media.mime_type),
        Part::Audio(media) => ContentBlock::audio(base64(&media.data), media.mime_type),
        Part::ResourceLink(link) => {
            let mut resource = Resource::new(link.uri, link.name);
            resource.description = link.description;
            resource.mime_type = link.mime_type;
            ContentBlock::resource_link(resource)
        }
        Part::Embedded(resource) => {
            let (uri, mime_type) = (resource.uri, resource.mime_type);
            ContentBlock::resource(match resource.body {
                ResourceBody::Text(text) => ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    meta: None,
                },
                ResourceBody::Blob(bytes) => ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob: base64(&bytes),
                    meta: None,
                },
            })
        }
    };
    serde_json::to_value(block).expect("a content block serializes to JSON")
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::super::bindings::justonce::tool::content::{EmbeddedResource, Media, ResourceLink};
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_become_mcp_content_blocks_in_order() {
        let mut parts = ResultParts::default();
        for part in [
            Part::Text("hi".into()),
            Part::Image(Media {
                data: vec![1, 2, 3],
                mime_type: "image/png".into(),
            }),
            Part::Audio(Media {
                data: b"RIFF".to_vec(),
                mime_type: "audio/wav".into(),
            }),
            Part::ResourceLink(ResourceLink {
                uri: "file:///a".into(),
                name: "a".into(),
                description: None,
                mime_type: Some("text/plain".into()),
            }),
            Part::Embedded(EmbeddedResource {
                uri: "test://r".into(),
                mime_type: None,
                body: ResourceBody::Blob(vec![0xff]),
            }),
        ] {
            parts.add(part, 1 << 20).unwrap();
        }
        assert_eq!(
            Value::Array(parts.take().unwrap()),
            json!([
                { "type": "text", "text": "hi" },
                { "type": "image", "data": "AQID", "mimeType": "image/png" },
                { "type": "audio", "data": "UklGRg==", "mimeType": "audio/wav" },
                { "type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": "text/plain" },
                { "type": "resource", "resource": { "uri": "test://r", "blob": "/w==" } },
            ])
        );
        assert_eq!(parts.take(), None);
    }

    #[test]
    fn parts_past_the_result_limit_are_refused_with_their_size() {
        let mut parts = ResultParts::default();
        parts.add(Part::Text("x".repeat(10)), 64).unwrap();
        let hit = parts.add(Part::Text("y".repeat(40)), 64).unwrap_err();
        assert!(
            matches!(hit, LimitHit::Result { size, limit: 64 } if size > 64),
            "{hit:?}"
        );
    }
}
