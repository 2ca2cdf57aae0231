//! The console's "Upstreams" page: each upstream MCP server of the host with its
//! state, its last error and when it is started again, its tools, and the calls
//! waiting on it (from the journal: calls of its tools running, stopped, incomplete
//! or with an unknown outcome); for an operator, buttons that restart, disable or
//! enable it (`POST /console/upstream`, with the session's CSRF token).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::html::{ROOT, csrf_field, escape, page, short_key};
use super::sessions::BrowserSession;
use super::view;
use crate::error::Error;
use crate::journal::{Journal, JournalEntry, Selection};
use crate::upstream::{Upstream, UpstreamReport, Upstreams};
use crate::upstream_switch;

/// The states of a call that waits on its upstream (see [`crate::journal::CALL_STATES`]).
const WAITING: [&str; 4] = ["running", "stopped", "incomplete", "unknown"];

/// What an operator does to an upstream from the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamAct {
    /// Its connection let go and it started again now.
    Restart,
    /// Stopped, its tools left out and its calls refused until enabled.
    Disable,
    /// A disabled one started again.
    Enable,
}

impl UpstreamAct {
    /// Every action, in the order the buttons show.
    pub const ALL: [Self; 3] = [Self::Restart, Self::Disable, Self::Enable];

    /// Its name in forms.
    pub fn name(self) -> &'static str {
        match self {
            Self::Restart => "restart",
            Self::Disable => "disable",
            Self::Enable => "enable",
        }
    }

    /// The action named `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether it applies to an upstream whose state is `state`.
    fn applies(self, state: &str) -> bool {
        match self {
            Self::Restart | Self::Disable => state != "disabled",
            Self::Enable => state == "disabled",
        }
    }

    /// Does it to `upstream` for the operator `by` at `now` (ms): what the operator
    /// is told. A disable or an enable is journaled first, so it holds across a
    /// restart and on every host of the journal (`crate::upstream_switch`).
    pub fn apply(
        self,
        journal: &dyn Journal,
        upstream: &Upstream,
        by: &str,
        now: i64,
    ) -> Result<String, Error> {
        let name = upstream.name();
        Ok(match self {
            Self::Restart if upstream.restart() => format!(
                "The upstream `{name}` is being started again now; its tools come back once it lists them."
            ),
            Self::Restart => {
                format!("The upstream `{name}` is disabled: enable it to start it.")
            }
            Self::Disable => {
                let disable = upstream_switch::disable(journal, upstream, by, now)?;
                format!(
                    "The upstream `{name}` is disabled (by `{}`, {}): its tools are left out of tools/list and its calls refused, not performed, on every host of this journal and after a restart, until an operator enables it.",
                    disable.by,
                    crate::clock::rfc3339(disable.at)
                )
            }
            Self::Enable if upstream_switch::enable(journal, upstream)? => format!(
                "The upstream `{name}` was enabled: it is being started now (other hosts of this journal follow within {} s).",
                upstream_switch::FOLLOW_EVERY.as_secs()
            ),
            Self::Enable => format!("The upstream `{name}` was not disabled: nothing to do."),
        })
    }
}

/// One upstream as the page and the API show it.
#[derive(Debug)]
pub struct UpstreamView {
    /// Its state and counts.
    pub report: UpstreamReport,
    /// The names its tools are offered by (its last listing).
    pub tools: Vec<String>,
    /// The calls of its tools that wait on it, newest first.
    pub waiting: Vec<JournalEntry>,
}

impl UpstreamView {
    /// `upstream` now, with the calls among `entries` (judged) that wait on it.
    pub fn of(upstream: &Upstream, entries: &[JournalEntry]) -> Self {
        let tools: Vec<String> = upstream
            .listed()
            .map(|tools| tools.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default();
        let waiting = entries
            .iter()
            .filter(|e| tools.contains(&e.tool))
            .filter(|e| view::states(e).iter().any(|s| WAITING.contains(s)))
            .cloned()
            .collect();
        Self {
            report: upstream.report(),
            tools,
            waiting,
        }
    }

    /// Every one of `upstreams`, with the calls among the newest of `journal` that
    /// wait on each, judged at `now`.
    pub fn all(upstreams: &Upstreams, journal: &dyn Journal, now: i64) -> Result<Vec<Self>, Error> {
        let entries: Vec<_> = Selection::default()
            .entries(journal, view::MAX_LIMIT)?
            .into_iter()
            .map(|e| e.judged_at(now))
            .collect();
        Ok(upstreams.iter().map(|u| Self::of(u, &entries)).collect())
    }

    /// As the API answers it: [`UpstreamReport::to_json`] with `tool_names` and
    /// `waiting` (each call's `key`, `tool` and `states`).
    pub fn to_json(&self) -> Value {
        let mut value = self.report.to_json();
        value["tool_names"] = json!(self.tools);
        value["waiting"] = self
            .waiting
            .iter()
            .map(|e| json!({ "key": e.key, "tool": e.tool, "states": view::states(e) }))
            .collect();
        value
    }
}

/// The page: a section per upstream; the action buttons only for a role that acts.
pub fn page_of(session: &BrowserSession, upstreams: &[UpstreamView]) -> String {
    let mut body = String::new();
    if upstreams.is_empty() {
        body.push_str(
            "<p>This host has no upstream MCP servers (<code>[upstreams.NAME]</code> in justonce.toml), or this console runs without its host (<code>justonce console</code>).</p>",
        );
        return page("Upstreams", Some(session), &body);
    }
    for upstream in upstreams {
        let report = &upstream.report;
        let state = report.state.name();
        let _ = write!(
            body,
            "<section class=\"upstream\" id=\"upstream-{name}\"><h2>{name}</h2>\
             <p>State: <span class=\"badge state-{state}\">{state}</span></p><p>{}</p>",
            escape(&report.state.describe(&report.name)),
            name = escape(&report.name),
        );
        if let Some(error) = report.state.last_error() {
            let _ = write!(body, "<p class=\"error\">Last error: {}</p>", escape(error));
        }
        let _ = write!(
            body,
            "<p>Starts: {} · ready in: {}</p>",
            report.starts,
            report
                .ready_in
                .map(|d| format!("{} ms", d.as_millis()))
                .unwrap_or_else(|| "never yet".into())
        );
        let _ = write!(body, "<p>Tools ({}): ", upstream.tools.len());
        for (i, tool) in upstream.tools.iter().enumerate() {
            if i > 0 {
                body.push_str(", ");
            }
            let _ = write!(body, "<code>{}</code>", escape(tool));
        }
        body.push_str("</p>");
        if upstream.waiting.is_empty() {
            body.push_str("<p>No call waits on it.</p>");
        } else {
            let _ = write!(
                body,
                "<p>Calls waiting on it ({}):</p><ul class=\"waiting\">",
                upstream.waiting.len()
            );
            for entry in &upstream.waiting {
                let _ = write!(
                    body,
                    "<li>{} <code>{}</code> {}</li>",
                    short_key(&entry.key, Some(&super::html::call_path(&entry.key))),
                    escape(&entry.tool),
                    view::badges(entry)
                );
            }
            body.push_str("</ul>");
        }
        if session.role.acts() {
            for act in UpstreamAct::ALL.into_iter().filter(|a| a.applies(state)) {
                let _ = write!(
                    body,
                    "<form method=\"post\" action=\"{ROOT}/upstream\" class=\"inline\">{}\
                     <input type=\"hidden\" name=\"name\" value=\"{}\">\
                     <input type=\"hidden\" name=\"action\" value=\"{act}\">\
                     <button type=\"submit\">{act}</button></form>",
                    csrf_field(session),
                    escape(&report.name),
                    act = act.name(),
                );
            }
        }
        body.push_str("</section>");
    }
    page("Upstreams", Some(session), &body)
}
