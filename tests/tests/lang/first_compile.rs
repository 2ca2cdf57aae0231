//! A first compile says so (issue 59): a Python or JavaScript tool takes seconds to
//! compile the first time it is loaded, and `justonce tools` over a new directory
//! was silent for that long. It now prints one line on stderr (what it compiles, how
//! large, about how long) before it compiles a component the compile cache does not
//! hold, and nothing once the cache holds it.

use crate::support::cli::justonce_command;

use super::toolchain;

#[test]
fn a_first_compile_says_what_it_compiles_and_about_how_long_and_a_cached_load_is_quiet() {
    let probe = toolchain::build_js("tests/guests_lang/probe_js")
        .unwrap_or_else(|e| panic!("cannot build the JavaScript probe: {e}"));
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::copy(&probe, tools.join("probe_js.wasm")).unwrap();
    let list = || {
        let out = justonce_command(Some(&dir.path().join("state.db")))
            // A cache of this test's own, so the first load finds nothing.
            .env("JUSTONCE_CACHE_DIR", dir.path().join("cache"))
            .arg("--tools")
            .arg(&tools)
            .arg("tools")
            .output()
            .expect("run justonce tools");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("probe_js"),
            "the tool is listed"
        );
        stderr
    };

    let first = list();
    let said: Vec<&str> = first.lines().filter(|l| l.contains("compiling")).collect();
    assert_eq!(said.len(), 1, "one line: {first}");
    let line = said[0];
    assert!(
        line.starts_with("justonce: compiling probe_js.wasm (")
            && line.contains(" MB, about ")
            && line.contains("later loads read it from the compile cache"),
        "{line}"
    );

    let second = list();
    assert!(!second.contains("compiling"), "cached: {second}");
}
