//! What a load says before it compiles a large component. A Python or JavaScript
//! tool (12 to 19 MB: an interpreter inside) takes seconds to compile the first time
//! it is loaded, and `justonce tools` over a new directory was silent for that long;
//! the CLI prints [`Compiling::line`] instead. A Rust tool (well under a megabyte)
//! compiles within a second and is not announced.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Components at least this large are announced before they are compiled.
pub const ANNOUNCED_BYTES: usize = 2 << 20;

/// Roughly how long a megabyte of component takes to compile: measured with a
/// release build, 5 to 14 s for the 18.7 MB of a Python tool and about 14 s for the
/// 12 MB of a JavaScript one (docs/tool-authors.md).
const PER_MEGABYTE: Duration = Duration::from_millis(900);

/// A component about to be compiled.
#[derive(Debug, Clone, Copy)]
pub struct Compiling<'a> {
    /// Where it was loaded from.
    pub source: &'a Path,
    /// Its size in bytes.
    pub bytes: usize,
    /// Whether the compiled form will be kept in the compile cache (so only this load
    /// compiles it), or every load compiles it.
    pub cached: bool,
}

/// Called before a component of at least [`ANNOUNCED_BYTES`] is compiled (see
/// [`crate::Runtime::on_compile`]).
pub type CompileNotice = Arc<dyn Fn(&Compiling<'_>) + Send + Sync>;

impl Compiling<'_> {
    fn megabytes(&self) -> f64 {
        self.bytes as f64 / 1e6
    }

    /// Roughly how long the compile takes: longer on a busy or slower machine.
    pub fn estimate(&self) -> Duration {
        PER_MEGABYTE
            .mul_f64(self.megabytes())
            .max(Duration::from_secs(1))
    }

    /// The line that says so: `compiling remind.wasm (18 MB, about 17 s; once: later
    /// loads read it from the compile cache)…`.
    pub fn line(&self) -> String {
        let file = self.source.file_name().map_or_else(
            || self.source.display().to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
        let later = if self.cached {
            "once: later loads read it from the compile cache"
        } else {
            "no compile cache: every start compiles it"
        };
        format!(
            "compiling {file} ({:.0} MB, about {} s; {later})…",
            self.megabytes(),
            self.estimate().as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_file_its_size_and_about_how_long() {
        let compiling = Compiling {
            source: Path::new("/tools/remind.wasm"),
            bytes: 18_700_000,
            cached: true,
        };
        assert_eq!(
            compiling.line(),
            "compiling remind.wasm (19 MB, about 16 s; once: later loads read it from the compile cache)…"
        );
        let uncached = Compiling {
            cached: false,
            bytes: 2_100_000,
            ..compiling
        };
        assert!(
            uncached
                .line()
                .contains("(2 MB, about 1 s; no compile cache"),
            "{}",
            uncached.line()
        );
    }
}
