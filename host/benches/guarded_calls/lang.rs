//! Figure (10): a warm call of a Python and of a JavaScript tool, the probe of
//! `tests/guests_lang` (`{"op": "echo"}`: no effect), next to Rust's echo in the same
//! rounds. `JUSTONCE_BENCH_ONLY=lang` runs it alone.
//!
//! The components are built as the `lang` tests build them (`tests/tests/lang/
//! toolchain.rs`: the SDKs of `guest-sdk/` with the pinned componentize-py and
//! componentize-js, a build reused while its inputs are unchanged) and compiled
//! before anything is timed; a language whose toolchain cannot be had is skipped with
//! the reason. Every timed guarded call has a conversation never used before, so a
//! new invocation key, and is checked to have run (`replayed: false`) and succeeded:
//! each one is a fresh instance running the guest, not a replay.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use justonce::{CallRequest, Durability, Host, Limits, Runtime};

use super::{ECHO_ARGS, Samples, fresh, host, load, row, sample, scaled};

/// The lang tests' toolchain module, shared rather than copied.
#[path = "../../../tests/tests/lang/toolchain.rs"]
mod toolchain;

/// A probe's no-effect arguments.
const PROBE_ECHO: &str = r#"{"op":"echo","message":"hello"}"#;

/// One language's probe, built and loaded.
struct Probe {
    language: &'static str,
    tool: &'static str,
    args: &'static str,
    runtime: Arc<Runtime>,
}

/// `target/tmp/lang/cache`: the compile cache of the lang tests' runtimes, so a
/// component compiled by either is not compiled again.
fn compile_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("lang")
        .join("cache")
}

/// Builds (or finds) `language`'s probe and loads it in a runtime of its own with the
/// default limits; `Err` says why it cannot be had.
fn probe(language: &'static str) -> Result<Probe, String> {
    let (tool, built) = match language {
        "python" => (
            "probe_py",
            toolchain::build_python("tests/guests_lang/probe_py"),
        ),
        "javascript" => (
            "probe_js",
            toolchain::build_js("tests/guests_lang/probe_js"),
        ),
        "rust" => ("echo", Ok(justonce_tests::guests::ECHO_COMPONENT.into())),
        other => return Err(format!("no probe in {other}")),
    };
    let component = built?;
    let mut runtime = Runtime::new(Limits::default()).map_err(|e| e.to_string())?;
    runtime.set_compile_cache(compile_cache());
    runtime
        .load_file(&component)
        .map_err(|e| format!("{}: {e}", component.display()))?;
    let args = if language == "rust" {
        ECHO_ARGS
    } else {
        PROBE_ECHO
    };
    Ok(Probe {
        language,
        tool,
        args,
        runtime: Arc::new(runtime),
    })
}

/// The probes that could be had, each language's reason printed when it could not.
fn probes() -> Vec<Probe> {
    ["rust", "python", "javascript"]
        .into_iter()
        .filter_map(|language| match probe(language) {
            Ok(p) => Some(p),
            Err(e) => {
                println!("(10) {language}: skipped, its tool cannot be built or loaded: {e}");
                None
            }
        })
        .collect()
}

/// A guarded call that must have run now (not a replay) and succeeded.
fn ran(host: &Host, request: &CallRequest) {
    let response = host.call(request).expect("guarded call");
    assert!(
        !response.replayed,
        "a fresh key was answered by a replay: the figure would not measure a call"
    );
    assert!(response.outcome.is_success(), "{:?}", response.outcome);
}

/// The bare and guarded samples of one probe.
struct LangSamples {
    bare: Samples,
    guarded: Samples,
}

/// Figure (10), printed.
pub fn figures(dir: &Path) {
    println!(
        "\n## (10) Warm no-effect call in Python and JavaScript (the probe's echo), Rust's echo alongside\n"
    );
    let probes = probes();
    let hosts: Vec<Host> = probes
        .iter()
        .map(|p| host(&p.runtime, &dir.join(p.language), Durability::Normal))
        .collect();
    let counter = AtomicU64::new(0);
    let bare = |p: &Probe| {
        p.runtime.call_unguarded(p.tool, p.args).expect("bare call");
    };
    // Warm-up: the pool's slots, the memory images' pages, SQLite's page cache.
    for _ in 0..20 {
        for (p, h) in probes.iter().zip(&hosts) {
            bare(p);
            ran(h, &fresh(p.tool, p.args, &counter));
        }
    }
    let mut samples: Vec<LangSamples> = probes
        .iter()
        .map(|_| LangSamples {
            bare: Samples::default(),
            guarded: Samples::default(),
        })
        .collect();
    let (rounds, n) = (scaled(20), 20);
    for _ in 0..rounds {
        for ((p, h), s) in probes.iter().zip(&hosts).zip(&mut samples) {
            s.bare.round(sample(n, |_| bare(p)));
            let requests: Vec<CallRequest> =
                (0..n).map(|_| fresh(p.tool, p.args, &counter)).collect();
            s.guarded.round(sample(n, |i| ran(h, &requests[i])));
        }
    }
    println!(
        "fresh calls, not replays: every guarded sample has a conversation never used before (a new key) and was answered `replayed: false` and successful (asserted); a bare call has no journal to replay from; {}\n",
        load()
    );
    println!("| figure | median | p10–p90 | mean | samples |\n| --- | --- | --- | --- | --- |");
    for (p, s) in probes.iter().zip(&samples) {
        row(
            &format!("(10) {}, bare call (no guard, no journal)", p.language),
            &s.bare,
        );
        row(
            &format!("(10) {}, guarded, no effect, Normal", p.language),
            &s.guarded,
        );
    }
    if let Some(rust) = probes.iter().position(|p| p.language == "rust") {
        for (p, s) in probes.iter().zip(&samples).skip(rust + 1) {
            println!(
                "\n{} / rust: bare {:.1} ×, guarded {:.1} × (medians of per-round ratios)",
                p.language,
                s.bare.ratio_to(&samples[rust].bare),
                s.guarded.ratio_to(&samples[rust].guarded)
            );
        }
    }
}

/// `JUSTONCE_BENCH_PROFILE=python|javascript`: that probe's guarded no-effect call in
/// a loop for ten seconds, for a profiler.
pub fn profile(language: &'static str, dir: &Path) {
    let p = probe(language).unwrap_or_else(|e| panic!("{language}: {e}"));
    let host = host(&p.runtime, dir, Durability::Normal);
    let counter = AtomicU64::new(0);
    for _ in 0..20 {
        ran(&host, &fresh(p.tool, p.args, &counter));
    }
    let cpu_before = super::cpu::this_thread();
    let mut times = super::time_for(std::time::Duration::from_secs(10), || {
        ran(&host, &fresh(p.tool, p.args, &counter))
    });
    let cpu = super::cpu::this_thread()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    super::print_times(language, &mut times);
    if let Some(cpu) = cpu {
        // On a loaded machine the wall times count waits for a core; this does not.
        println!(
            "{language}: {:.1} µs of this thread's CPU time per call (guest, guard; not the journal's writer)",
            cpu.as_secs_f64() * 1e6 / times.len() as f64
        );
    }
}
