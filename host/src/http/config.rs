//! Who may reach what: the per-tool allowlist of origins, named services, the header
//! that carries the effect key, and the limits of one request.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use ureq::http::{HeaderName, HeaderValue, Uri};

use super::secrets::{SecretValue, read_secrets_file};

/// The header that carries the effect key when no other name is configured; the one
/// Stripe and the IETF draft use.
pub const DEFAULT_IDEMPOTENCY_HEADER: &str = "Idempotency-Key";

/// How the host reaches HTTP downstreams on a tool's behalf. Deny by default: a tool
/// reaches only the origins listed for it under `allow`.
///
/// As a JSON file (`justonce --http-config FILE`):
///
/// ```json
/// {
///   "services": {
///     "payments": {
///       "url": "https://api.payments.example",
///       "headers": { "Authorization": "Bearer ${PAYMENTS_TOKEN}" },
///       "tools": ["refund"],
///       "retry_statuses": [409, 429, 503]
///     },
///     "webhooks": "https://hooks.shop.example"
///   },
///   "secrets_file": "secrets.env",
///   "allow": { "refund": ["https://api.payments.example"] },
///   "idempotency_headers": { "https://api.payments.example": "Idempotency-Key" },
///   "retry_statuses": [408, 409, 425, 429, 502, 503, 504],
///   "timeout_ms": 10000,
///   "max_response_bytes": 1048576
/// }
/// ```
///
/// `Debug` and serialization show a service header's template, never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// The header that carries the effect key on every non-safe request (and on every
    /// webhook delivery), unless `idempotency_headers` names another for the origin.
    pub idempotency_header: String,
    /// A different key header for some origins (`scheme://host:port` → header name).
    pub idempotency_headers: BTreeMap<String, String>,
    /// Named base URLs: a tool asks for `{"service": "payments", "path": "/v1/refunds"}`
    /// and never needs to know where the payments API lives, nor the credentials the
    /// host adds to its requests.
    pub services: BTreeMap<String, Service>,
    /// A file of `NAME=value` lines that fills in the `${NAME}` references of service
    /// headers a variable of the host's environment does not (relative to the config
    /// file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secrets_file: Option<PathBuf>,
    /// The origins (`scheme://host[:port]`) each tool may reach, by tool name. A tool
    /// that is not listed reaches nothing.
    pub allow: BTreeMap<String, Vec<String>>,
    /// The statuses that are not an answer but a request to come back, for every
    /// downstream whose service does not name its own; unset means
    /// [`RETRY_STATUSES`](super::RETRY_STATUSES).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_statuses: Option<Vec<u16>>,
    /// How long one request may take, connecting and reading the response included.
    pub timeout_ms: u64,
    /// The largest response body kept; longer bodies are cut and marked `truncated`.
    pub max_response_bytes: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            idempotency_header: DEFAULT_IDEMPOTENCY_HEADER.to_owned(),
            idempotency_headers: BTreeMap::new(),
            services: BTreeMap::new(),
            secrets_file: None,
            allow: BTreeMap::new(),
            retry_statuses: None,
            timeout_ms: 10_000,
            max_response_bytes: 1 << 20,
        }
    }
}

impl HttpConfig {
    /// Reads and checks a JSON config file, filling in the `${NAME}` references of
    /// service headers from the host's environment, else from `secrets_file`.
    /// The error names the file first (`http.json: …`).
    pub fn load(path: &Path) -> Result<Self, String> {
        Self::load_unnamed(path).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// [`load`](Self::load), its error without the file's name, for a caller that
    /// names it itself (a configuration error says `configuration http.json: …`).
    pub(crate) fn load_unnamed(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the http config: {e}"))?;
        let mut config: Self = serde_json::from_str(&text)
            .map_err(|e| format!("the http config is not valid: {e}"))?;
        if let Some(file) = &mut config.secrets_file {
            *file = path.parent().unwrap_or(Path::new(".")).join(&*file);
        }
        config
            .resolve_secrets(&|name| std::env::var(name).ok())
            .and_then(|()| config.validate())?;
        Ok(config)
    }

    /// Fills in the `${NAME}` references of every service header from `env`, else
    /// from `secrets_file`; the error names the service, the header and the variable.
    pub fn resolve_secrets(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
        let needs_file = self.secrets_file.is_some()
            && self
                .services
                .values()
                .flat_map(|s| s.headers.values())
                .any(|h| h.value().is_none());
        let file = match &self.secrets_file {
            Some(path) if needs_file => read_secrets_file(path)?,
            _ => BTreeMap::new(),
        };
        let lookup = |name: &str| env(name).or_else(|| file.get(name).cloned());
        let source = match &self.secrets_file {
            Some(path) => format!("in the environment nor in {}", path.display()),
            None => "in the environment (or name a `secrets_file`)".to_owned(),
        };
        for (service, config) in &mut self.services {
            for (header, value) in &mut config.headers {
                value.resolve(&lookup).map_err(|e| {
                    let e = e.replace("is not set", &format!("is not set {source}"));
                    format!("services.{service}.headers.{header}: {e}")
                })?;
            }
        }
        Ok(())
    }

    /// Lets `tool` reach `origin` (`scheme://host[:port]`).
    pub fn allow(mut self, tool: impl Into<String>, origin: impl Into<String>) -> Self {
        self.allow
            .entry(tool.into())
            .or_default()
            .push(origin.into());
        self
    }

    /// Names a base URL that tools address as `{"service": name, "path": …}`.
    pub fn service(mut self, name: impl Into<String>, base_url: impl Into<String>) -> Self {
        self.services.insert(name.into(), Service::new(base_url));
        self
    }

    /// Adds a header (a credential, say) to every request to the service `name`
    /// (configured before with [`HttpConfig::service`]); tools never see its value.
    pub fn service_header(
        mut self,
        name: &str,
        header: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        if let Some(service) = self.services.get_mut(name) {
            service
                .headers
                .insert(header.into(), SecretValue::literal(value));
        }
        self
    }

    /// Grants the service `name` (configured before with [`HttpConfig::service`]) to
    /// `tool`: once a service names any tool, only the tools it names may use it or
    /// get its headers.
    pub fn grant(mut self, name: &str, tool: impl Into<String>) -> Self {
        if let Some(service) = self.services.get_mut(name) {
            service.tools.get_or_insert_with(Vec::new).push(tool.into());
        }
        self
    }

    /// Uses `header` instead of the default to carry the key to `origin`.
    pub fn idempotency_header_for(
        mut self,
        origin: impl Into<String>,
        header: impl Into<String>,
    ) -> Self {
        self.idempotency_headers
            .insert(origin.into(), header.into());
        self
    }

    /// Sets the per-request timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// The per-request timeout.
    pub fn timeout_duration(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Checks every origin, base URL and header name; the error names the bad entry.
    pub fn validate(&self) -> Result<(), String> {
        check_header_name(&self.idempotency_header)
            .map_err(|e| format!("idempotency_header: {e}"))?;
        for (origin, header) in &self.idempotency_headers {
            Origin::from_str(origin).map_err(|e| format!("idempotency_headers: {e}"))?;
            check_header_name(header).map_err(|e| format!("idempotency_headers[{origin}]: {e}"))?;
        }
        for (name, service) in &self.services {
            parse_url(&service.url).map_err(|e| format!("services.{name}: {e}"))?;
            for (header, value) in &service.headers {
                let at = format!("services.{name}.headers.{header}");
                check_header_name(header).map_err(|e| format!("{at}: {e}"))?;
                let value = value.value().ok_or_else(|| {
                    format!(
                        "{at}: `{}` was never filled in (load the config with HttpConfig::load)",
                        value.shown()
                    )
                })?;
                HeaderValue::from_str(value).map_err(|_| {
                    format!("{at}: the value is not a valid header value (after filling in its variables)")
                })?;
            }
        }
        if let Some(statuses) = &self.retry_statuses {
            check_retry_statuses(statuses).map_err(|e| format!("retry_statuses: {e}"))?;
        }
        for (name, service) in &self.services {
            if let Some(status) = &service.status {
                if !service.unkeyed {
                    return Err(format!(
                        "services.{name}.status: a keyed service's effects are sent again under their key; a status request is for an unkeyed one (`\"unkeyed\": true`)"
                    ));
                }
                status
                    .check()
                    .map_err(|e| format!("services.{name}.status: {e}"))?;
            }
            if let Some(statuses) = &service.retry_statuses {
                check_retry_statuses(statuses)
                    .map_err(|e| format!("services.{name}.retry_statuses: {e}"))?;
            }
        }
        for (tool, origins) in &self.allow {
            for origin in origins {
                Origin::from_str(origin).map_err(|e| format!("allow.{tool}: {e}"))?;
            }
        }
        if self.timeout_ms == 0 {
            return Err("timeout_ms must be at least 1".into());
        }
        Ok(())
    }

    /// The header that carries the key to `origin`.
    pub fn header_for(&self, origin: &Origin) -> &str {
        self.idempotency_headers
            .iter()
            .find(|(o, _)| Origin::from_str(o).is_ok_and(|o| &o == origin))
            .map(|(_, h)| h.as_str())
            .unwrap_or(&self.idempotency_header)
    }

    /// Whether `tool` may reach `origin`; the error says what is allowed instead.
    pub fn check_allowed(&self, tool: &str, origin: &Origin) -> Result<(), String> {
        let allowed = self.allow.get(tool).map(Vec::as_slice).unwrap_or_default();
        if allowed
            .iter()
            .any(|o| Origin::from_str(o).is_ok_and(|o| &o == origin))
        {
            return Ok(());
        }
        let listed = if allowed.is_empty() {
            "none".to_owned()
        } else {
            allowed.join(", ")
        };
        Err(format!(
            "tool `{tool}` may not reach {origin}: it is not on the tool's allowlist (allowed: {listed}); \
             allow it in the host's HTTP config (`\"allow\": {{\"{tool}\": [\"{origin}\"]}}`) \
             or in justonce.toml (`[tools.{tool}] allow = [\"{origin}\"]`, or the service's name)"
        ))
    }

    /// Every host the configuration names: those of the allowlist's origins and of
    /// the services' base URLs.
    pub(crate) fn named_hosts(&self) -> Vec<String> {
        let allowed = self.allow.values().flatten();
        let services = self.services.values().map(|s| &s.url);
        allowed
            .chain(services)
            .filter_map(|url| parse_url(url).ok())
            .map(|origin| origin.host)
            .collect()
    }

    /// Whether a service of this name is configured.
    pub(crate) fn has_service(&self, name: &str) -> bool {
        self.services.contains_key(name)
    }

    /// Whether `tool` may use the service `name` (configured): the error says which
    /// tools may.
    pub(crate) fn check_granted(&self, tool: &str, name: &str) -> Result<(), String> {
        match self.services.get(name) {
            Some(service) if !service.grants(tool) => Err(format!(
                "tool `{tool}` is not granted the service `{name}` (granted: {}); add it to services.{name}.tools in the host's HTTP config",
                service.tools.as_deref().unwrap_or_default().join(", ")
            )),
            _ => Ok(()),
        }
    }

    /// The headers the host adds to `tool`'s request to `url`: those of the service
    /// whose base URL `url` is under, when `tool` is granted it.
    pub(crate) fn service_headers_for(&self, tool: &str, url: &str) -> Vec<(&str, &str)> {
        match self.service_for(url) {
            Some(service) if !service.grants(tool) => Vec::new(),
            _ => self.service_headers(url),
        }
    }

    /// The statuses that are not an answer for a request to `url`: its service's own
    /// list, else the config's, else [`RETRY_STATUSES`](super::RETRY_STATUSES).
    pub(crate) fn retry_statuses(&self, url: &str) -> &[u16] {
        self.service_for(url)
            .and_then(|s| s.retry_statuses.as_deref())
            .or(self.retry_statuses.as_deref())
            .unwrap_or(super::RETRY_STATUSES)
    }

    /// The service a request names (`service`, with no `url`) or whose base URL its
    /// `url` is under, with its name.
    pub(crate) fn service_of(
        &self,
        service: Option<&str>,
        url: Option<&str>,
    ) -> Option<(&str, &Service)> {
        match (service, url) {
            (Some(name), None) => self
                .services
                .get_key_value(name)
                .map(|(n, s)| (n.as_str(), s)),
            (_, Some(url)) => self
                .services
                .iter()
                .filter_map(|(n, s)| Some((n.as_str(), s, s.base_path_len_if_under(url)?)))
                .max_by_key(|(_, _, len)| *len)
                .map(|(n, s, _)| (n, s)),
            (None, None) => None,
        }
    }

    /// The service whose base URL `url` is under (the longest such base, if several
    /// are).
    fn service_for(&self, url: &str) -> Option<&Service> {
        self.services
            .values()
            .filter_map(|s| Some((s, s.base_path_len_if_under(url)?)))
            .max_by_key(|(_, len)| *len)
            .map(|(s, _)| s)
    }

    /// Resolves a request's target: an absolute `url`, or a configured `service` plus
    /// a `path` that starts with `/`.
    pub fn resolve(
        &self,
        url: Option<&str>,
        service: Option<&str>,
        path: Option<&str>,
    ) -> Result<(String, Origin), String> {
        let url = match (url, service) {
            (Some(url), None) => {
                if path.is_some() {
                    return Err("`path` goes with `service`, not with `url`".into());
                }
                url.to_owned()
            }
            (None, Some(service)) => {
                let base = self.services.get(service).map(|s| &s.url).ok_or_else(|| {
                    let known: Vec<&str> = self.services.keys().map(String::as_str).collect();
                    format!(
                        "no service named `{service}` is configured (configured: {}); name it under \"services\" in the host's HTTP config (`--http-config FILE`), then retry the same call: nothing was sent",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    )
                })?;
                let path = path.unwrap_or("/");
                if !path.starts_with('/') {
                    return Err(format!("`path` must start with `/`, got `{path}`"));
                }
                format!("{}{path}", base.trim_end_matches('/'))
            }
            (Some(_), Some(_)) => return Err("give either `url` or `service`, not both".into()),
            (None, None) => return Err("the request needs a `url` or a `service`".into()),
        };
        let url = normalize_url(&url)?;
        let origin = parse_url(&url)?;
        Ok((url, origin))
    }

    /// Every secret part of every service header, to strip from responses.
    pub(crate) fn secret_values(&self) -> Vec<&str> {
        let mut secrets: Vec<&str> = self
            .services
            .values()
            .flat_map(|s| s.headers.values())
            .flat_map(SecretValue::secrets)
            .collect();
        // The longest first, so a whole `Bearer TOKEN` goes before its token.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        secrets
    }

    /// The headers the host adds to a request to `url`: those of the service whose
    /// base URL `url` is under (the longest such base, if several are).
    pub(crate) fn service_headers(&self, url: &str) -> Vec<(&str, &str)> {
        self.service_for(url)
            .map(|s| {
                s.headers
                    .iter()
                    .filter_map(|(name, value)| Some((name.as_str(), value.value()?)))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A named downstream: its base URL, and the headers (credentials, say) the host
/// adds to every request under it. In the config file either the URL alone or
/// `{"url": …, "headers": {"Authorization": "Bearer ${TOKEN}"}, "retry_statuses": […]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Service {
    /// The base URL; a tool's `path` is appended to it.
    pub url: String,
    /// Headers added by the host; their values may hold `${NAME}` references, filled
    /// in when the config is loaded.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, SecretValue>,
    /// The statuses that are not an answer from this service (a payments API that
    /// answers 409 while a key is in flight, say); unset means the config's list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_statuses: Option<Vec<u16>>,
    /// The tools granted this service: only they may name it and only their requests
    /// carry its headers, even when another tool may reach its origin. Unset means
    /// every tool whose allowlist names its origin (set it for a service with
    /// credentials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The service takes no idempotency key (`"unkeyed": true`): no key header is
    /// sent, its effects are performed at most once, and one whose answer was lost
    /// fails closed until its `status` request, a person or an operator decides.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unkeyed: bool,
    /// How to ask an unkeyed service whether an effect whose answer was lost
    /// happened: a read-only request run at the agent's retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusRequest>,
}

/// An unkeyed service's status request (`"status": {…}`): a `GET` (or `HEAD`) of
/// `path` under the service, a template (`crate::probe`) of the effect's `{key}` and
/// its JSON body's fields (`{body.NAME}`), each written percent-encoded; its answer's
/// status says performed, not performed, or (any other status) unknown, for a
/// person to decide. A request that fails (no answer, a timeout) decides nothing:
/// the next retry asks again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusRequest {
    /// `GET` (the default) or `HEAD`.
    #[serde(default = "StatusRequest::get")]
    pub method: String,
    /// The path under the service's URL, starting with `/`: a template.
    pub path: String,
    /// The statuses that mean the effect happened (`[200]`).
    pub performed: Vec<u16>,
    /// The statuses that mean it did not (`[404]`).
    pub not_performed: Vec<u16>,
}

impl StatusRequest {
    fn get() -> String {
        "GET".into()
    }

    /// What is wrong with it, if anything: a method that is not a read, a path that
    /// is not a template of the effect starting with `/`, a status in both lists or
    /// none that means performed.
    fn check(&self) -> Result<(), String> {
        if !matches!(self.method.as_str(), "GET" | "HEAD") {
            return Err(format!(
                "method must be GET or HEAD (a status request only reads), not {:?}",
                self.method
            ));
        }
        if !self.path.starts_with('/') {
            return Err(format!("path must start with `/`, not {:?}", self.path));
        }
        let names = crate::probe::placeholders(&serde_json::Value::String(self.path.clone()))
            .map_err(|e| format!("path: {e}"))?;
        if let Some(name) = names
            .iter()
            .find(|n| *n != "key" && !n.starts_with("body."))
        {
            return Err(format!(
                "path names `{{{name}}}`: a status request may name `{{key}}` or `{{body.NAME}}`"
            ));
        }
        if self.performed.is_empty() {
            return Err("performed must list the statuses that mean the effect happened".into());
        }
        if let Some(both) = self
            .performed
            .iter()
            .find(|s| self.not_performed.contains(s))
        {
            return Err(format!("{both} is in both performed and not_performed"));
        }
        Ok(())
    }
}

impl Service {
    /// A service at `url` with no headers of its own.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: BTreeMap::new(),
            retry_statuses: None,
            tools: None,
            unkeyed: false,
            status: None,
        }
    }

    /// Whether `tool` is granted this service.
    fn grants(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }

    /// The length of the base URL's path when `url` is on the same origin and under
    /// that path, else `None`.
    fn base_path_len_if_under(&self, url: &str) -> Option<usize> {
        let (base, base_path) = split_url(&self.url)?;
        let (target, path) = split_url(url)?;
        let base_path = base_path.trim_end_matches('/');
        let under = path
            .strip_prefix(base_path)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        (base == target && under).then_some(base_path.len())
    }
}

/// A URL's origin and path, dot-segments resolved; `None` for a URL that
/// [`normalize_url`] refuses.
fn split_url(url: &str) -> Option<(Origin, String)> {
    let origin = parse_url(url).ok()?;
    let uri: Uri = normalize_url(url).ok()?.parse().ok()?;
    Some((origin, uri.path().to_owned()))
}

/// What a path may not hide in percent-encoding (or hold at all): servers disagree on
/// whether `%2F` is a separator and `\` a `/`, so a service's prefix cannot be
/// checked against it.
const HIDDEN_IN_PATHS: [&str; 4] = ["%2f", "%2e", "%5c", "\\"];

/// `url` with the dot-segments of its path resolved (RFC 3986, 5.2.4), as it is
/// matched against a service's base URL and sent: `/v1/../admin` is `/admin`, never
/// under `/v1`. A path holding an encoded `/`, `.` or `\` (or a raw `\`) is refused.
pub(crate) fn normalize_url(url: &str) -> Result<String, String> {
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
    let path = uri.path();
    let lower = path.to_ascii_lowercase();
    if let Some(hidden) = HIDDEN_IN_PATHS.iter().find(|h| lower.contains(*h)) {
        return Err(format!(
            "`{url}` hides `{hidden}` in its path; write `/` and `.` plainly (the host resolves `..` itself)"
        ));
    }
    let resolved = remove_dot_segments(path);
    if resolved == path {
        return Ok(url.to_owned());
    }
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(format!("`{url}` is not an absolute URL"));
    };
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    Ok(format!("{scheme}://{authority}{resolved}{query}"))
}

/// RFC 3986's `remove_dot_segments` for an absolute path: `.` segments dropped, each
/// `..` removing the segment before it (never above the root).
fn remove_dot_segments(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." | ".." => {
                if *segment == ".." {
                    kept.pop();
                }
                // `/a/..` is the directory `/`, `/a/.` is `/a/`: the slash stays.
                if last {
                    kept.push("");
                }
            }
            other => kept.push(other),
        }
    }
    format!("/{}", kept.join("/"))
}

impl<'de> Deserialize<'de> for Service {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The object form; the string form is the URL alone.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            url: String,
            #[serde(default)]
            headers: BTreeMap<String, SecretValue>,
            #[serde(default)]
            retry_statuses: Option<Vec<u16>>,
            #[serde(default)]
            tools: Option<Vec<String>>,
            #[serde(default)]
            unkeyed: bool,
            #[serde(default)]
            status: Option<StatusRequest>,
        }
        #[derive(Deserialize)]
        #[serde(untagged, expecting = "a base URL, or {\"url\": …, \"headers\": {…}}")]
        enum Either {
            Url(String),
            Full(Full),
        }
        Ok(match Either::deserialize(deserializer)? {
            Either::Url(url) => Self::new(url),
            Either::Full(Full {
                url,
                headers,
                retry_statuses,
                tools,
                unkeyed,
                status,
            }) => Self {
                url,
                headers,
                retry_statuses,
                tools,
                unkeyed,
                status,
            },
        })
    }
}

/// Checks a list of retry statuses: HTTP statuses, none of them a success.
fn check_retry_statuses(statuses: &[u16]) -> Result<(), String> {
    match statuses.iter().find(|s| !(300..=599).contains(*s)) {
        Some(status) => Err(format!(
            "{status} cannot mean \"come back later\": give statuses from 300 to 599 (a success is an answer)"
        )),
        None => Ok(()),
    }
}

/// `scheme://host:port` of a URL: what the allowlist is made of.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: String,
    /// The host name or address, lowercase (IPv6 in brackets).
    pub host: String,
    /// The port, the scheme's default when the URL names none.
    pub port: u16,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}

impl FromStr for Origin {
    type Err = String;

    /// Parses `scheme://host[:port]` (a trailing `/` is accepted; a path is not).
    fn from_str(s: &str) -> Result<Self, String> {
        let origin = parse_url(s)?;
        let rest = s.split_once("://").map_or("", |(_, rest)| rest);
        if rest.trim_end_matches('/').contains('/') || rest.contains('?') {
            return Err(format!(
                "`{s}` is not an origin: give scheme://host[:port] without a path"
            ));
        }
        Ok(origin)
    }
}

/// Checks an absolute http(s) URL and returns its origin.
pub(crate) fn parse_url(url: &str) -> Result<Origin, String> {
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
    let scheme = match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("http") => "http",
        Some(s) if s.eq_ignore_ascii_case("https") => "https",
        Some(other) => {
            return Err(format!(
                "`{url}` uses the scheme `{other}`; only http and https are allowed"
            ));
        }
        None => return Err(format!("`{url}` is not an absolute URL (no scheme)")),
    };
    let authority = uri
        .authority()
        .ok_or_else(|| format!("`{url}` has no host"))?;
    if authority.as_str().contains('@') {
        return Err(format!(
            "`{url}` carries credentials; put them in a header instead"
        ));
    }
    let host = authority.host().to_ascii_lowercase();
    if host.is_empty() {
        return Err(format!("`{url}` has no host"));
    }
    let port = authority
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    Ok(Origin {
        scheme: scheme.to_owned(),
        host,
        port,
    })
}

fn check_header_name(name: &str) -> Result<(), String> {
    HeaderName::from_bytes(name.as_bytes())
        .map(|_| ())
        .map_err(|_| format!("`{name}` is not a valid header name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_default_their_port_and_compare_case_insensitively() {
        let a: Origin = "HTTPS://API.Example.com".parse().unwrap();
        let b: Origin = "https://api.example.com:443/".parse().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "https://api.example.com:443");
        let c: Origin = "http://127.0.0.1:8080".parse().unwrap();
        assert_ne!(c, "http://127.0.0.1:8081".parse::<Origin>().unwrap());
    }

    #[test]
    fn bad_origins_and_urls_are_named() {
        for (input, needle) in [
            ("ftp://example.com", "only http and https"),
            ("example.com", "not an absolute URL"),
            ("http://user:pw@example.com", "credentials"),
            ("http://example.com/path", "without a path"),
        ] {
            let err = input.parse::<Origin>().unwrap_err();
            assert!(err.contains(needle), "{input}: {err}");
        }
    }

    #[test]
    fn dot_segments_are_resolved_and_hidden_separators_refused() {
        for (path, resolved) in [
            ("/v1/refunds", "/v1/refunds"),
            ("/v1/../admin/delete", "/admin/delete"),
            ("/v1/./refunds/", "/v1/refunds/"),
            ("/../../etc", "/etc"),
            ("/a/b/..", "/a/"),
            ("/a/.", "/a/"),
            ("/", "/"),
        ] {
            assert_eq!(remove_dot_segments(path), resolved, "{path}");
        }
        assert_eq!(
            normalize_url("http://127.0.0.1:9000/v1/../admin?x=%2F").unwrap(),
            "http://127.0.0.1:9000/admin?x=%2F"
        );
        for hidden in ["/v1/%2e%2e/admin", "/v1/..%2Fadmin", "/v1/%5C..%5Cadmin"] {
            let err = normalize_url(&format!("http://127.0.0.1:9000{hidden}")).unwrap_err();
            assert!(err.contains("hides"), "{hidden}: {err}");
        }
        let config = HttpConfig::default()
            .service("pay", "http://127.0.0.1:9000/v1")
            .service_header("pay", "Authorization", "Bearer tok_12345678");
        assert!(
            config
                .service_headers("http://127.0.0.1:9000/v1/../admin")
                .is_empty()
        );
        assert!(
            config
                .service_headers("http://127.0.0.1:9000/v1/%2e%2e/admin")
                .is_empty()
        );
        assert_eq!(
            config.service_headers("http://127.0.0.1:9000/v1/./x").len(),
            1
        );
        assert_eq!(
            config.secret_values(),
            ["Bearer tok_12345678", "tok_12345678"]
        );
    }

    #[test]
    fn come_back_statuses_come_from_the_service_then_the_config_then_the_default() {
        let mut config: HttpConfig = serde_json::from_str(
            r#"{"services": {
                "payments": {"url": "https://pay.example/v1", "retry_statuses": [409, 520]},
                "mail": "https://mail.example"
            }}"#,
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(
            config.retry_statuses("https://pay.example/v1/refunds"),
            [409, 520]
        );
        assert_eq!(
            config.retry_statuses("https://mail.example/send"),
            super::super::RETRY_STATUSES
        );
        assert_eq!(
            config.retry_statuses("https://pay.example/v2/x"),
            super::super::RETRY_STATUSES
        );
        config.retry_statuses = Some(vec![503]);
        assert_eq!(config.retry_statuses("https://mail.example/send"), [503]);
        assert_eq!(
            config.retry_statuses("https://pay.example/v1/refunds"),
            [409, 520]
        );
    }

    #[test]
    fn a_success_or_a_non_status_is_not_a_come_back_status() {
        for (json, named) in [
            (r#"{"retry_statuses": [503, 200]}"#, "retry_statuses: 200"),
            (
                r#"{"services": {"p": {"url": "https://p.example", "retry_statuses": [42]}}}"#,
                "services.p.retry_statuses: 42",
            ),
        ] {
            let config: HttpConfig = serde_json::from_str(json).unwrap();
            let err = config.validate().unwrap_err();
            assert!(err.starts_with(named), "{err}");
        }
    }

    #[test]
    fn allowlist_is_per_tool_and_deny_by_default() {
        let config = HttpConfig::default().allow("refund", "http://127.0.0.1:9000");
        let allowed: Origin = "http://127.0.0.1:9000".parse().unwrap();
        let other: Origin = "http://127.0.0.1:9001".parse().unwrap();
        assert!(config.check_allowed("refund", &allowed).is_ok());
        let err = config.check_allowed("refund", &other).unwrap_err();
        assert!(
            err.contains("http://127.0.0.1:9001") && err.contains("allowed: http://127.0.0.1:9000"),
            "{err}"
        );
        let err = config.check_allowed("notify", &allowed).unwrap_err();
        assert!(
            err.contains("tool `notify`") && err.contains("allowed: none"),
            "{err}"
        );
        // It says how to allow it, in either file.
        assert!(
            err.contains(r#""allow": {"notify": ["http://127.0.0.1:9000"]}"#)
                && err.contains(r#"[tools.notify] allow = ["http://127.0.0.1:9000"]"#),
            "{err}"
        );
    }

    #[test]
    fn services_resolve_to_urls_under_their_base() {
        let config = HttpConfig::default().service("payments", "http://127.0.0.1:9000/api/");
        let (url, origin) = config
            .resolve(None, Some("payments"), Some("/v1/refunds"))
            .unwrap();
        assert_eq!(url, "http://127.0.0.1:9000/api/v1/refunds");
        assert_eq!(origin.port, 9000);
        let err = config.resolve(None, Some("mail"), None).unwrap_err();
        assert!(
            err.contains("no service named `mail`") && err.contains("payments"),
            "{err}"
        );
        // It says how to configure one, and that retrying is safe.
        assert!(
            err.contains("--http-config FILE") && err.contains("nothing was sent"),
            "{err}"
        );
        let err = config
            .resolve(None, Some("payments"), Some("v1"))
            .unwrap_err();
        assert!(err.contains("must start with `/`"), "{err}");
        assert!(
            config
                .resolve(None, None, None)
                .unwrap_err()
                .contains("needs a `url`")
        );
    }

    #[test]
    fn the_key_header_can_differ_per_origin() {
        let config = HttpConfig::default()
            .idempotency_header_for("https://api.other.example", "X-Request-Key");
        let other: Origin = "https://api.other.example:443".parse().unwrap();
        let stripe: Origin = "https://api.stripe.com".parse().unwrap();
        assert_eq!(config.header_for(&other), "X-Request-Key");
        assert_eq!(config.header_for(&stripe), DEFAULT_IDEMPOTENCY_HEADER);
    }

    #[test]
    fn a_status_request_is_for_an_unkeyed_service_and_is_checked_naming_it() {
        let with = |unkeyed: bool, status: serde_json::Value| {
            let mut config = HttpConfig::default().service("orders", "http://127.0.0.1:9");
            let service = config.services.get_mut("orders").unwrap();
            service.unkeyed = unkeyed;
            service.status = Some(serde_json::from_value(status).unwrap());
            config.validate()
        };
        let good = serde_json::json!({ "path": "/o/{body.ref}?k={key}", "performed": [200], "not_performed": [404] });
        assert_eq!(with(true, good.clone()), Ok(()));
        let keyed = with(false, good).unwrap_err();
        assert!(
            keyed.starts_with("services.orders.status: a keyed service"),
            "{keyed}"
        );
        for (status, says) in [
            (
                serde_json::json!({ "method": "POST", "path": "/o", "performed": [200], "not_performed": [] }),
                "GET or HEAD",
            ),
            (
                serde_json::json!({ "path": "o", "performed": [200], "not_performed": [] }),
                "start with `/`",
            ),
            (
                serde_json::json!({ "path": "/o/{arguments.x}", "performed": [200], "not_performed": [] }),
                "names `{arguments.x}`",
            ),
            (
                serde_json::json!({ "path": "/o", "performed": [], "not_performed": [404] }),
                "performed must list",
            ),
            (
                serde_json::json!({ "path": "/o", "performed": [200], "not_performed": [200] }),
                "in both",
            ),
        ] {
            let error = with(true, status.clone()).unwrap_err();
            assert!(
                error.starts_with("services.orders.status: ") && error.contains(says),
                "{status}: {error}"
            );
        }
    }

    #[test]
    fn validate_names_the_bad_entry() {
        let config = HttpConfig::default().allow("refund", "http://x.example/path");
        assert!(config.validate().unwrap_err().starts_with("allow.refund"));
        let config = HttpConfig::default().service("pay", "nope");
        assert!(config.validate().unwrap_err().starts_with("services.pay"));
        let config = HttpConfig {
            idempotency_header: "bad header".into(),
            ..HttpConfig::default()
        };
        assert!(
            config
                .validate()
                .unwrap_err()
                .contains("not a valid header name")
        );
    }

    fn with_secret() -> HttpConfig {
        serde_json::from_str(
            r#"{"services": {
                "payments": {"url": "http://127.0.0.1:9000/api",
                             "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "plain": "http://127.0.0.1:9001"
            }}"#,
        )
        .unwrap()
    }

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cr3t".to_owned())
    }

    #[test]
    fn a_service_header_is_filled_in_and_added_only_under_its_base_url() {
        let mut config = with_secret();
        config.resolve_secrets(&env).unwrap();
        config.validate().unwrap();
        let auth = [("Authorization", "Bearer s3cr3t")];
        assert_eq!(config.service_headers("http://127.0.0.1:9000/api"), auth);
        assert_eq!(
            config.service_headers("http://127.0.0.1:9000/api/v1/x?y=1"),
            auth
        );
        for elsewhere in [
            "http://127.0.0.1:9000/apix",
            "http://127.0.0.1:9000/",
            "http://127.0.0.1:9001/api",
            "https://127.0.0.1:9000/api",
        ] {
            assert!(config.service_headers(elsewhere).is_empty(), "{elsewhere}");
        }
        let (url, _) = config.resolve(None, Some("plain"), Some("/x")).unwrap();
        assert_eq!(url, "http://127.0.0.1:9001/x");
    }

    #[test]
    fn a_missing_variable_is_named_and_the_value_is_never_shown() {
        let mut config = with_secret();
        let err = config.resolve_secrets(&|_| None).unwrap_err();
        assert!(
            err.contains("services.payments.headers.Authorization")
                && err.contains("`TOKEN` is not set"),
            "{err}"
        );
        let err = with_secret().validate().unwrap_err();
        assert!(err.contains("never filled in"), "{err}");
        config.resolve_secrets(&env).unwrap();
        let shown = format!("{config:?} {}", serde_json::to_string(&config).unwrap());
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }

    #[test]
    fn a_service_object_with_an_unknown_field_is_refused() {
        let err = serde_json::from_str::<HttpConfig>(
            r#"{"services": {"p": {"url": "http://x.example", "header": {}}}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("a base URL, or"), "{err}");
    }

    #[test]
    fn load_reads_a_secrets_file_beside_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("http.json");
        std::fs::write(
            &path,
            r#"{"secrets_file": "secrets.env", "services": {"p": {"url": "http://x.example",
                "headers": {"X-Api-Key": "${JUSTONCE_TEST_UNSET_KEY}"}}}}"#,
        )
        .unwrap();
        let err = HttpConfig::load(&path).unwrap_err();
        assert!(err.contains("cannot read the secrets file"), "{err}");
        std::fs::write(dir.path().join("secrets.env"), "OTHER=1\n").unwrap();
        let err = HttpConfig::load(&path).unwrap_err();
        assert!(
            err.contains("`JUSTONCE_TEST_UNSET_KEY` is not set in the environment nor in"),
            "{err}"
        );
        std::fs::write(
            dir.path().join("secrets.env"),
            "JUSTONCE_TEST_UNSET_KEY=k3y\n",
        )
        .unwrap();
        let config = HttpConfig::load(&path).unwrap();
        assert_eq!(
            config.service_headers("http://x.example/a"),
            [("X-Api-Key", "k3y")]
        );
    }

    #[test]
    fn a_config_error_names_the_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("http.json");
        let named = path.display().to_string();
        let missing = HttpConfig::load(&path).unwrap_err();
        assert!(
            missing.starts_with(&format!("{named}: cannot read the http config: ")),
            "{missing}"
        );
        std::fs::write(&path, "{").unwrap();
        let invalid = HttpConfig::load(&path).unwrap_err();
        assert_eq!(invalid.matches(&named).count(), 1, "{invalid}");
        // As a configuration error, which names the file itself.
        let reason = HttpConfig::load_unnamed(&path).unwrap_err();
        let error = crate::Error::Config {
            path: path.clone(),
            reason,
        }
        .to_string();
        assert_eq!(error.matches(&named).count(), 1, "{error}");
        assert!(
            error.starts_with(&format!(
                "configuration {named}: the http config is not valid: "
            )),
            "{error}"
        );
    }
}
