//! Which build of a tool ran: digests of component files, and the digest the journal
//! recorded for a call.

use justonce::registry::Digest;
use justonce::{InvocationKey, JournalEntry};

/// The digest (`sha256:…`) of the component file at `path`.
pub fn digest_of_file(path: &str) -> String {
    Digest::of(&std::fs::read(path).unwrap()).to_string()
}

/// The component digest `journal` records for the call `key`.
pub fn component_of(journal: &[JournalEntry], key: &InvocationKey) -> Option<String> {
    journal
        .iter()
        .find(|e| e.key == key.as_str())
        .and_then(|e| e.component.clone())
}
