//! What a command's `TOOL` argument names: a loaded tool, or a component file that
//! is loaded alone (so an author can try a fresh build).

use std::path::Path;

use super::Cli;
use crate::error::Error;
use crate::host::Host;

/// Whether `arg` names a component file rather than a tool: it ends in `.wasm` or
/// holds a path separator. A tool name never does, so a file in the working directory
/// that happens to share a tool's name is not mistaken for it.
pub(super) fn is_component_path(arg: &str) -> bool {
    arg.ends_with(".wasm") || arg.contains('/') || arg.contains(std::path::MAIN_SEPARATOR)
}

/// A host for a call of `arg`, and the name of the tool it names: with the
/// configured tools for a name, with that component alone for a path. A component
/// that cannot be loaded is an [`Error::Load`] naming the file and the reason.
pub(super) fn host_for(cli: &Cli, arg: &str) -> Result<(Host, String), Error> {
    if !is_component_path(arg) {
        return Ok((cli.host().build()?, arg.to_owned()));
    }
    let path = Path::new(arg);
    let host = cli.host_without_tools().component(path).build()?;
    let name = host
        .runtime()
        .tools()
        .find(|t| t.source == path)
        .map(|t| t.name.clone())
        .unwrap_or_default();
    Ok((host, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_wasm_name_or_a_path_is_a_file() {
        for file in [
            "remind.wasm",
            "target/x/remind",
            "./remind",
            "/abs/remind.wasm",
        ] {
            assert!(is_component_path(file), "{file}");
        }
        for name in ["remind", "send_receipt", "wasm", "remind-wasm"] {
            assert!(!is_component_path(name), "{name}");
        }
    }
}
