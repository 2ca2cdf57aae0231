//! Tools from an OCI registry, end to end through the CLI against a real registry
//! (Debian's `docker-registry`, the CNCF distribution registry, started on loopback
//! by `justonce::__private::TestRegistry`): push, pin by tag (`justonce lock`) and by
//! digest, a tampered blob refused, a registry gone served from the cache and refused
//! without one; and, against a small registry in this file that asks for a login,
//! credentials that reach the registry and nowhere else.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use justonce::__private::TestRegistry;
use justonce::registry::Digest;
use justonce::registry::artifact::Artifact;
use justonce_tests::guests::{DIVERGE_COMPONENT, DIVERGE_V2_COMPONENT, ECHO_COMPONENT};
use serde_json::Value;

use crate::support::builds::{component_of, digest_of_file};
use crate::support::cli::{json_of, justonce_command};

const ECHO_ARGS: &str = r#"{"message":"hello from the registry"}"#;

/// `justonce ARGS` with the journal (and its caches) in `dir`.
fn justonce_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = justonce_command(Some(&dir.join("state.db")));
    // Each test directory is one user's machine: its own cache of compiled
    // components and pulled blobs.
    command
        .args(args)
        .env_remove("JUSTONCE_LOG")
        .env("JUSTONCE_CACHE_DIR", dir.join("cache"));
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run justonce")
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn push(dir: &Path, component: &str, reference: &str) -> Value {
    let out = justonce_in(dir, &["push", component, reference], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    json_of(&out)
}

fn configure(dir: &Path, tool: &str, source: &str) {
    std::fs::write(
        dir.join("justonce.toml"),
        format!("[tools.{tool}]\nsource = \"{source}\"\n"),
    )
    .unwrap();
}

/// Pushes the echo guest as `test/echo:v1` and configures `dir` to run it by digest;
/// what `push` printed, and the source.
fn push_echo(registry: &TestRegistry, dir: &Path) -> (Value, String) {
    let pushed = push(
        dir,
        ECHO_COMPONENT,
        &format!("oci://{}/test/echo:v1", registry.address()),
    );
    let by_digest = format!(
        "oci://{}/test/echo@{}",
        registry.address(),
        pushed["digest"].as_str().unwrap()
    );
    configure(dir, "echo", &by_digest);
    (pushed, by_digest)
}

/// The `digest` of the tool `name` that `justonce tools --json` lists.
fn listed_digest(dir: &Path, name: &str) -> String {
    let out = justonce_in(dir, &["tools", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let tools = json_of(&out);
    let tool = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {tools}"));
    tool["digest"].as_str().unwrap().to_owned()
}

#[test]
fn a_tag_is_pinned_by_lock_and_a_moved_tag_changes_nothing_until_the_next_lock() {
    let Some(registry) = TestRegistry::start("registry::a_tag_is_pinned_by_lock") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("oci://{}/shop/diverge:v1", registry.address());
    let v1 = push(dir.path(), DIVERGE_COMPONENT, &tag);
    assert_eq!(v1["tool"], "diverge");
    assert_eq!(v1["component_digest"], digest_of_file(DIVERGE_COMPONENT));
    assert!(
        v1["pushed"]
            .as_str()
            .unwrap()
            .ends_with(v1["digest"].as_str().unwrap()),
        "{v1}"
    );

    configure(dir.path(), "diverge", &tag);
    // A tag alone does not say which component runs: refused until it is locked.
    let out = justonce_in(dir.path(), &["tools"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("run `justonce lock` to pin it"),
        "{}",
        text(&out)
    );

    let out = justonce_in(dir.path(), &["lock"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json_of(&out)["digest"], v1["digest"]);
    let lock = std::fs::read_to_string(dir.path().join("justonce.lock")).unwrap();
    assert!(lock.contains(v1["digest"].as_str().unwrap()), "{lock}");
    assert_eq!(
        listed_digest(dir.path(), "diverge"),
        digest_of_file(DIVERGE_COMPONENT)
    );

    // The tag moves to a new build: the locked host still runs the old one …
    let v2 = push(dir.path(), DIVERGE_V2_COMPONENT, &tag);
    assert_ne!(v2["digest"], v1["digest"]);
    assert_eq!(
        listed_digest(dir.path(), "diverge"),
        digest_of_file(DIVERGE_COMPONENT)
    );
    // … until `lock` moves it.
    let out = justonce_in(dir.path(), &["lock"], &[]);
    assert_eq!(json_of(&out)["changed"], true, "{}", text(&out));
    assert_eq!(json_of(&out)["digest"], v2["digest"]);
    assert_eq!(
        listed_digest(dir.path(), "diverge"),
        digest_of_file(DIVERGE_V2_COMPONENT)
    );
}

#[test]
fn a_digest_in_the_source_runs_without_a_lock_and_a_wrong_tool_name_is_refused() {
    let Some(registry) = TestRegistry::start("registry::a_digest_in_the_source") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (pushed, by_digest) = push_echo(&registry, dir.path());
    let out = justonce_in(dir.path(), &["run", "echo", "--args", ECHO_ARGS], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("hello from the registry"),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join("justonce.lock").exists());
    let journal = justonce_in(dir.path(), &["journal", "--json"], &[]);
    let entries = json_of(&journal);
    assert_eq!(
        entries[0]["component"], pushed["component_digest"],
        "the journal names the build that ran: {entries}"
    );

    configure(dir.path(), "refund", &by_digest);
    let out = justonce_in(dir.path(), &["tools"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("holds the tool `echo`, not `refund`"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_tampered_blob_is_refused_and_a_tampered_cache_entry_is_pulled_again() {
    let Some(registry) = TestRegistry::start("registry::a_tampered_blob") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (pushed, source) = push_echo(&registry, dir.path());
    let out = justonce_in(dir.path(), &["run", "echo", "--args", ECHO_ARGS], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // The cached copy is altered: it is not used, the registry's is pulled again.
    let component: Digest = pushed["component_digest"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let cached = dir.path().join("cache/blobs/sha256").join(component.hex());
    let original = std::fs::read(&cached).expect("the pull was cached in the per-user cache");
    let mut altered = original.clone();
    *altered.last_mut().unwrap() ^= 1;
    std::fs::write(&cached, &altered).unwrap();
    let out = justonce_in(dir.path(), &["run", "echo", "--args", ECHO_ARGS], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read(&cached).unwrap(), original, "pulled again");

    // The registry's blob is altered: a host without the cache refuses it.
    std::fs::write(registry.blob_file(&component), &altered).unwrap();
    let fresh = tempfile::tempdir().unwrap();
    configure(fresh.path(), "echo", &source);
    let out = justonce_in(fresh.path(), &["run", "echo", "--args", ECHO_ARGS], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("component layer does not match its digest")
            && said.contains(component.as_str()),
        "{said}"
    );
    assert!(
        !said.contains("hello from the registry"),
        "nothing ran: {said}"
    );
    assert!(
        !fresh
            .path()
            .join("cache/blobs/sha256")
            .join(component.hex())
            .exists()
    );
}

#[test]
fn a_registry_that_went_away_is_served_from_the_cache_and_refused_without_one() {
    let Some(mut registry) = TestRegistry::start("registry::a_registry_that_went_away") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pushed = push(
        dir.path(),
        ECHO_COMPONENT,
        &format!("oci://{}/test/echo:v1", registry.address()),
    );
    configure(
        dir.path(),
        "echo",
        &format!("oci://{}/test/echo:v1", registry.address()),
    );
    let out = justonce_in(dir.path(), &["lock"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = justonce_in(dir.path(), &["run", "echo", "--args", ECHO_ARGS], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    registry.stop();
    let out = justonce_in(
        dir.path(),
        &["run", "echo", "--args", r#"{"message":"again"}"#],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "served from the cache: {}",
        text(&out)
    );
    assert_eq!(
        listed_digest(dir.path(), "echo"),
        pushed["component_digest"]
    );

    // Another host with the same files and no cache cannot start the tool.
    let fresh = tempfile::tempdir().unwrap();
    for file in ["justonce.toml", "justonce.lock"] {
        std::fs::copy(dir.path().join(file), fresh.path().join(file)).unwrap();
    }
    let out = justonce_in(fresh.path(), &["run", "echo", "--args", ECHO_ARGS], &[]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("the registry cannot be reached") && said.contains("not in the cache"),
        "{said}"
    );
}

/// A registry that serves one artifact and asks for HTTP Basic credentials; counts
/// the requests that carried the right ones.
struct LoginRegistry {
    address: String,
    authorized: Arc<AtomicU32>,
}

impl LoginRegistry {
    fn start(user: &str, password: &str, wasm: Vec<u8>) -> Self {
        use base64::Engine as _;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        let artifact = Artifact::of(&wasm);
        let manifest_path = format!("/v2/test/echo/manifests/{}", artifact.digest());
        let blob_path = format!("/v2/test/echo/blobs/{}", Digest::of(&wasm));
        let authorized = Arc::new(AtomicU32::new(0));
        let count = Arc::clone(&authorized);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                reader.read_line(&mut request_line).unwrap_or(0);
                let mut authorization = None;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("authorization")
                    {
                        authorization = Some(value.trim().to_owned());
                    }
                }
                let path = request_line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("")
                    .to_owned();
                let (status, body): (&str, &[u8]) = if authorization.as_deref() != Some(&expected) {
                    ("401 Unauthorized", b"")
                } else {
                    count.fetch_add(1, Ordering::SeqCst);
                    if path == manifest_path {
                        ("200 OK", &artifact.manifest)
                    } else if path == blob_path {
                        ("200 OK", &wasm)
                    } else {
                        ("404 Not Found", b"")
                    }
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nWWW-Authenticate: Basic realm=\"test\"\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(body);
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        });
        Self {
            address,
            authorized,
        }
    }
}

#[test]
fn registry_credentials_reach_the_registry_and_not_the_journal_or_the_logs() {
    const USER: &str = "robot";
    const PASSWORD: &str = "pw-registry-Secret-8472";
    let wasm = std::fs::read(ECHO_COMPONENT).unwrap();
    let digest = Artifact::of(&wasm).digest();
    let registry = LoginRegistry::start(USER, PASSWORD, wasm);
    let dir = tempfile::tempdir().unwrap();
    configure(
        dir.path(),
        "echo",
        &format!("oci://{}/test/echo@{digest}", registry.address),
    );

    let out = justonce_in(dir.path(), &["run", "echo", "--args", ECHO_ARGS], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("not authorized") && text(&out).contains("JUSTONCE_REGISTRY_USERNAME"),
        "{}",
        text(&out)
    );
    assert_eq!(registry.authorized.load(Ordering::SeqCst), 0);

    // From a secrets file named by the configuration, with every log line on.
    std::fs::write(
        dir.path().join("registry.env"),
        format!("JUSTONCE_REGISTRY_USERNAME={USER}\nJUSTONCE_REGISTRY_PASSWORD={PASSWORD}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("justonce.toml"),
        format!(
            "registry_secrets_file = \"registry.env\"\n[tools.echo]\nsource = \"oci://{}/test/echo@{digest}\"\n",
            registry.address
        ),
    )
    .unwrap();
    // Every line of the host's own crates and of the HTTP client (the compiler's
    // trace would take a minute to print).
    let trace = [(
        "JUSTONCE_LOG",
        "trace,cranelift_codegen=warn,cranelift_frontend=warn,regalloc2=warn,wasmtime_internal_cranelift=warn",
    )];
    let out = justonce_in(
        dir.path(),
        &["run", "echo", "--conversation", "c1", "--args", ECHO_ARGS],
        &trace,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        registry.authorized.load(Ordering::SeqCst) >= 2,
        "manifest and blob"
    );
    let journal = justonce_in(dir.path(), &["journal", "--json"], &trace);
    assert_eq!(journal.status.code(), Some(0), "{}", text(&journal));
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    for (what, said) in [("run", text(&out)), ("journal", text(&journal))] {
        assert!(
            !said.contains(PASSWORD) && !said.contains(&encoded),
            "{what}: {said}"
        );
    }
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().unwrap() != "registry.env" {
            let bytes = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            assert!(
                !bytes.contains(PASSWORD) && !bytes.contains(&encoded),
                "{} holds the credentials",
                path.display()
            );
        }
    }
}

/// A host on `db` whose tools are `runtime`'s (a deployment of one build).
fn deployment(
    db: &Path,
    runtime: Arc<justonce::Runtime>,
    mail: &Arc<crate::support::FakePayments>,
) -> justonce::Host {
    justonce::Host::builder()
        .database(db)
        .runtime(runtime)
        .provider("mail", mail.clone())
        .build()
        .unwrap()
}

#[test]
fn a_new_build_keeps_the_tools_keys_and_the_journal_names_the_build_of_each_call() {
    use justonce::CallRequest;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mail = Arc::new(crate::support::FakePayments::new(
        crate::support::Fault::None,
    ));
    let first = CallRequest::new("diverge", r#"{"variant":"a"}"#).conversation("c");
    let second = CallRequest::new("diverge", r#"{"variant":"b"}"#).conversation("c");

    let v1 = deployment(&db, crate::support::RUNTIME.clone(), &mail);
    let done = v1.call(&first).unwrap();
    let mut runtime = justonce::Runtime::new(justonce::Limits::default()).unwrap();
    runtime.load_file(Path::new(DIVERGE_V2_COMPONENT)).unwrap();
    let v2 = deployment(&db, Arc::new(runtime), &mail);

    // The retry after the roll-out is the same call: same key, replayed, not run.
    assert_eq!(v2.key_for(&first).unwrap(), done.key);
    let retried = v2.call(&first).unwrap();
    assert!(retried.replayed);
    assert_eq!(
        mail.applied().len(),
        1,
        "the mail of the first call went once"
    );
    let new = v2.call(&second).unwrap();
    assert!(!new.replayed);
    assert_eq!(mail.applied().len(), 2);

    let journal = v2.journal(Some("c"), 10).unwrap();
    assert_eq!(
        component_of(&journal, &done.key),
        Some(digest_of_file(DIVERGE_COMPONENT))
    );
    assert_eq!(
        component_of(&journal, &new.key),
        Some(digest_of_file(DIVERGE_V2_COMPONENT))
    );
    assert_ne!(
        digest_of_file(DIVERGE_COMPONENT),
        digest_of_file(DIVERGE_V2_COMPONENT)
    );
}

/// The descriptions of the tools a `tools/list` response lists, by name.
fn listed(response: &Value) -> Vec<(String, String)> {
    crate::support::mcp::result(response)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["description"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Waits for `notifications/tools/list_changed`; no other message comes first.
fn await_list_changed(client: &mut crate::support::mcp::McpClient) {
    let message = client.next_message();
    assert_eq!(
        message["method"], "notifications/tools/list_changed",
        "{message}"
    );
}

#[test]
fn serve_swaps_in_the_build_a_new_lock_pins_and_retires_a_source_the_configuration_dropped() {
    use crate::support::mcp::{McpProcess, VERSION};
    let Some(registry) = TestRegistry::start("registry::serve_swaps_in") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("oci://{}/shop/diverge:v1", registry.address());
    push(dir.path(), DIVERGE_COMPONENT, &tag);
    let (_, echo) = push_echo(&registry, dir.path());
    let both = format!("[tools.diverge]\nsource = \"{tag}\"\n[tools.echo]\nsource = \"{echo}\"\n");
    std::fs::write(dir.path().join("justonce.toml"), &both).unwrap();
    let out = justonce_in(dir.path(), &["lock"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let mut serve = McpProcess::spawn(
        &dir.path().join("state.db"),
        &["--watch-interval-ms", "25"],
        "warn",
    );
    serve.client.initialize(VERSION);
    let before = listed(&serve.client.request("tools/list", serde_json::json!({})));
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(!before[0].1.contains("(v2)"), "{before:?}");

    // The tag moves to v2 and `lock` pins it: the running server swaps it in.
    push(dir.path(), DIVERGE_V2_COMPONENT, &tag);
    let out = justonce_in(dir.path(), &["lock"], &[]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(r#""changed":true"#),
        "{}",
        text(&out)
    );
    await_list_changed(&mut serve.client);
    let after = listed(&serve.client.request("tools/list", serde_json::json!({})));
    assert_eq!(after[0].0, "diverge");
    assert!(after[0].1.contains("(v2)"), "{after:?}");

    // `echo` leaves the configuration: offered to no new call.
    std::fs::write(
        dir.path().join("justonce.toml"),
        format!("[tools.diverge]\nsource = \"{tag}\"\n"),
    )
    .unwrap();
    await_list_changed(&mut serve.client);
    let last = listed(&serve.client.request("tools/list", serde_json::json!({})));
    assert_eq!(
        last.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["diverge"]
    );
    let (_, code, log) = serve.close();
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn a_reload_is_refused_when_a_tools_directory_file_would_stand_in_for_a_registry_tool() {
    use justonce::registry::{BlobCache, Reference};
    let dir = tempfile::tempdir().unwrap();
    let wasm = std::fs::read(DIVERGE_COMPONENT).unwrap();
    let artifact = Artifact::of(&wasm);
    let blobs = dir.path().join("blobs");
    let cache = BlobCache::new(&blobs);
    cache.put(&artifact.manifest);
    cache.put(&wasm);
    // Port 1 of loopback: no registry answers there.
    let reference: Reference = format!("oci://127.0.0.1:1/shop/diverge@{}", artifact.digest())
        .parse()
        .unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    let builder = || {
        justonce::Host::builder()
            .tool_source("diverge", reference.clone())
            .blob_cache(&blobs)
            .tools_dir(&tools)
    };
    let host = builder().build().unwrap();
    let running = || host.runtime().current("diverge").unwrap().digest.clone();
    assert_eq!(running(), digest_of_file(DIVERGE_COMPONENT));

    // The registry is away, the cache is gone, and an unpinned build of the same tool
    // lands in the tools directory: the reload is refused as the start would be.
    std::fs::remove_dir_all(&blobs).unwrap();
    std::fs::copy(DIVERGE_V2_COMPONENT, tools.join("diverge.wasm")).unwrap();
    let refused = builder().reload(&host, Some(&tools));
    assert!(
        matches!(&refused, Err(justonce::Error::DuplicateTool { name, .. }) if name == "diverge"),
        "{refused:?}"
    );
    assert_eq!(
        running(),
        digest_of_file(DIVERGE_COMPONENT),
        "the pinned build still runs"
    );
    let restart = builder().build().map(|_| ());
    assert!(
        matches!(restart, Err(justonce::Error::DuplicateTool { .. })),
        "as a start would be: {restart:?}"
    );
}

#[test]
fn one_login_for_two_registries_is_refused_and_each_registry_gets_its_own() {
    const USER: &str = "robot";
    const PASSWORD: &str = "pw-registry-Shared-1187";
    let echo = std::fs::read(ECHO_COMPONENT).unwrap();
    let diverge = std::fs::read(DIVERGE_COMPONENT).unwrap();
    let (echo_digest, diverge_digest) = (
        Artifact::of(&echo).digest(),
        Artifact::of(&diverge).digest(),
    );
    let first = LoginRegistry::start(USER, PASSWORD, echo);
    let second = LoginRegistry::start(USER, PASSWORD, diverge);
    let dir = tempfile::tempdir().unwrap();
    let sources = format!(
        "[tools.echo]\nsource = \"oci://{}/test/echo@{echo_digest}\"\n[tools.diverge]\nsource = \"oci://{}/test/echo@{diverge_digest}\"\n",
        first.address, second.address
    );
    std::fs::write(dir.path().join("justonce.toml"), &sources).unwrap();
    let login = [
        ("JUSTONCE_REGISTRY_USERNAME", USER),
        ("JUSTONCE_REGISTRY_PASSWORD", PASSWORD),
    ];

    // One login in the environment, two registries: refused, not sent to both.
    let out = justonce_in(dir.path(), &["run", "echo", "--args", ECHO_ARGS], &login);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("JUSTONCE_REGISTRY_HOST") && text(&out).contains("[registries."),
        "{}",
        text(&out)
    );
    let reached = || {
        (
            first.authorized.load(Ordering::SeqCst),
            second.authorized.load(Ordering::SeqCst),
        )
    };
    assert_eq!(reached(), (0, 0));

    // A login per registry, each in its own file.
    let mut config = sources;
    for (name, registry) in [("first", &first), ("second", &second)] {
        std::fs::write(
            dir.path().join(format!("{name}.env")),
            format!("JUSTONCE_REGISTRY_USERNAME={USER}\nJUSTONCE_REGISTRY_PASSWORD={PASSWORD}\n"),
        )
        .unwrap();
        config.push_str(&format!(
            "[registries.\"{}\"]\nsecrets_file = \"{name}.env\"\n",
            registry.address
        ));
    }
    std::fs::write(dir.path().join("justonce.toml"), &config).unwrap();
    let out = justonce_in(dir.path(), &["run", "echo", "--args", ECHO_ARGS], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (a, b) = reached();
    assert!(a >= 2 && b >= 2, "manifest and blob from each: {a}, {b}");
}
