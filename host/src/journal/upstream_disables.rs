//! An operator's disable of an upstream MCP server, kept in the journal so that it
//! outlives the process that took it and holds on every host of the journal: a host
//! reads the table when it is built (a disabled upstream is never started) and again
//! while it serves (`crate::upstream_switch`), and only an operator's enable ends it.

/// One upstream an operator disabled: `upstream_disables` on both backends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamDisable {
    /// The upstream's name in `justonce.toml` (`[upstreams.NAME]`).
    pub upstream: String,
    /// The principal of the operator who disabled it.
    pub by: String,
    /// When, in ms since the epoch (PostgreSQL: the database's clock).
    pub at: i64,
}
