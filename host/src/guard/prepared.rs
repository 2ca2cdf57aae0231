//! A call whose arguments were checked and whose key is known: what `prepare` makes
//! of a request and `replayed_keys` remembers. Its own module, below both, so
//! neither imports the other's (no circle).

use super::runner::ToolSpec;
use crate::keys::{Fingerprint, InvocationKey};

/// A call whose arguments were checked and whose key is known.
pub(crate) struct Prepared {
    /// The tool it calls.
    pub tool: ToolSpec,
    /// The arguments as the guest gets them: canonical JSON text.
    pub canonical: String,
    /// The fingerprint of the tool and its arguments.
    pub fingerprint: Fingerprint,
    /// The invocation key.
    pub key: InvocationKey,
    /// A sweep's run (`Guard::probe_call`): it goes as far as the first pending
    /// unkeyed effect, asks its probe, journals what the probe decides, and stops;
    /// it performs nothing new.
    pub probe_only: bool,
    /// The authenticated principal the call came from, if any: effects that keep
    /// state (`kv`) keep each principal's apart.
    pub principal: Option<String>,
}
