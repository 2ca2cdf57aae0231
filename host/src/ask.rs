//! Tools that ask (issue 43): the questions a tool asks the person behind the agent,
//! who answers them, and the request state that ties an answer to its question.
//!
//! Asking is an effect of the invocation (provider `user`, operation `elicit`): the
//! guard journals the questions before anyone is asked and the answers before the
//! tool gets them, so a retry or a resumed run replays them and never asks again.
//! Whoever serves the call (an MCP server, a task) says how its client is asked by
//! putting an [`Asker`] on the thread that runs the call ([`with_asker`]); a call run
//! with none (the CLI's `run`, a library caller, a replay) cannot ask.
//!
//! The request state handed to a client that must come back with the answers
//! (2026-07-28 `requestState`) is MACed under a secret of the server's
//! ([`StateKeys`]): a random 256-bit secret kept in the journal, so every host of
//! the journal checks every other's states, rotated by `justonce rotate-state-secret`
//! (the secret before stays accepted for one retention window). The MAC also covers
//! the question's effect key and the principal, so a state answers one question of one
//! generation of one call, for its own principal. An effect key an agent learns
//! (an echoing downstream) no longer lets it make a state: the secret never leaves the
//! journal and the hosts.

use std::cell::RefCell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use crate::jcs::canonicalize;
use crate::keys::{EffectKey, InvocationKey};

/// The provider name of the asking effect; a component cannot reach it through
/// `effects.perform`.
pub const PROVIDER: &str = "user";

/// The operation of the asking effect.
pub const OPERATION: &str = "elicit";

/// The operation of an upstream MCP server's question during a gateway call: asked
/// and journaled as [`OPERATION`] is, after the upstream call's position.
pub const UPSTREAM_OPERATION: &str = "elicit_upstream";

/// The domain tag of a request state's MAC.
const STATE_TAG: &str = "justonce.request-state.v2";

/// Bytes of a server secret that keys request states.
pub const STATE_SECRET_LEN: usize = 32;

/// How long the states made under a secret are honoured after it was rotated out
/// (ms): a conversation's default retention, the longest a question usually waits.
pub const ROTATED_SECRET_KEPT_MS: i64 = 24 * 3600 * 1000;

/// The server's secrets that key request states' MACs, as the journal keeps them:
/// the newest, which every new state is made under, and those rotated out less than
/// a retention window ago, whose states are still honoured.
#[derive(Clone)]
pub struct StateKeys {
    secrets: Vec<[u8; STATE_SECRET_LEN]>,
}

impl std::fmt::Debug for StateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateKeys({} secret(s), redacted)", self.secrets.len())
    }
}

/// A secret the journal holds that is not one [`StateKeys`] can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a request-state secret in the journal is not {STATE_SECRET_LEN} bytes of lowercase hex")]
pub struct BadStateSecret;

/// The operating system gave no randomness for a new request-state secret.
#[derive(Debug, thiserror::Error)]
#[error("no randomness for a request-state secret: {0}")]
pub struct NoRandomness(getrandom::Error);

impl StateKeys {
    /// The keys from the journal's secrets, newest first, each as lowercase hex.
    /// `Err` when there is none, or one is not [`STATE_SECRET_LEN`] bytes of hex.
    pub fn from_hex<S: AsRef<str>>(newest_first: &[S]) -> Result<Self, BadStateSecret> {
        let secrets = newest_first
            .iter()
            .map(|hex_secret| {
                let bytes = hex::decode(hex_secret.as_ref()).map_err(|_| BadStateSecret)?;
                <[u8; STATE_SECRET_LEN]>::try_from(bytes).map_err(|_| BadStateSecret)
            })
            .collect::<Result<Vec<_>, _>>()?;
        if secrets.is_empty() {
            return Err(BadStateSecret);
        }
        Ok(Self { secrets })
    }

    /// A new random secret, as lowercase hex (what the journal stores).
    pub fn new_secret() -> Result<String, NoRandomness> {
        let mut secret = [0u8; STATE_SECRET_LEN];
        getrandom::fill(&mut secret).map_err(NoRandomness)?;
        Ok(hex::encode(secret))
    }

    /// The MAC under the newest secret.
    fn mac(&self, effect_key: &EffectKey, principal: Option<&str>) -> String {
        mac(&self.secrets[0], effect_key, principal)
    }

    /// Whether `given` is the MAC under one of the secrets, compared in constant
    /// time (a MAC is a secret until it matches).
    fn verifies(&self, given: &str, effect_key: &EffectKey, principal: Option<&str>) -> bool {
        self.secrets.iter().fold(false, |found, secret| {
            let expected = mac(secret, effect_key, principal);
            let differs = expected
                .bytes()
                .zip(given.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            found | (differs == 0 && expected.len() == given.len())
        })
    }
}

/// Hex characters of a request state's MAC (128 bits).
const MAC_HEX_LEN: usize = 32;

/// One question a tool asks (MCP elicitation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// Its name within one ask: lowercase letters, digits and `_`, unique (MCP's
    /// `inputRequests` key).
    pub name: String,
    /// What the person reads.
    pub message: String,
    /// The JSON Schema of the answer's content: a flat object (MCP `requestedSchema`).
    pub schema: Value,
}

#[cfg(test)]
impl Question {
    /// A yes-or-no question named `name` (its answer's content `{"ok": bool}`), for
    /// tests of the layers that carry questions.
    pub(crate) fn yes_or_no(name: &str) -> Self {
        Self {
            name: name.into(),
            message: format!("{name}?"),
            schema: serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
        }
    }
}

/// What became of asking.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// The person answered: one MCP `ElicitResult` object per question, in order
    /// (`{"action":"accept","content":{…}}`, `{"action":"decline"}`,
    /// `{"action":"cancel"}`).
    Answered(Vec<Value>),
    /// The answers come with a later request: the run stops here, and the call
    /// returns [`crate::Error::InputRequired`].
    Later,
    /// This client cannot be asked now; why.
    Unavailable(String),
    /// The request claimed to answer with a request state that this host did not
    /// make (tampered or forged); why.
    Invalid(String),
}

/// The question being asked: which call, which position in it.
#[derive(Debug, Clone, Copy)]
pub struct AskContext<'a> {
    /// The tool that asks.
    pub tool: &'a str,
    /// The invocation that asks.
    pub key: &'a InvocationKey,
    /// The asking effect's position in the invocation.
    pub seq: u32,
    /// The asking effect's key: the request state's MAC covers it, so a state
    /// answers this question of this generation of the call only.
    pub effect_key: &'a EffectKey,
    /// The authenticated principal of the call, if any.
    pub principal: Option<&'a str>,
    /// The server's secrets that key the request state.
    pub keys: &'a StateKeys,
}

impl AskContext<'_> {
    /// The request state of this question ([`request_state`]).
    pub fn state(&self) -> String {
        request_state(
            self.key,
            self.seq,
            self.effect_key,
            self.principal,
            self.keys,
        )
    }
}

/// Asks the person behind the calls of one caller.
pub trait Asker {
    /// Whether this caller's client can be asked at all (Err: why not).
    fn can_ask(&self) -> Result<(), String>;
    /// Asks `questions`, the asking effect at `at`.
    fn ask(&self, at: &AskContext<'_>, questions: &[Question]) -> Asked;
    /// Forwards to this caller's client a request an upstream MCP server made of it
    /// during the call (`sampling/createMessage`, `roots/list`): not a question to
    /// the person, not journaled. `at` is the upstream call's position in a
    /// journaled call (a client that answers later must bring its request state
    /// back), `None` for a read, which journals nothing and is sent again with the
    /// answer. By default the client cannot be reached so.
    fn forward(&self, _at: Option<&AskContext<'_>>, method: &str, _params: &Value) -> Forwarded {
        Forwarded::Unavailable(format!(
            "this caller's client is not reachable by a request of the server's ({method})"
        ))
    }
}

/// A request an upstream MCP server made of the call's client
/// (`sampling/createMessage`, `roots/list`), passed to a client that answers with a
/// later request (an `input_required` result's `inputRequests`, a task's): not a
/// question to the person, not journaled.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamRequest {
    /// Its name among the `inputRequests` (the key its answer comes back under):
    /// `upstream_` and what it asks (`sampling`, `roots`), then a digest of its
    /// method and parameters (but their `_meta`), so an answer brought back answers
    /// the very request it was given for.
    pub name: String,
    /// Its method.
    pub method: String,
    /// Its parameters, as the upstream sent them.
    pub params: Value,
}

impl UpstreamRequest {
    /// The request `method` with `params`, named after them.
    pub fn new(method: &str, params: &Value) -> Self {
        use sha2::Digest;
        let what = match method.split_once('/') {
            Some(("sampling", _)) => "sampling",
            Some(("roots", _)) => "roots",
            _ => "request",
        };
        let mut asked = params.clone();
        if let Some(asked) = asked.as_object_mut() {
            asked.remove("_meta");
        }
        // A value the upstream sent parsed as JSON, which always has a canonical form.
        let canonical = canonicalize(&Value::from(vec![Value::from(method), asked]))
            .unwrap_or_else(|_| format!("{method}{params}"));
        let digest = hex::encode(Sha256::digest(canonical.as_bytes()));
        Self {
            name: format!("upstream_{what}_{}", &digest[..12]),
            method: method.to_owned(),
            params: params.clone(),
        }
    }
}

/// What became of a request forwarded to the caller's client ([`Asker::forward`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Forwarded {
    /// The client's result.
    Answered(Value),
    /// The client answered a JSON-RPC error: its code and message.
    Refused {
        /// Its code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// The client did not declare the capability the request needs (its name).
    NotDeclared(&'static str),
    /// The client cannot be reached now: why.
    Unavailable(String),
    /// The client answers with a later request (`input_required`): the call stops
    /// here, the request among what it asks for.
    Later(UpstreamRequest),
}

thread_local! {
    static ASKER: RefCell<Option<Rc<dyn Asker>>> = const { RefCell::new(None) };
}

/// Runs `run` with `asker` answering the questions of calls run on this thread (a
/// guest runs on the thread that called it); the asker there before is restored
/// after, also when `run` panics.
pub fn with_asker<R>(asker: Rc<dyn Asker>, run: impl FnOnce() -> R) -> R {
    struct Restore(Option<Rc<dyn Asker>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            ASKER.with(|a| *a.borrow_mut() = previous);
        }
    }
    let _restore = Restore(ASKER.with(|a| a.borrow_mut().replace(asker)));
    run()
}

/// This thread's asker, if a caller put one there.
pub(crate) fn current() -> Option<Rc<dyn Asker>> {
    ASKER.with(|a| a.borrow().clone())
}

/// Why a call run with no asker cannot ask.
pub(crate) const NO_ASKER: &str =
    "this caller cannot answer questions (no client that can be asked is connected to the call)";

/// The most questions one ask may hold.
pub(crate) const MAX_QUESTIONS: usize = 16;

/// Why `questions` cannot be asked, if they cannot: none or too many, a name that is
/// not lowercase letters, digits and `_` or that two questions share, an empty
/// message, or a schema that is not a flat object's (MCP `requestedSchema`: an
/// object whose properties are strings, numbers, integers or booleans).
pub(crate) fn check_questions(questions: &[Question]) -> Result<(), String> {
    if questions.is_empty() {
        return Err("an ask needs at least one question".into());
    }
    if questions.len() > MAX_QUESTIONS {
        return Err(format!(
            "an ask may hold at most {MAX_QUESTIONS} questions, not {}",
            questions.len()
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    for q in questions {
        let name = &q.name;
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(format!(
                "question name {name:?}: use lowercase letters, digits and `_`"
            ));
        }
        if !names.insert(name.as_str()) {
            return Err(format!("two questions are named `{name}`"));
        }
        if q.message.trim().is_empty() {
            return Err(format!("question `{name}` has no message"));
        }
        check_schema(&q.schema).map_err(|why| format!("question `{name}`: {why}"))?;
    }
    Ok(())
}

/// A flat object's schema, as MCP's `requestedSchema` allows.
fn check_schema(schema: &Value) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        return Err("its schema is not a JSON object".into());
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(r#"its schema must be {"type":"object",…}"#.into());
    }
    let Some(properties) = schema.get("properties") else {
        return Ok(());
    };
    let Some(properties) = properties.as_object() else {
        return Err("its schema's `properties` is not an object".into());
    };
    for (property, sub) in properties {
        let kind = sub.get("type").and_then(Value::as_str);
        if !matches!(
            kind,
            Some("string" | "number" | "integer" | "boolean" | "array")
        ) {
            return Err(format!(
                "property `{property}` must be a string, number, integer, boolean or (multi-select) array"
            ));
        }
    }
    // Answers are checked against it (`check_answer`): one that cannot be compiled
    // would refuse every answer, as the client's fault.
    jsonschema::validator_for(&Value::Object(schema.clone()))
        .map(|_| ())
        .map_err(|e| format!("its schema is not a usable JSON Schema: {e}"))
}

/// The asking effect's payload: the questions as a JSON array.
pub(crate) fn payload(questions: &[Question]) -> Value {
    serde_json::to_value(questions).expect("strings and JSON values serialize")
}

/// The most the answers to one ask may take, as JSON text: they are journaled and
/// handed to the tool, and a person's answers to a form are far smaller.
pub const MAX_ANSWERS_BYTES: usize = 1 << 20;

/// Why `answers` do not answer the `asked` questions, if they do not: one MCP
/// `ElicitResult` object per question, its `action` `accept` (with an object
/// `content` that fits the question's schema, [`check_answer`], or none), `decline`
/// or `cancel`, all of them at most [`MAX_ANSWERS_BYTES`] of JSON.
pub(crate) fn check_answers(answers: &[Value], asked: &[Question]) -> Result<(), String> {
    if answers.len() != asked.len() {
        return Err(format!(
            "{} answers to {} questions",
            answers.len(),
            asked.len()
        ));
    }
    let size = serde_json::to_string(answers).map_or(usize::MAX, |text| text.len());
    if size > MAX_ANSWERS_BYTES {
        return Err(format!(
            "the answers are {size} bytes of JSON, more than the {MAX_ANSWERS_BYTES} an ask takes"
        ));
    }
    for answer in answers {
        let action = answer.get("action").and_then(Value::as_str);
        let content = answer.get("content");
        match action {
            Some("accept") if content.is_none_or(Value::is_object) => {}
            Some("decline" | "cancel") => {}
            _ => return Err(format!("not an elicitation result: {answer}")),
        }
    }
    for (question, answer) in asked.iter().zip(answers) {
        check_answer(question, answer)?;
    }
    Ok(())
}

/// How many of an answer's misfits one message names.
const MISFITS_REPORTED: usize = 3;

/// Why `answer` (an `ElicitResult`) does not fit `question`, if it does not: an
/// accepted answer's content (none counts as `{}`) must match the question's
/// `requestedSchema` (its properties' types, `required`, `enum`, bounds), as the
/// person's client was asked to make it. A declined or cancelled answer carries no
/// content to check.
pub(crate) fn check_answer(question: &Question, answer: &Value) -> Result<(), String> {
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return Ok(());
    }
    let empty = Value::Object(serde_json::Map::new());
    let content = answer.get("content").unwrap_or(&empty);
    let name = &question.name;
    let validator = jsonschema::validator_for(&question.schema)
        .map_err(|e| format!("question `{name}`'s schema is not a usable JSON Schema: {e}"))?;
    let misfits: Vec<String> = validator
        .iter_errors(content)
        .take(MISFITS_REPORTED)
        .map(|e| {
            let path = e.instance_path().to_string();
            let at = if path.is_empty() { "/" } else { &path };
            format!("at {at}: {e}")
        })
        .collect();
    if misfits.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the answer to `{name}` does not fit its requestedSchema: {}",
            misfits.join("; ")
        ))
    }
}

/// The request state of the question at `seq` of `key`:
/// `"{key}.{seq}.{mac}"`, `mac = hex(HMAC-SHA256(secret,
/// JCS(["justonce.request-state.v2", effect_key, principal_or_empty])))[..32]`, under
/// the newest of the server's secrets `keys`.
pub fn request_state(
    key: &InvocationKey,
    seq: u32,
    effect_key: &EffectKey,
    principal: Option<&str>,
    keys: &StateKeys,
) -> String {
    format!("{key}.{seq}.{}", keys.mac(effect_key, principal))
}

fn mac(secret: &[u8; STATE_SECRET_LEN], effect_key: &EffectKey, principal: Option<&str>) -> String {
    use hmac::Mac;
    let secret = match crate::mutants::on(crate::mutants::Mutant::StateSecretDropped) {
        true => &[0; STATE_SECRET_LEN],
        false => secret,
    };
    let parts = Value::from(vec![
        STATE_TAG,
        effect_key.as_str(),
        principal.unwrap_or(""),
    ]);
    let canonical = canonicalize(&parts).expect("an array of strings has a canonical form");
    let mut hmac =
        <hmac::Hmac<Sha256>>::new_from_slice(secret).expect("HMAC takes a key of any size");
    hmac.update(canonical.as_bytes());
    let mut hex = hex::encode(hmac.finalize().into_bytes());
    hex.truncate(MAC_HEX_LEN);
    hex
}

/// What a request state says about the question being asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateCheck {
    /// It was made for this very question: the answers that came with it answer it.
    ForThisQuestion,
    /// It was made for another question of the same call (an earlier one, answered
    /// and journaled since): its answers do not answer this one, so ask again.
    ForAnotherQuestion,
    /// This host made no such state for this call: malformed, for another call, or
    /// its MAC does not match.
    Forged,
}

/// The parts of a request state of the form [`request_state`] makes: the
/// invocation key it names (not checked to be one), the question's position, and
/// the MAC (lowercase hex of its length).
pub(crate) struct StateParts<'a> {
    /// The invocation key, as written.
    pub key: &'a str,
    /// The question's position in the call.
    pub seq: u32,
    /// The MAC, as written.
    pub mac: &'a str,
}

/// `state`'s parts, if it has the form of a request state.
pub(crate) fn parse_request_state(state: &str) -> Option<StateParts<'_>> {
    // The key may hold dots (an explicit key); the seq and the MAC never do.
    let mut parts = state.rsplitn(3, '.');
    let (mac, seq, key) = (parts.next()?, parts.next()?, parts.next()?);
    let well_formed = mac.len() == MAC_HEX_LEN
        && mac
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && !seq.is_empty()
        && seq.bytes().all(|b| b.is_ascii_digit());
    if !well_formed {
        return None;
    }
    Some(StateParts {
        key,
        seq: seq.parse().ok()?,
        mac,
    })
}

/// Checks `state` against the question `at` asks.
pub fn check_request_state(state: &str, at: &AskContext<'_>) -> StateCheck {
    let Some(StateParts {
        key,
        seq,
        mac: mac_given,
    }) = parse_request_state(state)
    else {
        return StateCheck::Forged;
    };
    if key != at.key.as_str() {
        return StateCheck::Forged;
    }
    if seq != at.seq {
        return StateCheck::ForAnotherQuestion;
    }
    if at.keys.verifies(mac_given, at.effect_key, at.principal)
        || crate::mutants::on(crate::mutants::Mutant::StateMacUnchecked)
    {
        StateCheck::ForThisQuestion
    } else {
        StateCheck::Forged
    }
}

/// The keys of a server whose one secret is 32 bytes of 1, for tests.
#[cfg(test)]
pub(crate) fn test_keys() -> StateKeys {
    StateKeys::from_hex(&[hex::encode([1u8; STATE_SECRET_LEN])]).expect("a valid secret")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::effect_key;
    use sha2::Digest;

    fn key(s: &str) -> InvocationKey {
        InvocationKey::parse(s).unwrap()
    }

    /// The secret `n` repeated, as hex.
    fn secret(n: u8) -> String {
        hex::encode([n; STATE_SECRET_LEN])
    }

    fn server_keys() -> StateKeys {
        test_keys()
    }

    fn at<'a>(key: &'a InvocationKey, seq: u32, effect: &'a EffectKey) -> AskContext<'a> {
        static KEYS: std::sync::LazyLock<StateKeys> = std::sync::LazyLock::new(server_keys);
        AskContext {
            tool: "refund",
            key,
            seq,
            effect_key: effect,
            principal: Some("alice"),
            keys: &KEYS,
        }
    }

    #[test]
    fn a_state_is_checked_under_the_servers_secrets_and_no_other() {
        let k = key("abc");
        let effect = effect_key(&k, 1, 0);
        let here = at(&k, 0, &effect);
        let state = here.state();
        // Whoever knows the effect key but not the secret cannot make it: another
        // server's state (or the old, unkeyed hash) is refused.
        let other = StateKeys::from_hex(&[secret(2)]).unwrap();
        let elsewhere = AskContext {
            keys: &other,
            ..here
        };
        assert_ne!(elsewhere.state(), state);
        assert_eq!(
            check_request_state(&elsewhere.state(), &here),
            StateCheck::Forged
        );
        let canonical = format!(r#"["justonce.request-state.v1","{effect}","alice"]"#);
        let unkeyed = format!(
            "abc.0.{}",
            &hex::encode(Sha256::digest(canonical.as_bytes()))[..32]
        );
        assert_eq!(check_request_state(&unkeyed, &here), StateCheck::Forged);
        // Rotated: new states are made under the new secret, and the old one's are
        // honoured while it is kept.
        let rotated = StateKeys::from_hex(&[secret(2), secret(1)]).unwrap();
        let after = AskContext {
            keys: &rotated,
            ..here
        };
        assert_eq!(after.state(), elsewhere.state(), "made under the newest");
        assert_eq!(
            check_request_state(&state, &after),
            StateCheck::ForThisQuestion
        );
        // Dropped after its window: refused.
        assert_eq!(check_request_state(&state, &elsewhere), StateCheck::Forged);
    }

    #[test]
    fn secrets_that_are_not_32_bytes_of_hex_are_refused() {
        let none: [&str; 0] = [];
        assert_eq!(StateKeys::from_hex(&none).unwrap_err(), BadStateSecret);
        assert_eq!(StateKeys::from_hex(&["abcd"]).unwrap_err(), BadStateSecret);
        assert_eq!(
            StateKeys::from_hex(&["zz".repeat(32)]).unwrap_err(),
            BadStateSecret
        );
        let fresh = StateKeys::new_secret().unwrap();
        assert!(StateKeys::from_hex(&[fresh.as_str()]).is_ok());
        assert_ne!(fresh, StateKeys::new_secret().unwrap(), "random");
    }

    #[test]
    fn a_state_checks_for_its_own_question_only() {
        let k = key("conv.1.refund");
        let effect = effect_key(&k, 7, 2);
        let here = at(&k, 2, &effect);
        let state = here.state();
        assert!(state.starts_with("conv.1.refund.2."), "{state}");
        assert_eq!(
            check_request_state(&state, &here),
            StateCheck::ForThisQuestion
        );
        // The same call's next question: ask again, not an attack.
        let next_effect = effect_key(&k, 7, 3);
        assert_eq!(
            check_request_state(&state, &at(&k, 3, &next_effect)),
            StateCheck::ForAnotherQuestion
        );
        // Another call's state is not this call's.
        let other = key("conv.1.other");
        assert_eq!(
            check_request_state(&state, &at(&other, 2, &effect)),
            StateCheck::Forged
        );
    }

    #[test]
    fn a_state_depends_on_the_effect_key_and_the_principal() {
        let k = key("abc");
        let effect = effect_key(&k, 1, 0);
        let here = at(&k, 0, &effect);
        let state = here.state();
        // Another generation of the same call (its record expired): another secret.
        let later = effect_key(&k, 2, 0);
        assert_eq!(
            check_request_state(&state, &at(&k, 0, &later)),
            StateCheck::Forged
        );
        let bob = AskContext {
            principal: Some("bob"),
            ..here
        };
        assert_eq!(check_request_state(&state, &bob), StateCheck::Forged);
        let nobody = AskContext {
            principal: None,
            ..here
        };
        assert_ne!(nobody.state(), state);
        assert_eq!(
            check_request_state(&nobody.state(), &nobody),
            StateCheck::ForThisQuestion
        );
    }

    #[test]
    fn a_tampered_or_malformed_state_is_forged() {
        let k = key("abc");
        let effect = effect_key(&k, 1, 0);
        let here = at(&k, 0, &effect);
        let state = here.state();
        let mut flipped = state.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
        let flipped = String::from_utf8(flipped).unwrap();
        for forged in [
            flipped.as_str(),
            "",
            "abc",
            "abc.0",
            "abc.x.0123456789abcdef0123456789abcdef",
            "abc.0.0123",
            "abc.+0.0123456789abcdef0123456789abcdef",
            &state.to_uppercase(),
            &format!("{state}0"),
        ] {
            assert_eq!(
                check_request_state(forged, &here),
                StateCheck::Forged,
                "{forged:?}"
            );
        }
    }

    #[test]
    fn the_mac_is_the_documented_hmac() {
        use hmac::Mac;
        let k = key("abc");
        let effect = effect_key(&k, 1, 0);
        let canonical = format!(r#"["{STATE_TAG}","{effect}","alice"]"#);
        let mut hmac = <hmac::Hmac<Sha256>>::new_from_slice(&[1; STATE_SECRET_LEN]).unwrap();
        hmac.update(canonical.as_bytes());
        let digest = hex::encode(hmac.finalize().into_bytes());
        assert_eq!(
            request_state(&k, 0, &effect, Some("alice"), &server_keys()),
            format!("abc.0.{}", &digest[..32])
        );
    }

    fn question(name: &str, schema: Value) -> Question {
        Question {
            name: name.into(),
            message: "Refund 25 EUR to card …4242?".into(),
            schema,
        }
    }

    #[test]
    fn only_well_formed_questions_are_asked() {
        let flat =
            serde_json::json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}});
        assert_eq!(
            check_questions(&[question("confirm", flat.clone())]),
            Ok(())
        );
        for (questions, why) in [
            (vec![], "at least one"),
            (vec![question("Confirm", flat.clone())], "lowercase"),
            (vec![question("", flat.clone())], "lowercase"),
            (
                vec![question("a", flat.clone()), question("a", flat.clone())],
                "two questions",
            ),
            (
                vec![question("a", Value::String("{}".into()))],
                "not a JSON object",
            ),
            (
                vec![question("a", serde_json::json!({"type": "string"}))],
                "must be",
            ),
            (
                vec![question(
                    "a",
                    serde_json::json!({"type": "object", "properties": {"x": {"type": "object"}}}),
                )],
                "property `x`",
            ),
        ] {
            let refused = check_questions(&questions).unwrap_err();
            assert!(refused.contains(why), "{refused}");
        }
        let unusable = Question {
            schema: serde_json::json!({
                "type": "object",
                "properties": {"code": {"type": "string", "pattern": "("}},
            }),
            ..Question::yes_or_no("code")
        };
        let why = check_questions(&[unusable]).unwrap_err();
        assert!(why.contains("not a usable JSON Schema"), "{why}");
        let mut silent = question("a", flat);
        silent.message = " ".into();
        assert!(
            check_questions(&[silent])
                .unwrap_err()
                .contains("no message")
        );
    }

    /// `confirm?`, whose answer must say `confirm`, a boolean.
    fn confirm() -> Question {
        Question {
            name: "confirm".into(),
            message: "Refund?".into(),
            schema: serde_json::json!({
                "type": "object",
                "properties": {"confirm": {"type": "boolean"}},
                "required": ["confirm"],
            }),
        }
    }

    #[test]
    fn answers_are_elicit_results_one_per_question() {
        let accept = serde_json::json!({"action": "accept", "content": {"confirm": true}});
        let decline = serde_json::json!({"action": "decline"});
        let two = [confirm(), Question::yes_or_no("b")];
        assert_eq!(
            check_answers(&[accept.clone(), decline.clone()], &two),
            Ok(())
        );
        assert!(check_answers(std::slice::from_ref(&accept), &two).is_err());
        let note = [Question {
            schema: serde_json::json!({"type": "object", "properties": {"note": {"type": "string"}}}),
            ..Question::yes_or_no("note")
        }];
        let huge = serde_json::json!({"action": "accept", "content": {"note": "x".repeat(MAX_ANSWERS_BYTES)}});
        let too_big = check_answers(std::slice::from_ref(&huge), &note).unwrap_err();
        assert!(too_big.contains("more than"), "{too_big}");
        for bad in [
            serde_json::json!({"action": "maybe"}),
            serde_json::json!({"action": "accept", "content": 1}),
            serde_json::json!("accept"),
        ] {
            assert!(
                check_answers(std::slice::from_ref(&bad), &note).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_accepted_answers_content_must_fit_its_questions_schema() {
        let answer = |content: serde_json::Value| {
            check_answer(
                &confirm(),
                &serde_json::json!({"action": "accept", "content": content}),
            )
        };
        let wrong_type = answer(serde_json::json!({"confirm": "yes"})).unwrap_err();
        assert!(
            wrong_type.contains("`confirm` does not fit") && wrong_type.contains("at /confirm"),
            "{wrong_type}"
        );
        let missing = answer(serde_json::json!({})).unwrap_err();
        assert!(missing.contains("required"), "{missing}");
        let no_content = serde_json::json!({"action": "accept"});
        assert!(
            check_answer(&confirm(), &no_content).is_err(),
            "none is {{}}"
        );
        let sizes = Question {
            schema: serde_json::json!({
                "type": "object",
                "properties": {"size": {"type": "string", "enum": ["s", "m"]}},
            }),
            ..Question::yes_or_no("size")
        };
        let size = |s: &str| serde_json::json!({"action": "accept", "content": {"size": s}});
        assert!(check_answer(&sizes, &size("xl")).is_err());

        // The opposite: answers that fit, and answers with no content to check.
        assert_eq!(answer(serde_json::json!({"confirm": false})), Ok(()));
        assert_eq!(check_answer(&sizes, &size("m")), Ok(()));
        for action in ["decline", "cancel"] {
            let told = serde_json::json!({"action": action});
            assert_eq!(check_answer(&confirm(), &told), Ok(()), "{action}");
        }
    }

    struct Fixed(&'static str);
    impl Asker for Fixed {
        fn can_ask(&self) -> Result<(), String> {
            Err(self.0.into())
        }
        fn ask(&self, _: &AskContext<'_>, _: &[Question]) -> Asked {
            Asked::Later
        }
    }

    #[test]
    fn the_asker_is_the_one_of_the_run_and_is_restored_after() {
        assert!(current().is_none());
        with_asker(Rc::new(Fixed("outer")), || {
            assert_eq!(current().unwrap().can_ask(), Err("outer".into()));
            with_asker(Rc::new(Fixed("inner")), || {
                assert_eq!(current().unwrap().can_ask(), Err("inner".into()));
            });
            assert_eq!(current().unwrap().can_ask(), Err("outer".into()));
        });
        assert!(current().is_none());
    }
}
