//! Test guest: mails a receipt (one effect) and answers with a rich result: text, an
//! image and a resource link, and the mail's id as a structured result whose schema
//! it declares (MCP's `outputSchema`).

use justonce_guest::{Content, Rich, Tool, ToolError, effects, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Where to send the receipt.
    email: String,
}

/// The structured result.
#[derive(Serialize, JsonSchema)]
struct Receipt {
    /// The mail's id.
    message_id: String,
}

#[derive(Serialize)]
struct Mail {
    to: String,
    subject: String,
    body: String,
}

#[derive(Deserialize)]
struct Sent {
    message_id: String,
}

/// The bytes of the "image": the test compares their base64.
const IMAGE: &[u8] = &[0x89, b'P', b'N', b'G', 0, 1, 2, 0xff];

struct RichReceipt;

impl Tool for RichReceipt {
    type Args = Args;
    type Output = Rich<Receipt>;
    const NAME: &'static str = "rich_receipt";
    const DESCRIPTION: &'static str = "Mails a receipt and shows it.";

    fn output_schema() -> Option<schemars::Schema> {
        Some(schemars::schema_for!(Receipt))
    }

    fn call(args: Args) -> Result<Rich<Receipt>, ToolError> {
        let mail = Mail {
            to: args.email,
            subject: "Your receipt".into(),
            body: "Thank you.".into(),
        };
        let sent: Sent = effects::perform("mail", "send", &mail)?;
        let link = Content::ResourceLink {
            uri: format!("mail://{}", sent.message_id),
            name: "receipt".into(),
            description: None,
            mime_type: Some("message/rfc822".into()),
        };
        Ok(Rich::structured(Receipt {
            message_id: sent.message_id.clone(),
        })
        .with(Content::text(format!("Sent {}", sent.message_id)))
        .with(Content::image(IMAGE, "image/png"))
        .with(link))
    }
}

export_tool!(RichReceipt);
