//! Tools in Python and JavaScript, built with the SDKs in `guest-sdk/` by the
//! toolchains pinned there, held to the same guarantee as Rust tools: the seed's
//! retry scenarios against the example ticket tools, the sandbox against a probe, and
//! the figures of docs/tool-authors.md (`bench`, ignored by default).
//!
//! Each language's components are built and compiled once per test binary (see
//! [`Lang`]); the toolchains are installed under `target/` on first use (see
//! [`toolchain`]).

mod ask;
mod bench;
mod failures;
mod first_compile;
mod oracle;
mod reconcile;
mod rich;
mod sandbox;
mod seed;
pub mod toolchain;

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use justonce::__private::LocalApi;
use justonce::HttpConfig;
use justonce::{Limits, Runtime};

use crate::support::{TestHost, test_host_with_mail};

/// The limits these tools run under in the tests: the defaults (a call needs 10 to
/// 13 MiB of linear memory, see `bench`), with a deadline for a debug build on a
/// loaded CI machine; no test waits for it.
pub fn limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(60),
        ..Limits::default()
    }
}

/// `target/tmp/lang/`: the compiled-component cache (`cache/`) of the test runtimes,
/// and the databases of the `justonce` processes of `seed` (which share the tests'
/// per-user cache, `JUSTONCE_CACHE_DIR` of `.cargo/config.toml`).
pub fn state_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lang");
    std::fs::create_dir_all(&dir).expect("create target/tmp/lang");
    dir
}

/// One language: its two components, and a runtime that loaded both.
pub struct Lang {
    /// `python` or `javascript`.
    pub name: &'static str,
    /// The example ticket tool's name and component.
    pub ticket_tool: &'static str,
    pub ticket: PathBuf,
    /// The probe's name and component.
    pub probe_tool: &'static str,
    pub probe: PathBuf,
    /// Both tools, compiled (through a compile cache under `target/`).
    pub runtime: Arc<Runtime>,
}

impl Lang {
    fn new(
        name: &'static str,
        (ticket_tool, ticket): (&'static str, Result<PathBuf, String>),
        (probe_tool, probe): (&'static str, Result<PathBuf, String>),
    ) -> Self {
        let built = |what: Result<PathBuf, String>| {
            what.unwrap_or_else(|e| panic!("cannot build the {name} tools: {e}"))
        };
        let (ticket, probe) = (built(ticket), built(probe));
        let started = Instant::now();
        let mut runtime = Runtime::new(limits()).expect("runtime");
        runtime.set_compile_cache(state_dir().join("cache"));
        for path in [&ticket, &probe] {
            runtime
                .load_file(path)
                .unwrap_or_else(|e| panic!("the {name} tool {}: {e}", path.display()));
        }
        eprintln!("{name}: both tools loaded in {:?}", started.elapsed());
        Self {
            name,
            ticket_tool,
            ticket,
            probe_tool,
            probe,
            runtime: Arc::new(runtime),
        }
    }

    /// A host on this language's runtime with a mail provider that loses the first
    /// `lose_mail` responses per key, and the `helpdesk` service at `api` for the
    /// ticket tool.
    pub fn host(&self, api: &LocalApi, lose_mail: u32) -> TestHost {
        test_host_with_mail(lose_mail, |b| {
            b.runtime(self.runtime.clone())
                .limits(limits())
                .http(helpdesk(self.ticket_tool, api))
        })
    }
}

/// The http config that lets `tool` reach `api` as the `helpdesk` service.
pub fn helpdesk(tool: &str, api: &LocalApi) -> HttpConfig {
    HttpConfig::default()
        .service("helpdesk", api.url())
        .allow(tool, api.url())
}

/// The Python tools: `tools/ticket_py` and `tests/guests_lang/probe_py`.
pub static PYTHON: LazyLock<Lang> = LazyLock::new(|| {
    Lang::new(
        "python",
        ("open_ticket_py", toolchain::build_python("tools/ticket_py")),
        (
            "probe_py",
            toolchain::build_python("tests/guests_lang/probe_py"),
        ),
    )
});

/// The JavaScript tools: `tools/ticket_js` and `tests/guests_lang/probe_js`.
pub static JAVASCRIPT: LazyLock<Lang> = LazyLock::new(|| {
    Lang::new(
        "javascript",
        ("open_ticket_js", toolchain::build_js("tools/ticket_js")),
        (
            "probe_js",
            toolchain::build_js("tests/guests_lang/probe_js"),
        ),
    )
});

/// The Python SDK's own tests (schema derivation, argument binding), on the host's
/// `python3`: no component needed.
#[test]
fn the_python_sdk_unit_tests_pass() {
    let out = std::process::Command::new("python3")
        .args([
            "-B",
            "-m",
            "unittest",
            "discover",
            "-s",
            "guest-sdk/python/tests",
        ])
        .current_dir(toolchain::ROOT)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The JavaScript SDK's own tests (what `describe` says), on the host's `node`, with
/// the host's imports stubbed: no component needed.
#[test]
fn the_javascript_sdk_unit_tests_pass() {
    let out = std::process::Command::new("node")
        .args(["--import", "./tests/register.mjs", "--test", "tests/"])
        .current_dir(std::path::Path::new(toolchain::ROOT).join("guest-sdk/js"))
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
