//! Faults injected into a serving host's providers (`justonce serve --fault`), so an
//! agent builder can run the seed's test against their own agent loop: the effect
//! lands, then its response is lost; or the effect lands and its answer comes late,
//! past the client's timeout. Off unless asked for; `serve` logs each one loudly.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::keys::EffectKey;
use crate::provider::{EffectRequest, Provider, ProviderClass, ProviderError, ReadRequest};

/// One fault: what happens, and to which effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedFault {
    /// What happens.
    pub kind: FaultKind,
    /// A provider's name (`mail`, `http`, …) or a tool's: the fault hits the effects
    /// that go to that provider or that that tool asks for.
    pub target: String,
}

/// What an injected fault does to an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The effect is performed, then its response is lost (an unknown outcome), for
    /// the first `attempts` attempts of each effect key, counted in the journal (so
    /// across processes and hosts sharing it). With as many as the retry
    /// policy's attempts (3 by default) the first call ends `outcome_unknown` and the
    /// agent's own retry of the same call is answered.
    LoseResponse {
        /// How many attempts of each effect lose their response.
        attempts: u32,
    },
    /// The effect is performed, then its answer waits this long, at the first
    /// attempt of each effect key (counted in the journal): past a client's timeout, its retry meets the call still running.
    Hang {
        /// How long.
        delay: Duration,
    },
}

impl std::str::FromStr for InjectedFault {
    type Err = String;

    /// `lose-response:TARGET[:ATTEMPTS]` (default 3) or `hang:TARGET:MS`; TARGET
    /// may be an upstream's provider, `mcp:NAME`.
    fn from_str(text: &str) -> Result<Self, String> {
        let usage = "expected lose-response:TARGET[:ATTEMPTS] or hang:TARGET:MS \
                     (TARGET: a provider's name, mcp:NAME for an upstream's, or a tool's)";
        let mut parts: Vec<&str> = text.split(':').collect();
        // An upstream's provider is named `mcp:NAME`: one target, colon and all.
        if parts.len() > 2 && parts[1] == "mcp" {
            let at = parts[0].len() + 1;
            let target = &text[at..at + "mcp:".len() + parts[2].len()];
            parts.splice(1..3, [target]);
        }
        let number = |s: &str| {
            s.parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{text:?}: {s:?} is not a positive number; {usage}"))
        };
        let kind = match parts.as_slice() {
            ["lose-response", _] => FaultKind::LoseResponse { attempts: 3 },
            ["lose-response", _, n] => FaultKind::LoseResponse {
                attempts: u32::try_from(number(n)?).map_err(|e| e.to_string())?,
            },
            ["hang", _, ms] => FaultKind::Hang {
                delay: Duration::from_millis(number(ms)?),
            },
            _ => return Err(format!("{text:?}: {usage}")),
        };
        let target = parts[1].to_owned();
        if target.is_empty() || target == "mcp:" {
            return Err(format!("{text:?}: no TARGET; {usage}"));
        }
        Ok(Self { kind, target })
    }
}

impl std::fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            FaultKind::LoseResponse { attempts } => write!(
                f,
                "the effects of {} land and their response is lost, for the first {attempts} attempt(s) of each key",
                self.target
            ),
            FaultKind::Hang { delay } => write!(
                f,
                "the effects of {} land and their answer waits {} ms, once per key",
                self.target,
                delay.as_millis()
            ),
        }
    }
}

/// Wraps each keyed or unkeyed provider of `providers` that a fault targets (by its
/// name, or by a tool's) in a provider that injects them. A transactional provider is
/// left as it is: its effect and record commit together, so nothing can be lost
/// between them.
pub(crate) fn wrap(
    providers: std::collections::BTreeMap<String, Arc<dyn Provider>>,
    faults: &[InjectedFault],
) -> std::collections::BTreeMap<String, Arc<dyn Provider>> {
    if faults.is_empty() {
        return providers;
    }
    providers
        .into_iter()
        .map(|(name, inner)| {
            let wrapped: Arc<dyn Provider> = if inner.class() == ProviderClass::Transactional {
                inner
            } else {
                Arc::new(Faulty {
                    name: name.clone(),
                    inner,
                    faults: faults.to_vec(),
                })
            };
            (name, wrapped)
        })
        .collect()
}

/// A provider with faults injected.
struct Faulty {
    name: String,
    inner: Arc<dyn Provider>,
    faults: Vec<InjectedFault>,
}

impl Provider for Faulty {
    fn class(&self) -> ProviderClass {
        self.inner.class()
    }

    fn class_of(&self, operation: &str, payload: &Value) -> ProviderClass {
        self.inner.class_of(operation, payload)
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let answer = self.inner.perform(request)?;
        // The journal's count of this key's attempts, not this process's: a client
        // that starts a server per call (LlamaIndex on stdio) retries in a new process,
        // whose retry must find the response lost no more often than one server's.
        let times = request.attempt;
        for fault in &self.faults {
            if fault.target != self.name && fault.target != request.tool {
                continue;
            }
            match fault.kind {
                FaultKind::LoseResponse { attempts } if times <= attempts => {
                    tracing::warn!(key = %request.key, tool = request.tool, provider = %self.name, attempt = times, "fault injected: the effect landed and its response is lost");
                    return Err(ProviderError::Unknown(
                        "the response was lost after the effect landed (justonce serve --fault)"
                            .into(),
                    ));
                }
                FaultKind::Hang { delay } if times == 1 => {
                    tracing::warn!(key = %request.key, tool = request.tool, provider = %self.name, ms = delay.as_millis() as u64, "fault injected: the effect landed; its answer waits");
                    std::thread::sleep(delay);
                }
                _ => {}
            }
        }
        Ok(answer)
    }

    fn earlier_attempt(&self, key: &EffectKey) -> Option<crate::provider::EarlierAttempt> {
        self.inner.earlier_attempt(key)
    }

    fn hand_late_answers_to(&self, sink: crate::provider::LateAnswerSink) {
        self.inner.hand_late_answers_to(sink);
    }

    fn probe_of(&self, operation: &str, payload: &Value) -> Option<String> {
        self.inner.probe_of(operation, payload)
    }

    fn probe(&self, request: &EffectRequest<'_>) -> Result<crate::provider::Probed, String> {
        self.inner.probe(request)
    }

    fn unjournaled_read(&self, operation: &str, payload: &Value) -> bool {
        self.inner.unjournaled_read(operation, payload)
    }

    fn read(&self, request: &ReadRequest<'_>) -> Result<Value, ProviderError> {
        self.inner.read(request)
    }

    fn prepare(&self, db: &rusqlite::Connection) -> rusqlite::Result<()> {
        self.inner.prepare(db)
    }

    fn prepare_postgres(&self, tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
        self.inner.prepare_postgres(tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_read_from_its_flag_and_a_bad_one_names_the_forms() {
        assert_eq!(
            "lose-response:mail".parse::<InjectedFault>().unwrap(),
            InjectedFault {
                kind: FaultKind::LoseResponse { attempts: 3 },
                target: "mail".into()
            }
        );
        assert_eq!(
            "lose-response:send_receipt:1"
                .parse::<InjectedFault>()
                .unwrap()
                .kind,
            FaultKind::LoseResponse { attempts: 1 }
        );
        assert_eq!(
            "hang:http:6000".parse::<InjectedFault>().unwrap().kind,
            FaultKind::Hang {
                delay: Duration::from_secs(6)
            }
        );
        // An upstream's provider, `mcp:NAME`, is one target.
        assert_eq!(
            "lose-response:mcp:ledger".parse::<InjectedFault>().unwrap(),
            InjectedFault {
                kind: FaultKind::LoseResponse { attempts: 3 },
                target: "mcp:ledger".into()
            }
        );
        assert_eq!(
            "lose-response:mcp:ledger:1"
                .parse::<InjectedFault>()
                .unwrap(),
            InjectedFault {
                kind: FaultKind::LoseResponse { attempts: 1 },
                target: "mcp:ledger".into()
            }
        );
        assert_eq!(
            "hang:mcp:ledger:500".parse::<InjectedFault>().unwrap(),
            InjectedFault {
                kind: FaultKind::Hang {
                    delay: Duration::from_millis(500)
                },
                target: "mcp:ledger".into()
            }
        );
        for bad in [
            "hang:mcp:ledger",
            "lose-response:mcp::1",
            "hang:http",
            "lose:mail",
            "hang::5",
            "lose-response:mail:0",
            "hang:mail:x",
        ] {
            let why = bad.parse::<InjectedFault>().unwrap_err();
            assert!(why.contains("lose-response:TARGET"), "{bad}: {why}");
        }
    }
}
