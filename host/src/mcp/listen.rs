//! `subscriptions/listen`, the stateless revision's (2026-07-28) way to hear what
//! changed: the request's response is a stream that opens with
//! `notifications/subscriptions/acknowledged` (what it will hear) and then carries
//! the notifications it asked for, each stamped with the request's id under
//! `_meta["io.modelcontextprotocol/subscriptionId"]`, until the client ends it (it
//! closes the stream, or cancels the request) or the server stops.
//!
//! What a stream may ask for: `toolsListChanged` (the host's tools changed),
//! `promptsListChanged` and `resourcesListChanged` (an upstream's lists changed, or
//! it came or went), and `resourceSubscriptions`, URIs of the host's
//! (`justonce://UPSTREAM/URI`) whose `notifications/resources/updated` it hears.
//! Each URI is subscribed upstream as a session's `resources/subscribe` is (once
//! per subscriber, [`Subscribed`]), and unsubscribed when the stream ends; a URI no
//! upstream took is left out of the acknowledgement.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value, json};

use super::catalog::{self, Catalog};
use super::protocol::{ErrorData, Params, RequestId};
use super::surface::{self, Relay, Subscribed};
use crate::host::Host;
use crate::upstream::{Lists, SurfaceNews};

/// The `_meta` key that names, on each message of a listen stream, the request
/// that opened it.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The most URIs one stream may subscribe to.
pub(crate) const MAX_URIS: usize = 100;

/// What a listen stream asked to hear (`params.notifications`), or was told it hears.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
}

impl Filter {
    /// The filter of a `subscriptions/listen` request; an error naming what is wrong
    /// with it.
    pub(crate) fn of(params: &Params) -> Result<Self, ErrorData> {
        let Some(Value::Object(asked)) = params.get("notifications") else {
            return Err(ErrorData::invalid_params(
                "subscriptions/listen: `notifications` must be an object (a SubscriptionFilter)",
                None,
            ));
        };
        let flag = |name: &str| -> Result<bool, ErrorData> {
            match asked.get(name) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(on)) => Ok(*on),
                Some(other) => Err(ErrorData::invalid_params(
                    format!(
                        "subscriptions/listen: `notifications.{name}` must be a boolean, not {other}"
                    ),
                    None,
                )),
            }
        };
        let uris = match asked.get("resourceSubscriptions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(uris)) if uris.len() <= MAX_URIS => uris
                .iter()
                .map(|uri| uri.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        "subscriptions/listen: `notifications.resourceSubscriptions` must be URIs (strings)",
                        None,
                    )
                })?,
            Some(Value::Array(_)) => {
                return Err(ErrorData::invalid_params(
                    format!("subscriptions/listen: at most {MAX_URIS} `resourceSubscriptions` on one stream"),
                    None,
                ));
            }
            Some(_) => {
                return Err(ErrorData::invalid_params(
                    "subscriptions/listen: `notifications.resourceSubscriptions` must be an array of URIs",
                    None,
                ));
            }
        };
        Ok(Self {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris,
        })
    }

    /// As the wire has it: only what is on.
    fn to_json(&self) -> Value {
        let mut filter = Map::new();
        for (name, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                filter.insert(name.into(), Value::Bool(true));
            }
        }
        if !self.uris.is_empty() {
            filter.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(filter)
    }
}

/// `note` with the stream's id in its `_meta`.
fn stamped(mut note: Value, id: &RequestId) -> Value {
    if !note.get("params").is_some_and(Value::is_object) {
        note["params"] = json!({});
    }
    note["params"]["_meta"][SUBSCRIPTION_ID] = id.to_json();
    note
}

/// Where a stream's messages go (a client that is gone drops them).
pub(crate) type Sink = Arc<dyn Fn(&Value) + Send + Sync>;

/// One open listen stream: it hears until dropped, and then ends its upstream
/// subscriptions (on a thread of its own: an upstream may be slow to answer).
pub(crate) struct Listening {
    relay: Arc<Relay>,
    relayed: u64,
    catalog: Arc<Catalog>,
    listener: Option<u64>,
    host: Arc<Host>,
    subscribed: Arc<Subscribed>,
}

impl std::fmt::Debug for Listening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listening").finish_non_exhaustive()
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.relay.unlisten(self.relayed);
        if let Some(listener) = self.listener {
            self.catalog.unlisten(listener);
        }
        let (host, subscribed) = (Arc::clone(&self.host), Arc::clone(&self.subscribed));
        let _ = std::thread::Builder::new()
            .name("justonce-mcp-unlisten".into())
            .spawn(move || subscribed.end(&host));
    }
}

/// Opens the stream of the `subscriptions/listen` request `id` with `params`
/// (blocking: it subscribes upstream): sends its acknowledgement on `send`, then
/// what it hears, until the returned [`Listening`] is dropped.
pub(crate) fn open(
    (host, relay, catalog): (&Arc<Host>, &Arc<Relay>, &Arc<Catalog>),
    id: &RequestId,
    params: &Params,
    send: Sink,
) -> Result<Listening, ErrorData> {
    let mut filter = Filter::of(params)?;
    let subscribed = Arc::new(Subscribed::default());
    filter.uris.retain(|uri| {
        let mut asked = Params::new();
        asked.insert("uri".into(), Value::String(uri.clone()));
        match surface::answer(host, "resources/subscribe", &asked, Some(&subscribed)) {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(uri = %uri, "subscriptions/listen: not subscribed: {}", e.message);
                false
            }
        }
    });
    let ack = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": { "notifications": filter.to_json() },
    });
    send(&stamped(ack, id));
    let (heard, holds, to) = (filter.clone(), Arc::clone(&subscribed), Arc::clone(&send));
    let stream = id.clone();
    let relayed = relay.listen(Arc::new(move |news| {
        let note = match news {
            SurfaceNews::Updated(uri) if holds.holds(uri) => surface::updated(uri),
            SurfaceNews::Changed(Lists::Resources) if heard.resources => {
                surface::list_changed(news).unwrap_or_default()
            }
            SurfaceNews::Changed(Lists::Prompts) if heard.prompts => {
                surface::list_changed(news).unwrap_or_default()
            }
            _ => return,
        };
        to(&stamped(note, &stream));
    }));
    let listener = filter.tools.then(|| {
        let stream = id.clone();
        catalog.listen(Box::new(move || {
            send(&stamped(catalog::list_changed(), &stream));
        }))
    });
    Ok(Listening {
        relay: Arc::clone(relay),
        relayed,
        catalog: Arc::clone(catalog),
        listener,
        host: Arc::clone(host),
        subscribed,
    })
}

/// The most `subscriptions/listen` streams open at once for one principal over
/// HTTP, or on one stdio connection: each holds a connection, a thread's worth of
/// listeners and up to its upstream subscriptions, so one client cannot take them
/// without end. One past it is refused busy, naming the cap.
pub(crate) const MAX_LISTENS: usize = 16;

/// Why a listen stream was refused: its principal (or connection) has
/// [`MAX_LISTENS`] open.
pub(crate) fn too_many_listens() -> String {
    format!(
        "{MAX_LISTENS} subscriptions/listen streams are open already (the most one client may hold at once); end one, then open this one again"
    )
}

/// The open listen streams of one stdio connection, by the id of the request that
/// opened each (`None` while it is being opened): one ends when its client cancels
/// that request, even while it is being opened, and all when the connection ends.
#[derive(Debug, Default)]
pub(crate) struct Listens(Mutex<HashMap<RequestId, Option<Listening>>>);

impl Listens {
    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, Option<Listening>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The stream `id` is being opened; false (and not opened) when the
    /// connection has [`MAX_LISTENS`] open already.
    pub(crate) fn opening(&self, id: RequestId) -> bool {
        let mut open = self.lock();
        if open.len() >= MAX_LISTENS {
            return false;
        }
        open.insert(id, None);
        true
    }

    /// Keeps the stream `id` open, unless it was ended while it was being opened
    /// (then it ends now).
    pub(crate) fn keep(&self, id: RequestId, listening: Listening) {
        if let Some(slot) = self.lock().get_mut(&id) {
            *slot = Some(listening);
        }
    }

    /// Ends the stream `id` (or forgets it, if it failed to open); whether there
    /// was one.
    pub(crate) fn end(&self, id: &RequestId) -> bool {
        self.lock().remove(id).is_some()
    }

    /// Ends them all.
    pub(crate) fn end_all(&self) {
        self.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stdio_connection_opens_at_most_the_cap_of_listens() {
        let id = |n: i64| RequestId::try_from(&json!(n)).unwrap();
        let listens = Listens::default();
        for n in 0..MAX_LISTENS {
            assert!(listens.opening(id(n as i64)));
        }
        assert!(!listens.opening(id(-1)), "one past the cap");
        assert!(listens.end(&id(0)));
        assert!(listens.opening(id(-1)), "after one ended");
    }

    fn params(value: Value) -> Params {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_filter_is_read_as_asked_and_a_bad_one_is_refused_naming_its_field() {
        let filter = Filter::of(&params(json!({ "notifications": {
            "promptsListChanged": true,
            "toolsListChanged": false,
            "resourceSubscriptions": ["justonce://a/x"],
        } })))
        .unwrap();
        assert_eq!(
            filter.to_json(),
            json!({ "promptsListChanged": true, "resourceSubscriptions": ["justonce://a/x"] })
        );
        assert_eq!(
            Filter::of(&params(json!({ "notifications": {} }))).unwrap(),
            Filter::default()
        );
        for (bad, named) in [
            (json!({}), "`notifications` must be an object"),
            (
                json!({ "notifications": { "toolsListChanged": "yes" } }),
                "notifications.toolsListChanged",
            ),
            (
                json!({ "notifications": { "resourceSubscriptions": "justonce://a/x" } }),
                "must be an array",
            ),
            (
                json!({ "notifications": { "resourceSubscriptions": [1] } }),
                "must be URIs",
            ),
        ] {
            let refused = Filter::of(&params(bad.clone())).unwrap_err();
            assert!(
                refused.message.contains(named),
                "{bad}: {}",
                refused.message
            );
        }
    }

    #[test]
    fn a_note_is_stamped_with_the_streams_id_and_keeps_its_params() {
        let id = RequestId::try_from(&json!("listen-1")).unwrap();
        let note = stamped(surface::updated("justonce://a/x"), &id);
        assert_eq!(note["params"]["uri"], "justonce://a/x");
        assert_eq!(note["params"]["_meta"][SUBSCRIPTION_ID], "listen-1");
        let bare = stamped(catalog::list_changed(), &id);
        assert_eq!(bare["params"]["_meta"][SUBSCRIPTION_ID], "listen-1");
    }
}
