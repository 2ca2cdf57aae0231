//! An in-process OTLP/HTTP collector: records every POST to `/v1/traces` and decodes
//! the spans it carried (protobuf `ExportTraceServiceRequest`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message as _;

/// One POST as received.
#[derive(Debug, Clone)]
pub struct Export {
    /// The request path.
    pub path: String,
    /// The body's raw bytes.
    pub body: Vec<u8>,
}

/// One span, flattened: ids as hex, attributes as text.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub attributes: BTreeMap<String, String>,
    /// The resource's `service.name`.
    pub service: String,
}

impl Span {
    /// An attribute's value, or a panic naming the span.
    pub fn attr(&self, key: &str) -> &str {
        self.attributes
            .get(key)
            .unwrap_or_else(|| panic!("span {} has no attribute {key}: {self:?}", self.name))
    }
}

/// The collector; stops accepting when dropped.
pub struct Collector {
    addr: SocketAddr,
    exports: Arc<Mutex<Vec<Export>>>,
    stop: Arc<AtomicBool>,
}

impl Collector {
    /// Listens on 127.0.0.1:0.
    pub fn start() -> Self {
        Self::on(TcpListener::bind("127.0.0.1:0").unwrap())
    }

    /// Listens on `listener`.
    pub fn on(listener: TcpListener) -> Self {
        let addr = listener.local_addr().unwrap();
        let exports = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (recorded, stopping) = (Arc::clone(&exports), Arc::clone(&stop));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let recorded = Arc::clone(&recorded);
                std::thread::spawn(move || serve(stream, &recorded));
            }
        });
        Self {
            addr,
            exports,
            stop,
        }
    }

    /// The base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every POST received so far.
    pub fn exports(&self) -> Vec<Export> {
        self.exports.lock().unwrap().clone()
    }

    /// Every span received so far, in the order they arrived.
    pub fn spans(&self) -> Vec<Span> {
        let mut spans = Vec::new();
        for export in self.exports() {
            assert_eq!(export.path, "/v1/traces", "traces go to the traces path");
            let request = ExportTraceServiceRequest::decode(export.body.as_slice())
                .expect("an OTLP protobuf ExportTraceServiceRequest");
            for resource in request.resource_spans {
                let service = resource
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|kv| kv.key == "service.name")
                    .map(|kv| text(kv.value.as_ref().and_then(|v| v.value.as_ref())))
                    .unwrap_or_default();
                for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
                    spans.push(Span {
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        attributes: span
                            .attributes
                            .iter()
                            .map(|kv| {
                                (
                                    kv.key.clone(),
                                    text(kv.value.as_ref().and_then(|v| v.value.as_ref())),
                                )
                            })
                            .collect(),
                        service: service.clone(),
                    });
                }
            }
        }
        spans
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn text(value: Option<&Any>) -> String {
    match value {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Serves one keep-alive connection: records each request, then answers 200 with an
/// empty `ExportTraceServiceResponse`.
fn serve(stream: TcpStream, recorded: &Mutex<Vec<Export>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        recorded.lock().unwrap().push(Export { path, body });
        let answered = writer.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
        );
        if answered.is_err() {
            return;
        }
    }
}
