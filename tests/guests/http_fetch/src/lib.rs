//! Test guest: performs the http requests its arguments describe, in order, and
//! returns each response (or the effect error) as JSON.

use std::collections::BTreeMap;

use justonce_guest::http::Request;
use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// The requests, in order.
    requests: Vec<Step>,
}

#[derive(Deserialize, JsonSchema)]
struct Step {
    method: String,
    url: String,
    #[serde(default)]
    record: bool,
    #[serde(default)]
    body: Option<String>,
    /// Headers to send, by name.
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

struct HttpFetch;

impl Tool for HttpFetch {
    type Args = Args;
    type Output = Vec<Value>;
    const NAME: &'static str = "http_fetch";
    const DESCRIPTION: &'static str = "Performs the http requests it is given.";

    fn call(args: Args) -> Result<Vec<Value>, ToolError> {
        let mut out = Vec::new();
        for step in args.requests {
            let mut request = Request::new(&step.method, &step.url);
            if step.record {
                request = request.record();
            }
            for (name, value) in &step.headers {
                request = request.header(name, value);
            }
            if let Some(body) = &step.body {
                request = request.body(body);
            }
            out.push(match request.send() {
                Ok(response) => json!({ "status": response.status, "body": response.body }),
                Err(e) => json!({ "error": e.to_string() }),
            });
        }
        Ok(out)
    }
}

export_tool!(HttpFetch);
