//! `justonce mail`: what the built-in `mail` provider's local mailbox received.

use clap::Args;

use super::{Cli, exit};
use crate::clock::rfc3339;
use crate::error::Error;
use crate::providers::{Received, mailbox_file, read_mailbox};

/// Show the emails the built-in `mail` provider's local mailbox received, oldest
/// first: recipient, subject, body, message id, the effect key it was sent under, and
/// how many requests came under that key (a retry is a request that sent nothing).
/// The mailbox is the `mailbox` table of the SQLite journal (with a PostgreSQL
/// journal, `.justonce/mailbox.db` in the working directory); it sends no real email.
#[derive(Debug, Args)]
pub struct Mail {
    /// One JSON object per email instead of text.
    #[arg(long)]
    json: bool,
}

impl Mail {
    pub(super) fn run(&self, cli: &Cli) -> Result<u8, Error> {
        let file = mailbox_file(&cli.db);
        let received = read_mailbox(&file)?;
        if self.json {
            for mail in &received {
                println!(
                    "{}",
                    serde_json::to_string(mail).map_err(|e| Error::Host(e.into()))?
                );
            }
        } else if received.is_empty() {
            println!("(no mail in {})", file.display());
        } else {
            for mail in &received {
                print!("{}", text(mail));
            }
        }
        Ok(exit::SUCCESS)
    }
}

/// One email as `justonce mail` shows it.
fn text(received: &Received) -> String {
    let mail = &received.mail;
    let requests = match received.requests {
        0 | 1 => "1 request".to_owned(),
        n => format!("{n} requests, sent once"),
    };
    let mut out = format!(
        "{}  {}  to {}  key {}  ({requests})\n    Subject: {}\n",
        mail.message_id,
        rfc3339(mail.sent_at),
        mail.to,
        mail.key,
        mail.subject
    );
    for line in mail.body.lines() {
        out.push_str(&format!("    {line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::SentMail;

    #[test]
    fn an_email_shows_its_recipient_subject_body_key_and_requests() {
        let received = Received {
            mail: SentMail {
                key: "3f2a".into(),
                to: "ada@example.com".into(),
                subject: "Order 4417 is unpaid".into(),
                body: "Please pay.\nThanks.".into(),
                message_id: "msg-000001".into(),
                sent_at: 0,
            },
            requests: 2,
        };
        assert_eq!(
            text(&received),
            "msg-000001  1970-01-01T00:00:00.000Z  to ada@example.com  key 3f2a  (2 requests, sent once)\n    Subject: Order 4417 is unpaid\n    Please pay.\n    Thanks.\n"
        );
    }
}
