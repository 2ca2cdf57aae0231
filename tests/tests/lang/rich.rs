//! Rich results from Python and JavaScript tools: the probes' `receipt` mails once
//! (its first answer lost, retried under the same key) and answers in parts with a
//! structured result, saved and replayed byte for byte as a Rust tool's is.

use justonce::__private::LocalApi;
use justonce::CallRequest;
use serde_json::json;

use super::{JAVASCRIPT, Lang, PYTHON};

fn receipt(lang: &Lang) {
    let api = LocalApi::start().unwrap();
    let request = CallRequest::new(
        lang.probe_tool,
        json!({ "op": "receipt", "message": "Your receipt", "email": "ada@example.com" })
            .to_string(),
    );
    crate::rich::saved_and_replayed(&lang.host(&api, 1), &request);
}

#[test]
fn a_python_tools_rich_result_is_saved_and_replayed_byte_for_byte() {
    receipt(&PYTHON);
}

#[test]
fn a_javascript_tools_rich_result_is_saved_and_replayed_byte_for_byte() {
    receipt(&JAVASCRIPT);
}
