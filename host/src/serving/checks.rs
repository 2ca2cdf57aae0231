//! What is checked before a request is read further: that a browser page on another
//! site is not driving a local server (`Origin` and `Host`, the DNS-rebinding
//! defence), and who is calling (the bearer token: one of the tokens file, or, when
//! the server is an OAuth resource server, an access token of its issuer).

use super::wire::Head;
use crate::auth::oauth::{TokenRefused, Validator};
use crate::auth::tokens::{Holder, Role, Tokens};

/// The server as an OAuth 2.1 resource server: the access tokens it accepts beside
/// the tokens file's, and the role their holders get.
#[derive(Debug)]
pub struct OAuth {
    /// Checks the access tokens.
    pub validator: Validator,
    /// The role of every principal an access token names.
    pub role: Role,
}

/// Host names that are this machine.
const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

/// Which `Host` and `Origin` values are accepted.
#[derive(Debug, Clone)]
pub(crate) struct Origins {
    /// Origins allowed besides loopback ones (`scheme://host[:port]`, lowercase).
    allowed: Vec<String>,
    /// The server listens on a loopback address: loopback origins are allowed, and
    /// `Host` must name this machine (or an allowed origin's host).
    loopback: bool,
}

impl Origins {
    /// Accepts `allowed` origins, and loopback ones when the server is `loopback`.
    pub fn new(allowed: &[String], loopback: bool) -> Self {
        Self {
            allowed: allowed
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            loopback,
        }
    }

    /// `None` if the request may go on, else the status and why: 403 for a foreign
    /// `Origin`, 421 for a `Host` that is not this server on a loopback listener.
    pub fn check(&self, head: &Head) -> Option<(u16, String)> {
        if self.loopback {
            let host = head.header("host").unwrap_or("");
            let name = host_name(host);
            let allowed_host = LOOPBACK_HOSTS.contains(&name.as_str())
                || self
                    .allowed
                    .iter()
                    .any(|o| host_name(strip_scheme(o)) == name);
            if !allowed_host {
                return Some((
                    421,
                    format!("Host {host:?} is not this server (a DNS-rebinding attempt?)"),
                ));
            }
        }
        let origin = head.header("origin")?;
        let lower = origin.trim_end_matches('/').to_ascii_lowercase();
        let loopback_origin = LOOPBACK_HOSTS.contains(&host_name(strip_scheme(&lower)).as_str())
            && (lower.starts_with("http://") || lower.starts_with("https://"));
        if self.allowed.contains(&lower) || (self.loopback && loopback_origin) {
            None
        } else {
            Some((
                403,
                format!("Origin {origin:?} is not allowed (see --allow-origin)"),
            ))
        }
    }
}

fn strip_scheme(origin: &str) -> &str {
    origin.split_once("://").map_or(origin, |(_, rest)| rest)
}

/// The host of `host[:port]`, lowercase; an IPv6 literal keeps its brackets.
fn host_name(authority: &str) -> String {
    let lower = authority.to_ascii_lowercase();
    if let Some(end) = lower.find(']') {
        return lower[..=end].to_owned();
    }
    lower.split(':').next().unwrap_or("").to_owned()
}

/// Who is calling.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A token of the tokens file, naming this principal.
    Principal(String),
    /// No `Authorization: Bearer` header.
    Anonymous,
    /// A bearer token that is not (or no longer) in the file.
    Unknown,
    /// A token of the file whose role calls no tool (a viewer's or operator's, for
    /// the console).
    NotAgent(Role),
    /// An OAuth access token that was refused, and why.
    Refused(TokenRefused),
}

/// Reads the bearer token and looks it up: only an agent's token calls tools. A
/// token not in the file is checked as an OAuth access token when `oauth` is given.
pub(crate) fn caller(head: &Head, tokens: &Tokens, oauth: Option<&OAuth>) -> Caller {
    let Some(value) = head.header("authorization") else {
        return Caller::Anonymous;
    };
    let mut parts = value.trim().splitn(2, ' ');
    let scheme = parts.next().unwrap_or("");
    let token = parts.next().unwrap_or("").trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Caller::Anonymous;
    }
    let holder = match (tokens.holder(token), oauth) {
        (Some(holder), _) => holder,
        (None, None) => return Caller::Unknown,
        (None, Some(oauth)) => match oauth.validator.validate(token) {
            Ok(grant) => Holder {
                name: grant.principal,
                role: oauth.role,
            },
            Err(refused) => return Caller::Refused(refused),
        },
    };
    match holder.role {
        Role::Agent => Caller::Principal(holder.name),
        role => Caller::NotAgent(role),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_server_takes_local_pages_and_refuses_other_sites_and_rebound_names() {
        let origins = Origins::new(&["https://app.example.com".into()], true);
        assert_eq!(
            origins.check(&Head::with_headers(&[("host", "127.0.0.1:8080")])),
            None
        );
        assert_eq!(
            origins.check(&Head::with_headers(&[
                ("host", "localhost:8080"),
                ("origin", "http://localhost:3000")
            ])),
            None
        );
        assert_eq!(
            origins.check(&Head::with_headers(&[
                ("host", "[::1]:8080"),
                ("origin", "https://app.example.com")
            ])),
            None
        );
        let foreign = origins.check(&Head::with_headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "https://evil.example"),
        ]));
        assert_eq!(foreign.map(|(s, _)| s), Some(403));
        let rebound = origins.check(&Head::with_headers(&[("host", "evil.example:8080")]));
        assert_eq!(rebound.map(|(s, _)| s), Some(421));
        let lookalike = origins.check(&Head::with_headers(&[
            ("host", "127.0.0.1"),
            ("origin", "http://localhost.evil.example"),
        ]));
        assert_eq!(lookalike.map(|(s, _)| s), Some(403));
    }

    #[test]
    fn a_public_server_takes_only_the_origins_it_was_given() {
        let origins = Origins::new(&[], false);
        assert_eq!(
            origins.check(&Head::with_headers(&[("host", "mcp.example.com")])),
            None
        );
        let local_page = origins.check(&Head::with_headers(&[
            ("host", "mcp.example.com"),
            ("origin", "http://localhost:3000"),
        ]));
        assert_eq!(local_page.map(|(s, _)| s), Some(403));
    }
}
