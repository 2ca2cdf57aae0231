//! Every upstream of a host, and the index that finds a tool's upstream by the name
//! it is offered under: built from the tools each upstream listed last, the first
//! upstream in the order of `justonce.toml` winning a name two offer, and rebuilt
//! only when an upstream's tools changed. A lookup reads the index and the
//! upstream's state; it never asks an upstream anything, so a sick upstream slows
//! no call of another's tools.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once, RwLock};

use super::{Upstream, UpstreamState, UpstreamTool};

/// What a tool name is, for the upstreams.
#[derive(Debug)]
pub enum Lookup {
    /// A tool of a ready upstream.
    Ready(Arc<Upstream>, UpstreamTool),
    /// A tool of an upstream that is not ready (starting, or failing), or a name
    /// such an upstream that never listed its tools may offer (its `prefix` fits):
    /// its call is refused at once, nothing sent.
    Down(Arc<Upstream>, UpstreamState),
    /// No upstream offers it, nor may.
    Unknown,
}

/// Name → (the upstream's position, the tool), and the names in the order they
/// are offered.
#[derive(Debug, Default)]
struct Index {
    by_name: HashMap<String, (usize, UpstreamTool)>,
    order: Vec<String>,
}

/// Every upstream of a host, found by the names their tools are offered under.
#[derive(Debug)]
pub struct Upstreams {
    upstreams: Vec<Arc<Upstream>>,
    /// Their supervisors, started once.
    started: Once,
    index: RwLock<Arc<Index>>,
    /// Set when an upstream's tools changed: the index is built again.
    stale: Arc<AtomicBool>,
}

impl Default for Upstreams {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl Upstreams {
    /// These upstreams, in the order of `justonce.toml`; not started.
    pub fn new(upstreams: Vec<Arc<Upstream>>) -> Self {
        let stale = Arc::new(AtomicBool::new(true));
        for upstream in &upstreams {
            let stale = Arc::clone(&stale);
            // Before any other listener: theirs read the index.
            upstream.on_tools_changed(Arc::new(move || stale.store(true, Ordering::SeqCst)));
        }
        Self {
            upstreams,
            started: Once::new(),
            index: RwLock::default(),
            stale,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.upstreams.is_empty()
    }

    /// Each upstream.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Upstream>> {
        self.upstreams.iter()
    }

    /// Starts every upstream's supervisor, in parallel, and returns at once (as
    /// `serve` does): until one is ready, its tools are not offered.
    pub fn start(&self) {
        self.started
            .call_once(|| self.upstreams.iter().for_each(Upstream::supervise));
    }

    /// Before a lookup: if no one started them, they are started (in parallel) and
    /// each one's first start is waited for, as a command that runs one call
    /// expects; after [`Upstreams::start`], nothing is waited for.
    fn started(&self) {
        self.started.call_once(|| {
            self.upstreams.iter().for_each(Upstream::supervise);
            self.upstreams.iter().for_each(|u| u.wait_settled());
        });
    }

    /// The index, built again if an upstream's tools changed.
    fn index(&self) -> Arc<Index> {
        self.started();
        if self.stale.swap(false, Ordering::SeqCst) {
            let index = Arc::new(self.build());
            *self.index.write().unwrap_or_else(|p| p.into_inner()) = Arc::clone(&index);
            return index;
        }
        Arc::clone(&self.index.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The index of the tools each upstream listed last.
    fn build(&self) -> Index {
        let mut index = Index::default();
        for (position, upstream) in self.upstreams.iter().enumerate() {
            let Some(tools) = upstream.listed() else {
                continue;
            };
            for tool in tools.iter() {
                // The same name from two upstreams: the first one's in the file, once.
                if let Some((_, first)) = index.by_name.get(&tool.name) {
                    tracing::warn!(target: "justonce::upstream", tool = %tool.name, "offered by the upstreams `{}` (as {}) and `{}` (as {}): only the first one's is offered; give one a `prefix`", first.upstream, first.upstream_name, tool.upstream, tool.upstream_name);
                    continue;
                }
                index.order.push(tool.name.clone());
                index
                    .by_name
                    .insert(tool.name.clone(), (position, tool.clone()));
            }
        }
        index
    }

    /// Every tool they offer now, in order of upstream: those of ready upstreams.
    /// Never waits on one (once they are started).
    pub fn tools(&self) -> Vec<UpstreamTool> {
        let index = self.index();
        index
            .order
            .iter()
            .filter_map(|name| index.by_name.get(name))
            .filter(|(position, _)| self.upstreams[*position].state().is_ready())
            .map(|(_, tool)| tool.clone())
            .collect()
    }

    /// What `name` is: a ready upstream's tool, one of an upstream that is down, or
    /// unknown. Reads the index and the states only.
    pub fn find(&self, name: &str) -> Lookup {
        let index = self.index();
        if let Some((position, tool)) = index.by_name.get(name) {
            let upstream = &self.upstreams[*position];
            return match upstream.state() {
                UpstreamState::Ready => Lookup::Ready(Arc::clone(upstream), tool.clone()),
                state => Lookup::Down(Arc::clone(upstream), state),
            };
        }
        // A name no listing has: one an upstream that never listed may offer.
        for upstream in &self.upstreams {
            if upstream.listed().is_none() && name.starts_with(&upstream.config.prefix) {
                let state = upstream.state();
                if !state.is_ready() {
                    return Lookup::Down(Arc::clone(upstream), state);
                }
            }
        }
        Lookup::Unknown
    }

    /// The tool offered as `name`, and its upstream, whatever the upstream's state.
    pub fn known(&self, name: &str) -> Option<(Arc<Upstream>, UpstreamTool)> {
        let index = self.index();
        let (position, tool) = index.by_name.get(name)?;
        Some((Arc::clone(&self.upstreams[*position]), tool.clone()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::upstream::UpstreamConfig;

    /// A stdio upstream that answers `initialize` and lists `pay`, then reads on.
    fn healthy() -> Arc<Upstream> {
        let script = r#"read -r l; echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"t","version":"0"}}}'; read -r l; read -r l; echo '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"pay","inputSchema":{"type":"object"}}]}}'; while read -r l; do :; done"#;
        let config = UpstreamConfig::command(vec!["sh".into(), "-c".into(), script.into()]);
        Arc::new(Upstream::new("healthy", config))
    }

    /// An upstream over HTTP that accepts the connection and never answers; told on
    /// `accepted` once it holds one (the upstream is then waiting on it).
    fn hung() -> (Arc<Upstream>, std::sync::mpsc::Receiver<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut config =
            UpstreamConfig::url(format!("http://{}/mcp", listener.local_addr().unwrap()));
        config.prefix = "hung_".into();
        config.timeout = Duration::from_secs(600);
        let (accepted, told) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                held.push(stream);
                let _ = accepted.send(());
            }
        });
        (Arc::new(Upstream::new("hung", config)), told)
    }

    #[test]
    fn a_hung_upstream_first_in_the_file_holds_up_no_lookup_of_another() {
        let (hung, accepted) = hung();
        let healthy = healthy();
        let upstreams = Upstreams::new(vec![Arc::clone(&hung), Arc::clone(&healthy)]);
        upstreams.start();
        accepted.recv().unwrap();
        let bound = Instant::now() + Duration::from_secs(60); // a hang's bound
        assert!(healthy.wait_ready(bound), "{:?}", healthy.state());

        // Looked up while `hung` waits on its `initialize`.
        let offered: Vec<String> = upstreams.tools().into_iter().map(|t| t.name).collect();
        assert_eq!(offered, ["pay"]);
        assert!(matches!(upstreams.find("pay"), Lookup::Ready(u, _) if u.name() == "healthy"));
        match upstreams.find("hung_refund") {
            Lookup::Down(upstream, state) => {
                assert_eq!(upstream.name(), "hung");
                assert_eq!(state.name(), "starting");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(upstreams.find("refund"), Lookup::Unknown));
        assert_eq!(hung.state().name(), "starting", "still hung");
    }
}
