//! The guest components that only justonce's integration tests run. The tests
//! themselves live in `tests/tests/` and belong to the `justonce` package, so they
//! can reach the CLI through `CARGO_BIN_EXE_justonce`.

/// Paths to the test guest components in `tests/guests/`, built by `build.rs`, and
/// `foreach_guest!` (exported at the crate root), which calls a macro once per guest.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}
