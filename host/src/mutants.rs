//! Deliberate bugs, for showing that the simulator (`sim/`) catches real ones.
//!
//! Compiled in only with the cargo feature `mutants` (and in the library's own unit
//! tests, which check that the simulator catches each one); without it [`on`] is a
//! constant `false` and the guard's checks of it fold away. With it, one mutant at a time is
//! switched on for the whole process (`simulate --mutant NAME`), so a process that
//! runs a mutant must run nothing else.

/// A deliberate bug the guard can be built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// Every attempt of an effect gets a fresh key instead of the one the journal
    /// holds (`guard/effect.rs`): a keyed downstream cannot deduplicate the retry.
    FreshEffectKey,
    /// The outcome is answered without being saved, as if the host died between
    /// answering and saving (`guard/settle.rs`).
    AnswerBeforeSave,
    /// An unkeyed effect whose outcome is unknown is retried like a keyed one
    /// (`guard/effect.rs`): it may happen twice.
    RetryUnkeyed,
    /// A resumed run does not look at the effects an earlier run journaled
    /// (`guard/effect.rs`): it performs them again instead of replaying them.
    ForgetJournaled,
    /// A run whose lease was taken over answers its own outcome although the journal
    /// refused to save it (`guard/settle.rs`): two hosts answer one call.
    UnfencedAnswer,
    /// Integers are canonicalized as the doubles nearest to them, as RFC 8785 alone
    /// says (`jcs.rs`): ids past 2^53 that a double cannot tell apart share a key.
    RoundedIntegers,
    /// A value that more than one `anyOf`/`oneOf` branch could take is left as it is
    /// (`normalize.rs`), as before unions were normalized: a tagged variant's default
    /// written out and left out are two keys.
    UnionsUntouched,
    /// The SQLite journal renews a lease without asking whose it is (the
    /// `lease_owner` predicate dropped from one statement, `sqlite/effects.rs`): a
    /// run that was taken over still claims effects.
    UnfencedRenew,
    /// `gc` deletes every record created before the retention, running and
    /// suspended work too (`sqlite/journal.rs`): a call in progress loses its
    /// effects' keys and runs them again under new ones.
    GcRunning,
    /// A completed record is stamped as completed when its call began
    /// (`sqlite/invocations.rs`): expiry and gc count retention from the start of a
    /// call instead of its completion, so a long call expires early.
    ExpiryFromStart,
    /// An absent property's `default` is not filled in (`normalize.rs`): a default
    /// written out and left out are two keys.
    SkippedDefault,
    /// The PostgreSQL journal renews a lease until the host's own clock says
    /// (`postgres/ops.rs`), not the database's: a host whose clock runs behind holds
    /// a lease the others already see expired.
    HostClockLease,
    /// The SQLite journal's durable point returns without its fsync
    /// (`sqlite/durable.rs`): an answer counted durable is lost by a power cut.
    SkippedFsync,
    /// A run saves the deferred answers of its keyed effects whether or not it still
    /// holds the lease (`guard/effect.rs`, `sqlite/effects.rs`, `postgres/ops.rs`), as
    /// before fencing: a run that paused past its lease lands its own answer over the
    /// one the run that took over handed its tool.
    UnfencedDeferred,
    /// Outbox delivery takes a message before the commit that enqueued it is synced
    /// (`sqlite/outbox.rs`): a power cut loses the message after it was sent, and the
    /// retry sends it again under another key.
    DeliveryBeforeDurable,
    /// A resumed run does not replay the answer on record to a question
    /// (`guard/effect/asking.rs`): it asks the person again, and the tool may act on
    /// another answer than the one it acted on before.
    AskAnsweredAgain,
    /// A request state's MAC is not compared (`ask.rs`): a state of the call's
    /// position answers whatever question is asked there, one of an earlier
    /// generation of the call too.
    StateMacUnchecked,
    /// A resumed run takes a pending effect's class from its provider as configured
    /// now, not from the effect's record (`guard/effect.rs`): an unkeyed effect whose
    /// outcome is unknown is sent again once its tool says it is idempotent.
    ClassFromCatalog,
    /// A tool marked read-only now runs as a read although its key has a record
    /// journaled while it was not (`guard/mod.rs`, `guard/effect.rs`): a pending
    /// effect goes out again with no key and no record.
    ReadOnlyFromCatalog,
    /// A claim does not read the cancel journaled against its call's generation
    /// (`sqlite/effects.rs`, `postgres/ops.rs`): a run on a host other than the one
    /// that took the `tasks/cancel` goes on performing new effects.
    JournaledCancelIgnored,
    /// A host's memory of a cancel outlives the generation it was taken against
    /// (`guard/task_calls.rs`), as before issue 54: once another host completed the
    /// call and its record was forgotten or expired, the same call made again is
    /// refused "cancelled by its client" on the host that took the cancel.
    CancelOutlivesGeneration,
    /// A request state's MAC is made without the server's secret (`ask.rs`, as
    /// before issue 54: its only secret was what an agent can learn, an effect
    /// key): an agent that learned a question's effect key forges its state and
    /// answers it in the person's place.
    StateSecretDropped,
    /// A run resumed without a `tools/call` of its own (a task resumed by
    /// `tasks/update`, a console "Resume now") is let in past its principal's cap
    /// (`serving/admission.rs`), as before issue 54: a flood of resumes runs more of
    /// one principal's calls at once than the cap allows.
    ResumeSkipsAdmission,
    /// An unkeyed effect its probe found performed (journaled so) is sent again all
    /// the same (`guard/effect/probing.rs`): the probe's answer is ignored.
    ProbePerformedResends,
}

impl Mutant {
    /// Every mutant.
    pub const ALL: [Mutant; 24] = [
        Self::FreshEffectKey,
        Self::AnswerBeforeSave,
        Self::RetryUnkeyed,
        Self::ForgetJournaled,
        Self::UnfencedAnswer,
        Self::RoundedIntegers,
        Self::UnionsUntouched,
        Self::UnfencedRenew,
        Self::GcRunning,
        Self::ExpiryFromStart,
        Self::SkippedDefault,
        Self::HostClockLease,
        Self::SkippedFsync,
        Self::UnfencedDeferred,
        Self::DeliveryBeforeDurable,
        Self::AskAnsweredAgain,
        Self::StateMacUnchecked,
        Self::ClassFromCatalog,
        Self::ReadOnlyFromCatalog,
        Self::JournaledCancelIgnored,
        Self::CancelOutlivesGeneration,
        Self::StateSecretDropped,
        Self::ResumeSkipsAdmission,
        Self::ProbePerformedResends,
    ];

    /// The name `--mutant` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::FreshEffectKey => "fresh_effect_key",
            Self::AnswerBeforeSave => "answer_before_save",
            Self::RetryUnkeyed => "retry_unkeyed",
            Self::ForgetJournaled => "forget_journaled",
            Self::UnfencedAnswer => "unfenced_answer",
            Self::RoundedIntegers => "rounded_integers",
            Self::UnionsUntouched => "unions_untouched",
            Self::UnfencedRenew => "unfenced_renew",
            Self::GcRunning => "gc_running",
            Self::ExpiryFromStart => "expiry_from_start",
            Self::SkippedDefault => "skipped_default",
            Self::HostClockLease => "host_clock_lease",
            Self::SkippedFsync => "skipped_fsync",
            Self::UnfencedDeferred => "unfenced_deferred",
            Self::DeliveryBeforeDurable => "delivery_before_durable",
            Self::AskAnsweredAgain => "ask_answered_again",
            Self::StateMacUnchecked => "state_mac_unchecked",
            Self::ClassFromCatalog => "class_from_catalog",
            Self::ReadOnlyFromCatalog => "read_only_from_catalog",
            Self::JournaledCancelIgnored => "journaled_cancel_ignored",
            Self::CancelOutlivesGeneration => "cancel_outlives_generation",
            Self::StateSecretDropped => "state_secret_dropped",
            Self::ResumeSkipsAdmission => "resume_skips_admission",
            Self::ProbePerformedResends => "probe_performed_resends",
        }
    }

    /// The mutant called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Switches `mutant` on (or all of them off) for the whole process. `Err` when
    /// this build has no mutants (the `mutants` feature is off).
    pub fn activate(mutant: Option<Mutant>) -> Result<(), String> {
        #[cfg(any(test, feature = "mutants"))]
        {
            let n = mutant.map_or(0, |m| {
                1 + Self::ALL.iter().position(|x| *x == m).unwrap_or(0)
            });
            imp::ACTIVE.store(n as u8, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }
        #[cfg(not(any(test, feature = "mutants")))]
        match mutant {
            None => Ok(()),
            Some(m) => Err(format!(
                "this build has no mutants; build with `--features mutants` to run `{}`",
                m.name()
            )),
        }
    }
}

#[cfg(any(test, feature = "mutants"))]
mod imp {
    pub(super) static ACTIVE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
}

/// Whether `mutant` is switched on; always `false` without the `mutants` feature.
#[inline]
pub(crate) fn on(mutant: Mutant) -> bool {
    #[cfg(any(test, feature = "mutants"))]
    {
        let n = imp::ACTIVE.load(std::sync::atomic::Ordering::Relaxed) as usize;
        n != 0 && Mutant::ALL[n - 1] == mutant
    }
    #[cfg(not(any(test, feature = "mutants")))]
    {
        let _ = mutant;
        false
    }
}
