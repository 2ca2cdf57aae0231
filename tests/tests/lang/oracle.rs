//! The oracle of the invocation key (see `crate::oracle`) through a Python and a
//! JavaScript tool, for the shapes their SDKs generate: `oracle_py` and `oracle_js`
//! in `tests/guests_lang/` return their arguments as the SDK parsed them.

use std::sync::{Arc, LazyLock};

use justonce::Runtime;
use proptest::prelude::*;

use super::{limits, state_dir, toolchain};
use crate::oracle::{
    Node, Prop, Target, Values, address, check_tool, defaulted, f64s, i64s, obj, one_of_or_text,
    optional, prop, string, text, u64s,
};

/// `tool`, from the component `built` (by [`toolchain`]), compiled through the
/// languages' compile cache.
fn target(tool: &'static str, built: Result<std::path::PathBuf, String>) -> Target {
    let path = built.unwrap_or_else(|e| panic!("cannot build {tool}: {e}"));
    let mut runtime = Runtime::new(limits()).expect("runtime");
    runtime.set_compile_cache(state_dir().join("cache"));
    runtime
        .load_file(&path)
        .unwrap_or_else(|e| panic!("{tool} {}: {e}", path.display()));
    Target {
        // A call of these tools takes milliseconds, not microseconds.
        cases: 48,
        shrink_iters: 300,
        ..Target::new(tool, Arc::new(runtime), None)
    }
}

static ORACLE_PY: LazyLock<Target> = LazyLock::new(|| {
    target(
        "oracle_py",
        toolchain::build_python("tests/guests_lang/oracle_py"),
    )
});

static ORACLE_JS: LazyLock<Target> = LazyLock::new(|| {
    target(
        "oracle_js",
        toolchain::build_js("tests/guests_lang/oracle_js"),
    )
});

/// The Python tool's discriminated union: `Cancel | Ship` by `kind`.
fn action_py() -> impl Strategy<Value = Node> + Clone {
    let kind = |k: &str| prop("kind", string(k.into()));
    prop_oneof![
        one_of_or_text(&["now", "later"]).prop_map(move |at| obj(vec![
            kind("cancel"),
            defaulted("at", at, "now".into(), string),
        ])),
        (one_of_or_text(&["ups", "dhl"]), any::<bool>()).prop_map(move |(carrier, express)| obj(
            vec![
                kind("ship"),
                prop("carrier", string(carrier)),
                defaulted("express", express, false, Node::Bool),
            ]
        )),
    ]
}

fn python_args() -> BoxedStrategy<Node> {
    let label = prop_oneof![
        Just(prop("label", Node::Null)),
        one_of_or_text(&["none", "x"]).prop_map(|l| defaulted("label", l, "none".into(), string)),
    ];
    (
        (u64s(), i64s(), f64s(), text(), address(), action_py()),
        (
            one_of_or_text(&["EUR", "USD"]),
            prop::option::of(text()),
            label,
            prop::sample::select(vec!["low", "high"]),
        ),
        (
            prop::option::of(address()),
            prop::option::of(action_py()),
            prop::collection::vec(address(), 0..3),
            prop::collection::btree_map(text(), i64s(), 0..3),
        ),
    )
        .prop_map(
            |(
                (id, delta, ratio, name, address, action),
                (currency, note, label, level),
                (shipping, next, lines, counts),
            )| {
                obj(vec![
                    prop("id", Node::U64(id)),
                    prop("delta", Node::I64(delta)),
                    prop("ratio", Node::F64(ratio)),
                    prop("name", string(name)),
                    prop("address", address),
                    prop("action", action),
                    defaulted("currency", currency, "EUR".into(), string),
                    optional("note", note.map(string)),
                    label,
                    defaulted("level", level.to_owned(), "low".into(), string),
                    optional("shipping", shipping),
                    optional("next", next),
                    Prop {
                        omittable: lines.is_empty(),
                        ..prop("lines", Node::Arr(lines))
                    },
                    Prop {
                        omittable: counts.is_empty(),
                        ..prop(
                            "counts",
                            obj(counts
                                .into_iter()
                                .map(|(k, v)| prop(&k, Node::I64(v)))
                                .collect()),
                        )
                    },
                ])
            },
        )
        .boxed()
}

fn js_args() -> BoxedStrategy<Node> {
    let line = (text(), prop_oneof![Just(1i64), -3..100i64]).prop_map(|(sku, qty)| {
        obj(vec![
            prop("sku", string(sku)),
            defaulted("qty", qty, 1, Node::I64),
        ])
    });
    (
        (
            u64s(),
            prop_oneof![Just(0), u64s()],
            i64s(),
            f64s(),
            text(),
            address(),
        ),
        (
            one_of_or_text(&["EUR", "USD"]),
            prop::option::of(text()),
            prop::sample::select(vec!["low", "high"]),
            prop::option::of(address()),
            prop::collection::vec(line, 0..3),
        ),
    )
        .prop_map(
            |((id, big, delta, ratio, name, address), (currency, note, level, shipping, lines))| {
                obj(vec![
                    prop("id", Node::U64(id)),
                    defaulted("big", big, 0, Node::U64),
                    prop("delta", Node::I64(delta)),
                    prop("ratio", Node::F64(ratio)),
                    prop("name", string(name)),
                    prop("address", address),
                    defaulted("currency", currency, "EUR".into(), string),
                    optional("note", note.map(string)),
                    defaulted("level", level.to_owned(), "low".into(), string),
                    optional("shipping", shipping),
                    Prop {
                        omittable: lines.is_empty(),
                        ..prop("lines", Node::Arr(lines))
                    },
                ])
            },
        )
        .boxed()
}

#[test]
fn one_key_exactly_when_the_python_tool_sees_one_value() {
    check_tool(&ORACLE_PY, python_args as Values);
}

#[test]
fn one_key_exactly_when_the_javascript_tool_sees_one_value() {
    check_tool(&ORACLE_JS, js_args as Values);
}

/// What a tool of each language receives for integers a double cannot hold, run
/// outside the host (the text exactly as sent): the same digits, returned as they
/// came (a JavaScript tool gets a `BigInt` for them, see guest-sdk/js/README.md).
#[test]
fn integers_past_2_53_reach_python_and_javascript_tools_exactly() {
    for target in [&*ORACLE_PY, &*ORACLE_JS] {
        for (id, delta) in [
            ("9007199254740993", "-9007199254740993"),
            ("18446744073709551615", "-9223372036854775808"),
            ("9007199254740992", "9007199254740991"),
        ] {
            let args = format!(
                r#"{{"id":{id},"delta":{delta},"ratio":1,"name":"","address":{{"street":""}},"action":{{"kind":"cancel"}}}}"#
            );
            let args = if target.tool == "oracle_js" {
                args.replace(r#","action":{"kind":"cancel"}"#, "")
            } else {
                args
            };
            let out = target
                .runtime
                .call_unguarded(target.tool, &args)
                .unwrap_or_else(|e| panic!("{}: {e}", target.tool));
            assert!(
                out.contains(&format!(r#""id":{id}"#))
                    && out.contains(&format!(r#""delta":{delta}"#)),
                "{} got {id} and {delta} as: {out}",
                target.tool
            );
        }
    }
}

/// One rule in every SDK (Rust's `Option`, Python's `Optional` or `= None`, the
/// JavaScript SDK's `.optional()`): an optional property may be left out or `null`,
/// and the schema the tool advertises says both, so an agent that reads it is
/// allowed what the tool accepts. The opposite: a required property refuses `null`.
#[test]
fn optional_properties_admit_null_in_the_advertised_schema_in_every_language() {
    let mut rust = Runtime::new(limits()).expect("runtime");
    rust.load_file(std::path::Path::new(
        justonce_tests::guests::PARSED_ECHO_COMPONENT,
    ))
    .expect("parsed_echo loads");
    let tools = [
        ("parsed_echo", &rust),
        (ORACLE_PY.tool, &*ORACLE_PY.runtime),
        (ORACLE_JS.tool, &*ORACLE_JS.runtime),
    ];
    for (tool, runtime) in tools {
        let schema = &runtime.tool(tool).expect("loaded").input_schema;
        let required = schema["required"].as_array().expect("required properties");
        // A property's schema, with the definitions its `$ref`s name.
        let admits_null = |name: &str| {
            let mut property = schema["properties"][name].clone();
            if let Some(defs) = schema.get("$defs") {
                property["$defs"] = defs.clone();
            }
            jsonschema::is_valid(&property, &serde_json::Value::Null)
        };
        for optional in ["note", "shipping"] {
            assert!(
                !required.contains(&optional.into()),
                "{tool}: {optional} is optional: {schema:#}"
            );
            assert!(
                admits_null(optional),
                "{tool} accepts null for {optional}, so its schema must say so: {schema:#}"
            );
        }
        assert!(required.contains(&"name".into()), "{tool}: {schema:#}");
        assert!(!admits_null("name"), "{tool}: a required string is no null");
    }
}
