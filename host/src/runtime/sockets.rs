//! `wasi:sockets` linked to stubs that always deny.
//!
//! A language runtime imports all of `wasi:sockets` whether or not the tool opens a
//! socket (CPython's socket module is always linked into a componentize-py
//! component), so such components load (see `import_policy`). What they link to must
//! not depend on how the store's WASI context is configured: every way into the
//! network — creating a TCP or UDP socket, looking up a name — is shadowed here by a
//! function that answers `access-denied` and creates nothing. With no socket or
//! lookup ever created, the rest of the interfaces (methods on those resources) can
//! never be reached.

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream;
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddressFamily, Network};
use wasmtime_wasi::p2::bindings::sockets::tcp::TcpSocket;
use wasmtime_wasi::p2::bindings::sockets::udp::UdpSocket;

use super::host_imports::GuestState;

/// The version of `wasi:sockets` that `wasmtime_wasi::p2::add_to_linker_sync` links;
/// a guest importing an older 0.2 version links to it by semver.
const VERSION: &str = "0.2.12";

/// Shadows the entry points of `wasi:sockets` in `linker` (which must already hold
/// WASI) with functions that deny.
pub(crate) fn deny_sockets(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker
        .instance(&format!("wasi:sockets/tcp-create-socket@{VERSION}"))?
        .func_wrap(
            "create-tcp-socket",
            |_,
             (_,): (IpAddressFamily,)|
             -> wasmtime::Result<(Result<Resource<TcpSocket>, ErrorCode>,)> {
                Ok((Err(ErrorCode::AccessDenied),))
            },
        )?;
    linker
        .instance(&format!("wasi:sockets/udp-create-socket@{VERSION}"))?
        .func_wrap(
            "create-udp-socket",
            |_,
             (_,): (IpAddressFamily,)|
             -> wasmtime::Result<(Result<Resource<UdpSocket>, ErrorCode>,)> {
                Ok((Err(ErrorCode::AccessDenied),))
            },
        )?;
    linker
        .instance(&format!("wasi:sockets/ip-name-lookup@{VERSION}"))?
        .func_wrap(
            "resolve-addresses",
            |_,
             (_, _): (Resource<Network>, String)|
             -> wasmtime::Result<(Result<Resource<ResolveAddressStream>, ErrorCode>,)> {
                Ok((Err(ErrorCode::AccessDenied),))
            },
        )?;
    linker.allow_shadowing(false);
    Ok(())
}
