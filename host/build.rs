//! Builds the example tools in `../tools` and writes `$OUT_DIR/example_tools.rs`,
//! which embeds each component's bytes.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::{env, fs};

#[path = "build_guests.rs"]
mod build_guests;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set"));
    let tools_dir = manifest_dir
        .parent()
        .expect("host/ has a parent")
        .join("tools");
    let tools = build_guests::build_workspace(&tools_dir, &out_dir);

    let mut code = String::new();
    let mut all = String::new();
    for (name, wasm) in &tools {
        let ident = name.to_uppercase().replace('-', "_");
        let path = wasm.to_str().expect("a UTF-8 OUT_DIR");
        writeln!(code, "/// The `{name}` example tool, a WebAssembly component.\npub const {ident}: &[u8] = include_bytes!({path:?});")
            .unwrap();
        writeln!(all, "    ({name:?}, {ident}),").unwrap();
    }
    writeln!(
        code,
        "/// Every example tool, by name.\npub const ALL: &[(&str, &[u8])] = &[\n{all}];"
    )
    .unwrap();
    fs::write(out_dir.join("example_tools.rs"), code).expect("cannot write example_tools.rs");
}
