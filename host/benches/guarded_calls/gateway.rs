//! Figure (11): what the gateway adds to a call of an upstream MCP server's tool
//! (`[upstreams.NAME]`), over calling that server directly, sequential: an upstream
//! over stdio and one over Streamable HTTP, the gateway itself driven over stdio.
//!
//! The trivial upstream is `justonce serve` of the `echo` guest (a server that answers
//! in well under a millisecond); the gateway is a second `justonce serve` that offers
//! it as `up_echo`. A fresh call through the gateway is journaled and keyed there,
//! then sent upstream (where it runs as a fresh call too, under the key it was
//! handed); a replayed one is answered by the gateway alone.

use std::path::Path;

use serde_json::json;

use super::{HttpMcp, Mcp, StdioMcp, justonce_bin, median, percentile, sample, scaled, tools_dir};

/// Figure (11), printed: `JUSTONCE_BENCH_ONLY=gateway` runs it alone.
pub(super) fn figures(dir: &Path) {
    println!("\n## (11) The gateway's added latency over calling the upstream directly\n");
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
    let stdio = measure(&mut direct, &mut gateway, calls);

    // The same upstream over Streamable HTTP (a bearer token, a session).
    let http_upstream_dir = dir.join("gateway-upstream-http");
    let http_gateway_dir = dir.join("gateway-http");
    std::fs::create_dir_all(&http_upstream_dir).expect("upstream dir");
    std::fs::create_dir_all(&http_gateway_dir).expect("gateway dir");
    let mut direct = HttpMcp::start(&http_upstream_dir);
    let addr = direct
        .stream
        .get_ref()
        .peer_addr()
        .expect("the server's address");
    std::fs::write(
        http_gateway_dir.join("justonce.toml"),
        format!(
            "[upstreams.up]\nurl = \"http://{addr}/mcp\"\nheaders = {{ Authorization = \"Bearer {}\" }}\nprefix = \"up_\"\n",
            direct.token
        ),
    )
    .expect("write justonce.toml");
    let mut gateway = StdioMcp::start(&http_gateway_dir);
    let http = measure(&mut direct, &mut gateway, calls);

    println!(
        "| upstream over | call | direct median (p10–p90) | through the gateway | added | calls |\n| --- | --- | --- | --- | --- | --- |"
    );
    for (transport, figures) in [("stdio", stdio), ("HTTP", http)] {
        for (name, mut direct, mut through) in figures {
            let (d, g) = (median(&mut direct), median(&mut through));
            println!(
                "| {transport} | {name} | {d:.1} µs ({:.1}–{:.1}) | {g:.1} µs ({:.1}–{:.1}) | {:+.1} µs | {calls} |",
                percentile(&mut direct, 0.1),
                percentile(&mut direct, 0.9),
                percentile(&mut through, 0.1),
                percentile(&mut through, 0.9),
                g - d,
            );
        }
    }
    println!(
        "\nA fresh call through the gateway is the direct call plus the gateway's own journal record and effect (each committed with the CLI's durability) and a hop over a pipe; a replayed one never reaches the upstream."
    );
}

/// Fresh and replayed calls of `echo` directly and of `up_echo` through `gateway`,
/// interleaved (a burst of load on a shared machine hits both alike): for each kind,
/// its name, the direct samples and the gateway's.
fn measure(
    direct: &mut dyn Mcp,
    gateway: &mut dyn Mcp,
    calls: usize,
) -> [(&'static str, Vec<f64>, Vec<f64>); 2] {
    // The upstream's first call starts (or connects to) it.
    gateway.call("up_echo", json!({ "message": "warm" }));
    direct.call("echo", json!({ "message": "again" }));
    gateway.call("up_echo", json!({ "message": "again" }));
    let (mut direct_fresh, mut gateway_fresh) = (Vec::new(), Vec::new());
    let (mut direct_replayed, mut gateway_replayed) = (Vec::new(), Vec::new());
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
    [
        ("fresh", direct_fresh, gateway_fresh),
        ("replayed", direct_replayed, gateway_replayed),
    ]
}
