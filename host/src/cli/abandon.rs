//! `justonce abandon`: close a diverged or stuck call with a saved `abandoned`
//! outcome.

use clap::Args;

use super::Cli;
use super::operate::OperateArgs;
use crate::error::Error;
use crate::journal::Action;

/// Close a diverged or stuck call with a saved outcome, a trap whose reason is
/// `abandoned` and whose message lists the effects already performed and those whose
/// outcome is unknown. Every retry replays it. Refused for a call that completed with
/// an outcome of its own, and for a running one unless --force; a second abandon does
/// nothing. Recorded with who and when (`justonce journal KEY`).
#[derive(Debug, Args)]
pub struct Abandon {
    #[command(flatten)]
    args: OperateArgs,
}

impl Abandon {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let key = self.args.key()?;
        let by = self.args.by(Action::Abandon, &key)?;
        let store = cli.journal()?;
        let operated = store.abandon(&key, &self.args.operator(&by))?;
        Ok(self.args.print(&operated, "abandoned"))
    }
}
