//! The rest of an upstream MCP server's surface through the gateway: resources,
//! resource templates, prompts, completion, subscriptions and log messages. Each
//! server is read twice with the official MCP Python SDK (`$JUSTONCE_MCP_PYTHON`,
//! tests/mcp/surface_client.py), directly and through `justonce serve`, in both eras
//! (the `initialize` handshake and the stateless 2026-07-28 revision), and what the
//! agent is told must be the same, modulo the names the gateway offers them by
//! (`justonce://UPSTREAM/URI`, the `prefix` before a prompt's name). The servers are
//! `server-everything` and `server-filesystem` (npm, `$JUSTONCE_MCP_UPSTREAMS`) and a FastMCP server
//! (tests/mcp/fastmcp_surface.py, `$JUSTONCE_FRAMEWORKS_PYTHON`). Skipped without
//! them, but under CI=true.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::mcp_gateway::{installed, needed, python};
use crate::support::install;
use crate::support::mcp::{McpProcess, VERSION};

const CLIENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/mcp/surface_client.py"
);
const FASTMCP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/mcp/fastmcp_surface.py"
);

/// The frameworks' Python (whose MCP SDK 1.x has FastMCP), or why there is none.
fn frameworks_python() -> Result<PathBuf, String> {
    install::from_env("JUSTONCE_FRAMEWORKS_PYTHON").unwrap_or_else(|| {
        Err(
            "set JUSTONCE_FRAMEWORKS_PYTHON to a Python with tests/frameworks/requirements.txt"
                .into(),
        )
    })
}

/// A gateway's directory: `justonce.toml` with `section`s.
fn gateway(sections: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("justonce.toml"), sections).unwrap();
    dir
}

/// What `surface_client.py` read in `mode` from the server `command` started, or
/// from the gateway in `dir` offering it as `upstream` with `prefix`.
fn read(python: &Path, mode: &str, side: Side<'_>) -> Value {
    read_with(python, mode, side, &[])
}

/// [`read`], with `env` set for the client (and the gateway it starts).
fn read_with(python: &Path, mode: &str, side: Side<'_>, env: &[(&str, &str)]) -> Value {
    let mut client = Command::new(python);
    client.envs(env.iter().copied());
    client.arg(CLIENT).arg(mode);
    match side {
        Side::Direct(command) => client.arg("direct").args(command),
        Side::Gateway(dir, upstream, prefix) => {
            let bin = std::env::var_os("JUSTONCE_TEST_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| env!("CARGO_BIN_EXE_justonce").into());
            let serve = format!(
                "cd '{dir}' && exec '{bin}' --db '{dir}/state.db' serve",
                dir = dir.display(),
                bin = bin.display()
            );
            client
                .arg(format!("gateway:{upstream}:{prefix}"))
                .args(["sh", "-c", &serve])
                .env("JUSTONCE_LOG", "warn")
        }
    };
    let output = client.output().expect("run surface_client.py");
    assert!(
        output.status.success(),
        "surface_client.py {mode} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

enum Side<'a> {
    Direct(&'a [&'a str]),
    Gateway(&'a Path, &'a str, &'a str),
}

/// The gateway's `report` as the server would have said it: its URIs and prompt
/// names back to the server's own, the name of the upstream taken out of the
/// errors it passed on. Asserts each was offered under the gateway's name.
fn as_the_server_says(report: &Value, upstream: &str, prefix: &str) -> Value {
    let wrapped = format!("justonce://{upstream}/");
    let mut text = report.to_string();
    for refused in ["prompts/get", "resources/read", "completion/complete"] {
        text = text.replace(&format!("upstream `{upstream}` refused {refused}: "), "");
    }
    let mut unwrapped: Value = serde_json::from_str(&text.replace(&wrapped, "")).unwrap();
    // Asked of the gateway only (`surface_client.py`).
    if let Some(report) = unwrapped.as_object_mut() {
        report.retain(|key, _| key != "capabilities_when_ready");
    }
    for (i, listed) in report["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let uri = listed["uri"].as_str().unwrap();
        assert!(uri.starts_with(&wrapped), "resource {i}: {uri}");
    }
    let prompts = unwrapped.get_mut("prompts").and_then(Value::as_array_mut);
    for prompt in prompts.into_iter().flatten() {
        let name = prompt["name"].as_str().unwrap();
        let own = name
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{name} without {prefix}"));
        prompt["name"] = json!(own);
    }
    unwrapped
}

/// Asserts that each part of `direct` is the same `through` the gateway, except
/// `protocol_version` and `capabilities` (asserted by the caller).
fn assert_same(direct: &Value, through: &Value, what: &str) {
    let keys: Vec<&String> = direct.as_object().unwrap().keys().collect();
    let theirs: Vec<&String> = through.as_object().unwrap().keys().collect();
    assert_eq!(keys, theirs, "{what}: the same reads on both sides");
    for key in keys {
        if key == "protocol_version" || key == "capabilities" {
            continue;
        }
        assert_eq!(direct[key], through[key], "{what}: {key}");
    }
}

/// Every resource, template, read, prompt, completion and refused prompt of
/// server-everything, and (on a session) a subscription's update, read directly and
/// through the gateway in both eras: the same content, under the gateway's names.
/// Before the gateway passed them through, `resources/list` answered -32601.
#[test]
fn server_everything_reads_through_the_gateway_as_it_does_directly_in_both_eras() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let Some(index) = needed("server-everything", &installed("server-everything")) else {
        return;
    };
    let index = index.display().to_string();
    let command = ["node", index.as_str(), "stdio"];
    for mode in ["legacy", "auto"] {
        // A journal of its own: `toggle-subscriber-updates` called in the other
        // era would be a replay here, and toggle nothing.
        let dir = gateway(&format!(
            "[upstreams.everything]\ncommand = {command:?}\nprefix = \"ev_\"\n"
        ));
        let direct = read(&python, mode, Side::Direct(&command));
        let through = read(
            &python,
            mode,
            Side::Gateway(dir.path(), "everything", "ev_"),
        );
        let what = format!("{mode}: {direct}\n\n{through}");
        assert_eq!(
            direct["resources"].as_array().map(Vec::len),
            Some(7),
            "{what}"
        );
        assert!(
            !direct["templates"].as_array().unwrap().is_empty(),
            "{what}"
        );
        assert_eq!(
            direct["prompts"].as_array().map(Vec::len),
            Some(4),
            "{what}"
        );
        assert_eq!(
            direct["completions"][0]["ok"]["completion"]["values"],
            json!(["Sales", "Support"])
        );
        assert!(direct["bad_prompt"]["error"].is_object(), "{what}");
        assert_eq!(
            through["bad_prompt"]["error"]["message"]
                .as_str()
                .map(|m| m.starts_with("upstream `everything` refused prompts/get: ")),
            Some(true),
            "the refusal names the upstream: {what}"
        );
        assert_same(
            &direct,
            &as_the_server_says(&through, "everything", "ev_"),
            &what,
        );
        let capabilities = json!({ "resources": true, "prompts": true, "completions": true });
        for (name, declared) in capabilities.as_object().unwrap() {
            assert_eq!(&through["capabilities"][name], declared, "{what}");
        }
        // A subscription's update heard: on a session through resources/subscribe,
        // on the stateless revision (which removed it) through subscriptions/listen
        // (before the gateway relayed updates to a listen stream, it declared no
        // `subscribe` there and heard none).
        assert_eq!(through["capabilities"]["subscribe"], true, "{what}");
        assert_eq!(
            through["updated"],
            json!(["justonce://everything/demo://resource/static/document/architecture.md"]),
            "{what}"
        );
        match mode {
            "legacy" => assert_eq!(through["protocol_version"], direct["protocol_version"]),
            _ => assert_eq!(through["protocol_version"], "2026-07-28", "{what}"),
        }
    }
}

/// server-filesystem (2026.8.31) offers no resources: it declares tools only, and
/// its files are read with tools (within the directories it was started with, or
/// the roots of a client that declares `roots`). Side by side, directly and
/// through the gateway in both eras: the same tools, the same answers to its
/// read-only tools (an embedded `file://` resource in a tool's result passed as it
/// is), and the gateway declares no resources once it heard the server. Its
/// `resources/list`, asked anyway, is -32601 directly and an empty list through
/// the gateway (which declared resources before its upstream answered). Before
/// server-filesystem was installed (tests/mcp/upstreams), this failed under CI.
#[test]
fn server_filesystems_tools_and_missing_resources_are_the_same_through_the_gateway() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let Some(index) = needed("server-filesystem", &installed("server-filesystem")) else {
        return;
    };
    let files = tempfile::tempdir().unwrap();
    let root = files.path().canonicalize().unwrap().display().to_string();
    std::fs::write(files.path().join("notes.txt"), "first line\nsecond\n").unwrap();
    std::fs::write(files.path().join("data.bin"), [0u8, 1, 2]).unwrap();
    let index = index.display().to_string();
    let command = ["node", index.as_str(), root.as_str()];
    let dir = gateway(&format!(
        "[upstreams.files]\ncommand = {command:?}\nprefix = \"fs_\"\n"
    ));
    for mode in ["legacy", "auto"] {
        let direct = read_files(&python, mode, Side::Direct(&command), &root);
        let mut through = read_files(
            &python,
            mode,
            Side::Gateway(dir.path(), "files", "fs_"),
            &root,
        );
        let what = format!("{mode}: {direct}\n\n{through}");
        let none = json!({ "resources": false, "prompts": false, "completions": false, "subscribe": false });
        assert_eq!(direct["capabilities"], none, "{what}");
        assert_eq!(direct["tools"].as_array().map(Vec::len), Some(14), "{what}");
        assert_eq!(
            direct["tool_calls"][3]["read_media_file"]["ok"]["content"][0]["resource"]["uri"],
            json!(format!("file://{root}/data.bin")),
            "{what}"
        );
        assert_eq!(
            direct["unadvertised_resources"]["error"]["code"], -32601,
            "{what}"
        );
        assert_eq!(
            through["unadvertised_resources"],
            json!({ "ok": { "resources": [] } }),
            "{what}"
        );
        if mode == "auto" {
            assert_eq!(
                through["capabilities_when_ready"],
                json!({ "resources": false, "prompts": false, "completions": false }),
                "{what}"
            );
        }
        // What the gateway declared before its upstream answered, read: nothing.
        for key in ["resources", "templates", "reads", "prompts", "gets"] {
            let listed = through.get(key).cloned().unwrap_or_else(|| json!([]));
            assert_eq!(listed, json!([]), "{key}: {what}");
        }
        let compared = ["protocol_version", "capabilities", "tools", "tool_calls"];
        let mut direct = direct.clone();
        for side in [&mut direct, &mut through] {
            side.as_object_mut()
                .unwrap()
                .retain(|key, _| compared.contains(&key.as_str()));
        }
        assert_same(
            &direct,
            &as_the_server_says(&through, "files", "fs_"),
            &what,
        );
    }
}

/// [`read`] with `$SURFACE_FILES` set to `root`, the directory whose files
/// server-filesystem's tools are called on.
fn read_files(python: &Path, mode: &str, side: Side<'_>, root: &str) -> Value {
    read_with(python, mode, side, &[("SURFACE_FILES", root)])
}

/// A FastMCP server's prompt, listed and got directly and through the gateway in
/// both eras: the same, its name under the prefix.
#[test]
fn a_fastmcp_servers_prompt_is_the_same_through_the_gateway_in_both_eras() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let Some(fastmcp) = needed("Python with FastMCP", &frameworks_python()) else {
        return;
    };
    let fastmcp = fastmcp.display().to_string();
    let command = [fastmcp.as_str(), FASTMCP];
    let dir = gateway(&format!(
        "[upstreams.fast]\ncommand = {command:?}\nprefix = \"fast_\"\n"
    ));
    for mode in ["legacy", "auto"] {
        let direct = read(&python, mode, Side::Direct(&command));
        let through = read(&python, mode, Side::Gateway(dir.path(), "fast", "fast_"));
        let what = format!("{mode}: {direct}\n\n{through}");
        assert_eq!(direct["prompts"][0]["name"], "review", "{what}");
        assert_eq!(through["prompts"][0]["name"], "fast_review", "{what}");
        assert!(
            direct["gets"][0]["ok"]["messages"][0]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Please review this x code")),
            "{what}"
        );
        assert_same(
            &direct,
            &as_the_server_says(&through, "fast", "fast_"),
            &what,
        );
    }
}

/// `[upstreams.NAME]` of the FastMCP server.
fn fastmcp_section(fastmcp: &Path, name: &str) -> String {
    format!(
        "[upstreams.{name}]\ncommand = [{:?}, {FASTMCP:?}]\nprefix = \"{name}_\"\n",
        fastmcp.display().to_string()
    )
}

/// The log messages sent to the client while `tool` runs, and its answer.
fn logged_during(server: &mut McpProcess, id: &str, tool: &str) -> (Vec<Value>, Value) {
    server.client.send_request(
        json!(id),
        "tools/call",
        json!({ "name": tool, "arguments": { "text": id } }),
    );
    let mut logged = Vec::new();
    loop {
        let message = server.client.next_message();
        if message["id"] == id {
            return (logged, message);
        }
        if message["method"] == "notifications/message" {
            logged.push(message["params"].clone());
        }
    }
}

/// An upstream's log messages during a call reach the calling agent as the tool's
/// log lines, at the level it set with `logging/setLevel` (FastMCP's `debug` is
/// below `info`: not sent), and none before it set one. Before, they went to the
/// host's log only.
#[test]
fn an_upstreams_log_messages_during_a_call_reach_the_agent_at_its_level() {
    let Some(fastmcp) = needed("Python with FastMCP", &frameworks_python()) else {
        return;
    };
    let dir = gateway(&fastmcp_section(&fastmcp, "fast"));
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "warn");
    server.client.initialize(VERSION);
    server.client.wait_for_upstreams();
    let (logged, answer) = logged_during(&mut server, "quiet", "fast_shout");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(logged.is_empty(), "no level set: {logged:?}");
    let set = server
        .client
        .request("logging/setLevel", json!({ "level": "info" }));
    assert!(set.get("result").is_some(), "{set}");
    let (logged, answer) = logged_during(&mut server, "heard", "fast_shout");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let lines: Vec<(Value, Value, Value)> = logged
        .iter()
        .map(|l| (l["level"].clone(), l["data"].clone(), l["logger"].clone()))
        .collect();
    assert_eq!(
        lines,
        [
            (json!("info"), json!("shouting heard"), json!("fast_shout")),
            (json!("warning"), json!("this is loud"), json!("fast_shout")),
        ],
        "{logged:?}"
    );
}

/// What the agent is told when a read names no upstream, one that is down, or an
/// unknown prompt: an MCP error at once naming it; server-memory's resource is read
/// through. A host whose upstreams offer no resources or prompts declares none once
/// they said so (before: it cannot know, and declares them).
#[test]
fn a_read_of_an_unknown_or_down_upstream_is_refused_at_once_naming_it() {
    let Some(python) = needed("Python with the MCP SDK", &python()) else {
        return;
    };
    let Some(memory) = needed("server-memory", &installed("server-memory")) else {
        return;
    };
    let dir = gateway(&format!(
        "[upstreams.memory]\ncommand = [\"node\", {:?}]\nenv = {{ MEMORY_FILE_PATH = {:?} }}\n\n[upstreams.broken]\ncommand = [\"false\"]\nprefix = \"b_\"\n",
        memory.display().to_string(),
        dir_file("memory.jsonl"),
    ));
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "error");
    let opened = server.client.initialize(VERSION);
    // Before they started, what they offer is not known: declared.
    assert!(opened["capabilities"]["resources"].is_object(), "{opened}");
    // Wait for memory's first start (broken keeps failing).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let listed = server.client.request("tools/list", json!({}));
        if listed["result"]["_meta"]["dev.justonce/upstreams"]["memory"]["state"] == "ready" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{listed}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let nowhere = server
        .client
        .request("resources/read", json!({ "uri": "justonce://nowhere/x" }));
    assert_eq!(nowhere["error"]["code"], -32002, "{nowhere}");
    assert!(
        nowhere["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no upstream named `nowhere`"),
        "{nowhere}"
    );
    let plain = server
        .client
        .request("resources/read", json!({ "uri": "file:///etc/passwd" }));
    assert_eq!(plain["error"]["code"], -32002, "{plain}");
    let down = server
        .client
        .request("resources/read", json!({ "uri": "justonce://broken/x" }));
    assert_eq!(down["error"]["data"]["upstream"], "broken", "{down}");
    assert!(
        down["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`broken`"),
        "{down}"
    );
    let prompt = server
        .client
        .request("prompts/get", json!({ "name": "b_nothing" }));
    assert_eq!(prompt["error"]["code"], -32602, "{prompt}");
    // memory's one resource, under its name, read through.
    let listed = server.client.request("resources/list", json!({}));
    let graph = "justonce://memory/memory://knowledge-graph";
    assert_eq!(listed["result"]["resources"][0]["uri"], graph, "{listed}");
    let read = server
        .client
        .request("resources/read", json!({ "uri": graph }));
    assert_eq!(read["result"]["contents"][0]["uri"], graph, "{read}");
    drop(server);
    // A host whose one upstream said it offers tools only declares nothing else.
    let dir = gateway(&format!(
        "[upstreams.bare]\ncommand = [{:?}, \"-c\", {TOOLS_ONLY:?}]\n",
        python.display().to_string()
    ));
    let mut server = McpProcess::spawn(&dir.path().join("state.db"), &[], "error");
    server.client.initialize(VERSION);
    server.client.wait_for_upstreams();
    let again = server.client.initialize(VERSION);
    let capabilities = &again["capabilities"];
    assert!(capabilities["tools"].is_object(), "{again}");
    assert!(capabilities.get("resources").is_none(), "{again}");
    assert!(capabilities.get("prompts").is_none(), "{again}");
    assert!(capabilities.get("completions").is_none(), "{again}");
}

/// An MCP server that offers tools only (none of them), in plain Python.
const TOOLS_ONLY: &str = r#"
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    result = {"tools": []}
    if message["method"] == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "bare", "version": "1"}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"#;

/// A path for a file of the test's (in the system's temporary directory).
fn dir_file(name: &str) -> String {
    std::env::temp_dir()
        .join(format!("justonce-surface-{}-{name}", std::process::id()))
        .display()
        .to_string()
}

/// The same reads over the host's Streamable HTTP, on a session and stateless:
/// server-everything's resources listed and read, a prompt got and completed,
/// under the gateway's names (the Python SDK drives stdio above).
#[test]
fn server_everythings_resources_and_prompts_pass_through_over_http_in_both_eras() {
    use crate::support::mcp_http::{HttpClient, HttpProcess, add_token};
    let Some(index) = needed("server-everything", &installed("server-everything")) else {
        return;
    };
    let dir = gateway(&format!(
        "[upstreams.everything]\ncommand = [\"node\", {:?}, \"stdio\"]\nprefix = \"ev_\"\n",
        index.display().to_string()
    ));
    let db = dir.path().join("state.db");
    let token = add_token(&db, "agent");
    let process = HttpProcess::spawn(&db, &[]);
    let mut client = HttpClient::new(process.addr, Some(token.clone()));
    let opened = client.initialize("2025-11-25");
    assert_eq!(opened.status, 200, "{}", opened.body);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let listed = client.request("tools/list", json!({})).message();
        if listed["result"]["_meta"]["dev.justonce/upstreams"]["everything"]["state"] == "ready" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never ready: {listed}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let listed = client.request("resources/list", json!({})).message();
    let resources = listed["result"]["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(resources.len(), 7, "{listed}");
    let uri = resources[0]["uri"].as_str().unwrap().to_owned();
    assert!(uri.starts_with("justonce://everything/demo://"), "{uri}");
    let read = client
        .request("resources/read", json!({ "uri": uri }))
        .message();
    assert_eq!(read["result"]["contents"][0]["uri"], uri, "{read}");
    let prompt = client
        .request("prompts/get", json!({ "name": "ev_simple-prompt" }))
        .message();
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"],
        "This is a simple prompt without arguments.",
        "{prompt}"
    );
    let completed = client
        .request(
            "completion/complete",
            json!({ "ref": { "type": "ref/prompt", "name": "ev_completable-prompt" }, "argument": { "name": "department", "value": "S" } }),
        )
        .message();
    assert_eq!(
        completed["result"]["completion"]["values"],
        json!(["Sales", "Support"]),
        "{completed}"
    );
    let subscribed = client
        .request("resources/subscribe", json!({ "uri": uri }))
        .message();
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    // Stateless: the same read, with its caching directives; no subscriptions.
    let mut stateless = HttpClient::new(process.addr, Some(token));
    let read = stateless
        .stateless("resources/read", json!({ "uri": uri }))
        .message();
    assert_eq!(read["result"]["contents"][0]["uri"], uri, "{read}");
    assert_eq!(read["result"]["resultType"], "complete", "{read}");
    assert_eq!(read["result"]["ttlMs"], 0, "{read}");
    let refused = stateless
        .stateless("resources/subscribe", json!({ "uri": uri }))
        .message();
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
}
