//! Test guest: tries to open a TCP socket, to test that sockets are denied.

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Where to connect (default `127.0.0.1:9`).
    #[serde(default)]
    address: Option<String>,
}

#[derive(Serialize)]
struct Output {
    /// Whether the connection succeeded (it must not).
    connected: bool,
    /// The I/O error's text, if it failed.
    error: Option<String>,
}

struct OpenSocket;

impl Tool for OpenSocket {
    type Args = Args;
    type Output = Output;
    const NAME: &'static str = "open_socket";
    const DESCRIPTION: &'static str = "Tries to connect to an address (127.0.0.1:9 by default).";

    fn call(args: Args) -> Result<Output, ToolError> {
        let address = args.address.as_deref().unwrap_or("127.0.0.1:9");
        Ok(match std::net::TcpStream::connect(address) {
            Ok(_) => Output {
                connected: true,
                error: None,
            },
            Err(e) => Output {
                connected: false,
                error: Some(e.to_string()),
            },
        })
    }
}

export_tool!(OpenSocket);
