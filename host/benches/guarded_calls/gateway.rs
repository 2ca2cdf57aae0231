//! Figure (11): what the gateway adds to a call of an upstream MCP server's tool
//! (`[upstreams.NAME]`), over calling that server directly, sequential over stdio.
//!
//! The trivial upstream is `justonce serve` of the `echo` guest (a server that answers
//! in well under a millisecond); the gateway is a second `justonce serve` that offers
//! it as `up_echo`. A fresh call through the gateway is journaled and keyed there,
//! then sent upstream (where it runs as a fresh call too, under the key it was
//! handed); a replayed one is answered by the gateway alone.

use std::path::Path;

use serde_json::json;

use super::{Mcp, StdioMcp, justonce_bin, median, percentile, sample, scaled, tools_dir};

/// Figure (11), printed: `JUSTONCE_BENCH_ONLY=gateway` runs it alone.
pub(super) fn figures(dir: &Path) {
    println!("\n## (11) The gateway's added latency over calling the upstream directly (stdio)\n");
    let calls = scaled(300);
    let upstream_dir = dir.join("gateway-upstream");
    let gateway_dir = dir.join("gateway");
    std::fs::create_dir_all(&upstream_dir).expect("upstream dir");
    std::fs::create_dir_all(&gateway_dir).expect("gateway dir");
    let tools = tools_dir(&upstream_dir);
    let command = [
        justonce_bin().to_string_lossy().into_owned(),
        "--db".into(),
        upstream_dir.join("up.db").display().to_string(),
        "--tools".into(),
        tools.display().to_string(),
        "serve".into(),
    ];
    std::fs::write(
        gateway_dir.join("justonce.toml"),
        format!(
            "[upstreams.up]\ncommand = {}\nprefix = \"up_\"\n",
            serde_json::to_string(&command).expect("a JSON array is a TOML array")
        ),
    )
    .expect("write justonce.toml");

    let mut direct = StdioMcp::start(&upstream_dir);
    let mut gateway = StdioMcp::start(&gateway_dir);
    // The upstream's first call starts it.
    gateway.call("up_echo", json!({ "message": "warm" }));
    direct.call("echo", json!({ "message": "again" }));
    gateway.call("up_echo", json!({ "message": "again" }));
    let (mut direct_fresh, mut gateway_fresh) = (Vec::new(), Vec::new());
    let (mut direct_replayed, mut gateway_replayed) = (Vec::new(), Vec::new());
    // Interleaved, so a burst of load on a shared machine hits both alike.
    for round in 0..calls {
        direct_fresh.extend(sample(1, |_| {
            direct.call("echo", json!({ "message": format!("d{round}") }));
        }));
        gateway_fresh.extend(sample(1, |_| {
            gateway.call("up_echo", json!({ "message": format!("g{round}") }));
        }));
        direct_replayed.extend(sample(1, |_| {
            direct.call("echo", json!({ "message": "again" }));
        }));
        gateway_replayed.extend(sample(1, |_| {
            gateway.call("up_echo", json!({ "message": "again" }));
        }));
    }
    println!(
        "| call | direct median (p10–p90) | through the gateway | added | calls |\n| --- | --- | --- | --- | --- |"
    );
    for (name, direct, through) in [
        ("fresh", &mut direct_fresh, &mut gateway_fresh),
        ("replayed", &mut direct_replayed, &mut gateway_replayed),
    ] {
        let (d, g) = (median(direct), median(through));
        println!(
            "| {name} | {d:.1} µs ({:.1}–{:.1}) | {g:.1} µs ({:.1}–{:.1}) | {:+.1} µs | {calls} |",
            percentile(direct, 0.1),
            percentile(direct, 0.9),
            percentile(through, 0.1),
            percentile(through, 0.9),
            g - d,
        );
    }
    println!(
        "\nA fresh call through the gateway is the direct call plus the gateway's own journal record and effect (each committed with the CLI's durability) and a hop over a pipe; a replayed one never reaches the upstream."
    );
}
