//! The performance figures of docs/performance.md, from one command:
//!
//! ```sh
//! cargo bench -p justonce --bench guarded_calls
//! ```
//!
//! Figures (see docs/performance.md for what each one means):
//! 1. bare call: the component through wasmtime, no guard, no journal;
//! 2. guarded call with no effect; 3. with one keyed effect (a provider that does
//!    nothing); 4. replay of a completed key; each with its ratio to (1);
//! 5. one commit of one small row with the journal's settings (the durability floor),
//!    and (3) as bare call + N × floor;
//! 6. throughput with 1, 2, 4 and 8 concurrent callers, `Normal` and `Full`;
//! 7. cold start of the `justonce` binary with an empty and a warm compiled-component
//!    cache;
//! 8. MCP `tools/call` round trips to `justonce serve`, sequential, over stdio and over
//!    Streamable HTTP (keep-alive, a bearer token, a session): no effect, one effect,
//!    replayed, and `ping` as each transport's floor; on a `Full` and on a `Normal`
//!    journal, each against (2) in process on a journal of the same durability: back
//!    to back, right after a wait for another process, and handed to a parked thread
//!    after that wait, as `serve` runs a fresh call;
//! 9. on a PostgreSQL journal (a throwaway cluster on this machine, as the tests
//!    start it): the latency of (2), (3) and (4), and one-effect calls/s with 1, 2
//!    and 4 host processes sharing the database, with the CPU seconds per call of the
//!    hosts and of the server, and the floor they set on this machine's cores;
//! 10. a warm no-effect call of a Python and of a JavaScript tool (the lang tests'
//!     probe, built with their toolchains; skipped with the reason when one cannot be
//!     had), bare and guarded, with Rust's echo in the same rounds (see
//!     `guarded_calls/lang.rs`);
//! 11. the gateway's added latency: a tool of an upstream MCP server over stdio,
//!     called directly and through a `justonce serve` that offers it, fresh and
//!     replayed (with the CPU a round of the direct server and of the gateway), the
//!     fresh ones again with the gateway's journal `normal` and a bare `fdatasync`
//!     (what the gateway's two syncs cost in place), and
//!     with an upstream that hangs beside it: `serve`'s `initialize`
//!     and `tools/list`, a refused call of the hung one's tool, a call of the other's
//!     (`JUSTONCE_BENCH_ONLY=gateway`; see `guarded_calls/gateway.rs`);
//!     `JUSTONCE_BENCH_AB=PATH` compares the fresh calls of another build (A) with
//!     this one's (B) in alternating rounds of one run.
//!
//! (2) and (3) are also printed against their floors, the bare guest plus the journal
//! writes the contract requires with the journal's own rows, and (6) against its
//! ceiling, the guest alone run by 8 threads / 1 (see `guarded_calls/floors.rs` for
//! how each floor is measured and why it is one).
//!
//! Latencies are sampled per call in interleaved rounds (every figure once per round,
//! so a burst of load on a shared machine hits them alike); a figure is the median of
//! all its samples with the 10th–90th percentile and the mean (which also counts the
//! rare stalls: a disk write held up by writeback, a preempted thread), and a ratio is
//! the median of the per-round ratios. `JUSTONCE_BENCH_SCALE` (default 1.0) scales
//! rounds and durations; `JUSTONCE_BENCH_PROFILE=bare|echo|receipt|replay|receipt1|receipt8|postgres|python|javascript`
//! runs one call in a loop for a profiler instead (`receipt8`: (6)'s calls by 8
//! callers, `receipt1` by 1, `receipt8full` on a `Full` journal; `postgres`: (9)'s four host processes for
//! `perf record -a`; `python`, `javascript`: (10)'s guarded call), and `JUSTONCE_BENCH_ONLY=mcp` only (8),
//! `JUSTONCE_BENCH_ONLY=postgres` only (9), `JUSTONCE_BENCH_ONLY=lang` only (10),
//! `JUSTONCE_BENCH_ONLY=sqlite` (1) to (6); `JUSTONCE_BENCH_BIN=PATH` runs (7) and (8)
//! on another build of `justonce`. Nothing here asserts a timing; the targets are
//! printed next to the figures.

#[path = "guarded_calls/cpu.rs"]
mod cpu;
#[path = "guarded_calls/gateway.rs"]
mod gateway;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use justonce::Durability;
use justonce::{CallRequest, EffectRequest, Host, Provider, ProviderClass, ProviderError};
use justonce::{Limits, Runtime};
use serde_json::{Value, json};

#[path = "guarded_calls/floors.rs"]
mod floors;
#[path = "guarded_calls/lang.rs"]
mod lang;

#[path = "../../tests/tests/support/install.rs"]
pub mod install;

/// The lang tests' toolchain installs, which `lang` shares (as `crate::support::install`).
mod support {
    pub use super::install;
}

const ECHO_ARGS: &str = r#"{"message":"hello"}"#;
const RECEIPT_ARGS: &str =
    r#"{"orders":[{"order_id":4417,"email":"ada@example.com","amount_cents":1299}]}"#;

/// A keyed mail downstream that does nothing and answers at once.
struct NoopMail;

impl Provider for NoopMail {
    fn class(&self) -> ProviderClass {
        ProviderClass::Keyed
    }
    fn perform(&self, _: &EffectRequest<'_>) -> Result<Value, ProviderError> {
        Ok(json!({ "message_id": "msg-1" }))
    }
}

/// Latency samples of one figure, in microseconds, and its per-round medians.
#[derive(Default)]
struct Samples {
    all: Vec<f64>,
    rounds: Vec<f64>,
}

impl Samples {
    fn round(&mut self, mut taken: Vec<f64>) {
        self.rounds.push(median(&mut taken));
        self.all.extend(taken);
    }
    fn median(&self) -> f64 {
        median(&mut self.all.clone())
    }
    fn spread(&self) -> (f64, f64) {
        let mut v = self.all.clone();
        (percentile(&mut v, 0.10), percentile(&mut v, 0.90))
    }
    /// The median over rounds of this figure's round median divided by the sum of
    /// `parts`' round medians (a floor made of several measured parts).
    fn ratio_to_sum(&self, parts: &[&Samples]) -> f64 {
        let mut r: Vec<f64> = (0..self.rounds.len())
            .map(|i| self.rounds[i] / parts.iter().map(|p| p.rounds[i]).sum::<f64>())
            .collect();
        median(&mut r)
    }
    /// The median over rounds of this figure's round median divided by `base`'s.
    fn ratio_to(&self, base: &Samples) -> f64 {
        let mut r: Vec<f64> = self
            .rounds
            .iter()
            .zip(&base.rounds)
            .map(|(a, b)| a / b)
            .collect();
        median(&mut r)
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn median(v: &mut [f64]) -> f64 {
    percentile(v, 0.5)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Runs `f` `n` times and returns each run's time in µs.
fn sample(n: usize, mut f: impl FnMut(usize)) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let start = Instant::now();
            f(i);
            micros(start.elapsed())
        })
        .collect()
}

fn scale() -> f64 {
    std::env::var("JUSTONCE_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s: &f64| *s > 0.0)
        .unwrap_or(1.0)
}

fn scaled(n: usize) -> usize {
    ((n as f64 * scale()).round() as usize).max(1)
}

fn runtime() -> Arc<Runtime> {
    let mut runtime = Runtime::new(Limits::default()).expect("runtime");
    for (name, bytes) in justonce::__private::EXAMPLE_TOOLS {
        runtime.load(Path::new(name), bytes).expect("example tool");
    }
    runtime
        .load_file(Path::new(justonce_tests::guests::ECHO_COMPONENT))
        .expect("echo");
    Arc::new(runtime)
}

fn host(runtime: &Arc<Runtime>, dir: &Path, durability: Durability) -> Host {
    host_on(runtime, dir.join("state.db"), durability)
}

/// A host with the no-op mail provider on `database` (a SQLite path or a
/// `postgres://` URL).
fn host_on(
    runtime: &Arc<Runtime>,
    database: impl Into<std::path::PathBuf>,
    durability: Durability,
) -> Host {
    Host::builder()
        .runtime(Arc::clone(runtime))
        .database(database)
        .durability(durability)
        .provider("mail", Arc::new(NoopMail))
        .build()
        .expect("host")
}

/// A fresh call (a scope never used before, so a new key) of `tool`.
fn fresh(tool: &str, args: &str, counter: &AtomicU64) -> CallRequest {
    let n = counter.fetch_add(1, Ordering::Relaxed);
    CallRequest::new(tool, args).conversation(format!("bench-{n}"))
}

fn call(host: &Host, request: &CallRequest) {
    let response = host.call(request).expect("guarded call");
    assert!(response.outcome.is_success(), "{:?}", response.outcome);
}

/// Commits and fsyncs one call costs the journal.
fn journal_cost(host: &Host, request: &CallRequest) -> (u64, u64) {
    let before = host.journal_stats();
    call(host, request);
    let after = host.journal_stats();
    (after.commits - before.commits, after.syncs - before.syncs)
}

/// The durability floor: one autocommit insert of one small row in a SQLite file in
/// WAL mode, synced at every commit with `Full` (`synchronous=FULL`) and not with
/// `Normal`, as the journal's durable points are.
///
/// Under `Full` the WAL is first grown and the log restarted over it, so the timed
/// commits overwrite blocks the file has: an fsync of a WAL that grows also writes
/// its new size and blocks (about 45 µs more here), which the journal's own WAL
/// avoids with its runway (`journal/sqlite/runway.rs`). This is the best plain
/// SQLite gives, once its WAL has reached its length.
fn floor_store(dir: &Path, durability: Durability) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(dir.join("floor.db")).expect("floor store");
    let _: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .expect("wal");
    conn.execute_batch("CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, v TEXT)")
        .expect("floor table");
    if durability == Durability::Full {
        // Some 4 000 frames (16 MB), more than the timed commits write.
        conn.pragma_update(None, "synchronous", "OFF")
            .expect("synchronous");
        for i in 0..4_000 {
            floor_commit(&conn, i);
        }
        conn.execute("DELETE FROM floor", []).expect("empty floor");
        conn.pragma_update(None, "synchronous", "FULL")
            .expect("synchronous");
        // Syncs the WAL (its new blocks with it), and the next commit starts the log
        // over from the file's start.
        let _: i64 = conn
            .query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get(0))
            .expect("restart the WAL");
    } else {
        conn.pragma_update(None, "synchronous", "NORMAL")
            .expect("synchronous");
    }
    conn
}

fn floor_commit(store: &rusqlite::Connection, i: usize) {
    store
        .prepare_cached("INSERT INTO floor (v) VALUES (?1)")
        .and_then(|mut s| s.execute([format!("row {i}")]))
        .expect("insert");
}

struct Figures {
    bare_echo: Samples,
    bare_receipt: Samples,
    /// Indexed by durability: 0 = Normal, 1 = Full.
    guarded_echo: [Samples; 2],
    guarded_receipt: [Samples; 2],
    replay: [Samples; 2],
    floor: [Samples; 2],
    /// The journal's share of (2) and (3) at its floor (see `floors`), `Normal`.
    rows_echo: Samples,
    rows_receipt: Samples,
}

const MODES: [(Durability, &str); 2] = [(Durability::Normal, "Normal"), (Durability::Full, "Full")];

fn latencies(
    runtime: &Arc<Runtime>,
    hosts: &[Host; 2],
    floors: &[rusqlite::Connection; 2],
    rows: &mut floors::JournalRows,
) -> Figures {
    let counter = AtomicU64::new(0);
    let replayed: Vec<CallRequest> = hosts
        .iter()
        .map(|h| {
            let r = fresh("echo", ECHO_ARGS, &counter);
            call(h, &r);
            r
        })
        .collect();
    let mut f = Figures {
        bare_echo: Samples::default(),
        bare_receipt: Samples::default(),
        guarded_echo: Default::default(),
        guarded_receipt: Default::default(),
        replay: Default::default(),
        floor: Default::default(),
        rows_echo: Samples::default(),
        rows_receipt: Samples::default(),
    };
    let bare = |tool: &str, args: &str| {
        let _ = runtime.call_unguarded(tool, args);
    };
    // Warm-up: caches, the pool's slots, SQLite's page cache.
    for _ in 0..50 {
        bare("echo", ECHO_ARGS);
        bare("send_receipt", RECEIPT_ARGS);
        for (m, h) in hosts.iter().enumerate() {
            call(h, &fresh("echo", ECHO_ARGS, &counter));
            call(h, &fresh("send_receipt", RECEIPT_ARGS, &counter));
            call(h, &replayed[m]);
        }
    }
    let rounds = scaled(20);
    let (fast, slow) = (100, 10);
    for _ in 0..rounds {
        f.bare_echo.round(sample(fast, |_| bare("echo", ECHO_ARGS)));
        f.bare_receipt
            .round(sample(fast, |_| bare("send_receipt", RECEIPT_ARGS)));
        for (m, (durability, _)) in MODES.iter().enumerate() {
            let n = if *durability == Durability::Full {
                slow
            } else {
                fast
            };
            let h = &hosts[m];
            let echo: Vec<CallRequest> =
                (0..n).map(|_| fresh("echo", ECHO_ARGS, &counter)).collect();
            f.guarded_echo[m].round(sample(n, |i| call(h, &echo[i])));
            let receipts: Vec<CallRequest> = (0..n)
                .map(|_| fresh("send_receipt", RECEIPT_ARGS, &counter))
                .collect();
            f.guarded_receipt[m].round(sample(n, |i| call(h, &receipts[i])));
            f.replay[m].round(sample(fast, |_| call(h, &replayed[m])));
            f.floor[m].round(sample(n, |i| floor_commit(&floors[m], i)));
        }
        f.rows_echo.round(sample(fast, |_| rows.no_effect()));
        f.rows_receipt.round(sample(fast, |_| rows.one_effect()));
        rows.checkpoint();
    }
    f
}

/// What one trial of (6) measured.
#[derive(Debug, Clone, Copy)]
struct Throughput {
    /// Guarded one-effect calls per second.
    rate: f64,
    /// The journal's commits per call (below 2 when group commit put several
    /// callers' writes in one transaction).
    commits: f64,
    /// This process's CPU µs per call (every thread's, the checkpointer's included;
    /// in clock ticks, so ±10 ms over the run).
    cpu: f64,
    /// µs per call the journal's one writer was busy making and committing the
    /// grouped writes (`Host::journal_writer_busy`): the serial part of a call.
    writer: f64,
    /// fsyncs per call at durable points (0 under `Normal`; below 2 under `Full`
    /// when callers shared them).
    syncs: f64,
}

/// (6)'s trials of one caller count and mode: the calls/s (median, min, max) and the
/// median of each other measure.
#[derive(Debug, Clone, Copy)]
struct Cell {
    rate: f64,
    lo: f64,
    hi: f64,
    median: Throughput,
}

impl Cell {
    fn of(trials: &[Throughput]) -> Self {
        let of = |f: fn(&Throughput) -> f64| trials.iter().map(f).collect::<Vec<f64>>();
        let mut rates = of(|t| t.rate);
        let rate = median(&mut rates);
        Self {
            rate,
            lo: percentile(&mut rates, 0.0),
            hi: percentile(&mut rates, 1.0),
            median: Throughput {
                rate,
                commits: median(&mut of(|t| t.commits)),
                cpu: median(&mut of(|t| t.cpu)),
                writer: median(&mut of(|t| t.writer)),
                syncs: median(&mut of(|t| t.syncs)),
            },
        }
    }
}

/// Guarded one-effect calls with `threads` callers sharing one host for `run_for`.
fn throughput(host: &Arc<Host>, threads: usize, run_for: Duration) -> Throughput {
    // One counter for every trial, so no call repeats one of an earlier trial (that
    // would be a replay, not a one-effect call).
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let counter = &CALLS;
    let stats_before = host.journal_stats();
    let writer_busy = || host.journal_writer_busy().unwrap_or_default();
    let writer_before = writer_busy();
    let cpu_before = cpu::own();
    let start = Instant::now();
    let done: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let host = Arc::clone(host);
                s.spawn(move || {
                    let mut calls = 0u64;
                    while start.elapsed() < run_for {
                        let mut request = fresh("send_receipt", RECEIPT_ARGS, counter);
                        request.conversation =
                            Some(format!("tp-{t}-{}", request.conversation.unwrap()));
                        call(&host, &request);
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker")).sum()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu::own() - cpu_before;
    let stats = host.journal_stats();
    let writer = (writer_busy() - writer_before).as_secs_f64();
    let per_call = |total: f64| total / done.max(1) as f64;
    Throughput {
        rate: done as f64 / elapsed,
        commits: per_call((stats.commits - stats_before.commits) as f64),
        cpu: per_call(cpu * 1e6),
        writer: per_call(writer * 1e6),
        syncs: per_call((stats.syncs - stats_before.syncs) as f64),
    }
}

/// Wall time of one `justonce run` process, from spawn to exit, in ms, with its
/// compiled-component cache in `cache` (the per-user cache, as `JUSTONCE_CACHE_DIR`).
fn cold_start(db: &Path, cache: &Path, n: usize) -> f64 {
    let start = Instant::now();
    let out = Command::new(justonce_bin())
        .env("JUSTONCE_CACHE_DIR", cache)
        .arg("--db")
        .arg(db)
        .args([
            "run",
            "send_receipt",
            "--args",
            RECEIPT_ARGS,
            "--conversation",
        ])
        .arg(format!("cold-{n}"))
        .output()
        .expect("spawn justonce");
    let elapsed = start.elapsed();
    assert!(
        out.status.success(),
        "justonce run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed.as_secs_f64() * 1e3
}

/// A directory in `dir` holding the example tools and the `echo` test guest.
fn tools_dir(dir: &Path) -> std::path::PathBuf {
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools).expect("tools dir");
    for (name, bytes) in justonce::__private::EXAMPLE_TOOLS {
        std::fs::write(tools.join(format!("{name}.wasm")), bytes).expect("copy tool");
    }
    std::fs::copy(
        justonce_tests::guests::ECHO_COMPONENT,
        tools.join("echo.wasm"),
    )
    .expect("copy echo");
    tools
}

/// The `justonce` binary the figures run: this build's, or the one
/// `JUSTONCE_BENCH_BIN` names (another build, to compare two back to back with the
/// same client).
fn justonce_bin() -> std::ffi::OsString {
    std::env::var_os("JUSTONCE_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_justonce").into())
}

/// `justonce serve` of the binary `bin` on a journal in `dir` (with `dir`'s `justonce.toml`, if any),
/// serving the example tools and the `echo` test guest; `args` are the transport's.
fn serve_with(
    bin: &std::ffi::OsStr,
    dir: &Path,
    args: &[&str],
    stdin: std::process::Stdio,
) -> std::process::Child {
    let tools = tools_dir(dir);
    Command::new(bin)
        .arg("--db")
        .arg(dir.join("state.db"))
        .arg("--tools")
        .arg(tools)
        .args(["serve", "--deliver-every-ms", "0"])
        .args(args)
        .stdin(stdin)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start justonce serve")
}

/// One end of an MCP connection, driven like a client that waits for each answer.
trait Mcp {
    /// Sends a request and returns its response message.
    fn request(&mut self, method: &str, params: Value) -> Value;

    /// The server's process id.
    fn pid(&self) -> u32;

    /// `initialize` at 2025-11-25.
    fn initialize(&mut self) {
        self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": { "name": "justonce-bench", "version": "0" }
            }),
        );
    }

    /// A `tools/call` that must not fail.
    fn call(&mut self, tool: &str, arguments: Value) {
        let v = self.request(
            "tools/call",
            json!({ "name": tool, "arguments": arguments }),
        );
        assert_ne!(v["result"]["isError"], true, "{tool} failed: {v}");
    }
}

/// `justonce serve` driven over its stdin and stdout.
struct StdioMcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl StdioMcp {
    fn start(dir: &Path) -> Self {
        Self::start_with(&justonce_bin(), dir)
    }

    /// [`StdioMcp::start`] of the `justonce` binary `bin`.
    fn start_with(bin: &std::ffi::OsStr, dir: &Path) -> Self {
        use std::io::Write as _;
        let mut child = serve_with(bin, dir, &[], std::process::Stdio::piped());
        let stdin = child.stdin.take().expect("stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut server = Self {
            child,
            stdin,
            stdout,
            next_id: 0,
        };
        server.initialize();
        writeln!(
            server.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("write");
        server
    }
}

impl Mcp for StdioMcp {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        use std::io::{BufRead as _, Write as _};
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(self.stdin, "{line}").expect("write request");
        self.stdin.flush().expect("flush");
        let mut answer = String::new();
        loop {
            answer.clear();
            assert!(
                self.stdout.read_line(&mut answer).expect("read") > 0,
                "server closed"
            );
            let v: Value = serde_json::from_str(&answer).expect("a JSON-RPC line");
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method} failed: {v}");
                return v;
            }
        }
    }
}

impl Drop for StdioMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `justonce serve --http 127.0.0.1:0` driven over one kept-alive connection with a
/// bearer token and a session, as an HTTP client library would.
struct HttpMcp {
    child: std::process::Child,
    stream: std::io::BufReader<std::net::TcpStream>,
    token: String,
    session: Option<String>,
    next_id: u64,
}

impl HttpMcp {
    fn start(dir: &Path) -> Self {
        Self::start_with(&justonce_bin(), dir)
    }

    /// [`HttpMcp::start`] of the `justonce` binary `bin`.
    fn start_with(bin: &std::ffi::OsStr, dir: &Path) -> Self {
        use std::io::BufRead as _;
        let db = dir.join("state.db");
        let added = Command::new(bin)
            .arg("--db")
            .arg(&db)
            .args(["token", "add", "bench"])
            .output()
            .expect("justonce token add");
        assert!(added.status.success(), "token add failed");
        let token = String::from_utf8(added.stdout)
            .expect("utf-8")
            .trim()
            .to_owned();
        // A server compares a tokens file changed in the last two seconds byte for
        // byte at every request (a rewrite within one tick of the file system's clock
        // may keep its times), and only `stat`s an older one, as a deployed file is:
        // that is the cost measured.
        std::thread::sleep(Duration::from_millis(2100));
        let mut child = serve_with(
            bin,
            dir,
            &["--http", "127.0.0.1:0"],
            std::process::Stdio::null(),
        );
        let mut url = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut url)
            .expect("read the URL");
        let addr = url
            .trim()
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let stream = std::net::TcpStream::connect(&addr).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let mut server = Self {
            child,
            stream: std::io::BufReader::new(stream),
            token,
            session: None,
            next_id: 0,
        };
        server.initialize();
        server
    }
}

impl Mcp for HttpMcp {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        use std::io::{BufRead as _, Read as _, Write as _};
        self.next_id += 1;
        let body =
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params })
                .to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\n",
            self.token,
            body.len()
        );
        if let Some(session) = &self.session {
            head.push_str(&format!(
                "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        head.push_str("\r\n");
        head.push_str(&body);
        self.stream
            .get_mut()
            .write_all(head.as_bytes())
            .expect("send");
        let mut length = 0;
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stream.read_line(&mut line).expect("read") > 0,
                "server closed"
            );
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().expect("a length");
            } else if let Some(v) = lower.strip_prefix("mcp-session-id:") {
                self.session = Some(v.trim().to_owned());
            } else if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).expect("read the body");
        let v: Value = serde_json::from_slice(&body).expect("a JSON-RPC response");
        assert!(v.get("error").is_none(), "{method} failed: {v}");
        v
    }
}

impl Drop for HttpMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (8) on one transport: `ping`, no effect, one effect and replayed, `calls` each.
/// Each kind's round trips in µs, and the server's CPU µs per call of the ping and
/// replayed kinds (its threads' time over the calls: what the server itself spends,
/// without the wake-ups a round trip also waits for).
fn mcp_round_trips(server: &mut dyn Mcp, calls: usize) -> ([Vec<f64>; 4], [Option<f64>; 2]) {
    let pid = server.pid();
    let server_cpu = |run: &mut dyn FnMut() -> Vec<f64>| {
        let before = cpu::of_threads(pid);
        let times = run();
        let spent = cpu::of_threads(pid)
            .zip(before)
            .map(|(after, before)| (after - before).as_secs_f64() * 1e6 / times.len() as f64);
        (times, spent)
    };
    let (ping, ping_cpu) = server_cpu(&mut || {
        sample(calls, |_| {
            server.request("ping", json!({}));
        })
    });
    let no_effect = sample(calls, |i| {
        server.call("echo", json!({ "message": format!("m{i}") }));
    });
    let one_effect = sample(calls, |i| {
        server.call(
            "send_receipt",
            json!({ "orders": [{ "order_id": i, "email": "ada@example.com", "amount_cents": 1 }] }),
        );
    });
    server.call("echo", json!({ "message": "again" }));
    let (replayed, replayed_cpu) = server_cpu(&mut || {
        sample(calls, |_| {
            server.call("echo", json!({ "message": "again" }));
        })
    });
    (
        [ping, no_effect, one_effect, replayed],
        [ping_cpu, replayed_cpu],
    )
}

/// `cat` as a peer process: a line sent to it comes back, so this thread waits for
/// another process between calls as a server waits for its client.
struct LinePeer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl LinePeer {
    fn start() -> Self {
        let mut child = Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start cat");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends a line and waits for it to come back.
    fn round_trip(&mut self) {
        use std::io::{BufRead as _, Write as _};
        self.stdin.write_all(b"ping\n").expect("write to cat");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read from cat");
    }
}

impl Drop for LinePeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the worker in [`after_hand_off`] is given.
enum Slot {
    Empty,
    Call(Instant),
    Stop,
}

/// (2)'s no-effect call as `serve` runs a fresh call: this thread waits for a line
/// from `peer` (as the server's reader waits for its client), then hands the call to
/// a parked worker thread, which runs it. Each figure is timed from the line's
/// arrival to the call's end; this thread waits for it before the next line, as a
/// sequential client does.
fn after_hand_off(host: &Host, counter: &AtomicU64, peer: &mut LinePeer, calls: usize) -> Vec<f64> {
    let slot = Mutex::new(Slot::Empty);
    let done = Mutex::new(None::<f64>);
    let reader = std::thread::current();
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            loop {
                let taken = std::mem::replace(&mut *slot.lock().unwrap(), Slot::Empty);
                match taken {
                    Slot::Empty => std::thread::park(),
                    Slot::Stop => return,
                    Slot::Call(start) => {
                        call(host, &fresh("echo", ECHO_ARGS, counter));
                        *done.lock().unwrap() = Some(micros(start.elapsed()));
                        reader.unpark();
                    }
                }
            }
        });
        let figures = (0..calls)
            .map(|_| {
                peer.round_trip();
                *slot.lock().unwrap() = Slot::Call(Instant::now());
                worker.thread().unpark();
                loop {
                    if let Some(figure) = done.lock().unwrap().take() {
                        break figure;
                    }
                    // A worker that panicked sends nothing: fail rather than wait.
                    assert!(!worker.is_finished(), "the hand-off's worker died");
                    std::thread::park_timeout(Duration::from_secs(1));
                }
            })
            .collect();
        *slot.lock().unwrap() = Slot::Stop;
        worker.thread().unpark();
        figures
    })
}

/// Figure (8), printed: `JUSTONCE_BENCH_ONLY=mcp` runs it alone. Once per durability,
/// each with its floor: (2)'s no-effect call in process on a journal of the same
/// durability, measured right after the round trips.
fn mcp_figures(dir: &Path) {
    println!("\n## (8) MCP round trips to `justonce serve`, sequential: stdio and Streamable HTTP");
    let calls = scaled(500);
    let runtime = runtime();
    for (durability, name) in [(Durability::Full, "full"), (Durability::Normal, "normal")] {
        let journal = |transport: &str| {
            let at = dir.join(format!("mcp-{transport}-{name}"));
            std::fs::create_dir_all(&at).expect("a journal's directory");
            std::fs::write(
                at.join("justonce.toml"),
                format!("durability = \"{name}\"\n"),
            )
            .expect("justonce.toml");
            at
        };
        let (stdio, stdio_cpu) = mcp_round_trips(&mut StdioMcp::start(&journal("stdio")), calls);
        let (http, http_cpu) = mcp_round_trips(&mut HttpMcp::start(&journal("http")), calls);
        let (in_process, after_round_trip, handed_off) = {
            let host = host(&runtime, &journal("library"), durability);
            let counter = AtomicU64::new(0);
            let hot = median(&mut sample(calls, |_| {
                call(&host, &fresh("echo", ECHO_ARGS, &counter))
            }));
            // The same call as a server makes it: each right after this thread waited
            // for a line from another process, as a server waits for its client.
            let mut peer = LinePeer::start();
            let cold = median(
                &mut (0..calls)
                    .map(|_| {
                        peer.round_trip();
                        let start = Instant::now();
                        call(&host, &fresh("echo", ECHO_ARGS, &counter));
                        micros(start.elapsed())
                    })
                    .collect::<Vec<_>>(),
            );
            let handed_off = median(&mut after_hand_off(&host, &counter, &mut peer, calls));
            (hot, cold, handed_off)
        };
        println!(
            "\n### `{durability:?}` durability\n\n| call | stdio median (p10–p90) | HTTP median (p10–p90) | HTTP / stdio | calls |\n| --- | --- | --- | --- | --- |"
        );
        let mut medians = [[0.0; 4]; 2];
        for (row, name) in ["ping", "no effect", "one effect", "replayed"]
            .iter()
            .enumerate()
        {
            let mut cells = Vec::new();
            for (t, figures) in [&stdio, &http].into_iter().enumerate() {
                let mut v = figures[row].clone();
                medians[t][row] = median(&mut v);
                cells.push(format!(
                    "{:.1} µs ({:.1}–{:.1})",
                    medians[t][row],
                    percentile(&mut v, 0.1),
                    percentile(&mut v, 0.9)
                ));
            }
            let ratio = medians[1][row] / medians[0][row];
            let target = if row == 0 {
                String::new()
            } else {
                format!(" (target ≤ 1.5×: {})", verdict(ratio <= 1.5))
            };
            println!(
                "| {name} | {} | {} | {ratio:.2}×{target} | {calls} |",
                cells[0], cells[1]
            );
        }
        println!(
            "\nfloor: (2) no effect in process, `{durability:?}`, {in_process:.1} µs (median of {calls}, right after); the same call made right after a round trip through another process (`cat`), as a server makes it: {after_round_trip:.1} µs; and handed from that thread to a parked one that runs it, as `serve` hands a call to a worker: {handed_off:.1} µs"
        );
        for (t, name) in ["stdio", "HTTP"].into_iter().enumerate() {
            let [ping, no_effect, _, replayed] = medians[t];
            let over = replayed - ping;
            let fresh_over = no_effect - ping - in_process;
            let beyond_hand_off = no_effect - ping - handed_off;
            println!(
                "{name}: no effect − ping − (2) = {fresh_over:.1} µs (target ≤ 30 µs: {}); replayed − ping = {over:.1} µs (target ≤ 15 µs: {}); replayed {replayed:.1} µs (target ≤ 100 µs: {})",
                verdict(fresh_over <= 30.0),
                verdict(over <= 15.0),
                verdict(replayed <= 100.0),
            );
            println!(
                "{name}: no effect − ping − (2) handed off = {beyond_hand_off:.1} µs (the rest: MCP's own work, parsing the line, the session, shaping and writing the answer, on caches as cold as the call's)"
            );
            if let [Some(ping), Some(replayed)] = [stdio_cpu, http_cpu][t] {
                println!(
                    "{name}: the server's own CPU per call: ping {ping:.1} µs, replayed {replayed:.1} µs, replayed − ping {:.1} µs (the round trips add the wake-ups)",
                    replayed - ping
                );
            }
        }
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!("{cpu}, {cores} cores, {}", load())
}

fn load() -> String {
    let avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let one = avg.split_whitespace().next().unwrap_or("?");
    format!("load average {one}")
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

fn row(name: &str, s: &Samples) {
    let (lo, hi) = s.spread();
    let mean = s.all.iter().sum::<f64>() / s.all.len() as f64;
    println!(
        "| {name} | {:.1} µs | {:.1}–{:.1} µs | {mean:.1} µs | {} |",
        s.median(),
        lo,
        hi,
        s.all.len()
    );
}

/// `JUSTONCE_BENCH_PROFILE=bare|echo|receipt|replay`: only that call, in a loop for
/// ten seconds on a `Normal` journal, so a profiler (`perf record`) sees one path;
/// `receipt1`, `receipt2`, `receipt4`, `receipt8`: (6)'s one-effect calls by that many
/// callers sharing the host, each from an empty journal as in (6); `receipt8full`
/// and the like: the same on a `Full` journal.
fn profile(which: &str, runtime: &Arc<Runtime>, dir: &Path) {
    let (threads, durability) = match which.strip_suffix("full") {
        Some(n) => (n, Durability::Full),
        None => (which, Durability::Normal),
    };
    if let Some(threads) = threads.strip_prefix("receipt").and_then(|n| n.parse().ok()) {
        let host = Arc::new(host(runtime, dir, durability));
        let t = throughput(&host, threads, Duration::from_secs(10));
        println!(
            "{which}: {:.0} calls/s, {:.2} commits per call, {:.0} µs CPU per call, the writer busy {:.1} µs per call, {:.2} fsyncs per call",
            t.rate, t.commits, t.cpu, t.writer, t.syncs
        );
        return;
    }
    let host = host(runtime, dir, Durability::Normal);
    let counter = AtomicU64::new(0);
    let replayed = fresh("echo", ECHO_ARGS, &counter);
    call(&host, &replayed);
    let mut times = time_for(Duration::from_secs(10), || match which {
        "bare" => {
            let _ = runtime.call_unguarded("echo", ECHO_ARGS);
        }
        "echo" => call(&host, &fresh("echo", ECHO_ARGS, &counter)),
        "receipt" => call(&host, &fresh("send_receipt", RECEIPT_ARGS, &counter)),
        "replay" => call(&host, &replayed),
        other => panic!(
            "JUSTONCE_BENCH_PROFILE={other}: use bare, echo, receipt, replay, receiptN (N callers, e.g. receipt8), receiptNfull, postgres, python or javascript"
        ),
    });
    print_times(which, &mut times);
}

/// Runs `f` again and again for `run_for`; each run's time in µs.
fn time_for(run_for: Duration, mut f: impl FnMut()) -> Vec<f64> {
    let start = Instant::now();
    let mut times = Vec::new();
    while start.elapsed() < run_for {
        let t0 = Instant::now();
        f();
        times.push(micros(t0.elapsed()));
    }
    times
}

/// One line: how many runs `times` holds, their mean and percentiles.
fn print_times(which: &str, times: &mut [f64]) {
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let (p50, p90, p99) = (
        percentile(times, 0.5),
        percentile(times, 0.9),
        percentile(times, 0.99),
    );
    println!(
        "{which}: {} calls; mean {mean:.1} µs, median {p50:.1}, p90 {p90:.1}, p99 {p99:.1}",
        times.len()
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    // First: a host process of (9) is this binary, started with the parent's
    // environment.
    if let Ok(worker) = std::env::var(PG_WORKER) {
        postgres_worker(&worker);
        return;
    }
    if let Ok(which) = std::env::var("JUSTONCE_BENCH_PROFILE") {
        match which.as_str() {
            "postgres" => return postgres_profile(),
            "python" => return lang::profile("python", dir.path()),
            "javascript" => return lang::profile("javascript", dir.path()),
            _ => {}
        }
        profile(&which, &runtime(), dir.path());
        return;
    }
    println!("# justonce guarded-call benchmark\n");
    println!("machine: {}", machine());
    match std::env::var("JUSTONCE_BENCH_ONLY").as_deref() {
        Ok("mcp") => return mcp_figures(dir.path()),
        Ok("postgres") => return postgres_figures(),
        Ok("lang") => return lang::figures(dir.path()),
        Ok("gateway") => return gateway::figures(dir.path()),
        _ => {}
    }
    let runtime = runtime();
    let hosts = MODES.map(|(d, name)| {
        let sub = dir.path().join(name);
        host(&runtime, &sub, d)
    });
    let floors = MODES.map(|(d, name)| floor_store(&dir.path().join(name), d));

    // The commits and fsyncs each kind of call makes (the N of figure 5), per mode.
    let counter = AtomicU64::new(1 << 40);
    let costs = hosts.each_ref().map(|h| {
        let echo = journal_cost(h, &fresh("echo", ECHO_ARGS, &counter));
        let receipt = fresh("send_receipt", RECEIPT_ARGS, &counter);
        let one_effect = journal_cost(h, &receipt);
        (echo, one_effect, journal_cost(h, &receipt))
    });
    let receipt_cost = costs[1].1;

    let mut rows = floors::JournalRows::new(&runtime, &dir.path().join("rows"), |h| {
        let counter = AtomicU64::new(1 << 50);
        call(h, &fresh("echo", ECHO_ARGS, &counter));
        call(h, &fresh("send_receipt", RECEIPT_ARGS, &counter));
    });
    let f = latencies(&runtime, &hosts, &floors, &mut rows);

    println!("\n## Latency (median of all samples, 10th–90th percentile, mean)\n");
    println!("| figure | median | p10–p90 | mean | samples |\n| --- | --- | --- | --- | --- |");
    row("(1) bare call, echo", &f.bare_echo);
    row(
        "(1) bare call, send_receipt (effect refused)",
        &f.bare_receipt,
    );
    for (m, (_, name)) in MODES.iter().enumerate() {
        row(
            &format!("(2) guarded, no effect, {name}"),
            &f.guarded_echo[m],
        );
        row(
            &format!("(3) guarded, one keyed effect, {name}"),
            &f.guarded_receipt[m],
        );
        row(
            &format!("(4) replay of a completed key, {name}"),
            &f.replay[m],
        );
        row(&format!("(5) one commit of one row, {name}"), &f.floor[m]);
    }
    row(
        "(2)'s journal floor: first look + 1 commit of its row",
        &f.rows_echo,
    );
    row(
        "(3)'s journal floor: first look + 2 commits of its rows",
        &f.rows_receipt,
    );

    println!("\n## Ratios (median of per-round ratios) and targets\n");
    println!("| ratio | value | target | |\n| --- | --- | --- | --- |");
    let (n, full) = (0, 1);
    let r2 = f.guarded_echo[n].ratio_to(&f.bare_echo);
    println!(
        "| (2) no effect / (1) echo, Normal | {r2:.2} | ≤ 2.0 | {} |",
        verdict(r2 <= 2.0)
    );
    let r3 = f.guarded_receipt[n].ratio_to(&f.bare_receipt);
    println!(
        "| (3) one effect / (1) send_receipt, Normal | {r3:.2} | ≤ 3.0 | {} |",
        verdict(r3 <= 3.0)
    );
    let r3e = f.guarded_receipt[n].ratio_to(&f.bare_echo);
    println!("| (3) one effect / (1) echo, Normal | {r3e:.2} | (for reference) | |");
    let r4 = f.replay[n].ratio_to(&f.bare_echo);
    println!(
        "| (4) replay / (1) echo, Normal | {r4:.2} | ≤ 0.3 | {} |",
        verdict(r4 <= 0.3)
    );
    for (m, (_, name)) in MODES.iter().enumerate().skip(1) {
        println!(
            "| (2) no effect / (1) echo, {name} | {:.2} | | |",
            f.guarded_echo[m].ratio_to(&f.bare_echo)
        );
        println!(
            "| (3) one effect / (1) send_receipt, {name} | {:.2} | | |",
            f.guarded_receipt[m].ratio_to(&f.bare_receipt)
        );
        println!(
            "| (4) replay / (1) echo, {name} | {:.2} | | |",
            f.replay[m].ratio_to(&f.bare_echo)
        );
    }

    println!("\n## (2) and (3) against their floors, Normal (see `guarded_calls/floors.rs`)\n");
    println!(
        "floor = the bare guest (1) + the journal writes the contract requires, with the journal's rows, schema and pragmas, measured in the same rounds\n"
    );
    println!(
        "| figure | median | floor | figure / floor | floor / (1): the best ratio this floor allows | target |\n| --- | --- | --- | --- | --- | --- |"
    );
    for (name, figure, bare, rows, target) in [
        (
            "(2) no effect",
            &f.guarded_echo[n],
            &f.bare_echo,
            &f.rows_echo,
            2.0,
        ),
        (
            "(3) one keyed effect",
            &f.guarded_receipt[n],
            &f.bare_receipt,
            &f.rows_receipt,
            3.0,
        ),
    ] {
        let best = Samples {
            all: Vec::new(),
            rounds: bare
                .rounds
                .iter()
                .zip(&rows.rounds)
                .map(|(b, r)| b + r)
                .collect(),
        }
        .ratio_to(bare);
        println!(
            "| {name} | {:.1} µs | {:.1} + {:.1} = {:.1} µs | {:.2} | {best:.2} | ≤ {target:.1} ({}) |",
            figure.median(),
            bare.median(),
            rows.median(),
            bare.median() + rows.median(),
            figure.ratio_to_sum(&[bare, rows]),
            verdict(figure.ratio_to(bare) <= target),
        );
    }

    println!("\n## (3) as bare call + N × floor\n");
    for (m, (_, name)) in MODES.iter().enumerate() {
        let (e, r, p) = costs[m];
        println!(
            "journal cost per call, {name}: no effect {} commits / {} fsyncs; one effect {} commits / {} fsyncs; replay {} / {}",
            e.0, e.1, r.0, r.1, p.0, p.1
        );
    }
    let bare = f.bare_receipt.median();
    let commit = f.floor[n].median();
    let sync = (f.floor[full].median() - commit).max(0.0);
    let model_normal = bare + receipt_cost.0 as f64 * commit;
    let model_full = model_normal + receipt_cost.1 as f64 * sync;
    println!(
        "Normal: {:.1} µs measured vs {bare:.1} + {} × {commit:.1} = {model_normal:.1} µs modelled",
        f.guarded_receipt[n].median(),
        receipt_cost.0
    );
    println!(
        "Full:   {:.1} µs measured vs {bare:.1} + {} × {commit:.1} + {} × {sync:.1} (fsync) = {model_full:.1} µs modelled",
        f.guarded_receipt[full].median(),
        receipt_cost.0,
        receipt_cost.1
    );

    println!(
        "\n## (6) Throughput, one-effect calls sharing one host (median of trials, min–max)\n"
    );
    println!(
        "each trial on a fresh, empty journal (a new database per trial, removed after it), so every caller count starts from the same empty tables; every call a fresh key (no replays)\n"
    );
    println!(
        "| callers | Normal calls/s | Full calls/s | commits per call, Normal / Full | CPU µs per call, Normal / Full | writer busy µs per call, Normal / Full |\n| --- | --- | --- | --- | --- | --- |"
    );
    let trials = 3;
    let run_for = Duration::from_secs_f64(1.0 * scale());
    let mut full_syncs = 0;
    // (Normal, Full) for 1, 2, 4 and 8 callers.
    let mut rows: Vec<(Cell, Cell)> = Vec::new();
    for threads in [1, 2, 4, 8] {
        let cells: Vec<Cell> = MODES
            .iter()
            .map(|(d, name)| {
                let trial: Vec<Throughput> = (0..trials)
                    .map(|i| {
                        // Every trial of every row on its own empty journal, so no
                        // caller count runs against tables another one grew.
                        let sub = dir.path().join(format!("tp-{name}-{threads}-{i}"));
                        let h = Arc::new(host(&runtime, &sub, *d));
                        let rate = throughput(&h, threads, run_for);
                        if *d == Durability::Full {
                            full_syncs += h.journal_stats().syncs;
                        }
                        drop(h);
                        std::fs::remove_dir_all(&sub).expect("remove a trial's journal");
                        rate
                    })
                    .collect();
                Cell::of(&trial)
            })
            .collect();
        let (n, f) = (cells[0], cells[1]);
        println!(
            "| {threads} | {:.0} ({:.0}–{:.0}) | {:.0} ({:.0}–{:.0}) | {:.2} / {:.2} | {:.0} / {:.0} | {:.1} / {:.1} |",
            n.rate,
            n.lo,
            n.hi,
            f.rate,
            f.lo,
            f.hi,
            n.median.commits,
            f.median.commits,
            n.median.cpu,
            f.median.cpu,
            n.median.writer,
            f.median.writer
        );
        rows.push((n, f));
    }
    let (one, eight) = (rows[0], rows[3]);
    // The ceilings (see `floors`): the guest alone, no journal, by 1 and by 8 threads
    // in the same trials; and for `Full`, the `Normal` rate at 8 callers (the same
    // work without the fsyncs) over the `Full` rate of 1 caller.
    let bare: Vec<(f64, f64)> = (0..trials)
        .map(|_| {
            let one = floors::bare_throughput(&runtime, "send_receipt", RECEIPT_ARGS, 1, run_for);
            let eight = floors::bare_throughput(&runtime, "send_receipt", RECEIPT_ARGS, 8, run_for);
            (one, eight)
        })
        .collect();
    let mut bare_ratio: Vec<f64> = bare.iter().map(|(one, eight)| eight / one).collect();
    let bare_ratio = median(&mut bare_ratio);
    let mut bare_one: Vec<f64> = bare.iter().map(|(one, _)| *one).collect();
    let mut bare_eight: Vec<f64> = bare.iter().map(|(_, eight)| *eight).collect();
    println!(
        "\nthe guest alone (send_receipt, `call_unguarded`, no journal): 1 thread {:.0} calls/s, 8 threads {:.0} calls/s = {bare_ratio:.2}×",
        median(&mut bare_one),
        median(&mut bare_eight)
    );
    let normal_scaling = eight.0.rate / one.0.rate;
    println!(
        "(6) Normal, 8 callers / 1 caller: {normal_scaling:.2}× (target ≥ 1.7× on 2 cores: {}); ceiling (the guest alone, 8 threads / 1): {bare_ratio:.2}×; figure / ceiling {:.2}",
        verdict(normal_scaling >= 1.7),
        normal_scaling / bare_ratio
    );
    // The second bound: every call's writes are made one after another by the
    // journal's one writer (group commit), so calls/s cannot pass 1 s over the
    // writer's busy time per call at 8 callers.
    let normal_writer = eight.0.median.writer;
    let writer_rate = 1e6 / normal_writer;
    let writer_ceiling = writer_rate / one.0.rate;
    println!(
        "(6) Normal, the one writer: busy {normal_writer:.1} µs per call at 8 callers, so at most {writer_rate:.0} calls/s = {writer_ceiling:.2}× 1 caller; figure / that ceiling {:.2}",
        normal_scaling / writer_ceiling
    );
    let scaling = eight.1.rate / one.1.rate;
    let full_ceiling = eight.0.rate / one.1.rate;
    println!(
        "(6) Full, 8 callers / 1 caller: {scaling:.2}× (target ≥ 4×: {}); ceiling (Normal at 8 callers / Full at 1): {full_ceiling:.2}×; figure / ceiling {:.2}; fsyncs on the Full hosts: {full_syncs}",
        verdict(scaling >= 4.0),
        scaling / full_ceiling,
    );
    // A `Full` call costs far more CPU than a `Normal` one (the fsyncs' writeback is
    // the kernel's work, on the caller's clock), so the cores bound it too.
    let full_cpu = eight.1.median.cpu;
    let cpu_rate = cores() as f64 * 1e6 / full_cpu;
    let cpu_ceiling = cpu_rate / one.1.rate;
    println!(
        "(6) Full, the CPU: {full_cpu:.0} µs per call at 8 callers, so {} cores allow at most {cpu_rate:.0} calls/s = {cpu_ceiling:.2}× 1 caller; figure / that ceiling {:.2}",
        cores(),
        scaling / cpu_ceiling
    );

    if std::env::var("JUSTONCE_BENCH_ONLY").as_deref() == Ok("sqlite") {
        return;
    }

    println!("\n## (7) Cold start: `justonce run send_receipt`, spawn to exit\n");
    let cold_dir = dir.path().join("cold");
    let db = cold_dir.join("state.db");
    // The compiled components live in one per-user cache, not beside the journal:
    // this one is the bench's own, emptied before each cold run.
    let cache = cold_dir.join("cache");
    let (mut empty, mut warm) = (Vec::new(), Vec::new());
    let runs = scaled(5);
    for i in 0..runs {
        let _ = std::fs::remove_dir_all(&cache);
        empty.push(cold_start(&db, &cache, 2 * i));
        warm.push(cold_start(&db, &cache, 2 * i + 1));
    }
    let (e, w) = (median(&mut empty.clone()), median(&mut warm.clone()));
    let spread = |v: &mut Vec<f64>| (percentile(v, 0.0), percentile(v, 1.0));
    let (elo, ehi) = spread(&mut empty);
    let (wlo, whi) = spread(&mut warm);
    println!("| cache | median | min–max | runs |\n| --- | --- | --- | --- |");
    println!("| empty | {e:.1} ms | {elo:.1}–{ehi:.1} ms | {runs} |");
    println!("| warm | {w:.1} ms | {wlo:.1}–{whi:.1} ms | {runs} |");
    println!(
        "\nwarm / empty: {:.3} (target ≤ 0.2: {})",
        w / e,
        verdict(w / e <= 0.2)
    );

    lang::figures(dir.path());
    mcp_figures(dir.path());
    gateway::figures(dir.path());
    postgres_figures();
    println!("\n{} at the end", load());
}

/// Set in a child process of the bench: it is one host of figure (9).
const PG_WORKER: &str = "JUSTONCE_BENCH_PG_WORKER";

/// Figure (9): a PostgreSQL journal on this machine.
fn postgres_figures() {
    println!("\n## (9) PostgreSQL journal (a local cluster, `Full`: synchronous_commit on)\n");
    let Some(cluster) = justonce::__private::postgres_testing::cluster("bench (9)") else {
        println!("skipped: no PostgreSQL server binaries on this machine");
        return;
    };
    let runtime = runtime();
    let url = cluster.database();
    let host = host_on(&runtime, url.as_str(), Durability::Full);
    let counter = AtomicU64::new(0);
    let replayed = fresh("send_receipt", RECEIPT_ARGS, &counter);
    call(&host, &replayed);
    for _ in 0..20 {
        call(&host, &fresh("echo", ECHO_ARGS, &counter));
        call(&host, &fresh("send_receipt", RECEIPT_ARGS, &counter));
    }
    // Commits and round trips to the server per kind of call. A replay is measured
    // as (4) is: of a key this host replayed before, so it remembers the outcome
    // (its first replay is one read).
    call(&host, &replayed);
    let cost = |r: &CallRequest| {
        let trips = host.journal_round_trips();
        let commits = journal_cost(&host, r).0;
        (commits, host.journal_round_trips() - trips)
    };
    let (echo_cost, receipt_cost, replay_cost) = (
        cost(&fresh("echo", ECHO_ARGS, &counter)),
        cost(&fresh("send_receipt", RECEIPT_ARGS, &counter)),
        cost(&replayed),
    );
    let (mut echo, mut receipt, mut replay) =
        (Samples::default(), Samples::default(), Samples::default());
    for _ in 0..scaled(10) {
        let calls: Vec<CallRequest> = (0..20)
            .map(|_| fresh("echo", ECHO_ARGS, &counter))
            .collect();
        echo.round(sample(calls.len(), |i| call(&host, &calls[i])));
        let calls: Vec<CallRequest> = (0..20)
            .map(|_| fresh("send_receipt", RECEIPT_ARGS, &counter))
            .collect();
        receipt.round(sample(calls.len(), |i| call(&host, &calls[i])));
        replay.round(sample(100, |_| call(&host, &replayed)));
    }
    println!("| figure | median | p10–p90 | mean | samples |\n| --- | --- | --- | --- | --- |");
    row("(2) guarded, no effect", &echo);
    row("(3) guarded, one keyed effect", &receipt);
    row("(4) replay of a completed key", &replay);
    println!(
        "\nper call, commits / round trips to the database: no effect {} / {}, one effect {} / {}, replay {} / {}",
        echo_cost.0, echo_cost.1, receipt_cost.0, receipt_cost.1, replay_cost.0, replay_cost.1
    );
    for (figure, samples, target_ms) in [
        ("one effect", &receipt, 1.0),
        ("no effect", &echo, 0.35),
        ("replay", &replay, 0.05),
    ] {
        let ms = samples.median() / 1000.0;
        println!(
            "(9) {figure}: {ms:.3} ms (target ≤ {target_ms} ms: {})",
            verdict(ms <= target_ms)
        );
    }

    let postmaster = server_pid(&cluster.admin_url());
    println!(
        "\nEach host process is one caller in a loop; CPU is user + system seconds from \
         `/proc` over the timed window: the hosts' own, and the server's (postmaster, its \
         live backends and the ones it reaped). With {} cores shared by hosts and server, \
         calls/s can be no more than cores / (host + server CPU per call): the floor.\n",
        cores()
    );
    println!(
        "The server's own reading misses backends that exit during the window (a zombie's \
         CPU is in neither its parent's reaped time nor a live process), so the machine's \
         busy CPU over the same window (`/proc/stat`: every process, the hosts, the server \
         and anything else running) gives a second floor: cores / machine CPU per call, \
         which counts everything and so errs low.\n"
    );
    println!(
        "| host processes | one-effect calls/s (all hosts) | host CPU / call | server CPU / call | floor (cores / CPU per call) | figure / floor | machine CPU / call, busy | floor by machine CPU | figure / that floor |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let run_for = Duration::from_secs_f64(3.0 * scale());
    let rates: Vec<f64> = [1usize, 2, 4]
        .into_iter()
        .map(|processes| hosts_row(&url, postmaster, processes, run_for))
        .collect();
    println!(
        "\n(9) 4 hosts: {:.0} calls/s = {:.2} × 1 host (target ≥ 2 × and ≥ 3 000: {})",
        rates[2],
        rates[2] / rates[0],
        verdict(rates[2] >= 2.0 * rates[0] && rates[2] >= 3000.0)
    );
}

/// Runs `processes` host processes on `url` for `run_for` and prints their row of
/// figure (9): calls/s, CPU per call (hosts', and the server's whose postmaster is
/// `postmaster`) and the floor that CPU sets; their calls/s.
fn hosts_row(url: &str, postmaster: Option<u32>, processes: usize, run_for: Duration) -> f64 {
    let run = postgres_processes(url, postmaster, processes, run_for);
    let (host_us, server_us) = (
        run.host_cpu / run.calls * 1e6,
        run.server_cpu / run.calls * 1e6,
    );
    let floor = cores() as f64 / ((host_us + server_us) / 1e6);
    let machine_us = run.machine_cpu / run.calls * 1e6;
    let machine_floor = cores() as f64 / (machine_us / 1e6);
    println!(
        "| {processes} | {:.0} | {host_us:.0} µs | {server_us:.0} µs | {floor:.0} calls/s | {:.2} | {machine_us:.0} µs, {:.0} % busy | {machine_floor:.0} calls/s | {:.2} |",
        run.rate,
        run.rate / floor,
        run.machine_cpu / run.machine_seconds * 100.0,
        run.rate / machine_floor
    );
    run.rate
}

/// `JUSTONCE_BENCH_PROFILE=postgres`: figure (9)'s four host processes for ten seconds,
/// for a profiler (`perf record -a`) to see hosts and server at once.
fn postgres_profile() {
    let Some(cluster) = justonce::__private::postgres_testing::cluster("bench (9)") else {
        println!("skipped: no PostgreSQL server binaries on this machine");
        return;
    };
    let url = cluster.database();
    let postmaster = server_pid(&cluster.admin_url());
    hosts_row(&url, postmaster, 4, Duration::from_secs(10));
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The postmaster's pid of the server at `admin_url`, if it runs on this machine and
/// its data directory is readable here.
fn server_pid(admin_url: &str) -> Option<u32> {
    let mut admin = postgres::Client::connect(admin_url, postgres::NoTls).ok()?;
    let data: String = admin.query_one("SHOW data_directory", &[]).ok()?.get(0);
    cpu::postmaster(Path::new(&data))
}

/// What the host processes of one run of figure (9) did together.
struct HostsRun {
    /// Their calls per second, summed.
    rate: f64,
    /// Their calls.
    calls: f64,
    /// Their CPU seconds over the timed window.
    host_cpu: f64,
    /// The server's CPU seconds over the same window (NaN when it is not known):
    /// from when every host is ready (connected, its statements prepared) to when
    /// every one has stopped calling.
    server_cpu: f64,
    /// The whole machine's busy CPU seconds over the same window (every process:
    /// hosts, server, and whatever else runs), and the CPU seconds the window offered
    /// (its length × cores); NaN when `/proc/stat` is not there.
    machine_cpu: f64,
    machine_seconds: f64,
}

/// Runs `processes` child hosts on `url` at once for `run_for`. Each child loads its
/// tools first and says `ready`; all start when every one is. The server's CPU is
/// read from its `postmaster`'s processes.
fn postgres_processes(
    url: &str,
    postmaster: Option<u32>,
    processes: usize,
    run_for: Duration,
) -> HostsRun {
    use std::io::{BufRead, BufReader, Write};
    let mut children: Vec<_> = (0..processes)
        .map(|p| {
            Command::new(std::env::current_exe().expect("bench binary"))
                .env_remove("JUSTONCE_BENCH_PROFILE")
                .env(
                    PG_WORKER,
                    format!("{}|{processes}x{p}|{}", run_for.as_millis(), url),
                )
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn a host process")
        })
        .collect();
    let mut outputs: Vec<_> = children
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().expect("stdout")))
        .collect();
    for out in &mut outputs {
        let mut line = String::new();
        out.read_line(&mut line).expect("ready");
        assert_eq!(line.trim(), "ready", "a host process did not start");
    }
    let server_before = postmaster.map(cpu::of_server);
    let (machine_before, started) = (cpu::machine(), Instant::now());
    for child in &mut children {
        writeln!(child.stdin.as_mut().expect("stdin"), "go").expect("go");
    }
    let mut run = HostsRun {
        rate: 0.0,
        calls: 0.0,
        host_cpu: 0.0,
        server_cpu: f64::NAN,
        machine_cpu: f64::NAN,
        machine_seconds: f64::NAN,
    };
    let mut lines = Vec::new();
    for out in &mut outputs {
        let mut line = String::new();
        out.read_line(&mut line).expect("a rate");
        lines.push(line);
    }
    if let (Some(before), Some(after)) = (server_before, postmaster.map(cpu::of_server)) {
        run.server_cpu = after - before;
    }
    if let (Some(before), Some(after)) = (machine_before, cpu::machine()) {
        run.machine_cpu = after - before;
        run.machine_seconds = started.elapsed().as_secs_f64() * cores() as f64;
    }
    for (child, line) in children.iter_mut().zip(lines) {
        let figures: Vec<f64> = line
            .split_whitespace()
            .map(|f| f.parse().expect("a number"))
            .collect();
        let [rate, calls, host_cpu] = figures[..] else {
            panic!("a host process said {line:?}")
        };
        run.rate += rate;
        run.calls += calls;
        run.host_cpu += host_cpu;
        assert!(child.wait().expect("host process").success());
    }
    run
}

/// One host process of figure (9): `RUN_MS|ID|URL`.
fn postgres_worker(spec: &str) {
    let mut parts = spec.splitn(3, '|');
    let (run_ms, id, url) = (
        parts
            .next()
            .and_then(|s| s.parse::<u64>().ok())
            .expect("run ms"),
        parts.next().expect("id").to_owned(),
        parts.next().expect("url"),
    );
    let runtime = runtime();
    let host = host_on(&runtime, url, Durability::Full);
    let counter = AtomicU64::new(0);
    let named = |counter: &AtomicU64| {
        let mut r = fresh("send_receipt", RECEIPT_ARGS, counter);
        r.conversation = Some(format!("p{id}-{}", r.conversation.unwrap()));
        r
    };
    for _ in 0..10 {
        call(&host, &named(&counter));
    }
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).expect("go");
    let (start, cpu_before) = (Instant::now(), cpu::own());
    let mut calls = 0u64;
    while start.elapsed() < Duration::from_millis(run_ms) {
        call(&host, &named(&counter));
        calls += 1;
    }
    let (took, cpu) = (start.elapsed(), cpu::own() - cpu_before);
    println!("{} {calls} {cpu}", calls as f64 / took.as_secs_f64());
}
