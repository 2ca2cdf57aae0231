//! The console as a person uses it: a real Chromium (Debian's `chromium`) driven by
//! Playwright (PyPI `playwright`, pinned in tests/console/requirements.txt; its own
//! browser download is not used) walks tests/console/walk.py: log in, open a call's
//! story, find the stuck effect, be refused as a viewer, resolve it as an operator,
//! see a new call appear live, and have the operator's open session refused once its
//! token is revoked. Screenshots of each page are kept in
//! `target/console-screenshots/`.
//!
//! The browser is `$JUSTONCE_CHROMIUM`, else /usr/bin/chromium; the interpreter
//! `$JUSTONCE_PLAYWRIGHT_PYTHON` (set by `.ci/run`), else a virtual environment made
//! under `target/tmp`. Without either the test is skipped with a message, and fails
//! under `CI=true`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use justonce::__private::tokens::revoke;
use justonce::CallRequest;
use serde_json::json;

use crate::console::Fixture;
use crate::support::install;

const WALK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/console/walk.py");
const REQUIREMENTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/console/requirements.txt"
);

/// Chromium and a Python with Playwright, or why there are none.
fn browser() -> Result<(PathBuf, PathBuf), String> {
    let chromium = match install::from_env("JUSTONCE_CHROMIUM") {
        Some(found) => found?,
        None => PathBuf::from("/usr/bin/chromium"),
    };
    if !chromium.is_file() {
        return Err(format!(
            "no Chromium at {} (Debian: apt-get install chromium; or set JUSTONCE_CHROMIUM)",
            chromium.display()
        ));
    }
    let python = match install::from_env("JUSTONCE_PLAYWRIGHT_PYTHON") {
        Some(found) => found?,
        None => {
            let help = "install python3 with venv and pip (Debian: python3-venv), or set \
                JUSTONCE_PLAYWRIGHT_PYTHON to a Python that has the packages of \
                tests/console/requirements.txt (see .ci/run)";
            install::venv_bin(
                &install::venv("playwright-venv", Path::new(REQUIREMENTS), help)?,
                "python",
            )
        }
    };
    Ok((chromium, python))
}

#[test]
fn a_person_walks_the_console_in_chromium_resolves_a_stuck_effect_and_sees_a_call_live() {
    let (chromium, python) = match browser() {
        Ok(found) => found,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no browser for the console test: {why}")
        }
        Err(why) => {
            eprintln!("skipped (no browser for the console test): {why}");
            return;
        }
    };
    let f = Fixture::start("", false).unwrap();
    let (key, effect) = f.stuck_refund(11);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("console-screenshots");
    let mut walk = Command::new(python)
        .arg(WALK)
        .arg(&chromium)
        .arg(format!("http://{}", f.addr()))
        .args([&f.viewer, &f.operator, &key, &effect])
        .arg(&shots)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start walk.py");
    let mut said = Vec::new();
    let mut lines = BufReader::new(walk.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        said.push(line.clone());
        if line == "WAITING" {
            // A new call while the calls page is open.
            f.t.clock.advance(std::time::Duration::from_secs(1));
            let request = CallRequest::new(
                "echo",
                json!({"message": "made while watching"}).to_string(),
            );
            f.t.host.call(&request).unwrap();
            let new_key = f.t.host.key_for(&request).unwrap().to_string();
            writeln!(walk.stdin.as_mut().unwrap(), "{new_key}").unwrap();
        }
        if line == "REVOKE" {
            revoke(&f.tokens_file, "ops").unwrap();
            writeln!(walk.stdin.as_mut().unwrap(), "revoked").unwrap();
        }
    }
    let status = walk.wait().unwrap();
    assert!(
        status.success(),
        "walk.py failed ({status}); it said {said:?}"
    );
    assert_eq!(said.last().map(String::as_str), Some("OK"), "{said:?}");

    // What the browser did is in the journal: resolved by the operator's principal.
    let story =
        f.t.host
            .story(&justonce::InvocationKey::parse(&key).unwrap())
            .unwrap();
    let operation = story.operations.last().expect("recorded");
    assert_eq!(
        (operation.action.as_str(), operation.by.as_str()),
        ("resolve", "ops")
    );
    for shot in [
        "02-calls",
        "03-story",
        "05-viewer-refused",
        "07-resolved",
        "09-live",
        "11-revoked",
    ] {
        assert!(
            shots.join(format!("{shot}.png")).is_file(),
            "{shot}.png kept"
        );
    }
}
