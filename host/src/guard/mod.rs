//! The guard: the invocation guard decides whether a call runs, replays, waits or is
//! refused; the effect guard journals every effect before its provider runs.

mod effect;
mod invocation;

pub(crate) use effect::{EffectFailure, EffectSession, Interruption, RunStart, stored_ok};
pub(crate) use invocation::InvocationGuard;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::clock::Clock;
use crate::provider::Provider;
use crate::retry::RetryPolicy;
use crate::store::Store;

/// What both guards share: the journal, the providers, the clock and the policies.
pub(crate) struct Shared {
    pub store: Store,
    pub providers: BTreeMap<String, Arc<dyn Provider>>,
    pub clock: Arc<dyn Clock>,
    pub retry: RetryPolicy,
}
