//! One line per call, as Envoy's access log writes one per request: what was called
//! (tool, key, conversation, principal), how it ended (outcome, replayed), what it
//! took (runs of the guest, attempts at effects, duration) and where (host). At
//! `info` for a call that ended with an answer; at `warn` for one that needs someone
//! to look (an unknown outcome, a divergence, a lost lease, a host fault), with what
//! to do in the message.
//!
//! The target is `justonce::call`, so `JUSTONCE_LOG=warn,justonce::call=info` keeps
//! the calls and drops the rest; `JUSTONCE_LOG_FORMAT=json` writes the fields as keys.

use std::time::Duration;

use crate::call::{CallRequest, CallResponse};
use crate::error::{Error, Result};
use crate::keys::InvocationKey;

/// What one call did, counted as it ran.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    /// Runs of the guest this call made (0 for a replay or a duplicate that waited).
    pub runs: u32,
    /// Attempts at effects those runs made (each sent under its effect key).
    pub attempts: u32,
}

/// The outcome a line of the sweeper's run of a call says (`swept`): its probe, not
/// a call the agent made.
pub(crate) const SWEPT: &str = "swept";

/// Writes the line of one call that ended with `answer` after `took`; `swept`: the
/// run was the sweeper's (`Guard::probe_call`), whose line says what its probe
/// found, at `info`.
pub(crate) fn call_ended(
    host: &str,
    (request, swept): (&CallRequest, bool),
    tool: &str,
    key: &InvocationKey,
    tally: Tally,
    took: Duration,
    answer: &Result<CallResponse>,
) {
    let conversation = request.conversation.as_deref().unwrap_or("");
    let principal = request.principal.as_deref().unwrap_or("");
    let duration_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    let (outcome, replayed) = match answer {
        _ if swept => (SWEPT, false),
        Ok(response) => (response.outcome.kind(), response.replayed),
        Err(error) => (error.kind(), false),
    };
    macro_rules! line {
        ($level:ident, $($message:tt)+) => {
            tracing::$level!(
                target: "justonce::call",
                tool,
                key = %key,
                conversation,
                principal,
                outcome,
                replayed,
                runs = tally.runs,
                attempts = tally.attempts,
                duration_ms,
                host,
                $($message)+
            )
        };
    }
    match answer {
        Err(Error::OutcomeUnknown {
            seq,
            provider,
            reason,
            ..
        }) if swept => line!(
            info,
            "the sweeper probed the call at effect #{seq} ({provider}): {reason}"
        ),
        _ if swept => line!(
            info,
            "the sweeper's run of the call found nothing to probe: {}",
            match answer {
                Ok(_) => "it ended".to_string(),
                Err(error) => error.to_string(),
            }
        ),
        Ok(_) => line!(info, "call answered"),
        Err(Error::OutcomeUnknown {
            seq,
            provider,
            ends_by,
            ..
        }) if !ends_by.retry_helps() => line!(
            warn,
            "call stopped: effect #{seq} ({provider}) has an unknown outcome that only a person can end (`justonce resolve`); the agent was told to stop retrying and tell the user"
        ),
        Err(Error::OutcomeUnknown { seq, provider, .. }) => line!(
            warn,
            "call stopped: effect #{seq} ({provider}) has an unknown outcome; the agent was told retrying is safe, and the same call resumes it under the same effect key"
        ),
        Err(Error::Divergence { .. }) => line!(
            warn,
            "call stopped: the tool asked for another effect than its journal holds; a person decides (`justonce abandon {key}` or `forget`)"
        ),
        Err(Error::LeaseLost { .. }) => line!(
            warn,
            "call stopped: another host took it over while this one ran; that host's outcome is the call's"
        ),
        Err(Error::NotPerformed { seq, provider, .. }) => line!(
            warn,
            "call stopped: effect #{seq} ({provider}) was not performed; the same call succeeds once the cause is fixed"
        ),
        Err(Error::InProgress { .. }) => line!(
            info,
            "call answered in_progress: the first call with this key is still running; the agent retries"
        ),
        Err(Error::InputRequired { seq, .. }) => line!(
            info,
            "call suspended: the tool asked the user (question #{seq}); the same call made again with the answers resumes it"
        ),
        Err(Error::InputUnavailable { reason, .. }) => line!(
            info,
            "call stopped: the tool asked the user, who cannot be asked ({reason}); nothing was saved"
        ),
        Err(error) if error.kind() == "host_failed" => {
            line!(warn, "call failed in the host: {error}")
        }
        Err(_) => line!(info, "call answered with an error"),
    }
}
