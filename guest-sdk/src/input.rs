//! Asking the person behind the agent (MCP elicitation): "refund 25 EUR to card
//! …4242?".
//!
//! Asking is guarded like an effect: the host journals the questions at their
//! position in the call and the answers before the tool gets them, so a retried or
//! resumed call gets the same answers without asking again. When the answers come
//! with a later request (the agent's client asks its user and calls again), the
//! call stops at the question and is resumed then: the tool never sees a "later".
//! Like an effect, the questions must follow from the arguments and earlier
//! answers; other questions at a journaled position are a
//! [`EffectError::Divergence`].
//!
//! ```no_run
//! use justonce_guest::{ToolError, ask, effects};
//! use serde_json::json;
//!
//! fn refund(amount: u64) -> Result<serde_json::Value, ToolError> {
//!     let schema = json!({
//!         "type": "object",
//!         "properties": { "confirm": { "type": "boolean" } },
//!         "required": ["confirm"],
//!     });
//!     let answer = ask(&format!("Refund {amount} EUR to card …4242?"), &schema)?;
//!     if !(answer.accepted() && answer.get("confirm") == Some(&json!(true))) {
//!         return Ok(json!({ "refunded": false, "user": answer.action().as_str() }));
//!     }
//!     let refund: serde_json::Value =
//!         effects::perform("payments", "refund", &json!({ "amount": amount }))?;
//!     Ok(json!({ "refunded": true, "refund": refund }))
//! }
//! ```

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::__bindings::justonce::tool::input as wit;
use crate::effects::EffectError;

/// The name [`ask`] gives its one question.
pub const DEFAULT_NAME: &str = "answer";

/// One question.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// Its name: lowercase letters, digits and `_`, unique within one [`ask_all`].
    pub name: String,
    /// What the person reads.
    pub message: String,
    /// The JSON Schema of the answer's content: a flat object whose properties are
    /// strings, numbers, integers, booleans or enums (MCP's `requestedSchema`).
    pub schema: Value,
}

impl Question {
    /// A question named `name` that shows `message` and asks for an object of
    /// `schema`.
    pub fn new(name: impl Into<String>, message: impl Into<String>, schema: Value) -> Self {
        Self {
            name: name.into(),
            message: message.into(),
            schema,
        }
    }
}

/// What the person did with a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Filled in the form and sent it.
    Accept,
    /// Said no.
    Decline,
    /// Dismissed the question without choosing.
    Cancel,
}

impl Action {
    /// `accept`, `decline` or `cancel`, as MCP spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Decline => "decline",
            Self::Cancel => "cancel",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The person's answer to one question (an MCP `ElicitResult`).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    action: Action,
    content: Value,
}

impl Answer {
    /// An answer as the host hands it over: the JSON text of an `ElicitResult`.
    pub fn from_json(text: &str) -> Result<Self, EffectError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| EffectError::BadResponse(format!("an answer that is not JSON: {e}")))?;
        let action = match value.get("action").and_then(Value::as_str) {
            Some("accept") => Action::Accept,
            Some("decline") => Action::Decline,
            Some("cancel") => Action::Cancel,
            _ => {
                return Err(EffectError::BadResponse(format!(
                    "not an elicitation result: {value}"
                )));
            }
        };
        let content = match action {
            Action::Accept => value.get("content").cloned().unwrap_or(Value::Null),
            Action::Decline | Action::Cancel => Value::Null,
        };
        Ok(Self { action, content })
    }

    /// What the person did.
    pub fn action(&self) -> Action {
        self.action
    }

    /// Whether the person accepted (and filled in the form).
    pub fn accepted(&self) -> bool {
        self.action == Action::Accept
    }

    /// The accepted answer's content, the object the schema describes (`null` when
    /// the person declined or cancelled).
    pub fn content(&self) -> &Value {
        &self.content
    }

    /// One field of an accepted answer's content.
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.content.get(field)
    }

    /// The accepted answer's content as a `T`; `None` when the person declined or
    /// cancelled. Content that does not fit `T` is an [`EffectError::BadResponse`].
    pub fn parse<T: DeserializeOwned>(&self) -> Result<Option<T>, EffectError> {
        if !self.accepted() {
            return Ok(None);
        }
        serde_json::from_value(self.content.clone())
            .map(Some)
            .map_err(|e| EffectError::BadResponse(format!("the answer's content: {e}")))
    }
}

/// Asks the person one question (named [`DEFAULT_NAME`]) and returns the answer.
///
/// `Err` when there is no answer to give the tool: [`EffectError::Denied`] for a
/// malformed question, [`EffectError::Divergence`] for another question than the
/// journal holds at this position. `?` makes it a tool error.
pub fn ask(message: &str, schema: &Value) -> Result<Answer, EffectError> {
    let question = Question::new(DEFAULT_NAME, message, schema.clone());
    let mut answers = ask_all(std::slice::from_ref(&question))?;
    answers
        .pop()
        .ok_or_else(|| EffectError::BadResponse("no answer to the question".into()))
}

/// Asks several questions at once and returns their answers in order.
pub fn ask_all(questions: &[Question]) -> Result<Vec<Answer>, EffectError> {
    let questions: Vec<wit::Question> = questions
        .iter()
        .map(|q| wit::Question {
            name: q.name.clone(),
            message: q.message.clone(),
            schema: q.schema.to_string(),
        })
        .collect();
    let texts = wit::ask(&questions).map_err(EffectError::from)?;
    if texts.len() != questions.len() {
        return Err(EffectError::BadResponse(format!(
            "{} answers to {} questions",
            texts.len(),
            questions.len()
        )));
    }
    texts.iter().map(|text| Answer::from_json(text)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[test]
    fn an_accepted_answer_has_its_content_and_a_declined_one_none() {
        let yes = Answer::from_json(r#"{"action":"accept","content":{"confirm":true}}"#).unwrap();
        assert!(yes.accepted());
        assert_eq!(yes.action().to_string(), "accept");
        assert_eq!(yes.get("confirm"), Some(&json!(true)));
        #[derive(Deserialize, PartialEq, Debug)]
        struct Confirm {
            confirm: bool,
        }
        assert_eq!(
            yes.parse::<Confirm>().unwrap(),
            Some(Confirm { confirm: true })
        );
        assert!(yes.parse::<Vec<u8>>().is_err());

        let no = Answer::from_json(r#"{"action":"decline","content":{"confirm":true}}"#).unwrap();
        assert_eq!(no.action(), Action::Decline);
        assert_eq!(
            no.content(),
            &Value::Null,
            "a declined answer has no content"
        );
        assert_eq!(no.parse::<Confirm>().unwrap(), None);
        assert_eq!(
            Answer::from_json(r#"{"action":"cancel"}"#)
                .unwrap()
                .action(),
            Action::Cancel
        );
    }

    #[test]
    fn what_is_not_an_elicit_result_is_a_bad_response() {
        for text in ["", "1", r#"{"action":"maybe"}"#, r#"{"content":{}}"#] {
            assert!(
                matches!(Answer::from_json(text), Err(EffectError::BadResponse(_))),
                "{text}"
            );
        }
    }
}
