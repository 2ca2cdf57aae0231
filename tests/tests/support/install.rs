//! Toolchains the tests install under `target/` on first use: a Python virtual
//! environment from a requirements file, or anything else made from pinned files.
//! An install holds a marker with the pins it came from, written last: an interrupted
//! install is redone, and a changed pin reinstalls. It is made in place (a venv's
//! scripts name the path they were made at), under a file lock, so test processes
//! running at once install it once.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/tmp/<name>`, made by `install` (given an empty directory to fill) unless an
/// install from the same contents of `pins` is already there.
pub fn installed(
    name: &str,
    pins: &[&Path],
    install: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    let mut pinned = String::new();
    for pin in pins {
        pinned += &std::fs::read_to_string(pin).map_err(|e| format!("{}: {e}", pin.display()))?;
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.join(name);
    let marker = dir.join("justonce-pins.txt");
    let lock = std::fs::File::create(tmp.join(format!("{name}.lock")))
        .and_then(|lock| lock.lock().map(|()| lock))
        .map_err(|e| format!("cannot lock the install of {name}: {e}"))?;
    if std::fs::read_to_string(&marker).is_ok_and(|installed| installed == pinned) {
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    install(&dir)?;
    std::fs::write(&marker, &pinned).map_err(|e| e.to_string())?;
    drop(lock);
    Ok(dir)
}

/// A virtual environment `target/tmp/<name>` with the packages of `requirements`;
/// `help` says what to do when it cannot be made.
pub fn venv(name: &str, requirements: &Path, help: &str) -> Result<PathBuf, String> {
    installed(name, &[requirements], |staging| {
        run(
            Command::new("python3").arg("-m").arg("venv").arg(staging),
            help,
        )?;
        run(
            Command::new(venv_bin(staging, "python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "-r",
                ])
                .arg(requirements),
            help,
        )
    })
}

/// The executable `name` of the virtual environment at `venv`.
pub fn venv_bin(venv: &Path, name: &str) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join(format!("{name}.exe"))
    } else {
        venv.join("bin").join(name)
    }
}

/// Runs `command` to success, or says what failed and `help`.
pub fn run(command: &mut Command, help: &str) -> Result<(), String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}; {help}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed: {}{}; {help}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// `target/tmp/<name>` with the packages of `package`'s `package.json` and
/// `package-lock.json`, installed with `npm ci`; `help` says what to do when it
/// cannot be made.
pub fn npm_ci(name: &str, package: &Path, help: &str) -> Result<PathBuf, String> {
    let pins = [
        package.join("package.json"),
        package.join("package-lock.json"),
    ];
    installed(name, &[&pins[0], &pins[1]], |staging| {
        for file in &pins {
            std::fs::copy(file, staging.join(file.file_name().unwrap()))
                .map_err(|e| e.to_string())?;
        }
        run(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(staging),
            help,
        )
    })
}

/// The file `$variable` names, if it is set: a ready-made toolchain instead of one
/// installed here.
pub fn from_env(variable: &str) -> Option<Result<PathBuf, String>> {
    let path = PathBuf::from(std::env::var_os(variable)?);
    Some(if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{variable}={} is not a file", path.display()))
    })
}
