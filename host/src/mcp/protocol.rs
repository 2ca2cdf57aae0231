//! JSON-RPC 2.0 framing for MCP (one message per stdio line or per HTTP POST), and
//! the protocol revisions this server speaks.
//!
//! One message per line (newline-delimited JSON, no embedded newlines). MCP forbids
//! batches and null request ids, so both are refused with `-32600`.
//!
//! The messages themselves are the official Rust SDK's model (`rmcp::model`: error
//! codes, revisions, results, notifications); reading a line, the request ids and
//! the response envelopes are ours (see [`parse`] and [`RequestId`]).

use std::hash::{Hash, Hasher};

pub use rmcp::model::{ErrorCode, ErrorData, ProtocolVersion};
use rmcp::model::{JsonRpcNotification, JsonRpcVersion2_0};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// `-32600`, the code of most refusals of the HTTP transport's modules.
pub const INVALID_REQUEST: ErrorCode = ErrorCode::INVALID_REQUEST;
/// The server is busy (its queue of calls is full): nothing was run, retry later.
/// justonce's own code (JSON-RPC's range for server errors; MCP names none).
pub const SERVER_BUSY: ErrorCode = ErrorCode(-32000);
/// JSON-RPC code of a request refused because its principal has too many calls in
/// flight or sessions open (over HTTP, status 429 with `Retry-After`): nothing was
/// run, retry later.
pub const TOO_MANY_CALLS: i64 = -32029;
/// [`TOO_MANY_CALLS`] as an error code.
pub const TOO_MANY: ErrorCode = ErrorCode(TOO_MANY_CALLS as i32);
/// A request that needs a capability its client did not declare (SEP-2575's
/// `MissingRequiredClientCapabilityError`; over HTTP, status 400).
pub const MISSING_CAPABILITY: ErrorCode = ErrorCode(-32021);

/// Revisions that carry their version in every request's `_meta` (no handshake):
/// the ones this server implements, which is its decision, not the SDK's.
pub const MODERN_VERSIONS: &[ProtocolVersion] = &[ProtocolVersion::V_2026_07_28];

/// Request `_meta` key: the protocol version of a stateless (2026-07-28) request.
pub const PROTOCOL_VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// Request `_meta` key: the client's capabilities, required on stateless requests.
pub const CLIENT_CAPABILITIES_META_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// Result `_meta` key: the server's identity, stamped on stateless results.
pub const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// Revisions negotiated through the `initialize` handshake, oldest first: every one
/// up to the last that has it (2024-11-05 … 2025-11-25).
pub fn handshake_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// The version an `initialize` is answered with: the client's if it is a handshake
/// revision this server speaks, else the latest one.
pub fn negotiate_handshake(requested: &str) -> &'static ProtocolVersion {
    let versions = handshake_versions();
    versions
        .iter()
        .find(|v| v.as_str() == requested)
        .unwrap_or(&versions[versions.len() - 1])
}

/// `versions` as `a, b, c`, for messages.
pub fn version_list(versions: &[ProtocolVersion]) -> String {
    let names: Vec<&str> = versions.iter().map(ProtocolVersion::as_str).collect();
    names.join(", ")
}

/// A message of the protocol's model as JSON. Every type of `rmcp::model` this
/// server sends has string keys and finite numbers, so this cannot fail.
pub fn to_json(message: impl Serialize) -> Value {
    serde_json::to_value(message).expect("an MCP model type serializes to JSON")
}

/// A request id as the client sent it (a string or a number), compared by its JSON
/// text.
#[derive(Debug, Clone)]
pub struct RequestId(Value);

impl RequestId {
    /// The id as JSON, for the response.
    pub fn to_json(&self) -> Value {
        self.0.clone()
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for RequestId {}

impl Hash for RequestId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.to_string().hash(state);
    }
}

impl TryFrom<&Value> for RequestId {
    type Error = ErrorData;

    fn try_from(value: &Value) -> Result<Self, ErrorData> {
        match value {
            Value::String(_) | Value::Number(_) => Ok(Self(value.clone())),
            Value::Null => Err(ErrorData::invalid_request(
                "the request id must not be null",
                None,
            )),
            other => Err(ErrorData::invalid_request(
                format!(
                    "the request id must be a string or a number, not {}",
                    type_name(other)
                ),
                None,
            )),
        }
    }
}

/// The parameters of a request or notification: an object, absent as empty.
pub type Params = Map<String, Value>;

/// One message from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request, which gets exactly one response (unless cancelled).
    Request {
        /// The id to answer under.
        id: RequestId,
        /// The method.
        method: String,
        /// The parameters (empty when absent).
        params: Params,
    },
    /// A notification, which gets no response.
    Notification {
        /// The method.
        method: String,
        /// The parameters (empty when absent).
        params: Params,
    },
    /// A response to a request of the server's (`elicitation/create`, see
    /// `mcp/elicit.rs`).
    Response {
        /// The id of the server's request it answers.
        id: RequestId,
        /// Its result, or its error.
        outcome: Result<Value, ErrorData>,
    },
}

/// Why a line could not be read as a message: the error to answer with, and the id
/// to answer under when one could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// The id of the request, if the line had a usable one.
    pub id: Option<RequestId>,
    /// The error.
    pub error: ErrorData,
}

/// Reads one line as a JSON-RPC 2.0 message.
///
/// Numbers are read exactly (a tool's arguments reach it with the digits the client
/// sent): an integer beyond 2^53 spelled with a fraction or exponent is read as that
/// integer, and one that no 64-bit integer or double holds is refused rather than
/// rounded.
pub fn parse(line: &str) -> Result<Incoming, Malformed> {
    let malformed = |e: &dyn std::fmt::Display| Malformed {
        id: None,
        error: ErrorData::parse_error(format!("the line is not valid JSON: {e}"), None),
    };
    let line = crate::jcs::exact_numbers(line).map_err(|e| malformed(&e))?;
    let value: Value = serde_json::from_str(&line).map_err(|e| malformed(&e))?;
    let object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(Malformed {
                id: None,
                error: ErrorData::invalid_request(
                    "JSON-RPC batches are not supported by MCP; send one message per line",
                    None,
                ),
            });
        }
        other => {
            return Err(Malformed {
                id: None,
                error: ErrorData::invalid_request(
                    format!("a message must be a JSON object, not {}", type_name(&other)),
                    None,
                ),
            });
        }
    };
    let id = match object.get("id") {
        Some(raw) => Some(RequestId::try_from(raw).map_err(|error| Malformed { id: None, error })?),
        None => None,
    };
    let malformed = |message: String| Malformed {
        id: id.clone(),
        error: ErrorData::invalid_request(message, None),
    };
    if object.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err(malformed(
            r#"the message must have "jsonrpc": "2.0""#.into(),
        ));
    }
    let method = match object.get("method") {
        Some(Value::String(method)) => method.clone(),
        Some(other) => {
            return Err(malformed(format!(
                "\"method\" must be a string, not {}",
                type_name(other)
            )));
        }
        None if id.is_some() && (object.contains_key("result") || object.contains_key("error")) => {
            let id = id.expect("checked above");
            let outcome = match (object.get("result"), object.get("error")) {
                (Some(result), None) => Ok(result.clone()),
                (None, Some(error)) => Err(serde_json::from_value::<ErrorData>(error.clone())
                    .unwrap_or_else(|e| {
                        ErrorData::internal_error(format!("a malformed error ({e}): {error}"), None)
                    })),
                _ => {
                    return Err(Malformed {
                        id: None,
                        error: ErrorData::invalid_request(
                            "a response has a result or an error, not both",
                            None,
                        ),
                    });
                }
            };
            return Ok(Incoming::Response { id, outcome });
        }
        None => return Err(malformed("the message has no \"method\"".into())),
    };
    let params = match object.get("params") {
        None | Some(Value::Null) => Params::new(),
        Some(Value::Object(params)) => params.clone(),
        Some(other) => {
            return Err(Malformed {
                id: id.clone(),
                error: ErrorData::invalid_params(
                    format!(
                        "\"params\" of {method} must be an object, not {}",
                        type_name(other)
                    ),
                    None,
                ),
            });
        }
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

// The envelopes stay ours: rmcp's `JsonRpcResponse` and `JsonRpcError` carry its
// `RequestId`, an `i64` or a string, where JSON-RPC answers under the id as sent
// (any number; see [`RequestId`]), and `JsonRpcError` leaves out an unread id where
// JSON-RPC 2.0 (and MCP before 2026-07-28) sends `"id": null`.

/// A success response.
pub fn response(id: &RequestId, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id.to_json(), "result": result })
}

/// An error response; `id` is null when the request's id could not be read.
pub fn error_response(id: Option<&RequestId>, error: &ErrorData) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.map_or(Value::Null, RequestId::to_json),
        "error": to_json(error),
    })
}

/// A notification of the server's (rmcp's model of one) in its JSON-RPC envelope:
/// rmcp's, which fits here (a notification has no id).
pub fn notification<N: Serialize>(notification: N) -> Value {
    to_json(JsonRpcNotification {
        jsonrpc: JsonRpcVersion2_0,
        notification,
    })
}

/// The response to request `id`: its result or its error.
pub fn reply(id: &RequestId, reply: Result<Value, ErrorData>) -> Value {
    match reply {
        Ok(result) => response(id, result),
        Err(error) => error_response(Some(id), &error),
    }
}

/// The JSON type of a value, for error messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The extension's identifier, under `capabilities.extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// What `server/discover` declares for the Tasks extension (`mcp/tasks.rs` serves it;
/// here, below the session and the tasks both, so neither imports the other for it).
pub(crate) fn tasks_declaration() -> rmcp::model::ExtensionCapabilities {
    [(TASKS_EXTENSION.to_owned(), serde_json::Map::new())]
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_a_notification_and_a_response_are_told_apart() {
        let request = parse(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#).unwrap();
        assert!(matches!(request, Incoming::Request { ref method, .. } if method == "tools/list"));
        let note = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(note, Incoming::Notification { .. }));
        let reply = parse(r#"{"jsonrpc":"2.0","id":"s1","result":{"action":"accept"}}"#).unwrap();
        assert_eq!(
            reply,
            Incoming::Response {
                id: RequestId::try_from(&json!("s1")).unwrap(),
                outcome: Ok(json!({"action": "accept"})),
            }
        );
        let refused = parse(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"no"}}"#);
        let Ok(Incoming::Response {
            outcome: Err(error),
            ..
        }) = refused
        else {
            panic!("{refused:?}");
        };
        assert_eq!(
            (error.code, error.message.as_ref()),
            (ErrorCode::INVALID_REQUEST, "no")
        );
    }

    #[test]
    fn malformed_lines_get_the_json_rpc_code_that_names_the_problem() {
        assert_eq!(
            parse("{not json").unwrap_err().error.code,
            ErrorCode::PARSE_ERROR
        );
        assert_eq!(
            parse("[]").unwrap_err().error.code,
            ErrorCode::INVALID_REQUEST
        );
        let null_id = parse(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap_err();
        assert_eq!(null_id.error.code, ErrorCode::INVALID_REQUEST);
        assert!(
            null_id.error.message.contains("null"),
            "{}",
            null_id.error.message
        );
        let version = parse(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#).unwrap_err();
        assert_eq!(version.error.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(version.id.map(|id| id.to_json()), Some(json!(3)));
        let params =
            parse(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":[1]}"#).unwrap_err();
        assert_eq!(params.error.code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn initialize_echoes_a_known_version_and_offers_the_latest_otherwise() {
        assert_eq!(negotiate_handshake("2025-06-18").as_str(), "2025-06-18");
        assert_eq!(negotiate_handshake("2024-11-05").as_str(), "2024-11-05");
        let latest = &ProtocolVersion::LATEST_WITH_INITIALIZE;
        assert_eq!(negotiate_handshake("1999-01-01"), latest);
        // The stateless revision is never reached through the handshake.
        assert_eq!(negotiate_handshake(MODERN_VERSIONS[0].as_str()), latest);
        assert_eq!(
            version_list(handshake_versions()),
            "2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25"
        );
    }

    #[test]
    fn ids_compare_by_their_json() {
        let a = RequestId::try_from(&json!(1)).unwrap();
        let b = RequestId::try_from(&json!("1")).unwrap();
        assert_ne!(a, b);
        assert_eq!(a, RequestId::try_from(&json!(1)).unwrap());
    }
}
