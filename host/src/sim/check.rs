//! The invariant checker: reads a recorded history (every answer each agent got,
//! every effect each fake downstream applied with its key, what the journal held
//! right after each answer and holds at the end, every webhook the receiver got)
//! and names every broken promise.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::clock::SimClock;
use super::guests;
use super::receiver::Delivery;
use super::world::{Applied, Position, ProbeSaid, SENT_AS_READ};
use crate::journal::JournalEntry;
use crate::outcome::Outcome;

/// What an agent was told.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Res {
    /// An outcome, fresh or replayed.
    Answer { outcome: Outcome, replayed: bool },
    /// An error instead of an outcome.
    Error {
        kind: String,
        retry_safe: bool,
        message: String,
    },
    /// The host died during the call; the agent was told nothing.
    Crashed,
}

impl Res {
    /// How the call ended, in a word: `answered`, `replayed`, `crashed` or the error's
    /// kind.
    pub(crate) fn ending(&self) -> &str {
        match self {
            Res::Answer {
                replayed: false, ..
            } => "answered",
            Res::Answer { replayed: true, .. } => "replayed",
            Res::Error { kind, .. } => kind,
            Res::Crashed => "crashed",
        }
    }
}

/// One call as the history recorded it.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// The intent it was sent for.
    pub intent: usize,
    /// The invocation key it runs under.
    pub key: Option<String>,
    /// What the agent meant, in its own terms (scope, tool, the arguments as the tool
    /// sees them), where the host derives the key; `None` for an explicit key.
    pub meaning: Option<String>,
    /// The tool and its canonical arguments.
    pub fingerprint: String,
    /// Its scope and tool-call id, if it had one.
    pub alias: Option<(String, String)>,
    /// The clock's moments when it was sent and when it (and the journal check) ended.
    pub from: usize,
    pub to: usize,
    /// What the agent was told.
    pub res: Res,
    /// For an answer: what the journal held instead of it, read through another
    /// connection right after (`None`: the answer is on record).
    pub on_record: Option<String>,
    /// Whether it was sent after faults stopped.
    pub final_phase: bool,
    /// The host it went to.
    pub host: usize,
    /// Whether the person refused the request state it came with as one issued for
    /// an earlier generation's question (then `input_state_invalid` is expected).
    pub stale_state: bool,
}

/// One answer the person gave to a tool's question.
#[derive(Debug, Clone)]
pub(crate) struct Given {
    /// The effect key of the question (its position in one generation of a call).
    pub effect_key: String,
    /// The answers, one per question asked at once.
    pub answers: Value,
}

/// A client's cancel one host took (`tasks/cancel`), as the history recorded it.
#[derive(Debug, Clone)]
pub(crate) struct Cancel {
    /// The invocation key of the call cancelled.
    pub key: String,
    /// The generation its record held, which the cancel was journaled against;
    /// `None`: no record yet (the host's memory binds it to its first run there).
    pub generation: Option<u64>,
    /// How many effects that generation's record held, read right after the cancel:
    /// no host may journal more.
    pub effects: usize,
    /// The host that took it.
    pub host: usize,
    /// The clock's moment (`SimClock::mark`) right after the host acknowledged it.
    pub at: usize,
    /// Acknowledged after a power cut's moment: what the disk kept may or may not
    /// hold it (its sync may have come after the power went, from a process the cut
    /// would have stopped), so it binds no host, and an outcome may still say it.
    pub maybe_lost: bool,
}

/// An operator's `forget` from another process, as the history recorded it: the
/// call's record was gone between the clock's moments `from` and `to`.
#[derive(Debug, Clone)]
pub(crate) struct Forget {
    /// The invocation key forgotten.
    pub key: String,
    pub from: usize,
    pub to: usize,
}

/// One call that ran on a host once its admission let it in, as the history
/// recorded it: from its start to its end, in the order of every apply and call
/// start ([`next_order`](super::world::next_order)).
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub host: usize,
    /// Whose call it is: the admission's cap is per principal.
    pub principal: String,
    /// What started it: `tools/call`, or what resumed it.
    pub by: &'static str,
    pub start: u64,
    pub end: u64,
}

/// Everything the checker reads.
pub(crate) struct History<'a> {
    pub calls: &'a [Call],
    /// Every call that ran, admitted, with when.
    pub runs: &'a [Run],
    /// How many calls of one principal a host may run at once.
    pub cap: usize,
    /// Every answer the unkeyed downstream's probe gave.
    pub probes: &'a [ProbeSaid],
    pub keyed: &'a [Applied],
    pub unkeyed: &'a [Applied],
    /// Intents still without a final answer when the fault-free end gave up.
    pub open: &'a [usize],
    /// Every outbox enqueue, with its key and position.
    pub outbox: &'a [Applied],
    /// Every webhook the receiver got.
    pub deliveries: &'a [Delivery],
    /// What the journal holds at the end: every invocation, its saved outcome, its
    /// effects and their answers.
    pub recorded: &'a [JournalEntry],
    /// Every answer the person gave to a tool's question.
    pub given: &'a [Given],
    /// Every cancel a host took.
    pub cancels: &'a [Cancel],
    /// Every record an operator forgot from another process.
    pub forgotten: &'a [Forget],
    pub clock: &'a SimClock,
    pub retention_ms: i64,
}

impl<'a> History<'a> {
    /// A history of `calls` alone: no downstream effects, every call ended, no
    /// webhooks, nothing read from the journal.
    pub(crate) fn of_calls(calls: &'a [Call], clock: &'a SimClock, retention_ms: i64) -> Self {
        Self {
            calls,
            runs: &[],
            cap: usize::MAX,
            probes: &[],
            keyed: &[],
            unkeyed: &[],
            open: &[],
            outbox: &[],
            deliveries: &[],
            recorded: &[],
            given: &[],
            cancels: &[],
            forgotten: &[],
            clock,
            retention_ms,
        }
    }
}

/// Every invariant the history breaks, one line each.
pub(crate) fn check(h: &History<'_>) -> Vec<String> {
    let mut violations = Vec::new();
    let origins = Origins::of(h.calls);
    intents(h, &mut violations);
    downstreams(h, &mut violations);
    answers(h, &origins, &mut violations);
    seen(h, &mut violations);
    asked(h, &mut violations);
    cancelled(h, &mut violations);
    admitted(h, &mut violations);
    probed(h, &mut violations);
    webhooks(h, &mut violations);
    for call in h.calls {
        // Nothing answered is missing from the journal (unless it could have expired).
        if let Some(held) = &call.on_record
            && !ended(h, call.key.as_deref(), origins.of_call(call), call.to)
        {
            violations.push(format!(
                "an answer is not on record: {} was told {:?} by host {}, the journal holds {held}",
                describe(h, call),
                call.res,
                call.host
            ));
        }
        if let Res::Error { kind, message, .. } = &call.res {
            let allowed = match kind.as_str() {
                "in_progress" | "outcome_unknown" | "not_performed" | "lease_lost" => true,
                // The tool asked the person; the agent calls again with the answers.
                "input_required" => true,
                // A state kept past its call's retention; the agent drops it.
                "input_state_invalid" => call.stale_state,
                "mismatch" => true,
                // A full disk, a session the server ended: the journal refused a
                // write. Only while faults are on.
                k if k.starts_with("store_") || k == "host_failed" => !call.final_phase,
                _ => false,
            };
            if !allowed {
                violations.push(format!(
                    "{} was told {kind}: {message}{}",
                    describe(h, call),
                    if call.final_phase {
                        " (after faults stopped)"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    for intent in h.open {
        let last = h.calls.iter().rev().find(|c| c.intent == *intent);
        violations.push(format!(
            "intent {intent} has no final answer after faults stopped; last: {:?}",
            last.map(|c| &c.res)
        ));
    }
    violations
}

/// What a power cut at moment `end` took back: each answer (fresh or replayed) whose
/// outcome the journal no longer holds afterwards (`held` says what it holds
/// instead, `None` when it holds the answer), unless the record could have expired
/// by then. Under `Full` an answer is durable before it is given, so there is none.
pub(crate) fn lost_by_power_cut(
    h: &History<'_>,
    end: usize,
    held: impl Fn(&str, &Outcome) -> Option<String>,
) -> Vec<String> {
    let origins = Origins::of(h.calls);
    h.calls
        .iter()
        .filter_map(|call| {
            let (Res::Answer { outcome, .. }, Some(key)) = (&call.res, &call.key) else {
                return None;
            };
            if ended(h, Some(key), origins.of_call(call), end) {
                return None;
            }
            let instead = held(key, outcome)?;
            Some(format!(
                "a power cut took back an answer: {} was told {:?} by host {}, after the cut the journal holds {instead}",
                describe(h, call),
                call.res,
                call.host
            ))
        })
        .collect()
}

fn describe(h: &History<'_>, call: &Call) -> String {
    let replayed = matches!(call.res, Res::Answer { replayed: true, .. });
    format!(
        "intent {} ({}, key {}) on host {}{} at t={}..{}",
        call.intent,
        call.fingerprint,
        call.key.as_deref().unwrap_or("?"),
        call.host,
        if replayed { ", replayed" } else { "" },
        h.clock.at(call.from),
        h.clock.at(call.to)
    )
}

/// Whether a record saved at moment `from` or later could have expired by moment
/// `to`: the clock's values in between spread over at least the retention.
fn could_expire(h: &History<'_>, from: usize, to: usize) -> bool {
    h.clock.spread(from, to) >= h.retention_ms
}

/// Whether the record of `key` saved at moment `from` or later could have ended by
/// moment `to`: it could have expired, or an operator forgot it meanwhile.
fn ended(h: &History<'_>, key: Option<&str>, from: usize, to: usize) -> bool {
    could_expire(h, from, to)
        || key.is_some_and(|key| {
            h.forgotten
                .iter()
                .any(|f| f.key == key && f.to >= from && f.from <= to)
        })
}

/// A cancel belongs to the generation it was taken against, on every host, and
/// to no other: once a cancel of a generation is journaled, no host journals a
/// new effect of it (its record holds no more effects than right after the
/// cancel); and a call's saved outcome says it was cancelled by its client only
/// for a generation some host cancelled (or a key cancelled before it had a
/// record, which the cancelling host binds to its first run of it).
fn cancelled(h: &History<'_>, violations: &mut Vec<String>) {
    let intents = intent_of(h);
    let intent = |key: &str| {
        intents
            .get(key)
            .map_or_else(|| format!("key {key}"), |i| i.to_string())
    };
    for entry in h.recorded {
        let of_it = || h.cancels.iter().filter(|c| c.key == entry.key);
        for cancel in of_it()
            .filter(|c| !c.maybe_lost && c.generation.is_some() && c.generation == entry.generation)
        {
            if entry.effects.len() > cancel.effects {
                violations.push(format!(
                    "intent {}: a run journaled {} new effect(s) of generation {:?} after host {} took its client's cancel ({} effects then, {} now; invocation {})",
                    intent(&entry.key),
                    entry.effects.len() - cancel.effects,
                    entry.generation,
                    cancel.host,
                    cancel.effects,
                    entry.effects.len(),
                    entry.key
                ));
            }
        }
        let says_cancelled = entry
            .outcome
            .as_ref()
            .is_some_and(|o| o.to_string().contains(CANCELLED));
        let was_cancelled =
            of_it().any(|c| c.generation.is_none() || c.generation == entry.generation);
        if says_cancelled && !was_cancelled {
            violations.push(format!(
                "intent {}: its outcome says it was cancelled by its client, but no host cancelled its generation {:?} (cancels of the key: {:?}; invocation {})",
                intent(&entry.key),
                entry.generation,
                of_it().map(|c| c.generation).collect::<Vec<_>>(),
                entry.key
            ));
        }
    }
}

/// Every run is admitted: at no moment does a host run more calls of one principal
/// than its cap, however they started (a `tools/call`, or resumed by a
/// `tasks/update`, a console "Resume now", a reconciliation). Named once per host
/// and principal, with the run that went past the cap.
fn admitted(h: &History<'_>, violations: &mut Vec<String>) {
    // Per host and principal: each run's start (`true`) and end, in order.
    type Events<'a> = Vec<(u64, bool, &'a Run)>;
    let mut events: BTreeMap<(usize, &str), Events<'_>> = BTreeMap::new();
    for run in h.runs {
        let of = events
            .entry((run.host, run.principal.as_str()))
            .or_default();
        of.push((run.start, true, run));
        of.push((run.end, false, run));
    }
    for ((host, principal), mut of) in events {
        of.sort_by_key(|(at, ..)| *at);
        let mut running = 0usize;
        let mut most: Option<(usize, &Run)> = None;
        for (_, starts, run) in of {
            if !starts {
                running -= 1;
                continue;
            }
            running += 1;
            if running > h.cap && most.is_none_or(|(n, _)| running > n) {
                most = Some((running, run));
            }
        }
        if let Some((n, run)) = most {
            violations.push(format!(
                "host {host} ran {n} calls of {principal} at once, past its cap of {} (the last one started by {})",
                h.cap, run.by
            ));
        }
    }
}

/// What a guest is told of a new effect of a cancelled call (`guard::effect`).
const CANCELLED: &str = "cancelled by its client";

/// When each answer of each key may first have been saved, and a retention counted
/// from: the earliest start of a call that got it (a replayed answer was saved then,
/// not when it was replayed), or, earlier, the start of a call of the same key that
/// got no answer (it crashed or failed after its outcome was committed) since the
/// key last answered something else: that call may be the one that saved it.
struct Origins<'a> {
    first: BTreeMap<(&'a str, String), usize>,
}

impl<'a> Origins<'a> {
    fn of(calls: &'a [Call]) -> Self {
        let mut first: BTreeMap<(&str, String), usize> = BTreeMap::new();
        for call in calls {
            if let (Some(key), Res::Answer { outcome, .. }) = (&call.key, &call.res) {
                let at = first
                    .entry((key, format!("{outcome:?}")))
                    .or_insert(call.from);
                *at = (*at).min(call.from);
            }
        }
        for ((key, outcome), at) in first.iter_mut() {
            let of_key = || calls.iter().filter(|c| c.key.as_deref() == Some(*key));
            // The last answer of something else before this one was first given.
            let since = of_key()
                .filter(|c| c.from < *at)
                .filter(|c| matches!(&c.res, Res::Answer { outcome: o, .. } if format!("{o:?}") != *outcome))
                .map(|c| c.from)
                .max()
                .unwrap_or(0);
            let unanswered = of_key()
                .filter(|c| !matches!(c.res, Res::Answer { .. }))
                .filter(|c| c.from >= since && c.from < *at)
                .map(|c| c.from)
                .min();
            if let Some(earlier) = unanswered {
                *at = (*at).min(earlier);
            }
        }
        Self { first }
    }

    /// The moment `call`'s answer was first given (its own start if not an answer).
    fn of_call(&self, call: &Call) -> usize {
        match (&call.key, &call.res) {
            (Some(key), Res::Answer { outcome, .. }) => self
                .first
                .get(&(key.as_str(), format!("{outcome:?}")))
                .map_or(call.from, |at| (*at).min(call.from)),
            _ => call.from,
        }
    }
}

/// One intent, one key; one key, one intent. Keys do not expire (the generation
/// does), so this holds across retention too: an intent with two keys runs twice, two
/// intents with one key answer each other's outcome.
fn intents(h: &History<'_>, violations: &mut Vec<String>) {
    let mut keys_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut meanings_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for call in h.calls {
        if let (Some(meaning), Some(key)) = (&call.meaning, &call.key) {
            keys_of.entry(meaning).or_default().insert(key);
            meanings_of.entry(key).or_default().insert(meaning);
        }
    }
    for (meaning, keys) in keys_of {
        if keys.len() > 1 {
            violations.push(format!(
                "one intent got {} keys {keys:?}: {meaning}",
                keys.len()
            ));
        }
    }
    for (key, meanings) in meanings_of {
        if meanings.len() > 1 {
            violations.push(format!(
                "key {key} stands for {} intents: {meanings:?}",
                meanings.len()
            ));
        }
    }
}

/// A keyed downstream never applies two different effects under one key; one effect
/// position never has two keys; an unkeyed effect is performed at most once.
fn downstreams(h: &History<'_>, violations: &mut Vec<String>) {
    let mut by_key: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut keys_of: BTreeMap<&Position, BTreeSet<&str>> = BTreeMap::new();
    for applied in h.keyed {
        by_key
            .entry(&applied.key)
            .or_default()
            .insert(&applied.what);
        keys_of
            .entry(&applied.position)
            .or_default()
            .insert(&applied.key);
    }
    for (key, whats) in &by_key {
        if whats.len() > 1 {
            violations.push(format!(
                "the keyed downstream applied {} different effects under key {key}: {whats:?}",
                whats.len()
            ));
        }
    }
    for (position, keys) in &keys_of {
        if keys.len() > 1 {
            violations.push(format!(
                "the effect at {position:?} reached the keyed downstream under {} keys: {keys:?}",
                keys.len()
            ));
        }
    }
    // One intent (its invocation key: one intent has one key) performs each of its
    // effects once per retention: a second generation's effect at the same position
    // comes only after the record completed and expired.
    let mut generations: BTreeMap<(&str, u32), Vec<&Applied>> = BTreeMap::new();
    let journaled = |a: &&Applied| a.key != SENT_AS_READ;
    for applied in h.keyed.iter().chain(h.unkeyed).filter(journaled) {
        let (invocation, _, seq) = &applied.position;
        generations
            .entry((invocation, *seq))
            .or_default()
            .push(applied);
    }
    for ((invocation, seq), applied) in &generations {
        let again = applied.iter().enumerate().find_map(|(i, a)| {
            applied[i + 1..]
                .iter()
                .find(|b| {
                    a.position.1 != b.position.1
                        && !ended(h, Some(invocation), a.at.min(b.at), a.at.max(b.at))
                })
                .map(|b| (a, b))
        });
        if let Some((a, b)) = again {
            violations.push(format!(
                "invocation {invocation}'s effect #{seq} was performed under generations {} and {} within retention (t={} and t={}): {} then {}",
                a.position.1,
                b.position.1,
                h.clock.at(a.at),
                h.clock.at(b.at),
                a.what,
                b.what
            ));
        }
    }
    let mut times: BTreeMap<&Position, (u32, &str)> = BTreeMap::new();
    for applied in h.unkeyed.iter().filter(journaled) {
        let at = times.entry(&applied.position).or_insert((0, &applied.key));
        at.0 += 1;
    }
    // A journaled effect is never sent again as a read (with no key), whatever its
    // catalog says later, by a call that began after it was applied (and so finds
    // its record). A run that began before may read it meanwhile: a read takes no
    // lease, and that run is fenced for everything else. One sent as a read first
    // and journaled after went out twice by the catalog's word, not the guard's.
    for read in h.unkeyed.iter().filter(|a| a.key == SENT_AS_READ) {
        let before =
            h.unkeyed.iter().filter(journaled).find(|a| {
                a.order < read.order && a.position == read.position && a.what == read.what
            });
        if let Some(first) = before {
            violations.push(format!(
                "the effect at {:?}, journaled under key {}, was sent again as a read with no key by a call that began after it: {}",
                read.position, first.key, read.what
            ));
        }
    }
    // Once, and once more for each time its probe lied that it had not happened
    // (the guard resends on the probe's word: the downstream's truth is not the
    // guard's to know).
    for (position, (n, key)) in times {
        let lies = h
            .probes
            .iter()
            .filter(|p| p.key == key && p.lied && !p.performed)
            .count() as u32;
        if n > 1 + lies {
            violations.push(format!(
                "the unkeyed effect at {position:?} was performed {n} times{}",
                if lies > 0 {
                    format!(", its probe lied {lies} time(s) that it was not")
                } else {
                    String::new()
                }
            ));
        }
    }
}

/// Issue 56: an unkeyed effect its probe resolved as performed is never sent again:
/// no apply under its key comes after the probe's answer that the journal saved as
/// the effect's (the answer quotes it, `probe_answer.probe`), whether the probe told
/// the truth or lied (a lie that it happened leaves it not happened: the probe's
/// word, counted as `probe_lied`, not a broken promise). One resolved not
/// performed is sent again at most once per lie ([`downstreams`]).
fn probed(h: &History<'_>, violations: &mut Vec<String>) {
    for entry in h.recorded {
        for effect in &entry.effects {
            let Some(id) = effect
                .response
                .as_ref()
                .and_then(|r| r.pointer("/ok/probe_answer/probe"))
                .and_then(Value::as_u64)
            else {
                continue;
            };
            let Some(said) = h.probes.iter().find(|p| p.id == id && p.key == effect.key) else {
                violations.push(format!(
                    "effect {} (invocation {}) is saved as performed by probe answer {id}, which its probe never gave",
                    effect.key, entry.key
                ));
                continue;
            };
            let again = h
                .unkeyed
                .iter()
                .filter(|a| a.key == effect.key && a.order > said.order)
                .count();
            if again > 0 {
                violations.push(format!(
                    "effect {} (invocation {}) was sent {again} more time(s) after its probe said it was performed{}",
                    effect.key,
                    entry.key,
                    if said.lied { " (a lie)" } else { "" }
                ));
            }
        }
    }
}

/// The intent of each invocation key the calls ran under.
fn intent_of<'a>(h: &History<'a>) -> BTreeMap<&'a str, usize> {
    h.calls
        .iter()
        .filter_map(|c| Some((c.key.as_deref()?, c.intent)))
        .collect()
}

/// What the tool saw is what the journal holds: for every invocation the journal
/// holds completed, each effect's recorded answer is the one the guest of its saved
/// outcome was handed (the guests fold what they were handed into their outcomes,
/// see `guests::saw`). An effect past what the guest saw (it ended before it, or its
/// outcome says nothing: a trap) is not compared.
fn seen(h: &History<'_>, violations: &mut Vec<String>) {
    let intents = intent_of(h);
    for entry in h.recorded {
        if entry.state != "completed" {
            continue;
        }
        let Some(outcome) = entry
            .outcome
            .as_ref()
            .and_then(|stored| Outcome::from_stored(&stored.to_string()).ok())
        else {
            continue;
        };
        let Some(saw) = guests::saw(&outcome) else {
            continue;
        };
        let intent = intents
            .get(entry.key.as_str())
            .map_or_else(|| format!("key {}", entry.key), |i| i.to_string());
        for effect in &entry.effects {
            let Some(handed) = saw.get(effect.seq as usize) else {
                continue;
            };
            if effect.response.as_ref() != Some(handed) {
                let recorded = effect
                    .response
                    .as_ref()
                    .map_or_else(|| "none".to_string(), Value::to_string);
                violations.push(format!(
                    "intent {intent}: effect #{}'s recorded answer {recorded} differs from what the tool of the saved outcome saw {handed} ({} {}, invocation {})",
                    effect.seq, entry.tool, effect.operation, entry.key
                ));
            }
        }
    }
}

/// Every answer on record to a tool's question is one the person gave to that very
/// question (its effect key): none is made up, moved from another question or
/// another generation of the call, or kept from a request that did not carry it.
fn asked(h: &History<'_>, violations: &mut Vec<String>) {
    let intents = intent_of(h);
    for entry in h.recorded {
        for effect in &entry.effects {
            if effect.provider != crate::ask::PROVIDER {
                continue;
            }
            let Some(response) = &effect.response else {
                continue;
            };
            if !given_to(effect, h.given) {
                let intent = intents
                    .get(entry.key.as_str())
                    .map_or_else(|| format!("key {}", entry.key), |i| i.to_string());
                violations.push(format!(
                    "intent {intent}: question #{} ({}) holds the answer {response}, which the person never gave to it (invocation {})",
                    effect.seq, effect.key, entry.key
                ));
            }
        }
    }
}

/// Whether the answers `effect` (a question) holds were given to it, under its key.
fn given_to(effect: &crate::journal::JournalEffect, given: &[Given]) -> bool {
    effect
        .response
        .as_ref()
        .and_then(|response| response.get("ok"))
        .is_some_and(|answers| {
            given
                .iter()
                .any(|g| g.effect_key == effect.key && g.answers == *answers)
        })
}

/// One webhook per intent: the receiver deduplicates by `Idempotency-Key`, so an
/// intent's message delivered again under its key is fine, but under two keys
/// within retention (a second generation of a call that should have resumed the
/// first) it is received twice. Every webhook's key is one an enqueue was made
/// under.
fn webhooks(h: &History<'_>, violations: &mut Vec<String>) {
    let intents = intent_of(h);
    let enqueued: BTreeMap<&str, &Applied> = h.outbox.iter().map(|a| (a.key.as_str(), a)).collect();
    let mut keys_of: BTreeMap<(&str, u32), BTreeMap<&str, &Applied>> = BTreeMap::new();
    for delivery in h.deliveries {
        let Some(key) = delivery.key.as_deref() else {
            violations.push(format!(
                "a webhook arrived without an idempotency key at t={}: {}",
                h.clock.at(delivery.at),
                delivery.body
            ));
            continue;
        };
        let Some(applied) = enqueued.get(key) else {
            violations.push(format!(
                "a webhook arrived under key {key}, which no enqueue was made under: {}",
                delivery.body
            ));
            continue;
        };
        let (invocation, _, seq) = &applied.position;
        keys_of
            .entry((invocation, *seq))
            .or_default()
            .insert(key, applied);
    }
    for ((invocation, seq), keys) in keys_of {
        let keys: Vec<&Applied> = keys.into_values().collect();
        let twice = keys.iter().enumerate().find_map(|(i, a)| {
            keys[i + 1..]
                .iter()
                .find(|b| !ended(h, Some(invocation), a.at.min(b.at), a.at.max(b.at)))
                .map(|b| (a, b))
        });
        if let Some((a, b)) = twice {
            let intent = intents
                .get(invocation)
                .map_or_else(|| format!("key {invocation}"), |i| i.to_string());
            violations.push(format!(
                "intent {intent}: its webhook #{seq} was delivered under {} keys within retention: {} (generation {}, enqueued t={}) and {} (generation {}, enqueued t={})",
                keys.len(),
                a.key,
                a.position.1,
                h.clock.at(a.at),
                b.key,
                b.position.1,
                h.clock.at(b.at)
            ));
        }
    }
}

/// Every answer for a key (and for a tool-call id) within its retention is the same
/// answer, errors included; one key with different arguments never answers twice.
fn answers(h: &History<'_>, origins: &Origins<'_>, violations: &mut Vec<String>) {
    let mut by_key: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    let mut by_alias: BTreeMap<&(String, String), Vec<&Call>> = BTreeMap::new();
    for call in h.calls {
        if !matches!(call.res, Res::Answer { .. }) {
            continue;
        }
        if let Some(key) = &call.key {
            by_key.entry(key).or_default().push(call);
        }
        if let Some(alias) = &call.alias {
            by_alias.entry(alias).or_default().push(call);
        }
    }
    let groups = by_key
        .into_iter()
        .map(|(k, calls)| (format!("key {k}"), calls))
        .chain(
            by_alias
                .into_iter()
                .map(|((scope, id), calls)| (format!("tool-call id {scope}/{id}"), calls)),
        );
    for (name, calls) in groups {
        'pairs: for (i, a) in calls.iter().enumerate() {
            for b in &calls[i + 1..] {
                let (Res::Answer { outcome: x, .. }, Res::Answer { outcome: y, .. }) =
                    (&a.res, &b.res)
                else {
                    continue;
                };
                let from = origins.of_call(a).min(origins.of_call(b));
                if ended(h, a.key.as_deref(), from, a.to.max(b.to))
                    || ended(h, b.key.as_deref(), from, a.to.max(b.to))
                {
                    continue;
                }
                if a.fingerprint != b.fingerprint {
                    violations.push(format!(
                        "{name} answered two different argument sets: {} got {x:?}, {} got {y:?}",
                        describe(h, a),
                        describe(h, b)
                    ));
                    break 'pairs;
                }
                if x != y {
                    violations.push(format!(
                        "{name} answered twice differently: {} got {x:?}, then {} got {y:?}",
                        describe(h, a),
                        describe(h, b)
                    ));
                    break 'pairs;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(intent: usize, fingerprint: &str, res: Res, from: usize, to: usize) -> Call {
        Call {
            intent,
            key: Some("k".into()),
            meaning: None,
            fingerprint: fingerprint.into(),
            alias: None,
            from,
            to,
            res,
            on_record: None,
            final_phase: false,
            host: 0,
            stale_state: false,
        }
    }

    fn answer(n: u32) -> Res {
        Res::Answer {
            outcome: Outcome::Success {
                result: json!({ "n": n }),
                content: None,
            },
            replayed: false,
        }
    }

    /// A replayed answer `n`.
    fn replayed(n: u32) -> Res {
        match answer(n) {
            Res::Answer { outcome, .. } => Res::Answer {
                outcome,
                replayed: true,
            },
            other => other,
        }
    }

    /// A history of `calls` alone (no downstream effects, every call ended), with a
    /// retention of 100 on `clock`.
    fn calls_only<'a>(calls: &'a [Call], clock: &'a SimClock) -> History<'a> {
        History::of_calls(calls, clock, 100)
    }

    fn applied(key: &str, seq: u32, what: &str) -> Applied {
        Applied {
            key: key.into(),
            position: ("inv".into(), 1, seq),
            what: what.into(),
            at: 0,
            order: 0,
        }
    }

    #[test]
    fn a_journaled_effect_sent_again_as_a_read_is_named_and_a_read_before_it_is_not() {
        let clock = SimClock::new(0);
        // Each with its order: a journaled effect's when applied, a read's when the
        // call that read it began.
        let at = |order, mut applied: Applied| {
            applied.order = order;
            applied
        };
        let read = |order, seq, what| at(order, applied(SENT_AS_READ, seq, what));
        let unkeyed = vec![
            read(0, 0, "send a"),
            at(1, applied("k0", 0, "send a")),
            at(2, applied("k1", 1, "send b")),
            read(3, 1, "send b"),
            read(4, 1, "send c"),
            read(5, 2, "send d"),
            read(6, 2, "send d"),
            // Read by a call that began before the effect was journaled and applied
            // (a fenced run reads without a lease): not the guard's to prevent.
            read(7, 3, "send e"),
            at(8, applied("k3", 3, "send e")),
        ];
        let history = History {
            unkeyed: &unkeyed,
            ..calls_only(&[], &clock)
        };
        let found = check(&history);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].contains("journaled under key k1, was sent again as a read"),
            "{found:#?}"
        );
    }

    #[test]
    fn the_checker_names_each_broken_promise_and_only_those() {
        let clock = SimClock::new(0);
        clock.shift(10);
        let calls = vec![
            call(0, "pay 1", answer(1), 0, 0),
            call(0, "pay 1", answer(1), 0, 1),
            call(0, "pay 1", answer(2), 1, 1),
            call(1, "pay 2", answer(1), 1, 1),
        ];
        let keyed = vec![
            applied("a", 0, "x"),
            applied("a", 0, "y"),
            applied("b", 0, "x"),
        ];
        let unkeyed = vec![applied("c", 1, "z"), applied("c", 1, "z")];
        let history = History {
            calls: &calls,
            runs: &[],
            cap: usize::MAX,
            probes: &[],
            keyed: &keyed,
            unkeyed: &unkeyed,
            open: &[3],
            outbox: &[],
            deliveries: &[],
            recorded: &[],
            given: &[],
            cancels: &[],
            forgotten: &[],
            clock: &clock,
            retention_ms: 100,
        };
        let found = check(&history);
        let has = |what: &str| found.iter().filter(|v| v.contains(what)).count();
        assert_eq!(has("different effects under key a"), 1, "{found:#?}");
        assert_eq!(has("under 2 keys"), 1, "{found:#?}");
        assert_eq!(has("performed 2 times"), 1, "{found:#?}");
        assert_eq!(has("answered twice differently"), 1, "{found:#?}");
        assert_eq!(has("no final answer"), 1, "{found:#?}");
        assert_eq!(found.len(), 5, "{found:#?}");

        // The same history with the clock spread past retention: answers may differ.
        clock.shift(1_000);
        let late = vec![
            call(0, "pay 1", answer(1), 0, 0),
            call(0, "pay 1", answer(2), 2, 2),
        ];
        let history = calls_only(&late, &clock);
        assert!(check(&history).is_empty());
    }

    /// Issue 54: a forget from another process ends the record as expiry does: the
    /// same key may answer otherwise after it, and only that key.
    #[test]
    fn a_key_forgotten_elsewhere_may_answer_again_otherwise_and_no_other_key() {
        let clock = SimClock::new(0);
        let first = clock.mark();
        let forget = Forget {
            key: "k".into(),
            from: clock.mark(),
            to: clock.mark(),
        };
        let again = clock.mark();
        let calls = vec![
            call(0, "pay 1", answer(1), first, first),
            call(0, "pay 1", answer(2), again, again),
        ];
        let forgotten = [forget.clone()];
        let history = History {
            forgotten: &forgotten,
            ..calls_only(&calls, &clock)
        };
        assert!(check(&history).is_empty(), "{:#?}", check(&history));

        let other = [Forget {
            key: "other".into(),
            ..forget.clone()
        }];
        let history = History {
            forgotten: &other,
            ..calls_only(&calls, &clock)
        };
        assert_eq!(
            check(&history).len(),
            1,
            "another key's forget ends nothing here"
        );
        let after = [Forget {
            from: again + 1,
            to: again + 1,
            ..forget
        }];
        let history = History {
            forgotten: &after,
            ..calls_only(&calls, &clock)
        };
        assert_eq!(
            check(&history).len(),
            1,
            "a forget after both answers neither"
        );
    }

    /// The record of invocation `key` at `generation`, with `effects` effects and
    /// `outcome` (a tool error's message) saved.
    fn record(key: &str, generation: u64, effects: u32, outcome: &str) -> JournalEntry {
        let effect = |seq| crate::journal::JournalEffect {
            seq,
            key: format!("{key}-{seq}"),
            provider: "pay".into(),
            class: "keyed".into(),
            operation: "pay".into(),
            state: "done".into(),
            attempts: 1,
            response: None,
            last_error: None,
            resolution: None,
            created_at: 0,
            updated_at: 0,
            catalog_class: None,
        };
        JournalEntry {
            key: key.into(),
            conversation: "c".into(),
            tool: "pay".into(),
            state: "completed".into(),
            arguments: None,
            runs: 1,
            replays: 0,
            tool_call_ids: Vec::new(),
            outcome: Some(json!({ "tool_error": { "code": "effect_failed", "message": outcome } })),
            summary: None,
            created_at: 0,
            completed_at: Some(0),
            expires_at: None,
            effects: (0..effects).map(effect).collect(),
            component: None,
            lease_owner: None,
            lease_expires_at: None,
            holding: String::new(),
            judged: 0,
            generation: Some(generation),
            cancelled: false,
        }
    }

    /// Issue 54: a cancel is honoured on every host (no new effect of its
    /// generation after it) and belongs to its generation only (no other says it
    /// was cancelled).
    #[test]
    fn a_cancel_broken_on_another_host_or_kept_past_its_generation_is_named() {
        let clock = SimClock::new(0);
        let cancel = |key: &str, generation, effects| Cancel {
            key: key.into(),
            generation,
            effects,
            host: 0,
            at: 0,
            maybe_lost: false,
        };
        let said = "the call was cancelled by its client (tasks/cancel)";
        let recorded = [
            // Broken: a second effect after a cancel taken with one.
            record("ignored", 1, 2, "paid twice"),
            // Kept past its generation: generation 2 refused by generation 1's cancel.
            record("outlived", 2, 0, said),
            // Honoured: refused at its second effect, the cancelled generation.
            record("honoured", 1, 1, said),
            // Cancelled before it had a record: bound to the run that asked.
            record("unbound", 5, 0, said),
        ];
        let cancels = [
            cancel("ignored", Some(1), 1),
            cancel("outlived", Some(1), 3),
            cancel("honoured", Some(1), 1),
            cancel("unbound", None, usize::MAX),
        ];
        let history = History {
            recorded: &recorded,
            cancels: &cancels,
            ..calls_only(&[], &clock)
        };
        let found = check(&history);
        let has = |what: &str| found.iter().filter(|v| v.contains(what)).count();
        assert_eq!(
            has("1 new effect(s) of generation Some(1)"),
            1,
            "{found:#?}"
        );
        assert_eq!(
            has("key outlived: its outcome says it was cancelled"),
            1,
            "{found:#?}"
        );
        assert_eq!(found.len(), 2, "{found:#?}");
    }

    /// Issue 56: an effect its probe resolved as performed is never sent again
    /// after that answer, even where the probe lied; one its probe lied was not
    /// performed may be sent once more, and only once per lie.
    #[test]
    fn an_effect_sent_again_after_its_probe_said_performed_is_named_and_a_lie_excuses_one_resend() {
        let clock = SimClock::new(0);
        let at = |key: &str, order| Applied {
            key: key.into(),
            position: (key.into(), 1, 0),
            what: "send".into(),
            at: 0,
            order,
        };
        let said = |id, key: &str, performed, lied, order| ProbeSaid {
            id,
            key: key.into(),
            performed,
            lied,
            order,
        };
        let mut resent = record("resent", 1, 1, "sent");
        resent.effects[0].response = Some(json!({ "ok": { "probe_answer": { "probe": 0 } } }));
        let recorded = [resent];
        let probes = [
            said(0, "resent-0", true, false, 2),
            said(1, "lied", false, true, 5),
            said(2, "lied-twice", false, true, 5),
        ];
        let unkeyed = [
            at("resent-0", 1),
            at("resent-0", 3),
            at("lied", 4),
            at("lied", 6),
            at("lied-twice", 4),
            at("lied-twice", 6),
            at("lied-twice", 7),
        ];
        let found = check(&History {
            recorded: &recorded,
            probes: &probes,
            unkeyed: &unkeyed,
            ..calls_only(&[], &clock)
        });
        let has = |what: &str| found.iter().filter(|v| v.contains(what)).count();
        assert_eq!(
            has(
                "resent-0 (invocation resent) was sent 1 more time(s) after its probe said it was performed"
            ),
            1,
            "{found:#?}"
        );
        assert_eq!(has("performed 2 times"), 1, "resent-0: {found:#?}");
        assert_eq!(
            has("performed 3 times, its probe lied 1 time(s)"),
            1,
            "{found:#?}"
        );
        assert_eq!(found.len(), 3, "one lie excuses one resend: {found:#?}");
    }

    /// Issue 54: every run is admitted. Three calls of one principal at once on one
    /// host past a cap of two are named; the same three one after another, or on
    /// two hosts, or of two principals, are not.
    #[test]
    fn more_calls_of_one_principal_at_once_than_its_cap_are_named() {
        let clock = SimClock::new(0);
        let run = |host, principal: &str, start, end| Run {
            host,
            principal: principal.into(),
            by: "tasks/update",
            start,
            end,
        };
        let checked = |runs: &[Run]| {
            check(&History {
                runs,
                cap: 2,
                ..calls_only(&[], &clock)
            })
        };
        let flood = [run(0, "p", 0, 10), run(0, "p", 1, 11), run(0, "p", 2, 12)];
        let found = checked(&flood);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].contains("host 0 ran 3 calls of p at once, past its cap of 2"),
            "{found:#?}"
        );
        let in_turn = [run(0, "p", 0, 1), run(0, "p", 2, 3), run(0, "p", 4, 5)];
        assert!(checked(&in_turn).is_empty());
        let spread = [run(0, "p", 0, 10), run(1, "p", 1, 11), run(0, "q", 2, 12)];
        assert!(checked(&spread).is_empty());
    }

    #[test]
    fn one_intent_with_two_keys_and_one_key_with_two_intents_are_named() {
        let clock = SimClock::new(0);
        let meant = |intent, key: &str, meaning: &str| Call {
            key: Some(key.into()),
            meaning: Some(meaning.into()),
            ..call(intent, "pay", answer(1), 0, 0)
        };
        let calls = vec![
            meant(0, "k1", "c pay {\"order\":9007199254740993}"),
            meant(0, "k2", "c pay {\"order\":9007199254740993}"),
            meant(1, "k3", "c pay {\"order\":1}"),
            meant(2, "k3", "c pay {\"order\":2}"),
            // An explicit key is the caller's: no meaning is recorded for it.
            call(3, "pay", answer(1), 0, 0),
        ];
        let history = calls_only(&calls, &clock);
        let found = check(&history);
        let has = |what: &str| found.iter().filter(|v| v.contains(what)).count();
        assert_eq!(has("one intent got 2 keys"), 1, "{found:#?}");
        assert_eq!(has("key k3 stands for 2 intents"), 1, "{found:#?}");
    }

    /// PostgreSQL soak, seed 1796143879: the run that saved an answer crashed before
    /// giving it; a replay gave it later, and a retention after the crashed run (not
    /// after the replay) the call ran again. That is expiry, not a broken promise.
    #[test]
    fn an_answer_saved_by_a_run_that_crashed_expires_a_retention_after_that_run() {
        let clock = SimClock::new(0);
        let crashed = clock.mark();
        clock.shift(50);
        let replay = clock.mark();
        clock.shift(60);
        let rerun = clock.mark();
        let calls = vec![
            call(0, "audit 1", Res::Crashed, crashed, crashed),
            call(0, "audit 1", replayed(1), replay, replay),
            call(0, "audit 1", answer(2), rerun, rerun),
        ];
        let history = calls_only(&calls, &clock);
        assert!(check(&history).is_empty(), "{:#?}", check(&history));
        // Without the crashed run the replay is the origin, and the rerun too early.
        let history = calls_only(&calls[1..], &clock);
        assert_eq!(check(&history).len(), 1);
    }

    /// Seed 1596 of the first soak: a key answered at t, replayed just before t + the
    /// retention and run again just after it. The replay and the new run are close in
    /// time; the answer they differ from was saved a retention earlier.
    #[test]
    fn a_replay_expires_a_retention_after_its_answer_was_first_given() {
        let clock = SimClock::new(0);
        let first = clock.mark();
        clock.shift(99);
        let replay = clock.mark();
        clock.shift(2);
        let rerun = clock.mark();
        let calls = vec![
            call(0, "audit 1", answer(1), first, first),
            call(0, "audit 1", replayed(1), replay, replay),
            call(0, "audit 1", answer(2), rerun, rerun),
        ];
        let history = calls_only(&calls, &clock);
        assert!(check(&history).is_empty(), "{:#?}", check(&history));
        // Without the first answer the same two calls are a violation.
        let history = calls_only(&calls[1..], &clock);
        assert_eq!(check(&history).len(), 1);
    }

    /// A question's answer on record must be one the person gave to that question:
    /// the same answer given to another question, or another answer given to this
    /// one, does not count.
    #[test]
    fn an_answer_on_record_is_one_given_to_that_question() {
        let accept = json!([{ "action": "accept", "content": { "confirm": true } }]);
        let decline = json!([{ "action": "decline" }]);
        let question = |response: Option<Value>| crate::journal::JournalEffect {
            seq: 0,
            key: "q1".into(),
            provider: crate::ask::PROVIDER.into(),
            class: "keyed".into(),
            operation: crate::ask::OPERATION.into(),
            state: "done".into(),
            attempts: 1,
            response,
            last_error: None,
            resolution: None,
            created_at: 0,
            updated_at: 0,
            catalog_class: None,
        };
        let gave = |key: &str, answers: &Value| Given {
            effect_key: key.into(),
            answers: answers.clone(),
        };
        let held = question(Some(json!({ "ok": accept })));
        assert!(given_to(
            &held,
            &[gave("q0", &decline), gave("q1", &accept)]
        ));
        assert!(!given_to(&held, &[gave("q1", &decline)]), "another answer");
        assert!(
            !given_to(&held, &[gave("q0", &accept)]),
            "another question's"
        );
        assert!(!given_to(&held, &[]), "none given");
        let refused = question(Some(json!({ "denied": "no" })));
        assert!(!given_to(&refused, &[gave("q1", &accept)]), "not answers");
    }

    /// `input_state_invalid` is expected only where the person refused a state issued
    /// for an earlier generation's question; anywhere else it is a broken promise.
    #[test]
    fn a_refused_request_state_is_a_violation_unless_it_was_stale() {
        let clock = SimClock::new(0);
        let refused = Res::Error {
            kind: "input_state_invalid".into(),
            retry_safe: false,
            message: "invalid request state".into(),
        };
        let stale = Call {
            stale_state: true,
            ..call(0, "refund", refused.clone(), 0, 0)
        };
        assert!(check(&calls_only(&[stale], &clock)).is_empty());
        let found = check(&calls_only(&[call(0, "refund", refused, 0, 0)], &clock));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].contains("was told input_state_invalid"),
            "{found:#?}"
        );
    }
}
