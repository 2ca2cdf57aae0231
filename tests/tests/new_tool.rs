//! `justonce new`: the project it writes, in Rust, Python or JavaScript, builds for
//! wasm32-wasip2 as it is, its own test passes on the host, and the component runs
//! under `justonce run`. The Python and JavaScript projects are tested, built and run
//! with the very commands `justonce new` prints, with the toolchains of the `lang`
//! tests standing in for the install step. Bad input (a bad name, a language without a
//! template, an existing directory) is refused with exit code 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::lang::toolchain;
use crate::support::cli::{json_of, justonce_command};

/// The target directory the guests are built in (see `host/build_guests.rs`): the
/// SDK's dependencies are compiled there already.
fn guest_target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_justonce"))
        .ancestors()
        .nth(2)
        .expect("the binary is in <target>/<profile>/")
        .join("justonce-guests")
}

/// `cargo ARGS…` for the project at `manifest`, without the outer build's settings.
fn cargo(manifest: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .args(args)
        .arg("--offline")
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target-dir")
        .arg(guest_target_dir());
    for variable in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        command.env_remove(variable);
    }
    command.output().expect("run cargo")
}

fn new_in(dir: &Path, args: &[&str]) -> Output {
    justonce_command(None)
        .current_dir(dir)
        .arg("new")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_new_tool_builds_passes_its_own_test_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let created = new_in(dir.path(), &["remind_unpaid"]);
    let told = String::from_utf8_lossy(&created.stdout);
    assert_eq!(
        created.status.code(),
        Some(0),
        "{told}{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let wasm_in_project = "target/wasm32-wasip2/release/remind_unpaid.wasm";
    assert!(
        told.contains("cargo build --release --target wasm32-wasip2")
            && told.contains(&format!("justonce run {wasm_in_project}"))
            && told.contains("cargo test"),
        "prints the commands: {told}"
    );
    let manifest = dir.path().join("remind_unpaid/Cargo.toml");
    ignores_the_journal(&dir.path().join("remind_unpaid"));

    let build = cargo(
        &manifest,
        &["build", "--release", "--target", "wasm32-wasip2"],
    );
    assert!(
        build.status.success(),
        "the new tool builds as it is:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let test = cargo(&manifest, &["test"]);
    assert!(
        test.status.success(),
        "its own test passes on the host:\n{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
    assert!(
        String::from_utf8_lossy(&test.stdout).contains("1 passed"),
        "{}",
        String::from_utf8_lossy(&test.stdout)
    );

    let wasm = guest_target_dir().join("wasm32-wasip2/release/remind_unpaid.wasm");
    let run = justonce_command(Some(&dir.path().join("state.db")))
        .arg("run")
        .arg(&wasm)
        .args(["--args", r#"{"order_id":4417,"email":"ada@example.com"}"#])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let answer = json_of(&run);
    assert_eq!(answer["ok"], true, "{answer}");
    assert!(answer["result"]["message_id"].is_string(), "{answer}");
    agents_see_the_arguments_not_the_template_notes(&wasm);
    says_how_to_run_a_rebuild(&told);
}

/// What `justonce tools` advertises for `wasm`: the fields' descriptions, and no note
/// of the template meant for the author (the root of the input schema has none).
fn agents_see_the_arguments_not_the_template_notes(wasm: &Path) {
    let out = justonce_command(None)
        .args(["tools", "--json"])
        .arg(wasm)
        .output()
        .unwrap();
    let listed = json_of(&out);
    let schema = &listed[0]["inputSchema"];
    assert!(
        schema["properties"]["order_id"]["description"].is_string(),
        "{schema}"
    );
    assert!(schema.get("description").is_none(), "{schema}");
}

/// The project's `.gitignore` keeps out the journal `justonce run` makes there.
fn ignores_the_journal(project: &Path) {
    let ignored = std::fs::read_to_string(project.join(".gitignore")).unwrap();
    assert!(ignored.lines().any(|l| l == "/.justonce/"), "{ignored}");
}

/// The printed hints tell the author that the same call replays a saved answer after a
/// rebuild, and how to run the new build.
fn says_how_to_run_a_rebuild(told: &str) {
    assert!(told.contains("--fresh"), "{told}");
}

/// The commands `justonce new` printed (its indented lines), in order.
fn printed_commands(told: &str) -> Vec<&str> {
    told.lines()
        .filter_map(|line| line.strip_prefix("    "))
        .collect()
}

/// `sh -c command` in `dir`, to success, with Python writing no bytecode beside the
/// SDK's sources (the host's build script watches them).
fn shell(dir: &Path, command: &str) -> Output {
    let out = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "`{command}` failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// One language's expectations of its new project.
struct Lang {
    /// The `--lang` value.
    lang: &'static str,
    /// What its own test prints once it passed (on stdout or stderr).
    passed: &'static str,
    /// The install command printed, replaced in the test by `toolchain` linked at
    /// `link` (a path in the project).
    install: &'static str,
    toolchain: fn() -> Result<PathBuf, String>,
    link: &'static str,
}

/// `justonce new remind_unpaid --lang LANG`, then each command it printed: the tool's
/// own test, the build (with the lang tests' toolchain where the install would put
/// one), and the run of the component, whose answer is checked.
fn a_new_tool_in(lang: &Lang) {
    let dir = tempfile::tempdir().unwrap();
    let created = new_in(dir.path(), &["remind_unpaid", "--lang", lang.lang]);
    let told = String::from_utf8_lossy(&created.stdout);
    assert_eq!(
        created.status.code(),
        Some(0),
        "{told}{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let [test, install, build, run] = printed_commands(&told)[..] else {
        panic!("test, install, build and run commands: {told}");
    };
    let project = dir.path().join("remind_unpaid");
    ignores_the_journal(&project);

    let tested = shell(dir.path(), test);
    let said = String::from_utf8_lossy(&tested.stdout) + String::from_utf8_lossy(&tested.stderr);
    assert!(said.contains(lang.passed), "`{test}`: {said}");

    assert_eq!(install, lang.install);
    let toolchain =
        (lang.toolchain)().unwrap_or_else(|e| panic!("no {} toolchain: {e}", lang.lang));
    let link = project.join(lang.link);
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&toolchain, &link).unwrap();
    shell(&project, build);

    let (wasm, args) = run
        .strip_prefix("justonce run ")
        .and_then(|rest| rest.split_once(" --args "))
        .unwrap_or_else(|| panic!("a run command: {run}"));
    let args = args.trim_matches('\'');
    assert_eq!(wasm, "remind_unpaid.wasm");
    let ran = justonce_command(Some(&dir.path().join("state.db")))
        .current_dir(&project)
        .args(["run", wasm, "--args", args])
        .output()
        .unwrap();
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let answer = json_of(&ran);
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["replayed"], false, "{answer}");
    assert!(answer["result"]["message_id"].is_string(), "{answer}");
    agents_see_the_arguments_not_the_template_notes(&project.join(wasm));
    says_how_to_run_a_rebuild(&told);
}

#[test]
fn a_new_python_tool_builds_passes_its_own_test_and_runs() {
    a_new_tool_in(&Lang {
        lang: "python",
        passed: "Ran 1 test",
        install: "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt",
        toolchain: toolchain::componentize_py,
        link: ".venv/bin/componentize-py",
    });
}

#[test]
fn a_new_js_tool_builds_passes_its_own_test_and_runs() {
    a_new_tool_in(&Lang {
        lang: "js",
        passed: "# pass 1",
        install: "npm install",
        toolchain: toolchain::componentize_js,
        link: "node_modules/.bin/componentize-js",
    });
}

#[test]
fn bad_names_other_languages_and_existing_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (&["Remind"][..], "not a valid tool name"),
        (
            &["remind", "--lang", "go"],
            "there is no `go` template: --lang takes rust, python or js",
        ),
        (&["remind", "--sdk", "/no/such/sdk"], "--sdk DIR"),
        (
            &["remind", "--lang", "python", "--sdk", "/no/such/sdk"],
            "--sdk DIR",
        ),
    ] {
        let out = new_in(dir.path(), args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    assert!(
        !dir.path().join("remind").exists(),
        "nothing was written for refused input"
    );
    let first = new_in(dir.path(), &["remind"]);
    assert_eq!(first.status.code(), Some(0));
    let again = new_in(dir.path(), &["remind"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
}
