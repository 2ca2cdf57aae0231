//! What an upstream offers besides its tools: resources, resource templates, prompts
//! and completion, passed through the gateway as reads (never journaled, saved or
//! replayed). Each upstream's lists are read when it starts and again when it says
//! they changed, so a `resources/list` or `prompts/list` of the host asks no server
//! anything; a read, a prompt or a completion goes to its one upstream, on that
//! upstream's connection, refused at once while it is down.
//!
//! A resource's URI is offered under its upstream's name ([`wrap_uri`]): every URI,
//! whatever its scheme, round-trips, and two upstreams' URIs never meet. A prompt's
//! name takes the upstream's `prefix`, as its tools' names do.

use std::sync::{Arc, Weak};

use serde_json::{Value, json};

use super::client::{ClientError, Heard};
use super::connection::Connection;
use super::log_field::field;
use super::{SurfaceListener, Upstream};

/// How an upstream's resource URI begins as the host offers it:
/// `justonce://NAME/URI`, `NAME` the upstream's name percent-encoded.
pub const URI_SCHEME: &str = "justonce://";

/// The most pages read of one of an upstream's lists.
pub const MAX_PAGES: usize = 100;

/// The most entries kept of one of an upstream's lists.
pub const MAX_ENTRIES: usize = 10_000;

/// The URI `uri` of the upstream `upstream`, as the host offers it:
/// `justonce://NAME/URI`. Any text round-trips through [`unwrap_uri`].
pub fn wrap_uri(upstream: &str, uri: &str) -> String {
    let mut wrapped = String::from(URI_SCHEME);
    for byte in upstream.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            wrapped.push(byte as char);
        } else {
            wrapped.push_str(&format!("%{byte:02X}"));
        }
    }
    wrapped.push('/');
    wrapped.push_str(uri);
    wrapped
}

/// The upstream and its own URI of a URI [`wrap_uri`] made; `None` for any other.
pub fn unwrap_uri(wrapped: &str) -> Option<(String, &str)> {
    let rest = wrapped.strip_prefix(URI_SCHEME)?;
    let (name, uri) = rest.split_once('/')?;
    let mut bytes = Vec::with_capacity(name.len());
    let mut raw = name.bytes();
    while let Some(byte) = raw.next() {
        if byte == b'%' {
            let high = (raw.next()? as char).to_digit(16)?;
            let low = (raw.next()? as char).to_digit(16)?;
            bytes.push((high * 16 + low) as u8);
        } else {
            bytes.push(byte);
        }
    }
    Some((String::from_utf8(bytes).ok()?, uri))
}

/// Rewrites the URIs in `value` that the upstream `upstream` gave (a `uri` or
/// `uriTemplate` of a listed entry, of a read's contents, of a resource embedded in
/// a prompt's message or linked from it) to the host's ([`wrap_uri`]).
pub fn wrap_uris_in(upstream: &str, value: &mut Value) {
    match value {
        Value::Object(object) => {
            for key in ["uri", "uriTemplate"] {
                if let Some(Value::String(uri)) = object.get_mut(key) {
                    *uri = wrap_uri(upstream, uri);
                }
            }
            for (key, inner) in object.iter_mut() {
                // `_meta` is the upstream's own, opaque.
                if key != "_meta" {
                    wrap_uris_in(upstream, inner);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| wrap_uris_in(upstream, item)),
        _ => {}
    }
}

/// What one upstream offers besides its tools, as it said last.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Surface {
    /// The `capabilities` of its `initialize` result.
    pub capabilities: Value,
    /// Its `resources/list` entries, as it gave them.
    pub resources: Vec<Value>,
    /// Its `resources/templates/list` entries.
    pub templates: Vec<Value>,
    /// Its `prompts/list` entries.
    pub prompts: Vec<Value>,
}

impl Surface {
    /// Whether it declared the capability `name` (`resources`, `prompts`, …).
    pub fn offers(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(Value::is_object)
    }

    /// Whether it declared resource subscriptions.
    pub fn subscribes(&self) -> bool {
        self.capabilities
            .pointer("/resources/subscribe")
            .and_then(Value::as_bool)
            == Some(true)
    }
}

/// Which of an upstream's lists a notification changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lists {
    /// Its resources and resource templates.
    Resources,
    /// Its prompts.
    Prompts,
}

/// What an upstream said about its surface, for the host's clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SurfaceNews {
    /// Its resources or prompts changed (they were listed again), or it became
    /// ready, or stopped being ready.
    Changed(Lists),
    /// The resource at this URI (the host's, [`wrap_uri`]) was updated.
    Updated(String),
}

/// Reads every page of `method` (`resources/list`, …) from `connection`, the
/// entries under `field`, at most [`MAX_PAGES`] pages and [`MAX_ENTRIES`] entries.
pub(super) fn list_all(
    connection: &Connection,
    upstream: &str,
    (method, field): (&str, &str),
    timeout: std::time::Duration,
) -> Result<Vec<Value>, String> {
    let mut entries = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let page = connection
            .request(method, params, timeout, (None, None), None)
            .map_err(|e| format!("upstream `{upstream}`: {method}: {e}"))?;
        if let Some(Value::Array(found)) = page.get(field) {
            entries.extend(found.iter().cloned());
        }
        match page.get("nextCursor") {
            Some(next) if !next.is_null() && entries.len() < MAX_ENTRIES => {
                cursor = Some(next.clone());
            }
            Some(next) if !next.is_null() => break,
            _ => return Ok(entries),
        }
    }
    entries.truncate(MAX_ENTRIES);
    tracing::warn!(target: "justonce::upstream", upstream = %upstream, "{method} still had more after {MAX_PAGES} pages or {MAX_ENTRIES} entries: the rest is not offered");
    Ok(entries)
}

impl Upstream {
    /// What it offers besides its tools, as it said last (`None` before its first
    /// start answered `initialize`), whatever its state now.
    pub fn surface(&self) -> Option<Arc<Surface>> {
        self.surface
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Calls `listener` with what it says about its resources and prompts, and when
    /// they may have changed (it became ready, or stopped being ready).
    pub fn on_surface(&self, listener: SurfaceListener) {
        self.surface_listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(listener);
    }

    fn tell_surface(&self, news: &SurfaceNews) {
        let listeners = self
            .surface_listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        listeners.iter().for_each(|listener| listener(news));
    }

    /// It became ready or stopped being ready: its resources and prompts come or go.
    pub(super) fn surface_moved(&self) {
        let Some(surface) = self.surface() else {
            return;
        };
        if surface.offers("resources") {
            self.tell_surface(&SurfaceNews::Changed(Lists::Resources));
        }
        if surface.offers("prompts") {
            self.tell_surface(&SurfaceNews::Changed(Lists::Prompts));
        }
    }

    /// Keeps `capabilities` (of its `initialize`) and lists, on `connection`, the
    /// resources, resource templates and prompts they declare. A list it does not
    /// answer is empty, and warned about: its tools are offered all the same.
    pub(super) fn list_surface(&self, connection: &Connection, capabilities: Value) {
        let mut surface = Surface {
            capabilities,
            ..Surface::default()
        };
        if surface.offers("resources") {
            surface.resources = self.listed_or_none(connection, ("resources/list", "resources"));
            surface.templates = self.listed_or_none(
                connection,
                ("resources/templates/list", "resourceTemplates"),
            );
        }
        if surface.offers("prompts") {
            surface.prompts = self.listed_or_none(connection, ("prompts/list", "prompts"));
        }
        *self.surface.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(surface));
    }

    fn listed_or_none(&self, connection: &Connection, what: (&str, &str)) -> Vec<Value> {
        list_all(connection, &self.name, what, self.config.timeout).unwrap_or_else(|e| {
            tracing::warn!(target: "justonce::upstream", upstream = %self.name, "{}", field(&e));
            Vec::new()
        })
    }

    /// Lists `lists` again on the connection it has (it said they changed).
    fn relist_surface(&self, lists: Lists) {
        let Ok((_, connection)) = self.connection(None) else {
            return;
        };
        let Some(mut surface) = self.surface().map(|s| s.as_ref().clone()) else {
            return;
        };
        match lists {
            Lists::Resources => {
                surface.resources =
                    self.listed_or_none(&connection, ("resources/list", "resources"));
                surface.templates = self.listed_or_none(
                    &connection,
                    ("resources/templates/list", "resourceTemplates"),
                );
            }
            Lists::Prompts => {
                surface.prompts = self.listed_or_none(&connection, ("prompts/list", "prompts"));
            }
        }
        *self.surface.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(surface));
    }

    /// What is done when it says something of its resources or prompts: a list that
    /// changed is listed again on a thread of its own (one under way per list, one
    /// more asked for, as its tools), then told; an updated resource is told at once.
    pub(super) fn on_surface_news(&self, me: &Weak<Upstream>) -> Heard {
        let me = Weak::clone(me);
        let refresh = Arc::clone(&self.surface_refresh);
        Arc::new(move |message: &Value| {
            let lists = match message.get("method").and_then(Value::as_str) {
                Some("notifications/resources/list_changed") => Lists::Resources,
                Some("notifications/prompts/list_changed") => Lists::Prompts,
                Some("notifications/resources/updated") => {
                    let uri = message.pointer("/params/uri").and_then(Value::as_str);
                    if let (Some(upstream), Some(uri)) = (me.upgrade(), uri) {
                        upstream.tell_surface(&SurfaceNews::Updated(wrap_uri(&upstream.name, uri)));
                    }
                    return;
                }
                _ => return,
            };
            let turn = &refresh[lists as usize];
            if !turn.ask() {
                return;
            }
            let (me, refresh) = (Weak::clone(&me), Arc::clone(&refresh));
            let _ = std::thread::Builder::new()
                .name("upstream-surface-changed".into())
                .spawn(move || {
                    loop {
                        if let Some(upstream) = me.upgrade() {
                            upstream.relist_surface(lists);
                            upstream.tell_surface(&SurfaceNews::Changed(lists));
                        }
                        if !refresh[lists as usize].again() {
                            break;
                        }
                    }
                });
        })
    }

    /// Sends `method` (a read: `resources/read`, `prompts/get`, `completion/complete`,
    /// …) with `params` on its connection, waiting up to its `timeout`; its answer,
    /// stripped of its credentials, within `max_read_bytes`. Refused at once, nothing
    /// sent, while it is not ready.
    pub(crate) fn read(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let (_, connection) = self.connection(None)?;
        let answer = connection.request(method, params, self.config.timeout, (None, None), None)?;
        let size = serde_json::to_vec(&answer).map_or(usize::MAX, |v| v.len());
        if size > self.config.max_read_bytes {
            return Err(ClientError::Lost(format!(
                "upstream `{}` answered {method} with {size} bytes, over its cap of {} bytes (`max_read_bytes`)",
                self.name, self.config.max_read_bytes
            )));
        }
        Ok(answer)
    }

    /// A client of the host subscribes to its resource `uri` (its own URI): sent to
    /// it, and sent again on each new connection while any subscription holds.
    pub(crate) fn subscribe(&self, uri: &str) -> Result<Value, ClientError> {
        let answer = self.read("resources/subscribe", json!({ "uri": uri }))?;
        *self
            .subscriptions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(uri.to_owned())
            .or_default() += 1;
        Ok(answer)
    }

    /// A subscription to `uri` ends: the upstream is told when it was the last one.
    pub(crate) fn unsubscribe(&self, uri: &str) -> Result<Value, ClientError> {
        let last = {
            let mut subscriptions = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
            match subscriptions.get_mut(uri) {
                Some(count) if *count > 1 => {
                    *count -= 1;
                    false
                }
                Some(_) => {
                    subscriptions.remove(uri);
                    true
                }
                None => true,
            }
        };
        if last {
            self.read("resources/unsubscribe", json!({ "uri": uri }))
        } else {
            Ok(json!({}))
        }
    }

    /// Subscribes again, on a new `connection`, to what clients subscribed to.
    pub(super) fn subscribe_again(&self, connection: &Connection) {
        let uris: Vec<String> = self
            .subscriptions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        for uri in uris {
            let subscribed = connection.request(
                "resources/subscribe",
                json!({ "uri": uri }),
                self.config.timeout,
                (None, None),
                None,
            );
            if let Err(e) = subscribed {
                tracing::warn!(target: "justonce::upstream", upstream = %self.name, "could not subscribe again to {}: {}", field(&uri), field(&e.to_string()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_uri_round_trips_and_two_upstreams_never_share_one() {
        let uris = [
            "demo://resource/static/document/1",
            "file:///tmp/a b?c=d#e",
            "justonce://other/x",
            "",
            "urn:isbn:0451450523",
            "test://x/../y",
        ];
        let names = ["everything", "a/b", "a%2Fb", "ünï côde", ""];
        let mut seen = std::collections::HashSet::new();
        for name in names {
            for uri in uris {
                let wrapped = wrap_uri(name, uri);
                assert_eq!(
                    unwrap_uri(&wrapped),
                    Some((name.to_owned(), uri)),
                    "{wrapped}"
                );
                assert!(seen.insert(wrapped.clone()), "{wrapped} twice");
            }
        }
        assert_eq!(
            wrap_uri("everything", "demo://resource/static/document/1"),
            "justonce://everything/demo://resource/static/document/1"
        );
        assert_eq!(wrap_uri("a/b", "x"), "justonce://a%2Fb/x");
        assert_eq!(unwrap_uri("demo://resource"), None);
        assert_eq!(unwrap_uri("justonce://no-slash"), None);
        assert_eq!(unwrap_uri("justonce://bad%zz/x"), None);
    }

    #[test]
    fn the_uris_of_contents_and_embedded_resources_are_wrapped_and_meta_left_alone() {
        let mut read = json!({
            "contents": [{ "uri": "demo://r/1", "text": "uri" }],
            "messages": [{ "content": { "type": "resource", "resource": { "uri": "demo://r/2" } } }],
            "_meta": { "uri": "kept" },
        });
        wrap_uris_in("ev", &mut read);
        assert_eq!(read["contents"][0]["uri"], "justonce://ev/demo://r/1");
        assert_eq!(read["contents"][0]["text"], "uri");
        assert_eq!(
            read["messages"][0]["content"]["resource"]["uri"],
            "justonce://ev/demo://r/2"
        );
        assert_eq!(read["_meta"]["uri"], "kept");
    }
}
