//! How far a journal's calls reach, kept so that a journal restored from an older
//! backup can be told from the one its hosts served: the journal has an identity
//! (made once, copied with it into every backup) and a mark, the creation time of its
//! newest call, which only grows (it is kept in `journal_meta`, so gc and `forget`
//! removing the newest records do not take it back). Each host remembers the last
//! mark it read of each journal (`crate::maintenance::marks`); a journal whose mark
//! is behind what a host read was restored behind calls (and answers) that host
//! knew of, and its retries would run again under new keys.

use serde::{Deserialize, Serialize};

/// The `journal_meta` row of the journal's identity.
pub(crate) const ID_ROW: &str = "id";

/// The `journal_meta` row of the mark.
pub(crate) const NEWEST_CALL_ROW: &str = "newest_call";

/// A journal's identity and its mark, as read now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalMark {
    /// The journal's identity: random, made by the first host that asked; a backup
    /// and its restore share it.
    pub id: String,
    /// The creation time of its newest call ever (ms since the epoch, on the clock
    /// that journaled it); 0 before the first.
    pub newest_call_at: i64,
}
