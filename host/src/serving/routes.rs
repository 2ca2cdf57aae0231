//! Pages served beside `/mcp` by the same server, or by a server of their own (the
//! console): whole requests in, whole responses out, after the same origin checks,
//! caps and deadlines as MCP's.

/// A request to one of the [`Routes`], its body read whole.
#[derive(Debug)]
pub struct PlainRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    /// Header names (lowercase) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body (at most the server's body cap).
    pub body: Vec<u8>,
}

impl PlainRequest {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path, without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The query, without the `?` (empty when there is none).
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }
}

/// The response of one of the [`Routes`], sent with its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainResponse {
    /// The status code.
    pub status: u16,
    /// Headers (lowercase names), `content-type` among them.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Paths a server answers besides `/mcp`.
pub trait Routes: Send + Sync + std::fmt::Debug {
    /// Whether `path` (without its query) is one of them.
    fn serves(&self, path: &str) -> bool;

    /// The response to `request`; it may block (it runs on a blocking thread).
    fn respond(&self, request: &PlainRequest) -> PlainResponse;
}
