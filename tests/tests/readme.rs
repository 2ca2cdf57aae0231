//! Every snippet of the README runs: the Rust tool and its manifest, the Python app
//! and the JavaScript tool are what `justonce new` writes (whose builds `new_tool`
//! runs), the Python MCP example
//! compiles and runs against `justonce serve`, the JSON and TOML configurations load,
//! and every `justonce` command shown exists.

use std::path::Path;
use std::process::Command;

use crate::support::cli::justonce_command;

const README: &str = include_str!("../../README.md");

/// The placeholder the README's manifest shows where `justonce new` writes the path
/// of the SDK.
const SDK_PLACEHOLDER: &str = "/path/to/justonce/guest-sdk";

/// Every fenced block of the README: (language, text).
fn blocks() -> Vec<(&'static str, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(&str, String)> = None;
    for line in README.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => open = Some((lang.trim(), String::new())),
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some((_, text)), None) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "an unclosed code block in the README");
    blocks
}

/// The one block in `lang` that contains `marker`.
fn block(lang: &str, marker: &str) -> String {
    let found: Vec<String> = blocks()
        .into_iter()
        .filter(|(l, text)| *l == lang && text.contains(marker))
        .map(|(_, text)| text)
        .collect();
    assert_eq!(found.len(), 1, "one {lang} block with {marker:?}");
    found.into_iter().next().unwrap()
}

/// `justonce new remind ARGS…` in a temporary directory: (that directory, the project).
fn new_remind(args: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("remind");
    let out = justonce_command(None)
        .args(["new", "remind", "--dir"])
        .arg(&project)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, project)
}

/// The block in `lang` that contains `marker`, without its first line (which names
/// the file it shows).
fn file_block(lang: &str, marker: &str, first_line: &str) -> String {
    let shown = block(lang, marker);
    shown
        .strip_prefix(first_line)
        .unwrap_or_else(|| panic!("the {lang} block starts with {first_line:?}"))
        .to_owned()
}

/// The HTTP excerpts, one per language, are the example tools' own lines (which
/// `cargo test` builds and runs against a local API: `lang::seed`, `http`), so an
/// author copying one copies code that works.
#[test]
fn the_http_excerpts_are_the_example_tools_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    for (lang, comment) in [("rust", "// "), ("python", "# "), ("js", "// ")] {
        for (_, text) in blocks().into_iter().filter(|(l, _)| *l == lang) {
            let Some(first) = text.lines().next() else {
                continue;
            };
            let Some(path) = first
                .strip_prefix(comment)
                .and_then(|rest| rest.split(' ').next())
                .filter(|p| p.starts_with("tools/"))
            else {
                continue;
            };
            let source = std::fs::read_to_string(root.join(path))
                .unwrap_or_else(|e| panic!("{path}, which the README quotes: {e}"));
            let excerpt: Vec<&str> = text.lines().skip(1).collect();
            let lines: Vec<&str> = source.lines().map(str::trim_start).collect();
            let trimmed: Vec<&str> = excerpt.iter().map(|l| l.trim_start()).collect();
            assert!(
                lines
                    .windows(trimmed.len())
                    .any(|w| w == trimmed.as_slice()),
                "the README's excerpt of {path} is not in it:\n{}",
                excerpt.join("\n")
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3, "one excerpt per language");
}

/// The recipes of "From an agent framework", one per framework, are the code of
/// tests/frameworks/recipes.py, which `mcp_frameworks` runs with each framework on
/// stdio and HTTP: each block, after its first line naming the file, is a run of the
/// file's lines.
#[test]
fn the_agent_framework_recipes_are_the_tests_code() {
    const FILE: &str = "tests/frameworks/recipes.py";
    let source =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(FILE))
            .unwrap_or_else(|e| panic!("{FILE}, which the README quotes: {e}"));
    let lines: Vec<&str> = source.lines().collect();
    let mut quoted = Vec::new();
    for (_, text) in blocks().into_iter().filter(|(l, _)| *l == "python") {
        let mut excerpt = text.lines();
        let Some(framework) = excerpt
            .next()
            .and_then(|first| first.strip_prefix(&format!("# {FILE} (")))
            .and_then(|rest| rest.strip_suffix(')'))
        else {
            continue;
        };
        let excerpt: Vec<&str> = excerpt.collect();
        assert!(
            excerpt.len() > 10
                && lines
                    .windows(excerpt.len())
                    .any(|w| w == excerpt.as_slice()),
            "the README's recipe for {framework} is not in {FILE}:\n{}",
            excerpt.join("\n")
        );
        quoted.push(framework.to_owned());
    }
    assert_eq!(
        quoted,
        [
            "pydantic-ai",
            "the OpenAI Agents SDK",
            "langchain-mcp-adapters"
        ],
        "one recipe per framework"
    );
}

#[test]
fn the_rust_tool_and_its_manifest_are_what_justonce_new_writes() {
    let (_dir, project) = new_remind(&[]);
    let lib = std::fs::read_to_string(project.join("src/lib.rs")).unwrap();
    assert_eq!(block("rust", "export_tool!(Remind);"), lib);

    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    let sdk_line = manifest
        .lines()
        .find(|l| l.starts_with("justonce-guest = "))
        .unwrap();
    let sdk = sdk_line
        .split('"')
        .nth(1)
        .expect("a quoted path to the SDK");
    assert!(
        Path::new(sdk).join("Cargo.toml").is_file(),
        "{sdk} is the SDK"
    );
    let shown = file_block("toml", "[package]", "# Cargo.toml\n");
    assert_eq!(shown, manifest.replace(sdk, SDK_PLACEHOLDER));
}

#[test]
fn the_python_and_javascript_tools_are_what_justonce_new_writes() {
    let (_dir, python) = new_remind(&["--lang", "python"]);
    assert_eq!(
        file_block("python", "WitWorld = export(", "# remind/app.py\n"),
        std::fs::read_to_string(python.join("app.py")).unwrap()
    );
    let (_dir, js) = new_remind(&["--lang", "js"]);
    assert_eq!(
        file_block(
            "js",
            "export const { describe, call }",
            "// remind/tool.js\n"
        ),
        std::fs::read_to_string(js.join("tool.js")).unwrap()
    );
}

#[test]
fn the_python_mcp_example_compiles_and_runs_against_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("example.py");
    std::fs::write(&script, block("python", "StdioServerParameters")).unwrap();
    let compiled = Command::new("python3")
        .args(["-m", "py_compile"])
        .arg(&script)
        .output()
        .expect("python3 runs");
    assert!(
        compiled.status.success(),
        "the example is valid Python: {}",
        String::from_utf8_lossy(&compiled.stderr)
    );

    let python = crate::mcp_python::PYTHON
        .as_ref()
        .unwrap_or_else(|e| panic!("no Python with the MCP SDK: {e}"));
    let run = |_: u32| {
        Command::new(python)
            .arg(&script)
            .current_dir(dir.path())
            .env("JUSTONCE", env!("CARGO_BIN_EXE_justonce"))
            .env_remove("JUSTONCE_TOOLS")
            .env_remove("JUSTONCE_DB")
            .output()
            .unwrap()
    };
    let first = run(1);
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        stdout.contains("'order_id': 4417") && stdout.trim_end().ends_with("False"),
        "the result and `replayed: False`: {stdout}"
    );
    let again = String::from_utf8_lossy(&run(2).stdout).into_owned();
    assert!(
        again.trim_end().ends_with("True"),
        "replayed the second time: {again}"
    );
}

#[test]
fn the_configuration_snippets_load() {
    let dir = tempfile::tempdir().unwrap();
    let servers: serde_json::Value =
        serde_json::from_str(&block("json", "\"command\"")).expect("the MCP client config is JSON");
    assert!(servers["mcpServers"]["justonce"]["args"].is_array());
    let remote: serde_json::Value = serde_json::from_str(&block("json", "\"type\": \"http\""))
        .expect("the remote MCP client config is JSON");
    assert_eq!(
        remote["mcpServers"]["justonce"]["url"],
        "http://127.0.0.1:8080/mcp"
    );

    let http = dir.path().join("http.json");
    std::fs::write(&http, block("json", "\"allow\"")).unwrap();
    std::fs::write(
        dir.path().join("secrets.env"),
        "PAYMENTS_TOKEN=tok_example\n",
    )
    .unwrap();
    let config = justonce::HttpConfig::load(&http).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        config.services["payments"]
            .headers
            .contains_key("Authorization")
    );

    let toml = block("toml", "[retry]");
    justonce::Config::parse(&toml, &dir.path().join("justonce.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let several_hosts = block("toml", "secrets/db-password");
    let config = justonce::Config::parse(&several_hosts, &dir.path().join("justonce.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        config.password_file,
        Some(dir.path().join("secrets/db-password"))
    );
    let oauth = block("toml", "[oauth]");
    let config = justonce::Config::parse(&oauth, &dir.path().join("justonce.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let oauth = config.oauth.expect("an [oauth] table");
    assert_eq!(
        oauth.resource.as_deref(),
        Some("https://mcp.example.com/mcp")
    );
    assert_eq!(oauth.scopes, Some(vec!["mcp:tools".to_owned()]));
}

#[test]
fn every_justonce_command_shown_exists() {
    let mut commands = std::collections::BTreeSet::new();
    for (lang, text) in blocks() {
        if !matches!(lang, "" | "sh") {
            continue;
        }
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("justonce ") {
                // The subcommand follows the global flags (`--db PATH`, `--tools DIR`).
                let mut words = rest.split_whitespace();
                while let Some(word) = words.next() {
                    if word.starts_with('-') {
                        if !word.contains('=') {
                            words.next();
                        }
                        continue;
                    }
                    commands.insert(word.to_owned());
                    break;
                }
            }
        }
    }
    for expected in ["run", "tools", "key", "new", "serve", "replay"] {
        assert!(
            commands.contains(expected),
            "{expected} is shown: {commands:?}"
        );
    }
    for command in commands {
        let out = justonce_command(None)
            .args([command.as_str(), "--help"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`justonce {command}` exists: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_mcp_table_of_the_framework_section_loads() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        justonce::Config::parse(&block("toml", "[mcp]"), &dir.path().join("justonce.toml"))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.mcp.unscoped, Some(justonce::Unscoped::Refuse));
    assert_eq!(
        config.mcp.answer_within,
        Some(std::time::Duration::from_secs(4))
    );
}
