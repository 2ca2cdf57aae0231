//! What `justonce forget` and `justonce abandon` share: who operates, `--force`,
//! `--json`, and how the result is printed (`justonce resolve` too, but `--force`).

use clap::Args;

use super::{exit, print_json};
use crate::clock::{Clock, SystemClock, rfc3339};
use crate::error::Error;
use crate::journal::{Action, Operated, Operator};
use crate::keys::InvocationKey;

/// The arguments of an operation on one call.
#[derive(Debug, Args)]
pub(super) struct OperateArgs {
    /// The invocation key, as `justonce journal` lists it.
    pub key: String,
    /// Who does it, for the journal's audit trail [default: $USER].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Also when its run holds a live lease (its later writes are then refused).
    #[arg(long)]
    pub force: bool,
    /// Print the recorded operation as JSON.
    #[arg(long)]
    pub json: bool,
}

impl OperateArgs {
    /// The key, checked.
    pub fn key(&self) -> Result<InvocationKey, Error> {
        InvocationKey::parse(&self.key).map_err(|e| Error::InvalidKey(e.to_string()))
    }

    /// Who operates: `--by`, else `$USER`. An empty name is refused: the audit trail
    /// must say who.
    pub fn by(&self, action: Action, key: &InvocationKey) -> Result<String, Error> {
        who(self.by.as_deref()).map_err(|reason| Error::CannotOperate {
            action: action.as_str(),
            key: key.clone(),
            reason,
        })
    }

    /// The operator, now.
    pub fn operator<'a>(&self, by: &'a str) -> Operator<'a> {
        Operator {
            by,
            force: self.force,
            now: SystemClock.now_ms(),
        }
    }

    /// Prints what was done, or that an earlier operation did it.
    pub fn print(&self, operated: &Operated, done: &str) -> u8 {
        print(operated, done, self.json)
    }
}

/// Who operates: `by` (`--by`), else `$USER`; `Err` says why there is no one. An empty
/// name is refused: the audit trail must say who.
pub(super) fn who(by: Option<&str>) -> Result<String, String> {
    let by = match by {
        Some(by) => by.trim().to_string(),
        None => std::env::var("USER").unwrap_or_default().trim().to_string(),
    };
    if by.is_empty() {
        return Err("the journal records who operates: pass --by NAME (USER is not set)".into());
    }
    Ok(by)
}

/// Prints what was done (`--json`: the recorded operation), or that an earlier
/// operation did it.
pub(super) fn print(operated: &Operated, done: &str, json: bool) -> u8 {
    if json {
        print_json(&serde_json::to_value(operated).unwrap_or_default());
        return exit::SUCCESS;
    }
    match operated {
        Operated::Done(o) => println!("call {} {done} (by {}, {})", o.key, o.by, rfc3339(o.at)),
        Operated::AlreadyDone(o) => println!(
            "call {} was {done} already (by {}, {}); nothing to do",
            o.key,
            o.by,
            rfc3339(o.at)
        ),
    }
    exit::SUCCESS
}
