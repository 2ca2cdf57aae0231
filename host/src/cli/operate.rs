//! What `justonce forget` and `justonce abandon` share: who operates, `--force`,
//! `--json`, and how the result is printed.

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
        let by = match &self.by {
            Some(by) => by.trim().to_string(),
            None => std::env::var("USER").unwrap_or_default().trim().to_string(),
        };
        if by.is_empty() {
            return Err(Error::CannotOperate {
                action: action.as_str(),
                key: key.clone(),
                reason: "the journal records who operates: pass --by NAME (USER is not set)".into(),
            });
        }
        Ok(by)
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
        if self.json {
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
}
