//! A component as an OCI artifact, in the layout of the CNCF TAG Runtime's Wasm OCI
//! artifact format, which the Bytecode Alliance's `wasm-pkg-tools` (through its
//! `oci-wasm` crate) and Wassette read and write: an OCI image manifest whose config
//! is `application/vnd.wasm.config.v0+json` and whose one layer is the component,
//! `application/wasm`.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::reference::Digest;

/// The manifest's media type: a plain OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config blob's media type.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component layer's media type.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// A blob named in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the blob is.
    pub media_type: String,
    /// Its digest (`sha256:…`), checked against its bytes on every pull.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
}

/// An OCI image manifest (only the fields read here; others are ignored).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`MANIFEST_MEDIA_TYPE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers; a component artifact has one, [`LAYER_MEDIA_TYPE`].
    pub layers: Vec<Descriptor>,
}

/// The two blobs and the manifest of one component, ready to push.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The config blob (JSON).
    pub config: Vec<u8>,
    /// The manifest (JSON), whose digest names the artifact.
    pub manifest: Vec<u8>,
}

impl Artifact {
    /// The artifact of the component `wasm`. Its config records the layer's digest,
    /// `wasm`/`wasip2`, and no creation time, so the same component always makes the
    /// same manifest digest (pushing it twice is one artifact).
    pub fn of(wasm: &[u8]) -> Self {
        let layer = Digest::of(wasm);
        let config = serde_json::to_vec(&json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer.as_str()],
        }))
        .expect("JSON serializes");
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
            config: Descriptor {
                media_type: CONFIG_MEDIA_TYPE.to_owned(),
                digest: Digest::of(&config).to_string(),
                size: config.len() as u64,
            },
            layers: vec![Descriptor {
                media_type: LAYER_MEDIA_TYPE.to_owned(),
                digest: layer.to_string(),
                size: wasm.len() as u64,
            }],
        };
        let manifest = serde_json::to_vec(&manifest).expect("JSON serializes");
        Self { config, manifest }
    }

    /// The digest of the manifest: what `@sha256:…` pins.
    pub fn digest(&self) -> Digest {
        Digest::of(&self.manifest)
    }
}

impl Manifest {
    /// Reads a manifest and finds its component layer; the error says what it is
    /// instead.
    pub fn component_layer(bytes: &[u8]) -> Result<(Manifest, Descriptor, Digest), String> {
        let manifest: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| format!("the manifest is not an OCI image manifest: {e}"))?;
        let wasm: Vec<&Descriptor> = manifest
            .layers
            .iter()
            .filter(|l| l.media_type == LAYER_MEDIA_TYPE)
            .collect();
        let layer = match wasm.as_slice() {
            [one] => (*one).clone(),
            [] => {
                let types: Vec<&str> = manifest
                    .layers
                    .iter()
                    .map(|l| l.media_type.as_str())
                    .collect();
                return Err(format!(
                    "not a WebAssembly component artifact: no `{LAYER_MEDIA_TYPE}` layer (its layers: {})",
                    if types.is_empty() {
                        "none".to_owned()
                    } else {
                        types.join(", ")
                    }
                ));
            }
            _ => {
                return Err(format!(
                    "{} `{LAYER_MEDIA_TYPE}` layers; a component artifact has one",
                    wasm.len()
                ));
            }
        };
        let digest = layer.digest.parse::<Digest>()?;
        Ok((manifest, layer, digest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_artifact_names_its_layer_by_digest_and_is_the_same_for_the_same_bytes() {
        let wasm = b"\0asm\x0d\0\x01\0component";
        let artifact = Artifact::of(wasm);
        let (manifest, layer, digest) = Manifest::component_layer(&artifact.manifest).unwrap();
        assert_eq!(digest, Digest::of(wasm));
        assert_eq!(layer.size, wasm.len() as u64);
        assert_eq!(manifest.config.media_type, CONFIG_MEDIA_TYPE);
        assert_eq!(
            manifest.config.digest,
            Digest::of(&artifact.config).to_string()
        );
        let config: serde_json::Value = serde_json::from_slice(&artifact.config).unwrap();
        assert_eq!(config["layerDigests"][0], digest.as_str());
        assert_eq!(Artifact::of(wasm).digest(), artifact.digest());
        assert_ne!(Artifact::of(b"\0asm other").digest(), artifact.digest());
    }

    #[test]
    fn a_manifest_without_one_wasm_layer_is_refused_saying_what_it_holds() {
        let image = br#"{"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":2},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":1}]}"#;
        let why = Manifest::component_layer(image).unwrap_err();
        assert!(
            why.contains("no `application/wasm` layer")
                && why.contains("application/vnd.oci.image.layer.v1.tar+gzip"),
            "{why}"
        );
        let why = Manifest::component_layer(b"<html>").unwrap_err();
        assert!(why.contains("not an OCI image manifest"), "{why}");
    }
}
