//! The console's pages as HTML: every value escaped (see [`super::html`]).

use std::fmt::Write as _;

use super::html::{
    ROOT, call_path, csrf_field, escape, json_block, link, page, short_key, time, url_value,
};
use super::sessions::BrowserSession;
use super::timeline::{duration, timeline};
use super::view::{self, Filters, STATES, badges, principal_and_conversation, states};
use crate::journal::{CallStory, JournalEffect, JournalEntry, JournalOperation, UnresolvedEffect};
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
    /// Runs a stopped call again now, on this host, under its own key: what the
    /// agent's retry would do.
    Resume,
}

impl Act {
    /// Every action.
    pub const ALL: [Self; 5] = [
        Self::ResolvePerformed,
        Self::ResolveNotPerformed,
        Self::Forget,
        Self::Abandon,
        Self::Resume,
    ];

    /// Its name in forms.
    pub fn name(self) -> &'static str {
        match self {
            Self::ResolvePerformed => "resolve-performed",
            Self::ResolveNotPerformed => "resolve-not-performed",
            Self::Forget => "forget",
            Self::Abandon => "abandon",
            Self::Resume => "resume",
        }
    }

    /// The action named `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether the journal may be told to override its safety check (`--force`).
    pub fn forceable(self) -> bool {
        matches!(self, Self::Forget | Self::Abandon)
    }

    /// The confirmation's title.
    fn title(self, force: bool) -> &'static str {
        match (self, force) {
            (Self::ResolvePerformed, _) => "Resolve as performed",
            (Self::ResolveNotPerformed, _) => "Resolve as not performed",
            (Self::Forget, false) => "Forget this call",
            (Self::Forget, true) => "Forget this call, forced",
            (Self::Abandon, false) => "Abandon this call",
            (Self::Abandon, true) => "Abandon this call, forced",
            (Self::Resume, _) => "Resume this call now",
        }
    }

    /// What happens when it is confirmed.
    fn question(self) -> &'static str {
        match self {
            Self::ResolvePerformed => {
                "The effect is marked performed with the answer below: the call's next retry \
                 gets that answer instead of an attempt, and finishes."
            }
            Self::ResolveNotPerformed => {
                "The effect is marked not performed: the call's next retry makes one more \
                 attempt under the same key."
            }
            Self::Forget => {
                "The call's record is deleted (the audit line stays). The agent's next retry \
                 of the same call runs it from the start, and its effects go downstream under \
                 new keys: the downstream cannot recognise them as repeats."
            }
            Self::Abandon => {
                "The call is closed with a saved 'abandoned' outcome: every retry of it gets \
                 that answer and nothing runs again. Its effects stay as they are."
            }
            Self::Resume => {
                "This host runs the call again now under the same key, exactly as the agent's \
                 retry would: effects already answered replay from the journal, a pending keyed \
                 effect is sent again under the same idempotency key (the downstream applies it \
                 once), and the outcome is saved, so the agent's next retry gets it."
            }
        }
    }

    /// What the key is called.
    fn key_kind(self) -> &'static str {
        match self {
            Self::ResolvePerformed | Self::ResolveNotPerformed => "effect key",
            Self::Forget | Self::Abandon | Self::Resume => "invocation key",
        }
    }
}

/// The path of the confirmation of `act` on `key` (forced: with the override).
pub fn confirm_path(act: Act, key: &str, force: bool) -> String {
    format!(
        "{ROOT}/confirm?action={}&key={}{}",
        act.name(),
        url_value(key),
        if force { "&force=1" } else { "" }
    )
}

/// The link to the confirmation of `act` on `key`.
fn act_link(act: Act, key: &str, text: &str) -> String {
    link(&confirm_path(act, key, false), text)
}

/// The button-looking link to the confirmation of `act` on `key`.
fn act_button(act: Act, key: &str, text: &str, class: &str) -> String {
    format!(
        "<a class=\"button {class}\" id=\"{}\" href=\"{}\">{}</a>",
        act.name(),
        escape(&confirm_path(act, key, false)),
        escape(text)
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
pub fn calls(
    session: &BrowserSession,
    filters: &Filters,
    entries: &[JournalEntry],
    now: i64,
) -> String {
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
        "<p class=\"note\">Calls listed: {}, newest first. <span id=\"live\" data-since=\"{since}\">New calls appear here as they are made.</span></p>",
        entries.len()
    );
    body.push_str(&calls_table("calls", entries, now));
    if entries.is_empty() {
        body.push_str("<p>No calls match.</p>");
    }
    page("Calls", Some(session), &body)
}

/// A table of calls, `id` its element id.
fn calls_table(id: &str, entries: &[JournalEntry], now: i64) -> String {
    let mut out = format!(
        "<table id=\"{id}\" class=\"calls\"><thead><tr><th>Created</th><th>Tool</th><th>State</th><th>Principal</th>\
         <th>Conversation</th><th>Runs</th><th>Outcome</th><th>Key</th></tr></thead><tbody>"
    );
    for e in entries {
        out.push_str(&call_row(e, now));
    }
    out.push_str("</tbody></table>");
    out
}

/// One row of a calls table.
fn call_row(e: &JournalEntry, now: i64) -> String {
    let (principal, conversation) = principal_and_conversation(&e.conversation);
    let holding = if e.holding.is_empty() {
        String::new()
    } else {
        format!("<div class=\"holding\">{}</div>", escape(&e.holding))
    };
    format!(
        "<tr data-key=\"{key}\" data-states=\"{}\"><td>{}</td><td>{}</td><td class=\"state\">{}{holding}</td><td>{}</td><td>{}</td>\
         <td>{}</td><td class=\"outcome\">{}</td><td class=\"key\">{}</td></tr>",
        states(e).join(" "),
        time(e.created_at, now),
        escape(&e.tool),
        badges(e),
        escape(principal.as_deref().unwrap_or("")),
        escape(&conversation),
        e.runs,
        escape(e.summary.as_deref().unwrap_or("")),
        short_key(&e.key, Some(&call_path(&e.key))),
        key = escape(&e.key),
    )
}

/// What the live view sends about a call: the same cells as its row, as HTML the
/// console escaped (the page sets it with `innerHTML` only from these fields).
pub fn live_row(e: &JournalEntry) -> serde_json::Value {
    serde_json::json!({
        "key": e.key,
        "row": call_row(e, e.judged),
    })
}

/// The "needs attention" page: the calls a person must look at (a host stopped
/// holding them, an unknown outcome, a divergence), the deliveries that keep
/// failing, and the calls running now with who holds them.
pub fn attention(
    session: &BrowserSession,
    entries: &[JournalEntry],
    failing: &[OutboxMessage],
    unresolved: usize,
    now: i64,
) -> String {
    let stuck: Vec<(&JournalEntry, String)> = entries
        .iter()
        .filter_map(|e| view::attention(e).map(|why| (e, why)))
        .collect();
    let running: Vec<&JournalEntry> = entries
        .iter()
        .filter(|e| states(e).first() == Some(&"running"))
        .collect();
    let mut body = String::new();
    if stuck.is_empty() && failing.is_empty() {
        body.push_str("<p class=\"all-clear\">Nothing needs attention: no call is stopped, stuck on an unknown outcome or diverged, and no delivery is failing.</p>");
    } else {
        let _ = write!(
            body,
            "<p class=\"note\">Waiting for a person: {} call(s), {} failing deliver{}. Open a call for its story and what can be done.</p>",
            stuck.len(),
            failing.len(),
            if failing.len() == 1 { "y" } else { "ies" },
        );
    }
    if !stuck.is_empty() {
        body.push_str(
            "<h2>Calls</h2><table id=\"attention\" class=\"calls\"><thead><tr><th>Created</th><th>Tool</th>\
             <th>State</th><th>Why it needs you</th><th>Principal</th><th>Key</th></tr></thead><tbody>",
        );
        for (e, why) in &stuck {
            let (principal, _) = principal_and_conversation(&e.conversation);
            let _ = write!(
                body,
                "<tr data-key=\"{key}\"><td>{}</td><td>{}</td><td class=\"state\">{}</td><td class=\"why\">{}</td>\
                 <td>{}</td><td class=\"key\">{}</td></tr>",
                time(e.created_at, now),
                escape(&e.tool),
                badges(e),
                escape(why),
                escape(principal.as_deref().unwrap_or("")),
                short_key(&e.key, Some(&call_path(&e.key))),
                key = escape(&e.key),
            );
        }
        body.push_str("</tbody></table>");
    }
    if unresolved > 0 {
        let _ = write!(
            body,
            "<p>{} unkeyed effect{} wait{} for a person to say whether {} happened: {}.</p>",
            unresolved,
            if unresolved == 1 { "" } else { "s" },
            if unresolved == 1 { "s" } else { "" },
            if unresolved == 1 { "it" } else { "they" },
            link(&format!("{ROOT}/unresolved"), "unresolved effects")
        );
    }
    if !failing.is_empty() {
        body.push_str(
            "<h2>Deliveries failing</h2><table id=\"failing\"><thead><tr><th>Id</th><th>Tool</th><th>URL</th>\
             <th>Attempts</th><th>Last status</th><th>Last error</th></tr></thead><tbody>",
        );
        for m in failing {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                m.id,
                escape(&m.tool),
                escape(&m.url),
                m.attempts,
                m.last_status.map(|s| s.to_string()).unwrap_or_default(),
                escape(m.last_error.as_deref().unwrap_or("")),
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("<h2>Running now</h2>");
    if running.is_empty() {
        body.push_str("<p>No call is running.</p>");
    } else {
        body.push_str(&calls_table(
            "running",
            &running.into_iter().cloned().collect::<Vec<_>>(),
            now,
        ));
    }
    let _ = write!(
        body,
        "<p class=\"note\">Read over the newest {} call(s). {}</p>",
        entries.len(),
        link(ROOT, "All calls")
    );
    page("Needs attention", Some(session), &body)
}

/// What the console can do besides reading: whether this console runs calls (it is
/// part of `serve --http`, so "resume now" is offered).
#[derive(Debug, Clone, Copy)]
pub struct Abilities {
    /// The console runs calls on its host.
    pub resumes: bool,
}

/// Whether `e` is a call "resume now" applies to: open, and nobody holds it (its
/// host stopped, or it stopped on an unknown outcome or a divergence).
pub fn resumable(e: &JournalEntry) -> bool {
    let s = states(e);
    e.state != "completed" && !s.contains(&"running")
}

/// One call's story.
pub fn story(
    session: &BrowserSession,
    story: &CallStory,
    abilities: Abilities,
    now: i64,
) -> String {
    let mut body = String::new();
    let acts = session.role.acts();
    let Some(e) = &story.entry else {
        let _ = write!(
            body,
            "<p>No record of <code>{}</code>: never made, expired, or forgotten.</p>",
            escape(&story.key)
        );
        operations(&mut body, story, now);
        return page("Call", Some(session), &body);
    };
    let (principal, conversation) = principal_and_conversation(&e.conversation);
    let why = view::attention(e)
        .map(|why| format!("<p class=\"why\">{}</p>", escape(&why)))
        .unwrap_or_default();
    let _ = write!(
        body,
        "<div class=\"headline\"><span class=\"tool\">{}</span> {}</div>{why}",
        escape(&e.tool),
        badges(e),
    );
    if acts {
        body.push_str(&story_actions(e, abilities));
    }
    let _ = write!(
        body,
        "<dl class=\"facts\"><dt>Key</dt><dd>{}</dd><dt>Lease</dt><dd class=\"holding\">{}</dd>\
         <dt>Principal</dt><dd>{}</dd><dt>Conversation</dt><dd>{}</dd>\
         <dt>Created</dt><dd>{}</dd><dt>Completed</dt><dd>{}</dd><dt>Expires</dt><dd>{}</dd>\
         <dt>Runs</dt><dd>{}</dd>\
         <dt>Replays</dt><dd>{}</dd><dt>Tool-call ids</dt><dd>{}</dd><dt>Component</dt><dd>{}</dd></dl>",
        short_key(&e.key, None),
        escape(if e.holding.is_empty() {
            "nobody (no host runs it now)"
        } else {
            &e.holding
        }),
        escape(principal.as_deref().unwrap_or("(none: not over HTTP)")),
        escape(&conversation),
        time(e.created_at, now),
        e.completed_at
            .map(|at| format!("{} (took {})", time(at, now), duration(at - e.created_at)))
            .unwrap_or_else(|| "not yet".into()),
        expires(e, now),
        e.runs,
        e.replays,
        escape(&e.tool_call_ids.join(", ")),
        escape(e.component.as_deref().unwrap_or("")),
    );
    body.push_str("<h2>Timeline</h2>");
    body.push_str(&timeline(story, now));
    body.push_str("<h2>Outcome</h2>");
    match (&e.summary, &e.outcome) {
        (Some(summary), Some(outcome)) => {
            let _ = write!(body, "<p class=\"summary\">{}</p>", escape(summary));
            body.push_str(&json_block(outcome, SHOWN_CHARS));
        }
        _ => body.push_str("<p>None saved yet.</p>"),
    }
    let _ = write!(body, "<h2>Effects</h2>");
    if e.effects.is_empty() {
        body.push_str("<p>No effect.</p>");
    }
    for f in &e.effects {
        effect(&mut body, f, acts, now);
    }
    body.push_str(
        "<h2>Arguments</h2><p class=\"note\">As normalized (canonical JSON): the key is derived \
         from the tool, these arguments and the conversation's scope.</p>",
    );
    match &e.arguments {
        Some(arguments) => body.push_str(&json_block(arguments, SHOWN_CHARS)),
        None => body.push_str("<p>(not stored: recorded before justonce kept arguments)</p>"),
    }
    operations(&mut body, story, now);
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

/// When a call's record expires, in words: from then on the same call is a new one.
fn expires(e: &JournalEntry, now: i64) -> String {
    match e.expires_at {
        Some(at) if e.expired(now) => format!(
            "{} (expired: the same call runs again as a new one)",
            time(at, now)
        ),
        Some(at) => time(at, now),
        None if e.completed_at.is_some() => "at the end of the host's retention window".into(),
        None => "never while the call is open".into(),
    }
}

/// The actions an operator has on call `e`, each saying in a word what it does.
fn story_actions(e: &JournalEntry, abilities: Abilities) -> String {
    let mut out = String::from("<div class=\"actions\">");
    if resumable(e) {
        if abilities.resumes {
            out.push_str(&act_button(Act::Resume, &e.key, "Resume now…", "primary"));
        } else {
            out.push_str(
                "<span class=\"note\">Resume: this console does not run calls (open the console \
                 of a <code>serve --http</code> host), or retry the call from the agent.</span>",
            );
        }
    }
    if e.state != "completed" {
        out.push_str(&act_button(Act::Abandon, &e.key, "Abandon…", ""));
    }
    out.push_str(&act_button(Act::Forget, &e.key, "Forget…", ""));
    out.push_str("</div>");
    out
}

fn effect(body: &mut String, f: &JournalEffect, acts: bool, now: i64) {
    let (class, word) = match (f.state.as_str(), f.resolution.as_deref()) {
        ("pending", None) if f.attempts > 0 => ("unknown", "outcome unknown"),
        ("pending", Some(r)) => ("incomplete", r),
        ("pending", None) => ("running", "not sent yet"),
        ("refused", _) => ("failed", "refused by the host"),
        _ => ("completed", "answered"),
    };
    let _ = write!(
        body,
        "<section class=\"effect\"><h3>#{} {}.{} {}</h3>\
         <dl class=\"facts\"><dt>Key sent downstream</dt><dd>{}</dd><dt>Class</dt><dd>{}</dd>\
         <dt>Attempts</dt><dd>{}</dd><dt>Resolution</dt><dd>{}</dd><dt>Last error</dt><dd>{}</dd>\
         <dt>Journaled</dt><dd>{}</dd><dt>Last touched</dt><dd>{}</dd></dl>",
        f.seq,
        escape(&f.provider),
        escape(&f.operation),
        super::html::badge(class, word, &format!("journal state: {}", f.state)),
        short_key(&f.key, None),
        escape(&f.class),
        f.attempts,
        escape(f.resolution.as_deref().unwrap_or("")),
        escape(f.last_error.as_deref().unwrap_or("")),
        time(f.created_at, now),
        time(f.updated_at, now),
    );
    if let Some(disagreement) = f.catalog_disagreement() {
        let _ = write!(
            body,
            "<p class=\"note\">Class: {}</p>",
            escape(&disagreement)
        );
    }
    if let Some(response) = &f.response {
        body.push_str("<h4>Answer</h4>");
        body.push_str(&answer(response));
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

/// An effect's saved answer as a person reads it: an HTTP answer as its status and
/// its body (as JSON when it is), anything else as JSON.
fn answer(response: &serde_json::Value) -> String {
    let ok = &response["ok"];
    match (ok["status"].as_u64(), ok["body"].as_str()) {
        (Some(status), Some(text)) => {
            let body = serde_json::from_str::<serde_json::Value>(text)
                .map(|v| json_block(&v, SHOWN_CHARS))
                .unwrap_or_else(|_| super::html::text_block(text, SHOWN_CHARS));
            format!(
                "<p class=\"http-status\">HTTP {status}{}</p>{body}",
                if ok["truncated"] == true {
                    " (body truncated)"
                } else {
                    ""
                }
            )
        }
        _ => json_block(response, SHOWN_CHARS),
    }
}

fn operations(body: &mut String, story: &CallStory, now: i64) {
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
            time(o.at, now),
            o.action.as_str(),
            escape(&o.by),
            detail_list(&o.detail)
        );
    }
    body.push_str("</tbody></table>");
}

/// What needs someone, as `justonce journal --unresolved` lists it: the pending
/// unkeyed effects that wait for a person to say whether they happened, then the
/// calls stuck on a keyed effect whose outcome is unknown.
pub fn unresolved(session: &BrowserSession, effects: &[UnresolvedEffect], now: i64) -> String {
    let (person, stuck): (Vec<&UnresolvedEffect>, Vec<&UnresolvedEffect>) =
        effects.iter().partition(|e| e.class == "unkeyed");
    let mut body = String::new();
    if effects.is_empty() {
        body.push_str("<p>No unresolved effect and no stuck call.</p>");
        return page("Unresolved effects", Some(session), &body);
    }
    if !person.is_empty() {
        body.push_str(
            "<h2>Waiting for a person</h2><p class=\"note\">Effects whose outcome is unknown \
             and that the host cannot retry by itself (unkeyed): say whether each happened, \
             then retry its call.</p>",
        );
        effects_table(
            &mut body,
            "unresolved",
            &person,
            now,
            |e| {
                format!(
                    "{} {}",
                    act_link(Act::ResolvePerformed, &e.key, "Performed…"),
                    act_link(Act::ResolveNotPerformed, &e.key, "Not performed…")
                )
            },
            session,
        );
    }
    if !stuck.is_empty() {
        body.push_str(
            "<h2>Stuck with an unknown outcome</h2><p class=\"note\">Keyed effects whose \
             outcome is unknown: the next retry of the same call resends each under the same \
             key, so the downstream answers it once. Abandon closes a call for good.</p>",
        );
        effects_table(
            &mut body,
            "stuck",
            &stuck,
            now,
            |e| act_link(Act::Abandon, &e.invocation, "Abandon…"),
            session,
        );
    }
    page("Unresolved effects", Some(session), &body)
}

/// A table of `effects` with id `id`, each row with the actions `actions` makes for
/// it when the session's role acts.
fn effects_table(
    body: &mut String,
    id: &str,
    effects: &[&UnresolvedEffect],
    now: i64,
    actions: impl Fn(&UnresolvedEffect) -> String,
    session: &BrowserSession,
) {
    let _ = write!(
        body,
        "<table id=\"{id}\"><thead><tr><th>Effect</th><th>Key</th><th>Tool</th><th>Principal</th>\
         <th>Conversation</th><th>Attempts</th><th>Waits for</th><th>Last error</th><th>Last touched</th><th>Call</th><th></th></tr></thead><tbody>",
    );
    for e in effects {
        let (principal, conversation) = principal_and_conversation(&e.conversation);
        let actions = if session.role.acts() {
            actions(e)
        } else {
            String::new()
        };
        let _ = write!(
            body,
            "<tr data-key=\"{}\"><td>#{} {}.{}</td><td class=\"key\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td class=\"pending\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"actions\">{actions}</td></tr>",
            escape(&e.key),
            e.seq,
            escape(&e.provider),
            escape(&e.operation),
            escape(&e.key),
            escape(&e.tool),
            escape(principal.as_deref().unwrap_or("")),
            escape(&conversation),
            e.attempts,
            escape(e.pending.as_deref().unwrap_or("")),
            escape(e.last_error.as_deref().unwrap_or("")),
            time(e.updated_at, now),
            link(&call_path(&e.invocation), "story"),
        );
    }
    body.push_str("</tbody></table>");
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

/// The confirmation of `act` on `key` (`force`: overriding the journal's safety
/// check): what will happen, the call as it stands (`entry`, when the key is a
/// call's), and a form that carries the CSRF token.
pub fn confirm(
    session: &BrowserSession,
    act: Act,
    key: &str,
    force: bool,
    entry: Option<&JournalEntry>,
    now: i64,
) -> String {
    let force = force && act.forceable();
    let mut body = format!("<p class=\"question\">{}</p>", escape(act.question()));
    if force {
        let _ = write!(
            body,
            "<div class=\"warning\"><strong>Forced.</strong> The journal refused this because the \
             call has an effect whose outcome is unknown, or a host may still be running it. The \
             downstream may have applied that effect. {} Check the downstream (search its log for \
             the effect's key) before you force this.</div>",
            if act == Act::Forget {
                "Forgotten, the call runs again on the agent's retry and sends the effect under a \
                 new key, which the downstream cannot deduplicate: it may happen twice."
            } else {
                "Abandoned, the agent is told the call was abandoned though the effect may have \
                 happened, and nothing will finish it."
            }
        );
    } else if act.forceable()
        && entry.is_some_and(|e| e.has_unknown_effect() || states(e).contains(&"running"))
    {
        body.push_str(
            "<p class=\"note\">This call has an effect whose outcome is unknown or a host running \
             it: the journal will refuse this, and say what forcing it would mean.</p>",
        );
    }
    if let Some(e) = entry {
        let _ = write!(
            body,
            "<dl class=\"facts\"><dt>Call</dt><dd>{} {}</dd><dt>Key</dt><dd>{}</dd>\
             <dt>Lease</dt><dd class=\"holding\">{}</dd><dt>Created</dt><dd>{}</dd>\
             <dt>Effects</dt><dd>{}</dd></dl>",
            escape(&e.tool),
            badges(e),
            short_key(&e.key, Some(&call_path(&e.key))),
            escape(if e.holding.is_empty() {
                "nobody"
            } else {
                &e.holding
            }),
            time(e.created_at, now),
            e.effects.len(),
        );
    } else {
        let _ = write!(body, "<p>{}: {}</p>", act.key_kind(), short_key(key, None));
    }
    let _ = write!(
        body,
        "<form method=\"post\" action=\"{ROOT}/act\" class=\"confirm\">{}\
         <input type=\"hidden\" name=\"action\" value=\"{}\">\
         <input type=\"hidden\" name=\"key\" value=\"{}\">{}",
        csrf_field(session),
        act.name(),
        escape(key),
        if force {
            "<input type=\"hidden\" name=\"force\" value=\"1\">"
        } else {
            ""
        }
    );
    if act == Act::ResolvePerformed {
        body.push_str(
            "<label>The downstream's answer (JSON), as far as you know it \
             <textarea name=\"response\" rows=\"4\">{}</textarea></label>",
        );
    }
    let back = entry.map_or_else(|| ROOT.to_owned(), |e| call_path(&e.key));
    let _ = write!(
        body,
        "<button type=\"submit\" id=\"confirm\" class=\"{}\">{}</button> {}</form>",
        if force { "danger" } else { "primary" },
        escape(act.title(force)),
        link(&back, "Cancel")
    );
    page(act.title(force), Some(session), &body)
}

/// The refusal of `act` on `key` with the journal's `reason`; where the journal says
/// `--force` would override it, the way to the forced confirmation.
pub fn refused(session: &BrowserSession, act: Act, key: &str, reason: &str) -> String {
    let mut body = format!("<p class=\"message\">{}</p>", escape(reason));
    if act.forceable() && reason.contains("--force") {
        let _ = write!(
            body,
            "<p>Forcing it overrides the check, with the risk it names: {}</p>",
            link(
                &confirm_path(act, key, true),
                "Force it (read the warning first)…"
            )
        );
    }
    let _ = write!(body, "<p>{}</p>", link(&call_path(key), "Back to the call"));
    page("Refused", Some(session), &body)
}

/// What an action did, in words, with the operation's facts and a link to its call.
pub fn done(
    session: &BrowserSession,
    what: &str,
    operation: &JournalOperation,
    now: i64,
) -> String {
    let mut body = format!(
        "<p class=\"message\">{}</p><dl class=\"facts\"><dt>Action</dt><dd>{}</dd><dt>By</dt>\
         <dd class=\"by\">{}</dd><dt>When</dt><dd>{}</dd><dt>Call</dt><dd>{}</dd>",
        escape(what),
        operation.action.as_str(),
        escape(&operation.by),
        time(operation.at, now),
        short_key(&operation.key, Some(&call_path(&operation.key))),
    );
    let _ = write!(
        body,
        "</dl><h2>What the journal recorded</h2>{}<p>{}</p>",
        detail_list(&operation.detail),
        link(&call_path(&operation.key), "Back to the call")
    );
    page("Done", Some(session), &body)
}

/// An operation's detail as a list a person reads: each field in words, an object's
/// fields inline, a list by its items.
fn detail_list(detail: &serde_json::Value) -> String {
    fn text(value: &serde_json::Value) -> String {
        match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => "none".into(),
            serde_json::Value::Object(fields) => fields
                .iter()
                .map(|(k, v)| format!("{}: {}", k.replace('_', " "), text(v)))
                .collect::<Vec<_>>()
                .join(", "),
            serde_json::Value::Array(items) if items.is_empty() => "none".into(),
            serde_json::Value::Array(items) => {
                items.iter().map(text).collect::<Vec<_>>().join("; ")
            }
            other => other.to_string(),
        }
    }
    let Some(fields) = detail.as_object() else {
        return json_block(detail, SHOWN_CHARS);
    };
    let mut out = String::from("<dl class=\"facts detail\">");
    for (name, value) in fields {
        let shown: String = text(value).chars().take(2000).collect();
        let _ = write!(
            out,
            "<dt>{}</dt><dd>{}</dd>",
            escape(&name.replace('_', " ")),
            escape(&shown)
        );
    }
    out.push_str("</dl>");
    out
}

/// What "resume now" did: the call's answer as the agent's retry will get it.
pub fn resumed(
    session: &BrowserSession,
    key: &str,
    answer: &Result<crate::call::CallResponse, crate::error::Error>,
    took: std::time::Duration,
) -> String {
    let mut body = String::new();
    match answer {
        Ok(response) => {
            let summary = match &response.outcome {
                crate::outcome::Outcome::Success { .. } => "success".to_owned(),
                crate::outcome::Outcome::ToolError { code, message, .. } => {
                    format!("tool_error {code}: {message}")
                }
                crate::outcome::Outcome::Trap { reason, message } => {
                    format!("trap {reason}: {}", message.lines().next().unwrap_or(""))
                }
            };
            let _ = write!(
                body,
                "<p class=\"message\">Resumed under the same key: {}</p>\
                 <dl class=\"facts\"><dt>Key</dt><dd>{}</dd><dt>Outcome</dt><dd class=\"summary\">{}</dd>\
                 <dt>Took</dt><dd>{}</dd></dl><p class=\"note\">The agent's next retry of this call gets \
                 this outcome from the journal; nothing runs again.</p>",
                if response.replayed {
                    super::html::badge(
                        "replayed",
                        "already finished",
                        "another host finished it first: its saved outcome",
                    )
                } else {
                    super::html::badge("completed", "completed", "run now and its outcome saved")
                },
                short_key(key, Some(&call_path(key))),
                escape(&summary),
                duration(i64::try_from(took.as_millis()).unwrap_or(i64::MAX)),
            );
        }
        Err(error) => {
            let _ = write!(
                body,
                "<p class=\"message error\">The resumed run did not finish: {}</p>\
                 <p class=\"note\">What the agent's retry would have been told. The call's story \
                 says where it stands now.</p>",
                escape(&error.to_string())
            );
        }
    }
    let _ = write!(body, "<p>{}</p>", link(&call_path(key), "Back to the call"));
    page("Resumed", Some(session), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 54: the call's page shows, with the effect, a catalog that now
    /// disagrees with its record, and that the record wins (its buttons stay the
    /// record's: an unkeyed effect keeps its resolve links).
    #[test]
    fn an_effect_the_catalog_disagrees_with_shows_it_and_keeps_the_records_buttons() {
        let mut page = String::new();
        effect(
            &mut page,
            &JournalEffect::pending_unkeyed(Some("read")),
            true,
            0,
        );
        assert!(
            page.contains("journaled as unkeyed; the catalog now says read-only; the record wins"),
            "{page}"
        );
        assert!(page.contains("Resolve as performed"), "{page}");

        let mut agrees = String::new();
        effect(&mut agrees, &JournalEffect::pending_unkeyed(None), true, 0);
        assert!(!agrees.contains("the record wins"), "{agrees}");
    }
}
