//! What a test sees of the log: the lines logged on its thread while a closure runs,
//! parsed as `JUSTONCE_LOG_FORMAT=json` writes them.

use std::sync::{Arc, Mutex};

use serde_json::Value;

/// The lines logged while `f` runs on this thread, parsed (JSON format, as
/// `JUSTONCE_LOG_FORMAT=json` writes them).
pub(crate) fn logged<T>(f: impl FnOnce() -> T) -> (T, Vec<Value>) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (out, lines)
}

/// The messages of `lines` (their `fields.message`).
pub(crate) fn messages(lines: &[Value]) -> Vec<&str> {
    lines
        .iter()
        .filter_map(|l| l["fields"]["message"].as_str())
        .collect()
}
