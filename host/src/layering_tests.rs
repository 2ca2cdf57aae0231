//! The architecture holds (DESIGN.md, "Architecture"): every top-level module of this
//! crate imports only from its own layer or the ones below, and no imports form a
//! cycle. Read from the source, so a new `use crate::…` that points up fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top to bottom; a module may use modules of its own layer or any layer below.
const LAYERS: &[&[&str]] = &[
    &[
        "main",
        "lib",
        "cli",
        "console",
        "mcp",
        "replay",
        "delivery",
        "maintenance",
        "sim",
    ],
    &["serving"],
    &[
        "config",
        "builder",
        "host",
        "readiness",
        "sweep",
        "upstream_switch",
    ],
    &["guard"],
    &[
        "runtime",
        "providers",
        "journal",
        "http",
        "registry",
        "auth",
        "upstream",
    ],
    &[
        "call",
        "keys",
        "jcs",
        "clock",
        "error",
        "outcome",
        "determinism",
        "retry",
        "retention",
        "fault",
        "provider",
        "probe",
        "examples",
        "normalize",
        "mutants",
        "metrics",
        "trust",
        "ask",
        "ask_person",
        "layering_tests",
        "test_log",
    ],
];

fn layer_of(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|layer| layer.contains(&module))
        .unwrap_or_else(|| panic!("module `{module}` is in no layer of layering_tests.rs"))
}

/// The top-level modules each top-level module names as `crate::…` in code (doc
/// comments and comments are not imports).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let mut deps = BTreeSet::new();
        let mut files = vec![path.clone()];
        while let Some(file) = files.pop() {
            if file.is_dir() {
                files.extend(std::fs::read_dir(&file).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if file.extension().is_none_or(|x| x != "rs") || file.ends_with("layering_tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for line in text.lines() {
                let code = line.split("//").next().unwrap_or("");
                for (i, _) in code.match_indices("crate::") {
                    let module = module_name_at(&code[i + "crate::".len()..]);
                    if !module.is_empty() && module != name {
                        deps.insert(module);
                    }
                }
            }
        }
        graph.insert(name, deps);
    }
    graph
}

/// The module name `text` starts with (a path segment, as `use` names it).
fn module_name_at(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
        .collect()
}

#[test]
fn no_module_imports_from_a_layer_above_it() {
    let mut upward = Vec::new();
    for (module, deps) in graph() {
        for dep in deps {
            if layer_of(&dep) < layer_of(&module) {
                upward.push(format!("{module} -> {dep}"));
            }
        }
    }
    assert!(upward.is_empty(), "imports that point up: {upward:?}");
}

#[test]
fn the_modules_form_no_cycle() {
    no_cycle(&graph());
}

/// Within every module that has submodules (a directory), the submodules form no
/// cycle either: `a` naming `super::b` (or `crate::…::b`) while `b` names `a`.
/// A module's own tests (from its `#[cfg(test)]` on) may use anything.
#[test]
fn the_submodules_of_each_module_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![src.clone()];
    let mut checked = 0;
    while let Some(dir) = dirs.pop() {
        let path = dir
            .strip_prefix(&src)
            .unwrap()
            .iter()
            .map(|p| p.to_str().unwrap())
            .collect::<Vec<_>>()
            .join("::");
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap().path();
            if entry.is_dir() {
                dirs.push(entry.clone());
            }
            let name = entry.file_stem().unwrap().to_str().unwrap().to_string();
            if entry.is_dir() || entry.extension().is_some_and(|x| x == "rs") {
                graph.entry(name.clone()).or_default();
                files.push((name, entry));
            }
        }
        if path.is_empty() {
            // The crate's top level is `the_modules_form_no_cycle`'s.
            continue;
        }
        let siblings: BTreeSet<String> = graph.keys().cloned().collect();
        let direct = format!("crate::{path}::");
        for (name, entry) in files {
            if name == "mod" {
                continue;
            }
            let mut sources = vec![entry];
            while let Some(file) = sources.pop() {
                if file.is_dir() {
                    sources.extend(std::fs::read_dir(&file).unwrap().map(|e| e.unwrap().path()));
                    continue;
                }
                let nested = file.parent() != Some(dir.as_path());
                let text = std::fs::read_to_string(&file).unwrap();
                let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
                for line in code.lines() {
                    let code = line.split("//").next().unwrap_or("");
                    let mut named = Vec::new();
                    if !nested {
                        named.extend(code.match_indices("super::").map(|(i, m)| i + m.len()));
                    }
                    named.extend(code.match_indices(&direct).map(|(i, m)| i + m.len()));
                    for at in named {
                        let sibling = module_name_at(&code[at..]);
                        if sibling != name && siblings.contains(&sibling) && sibling != "mod" {
                            graph.get_mut(&name).unwrap().insert(sibling);
                        }
                    }
                }
            }
        }
        no_cycle(&graph);
        checked += 1;
    }
    assert!(checked > 5, "the walk found the module directories");
}

/// Panics naming a cycle of `graph`, if it has one.
fn no_cycle(graph: &BTreeMap<String, BTreeSet<String>>) {
    // Depth-first search with colours: meeting a grey module again is a cycle.
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) {
        match state.get(module) {
            Some(2) => return,
            Some(1) => panic!("a cycle: {} -> {module}", path.join(" -> ")),
            _ => {}
        }
        state.insert(module.to_string(), 1);
        path.push(module.to_string());
        for dep in graph.get(module).into_iter().flatten() {
            visit(dep, graph, state, path);
        }
        path.pop();
        state.insert(module.to_string(), 2);
    }
    let mut state = BTreeMap::new();
    for module in graph.keys() {
        visit(module, graph, &mut state, &mut Vec::new());
    }
}

#[test]
fn the_docs_library_example_is_the_crates_compiled_doc_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("../docs/how-it-works.md")).unwrap();
    let section = page
        .split("## Embedding the library")
        .nth(1)
        .expect("docs/how-it-works.md has an Embedding section");
    let example = section
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a rust block");
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let compiled = doc
        .split("```no_run\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("lib.rs has a doc example");
    assert_eq!(example.trim(), compiled.trim());
}
