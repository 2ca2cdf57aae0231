//! Every upstream of a host, and the index that finds a tool's upstream by the name
//! it is offered under, rebuilt only when an upstream's tools changed. A lookup
//! reads the index and the upstream's state; it never asks an upstream anything, so
//! a sick upstream slows no call of another's tools.
//!
//! Which upstream a name is offered by is decided once (docs/gateway.md, "Names"):
//! - a name that starts with an upstream's `prefix` is that upstream's namespace: an
//!   upstream with a shorter prefix (or none) never offers it (`analytics`, without
//!   one, does not serve `pay_charge` beside `pay_`);
//! - a name two upstreams list is the first one's in `justonce.toml`; until that one
//!   first listed its tools (they start in parallel), the other's is offered;
//! - after its first listing, a name an upstream offers stays its own while it
//!   lists it, down or not: another upstream that lists it later (its
//!   `list_changed`, a restart) has its copy left out. Only an upstream's first
//!   listing, and only in the file's order, ever moves a name.
//!
//! Each copy left out is warned about once, naming both upstreams and the fix.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, RwLock};

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
    /// The positions of the upstreams that had listed their tools.
    listed: HashSet<usize>,
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
    /// The copies left out that were warned about: (name, the upstream left out).
    warned: Mutex<HashSet<(String, String)>>,
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
            warned: Mutex::default(),
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

    /// The upstream named `name` in `justonce.toml`.
    pub fn named(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams.iter().find(|u| u.name() == name)
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
            let mut current = self.index.write().unwrap_or_else(|p| p.into_inner());
            let index = Arc::new(self.build(&current));
            *current = Arc::clone(&index);
            return index;
        }
        Arc::clone(&self.index.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The upstream other than the one at `position` whose namespace `name` is in:
    /// the one with the longest `prefix` that `name` starts with, longer than the
    /// prefix of the one at `position`.
    fn namespace_of(&self, name: &str, position: usize) -> Option<&Arc<Upstream>> {
        let own = self.upstreams[position].config.prefix.len();
        self.upstreams
            .iter()
            .enumerate()
            .filter(|(other, u)| {
                *other != position
                    && u.config.prefix.len() > own
                    && name.starts_with(&u.config.prefix)
            })
            .max_by_key(|(_, u)| u.config.prefix.len())
            .map(|(_, u)| u)
    }

    /// Warns, once per name and upstream, that `loser`'s `tool` is left out and why.
    fn left_out(&self, tool: &UpstreamTool, loser: &Upstream, why: &str) {
        let first = self
            .warned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((tool.name.clone(), loser.name().to_owned()));
        if first {
            tracing::warn!(target: "justonce::upstream", upstream = %loser.name(), tool = %tool.name, "its tool `{}` is left out: {why}", tool.upstream_name);
        }
    }

    /// The index of the tools each upstream listed last, keeping every name
    /// `previous` gave an upstream that still lists it (module docs).
    fn build(&self, previous: &Index) -> Index {
        let listings: Vec<Option<Arc<Vec<UpstreamTool>>>> =
            self.upstreams.iter().map(|u| u.listed()).collect();
        let lists = |position: usize, name: &str| {
            listings[position]
                .as_ref()
                .is_some_and(|tools| tools.iter().any(|t| t.name == name))
        };
        // An upstream listing for the first time takes its names in file order.
        let first_listing =
            |position: usize| listings[position].is_some() && !previous.listed.contains(&position);
        let mut owner: HashMap<String, usize> = previous
            .by_name
            .iter()
            .filter(|(name, (position, _))| {
                lists(*position, name)
                    && !(0..*position).any(|earlier| first_listing(earlier) && lists(earlier, name))
            })
            .map(|(name, (position, _))| (name.clone(), *position))
            .collect();
        for (position, upstream) in self.upstreams.iter().enumerate() {
            for tool in listings[position].iter().flat_map(|tools| tools.iter()) {
                if let Some(holder) = self.namespace_of(&tool.name, position) {
                    let why = format!(
                        "`{}` is in the namespace of the upstream `{}` (its `prefix` is `{}`); give `{}` a `prefix`, or `exclude` it",
                        tool.name,
                        holder.name(),
                        holder.config.prefix,
                        upstream.name()
                    );
                    self.left_out(tool, upstream, &why);
                    continue;
                }
                match owner.get(&tool.name) {
                    Some(&holder) if holder != position => {
                        let holder = &self.upstreams[holder];
                        let why = format!(
                            "the upstream `{}` offers `{}` (written before it in justonce.toml, or offering it before it listed it); give one of them a `prefix`, or `exclude` it from one",
                            holder.name(),
                            tool.name
                        );
                        self.left_out(tool, upstream, &why);
                    }
                    Some(_) => {}
                    None => {
                        owner.insert(tool.name.clone(), position);
                    }
                }
            }
        }
        let mut index = Index {
            listed: (0..listings.len())
                .filter(|p| listings[*p].is_some())
                .collect(),
            ..Index::default()
        };
        for (position, tools) in listings.iter().enumerate() {
            for tool in tools.iter().flat_map(|tools| tools.iter()) {
                if owner.get(&tool.name) == Some(&position)
                    && !index.by_name.contains_key(&tool.name)
                {
                    index.order.push(tool.name.clone());
                    index
                        .by_name
                        .insert(tool.name.clone(), (position, tool.clone()));
                }
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
        // A name no listing has: one an upstream that never listed may offer (in its
        // namespace, not another's).
        for (position, upstream) in self.upstreams.iter().enumerate() {
            if upstream.listed().is_none()
                && name.starts_with(&upstream.config.prefix)
                && self.namespace_of(name, position).is_none()
            {
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

    /// The upstream `name` with `prefix`, its supervisor never started: ready with
    /// `tools` listed (by their names upstream), or starting when `tools` is `None`.
    fn fake(name: &str, prefix: &str, tools: Option<&[&str]>) -> Arc<Upstream> {
        let mut config = UpstreamConfig::command(vec!["x".into()]);
        config.prefix = prefix.into();
        let upstream = Arc::new(Upstream::new(name, config));
        upstream.supervised.call_once(|| {});
        upstream.shared.lock().settled = true;
        if let Some(tools) = tools {
            lists(&upstream, tools);
        }
        upstream
    }

    /// `upstream` lists `tools` now (as after its start or a `list_changed`) and is
    /// ready.
    fn lists(upstream: &Arc<Upstream>, tools: &[&str]) {
        let entries = tools
            .iter()
            .map(|name| serde_json::json!({ "name": name, "inputSchema": { "type": "object" } }))
            .collect();
        *upstream.tools.write().unwrap() = Some(Arc::new(upstream.offered(entries)));
        upstream.shared.lock().state = UpstreamState::Ready;
        upstream.tell_listeners();
    }

    /// Which upstream offers each name now.
    fn offered_by(upstreams: &Upstreams) -> Vec<(String, String)> {
        upstreams
            .tools()
            .into_iter()
            .map(|t| (t.name, t.upstream))
            .collect()
    }

    fn pairs(of: &[(&str, &str)]) -> Vec<(String, String)> {
        of.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn a_name_two_upstreams_list_is_the_first_ones_in_the_file_and_the_other_warned_once() {
        let upstreams = Upstreams::new(vec![
            fake("zeta", "", Some(&["search", "z"])),
            fake("alpha", "", Some(&["search", "a"])),
        ]);
        let (offered, lines) = crate::test_log::logged(|| offered_by(&upstreams));
        // The file's order, not the names'.
        assert_eq!(
            offered,
            pairs(&[("search", "zeta"), ("z", "zeta"), ("a", "alpha")])
        );
        let warned = crate::test_log::messages(&lines);
        assert_eq!(warned.len(), 1, "{lines:?}");
        assert!(
            warned[0].starts_with("its tool `search` is left out: the upstream `zeta` offers `search` (written before it")
                && warned[0].contains("give one of them a `prefix`"),
            "{}",
            warned[0]
        );
        assert_eq!(lines[0]["fields"]["upstream"], "alpha", "{lines:?}");
        // Its index built again (alpha listed again, as after a list_changed): the
        // same, and no second warning.
        let alpha = Arc::clone(upstreams.iter().nth(1).unwrap());
        let (offered, lines) = crate::test_log::logged(|| {
            lists(&alpha, &["search", "a"]);
            offered_by(&upstreams)
        });
        assert_eq!(
            offered,
            pairs(&[("search", "zeta"), ("z", "zeta"), ("a", "alpha")])
        );
        assert!(lines.is_empty(), "warned once: {lines:?}");
    }

    #[test]
    fn a_name_an_upstream_offers_is_not_taken_over_by_one_that_lists_it_later() {
        // `first` (first in the file) is still starting; `second` is ready.
        let first = fake("first", "", None);
        let second = fake("second", "", Some(&["charge"]));
        let upstreams = Upstreams::new(vec![Arc::clone(&first), Arc::clone(&second)]);
        assert_eq!(offered_by(&upstreams), pairs(&[("charge", "second")]));
        // `first` becomes ready without `charge`, then says list_changed listing it:
        // it stays `second`'s, and `first`'s other tools are offered.
        lists(&first, &["refund"]);
        assert_eq!(
            offered_by(&upstreams),
            pairs(&[("refund", "first"), ("charge", "second")])
        );
        lists(&first, &["charge", "refund"]);
        assert_eq!(
            offered_by(&upstreams),
            pairs(&[("refund", "first"), ("charge", "second")])
        );
        assert!(matches!(upstreams.find("charge"), Lookup::Ready(u, _) if u.name() == "second"));
        // While `second` is down it keeps the name: a call is refused naming it, not
        // sent to `first`.
        second.shared.lock().state = UpstreamState::Starting {
            restart: 1,
            last_error: None,
        };
        second.tell_listeners();
        assert!(matches!(upstreams.find("charge"), Lookup::Down(u, _) if u.name() == "second"));
        // Once `second` no longer lists it, `first` has it.
        lists(&second, &["other"]);
        assert!(matches!(upstreams.find("charge"), Lookup::Ready(u, _) if u.name() == "first"));
    }

    #[test]
    fn an_earlier_upstreams_first_listing_takes_its_names_in_file_order() {
        // They start in parallel: `second` lists first and offers `charge` meanwhile.
        let first = fake("first", "", None);
        let second = fake("second", "", Some(&["charge"]));
        let upstreams = Upstreams::new(vec![Arc::clone(&first), Arc::clone(&second)]);
        assert_eq!(offered_by(&upstreams), pairs(&[("charge", "second")]));
        // `first`'s first listing: the file's order decides, once.
        let ((), lines) = crate::test_log::logged(|| lists(&first, &["charge"]));
        assert!(lines.is_empty(), "{lines:?}");
        let (offered, lines) = crate::test_log::logged(|| offered_by(&upstreams));
        assert_eq!(offered, pairs(&[("charge", "first")]));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["fields"]["upstream"], "second");
        // And from then on it is `first`'s: `second` listing again takes nothing.
        lists(&second, &["charge"]);
        assert_eq!(offered_by(&upstreams), pairs(&[("charge", "first")]));
    }

    #[test]
    fn an_upstream_without_a_prefix_never_serves_a_name_in_a_prefixed_ones_namespace() {
        // `analytics` has no prefix and is first in the file; `pay` has not listed.
        let analytics = fake("analytics", "", Some(&["pay_charge", "report"]));
        let pay = fake("pay", "pay_", None);
        let upstreams = Upstreams::new(vec![analytics, Arc::clone(&pay)]);
        let (offered, lines) = crate::test_log::logged(|| offered_by(&upstreams));
        assert_eq!(offered, pairs(&[("report", "analytics")]));
        let warned = crate::test_log::messages(&lines);
        assert!(
            warned.len() == 1
                && warned[0].contains("`pay_charge` is in the namespace of the upstream `pay` (its `prefix` is `pay_`)"),
            "{warned:?}"
        );
        // Refused naming `pay`, which may offer it, never sent to `analytics`.
        assert!(matches!(upstreams.find("pay_charge"), Lookup::Down(u, _) if u.name() == "pay"));
        lists(&pay, &["charge"]);
        assert!(
            matches!(upstreams.find("pay_charge"), Lookup::Ready(u, t) if u.name() == "pay" && t.upstream_name == "charge")
        );
        // A longer prefix is a namespace of its own within a shorter one.
        let eu = fake("pay_eu", "pay_eu_", Some(&["charge"]));
        let pay = fake("pay", "pay_", Some(&["eu_charge", "refund"]));
        let upstreams = Upstreams::new(vec![pay, eu]);
        assert_eq!(
            offered_by(&upstreams),
            pairs(&[("pay_refund", "pay"), ("pay_eu_charge", "pay_eu")])
        );
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
