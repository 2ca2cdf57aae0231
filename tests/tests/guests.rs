//! Every guest in `tests/guests/` is run by some test: the build script's
//! `foreach_guest!` names each guest it built, and a guest without an entry in
//! [`run_in`] does not compile (wasmtime's `foreach_p2!(assert_test_exists)`).
//! A test then checks that each module named there really runs the guest.

use std::path::Path;

/// The integration test modules (files in `tests/tests/`) that run each guest, by
/// the guest's crate name. A new guest needs an entry here, and a test.
#[allow(non_upper_case_globals)]
mod run_in {
    pub const chatty: &[&str] = &["sandbox"];
    pub const sleep_forever: &[&str] = &["hostile"];
    pub const hostile_outputs: &[&str] = &["hostile"];
    pub const leak_handles: &[&str] = &["hostile"];
    pub const deep_recursion: &[&str] = &["sandbox"];
    pub const diverge: &[&str] = &["determinism", "crash"];
    pub const diverge_v2: &[&str] = &["determinism", "crash"];
    pub const echo: &[&str] = &["bad_input", "fast_path", "hostile", "loading", "sandbox"];
    pub const effect_flood: &[&str] = &["sandbox"];
    pub const effect_then_trap: &[&str] = &["retry"];
    pub const fail: &[&str] = &["retry"];
    pub const http_fetch: &[&str] = &["http", "first_record", "hostile"];
    pub const kv_put: &[&str] = &["contract", "fast_path", "hostile", "sandbox"];
    pub const loop_forever: &[&str] = &["sandbox"];
    pub const memory_bomb: &[&str] = &["sandbox", "fast_path"];
    pub const open_socket: &[&str] = &["loading", "sandbox"];
    pub const panics: &[&str] = &["bad_input"];
    pub const parsed_echo: &[&str] = &["oracle"];
    pub const asks_refund: &[&str] = &["ask", "mcp_ask", "mcp_elicit", "mcp_elicit_python"];
    pub const payments_refund: &[&str] = &["contract", "retry", "lease", "resolve", "mcp_calls"];
    pub const raw_output: &[&str] = &["bad_input", "sandbox"];
    pub const read_env: &[&str] = &["sandbox"];
    pub const read_file: &[&str] = &["sandbox"];
    pub const read_only: &[&str] = &["read_only"];
    pub const reconcile_mail: &[&str] = &["reconcile"];
    pub const rich_receipt: &[&str] = &["rich"];
    pub const conformance_ask_elicitation: &[&str] = &["mcp_conformance_next"];
    pub const conformance_ask_request_state: &[&str] = &["mcp_conformance_next"];
    pub const conformance_ask_multi_round: &[&str] = &["mcp_conformance_next"];
    pub const conformance_ask_tampered_state: &[&str] = &["mcp_conformance_next"];
    pub const conformance_ask_capabilities: &[&str] = &["mcp_conformance_next"];
    pub const conformance_streaming_elicitation: &[&str] = &["mcp_conformance_next"];
    pub const conformance_simple_text: &[&str] = &["mcp_conformance"];
    pub const conformance_error: &[&str] = &["mcp_conformance"];
    pub const conformance_image: &[&str] = &["mcp_conformance"];
    pub const conformance_audio: &[&str] = &["mcp_conformance"];
    pub const conformance_embedded_resource: &[&str] = &["mcp_conformance"];
    pub const conformance_mixed_content: &[&str] = &["mcp_conformance"];
    pub const conformance_logging: &[&str] = &["mcp_conformance"];
    pub const conformance_progress: &[&str] = &["mcp_conformance", "mcp_progress"];
    pub const conformance_reconnection: &[&str] = &["mcp_conformance"];
    pub const conformance_json_schema: &[&str] = &["mcp_conformance"];
    pub const conformance_elicitation: &[&str] = &["mcp_conformance"];
    pub const conformance_elicitation_defaults: &[&str] = &["mcp_conformance"];
    pub const conformance_elicitation_enums: &[&str] = &["mcp_conformance"];
    pub const conformance_greet: &[&str] = &["mcp_conformance_next"];
    pub const conformance_slow_compute: &[&str] = &["mcp_conformance_next"];
    pub const conformance_failing_job: &[&str] = &["mcp_conformance_next"];
    pub const conformance_protocol_error_job: &[&str] = &["mcp_conformance_next"];
    pub const conformance_logging_tool: &[&str] = &["mcp_conformance_next"];
    pub const slow_mail: &[&str] = &["mcp_tasks", "mcp_tasks_python"];
    pub const conformance_confirm_delete: &[&str] = &["mcp_conformance_next"];
    pub const conformance_multi_input: &[&str] = &["mcp_conformance_next"];
    pub const conformance_tool_with_task: &[&str] = &["mcp_conformance_next"];
    pub const time_and_random: &[&str] = &["determinism", "crash"];
}

/// Fails to compile for a guest that has no entry in [`run_in`].
macro_rules! assert_test_exists {
    ($guest:ident) => {
        const _: &[&str] = run_in::$guest;
    };
}

justonce_tests::foreach_guest!(assert_test_exists);

#[test]
fn each_module_said_to_run_a_guest_names_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tests");
    let mut entries: Vec<(&str, &[&str])> = Vec::new();
    macro_rules! entry {
        ($guest:ident) => {
            entries.push((stringify!($guest), run_in::$guest));
        };
    }
    justonce_tests::foreach_guest!(entry);
    assert_eq!(entries.len(), justonce_tests::guests::ALL.len());

    for (guest, modules) in entries {
        // By tool name (`"echo"`) or by path constant (`ECHO_COMPONENT`).
        let quoted = format!("\"{guest}\"");
        let constant = format!("{}_COMPONENT", guest.to_uppercase());
        for module in modules {
            let path = dir.join(format!("{module}.rs"));
            let source = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{guest}: no test module {}: {e}", path.display()));
            assert!(
                source.contains(&quoted) || source.contains(&constant),
                "{guest}: {module}.rs names neither {quoted} nor {constant}"
            );
        }
    }
}
