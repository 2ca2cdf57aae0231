//! The providers built into the host.
//!
//! - `kv` ([`KvProvider`], transactional): a key-value table in the journal database,
//!   written in the same transaction as the effect record.
//! - `mail` ([`MailProvider`], keyed): a local mailbox that deduplicates by key, as a
//!   real mail API with idempotency keys does; used by the demo.

mod kv;
mod mail;

pub use kv::KvProvider;
pub use mail::{MailProvider, SentMail};
