//! Every snippet of the README and of the pages of docs/ runs: the Rust tool and its
//! manifest, the Python app and the JavaScript tool are what `justonce new` writes
//! (whose builds `new_tool` runs), the Python MCP example compiles and runs against
//! `justonce serve`, the JSON and TOML configurations load, the tour's calls replay,
//! and every `justonce` command shown exists. The README stays a front door: short,
//! linking every page, and every link between the pages lands.

use std::path::Path;
use std::process::Command;

use crate::support::cli::justonce_command;

/// The README and every page of docs/, each with its path from the repository's root.
/// `every_page_of_docs_is_read_here` keeps this list equal to the files in docs/.
const PAGES: &[(&str, &str)] = &[
    ("README.md", include_str!("../../README.md")),
    (
        "docs/agent-builders.md",
        include_str!("../../docs/agent-builders.md"),
    ),
    ("docs/gateway.md", include_str!("../../docs/gateway.md")),
    (
        "docs/how-it-works.md",
        include_str!("../../docs/how-it-works.md"),
    ),
    (
        "docs/invariants.md",
        include_str!("../../docs/invariants.md"),
    ),
    ("docs/operators.md", include_str!("../../docs/operators.md")),
    (
        "docs/performance-history.md",
        include_str!("../../docs/performance-history.md"),
    ),
    (
        "docs/performance.md",
        include_str!("../../docs/performance.md"),
    ),
    (
        "docs/threat-model.md",
        include_str!("../../docs/threat-model.md"),
    ),
    (
        "docs/tool-authors.md",
        include_str!("../../docs/tool-authors.md"),
    ),
];

/// The SDKs' READMEs: their links are checked as the pages' are.
const SDK_READMES: &[(&str, &str)] = &[
    (
        "guest-sdk/python/README.md",
        include_str!("../../guest-sdk/python/README.md"),
    ),
    (
        "guest-sdk/js/README.md",
        include_str!("../../guest-sdk/js/README.md"),
    ),
];

/// The front door's length limit: the long material lives in docs/.
const README_MAX_LINES: usize = 400;

fn readme() -> &'static str {
    PAGES[0].1
}

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The placeholder the README's manifest shows where `justonce new` writes the path
/// of the SDK.
const SDK_PLACEHOLDER: &str = "/path/to/justonce/guest-sdk";

/// Every fenced block of the README and the pages, in their order: (language, text).
fn blocks() -> Vec<(&'static str, String)> {
    PAGES
        .iter()
        .flat_map(|(_, text)| page_blocks(text))
        .collect()
}

/// Every fenced block of one page: (language, text).
fn page_blocks(page: &'static str) -> Vec<(&'static str, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(&str, String)> = None;
    for line in page.lines() {
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
    assert!(open.is_none(), "an unclosed code block in a page");
    blocks
}

/// The one block in `lang` that contains `marker`, among all the pages.
fn block(lang: &str, marker: &str) -> String {
    let found: Vec<String> = blocks()
        .into_iter()
        .filter(|(l, text)| *l == lang && text.contains(marker))
        .map(|(_, text)| text)
        .collect();
    assert_eq!(found.len(), 1, "one {lang} block with {marker:?}");
    found.into_iter().next().unwrap()
}

/// The one toml block that contains `marker`, besides operators.md's reference of
/// the configuration file (the block with `[retry]`), which has every section.
fn toml_block_besides_the_reference(marker: &str) -> String {
    let found: Vec<String> = blocks()
        .into_iter()
        .filter(|(l, text)| *l == "toml" && text.contains(marker) && !text.contains("[retry]"))
        .map(|(_, text)| text)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one toml block with {marker:?} besides the reference"
    );
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
                .unwrap_or_else(|e| panic!("{path}, which the docs quote: {e}"));
            let excerpt: Vec<&str> = text.lines().skip(1).collect();
            let lines: Vec<&str> = source.lines().map(str::trim_start).collect();
            let trimmed: Vec<&str> = excerpt.iter().map(|l| l.trim_start()).collect();
            assert!(
                lines
                    .windows(trimmed.len())
                    .any(|w| w == trimmed.as_slice()),
                "the docs' excerpt of {path} is not in it:\n{}",
                excerpt.join("\n")
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3, "one excerpt per language");
}

/// The recipes of "From an agent framework", one per framework, are the code of
/// tests/frameworks/recipes.py (recipes_llama_index.py for LlamaIndex), which
/// `mcp_frameworks` runs with each framework on stdio and HTTP: each block, after its
/// first line naming the file, is a run of the file's lines.
#[test]
fn the_agent_framework_recipes_are_the_tests_code() {
    let mut quoted = Vec::new();
    for (_, text) in blocks().into_iter().filter(|(l, _)| *l == "python") {
        let mut excerpt = text.lines();
        let Some((file, framework)) = excerpt
            .next()
            .and_then(|first| first.strip_prefix("# tests/frameworks/recipes"))
            .and_then(|rest| rest.split_once(".py ("))
            .and_then(|(file, rest)| {
                Some((
                    format!("tests/frameworks/recipes{file}.py"),
                    rest.strip_suffix(')')?,
                ))
            })
        else {
            continue;
        };
        let source =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(&file))
                .unwrap_or_else(|e| panic!("{file}, which the docs quote: {e}"));
        let lines: Vec<&str> = source.lines().collect();
        let excerpt: Vec<&str> = excerpt.collect();
        assert!(
            excerpt.len() > 10
                && lines
                    .windows(excerpt.len())
                    .any(|w| w == excerpt.as_slice()),
            "the docs' recipe for {framework} is not in {file}:\n{}",
            excerpt.join("\n")
        );
        quoted.push(framework.to_owned());
    }
    assert_eq!(
        quoted,
        [
            "pydantic-ai",
            "the OpenAI Agents SDK",
            "langchain-mcp-adapters",
            "LlamaIndex"
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
    // Outside the checkout, with the binary on PATH as the tour puts it: the example's
    // default is `justonce`, not a path into a checkout.
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_justonce")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let run = |_: u32| {
        Command::new(python)
            .arg(&script)
            .current_dir(dir.path())
            .env("PATH", &path)
            .env_remove("JUSTONCE")
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
    let legacy = &config.services["legacy_orders"];
    assert!(legacy.unkeyed && legacy.status.is_some(), "{legacy:?}");
    assert!(
        config.services["payments"]
            .headers
            .contains_key("Authorization")
    );

    let toml = block("toml", "[retry]");
    let reference = justonce::Config::parse(&toml, &dir.path().join("justonce.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        reference.mcp.unscoped,
        Some(justonce::Unscoped::Refuse),
        "the reference has the [mcp] section"
    );
    assert!(
        reference.ask_person["send_receipt"].contains("{body.to}"),
        "the reference has a tool's ask_person"
    );
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
fn the_upstream_snippets_load() {
    let dir = tempfile::tempdir().unwrap();
    for marker in ["secrets_file = \"memory.env\"", "prefix = \"mem_\"\n"] {
        let config =
            justonce::Config::parse(&block("toml", marker), &dir.path().join("justonce.toml"))
                .unwrap_or_else(|e| panic!("{e}"));
        let memory = config.upstream("memory").unwrap();
        assert_eq!(memory.prefix, "mem_");
        assert_eq!(memory.command[0], "npx");
    }
    let config = justonce::Config::parse(
        &block("toml", "[upstreams.issues]"),
        &dir.path().join("justonce.toml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let issues = config.upstream("issues").unwrap();
    assert_eq!(issues.url.as_deref(), Some("https://mcp.example.com/mcp"));
    assert!(issues.headers["Authorization"].contains("${ISSUES_TOKEN}"));
}

#[test]
fn the_mcp_table_of_the_framework_section_loads() {
    let dir = tempfile::tempdir().unwrap();
    let config = justonce::Config::parse(
        &toml_block_besides_the_reference("[mcp]"),
        &dir.path().join("justonce.toml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.mcp.unscoped, Some(justonce::Unscoped::Refuse));
    assert_eq!(
        config.mcp.answer_within,
        Some(std::time::Duration::from_secs(4))
    );
}

#[test]
fn the_tasks_settings_load() {
    let dir = tempfile::tempdir().unwrap();
    let config = justonce::Config::parse(
        &toml_block_besides_the_reference("task_after_ms"),
        &dir.path().join("justonce.toml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        config.mcp.task_after,
        Some(std::time::Duration::from_secs(1))
    );
    assert!(config.mcp.task_required.contains("export_report"));
}

#[test]
fn the_ask_timeout_loads() {
    let dir = tempfile::tempdir().unwrap();
    let config = justonce::Config::parse(
        &toml_block_besides_the_reference("ask_timeout_ms"),
        &dir.path().join("justonce.toml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        config.mcp.ask_timeout,
        Some(std::time::Duration::from_secs(120))
    );
}

/// The pages of docs/ on disk, as paths from the repository's root.
fn docs_on_disk() -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    pages
}

/// A new page of docs/ cannot escape these tests: `PAGES` reads every one.
#[test]
fn every_page_of_docs_is_read_here() {
    let read: Vec<&str> = PAGES[1..].iter().map(|(path, _)| *path).collect();
    assert_eq!(
        read,
        docs_on_disk(),
        "PAGES in tests/tests/readme.rs lists every docs/*.md, sorted"
    );
}

#[test]
fn every_page_of_docs_is_linked_from_the_readme() {
    for page in docs_on_disk() {
        assert!(
            readme().contains(&format!("]({page})")),
            "README.md links {page}"
        );
    }
}

#[test]
fn the_readme_is_a_front_door() {
    let lines = readme().lines().count();
    assert!(
        lines < README_MAX_LINES,
        "README.md has {lines} lines: move the long material to a page of docs/"
    );
}

/// A page's text outside its fenced blocks.
fn prose(page: &str) -> String {
    let mut fenced = false;
    let mut out = String::new();
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(page: &str) -> Vec<String> {
    prose(page)
        .lines()
        .filter_map(|line| {
            let title = line.trim_start_matches('#');
            (title.len() < line.len() && title.starts_with(' ')).then(|| anchor(title))
        })
        .collect()
}

/// Every relative link of the README and the pages names a file that exists, and a
/// heading of it that exists (the split into pages moved sections between files).
#[test]
fn every_link_between_the_pages_lands() {
    let by_path: std::collections::BTreeMap<&str, &str> = PAGES.iter().copied().collect();
    let mut checked = 0;
    for (path, text) in PAGES.iter().chain(SDK_READMES) {
        let dir = Path::new(path).parent().unwrap();
        let prose = prose(text);
        for (i, _) in prose.match_indices("](") {
            let rest = &prose[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            let (file, fragment) = match target.split_once('#') {
                Some((file, fragment)) => (file, Some(fragment)),
                None => (target, None),
            };
            let file = if file.is_empty() {
                (*path).to_owned()
            } else {
                let joined = dir.join(file);
                let mut parts: Vec<&str> = Vec::new();
                for part in joined.iter().map(|p| p.to_str().unwrap()) {
                    match part {
                        ".." => {
                            parts.pop();
                        }
                        "." => {}
                        part => parts.push(part),
                    }
                }
                parts.join("/")
            };
            assert!(
                root().join(&file).exists(),
                "{path} links {target}: no file {file}"
            );
            if let Some(fragment) = fragment {
                let linked = by_path
                    .get(file.as_str())
                    .unwrap_or_else(|| panic!("{path} links {target}: not a page read here"));
                assert!(
                    anchors(linked).iter().any(|a| a == fragment),
                    "{path} links {target}: {file} has no heading #{fragment}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 30, "the links were found: {checked}");
}

/// The words of a shell line, with single quotes as the shell reads them.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                word.get_or_insert_with(String::new);
            }
            c if c.is_whitespace() && !quoted => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    assert!(!quoted, "an unclosed quote in {line:?}");
    words.extend(word);
    words
}

/// The README's tour calls a tool twice, the second time with the arguments written
/// differently, and the second answer is the first, replayed; the journal shows it.
#[test]
fn the_tours_second_call_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let tour = block("sh", "justonce run send_receipt --conversation tour");
    let outputs: Vec<String> = tour
        .lines()
        .filter(|line| line.starts_with("justonce "))
        .map(|line| {
            let words = shell_words(line);
            let out = justonce_command(None)
                .args(&words[1..])
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{line}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        })
        .collect();
    assert_eq!(
        outputs.len(),
        4,
        "two calls, the journal and the mailbox: {outputs:?}"
    );
    let first: serde_json::Value = serde_json::from_str(outputs[0].trim()).unwrap();
    let second: serde_json::Value = serde_json::from_str(outputs[1].trim()).unwrap();
    assert_eq!(first["replayed"], false, "{first}");
    assert_eq!(second["replayed"], true, "{second}");
    assert_eq!(first["key"], second["key"]);
    assert_eq!(first["result"], second["result"]);
    for shown in ["runs=1", "replays=1", "mail.send (keyed)", "attempts=1"] {
        assert!(
            outputs[2].contains(shown),
            "the journal shows {shown}: {}",
            outputs[2]
        );
    }
    // `justonce mail`: the one email, under the effect's key, of one request.
    let key = outputs[2]
        .lines()
        .find_map(|line| line.trim().strip_prefix("#0 "))
        .and_then(|effect| effect.split_whitespace().next())
        .unwrap_or_else(|| panic!("the journal shows the effect's key: {}", outputs[2]));
    let emails: Vec<&str> = outputs[3]
        .lines()
        .filter(|l| l.starts_with("msg-"))
        .collect();
    assert_eq!(emails.len(), 1, "one email: {}", outputs[3]);
    assert!(
        emails[0].contains("to ada@example.com")
            && emails[0].contains(&format!("key {key}"))
            && emails[0].ends_with("(1 request)"),
        "{}",
        outputs[3]
    );
}

/// An SDK's README sends its reader to the tour's "Write a tool" and to the guide by
/// links that land (`every_link_between_the_pages_lands`), not to a part of a README
/// that neither the checkout nor the project `justonce new` writes has.
#[test]
fn the_sdk_readmes_point_at_the_tour_and_the_guide() {
    for (path, text) in SDK_READMES {
        for link in [
            "](../../README.md#a-five-minute-tour)",
            "](../../docs/tool-authors.md)",
        ] {
            assert!(text.contains(link), "{path} links {link}");
        }
        assert!(!text.contains("Writing a tool"), "{path}: no such part");
    }
}

/// The tour runs every command in the directory it started in, so every call it makes
/// is in one journal (`.justonce/` of that directory): a `cd` into the new project
/// made its calls in a second journal, which the first `journal` did not show.
#[test]
fn the_tour_keeps_one_journal() {
    for (lang, text) in page_blocks(readme()) {
        if !matches!(lang, "" | "sh") {
            continue;
        }
        for line in text.lines() {
            assert!(
                !line.trim_start().starts_with("cd "),
                "a README command changes directory, and with it the journal: {line}"
            );
        }
    }
}

/// A page of docs/ that opens with a list of its sections lists each of them, in order
/// (a section added without its line, or a line left after its section moved, fails).
#[test]
fn each_pages_contents_lists_its_sections() {
    for (path, text) in &PAGES[1..] {
        let prose = prose(text);
        let first_section = prose.find("\n## ").unwrap_or(prose.len());
        let listed: Vec<&str> = prose[..first_section]
            .lines()
            .filter_map(|line| line.strip_prefix("- ["))
            .filter_map(|line| line.split_once("](#"))
            .map(|(title, _)| title)
            .collect();
        if listed.is_empty() {
            continue;
        }
        let sections: Vec<&str> = prose
            .lines()
            .filter_map(|line| line.strip_prefix("## "))
            .collect();
        assert_eq!(listed, sections, "{path}'s contents list its sections");
    }
}
