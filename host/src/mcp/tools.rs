//! What MCP sees of justonce's tools: `tools/list` entries, the `tools/call`
//! parameters read into a [`CallRequest`], and a call's answer as a `CallToolResult`
//! or a protocol error.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ProgressToken, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use super::elicit::ELICIT_METHOD;
use super::protocol::{ErrorCode, ErrorData, Params, to_json, type_name};
use crate::ask::{Question, UpstreamRequest};
use crate::call::{CallRequest, CallResponse};
use crate::error::{EndsBy, Error};
use crate::host::Host;
use crate::keys::InvocationKey;
use crate::outcome::Outcome;
use crate::retention::Unscoped;
#[cfg(doc)]
use crate::runtime::Runtime;

/// Request `_meta` key: the conversation (the window in which a repeat is a
/// duplicate). Overrides the server's `--conversation`.
pub const CONVERSATION_META_KEY: &str = "dev.justonce/conversation";
/// Request `_meta` key: an explicit idempotency key instead of the derived one.
pub const IDEMPOTENCY_KEY_META_KEY: &str = "dev.justonce/idempotency-key";
/// `tools/call` parameter: an explicit idempotency key (SEP-3182), the same as
/// `_meta["dev.justonce/idempotency-key"]`; naming two different keys is an error.
pub const IDEMPOTENCY_KEY_PARAM: &str = "idempotencyKey";
/// Result `_meta` key: `true` when the outcome was saved by an earlier attempt and
/// nothing ran now.
pub const REPLAYED_META_KEY: &str = "dev.justonce/replayed";
/// Result `_meta` key: the invocation key the call ran (or was found) under.
pub const KEY_META_KEY: &str = "dev.justonce/key";

/// Tool `_meta` key in `tools/list`: how long a repeat of the tool's call is
/// deduplicated, `{"conversation_seconds": …, "unscoped_seconds": …}` (in a
/// conversation, and without one).
pub const RETENTION_META_KEY: &str = "dev.justonce/retention";

/// The `tools/list` entries: name, description, the argument schema from the tool's
/// `describe` (and the result's, `outputSchema`, if it declared one) as
/// [`listed_schema`] shows it, `idempotentHint`, which every tool behind the guard honours within
/// its window, and that window in `_meta["dev.justonce/retention"]`. A tool marked
/// read-only has `readOnlyHint` instead: nothing of its calls is saved or
/// deduplicated (MCP reads `idempotentHint` only when `readOnlyHint` is false).
/// The tools are the ones new calls get now ([`Runtime::current_tools`]), without
/// those kept from MCP (`[tools.NAME] mcp = false`).
pub(crate) fn descriptors(host: &Host) -> Vec<Tool> {
    let retention = host.retention();
    host.runtime()
        .current_tools()
        .iter()
        .filter(|tool| host.exposed_over_mcp(&tool.name))
        .map(|tool| {
            let schema = input_schema(listed_schema(&tool.input_schema));
            let mut entry = Tool::new(tool.name.clone(), tool.description.clone(), schema);
            // The loader takes only an object's schema as a tool's output schema.
            entry.output_schema =
                tool.output_schema
                    .as_ref()
                    .map(listed_schema)
                    .and_then(|schema| match schema {
                        Value::Object(schema) => Some(Arc::new(schema)),
                        _ => None,
                    });
            let annotations = ToolAnnotations::new();
            entry.annotations = Some(if tool.read_only {
                annotations.read_only(true)
            } else {
                let mut meta = JsonObject::new();
                let window = retention.of_tool(&tool.name).to_json();
                meta.insert(RETENTION_META_KEY.into(), window);
                entry.meta = Some(meta.into());
                annotations.idempotent(true)
            });
            entry
        })
        .collect()
}

/// The error of a call of `name`, a tool kept from MCP (`[tools.NAME] mcp =
/// false`): the one an unknown tool gets, naming only the tools MCP offers, so a
/// client learns nothing of the hidden one.
pub(crate) fn hidden_tool(host: &Host, name: &str) -> Error {
    let offered: Vec<String> = host
        .runtime()
        .current_tools()
        .iter()
        .filter(|tool| host.exposed_over_mcp(&tool.name))
        .map(|tool| tool.name.clone())
        .collect();
    Error::UnknownTool {
        name: name.to_owned(),
        available: if offered.is_empty() {
            "(none)".into()
        } else {
            offered.join(", ")
        },
    }
}

/// A schema as `tools/list` shows it: in the portable form of `justonce tools`
/// (`$ref`s inlined, formats a model's strict mode accepts), keeping the `$schema` and
/// `$defs` the tool declared, as SEP-1613 asks of MCP's JSON Schema 2020-12 dialect.
fn listed_schema(schema: &Value) -> Value {
    crate::runtime::portable_schema_with_dialect(schema)
}

/// MCP requires `"type": "object"` at the root of an input schema; a tool's schema
/// always describes an object (arguments are one), so add it where a generator left
/// it implicit.
fn input_schema(schema: Value) -> JsonObject {
    let mut map = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    map.entry("type").or_insert_with(|| json!("object"));
    map
}

/// HTTP request header: the conversation, as `_meta["dev.justonce/conversation"]`
/// (plain, or `=?base64?…?=` for text that is not ASCII). For frameworks that set
/// headers but not `_meta`.
pub const CONVERSATION_HEADER: &str = "Justonce-Conversation";
/// HTTP request header: an explicit idempotency key, as
/// `_meta["dev.justonce/idempotency-key"]` (the IETF draft's header: a quoted
/// string, or Stripe's bare token). Per call: the same key on two different calls is a
/// mismatch.
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// What the HTTP headers of a `tools/call` say of its scope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FromHeaders {
    /// [`CONVERSATION_HEADER`], decoded.
    pub conversation: Option<String>,
    /// [`IDEMPOTENCY_KEY_HEADER`], unquoted.
    pub key: Option<String>,
}

/// How a connection's calls find their scope besides their own parameters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scoping<'a> {
    /// The server's default conversation (`serve --conversation`).
    pub conversation: Option<&'a str>,
    /// What the request's headers say; `None` on stdio.
    pub headers: Option<&'a FromHeaders>,
    /// What a call that names no conversation and no key gets.
    pub unscoped: Unscoped,
    /// The MCP session the call came on (the `Mcp-Session-Id`, or the stdio
    /// connection's own id), its conversation under [`Unscoped::Session`].
    pub session: Option<&'a str>,
}

/// The conversation of calls on MCP session `id` that name none, under
/// [`Unscoped::Session`]: a digest of the id, not the id, which the journal, the logs
/// and the console would otherwise show to whoever reads them.
pub(crate) fn session_conversation(id: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(id.as_bytes());
    format!("mcp-session:{}", hex::encode(&digest[..12]))
}

/// Reads `tools/call` parameters. The conversation comes from
/// `_meta["dev.justonce/conversation"]` or the `Justonce-Conversation` header,
/// else the server's default (else the host's default scope); an explicit key from
/// `params.idempotencyKey`, `_meta["dev.justonce/idempotency-key"]` or the
/// `Idempotency-Key` header. Where two of them name different conversations or keys
/// the call is refused: a scope is what makes a retry a retry, so the server does not
/// pick one of two. A call that names neither a conversation nor a key is refused
/// with the glue that names one when `scoping.unscoped` says so.
pub(crate) fn call_request(
    params: &Params,
    scoping: &Scoping<'_>,
) -> Result<CallRequest, ErrorData> {
    let name = match params.get("name") {
        Some(Value::String(name)) => name.clone(),
        Some(other) => {
            return Err(ErrorData::invalid_params(
                format!(
                    "tools/call: \"name\" must be a string, not {}",
                    type_name(other)
                ),
                None,
            ));
        }
        None => {
            return Err(ErrorData::invalid_params(
                "tools/call: \"name\" is missing",
                None,
            ));
        }
    };
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(args @ Value::Object(_)) => args.to_string(),
        Some(other) => {
            return Err(ErrorData::invalid_params(
                format!(
                    "tools/call: \"arguments\" must be an object, not {}",
                    type_name(other)
                ),
                None,
            ));
        }
    };
    let meta = match params.get("_meta") {
        None | Some(Value::Null) => None,
        Some(Value::Object(meta)) => Some(meta),
        Some(other) => {
            return Err(ErrorData::invalid_params(
                format!(
                    "tools/call: \"_meta\" must be an object, not {}",
                    type_name(other)
                ),
                None,
            ));
        }
    };
    let mut request = CallRequest::new(name, arguments);
    let headers = scoping.headers;
    let conversation = agreed(
        "conversations",
        [
            (
                format!("_meta[\"{CONVERSATION_META_KEY}\"]"),
                meta_string(meta, CONVERSATION_META_KEY)?,
            ),
            (
                format!("the {CONVERSATION_HEADER} header"),
                headers.and_then(|h| h.conversation.clone()),
            ),
        ],
    )?;
    request.conversation = conversation.or_else(|| scoping.conversation.map(str::to_owned));
    request.key = agreed(
        "keys",
        [
            (
                format!("\"{IDEMPOTENCY_KEY_PARAM}\""),
                non_empty_string(
                    params.get(IDEMPOTENCY_KEY_PARAM),
                    &format!("\"{IDEMPOTENCY_KEY_PARAM}\""),
                )?,
            ),
            (
                format!("_meta[\"{IDEMPOTENCY_KEY_META_KEY}\"]"),
                meta_string(meta, IDEMPOTENCY_KEY_META_KEY)?,
            ),
            (
                format!("the {IDEMPOTENCY_KEY_HEADER} header"),
                headers.and_then(|h| h.key.clone()),
            ),
        ],
    )?;
    if !request.is_scoped() {
        match (scoping.unscoped, scoping.session) {
            (Unscoped::Refuse, _) => return Err(unscoped_refused(headers.is_some())),
            (Unscoped::Session | Unscoped::SessionOrWindow, Some(session)) => {
                request.conversation = Some(session_conversation(session));
            }
            (Unscoped::Session, None) => return Err(sessionless_refused(headers.is_some())),
            (Unscoped::SessionOrWindow, None) => {
                static TOLD: std::sync::Once = std::sync::Once::new();
                TOLD.call_once(|| {
                    tracing::warn!(
                        "a call with no MCP session (a client of the stateless revision) and no conversation runs in the unscoped window, as [mcp] unscoped = \"session-or-window\" says (logged once)"
                    );
                });
            }
            (Unscoped::Window, _) => {}
        }
    }
    Ok(request)
}

/// The one value the places a call may name it in agree on (`None` if none names
/// it), or `-32602` naming the two that differ.
fn agreed<const N: usize>(
    what: &str,
    places: [(String, Option<String>); N],
) -> Result<Option<String>, ErrorData> {
    let mut found: Option<(String, String)> = None;
    for (place, value) in places {
        let Some(value) = value else { continue };
        match &found {
            Some((first, seen)) if *seen != value => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "tools/call: {first} and {place} name different {what} ({seen:?} and {value:?}); nothing ran"
                    ),
                    None,
                ));
            }
            Some(_) => {}
            None => found = Some((place, value)),
        }
    }
    Ok(found.map(|(_, value)| value))
}

/// The refusal of a call that names no conversation on a server that wants one: what
/// to send, and the lines that send it from each framework (`http`: the request came
/// over Streamable HTTP, where a header is the easy way; else stdio, where the server
/// is started per conversation or `_meta` is set per call).
pub(crate) fn unscoped_refused(http: bool) -> ErrorData {
    name_the_conversation(
        http,
        "unscoped",
        "this server refuses calls that name no conversation ([mcp] unscoped = \"refuse\"); nothing ran. \
         Name the conversation (the run or task your agent works on, an id that is the same when that run is \
         executed again after a crash, not a new one per attempt) in",
        "",
    )
}

/// The refusal of a call that names no conversation, under `[mcp] unscoped =
/// "session"`, from a client that has no session to scope it by (one of the stateless
/// 2026-07-28 revision: no `Mcp-Session-Id`, no `initialize`). The short window would
/// be a silent, wrong fallback, so nothing runs and the message says both fixes.
pub(crate) fn sessionless_refused(http: bool) -> ErrorData {
    name_the_conversation(
        http,
        "no_session",
        "this client speaks the stateless revision and has no session, and this server scopes calls \
         that name no conversation by their session ([mcp] unscoped = \"session\"); nothing ran. Send a \
         conversation id in",
        ", or have the operator set [mcp] unscoped = \"window\" (or \"session-or-window\", which gives \
         such calls the short window and logs it)",
    )
}

/// A `-32602` refusal of kind `kind`: `why` and the places to name the conversation
/// in on this transport, `or_else`, then each framework's glue.
fn name_the_conversation(http: bool, kind: &str, why: &str, or_else: &str) -> ErrorData {
    let (where_, glue) = if http {
        (
            format!("the {CONVERSATION_HEADER} header or _meta[\"{CONVERSATION_META_KEY}\"]"),
            UNSCOPED_GLUE_HTTP,
        )
    } else {
        (
            format!("_meta[\"{CONVERSATION_META_KEY}\"] or `justonce serve --conversation ID`"),
            UNSCOPED_GLUE_STDIO,
        )
    };
    ErrorData::invalid_params(
        format!("tools/call: {why} {where_}{or_else}. {glue}"),
        Some(json!({
            "kind": kind,
            "retry_safe": false,
            "header": if http { Some(CONVERSATION_HEADER) } else { None },
            "meta": CONVERSATION_META_KEY,
        })),
    )
}

/// The glue of [`unscoped_refused`] over HTTP: each line is the docs' recipe
/// (tests/frameworks/recipes.py runs them).
const UNSCOPED_GLUE_HTTP: &str = "\
With the Python helpers (clients/python): justonce_client.FRAMEWORK.http(url, token, conversation=ID), FRAMEWORK one of pydantic_ai, openai_agents, langchain, llama_index. Without them: \
pydantic-ai: MCPToolset(url, headers=lambda ctx: {\"Justonce-Conversation\": ctx.deps.conversation_id}). \
OpenAI Agents SDK: MCPServerStreamableHttp(params={\"url\": url, \"headers\": {\"Justonce-Conversation\": conversation_id}}). \
langchain-mcp-adapters: MultiServerMCPClient({\"justonce\": {\"transport\": \"streamable_http\", \"url\": url, \"headers\": {\"Justonce-Conversation\": conversation_id}}}).";

/// The glue of [`unscoped_refused`] over stdio.
const UNSCOPED_GLUE_STDIO: &str = "\
With the Python helpers (clients/python): justonce_client.FRAMEWORK.stdio(command, conversation=ID), FRAMEWORK one of pydantic_ai, openai_agents, langchain, llama_index. Without them: \
pydantic-ai: MCPToolset(transport, process_tool_call=lambda ctx, call_tool, name, args: call_tool(name, args, metadata={\"dev.justonce/conversation\": ctx.deps.conversation_id})). \
OpenAI Agents SDK: MCPServerStdio(params, tool_meta_resolver=lambda meta: {\"dev.justonce/conversation\": meta.run_context.context.conversation_id}). \
langchain-mcp-adapters: one server per conversation, args=[\"serve\", \"--conversation\", conversation_id].";

/// The `_meta.progressToken` of `tools/call` parameters: a string or an integer
/// that an `i64` holds (rmcp's `ProgressToken`), or none.
pub(crate) fn progress_token(params: &Params) -> Result<Option<ProgressToken>, ErrorData> {
    let token = match params
        .get("_meta")
        .and_then(|meta| meta.get("progressToken"))
    {
        None | Some(Value::Null) => return Ok(None),
        Some(token) => token,
    };
    // rmcp also reads `2.0` as 2; the token goes back as the client sent it.
    let exact = token.is_string() || token.is_i64();
    match serde_json::from_value(token.clone()) {
        Ok(read) if exact => Ok(Some(read)),
        _ => Err(ErrorData::invalid_params(
            format!(
                "tools/call: _meta.progressToken must be a string or a 64-bit integer, not {token}"
            ),
            None,
        )),
    }
}

fn meta_string(meta: Option<&Map<String, Value>>, key: &str) -> Result<Option<String>, ErrorData> {
    non_empty_string(meta.and_then(|m| m.get(key)), &format!("_meta[\"{key}\"]"))
}

fn non_empty_string(value: Option<&Value>, what: &str) -> Result<Option<String>, ErrorData> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(ErrorData::invalid_params(
            format!("tools/call: {what} must not be empty"),
            None,
        )),
        Some(other) => Err(ErrorData::invalid_params(
            format!(
                "tools/call: {what} must be a string, not {}",
                type_name(other)
            ),
            None,
        )),
    }
}

/// A call's answer as MCP sees it.
///
/// An outcome (the tool's result, its error, a trap) is a `CallToolResult`, the JSON
/// as text plus `structuredContent`, `isError` for a failure. A call that produced no
/// outcome but that the agent must read (invalid arguments, mismatch, in progress,
/// outcome unknown, divergence, lease lost) is a `CallToolResult` with `isError` and
/// the structured error `{kind, message, retry_safe}`. An unknown tool, an invalid
/// key or a request state this host did not make is `-32602`; a failure of the host
/// itself is `-32603`. A tool's question waiting for its answers is, on the stateless
/// wire, an `input_required` result ([`input_required`], `mcp::mrtr`); elsewhere a
/// tool error (a session's client is asked while the call runs, `mcp::elicit`).
///
/// `any_structured`: the protocol revision allows any JSON as `structuredContent`
/// (2026-07-28); earlier ones only an object.
///
/// A failure of the host itself goes to the log with an error id; a `remote` caller
/// (over HTTP) gets what happened and that id, never the detail (a database URL, a
/// driver's or the operating system's message), which stays in the log.
pub(crate) fn call_result(
    result: Result<CallResponse, Error>,
    any_structured: bool,
    remote: bool,
) -> Result<Value, ErrorData> {
    match result {
        Ok(response) => {
            let key = Some(response.key.to_string());
            let replayed = response.replayed;
            let failed = !response.outcome.is_success();
            let mut result = match response.outcome {
                Outcome::Success {
                    result,
                    content: Some(content),
                } => rich_result(result, content, replayed, key, any_structured),
                Outcome::Success {
                    result,
                    content: None,
                } => tool_result(result, false, replayed, key, any_structured),
                Outcome::ToolError {
                    code,
                    details: Some(details),
                    ..
                } if code == crate::upstream::UPSTREAM_ERROR
                    && details.get("content").is_some_and(Value::is_array) =>
                {
                    upstream_error(details, replayed, key, any_structured)
                }
                failure => {
                    tool_result(failure.to_agent_json(), true, replayed, key, any_structured)
                }
            };
            if replayed {
                add_replay_note(&mut result, failed);
            }
            Ok(result)
        }
        Err(error) => match &error {
            // `CannotResolve` and `CannotOperate` come from `justonce resolve`, `forget`
            // and `abandon`, never from a call.
            Error::UnknownTool { .. }
            | Error::InvalidKey(_)
            | Error::CannotResolve { .. }
            | Error::InputStateInvalid(_)
            | Error::CannotOperate { .. } => Err(ErrorData::invalid_params(
                error.to_string(),
                Some(error.to_agent_json()),
            )),
            // The stateless revision's (`any_structured`) multi round-trip request:
            // the same call again with the answers resumes it (`mcp::mrtr`).
            Error::InputRequired {
                key,
                questions,
                requests,
                state,
                ..
            } if any_structured => Ok(input_required(key, (questions, requests), state)),
            Error::InvalidArguments { .. }
            | Error::Mismatch { .. }
            | Error::InProgress { .. }
            | Error::Busy { .. }
            | Error::OutcomeUnknown { .. }
            | Error::NotPerformed { .. }
            | Error::Unavailable { .. }
            | Error::Divergence { .. }
            | Error::InputRequired { .. }
            | Error::InputUnavailable { .. }
            | Error::LeaseLost { .. } => {
                let mut payload = error.to_agent_json();
                let note = retry_note(&error);
                if let Some((_, Some(wait))) = note {
                    payload["error"]["retry_after_s"] = json!(wait);
                }
                let mut result = tool_result(
                    payload,
                    true,
                    false,
                    error.key().map(ToString::to_string),
                    any_structured,
                );
                if let Some((note, wait)) = note {
                    let wait = wait.map(|w| w.to_string()).unwrap_or_default();
                    add_note(&mut result, &note.replace("{wait}", &wait));
                }
                Ok(result)
            }
            // `Config` comes from reading the configuration file, and `ReservedProvider`
            // from building the host, before any call.
            Error::Load { .. }
            | Error::Config { .. }
            | Error::ReservedProvider { .. }
            | Error::DuplicateTool { .. }
            | Error::Store { .. }
            | Error::Postgres { .. }
            | Error::NewerSchema { .. }
            | Error::JournalPoisoned { .. }
            | Error::Host(_) => Err(host_failure(&error, remote)),
        },
    }
}

/// MCP's `inputRequests` of `questions`, each an `elicitation/create` request under
/// the question's name, and of an upstream's `requests` (sampling, roots), each as
/// it sent it, under its name. Also the Tasks extension's (`mcp::tasks`).
pub(crate) fn input_requests(questions: &[Question], requests: &[UpstreamRequest]) -> Value {
    let asked = questions.iter().map(|q| {
        let request = json!({
            "method": ELICIT_METHOD,
            "params": { "message": q.message, "requestedSchema": q.schema },
        });
        (q.name.clone(), request)
    });
    let passed_on = requests.iter().map(|r| {
        let request = match &r.params {
            Value::Null => json!({ "method": r.method }),
            params => json!({ "method": r.method, "params": params }),
        };
        (r.name.clone(), request)
    });
    Value::Object(asked.chain(passed_on).collect())
}

/// The `input_required` result of a call `key` whose tool asks `questions` (and
/// whose upstream `requests`), the client to come back with the answers and
/// `state` (none when empty: a read's requests need none).
pub(crate) fn input_required(
    key: &InvocationKey,
    (questions, requests): (&[Question], &[UpstreamRequest]),
    state: &str,
) -> Value {
    let mut result = json!({
        "resultType": "input_required",
        "inputRequests": input_requests(questions, requests),
        "_meta": { KEY_META_KEY: key.to_string() },
    });
    if !state.is_empty() {
        result["requestState"] = json!(state);
    }
    result
}

/// The protocol error for a failure of the host itself, logged under a fresh error
/// id that the error carries too.
fn host_failure(error: &Error, remote: bool) -> ErrorData {
    let mut id = [0u8; 8];
    let _ = getrandom::fill(&mut id);
    let id = format!("err-{}", hex::encode(id));
    tracing::error!(error_id = %id, "a call failed in the host: {error:#}");
    if !remote {
        let mut data = error.to_agent_json();
        data["error_id"] = json!(id);
        return ErrorData::new(ErrorCode::INTERNAL_ERROR, error.to_string(), Some(data));
    }
    let what = match error {
        Error::Store { .. }
        | Error::Postgres { .. }
        | Error::NewerSchema { .. }
        | Error::JournalPoisoned { .. } => "the host's journal failed",
        Error::Load { .. } | Error::DuplicateTool { .. } => "a tool could not be loaded",
        Error::Config { .. } => "the host's configuration is invalid",
        _ => "the host failed",
    };
    let retry = if error.retry_safe() {
        "retrying the same call later is safe"
    } else {
        "an operator must look before a retry"
    };
    ErrorData::new(
        ErrorCode::INTERNAL_ERROR,
        format!("{what}; {retry}; the host's log has the details under error id {id}"),
        Some(json!({
            "kind": error.kind(),
            "retry_safe": error.retry_safe(),
            "error_id": id,
        })),
    )
}

/// Content `_meta` key: `true` on the text item the host adds to a tool's content
/// for the model ([`add_note`]); a client that wants the tool's items alone drops it.
pub const NOTE_META_KEY: &str = "dev.justonce/note";

/// What the model is told of a replay, after the tool's own items: frameworks keep
/// a result's text and drop its `_meta`, and a model that cannot tell "done earlier"
/// from "done now" repeats the call or apologises for an effect that happened.
const REPLAYED_NOTE: &str = "justonce: this call was already made earlier in this \
conversation with these arguments; the result above is the one it got then, replayed. \
Nothing was sent or done again. It is done: do not repeat it.";

/// [`REPLAYED_NOTE`] for a replay whose saved result has no items of its own.
const REPLAYED_EMPTY_NOTE: &str = "justonce: this call was already made earlier in this \
conversation with these arguments, and its result then was empty (no content); that \
result is replayed. Nothing was sent or done again. It is done: do not repeat it.";

/// What the model is told of a replayed failure: the same call made again fails the
/// same way for as long as its record is kept, so repeating it is no use, and nothing
/// says the failure was transient.
const REPLAYED_ERROR_NOTE: &str = "justonce: this call was already made earlier in \
this conversation with these arguments, and it failed then; the error is the one it \
got, replayed. Nothing was sent or done again. The very same call (same arguments, \
same conversation) fails the same way until its record expires: do not repeat it. \
Fix what the error names and make a different call, or tell the user it failed.";

/// What the model is told of an unknown outcome that only a person can end: a retry
/// changes nothing, so it must stop and say so.
const PERSON_MUST_RESOLVE_NOTE: &str = "justonce: the outcome is unknown: the \
downstream did not answer whether the effect happened, and it cannot be sent again \
safely or checked automatically. Stop retrying this call: it is pending until a \
person (an operator of this host) checks whether it happened, and retrying before \
then changes nothing. Do not make it again with other arguments either, which could \
do it twice. Tell the user that this action may or may not have taken effect and \
that it is waiting for an operator to confirm it.";

/// What the model is told of an unknown outcome that the user can end: the retry
/// asks them (no wait: a person answers, nothing downstream needs time).
const ASK_PERSON_NOTE: &str = "justonce: the outcome is unknown: the downstream did \
not answer whether the effect happened, and it cannot be sent again safely. Retrying \
the very same call (same arguments, same conversation) is safe: it first asks the user \
(a yes-or-no question from this server) whether it went through, and finishes the \
call from the answer, never doing it twice. Do not change the arguments, which would \
make it a new call.";

/// Rewords a replay's note in `result` for a call that named no conversation (scoped
/// by its key, or by the principal within the unscoped window), which
/// [`call_result`] cannot tell from the call's answer alone: there is no
/// conversation to speak of.
pub(crate) fn no_conversation_named(result: &mut Value) {
    if let Some(Value::Array(content)) = result.get_mut("content") {
        for item in content {
            if item["resource"]["uri"] != NOTE_URI {
                continue;
            }
            let Some(text) = item["resource"]["text"].as_str() else {
                continue;
            };
            if [REPLAYED_NOTE, REPLAYED_EMPTY_NOTE, REPLAYED_ERROR_NOTE].contains(&text) {
                let unnamed = text
                    .replace("earlier in this conversation with", "earlier with")
                    .replace("(same arguments, same conversation)", "(same arguments)");
                item["resource"]["text"] = json!(unnamed);
            }
        }
    }
}

/// What the model is told of an error that retrying the very same call resolves,
/// with the seconds to wait first (`{wait}` in the text); or of one it must stop
/// retrying (no wait: `retry_after_s` only where a retry can change anything);
/// `None` for the others.
fn retry_note(error: &Error) -> Option<(&'static str, Option<u64>)> {
    let (note, wait) = match error {
        Error::InProgress { .. } => (
            "justonce: the same call, started by an earlier attempt, is still running; \
             nothing new was started. Retrying the very same call (same arguments, same \
             conversation) is safe and returns its result once it is done: wait about \
             {wait} s first.",
            5,
        ),
        Error::OutcomeUnknown { ends_by, .. } if !ends_by.retry_helps() => {
            return Some((PERSON_MUST_RESOLVE_NOTE, None));
        }
        Error::OutcomeUnknown {
            ends_by: EndsBy::AskPerson,
            ..
        } => return Some((ASK_PERSON_NOTE, None)),
        Error::OutcomeUnknown {
            ends_by: EndsBy::Probe,
            ..
        } => (
            "justonce: the outcome is unknown: the downstream did not answer whether the \
             effect happened. Retrying the very same call (same arguments, same \
             conversation) is safe: it first asks the downstream whether the effect \
             happened, and finishes the call from its answer, never doing the effect \
             twice; wait about {wait} s first, and do not change the arguments, which \
             would make it a new call.",
            10,
        ),
        Error::OutcomeUnknown { .. } => (
            "justonce: the outcome is unknown: the downstream did not answer whether the \
             effect happened. Retrying the very same call (same arguments, same \
             conversation) is safe: it cannot do the effect twice; wait about {wait} s \
             first, and do not change the arguments, which would make it a new call.",
            30,
        ),
        Error::NotPerformed { .. } => (
            "justonce: the effect was not performed, and nothing was saved. Retrying the \
             very same call is safe once the cause is fixed: wait about {wait} s first.",
            30,
        ),
        Error::Busy { .. } => (
            "justonce: the host is busy and did not run the call. Retrying the very same \
             call is safe: wait about {wait} s first.",
            5,
        ),
        Error::LeaseLost { .. } => (
            "justonce: another host took this call over while it ran here. Retrying the \
             very same call is safe and returns that host's result: wait about {wait} s \
             first.",
            1,
        ),
        Error::InputUnavailable { .. } => (
            "justonce: the tool asked the user a question that could not be put to them \
             here, so it stopped at the question; what it did before is kept. Retrying \
             the very same call from a client that can ask the user is safe: it resumes \
             at the question and does nothing twice (wait about {wait} s first).",
            5,
        ),
        _ => return None,
    };
    Some((note, Some(wait)))
}

/// Appends the host's `note` for the model to a result's content, after the tool's
/// own items, which stay as saved (byte for byte): marked
/// `_meta["dev.justonce/note"]` and for the assistant's eyes.
fn add_note(result: &mut Value, note: &str) {
    if let Some(Value::Array(content)) = result.get_mut("content") {
        content.push(json!({
            "type": "text",
            "text": note,
            "annotations": { "audience": ["assistant"] },
            "_meta": { NOTE_META_KEY: true },
        }));
    }
}

/// The URI of the embedded resource that carries a replay's note.
pub const NOTE_URI: &str = "justonce:note";

/// Appends the note that tells the model a replay is a replay, after the tool's own
/// items, as an embedded text resource (`justonce:note`) rather than a text item:
/// clients that hand the model `structuredContent` alone whenever every item is
/// text (pydantic-ai) would drop a text note, and a replay would read as a first
/// call; a resource item makes them hand the model the content, note included.
/// Marked `_meta["dev.justonce/note"]` and for the assistant's eyes, as every note.
fn add_replay_note(result: &mut Value, failed: bool) {
    if let Some(Value::Array(content)) = result.get_mut("content") {
        let note = match (failed, content.is_empty()) {
            (true, _) => REPLAYED_ERROR_NOTE,
            (false, true) => REPLAYED_EMPTY_NOTE,
            (false, false) => REPLAYED_NOTE,
        };
        content.push(json!({
            "type": "resource",
            "resource": { "uri": NOTE_URI, "mimeType": "text/plain", "text": note },
            "annotations": { "audience": ["assistant"] },
            "_meta": { NOTE_META_KEY: true },
        }));
    }
}

/// A result of JSON `payload`: the JSON as text (for clients before
/// `structuredContent`), and as `structuredContent` where the revision allows it.
fn tool_result(
    payload: Value,
    is_error: bool,
    replayed: bool,
    key: Option<String>,
    any_structured: bool,
) -> Value {
    let text = vec![ContentBlock::text(payload.to_string())];
    let result = if is_error {
        CallToolResult::error(text)
    } else {
        CallToolResult::success(text)
    };
    to_json(finish(result, Some(payload), replayed, key, any_structured))
}

/// A result the tool gave in parts and, unless `null`, a structured result
/// besides them. The parts go out as saved, not through rmcp's `ContentBlock`
/// (which made them, see [`crate::runtime`]): a replay is the saved bytes whatever
/// the SDK's version reads into or leaves out of a block.
fn rich_result(
    structured: Value,
    content: Vec<Value>,
    replayed: bool,
    key: Option<String>,
    any_structured: bool,
) -> Value {
    let result = finish(
        CallToolResult::success(Vec::new()),
        Some(structured).filter(|s| !s.is_null()),
        replayed,
        key,
        any_structured,
    );
    let mut result = to_json(result);
    result["content"] = Value::Array(content);
    result
}

/// An upstream MCP server's own error result (`isError`), its content and
/// `structuredContent` as it sent them and as they were saved.
fn upstream_error(
    details: Value,
    replayed: bool,
    key: Option<String>,
    any_structured: bool,
) -> Value {
    let structured = details
        .get("structuredContent")
        .cloned()
        .unwrap_or(Value::Null);
    let content = match details.get("content") {
        Some(Value::Array(content)) => content.clone(),
        _ => Vec::new(),
    };
    let mut result = rich_result(structured, content, replayed, key, any_structured);
    result["isError"] = Value::Bool(true);
    result
}

/// `result` with `payload` as its `structuredContent` where the revision allows it,
/// justonce's `_meta`, and no `resultType` (the stateless revision's results get
/// theirs in `session::stateless_result`).
fn finish(
    mut result: CallToolResult,
    payload: Option<Value>,
    replayed: bool,
    key: Option<String>,
    any_structured: bool,
) -> CallToolResult {
    result.structured_content = payload.filter(|p| any_structured || p.is_object());
    let mut meta = JsonObject::new();
    meta.insert(REPLAYED_META_KEY.into(), Value::Bool(replayed));
    if let Some(key) = key {
        meta.insert(KEY_META_KEY.into(), Value::String(key));
    }
    result.meta = Some(meta.into());
    result.result_type = None;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_list_keeps_schema_and_defs_that_justonce_tools_drops() {
        let declared = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": { "address": { "$ref": "#/$defs/address" } },
            "additionalProperties": false,
            "$defs": { "address": {
                "type": "object",
                "properties": { "zip": { "type": "integer", "format": "uint32" } }
            } }
        });
        let listed = input_schema(listed_schema(&declared));
        assert_eq!(listed["$schema"], declared["$schema"], "{listed:?}");
        assert_eq!(
            listed["$defs"]["address"]["properties"]["zip"],
            json!({ "type": "integer", "minimum": 0, "maximum": 4294967295u32 }),
            "the definition is kept under its name, made portable: {listed:?}"
        );
        assert_eq!(listed["additionalProperties"], false);
        assert_eq!(
            listed["properties"]["address"]["properties"]["zip"],
            json!({ "type": "integer", "minimum": 0, "maximum": 4294967295u32 }),
            "the reference is inlined and the format made portable: {listed:?}"
        );

        // `justonce tools --json` shows the fully portable form.
        let shown = crate::runtime::portable_schema(&declared);
        assert!(shown.get("$schema").is_none(), "{shown}");
        assert!(shown.get("$defs").is_none(), "{shown}");
        assert!(!shown.to_string().contains("$ref"), "{shown}");
    }

    fn params(value: Value) -> Params {
        value.as_object().unwrap().clone()
    }

    fn defaulting(conversation: &str) -> Scoping<'_> {
        Scoping {
            conversation: Some(conversation),
            ..Scoping::default()
        }
    }

    #[test]
    fn the_conversation_comes_from_meta_before_the_server_default() {
        let p = params(json!({
            "name": "t", "arguments": {"a": 1},
            "_meta": { "dev.justonce/conversation": "conv-9", "dev.justonce/idempotency-key": "k" },
        }));
        let request = call_request(&p, &defaulting("server-default")).unwrap();
        assert_eq!(request.conversation.as_deref(), Some("conv-9"));
        assert_eq!(request.key.as_deref(), Some("k"));
        assert_eq!(request.arguments, r#"{"a":1}"#);

        let p = params(json!({ "name": "t" }));
        let request = call_request(&p, &defaulting("server-default")).unwrap();
        assert_eq!(request.conversation.as_deref(), Some("server-default"));
        assert_eq!(request.arguments, "{}");
        assert_eq!(
            call_request(&p, &Scoping::default()).unwrap().conversation,
            None
        );
    }

    #[test]
    fn an_idempotency_key_param_is_the_meta_key_and_two_different_ones_are_refused() {
        let p = params(json!({ "name": "t", "idempotencyKey": "k-1" }));
        assert_eq!(
            call_request(&p, &Scoping::default())
                .unwrap()
                .key
                .as_deref(),
            Some("k-1")
        );
        let both = params(json!({
            "name": "t", "idempotencyKey": "k-1",
            "_meta": { "dev.justonce/idempotency-key": "k-1" },
        }));
        assert_eq!(
            call_request(&both, &Scoping::default())
                .unwrap()
                .key
                .as_deref(),
            Some("k-1")
        );
        let differ = params(json!({
            "name": "t", "idempotencyKey": "k-1",
            "_meta": { "dev.justonce/idempotency-key": "k-2" },
        }));
        let e = call_request(&differ, &Scoping::default()).unwrap_err();
        assert!(e.message.contains("different keys"), "{}", e.message);
        let bad = params(json!({ "name": "t", "idempotencyKey": 7 }));
        assert!(call_request(&bad, &Scoping::default()).is_err());
    }

    #[test]
    fn headers_name_the_conversation_and_key_and_a_conflict_with_the_meta_is_refused() {
        let headers = FromHeaders {
            conversation: Some("conv-h".into()),
            key: Some("k-h".into()),
        };
        let over_http = Scoping {
            conversation: Some("server-default"),
            headers: Some(&headers),
            ..Scoping::default()
        };
        let bare = params(json!({ "name": "t" }));
        let request = call_request(&bare, &over_http).unwrap();
        assert_eq!(
            request.conversation.as_deref(),
            Some("conv-h"),
            "the header beats the server's default"
        );
        assert_eq!(request.key.as_deref(), Some("k-h"));

        // The same value in both places is one call; different ones are refused.
        let same = params(json!({
            "name": "t", "idempotencyKey": "k-h",
            "_meta": { "dev.justonce/conversation": "conv-h", "dev.justonce/idempotency-key": "k-h" },
        }));
        let request = call_request(&same, &over_http).unwrap();
        assert_eq!(
            (request.conversation.as_deref(), request.key.as_deref()),
            (Some("conv-h"), Some("k-h"))
        );
        let other_conversation =
            params(json!({ "name": "t", "_meta": { "dev.justonce/conversation": "conv-m" } }));
        let e = call_request(&other_conversation, &over_http).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert!(
            e.message.contains("Justonce-Conversation")
                && e.message.contains("different conversations"),
            "{}",
            e.message
        );
        let other_key = params(json!({ "name": "t", "idempotencyKey": "k-p" }));
        let e = call_request(&other_key, &over_http).unwrap_err();
        assert!(
            e.message.contains("Idempotency-Key") && e.message.contains("different keys"),
            "{}",
            e.message
        );
    }

    #[test]
    fn refusing_unscoped_calls_names_the_glue_for_the_transport_and_lets_scoped_ones_through() {
        let refusing = Scoping {
            unscoped: Unscoped::Refuse,
            ..Scoping::default()
        };
        let bare = params(json!({ "name": "t" }));
        let e = call_request(&bare, &refusing).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        for glue in [
            "justonce_client.FRAMEWORK.stdio(command, conversation=ID)",
            "pydantic-ai",
            "process_tool_call",
            "tool_meta_resolver",
            "--conversation",
        ] {
            assert!(
                e.message.contains(glue),
                "stdio glue lacks {glue}: {}",
                e.message
            );
        }
        assert_eq!(e.data.as_ref().unwrap()["kind"], "unscoped");
        let no_headers = FromHeaders::default();
        let over_http = Scoping {
            headers: Some(&no_headers),
            ..refusing
        };
        let e = call_request(&bare, &over_http).unwrap_err();
        for glue in [
            "justonce_client.FRAMEWORK.http(url, token, conversation=ID)",
            "MCPToolset(url, headers=",
            "MCPServerStreamableHttp",
            "MultiServerMCPClient",
            "Justonce-Conversation",
        ] {
            assert!(
                e.message.contains(glue),
                "HTTP glue lacks {glue}: {}",
                e.message
            );
        }

        // Named anywhere (a key too: its caller chose what a repeat is), it runs.
        for scoped in [
            json!({ "name": "t", "_meta": { "dev.justonce/conversation": "c" } }),
            json!({ "name": "t", "idempotencyKey": "k" }),
        ] {
            assert!(call_request(&params(scoped), &refusing).is_ok());
        }
        let server_default = Scoping {
            conversation: Some("c"),
            ..refusing
        };
        assert!(call_request(&bare, &server_default).is_ok());
        let header = FromHeaders {
            conversation: Some("c".into()),
            key: None,
        };
        let by_header = Scoping {
            headers: Some(&header),
            ..refusing
        };
        assert!(call_request(&bare, &by_header).is_ok());
        // The default lets it through, to the short window.
        assert!(call_request(&bare, &Scoping::default()).is_ok());
    }

    #[test]
    fn a_progress_token_is_a_string_or_an_integer() {
        for token in [json!("p-1"), json!(7)] {
            let p = params(json!({ "name": "t", "_meta": { "progressToken": token } }));
            assert_eq!(progress_token(&p).unwrap().map(to_json), Some(token));
        }
        assert_eq!(
            progress_token(&params(json!({ "name": "t" }))).unwrap(),
            None
        );
        let bad = params(json!({ "name": "t", "_meta": { "progressToken": 1.5 } }));
        let e = progress_token(&bad).unwrap_err();
        assert!(e.message.contains("progressToken"), "{}", e.message);
    }

    #[test]
    fn malformed_call_parameters_are_invalid_params_naming_the_field() {
        for (p, field) in [
            (json!({}), "\"name\" is missing"),
            (json!({"name": 3}), "\"name\" must be a string"),
            (
                json!({"name": "t", "arguments": "{}"}),
                "\"arguments\" must be an object",
            ),
            (
                json!({"name": "t", "_meta": {"dev.justonce/conversation": 1}}),
                "dev.justonce/conversation",
            ),
        ] {
            let e = call_request(&params(p), &Scoping::default()).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains(field), "{} lacks {field}", e.message);
        }
    }

    #[test]
    fn an_outcome_is_a_tool_result_and_a_missing_outcome_an_error_result() {
        let key = InvocationKey::parse("0123456789abcdef0123456789abcdef").unwrap();
        let ok = call_result(
            Ok(CallResponse {
                key: key.clone(),
                replayed: true,
                outcome: Outcome::Success {
                    result: json!({"sent": 1}),
                    content: None,
                },
            }),
            false,
            false,
        )
        .unwrap();
        assert_eq!(ok["isError"], false);
        assert_eq!(ok["structuredContent"], json!({"sent": 1}));
        assert_eq!(ok["content"][0]["text"], r#"{"sent":1}"#);
        assert_eq!(ok["_meta"][REPLAYED_META_KEY], true);
        assert_eq!(ok["_meta"][KEY_META_KEY], key.to_string());
        assert_eq!(ok["content"].as_array().unwrap().len(), 2, "{ok}");
        assert_eq!(ok["content"][1]["type"], "resource");
        assert_eq!(ok["content"][1]["resource"]["text"], REPLAYED_NOTE);
        assert_eq!(ok["content"][1]["_meta"][NOTE_META_KEY], true);

        let unknown = call_result(
            Err(Error::OutcomeUnknown {
                key: key.clone(),
                seq: 0,
                provider: "mail".into(),
                reason: "timeout".into(),
                ends_by: EndsBy::Retry,
            }),
            false,
            false,
        )
        .unwrap();
        assert_eq!(unknown["isError"], true);
        assert_eq!(
            unknown["structuredContent"]["error"]["kind"],
            "outcome_unknown"
        );
        assert_eq!(unknown["structuredContent"]["error"]["retry_safe"], true);
        assert_eq!(unknown["structuredContent"]["error"]["retry_after_s"], 30);
        let note = unknown["content"][1]["text"].as_str().unwrap();
        assert!(
            note.contains("wait about 30 s") && !note.contains("{wait}"),
            "{note}"
        );

        let no_tool = call_result(
            Err(Error::UnknownTool {
                name: "x".into(),
                available: "a".into(),
            }),
            false,
            false,
        )
        .unwrap_err();
        assert_eq!(no_tool.code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn a_question_is_input_required_when_stateless_and_a_forged_state_invalid_params() {
        let key = InvocationKey::parse("0123456789abcdef0123456789abcdef").unwrap();
        let asked = || Error::InputRequired {
            key: key.clone(),
            seq: 1,
            questions: vec![crate::ask::Question {
                name: "confirm".into(),
                message: "Refund 25.00 EUR?".into(),
                schema: json!({ "type": "object", "properties": { "ok": { "type": "boolean" } } }),
            }],
            requests: Vec::new(),
            state: format!("{key}.1.00ff"),
        };
        let stateless = call_result(Err(asked()), true, true).unwrap();
        assert_eq!(stateless["resultType"], "input_required");
        assert_eq!(stateless["requestState"], format!("{key}.1.00ff"));
        assert_eq!(
            stateless["inputRequests"]["confirm"]["params"]["message"],
            "Refund 25.00 EUR?"
        );
        assert!(stateless.get("isError").is_none(), "{stateless}");
        // A session has no round trip: told as an error it can read, never input_required.
        let session = call_result(Err(asked()), false, true).unwrap();
        assert_eq!(session["isError"], true);
        assert!(session.get("resultType").is_none(), "{session}");

        let forged =
            call_result(Err(Error::InputStateInvalid("altered".into())), true, true).unwrap_err();
        assert_eq!(forged.code, ErrorCode::INVALID_PARAMS);

        // A client that could not be asked: the call stopped at its question, so the
        // same call again (from a client that can ask) is safe, and the model reads so.
        let unavailable = Error::InputUnavailable {
            tool: "refund".into(),
            reason: "the client did not answer within 300 s".into(),
        };
        let told = call_result(Err(unavailable), false, true).unwrap();
        assert_eq!(told["isError"], true);
        assert_eq!(
            told["structuredContent"]["error"]["kind"],
            "input_unavailable"
        );
        assert_eq!(
            told["structuredContent"]["error"]["retry_safe"], true,
            "{told}"
        );
        let note = told["content"].as_array().unwrap().last().unwrap();
        assert!(
            note["text"]
                .as_str()
                .unwrap()
                .contains("resumes at the question"),
            "{told}"
        );
    }

    #[test]
    fn a_result_in_parts_is_its_parts_and_its_structured_value_besides() {
        let key = InvocationKey::parse("0123456789abcdef0123456789abcdef").unwrap();
        let image = json!({ "type": "image", "data": "AQID", "mimeType": "image/png" });
        let response = |result: Value| CallResponse {
            key: key.clone(),
            replayed: false,
            outcome: Outcome::Success {
                result,
                content: Some(vec![
                    json!({ "type": "text", "text": "chart:" }),
                    image.clone(),
                ]),
            },
        };
        let parts_only = call_result(Ok(response(Value::Null)), false, false).unwrap();
        assert_eq!(parts_only["content"][1], image);
        assert_eq!(parts_only["content"].as_array().unwrap().len(), 2);
        assert_eq!(parts_only["isError"], false);
        assert!(parts_only.get("structuredContent").is_none());
        let typed = call_result(Ok(response(json!({ "points": 3 }))), false, false).unwrap();
        assert_eq!(typed["structuredContent"], json!({ "points": 3 }));
        assert_eq!(typed["content"][0]["text"], "chart:");
    }

    #[test]
    fn a_result_that_is_not_an_object_is_structured_only_where_the_revision_allows_it() {
        let key = InvocationKey::parse("0123456789abcdef0123456789abcdef").unwrap();
        let response = CallResponse {
            key,
            replayed: false,
            outcome: Outcome::Success {
                result: json!([1, 2]),
                content: None,
            },
        };
        let legacy = call_result(Ok(response.clone()), false, false).unwrap();
        assert!(legacy.get("structuredContent").is_none());
        assert_eq!(legacy["content"][0]["text"], "[1,2]");
        let modern = call_result(Ok(response), true, false).unwrap();
        assert_eq!(modern["structuredContent"], json!([1, 2]));
    }
}
