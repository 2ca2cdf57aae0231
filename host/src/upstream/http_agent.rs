//! The HTTP agent every connection to an upstream uses, for its MCP requests and
//! its OAuth token endpoint alike: every status is an answer, redirects are not
//! followed, justonce names itself. A leaf, so `http_client` and `oauth` share it
//! without depending on each other both ways.
//!
//! Its resolver answers a `url` whose host is an IP address itself: the agent looks
//! the host up at every request, even one sent on a kept connection, and with a
//! timeout (every request to an upstream has one) it starts a thread for each
//! lookup (30–60 µs on this project's 2-core machine, on every call's way). A name
//! is looked up at most once in [`LOOKED_UP_FOR`] (as long as a kept connection is
//! used, on which the addresses are not even read): a call sent on a kept
//! connection makes no lookup (no thread, no DNS query), and a new connection after
//! an idle time makes a fresh one.
//!
//! A connection idle for [`KEPT_IDLE`] is not used again: a server closes one it
//! kept idle for long enough (Node's HTTP server after 5 s, uvicorn after 5 s), and
//! a request sent on a connection the server closes at that moment fails after it
//! was sent, which for a call of an unkeyed tool is an unknown outcome. The agent
//! checks a kept connection is open before it sends on it; a shorter age than any
//! common server's leaves the race to a server that closes within 2 s.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ureq::Agent;
use ureq::config::Config;
use ureq::http::Uri;
use ureq::http::uri::Scheme;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// How long a connection may have been idle and still be used again.
const KEPT_IDLE: Duration = Duration::from_secs(2);

/// How long the addresses a name was looked up to are used for it.
const LOOKED_UP_FOR: Duration = KEPT_IDLE;

/// The HTTP agent of a connection to an upstream (and its token endpoint).
pub(super) fn agent() -> Agent {
    let config = Agent::config_builder()
        .max_idle_age(KEPT_IDLE)
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .user_agent(concat!("justonce/", env!("CARGO_PKG_VERSION")))
        .build();
    let resolver: AddressFirst = AddressFirst::default();
    Agent::with_parts(config, DefaultConnector::default(), resolver)
}

/// A resolver that answers an IP address (and its port, or the scheme's) itself,
/// and asks `names` ([`DefaultResolver`]) for a name, whose answer it uses for
/// [`LOOKED_UP_FOR`].
#[derive(Debug, Default)]
struct AddressFirst<R = DefaultResolver> {
    names: R,
    /// Names looked up lately (scheme, host and port), when, and their addresses.
    recent: Mutex<HashMap<String, (Instant, ResolvedSocketAddrs)>>,
}

impl<R> AddressFirst<R> {
    /// The addresses `name` was looked up to less than [`LOOKED_UP_FOR`] before
    /// `now`.
    fn recent_at(&self, name: &str, now: Instant) -> Option<ResolvedSocketAddrs> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let (when, addrs) = recent.get(name)?;
        (now.saturating_duration_since(*when) < LOOKED_UP_FOR).then(|| addrs.clone())
    }

    /// Keeps `addrs` as `name`'s, looked up at `now` (and forgets the names looked
    /// up too long ago).
    fn remember(&self, name: String, now: Instant, addrs: ResolvedSocketAddrs) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|_, (when, _)| now.saturating_duration_since(*when) < LOOKED_UP_FOR);
        recent.insert(name, (now, addrs));
    }
}

impl<R: Resolver> Resolver for AddressFirst<R> {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        if let Some(addr) = address_of(uri) {
            let mut resolved = self.empty();
            resolved.push(addr);
            return Ok(resolved);
        }
        let name = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or_default(),
            uri.authority().map(|a| a.as_str()).unwrap_or_default()
        );
        let now = Instant::now();
        if let Some(addrs) = self.recent_at(&name, now) {
            return Ok(addrs);
        }
        let addrs = self.names.resolve(uri, config, timeout)?;
        self.remember(name, now, addrs.clone());
        Ok(addrs)
    }
}

/// The socket address `uri` names, when its host is an IP address (an IPv6 one in
/// brackets) and its port is given or its scheme's (http, https).
fn address_of(uri: &Uri) -> Option<SocketAddr> {
    let authority = uri.authority()?;
    let host = authority.host();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let ip: IpAddr = host.parse().ok()?;
    let port = authority.port_u16().or_else(|| match uri.scheme() {
        Some(s) if *s == Scheme::HTTP => Some(80),
        Some(s) if *s == Scheme::HTTPS => Some(443),
        _ => None,
    })?;
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(uri: &str) -> Option<String> {
        address_of(&uri.parse().unwrap()).map(|a| a.to_string())
    }

    #[test]
    fn an_ip_address_is_its_own_answer_and_a_name_is_looked_up() {
        assert_eq!(
            address("http://127.0.0.1:8931/mcp").as_deref(),
            Some("127.0.0.1:8931")
        );
        assert_eq!(
            address("https://10.0.0.7/mcp").as_deref(),
            Some("10.0.0.7:443")
        );
        assert_eq!(address("http://[::1]/mcp").as_deref(), Some("[::1]:80"));
        assert_eq!(
            address("http://[fe80::1]:9000/").as_deref(),
            Some("[fe80::1]:9000")
        );
        // Names go to the default resolver.
        assert_eq!(address("http://localhost:8931/mcp"), None);
        assert_eq!(address("https://mcp.example.com/mcp"), None);
        // A scheme without a known port: looked up as before (the default
        // resolver names the problem).
        assert_eq!(address("ftp://127.0.0.1/"), None);
    }

    /// A resolver that counts its lookups and answers each with `addr`.
    #[derive(Debug)]
    struct Counting {
        lookups: std::sync::atomic::AtomicUsize,
        addr: SocketAddr,
    }

    impl Resolver for Counting {
        fn resolve(
            &self,
            _: &Uri,
            _: &Config,
            _: NextTimeout,
        ) -> Result<ResolvedSocketAddrs, ureq::Error> {
            self.lookups
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut addrs = self.empty();
            addrs.push(self.addr);
            Ok(addrs)
        }
    }

    #[test]
    fn a_name_is_looked_up_once_while_its_answer_is_recent_and_again_after() {
        let resolver = AddressFirst {
            names: Counting {
                lookups: Default::default(),
                addr: "10.1.2.3:8080".parse().unwrap(),
            },
            recent: Default::default(),
        };
        let lookups = || {
            resolver
                .names
                .lookups
                .load(std::sync::atomic::Ordering::SeqCst)
        };
        let resolve = |uri: &str| {
            let timeout = NextTimeout::default();
            let addrs = resolver
                .resolve(&uri.parse().unwrap(), &Config::default(), timeout)
                .unwrap();
            addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(resolve("http://mcp.internal:8080/mcp"), ["10.1.2.3:8080"]);
        assert_eq!(resolve("http://mcp.internal:8080/mcp"), ["10.1.2.3:8080"]);
        assert_eq!(lookups(), 1, "looked up again while recent");
        // Another port of the name, and an address: the one a lookup, the other none.
        resolve("http://mcp.internal:9090/mcp");
        assert_eq!(resolve("http://127.0.0.1:8080/mcp"), ["127.0.0.1:8080"]);
        assert_eq!(lookups(), 2);
        // Past the window (on the clock the cache is asked with), looked up again.
        let name = "http://mcp.internal:8080";
        let at = Instant::now();
        assert!(resolver.recent_at(name, at).is_some());
        assert!(resolver.recent_at(name, at + LOOKED_UP_FOR).is_none());
        resolver.remember(
            "http://other:1".into(),
            at + LOOKED_UP_FOR,
            resolver.empty(),
        );
        assert!(
            resolver.recent.lock().unwrap().get(name).is_none(),
            "an old name is forgotten when another is kept"
        );
    }

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
