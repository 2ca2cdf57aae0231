//! Which addresses a request may connect to. A host name is looked up once, here, and
//! the connection goes to the addresses this lookup returned and checked (never a
//! second lookup a DNS server could answer differently). A name that resolves to a
//! loopback, private, link-local or otherwise non-public address (a cloud metadata
//! service at 169.254.169.254, say) is refused unless the configuration names that
//! address as an IP literal; a URL that is itself an IP literal was named by the
//! allowlist already. A name's addresses are kept for a moment ([`Lookups`]: a
//! request on a kept connection makes no lookup), and checked at every use.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use super::lookup::{Lookups, literal};

/// How long a name's addresses are used before it is looked up again (see
/// [`Lookups`]): each use is checked as a fresh lookup is.
const LOOKUP_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a name's addresses were refused; carried inside the `io::Error` the resolver
/// returns, so the client can tell it from a failed lookup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct AddressRefused(pub String);

/// A resolver that refuses non-public addresses reached by a name.
#[derive(Debug)]
pub(crate) struct CheckedResolver {
    /// The non-public addresses the configuration names as IP literals.
    named: BTreeSet<IpAddr>,
    inner: Lookups,
}

impl CheckedResolver {
    /// Allows, by name, the non-public addresses among `named`.
    pub fn new(named: impl IntoIterator<Item = IpAddr>) -> Self {
        Self {
            named: named.into_iter().map(canonical).collect(),
            inner: Lookups::new(LOOKUP_WINDOW),
        }
    }

    /// Which of the addresses a lookup of `host` returned it may connect to: every
    /// one for an IP literal; else the public ones and those the configuration names.
    /// None of them is refused, naming the first address a name may not reach.
    pub fn allowed(&self, host: &str, addresses: &[IpAddr]) -> Result<Vec<IpAddr>, AddressRefused> {
        if literal(host).is_some() {
            return Ok(addresses.to_vec());
        }
        let reachable = |a: &IpAddr| is_public(*a) || self.named.contains(&canonical(*a));
        let allowed: Vec<IpAddr> = addresses.iter().copied().filter(reachable).collect();
        match addresses.first() {
            Some(&first) if allowed.is_empty() => {
                let address = canonical(first);
                Err(AddressRefused(format!(
                    "`{host}` resolves to {address}, a {} address; a name may reach only public addresses unless the host's HTTP config names that address as an IP literal (allow `http://{}:PORT`)",
                    kind(address),
                    Bracketed(address)
                )))
            }
            _ => Ok(allowed),
        }
    }
}

impl Resolver for CheckedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let resolved = self.inner.resolve(uri, config, timeout)?;
        let host = uri.host().unwrap_or_default();
        let ips: Vec<IpAddr> = resolved.iter().map(|a| a.ip()).collect();
        let allowed = self
            .allowed(host, &ips)
            .map_err(|refused| ureq::Error::Io(io::Error::other(refused)))?;
        let mut addresses = self.empty();
        for address in resolved.iter().filter(|a| allowed.contains(&a.ip())) {
            addresses.push(*address);
        }
        Ok(addresses)
    }
}

/// An IPv4 address an IPv6 one carries (mapped `::ffff:a.b.c.d`, NAT64
/// `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`) is judged as that IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = address else {
        return address;
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return IpAddr::V4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return IpAddr::V4(embedded(s[1], s[2]));
    }
    address
}

fn embedded(high: u16, low: u16) -> Ipv4Addr {
    let [a, b] = high.to_be_bytes();
    let [c, d] = low.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

/// Whether an address is on the public internet: not loopback, private, link-local,
/// shared (CGNAT), unspecified, broadcast, multicast, documentation, benchmarking or
/// reserved.
pub(crate) fn is_public(address: IpAddr) -> bool {
    match canonical(address) {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && v4.octets()[2] == 0)
                || (a == 198 && (18..20).contains(&b))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || v6.segments()[..2] == [0x2001, 0xdb8]
                || (v6.segments()[..6] == [0; 6]))
        }
    }
}

/// What kind of non-public address this is, for the refusal.
fn kind(address: IpAddr) -> &'static str {
    match address {
        a if a.is_loopback() => "loopback",
        IpAddr::V4(v4) if v4.is_link_local() => "link-local (cloud metadata)",
        IpAddr::V6(v6) if v6.is_unicast_link_local() => "link-local",
        IpAddr::V4(v4) if v4.is_private() => "private",
        IpAddr::V6(v6) if v6.is_unique_local() => "private",
        _ => "non-public",
    }
}

/// An address as a URL writes it (IPv6 in brackets).
struct Bracketed(IpAddr);

impl fmt::Display for Bracketed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "[{v6}]"),
        }
    }
}

/// The non-public addresses a configuration names as IP literals, among `hosts`.
pub(crate) fn named_addresses<'a>(hosts: impl IntoIterator<Item = &'a str>) -> Vec<IpAddr> {
    hosts
        .into_iter()
        .filter_map(literal)
        .filter(|a| !is_public(*a))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "127.8.9.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip(private)), "{private}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "172.32.0.1"] {
            assert!(is_public(ip(public)), "{public}");
        }
    }

    #[test]
    fn a_name_reaches_a_private_address_only_when_the_config_names_it() {
        let resolver = CheckedResolver::new(named_addresses(["127.0.0.1", "api.example"]));
        let allowed = |host: &str, ips: &[&str]| {
            let ips: Vec<IpAddr> = ips.iter().map(|s| ip(s)).collect();
            resolver.allowed(host, &ips)
        };
        // `localhost` is ::1 and 127.0.0.1: only the named one is connected to.
        assert_eq!(
            allowed("localhost", &["::1", "127.0.0.1"]),
            Ok(vec![ip("127.0.0.1")])
        );
        assert_eq!(
            allowed("api.example", &["93.184.216.34"]),
            Ok(vec![ip("93.184.216.34")])
        );
        let refused = allowed("metadata.internal", &["169.254.169.254"]).unwrap_err();
        assert!(refused.0.contains("169.254.169.254"), "{refused}");
        assert!(refused.0.contains("link-local"), "{refused}");
        // A private address among public ones is never connected to.
        assert_eq!(
            allowed("rebind.example", &["10.0.0.7", "93.184.216.34"]),
            Ok(vec![ip("93.184.216.34")])
        );
        let refused = allowed("internal.example", &["10.0.0.7", "fd00::7"]).unwrap_err();
        assert!(
            refused.0.contains("10.0.0.7") && refused.0.contains("private"),
            "{refused}"
        );
        // The IPv4-mapped form of a named address is that address.
        assert_eq!(
            allowed("mapped", &["::ffff:127.0.0.1"]),
            Ok(vec![ip("::ffff:127.0.0.1")])
        );
        // A literal was compared by the allowlist already.
        assert_eq!(allowed("[::1]", &["::1"]), Ok(vec![ip("::1")]));
    }
}
