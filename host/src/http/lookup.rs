//! Host lookups of the HTTP agents (the `http` provider's and an HTTP upstream's).
//!
//! ureq looks a request's host up before it takes a kept connection from its pool
//! (whose addresses it then never reads), and with a timeout (every request of
//! ours has one) it starts a thread for each lookup: 30–60 µs of every call on
//! this project's 2-core machine, and a DNS query for a name. [`Lookups`] answers
//! an IP address itself, and looks a name up at most once in its window (as long
//! as a kept connection is used), so a request on a kept connection makes no
//! lookup and a new connection after an idle time makes a fresh one.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::http::uri::Scheme;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// A resolver that answers an IP address (and its port, or the scheme's) itself,
/// and asks `names` ([`DefaultResolver`]) for a name, whose answer it uses for its
/// `window`.
#[derive(Debug)]
pub(crate) struct Lookups<R = DefaultResolver> {
    names: R,
    window: Duration,
    /// Names looked up lately (scheme, host and port), when, and their addresses.
    recent: Mutex<HashMap<String, (Instant, ResolvedSocketAddrs)>>,
}

impl Lookups {
    /// Looks a name up at most once in `window`.
    pub(crate) fn new(window: Duration) -> Self {
        Self::with(DefaultResolver::default(), window)
    }
}

impl<R> Lookups<R> {
    /// Asks `names` for a name, at most once in `window`.
    fn with(names: R, window: Duration) -> Self {
        Self {
            names,
            window,
            recent: Mutex::default(),
        }
    }

    /// The addresses `name` was looked up to less than the window before `now`.
    fn recent_at(&self, name: &str, now: Instant) -> Option<ResolvedSocketAddrs> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let (when, addrs) = recent.get(name)?;
        (now.saturating_duration_since(*when) < self.window).then(|| addrs.clone())
    }

    /// Keeps `addrs` as `name`'s, looked up at `now` (and forgets the names looked
    /// up too long ago).
    fn remember(&self, name: String, now: Instant, addrs: ResolvedSocketAddrs) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|_, (when, _)| now.saturating_duration_since(*when) < self.window);
        recent.insert(name, (now, addrs));
    }
}

impl<R: Resolver> Resolver for Lookups<R> {
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
    let ip = literal(authority.host())?;
    let port = authority.port_u16().or_else(|| match uri.scheme() {
        Some(s) if *s == Scheme::HTTP => Some(80),
        Some(s) if *s == Scheme::HTTPS => Some(443),
        _ => None,
    })?;
    Some(SocketAddr::new(ip, port))
}

/// The address a host is written as, if it is an IP literal (IPv6 in brackets or not).
pub(crate) fn literal(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(2);

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
        let resolver = Lookups::with(
            Counting {
                lookups: Default::default(),
                addr: "10.1.2.3:8080".parse().unwrap(),
            },
            WINDOW,
        );
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
        assert!(resolver.recent_at(name, at + WINDOW).is_none());
        resolver.remember("http://other:1".into(), at + WINDOW, resolver.empty());
        assert!(
            resolver.recent.lock().unwrap().get(name).is_none(),
            "an old name is forgotten when another is kept"
        );
    }
}
