//! The rest of the upstream MCP servers' surface, passed through: resources,
//! resource templates, prompts and completion (docs/gateway.md, "Resources,
//! prompts and completion"). They are reads: answered from each upstream's lists
//! (kept by its supervisor) or sent to the one upstream they name, never journaled,
//! saved or replayed. A resource's URI is its upstream's under
//! `justonce://NAME/` ([`crate::upstream::surface::wrap_uri`]); a prompt's name
//! takes its upstream's `prefix`, as a tool's does.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{ErrorCode, ServerCapabilities};
use serde_json::{Value, json};

use super::protocol::{ErrorData, Params, SERVER_BUSY, to_json};
use crate::host::Host;
use crate::upstream::surface::{unwrap_uri, wrap_uris_in};
use crate::upstream::{ClientError, Lists, SurfaceListener, SurfaceNews, Upstream};

/// The methods passed through to upstreams.
pub(crate) const METHODS: [&str; 8] = [
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

/// Whether `method` is one of [`METHODS`].
pub(crate) fn is_surface(method: &str) -> bool {
    METHODS.contains(&method)
}

/// Whether `method` is there on the stateless wire (2026-07-28 removed
/// subscriptions: a client listens instead).
pub(crate) fn stateless_method(method: &str) -> bool {
    is_surface(method) && !method.ends_with("subscribe")
}

/// MCP's "resource not found".
pub(crate) const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);

/// Declares in `capabilities` what the upstreams offer: `resources` (with
/// `subscribe`: `resources/subscribe` on a session's wire, a listen stream's
/// `resourceSubscriptions` on the stateless one), `prompts` and `completions`, each
/// when some upstream declared it, or may (one that has not answered `initialize`
/// yet).
pub(crate) fn declare(host: &Host, capabilities: ServerCapabilities) -> ServerCapabilities {
    let (mut resources, mut subscribe, mut prompts, mut completions) = (false, false, false, false);
    for upstream in host.upstream_servers().iter() {
        match upstream.surface() {
            Some(surface) => {
                resources |= surface.offers("resources");
                subscribe |= surface.subscribes();
                prompts |= surface.offers("prompts");
                completions |= surface.offers("completions");
            }
            None => (resources, subscribe, prompts, completions) = (true, true, true, true),
        }
    }
    let mut declared = to_json(&capabilities);
    if resources {
        let mut capability = json!({ "listChanged": true });
        if subscribe {
            capability["subscribe"] = json!(true);
        }
        declared["resources"] = capability;
    }
    if prompts {
        declared["prompts"] = json!({ "listChanged": true });
    }
    if completions {
        declared["completions"] = json!({});
    }
    serde_json::from_value(declared).unwrap_or(capabilities)
}

/// The answer to a request of one of [`METHODS`] (blocking: a read waits for its
/// upstream, up to its `timeout_ms`), for the client session whose subscriptions
/// are `subscribed` (none: it cannot subscribe). A subscription the session holds
/// already, or an unsubscription of one it does not hold, is answered without
/// asking the upstream: the upstream hears one subscription per session.
pub(crate) fn answer(
    host: &Host,
    method: &str,
    params: &Params,
    subscribed: Option<&Subscribed>,
) -> Result<Value, ErrorData> {
    if method.ends_with("subscribe") {
        let Some(subscribed) = subscribed else {
            return Err(ErrorData::invalid_request(
                format!("{method} needs a session (initialize first)"),
                None,
            ));
        };
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if subscribed.holds(uri) == (method == "resources/subscribe") {
            return Ok(json!({}));
        }
        let answer = pass(host, method, params);
        if answer.is_ok() {
            subscribed.note(method, params);
        }
        return answer;
    }
    pass(host, method, params)
}

/// [`answer`], the subscriptions kept.
fn pass(host: &Host, method: &str, params: &Params) -> Result<Value, ErrorData> {
    let mut forwarded = params.clone();
    forwarded.remove("_meta");
    match method {
        "resources/list" => listed(host, "resources", |s| &s.resources),
        "resources/templates/list" => listed(host, "resourceTemplates", |s| &s.templates),
        "prompts/list" => prompts(host, params),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            let (upstream, uri) = by_uri(host, method, params.get("uri"))?;
            forwarded.insert("uri".into(), Value::String(uri.clone()));
            let answer = match method {
                "resources/subscribe" => upstream.subscribe(&uri),
                "resources/unsubscribe" => upstream.unsubscribe(&uri),
                _ => upstream.read(method, Value::Object(forwarded)),
            };
            wrapped(&upstream, method, answer)
        }
        "prompts/get" => {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (upstream, own) = by_prompt(host, name)?;
            forwarded.insert("name".into(), Value::String(own));
            wrapped(
                &upstream,
                method,
                upstream.read(method, Value::Object(forwarded)),
            )
        }
        "completion/complete" => {
            let reference = params.get("ref").cloned().unwrap_or(Value::Null);
            let (upstream, own) = match reference.get("type").and_then(Value::as_str) {
                Some("ref/prompt") => {
                    let name = reference
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let (upstream, own) = by_prompt(host, name)?;
                    (upstream, json!({ "type": "ref/prompt", "name": own }))
                }
                Some("ref/resource") => {
                    let (upstream, uri) = by_uri(host, method, reference.get("uri"))?;
                    (upstream, json!({ "type": "ref/resource", "uri": uri }))
                }
                _ => {
                    return Err(ErrorData::invalid_params(
                        "completion/complete: `ref` must be {\"type\": \"ref/prompt\", \"name\": …} or {\"type\": \"ref/resource\", \"uri\": …}",
                        None,
                    ));
                }
            };
            forwarded.insert("ref".into(), own);
            wrapped(
                &upstream,
                method,
                upstream.read(method, Value::Object(forwarded)),
            )
        }
        other => Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: {other}"),
            None,
        )),
    }
}

/// Every ready upstream's entries of one list (`field` of the result), their URIs
/// the host's, in the order of `justonce.toml`, in one page.
fn listed(
    host: &Host,
    field: &str,
    entries: impl Fn(&crate::upstream::Surface) -> &Vec<Value>,
) -> Result<Value, ErrorData> {
    let mut all = Vec::new();
    for upstream in ready(host) {
        if let Some(surface) = upstream.surface() {
            for entry in entries(&surface) {
                let mut entry = entry.clone();
                wrap_uris_in(upstream.name(), &mut entry);
                all.push(entry);
            }
        }
    }
    Ok(json!({ field: all }))
}

/// Every ready upstream's prompts, under their names here (the `prefix` and theirs);
/// a name two upstreams offer is the first one's in `justonce.toml`.
fn prompts(host: &Host, _params: &Params) -> Result<Value, ErrorData> {
    let mut seen = HashSet::new();
    let mut all = Vec::new();
    for upstream in ready(host) {
        let Some(surface) = upstream.surface() else {
            continue;
        };
        for entry in &surface.prompts {
            let Some(own) = entry.get("name").and_then(Value::as_str) else {
                continue;
            };
            let name = format!("{}{own}", upstream.prefix());
            if !seen.insert(name.clone()) {
                continue;
            }
            let mut entry = entry.clone();
            entry["name"] = Value::String(name);
            wrap_uris_in(upstream.name(), &mut entry);
            all.push(entry);
        }
    }
    Ok(json!({ "prompts": all }))
}

fn ready(host: &Host) -> impl Iterator<Item = &Arc<Upstream>> {
    host.upstream_servers()
        .iter()
        .filter(|u| u.state().is_ready())
}

/// The upstream a URI of the host's names, and its own URI; an error naming what is
/// wrong with it.
fn by_uri(
    host: &Host,
    method: &str,
    uri: Option<&Value>,
) -> Result<(Arc<Upstream>, String), ErrorData> {
    let Some(uri) = uri.and_then(Value::as_str) else {
        return Err(ErrorData::invalid_params(
            format!("{method}: `uri` must be a string"),
            None,
        ));
    };
    let Some((name, own)) = unwrap_uri(uri) else {
        return Err(ErrorData::new(
            RESOURCE_NOT_FOUND,
            format!(
                "{method}: no resource {uri:?}: the resources here are upstream servers', under justonce://UPSTREAM/ (resources/list names them)"
            ),
            Some(json!({ "uri": uri })),
        ));
    };
    match host.upstream_servers().iter().find(|u| u.name() == name) {
        Some(upstream) => Ok((Arc::clone(upstream), own.to_owned())),
        None => Err(ErrorData::new(
            RESOURCE_NOT_FOUND,
            format!("{method}: no upstream named `{name}` (in {uri:?})"),
            Some(json!({ "uri": uri })),
        )),
    }
}

/// The upstream that offers the prompt `name` here, and its own name for it: the
/// first in `justonce.toml` whose `prefix` and prompt make `name`, whatever its
/// state (one that is down refuses the request naming itself).
fn by_prompt(host: &Host, name: &str) -> Result<(Arc<Upstream>, String), ErrorData> {
    for upstream in host.upstream_servers().iter() {
        let Some(own) = name.strip_prefix(upstream.prefix()) else {
            continue;
        };
        let offered = upstream.surface().is_some_and(|surface| {
            surface
                .prompts
                .iter()
                .any(|p| p.get("name").and_then(Value::as_str) == Some(own))
        });
        if offered {
            return Ok((Arc::clone(upstream), own.to_owned()));
        }
    }
    Err(ErrorData::invalid_params(
        format!("unknown prompt {name:?} (prompts/list names those the upstreams offer)"),
        Some(json!({ "name": name })),
    ))
}

/// An upstream's answer to `method`, its URIs the host's; its refusal as an MCP
/// error naming it.
fn wrapped(
    upstream: &Upstream,
    method: &str,
    answer: Result<Value, ClientError>,
) -> Result<Value, ErrorData> {
    let name = upstream.name();
    match answer {
        Ok(mut result) => {
            wrap_uris_in(name, &mut result);
            Ok(result)
        }
        Err(ClientError::Refused(error)) => {
            let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            let mut data = error.get("data").cloned();
            if let Some(data) = &mut data {
                wrap_uris_in(name, data);
            }
            Err(ErrorData::new(
                ErrorCode(i32::try_from(code).unwrap_or(-32603)),
                format!("upstream `{name}` refused {method}: {message}"),
                data,
            ))
        }
        Err(ClientError::Down(why)) => Err(ErrorData::new(
            SERVER_BUSY,
            format!("{method}: {why}"),
            Some(json!({ "kind": "upstream_unavailable", "upstream": name, "retry_safe": true })),
        )),
        Err(why) => Err(ErrorData::new(
            ErrorCode::INTERNAL_ERROR,
            format!("{method}: {why}"),
            Some(json!({ "kind": "upstream_failed", "upstream": name })),
        )),
    }
}

/// The notification a client is sent for `news`; `None` for an updated resource,
/// which goes only to its subscribers ([`updated`]).
pub(crate) fn list_changed(news: &SurfaceNews) -> Option<Value> {
    let method = match news {
        SurfaceNews::Changed(Lists::Resources) => "notifications/resources/list_changed",
        SurfaceNews::Changed(Lists::Prompts) => "notifications/prompts/list_changed",
        SurfaceNews::Updated(_) => return None,
    };
    Some(json!({ "jsonrpc": "2.0", "method": method }))
}

/// `notifications/resources/updated` of the host's `uri`.
pub(crate) fn updated(uri: &str) -> Value {
    json!({ "jsonrpc": "2.0", "method": "notifications/resources/updated", "params": { "uri": uri } })
}

/// Who hears what the upstreams say about their resources and prompts: each
/// connection (stdio) or endpoint (HTTP) listens while it serves.
#[derive(Default)]
pub(crate) struct Relay {
    listeners: Mutex<BTreeMap<u64, SurfaceListener>>,
    next: AtomicU64,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish()
    }
}

impl Relay {
    /// A relay of every upstream of `host`.
    pub(crate) fn of(host: &Host) -> Arc<Self> {
        let relay = Arc::new(Self::default());
        let weak = Arc::downgrade(&relay);
        for upstream in host.upstream_servers().iter() {
            let weak = weak.clone();
            upstream.on_surface(Arc::new(move |news| {
                if let Some(relay) = weak.upgrade() {
                    relay.tell(news);
                }
            }));
        }
        relay
    }

    /// Tells every listener `news`.
    pub(crate) fn tell(&self, news: &SurfaceNews) {
        let listeners: Vec<_> = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        listeners.iter().for_each(|listener| listener(news));
    }

    /// Calls `listener` with each piece of news until [`Relay::unlisten`].
    pub(crate) fn listen(&self, listener: SurfaceListener) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, listener);
        id
    }

    /// Drops the listener `id`.
    pub(crate) fn unlisten(&self, id: u64) {
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
}

/// The resources (the host's URIs) one client session, or one `subscriptions/listen`
/// stream, subscribed to: their updates go to it; what it still holds when it ends
/// (closed, deleted, expired) is unsubscribed.
#[derive(Debug, Default)]
pub(crate) struct Subscribed(Mutex<HashSet<String>>);

impl Subscribed {
    /// Keeps what a `resources/subscribe` or `unsubscribe` of `params` that was
    /// answered `Ok` changed.
    pub(crate) fn note(&self, method: &str, params: &Params) {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return;
        };
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match method {
            "resources/subscribe" => {
                held.insert(uri.to_owned());
            }
            "resources/unsubscribe" => {
                held.remove(uri);
            }
            _ => {}
        }
    }

    /// Whether the session holds a subscription to `uri`.
    pub(crate) fn holds(&self, uri: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(uri)
    }

    /// The session ended: each subscription it holds ends.
    pub(crate) fn end(&self, host: &Host) {
        let held: Vec<String> = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for uri in held {
            if let Some((name, own)) = unwrap_uri(&uri)
                && let Some(upstream) = host.upstream_servers().iter().find(|u| u.name() == name)
                && let Err(e) = upstream.unsubscribe(own)
            {
                tracing::debug!(upstream = %name, "unsubscribing at the end of a session: {e}");
            }
        }
    }
}
