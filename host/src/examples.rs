//! The example tools (`tools/`), compiled for wasm32-wasip2 by the build script and
//! built into this crate, so `justonce demo` needs nothing but the binary.

include!(concat!(env!("OUT_DIR"), "/example_tools.rs"));
