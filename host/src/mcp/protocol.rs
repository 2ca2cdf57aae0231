//! JSON-RPC 2.0 framing for MCP (one message per stdio line or per HTTP POST), and
//! the protocol revisions this server speaks.
//!
//! One message per line (newline-delimited JSON, no embedded newlines). MCP forbids
//! batches and null request ids, so both are refused with `-32600`.

use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters (also: unknown tool, missing request envelope).
pub const INVALID_PARAMS: i64 = -32602;
/// A fault of the server itself.
pub const INTERNAL_ERROR: i64 = -32603;
/// The server is busy (its queue of calls is full): nothing was run, retry later.
pub const SERVER_BUSY: i64 = -32000;
/// The request's protocol version is not served (MCP 2026-07-28); `data` names
/// `supported` and `requested`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A Streamable HTTP request's routing headers (`MCP-Protocol-Version`,
/// `Mcp-Method`, `Mcp-Name`) disagree with its body (MCP 2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;

/// Revisions negotiated through the `initialize` handshake, oldest first.
pub const HANDSHAKE_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The newest handshake revision: the answer to an `initialize` that asks for a
/// version this server does not know.
pub const LATEST_HANDSHAKE_VERSION: &str = "2025-11-25";

/// Revisions that carry their version in every request's `_meta` (no handshake).
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// Request `_meta` key: the protocol version of a stateless (2026-07-28) request.
pub const PROTOCOL_VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// Request `_meta` key: the client's capabilities, required on stateless requests.
pub const CLIENT_CAPABILITIES_META_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// Result `_meta` key: the server's identity, stamped on stateless results.
pub const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// The version an `initialize` is answered with: the client's if it is a handshake
/// revision this server speaks, else the latest one.
pub fn negotiate_handshake(requested: &str) -> &'static str {
    HANDSHAKE_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(LATEST_HANDSHAKE_VERSION)
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
    type Error = RpcError;

    fn try_from(value: &Value) -> Result<Self, RpcError> {
        match value {
            Value::String(_) | Value::Number(_) => Ok(Self(value.clone())),
            Value::Null => Err(RpcError::new(
                INVALID_REQUEST,
                "the request id must not be null",
            )),
            other => Err(RpcError::new(
                INVALID_REQUEST,
                format!(
                    "the request id must be a string or a number, not {}",
                    type_name(other)
                ),
            )),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// One sentence saying what is wrong.
    pub message: String,
    /// Structured details, if any.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error without data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches structured details.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32602` with `message`.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
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
    /// A response to a request of the server's; this server sends none, so it is
    /// ignored.
    Response,
}

/// Why a line could not be read as a message: the error to answer with, and the id
/// to answer under when one could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// The id of the request, if the line had a usable one.
    pub id: Option<RequestId>,
    /// The error.
    pub error: RpcError,
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
        error: RpcError::new(PARSE_ERROR, format!("the line is not valid JSON: {e}")),
    };
    let line = crate::jcs::exact_numbers(line).map_err(|e| malformed(&e))?;
    let value: Value = serde_json::from_str(&line).map_err(|e| malformed(&e))?;
    let object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(Malformed {
                id: None,
                error: RpcError::new(
                    INVALID_REQUEST,
                    "JSON-RPC batches are not supported by MCP; send one message per line",
                ),
            });
        }
        other => {
            return Err(Malformed {
                id: None,
                error: RpcError::new(
                    INVALID_REQUEST,
                    format!("a message must be a JSON object, not {}", type_name(&other)),
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
        error: RpcError::new(INVALID_REQUEST, message),
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
            return Ok(Incoming::Response);
        }
        None => return Err(malformed("the message has no \"method\"".into())),
    };
    let params = match object.get("params") {
        None | Some(Value::Null) => Params::new(),
        Some(Value::Object(params)) => params.clone(),
        Some(other) => {
            return Err(Malformed {
                id: id.clone(),
                error: RpcError::invalid_params(format!(
                    "\"params\" of {method} must be an object, not {}",
                    type_name(other)
                )),
            });
        }
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

/// A success response.
pub fn response(id: &RequestId, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id.to_json(), "result": result })
}

/// An error response; `id` is null when the request's id could not be read.
pub fn error_response(id: Option<&RequestId>, error: &RpcError) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.map_or(Value::Null, RequestId::to_json),
        "error": error.to_json(),
    })
}

/// The response to request `id`: its result or its error.
pub fn reply(id: &RequestId, reply: Result<Value, RpcError>) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_a_notification_and_a_response_are_told_apart() {
        let request = parse(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#).unwrap();
        assert!(matches!(request, Incoming::Request { ref method, .. } if method == "tools/list"));
        let note = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(note, Incoming::Notification { .. }));
        let reply = parse(r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#).unwrap();
        assert_eq!(reply, Incoming::Response);
    }

    #[test]
    fn malformed_lines_get_the_json_rpc_code_that_names_the_problem() {
        assert_eq!(parse("{not json").unwrap_err().error.code, PARSE_ERROR);
        assert_eq!(parse("[]").unwrap_err().error.code, INVALID_REQUEST);
        let null_id = parse(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap_err();
        assert_eq!(null_id.error.code, INVALID_REQUEST);
        assert!(
            null_id.error.message.contains("null"),
            "{}",
            null_id.error.message
        );
        let version = parse(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#).unwrap_err();
        assert_eq!(version.error.code, INVALID_REQUEST);
        assert_eq!(version.id.map(|id| id.to_json()), Some(json!(3)));
        let params =
            parse(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":[1]}"#).unwrap_err();
        assert_eq!(params.error.code, INVALID_PARAMS);
    }

    #[test]
    fn initialize_echoes_a_known_version_and_offers_the_latest_otherwise() {
        assert_eq!(negotiate_handshake("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate_handshake("2024-11-05"), "2024-11-05");
        assert_eq!(negotiate_handshake("1999-01-01"), LATEST_HANDSHAKE_VERSION);
        // The stateless revision is never reached through the handshake.
        assert_eq!(
            negotiate_handshake(MODERN_VERSIONS[0]),
            LATEST_HANDSHAKE_VERSION
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
