//! An effect's definitive answer as the journal stores it (`effects.response`).

use serde_json::{Value, json};

/// The definitive answer of an effect: saved once, replayed to every resumed run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// The provider's response.
    Ok(Value),
    /// The downstream refused, definitively.
    Rejected(Value),
    /// Refused before anything happened, with the exact message the guest got, so a
    /// resumed run is told the same thing.
    Denied(String),
}

impl Answer {
    /// The stored text: `{"ok": …}`, `{"rejected": …}` or `{"denied": "…"}`.
    pub(crate) fn to_stored(&self) -> String {
        match self {
            Self::Ok(v) => json!({ "ok": v }),
            Self::Rejected(v) => json!({ "rejected": v }),
            Self::Denied(message) => json!({ "denied": message }),
        }
        .to_string()
    }

    /// The answer a run hands its tool once it saved this one: `recorded`, the
    /// stored text of an answer another hand saved first (the journal keeps the
    /// first), else this one.
    pub(crate) fn or_recorded(&self, recorded: Option<String>) -> Self {
        recorded.map_or_else(|| self.clone(), |stored| Self::from_stored(&stored))
    }

    /// Reads a stored answer; an unreadable one is a denial that says so.
    pub(crate) fn from_stored(stored: &str) -> Self {
        let v: Value = serde_json::from_str(stored).unwrap_or(Value::Null);
        match (
            v.get("ok"),
            v.get("rejected"),
            v.get("denied").and_then(Value::as_str),
        ) {
            (Some(ok), _, _) => Self::Ok(ok.clone()),
            (None, Some(rejected), _) => Self::Rejected(rejected.clone()),
            (None, None, Some(denied)) => Self::Denied(denied.to_string()),
            _ => Self::Denied(format!(
                "the journal holds an unreadable response for this effect: {stored}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_reads_back_as_itself() {
        for answer in [
            Answer::Ok(json!({"id": 1})),
            Answer::Ok(Value::Null),
            Answer::Rejected(json!({"status": 402})),
            Answer::Denied("no".into()),
        ] {
            assert_eq!(Answer::from_stored(&answer.to_stored()), answer);
        }
    }

    #[test]
    fn an_unreadable_answer_is_a_denial_naming_it() {
        let Answer::Denied(message) = Answer::from_stored("{\"weird\":1}") else {
            panic!("not a denial");
        };
        assert!(message.contains("unreadable"), "{message}");
    }
}
