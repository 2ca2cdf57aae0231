//! `oci://REGISTRY/REPOSITORY[:TAG][@sha256:HEX]`: where a component lives in an OCI
//! registry, by tag (which may move) or by digest (which may not).

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// The scheme every reference starts with.
pub const SCHEME: &str = "oci://";

/// A content digest, `sha256:` and 64 lowercase hex digits (the only algorithm the
/// OCI distribution spec requires, and the only one accepted here).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    /// `sha256:…` as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// Whether `bytes` have this digest.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        Self::of(bytes) == *self
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Digest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let Some(hex) = s.strip_prefix("sha256:") else {
            return Err(format!(
                "digest `{s}` must be `sha256:` and 64 hex digits (the only algorithm accepted)"
            ));
        };
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(format!(
                "digest `{s}` must be `sha256:` and 64 lowercase hex digits"
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

/// Where a component lives: a registry, a repository in it, and a tag, a digest or
/// both (the digest then decides; the tag only says where it came from).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    /// `HOST[:PORT]`.
    pub registry: String,
    /// `shop/refund`.
    pub repository: String,
    /// `v1`, if one was named.
    pub tag: Option<String>,
    /// The manifest's digest, if one was named.
    pub digest: Option<Digest>,
}

impl Reference {
    /// The same reference pinned to `digest` (the tag, if any, kept for people).
    pub fn pinned(&self, digest: Digest) -> Self {
        Self {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// What to ask the registry's manifest endpoint for: the digest if there is one,
    /// else the tag (`latest` for a reference built with neither).
    pub fn manifest_ref(&self) -> &str {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => digest.as_str(),
            (None, Some(tag)) => tag,
            (None, None) => "latest",
        }
    }

    /// The registry's host, without its port (`[::1]` keeps its brackets).
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }

    /// Whether the registry is on this machine (`localhost`, or an address such as
    /// `127.0.0.1` or `[::1]` that is a loopback one): the only registries spoken to
    /// over plain HTTP.
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(self.host())
    }
}

/// `host` of `HOST[:PORT]` (an IPv6 address keeps its brackets).
pub(crate) fn host_of(authority: &str) -> &str {
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

/// Whether `host` (a name, an IPv4 address or a bracketed IPv6 one) is this machine:
/// `localhost`, or an IP address that parses and is a loopback one. Decided from the
/// parsed address, never from how the text starts: `127.evil.com` is a name anyone
/// can register, not this machine.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// A path component of a repository name (OCI distribution spec):
/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_path_component(part: &str) -> bool {
    let bytes = part.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &part[start..i];
        let dashes = sep.bytes().all(|b| b == b'-');
        if !(sep == "." || sep == "_" || sep == "__" || dashes) {
            return false;
        }
    }
    true
}

/// A tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn is_tag(tag: &str) -> bool {
    let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-';
    tag.len() <= 128
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag.bytes().all(ok)
}

impl FromStr for Reference {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "`{s}` is not an OCI reference: {why} (expected oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:…)"
            )
        };
        let rest = s
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("it must start with oci://"))?;
        let (rest, digest) = match rest.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest.parse::<Digest>().map_err(|e| bad(&e))?)),
            None => (rest, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no repository after the registry"))?;
        if registry.is_empty()
            || !registry
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        {
            return Err(bad("the registry must be HOST or HOST:PORT"));
        }
        // A colon after the last slash starts the tag.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag.to_owned())),
            _ => (path, None),
        };
        if !repository.split('/').all(is_path_component) {
            return Err(bad(
                "the repository must be lowercase letters and digits, separated by `/`, `.`, `_` or `-`",
            ));
        }
        if let Some(tag) = &tag
            && !is_tag(tag)
        {
            return Err(bad(
                "a tag is up to 128 letters, digits, `_`, `.` or `-`, not starting with `.` or `-`",
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(bad("it names neither a tag nor a digest"));
        }
        Ok(Self {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_tag_a_digest_or_both_are_read_and_written_back_the_same() {
        for text in [
            "oci://127.0.0.1:5000/shop/refund:v1".to_owned(),
            format!("oci://127.0.0.1:5000/shop/refund@sha256:{HEX}"),
            format!("oci://ghcr.io/acme/tools/refund:1.2.0@sha256:{HEX}"),
        ] {
            let reference: Reference = text.parse().unwrap();
            assert_eq!(reference.to_string(), text);
        }
        let r: Reference = "oci://localhost:5000/a/b-c__d.e:v1".parse().unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("localhost:5000", "a/b-c__d.e", Some("v1"))
        );
        assert!(r.is_loopback());
        assert_eq!(r.manifest_ref(), "v1");
        let pinned = r.pinned(format!("sha256:{HEX}").parse().unwrap());
        assert_eq!(pinned.manifest_ref(), format!("sha256:{HEX}"));
        assert!(
            !"oci://ghcr.io/a:v1"
                .parse::<Reference>()
                .unwrap()
                .is_loopback()
        );
    }

    #[test]
    fn loopback_is_decided_from_a_parsed_address_not_from_how_the_name_starts() {
        let loopback = |registry: &str| {
            format!("oci://{registry}/a:v1")
                .parse::<Reference>()
                .unwrap()
                .is_loopback()
        };
        for local in [
            "127.0.0.1:5000",
            "127.1.2.3",
            "localhost",
            "LOCALHOST:5000",
            "[::1]:5000",
            "[::1]",
        ] {
            assert!(loopback(local), "{local}");
        }
        for remote in [
            "127.evil.com",
            "127.0.0.1.evil.com:5000",
            "localhost.evil.com",
            "128.0.0.1:5000",
            "ghcr.io",
            "[::2]:5000",
        ] {
            assert!(!loopback(remote), "{remote}");
        }
        let r: Reference = "oci://[::1]:5000/a:v1".parse().unwrap();
        assert_eq!(r.host(), "[::1]");
    }

    #[test]
    fn a_bad_reference_is_refused_saying_what_is_wrong() {
        let why = |s: &str| s.parse::<Reference>().unwrap_err();
        assert!(why("ghcr.io/a:v1").contains("must start with oci://"));
        assert!(why("oci://ghcr.io").contains("no repository"));
        assert!(why("oci://ghcr.io/Shop/refund:v1").contains("lowercase"));
        assert!(why("oci://ghcr.io/shop//refund:v1").contains("lowercase"));
        assert!(why("oci://ghcr.io/shop/refund").contains("neither a tag nor a digest"));
        assert!(why("oci://ghcr.io/shop/refund:.v1").contains("a tag is"));
        assert!(why("oci://ghcr.io/shop/refund@sha256:abc").contains("64"));
        assert!(why(&format!("oci://ghcr.io/shop/refund@sha512:{HEX}")).contains("only algorithm"));
        assert!(
            why(&format!("oci://ghcr.io/a@sha256:{}", HEX.to_uppercase())).contains("lowercase")
        );
    }

    #[test]
    fn a_digest_is_the_sha256_of_the_bytes() {
        let digest = Digest::of(b"");
        assert_eq!(
            digest.as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(digest.matches(b""));
        assert!(!digest.matches(b"x"));
    }
}
