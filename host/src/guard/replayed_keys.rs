//! Calls this guard saw replayed lately, so a further retry of one is prepared with a
//! hash and a lookup: its canonical arguments, fingerprint and key are taken from
//! here instead of being parsed, normalized, checked against the schema and hashed
//! again.
//!
//! What `prepare` computes depends only on the tool's schema and the request's
//! arguments text, conversation, explicit key and principal, so a call that matches
//! all of them (the very same schema, compared by identity and kept alive by the
//! entry) gets what `prepare` would compute. Whether the call replays is still the
//! journal's to say: this remembers keys, never outcomes. Only calls that replayed
//! are remembered, so a stream of fresh calls costs one failed lookup each.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use super::prepared::Prepared;
use super::runner::ToolSpec;
use crate::call::CallRequest;
use crate::keys::{Fingerprint, InvocationKey};
use crate::runtime::InputSchema;

/// At most this many calls are remembered (then everything is forgotten at once).
const MAX_ENTRIES: usize = 1024;
/// Arguments longer than this are not remembered.
const MAX_ARGUMENTS_BYTES: usize = 4096;

/// One remembered call: its inputs, compared in full on a hit, and what `prepare`
/// made of them.
struct Entry {
    schema: Arc<InputSchema>,
    tool: Arc<str>,
    arguments: String,
    conversation: Option<String>,
    key: Option<String>,
    principal: Option<String>,
    canonical: String,
    fingerprint: Fingerprint,
    invocation: InvocationKey,
}

impl Entry {
    fn matches(&self, tool: &ToolSpec, request: &CallRequest) -> bool {
        Arc::ptr_eq(&self.schema, &tool.schema)
            && *self.tool == *tool.name
            && self.arguments == request.arguments
            && self.conversation == request.conversation
            && self.key == request.key
            && self.principal == request.principal
    }
}

/// The calls one guard saw replayed lately, by a hash of their inputs.
#[derive(Default)]
pub(crate) struct ReplayedKeys {
    entries: Mutex<HashMap<u64, Entry>>,
    hasher: std::hash::RandomState,
}

impl ReplayedKeys {
    fn hash(&self, tool: &str, request: &CallRequest) -> u64 {
        let mut h = self.hasher.build_hasher();
        tool.hash(&mut h);
        request.arguments.hash(&mut h);
        request.conversation.hash(&mut h);
        request.key.hash(&mut h);
        request.principal.hash(&mut h);
        h.finish()
    }

    /// What `prepare` made of this very call when it last replayed, if remembered.
    pub(crate) fn recall(&self, tool: &ToolSpec, request: &CallRequest) -> Option<Prepared> {
        let hash = self.hash(&tool.name, request);
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = entries.get(&hash).filter(|e| e.matches(tool, request))?;
        Some(Prepared {
            tool: tool.clone(),
            canonical: entry.canonical.clone(),
            fingerprint: entry.fingerprint.clone(),
            key: entry.invocation.clone(),
            principal: request.principal.clone(),
            probe_only: false,
        })
    }

    /// Remembers `prepared`, made of `request`, whose call replayed.
    pub(crate) fn remember(&self, request: &CallRequest, prepared: &Prepared) {
        if request.arguments.len() > MAX_ARGUMENTS_BYTES {
            return;
        }
        let hash = self.hash(&prepared.tool.name, request);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries
            .get(&hash)
            .is_some_and(|e| e.matches(&prepared.tool, request))
        {
            return;
        }
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&hash) {
            entries.clear();
        }
        entries.insert(
            hash,
            Entry {
                schema: Arc::clone(&prepared.tool.schema),
                tool: Arc::clone(&prepared.tool.name),
                arguments: request.arguments.clone(),
                conversation: request.conversation.clone(),
                key: request.key.clone(),
                principal: request.principal.clone(),
                canonical: prepared.canonical.clone(),
                fingerprint: prepared.fingerprint.clone(),
                invocation: prepared.key.clone(),
            },
        );
    }
}
