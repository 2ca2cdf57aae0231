//! The projects `justonce new` writes, one per language: files under
//! `host/templates/LANG/`, filled in by one renderer, plus files copied from the SDK.

use crate::cli::shell::shell_word;
use std::path::{Path, PathBuf};

use super::NewError;

/// One language's project.
pub(super) struct Template {
    /// The `--lang` value that picks it.
    pub lang: &'static str,
    /// (path in the project, template): the files written, placeholders filled in.
    files: &'static [(&'static str, &'static str)],
    /// (path in the project, path under the SDK): files copied from the SDK as they are.
    copied: &'static [(&'static str, &'static str)],
    /// What to do next, printed once the project is written.
    next_steps: &'static str,
}

/// The text of `host/templates/$path`.
macro_rules! template {
    ($path:literal) => {
        include_str!(concat!("../../../templates/", $path))
    };
}

/// Every language `justonce new` writes a project for.
pub(super) const TEMPLATES: [Template; 3] = [
    Template {
        lang: "rust",
        files: &[
            ("Cargo.toml", template!("rust/Cargo.toml.tmpl")),
            ("src/lib.rs", template!("rust/lib.rs.tmpl")),
            (".gitignore", template!("rust/gitignore.tmpl")),
        ],
        copied: &[],
        next_steps: template!("rust/next-steps.txt.tmpl"),
    },
    Template {
        lang: "python",
        files: &[
            ("app.py", template!("python/app.py.tmpl")),
            ("reminder.py", template!("python/reminder.py.tmpl")),
            (
                "test_reminder.py",
                template!("python/test_reminder.py.tmpl"),
            ),
            (
                "requirements.txt",
                template!("python/requirements.txt.tmpl"),
            ),
            (".gitignore", template!("python/gitignore.tmpl")),
        ],
        copied: &[],
        next_steps: template!("python/next-steps.txt.tmpl"),
    },
    Template {
        lang: "js",
        files: &[
            ("tool.js", template!("js/tool.js.tmpl")),
            ("reminder.js", template!("js/reminder.js.tmpl")),
            ("reminder.test.js", template!("js/reminder.test.js.tmpl")),
            ("package.json", template!("js/package.json.tmpl")),
            (".gitignore", template!("js/gitignore.tmpl")),
        ],
        // componentize-js reads only the files under the directory it builds in (a
        // symbolic link out of it is refused), so the project holds its own copy.
        copied: &[
            ("justonce-guest/justonce.js", "js/justonce.js"),
            ("justonce-guest/justonce.d.ts", "js/justonce.d.ts"),
        ],
        next_steps: template!("js/next-steps.txt.tmpl"),
    },
];

/// The template for `lang`.
pub(super) fn find(lang: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|template| template.lang == lang)
}

/// The `--lang` values, for an error message: `rust, python or js`.
pub(super) fn languages() -> String {
    let langs: Vec<&str> = TEMPLATES.iter().map(|template| template.lang).collect();
    match langs.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A project, rendered: its files (path in the project, contents) and what to do next.
pub(super) struct Rendered {
    pub files: Vec<(&'static str, String)>,
    pub next_steps: String,
}

/// What the placeholders of a template stand for.
pub(super) struct Values<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// The SDK directory (`guest-sdk`), absolute.
    pub sdk: &'a Path,
    /// The project's directory, as the author gave it.
    pub dir: &'a Path,
}

type Value = fn(&Values) -> Result<String, NewError>;

/// `{{key}}` and its value. Paths in commands are shell words; paths in files are
/// written with `/` (which every toolchain reads on Windows too).
const PLACEHOLDERS: &[(&str, Value)] = &[
    ("name", |v| Ok(v.name.to_owned())),
    ("Name", |v| Ok(camel_case(v.name))),
    ("py_function", |v| Ok(python_function(v.name))),
    ("sdk", |v| Ok(slashed(v.sdk))),
    ("dir", |v| Ok(shell_word(&v.dir.display().to_string()))),
    ("python_sdk", |v| {
        Ok(shell_word(&slashed(&v.sdk.join("python"))))
    }),
    ("python_requirements", |v| {
        Ok(slashed(&v.sdk_file("python/requirements.txt")?))
    }),
    ("wit", |v| Ok(shell_word(&slashed(&v.wit()?)))),
    ("js_sdk", |v| Ok(shell_word(&slashed(&v.sdk.join("js"))))),
    ("js_dev_dependencies", |v| v.js_dev_dependencies()),
];

impl Values<'_> {
    /// `template`'s project: every file, placeholders filled in, and the next steps.
    pub(super) fn render(&self, template: &Template) -> Result<Rendered, NewError> {
        let mut files = Vec::new();
        for (path, text) in template.files {
            files.push((*path, self.fill(text)?));
        }
        for (path, from) in template.copied {
            let from = self.sdk_file(from)?;
            let text = std::fs::read_to_string(&from).map_err(|e| NewError::SdkFile {
                path: from,
                reason: e.to_string(),
            })?;
            files.push((*path, text));
        }
        Ok(Rendered {
            files,
            next_steps: self.fill(template.next_steps)?,
        })
    }

    fn fill(&self, template: &str) -> Result<String, NewError> {
        let mut text = template.to_owned();
        for (key, value) in PLACEHOLDERS {
            let placeholder = format!("{{{{{key}}}}}");
            if text.contains(&placeholder) {
                text = text.replace(&placeholder, &value(self)?);
            }
        }
        Ok(text)
    }

    /// `path` under the SDK, which must be there.
    fn sdk_file(&self, path: &str) -> Result<PathBuf, NewError> {
        let file = self.sdk.join(path);
        if file.is_file() {
            Ok(file)
        } else {
            Err(NewError::SdkFile {
                path: file,
                reason: "not found".into(),
            })
        }
    }

    /// The checkout's `wit/` directory, beside the SDK: the Python and JavaScript
    /// toolchains build against it.
    fn wit(&self) -> Result<PathBuf, NewError> {
        self.sdk_file("../wit/tool.wit")?;
        let wit = self.sdk.parent().unwrap_or(self.sdk).join("wit");
        Ok(wit)
    }

    /// The toolchain the JavaScript SDK pins (`devDependencies` of its
    /// `package.json`), as the JSON of a new project's `devDependencies`.
    fn js_dev_dependencies(&self) -> Result<String, NewError> {
        let path = self.sdk_file("js/package.json")?;
        let fail = |reason: String| NewError::SdkFile {
            path: path.clone(),
            reason,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
        let package: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
        let pins = package
            .get("devDependencies")
            .filter(|pins| pins.is_object())
            .ok_or_else(|| fail("it has no `devDependencies`".into()))?;
        let json = serde_json::to_string_pretty(pins).map_err(|e| fail(e.to_string()))?;
        Ok(json.replace('\n', "\n  "))
    }
}

/// Names a Python function cannot take: the keywords, and what the template imports.
const PYTHON_TAKEN: &[&str] = &[
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "class",
    "continue",
    "def",
    "del",
    "elif",
    "else",
    "except",
    "finally",
    "for",
    "from",
    "global",
    "if",
    "import",
    "in",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
    "return",
    "try",
    "while",
    "with",
    "yield",
    "export",
    "perform",
    "tool",
    "reminder",
    "dataclass",
];

/// The Python function of the tool `name`: its name, unless Python or the template
/// already takes it (`import` → `import_tool`).
fn python_function(name: &str) -> String {
    if PYTHON_TAKEN.contains(&name) {
        format!("{name}_tool")
    } else {
        name.to_owned()
    }
}

/// `remind_unpaid` → `RemindUnpaid`: the tool's type name.
fn camel_case(name: &str) -> String {
    name.split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// `path` with `/` between its parts.
fn slashed(path: &Path) -> String {
    path.display().to_string().replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SDK of this checkout.
    fn sdk() -> PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk"))
            .canonicalize()
            .unwrap()
    }

    fn render(lang: &str, name: &str, sdk: &Path) -> Rendered {
        let values = Values {
            name,
            sdk,
            dir: Path::new(name),
        };
        values.render(find(lang).unwrap()).unwrap()
    }

    fn file<'a>(rendered: &'a Rendered, path: &str) -> &'a str {
        &rendered
            .files
            .iter()
            .find(|(p, _)| *p == path)
            .unwrap_or_else(|| panic!("no {path}"))
            .1
    }

    #[test]
    fn every_template_is_filled_in_everywhere() {
        let sdk = sdk();
        for template in &TEMPLATES {
            let rendered = render(template.lang, "remind_unpaid", &sdk);
            for (path, text) in &rendered.files {
                assert!(
                    !text.contains("{{"),
                    "{}: {path} keeps a placeholder",
                    template.lang
                );
            }
            assert!(!rendered.next_steps.contains("{{"), "{}", template.lang);
            assert!(
                rendered
                    .next_steps
                    .contains("remind_unpaid.wasm --args '{\"order_id\""),
                "{}: {}",
                template.lang,
                rendered.next_steps
            );
        }
    }

    #[test]
    fn the_rust_project_depends_on_the_sdk_and_names_the_tool() {
        let rust = render(
            "rust",
            "remind_unpaid",
            Path::new("/opt/justonce/guest-sdk"),
        );
        let manifest = file(&rust, "Cargo.toml");
        assert!(manifest.contains("justonce-guest = { path = \"/opt/justonce/guest-sdk\" }"));
        assert!(manifest.contains("\n[workspace]\n"));
        let lib = file(&rust, "src/lib.rs");
        assert!(lib.contains("impl Tool for RemindUnpaid {"));
        assert!(lib.contains("const NAME: &'static str = \"remind_unpaid\";"));
        assert!(lib.contains("#[cfg(test)]"));
    }

    #[test]
    fn the_python_project_builds_against_the_sdk_and_the_wit_of_the_checkout() {
        let sdk = sdk();
        let python = render("python", "remind_unpaid", &sdk);
        let app = file(&python, "app.py");
        assert!(app.contains("@tool(name=\"remind_unpaid\")"));
        // Named after the tool, not after the example it starts from.
        assert!(app.contains("def remind_unpaid(args: Args)"), "{app}");
        assert!(app.contains("WitWorld = export(remind_unpaid)"), "{app}");
        assert!(!app.contains("def remind("), "{app}");
        let taken = render("python", "import", &sdk);
        assert!(file(&taken, "app.py").contains("def import_tool(args: Args)"));
        let requirements = file(&python, "requirements.txt");
        let pin = requirements.lines().last().unwrap();
        let pinned = Path::new(pin.strip_prefix("-r ").unwrap());
        assert!(pinned.is_file(), "{requirements}");
        let wit = sdk.parent().unwrap().join("wit");
        assert!(
            python.next_steps.contains(&format!(
                "componentize-py -d {} -w tool componentize -p {} -p . app -o remind_unpaid.wasm",
                wit.display(),
                sdk.join("python").display()
            )),
            "{}",
            python.next_steps
        );
    }

    #[test]
    fn the_js_project_holds_the_sdk_and_pins_its_toolchain() {
        let sdk = sdk();
        let js = render("js", "remind_unpaid", &sdk);
        assert!(file(&js, "tool.js").contains("name: 'remind_unpaid',"));
        assert_eq!(
            file(&js, "justonce-guest/justonce.js"),
            std::fs::read_to_string(sdk.join("js/justonce.js")).unwrap()
        );
        let package: serde_json::Value = serde_json::from_str(file(&js, "package.json"))
            .unwrap_or_else(|e| panic!("package.json is JSON: {e}"));
        // `npm run refresh-sdk` copies this checkout's SDK over the project's copy.
        let refresh = package["scripts"]["refresh-sdk"]
            .as_str()
            .unwrap_or_default();
        let js_sdk = sdk.join("js");
        assert_eq!(
            refresh,
            format!(
                "cp {0}/justonce.js {0}/justonce.d.ts justonce-guest/",
                js_sdk.display()
            )
        );
        let sdk_package: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sdk.join("js/package.json")).unwrap())
                .unwrap();
        assert_eq!(package["devDependencies"], sdk_package["devDependencies"]);
        assert_eq!(package["type"], "module");
        let build = package["scripts"]["build"].as_str().unwrap();
        assert!(
            build.contains(&format!(
                "--wit {} ",
                sdk.parent().unwrap().join("wit").display()
            )),
            "{build}"
        );
    }

    #[test]
    fn a_sdk_without_what_a_language_needs_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let values = Values {
            name: "remind",
            sdk: dir.path(),
            dir: Path::new("remind"),
        };
        for lang in ["python", "js"] {
            let err = values.render(find(lang).unwrap()).err().unwrap();
            assert!(err.to_string().contains("--sdk DIR"), "{lang}: {err}");
        }
    }

    #[test]
    fn the_languages_are_listed_for_an_error() {
        assert_eq!(languages(), "rust, python or js");
    }
}
