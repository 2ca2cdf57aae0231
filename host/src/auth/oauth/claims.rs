//! The claims of a verified access token, checked: its issuer, its audience (this
//! resource), its lifetime on the host's clock, its scopes, and the principal it
//! names. Pure functions of the claims and the settings, so each refusal is tested
//! without keys.

use serde_json::{Map, Value};

use super::{Grant, OAuthSettings, TokenRefused};

/// The longest principal an access token may name (after the prefix).
pub const MAX_PRINCIPAL_LEN: usize = 256;

/// Checks `claims` against `settings` at `now_s` (seconds since the epoch): the
/// grant they make, or why they make none.
pub(super) fn check(
    claims: &Map<String, Value>,
    settings: &OAuthSettings,
    now_s: i64,
) -> Result<Grant, TokenRefused> {
    let issuer = claims.get("iss").and_then(Value::as_str);
    if issuer != Some(settings.issuer.as_str()) {
        return Err(TokenRefused::Issuer {
            found: issuer.map(str::to_owned),
            expected: settings.issuer.clone(),
        });
    }
    let audiences = audiences(claims.get("aud"));
    if !audiences.contains(&settings.resource) {
        return Err(TokenRefused::Audience {
            found: audiences,
            expected: settings.resource.clone(),
        });
    }
    let leeway = i64::try_from(settings.leeway.as_secs()).unwrap_or(i64::MAX);
    let exp = time_claim(claims, "exp")?.ok_or(TokenRefused::MissingClaim("exp".into()))?;
    if now_s > exp.saturating_add(leeway) {
        return Err(TokenRefused::Expired { exp, now: now_s });
    }
    if let Some(nbf) = time_claim(claims, "nbf")?
        && now_s < nbf.saturating_sub(leeway)
    {
        return Err(TokenRefused::NotYetValid { nbf, now: now_s });
    }
    let scopes = scopes(claims);
    let missing: Vec<String> = settings
        .scopes
        .iter()
        .filter(|s| !scopes.contains(s))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(TokenRefused::InsufficientScope { missing });
    }
    let principal = principal(claims, settings)?;
    Ok(Grant { principal, scopes })
}

/// `aud`: one string or an array of strings (RFC 7519 section 4.1.3).
fn audiences(aud: Option<&Value>) -> Vec<String> {
    match aud {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A NumericDate claim: absent, or a number of seconds (a fraction is cut off);
/// anything else is refused rather than read as absent.
fn time_claim(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, TokenRefused> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map(Some)
            .ok_or_else(|| TokenRefused::BadClaim {
                name: name.to_owned(),
                reason: "not a number of seconds".into(),
            }),
        Some(other) => Err(TokenRefused::BadClaim {
            name: name.to_owned(),
            reason: format!("a NumericDate is a number, not {other}"),
        }),
    }
}

/// The scopes granted: `scope`, space-separated (RFC 9068, RFC 8693), or `scp`, an
/// array or a space-separated string (as some issuers write it).
fn scopes(claims: &Map<String, Value>) -> Vec<String> {
    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => words(s),
        (None, Some(Value::Array(many))) => many
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The principal: the configured claim's value (a string, or a number written as
/// one), after the configured prefix.
fn principal(
    claims: &Map<String, Value>,
    settings: &OAuthSettings,
) -> Result<String, TokenRefused> {
    let name = &settings.principal_claim;
    let value = match claims.get(name) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => {
            return Err(TokenRefused::BadClaim {
                name: name.clone(),
                reason: "the principal claim must be a string".into(),
            });
        }
        None => return Err(TokenRefused::MissingClaim(name.clone())),
    };
    if value.is_empty() || value.len() > MAX_PRINCIPAL_LEN || value.chars().any(char::is_control) {
        return Err(TokenRefused::BadClaim {
            name: name.clone(),
            reason: format!(
                "a principal is 1 to {MAX_PRINCIPAL_LEN} bytes without control characters"
            ),
        });
    }
    Ok(format!("{}{value}", settings.principal_prefix))
}
