//! The providers built into the host.
//!
//! - `kv` ([`KvProvider`], transactional): a key-value table in the journal database,
//!   written in the same transaction as the effect record.
//! - `mail` ([`MailProvider`], keyed): a local mailbox that deduplicates by key, as a
//!   real mail API with idempotency keys does; used by the demo.
//! - `http` ([`HttpProvider`], keyed): requests to the origins a tool is allowed,
//!   with the effect key in an `Idempotency-Key` header.
//! - `outbox` ([`OutboxProvider`], transactional): webhooks queued in the journal's
//!   transaction and sent later by [`Deliverer`](crate::delivery::Deliverer).

mod faulty;
mod http;
mod kv;
mod mail;
mod outbox;

pub use crate::journal::outbox::OutboxMessage;
pub use faulty::InjectedFault;
pub(crate) use faulty::wrap as with_faults;
pub use http::HttpProvider;
pub use kv::KvProvider;
#[cfg(test)]
pub(crate) use mail::SentMail;
pub use mail::{MailProvider, Received, mailbox_file, read_mailbox};
pub use outbox::OutboxProvider;
