//! Figure (11): what the gateway adds to a call of an upstream MCP server's tool
//! (`[upstreams.NAME]`), over calling that server directly, sequential: an upstream
//! over stdio and one over Streamable HTTP, the gateway itself driven over stdio.
//!
//! The trivial upstream is `justonce serve` of the `echo` guest (a server that answers
//! in well under a millisecond); the gateway is a second `justonce serve` that offers
//! it as `up_echo`. A fresh call through the gateway is journaled and keyed there,
//! then sent upstream (where it runs as a fresh call too, under the key it was
//! handed); a replayed one is answered by the gateway alone.
//!
//! The gateway's journal is `full`, the default; the same gateway on a `normal`
//! journal runs its fresh calls in rounds of its own after them, so what its two
//! durable points' syncs cost in place is the difference, printed beside a bare
//! `fdatasync` of this machine's disk (back to back, and after the idle gap a
//! call's syncs come after).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    HttpMcp, Mcp, StdioMcp, justonce_bin, median, micros, percentile, sample, scaled, tools_dir,
};

/// Figure (11), printed: `JUSTONCE_BENCH_ONLY=gateway` runs it alone. With
/// `JUSTONCE_BENCH_AB=PATH` (another build of `justonce`, "A"), only the fresh calls,
/// of A and of this build (or `JUSTONCE_BENCH_BIN`'s, "B") in alternating rounds.
pub(super) fn figures(dir: &Path) {
    if let Some(a) = std::env::var_os("JUSTONCE_BENCH_AB") {
        return a_against_b(dir, &a, &justonce_bin());
    }
    println!("\n## (11) The gateway's added latency over calling the upstream directly\n");
    let calls = scaled(300);
    let upstream_dir = dir.join("gateway-upstream");
    let gateway_dir = dir.join("gateway");
    let command = upstream_command(&justonce_bin(), &upstream_dir, &gateway_dir);
    let normal_dir = dir.join("gateway-normal");
    normal_gateway(&gateway_dir, &normal_dir, |toml| {
        // Its own upstream process, on a database of its own.
        toml.replace("up.db", "up-normal.db")
    });
    let mut direct = StdioMcp::start(&upstream_dir);
    let mut gateway = StdioMcp::start(&gateway_dir);
    let (stdio, stdio_cpu) = measure(&mut direct, &mut gateway, calls);
    drop(gateway);
    let stdio_normal = measure_fresh(&mut direct, &mut StdioMcp::start(&normal_dir), calls);
    let hung = hung_beside(dir, &command, 1);
    // Issue 53's figure: eight upstreams, one of them silent, against the seven
    // healthy ones alone.
    let eight = hung_beside(dir, &command, 7);

    // The same upstream over Streamable HTTP (a bearer token, a session).
    let http_upstream_dir = dir.join("gateway-upstream-http");
    let http_gateway_dir = dir.join("gateway-http");
    let mut direct = HttpMcp::start(&http_upstream_dir);
    http_gateway(&direct, &http_gateway_dir);
    let http_normal_dir = dir.join("gateway-http-normal");
    normal_gateway(&http_gateway_dir, &http_normal_dir, |toml| toml.to_owned());
    let mut gateway = StdioMcp::start(&http_gateway_dir);
    let (http, http_cpu) = measure(&mut direct, &mut gateway, calls);
    drop(gateway);
    let http_normal = measure_fresh(&mut direct, &mut StdioMcp::start(&http_normal_dir), calls);
    let syncs = fsync_after_idle(dir);

    println!(
        "| upstream over | call | direct median (p10–p90) | through the gateway | added | calls |\n| --- | --- | --- | --- | --- | --- |"
    );
    let mut over_normal = Vec::new();
    for (transport, figures, (mut direct_then, mut normal)) in
        [("stdio", stdio, stdio_normal), ("HTTP", http, http_normal)]
    {
        for (name, mut direct, mut through) in figures {
            let added = print_row(transport, name, &mut direct, &mut through, calls);
            if name == "fresh" {
                let normal_added = print_row(
                    transport,
                    "fresh, the gateway's journal `normal`",
                    &mut direct_then,
                    &mut normal,
                    calls,
                );
                over_normal.push((transport, added - normal_added));
            }
        }
    }
    println!(
        "\nThe gateway's journal is `full` (the default: its claim synced before the send, its outcome before the answer) except in the `normal` rows (committed, not synced: the same configuration on a journal of its own, its fresh calls and the direct ones in rounds of their own after the others). `full`'s added minus `normal`'s, the gateway's two syncs in place: {}. A bare `fdatasync` of three WAL-sized frames (24 + 4 096 bytes each) on this machine's disk: {:.1} µs back to back, {:.1} µs ({:.1}–{:.1}) after 1 ms idle, as the calls' syncs come.",
        over_normal
            .iter()
            .map(|(transport, cost)| format!("{transport} {cost:+.1} µs"))
            .collect::<Vec<_>>()
            .join(", "),
        syncs.back_to_back,
        syncs.after_idle,
        syncs.after_idle_p10,
        syncs.after_idle_p90,
    );
    println!(
        "\nCPU a round (one fresh and one replayed call each way; 10 ms ticks over the rounds): over stdio the direct server {:.0} µs, the gateway {:.0} µs (its upstream not counted); over HTTP the server (called directly and as the gateway's upstream) {:.0} µs, the gateway {:.0} µs.",
        stdio_cpu.0, stdio_cpu.1, http_cpu.0, http_cpu.1
    );
    print_hung(hung);
    print_hung(eight);
    println!(
        "\nA fresh call through the gateway is the direct call plus the gateway's own journal record and effect (each committed with the CLI's durability) and a hop over a pipe; a replayed one never reaches the upstream."
    );
}

/// The direct server of `bin` in `upstream_dir` and a gateway in `gateway_dir` that
/// offers its tools as `up_*` over stdio: the command that starts the upstream.
fn upstream_command(bin: &std::ffi::OsStr, upstream_dir: &Path, gateway_dir: &Path) -> [String; 8] {
    std::fs::create_dir_all(upstream_dir).expect("upstream dir");
    std::fs::create_dir_all(gateway_dir).expect("gateway dir");
    let tools = tools_dir(upstream_dir);
    let command = [
        bin.to_string_lossy().into_owned(),
        "--db".into(),
        upstream_dir.join("up.db").display().to_string(),
        "--tools".into(),
        tools.display().to_string(),
        "serve".into(),
        // As the direct `serve` runs (see `super::serve_with`): the comparison is of the
        // gateway alone, not of a delivery poll on one side only.
        "--deliver-every-ms".into(),
        "0".into(),
    ];
    std::fs::write(
        gateway_dir.join("justonce.toml"),
        format!(
            "[upstreams.up]\ncommand = {}\nprefix = \"up_\"\n",
            serde_json::to_string(&command).expect("a JSON array is a TOML array")
        ),
    )
    .expect("write justonce.toml");
    command
}

/// A gateway in `gateway_dir` offering the tools of the HTTP server `direct` as `up_*`.
fn http_gateway(direct: &HttpMcp, gateway_dir: &Path) {
    std::fs::create_dir_all(gateway_dir).expect("gateway dir");
    let addr = direct
        .stream
        .get_ref()
        .peer_addr()
        .expect("the server's address");
    std::fs::write(
        gateway_dir.join("justonce.toml"),
        format!(
            "[upstreams.up]\nurl = \"http://{addr}/mcp\"\nheaders = {{ Authorization = \"Bearer {}\" }}\nprefix = \"up_\"\n",
            direct.token
        ),
    )
    .expect("write justonce.toml");
}

/// Fresh calls only, of build `a` and build `b` each directly and through its own
/// gateway (its upstream the same build), over stdio and over HTTP: in each round
/// one call of each of the four, A's pair first in even rounds and B's in odd ones,
/// so a burst of load on a shared machine hits both builds alike. Printed: each
/// build's added latency (the median and 10th–90th percentile of the per-round
/// differences, gateway minus direct), and B's minus A's.
fn a_against_b(dir: &Path, a: &std::ffi::OsStr, b: &std::ffi::OsStr) {
    println!(
        "\n## (11) A/B: the gateway's added latency, fresh calls, two builds in alternating rounds\n"
    );
    println!("A: {}\nB: {}\n", a.to_string_lossy(), b.to_string_lossy());
    let calls = scaled(300);
    println!(
        "| upstream over | build | direct median | through the gateway | added: median of the rounds (p10–p90) | rounds |\n| --- | --- | --- | --- | --- | --- |"
    );
    for transport in ["stdio", "HTTP"] {
        let mut pairs: Vec<(Box<dyn Mcp>, Box<dyn Mcp>)> = Vec::new();
        for (name, bin) in [("a", a), ("b", b)] {
            let upstream_dir = dir.join(format!("ab-{transport}-{name}-upstream"));
            let gateway_dir = dir.join(format!("ab-{transport}-{name}-gateway"));
            let mut direct: Box<dyn Mcp> = if transport == "stdio" {
                upstream_command(bin, &upstream_dir, &gateway_dir);
                Box::new(StdioMcp::start_with(bin, &upstream_dir))
            } else {
                std::fs::create_dir_all(&upstream_dir).expect("upstream dir");
                let direct = HttpMcp::start_with(bin, &upstream_dir);
                http_gateway(&direct, &gateway_dir);
                Box::new(direct)
            };
            let mut gateway: Box<dyn Mcp> = Box::new(StdioMcp::start_with(bin, &gateway_dir));
            wait_ready(gateway.as_mut());
            gateway.call("up_echo", json!({ "message": "warm" }));
            direct.call("echo", json!({ "message": "warm" }));
            pairs.push((direct, gateway));
        }
        // Per build: direct samples, gateway samples, per-round differences.
        let mut taken = [
            (Vec::new(), Vec::new(), Vec::new()),
            (Vec::new(), Vec::new(), Vec::new()),
        ];
        for round in 0..calls {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let (direct, gateway) = &mut pairs[which];
                let d = sample(1, |_| {
                    direct.call("echo", json!({ "message": format!("d{round}") }));
                })[0];
                let g = sample(1, |_| {
                    gateway.call("up_echo", json!({ "message": format!("g{round}") }));
                })[0];
                taken[which].0.push(d);
                taken[which].1.push(g);
                taken[which].2.push(g - d);
            }
        }
        let mut added = [0.0; 2];
        for (which, (direct, through, differences)) in taken.iter_mut().enumerate() {
            added[which] = median(differences);
            println!(
                "| {transport} | {} | {:.1} µs | {:.1} µs | {:+.1} µs ({:+.1} to {:+.1}) | {calls} |",
                ["A", "B"][which],
                median(direct),
                median(through),
                added[which],
                percentile(differences, 0.1),
                percentile(differences, 0.9),
            );
        }
        println!(
            "| {transport} | B − A | | | {:+.1} µs | |",
            added[1] - added[0]
        );
    }
}

/// Prints one row of (11)'s first table, `name`'s calls over `transport`: the
/// direct samples and those through the gateway, their medians with the 10th–90th
/// percentiles; the added figure (median minus median) is printed and returned.
fn print_row(
    transport: &str,
    name: &str,
    direct: &mut [f64],
    through: &mut [f64],
    calls: usize,
) -> f64 {
    let (d, g) = (median(direct), median(through));
    println!(
        "| {transport} | {name} | {d:.1} µs ({:.1}–{:.1}) | {g:.1} µs ({:.1}–{:.1}) | {:+.1} µs | {calls} |",
        percentile(direct, 0.1),
        percentile(direct, 0.9),
        percentile(through, 0.1),
        percentile(through, 0.9),
        g - d,
    );
    g - d
}

/// Fresh and replayed calls of `echo` directly and of `up_echo` through `gateway`,
/// interleaved (a burst of load on a shared machine hits both alike): for each kind,
/// its name, the direct samples and the gateway's; and the CPU µs a round of the
/// direct server's process and of the gateway's.
#[allow(clippy::type_complexity)]
fn measure(
    direct: &mut dyn Mcp,
    gateway: &mut dyn Mcp,
    calls: usize,
) -> ([(&'static str, Vec<f64>, Vec<f64>); 2], (f64, f64)) {
    // `serve` answers before its upstreams are ready: their tools come after.
    wait_ready(gateway);
    gateway.call("up_echo", json!({ "message": "warm" }));
    direct.call("echo", json!({ "message": "again" }));
    gateway.call("up_echo", json!({ "message": "again" }));
    let (mut direct_fresh, mut gateway_fresh) = (Vec::new(), Vec::new());
    let (mut direct_replayed, mut gateway_replayed) = (Vec::new(), Vec::new());
    let cpu_of = |pid: u32| super::cpu::of(pid, false).unwrap_or(0.0);
    let (direct_pid, gateway_pid) = (direct.pid(), gateway.pid());
    let cpu_before = (cpu_of(direct_pid), cpu_of(gateway_pid));
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
    let per_round = |before: f64, pid: u32| (cpu_of(pid) - before) / calls as f64 * 1e6;
    (
        [
            ("fresh", direct_fresh, gateway_fresh),
            ("replayed", direct_replayed, gateway_replayed),
        ],
        (
            per_round(cpu_before.0, direct_pid),
            per_round(cpu_before.1, gateway_pid),
        ),
    )
}

/// Fresh calls of `echo` directly and of `up_echo` through `gateway`, interleaved:
/// the direct samples and the gateway's.
fn measure_fresh(
    direct: &mut dyn Mcp,
    gateway: &mut dyn Mcp,
    calls: usize,
) -> (Vec<f64>, Vec<f64>) {
    wait_ready(gateway);
    gateway.call("up_echo", json!({ "message": "warm" }));
    let (mut direct_fresh, mut gateway_fresh) = (Vec::new(), Vec::new());
    for round in 0..calls {
        direct_fresh.extend(sample(1, |_| {
            direct.call("echo", json!({ "message": format!("e{round}") }));
        }));
        gateway_fresh.extend(sample(1, |_| {
            gateway.call("up_echo", json!({ "message": format!("n{round}") }));
        }));
    }
    (direct_fresh, gateway_fresh)
}

/// Writes in `normal_dir` the configuration of the gateway in `gateway_dir` (changed
/// by `change`) on a `normal` journal: committed before each answer, not synced.
fn normal_gateway(gateway_dir: &Path, normal_dir: &Path, change: impl Fn(&str) -> String) {
    std::fs::create_dir_all(normal_dir).expect("gateway dir");
    let toml =
        std::fs::read_to_string(gateway_dir.join("justonce.toml")).expect("read justonce.toml");
    std::fs::write(
        normal_dir.join("justonce.toml"),
        format!("durability = \"normal\"\n{}", change(&toml)),
    )
    .expect("write justonce.toml");
}

/// What one `fdatasync` costs on this machine's disk, of the size a journal's commit
/// writes (three WAL frames), back to back and after an idle millisecond.
struct Syncs {
    back_to_back: f64,
    after_idle: f64,
    after_idle_p10: f64,
    after_idle_p90: f64,
}

/// Measures [`Syncs`] on a file in `dir` written ahead (as the journal's WAL runway
/// is), so no sync grows the file.
fn fsync_after_idle(dir: &Path) -> Syncs {
    use std::os::unix::fs::FileExt as _;
    const FRAME: u64 = 24 + 4096;
    const FRAMES: u64 = 2048;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join("fsync-probe"))
        .expect("fsync probe file");
    file.write_all_at(&vec![0; (FRAME * FRAMES) as usize], 0)
        .expect("write ahead");
    file.sync_all().expect("sync");
    let (header, page) = ([1u8; 24], [2u8; 4096]);
    let mut at = 0;
    let mut sync = |idle: Option<Duration>| {
        if let Some(idle) = idle {
            std::thread::sleep(idle);
        }
        for _ in 0..3 {
            file.write_all_at(&header, at).expect("write");
            file.write_all_at(&page, at + 24).expect("write");
            at = (at + FRAME) % (FRAME * (FRAMES - 3));
        }
        let started = Instant::now();
        file.sync_data().expect("fdatasync");
        micros(started.elapsed())
    };
    let rounds = scaled(300);
    let (mut back_to_back, mut after_idle) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        back_to_back.push(sync(None));
        after_idle.push(sync(Some(Duration::from_millis(1))));
    }
    Syncs {
        back_to_back: median(&mut back_to_back),
        after_idle: median(&mut after_idle),
        after_idle_p10: percentile(&mut after_idle, 0.1),
        after_idle_p90: percentile(&mut after_idle, 0.9),
    }
}

/// Waits (polling `tools/list`, whose `_meta["dev.justonce/upstreams"]` says where
/// each upstream stands) until every upstream of `gateway` is ready.
fn wait_ready(gateway: &mut dyn Mcp) {
    let bound = Instant::now() + Duration::from_secs(120);
    loop {
        let listed = gateway.request("tools/list", json!({}));
        let states = &listed["result"]["_meta"]["dev.justonce/upstreams"];
        let ready = states
            .as_object()
            .is_none_or(|states| states.values().all(|u| u["state"] == "ready"));
        if ready {
            return;
        }
        assert!(
            Instant::now() < bound,
            "the upstreams did not start: {listed}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The samples of (11)'s second table, in µs: `serve` started to its `initialize`
/// answer and its first `tools/list`, with `healthy` echo upstreams alone and with a
/// hung one written before them; a fresh call of the first echo upstream's tool in
/// each; a call of the hung one's tool (refused).
struct Hung {
    healthy: usize,
    initialize_alone: Vec<f64>,
    initialize_hung: Vec<f64>,
    list_hung: Vec<f64>,
    refused: Vec<f64>,
    call_alone: Vec<f64>,
    call_hung: Vec<f64>,
}

/// (11)'s hung upstream: one over HTTP that accepts and never answers (its
/// `timeout_ms` far past the bench), written before `healthy` echo upstreams (the
/// first `command`, the others the same on a database of their own).
fn hung_beside(dir: &Path, command: &[String], healthy: usize) -> Hung {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let mut up = format!(
        "[upstreams.up]\ncommand = {}\nprefix = \"up_\"\n",
        serde_json::to_string(command).expect("a JSON array is a TOML array")
    );
    for n in 1..healthy {
        let mut command = command.to_vec();
        // `--db PATH` is the second and third: a database of its own.
        command[2] = dir
            .join(format!("gateway-upstream/up{n}.db"))
            .display()
            .to_string();
        up.push_str(&format!(
            "\n[upstreams.up{n}]\ncommand = {}\nprefix = \"up{n}_\"\n",
            serde_json::to_string(&command).expect("a JSON array is a TOML array")
        ));
    }
    let hung = format!(
        "[upstreams.hung]\nurl = \"http://{addr}/mcp\"\nprefix = \"hung_\"\ntimeout_ms = 3600000\n"
    );
    let (alone_dir, hung_dir) = (
        dir.join(format!("gateway-alone-{healthy}")),
        dir.join(format!("gateway-hung-{healthy}")),
    );
    for (dir, toml) in [
        (&alone_dir, up.clone()),
        (&hung_dir, format!("{hung}\n{up}")),
    ] {
        std::fs::create_dir_all(dir).expect("gateway dir");
        std::fs::write(dir.join("justonce.toml"), toml).expect("write justonce.toml");
    }
    let mut figures = Hung {
        healthy,
        initialize_alone: Vec::new(),
        initialize_hung: Vec::new(),
        list_hung: Vec::new(),
        refused: Vec::new(),
        call_alone: Vec::new(),
        call_hung: Vec::new(),
    };
    for _ in 0..scaled(10).max(1) {
        let started = Instant::now();
        drop(StdioMcp::start(&alone_dir));
        figures.initialize_alone.push(micros(started.elapsed()));
        let started = Instant::now();
        let mut gateway = StdioMcp::start(&hung_dir);
        figures.initialize_hung.push(micros(started.elapsed()));
        figures.list_hung.extend(sample(1, |_| {
            gateway.request("tools/list", json!({}));
        }));
    }
    let mut alone = StdioMcp::start(&alone_dir);
    wait_ready(&mut alone);
    let mut gateway = StdioMcp::start(&hung_dir);
    let bound = Instant::now() + Duration::from_secs(120);
    // The echo upstreams ready, the hung one not.
    loop {
        let listed = gateway.request("tools/list", json!({}));
        let states = &listed["result"]["_meta"]["dev.justonce/upstreams"];
        let ready = states.as_object().is_some_and(|states| {
            states
                .iter()
                .all(|(name, u)| name == "hung" || u["state"] == "ready")
        });
        if ready {
            break;
        }
        assert!(Instant::now() < bound, "the echo upstreams did not start");
        std::thread::sleep(Duration::from_millis(2));
    }
    for round in 0..scaled(300) {
        figures.refused.extend(sample(1, |_| {
            let refused = gateway.request(
                "tools/call",
                json!({ "name": "hung_echo", "arguments": { "message": "x" } }),
            );
            assert_eq!(
                refused["result"]["structuredContent"]["error"]["kind"], "not_performed",
                "{refused}"
            );
        }));
        figures.call_alone.extend(sample(1, |_| {
            alone.call("up_echo", json!({ "message": format!("a{round}") }));
        }));
        figures.call_hung.extend(sample(1, |_| {
            gateway.call("up_echo", json!({ "message": format!("h{round}") }));
        }));
    }
    figures
}

/// Prints (11)'s second table, for one count of healthy upstreams.
fn print_hung(mut hung: Hung) {
    let healthy = hung.healthy;
    let (alone, with_hung) = if healthy == 1 {
        (
            "the echo upstream alone".to_owned(),
            "the same with the hung upstream first".to_owned(),
        )
    } else {
        (
            format!("{healthy} echo upstreams alone"),
            format!(
                "{} upstreams: the {healthy} and a hung one first",
                healthy + 1
            ),
        )
    };
    println!(
        "\nWith an upstream that accepts and never answers written first, beside {healthy} healthy (upstreams live off the request path):\n\n| what | median (p10–p90) | samples |\n| --- | --- | --- |"
    );
    let (initialize_alone, initialize_hung) = (
        median(&mut hung.initialize_alone),
        median(&mut hung.initialize_hung),
    );
    let (call_alone, call_hung) = (median(&mut hung.call_alone), median(&mut hung.call_hung));
    for (what, samples) in [
        (
            format!("`serve` started to `initialize` answered, {alone}"),
            &mut hung.initialize_alone,
        ),
        (format!("the same, {with_hung}"), &mut hung.initialize_hung),
        (
            "`tools/list` right after, the hung one starting".to_owned(),
            &mut hung.list_hung,
        ),
        (
            "a call of the hung one's tool: refused `not_performed`".to_owned(),
            &mut hung.refused,
        ),
        (
            format!("a fresh call of the first echo upstream's tool, {alone}"),
            &mut hung.call_alone,
        ),
        (format!("the same, {with_hung}"), &mut hung.call_hung),
    ] {
        println!(
            "| {what} | {:.1} µs ({:.1}–{:.1}) | {} |",
            median(samples),
            percentile(samples, 0.1),
            percentile(samples, 0.9),
            samples.len()
        );
    }
    println!(
        "\nWith the hung one: `initialize` {:+.1} %, a healthy tool's fresh call {:+.1} % (medians).",
        (initialize_hung / initialize_alone - 1.0) * 100.0,
        (call_hung / call_alone - 1.0) * 100.0
    );
}
