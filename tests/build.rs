//! Builds the test guests in `guests/` and writes `$OUT_DIR/guests.rs` with a
//! `<NAME>_COMPONENT` path constant per guest.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::{env, fs};

#[path = "../host/build_guests.rs"]
mod build_guests;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set"));
    let guests = build_guests::build_workspace(&manifest_dir.join("guests"), &out_dir);

    let mut code = String::new();
    let mut all = String::new();
    for (name, wasm) in &guests {
        let ident = format!("{}_COMPONENT", name.to_uppercase().replace('-', "_"));
        let path = wasm.to_str().expect("a UTF-8 OUT_DIR");
        writeln!(
            code,
            "/// The `{name}` test guest component.\npub const {ident}: &str = {path:?};"
        )
        .unwrap();
        writeln!(all, "    ({name:?}, {ident}),").unwrap();
    }
    writeln!(
        code,
        "/// Every test guest, by crate name.\npub const ALL: &[(&str, &str)] = &[\n{all}];"
    )
    .unwrap();
    fs::write(out_dir.join("guests.rs"), code).expect("cannot write guests.rs");
}
