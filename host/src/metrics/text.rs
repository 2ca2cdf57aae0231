//! Prometheus' text exposition format, version 0.0.4: a `# HELP` and a `# TYPE` line
//! per family, then one `name{label="value"} number` line per series.

use std::fmt::{Display, Write as _};

/// The `Content-Type` of the text.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The text being written.
#[derive(Debug, Default)]
pub(crate) struct Text {
    out: String,
}

impl Text {
    /// Starts a family: its help and its type (`counter`, `gauge`, `histogram`).
    pub(crate) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One series' value, its label values escaped.
    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (label, text)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"");
                for c in text.chars() {
                    match c {
                        '\\' => self.out.push_str("\\\\"),
                        '"' => self.out.push_str("\\\""),
                        '\n' => self.out.push_str("\\n"),
                        c => self.out.push(c),
                    }
                }
                self.out.push('"');
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// The text written.
    pub(crate) fn finish(self) -> String {
        self.out
    }
}
