//! The Python and JavaScript toolchains, installed under `target/` on first use, and
//! the components built with them.
//!
//! componentize-py is pinned in `guest-sdk/python/requirements.txt`, componentize-js
//! in `guest-sdk/js/package-lock.json`. Each is installed once per target directory
//! (a marker holds the pin it was installed from; an interrupted install is built
//! aside and never reused). `$JUSTONCE_COMPONENTIZE_PY` and
//! `$JUSTONCE_COMPONENTIZE_JS` name ready-made ones instead (`.ci/run` sets them).
//!
//! A component is named by the sha256 of everything it is built from (the toolchain's
//! pin, the WIT, the SDK and the tool's sources), so a build is reused only while its
//! inputs are unchanged: never stale, and built once per change rather than once per
//! test run.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::support::install::{self, run};

/// The repository's root.
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn root() -> PathBuf {
    Path::new(ROOT).to_path_buf()
}

fn tmp() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).to_path_buf()
}

/// The `componentize-py` executable, installed into a venv under `target/` if need be.
pub fn componentize_py() -> Result<PathBuf, String> {
    if let Some(path) = install::from_env("JUSTONCE_COMPONENTIZE_PY") {
        return path;
    }
    let help = "install python3 with venv and pip (Debian: python3-venv), or set \
        JUSTONCE_COMPONENTIZE_PY to a componentize-py of the version in \
        guest-sdk/python/requirements.txt";
    let requirements = root().join("guest-sdk/python/requirements.txt");
    let venv = install::venv("componentize-py", &requirements, help)?;
    Ok(install::venv_bin(&venv, "componentize-py"))
}

/// The `componentize-js` executable, installed with `npm ci` under `target/` if need be.
pub fn componentize_js() -> Result<PathBuf, String> {
    if let Some(path) = install::from_env("JUSTONCE_COMPONENTIZE_JS") {
        return path;
    }
    let help = "install Node.js 20 or newer with npm, or set JUSTONCE_COMPONENTIZE_JS to \
        the componentize-js of guest-sdk/js/package-lock.json";
    let dir = install::npm_ci("componentize-js", &root().join("guest-sdk/js"), help)?;
    Ok(dir.join("node_modules/.bin/componentize-js"))
}

/// Every file under each of `paths` (relative to the root), sorted, hashed with its
/// path into `hasher`; `__pycache__` and hidden entries are left out.
fn hash_tree(hasher: &mut Sha256, paths: &[&str]) {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        if dir.is_file() {
            files.push(dir.to_path_buf());
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "__pycache__" || name == "node_modules" {
                continue;
            }
            walk(&entry.path(), files);
        }
    }
    let mut files = Vec::new();
    for path in paths {
        walk(&root().join(path), &mut files);
    }
    files.sort();
    for file in files {
        hasher.update(
            file.strip_prefix(root())
                .unwrap_or(&file)
                .to_string_lossy()
                .as_bytes(),
        );
        hasher.update([0]);
        hasher.update(std::fs::read(&file).unwrap_or_default());
        hasher.update([0]);
    }
}

/// `target/tmp/lang-components/<name>-<hash>.wasm`, built by `build` into the path it
/// is given unless a build from the same inputs is there.
fn built(
    name: &str,
    inputs: &[&str],
    build: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    let mut hasher = Sha256::new();
    hash_tree(&mut hasher, inputs);
    let hash: String = hasher.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let dir = tmp().join("lang-components");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let wasm = dir.join(format!("{name}-{hash}.wasm"));
    if wasm.is_file() {
        return Ok(wasm);
    }
    let partial = dir.join(format!("{name}-{hash}.{}.partial", std::process::id()));
    build(&partial)?;
    std::fs::rename(&partial, &wasm).map_err(|e| e.to_string())?;
    // Builds from older inputs are never used again.
    for entry in std::fs::read_dir(&dir)
        .map_err(|e| e.to_string())?
        .flatten()
    {
        let file = entry.file_name().to_string_lossy().into_owned();
        if file.starts_with(&format!("{name}-")) && file.ends_with(".wasm") && entry.path() != wasm
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(wasm)
}

/// Builds the Python tool whose module `app.py` is in `dir` (relative to the root)
/// with the SDK of `guest-sdk/python`.
pub fn build_python(dir: &str) -> Result<PathBuf, String> {
    build_python_world(dir, "tool")
}

/// [`build_python`] against the WIT world `world` (`reconciling-tool` for a tool
/// with its own probe).
pub fn build_python_world(dir: &str, world: &str) -> Result<PathBuf, String> {
    let name = Path::new(dir)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    built(&name, &["guest-sdk/python/justonce", "wit", dir], |out| {
        let componentize_py = componentize_py()?;
        run(
            Command::new(componentize_py)
                .current_dir(root())
                // No __pycache__ in the sources (build scripts watch them).
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .args(["-d", "wit", "-w", world, "componentize"])
                .args(["-p", "guest-sdk/python", "-p", dir, "app", "-o"])
                .arg(out),
            "see guest-sdk/python/README.md",
        )
    })
}

/// Builds the JavaScript tool `dir/tool.js` (relative to the root) with the SDK of
/// `guest-sdk/js`.
pub fn build_js(dir: &str) -> Result<PathBuf, String> {
    build_js_world(dir, "tool")
}

/// [`build_js`] against the WIT world `world` (`reconciling-tool` for a tool with
/// its own probe).
pub fn build_js_world(dir: &str, world: &str) -> Result<PathBuf, String> {
    let name = Path::new(dir)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    built(
        &name,
        &[
            "guest-sdk/js/justonce.js",
            "guest-sdk/js/package-lock.json",
            "wit",
            dir,
        ],
        |out| {
            let componentize_js = componentize_js()?;
            // Run from the root: componentize-js resolves the tool's relative imports
            // (the SDK) only inside its working directory.
            run(
                Command::new(componentize_js)
                    .current_dir(root())
                    .arg(format!("{dir}/tool.js"))
                    .args(["--wit", "wit", "-n", world])
                    .args(["-d", "http", "-d", "fetch-event", "-o"])
                    .arg(out),
                "see guest-sdk/js/README.md",
            )
        },
    )
}
