//! Builds a Cargo workspace of guests for `wasm32-wasip2` from a build script and
//! writes the constants that expose them — the wasmtime `test-programs` pattern.
//! `host/build.rs` and `tests/build.rs` share it through `#[path]`, so it uses
//! nothing beyond `std`.

use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const WASM_TARGET: &str = "wasm32-wasip2";

/// Builds every `cdylib` in the workspace at `workspace_dir` for `wasm32-wasip2` in
/// release mode, copies each component into `out_dir` and returns `(crate name,
/// path in out_dir)` pairs sorted by name.
///
/// All build scripts share one guest target directory, `<target dir>/justonce-guests`,
/// so debug, release and test builds of the host compile each guest once.
///
/// # Panics
///
/// If the build fails (with cargo's stderr in the message) or produces no component.
pub fn build_workspace(workspace_dir: &Path, out_dir: &Path) -> Vec<(String, PathBuf)> {
    let repo_root = workspace_dir
        .ancestors()
        .find(|dir| dir.join("guest-sdk").is_dir() && dir.join("wit").is_dir())
        .unwrap_or_else(|| panic!("no guest-sdk/ and wit/ above {}", workspace_dir.display()));
    for dir in [
        workspace_dir,
        &repo_root.join("guest-sdk"),
        &repo_root.join("wit"),
    ] {
        rerun_if_changed(dir);
    }

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args([
            "build",
            "--release",
            "--target",
            WASM_TARGET,
            "--message-format=json-render-diagnostics",
        ])
        .arg("--manifest-path")
        .arg(workspace_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(guest_target_dir());
    // The outer build's flags and target are meant for the host, not for the guests.
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let drop = matches!(
            key,
            "RUSTFLAGS"
                | "CARGO_ENCODED_RUSTFLAGS"
                | "CARGO_BUILD_RUSTFLAGS"
                | "CARGO_TARGET_DIR"
                | "CARGO_BUILD_TARGET"
                | "RUSTC_WORKSPACE_WRAPPER"
                | "CARGO_PRIMARY_PACKAGE"
        ) || key.starts_with("CARGO_CFG_")
            || key.starts_with("CARGO_FEATURE_");
        if drop {
            command.env_remove(key);
        }
    }

    let output = command.output().unwrap_or_else(|e| {
        panic!(
            "cannot run cargo to build the guests in {}: {e}",
            workspace_dir.display()
        )
    });
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("may not be installed")
            || stderr.contains("can't find crate for `core`")
            || stderr.contains("can't find crate for `std`")
        {
            format!(
                "\n\nThe {WASM_TARGET} target seems to be missing; run `rustup target add {WASM_TARGET}`."
            )
        } else {
            String::new()
        };
        panic!(
            "building the guests in {} failed:\n{stderr}{hint}",
            workspace_dir.display()
        );
    }

    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut built = BTreeMap::new();
    for wasm in stdout
        .lines()
        .filter(|line| line.contains(r#""reason":"compiler-artifact""#))
        .flat_map(artifact_filenames)
        .filter(|file| file.extension().is_some_and(|ext| ext == "wasm"))
    {
        let name = wasm
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 crate name")
            .to_owned();
        let copy = out_dir.join(format!("{name}.wasm"));
        fs::copy(&wasm, &copy).unwrap_or_else(|e| {
            panic!("cannot copy {} to {}: {e}", wasm.display(), copy.display())
        });
        built.insert(name, copy);
    }
    assert!(
        !built.is_empty(),
        "cargo built no .wasm in {}",
        workspace_dir.display()
    );
    built.into_iter().collect()
}

/// The Rust file [`ConstantsFile::write`] generates for a list of components: one
/// documented `pub const` per component (its bytes or its path), an `ALL` list of `(crate name, constant)`,
/// and optionally a `foreach_*!` macro over the crate names.
pub struct ConstantsFile<'a> {
    /// What one component is, for the constants' docs: `"example tool"`.
    pub noun: &'a str,
    /// Appended to the upper-cased crate name to make a constant's name.
    pub suffix: &'a str,
    /// `true`: each constant is the component's bytes, `&[u8]` (`include_bytes!`),
    /// nothing to find at run time; `false`: its path in `OUT_DIR`, `&str`.
    pub bytes: bool,
    /// The name of a `#[macro_export]` macro to generate, if any: `name!(m)` calls
    /// `m!(crate_name);` once per component, the way wasmtime's `foreach_p2!` lets
    /// its tests assert that every test program has a test.
    pub foreach_macro: Option<&'a str>,
}

impl ConstantsFile<'_> {
    /// Writes the file to `path` for `components`, the `(crate name, path)` pairs
    /// [`build_workspace`] returns.
    ///
    /// # Panics
    ///
    /// If a path is not UTF-8 or the file cannot be written.
    pub fn write(&self, path: &Path, components: &[(String, PathBuf)]) {
        let ty = if self.bytes { "&[u8]" } else { "&str" };
        let mut code = String::new();
        let mut all = String::new();
        let mut each = String::new();
        for (name, wasm) in components {
            let ident = name.replace('-', "_");
            let constant = format!("{}{}", ident.to_uppercase(), self.suffix);
            let wasm = wasm.to_str().expect("a UTF-8 OUT_DIR");
            let value = if self.bytes {
                format!("include_bytes!({wasm:?})")
            } else {
                format!("{wasm:?}")
            };
            writeln!(
                code,
                "/// The `{name}` {}, a WebAssembly component.\npub const {constant}: {ty} = {value};",
                self.noun
            )
            .unwrap();
            writeln!(all, "    ({name:?}, {constant}),").unwrap();
            writeln!(each, "        $mac!({ident});").unwrap();
        }
        writeln!(
            code,
            "/// Every {}, by crate name.\npub const ALL: &[(&str, {ty})] = &[\n{all}];",
            self.noun
        )
        .unwrap();
        if let Some(foreach) = self.foreach_macro {
            writeln!(
                code,
                "/// Calls `$mac!(crate_name);` for every {}, crate names written as identifiers.\n\
                 #[macro_export]\nmacro_rules! {foreach} {{\n    ($mac:ident) => {{\n{each}    }};\n}}",
                self.noun
            )
            .unwrap();
        }
        fs::write(path, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
}

/// `<outer target dir>/justonce-guests`, found from `OUT_DIR`
/// (`<target>/[<triple>/]<profile>/build/<pkg>-<hash>/out`).
fn guest_target_dir() -> PathBuf {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set for build scripts"));
    let target_dir = out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .or_else(|| out_dir.ancestors().nth(4))
        .expect("OUT_DIR is inside a target directory");
    target_dir.join("justonce-guests")
}

/// Emits `rerun-if-changed` for every file under `dir`, skipping `target/` and hidden
/// directories. Naming a directory would make cargo scan all of it, including the
/// output of a stray `cargo build` run inside it.
fn rerun_if_changed(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if !path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n != "target" && !n.starts_with('.'))
        {
            rerun_if_changed(&path);
        }
    }
}

/// The paths in a cargo `compiler-artifact` message's `"filenames"` array.
fn artifact_filenames(line: &str) -> Vec<PathBuf> {
    const KEY: &str = r#""filenames":["#;
    let Some(start) = line.find(KEY) else {
        return Vec::new();
    };
    let mut rest = &line[start + KEY.len()..];
    let mut files = Vec::new();
    while let Some(after_quote) = rest.strip_prefix('"') {
        let (file, tail) = json_string(after_quote);
        files.push(PathBuf::from(file));
        rest = tail.trim_start_matches(',');
    }
    files
}

/// Decodes a JSON string body up to its closing quote; returns it and the text after.
fn json_string(s: &str) -> (String, &str) {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, &s[i + 1..]),
            '\\' => match chars.next().map(|(_, c)| c) {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('b') => out.push('\u{8}'),
                Some('f') => out.push('\u{c}'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                    let unit = u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD);
                    out.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
                }
                Some(other) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    (out, "")
}
