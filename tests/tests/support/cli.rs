//! Running the `justonce` binary as a harness would.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// The `justonce` binary, with `--db db` when given, and none of justonce's own
/// variables inherited from the test's environment. `JUSTONCE_TEST_BIN` names another
/// build of it (where several checkouts share one target directory).
pub fn justonce_command(db: Option<&Path>) -> Command {
    let bin = std::env::var_os("JUSTONCE_TEST_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_justonce").into());
    let mut command = Command::new(bin);
    if let Some(db) = db {
        command.arg("--db").arg(db);
    }
    for variable in [
        "JUSTONCE_TOOLS",
        "JUSTONCE_DB",
        "JUSTONCE_CONFIG",
        "JUSTONCE_HTTP_CONFIG",
        "JUSTONCE_LEASE_MS",
        "JUSTONCE_TOKEN",
        justonce::__private::FAULT_ENV,
        "JUSTONCE_REGISTRY_USERNAME",
        "JUSTONCE_REGISTRY_PASSWORD",
        // No traces unless a test names a collector.
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
    ] {
        command.env_remove(variable);
    }
    command
}

/// The one JSON value on stdout, or a panic that shows both streams.
pub fn json_of(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}
