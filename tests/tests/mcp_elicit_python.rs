//! A tool that asks, answered by a real MCP client no one here wrote: the official
//! Python SDK (tests/mcp/elicit_client.py) over stdio and the `initialize` handshake,
//! with an `elicitation_callback` (issue 43). The server asks with
//! `elicitation/create` while the call runs; the `asks_refund` guest refunds through
//! the in-process `payments` provider once the person confirms.
//!
//! The SDK's stdio client starts a bridge process whose stdin and stdout are a TCP
//! connection to this test, which serves each connection with the stdio transport
//! (`Server::serve` on the stream), so the host and its provider are in-process and
//! every refund is counted.

use std::io::BufReader;
use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;

use justonce::__private::{Server, ServerConfig};
use serde_json::json;

use crate::support::{FakePayments, Fault, test_host};

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/mcp/elicit_client.py");

/// `asks_refund`'s arguments: 25 EUR for `order`.
fn refund(order: u64) -> String {
    json!({ "order_id": order, "amount_eur": 25 }).to_string()
}

/// The refunds `payments` applied, by order.
fn refunds_of(payments: &FakePayments, order: u64) -> usize {
    payments
        .applied()
        .iter()
        .filter(|(_, payload)| payload["order_id"] == order)
        .count()
}

#[test]
fn the_python_sdk_answers_a_question_once_per_call_and_a_client_that_cannot_is_told_why() {
    let python = match &*crate::mcp_python::PYTHON {
        Ok(python) => python,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("no Python with the MCP SDK under CI: {e}")
        }
        Err(e) => {
            eprintln!("skipping the Python SDK's elicitation test: {e}");
            return;
        }
    };
    let payments = Arc::new(FakePayments::new(Fault::None));
    let t = test_host(|b| b.provider("payments", payments.clone()));
    let server = Server::new(Arc::new(t.host), ServerConfig::default());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let server = server.clone();
            std::thread::spawn(move || {
                let input = BufReader::new(stream.try_clone().expect("clone the stream"));
                server.serve(input, stream)
            });
        }
    });

    let report = crate::mcp_python::client_report(
        Command::new(python)
            .arg(CLIENT)
            .arg(port.to_string())
            .arg("asks_refund")
            .arg(json!({ "confirm": true }).to_string())
            .args([refund(4417), refund(4418), refund(4419)]),
    );

    // A client that can be asked: each call asked once, the retry replayed without
    // a question, one refund per order.
    let asked = &report["asked"];
    let questions = asked["questions"].as_array().unwrap();
    assert_eq!(
        questions.len(),
        2,
        "4417 and 4418 asked, the retry not: {report}"
    );
    assert_eq!(questions[0]["message"], "Refund 25 EUR to card …4242?");
    assert_eq!(
        questions[0]["requestedSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );
    let calls = asked["calls"].as_array().unwrap();
    let meta = |i: usize, key: &str| calls[i]["meta"][format!("dev.justonce/{key}")].clone();
    assert!(calls.iter().all(|c| c["is_error"] == false), "{calls:?}");
    assert_eq!(calls[0]["structured"]["refunded"], true, "{calls:?}");
    assert_eq!(meta(0, "replayed"), false);
    assert_eq!(meta(1, "replayed"), true, "the retry is replayed");
    assert_eq!(meta(1, "key"), meta(0, "key"), "under the same key");
    assert_eq!(calls[1]["structured"], calls[0]["structured"]);
    assert_eq!(meta(2, "replayed"), false);
    assert_ne!(meta(2, "key"), meta(0, "key"));
    assert_eq!(refunds_of(&payments, 4417), 1, "one refund for the pair");
    assert_eq!(refunds_of(&payments, 4418), 1);

    // A client that declared no elicitation: told why, and nothing asked.
    let cannot = &report["cannot_ask"];
    assert_eq!(cannot["questions"], json!([]));
    let told = &cannot["calls"][0];
    assert_eq!(told["is_error"], true, "{told}");
    let text = told["text"].to_string();
    assert!(
        text.contains("input_unavailable") && text.contains("elicitation capability"),
        "{text}"
    );

    // The same call from a client that can be asked: it runs (nothing of it was
    // saved), is asked now, and refunds once: the refused call performed nothing.
    let later = &report["asked_later"];
    assert_eq!(later["questions"].as_array().unwrap().len(), 1, "{later}");
    let call = &later["calls"][0];
    assert_eq!(call["structured"]["refunded"], true, "{later}");
    assert_eq!(call["meta"]["dev.justonce/replayed"], false, "{later}");
    assert_eq!(
        refunds_of(&payments, 4419),
        1,
        "one refund, by the later call"
    );
    assert_eq!(payments.applied().len(), 3, "three refunds in all");
}
