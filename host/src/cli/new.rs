//! `justonce new NAME`: a tool project that builds as it is, with a test of its own.

use std::path::{Path, PathBuf};

use clap::Args;

use super::{Cli, exit};
use crate::error::Error;

/// The Rust template: `Cargo.toml`, `src/lib.rs`, `.gitignore`.
const RUST_CARGO_TOML: &str = include_str!("../../templates/rust/Cargo.toml.tmpl");
const RUST_LIB_RS: &str = include_str!("../../templates/rust/lib.rs.tmpl");
const RUST_GITIGNORE: &str = include_str!("../../templates/rust/gitignore.tmpl");

/// The guest SDK of the checkout this binary was built from.
const BUILT_FROM_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk");

/// Create a tool project (a Cargo crate built for wasm32-wasip2) that builds as it is,
/// and print how to build, test and run it.
#[derive(Debug, Args)]
pub struct New {
    /// The tool's name: lowercase letters, digits and `_`, starting with a letter. It
    /// names the crate, the directory and the tool agents call.
    name: String,
    /// The language of the tool. Only `rust` is available yet.
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
    #[error("there is no `{0}` template: only `--lang rust` is available yet")]
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
            Ok(dir) => {
                print!("{}", next_steps(&self.name, &dir));
                Ok(exit::SUCCESS)
            }
            Err(error) => {
                eprintln!("justonce: {error}");
                Ok(error.exit_code())
            }
        }
    }

    fn create(&self) -> Result<PathBuf, NewError> {
        check_name(&self.name)?;
        if self.lang != "rust" {
            return Err(NewError::Language(self.lang.clone()));
        }
        let sdk = find_sdk(self.sdk.as_deref())?;
        let dir = self
            .dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(&self.name));
        if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) || dir.is_file() {
            return Err(NewError::Exists(dir));
        }
        for (file, text) in render_rust(&self.name, &sdk) {
            write(&dir.join(file), &text)?;
        }
        Ok(dir)
    }
}

/// A tool name that is also a crate name whose component is `NAME.wasm`.
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

/// The files of a Rust tool project called `name` that depends on the SDK at `sdk`.
pub(crate) fn render_rust(name: &str, sdk: &Path) -> [(&'static str, String); 3] {
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{Name}}", &camel_case(name))
            .replace("{{sdk}}", &sdk.display().to_string().replace('\\', "/"))
    };
    [
        ("Cargo.toml", fill(RUST_CARGO_TOML)),
        ("src/lib.rs", fill(RUST_LIB_RS)),
        (".gitignore", fill(RUST_GITIGNORE)),
    ]
}

/// `remind_unpaid` → `RemindUnpaid`: the tool's type name.
fn camel_case(name: &str) -> String {
    name.split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
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

/// What to do next, printed after the project is written.
fn next_steps(name: &str, dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "Created the tool `{name}` in {dir}.\n\
         \n\
         Test its logic on this machine:\n    cd {dir} && cargo test\n\
         Build the component:\n    cargo build --release --target wasm32-wasip2\n\
         Run it under the guard:\n    justonce run target/wasm32-wasip2/release/{name}.wasm \
         --args '{{\"order_id\":4417,\"email\":\"ada@example.com\"}}'\n"
    )
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
    fn the_template_is_filled_in_everywhere() {
        let files = render_rust("remind_unpaid", Path::new("/opt/justonce/guest-sdk"));
        for (file, text) in &files {
            assert!(!text.contains("{{"), "{file} keeps a placeholder");
        }
        assert!(
            files[0]
                .1
                .contains("justonce-guest = { path = \"/opt/justonce/guest-sdk\" }")
        );
        assert!(files[0].1.contains("\n[workspace]\n"));
        assert!(files[1].1.contains("impl Tool for RemindUnpaid {"));
        assert!(
            files[1]
                .1
                .contains("const NAME: &'static str = \"remind_unpaid\";")
        );
        assert!(files[1].1.contains("#[cfg(test)]"));
    }

    #[test]
    fn the_sdk_this_binary_was_built_from_is_found_and_a_wrong_one_refused() {
        assert!(find_sdk(None).unwrap().join("src/lib.rs").is_file());
        let err = find_sdk(Some(Path::new("/nonexistent/sdk"))).unwrap_err();
        assert!(err.to_string().contains("--sdk"), "{err}");
    }
}
