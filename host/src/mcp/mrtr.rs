//! Tools that ask (issue 43) on the stateless wire, 2026-07-28: multi round-trip
//! requests (SEP-2322). A tool's question never travels as a request of the server's:
//! the call answers `resultType: "input_required"` with the questions
//! (`inputRequests`, each an `elicitation/create`) and a `requestState`, and the
//! client makes the same `tools/call` again with the answers (`inputResponses`, by
//! question name) and that state.
//!
//! The second request is a retry of the first (the same tool, arguments and scope, so
//! the same invocation key): the guard resumes the call, its journaled effects replay,
//! and the question, journaled before it was sent, is asked again of [`MrtrAsker`],
//! which finds the answers in the request. The request state ([`crate::ask`]) ties
//! the answers to that very question: one this host did not make is refused with
//! `-32602`, and nothing runs; one made for an earlier question of the same call (a
//! client that sent the old state) gets the new question. A request whose answers
//! are missing, or not `ElicitResult`s, is asked again, not refused.
//!
//! A client that did not declare `elicitation` in its request's
//! `_meta["io.modelcontextprotocol/clientCapabilities"]` is not asked: the call is
//! refused with `-32021` (SEP-2575's missing client capability, naming
//! `elicitation`), nothing of the question is journaled, and the same call from a
//! client that declares it is asked.
//!
//! An upstream's `sampling/createMessage` and `roots/list` during a gateway call go
//! to the client the same way where its request declared `sampling` or `roots`
//! (each an `inputRequests` entry as the upstream sent it, named
//! [`UpstreamRequest::name`]); the answer the call made again brings, under that
//! name and with the request state of the upstream call's position, is handed to
//! the upstream, not journaled. Where it did not declare it, the upstream is refused
//! with `-32021` naming the capability, as for a session's client.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde_json::{Map, Value, json};

use super::elicit::{Declared, elicit_result};
use super::protocol::{
    CLIENT_CAPABILITIES_META_KEY, ErrorData, MISSING_CAPABILITY, Params, type_name,
};
pub(crate) use super::tools::input_requests;
use crate::ask::{
    self, AskContext, Asked, Asker, Forwarded, Question, StateCheck, UpstreamRequest,
};
use crate::call::CallRequest;
use crate::error::Error;
use crate::host::Host;
use crate::keys::{EffectKey, InvocationKey};

/// `tools/call` parameter: the answers to the questions of an earlier
/// `input_required` result, by question name.
pub const INPUT_RESPONSES_PARAM: &str = "inputResponses";
/// `tools/call` parameter: the `requestState` of an earlier `input_required` result.
pub const REQUEST_STATE_PARAM: &str = "requestState";

/// What a stateless `tools/call` brings for the questions its tool may ask.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Input {
    /// `inputResponses`, as sent.
    responses: Map<String, Value>,
    /// `requestState`.
    state: Option<String>,
    /// What the client declared in the request's capabilities.
    declared: Declared,
}

impl Input {
    /// Reads `inputResponses`, `requestState` and the client's capabilities from a
    /// stateless `tools/call`'s parameters; `-32602` naming what is malformed.
    pub(crate) fn read(params: &Params) -> Result<Self, ErrorData> {
        let responses = match params.get(INPUT_RESPONSES_PARAM) {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(responses)) => responses.clone(),
            Some(other) => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "tools/call: \"{INPUT_RESPONSES_PARAM}\" must be an object (each question's answer by name), not {}; nothing ran",
                        type_name(other)
                    ),
                    None,
                ));
            }
        };
        let state = match params.get(REQUEST_STATE_PARAM) {
            None | Some(Value::Null) => None,
            Some(Value::String(state)) => Some(state.clone()),
            Some(other) => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "tools/call: \"{REQUEST_STATE_PARAM}\" must be the string an input_required result gave, not {}; nothing ran",
                        type_name(other)
                    ),
                    None,
                ));
            }
        };
        let declared = Declared::from_capabilities(
            params
                .get("_meta")
                .and_then(|meta| meta.get(CLIENT_CAPABILITIES_META_KEY)),
        );
        Ok(Self {
            responses,
            state,
            declared,
        })
    }

    /// Whether the request brought a request state: its check reads the journal,
    /// and a replay answered from memory would skip it.
    pub(crate) fn has_state(&self) -> bool {
        self.state.is_some()
    }

    /// `-32602` when the request state cannot be one this host made for `request`:
    /// it is not of the form of one, or it names another call. Whether it is this
    /// call's, and for which question, the guard checks when the tool asks. [`run`]
    /// checks it before anything; the transports answer no replay from memory for a
    /// request that brought a state.
    pub(crate) fn check_state(&self, host: &Host, request: &CallRequest) -> Result<(), ErrorData> {
        let Some(state) = &self.state else {
            return Ok(());
        };
        // The same error, and the same data, as the guard's own refusal of a state.
        let refused = |why: &str| {
            let error = Error::InputStateInvalid(format!(
                "tools/call: \"{REQUEST_STATE_PARAM}\" {why}; nothing ran. Make the call again without it (and without the answers) to be asked again"
            ));
            ErrorData::invalid_params(error.to_string(), Some(error.to_agent_json()))
        };
        let Some(named) = state_parts(state) else {
            return Err(refused("is not one this server made"));
        };
        let key = match host.key_for(request) {
            Ok(key) if key.as_str() != named.key => {
                return Err(refused("belongs to another call"));
            }
            Ok(key) => key,
            // A call whose key cannot be made reports that when it runs.
            Err(_) => return Ok(()),
        };
        // The journal must hold the question the state names: a state of a call
        // forgotten, expired or never made would otherwise let a fresh run perform
        // the tool's effects before its first question, only to find the state
        // forged there.
        let entry = match host.story(&key) {
            Ok(story) => story.entry,
            // The journal could not be read: the guard's own check decides.
            Err(_) => return Ok(()),
        };
        let asked = entry.as_ref().and_then(|entry| {
            entry
                .effects
                .iter()
                .find(|effect| effect.seq == named.seq && asked_at(effect))
        });
        let Some(asked) = asked else {
            return Err(refused(
                "names a question this call is not waiting on (the call was forgotten, expired, or never asked it)",
            ));
        };
        // Its MAC, made with the question's effect key: checked here too, since a
        // question answered already replays without asking (and without a check).
        let effect_key = EffectKey::from_stored(asked.key.clone());
        let Ok(state_keys) = host.state_keys() else {
            // The journal could not be read: the guard's own check decides.
            return Ok(());
        };
        let at = AskContext {
            tool: &request.tool,
            key: &key,
            seq: named.seq,
            effect_key: &effect_key,
            principal: request.principal.as_deref(),
            keys: &state_keys,
        };
        if ask::check_request_state(state, &at) != StateCheck::ForThisQuestion {
            return Err(refused(
                "is not the one this server gave for that question (it was altered, or made for another call)",
            ));
        }
        // A record past its window, not yet removed: the call now is a new one,
        // whose questions this state cannot answer.
        match entry {
            Some(entry) if entry.expired(host.clock().now_ms()) => Err(refused(
                "names a question of a call whose record expired (the same call now starts over as a new one)",
            )),
            _ => Ok(()),
        }
    }
}

/// Whether the journaled `effect` is one a request state may name: a question the
/// tool asked (a `user` effect), a pending unkeyed effect the person is asked
/// about at the retry (`guard::effect::asking_person`), or a pending upstream call
/// whose request of the client (sampling, roots) waits for its answer.
fn asked_at(effect: &crate::journal::JournalEffect) -> bool {
    effect.provider == ask::PROVIDER
        || (effect.state == "pending"
            && (effect.class == "unkeyed"
                || effect
                    .provider
                    .starts_with(crate::upstream::PROVIDER_PREFIX)))
}

/// The parts of a request state of the form this host makes, naming an invocation
/// key (see [`ask::request_state`]).
fn state_parts(state: &str) -> Option<ask::StateParts<'_>> {
    ask::parse_request_state(state).filter(|parts| InvocationKey::parse(parts.key).is_ok())
}

/// Asks the client of one stateless call: answers from its request, or later.
struct MrtrAsker {
    input: Input,
    /// Set when the client was found unable to be asked.
    refused: Cell<bool>,
    /// Why answers the request brought for the question were not taken (not an
    /// `ElicitResult`, or not fitting the question's schema): the question is asked
    /// again, and the result says why ([`REFUSED_ANSWERS_META_KEY`]).
    refused_answers: RefCell<Vec<String>>,
}

/// `_meta` key of an `input_required` result that asks again because answers the
/// request brought were not taken: why, one line per answer.
pub const REFUSED_ANSWERS_META_KEY: &str = "dev.justonce/refused_answers";

/// Why a client that did not declare `elicitation` cannot be asked.
const NOT_DECLARED: &str = "the client did not declare the elicitation capability in the request's _meta[\"io.modelcontextprotocol/clientCapabilities\"], so it cannot be asked";

impl Asker for MrtrAsker {
    fn can_ask(&self) -> Result<(), String> {
        if self.input.declared.elicitation {
            Ok(())
        } else {
            self.refused.set(true);
            Err(NOT_DECLARED.into())
        }
    }

    fn ask(&self, at: &AskContext<'_>, questions: &[Question]) -> Asked {
        let Some(state) = &self.input.state else {
            return Asked::Later;
        };
        match ask::check_request_state(state, at) {
            StateCheck::Forged => Asked::Invalid(format!(
                "the {REQUEST_STATE_PARAM} sent is not the one this server gave for the question of {} (it was altered, made for another call, or made before the call's record expired and it started over); make the call again without it, and without the answers, to be asked again",
                at.tool
            )),
            StateCheck::ForAnotherQuestion => Asked::Later,
            StateCheck::ForThisQuestion => questions
                .iter()
                .map(|q| {
                    // Missing, malformed or not fitting the question: asked again,
                    // saying why for an answer that was there.
                    let answer = self.input.responses.get(&q.name)?;
                    let taken = elicit_result(answer.clone())
                        .map_err(|why| {
                            format!("the answer to `{}` is not an ElicitResult: {why}", q.name)
                        })
                        .and_then(|answer| ask::check_answer(q, &answer).map(|()| answer));
                    taken
                        .map_err(|why| self.refused_answers.borrow_mut().push(why))
                        .ok()
                })
                .collect::<Vec<Option<Value>>>()
                .into_iter()
                .collect::<Option<Vec<Value>>>()
                .map_or(Asked::Later, Asked::Answered),
        }
    }

    /// An upstream's request, where the request declared its capability: the
    /// answer the request brought for it, or later. In a journaled call (`at`) the
    /// answer counts only with the request state of the upstream call's position;
    /// a read's (`None`) is sent again with the answer, and needs none.
    fn forward(&self, at: Option<&AskContext<'_>>, method: &str, params: &Value) -> Forwarded {
        match self.input.declared.needs(method) {
            None => return Forwarded::Unavailable(format!("{method} is not passed to clients")),
            Some((capability, false)) => return Forwarded::NotDeclared(capability),
            Some((_, true)) => {}
        }
        let request = UpstreamRequest::new(method, params);
        if let Some(at) = at {
            let Some(state) = &self.input.state else {
                return Forwarded::Later(request);
            };
            match ask::check_request_state(state, at) {
                StateCheck::ForThisQuestion => {}
                StateCheck::ForAnotherQuestion => return Forwarded::Later(request),
                StateCheck::Forged => {
                    return Forwarded::Unavailable(format!(
                        "the {REQUEST_STATE_PARAM} sent is not the one this server gave for {method} of {} (it was altered or made for another call)",
                        at.tool
                    ));
                }
            }
        }
        match self.input.responses.get(&request.name) {
            Some(answer @ Value::Object(_)) => Forwarded::Answered(answer.clone()),
            Some(other) => {
                self.refused_answers.borrow_mut().push(format!(
                    "the answer to `{}` ({method}) is not a JSON object: {}",
                    request.name,
                    type_name(other)
                ));
                Forwarded::Later(request)
            }
            None => Forwarded::Later(request),
        }
    }
}

/// Runs a stateless call, `request` (`run`, the call's run and its answer), with
/// [`MrtrAsker`] asking its client, whose request brought `input`: its state is
/// checked first ([`Input::check_state`], a journal read: so this runs where a call
/// may block, never on a thread that reads other requests); a client that cannot
/// be asked gets `-32021`.
pub(crate) fn run(
    input: Input,
    host: &Host,
    request: &CallRequest,
    run: impl FnOnce() -> Result<Value, ErrorData>,
) -> Result<Value, ErrorData> {
    input.check_state(host, request)?;
    run_checked(input, &request.tool, run)
}

/// [`run`] for `input` whose state was checked already ([`Input::check_state`]).
pub(crate) fn run_checked(
    input: Input,
    tool: &str,
    run: impl FnOnce() -> Result<Value, ErrorData>,
) -> Result<Value, ErrorData> {
    let asker = Rc::new(MrtrAsker {
        input,
        refused: Cell::new(false),
        refused_answers: RefCell::default(),
    });
    let reply = ask::with_asker(asker.clone(), run);
    match reply {
        Ok(mut result) if result["resultType"] == "input_required" => {
            let refused = asker.refused_answers.take();
            if !refused.is_empty() {
                result["_meta"][REFUSED_ANSWERS_META_KEY] = json!(refused);
            }
            Ok(result)
        }
        Ok(result) if asker.refused.get() && unavailable(&result) => Err(ErrorData::new(
            MISSING_CAPABILITY,
            format!(
                "tools/call of {tool}: the tool asks the user a question, and {NOT_DECLARED}; no outcome was saved (what the tool did before it asked is kept and replayed, nothing after it ran): declare {{\"elicitation\": {{}}}} and make the same call again"
            ),
            Some(json!({ "requiredCapabilities": { "elicitation": {} } })),
        )),
        other => other,
    }
}

/// Whether `result` is the tool result of [`crate::Error::InputUnavailable`].
fn unavailable(result: &Value) -> bool {
    result["isError"] == true
        && result["structuredContent"]["error"]["kind"] == INPUT_UNAVAILABLE_KIND
}

/// [`crate::Error::kind`] of [`crate::Error::InputUnavailable`].
const INPUT_UNAVAILABLE_KIND: &str = "input_unavailable";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::effect_key;
    use crate::mcp::protocol::ErrorCode;
    use crate::mcp::tools::{KEY_META_KEY, input_required};

    fn input(value: Value) -> Result<Input, ErrorData> {
        Input::read(value.as_object().unwrap())
    }

    fn asker(input: Input) -> MrtrAsker {
        MrtrAsker {
            input,
            refused: Cell::new(false),
            refused_answers: RefCell::default(),
        }
    }

    /// What a client that declares `elicitation` only declared.
    fn elicits() -> Declared {
        Declared {
            elicitation: true,
            ..Declared::default()
        }
    }

    fn accept(ok: bool) -> Value {
        json!({ "action": "accept", "content": { "ok": ok } })
    }

    #[test]
    fn the_answers_and_state_are_read_and_malformed_ones_refused() {
        let read = input(json!({
            "inputResponses": { "confirm": accept(true) },
            "requestState": "k.0.ab",
            "_meta": { CLIENT_CAPABILITIES_META_KEY: { "elicitation": {} } },
        }))
        .unwrap();
        assert_eq!(read.responses["confirm"], accept(true));
        assert_eq!(read.state.as_deref(), Some("k.0.ab"));
        assert!(read.declared.elicitation);
        let bare = input(json!({ "inputResponses": null })).unwrap();
        assert_eq!(bare, Input::default(), "absent and null are no answers");
        let sampling_only = input(json!({
            "_meta": { CLIENT_CAPABILITIES_META_KEY: { "sampling": {} } },
        }))
        .unwrap();
        assert!(!sampling_only.declared.elicitation && sampling_only.declared.sampling);
        // URL mode only: it cannot answer a form, as a session's client could not.
        let url_only = input(json!({
            "_meta": { CLIENT_CAPABILITIES_META_KEY: { "elicitation": { "url": {} } } },
        }))
        .unwrap();
        assert!(!url_only.declared.elicitation);
        for (params, named) in [
            (json!({ "inputResponses": [1] }), INPUT_RESPONSES_PARAM),
            (json!({ "inputResponses": "yes" }), INPUT_RESPONSES_PARAM),
            (json!({ "requestState": 7 }), REQUEST_STATE_PARAM),
        ] {
            let e = input(params).unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains(named), "{}", e.message);
        }
    }

    #[test]
    fn a_state_names_its_call_only_in_the_form_this_host_makes() {
        let key = InvocationKey::parse("conv.refund").unwrap();
        let state = ask::request_state(&key, 3, &effect_key(&key, 1, 3), Some("alice"), &KEYS);
        let named = state_parts(&state).map(|parts| (parts.key, parts.seq));
        assert_eq!(named, Some(("conv.refund", 3)));
        for forged in [
            "",
            "conv",
            "conv.3",
            "conv.x.00ff",
            "conv.3.00FF",
            "conv.3.",
            ".3.00ff",
            "conv.3.00ff-TAMPERED",
        ] {
            assert!(state_parts(forged).is_none(), "{forged:?}");
        }
    }

    static KEYS: std::sync::LazyLock<ask::StateKeys> = std::sync::LazyLock::new(ask::test_keys);

    /// The question at position 2 of alice's call `key`, under `effect`.
    fn second_question<'a>(key: &'a InvocationKey, effect: &'a EffectKey) -> AskContext<'a> {
        AskContext {
            tool: "refund",
            key,
            seq: 2,
            effect_key: effect,
            principal: Some("alice"),
            keys: &KEYS,
        }
    }

    #[test]
    fn only_the_state_of_this_question_with_every_answer_answers_it() {
        let key = InvocationKey::parse("conv.refund").unwrap();
        let effect = effect_key(&key, 1, 2);
        let at = second_question(&key, &effect);
        let questions = [Question::yes_or_no("confirm"), Question::yes_or_no("again")];
        let with = |responses: Value, state: Option<String>| {
            asker(Input {
                responses: responses.as_object().unwrap().clone(),
                state,
                declared: elicits(),
            })
            .ask(&at, &questions)
        };
        let here = Some(at.state());
        let both = json!({ "again": accept(false), "confirm": accept(true), "extra": 1 });
        assert_eq!(
            with(both.clone(), here.clone()),
            Asked::Answered(vec![accept(true), accept(false)]),
            "in the order asked, extra keys ignored"
        );
        assert_eq!(with(both.clone(), None), Asked::Later, "no state: asked");
        assert_eq!(
            with(json!({ "confirm": accept(true) }), here.clone()),
            Asked::Later,
            "one answer missing: asked again"
        );
        assert_eq!(
            with(
                json!({ "confirm": 12345, "again": accept(true) }),
                here.clone()
            ),
            Asked::Later,
            "an answer that is not an ElicitResult: asked again"
        );
        let earlier = ask::request_state(&key, 1, &effect_key(&key, 1, 1), Some("alice"), &KEYS);
        assert_eq!(with(both.clone(), Some(earlier)), Asked::Later);
        let tampered = format!("{}0", at.state());
        assert!(matches!(with(both, Some(tampered)), Asked::Invalid(_)));
    }

    #[test]
    fn answers_not_taken_are_asked_again_and_the_result_says_why() {
        let key = InvocationKey::parse("conv.refund").unwrap();
        let effect = effect_key(&key, 1, 2);
        let at = second_question(&key, &effect);
        let questions = [
            Question::yes_or_no("confirm"),
            Question::yes_or_no("again"),
            Question::yes_or_no("third"),
        ];
        let ask_with = |responses: Value| {
            let input = Input {
                responses: responses.as_object().unwrap().clone(),
                state: Some(at.state()),
                declared: elicits(),
            };
            run_checked(input, "refund", || {
                let asked = ask::current().expect("the asker").ask(&at, &questions);
                assert_eq!(asked, Asked::Later);
                Ok(input_required(&key, (&questions, &[]), &at.state()))
            })
            .unwrap()
        };
        // A string for a boolean, and no ElicitResult at all; `third` not answered.
        let result = ask_with(json!({
            "confirm": { "action": "accept", "content": { "ok": "yes" } },
            "again": 12345,
        }));
        let why = result["_meta"][REFUSED_ANSWERS_META_KEY]
            .as_array()
            .unwrap();
        assert_eq!(why.len(), 2, "{result}");
        assert!(
            why[0].as_str().unwrap().contains("`confirm` does not fit"),
            "{result}"
        );
        assert!(
            why[1]
                .as_str()
                .unwrap()
                .contains("`again` is not an ElicitResult"),
            "{result}"
        );
        // The opposite: answers merely missing are asked again without a word.
        let result = ask_with(json!({ "confirm": accept(true) }));
        assert!(
            result["_meta"].get(REFUSED_ANSWERS_META_KEY).is_none(),
            "{result}"
        );
    }

    #[test]
    fn an_upstreams_request_is_answered_from_the_request_with_its_state_or_asked_for() {
        let key = InvocationKey::parse("conv.sample").unwrap();
        let effect = effect_key(&key, 1, 0);
        let at = AskContext {
            seq: 0,
            ..second_question(&key, &effect)
        };
        let params = json!({ "messages": [], "maxTokens": 5 });
        let request = UpstreamRequest::new("sampling/createMessage", &params);
        let completion = json!({ "role": "assistant", "model": "m", "content": { "type": "text", "text": "42" } });
        let sampling = Declared {
            sampling: true,
            ..Declared::default()
        };
        let with = |responses: Value, state: Option<String>, declared: Declared| {
            asker(Input {
                responses: responses.as_object().unwrap().clone(),
                state,
                declared,
            })
        };
        let answered = json!({ request.name.clone(): completion.clone() });
        let forward = |asker: &MrtrAsker, at: Option<&AskContext<'_>>| {
            asker.forward(at, "sampling/createMessage", &params)
        };
        // Not declared: refused naming the capability, whatever it brought.
        let undeclared = with(answered.clone(), Some(at.state()), elicits());
        assert_eq!(
            forward(&undeclared, Some(&at)),
            Forwarded::NotDeclared("sampling")
        );
        // Declared: asked for, then answered by the answer with the state.
        let first = with(json!({}), None, sampling);
        assert_eq!(
            forward(&first, Some(&at)),
            Forwarded::Later(request.clone())
        );
        let again = with(answered.clone(), Some(at.state()), sampling);
        assert_eq!(
            forward(&again, Some(&at)),
            Forwarded::Answered(completion.clone())
        );
        // The answer without the state, or with another position's: asked for again.
        let stateless = with(answered.clone(), None, sampling);
        assert_eq!(
            forward(&stateless, Some(&at)),
            Forwarded::Later(request.clone())
        );
        let elsewhere = second_question(&key, &effect);
        let other = with(answered.clone(), Some(elsewhere.state()), sampling);
        assert_eq!(
            forward(&other, Some(&at)),
            Forwarded::Later(request.clone())
        );
        // A read's needs no state.
        assert_eq!(
            forward(&stateless, None),
            Forwarded::Answered(completion.clone())
        );
        // An answer that is no result: asked for again, saying why.
        let bad = with(json!({ request.name.clone(): "42" }), None, sampling);
        assert_eq!(forward(&bad, None), Forwarded::Later(request.clone()));
        assert!(
            bad.refused_answers.borrow()[0].contains("not a JSON object"),
            "{:?}",
            bad.refused_answers
        );
        // Another request's answer answers not this one.
        let another = UpstreamRequest::new("sampling/createMessage", &json!({ "maxTokens": 6 }));
        assert_ne!(another.name, request.name);
        let roots = UpstreamRequest::new("roots/list", &Value::Null);
        assert!(roots.name.starts_with("upstream_roots_"), "{}", roots.name);
        assert!(request.name.starts_with("upstream_sampling_"));
    }

    #[test]
    fn a_client_without_elicitation_cannot_be_asked_and_that_is_remembered() {
        let refusing = asker(Input::default());
        assert!(refusing.can_ask().unwrap_err().contains("elicitation"));
        assert!(refusing.refused.get());
        let willing = asker(Input {
            declared: elicits(),
            ..Input::default()
        });
        assert_eq!(willing.can_ask(), Ok(()));
        assert!(!willing.refused.get());
    }

    /// The call's result when its tool asked and the client could not be asked.
    fn unavailable_result() -> Result<Value, ErrorData> {
        let error = crate::Error::InputUnavailable {
            tool: "refund".into(),
            reason: NOT_DECLARED.into(),
        };
        super::super::tools::call_result(Err(error), true, true)
    }

    #[test]
    fn a_client_that_cannot_be_asked_is_refused_as_missing_elicitation_and_only_then() {
        let refused = run_checked(Input::default(), "refund", || {
            let asker = ask::current().expect("the call runs with the asker");
            assert!(asker.can_ask().is_err());
            unavailable_result()
        })
        .unwrap_err();
        assert_eq!(refused.code, MISSING_CAPABILITY);
        assert!(refused.message.contains("refund"), "{}", refused.message);
        assert_eq!(
            refused.data.unwrap()["requiredCapabilities"],
            json!({ "elicitation": {} })
        );
        // Unavailable for another reason than the capability: the tool error stays.
        let willing = Input {
            declared: elicits(),
            ..Input::default()
        };
        let told = run_checked(willing, "refund", unavailable_result).unwrap();
        assert_eq!(told["isError"], true);
        assert_eq!(
            told["structuredContent"]["error"]["kind"],
            INPUT_UNAVAILABLE_KIND
        );
        // A call that never asked is answered as it is, even from a client that cannot be asked.
        let done = run_checked(Input::default(), "refund", || {
            Ok(json!({ "isError": false }))
        });
        assert_eq!(done.unwrap(), json!({ "isError": false }));
        assert!(ask::current().is_none(), "the asker ends with the call");
    }

    #[test]
    fn an_upstreams_request_is_among_the_input_requests_as_it_sent_it() {
        let key = InvocationKey::parse("conv.sample").unwrap();
        let params = json!({ "messages": [], "maxTokens": 5 });
        let sampling = UpstreamRequest::new("sampling/createMessage", &params);
        let roots = UpstreamRequest::new("roots/list", &Value::Null);
        let requests = [sampling.clone(), roots.clone()];
        let result = input_required(&key, (&[], &requests), "conv.sample.0.ab");
        assert_eq!(
            result["inputRequests"][&sampling.name],
            json!({ "method": "sampling/createMessage", "params": params })
        );
        assert_eq!(
            result["inputRequests"][&roots.name],
            json!({ "method": "roots/list" })
        );
        assert_eq!(result["requestState"], "conv.sample.0.ab");
        // A read's requests come with no state to bring back.
        let read = input_required(&key, (&[], &requests), "");
        assert!(read.get("requestState").is_none(), "{read}");
    }

    #[test]
    fn an_input_required_result_has_an_elicitation_per_question_and_the_state() {
        let key = InvocationKey::parse("conv.refund").unwrap();
        let result = input_required(
            &key,
            (&[Question::yes_or_no("confirm")], &[]),
            "conv.refund.0.ab",
        );
        assert_eq!(result["resultType"], "input_required");
        assert_eq!(result["requestState"], "conv.refund.0.ab");
        assert_eq!(
            result["inputRequests"]["confirm"],
            json!({
                "method": "elicitation/create",
                "params": { "message": "confirm?", "requestedSchema": Question::yes_or_no("confirm").schema },
            })
        );
        assert_eq!(result["_meta"][KEY_META_KEY], "conv.refund");
    }
}
