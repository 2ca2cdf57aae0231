//! Probes: how the host asks a downstream whether an unkeyed effect whose answer
//! was lost happened. A probe is a read-only request whose arguments are a template
//! filled in from the effect (its key, its payload), and a rule that reads its answer
//! as performed, not performed, or unknown. The upstream gateway's probes (a
//! read-only tool of the upstream) and the `http` provider's (a status request) share
//! both.
//!
//! A template is JSON whose strings may name parts of the effect in braces:
//! `{key}` (the effect's idempotency key) and `{arguments.NAME}` (an upstream tool's
//! argument) or `{body.NAME}` (a field of an HTTP request's JSON body), dotted into
//! nested objects. A string that is one placeholder and nothing else takes the
//! named value whole, with its JSON type (a number stays a number); a placeholder
//! inside other text is written as text (a string as it is, anything else as JSON).
//! `{{` and `}}` are literal braces.

use serde_json::{Map, Value};

use crate::provider::Probed;

/// How a probe's answer reads, at its `pointer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAnswer {
    /// Something there (not `null`, `false`, `0`, `""`, `[]` or `{}`, and present):
    /// performed; nothing there: not performed.
    NonEmpty,
    /// This value there: performed; `not_performed` (where given): not performed;
    /// anything else: unknown.
    Equals {
        /// The value that means performed.
        performed: Value,
        /// The value that means not performed, if one does.
        not_performed: Option<Value>,
    },
}

impl ProbeAnswer {
    /// Reads `answer` at `pointer` (a JSON pointer, `""` for the whole). Performed
    /// carries the whole answer, which the effect's saved answer quotes.
    pub fn read(&self, answer: &Value, pointer: &str) -> Probed {
        let found = answer.pointer(pointer);
        match self {
            Self::NonEmpty if found.is_some_and(non_empty) => Probed::Performed(answer.clone()),
            Self::NonEmpty => Probed::NotPerformed,
            Self::Equals { performed, .. } if found == Some(performed) => {
                Probed::Performed(answer.clone())
            }
            Self::Equals {
                not_performed: Some(not),
                ..
            } if found == Some(not) => Probed::NotPerformed,
            Self::Equals { .. } => Probed::Unknown(match found {
                Some(other) => {
                    format!("its answer holds {other} at `{pointer}`, which says neither")
                }
                None => format!("its answer has nothing at `{pointer}`"),
            }),
        }
    }
}

/// Whether a value counts as something found.
fn non_empty(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => false,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Bool(true) => true,
    }
}

/// The template's placeholders, or what is wrong with one: for checking a
/// configuration before any effect fills it in.
pub fn placeholders(template: &Value) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut strings = vec![template];
    while let Some(value) = strings.pop() {
        match value {
            Value::String(text) => {
                for part in parse(text)? {
                    if let Part::Placeholder(name) = part {
                        names.push(name.to_owned());
                    }
                }
            }
            Value::Array(items) => strings.extend(items),
            Value::Object(map) => strings.extend(map.values()),
            _ => {}
        }
    }
    Ok(names)
}

/// `template` filled in from `context` (`{"key": …, "arguments": {…}}`). `Err`
/// names a placeholder the context does not hold, or a malformed one.
pub fn fill(template: &Value, context: &Value) -> Result<Value, String> {
    Ok(match template {
        Value::String(text) => fill_string(text, context)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| fill(item, context))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(name, value)| Ok((name.clone(), fill(value, context)?)))
                .collect::<Result<Map<_, _>, String>>()?,
        ),
        other => other.clone(),
    })
}

fn fill_string(text: &str, context: &Value) -> Result<Value, String> {
    let parts = parse(text)?;
    if let [Part::Placeholder(name)] = parts.as_slice() {
        return lookup(name, context).cloned();
    }
    let mut filled = String::new();
    for part in parts {
        match part {
            Part::Text(text) => filled.push_str(&text),
            Part::Placeholder(name) => match lookup(name, context)? {
                Value::String(s) => filled.push_str(s),
                other => filled.push_str(&other.to_string()),
            },
        }
    }
    Ok(Value::String(filled))
}

/// The value `name` (dotted) names in `context`.
fn lookup<'a>(name: &str, context: &'a Value) -> Result<&'a Value, String> {
    name.split('.')
        .try_fold(context, |value, step| value.get(step))
        .ok_or_else(|| {
            format!("the probe's template names `{{{name}}}`, which this effect does not hold")
        })
}

/// A piece of a template string.
#[derive(Debug, PartialEq)]
enum Part<'a> {
    Text(String),
    Placeholder(&'a str),
}

fn parse(text: &str) -> Result<Vec<Part<'_>>, String> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(['{', '}']) {
        literal.push_str(&rest[..at]);
        let tail = &rest[at..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            literal.push_str(&tail[..1]);
            rest = &tail[2..];
        } else if tail.starts_with('}') {
            return Err(format!(
                "a `}}` without its `{{` in {text:?} (write `}}}}` for a brace)"
            ));
        } else {
            let Some(end) = tail.find('}') else {
                return Err(format!(
                    "a `{{` without its `}}` in {text:?} (write `{{{{` for a brace)"
                ));
            };
            let name = &tail[1..end];
            let valid = !name.is_empty()
                && name.split('.').all(|step| {
                    !step.is_empty()
                        && step
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
                });
            if !valid {
                return Err(format!(
                    "`{{{name}}}` in {text:?} is not a placeholder: write `{{key}}` or a dotted name such as `{{arguments.id}}`"
                ));
            }
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal)));
            }
            parts.push(Part::Placeholder(name));
            rest = &tail[end + 1..];
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(Part::Text(literal));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_template_takes_a_whole_value_alone_and_text_inside_other_text() {
        let context = json!({ "key": "k1", "arguments": { "id": 7, "who": { "name": "ada" } } });
        let template = json!({
            "key": "{key}",
            "id": "{arguments.id}",
            "query": "SELECT 1 FROM t WHERE id = {arguments.id} AND by = '{arguments.who.name}' {{x}}",
            "list": ["{arguments.who}", 3],
        });
        assert_eq!(
            fill(&template, &context).unwrap(),
            json!({
                "key": "k1",
                "id": 7,
                "query": "SELECT 1 FROM t WHERE id = 7 AND by = 'ada' {x}",
                "list": [{ "name": "ada" }, 3],
            })
        );
        let missing = fill(&json!("{arguments.nope}"), &context).unwrap_err();
        assert!(missing.contains("`{arguments.nope}`"), "{missing}");
    }

    #[test]
    fn a_malformed_placeholder_is_refused_naming_it() {
        for (text, says) in [
            ("{", "without its `}`"),
            ("a } b", "without its `{`"),
            ("{}", "is not a placeholder"),
            ("{a..b}", "is not a placeholder"),
            ("{a b}", "is not a placeholder"),
        ] {
            let error = placeholders(&json!({ "x": [text] })).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
        assert_eq!(
            placeholders(&json!({ "a": "{key}", "b": ["x {arguments.id}"] }))
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn an_answer_reads_as_performed_not_performed_or_unknown() {
        let rows = json!({ "result": [{ "n": 1 }] });
        let none = json!({ "result": [] });
        assert_eq!(
            ProbeAnswer::NonEmpty.read(&rows, "/result"),
            Probed::Performed(rows.clone())
        );
        assert_eq!(
            ProbeAnswer::NonEmpty.read(&none, "/result"),
            Probed::NotPerformed
        );
        assert_eq!(
            ProbeAnswer::NonEmpty.read(&none, "/missing"),
            Probed::NotPerformed
        );
        let equals = ProbeAnswer::Equals {
            performed: json!(1),
            not_performed: Some(json!(0)),
        };
        assert_eq!(
            equals.read(&rows, "/result/0/n"),
            Probed::Performed(rows.clone())
        );
        assert_eq!(
            equals.read(&json!({ "result": [{ "n": 0 }] }), "/result/0/n"),
            Probed::NotPerformed
        );
        assert!(matches!(
            equals.read(&json!({ "result": [{ "n": 2 }] }), "/result/0/n"),
            Probed::Unknown(why) if why.contains("2")
        ));
        let only_performed = ProbeAnswer::Equals {
            performed: json!("paid"),
            not_performed: None,
        };
        assert!(matches!(
            only_performed.read(&json!({ "status": "open" }), "/status"),
            Probed::Unknown(_)
        ));
    }
}
