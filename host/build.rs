//! Builds the example tools in `../tools` and writes `$OUT_DIR/example_tools.rs`,
//! which embeds each component's bytes.

use std::env;
use std::path::PathBuf;

#[path = "build_guests.rs"]
mod build_guests;

use build_guests::ConstantsFile;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set"));
    let tools_dir = manifest_dir
        .parent()
        .expect("host/ has a parent")
        .join("tools");
    let tools = build_guests::build_workspace(&tools_dir, &out_dir);
    ConstantsFile {
        noun: "example tool",
        suffix: "",
        bytes: true,
        foreach_macro: None,
    }
    .write(&out_dir.join("example_tools.rs"), &tools);
}
