//! Write [justonce] tools in Rust.
//!
//! A justonce tool is a WebAssembly component that an AI agent calls with JSON
//! arguments. It reaches the world only through [`effects::perform`], and the host
//! guards every such call with an idempotency key, so an agent that retries a call
//! never causes a side effect twice.
//!
//! A tool is a `cdylib` crate with a struct, one [`Tool`] impl and one
//! [`export_tool!`]:
//!
//! ```
//! use justonce_guest::{Tool, ToolError, effects, export_tool};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! /// The arguments; their doc comments become the input schema's descriptions.
//! #[derive(Deserialize, JsonSchema)]
//! struct Args {
//!     /// The order the customer has not paid yet.
//!     order_id: u64,
//!     /// Where to send the reminder.
//!     email: String,
//! }
//!
//! #[derive(Serialize)]
//! struct Output {
//!     message_id: String,
//! }
//!
//! #[derive(Serialize)]
//! struct Mail {
//!     to: String,
//!     subject: String,
//! }
//!
//! #[derive(Deserialize)]
//! struct Sent {
//!     message_id: String,
//! }
//!
//! struct Remind;
//!
//! impl Tool for Remind {
//!     type Args = Args;
//!     type Output = Output;
//!     const NAME: &'static str = "remind";
//!     const DESCRIPTION: &'static str = "Emails a customer a payment reminder for one order.";
//!
//!     fn call(args: Args) -> Result<Output, ToolError> {
//!         if !args.email.contains('@') {
//!             return Err(ToolError::new("invalid_email", "The email address has no `@`.")
//!                 .with_details(serde_json::json!({ "email": args.email })));
//!         }
//!         let mail = Mail { to: args.email, subject: format!("Order {} is unpaid", args.order_id) };
//!         // `?` turns an effect failure into a tool error with a stable code.
//!         let sent: Sent = effects::perform("mail", "send", &mail)?;
//!         Ok(Output { message_id: sent.message_id })
//!     }
//! }
//!
//! export_tool!(Remind);
//! # fn main() {}
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the component the host loads.
//!
//! The sequence of effects must follow from the arguments and from earlier
//! responses: the host replays a resumed call's journaled effects by position, and
//! fails closed with [`effects::EffectError::Divergence`] if the tool asks for
//! something else.
//!
//! A tool may ask the person behind the agent before it acts ([`ask`], see
//! [`input`]): the questions and answers are journaled like an effect, so a retry
//! never asks twice.
//!
//! [justonce]: https://example.invalid/justonce

pub mod content;
pub mod effects;
mod error;
pub mod http;
pub mod input;
pub mod log;
mod progress;
pub mod reconcile;
mod schema;

pub use content::{Content, Rich, ToolOutput};
pub use error::ToolError;
pub use input::{Action, Answer, Question, ask, ask_all};
pub use progress::progress;
pub use reconcile::{PendingEffect, Reconcile, Reconciled};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

/// The bindings generated from `wit/`. Not a stable API: use [`Tool`], [`effects`]
/// and [`log`].
#[doc(hidden)]
pub mod __bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "tool",
        pub_export_macro: true,
        export_macro_name: "__justonce_export_world",
        default_bindings_module: "::justonce_guest::__bindings",
    });
}

/// The bindings of the `reconciling-tool` world (a tool that exports `reconcile`),
/// sharing every interface with [`__bindings`]. Not a stable API: use [`Reconcile`].
#[doc(hidden)]
#[allow(clippy::too_many_arguments)] // the generated export glue of `reconcile`'s record
pub mod __reconciling_bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "reconciling-tool",
        with: {
            "justonce:tool/types@0.1.0": crate::__bindings::justonce::tool::types,
            "justonce:tool/effects@0.1.0": crate::__bindings::justonce::tool::effects,
            "justonce:tool/log@0.1.0": crate::__bindings::justonce::tool::log,
            "justonce:tool/content@0.1.0": crate::__bindings::justonce::tool::content,
            "justonce:tool/progress@0.1.0": crate::__bindings::justonce::tool::progress,
            "justonce:tool/input@0.1.0": crate::__bindings::justonce::tool::input,
        },
        pub_export_macro: true,
        export_macro_name: "__justonce_export_reconciling_world",
        default_bindings_module: "::justonce_guest::__reconciling_bindings",
    });
}

/// A tool: its name, what it does, its arguments, and the code that handles a call.
///
/// Export an implementation with [`export_tool!`].
pub trait Tool {
    /// The arguments the agent passes. Their JSON Schema, derived with
    /// [`schemars::JsonSchema`], is the tool's input schema.
    ///
    /// Every object in it is closed (`additionalProperties: false`), as if each
    /// struct had `#[serde(deny_unknown_fields)]`: the host refuses a property the
    /// arguments do not declare, rather than let the tool silently ignore it while
    /// the call's idempotency key counts it. A struct that should take any other
    /// property opts out by saying so, e.g. with
    /// `#[schemars(extend("additionalProperties" = true))]`; a map field or a
    /// `#[serde(flatten)]` map already does. The host also fills in `default`s and
    /// treats `null` for an optional field as leaving it out before computing the
    /// key, so arguments the tool cannot tell apart are one call.
    type Args: DeserializeOwned + JsonSchema;
    /// What a successful call returns to the agent: any `Serialize` type, as JSON,
    /// or a [`Rich`] result of [`Content`] parts.
    type Output: ToolOutput;
    /// The name agents call the tool by: lowercase letters, digits and `_`.
    const NAME: &'static str;
    /// One or two sentences an agent reads to decide when to call the tool.
    const DESCRIPTION: &'static str;
    /// `true` for a tool that only reads (MCP's `readOnlyHint`): it has nothing to
    /// deduplicate, so the host saves none of its outcomes and runs every call, and
    /// stops it with a `read_only_effect` trap if it asks for an effect. Reads such
    /// as [`http::get`](crate::http) are allowed.
    const READ_ONLY: bool = false;

    /// The JSON Schema of the structured result (an object's), which MCP clients
    /// get as the tool's `outputSchema` and check results against; `None` (the
    /// default) declares none. Typically
    /// `Some(schemars::schema_for!(Output))` for an `Output` (or the `T` of a
    /// `Rich<T>`) that derives `JsonSchema`.
    fn output_schema() -> Option<schemars::Schema> {
        None
    }

    /// Handles one call.
    ///
    /// Arguments that do not parse never reach it: the agent gets an
    /// `invalid_arguments` error instead.
    fn call(args: Self::Args) -> Result<Self::Output, ToolError>;
}

/// Exports a [`Tool`] implementation as the component's `describe` and `call`.
///
/// Use it once per crate, at the top level, with the type that implements [`Tool`]:
/// `export_tool!(MyTool);`. The [crate-level example](crate) shows a whole tool.
///
/// A tool that also implements [`Reconcile`] (its own probe of its effects) exports
/// it too with `export_tool!(MyTool, reconcile);`: the component is then of the
/// `reconciling-tool` world.
#[macro_export]
macro_rules! export_tool {
    ($tool:ty, reconcile) => {
        const _: () = {
            struct __JustonceTool;

            impl $crate::__reconciling_bindings::Guest for __JustonceTool {
                fn describe() -> $crate::__bindings::ToolInfo {
                    $crate::__describe::<$tool>()
                }

                fn call(
                    args: ::std::string::String,
                ) -> ::std::result::Result<::std::string::String, $crate::__bindings::ToolError> {
                    $crate::__call::<$tool>(args)
                }

                fn reconcile(
                    effect: $crate::__bindings::justonce::tool::types::PendingEffect,
                ) -> $crate::__bindings::justonce::tool::types::Reconciled {
                    $crate::reconcile::__reconcile::<$tool>(effect)
                }
            }

            $crate::__reconciling_bindings::__justonce_export_reconciling_world!(__JustonceTool with_types_in $crate::__reconciling_bindings);
        };
    };
    ($tool:ty) => {
        const _: () = {
            struct __JustonceTool;

            impl $crate::__bindings::Guest for __JustonceTool {
                fn describe() -> $crate::__bindings::ToolInfo {
                    $crate::__describe::<$tool>()
                }

                fn call(
                    args: ::std::string::String,
                ) -> ::std::result::Result<::std::string::String, $crate::__bindings::ToolError> {
                    $crate::__call::<$tool>(args)
                }
            }

            $crate::__bindings::__justonce_export_world!(__JustonceTool with_types_in $crate::__bindings);
        };
    };
}

/// The keyword at the root of the input schema that marks a read-only tool; the host
/// reads it and removes it from the schema agents see.
const READ_ONLY_KEYWORD: &str = "x-justonce-read-only";

/// The keyword at the root of the input schema that carries the output schema; the
/// host reads it and removes it from the schema agents see.
const OUTPUT_SCHEMA_KEYWORD: &str = "x-justonce-output-schema";

/// The body of the exported `describe`.
#[doc(hidden)]
pub fn __describe<T: Tool>() -> __bindings::ToolInfo {
    let mut schema = schema::input_schema::<T::Args>();
    // In the schema's root, so `tool-info` (the ABI) stays as it is.
    if let Some(root) = schema.as_object_mut() {
        if T::READ_ONLY {
            root.insert(READ_ONLY_KEYWORD.into(), serde_json::Value::Bool(true));
        }
        if let Some(output) = T::output_schema() {
            root.insert(OUTPUT_SCHEMA_KEYWORD.into(), output.to_value());
        }
    }
    __bindings::ToolInfo {
        name: T::NAME.to_owned(),
        description: T::DESCRIPTION.to_owned(),
        input_schema: serde_json::to_string(&schema).expect("a JSON Schema serializes"),
    }
}

/// The body of the exported `call`.
#[doc(hidden)]
pub fn __call<T: Tool>(args: String) -> Result<String, __bindings::ToolError> {
    let args: T::Args = serde_json::from_str(&args).map_err(|e| {
        to_wit(ToolError::new(
            "invalid_arguments",
            format!("The arguments do not match the input schema: {e}"),
        ))
    })?;
    let output = T::call(args).map_err(to_wit)?;
    output.into_json().map_err(|e| {
        to_wit(ToolError::new(
            "invalid_output",
            format!("The tool's output is not serializable: {e}"),
        ))
    })
}

fn to_wit(err: ToolError) -> __bindings::ToolError {
    __bindings::ToolError {
        code: err.code,
        message: err.message,
        details: err.details.map(|d| d.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    struct Args {
        /// How many.
        n: u32,
    }

    struct Double;

    impl Tool for Double {
        type Args = Args;
        type Output = serde_json::Value;
        const NAME: &'static str = "double";
        const DESCRIPTION: &'static str = "Doubles n.";

        fn call(args: Args) -> Result<serde_json::Value, ToolError> {
            if args.n == 0 {
                return Err(
                    ToolError::new("zero", "n is 0").with_details(serde_json::json!({ "n": 0 }))
                );
            }
            Ok(serde_json::json!({ "doubled": args.n * 2 }))
        }
    }

    #[test]
    fn describe_carries_a_2020_12_schema_of_the_args() {
        let info = __describe::<Double>();
        assert_eq!(
            (info.name.as_str(), info.description.as_str()),
            ("double", "Doubles n.")
        );
        let schema: serde_json::Value = serde_json::from_str(&info.input_schema).unwrap();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["properties"]["n"]["description"], "How many.");
        assert_eq!(schema["required"], serde_json::json!(["n"]));
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn a_read_only_tool_says_so_in_its_schema_root_and_others_do_not() {
        struct Look;
        impl Tool for Look {
            type Args = Args;
            type Output = serde_json::Value;
            const NAME: &'static str = "look";
            const DESCRIPTION: &'static str = "Looks.";
            const READ_ONLY: bool = true;
            fn call(_: Args) -> Result<serde_json::Value, ToolError> {
                Ok(serde_json::Value::Null)
            }
        }
        let read_only: serde_json::Value =
            serde_json::from_str(&__describe::<Look>().input_schema).unwrap();
        assert_eq!(read_only[READ_ONLY_KEYWORD], true);
        let other: serde_json::Value =
            serde_json::from_str(&__describe::<Double>().input_schema).unwrap();
        assert!(other.get(READ_ONLY_KEYWORD).is_none());
    }

    #[test]
    fn a_declared_output_schema_travels_in_the_input_schema_root() {
        #[derive(serde::Serialize, JsonSchema)]
        struct Total {
            cents: u64,
        }
        struct Sum;
        impl Tool for Sum {
            type Args = Args;
            type Output = Rich<Total>;
            const NAME: &'static str = "sum";
            const DESCRIPTION: &'static str = "Sums.";
            fn output_schema() -> Option<schemars::Schema> {
                Some(schemars::schema_for!(Total))
            }
            fn call(args: Args) -> Result<Rich<Total>, ToolError> {
                Ok(Rich::structured(Total {
                    cents: args.n.into(),
                }))
            }
        }
        let typed: serde_json::Value =
            serde_json::from_str(&__describe::<Sum>().input_schema).unwrap();
        assert_eq!(typed[OUTPUT_SCHEMA_KEYWORD]["type"], "object");
        assert_eq!(
            typed[OUTPUT_SCHEMA_KEYWORD]["properties"]["cents"]["type"],
            "integer"
        );
        // A `Rich` without parts adds none: its structured value is the JSON.
        assert_eq!(
            __call::<Sum>(r#"{"n":5}"#.into()).unwrap(),
            r#"{"cents":5}"#
        );
        let plain: serde_json::Value =
            serde_json::from_str(&__describe::<Double>().input_schema).unwrap();
        assert!(plain.get(OUTPUT_SCHEMA_KEYWORD).is_none());
    }

    #[test]
    fn call_parses_args_and_serializes_output() {
        assert_eq!(
            __call::<Double>(r#"{"n":21}"#.into()).unwrap(),
            r#"{"doubled":42}"#
        );
    }

    #[test]
    fn unparsable_args_are_invalid_arguments() {
        let err = __call::<Double>(r#"{"n":"x"}"#.into()).unwrap_err();
        assert_eq!(err.code, "invalid_arguments");
        assert!(err.message.contains("invalid type"), "{}", err.message);
    }

    #[test]
    fn tool_errors_keep_their_details_as_json() {
        let err = __call::<Double>(r#"{"n":0}"#.into()).unwrap_err();
        assert_eq!(
            (err.code.as_str(), err.details.as_deref()),
            ("zero", Some(r#"{"n":0}"#))
        );
    }

    #[test]
    fn effect_errors_map_to_stable_codes() {
        let rejected: ToolError =
            effects::EffectError::Rejected(serde_json::json!({ "reason": "declined" })).into();
        assert_eq!(rejected.code, "effect_rejected");
        assert_eq!(
            rejected.details,
            Some(serde_json::json!({ "reason": "declined" }))
        );
        // Read as a sentence, not as escaped JSON; the answer stays in the details.
        let refused: ToolError = effects::EffectError::Rejected(serde_json::json!({
            "error": "invalid_recipient",
            "message": "`x` is not an email address",
        }))
        .into();
        assert_eq!(
            refused.message,
            "effect rejected: invalid_recipient: `x` is not an email address"
        );
        assert_eq!(
            rejected.message,
            r#"effect rejected: {"reason":"declined"}"#
        );
        let unknown: ToolError = effects::EffectError::OutcomeUnknown("timeout".into()).into();
        assert_eq!(unknown.code, "outcome_unknown");
        assert!(unknown.message.contains("safe"));
        let codes: Vec<String> = [
            effects::EffectError::Denied(String::new()),
            effects::EffectError::Divergence(String::new()),
            effects::EffectError::BadResponse(String::new()),
        ]
        .into_iter()
        .map(|e| ToolError::from(e).code)
        .collect();
        assert_eq!(
            codes,
            ["effect_denied", "divergence", "bad_effect_response"]
        );
    }
}
