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
            "<nav><a href=\"{ROOT}/attention\">Needs attention</a> <a href=\"{ROOT}\">Calls</a> \
             <a href=\"{ROOT}/unresolved\">Unresolved effects</a> \
             <a href=\"{ROOT}/outbox\">Outbox</a> <a href=\"{ROOT}/charts\">Charts</a> \
             <a href=\"{ROOT}/upstreams\">Upstreams</a>\
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

/// How many characters of a key the console shows (the whole key is in its title and
/// copied by its button).
pub const SHORT_KEY: usize = 12;

/// A key shortened to its first [`SHORT_KEY`] characters, the whole of it in the
/// title, with a button that copies it (`assets/app.js`); a link to `href` when given.
pub fn short_key(key: &str, href: Option<&str>) -> String {
    let short: String = key.chars().take(SHORT_KEY).collect();
    let more = if key.chars().count() > SHORT_KEY {
        "…"
    } else {
        ""
    };
    let text = format!("{}{more}", escape(&short));
    let shown = match href {
        Some(href) => format!("<a href=\"{}\">{text}</a>", escape(href)),
        None => text,
    };
    format!(
        "<span class=\"short-key\" title=\"{key}\"><code>{shown}</code>\
         <button type=\"button\" class=\"copy\" data-copy=\"{key}\" title=\"Copy the whole key\">copy</button></span>",
        key = escape(key)
    )
}

/// A time as people read it: how long ago (or from now) relative to `now`, with the
/// absolute time (RFC 3339, UTC) in `datetime` and on hover.
pub fn time(at: i64, now: i64) -> String {
    let absolute = crate::clock::rfc3339(at);
    format!(
        "<time datetime=\"{absolute}\" title=\"{absolute}\">{}</time>",
        relative(at, now)
    )
}

/// `at` relative to `now` in words: `just now`, `12 s ago`, `in 40 s`, `3 min ago`,
/// `5 h ago`, `2 days ago`.
pub fn relative(at: i64, now: i64) -> String {
    let ms = now - at;
    let s = ms.unsigned_abs() / 1000;
    if s < 1 {
        return "just now".into();
    }
    let amount = match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h", s / 3600),
        _ if s < 2 * 86_400 => "1 day".into(),
        _ => format!("{} days", s / 86_400),
    };
    if ms >= 0 {
        format!("{amount} ago")
    } else {
        format!("in {amount}")
    }
}

/// A state badge: a coloured word (its class `badge b-CLASS`), what it means on hover.
pub fn badge(class: &str, word: &str, meaning: &str) -> String {
    format!(
        "<span class=\"badge b-{}\" title=\"{}\">{}</span>",
        escape(class),
        escape(meaning),
        escape(word)
    )
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

    #[test]
    fn times_read_relative_with_the_absolute_on_hover_and_keys_short_with_the_whole_copied() {
        let now = 1_000_000_000_000;
        assert_eq!(relative(now, now), "just now");
        assert_eq!(relative(now - 12_000, now), "12 s ago");
        assert_eq!(relative(now - 3 * 60_000 - 5, now), "3 min ago");
        assert_eq!(relative(now + 40_000, now), "in 40 s");
        assert_eq!(relative(now - 5 * 3_600_000, now), "5 h ago");
        assert_eq!(relative(now - 3 * 86_400_000, now), "3 days ago");
        let t = time(now - 60_000, now);
        assert!(
            t.contains("datetime=\"2001-09-09T01:45:40") && t.contains(">1 min ago</time>"),
            "{t}"
        );
        let key = "0123456789abcdef0123456789abcdef";
        let k = short_key(key, Some("/console/call?key=x"));
        assert!(k.contains(">0123456789ab…</a>"), "{k}");
        assert!(k.contains(&format!("data-copy=\"{key}\"")), "{k}");
        assert!(k.contains(&format!("title=\"{key}\"")), "{k}");
    }
}
