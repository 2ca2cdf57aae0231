//! HTML for the console, built as text: every value that comes from the journal, a
//! token's holder or the request goes through [`escape`] (arguments, outcomes and
//! errors are untrusted text).

use std::fmt::Write as _;

use super::sessions::BrowserSession;

/// Where the console lives.
pub const ROOT: &str = "/console";

/// Text as HTML text or an attribute's value (quoted with `"`).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A query string's value, percent-encoded.
pub fn url_value(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A JSON value pretty-printed, escaped, in a `<pre>`; at most `max` characters of
/// it (a huge argument is cut, saying so).
pub fn json_block(value: &serde_json::Value, max: usize) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    text_block(&text, max)
}

/// Text, escaped, in a `<pre>`; cut after `max` characters, saying so.
pub fn text_block(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return format!("<pre>{}</pre>", escape(text));
    }
    let cut: String = text.chars().take(max).collect();
    format!(
        "<pre>{}</pre><p class=\"note\">… {} more characters not shown (the JSON API has them all)</p>",
        escape(&cut),
        count - max
    )
}

/// A whole page: `title`, the navigation for `session` (none on the login page),
/// and `body`, which the caller escaped.
pub fn page(title: &str, session: Option<&BrowserSession>, body: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · justonce console</title>\
         <link rel=\"stylesheet\" href=\"{ROOT}/static/style.css\">\
         <script src=\"{ROOT}/static/app.js\" defer></script></head><body>",
        escape(title)
    );
    if let Some(s) = session {
        let _ = write!(
            out,
            "<nav><a href=\"{ROOT}\">Calls</a> <a href=\"{ROOT}/unresolved\">Unresolved effects</a> \
             <a href=\"{ROOT}/outbox\">Outbox</a> <a href=\"{ROOT}/charts\">Charts</a>\
             <span class=\"who\">{} ({})</span>\
             <form method=\"post\" action=\"{ROOT}/logout\" class=\"inline\">{}\
             <button type=\"submit\">Log out</button></form></nav>",
            escape(&s.principal),
            s.role,
            csrf_field(s)
        );
    }
    let _ = write!(
        out,
        "<main><h1>{}</h1>{body}</main></body></html>",
        escape(title)
    );
    out
}

/// The hidden field that carries the session's CSRF token in a form.
pub fn csrf_field(session: &BrowserSession) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(&session.csrf)
    )
}

/// A link to `path` with `text`.
pub fn link(path: &str, text: &str) -> String {
    format!("<a href=\"{}\">{}</a>", escape(path), escape(text))
}

/// The path of one call's story.
pub fn call_path(key: &str) -> String {
    format!("{ROOT}/call?key={}", url_value(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped_and_long_text_is_cut() {
        assert_eq!(
            escape(r#"<script>alert("x&'y")</script>"#),
            "&lt;script&gt;alert(&quot;x&amp;&#39;y&quot;)&lt;/script&gt;"
        );
        let long = "é".repeat(50);
        let block = text_block(&long, 10);
        assert!(block.contains(&"é".repeat(10)) && !block.contains(&"é".repeat(11)));
        assert!(block.contains("40 more characters"));
        assert_eq!(url_value("a b&c"), "a+b%26c");
    }
}
