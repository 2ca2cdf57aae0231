//! One connection's protocol state: which era it speaks (the `initialize`
//! handshake of 2024-11-05 … 2025-11-25, or the stateless 2026-07-28 envelope), and
//! the answer to every request except the tool calls themselves.
//!
//! The first request decides the era, as in the official SDKs: `initialize` opens a
//! handshake connection; a request whose `_meta` carries
//! `io.modelcontextprotocol/protocolVersion` opens a stateless one. A later request
//! from the other era is refused.

use std::sync::Arc;

#[allow(deprecated)] // SEP-2577 deprecates logging; revisions up to 2025-11-25 have it.
use rmcp::model::LoggingLevel;
use rmcp::model::{
    CacheScope, DiscoverResult, EmptyResult, ErrorCode, Implementation, InitializeResult,
    ListToolsResult, ProgressToken, ResultType, ServerCapabilities, Tool, ToolsCapability,
};
use serde_json::{Value, json};

use super::mrtr;
use super::protocol::{
    CLIENT_CAPABILITIES_META_KEY, ErrorData, MODERN_VERSIONS, PROTOCOL_VERSION_META_KEY, Params,
    ProtocolVersion, SERVER_INFO_META_KEY, handshake_versions, negotiate_handshake, to_json,
    type_name, version_list,
};
use super::tools::{self, Scoping};
use crate::call::CallRequest;

/// Guidance for the model, sent as `instructions`.
const INSTRUCTIONS: &str = "Every tool here runs behind an idempotency guard. Retrying a call \
with the same arguments in the same conversation (after a timeout, a re-plan, or a duplicate) \
never repeats its side effects: it returns the first call's outcome. An error whose `retry_safe` \
is true means retrying the very same call is safe; one whose `retry_after_s` is absent will not \
change by retrying (an unknown outcome that only a person can end): stop and tell the user.";

/// Which protocol generation a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// No request yet.
    Fresh,
    /// Negotiated through `initialize` at this version.
    Handshake(&'static ProtocolVersion),
    /// Every request carries its own version (2026-07-28 and later).
    Stateless,
}

/// MCP's log levels (the syslog severities of RFC 5424), least severe first, as
/// `logging/setLevel` names them.
#[allow(deprecated)]
pub(crate) const LOG_LEVELS: [LoggingLevel; 8] = [
    LoggingLevel::Debug,
    LoggingLevel::Info,
    LoggingLevel::Notice,
    LoggingLevel::Warning,
    LoggingLevel::Error,
    LoggingLevel::Critical,
    LoggingLevel::Alert,
    LoggingLevel::Emergency,
];

/// A level's severity: its place in [`LOG_LEVELS`] (rmcp's `LoggingLevel` is not
/// ordered).
#[allow(deprecated)]
pub(crate) fn severity(level: LoggingLevel) -> usize {
    level as usize
}

/// What to do with a request.
#[derive(Debug)]
pub(crate) enum Dispatch {
    /// Answer now.
    Reply(Result<Value, ErrorData>),
    /// Pass a request on to an upstream (`mcp/surface.rs`): it may wait for one, so
    /// it is answered off the connection's reader; `stateless` shapes its result.
    Surface {
        /// Its method, one of [`super::surface::METHODS`].
        method: String,
        /// Its parameters.
        params: Params,
        /// Whether the result needs the stateless decorations.
        stateless: bool,
    },
    /// Open a `subscriptions/listen` stream (`mcp/listen.rs`) with these parameters:
    /// it subscribes upstream, so it is opened off the connection's reader.
    Listen(Params),
    /// Run a tool call; `stateless` shapes its result for the 2026-07-28 wire.
    Call {
        /// The call.
        request: CallRequest,
        /// Whether the result needs the stateless decorations.
        stateless: bool,
        /// The least severe of the tool's log lines that go to the client as
        /// `notifications/message`; none without `logging/setLevel`.
        #[allow(deprecated)]
        log_level: Option<LoggingLevel>,
        /// The client's `_meta.progressToken`: the tool's progress reports go to it
        /// as `notifications/progress`.
        progress_token: Option<ProgressToken>,
        /// What a stateless call brings for its tool's questions (its answers, its
        /// request state, whether its client can be asked); `None` in a session.
        input: Option<mrtr::Input>,
    },
}

/// A connection's state.
#[derive(Debug)]
pub(crate) struct Session<'a> {
    era: Era,
    tools: Arc<Vec<Tool>>,
    /// Where each upstream MCP server stands (`null`: not told).
    upstreams: Arc<Value>,
    scoping: Scoping<'a>,
    #[allow(deprecated)]
    log_level: Option<LoggingLevel>,
    /// Whether an `initialize` after the first starts the connection over (stdio,
    /// where the pipe is the only session a client has: fastmcp re-enters a
    /// toolset with a new `initialize` on the same pipe) instead of being refused
    /// (an HTTP session, which a client replaces with a new session).
    starts_over: bool,
    /// The stdio connection's own id, new at each `initialize`: the session of its
    /// calls under `[mcp] unscoped = "session"`.
    connection: Option<String>,
    /// What the client's `initialize` declared of `elicitation`, `sampling` and
    /// `roots`: its tools (and upstreams) may ask it that (`mcp/elicit.rs`).
    declared: super::elicit::Declared,
    /// Whether this transport serves the Tasks extension (`mcp/tasks.rs`: Streamable
    /// HTTP, where a task outlives its request), so `server/discover` declares it.
    serves_tasks: bool,
    /// The host whose upstreams' resources and prompts it passes through (and
    /// declares); none: it declares and passes none.
    host: Option<&'a crate::host::Host>,
}

/// A fresh id for a stdio connection (random, hex); `None` when the system gives no
/// randomness, so that no two connections share an all-zero id (their calls that name
/// no conversation then fall back to the window, as a call with no session does).
fn connection_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    match getrandom::fill(&mut bytes) {
        Ok(()) => Some(hex::encode(bytes)),
        Err(e) => {
            tracing::warn!(
                "no randomness for the stdio connection's id ({e}): calls naming no conversation use the unscoped window"
            );
            None
        }
    }
}

#[allow(deprecated)] // `LoggingLevel`, see above.
impl<'a> Session<'a> {
    /// A fresh connection serving `tools` (their `tools/list` entries), whose calls
    /// find their scope as `scoping` says.
    pub(crate) fn new(tools: Arc<Vec<Tool>>, scoping: Scoping<'a>) -> Self {
        Self {
            era: Era::Fresh,
            tools,
            upstreams: Arc::new(Value::Null),
            scoping,
            log_level: None,
            starts_over: false,
            connection: None,
            declared: super::elicit::Declared::default(),
            serves_tasks: true,
            host: None,
        }
    }

    /// A stdio connection: a second `initialize` starts it over, as a new session;
    /// it serves no tasks (a call there answers when it ends), so it declares none.
    pub(crate) fn over_stdio(mut self) -> Self {
        self.starts_over = true;
        self.serves_tasks = false;
        self.connection = connection_id();
        self
    }

    /// A connection that already speaks `era`, with the log level it set (an HTTP
    /// session between requests).
    pub(crate) fn resume(
        tools: Arc<Vec<Tool>>,
        scoping: Scoping<'a>,
        era: Era,
        log_level: Option<LoggingLevel>,
    ) -> Self {
        Self {
            era,
            tools,
            upstreams: Arc::new(Value::Null),
            scoping,
            log_level,
            starts_over: false,
            connection: None,
            declared: super::elicit::Declared::default(),
            serves_tasks: true,
            host: None,
        }
    }

    /// Passes through the resources, prompts and completion of `host`'s upstreams
    /// (`mcp/surface.rs`), and declares them where some upstream offers them; a
    /// host without upstreams has none (their methods are not found).
    pub(crate) fn passing(mut self, host: &'a crate::host::Host) -> Self {
        if !host.upstream_servers().is_empty() {
            self.host = Some(host);
        }
        self
    }

    /// `capabilities` with what the upstreams offer besides tools.
    fn with_surface(&self, capabilities: ServerCapabilities) -> ServerCapabilities {
        match self.host {
            Some(host) => super::surface::declare(host, capabilities),
            None => capabilities,
        }
    }

    /// The same connection, whose client declared the `elicitation` capability (or
    /// not) when it initialized (an HTTP session between requests).
    pub(crate) fn declaring(mut self, declared: super::elicit::Declared) -> Self {
        self.declared = declared;
        self
    }

    /// The same connection, whose client declared `elicitation` (or not), for tests.
    #[cfg(test)]
    pub(crate) fn eliciting(self, elicits: bool) -> Self {
        let mut declared = self.declared;
        declared.elicitation = elicits;
        self.declaring(declared)
    }

    /// Whether the client declared the `elicitation` capability in `initialize`, so
    /// its calls' tools may ask it.
    #[cfg(test)]
    pub(crate) fn elicits(&self) -> bool {
        self.declared.elicitation
    }

    /// What the client declared in `initialize` that its calls may ask of it.
    pub(crate) fn declared(&self) -> super::elicit::Declared {
        self.declared
    }

    /// Serves `tools` from now on (the list changed while the connection is open).
    pub(crate) fn offer(&mut self, tools: Arc<Vec<Tool>>) {
        self.tools = tools;
    }

    /// Tells where each upstream MCP server stands in `tools/list`'s `_meta` (from
    /// [`super::catalog::Catalog::upstreams`]; `null`: nothing told).
    pub(crate) fn with_upstreams(mut self, upstreams: Arc<Value>) -> Self {
        self.upstreams = upstreams;
        self
    }

    /// Where each upstream stands now, for the next `tools/list`.
    pub(crate) fn offer_upstreams(&mut self, upstreams: Arc<Value>) {
        self.upstreams = upstreams;
    }

    /// The log level set with `logging/setLevel`.
    pub(crate) fn log_level(&self) -> Option<LoggingLevel> {
        self.log_level
    }

    /// The era the connection speaks now.
    pub(crate) fn era(&self) -> Era {
        self.era
    }

    /// Decides what to do with one request.
    pub(crate) fn request(&mut self, method: &str, params: &Params) -> Dispatch {
        let enveloped = params
            .get("_meta")
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(PROTOCOL_VERSION_META_KEY));
        match self.era {
            Era::Stateless if method == "initialize" => Dispatch::Reply(Err(ErrorData::new(
                ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
                "this connection speaks the stateless protocol (2026-07-28); the initialize handshake is not accepted on it",
                Some(json!({
                    "supported": MODERN_VERSIONS,
                    "requested": params.get("protocolVersion").cloned().unwrap_or(Value::Null),
                })),
            ))),
            // The stateless revision removed `initialize`: a request carrying its
            // envelope is a stateless one, and the method is not found (-32601, 404).
            Era::Fresh if enveloped && method == "initialize" => {
                self.era = Era::Stateless;
                Dispatch::Reply(Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    "initialize was removed in protocol 2026-07-28: a request carrying its _meta envelope needs no handshake (server/discover says what this server offers)",
                    None,
                )))
            }
            Era::Fresh | Era::Stateless if enveloped && method != "initialize" => {
                self.era = Era::Stateless;
                self.stateless(method, params)
            }
            Era::Handshake(version) if enveloped && method != "initialize" => {
                Dispatch::Reply(Err(ErrorData::invalid_request(
                    format!(
                        "this connection negotiated {version} through initialize; requests carrying the 2026-07-28 _meta envelope are not accepted on it"
                    ),
                    None,
                )))
            }
            Era::Stateless => Dispatch::Reply(Err(envelope_refusal(params))),
            Era::Fresh | Era::Handshake(_) => self.handshake(method, params),
        }
    }

    /// A request on a handshake connection (or before any).
    fn handshake(&mut self, method: &str, params: &Params) -> Dispatch {
        let reply = match method {
            "initialize" => self.initialize(params),
            "ping" => Ok(to_json(EmptyResult::from(()))),
            method if super::surface::is_surface(method) && self.era == Era::Fresh => {
                Err(ErrorData::invalid_request(
                    format!("{method} before initialize: send initialize first"),
                    None,
                ))
            }
            method if super::surface::is_surface(method) && self.host.is_some() => {
                return Dispatch::Surface {
                    method: method.to_owned(),
                    params: params.clone(),
                    stateless: false,
                };
            }
            "tools/list" | "tools/call" | "logging/setLevel" if self.era == Era::Fresh => {
                Err(ErrorData::invalid_request(
                    format!(
                        "{method} before initialize: send initialize first (or a request carrying the 2026-07-28 _meta envelope)"
                    ),
                    None,
                ))
            }
            "tools/list" => self.list(params).map(to_json),
            "tools/call" => return self.call(params, false),
            "logging/setLevel" => self.set_level(params),
            _ => Err(method_not_found(method)),
        };
        Dispatch::Reply(reply)
    }

    /// `logging/setLevel`: from now on the tools' log lines of this level or more
    /// severe go to the client.
    fn set_level(&mut self, params: &Params) -> Result<Value, ErrorData> {
        let level = string_param(params, "logging/setLevel", "level")?;
        let Ok(level) = serde_json::from_value::<LoggingLevel>(json!(level)) else {
            let names: Vec<String> = LOG_LEVELS
                .iter()
                .filter_map(|l| to_json(l).as_str().map(str::to_owned))
                .collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "logging/setLevel: unknown level {level:?}; use one of {}",
                    names.join(", ")
                ),
                None,
            ));
        };
        self.log_level = Some(level);
        Ok(to_json(EmptyResult::from(())))
    }

    fn initialize(&mut self, params: &Params) -> Result<Value, ErrorData> {
        if let Era::Handshake(version) = &self.era {
            if !self.starts_over {
                return Err(ErrorData::invalid_request(
                    format!("initialize was already received; this connection speaks {version}"),
                    None,
                ));
            }
            // What the first handshake set ends with it.
            tracing::info!(%version, "initialize again on stdio: the connection starts over");
            self.log_level = None;
            self.connection = connection_id();
        }
        let requested = string_param(params, "initialize", "protocolVersion")?;
        let version = negotiate_handshake(requested);
        tracing::info!(requested, %version, "initialize");
        self.era = Era::Handshake(version);
        self.declared = super::elicit::Declared::from_capabilities(params.get("capabilities"));
        let mut capabilities = self.with_surface(capabilities());
        if let Some(tools) = &mut capabilities.tools {
            tools.list_changed = Some(true);
        }
        capabilities.logging = Some(Default::default());
        let result = InitializeResult::new(capabilities)
            .with_protocol_version(version.clone())
            .with_server_info(server_info())
            .with_instructions(INSTRUCTIONS);
        Ok(to_json(result))
    }

    /// A request carrying the 2026-07-28 envelope.
    fn stateless(&mut self, method: &str, params: &Params) -> Dispatch {
        if let Some(error) = stateless_envelope_error(params) {
            return Dispatch::Reply(Err(error));
        }
        let reply = match method {
            "server/discover" => {
                let mut capabilities = self.with_surface(capabilities());
                if self.serves_tasks {
                    capabilities.extensions = Some(super::protocol::tasks_declaration());
                }
                let mut found = DiscoverResult::new(MODERN_VERSIONS.to_vec(), capabilities)
                    .with_cache_scope(CacheScope::Public)
                    .with_ttl_ms(0);
                found.instructions = Some(INSTRUCTIONS.into());
                Ok(to_json(found))
            }
            "tools/list" => self
                .list(params)
                .map(|tools| to_json(tools.with_ttl_ms(0).with_cache_scope(CacheScope::Public))),
            "tools/call" => return self.call(params, true),
            "subscriptions/listen" if self.host.is_some() => {
                return Dispatch::Listen(params.clone());
            }
            method if super::surface::stateless_method(method) && self.host.is_some() => {
                return Dispatch::Surface {
                    method: method.to_owned(),
                    params: params.clone(),
                    stateless: true,
                };
            }
            "ping" => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "ping was removed in protocol 2026-07-28",
                None,
            )),
            _ => Err(method_not_found(method)),
        };
        Dispatch::Reply(reply.map(stateless_result))
    }

    /// The `tools/list` result, without `resultType` (the stateless revision's
    /// results get it in [`stateless_result`]).
    fn list(&self, params: &Params) -> Result<ListToolsResult, ErrorData> {
        match params.get("cursor") {
            None | Some(Value::Null) => {
                let mut list = ListToolsResult::with_all_items(self.tools.as_ref().clone());
                list.result_type = None;
                if !self.upstreams.is_null() {
                    let mut meta = serde_json::Map::new();
                    meta.insert(
                        super::catalog::UPSTREAMS_META_KEY.into(),
                        self.upstreams.as_ref().clone(),
                    );
                    list.meta = Some(rmcp::model::MetaObject(meta));
                }
                Ok(list)
            }
            Some(_) => Err(ErrorData::invalid_params(
                "tools/list: unknown cursor (every tool is returned in the first page)",
                None,
            )),
        }
    }

    fn call(&self, params: &Params, stateless: bool) -> Dispatch {
        let scoping = Scoping {
            session: self.connection.as_deref().or(self.scoping.session),
            ..self.scoping
        };
        let call = tools::call_request(params, &scoping).and_then(|request| {
            let input = stateless.then(|| mrtr::Input::read(params)).transpose()?;
            Ok((request, tools::progress_token(params)?, input))
        });
        match call {
            Ok((request, progress_token, input)) => Dispatch::Call {
                request,
                stateless,
                log_level: self.log_level,
                progress_token,
                input,
            },
            Err(error) => Dispatch::Reply(Err(error)),
        }
    }
}

/// The string parameter `name` of a `method` request, or `-32602` naming what is
/// wrong with it.
fn string_param<'p>(params: &'p Params, method: &str, name: &str) -> Result<&'p str, ErrorData> {
    match params.get(name) {
        Some(Value::String(value)) => Ok(value),
        Some(other) => Err(ErrorData::invalid_params(
            format!(
                "{method}: {name:?} must be a string, not {}",
                type_name(other)
            ),
            None,
        )),
        None => Err(ErrorData::invalid_params(
            format!("{method}: {name:?} is missing"),
            None,
        )),
    }
}

/// What is wrong with a request's 2026-07-28 envelope, if anything: a missing key
/// is `-32602`, an unserved version `-32022` naming the supported ones.
/// Why a stateless request without a valid envelope is refused: what
/// [`stateless_envelope_error`] finds, else that the envelope is missing.
pub(crate) fn envelope_refusal(params: &Params) -> ErrorData {
    stateless_envelope_error(params).unwrap_or_else(|| {
        ErrorData::invalid_params("params._meta is missing the request envelope", None)
    })
}

pub(crate) fn stateless_envelope_error(params: &Params) -> Option<ErrorData> {
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Some(ErrorData::invalid_params(
            format!(
                "params._meta must be an object carrying {PROTOCOL_VERSION_META_KEY:?} and {CLIENT_CAPABILITIES_META_KEY:?}"
            ),
            None,
        ));
    };
    let missing: Vec<&str> = [PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY]
        .into_iter()
        .filter(|k| !meta.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Some(ErrorData::invalid_params(
            format!(
                "params._meta is missing the required envelope key(s): {}",
                missing.join(", ")
            ),
            None,
        ));
    }
    match &meta[PROTOCOL_VERSION_META_KEY] {
        Value::String(v) if MODERN_VERSIONS.iter().any(|m| m.as_str() == v) => None,
        Value::String(v) => Some(ErrorData::new(
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            format!(
                "unsupported protocol version {v:?}; this server speaks {} statelessly and {} through initialize",
                version_list(MODERN_VERSIONS),
                version_list(handshake_versions())
            ),
            Some(json!({ "supported": MODERN_VERSIONS, "requested": v })),
        )),
        other => Some(ErrorData::invalid_params(
            format!(
                "params._meta[{PROTOCOL_VERSION_META_KEY:?}] must be a string, not {}",
                type_name(other)
            ),
            None,
        )),
    }
}

/// Adds what every 2026-07-28 result carries: `resultType` and the server's identity
/// in `_meta`. On JSON, since it stamps results of every type, a tool's among them.
pub(crate) fn stateless_result(mut result: Value) -> Value {
    if let Value::Object(map) = &mut result {
        map.entry("resultType")
            .or_insert_with(|| to_json(ResultType::COMPLETE));
        let meta = map.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(SERVER_INFO_META_KEY.into(), to_json(server_info()));
        }
    }
    result
}

/// `reply` to `method` as the connection's revision has it: on the stateless wire
/// with its `resultType`, and a list's or a read's caching directives (`ttlMs` 0:
/// an upstream's answer may change at any time).
pub(crate) fn passed_on(
    method: &str,
    reply: Result<Value, ErrorData>,
    stateless: bool,
) -> Result<Value, ErrorData> {
    if !stateless {
        return reply;
    }
    reply.map(|mut result| {
        let scope = match method {
            "resources/read" => Some("private"),
            "resources/list" | "resources/templates/list" | "prompts/list" => Some("public"),
            _ => None,
        };
        if let (Some(scope), Some(object)) = (scope, result.as_object_mut()) {
            object.insert("ttlMs".into(), json!(0));
            object.insert("cacheScope".into(), json!(scope));
        }
        stateless_result(result)
    })
}

/// What the server offers: tools (the handshake adds `listChanged` and logging).
fn capabilities() -> ServerCapabilities {
    let mut capabilities = ServerCapabilities::default();
    capabilities.tools = Some(ToolsCapability::default());
    capabilities
}

fn server_info() -> Implementation {
    Implementation::new("justonce", env!("CARGO_PKG_VERSION")).with_title("justonce")
}

fn method_not_found(method: &str) -> ErrorData {
    if method.starts_with("tasks/") {
        return ErrorData::new(
            EXTENSION_NOT_SUPPORTED,
            format!(
                "{method}: this server does not declare the tasks extension (io.modelcontextprotocol/tasks); call the tool without a task"
            ),
            None,
        );
    }
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: {method}"),
        None,
    )
}

/// The code of a request for an extension the server does not declare (the Tasks
/// extension's `tasks/*` here), which the 2026-07-28 suite checks for instead of
/// -32601.
const EXTENSION_NOT_SUPPORTED: ErrorCode = ErrorCode(-32021);

#[cfg(test)]
#[allow(deprecated)]
mod tests {
    use super::*;

    /// One tool, `t`.
    fn tools() -> Arc<Vec<Tool>> {
        Arc::new(vec![Tool::new_with_raw("t", None, Arc::default())])
    }

    fn params(value: Value) -> Params {
        value.as_object().unwrap().clone()
    }

    fn reply(dispatch: Dispatch) -> Result<Value, ErrorData> {
        match dispatch {
            Dispatch::Reply(reply) => reply,
            Dispatch::Call { .. } => panic!("expected a reply, got a call"),
            Dispatch::Surface { method, .. } => panic!("expected a reply, got {method} passed on"),
            Dispatch::Listen(_) => panic!("expected a reply, got a listen stream"),
        }
    }

    fn envelope(version: &str) -> Value {
        json!({ PROTOCOL_VERSION_META_KEY: version, CLIENT_CAPABILITIES_META_KEY: {} })
    }

    #[test]
    fn tools_are_refused_before_initialize_and_served_after() {
        let mut session = Session::new(tools(), Scoping::default());
        let early = reply(session.request("tools/list", &Params::new())).unwrap_err();
        assert_eq!(early.code, ErrorCode::INVALID_REQUEST);
        assert!(early.message.contains("initialize"), "{}", early.message);
        assert_eq!(
            reply(session.request("ping", &Params::new())).unwrap(),
            json!({})
        );

        let init = reply(session.request(
            "initialize",
            &params(json!({"protocolVersion": "2025-06-18"})),
        ))
        .unwrap();
        assert_eq!(init["protocolVersion"], "2025-06-18");
        let list = reply(session.request("tools/list", &Params::new())).unwrap();
        assert_eq!(list["tools"][0]["name"], "t");
        assert!(
            list.get("resultType").is_none(),
            "handshake results are not stamped"
        );
        let again = reply(session.request(
            "initialize",
            &params(json!({"protocolVersion": "2025-06-18"})),
        ))
        .unwrap_err();
        assert_eq!(again.code, ErrorCode::INVALID_REQUEST);
        let modern = reply(session.request(
            "tools/list",
            &params(json!({"_meta": envelope("2026-07-28")})),
        ))
        .unwrap_err();
        assert_eq!(modern.code, ErrorCode::INVALID_REQUEST);
    }

    #[test]
    fn set_level_takes_the_syslog_names_after_initialize_and_calls_carry_it() {
        let mut session = Session::new(tools(), Scoping::default());
        let early = reply(session.request("logging/setLevel", &params(json!({"level": "info"}))));
        assert_eq!(early.unwrap_err().code, ErrorCode::INVALID_REQUEST);
        let init = reply(session.request(
            "initialize",
            &params(json!({"protocolVersion": "2025-11-25"})),
        ))
        .unwrap();
        assert_eq!(init["capabilities"]["logging"], json!({}));
        let bad = reply(session.request("logging/setLevel", &params(json!({"level": "loud"}))));
        let bad = bad.unwrap_err();
        assert_eq!(bad.code, ErrorCode::INVALID_PARAMS);
        assert!(bad.message.contains("warning"), "{}", bad.message);
        assert_eq!(session.log_level(), None);
        let set = reply(session.request("logging/setLevel", &params(json!({"level": "warning"}))));
        assert_eq!(set.unwrap(), json!({}));
        assert_eq!(session.log_level(), Some(LoggingLevel::Warning));
        match session.request("tools/call", &params(json!({"name": "t"}))) {
            Dispatch::Call { log_level, .. } => assert_eq!(log_level, Some(LoggingLevel::Warning)),
            other => panic!("expected a call, got {other:?}"),
        }
    }

    #[test]
    fn a_stateless_connection_discovers_and_stamps_every_result() {
        let mut session = Session::new(tools(), Scoping::default());
        let found = reply(session.request(
            "server/discover",
            &params(json!({"_meta": envelope("2026-07-28")})),
        ))
        .unwrap();
        assert_eq!(found["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(found["resultType"], "complete");
        assert_eq!(found["_meta"][SERVER_INFO_META_KEY]["name"], "justonce");

        let list = reply(session.request(
            "tools/list",
            &params(json!({"_meta": envelope("2026-07-28")})),
        ))
        .unwrap();
        assert_eq!(list["tools"][0]["name"], "t");
        assert_eq!(list["resultType"], "complete");

        let old = reply(session.request(
            "tools/list",
            &params(json!({"_meta": envelope("2031-01-01")})),
        ))
        .unwrap_err();
        assert_eq!(old.code, ErrorCode::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(old.data.unwrap()["requested"], "2031-01-01");

        let bare = reply(session.request("tools/list", &Params::new())).unwrap_err();
        assert_eq!(bare.code, ErrorCode::INVALID_PARAMS);
        let init = reply(session.request(
            "initialize",
            &params(json!({"protocolVersion": "2025-11-25"})),
        ))
        .unwrap_err();
        assert_eq!(init.code, ErrorCode::UNSUPPORTED_PROTOCOL_VERSION);
        let ping =
            reply(session.request("ping", &params(json!({"_meta": envelope("2026-07-28")}))))
                .unwrap_err();
        assert_eq!(ping.code, ErrorCode::METHOD_NOT_FOUND);
    }

    /// On stdio a second `initialize` starts the connection over (a client that
    /// re-enters its toolset on the same pipe); on an HTTP session it is refused.
    #[test]
    fn a_second_initialize_starts_a_stdio_connection_over_and_is_refused_on_http() {
        let init = |session: &mut Session<'_>| {
            reply(session.request(
                "initialize",
                &params(json!({"protocolVersion": "2025-06-18"})),
            ))
        };
        let mut stdio = Session::new(tools(), Scoping::default()).over_stdio();
        init(&mut stdio).unwrap();
        reply(stdio.request("logging/setLevel", &params(json!({"level": "debug"})))).unwrap();
        init(&mut stdio).expect("a new handshake on the same pipe");
        assert_eq!(
            stdio.log_level, None,
            "the first handshake's level ended with it"
        );
        reply(stdio.request("tools/list", &Params::new())).expect("served after it");

        let mut http = Session::new(tools(), Scoping::default());
        init(&mut http).unwrap();
        let again = init(&mut http).unwrap_err();
        assert!(
            again.message.contains("already received"),
            "{}",
            again.message
        );
    }

    /// `server/discover` declares the Tasks extension where tasks are served (HTTP),
    /// not on stdio, whose `tasks/*` are -32021.
    #[test]
    fn discover_declares_tasks_over_http_and_not_over_stdio() {
        let discover = |session: &mut Session<'_>| {
            let meta = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            });
            reply(session.request("server/discover", &params(json!({ "_meta": meta })))).unwrap()
        };
        let http = discover(&mut Session::new(tools(), Scoping::default()));
        assert_eq!(
            http["capabilities"]["extensions"],
            json!({ "io.modelcontextprotocol/tasks": {} }),
            "{http}"
        );
        let mut stdio = Session::new(tools(), Scoping::default()).over_stdio();
        let found = discover(&mut stdio);
        assert!(found["capabilities"].get("extensions").is_none(), "{found}");
    }

    /// A client is asked only if its `initialize` declared `elicitation`; a new
    /// handshake on the same pipe says it anew.
    #[test]
    fn initialize_remembers_whether_the_client_declared_elicitation() {
        let mut stdio = Session::new(tools(), Scoping::default()).over_stdio();
        assert!(!stdio.elicits());
        let init = |session: &mut Session<'_>, capabilities: Value| {
            reply(session.request(
                "initialize",
                &params(json!({"protocolVersion": "2025-11-25", "capabilities": capabilities})),
            ))
            .unwrap();
        };
        init(&mut stdio, json!({"elicitation": {"form": {}}}));
        assert!(stdio.elicits());
        init(&mut stdio, json!({"sampling": {}}));
        assert!(!stdio.elicits(), "the new handshake declared none");
        let resumed = Session::resume(tools(), Scoping::default(), stdio.era(), None);
        assert!(!resumed.elicits());
        assert!(resumed.eliciting(true).elicits());
    }

    /// `tasks/*` on this server, which does not declare the Tasks extension, is an
    /// extension it does not support (-32021), in either era; another unknown
    /// method stays -32601.
    #[test]
    fn a_task_method_is_an_unsupported_extension_and_another_method_unknown() {
        let mut session = Session::new(tools(), Scoping::default());
        reply(session.request(
            "initialize",
            &params(json!({"protocolVersion": "2025-11-25"})),
        ))
        .unwrap();
        let e = reply(session.request("tasks/get", &params(json!({"taskId": "t"})))).unwrap_err();
        assert_eq!(e.code.0, -32021, "{}", e.message);
        let e = reply(session.request("resources/list", &Params::new())).unwrap_err();
        assert_eq!(e.code, ErrorCode::METHOD_NOT_FOUND);

        let mut stateless = Session::new(tools(), Scoping::default());
        let e = reply(stateless.request(
            "tasks/get",
            &params(json!({"taskId": "t", "_meta": envelope("2026-07-28")})),
        ))
        .unwrap_err();
        assert_eq!(e.code.0, -32021, "{}", e.message);
    }

    /// A stateless call carries what its client brought for its tool's questions; a
    /// session's carries none, and a malformed `inputResponses` runs nothing.
    #[test]
    fn a_stateless_call_carries_its_answers_and_a_malformed_one_is_invalid_params() {
        let mut stateless = Session::new(tools(), Scoping::default());
        let call = params(json!({
            "name": "t",
            "inputResponses": { "confirm": { "action": "decline" } },
            "requestState": "k.0.00ff",
            "_meta": envelope("2026-07-28"),
        }));
        match stateless.request("tools/call", &call) {
            Dispatch::Call { input, .. } => assert!(input.is_some()),
            other => panic!("expected a call, got {other:?}"),
        }
        let malformed = params(json!({
            "name": "t", "inputResponses": [1], "_meta": envelope("2026-07-28"),
        }));
        let e = reply(stateless.request("tools/call", &malformed)).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert!(e.message.contains("inputResponses"), "{}", e.message);

        let mut session = Session::new(tools(), Scoping::default());
        reply(session.request(
            "initialize",
            &params(json!({"protocolVersion": "2025-11-25"})),
        ))
        .unwrap();
        match session.request(
            "tools/call",
            &params(json!({"name": "t", "inputResponses": [1]})),
        ) {
            Dispatch::Call { input, .. } => assert!(input.is_none()),
            other => panic!("expected a call, got {other:?}"),
        }
    }

    #[test]
    fn a_discover_without_the_envelope_is_unknown_so_clients_fall_back_to_initialize() {
        let mut session = Session::new(Arc::default(), Scoping::default());
        let e = reply(session.request("server/discover", &Params::new())).unwrap_err();
        assert_eq!(e.code, ErrorCode::METHOD_NOT_FOUND);
    }

    #[test]
    fn a_missing_envelope_key_is_named() {
        let mut session = Session::new(Arc::default(), Scoping::default());
        let e = reply(session.request(
            "tools/list",
            &params(json!({"_meta": {PROTOCOL_VERSION_META_KEY: "2026-07-28"}})),
        ))
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert!(
            e.message.contains(CLIENT_CAPABILITIES_META_KEY),
            "{}",
            e.message
        );
    }
}
