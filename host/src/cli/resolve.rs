//! `justonce resolve`: a person says whether a pending unkeyed effect happened.

use clap::Args;
use serde_json::Value;

use super::operate::{print, who};
use super::{Cli, exit};
use crate::clock::{Clock, SystemClock};
use crate::error::Error;
use crate::journal::{Operator, Resolution};

/// Resolve a pending unkeyed effect (see `justonce journal --unresolved`): say whether
/// it took effect, so the next retry of its call can finish.
#[derive(Debug, Args)]
pub struct Resolve {
    /// The effect key, as `justonce journal --unresolved` lists it.
    effect: String,
    /// It took effect: the retry replays `--response` and does not call the provider.
    #[arg(
        long,
        conflicts_with = "not_performed",
        required_unless_present = "not_performed"
    )]
    performed: bool,
    /// It did not take effect: the retry makes one more attempt under the same key.
    #[arg(long)]
    not_performed: bool,
    /// With `--performed`: the downstream's answer (JSON) the tool gets, if known.
    /// Without it, the tool gets an answer that says who recorded the effect as
    /// performed, and that the downstream's own answer is not on record.
    #[arg(long, value_name = "JSON", requires = "performed")]
    response: Option<String>,
    /// Who says so, for the journal's audit trail [default: $USER].
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
    /// Print the recorded operation as JSON.
    #[arg(long)]
    json: bool,
}

impl Resolve {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let response: Value = match &self.response {
            None => Value::Null,
            Some(text) => serde_json::from_str(text).map_err(|e| Error::CannotResolve {
                effect: self.effect.clone(),
                reason: format!("--response is not valid JSON: {e}"),
            })?,
        };
        let resolution = if self.performed {
            Resolution::Performed
        } else {
            Resolution::NotPerformed
        };
        let by = who(self.by.as_deref()).map_err(|reason| Error::CannotResolve {
            effect: self.effect.clone(),
            reason,
        })?;
        let person = Operator {
            by: &by,
            force: false,
            now: SystemClock.now_ms(),
        };
        let store = cli.journal()?;
        let operated = store.resolve(&self.effect, resolution, &response, &person)?;
        if self.json {
            return Ok(print(&operated, "", true));
        }
        println!(
            "effect {} resolved as {} (by {by}); retry its call to finish it",
            self.effect,
            resolution.as_str()
        );
        Ok(exit::SUCCESS)
    }
}
