//! Rich results: a tool's content parts (text, image, resource link) and its typed
//! structured result are saved with the outcome, and a retry is told the same, byte
//! for byte, without running the tool or its effect again; over MCP, `tools/list`
//! carries the declared `outputSchema`.

use std::sync::Arc;

use justonce::__private::ServerConfig;
use justonce::{CallRequest, Outcome};
use serde_json::{Value, json};

use crate::support::mcp::{VERSION, key, note, replayed, result, serve_in_process, tool_items};
use crate::support::{TestHost, test_host_with_mail};

fn request() -> CallRequest {
    CallRequest::new("rich_receipt", r#"{"email":"ada@example.com"}"#)
}

/// The parts `rich_receipt` (and the probes' `receipt` in Python and JavaScript)
/// answers with for the mail `message_id`.
pub fn parts(message_id: &str) -> Value {
    json!([
        { "type": "text", "text": format!("Sent {message_id}") },
        // Its bytes 89 'P' 'N' 'G' 00 01 02 ff, in base64.
        { "type": "image", "data": "iVBORwABAv8=", "mimeType": "image/png" },
        {
            "type": "resource_link",
            "uri": format!("mail://{message_id}"),
            "name": "receipt",
            "mimeType": "message/rfc822",
        },
    ])
}

#[test]
fn a_rich_result_is_saved_and_a_retry_is_told_the_same_byte_for_byte() {
    // The mail's first answer is lost: the host retries the effect under its key.
    saved_and_replayed(&test_host_with_mail(1, |b| b), &request());
}

/// Calls `request`, a tool that mails a receipt and answers with [`parts`] and the
/// mail's id as its structured result, on `t`, whose mail loses the first answer:
/// the retry happened under the same key, one mail went, the answer is in parts,
/// and the agent's retry is told the same, byte for byte, running nothing.
pub fn saved_and_replayed(t: &TestHost, request: &CallRequest) {
    let first = t.host.call(request).unwrap();
    let sent = t.mail.sent().unwrap();
    assert_eq!(sent.len(), 1, "one mail: {:?}", first.outcome);
    assert_eq!(
        t.mail.attempts(),
        vec![sent[0].key.clone(); 2],
        "the retry, same key"
    );
    let Outcome::Success {
        result,
        content: Some(content),
    } = &first.outcome
    else {
        panic!("a result in parts: {:?}", first.outcome)
    };
    assert_eq!(result, &json!({ "message_id": sent[0].message_id }));
    assert_eq!(Value::Array(content.clone()), parts(&sent[0].message_id));

    // The agent retries: replayed from the journal, nothing runs, the same answer.
    let retry = t.host.call(request).unwrap();
    assert!(!first.replayed && retry.replayed);
    assert_eq!(retry.key, first.key);
    assert_eq!(retry.outcome, first.outcome);
    assert_eq!(
        retry.outcome.to_agent_json().to_string(),
        first.outcome.to_agent_json().to_string()
    );
    assert_eq!(t.mail.attempts().len(), 2, "no new attempt");
    assert_eq!(t.mail.sent().unwrap().len(), 1);
}

#[test]
fn over_mcp_the_output_schema_is_listed_and_a_retry_gets_the_same_parts_and_structure() {
    let t = test_host_with_mail(0, |b| b);
    let mail = t.mail.clone();
    let (mut client, _server) = serve_in_process(Arc::new(t.host), ServerConfig::default());
    client.initialize(VERSION);
    let list = client.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let rich = tools.iter().find(|t| t["name"] == "rich_receipt").unwrap();
    assert_eq!(rich["outputSchema"]["type"], "object", "{rich}");
    assert_eq!(
        rich["outputSchema"]["properties"]["message_id"]["type"],
        "string"
    );
    assert_eq!(rich["outputSchema"]["required"], json!(["message_id"]));
    assert!(
        rich["inputSchema"]
            .get("x-justonce-output-schema")
            .is_none(),
        "the mark is not shown: {rich}"
    );
    let echo = tools.iter().find(|t| t["name"] == "echo").unwrap();
    assert!(echo.get("outputSchema").is_none(), "{echo}");

    let args = json!({ "email": "ada@example.com" });
    let first = client.call("rich_receipt", args.clone(), json!({}));
    let retry = client.call("rich_receipt", args, json!({}));
    let id = mail.sent().unwrap()[0].message_id.clone();
    assert_eq!(result(&first)["content"], parts(&id), "{first}");
    assert_eq!(
        result(&first)["structuredContent"],
        json!({ "message_id": id })
    );
    assert_eq!(result(&first)["isError"], false);
    assert!(!replayed(&first) && replayed(&retry));
    assert_eq!(key(&first), key(&retry));
    for field in ["structuredContent", "isError"] {
        assert_eq!(
            result(&retry)[field].to_string(),
            result(&first)[field].to_string()
        );
    }
    assert_eq!(
        tool_items(result(&retry)).to_string(),
        result(&first)["content"].to_string(),
        "the tool's own items, byte for byte, before the host's note"
    );
    assert!(note(result(&retry)).is_some());
    assert_eq!(mail.sent().unwrap().len(), 1);
}
