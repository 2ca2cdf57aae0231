//! The imports a tool component may have. Everything else is refused at load, with
//! the import named, before the component can run.
//!
//! Allowed: the justonce imports (`effects`, `log`, `content`, `progress`, `input`, `types`),
//! and the parts of WASI that Rust's standard library links and that the host backs
//! with nothing: streams, the command-line world's empty environment and stdio,
//! clocks, random, and the filesystem interfaces with no directory ever preopened. Refused: sockets, HTTP, and any
//! interface this host does not know.
//!
//! Sockets and name lookup are linked to stubs that deny every use (see `sockets`):
//! creating a socket or looking up a name answers `access-denied` whatever the store's
//! WASI context says. Refusing them at load too means a tool that asked for the
//! network (a Rust tool imports them once it touches `std::net`) learns it at once
//! instead of on its first call. A language runtime, though, imports them whether or
//! not the tool opens a socket (CPython's socket module is always linked into a
//! componentize-py component): a component that embeds one of [`RUNTIMES`] loads.
//! That is known by a name section, which any component can carry: it decides only
//! whether a component is refused at load, never what its sockets can do.

use wasmtime::Engine;
use wasmtime::component::Component;

/// `(package, interfaces)`: every interface listed may be imported at any version.
const ALLOWED: &[(&str, &[&str])] = &[
    (
        "justonce:tool",
        &["types", "effects", "log", "content", "progress", "input"],
    ),
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

/// Why a whole package is refused, for the packages a tool author is likely to reach:
/// said once for all its imports, with what to use instead.
const REFUSED: &[(&str, &str)] = &[
    (
        "wasi:sockets",
        "network sockets are not available to tools (a Rust tool imports them once it or \
         a crate it uses touches `std::net`): speak HTTP through the `http` provider (the \
         SDK's `http`), which keys and journals each request, and reach anything else \
         through effects",
    ),
    (
        "wasi:http",
        "WASI HTTP is not available to tools: speak HTTP through the `http` provider (the \
         SDK's `http`), which keys and journals each request",
    ),
];

/// Language runtimes that import all of `wasi:sockets` for their standard library,
/// known by the name of the core module that carries them: `(prefix, runtime)`.
const RUNTIMES: &[(&str, &str)] = &[("libpython3", "CPython")];

/// The package whose imports a language runtime may have without asking for them.
const SOCKETS: &str = "wasi:sockets";

/// The language runtime of [`RUNTIMES`] that the component `bytes` embeds, by the
/// core module names of its name sections.
fn embedded_runtime(bytes: &[u8]) -> Option<&'static str> {
    use wasmparser::{ComponentName, KnownCustom, Name, Parser, Payload};

    let runtime = |module: &str| {
        RUNTIMES
            .iter()
            .find(|(prefix, _)| module.starts_with(prefix))
            .map(|(_, runtime)| *runtime)
    };
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else { break };
        let Payload::CustomSection(section) = payload else {
            continue;
        };
        let found = match section.as_known() {
            KnownCustom::Name(names) => names.into_iter().flatten().find_map(|n| match n {
                Name::Module { name, .. } => runtime(name),
                _ => None,
            }),
            KnownCustom::ComponentName(names) => {
                names.into_iter().flatten().find_map(|n| match n {
                    ComponentName::CoreModules(modules) => modules
                        .into_iter()
                        .flatten()
                        .find_map(|naming| runtime(naming.name)),
                    _ => None,
                })
            }
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Whether `import` (`package/interface@version`) is one a tool may have.
fn allowed(import: &str) -> bool {
    let (package, interface) = package_of(import);
    ALLOWED
        .iter()
        .any(|(p, interfaces)| *p == package && interfaces.contains(&interface))
}

/// `(package, interface)` of an import, without its version.
fn package_of(import: &str) -> (&str, &str) {
    let unversioned = import.split('@').next().unwrap_or(import);
    unversioned.rsplit_once('/').unwrap_or((unversioned, ""))
}

/// The reason an import is refused, or `None` when it is allowed.
#[cfg(test)]
fn refusal(import: &str) -> Option<String> {
    (!allowed(import)).then(|| reasons(&[import]))
}

/// Why the imports `refused` are refused: one sentence per package of [`REFUSED`]
/// that names each of its imports once, then one per import this host does not know.
fn reasons(refused: &[&str]) -> String {
    let mut sentences = Vec::new();
    for (package, why) in REFUSED {
        let named: Vec<String> = refused
            .iter()
            .filter(|import| package_of(import).0 == *package)
            .map(|import| format!("`{import}`"))
            .collect();
        if !named.is_empty() {
            sentences.push(format!("imports {}: {why}", named.join(", ")));
        }
    }
    for import in refused {
        if !REFUSED.iter().any(|(p, _)| package_of(import).0 == *p) {
            sentences.push(format!(
                "imports `{import}`, which this host does not provide"
            ));
        }
    }
    sentences.join("; ")
}

/// Checks every import of `component` (compiled from `bytes`); the error names each
/// refused import once.
pub(crate) fn check(engine: &Engine, component: &Component, bytes: &[u8]) -> Result<(), String> {
    let ty = component.component_type();
    let imports: Vec<&str> = ty.imports(engine).map(|(name, _)| name).collect();
    let sockets = |name: &&str| name.starts_with(SOCKETS) && name[SOCKETS.len()..].starts_with('/');
    // Only a component that imports sockets is parsed again for its runtime.
    let runtime_sockets = imports.iter().any(sockets) && embedded_runtime(bytes).is_some();
    let refused: Vec<&str> = imports
        .iter()
        .filter(|name| !(runtime_sockets && sockets(name)))
        .filter(|name| !allowed(name))
        .copied()
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!("refused by the sandbox: {}", reasons(&refused)))
    }
}

#[cfg(test)]
mod tests {
    use super::{embedded_runtime, reasons, refusal};

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

    #[test]
    fn a_tool_that_touches_std_net_is_told_once_and_pointed_at_the_http_provider() {
        // What a Rust tool that touches `std::net` imports.
        let interfaces = [
            "instance-network",
            "network",
            "udp",
            "udp-create-socket",
            "tcp",
            "tcp-create-socket",
            "ip-name-lookup",
        ];
        let imports: Vec<String> = interfaces
            .iter()
            .map(|i| format!("wasi:sockets/{i}@0.2.6"))
            .collect();
        let mut refused: Vec<&str> = imports.iter().map(String::as_str).collect();
        refused.push("acme:vault/secrets");
        let why = reasons(&refused);
        assert_eq!(
            why.matches("network sockets are not available").count(),
            1,
            "one sentence: {why}"
        );
        for import in &imports {
            assert_eq!(why.matches(&format!("`{import}`")).count(), 1, "{why}");
        }
        assert!(
            why.contains("`std::net`") && why.contains("the `http` provider"),
            "{why}"
        );
        assert!(
            why.ends_with("; imports `acme:vault/secrets`, which this host does not provide"),
            "{why}"
        );
    }

    #[test]
    fn a_component_that_embeds_cpython_is_known_by_its_module_name() {
        let named = |module: &str| {
            wat::parse_str(format!(r#"(component (core module ${module}))"#)).unwrap()
        };
        assert_eq!(
            embedded_runtime(&named("libpython3.14.so")),
            Some("CPython")
        );
        assert_eq!(embedded_runtime(&named("open_socket")), None);
        assert_eq!(embedded_runtime(b"not wasm"), None);
    }
}
