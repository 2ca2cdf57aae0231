//! Owned copies of what a call-path write borrows: a grouped write may be made on
//! another caller's thread (the group's leader, see `group`), so it must not borrow
//! from its own caller's stack.

use crate::journal::{Lease, NewEffect};
use crate::keys::{EffectKey, Fingerprint, InvocationKey};

/// A [`NewEffect`] that owns its parts.
pub(super) struct OwnedEffect {
    key: EffectKey,
    invocation: InvocationKey,
    seq: u32,
    provider: String,
    class: String,
    operation: String,
    fingerprint: Fingerprint,
    ends_by: Option<String>,
    now: i64,
}

impl OwnedEffect {
    pub(super) fn new(e: &NewEffect<'_>) -> Self {
        Self {
            key: e.key.clone(),
            invocation: e.invocation.clone(),
            seq: e.seq,
            provider: e.provider.to_owned(),
            class: e.class.to_owned(),
            operation: e.operation.to_owned(),
            fingerprint: e.fingerprint.clone(),
            ends_by: e.ends_by.map(str::to_owned),
            now: e.now,
        }
    }

    pub(super) fn view(&self) -> NewEffect<'_> {
        NewEffect {
            key: &self.key,
            invocation: &self.invocation,
            seq: self.seq,
            provider: &self.provider,
            class: &self.class,
            operation: &self.operation,
            fingerprint: &self.fingerprint,
            ends_by: self.ends_by.as_deref(),
            now: self.now,
        }
    }
}

/// A [`Lease`] that owns its owner's name.
pub(super) struct OwnedLease {
    owner: String,
    until: i64,
    ms: i64,
}

impl OwnedLease {
    pub(super) fn new(l: &Lease<'_>) -> Self {
        Self {
            owner: l.owner.to_owned(),
            until: l.until,
            ms: l.ms,
        }
    }

    pub(super) fn view(&self) -> Lease<'_> {
        Lease {
            owner: &self.owner,
            until: self.until,
            ms: self.ms,
        }
    }
}
