//! `justonce forget`: remove one call's record so the same call runs again.

use clap::Args;

use super::Cli;
use super::operate::OperateArgs;
use crate::error::Error;
use crate::journal::Action;

/// Remove one completed call's record so the same call runs again. Its effects are
/// then sent downstream under new keys (the record's generation goes with it), so a
/// downstream that remembers the old keys performs them again: that is what forget
/// means. Refused for a call that is running or has an effect whose outcome is
/// unknown, unless --force. Recorded with who and when (`justonce journal KEY`).
#[derive(Debug, Args)]
pub struct Forget {
    #[command(flatten)]
    args: OperateArgs,
}

impl Forget {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let key = self.args.key()?;
        let by = self.args.by(Action::Forget, &key)?;
        let store = cli.journal()?;
        let operated = store.forget(&key, &self.args.operator(&by))?;
        Ok(self.args.print(&operated, "forgotten"))
    }
}
