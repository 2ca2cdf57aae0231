//! Builds the test guests in `guests/` and writes `$OUT_DIR/guests.rs` with a
//! `<NAME>_COMPONENT` path constant per guest and `foreach_guest!`, which the
//! integration tests use to make a guest that no test runs a compile error.

use std::env;
use std::path::PathBuf;

#[path = "../host/build_guests.rs"]
mod build_guests;

use build_guests::ConstantsFile;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR is set"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set"));
    let guests = build_guests::build_workspace(&manifest_dir.join("guests"), &out_dir);
    ConstantsFile {
        noun: "test guest",
        suffix: "_COMPONENT",
        bytes: false,
        foreach_macro: Some("foreach_guest"),
    }
    .write(&out_dir.join("guests.rs"), &guests);
}
