//! How long a call's record is kept: the window in which the same call again is a
//! duplicate. A call in a conversation keeps its record for the retention (24 h by
//! default); a call that names no conversation is deduplicated within a short window
//! (10 min by default), since its scope is the whole principal; a tool may set its
//! own retention for both. The window is stored with each record when it is first
//! journaled, so lookups and `gc` agree on it whatever the host's settings are later.

use std::collections::BTreeMap;
use std::time::Duration;

/// The window of a call that names no conversation, unless configured.
pub const DEFAULT_UNSCOPED: Duration = Duration::from_secs(10 * 60);

/// The windows of every call of one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// A call in a conversation, or with an explicit key.
    pub conversation: Duration,
    /// A call that names no conversation.
    pub unscoped: Duration,
    /// Tools whose calls keep their records this long, conversation or not.
    pub tools: BTreeMap<String, Duration>,
}

/// The windows that apply to the calls of one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolWindows {
    /// A call in a conversation (or with an explicit key).
    pub conversation: Duration,
    /// A call that names no conversation.
    pub unscoped: Duration,
}

impl Retention {
    /// `conversation` for calls in a conversation, and the default unscoped window
    /// (never longer than `conversation`) for the others; no tool of its own.
    pub fn new(conversation: Duration) -> Self {
        Self {
            conversation,
            unscoped: DEFAULT_UNSCOPED.min(conversation),
            tools: BTreeMap::new(),
        }
    }

    /// The windows of `tool`'s calls.
    pub fn of_tool(&self, tool: &str) -> ToolWindows {
        match self.tools.get(tool) {
            Some(&own) => ToolWindows {
                conversation: own,
                unscoped: own,
            },
            None => ToolWindows {
                conversation: self.conversation,
                unscoped: self.unscoped,
            },
        }
    }

    /// The window of one call of `tool`; `scoped` when it names a conversation or
    /// an explicit key.
    pub fn of_call(&self, tool: &str, scoped: bool) -> Duration {
        let windows = self.of_tool(tool);
        if scoped {
            windows.conversation
        } else {
            windows.unscoped
        }
    }
}

impl ToolWindows {
    /// What `tools/list` and `justonce tools` say: `{"conversation_seconds": …,
    /// "unscoped_seconds": …}`.
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "conversation_seconds": self.conversation.as_secs(),
            "unscoped_seconds": self.unscoped.as_secs(),
        })
    }

    /// For people: "a repeat is deduplicated for 24 h in a conversation, 10 min
    /// without one".
    pub fn describe(self) -> String {
        format!(
            "a repeat is deduplicated for {} in a conversation, {} without one",
            human(self.conversation),
            human(self.unscoped)
        )
    }
}

/// `24 h`, `10 min`, `90 s`: the largest whole unit.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 && s.is_multiple_of(3600) {
        format!("{} h", s / 3600)
    } else if s >= 60 && s.is_multiple_of(60) {
        format!("{} min", s / 60)
    } else {
        format!("{} s", d.as_secs_f64())
    }
}

/// What a call that names no conversation and no key gets where it arrives over MCP
/// (`[mcp] unscoped` in justonce.toml, `serve --unscoped`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unscoped {
    /// It runs, deduplicated within the short unscoped window
    /// ([`Retention::unscoped`]): the principal alone is its scope.
    #[default]
    Window,
    /// It is refused before anything runs, with the lines that make the caller's
    /// framework name its conversation: for a host whose callers must all say what a
    /// repeat is, since the short window is wrong both ways (two runs asking for the
    /// same thing are one call; one run retrying past the window is two).
    Refuse,
    /// It runs in the conversation of its MCP session: the `Mcp-Session-Id` over
    /// Streamable HTTP, the connection (from its `initialize`) on stdio, kept as long
    /// as a named conversation. For a client whose session lives exactly as long as
    /// one agent run; a client that opens a session per call (langchain-mcp-adapters
    /// without an explicit session) gets a new scope per call, so its retry runs
    /// again. On stdio one process and one `initialize` are one session: a client
    /// that re-enters the same connection for several runs (pydantic-ai's toolset
    /// kept open) has one scope for all of them, and a second `initialize` starts a
    /// new one. A call with no session (a client of the stateless 2026-07-28
    /// revision, as pydantic-ai and the Agents SDK are with mcp 2.3) is refused
    /// with the fix, never silently given the window: see [`Unscoped::SessionOrWindow`].
    Session,
    /// As [`Unscoped::Session`], except that a call with no session (the stateless
    /// revision) runs in the short window instead of being refused, logged once per
    /// process: the operator's explicit choice (`unscoped = "session-or-window"`).
    SessionOrWindow,
}

impl std::str::FromStr for Unscoped {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "window" => Ok(Self::Window),
            "refuse" => Ok(Self::Refuse),
            "session" => Ok(Self::Session),
            "session-or-window" => Ok(Self::SessionOrWindow),
            other => Err(format!(
                "{other:?}: expected \"window\", \"refuse\", \"session\" or \"session-or-window\""
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_without_a_conversation_gets_the_short_window_unless_its_tool_has_its_own() {
        let mut r = Retention::new(Duration::from_secs(24 * 3600));
        r.tools
            .insert("nightly".into(), Duration::from_secs(48 * 3600));
        assert_eq!(r.of_call("refund", true), Duration::from_secs(24 * 3600));
        assert_eq!(r.of_call("refund", false), DEFAULT_UNSCOPED);
        assert_eq!(r.of_call("nightly", false), Duration::from_secs(48 * 3600));
        assert_eq!(
            r.of_tool("refund").describe(),
            "a repeat is deduplicated for 24 h in a conversation, 10 min without one"
        );
    }

    #[test]
    fn the_default_unscoped_window_is_never_longer_than_the_retention() {
        let r = Retention::new(Duration::from_secs(60));
        assert_eq!(r.unscoped, Duration::from_secs(60));
    }
}
