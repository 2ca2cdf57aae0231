//! A call outside the guard: the runtime's own cost, which the guarded call is
//! measured against.

use std::sync::Arc;

use super::Runtime;
use crate::error::Error;

impl Runtime {
    /// Calls `tool` with `args` (JSON text, passed to the guest as is) in a fresh
    /// sandboxed store, under the runtime's default limits, with no guard and no journal: nothing is keyed or saved, and
    /// every effect the tool asks for is refused with a `denied` error. This is the
    /// floor of the runtime (store, instantiation, call) that the guarded
    /// [`Host::call`](crate::Host::call) is benchmarked against; it is not a way to
    /// run tools for an agent.
    ///
    /// Returns the JSON text the tool returned. A tool error or a trap is an
    /// [`Error::Host`] that names it; an unknown tool is [`Error::UnknownTool`].
    pub fn call_unguarded(&self, tool: &str, args: &str) -> Result<String, Error> {
        let loaded = self.tool(tool).ok_or_else(|| Error::UnknownTool {
            name: tool.to_string(),
            available: self.names(),
        })?;
        let _slot = self
            .permits
            .acquire_within(self.limits.deadline)
            .ok_or_else(|| {
                Error::Host(anyhow::anyhow!(
                    "every call slot stayed taken for {} ms",
                    self.limits.deadline.as_millis()
                ))
            })?;
        let mut store = self.store(Arc::from(loaded.name.as_str()), None, &self.limits);
        let result = loaded
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| bindings.call_call(&mut store, args));
        store.data().flush_output();
        match result {
            Ok(Ok(text)) => Ok(text),
            Ok(Err(e)) => Err(Error::Host(anyhow::anyhow!(
                "`{tool}` returned a tool error outside the guard: {}: {}",
                e.code,
                e.message
            ))),
            Err(trap) => Err(Error::Host(anyhow::anyhow!(
                "`{tool}` trapped outside the guard: {trap:#}"
            ))),
        }
    }
}
