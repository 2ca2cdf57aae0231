//! Asking the person behind the agent whether an unkeyed effect happened (issue 56):
//! where a tool opts in (`[tools.NAME] ask_person`, `[upstreams.NAME.ask_person]`)
//! and no probe decides, the agent's retry of a call whose unkeyed effect has an
//! unknown outcome asks its client one yes-or-no question, through the same
//! elicitation a tool's own questions take (`crate::ask`). The guard journals the
//! answer as the effect's resolution, decided by `person`.
//!
//! The question's text is a template (`crate::probe`'s placeholders) filled in from
//! the effect: `{key}` (its idempotency key), `{provider}`, `{operation}`,
//! `{payload.NAME}` (its payload), `{arguments.NAME}` (an upstream tool's
//! arguments) and `{body.NAME}` (an HTTP request's JSON body).

use serde_json::{Value, json};

use crate::ask::Question;
use crate::probe;

/// The question's name, and its answer's one field: `true` when it went through.
pub const ANSWER_FIELD: &str = "performed";

/// What the person said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersonSaid {
    /// Yes: it went through.
    Performed,
    /// No: it did not.
    NotPerformed,
    /// No answer either way: declined, cancelled, or an accepted form without the
    /// field. What they did, as the agent is told.
    NoAnswer(String),
}

/// Whether `placeholder` is one a question may name.
fn may_name(placeholder: &str) -> bool {
    let root = placeholder.split('.').next().unwrap_or_default();
    match root {
        "key" | "provider" | "operation" => root == placeholder,
        "payload" | "arguments" | "body" => true,
        _ => false,
    }
}

/// Checks the question template `template` of the configuration key `at`: text,
/// not blank, whose placeholders are well formed and name parts of an effect.
pub fn check_template(template: &str, at: &str) -> Result<(), String> {
    if template.trim().is_empty() {
        return Err(format!(
            "`{at}` is the question the person is asked, and it is blank"
        ));
    }
    let names = probe::placeholders(&Value::String(template.to_owned()))
        .map_err(|why| format!("`{at}`: {why}"))?;
    match names.iter().find(|name| !may_name(name)) {
        Some(name) => Err(format!(
            "`{at}` names `{{{name}}}`: a question may name `{{key}}`, `{{provider}}`, `{{operation}}`, \
             `{{payload.NAME}}`, `{{arguments.NAME}}` (an upstream tool's arguments) or `{{body.NAME}}` \
             (an HTTP request's JSON body)"
        )),
        None => Ok(()),
    }
}

/// What a question's placeholders are filled in from: the effect's key, provider,
/// operation and payload, an upstream call's `arguments` and an HTTP request's JSON
/// `body` (its `json`, or its text body where it parses as JSON).
pub fn context(key: &str, provider: &str, operation: &str, payload: &Value) -> Value {
    let body = payload.get("json").cloned().or_else(|| {
        payload
            .get("body")
            .and_then(Value::as_str)
            .and_then(|text| serde_json::from_str(text).ok())
    });
    json!({
        "key": key,
        "provider": provider,
        "operation": operation,
        "payload": payload,
        "arguments": payload.get("arguments").cloned().unwrap_or(Value::Null),
        "body": body.unwrap_or(Value::Null),
    })
}

/// The question `template` asks about the effect of `context`: one yes-or-no
/// question named [`ANSWER_FIELD`]. `Err` names a placeholder the effect does not
/// hold.
pub fn question(template: &str, context: &Value) -> Result<Question, String> {
    let message = match probe::fill(&Value::String(template.to_owned()), context)? {
        Value::String(text) => text,
        other => other.to_string(),
    };
    Ok(Question {
        name: ANSWER_FIELD.into(),
        message,
        schema: json!({
            "type": "object",
            "properties": {
                ANSWER_FIELD: {
                    "type": "boolean",
                    "title": "It went through",
                    "description": "Yes if it happened (the host then does not send it again); no if it did not (the host sends it once more)"
                }
            },
            "required": [ANSWER_FIELD],
        }),
    })
}

/// What the elicitation result `answer` (`{"action": …, "content": {…}}`) says.
pub fn read(answer: &Value) -> PersonSaid {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => match answer.pointer(&format!("/content/{ANSWER_FIELD}")) {
            Some(Value::Bool(true)) => PersonSaid::Performed,
            Some(Value::Bool(false)) => PersonSaid::NotPerformed,
            _ => PersonSaid::NoAnswer(format!(
                "accepted the question without saying yes or no (`{ANSWER_FIELD}`)"
            )),
        },
        Some("decline") => PersonSaid::NoAnswer("declined to answer".into()),
        Some("cancel") => PersonSaid::NoAnswer("cancelled the question".into()),
        _ => PersonSaid::NoAnswer(format!("answered something unreadable: {answer}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_filled_in_from_the_effect_and_its_answer_read() {
        let payload = json!({ "arguments": { "order": 4417, "amount": "25.00" } });
        let context = context("k1", "mcp:shop", "refund", &payload);
        let q = question(
            "Did the refund of {arguments.amount} EUR to order {arguments.order} go through?",
            &context,
        )
        .unwrap();
        assert_eq!(
            q.message,
            "Did the refund of 25.00 EUR to order 4417 go through?"
        );
        assert_eq!(q.name, ANSWER_FIELD);
        crate::ask::check_questions(std::slice::from_ref(&q)).unwrap();
        let http = json!({ "service": "payments", "body": "{\"amount\": 3}" });
        let asked = question("{body.amount} via {provider}", &context_of(&http)).unwrap();
        assert_eq!(asked.message, "3 via http");
        let missing = question("{arguments.nope}", &context).unwrap_err();
        assert!(missing.contains("{arguments.nope}"), "{missing}");

        let yes = json!({ "action": "accept", "content": { "performed": true } });
        let no = json!({ "action": "accept", "content": { "performed": false } });
        assert_eq!(read(&yes), PersonSaid::Performed);
        assert_eq!(read(&no), PersonSaid::NotPerformed);
        for (answer, says) in [
            (json!({ "action": "decline" }), "declined"),
            (json!({ "action": "cancel" }), "cancelled"),
            (
                json!({ "action": "accept", "content": {} }),
                "without saying",
            ),
        ] {
            assert!(
                matches!(read(&answer), PersonSaid::NoAnswer(why) if why.contains(says)),
                "{answer}"
            );
        }
    }

    fn context_of(payload: &Value) -> Value {
        context("k", "http", "request", payload)
    }

    #[test]
    fn a_bad_template_is_refused_naming_the_key() {
        for (template, says) in [
            ("  ", "blank"),
            ("Did {x} happen?", "names `{x}`"),
            ("Did {key.x} happen?", "names `{key.x}`"),
            ("Did {arguments.id happen?", "without its `}`"),
        ] {
            let error = check_template(template, "tools.t.ask_person").unwrap_err();
            assert!(
                error.contains("tools.t.ask_person") && error.contains(says),
                "{template}: {error}"
            );
        }
        check_template("Refund {payload.json.amount} ({key})?", "k").unwrap();
    }
}
