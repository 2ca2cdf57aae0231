//! What operators do to one call (`justonce forget`, `abandon`, `resolve`), decided
//! the same way on every journal: each backend only reads and writes its rows
//! ([`OperateTx`], inside the transaction that does the operation), and the
//! operation is recorded in its `operations` audit table with who and when.

use serde_json::{Value, json};

use super::{
    Action, Answer, DecidedBy, JournalEffect, JournalOperation, Operated, Operator, Resolution,
};
use crate::clock::rfc3339;
use crate::outcome::Outcome;

/// The trap reason of the outcome `abandon` saves.
const ABANDONED: &str = "abandoned";

/// An invocation as an operation sees it.
pub(crate) struct Found {
    pub state: String,
    /// The run holding its lease, if one does.
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<i64>,
    pub outcome: Option<String>,
    /// The database's clock where it decides whether the lease is live (PostgreSQL);
    /// `None`: the operator's (SQLite, one machine).
    pub now: Option<i64>,
}

/// A backend's rows, read and written inside the transaction of one operation.
pub(crate) trait OperateTx {
    /// The backend's error.
    type Error;
    /// The invocation `key`, if the journal holds it (locked until the transaction
    /// ends, where the backend locks rows).
    fn find(&mut self, key: &str) -> Result<Option<Found>, Self::Error>;
    /// Its effects, in order.
    fn effects(&mut self, key: &str) -> Result<Vec<JournalEffect>, Self::Error>;
    /// The operations on `key`, oldest first.
    fn operations(&mut self, key: &str) -> Result<Vec<JournalOperation>, Self::Error>;
    /// Deletes the record of `key` with its effects and tool-call ids.
    fn delete(&mut self, key: &str) -> Result<(), Self::Error>;
    /// Saves `outcome` as the call's, releasing any lease, at `now`.
    fn close(&mut self, key: &str, outcome: &str, now: i64) -> Result<(), Self::Error>;
    /// Appends `operation` to the audit table.
    fn record(&mut self, operation: &JournalOperation) -> Result<(), Self::Error>;
    /// The invocation the effect `key` belongs to, if the journal holds the effect
    /// (not locked: a backend that locks rows locks the invocation's first, with
    /// [`OperateTx::find`], and every write of an effect locks it too).
    fn effect_of(&mut self, key: &str) -> Result<Option<String>, Self::Error>;
    /// Saves a person's resolution of the pending effect `key` at `now`: with
    /// `performed` (a stored answer) it is done, answered so; without, it is marked
    /// `not_performed`, and the next run makes one more attempt under its key.
    fn resolve_effect(
        &mut self,
        key: &str,
        performed: Option<&str>,
        now: i64,
    ) -> Result<(), Self::Error>;
    /// Saves `answer` (its stored text) as the answer of the pending effect `key`
    /// at `now`, as an answer its run saved would be (no resolution).
    fn answer_effect(&mut self, key: &str, answer: &str, now: i64) -> Result<(), Self::Error>;
}

/// What is known of whether an effect reached the world: `performed` (answered, or a
/// person said so), `refused` (the host refused it before sending), `not_performed`
/// (known not to have happened), or `unknown`.
fn performed(effect: &JournalEffect) -> &'static str {
    match (effect.state.as_str(), effect.resolution.as_deref()) {
        ("done", _) => "performed",
        ("refused", _) => "refused",
        (_, Some("not_performed")) => "not_performed",
        _ => "unknown",
    }
}

/// The effects as an operation's detail records them.
fn effects_detail(effects: &[JournalEffect]) -> Value {
    effects
        .iter()
        .map(|e| {
            json!({
                "seq": e.seq,
                "key": e.key,
                "provider": e.provider,
                "operation": e.operation,
                "performed": performed(e),
            })
        })
        .collect()
}

/// Until when the call's run holds a live lease, if it does.
fn live_lease(found: &Found, op: &Operator<'_>) -> Option<i64> {
    found
        .lease_expires_at
        .filter(|&t| found.state == "running" && t > found.now.unwrap_or(op.now))
}

/// Why an operation is refused on a call whose run holds a live lease, if it does.
fn running(found: &Found, op: &Operator<'_>) -> Option<String> {
    let until = live_lease(found, op).filter(|_| !op.force)?;
    Some(format!(
        "it is running right now (its lease is held until {}); wait for it to stop, or use \
         --force (the run's later writes are then refused)",
        rfc3339(until)
    ))
}

/// Records `action` on `key` and returns it.
fn record<T: OperateTx>(
    tx: &mut T,
    key: &str,
    action: Action,
    op: &Operator<'_>,
    detail: Value,
) -> Result<JournalOperation, T::Error> {
    let operation = JournalOperation {
        key: key.to_string(),
        action,
        by: op.by.to_string(),
        at: op.now,
        detail,
    };
    tx.record(&operation)?;
    Ok(operation)
}

/// The latest `action` on `key`, if any.
fn last<T: OperateTx>(
    tx: &mut T,
    key: &str,
    action: Action,
) -> Result<Option<JournalOperation>, T::Error> {
    Ok(tx
        .operations(key)?
        .into_iter()
        .rev()
        .find(|o| o.action == action))
}

/// Removes the record of `key` (its effects and tool-call ids with it) so the same
/// call runs again, and records the operation with what was removed. `Err` names why
/// it is refused: no record, a live run, or an effect whose outcome is unknown (a
/// rerun would send it again under a new key), the last two unless forced.
pub(crate) fn forget<T: OperateTx>(
    tx: &mut T,
    key: &str,
    op: &Operator<'_>,
) -> Result<Result<Operated, String>, T::Error> {
    let Some(found) = tx.find(key)? else {
        return Ok(match last(tx, key, Action::Forget)? {
            Some(earlier) => Ok(Operated::AlreadyDone(earlier)),
            None => {
                Err("the journal holds no call with this key (never made, or removed by gc)".into())
            }
        });
    };
    if let Some(reason) = running(&found, op) {
        return Ok(Err(reason));
    }
    let effects = tx.effects(key)?;
    if !op.force
        && let Some(e) = effects.iter().find(|e| performed(e) == "unknown")
    {
        return Ok(Err(format!(
            "effect #{} ({}.{}, key {}) may have been performed and its outcome is unknown; \
             a rerun would send it again under a new key. Retry the call to finish it, \
             resolve it (justonce resolve) if it is unkeyed, or use --force",
            e.seq, e.provider, e.operation, e.key
        )));
    }
    let detail = json!({
        "state": found.state,
        "forced": op.force,
        "outcome": found.outcome.as_deref().map(super::read::summary),
        "effects": effects_detail(&effects),
    });
    tx.delete(key)?;
    Ok(Ok(Operated::Done(record(
        tx,
        key,
        Action::Forget,
        op,
        detail,
    )?)))
}

/// Closes `key` with a saved `abandoned` outcome (a trap whose message lists the
/// effects already performed and those whose outcome is unknown), releasing any
/// lease, and records the operation. A call abandoned already is left as it is;
/// `Err` names why it is refused: no record, an outcome of its own, or a live run
/// (unless forced).
pub(crate) fn abandon<T: OperateTx>(
    tx: &mut T,
    key: &str,
    op: &Operator<'_>,
) -> Result<Result<Operated, String>, T::Error> {
    let Some(found) = tx.find(key)? else {
        return Ok(Err(
            "the journal holds no call with this key (never made, expired, or forgotten)".into(),
        ));
    };
    if found.state == "completed" {
        let abandoned = found
            .outcome
            .as_deref()
            .and_then(|o| Outcome::from_stored(o).ok())
            .is_some_and(|o| matches!(o, Outcome::Trap { reason, .. } if reason == ABANDONED));
        if abandoned && let Some(earlier) = last(tx, key, Action::Abandon)? {
            return Ok(Ok(Operated::AlreadyDone(earlier)));
        }
        return Ok(Err(
            "it completed with an outcome of its own, which every retry replays; there is nothing \
             to abandon (justonce forget lets it run again)"
                .into(),
        ));
    }
    if let Some(reason) = running(&found, op) {
        return Ok(Err(reason));
    }
    let effects = tx.effects(key)?;
    let list = |kind: &str| -> Vec<String> {
        effects
            .iter()
            .filter(|e| performed(e) == kind)
            .map(|e| format!("#{} {}.{} (key {})", e.seq, e.provider, e.operation, e.key))
            .collect()
    };
    let (done, unknown) = (list("performed"), list("unknown"));
    let mut message = format!("abandoned by {} at {}", op.by, rfc3339(op.now));
    if done.is_empty() && unknown.is_empty() {
        message.push_str("; no effect was performed");
    }
    if !done.is_empty() {
        message.push_str(&format!("; effects performed: {}", done.join(", ")));
    }
    if !unknown.is_empty() {
        message.push_str(&format!(
            "; effects whose outcome is unknown (they may have been performed): {}",
            unknown.join(", ")
        ));
    }
    let outcome = Outcome::Trap {
        reason: ABANDONED.into(),
        message,
    };
    tx.close(key, &outcome.to_stored(), op.now)?;
    let detail = json!({
        "state": found.state,
        "forced": op.force,
        "effects": effects_detail(&effects),
    });
    Ok(Ok(Operated::Done(record(
        tx,
        key,
        Action::Abandon,
        op,
        detail,
    )?)))
}

/// Records that a person had the stopped call `key` run again now on `host` (the
/// console's "resume now"), before the run. `Err` names why it is refused: no
/// record, a completed call, or a live lease (never forced: a running call is not
/// stuck).
pub(crate) fn resume<T: OperateTx>(
    tx: &mut T,
    key: &str,
    op: &Operator<'_>,
    host: &str,
    was: &str,
) -> Result<Result<Operated, String>, T::Error> {
    let Some(found) = tx.find(key)? else {
        return Ok(Err(
            "the journal holds no call with this key (never made, expired, or forgotten)".into(),
        ));
    };
    if found.state == "completed" {
        return Ok(Err(
            "it is completed: its outcome is saved and every retry gets it; nothing to resume"
                .into(),
        ));
    }
    if let Some(until) = live_lease(&found, op) {
        return Ok(Err(format!(
            "it is running right now (its lease is held until {}): it is not stopped; \
             resume it once its lease has ended",
            rfc3339(until)
        )));
    }
    let effects = tx.effects(key)?;
    let detail = json!({
        "state": found.state,
        "was": was,
        "on_host": host,
        "effects": effects_detail(&effects),
    });
    Ok(Ok(Operated::Done(record(
        tx,
        key,
        Action::Resume,
        op,
        detail,
    )?)))
}

/// The answer saved for an effect recorded as performed by `by` (who decided:
/// `decided_by`) without the downstream's own answer: it says so, so what the agent
/// is told is what was recorded, never an empty result. An upstream tool's call
/// answers its `message` as text (`guard::gateway`).
pub(crate) fn performed_without_answer(decided_by: DecidedBy, by: &str) -> Value {
    json!({
        "performed": true,
        "decided_by": decided_by.as_str(),
        "by": by,
        "message": match decided_by {
            DecidedBy::Operator => format!(
                "{by} (operator) recorded that this effect was performed; the downstream's own answer is not on record"
            ),
            DecidedBy::Probe => format!(
                "The downstream confirmed that this effect was performed: its probe `{by}` found it after the effect's own answer was lost, so that answer is not on record"
            ),
            DecidedBy::Person => format!(
                "{by} (the person behind the agent) answered that this effect went through when asked after its answer was lost; the downstream's own answer is not on record"
            ),
        },
    })
}

/// Records a person's decision about the pending unkeyed effect `effect_key`
/// (`justonce resolve`) and the operation, on the effect's call: `Performed`
/// finishes the effect with `response` (the downstream's answer, as far as the person
/// knows it; `null` for none, then [`performed_without_answer`]), which the call's
/// retry gets instead of an attempt; `NotPerformed` lets
/// the retry make one more attempt under the same key. `Err` names why it is
/// refused: no such effect, a definitive answer already, a class the host retries by
/// itself, a call closed by `abandon`, or a run that holds a live lease.
pub(crate) fn resolve<T: OperateTx>(
    tx: &mut T,
    effect_key: &str,
    resolution: Resolution,
    response: &Value,
    op: &Operator<'_>,
) -> Result<Result<Operated, String>, T::Error> {
    let (invocation, found, effect) = match pending_unkeyed(tx, effect_key)? {
        Ok(pending) => pending,
        Err(reason) => return Ok(Err(reason)),
    };
    if live_lease(&found, op).is_some() {
        return Ok(Err(
            "its call is running right now; resolve it after the run stops".into(),
        ));
    }
    let answer = match response {
        Value::Null => performed_without_answer(DecidedBy::Operator, op.by),
        given => given.clone(),
    };
    resolved(
        tx,
        (&invocation, &found, &effect),
        resolution,
        &answer,
        op,
        json!({ "decided_by": DecidedBy::Operator.as_str() }),
    )
}

/// The run whose probe, or whose person, decided a pending unkeyed effect at the
/// call's retry, while it holds the effect's call's lease
/// (`Journal::resolve_by_probe`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProbeRun<'a> {
    /// Who decided: [`DecidedBy::Probe`] or [`DecidedBy::Person`].
    pub decided_by: DecidedBy,
    /// Their name: the probe as `Provider::probe_of` names it, or the person's
    /// principal (`local user` for a call that named none).
    pub by: &'a str,
    /// The run: the owner of the call's lease.
    pub owner: &'a str,
    /// When (ms since the epoch).
    pub now: i64,
    /// Whether the run is the sweeper's (serve's sweep of unknown outcomes), not
    /// the agent's retry: the operation says `sweep: probe NAME`.
    pub sweep: bool,
}

/// Records what the probe or the person of `run` decided about the pending unkeyed
/// effect `effect_key`, as `resolve` records an operator's decision (the effect
/// finished with `answer`, or marked `not_performed` for one more attempt under its
/// key), with `decided_by` (`probe` or `person`) and who: `probe NAME` or
/// `person PRINCIPAL` as the operation's `by`, the name in the detail (`probe` or
/// `person`). Only the run that holds the call's lease may: `Err` names why it is
/// refused (another run took the call over, the effect is answered already).
pub(crate) fn resolve_by_probe<T: OperateTx>(
    tx: &mut T,
    effect_key: &str,
    resolution: Resolution,
    answer: &Value,
    run: &ProbeRun<'_>,
) -> Result<Result<Operated, String>, T::Error> {
    let (invocation, found, effect) = match pending_unkeyed(tx, effect_key)? {
        Ok(pending) => pending,
        Err(reason) => return Ok(Err(reason)),
    };
    if found.state != "running" || found.lease_owner.as_deref() != Some(run.owner) {
        return Ok(Err(format!(
            "the run that asked the {} no longer holds its call's lease",
            run.decided_by.as_str()
        )));
    }
    let decided_by = run.decided_by.as_str();
    let by = match run.sweep {
        true => format!("sweep: {decided_by} {}", run.by),
        false => format!("{decided_by} {}", run.by),
    };
    let mut detail = json!({ "decided_by": decided_by, decided_by: run.by });
    if run.sweep {
        detail["sweep"] = json!(true);
    }
    let op = Operator {
        by: &by,
        force: false,
        now: run.now,
    };
    resolved(
        tx,
        (&invocation, &found, &effect),
        resolution,
        answer,
        &op,
        detail,
    )
}

/// The pending unkeyed effect `effect_key` with its invocation's key and record,
/// or why it cannot be resolved: no such effect, a definitive answer already, a
/// class the host retries by itself, a call closed by `abandon`.
#[allow(clippy::type_complexity)]
fn pending_unkeyed<T: OperateTx>(
    tx: &mut T,
    effect_key: &str,
) -> Result<Result<(String, Found, JournalEffect), String>, T::Error> {
    const NO_EFFECT: &str = "the journal holds no effect with this key";
    let Some(invocation) = tx.effect_of(effect_key)? else {
        return Ok(Err(NO_EFFECT.into()));
    };
    let Some(found) = tx.find(&invocation)? else {
        return Ok(Err(NO_EFFECT.into()));
    };
    let effects = tx.effects(&invocation)?;
    let Some(effect) = effects.into_iter().find(|e| e.key == effect_key) else {
        return Ok(Err(NO_EFFECT.into()));
    };
    if effect.state != "pending" {
        return Ok(Err(
            "it already has a definitive answer; there is nothing to resolve".into(),
        ));
    }
    if effect.class != "unkeyed" {
        return Ok(Err(format!(
            "it is a {} effect; the host retries it under its key on the next call, so a \
             person need not resolve it",
            effect.class
        )));
    }
    if found.state == "completed" {
        return Ok(Err(
            "its call was abandoned (justonce abandon) and no retry will resume it; the \
             journal keeps the effect as it was"
                .into(),
        ));
    }
    Ok(Ok((invocation, found, effect)))
}

/// Saves `resolution` of the pending `effect` (its answer `answer` when performed)
/// and records the operation by `op`, its detail with `decided` (who decided).
fn resolved<T: OperateTx>(
    tx: &mut T,
    (invocation, found, effect): (&str, &Found, &JournalEffect),
    resolution: Resolution,
    answer: &Value,
    op: &Operator<'_>,
    decided: Value,
) -> Result<Result<Operated, String>, T::Error> {
    let performed = match resolution {
        Resolution::Performed => Some(Answer::Ok(answer.clone()).to_stored()),
        Resolution::NotPerformed => None,
    };
    tx.resolve_effect(&effect.key, performed.as_deref(), op.now)?;
    let mut detail = json!({
        "state": found.state,
        "effect": {
            "seq": effect.seq,
            "key": effect.key,
            "provider": effect.provider,
            "operation": effect.operation,
            "attempts": effect.attempts,
            "last_error": effect.last_error,
        },
        "resolution": resolution.as_str(),
        "response": performed.is_some().then_some(answer),
    });
    if let (Some(detail), Value::Object(decided)) = (detail.as_object_mut(), decided) {
        detail.extend(decided);
    }
    Ok(Ok(Operated::Done(record(
        tx,
        invocation,
        Action::Resolve,
        op,
        detail,
    )?)))
}

/// Saves `answer` (stored text) as the answer of the pending effect `effect_key`:
/// what its downstream answered after the run that sent it gave up
/// (`Journal::answer_late`). Only while no run holds the call: its last run left it
/// resumable and released the lease (`incomplete`), so no run's tool was handed
/// another answer to the effect (a run saves what it handed its tool in the write
/// that releases the lease), and the next run replays this one. `Err` names why it
/// is not saved: a run holds the call (it takes the answer at its retry), the
/// effect has an answer, a person resolved it, or the call is closed.
pub(crate) fn answer_late<T: OperateTx>(
    tx: &mut T,
    effect_key: &str,
    answer: &str,
    now: i64,
) -> Result<Result<(), String>, T::Error> {
    const NO_EFFECT: &str = "the journal holds no effect with this key";
    let Some(invocation) = tx.effect_of(effect_key)? else {
        return Ok(Err(NO_EFFECT.into()));
    };
    // Locked first (PostgreSQL): a run that takes the call waits for this one.
    let Some(found) = tx.find(&invocation)? else {
        return Ok(Err(NO_EFFECT.into()));
    };
    match (found.state.as_str(), &found.lease_owner) {
        ("incomplete", None) => {}
        ("running", _) => {
            return Ok(Err(
                "a run holds its call: the run is answered with it at its next attempt".into(),
            ));
        }
        (state, _) => return Ok(Err(format!("its call is {state}"))),
    }
    let effects = tx.effects(&invocation)?;
    let Some(effect) = effects.into_iter().find(|e| e.key == effect_key) else {
        return Ok(Err(NO_EFFECT.into()));
    };
    if effect.state != "pending" {
        return Ok(Err("it has an answer already (the first one stays)".into()));
    }
    if !matches!(effect.class.as_str(), "keyed" | "unkeyed") {
        return Ok(Err(format!("it is a {} effect", effect.class)));
    }
    if effect.resolution.is_some() {
        return Ok(Err(
            "a resolution of its own is on record, which the next run goes on from".into(),
        ));
    }
    tx.answer_effect(effect_key, answer, now)?;
    Ok(Ok(()))
}
