//! The web console: the journal for people, at `/console` on the HTTP server of
//! `serve --http` or of `justonce console` (the same routes, [`Console`]).
//!
//! - A browser opens a session with a viewer's or operator's token (a form POSTs
//!   it; the cookie is `HttpOnly; SameSite=Strict; Path=/console`); the session
//!   lives on the server and ends at a time read from the injected clock. Nothing
//!   but the login page and the static files answers without one.
//! - A session is bound to the digest of its token: every request finds that token
//!   in the tokens file again, so a revoked token ends its sessions at once, and a
//!   session acts with the role the file gives the token now.
//! - Pages: the calls, newest first, filtered and searched; one call's story; the
//!   unresolved effects; the outbox; charts. A live view (`/console/live`, SSE) adds new
//!   calls and state changes to the calls page.
//! - Operators act (resolve, forget, abandon) after a confirmation; every action
//!   form carries the session's CSRF token, and the journal records the token's
//!   principal as who did it. A viewer is refused (403), server-side.
//! - `/console/api/…` answers the same JSON as the CLI's `--json`, to a session or
//!   to a viewer's or operator's bearer token.
//! - Every value from the journal is escaped; pages send a strict
//!   Content-Security-Policy (scripts and styles from the console only).

mod charts;
mod html;
mod pages;
mod sessions;
mod timeline;
mod upstreams;
mod view;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use self::html::ROOT;
use self::pages::{Abilities, Act};
use self::sessions::{BrowserSession, BrowserSessions, FAILED_EVERY_MS, OpenRefused, seconds_up};
use self::upstreams::UpstreamAct;
use self::view::{Filters, MAX_LIMIT, states};
use crate::auth::tokens::{TokenDigest, Tokens};
use crate::call::CallRequest;
use crate::clock::Clock;
use crate::error::Error;
use crate::host::Host;
use crate::journal::{Journal, Operated, Operator, Resolution, Selection};
use crate::keys::InvocationKey;
use crate::serving::admission::Admission;
use crate::serving::{PlainRequest, PlainResponse, Routes};
use crate::upstream::Upstreams;

pub use self::sessions::DEFAULT_TTL_MS;
pub(crate) use self::upstreams::UpstreamView;

/// The session cookie's name.
const COOKIE: &str = "justonce_console";

/// Every page's Content-Security-Policy: nothing inline, nothing from elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// How long a browser waits before asking the live view again, in milliseconds.
const LIVE_RETRY_MS: u32 = 2000;

const STYLE: &str = include_str!("assets/style.css");
const SCRIPT: &str = include_str!("assets/app.js");

/// The console's routes over one journal.
pub struct Console {
    journal: Arc<dyn Journal>,
    tokens: Arc<Tokens>,
    clock: Arc<dyn Clock>,
    sessions: BrowserSessions,
    /// The host that runs a call again when an operator resumes it (none: the
    /// console alone, which only reads and operates on the journal).
    runner: Option<Arc<Host>>,
    /// The per-principal cap a resumed call counts against, shared with the MCP
    /// endpoint (none: a console whose host serves no principal's calls).
    admission: Option<Admission>,
    /// The configuration that says what each unresolved effect waits for (a probe,
    /// the person asked at the retry, an operator), as `journal --unresolved` shows
    /// it (none: every unkeyed one waits for a `person`).
    settings: Option<Arc<crate::config::Config>>,
    /// The host's upstream MCP servers, shown and operated on the Upstreams page
    /// (none: the console alone).
    upstreams: Option<Arc<Upstreams>>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("journal", &self.journal)
            .field("tokens", &self.tokens.path())
            .finish_non_exhaustive()
    }
}

impl Console {
    /// The console of `host`'s journal, for the holders of `tokens`, with sessions
    /// lasting `session_ttl_ms` on the host's clock.
    pub fn for_host(host: &Host, tokens: impl Into<Arc<Tokens>>, session_ttl_ms: i64) -> Self {
        let mut console = Self::new(
            Arc::clone(host.journal_handle()),
            tokens,
            Arc::clone(&host.shared().clock),
            session_ttl_ms,
        );
        console.upstreams = Some(Arc::clone(host.upstreams()));
        console
    }

    /// The console of `journal`.
    pub(crate) fn new(
        journal: Arc<dyn Journal>,
        tokens: impl Into<Arc<Tokens>>,
        clock: Arc<dyn Clock>,
        session_ttl_ms: i64,
    ) -> Self {
        Self {
            journal,
            tokens: tokens.into(),
            clock,
            sessions: BrowserSessions::new(session_ttl_ms),
            runner: None,
            admission: None,
            settings: None,
            upstreams: None,
        }
    }

    /// Shows what each unresolved effect waits for under `settings` (the
    /// configuration the host was started with), as `journal --unresolved` does.
    pub fn configured(mut self, settings: Option<crate::config::Config>) -> Self {
        self.settings = settings.map(Arc::new);
        self
    }

    /// Lets operators resume a stopped call from the console: `host` runs it again
    /// under its own key, as the agent's retry would (`serve --http`, whose host
    /// serves the tools).
    pub fn resuming_on(mut self, host: Arc<Host>) -> Self {
        self.runner = Some(host);
        self
    }

    /// Counts a call an operator resumes among its principal's calls in flight in
    /// `admission` (the MCP endpoint's): past the cap it is refused, as the
    /// principal's own call would be, and nothing runs.
    pub fn admitting(mut self, admission: Admission) -> Self {
        self.admission = Some(admission);
        self
    }

    fn abilities(&self) -> Abilities {
        Abilities {
            resumes: self.runner.is_some(),
        }
    }
}

/// A request's query (or form body) as names and values; invalid UTF-8 is replaced,
/// a repeated name keeps its first value.
fn fields(text: &[u8]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for (name, value) in form_urlencoded::parse(text) {
        out.entry(name.into_owned())
            .or_insert_with(|| value.into_owned());
    }
    out
}

/// The value of cookie `name` in the request, if any.
fn cookie<'a>(request: &'a PlainRequest, name: &str) -> Option<&'a str> {
    request
        .headers
        .iter()
        .filter(|(n, _)| n == "cookie")
        .flat_map(|(_, v)| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// Compares two secrets in time independent of where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn response(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> PlainResponse {
    PlainResponse {
        status,
        headers: vec![
            ("content-type".into(), content_type.into()),
            ("cache-control".into(), "no-store".into()),
            ("x-content-type-options".into(), "nosniff".into()),
            // `same-origin`, not `no-referrer`: with the latter a browser sends `Origin: null`
            // on form posts, which the origin check refuses.
            ("referrer-policy".into(), "same-origin".into()),
            ("content-security-policy".into(), CSP.into()),
            ("x-frame-options".into(), "DENY".into()),
        ],
        body: body.into(),
    }
}

fn html(status: u16, body: String) -> PlainResponse {
    response(status, "text/html; charset=utf-8", body)
}

fn json(status: u16, value: &Value) -> PlainResponse {
    response(status, "application/json", value.to_string())
}

fn redirect(to: &str) -> PlainResponse {
    let mut r = response(303, "text/plain; charset=utf-8", "");
    r.headers.push(("location".into(), to.into()));
    r
}

/// The bearer token of `request`'s `Authorization` header, if any.
fn bearer(request: &PlainRequest) -> Option<&str> {
    let (scheme, token) = request.header("authorization")?.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The 429 of a login past its rate: the login page saying `why`, and when to come
/// back.
fn throttled(retry_after_ms: i64, why: &str) -> PlainResponse {
    let mut r = html(429, pages::login(Some(why)));
    r.headers.push((
        "retry-after".into(),
        seconds_up(retry_after_ms).max(1).to_string(),
    ));
    r
}

/// An error's message as the first words of a sentence.
fn capitalized(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The `Set-Cookie` value that makes a browser forget its session.
fn ended_cookie() -> String {
    format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path={ROOT}; Max-Age=0")
}

/// Why a request has no visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoVisitor {
    /// No session and no bearer token that reads the console.
    Anonymous,
    /// A session whose token was revoked or changed: closed now.
    Ended,
}

/// Who is asking: a browser's session, or a bearer token on the JSON API.
struct Visitor {
    session: BrowserSession,
    /// The session's id (none for a bearer token).
    id: Option<String>,
}

impl Routes for Console {
    fn serves(&self, path: &str) -> bool {
        path == ROOT
            || path
                .strip_prefix(ROOT)
                .is_some_and(|rest| rest.starts_with('/'))
    }

    fn respond(&self, request: &PlainRequest) -> PlainResponse {
        let now = self.clock.now_ms();
        let path = request.path().trim_end_matches('/');
        let api = path.starts_with("/console/api/");
        match (request.method.as_str(), path) {
            ("GET", "/console/static/style.css") => {
                return response(200, "text/css; charset=utf-8", STYLE);
            }
            ("GET", "/console/static/app.js") => {
                return response(200, "text/javascript; charset=utf-8", SCRIPT);
            }
            ("POST", "/console/login") => return self.login(request, now),
            _ => {}
        }
        let visitor = match self.visitor(request, api, now) {
            Ok(visitor) => visitor,
            Err(NoVisitor::Ended) if !api => {
                let mut r = html(
                    401,
                    pages::login(Some(
                        "Your session ended: the token it was opened with was revoked or changed. Log in again.",
                    )),
                );
                r.headers.push(("set-cookie".into(), ended_cookie()));
                return r;
            }
            Err(_) => return self.anonymous(api),
        };
        let query = fields(request.query().as_bytes());
        let session = &visitor.session;
        let result = match (request.method.as_str(), path) {
            ("GET", "/console") => self.calls(session, &query),
            ("GET", "/console/attention") => self.attention(session, now),
            ("GET", "/console/call") => self.story(session, &query, false),
            ("GET", "/console/unresolved") => self.unresolved(session, &query, false, now),
            ("GET", "/console/outbox") => self.outbox(session, false),
            ("GET", "/console/charts") => self.charts(session, &query),
            ("GET", "/console/live") => self.live(request, &query),
            ("GET", "/console/confirm") => Ok(self.confirm(session, &query)),
            ("POST", "/console/act") => self.act(request, session, now),
            ("POST", "/console/logout") => Ok(self.logout(request, &visitor)),
            ("GET", "/console/api/calls") => self.api_calls(&query),
            ("GET", "/console/api/call") => self.story(session, &query, true),
            ("GET", "/console/api/unresolved") => self.unresolved(session, &query, true, now),
            ("GET", "/console/api/outbox") => self.outbox(session, true),
            ("GET", "/console/upstreams") => self.upstreams(session, false),
            ("GET", "/console/api/upstreams") => self.upstreams(session, true),
            ("POST", "/console/upstream") => Ok(self.operate_upstream(request, session)),
            (
                _,
                "/console"
                | "/console/attention"
                | "/console/call"
                | "/console/unresolved"
                | "/console/outbox"
                | "/console/live"
                | "/console/confirm"
                | "/console/act"
                | "/console/upstreams"
                | "/console/upstream"
                | "/console/logout"
                | "/console/login",
            ) => {
                let mut r = html(
                    405,
                    pages::message(
                        "Not allowed",
                        Some(session),
                        "This page does not take that method.",
                        Some(ROOT),
                    ),
                );
                r.headers.push((
                    "allow".into(),
                    if path == "/console/act"
                        || path == "/console/upstream"
                        || path == "/console/logout"
                        || path == "/console/login"
                    {
                        "POST"
                    } else {
                        "GET"
                    }
                    .into(),
                ));
                Ok(r)
            }
            _ if api => Ok(json(
                404,
                &serde_json::json!({"error": "no such API route"}),
            )),
            _ => Ok(html(
                404,
                pages::message("Not found", Some(session), "No such page.", Some(ROOT)),
            )),
        };
        result.unwrap_or_else(|e| self.failure(&e, Some(session), api))
    }
}

impl Console {
    /// The 401 of a request with neither a session nor (on the API) a bearer token.
    fn anonymous(&self, api: bool) -> PlainResponse {
        if !api {
            return html(401, pages::login(None));
        }
        let mut r = json(
            401,
            &serde_json::json!({"error": "a console session or a viewer's or operator's bearer token is required"}),
        );
        r.headers.push((
            "www-authenticate".into(),
            "Bearer realm=\"justonce\"".into(),
        ));
        r
    }

    /// The visitor of `request`: its session cookie, or (on the API) a bearer token
    /// of a role that reads the console.
    ///
    /// A session is only as good as the token that opened it, checked now: its
    /// digest must still be in the tokens file, for the same principal, with a role
    /// that reads the console; the session then has the role the file gives now (an
    /// operator turned viewer no longer acts). Otherwise the session is closed.
    fn visitor(&self, request: &PlainRequest, api: bool, now: i64) -> Result<Visitor, NoVisitor> {
        let mut ended = false;
        if let Some(id) = cookie(request, COOKIE)
            && let Some(session) = self.sessions.get(id, now)
        {
            let current = session
                .token
                .as_ref()
                .and_then(|digest| self.tokens.holder_of(digest))
                .filter(|h| h.name == session.principal && h.role.reads_console());
            match current {
                Some(holder) => {
                    return Ok(Visitor {
                        session: BrowserSession {
                            role: holder.role,
                            ..session
                        },
                        id: Some(id.to_owned()),
                    });
                }
                None => {
                    tracing::warn!(principal = %session.principal, "a console session whose token was revoked or changed was refused and closed");
                    self.sessions.close(id);
                    ended = true;
                }
            }
        }
        let refused = if ended {
            NoVisitor::Ended
        } else {
            NoVisitor::Anonymous
        };
        if !api {
            return Err(refused);
        }
        let holder = bearer(request)
            .and_then(|token| self.tokens.holder(token))
            .filter(|h| h.role.reads_console())
            .ok_or(refused)?;
        Ok(Visitor {
            session: BrowserSession {
                principal: holder.name,
                role: holder.role,
                token: None,
                csrf: String::new(),
                expires_at: now,
            },
            id: None,
        })
    }

    /// A failure as the visitor sees it: a refusal with its reason, or (the host's
    /// own fault) its kind only, the detail in the log.
    fn failure(&self, error: &Error, session: Option<&BrowserSession>, api: bool) -> PlainResponse {
        let (status, text) = match error {
            Error::CannotOperate { .. } | Error::CannotResolve { .. } => (409, error.to_string()),
            Error::InvalidKey(_) => (400, error.to_string()),
            _ => {
                tracing::error!("the console failed: {error:#}");
                (
                    500,
                    "the journal could not be read or written (the server's log has the detail)"
                        .to_owned(),
                )
            }
        };
        if api {
            return json(status, &serde_json::json!({"error": text}));
        }
        html(
            status,
            pages::message("Refused", session, &text, Some(ROOT)),
        )
    }

    fn login(&self, request: &PlainRequest, now: i64) -> PlainResponse {
        let form = fields(&request.body);
        let token = form.get("token").map(|t| t.trim()).unwrap_or("");
        let Some(holder) = self.tokens.holder(token) else {
            if !self.sessions.may_fail(now) {
                return throttled(
                    FAILED_EVERY_MS,
                    "Too many logins with tokens that are not valid; try again in a moment.",
                );
            }
            tracing::warn!("a console login with an unknown token was refused");
            return html(401, pages::login(Some("That token is not valid.")));
        };
        if !holder.role.reads_console() {
            return html(
                403,
                pages::login(Some(
                    "An agent's token calls tools and does not open the console: use a viewer's or operator's token.",
                )),
            );
        }
        let (id, session) = match self.sessions.open(&holder, TokenDigest::of(token), now) {
            Ok(opened) => opened,
            Err(refused @ OpenRefused::Throttled { retry_after_ms, .. }) => {
                tracing::warn!(principal = %holder.name, "a console login was refused: {refused}");
                return throttled(retry_after_ms, &format!("{}.", capitalized(&refused)));
            }
            Err(refused @ OpenRefused::Full) => {
                tracing::warn!(principal = %holder.name, "a console login was refused: {refused}");
                let mut r = html(
                    503,
                    pages::login(Some(&format!("{}.", capitalized(&refused)))),
                );
                r.headers.push(("retry-after".into(), "60".into()));
                return r;
            }
            Err(refused @ OpenRefused::Random) => {
                tracing::error!("{refused}");
                return html(
                    500,
                    pages::login(Some("The server could not open a session; try again.")),
                );
            }
        };
        tracing::info!(principal = %session.principal, role = %session.role, "a console session opened");
        let max_age = (session.expires_at - now) / 1000;
        // Behind a TLS proxy that says so, the cookie never travels in the clear.
        let secure = request
            .header("x-forwarded-proto")
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
        let mut r = redirect(&format!("{ROOT}/attention"));
        r.headers.push((
            "set-cookie".into(),
            format!(
                "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path={ROOT}; Max-Age={max_age}{}",
                if secure { "; Secure" } else { "" }
            ),
        ));
        r
    }

    fn logout(&self, request: &PlainRequest, visitor: &Visitor) -> PlainResponse {
        if let Err(refused) = self.checked_form(request, &visitor.session) {
            return refused;
        }
        if let Some(id) = &visitor.id {
            self.sessions.close(id);
        }
        let mut r = redirect(ROOT);
        r.headers.push(("set-cookie".into(), ended_cookie()));
        r
    }

    /// The form of a POST, if it carries the session's CSRF token; else the 403.
    fn checked_form(
        &self,
        request: &PlainRequest,
        session: &BrowserSession,
    ) -> Result<HashMap<String, String>, PlainResponse> {
        let form = fields(&request.body);
        let given = form.get("csrf").map(String::as_str).unwrap_or("");
        if session.csrf.is_empty() || !same_secret(given, &session.csrf) {
            tracing::warn!(principal = %session.principal, "a console form without its CSRF token was refused");
            return Err(html(
                403,
                pages::message(
                    "Refused",
                    Some(session),
                    "This form did not carry this session's CSRF token: reload the page and try again.",
                    Some(ROOT),
                ),
            ));
        }
        Ok(form)
    }

    fn filtered(&self, filters: &Filters) -> Result<Vec<crate::journal::JournalEntry>, Error> {
        let selection = Selection {
            principal: filters.principal.as_deref(),
            conversation: filters.conversation.as_deref(),
        };
        // A search or a tool or state filter looks further back than one page.
        let narrowed =
            filters.search.is_some() || filters.tool.is_some() || filters.state.is_some();
        let read = if narrowed { MAX_LIMIT } else { filters.limit };
        // Judged now: a running call whose host stopped shows whose lease ended.
        let now = self.clock.now_ms();
        let mut entries: Vec<_> = selection
            .entries(&*self.journal, read)?
            .into_iter()
            .map(|e| e.judged_at(now))
            .collect();
        entries.retain(|e| filters.keeps(e));
        entries.truncate(filters.limit as usize);
        Ok(entries)
    }

    fn calls(
        &self,
        session: &BrowserSession,
        query: &HashMap<String, String>,
    ) -> Result<PlainResponse, Error> {
        let filters = Filters::parse(query);
        if let Some(search) = &filters.search
            && let Ok(key) = InvocationKey::parse(search)
            && self.journal.story(&key)?.entry.is_some()
        {
            return Ok(redirect(&html::call_path(search)));
        }
        let entries = self.filtered(&filters)?;
        Ok(html(
            200,
            pages::calls(session, &filters, &entries, self.clock.now_ms()),
        ))
    }

    fn api_calls(&self, query: &HashMap<String, String>) -> Result<PlainResponse, Error> {
        let entries = self.filtered(&Filters::parse(query))?;
        Ok(json(
            200,
            &serde_json::to_value(&entries).unwrap_or_default(),
        ))
    }

    fn story(
        &self,
        session: &BrowserSession,
        query: &HashMap<String, String>,
        api: bool,
    ) -> Result<PlainResponse, Error> {
        let text = query.get("key").map(String::as_str).unwrap_or("");
        let key = InvocationKey::parse(text).map_err(|e| Error::InvalidKey(e.to_string()))?;
        let now = self.clock.now_ms();
        let story = self.journal.story(&key)?.judged_at(now);
        if api {
            return Ok(json(200, &serde_json::to_value(&story).unwrap_or_default()));
        }
        Ok(html(
            200,
            pages::story(session, &story, self.abilities(), now),
        ))
    }

    fn unresolved(
        &self,
        session: &BrowserSession,
        query: &HashMap<String, String>,
        api: bool,
        now: i64,
    ) -> Result<PlainResponse, Error> {
        let given = |name: &str| {
            query
                .get(name)
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        };
        let selection = Selection {
            principal: given("principal"),
            conversation: given("conversation"),
        };
        let mut effects = selection.unresolved(&*self.journal, now)?;
        for effect in effects.iter_mut().filter(|e| e.class == "unkeyed") {
            effect.pending = Some(crate::config::pending_of(self.settings.as_deref(), effect));
        }
        if api {
            return Ok(json(
                200,
                &serde_json::to_value(&effects).unwrap_or_default(),
            ));
        }
        Ok(html(200, pages::unresolved(session, &effects, now)))
    }

    /// The "needs attention" page: what a person must look at now.
    fn attention(&self, session: &BrowserSession, now: i64) -> Result<PlainResponse, Error> {
        let entries: Vec<_> = Selection::default()
            .entries(&*self.journal, MAX_LIMIT)?
            .into_iter()
            .map(|e| e.judged_at(now))
            .collect();
        let failing: Vec<_> = self
            .journal
            .outbox()
            .outbox_messages()?
            .into_iter()
            .filter(|m| {
                m.state == "failed"
                    || (m.state == "pending" && m.attempts > 0 && m.last_error.is_some())
            })
            .collect();
        let unresolved = Selection::default()
            .unresolved(&*self.journal, now)?
            .iter()
            .filter(|e| e.class == "unkeyed")
            .count();
        Ok(html(
            200,
            pages::attention(session, &entries, &failing, unresolved, now),
        ))
    }

    fn charts(
        &self,
        session: &BrowserSession,
        query: &HashMap<String, String>,
    ) -> Result<PlainResponse, Error> {
        let now = self.clock.now_ms();
        let entries: Vec<_> = Selection::default()
            .entries(&*self.journal, MAX_LIMIT)?
            .into_iter()
            .map(|e| e.judged_at(now))
            .collect();
        let window = charts::Window::parse(query.get("window").map(String::as_str));
        Ok(html(200, charts::charts(session, &entries, window, now)))
    }

    fn outbox(&self, session: &BrowserSession, api: bool) -> Result<PlainResponse, Error> {
        let messages = self.journal.outbox().outbox_messages()?;
        if api {
            return Ok(json(
                200,
                &serde_json::to_value(&messages).unwrap_or_default(),
            ));
        }
        Ok(html(200, pages::outbox(session, &messages)))
    }

    /// The Upstreams page (or its JSON): each upstream's state, tools and the calls
    /// waiting on it, read from the journal now.
    fn upstreams(&self, session: &BrowserSession, api: bool) -> Result<PlainResponse, Error> {
        let views: Vec<UpstreamView> = match &self.upstreams {
            Some(upstreams) if !upstreams.is_empty() => {
                UpstreamView::all(upstreams, &*self.journal, self.clock.now_ms())?
            }
            _ => Vec::new(),
        };
        if api {
            let all: Vec<Value> = views.iter().map(UpstreamView::to_json).collect();
            return Ok(json(200, &Value::Array(all)));
        }
        Ok(html(200, upstreams::page_of(session, &views)))
    }

    /// An operator's restart, disable or enable of an upstream: the form's `name`
    /// and `action`, with the session's CSRF token. Logged with who did it.
    fn operate_upstream(&self, request: &PlainRequest, session: &BrowserSession) -> PlainResponse {
        if let Err(refused) = self.may_act(session) {
            return refused;
        }
        let form = match self.checked_form(request, session) {
            Ok(form) => form,
            Err(refused) => return refused,
        };
        let back = format!("{ROOT}/upstreams");
        let refused = |status: u16, text: &str| {
            html(
                status,
                pages::message("Refused", Some(session), text, Some(&back)),
            )
        };
        let Some(act) = form.get("action").and_then(|a| UpstreamAct::parse(a)) else {
            return refused(400, "Unknown action: restart, disable or enable.");
        };
        let name = form.get("name").map(|n| n.trim()).unwrap_or("");
        let Some(upstream) = self.upstreams.as_ref().and_then(|u| u.named(name)) else {
            return refused(
                404,
                &format!("No upstream is named `{name}` on this console's host."),
            );
        };
        let by = session.principal.as_str();
        let told = match act.apply(&*self.journal, upstream, by, self.clock.now_ms()) {
            Ok(told) => told,
            Err(e) => {
                tracing::error!(target: "justonce::operator", action = act.name(), upstream = name, by, "cannot journal the operator's {} of the upstream {name}: {e}", act.name());
                return refused(
                    503,
                    &format!(
                        "The {} of `{name}` could not be journaled (the server's log has the detail); nothing changed. Try again.",
                        act.name()
                    ),
                );
            }
        };
        tracing::info!(target: "justonce::operator", action = act.name(), upstream = name, by, "operator {by}: {} the upstream {name}", act.name());
        html(
            200,
            pages::message("Done", Some(session), &told, Some(&back)),
        )
    }

    /// The live view: an SSE response with the calls made or changed since `since`
    /// (or `Last-Event-ID`), ending at once; the browser asks again after
    /// [`LIVE_RETRY_MS`], from the id of the last event.
    fn live(
        &self,
        request: &PlainRequest,
        query: &HashMap<String, String>,
    ) -> Result<PlainResponse, Error> {
        let since: i64 = request
            .header("last-event-id")
            .or(query.get("since").map(String::as_str))
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let filters = Filters {
            limit: 50,
            ..Filters::parse(query)
        };
        let changed = |e: &crate::journal::JournalEntry| {
            e.completed_at.unwrap_or(e.created_at).max(e.created_at)
        };
        let mut entries = self.filtered(&filters)?;
        // `>=`: a call made in the same millisecond as the last one sent is not missed
        // (the page updates a row it has rather than adding it twice).
        entries.retain(|e| changed(e) >= since);
        entries.reverse();
        let mut body = format!("retry: {LIVE_RETRY_MS}\n\n");
        for e in &entries {
            body.push_str(&format!(
                "id: {}\nevent: call\ndata: {}\n\n",
                changed(e),
                pages::live_row(e)
            ));
        }
        if entries.is_empty() {
            body.push_str(&format!("id: {since}\nevent: idle\ndata: {{}}\n\n"));
        }
        Ok(response(200, "text/event-stream", body))
    }

    fn confirm(&self, session: &BrowserSession, query: &HashMap<String, String>) -> PlainResponse {
        if let Err(refused) = self.may_act(session) {
            return refused;
        }
        let act = query.get("action").and_then(|a| Act::parse(a));
        let key = query.get("key").map(String::as_str).unwrap_or("");
        let force = query.get("force").is_some_and(|f| f == "1");
        match act {
            Some(act) if !key.is_empty() => {
                let now = self.clock.now_ms();
                let entry = InvocationKey::parse(key)
                    .ok()
                    .and_then(|k| self.journal.story(&k).ok())
                    .and_then(|story| story.entry)
                    .map(|e| e.judged_at(now));
                html(
                    200,
                    pages::confirm(session, act, key, force, entry.as_ref(), now),
                )
            }
            _ => html(
                400,
                pages::message(
                    "Refused",
                    Some(session),
                    "Name an action and a key.",
                    Some(ROOT),
                ),
            ),
        }
    }

    /// `Err`: the 403 of a role that may not act.
    fn may_act(&self, session: &BrowserSession) -> Result<(), PlainResponse> {
        if session.role.acts() {
            return Ok(());
        }
        tracing::warn!(principal = %session.principal, role = %session.role, "a console action by a role that may not act was refused");
        Err(html(
            403,
            pages::message(
                "Refused",
                Some(session),
                &format!(
                    "A {} reads the console; only an operator acts on calls.",
                    session.role
                ),
                Some(ROOT),
            ),
        ))
    }

    fn act(
        &self,
        request: &PlainRequest,
        session: &BrowserSession,
        now: i64,
    ) -> Result<PlainResponse, Error> {
        if let Err(refused) = self.may_act(session) {
            return Ok(refused);
        }
        let form = match self.checked_form(request, session) {
            Ok(form) => form,
            Err(refused) => return Ok(refused),
        };
        let Some(act) = form.get("action").and_then(|a| Act::parse(a)) else {
            return Ok(html(
                400,
                pages::message("Refused", Some(session), "Unknown action.", Some(ROOT)),
            ));
        };
        let key = form.get("key").map(|k| k.trim()).unwrap_or("");
        let force = act.forceable() && form.get("force").is_some_and(|f| f == "1");
        let operator = Operator {
            by: &session.principal,
            force,
            now,
        };
        let (operated, what) = match act {
            Act::ResolvePerformed | Act::ResolveNotPerformed => {
                // No answer given: the journal records one that says who resolved it.
                let text = form
                    .get("response")
                    .map(|r| r.trim())
                    .filter(|r| !r.is_empty())
                    .unwrap_or("null");
                let response: Value =
                    serde_json::from_str(text).map_err(|e| Error::CannotResolve {
                        effect: key.to_owned(),
                        reason: format!("the answer is not valid JSON: {e}"),
                    })?;
                let resolution = if act == Act::ResolvePerformed {
                    Resolution::Performed
                } else {
                    Resolution::NotPerformed
                };
                let operated = self
                    .journal
                    .resolve(key, resolution, &response, &operator)?;
                if let Some(host) = &self.runner {
                    host.shared()
                        .metrics
                        .resolved(crate::journal::DecidedBy::Operator.as_str());
                }
                (
                    operated,
                    format!(
                        "The effect was resolved as {}; the call's next retry finishes it.",
                        resolution.as_str()
                    ),
                )
            }
            Act::Resume => return self.resume(session, key, now),
            Act::Forget | Act::Abandon => {
                let invocation =
                    InvocationKey::parse(key).map_err(|e| Error::InvalidKey(e.to_string()))?;
                let done = if act == Act::Forget {
                    self.journal.forget(&invocation, &operator)
                } else {
                    self.journal.abandon(&invocation, &operator)
                };
                let operated = match done {
                    Ok(operated) => operated,
                    Err(refused @ Error::CannotOperate { .. }) => {
                        return Ok(html(
                            409,
                            pages::refused(session, act, key, &capitalized(&refused)),
                        ));
                    }
                    Err(other) => return Err(other),
                };
                let what = match (act, force) {
                    (Act::Forget, false) => {
                        "The call was forgotten: its record is gone, and the agent's next retry runs it again from the start."
                    }
                    (Act::Forget, true) => {
                        "The call was forgotten, forced: the agent's next retry runs it again and sends its effects under new keys."
                    }
                    (_, false) => {
                        "The call was abandoned: every retry of it now gets the saved 'abandoned' outcome."
                    }
                    (_, true) => {
                        "The call was abandoned, forced: every retry now gets 'abandoned', though an effect's outcome was unknown."
                    }
                };
                (operated, what.to_owned())
            }
        };
        let (operation, what) = match &operated {
            Operated::Done(o) => (o, what),
            Operated::AlreadyDone(o) => (o, format!("Nothing to do: {} did it already.", o.by)),
        };
        tracing::info!(principal = %session.principal, action = act.name(), key, "a console action was recorded");
        Ok(html(200, pages::done(session, &what, operation, now)))
    }

    /// "Resume now": runs the stopped call `key` again on this console's host under
    /// its own key, exactly as the agent's retry would (the same tool, arguments,
    /// conversation and principal), and says how it ended. Refused for a call that
    /// is not stopped (completed, or running under a live lease), whose arguments
    /// the journal does not hold, or whose key the journaled call does not derive
    /// (an explicit key: only its caller can retry it).
    fn resume(
        &self,
        session: &BrowserSession,
        key: &str,
        now: i64,
    ) -> Result<PlainResponse, Error> {
        let by = session.principal.as_str();
        let refuse = |reason: String| {
            tracing::warn!(target: "justonce::operator", action = "resume", key, by, "operator {by}: resume {key} refused: {reason}");
            Ok(html(
                409,
                pages::message(
                    "Refused",
                    Some(session),
                    &reason,
                    Some(&html::call_path(key)),
                ),
            ))
        };
        let Some(host) = &self.runner else {
            return refuse(
                "This console does not run calls (justonce console reads the journal only):                  resume it from the console of a serve --http host, or retry it from the agent."
                    .into(),
            );
        };
        let invocation = InvocationKey::parse(key).map_err(|e| Error::InvalidKey(e.to_string()))?;
        let Some(entry) = self.journal.story(&invocation)?.entry else {
            return refuse(format!(
                "The journal holds no call {key}: never made, expired or forgotten."
            ));
        };
        let entry = entry.judged_at(now);
        if !pages::resumable(&entry) {
            return refuse(if entry.state == "completed" {
                "This call is completed: its outcome is saved, nothing to resume.".into()
            } else {
                format!(
                    "This call is not stopped: {}. Resume it once its lease has ended.",
                    entry.holding
                )
            });
        }
        let Some(arguments) = &entry.arguments else {
            return refuse(
                "The journal does not hold this call's arguments (recorded before justonce kept                  them): retry it from the agent."
                    .into(),
            );
        };
        let (principal, conversation) = view::principal_and_conversation(&entry.conversation);
        // The run is one of its principal's calls in flight, as the agent's retry
        // would be: past the cap, nothing runs.
        let _admitted = match (&self.admission, &principal) {
            (Some(admission), Some(principal)) => match admission.resume(principal) {
                Some(permit) => Some(permit),
                None => {
                    let why = format!("Not resumed, nothing ran: {}.", admission.full(principal));
                    tracing::warn!(target: "justonce::operator", action = "resume", key, by, "operator {by}: resume {key} refused: {why}");
                    return Ok(html(
                        429,
                        pages::message("Refused", Some(session), &why, Some(&html::call_path(key))),
                    ));
                }
            },
            _ => None,
        };
        let mut request =
            CallRequest::new(entry.tool.clone(), arguments.to_string()).conversation(conversation);
        if let Some(principal) = principal {
            request = request.principal(principal);
        }
        match host.key_for(&request) {
            Ok(derived) if derived == invocation => {}
            Ok(_) => {
                return refuse(
                    "This call was made under its caller's own key (or the tool's schema changed                      since): only the agent's retry can resume it."
                        .into(),
                );
            }
            Err(e) => return refuse(format!("The call cannot be made again here: {e}")),
        }
        // Recorded (and checked again, in the journal's transaction) before the run:
        // the story says who had it run, where, and whose lease had ended.
        let operator = Operator {
            by,
            force: false,
            now,
        };
        let host_name = &host.identity().name;
        let was = if entry.holding.is_empty() {
            states(&entry).join(" ")
        } else {
            entry.holding.clone()
        };
        match self.journal.resume(&invocation, &operator, host_name, &was) {
            Ok(_) => {}
            Err(refused @ Error::CannotOperate { .. }) => {
                return Ok(html(
                    409,
                    pages::message(
                        "Refused",
                        Some(session),
                        &capitalized(&refused),
                        Some(&html::call_path(key)),
                    ),
                ));
            }
            Err(other) => return Err(other),
        }
        tracing::info!(target: "justonce::operator", action = "resume", key, by, tool = %entry.tool, host = %host_name, was = %was, "operator {by}: resume {key}: runs it again on this host under the same key");
        let started = std::time::Instant::now();
        let answer = host.call(&request);
        let took = started.elapsed();
        match &answer {
            Ok(response) => {
                tracing::info!(target: "justonce::operator", action = "resume", key, by, outcome = response.outcome.kind(), replayed = response.replayed, "operator {by}: resume {key} finished: the call answered {}", response.outcome.kind());
            }
            Err(error) => {
                tracing::warn!(target: "justonce::operator", action = "resume", key, by, "operator {by}: resume {key} did not finish: {error}");
            }
        }
        Ok(html(200, pages::resumed(session, key, &answer, took)))
    }
}
