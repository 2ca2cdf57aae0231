//! Before anything is looked up: the arguments as the tool will see them, and the
//! key the call runs under. A call refused here is refused before anything is stored.

use serde_json::Value;

use super::prepared::Prepared;
use super::replayed_keys::ReplayedKeys;
use super::runner::{Runner, ToolSpec};
use crate::call::CallRequest;
use crate::error::{Error, Result};
use crate::keys::{self, InvocationKey};
use crate::normalize::{NormalizeError, normalize};

/// Checks `request` against its tool and computes its key; a call `replayed`
/// remembers is taken from there.
pub(crate) fn prepare(
    runner: &dyn Runner,
    request: &CallRequest,
    replayed: Option<&ReplayedKeys>,
) -> Result<Prepared> {
    let tool = tool_of(runner, request)?;
    let invalid = |reason: String| Error::InvalidArguments {
        tool: request.tool.clone(),
        reason,
    };
    if let Some(prepared) = replayed.and_then(|r| r.recall(&tool, request)) {
        return Ok(prepared);
    }
    // Parsed once, as its canonical form reads back (the canonical text is written
    // once, after normalization); the strict parser also refuses duplicate keys,
    // which serde_json alone would silently collapse.
    let parse = || -> Result<Value> {
        crate::jcs::parse_canonical(&request.arguments).map_err(|e| invalid(e.to_string()))
    };
    let args = parse()?;
    if !args.is_object() {
        return Err(invalid("arguments must be a JSON object".into()));
    }
    // The arguments as the tool will see them: defaults filled in, an explicit null
    // for an optional property dropped, undeclared properties refused. Two argument
    // objects the tool cannot tell apart are one call, with one key.
    let args = match normalize(&tool.input_schema, args) {
        Ok(normalized) => normalized,
        // Every problem at once, not only the first: what the schema check finds too.
        Err(e) => {
            let mut reason = e.to_string();
            let reported = match &e {
                NormalizeError::Undeclared { path, .. } => Some(path.as_str()),
                _ => None,
            };
            if let Err(more) = tool.schema.check_besides(&parse()?, reported) {
                reason = format!("{reason}; and the arguments {more}");
            }
            return Err(invalid(reason));
        }
    };
    let canonical = crate::jcs::canonicalize(&args).map_err(|e| invalid(e.to_string()))?;
    tool.schema.check(&args).map_err(invalid)?;
    // The key and the fingerprint hash this canonical text; the value is not
    // serialized again.
    let fingerprint = match (&request.key, &request.principal) {
        // A key of the local caller's choosing may be anybody's: see
        // `local_key_fingerprint_of_canonical`.
        (Some(_), None) => keys::local_key_fingerprint_of_canonical(&tool.name, &canonical),
        _ => keys::arguments_fingerprint_of_canonical(&tool.name, &canonical),
    };
    let key = match &request.key {
        Some(explicit) => {
            let key =
                InvocationKey::parse(explicit).map_err(|e| Error::InvalidKey(e.to_string()))?;
            // Over the network an explicit key is the caller's own: two principals
            // choosing the same key get two invocations.
            match &request.principal {
                None => key,
                Some(_) => keys::scoped_key(&request.scope(), &key)
                    .map_err(|e| Error::InvalidKey(e.to_string()))?,
            }
        }
        None => keys::invocation_key_of_canonical(&request.scope(), &tool.name, &canonical),
    };
    Ok(Prepared {
        tool,
        canonical,
        fingerprint,
        key,
        principal: request.principal.clone(),
        probe_only: false,
    })
}

/// What [`prepare`] makes of a call `replayed` remembers; `None` when it does not
/// remember it, or `prepare` refuses it.
pub(crate) fn recall(
    runner: &dyn Runner,
    request: &CallRequest,
    replayed: &ReplayedKeys,
) -> Option<Prepared> {
    replayed.recall(&tool_of(runner, request).ok()?, request)
}

/// The tool `request` calls, if its arguments are within the tool's limit.
fn tool_of(runner: &dyn Runner, request: &CallRequest) -> Result<ToolSpec> {
    let tool =
        runner
            .tool(&request.tool)
            .ok_or_else(|| match runner.unavailable(&request.tool) {
                Some(reason) => Error::Unavailable {
                    tool: request.tool.clone(),
                    reason,
                },
                None => Error::UnknownTool {
                    name: request.tool.clone(),
                    available: runner.names(),
                },
            })?;
    let limit = tool.limits.max_args_bytes;
    if request.arguments.len() > limit {
        return Err(Error::InvalidArguments {
            tool: request.tool.clone(),
            reason: format!(
                "{} bytes exceeds the limit of {limit} bytes",
                request.arguments.len()
            ),
        });
    }
    Ok(tool)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::guard::replayed_keys::ReplayedKeys;
    use crate::guard::runner::Runner;
    use crate::guard::scripted::{ScriptedRunner, returned};

    #[test]
    fn invalid_arguments_name_every_problem_with_its_path() {
        let mut runner = ScriptedRunner::default();
        let schema = json!({
            "type": "object",
            "properties": {
                "customer_id": { "type": "integer" },
                "note": { "type": "string" }
            },
            "additionalProperties": false
        });
        ScriptedRunner::tool(&mut runner, "refund", schema, |_, _| returned(json!({})));
        let request = CallRequest::new("refund", r#"{"customer_id": "x", "extra": 1}"#);
        let Err(Error::InvalidArguments { reason, .. }) = prepare(&runner, &request, None) else {
            panic!("expected invalid arguments");
        };
        assert!(reason.contains("/extra"), "{reason}");
        assert!(reason.contains("/customer_id"), "{reason}");
        // Each problem once: the undeclared property is not reported again by the
        // schema check.
        assert_eq!(reason.matches("extra").count(), 1, "{reason}");
        // A second undeclared property, which the first report does not name, is.
        let request = CallRequest::new("refund", r#"{"extra": 1, "more": 2}"#);
        let Err(Error::InvalidArguments { reason, .. }) = prepare(&runner, &request, None) else {
            panic!("expected invalid arguments");
        };
        assert!(reason.contains("more"), "{reason}");
    }

    /// What `replayed_keys` remembers is what `prepare` made of the very same call.
    #[test]
    fn a_call_is_recalled_only_with_the_very_same_inputs_and_schema() {
        let mut runner = ScriptedRunner::default();
        let schema = json!({
            "type": "object",
            "properties": { "n": { "type": "integer" }, "m": { "type": "integer", "default": 1 } }
        });
        ScriptedRunner::tool(&mut runner, "t", schema.clone(), |_, _| returned(json!({})));
        let tool = Runner::tool(&runner, "t").unwrap();
        let request = CallRequest::new("t", r#"{"n": 2.0}"#).conversation("c");
        let prepared = prepare(&runner, &request, None).unwrap();
        let keys = ReplayedKeys::default();
        assert!(
            keys.recall(&tool, &request).is_none(),
            "nothing remembered yet"
        );

        keys.remember(&request, &prepared);
        let recalled = keys.recall(&tool, &request).expect("remembered");
        assert_eq!(recalled.key, prepared.key);
        assert_eq!(recalled.canonical, r#"{"m":1,"n":2}"#);
        assert_eq!(recalled.fingerprint, prepared.fingerprint);

        // The opposite: every other input is prepared afresh.
        let mut others = vec![
            CallRequest::new("t", r#"{"n": 2}"#).conversation("c"),
            CallRequest::new("t", r#"{"n": 2.0}"#).conversation("d"),
            CallRequest::new("t", r#"{"n": 2.0}"#),
        ];
        let mut keyed = request.clone();
        keyed.key = Some("k".repeat(32));
        let mut principal = request.clone();
        principal.principal = Some("ada".into());
        others.extend([keyed, principal]);
        for other in &others {
            assert!(keys.recall(&tool, other).is_none(), "{other:?}");
        }
        // A tool loaded again is another schema, even with the same text.
        ScriptedRunner::tool(&mut runner, "t", schema, |_, _| returned(json!({})));
        let reloaded = Runner::tool(&runner, "t").unwrap();
        assert!(keys.recall(&reloaded, &request).is_none());
    }
}
