//! `serve --http` as an OAuth 2.1 resource server: the `--oauth-*` flags over the
//! configuration's `[oauth]` table, made into the [`OAuth`] the HTTP server checks
//! access tokens with.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::Cli;
use crate::auth::oauth::{OAuthSettings, Validator};
use crate::auth::tokens::Role;
use crate::clock::Clock;
use crate::config::OAuthConfig;
use crate::error::Error;
use crate::mcp::http::ENDPOINT;
use crate::serving::OAuth;

/// The `--oauth-*` flags of `serve`; each wins over the same key of `[oauth]` in
/// justonce.toml.
#[derive(Debug, Default, Args)]
pub struct OAuthArgs {
    /// Also accept OAuth 2.1 access tokens (JWTs) of this issuer, beside the tokens
    /// file's (HTTP); its keys come from its metadata's jwks_uri.
    #[arg(long, value_name = "URL", requires = "http")]
    oauth_issuer: Option<String>,
    /// The issuer's JWKS URL, when its metadata cannot be discovered.
    #[arg(long, value_name = "URL", requires = "http")]
    oauth_jwks: Option<String>,
    /// This server's canonical MCP URL, which access tokens must name as their
    /// audience [default: http://ADDR:PORT/mcp of --http].
    #[arg(long, value_name = "URL", requires = "http")]
    oauth_resource: Option<String>,
    /// A scope every access token must grant (repeatable).
    #[arg(long, value_name = "SCOPE", requires = "http")]
    oauth_scope: Vec<String>,
    /// The access-token claim that names the principal [default: sub].
    #[arg(long, value_name = "CLAIM", requires = "http")]
    oauth_principal_claim: Option<String>,
}

impl OAuthArgs {
    /// The flags over `[oauth]`: `None` when neither names an issuer.
    fn merged(&self, file: Option<&OAuthConfig>) -> Option<OAuthConfig> {
        let file = file.cloned().unwrap_or_default();
        let issuer = self.oauth_issuer.clone().or(file.issuer.clone())?;
        Some(OAuthConfig {
            issuer: Some(issuer),
            jwks_url: self.oauth_jwks.clone().or(file.jwks_url),
            resource: self.oauth_resource.clone().or(file.resource),
            scopes: if self.oauth_scope.is_empty() {
                file.scopes
            } else {
                Some(self.oauth_scope.clone())
            },
            principal_claim: self.oauth_principal_claim.clone().or(file.principal_claim),
            ..file
        })
    }

    /// The OAuth resource server for a server listening on `bound`, if configured;
    /// its keys are fetched once now, and a failure is only logged (the issuer may
    /// come up later).
    pub(super) fn resource_server(
        &self,
        cli: &Cli,
        bound: SocketAddr,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<OAuth>, Error> {
        let file = cli.settings.as_ref().and_then(|c| c.oauth.as_ref());
        let Some(config) = self.merged(file) else {
            if file.is_some() {
                return Err(config_error(
                    cli,
                    "[oauth] needs an `issuer` (or --oauth-issuer URL)",
                ));
            }
            return Ok(None);
        };
        let resource = config.resource.clone().unwrap_or_else(|| {
            if !bound.ip().is_loopback() {
                tracing::warn!(
                    "OAuth: no resource URL is configured, so tokens must name http://{bound}{ENDPOINT}; \
                     behind a proxy, set --oauth-resource to the URL clients use"
                );
            }
            format!("http://{bound}{ENDPOINT}")
        });
        let mut settings = OAuthSettings::new(config.issuer.as_deref().unwrap_or(""), &resource);
        settings.jwks_url = config.jwks_url;
        settings.scopes = config.scopes.unwrap_or_default();
        if let Some(claim) = config.principal_claim {
            settings.principal_claim = claim;
        }
        if let Some(prefix) = config.principal_prefix {
            settings.principal_prefix = prefix;
        }
        if let Some(seconds) = config.leeway_seconds {
            settings.leeway = Duration::from_secs(seconds);
        }
        if let Some(problem) = settings.problem() {
            return Err(config_error(cli, &format!("OAuth: {problem}")));
        }
        let role = match config.role.as_deref() {
            None => Role::Agent,
            Some(role) => role
                .parse::<Role>()
                .map_err(|e| config_error(cli, &format!("`oauth.role`: {e}")))?,
        };
        let validator = Validator::over_http(settings, clock);
        match validator.prefetch() {
            Ok(keys) => {
                tracing::info!(keys, issuer = %validator.settings().issuer, "OAuth access tokens accepted")
            }
            Err(e) => tracing::warn!(
                "OAuth: the issuer's keys cannot be fetched yet ({e}); trying again on the first token"
            ),
        }
        Ok(Some(OAuth { validator, role }))
    }
}

/// A configuration error, named after the configuration file (or the flags).
fn config_error(cli: &Cli, reason: &str) -> Error {
    Error::Config {
        path: cli
            .settings
            .as_ref()
            .map_or_else(|| PathBuf::from("--oauth-*"), |c| c.path.clone()),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_win_over_the_file_key_by_key() {
        let file = OAuthConfig {
            issuer: Some("https://a.example".into()),
            scopes: Some(vec!["file".into()]),
            principal_claim: Some("email".into()),
            role: Some("viewer".into()),
            ..OAuthConfig::default()
        };
        let flags = OAuthArgs {
            oauth_scope: vec!["flag".into()],
            ..OAuthArgs::default()
        };
        let merged = flags.merged(Some(&file)).unwrap();
        assert_eq!(merged.issuer.as_deref(), Some("https://a.example"));
        assert_eq!(merged.scopes, Some(vec!["flag".to_owned()]));
        assert_eq!(merged.principal_claim.as_deref(), Some("email"));
        assert_eq!(merged.role.as_deref(), Some("viewer"));
        assert_eq!(
            OAuthArgs::default().merged(None),
            None,
            "no issuer: no OAuth"
        );
    }
}
