//! Replay of a recorded assistant message: read its tool calls (OpenAI chat
//! completions or Anthropic Messages form), run them all concurrently under one
//! conversation, and answer in the same provider's form.
//!
//! Each tool call's provider id is passed as the call's `tool_call_id`, so replaying
//! the same file again replays the saved outcomes, and two identical calls in one
//! message run once. Each result's content is the JSON `justonce run` prints:
//! `{"ok": true, "result": …, "replayed": …, "key": …}` or `{"ok": false, "error": …}`.
//! Arguments that are not valid JSON (or not an object) are an `invalid_arguments`
//! error for that call alone.

mod anthropic;
mod openai;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::call::{CallRequest, CallResponse};
use crate::error::Error;
use crate::host::Host;
use crate::mcp::protocol::type_name;

/// The provider form of a recorded message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// OpenAI chat completions: `tool_calls[]` with `function.arguments` as JSON text.
    #[value(name = "openai")]
    OpenAi,
    /// Anthropic Messages: `content[]` blocks of type `tool_use`.
    #[value(name = "anthropic")]
    Anthropic,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::OpenAi => "OpenAI",
            Self::Anthropic => "Anthropic",
        })
    }
}

/// Why a recorded message cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// The file is not JSON.
    #[error("the recorded message is not valid JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// A number in the message would be rounded if read (an integer beyond 64 bits).
    #[error("the recorded message has a number that cannot be read exactly: {0}")]
    InexactNumber(#[source] crate::jcs::JcsError),
    /// The JSON is neither form.
    #[error(
        "the recorded message is neither an OpenAI assistant message (with \"tool_calls\" or \"choices\") nor an Anthropic message (with a \"content\" array); pass --format to say which it is"
    )]
    UnknownFormat,
    /// The message is of the given form but a required part is missing or mistyped.
    #[error("{format} message: {detail}")]
    Malformed {
        /// The form it was read as.
        format: Format,
        /// What is wrong, with its path.
        detail: String,
    },
    /// The message asks for no tool calls.
    #[error("the {0} message holds no tool calls")]
    NoToolCalls(Format),
}

/// One tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCall {
    /// The provider's tool-call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text, or why the message holds none that can be read.
    pub arguments: Result<String, String>,
}

/// The tool calls of a recorded assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// The form the message was read in (and its results are written in).
    pub format: Format,
    /// The calls, in the order the model made them.
    pub calls: Vec<RecordedCall>,
}

impl Transcript {
    /// Reads a recorded message in `format`, or the form it is detected to be in.
    pub fn parse(text: &str, format: Option<Format>) -> Result<Self, TranscriptError> {
        // Exact numbers: a recorded `input` object keeps the digits the model wrote.
        let text = crate::jcs::exact_numbers(text).map_err(TranscriptError::InexactNumber)?;
        let message: Value = serde_json::from_str(&text).map_err(TranscriptError::NotJson)?;
        let format = match format {
            Some(format) => format,
            None if openai::detect(&message) => Format::OpenAi,
            None if anthropic::detect(&message) => Format::Anthropic,
            None => return Err(TranscriptError::UnknownFormat),
        };
        let calls = match format {
            Format::OpenAi => openai::calls(&message)?,
            Format::Anthropic => anthropic::calls(&message)?,
        };
        if calls.is_empty() {
            return Err(TranscriptError::NoToolCalls(format));
        }
        Ok(Self { format, calls })
    }

    /// Runs every call concurrently (at most `max_concurrent` at once) in
    /// `conversation`; the results are in the order of the calls.
    pub fn dispatch(
        &self,
        host: &Host,
        conversation: Option<&str>,
        max_concurrent: usize,
    ) -> Vec<Result<CallResponse, Error>> {
        let requests: Vec<Result<CallRequest, &str>> = self
            .calls
            .iter()
            .map(|call| {
                let arguments = call.arguments.as_deref().map_err(String::as_str)?;
                let mut request = CallRequest::new(&call.name, arguments).tool_call_id(&call.id);
                request.conversation = conversation.map(str::to_owned);
                Ok(request)
            })
            .collect();
        let slots: Vec<Mutex<Option<Result<CallResponse, Error>>>> =
            requests.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let workers = max_concurrent.clamp(1, requests.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(request) = requests.get(i) else {
                            return;
                        };
                        let result = match request {
                            Ok(request) => host.call(request),
                            Err(reason) => Err(Error::InvalidArguments {
                                tool: self.calls[i].name.clone(),
                                reason: (*reason).to_owned(),
                            }),
                        };
                        *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
                    }
                });
            }
        });
        slots
            .into_iter()
            .map(|slot| {
                slot.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .expect("every call was dispatched")
            })
            .collect()
    }

    /// The results as the provider expects them back: OpenAI `role: "tool"`
    /// messages (a JSON array), or one Anthropic user message of `tool_result`
    /// blocks.
    pub fn render(&self, results: &[Result<CallResponse, Error>]) -> Value {
        let contents: Vec<(&RecordedCall, Value)> = self
            .calls
            .iter()
            .zip(results)
            .map(|(call, result)| (call, result_json(result)))
            .collect();
        match self.format {
            Format::OpenAi => openai::render(&contents),
            Format::Anthropic => anthropic::render(&contents),
        }
    }
}

/// The JSON `justonce run` prints for a call's result.
pub fn result_json(result: &Result<CallResponse, Error>) -> Value {
    match result {
        Ok(response) => response.to_json(),
        Err(error) => error.to_agent_json(),
    }
}

/// A required string field of `value`; the error says what is wrong with it.
fn field_str(value: &Value, field: &str) -> Result<String, String> {
    match value.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err("is empty".into()),
        Some(other) => Err(format!("must be a string, not {}", type_name(other))),
        None => Err("is missing".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_is_detected_from_the_message() {
        let openai = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"t","arguments":"{\"a\":1}"}}]}"#;
        let t = Transcript::parse(openai, None).unwrap();
        assert_eq!(t.format, Format::OpenAi);
        assert_eq!(t.calls[0].id, "call_1");
        assert_eq!(t.calls[0].arguments, Ok(r#"{"a":1}"#.to_owned()));

        let anthropic = r#"{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"t","input":{"a":1}}]}"#;
        let t = Transcript::parse(anthropic, None).unwrap();
        assert_eq!(t.format, Format::Anthropic);
        assert_eq!(t.calls.len(), 1, "text blocks are not calls");
        assert_eq!(t.calls[0].name, "t");

        let completion =
            format!(r#"{{"id":"chatcmpl-1","choices":[{{"index":0,"message":{openai}}}]}}"#);
        assert_eq!(Transcript::parse(&completion, None).unwrap().calls.len(), 1);
    }

    #[test]
    fn unreadable_messages_say_what_is_wrong() {
        assert!(matches!(
            Transcript::parse("{", None),
            Err(TranscriptError::NotJson(_))
        ));
        assert!(matches!(
            Transcript::parse(r#"{"role":"assistant","content":"hi"}"#, None),
            Err(TranscriptError::UnknownFormat)
        ));
        assert!(matches!(
            Transcript::parse(
                r#"{"role":"assistant","content":[{"type":"text","text":"hi"}]}"#,
                None
            ),
            Err(TranscriptError::NoToolCalls(Format::Anthropic))
        ));
        let e = Transcript::parse(
            r#"{"tool_calls":[{"type":"function","function":{"name":"t","arguments":"{}"}}]}"#,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("tool_calls[0].id is missing"), "{e}");
        let e = Transcript::parse(r#"{"tool_calls":[]}"#, Some(Format::Anthropic)).unwrap_err();
        assert!(e.to_string().contains("content is missing"), "{e}");
    }

    #[test]
    fn arguments_that_cannot_be_read_are_kept_as_the_reason() {
        let t = Transcript::parse(
            r#"{"content":[{"type":"tool_use","id":"toolu_1","name":"t","input":"{}"}]}"#,
            None,
        )
        .unwrap();
        assert_eq!(
            t.calls[0].arguments,
            Err("input must be an object, not a string".to_owned())
        );
    }
}
