//! `justonce new NAME [--lang LANG]`: a tool project that builds as it is, with a
//! test of its own, in Rust, Python or JavaScript.

mod template;

use std::path::{Path, PathBuf};

use clap::Args;

use super::{Cli, exit};
use crate::error::Error;
use template::Values;

/// The guest SDK of the checkout this binary was built from.
const BUILT_FROM_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk");

/// Create a tool project that builds into a component as it is (a Cargo crate, a
/// componentize-py app or a componentize-js module), with a test of its own, and print
/// how to test, build and run it.
#[derive(Debug, Args)]
pub struct New {
    /// The tool's name: lowercase letters, digits and `_`, starting with a letter. It
    /// names the project, its directory, the component and the tool agents call.
    name: String,
    /// The language of the tool: `rust`, `python` or `js`.
    #[arg(long, value_name = "LANG", default_value = "rust")]
    lang: String,
    /// Where to create the project [default: ./NAME].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The `guest-sdk` directory of a justonce checkout [default: the one this binary
    /// was built from].
    #[arg(long, value_name = "DIR", env = "JUSTONCE_GUEST_SDK")]
    sdk: Option<PathBuf>,
}

/// Why no project was written.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// The name cannot be a tool's and a crate's.
    #[error(
        "`{0}` is not a valid tool name: use lowercase letters, digits and `_`, starting with a letter (e.g. `remind_unpaid`)"
    )]
    BadName(String),
    /// A language without a template.
    #[error("there is no `{0}` template: --lang takes {langs}", langs = template::languages())]
    Language(String),
    /// The target directory is there already and not empty.
    #[error("{} already exists and is not empty; choose another name or --dir", .0.display())]
    Exists(PathBuf),
    /// The guest SDK is not where it was looked for.
    #[error(
        "cannot find the justonce guest SDK at {}: pass --sdk DIR (or set JUSTONCE_GUEST_SDK) to the `guest-sdk` directory of a justonce checkout",
        .0.display()
    )]
    NoSdk(PathBuf),
    /// A file of the SDK's checkout that the language's project needs is missing or
    /// unreadable.
    #[error(
        "cannot read {} of the justonce guest SDK ({reason}): pass --sdk DIR (or set JUSTONCE_GUEST_SDK) to the `guest-sdk` directory of a complete justonce checkout",
        path.display()
    )]
    SdkFile {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },
    /// Writing the project failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
}

impl NewError {
    /// The exit code: a write failure is the host's, everything else bad input.
    fn exit_code(&self) -> u8 {
        match self {
            Self::Write { .. } => exit::HOST_FAILURE,
            _ => exit::BAD_INPUT,
        }
    }
}

impl New {
    pub(super) fn run(&self, _cli: &Cli) -> Result<u8, Error> {
        match self.create() {
            Ok(next_steps) => {
                print!("{next_steps}");
                Ok(exit::SUCCESS)
            }
            Err(error) => {
                eprintln!("justonce: {error}");
                Ok(error.exit_code())
            }
        }
    }

    /// Writes the project; returns what to do next.
    fn create(&self) -> Result<String, NewError> {
        check_name(&self.name)?;
        let template =
            template::find(&self.lang).ok_or_else(|| NewError::Language(self.lang.clone()))?;
        let sdk = find_sdk(self.sdk.as_deref())?;
        let dir = self
            .dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(&self.name));
        if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) || dir.is_file() {
            return Err(NewError::Exists(dir));
        }
        // Everything is rendered before anything is written: a missing SDK file
        // leaves no half project behind.
        let project = Values {
            name: &self.name,
            sdk: &sdk,
            dir: &dir,
        }
        .render(template)?;
        for (file, text) in &project.files {
            write(&dir.join(file), text)?;
        }
        Ok(project.next_steps)
    }
}

/// A tool name that is also a crate's and an npm package's name, and whose component is
/// `NAME.wasm`.
fn check_name(name: &str) -> Result<(), NewError> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(NewError::BadName(name.to_owned()))
    }
}

/// The SDK directory, absolute, checked to be the `justonce-guest` crate.
fn find_sdk(given: Option<&Path>) -> Result<PathBuf, NewError> {
    let dir = given.unwrap_or(Path::new(BUILT_FROM_SDK));
    let is_sdk = std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|toml| toml.contains("name = \"justonce-guest\""));
    match dir.canonicalize() {
        Ok(dir) if is_sdk => Ok(dir),
        _ => Err(NewError::NoSdk(dir.to_path_buf())),
    }
}

fn write(path: &Path, text: &str) -> Result<(), NewError> {
    let fail = |source| NewError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    std::fs::write(path, text).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_cannot_be_a_tool_and_a_crate_are_refused() {
        for good in ["remind", "remind_unpaid", "r2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Remind", "2fa", "remind-unpaid", "remind.wasm", "a b"] {
            let err = check_name(bad).unwrap_err();
            assert!(
                err.to_string().contains("lowercase letters"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_sdk_this_binary_was_built_from_is_found_and_a_wrong_one_refused() {
        assert!(find_sdk(None).unwrap().join("src/lib.rs").is_file());
        let err = find_sdk(Some(Path::new("/nonexistent/sdk"))).unwrap_err();
        assert!(err.to_string().contains("--sdk"), "{err}");
    }
}
