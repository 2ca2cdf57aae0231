//! Header values that hold secrets: written in the HTTP config as templates
//! (`"Bearer ${PAYMENTS_TOKEN}"`), filled in from the host's environment or a secrets
//! file when the config is loaded, and never shown: `Debug` and serialization give the
//! template (or `[redacted]`), never the value.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What `Debug` and serialization show of a value that was given directly, not as a
/// template; and what replaces a secret a downstream echoed back.
pub(crate) const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not stripped from responses: replacing every
/// occurrence of a two-letter value would garble the response and protect nothing.
const MIN_STRIPPED_SECRET: usize = 4;

/// A header value the host adds to a service's requests; the guest never sees it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue {
    /// As written in the config, `${NAME}` references included; safe to show.
    template: String,
    /// The value with every reference filled in; `None` until resolved.
    value: Option<String>,
    /// What of `value` is secret: each variable's value, or all of a literal value.
    secrets: Vec<String>,
}

impl SecretValue {
    /// A value given directly (not read from a config file): shown as `[redacted]`.
    pub fn literal(value: impl Into<String>) -> Self {
        let value = value.into();
        // `Bearer TOKEN`: the token is secret on its own too.
        let mut secrets = vec![value.clone()];
        secrets.extend(
            value
                .split_once(' ')
                .map(|(_, rest)| rest.trim().to_owned()),
        );
        Self {
            template: REDACTED.to_owned(),
            value: Some(value),
            secrets,
        }
    }

    /// A template whose `${NAME}` references are filled in by [`SecretValue::resolve`].
    pub fn template(template: impl Into<String>) -> Self {
        Self {
            template: template.into(),
            value: None,
            secrets: Vec::new(),
        }
    }

    /// The value to send, once resolved.
    pub(crate) fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// The template as written (what error messages may show).
    pub fn shown(&self) -> &str {
        &self.template
    }

    /// Fills in the template's references from `lookup`; the error names the
    /// variable that is missing, never a value.
    pub fn resolve(&mut self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
        if self.value.is_none() {
            let filled = std::cell::RefCell::new(Vec::new());
            let value = expand(&self.template, &|name| {
                let value = lookup(name)?;
                filled.borrow_mut().push(value.clone());
                Some(value)
            })?;
            self.secrets = filled.into_inner();
            self.value = Some(value);
        }
        Ok(())
    }

    /// The secret parts of the value (each filled-in variable, or a literal value
    /// whole), to strip from what a downstream answers.
    pub(crate) fn secrets(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(String::as_str)
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.template)
    }
}

impl Serialize for SecretValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.template)
    }
}

impl<'de> Deserialize<'de> for SecretValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::template)
    }
}

/// `text` with every occurrence of each of `secrets` replaced by `[redacted]`, and a
/// secret's beginning at the very end cut too (a body truncated inside a secret).
pub(crate) fn strip_secrets(text: &mut String, secrets: &[&str]) {
    for secret in secrets.iter().filter(|s| s.len() >= MIN_STRIPPED_SECRET) {
        if text.contains(secret) {
            *text = text.replace(secret, REDACTED);
        }
        let cut = (MIN_STRIPPED_SECRET..secret.len())
            .rev()
            .filter(|&n| secret.is_char_boundary(n))
            .find(|&n| text.ends_with(&secret[..n]));
        if let Some(n) = cut {
            text.truncate(text.len() - n);
            text.push_str(REDACTED);
        }
    }
}

/// Replaces every `${NAME}` in `template` with `lookup(NAME)`. `$` not followed by
/// `{` is kept as it is.
pub(crate) fn expand(
    template: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("`${{` without a closing `}}` in `{template}`"))?;
        let name = &after[..end];
        if !is_variable_name(name) {
            return Err(format!(
                "`${{{name}}}` is not a variable reference (use letters, digits and `_`)"
            ));
        }
        let value = lookup(name).ok_or_else(|| format!("the variable `{name}` is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Reads a secrets file of `NAME=value` lines (blank lines and `#` comments skipped;
/// a value in matching single or double quotes loses them). The error names the file
/// and the line number, never a value.
pub(crate) fn read_secrets_file(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the secrets file {}: {e}", path.display()))?;
    let mut secrets = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let parsed = line
            .split_once('=')
            .map(|(name, value)| (name.trim(), unquote(value.trim())))
            .filter(|(name, _)| is_variable_name(name));
        let Some((name, value)) = parsed else {
            return Err(format!(
                "the secrets file {} line {}: expected NAME=value",
                path.display(),
                n + 1
            ));
        };
        secrets.insert(name.to_owned(), value.to_owned());
    }
    Ok(secrets)
}

fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cr3t".to_owned())
    }

    #[test]
    fn references_are_filled_in_and_a_missing_one_is_named() {
        assert_eq!(expand("Bearer ${TOKEN}", &env).unwrap(), "Bearer s3cr3t");
        assert_eq!(expand("$5 and ${TOKEN}!", &env).unwrap(), "$5 and s3cr3t!");
        assert_eq!(expand("plain", &env).unwrap(), "plain");
        let err = expand("Bearer ${OTHER}", &env).unwrap_err();
        assert!(err.contains("`OTHER` is not set"), "{err}");
        assert!(expand("${TOKEN", &env).unwrap_err().contains("closing"));
        assert!(
            expand("${1X}", &env)
                .unwrap_err()
                .contains("not a variable")
        );
    }

    #[test]
    fn debug_and_serialization_never_show_the_value() {
        let mut secret = SecretValue::template("Bearer ${TOKEN}");
        secret.resolve(&env).unwrap();
        assert_eq!(secret.value(), Some("Bearer s3cr3t"));
        let shown = format!("{secret:?} {}", serde_json::to_string(&secret).unwrap());
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("${TOKEN}"), "{shown}");
        let literal = SecretValue::literal("s3cr3t");
        let shown = format!("{literal:?} {}", serde_json::to_string(&literal).unwrap());
        assert!(
            !shown.contains("s3cr3t") && shown.contains(REDACTED),
            "{shown}"
        );
    }

    #[test]
    fn secrets_are_stripped_whole_and_at_a_cut_end() {
        let mut secret = SecretValue::template("Bearer ${TOKEN}");
        secret.resolve(&env).unwrap();
        let secrets: Vec<&str> = secret.secrets().collect();
        assert_eq!(secrets, ["s3cr3t"]);
        let mut text = "{\"auth\":\"Bearer s3cr3t\",\"again\":\"s3cr3t\"}".to_owned();
        strip_secrets(&mut text, &secrets);
        assert_eq!(
            text,
            "{\"auth\":\"Bearer [redacted]\",\"again\":\"[redacted]\"}"
        );
        let mut cut = "token=s3cr".to_owned();
        strip_secrets(&mut cut, &secrets);
        assert_eq!(cut, "token=[redacted]");
        let mut short = "ab ab".to_owned();
        strip_secrets(&mut short, &["ab"]);
        assert_eq!(short, "ab ab", "too short to be worth stripping");
        let literal = SecretValue::literal("Bearer abcdefgh");
        assert_eq!(
            literal.secrets().collect::<Vec<_>>(),
            ["Bearer abcdefgh", "abcdefgh"]
        );
    }

    #[test]
    fn a_secrets_file_is_read_and_a_bad_line_is_named_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.env");
        std::fs::write(
            &path,
            "# tokens\nTOKEN=abc\nexport QUOTED=\"x y\"\n\nOTHER='z'\n",
        )
        .unwrap();
        let secrets = read_secrets_file(&path).unwrap();
        assert_eq!(secrets["TOKEN"], "abc");
        assert_eq!(secrets["QUOTED"], "x y");
        assert_eq!(secrets["OTHER"], "z");
        std::fs::write(&path, "TOKEN=abc\nhunter2\n").unwrap();
        let err = read_secrets_file(&path).unwrap_err();
        assert!(err.contains("line 2") && !err.contains("hunter2"), "{err}");
    }
}
