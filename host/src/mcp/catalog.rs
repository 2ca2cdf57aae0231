//! The tools a server offers (`tools/list`), kept current while it serves: after a
//! reload swapped in, added or retired tools ([`HostBuilder::reload`]), or changed
//! which ones MCP offers, [`Catalog::refresh`] reads them again and, when the list
//! changed, tells every listener, which send their clients
//! `notifications/tools/list_changed` (stdio: on the output; HTTP: on each open
//! `GET` stream of a session).
//!
//! [`HostBuilder::reload`]: crate::HostBuilder::reload

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::model::{
    ConstString, NotificationNoParam, Tool, ToolListChangedNotification,
    ToolListChangedNotificationMethod,
};
use serde_json::Value;

use super::{protocol, tools};
use crate::host::Host;

/// The notification a client gets when the tools changed.
pub const LIST_CHANGED: &str = ToolListChangedNotificationMethod::VALUE;

/// Something to do when the list changed.
type Listener = Box<dyn Fn() + Send + Sync>;

/// The entries, the builds behind them (a new build of a tool changes the list
/// even when its entry reads the same), and where each upstream stands (a change
/// of it is told too: an upstream that became ready may offer nothing new).
type Listing = RwLock<(Arc<Vec<Tool>>, Vec<String>, Arc<Value>)>;

/// The `_meta` key of a `tools/list` result under which each upstream MCP server's
/// state is (`{"NAME": {"state": "ready"}}`; see docs/gateway.md).
pub const UPSTREAMS_META_KEY: &str = "dev.justonce/upstreams";

/// The `tools/list` entries a server offers now, and who is told when they change.
pub struct Catalog {
    host: Arc<Host>,
    listing: Arc<Listing>,
    listeners: Arc<Mutex<BTreeMap<u64, Listener>>>,
    next: AtomicU64,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("tools", &self.listing().len())
            .finish()
    }
}

impl Catalog {
    /// The tools `host` offers over MCP now.
    /// An upstream MCP server's `notifications/tools/list_changed` refreshes it.
    pub(crate) fn new(host: Arc<Host>) -> Self {
        let listing = Arc::new(RwLock::new((
            Arc::new(listed(&host)),
            builds(&host),
            Arc::new(super::upstream_tools::states(&host)),
        )));
        let listeners: Arc<Mutex<BTreeMap<u64, Listener>>> = Arc::default();
        let (weak_host, weak_listing, weak_listeners) = (
            Arc::downgrade(&host),
            Arc::downgrade(&listing),
            Arc::downgrade(&listeners),
        );
        host.on_upstream_tools_changed(Arc::new(move || {
            if let (Some(host), Some(listing), Some(listeners)) = (
                weak_host.upgrade(),
                weak_listing.upgrade(),
                weak_listeners.upgrade(),
            ) {
                refresh(&host, &listing, &listeners);
            }
        }));
        Self {
            host,
            listing,
            listeners,
            next: AtomicU64::new(0),
        }
    }

    /// The `tools/list` entries.
    pub(crate) fn listing(&self) -> Arc<Vec<Tool>> {
        Arc::clone(&self.listing.read().unwrap_or_else(|e| e.into_inner()).0)
    }

    /// Where each upstream MCP server stands, as `tools/list` tells it
    /// (`_meta["dev.justonce/upstreams"]`); `null` without upstreams.
    pub(crate) fn upstreams(&self) -> Arc<Value> {
        Arc::clone(&self.listing.read().unwrap_or_else(|e| e.into_inner()).2)
    }

    /// Reads the host's tools again; when the list changed (or a tool's build),
    /// stores it (so a `tools/list` sent after the notification gets it) and tells
    /// every listener. Whether it changed.
    pub fn refresh(&self) -> bool {
        refresh(&self.host, &self.listing, &self.listeners)
    }

    /// Calls `listener` after every change of the list, until [`Catalog::unlisten`].
    pub(crate) fn listen(&self, listener: Listener) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, listener);
        id
    }

    /// Drops the listener [`Catalog::listen`] returned `id` for.
    pub(crate) fn unlisten(&self, id: u64) {
        self.listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }
}

/// [`Catalog::refresh`] of these parts of a catalog.
fn refresh(host: &Host, listing: &Listing, listeners: &Mutex<BTreeMap<u64, Listener>>) -> bool {
    let now = listed(host);
    let built = builds(host);
    let upstreams = super::upstream_tools::states(host);
    {
        let mut listing = listing.write().unwrap_or_else(|e| e.into_inner());
        if *listing.0 == now && listing.1 == built && *listing.2 == upstreams {
            return false;
        }
        *listing = (Arc::new(now), built, Arc::new(upstreams));
    }
    let listeners = listeners.lock().unwrap_or_else(|e| e.into_inner());
    tracing::info!(
        listeners = listeners.len(),
        "the tools changed; telling the clients"
    );
    for listener in listeners.values() {
        listener();
    }
    true
}

/// The `tools/list` entries: the components' tools, then the upstream servers'.
fn listed(host: &Host) -> Vec<Tool> {
    let mut listed = tools::descriptors(host);
    listed.extend(super::upstream_tools::descriptors(host));
    listed
}

/// The digests of the tools `host` offers over MCP, by name.
fn builds(host: &Host) -> Vec<String> {
    host.runtime()
        .current_tools()
        .iter()
        .filter(|tool| host.exposed_over_mcp(&tool.name))
        .map(|tool| tool.digest.clone())
        .collect()
}

/// The `notifications/tools/list_changed` message.
pub(crate) fn list_changed() -> Value {
    let changed: ToolListChangedNotification = NotificationNoParam {
        method: ToolListChangedNotificationMethod,
        extensions: Default::default(),
    };
    protocol::notification(changed)
}
