//! Waits inside WASI calls that end at the call's deadline.
//!
//! WASI is linked in blocking mode: a guest that sleeps (`std::thread::sleep`,
//! Python's `time.sleep`, a JS timer) blocks the call's thread inside
//! `wasi:io/poll`, where the epoch deadline cannot interrupt it. These shadow the
//! two blocking functions of `wasi:io/poll` with the same implementations under a
//! timeout of the call's remaining deadline; a wait still pending then traps as the
//! deadline does (`Trap::Interrupt`, `deadline_exceeded`).
//!
//! The other blocking WASI functions cannot wait long in this sandbox: stdin is
//! empty, stdout and stderr always take the write, and there are no files or sockets.

use std::time::Duration;

use wasmtime::Trap;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll::{Host as _, HostPollable as _};

use super::host_imports::GuestState;

/// The `wasi:io/poll` that `wasmtime_wasi::p2::add_to_linker_sync` links (the
/// version of its WIT); a guest importing an older 0.2 version links to it by semver.
const POLL_INTERFACE: &str = "wasi:io/poll@0.2.12";

/// Replaces `poll` and `pollable.block` of `wasi:io/poll` in `linker` (which must
/// already hold WASI) by waits bounded by the call's remaining deadline.
pub(crate) fn shadow_blocking_poll(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut poll = linker.instance(POLL_INTERFACE)?;
    poll.func_wrap(
        "poll",
        |mut store, (pollables,): (Vec<Resource<DynPollable>>,)| {
            let state: &mut GuestState = store.data_mut();
            let left = state.deadline_left();
            let ready = bounded(left, state.table.poll(pollables))??;
            Ok((ready,))
        },
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        |mut store, (pollable,): (Resource<DynPollable>,)| {
            let state: &mut GuestState = store.data_mut();
            let left = state.deadline_left();
            bounded(left, state.table.block(pollable))??;
            Ok(())
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Runs `wait` for at most `left`; past it, the deadline's trap.
fn bounded<T>(left: Duration, wait: impl Future<Output = T>) -> wasmtime::Result<T> {
    // The timer is made inside the runtime: it needs its time driver.
    wasmtime_wasi::runtime::in_tokio(async move { tokio::time::timeout(left, wait).await })
        .map_err(|_elapsed| wasmtime::Error::new(Trap::Interrupt))
}
