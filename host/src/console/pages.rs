//! The console's pages as HTML: every value escaped (see [`super::html`]).

use std::fmt::Write as _;

use super::html::{ROOT, call_path, csrf_field, escape, json_block, link, page, url_value};
use super::sessions::BrowserSession;
use super::view::{Filters, STATES, principal_and_conversation, states};
use crate::clock::rfc3339;
use crate::journal::{CallStory, JournalEffect, JournalEntry, UnresolvedEffect};
use crate::providers::OutboxMessage;

/// The most characters of one JSON value (arguments, an answer, an outcome) a page
/// shows; the JSON API has all of it.
const SHOWN_CHARS: usize = 20_000;

/// What an operator can do from the console, with its form's name and its question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// `justonce resolve KEY --performed`.
    ResolvePerformed,
    /// `justonce resolve KEY --not-performed`.
    ResolveNotPerformed,
    /// `justonce forget KEY`.
    Forget,
    /// `justonce abandon KEY`.
    Abandon,
}

impl Act {
    /// Every action.
    pub const ALL: [Self; 4] = [
        Self::ResolvePerformed,
        Self::ResolveNotPerformed,
        Self::Forget,
        Self::Abandon,
    ];

    /// Its name in forms.
    pub fn name(self) -> &'static str {
        match self {
            Self::ResolvePerformed => "resolve-performed",
            Self::ResolveNotPerformed => "resolve-not-performed",
            Self::Forget => "forget",
            Self::Abandon => "abandon",
        }
    }

    /// The action named `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// What the confirmation asks.
    fn question(self) -> &'static str {
        match self {
            Self::ResolvePerformed => {
                "Resolve this effect as performed? The call's retry gets the answer below instead \
                 of an attempt."
            }
            Self::ResolveNotPerformed => {
                "Resolve this effect as not performed? The call's retry makes one more attempt \
                 under the same key."
            }
            Self::Forget => {
                "Forget this call? Its record goes, and the same call runs again (its effects \
                 under new keys)."
            }
            Self::Abandon => {
                "Abandon this call? It is closed with a saved 'abandoned' outcome that every \
                 retry replays."
            }
        }
    }

    /// What the key is called.
    fn key_kind(self) -> &'static str {
        match self {
            Self::ResolvePerformed | Self::ResolveNotPerformed => "effect key",
            Self::Forget | Self::Abandon => "invocation key",
        }
    }
}

/// The link to the confirmation of `act` on `key`.
fn act_link(act: Act, key: &str, text: &str) -> String {
    link(
        &format!(
            "{ROOT}/confirm?action={}&key={}",
            act.name(),
            url_value(key)
        ),
        text,
    )
}

/// The login form, with `problem` above it when the last try failed.
pub fn login(problem: Option<&str>) -> String {
    let mut body = String::new();
    if let Some(problem) = problem {
        let _ = write!(body, "<p class=\"error\">{}</p>", escape(problem));
    }
    let _ = write!(
        body,
        "<form method=\"post\" action=\"{ROOT}/login\" class=\"login\">\
         <label>Token <input type=\"password\" name=\"token\" autocomplete=\"off\" required></label>\
         <button type=\"submit\">Open the console</button></form>\
         <p class=\"note\">A viewer's or operator's token (<code>justonce token add NAME --role viewer</code>).</p>"
    );
    page("Log in", None, &body)
}

/// A short message page (an error, a refusal, a result).
pub fn message(
    title: &str,
    session: Option<&BrowserSession>,
    text: &str,
    back: Option<&str>,
) -> String {
    let mut body = format!("<p class=\"message\">{}</p>", escape(text));
    if let Some(back) = back {
        let _ = write!(body, "<p>{}</p>", link(back, "Back"));
    }
    page(title, session, &body)
}

fn text_input(name: &str, label: &str, value: Option<&str>) -> String {
    format!(
        "<label>{} <input name=\"{name}\" value=\"{}\"></label>",
        escape(label),
        escape(value.unwrap_or(""))
    )
}

/// The calls, newest first, with the filter form.
pub fn calls(session: &BrowserSession, filters: &Filters, entries: &[JournalEntry]) -> String {
    let mut body = String::from("<form method=\"get\" action=\"/console\" class=\"filters\">");
    body.push_str(&text_input(
        "q",
        "Search key, effect key or tool-call id",
        filters.search.as_deref(),
    ));
    body.push_str(&text_input("tool", "Tool", filters.tool.as_deref()));
    body.push_str("<label>State <select name=\"state\"><option value=\"\">any</option>");
    for (state, meaning) in STATES {
        let selected = if filters.state.as_deref() == Some(state) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            body,
            "<option value=\"{state}\"{selected} title=\"{}\">{state}</option>",
            escape(meaning)
        );
    }
    body.push_str("</select></label>");
    body.push_str(&text_input(
        "principal",
        "Principal",
        filters.principal.as_deref(),
    ));
    body.push_str(&text_input(
        "conversation",
        "Conversation",
        filters.conversation.as_deref(),
    ));
    body.push_str("<button type=\"submit\">Filter</button></form>");
    let since = entries
        .iter()
        .map(|e| e.completed_at.unwrap_or(e.created_at).max(e.created_at))
        .max()
        .unwrap_or(0);
    let _ = write!(
        body,
        "<p class=\"note\">Calls listed: {}, newest first. <span id=\"live\" data-since=\"{since}\">New calls appear here as they are made.</span></p>\
         <table id=\"calls\"><thead><tr><th>Created</th><th>Tool</th><th>State</th><th>Principal</th>\
         <th>Conversation</th><th>Runs</th><th>Replays</th><th>Outcome</th><th>Key</th></tr></thead><tbody>",
        entries.len()
    );
    for e in entries {
        body.push_str(&call_row(e));
    }
    body.push_str("</tbody></table>");
    if entries.is_empty() {
        body.push_str("<p>No calls match.</p>");
    }
    page("Calls", Some(session), &body)
}

/// One row of the calls table.
fn call_row(e: &JournalEntry) -> String {
    let (principal, conversation) = principal_and_conversation(&e.conversation);
    format!(
        "<tr data-key=\"{key}\"><td>{}</td><td>{}</td><td class=\"state\" title=\"{holding}\">{}</td><td>{}</td><td>{}</td>\
         <td>{}</td><td>{}</td><td class=\"outcome\">{}</td><td class=\"key\">{}</td></tr>",
        rfc3339(e.created_at),
        escape(&e.tool),
        states(e).join(" "),
        escape(principal.as_deref().unwrap_or("")),
        escape(&conversation),
        e.runs,
        e.replays,
        escape(e.summary.as_deref().unwrap_or("")),
        link(&call_path(&e.key), &e.key),
        key = escape(&e.key),
        holding = escape(&e.holding),
    )
}

/// What the live view sends about a call: the same cells as its row.
pub fn live_row(e: &JournalEntry) -> serde_json::Value {
    let (principal, conversation) = principal_and_conversation(&e.conversation);
    serde_json::json!({
        "key": e.key,
        "url": call_path(&e.key),
        "created_at": rfc3339(e.created_at),
        "tool": e.tool,
        "state": states(e).join(" "),
        "principal": principal.unwrap_or_default(),
        "conversation": conversation,
        "runs": e.runs,
        "replays": e.replays,
        "outcome": e.summary.clone().unwrap_or_default(),
    })
}

/// One call's story.
pub fn story(session: &BrowserSession, story: &CallStory) -> String {
    let mut body = String::new();
    let acts = session.role.acts();
    let Some(e) = &story.entry else {
        let _ = write!(
            body,
            "<p>No record of <code>{}</code>: never made, expired, or forgotten.</p>",
            escape(&story.key)
        );
        operations(&mut body, story);
        return page("Call", Some(session), &body);
    };
    let (principal, conversation) = principal_and_conversation(&e.conversation);
    let _ = write!(
        body,
        "<dl class=\"facts\"><dt>Key</dt><dd class=\"key\">{}</dd><dt>Tool</dt><dd>{}</dd>\
         <dt>State</dt><dd>{}{}</dd><dt>Principal</dt><dd>{}</dd><dt>Conversation</dt><dd>{}</dd>\
         <dt>Created</dt><dd>{}</dd><dt>Completed</dt><dd>{}</dd><dt>Runs</dt><dd>{}</dd>\
         <dt>Replays</dt><dd>{}</dd><dt>Tool-call ids</dt><dd>{}</dd><dt>Component</dt><dd>{}</dd></dl>",
        escape(&e.key),
        escape(&e.tool),
        states(e).join(" "),
        if e.holding.is_empty() {
            String::new()
        } else {
            format!("<br><span class=\"holding\">{}</span>", escape(&e.holding))
        },
        escape(principal.as_deref().unwrap_or("(none: not over HTTP)")),
        escape(&conversation),
        rfc3339(e.created_at),
        e.completed_at.map(rfc3339).unwrap_or_default(),
        e.runs,
        e.replays,
        escape(&e.tool_call_ids.join(", ")),
        escape(e.component.as_deref().unwrap_or("")),
    );
    body.push_str(
        "<h2>Arguments</h2><p class=\"note\">As normalized (canonical JSON): the key is derived \
         from the tool, these arguments and the conversation's scope.</p>",
    );
    match &e.arguments {
        Some(arguments) => body.push_str(&json_block(arguments, SHOWN_CHARS)),
        None => body.push_str("<p>(not stored: recorded before justonce kept arguments)</p>"),
    }
    let _ = write!(body, "<h2>Effects</h2>");
    if e.effects.is_empty() {
        body.push_str("<p>No effect.</p>");
    }
    for f in &e.effects {
        effect(&mut body, f, acts);
    }
    body.push_str("<h2>Outcome</h2>");
    match (&e.summary, &e.outcome) {
        (Some(summary), Some(outcome)) => {
            let _ = write!(body, "<p class=\"summary\">{}</p>", escape(summary));
            body.push_str(&json_block(outcome, SHOWN_CHARS));
        }
        _ => body.push_str("<p>None saved yet.</p>"),
    }
    if acts && e.state != "completed" {
        let _ = write!(
            body,
            "<p class=\"actions\">{} {}</p>",
            act_link(Act::Abandon, &e.key, "Abandon…"),
            act_link(Act::Forget, &e.key, "Forget…")
        );
    } else if acts {
        let _ = write!(
            body,
            "<p class=\"actions\">{}</p>",
            act_link(Act::Forget, &e.key, "Forget…")
        );
    }
    operations(&mut body, story);
    let _ = write!(
        body,
        "<p class=\"note\">{}</p>",
        link(
            &format!("{ROOT}/api/call?key={}", url_value(&e.key)),
            "This call as JSON"
        )
    );
    page("Call", Some(session), &body)
}

fn effect(body: &mut String, f: &JournalEffect, acts: bool) {
    let _ = write!(
        body,
        "<section class=\"effect\"><h3>#{} {}.{} <span class=\"state\">{}</span></h3>\
         <dl class=\"facts\"><dt>Key</dt><dd class=\"key\">{}</dd><dt>Class</dt><dd>{}</dd>\
         <dt>Attempts</dt><dd>{}</dd><dt>Resolution</dt><dd>{}</dd><dt>Last error</dt><dd>{}</dd>\
         <dt>Journaled</dt><dd>{}</dd><dt>Last touched</dt><dd>{}</dd></dl>",
        f.seq,
        escape(&f.provider),
        escape(&f.operation),
        escape(&f.state),
        escape(&f.key),
        escape(&f.class),
        f.attempts,
        escape(f.resolution.as_deref().unwrap_or("")),
        escape(f.last_error.as_deref().unwrap_or("")),
        rfc3339(f.created_at),
        rfc3339(f.updated_at),
    );
    if let Some(response) = &f.response {
        body.push_str("<h4>Answer</h4>");
        body.push_str(&json_block(response, SHOWN_CHARS));
    }
    if acts && f.state == "pending" && f.class == "unkeyed" {
        let _ = write!(
            body,
            "<p class=\"actions\">{} {}</p>",
            act_link(Act::ResolvePerformed, &f.key, "Resolve as performed…"),
            act_link(
                Act::ResolveNotPerformed,
                &f.key,
                "Resolve as not performed…"
            )
        );
    }
    body.push_str("</section>");
}

fn operations(body: &mut String, story: &CallStory) {
    body.push_str("<h2>Operations</h2>");
    if story.operations.is_empty() {
        body.push_str("<p>None.</p>");
        return;
    }
    body.push_str("<table class=\"operations\"><thead><tr><th>When</th><th>Action</th><th>By</th><th>Detail</th></tr></thead><tbody>");
    for o in &story.operations {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td class=\"by\">{}</td><td>{}</td></tr>",
            rfc3339(o.at),
            o.action.as_str(),
            escape(&o.by),
            json_block(&o.detail, SHOWN_CHARS)
        );
    }
    body.push_str("</tbody></table>");
}

/// The pending unkeyed effects that wait for a person.
pub fn unresolved(session: &BrowserSession, effects: &[UnresolvedEffect]) -> String {
    let mut body = String::from(
        "<p class=\"note\">Effects whose outcome is unknown and that the host cannot retry by \
         itself (unkeyed): say whether each happened, then retry its call.</p>",
    );
    if effects.is_empty() {
        body.push_str("<p>No unresolved effect.</p>");
        return page("Unresolved effects", Some(session), &body);
    }
    body.push_str(
        "<table id=\"unresolved\"><thead><tr><th>Effect</th><th>Key</th><th>Tool</th><th>Principal</th>\
         <th>Conversation</th><th>Attempts</th><th>Last error</th><th>Last touched</th><th>Call</th><th></th></tr></thead><tbody>",
    );
    for e in effects {
        let (principal, conversation) = principal_and_conversation(&e.conversation);
        let actions = if session.role.acts() {
            format!(
                "{} {}",
                act_link(Act::ResolvePerformed, &e.key, "Performed…"),
                act_link(Act::ResolveNotPerformed, &e.key, "Not performed…")
            )
        } else {
            String::new()
        };
        let _ = write!(
            body,
            "<tr data-key=\"{}\"><td>#{} {}.{}</td><td class=\"key\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"actions\">{actions}</td></tr>",
            escape(&e.key),
            e.seq,
            escape(&e.provider),
            escape(&e.operation),
            escape(&e.key),
            escape(&e.tool),
            escape(principal.as_deref().unwrap_or("")),
            escape(&conversation),
            e.attempts,
            escape(e.last_error.as_deref().unwrap_or("")),
            rfc3339(e.updated_at),
            link(&call_path(&e.invocation), "story"),
        );
    }
    body.push_str("</tbody></table>");
    page("Unresolved effects", Some(session), &body)
}

/// The outbox's messages.
pub fn outbox(session: &BrowserSession, messages: &[OutboxMessage]) -> String {
    let mut body = String::new();
    if messages.is_empty() {
        body.push_str("<p>The outbox is empty.</p>");
        return page("Outbox", Some(session), &body);
    }
    body.push_str(
        "<table id=\"outbox\"><thead><tr><th>Id</th><th>State</th><th>Tool</th><th>Method</th><th>URL</th>\
         <th>Attempts</th><th>Last status</th><th>Last error</th><th>Effect key</th></tr></thead><tbody>",
    );
    for m in messages {
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"state\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td class=\"key\">{}</td></tr>",
            m.id,
            escape(&m.state),
            escape(&m.tool),
            escape(&m.method),
            escape(&m.url),
            m.attempts,
            m.last_status.map(|s| s.to_string()).unwrap_or_default(),
            escape(m.last_error.as_deref().unwrap_or("")),
            escape(&m.effect_key),
        );
    }
    body.push_str("</tbody></table>");
    page("Outbox", Some(session), &body)
}

/// The confirmation of `act` on `key`: a form that carries the CSRF token.
pub fn confirm(session: &BrowserSession, act: Act, key: &str) -> String {
    let mut body = format!(
        "<p class=\"question\">{}</p><p>{}: <code class=\"key\">{}</code></p>\
         <form method=\"post\" action=\"{ROOT}/act\" class=\"confirm\">{}\
         <input type=\"hidden\" name=\"action\" value=\"{}\">\
         <input type=\"hidden\" name=\"key\" value=\"{}\">",
        escape(act.question()),
        act.key_kind(),
        escape(key),
        csrf_field(session),
        act.name(),
        escape(key),
    );
    if act == Act::ResolvePerformed {
        body.push_str(
            "<label>The downstream's answer (JSON), as far as you know it \
             <textarea name=\"response\" rows=\"4\">{}</textarea></label>",
        );
    }
    let _ = write!(
        body,
        "<button type=\"submit\" id=\"confirm\">Confirm</button> {}</form>",
        link(ROOT, "Cancel")
    );
    page("Confirm", Some(session), &body)
}

/// What an action did, with a link to its call.
pub fn done(
    session: &BrowserSession,
    what: &str,
    operation: &serde_json::Value,
    call: &str,
) -> String {
    let body = format!(
        "<p class=\"message\">{}</p>{}<p>{}</p>",
        escape(what),
        json_block(operation, SHOWN_CHARS),
        link(&call_path(call), "Back to the call")
    );
    page("Done", Some(session), &body)
}
