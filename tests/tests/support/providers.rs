//! In-process providers for tests, with the fault that creates ambiguity: the
//! effect lands, then the response is lost.

use std::collections::HashMap;
use std::sync::Mutex;

use justonce::{EffectRequest, Provider, ProviderClass, ProviderError};
use serde_json::{Value, json};

/// What the fake downstream does with an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answers normally.
    None,
    /// Applies the first `n` attempts of each key, then loses the response.
    LoseFirst(u32),
    /// Applies nothing and never answers (every attempt times out).
    AlwaysTimeout,
    /// Refuses definitively with this answer (like a declined card or a 500).
    Reject(Value),
}

/// A payments API that deduplicates by idempotency key, as Stripe does, and records
/// every attempt (the transport's log) and every refund applied.
pub struct FakePayments {
    class: ProviderClass,
    fault: Mutex<Fault>,
    attempts: Mutex<Vec<String>>,
    applied: Mutex<Vec<(String, Value)>>,
    answered: Mutex<HashMap<String, u32>>,
}

impl FakePayments {
    /// A keyed payments API with the given fault.
    pub fn new(fault: Fault) -> Self {
        Self::with_class(ProviderClass::Keyed, fault)
    }

    /// A payments API of another class (for example unkeyed).
    pub fn with_class(class: ProviderClass, fault: Fault) -> Self {
        Self {
            class,
            fault: Mutex::new(fault),
            attempts: Mutex::new(Vec::new()),
            applied: Mutex::new(Vec::new()),
            answered: Mutex::new(HashMap::new()),
        }
    }

    /// Changes the fault from now on (the downstream heals, say).
    pub fn set_fault(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
    }

    /// The key of every attempt, in order.
    pub fn attempts(&self) -> Vec<String> {
        self.attempts.lock().unwrap().clone()
    }

    /// The refunds applied (key, payload), one per distinct key.
    pub fn applied(&self) -> Vec<(String, Value)> {
        self.applied.lock().unwrap().clone()
    }
}

impl Provider for FakePayments {
    fn class(&self) -> ProviderClass {
        self.class
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        let key = request.key.to_string();
        self.attempts.lock().unwrap().push(key.clone());
        let fault = self.fault.lock().unwrap().clone();
        match fault {
            Fault::AlwaysTimeout => {
                return Err(ProviderError::Unknown("payments API timed out".into()));
            }
            Fault::Reject(answer) => return Err(ProviderError::Rejected(answer)),
            Fault::None | Fault::LoseFirst(_) => {}
        }
        let mut applied = self.applied.lock().unwrap();
        let index = match applied.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                applied.push((key.clone(), request.payload.clone()));
                applied.len() - 1
            }
        };
        if let Fault::LoseFirst(n) = fault {
            let mut answered = self.answered.lock().unwrap();
            let seen = answered.entry(key).or_insert(0);
            *seen += 1;
            if *seen <= n {
                return Err(ProviderError::Unknown(
                    "payments API applied the refund, then the response was lost".into(),
                ));
            }
        }
        Ok(json!({ "refund_id": format!("re_{:04}", index + 1), "status": "succeeded" }))
    }
}

/// The real outbox, made to refuse after it has written its message: the guard
/// must roll the message back with the refused effect, since both share one
/// transaction.
pub struct RefusingOutbox(pub justonce::__private::OutboxProvider);

impl Provider for RefusingOutbox {
    fn class(&self) -> ProviderClass {
        self.0.class()
    }

    fn perform(&self, request: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        self.0.perform(request)
    }

    fn prepare(&self, db: &rusqlite::Connection) -> rusqlite::Result<()> {
        self.0.prepare(db)
    }

    fn perform_in_transaction(
        &self,
        tx: &rusqlite::Connection,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let queued = self.0.perform_in_transaction(tx, request)?;
        Err(ProviderError::Rejected(json!({ "refused_after": queued })))
    }

    fn prepare_postgres(&self, tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
        self.0.prepare_postgres(tx)
    }

    fn perform_in_postgres(
        &self,
        tx: &mut postgres::Transaction<'_>,
        request: &EffectRequest<'_>,
    ) -> Result<Value, ProviderError> {
        let queued = self.0.perform_in_postgres(tx, request)?;
        Err(ProviderError::Rejected(json!({ "refused_after": queued })))
    }
}
