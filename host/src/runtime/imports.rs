//! The imports a tool component may have. Everything else is refused at load, with
//! the import named, before the component can run.
//!
//! Allowed: the justonce imports (`effects`, `log`, `types`), and the parts of WASI that
//! Rust's standard library links and that the host backs with nothing: streams, the
//! command-line world's empty environment and stdio, clocks, random, and the filesystem
//! interfaces with no directory ever preopened. Refused: sockets, HTTP, and any
//! interface this host does not know. Sockets and name lookup are denied at run time
//! too; refusing them at load means a tool that needs the network learns it at once
//! instead of on its first call.

use wasmtime::Engine;
use wasmtime::component::Component;

/// `(package, interfaces)`: every interface listed may be imported at any version.
const ALLOWED: &[(&str, &[&str])] = &[
    ("justonce:tool", &["types", "effects", "log"]),
    ("wasi:io", &["error", "poll", "streams"]),
    (
        "wasi:cli",
        &[
            "environment",
            "exit",
            "stdin",
            "stdout",
            "stderr",
            "terminal-input",
            "terminal-output",
            "terminal-stdin",
            "terminal-stdout",
            "terminal-stderr",
        ],
    ),
    ("wasi:clocks", &["wall-clock", "monotonic-clock"]),
    ("wasi:random", &["random", "insecure", "insecure-seed"]),
    // No directory is ever preopened, so these reach no file.
    ("wasi:filesystem", &["types", "preopens"]),
];

/// Why a whole package is refused, for the packages a tool author is likely to reach.
const REFUSED: &[(&str, &str)] = &[
    (
        "wasi:sockets",
        "network sockets are not available to tools; reach the outside world through effects",
    ),
    (
        "wasi:http",
        "HTTP is not available to tools; reach the outside world through effects",
    ),
];

/// The reason an import is refused, or `None` when it is allowed.
pub(crate) fn refusal(import: &str) -> Option<String> {
    let unversioned = import.split('@').next().unwrap_or(import);
    let (package, interface) = unversioned.rsplit_once('/').unwrap_or((unversioned, ""));
    let allowed = ALLOWED
        .iter()
        .any(|(p, interfaces)| *p == package && interfaces.contains(&interface));
    if allowed {
        return None;
    }
    Some(match REFUSED.iter().find(|(p, _)| *p == package) {
        Some((_, why)) => format!("imports `{import}`: {why}"),
        None => format!("imports `{import}`, which this host does not provide"),
    })
}

/// Checks every import of `component`; the error lists each refused import.
pub(crate) fn check(engine: &Engine, component: &Component) -> Result<(), String> {
    let ty = component.component_type();
    let refused: Vec<String> = ty
        .imports(engine)
        .filter_map(|(name, _)| refusal(name))
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!("refused by the sandbox: {}", refused.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn what_std_links_is_allowed_and_the_network_and_strangers_are_not() {
        for ok in [
            "justonce:tool/effects@0.1.0",
            "wasi:io/streams@0.2.6",
            "wasi:cli/terminal-stdout@0.2.6",
            "wasi:filesystem/preopens@0.2.0",
            "wasi:random/random@0.2.6",
        ] {
            assert_eq!(refusal(ok), None, "{ok}");
        }
        let tcp = refusal("wasi:sockets/tcp@0.2.6").unwrap();
        assert!(
            tcp.contains("`wasi:sockets/tcp@0.2.6`") && tcp.contains("network"),
            "{tcp}"
        );
        let http = refusal("wasi:http/outgoing-handler@0.2.6").unwrap();
        assert!(http.contains("HTTP"), "{http}");
        let unknown = refusal("acme:vault/secrets").unwrap();
        assert!(unknown.contains("`acme:vault/secrets`") && unknown.contains("does not provide"));
        assert!(
            refusal("wasi:cli/run@0.2.6").is_some(),
            "only the listed interfaces"
        );
    }
}
