//! An OAuth 2.1 resource server: JWT access tokens (RFC 9068) checked against the
//! configured issuer's keys, as the MCP authorization spec asks of an MCP server.
//!
//! A token is accepted when its signature verifies with a key of the issuer's JWKS
//! (RS256, RS384, RS512, PS256, PS384, PS512, ES256 or ES384; never `none` nor a
//! shared secret), its `typ`, if it has one, is an access token's (`at+jwt`, or the
//! generic `JWT`: see `ACCEPTED_TYPES`), its `iss` is the issuer, its `aud` names
//! this resource, it is within `nbf`..`exp` on the host's clock (with
//! [`OAuthSettings::leeway`]), and it grants every required scope. Its principal is the configured claim (`sub` by
//! default) after a prefix (`oauth:` by default), so keys are scoped by it like a
//! static token's principal, and never by a static token's principal.
//! [`Validator::challenge`] and [`protected_resource_metadata`] are what a client
//! discovers the authorization server from (RFC 9728).

mod claims;
mod keys;

use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value, json};

pub use claims::MAX_PRINCIPAL_LEN;
pub use keys::{HttpKeys, KeyCache, KeySource, KeysError, metadata_urls};

use crate::clock::Clock;

/// The well-known path of Protected Resource Metadata (RFC 9728 section 3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The signature algorithms accepted.
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// The `typ` header values accepted, compared without case (media types are):
/// RFC 9068's `at+jwt` in both its forms, and the generic `JWT` of RFC 7519 section
/// 5.1, which says no more than no `typ` at all. RFC 9068 asks a resource server to
/// refuse anything but `at+jwt`, but Keycloak, Entra ID and Auth0 (unless told
/// otherwise) type their access tokens `JWT`, and Okta's carry none; refusing those
/// would refuse the issuers this server is used with. What is refused is a JWT that
/// says it is something else (a logout token's `logout+jwt`, a security event's
/// `secevent+jwt`, a DPoP proof's `dpop+jwt`): signed by the same issuer, it is not
/// an access token. An ID token, typed `JWT` by most issuers, is refused by its
/// audience (the client, not this resource).
const ACCEPTED_TYPES: &[&str] = &["at+jwt", "application/at+jwt", "JWT"];

/// What the resource server accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// The authorization server's issuer identifier, as its tokens' `iss` write it.
    pub issuer: String,
    /// Where its keys are; `None`: the `jwks_uri` of its metadata.
    pub jwks_url: Option<String>,
    /// This resource's canonical URL (`https://mcp.example.com/mcp`): the audience a
    /// token must name.
    pub resource: String,
    /// Scopes every token must grant.
    pub scopes: Vec<String>,
    /// The claim that names the principal.
    pub principal_claim: String,
    /// Written before the claim's value to make the principal, to keep OAuth
    /// principals apart from the tokens file's names
    /// ([`OAuthSettings::DEFAULT_PRINCIPAL_PREFIX`]); it must hold a character a
    /// token's name cannot (see [`OAuthSettings::problem`]).
    pub principal_prefix: String,
    /// How far `exp` and `nbf` may be off the host's clock.
    pub leeway: Duration,
}

impl OAuthSettings {
    /// The default principal claim.
    pub const DEFAULT_PRINCIPAL_CLAIM: &str = "sub";
    /// The default principal prefix: `oauth:` (`sub` `alice` is the principal
    /// `oauth:alice`). A token's name cannot hold `:`, so no subject, whatever its
    /// issuer lets a user choose (an email, a username), is a static token's
    /// principal and reads its answers.
    pub const DEFAULT_PRINCIPAL_PREFIX: &str = "oauth:";
    /// The default leeway on `exp` and `nbf`.
    pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);

    /// Settings for tokens of `issuer` for `resource`, with the defaults.
    pub fn new(issuer: &str, resource: &str) -> Self {
        Self {
            issuer: issuer.to_owned(),
            jwks_url: None,
            resource: resource.to_owned(),
            scopes: Vec::new(),
            principal_claim: Self::DEFAULT_PRINCIPAL_CLAIM.to_owned(),
            principal_prefix: Self::DEFAULT_PRINCIPAL_PREFIX.to_owned(),
            leeway: Self::DEFAULT_LEEWAY,
        }
    }

    /// Why these settings cannot work, if they cannot: URLs that are not
    /// absolute http(s) ones, an empty claim name, a principal prefix that a token's
    /// name could start with (an OAuth subject could then be a static token's
    /// principal: `""` or `oauth.` with `sub` `x` is the token name `oauth.x`).
    pub fn problem(&self) -> Option<String> {
        let url = |what: &str, value: &str| {
            let ok = (value.starts_with("https://") || value.starts_with("http://"))
                && value
                    .split_once("://")
                    .is_some_and(|(_, rest)| !rest.is_empty())
                && !value.contains('#');
            (!ok).then(|| format!("{what} {value:?} is not an absolute http(s) URL"))
        };
        url("the issuer", &self.issuer)
            .or_else(|| url("the resource", &self.resource))
            .or_else(|| {
                self.jwks_url
                    .as_deref()
                    .and_then(|j| url("the JWKS URL", j))
            })
            .or_else(|| {
                self.principal_claim
                    .is_empty()
                    .then(|| "the principal claim is empty".to_owned())
            })
            .or_else(|| {
                // Some principal (the prefix, then a subject) is a valid token name
                // exactly when the prefix and one more character is.
                let prefix = &self.principal_prefix;
                crate::auth::tokens::valid_name(&format!("{prefix}x")).then(|| {
                    format!(
                        "the principal prefix {prefix:?} could be the start of a token's name, \
                         so a subject could be a static token's principal and read its calls' \
                         answers; use a prefix with a character token names cannot hold, \
                         such as the default {:?}",
                        Self::DEFAULT_PRINCIPAL_PREFIX
                    )
                })
            })
    }
}

/// What an accepted token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The principal its calls run under.
    pub principal: String,
    /// The scopes it grants.
    pub scopes: Vec<String>,
}

/// Why an access token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefused {
    /// Not a JWT (three base64url parts with a JSON header and claims).
    #[error("the access token is not a JWT: {0}")]
    Malformed(String),
    /// Its `typ` says it is not an access token (see RFC 9068 section 4).
    #[error("the JWT's type {0:?} is not an access token's (at+jwt)")]
    Type(String),
    /// Its `alg` is not one accepted.
    #[error("the access token's algorithm {0} is not accepted (RS256, ES256 and the like are)")]
    Algorithm(String),
    /// No key of the issuer's JWKS has its `kid` (or it names none and the set has
    /// several).
    #[error("no key of the issuer's JWKS has the access token's kid {0:?}")]
    UnknownKey(Option<String>),
    /// The issuer's key cannot be used (a malformed JWK, or of another kind).
    #[error("the issuer's key {kid:?} cannot verify the access token: {reason}")]
    BadKey {
        /// The key's id.
        kid: Option<String>,
        /// Why.
        reason: String,
    },
    /// The signature does not verify.
    #[error("the access token's signature does not verify")]
    Signature,
    /// Another issuer's token.
    #[error("the access token was issued by {found:?}, not {expected:?}")]
    Issuer {
        /// Its `iss`.
        found: Option<String>,
        /// The configured issuer.
        expected: String,
    },
    /// A token for another resource.
    #[error("the access token is for {found:?}, not this resource {expected:?}")]
    Audience {
        /// Its `aud`.
        found: Vec<String>,
        /// This resource.
        expected: String,
    },
    /// Past `exp` (and the leeway).
    #[error("the access token expired at {exp} (now {now}, seconds since the epoch)")]
    Expired {
        /// Its `exp`.
        exp: i64,
        /// The host's clock.
        now: i64,
    },
    /// Before `nbf` (less the leeway).
    #[error("the access token is not valid before {nbf} (now {now}, seconds since the epoch)")]
    NotYetValid {
        /// Its `nbf`.
        nbf: i64,
        /// The host's clock.
        now: i64,
    },
    /// A claim that must be there is not.
    #[error("the access token has no {0:?} claim")]
    MissingClaim(String),
    /// A claim of the wrong type or value.
    #[error("the access token's {name:?} claim is unusable: {reason}")]
    BadClaim {
        /// The claim.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Valid, but without every required scope.
    #[error("the access token lacks the scope {}", missing.join(" "))]
    InsufficientScope {
        /// The required scopes it does not grant.
        missing: Vec<String>,
    },
    /// The issuer's keys could not be fetched: the token cannot be checked now. Its
    /// message, which the client is answered, says no more: where the keys are
    /// fetched from is the operator's to know (the log names it), not an
    /// unauthenticated client's.
    #[error("the issuer's keys cannot be had now; try again shortly")]
    Keys(KeysError),
}

impl TokenRefused {
    /// The HTTP status to answer with: 403 for a missing scope, 503 when the
    /// issuer's keys cannot be had, else 401.
    pub fn status(&self) -> u16 {
        match self {
            Self::InsufficientScope { .. } => 403,
            Self::Keys(_) => 503,
            _ => 401,
        }
    }

    /// The `error` of its `WWW-Authenticate` challenge (RFC 6750 section 3.1).
    pub fn error_code(&self) -> Option<&'static str> {
        match self {
            Self::InsufficientScope { .. } => Some("insufficient_scope"),
            Self::Keys(_) => None,
            _ => Some("invalid_token"),
        }
    }
}

/// Checks access tokens for one resource, with the issuer's keys kept in a
/// [`KeyCache`].
pub struct Validator {
    settings: OAuthSettings,
    keys: KeyCache,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Validator {
    /// A validator whose keys come from `source`, timed on `clock`.
    pub fn new(settings: OAuthSettings, source: Box<dyn KeySource>, clock: Arc<dyn Clock>) -> Self {
        Self {
            keys: KeyCache::new(source, Arc::clone(&clock)),
            settings,
            clock,
        }
    }

    /// A validator whose keys are fetched over HTTP ([`HttpKeys`]).
    pub fn over_http(settings: OAuthSettings, clock: Arc<dyn Clock>) -> Self {
        let source = HttpKeys::new(&settings.issuer, settings.jwks_url.as_deref());
        Self::new(settings, Box::new(source), clock)
    }

    /// What it accepts.
    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Fetches the issuer's keys now; how many there are.
    pub fn prefetch(&self) -> Result<usize, KeysError> {
        self.keys.prefetch()
    }

    /// Checks `token`: what it grants, or why it grants nothing.
    pub fn validate(&self, token: &str) -> Result<Grant, TokenRefused> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| TokenRefused::Malformed(e.to_string()))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(TokenRefused::Algorithm(format!("{:?}", header.alg)));
        }
        if let Some(typ) = header.typ.as_deref()
            && !ACCEPTED_TYPES.iter().any(|t| t.eq_ignore_ascii_case(typ))
        {
            return Err(TokenRefused::Type(typ.to_owned()));
        }
        let key = self.keys.key(header.kid.as_deref())?;
        // The signature only: the claims are checked below, on the host's clock.
        let mut validation = Validation::new(header.alg);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let data =
            jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation).map_err(|e| {
                match e.kind() {
                    jsonwebtoken::errors::ErrorKind::InvalidSignature => TokenRefused::Signature,
                    jsonwebtoken::errors::ErrorKind::InvalidAlgorithm => TokenRefused::BadKey {
                        kid: header.kid.clone(),
                        reason: format!("it is not a key for {:?}", header.alg),
                    },
                    _ => TokenRefused::Malformed(e.to_string()),
                }
            })?;
        let now_s = self.clock.now_ms().div_euclid(1000);
        claims::check(&data.claims, &self.settings, now_s)
    }

    /// The URL of this resource's metadata: the well-known path with the resource's
    /// path after it (RFC 9728 section 3.1), on the resource's origin.
    pub fn metadata_url(&self) -> String {
        let (origin, path) = split_origin(&self.settings.resource);
        format!("{origin}{METADATA_PATH}{}", path.trim_end_matches('/'))
    }

    /// The `WWW-Authenticate` value of a refusal: `Bearer` with the metadata URL,
    /// and the error and scope when `refused` says them (none for a request that
    /// sent no token, RFC 6750 section 3.1).
    pub fn challenge(&self, refused: Option<&TokenRefused>) -> String {
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.metadata_url());
        if let Some(code) = refused.and_then(TokenRefused::error_code) {
            value += &format!(", error=\"{code}\"");
            if let Some(refused) = refused {
                let description = refused.to_string().replace(['"', '\\'], "'");
                value += &format!(", error_description=\"{description}\"");
            }
        }
        if !self.settings.scopes.is_empty() {
            value += &format!(", scope=\"{}\"", self.settings.scopes.join(" "));
        }
        value
    }
}

/// The Protected Resource Metadata document (RFC 9728 section 2) of `settings`.
pub fn protected_resource_metadata(settings: &OAuthSettings) -> Value {
    let mut doc = json!({
        "resource": settings.resource,
        "authorization_servers": [settings.issuer],
        "bearer_methods_supported": ["header"],
    });
    if !settings.scopes.is_empty() {
        doc["scopes_supported"] = json!(settings.scopes);
    }
    doc
}

/// Whether `path` (without its query) is where this resource's metadata is served:
/// the well-known path alone, or followed by the resource's path.
pub fn is_metadata_path(path: &str, settings: &OAuthSettings) -> bool {
    let (_, resource_path) = split_origin(&settings.resource);
    let path = path.split('?').next().unwrap_or("");
    path == METADATA_PATH
        || path
            .strip_prefix(METADATA_PATH)
            .is_some_and(|rest| !rest.is_empty() && rest == resource_path.trim_end_matches('/'))
}

/// `scheme://authority` and the path (with its leading `/`, or empty) of a URL.
fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

#[cfg(test)]
mod tests;
