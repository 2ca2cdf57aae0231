//! The HTTP agent every connection to an upstream uses, for its MCP requests and
//! its OAuth token endpoint alike: every status is an answer, redirects are not
//! followed, justonce names itself. A leaf, so `http_client` and `oauth` share it
//! without depending on each other both ways.
//!
//! Its resolver ([`Lookups`]) answers a `url` whose host is an IP address itself,
//! and looks a name up at most once in [`KEPT_IDLE`]: a call sent on a kept
//! connection makes no lookup (no thread, no DNS query).
//!
//! A connection idle for [`KEPT_IDLE`] is not used again: a server closes one it
//! kept idle for long enough (Node's HTTP server after 5 s, uvicorn after 5 s), and
//! a request sent on a connection the server closes at that moment fails after it
//! was sent, which for a call of an unkeyed tool is an unknown outcome. The agent
//! checks a kept connection is open before it sends on it; a shorter age than any
//! common server's leaves the race to a server that closes within 2 s.

use std::time::Duration;

use ureq::Agent;
use ureq::unversioned::transport::DefaultConnector;

use crate::http::Lookups;

/// How long a connection may have been idle and still be used again.
const KEPT_IDLE: Duration = Duration::from_secs(2);

/// The HTTP agent of a connection to an upstream (and its token endpoint).
pub(super) fn agent() -> Agent {
    let config = Agent::config_builder()
        .max_idle_age(KEPT_IDLE)
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .user_agent(concat!("justonce/", env!("CARGO_PKG_VERSION")))
        .build();
    Agent::with_parts(config, DefaultConnector::default(), Lookups::new(KEPT_IDLE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_reaches_an_address_and_a_name_alike() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(2) {
                let mut stream = stream.unwrap();
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                );
            }
        });
        let agent = agent();
        for host in ["127.0.0.1", "localhost"] {
            let mut response = agent
                .get(&format!("http://{host}:{port}/"))
                .config()
                .timeout_global(Some(std::time::Duration::from_secs(10)))
                .build()
                .call()
                .unwrap_or_else(|e| panic!("{host}: {e}"));
            assert_eq!(response.body_mut().read_to_string().unwrap(), "ok");
        }
    }
}
