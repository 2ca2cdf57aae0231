use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{EncodingKey, Header};

use super::*;
use crate::clock::ManualClock;

const ISSUER: &str = "https://auth.example.com/tenant";
const RESOURCE: &str = "https://mcp.example.com/mcp";
const RSA_A: &str = include_str!("testdata/rsa-a.pem");
const RSA_B: &str = include_str!("testdata/rsa-b.pem");
const EC_A: &str = include_str!("testdata/ec-a.pem");

/// A signing key and its public JWK, under `kid`.
struct Signer {
    key: EncodingKey,
    alg: Algorithm,
    kid: String,
}

impl Signer {
    fn rsa(pem: &str, kid: &str) -> Self {
        Self {
            key: EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
            alg: Algorithm::RS256,
            kid: kid.into(),
        }
    }

    fn ec(pem: &str, kid: &str) -> Self {
        Self {
            key: EncodingKey::from_ec_pem(pem.as_bytes()).unwrap(),
            alg: Algorithm::ES256,
            kid: kid.into(),
        }
    }

    fn jwk(&self) -> Jwk {
        let mut jwk = Jwk::from_encoding_key(&self.key, self.alg).unwrap();
        jwk.common.key_id = Some(self.kid.clone());
        jwk
    }

    /// A token with `claims`, its header naming `kid`.
    fn sign_as(&self, kid: Option<&str>, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &self.key).unwrap()
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_as(Some(&self.kid), claims)
    }
}

/// A key source the test fills, counting its fetches.
#[derive(Clone, Default)]
struct Keys {
    set: Arc<Mutex<Vec<Jwk>>>,
    fetches: Arc<AtomicUsize>,
    down: Arc<Mutex<bool>>,
}

impl KeySource for Keys {
    fn fetch(&self) -> Result<JwkSet, KeysError> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        if *self.down.lock().unwrap() {
            return Err(KeysError::Fetch {
                url: "https://auth.example.com/jwks".into(),
                reason: "connection refused".into(),
            });
        }
        Ok(JwkSet {
            keys: self.set.lock().unwrap().clone(),
        })
    }
}

impl Keys {
    fn with(signers: &[&Signer]) -> Self {
        let keys = Self::default();
        keys.set
            .lock()
            .unwrap()
            .extend(signers.iter().map(|s| s.jwk()));
        keys
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

fn settings() -> OAuthSettings {
    OAuthSettings {
        scopes: vec!["mcp:tools".into()],
        ..OAuthSettings::new(ISSUER, RESOURCE)
    }
}

fn validator(settings: OAuthSettings, keys: &Keys) -> (Validator, ManualClock) {
    let clock = ManualClock::default();
    let validator = Validator::new(settings, Box::new(keys.clone()), Arc::new(clock.clone()));
    (validator, clock)
}

/// Claims a token valid now (on `clock`) would carry, for ten minutes.
fn claims(clock: &ManualClock) -> Value {
    let now = clock.now_ms() / 1000;
    json!({
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "user-42",
        "email": "ada@example.com",
        "scope": "openid mcp:tools",
        "iat": now,
        "exp": now + 600,
    })
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

#[test]
fn a_good_token_signed_with_rs256_or_es256_is_accepted_and_names_its_subject() {
    let rsa = Signer::rsa(RSA_A, "rsa-a");
    let ec = Signer::ec(EC_A, "ec-a");
    let keys = Keys::with(&[&rsa, &ec]);
    let (validator, clock) = validator(settings(), &keys);
    for signer in [&rsa, &ec] {
        let grant = validator.validate(&signer.sign(&claims(&clock))).unwrap();
        assert_eq!(grant.principal, "oauth:user-42");
        assert_eq!(grant.scopes, ["openid", "mcp:tools"]);
    }
    // An audience array naming this resource among others is this resource's too.
    let many = with(
        claims(&clock),
        "aud",
        json!(["https://other.example", RESOURCE]),
    );
    assert!(validator.validate(&rsa.sign(&many)).is_ok());
    assert_eq!(keys.fetches(), 1, "the keys are fetched once and kept");
}

#[test]
fn each_bad_token_is_refused_with_its_reason() {
    let rsa = Signer::rsa(RSA_A, "rsa-a");
    let keys = Keys::with(&[&rsa]);
    let (validator, clock) = validator(settings(), &keys);
    let good = claims(&clock);
    let refused = |token: String| validator.validate(&token).unwrap_err();

    let other_audience = refused(rsa.sign(&with(
        good.clone(),
        "aud",
        json!("https://other.example/mcp"),
    )));
    assert!(
        matches!(&other_audience, TokenRefused::Audience { found, expected }
            if found == &["https://other.example/mcp"] && expected == RESOURCE),
        "{other_audience:?}"
    );
    assert_eq!(
        refused(rsa.sign(&with(good.clone(), "iss", json!("https://evil.example")))),
        TokenRefused::Issuer {
            found: Some("https://evil.example".into()),
            expected: ISSUER.into()
        }
    );
    assert_eq!(
        refused(rsa.sign(&with(good.clone(), "scope", json!("openid")))),
        TokenRefused::InsufficientScope {
            missing: vec!["mcp:tools".into()]
        }
    );
    // Signed by another key under this key's id.
    let impostor = Signer::rsa(RSA_B, "rsa-a");
    assert_eq!(refused(impostor.sign(&good)), TokenRefused::Signature);
    // A tampered payload.
    let token = rsa.sign(&good);
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    parts[1] = {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let forged = with(good.clone(), "sub", json!("admin"));
        b64.encode(serde_json::to_vec(&forged).unwrap())
    };
    assert_eq!(refused(parts.join(".")), TokenRefused::Signature);
    assert_eq!(
        refused(rsa.sign_as(Some("nobody"), &good)),
        TokenRefused::UnknownKey(Some("nobody".into()))
    );
    assert!(matches!(
        refused("not.a.jwt".into()),
        TokenRefused::Malformed(_)
    ));
    let no_exp = good
        .as_object()
        .unwrap()
        .clone()
        .into_iter()
        .filter(|(k, _)| k != "exp");
    let no_exp = Value::Object(no_exp.collect());
    assert_eq!(
        refused(rsa.sign(&no_exp)),
        TokenRefused::MissingClaim("exp".into())
    );
    let text_exp = with(good.clone(), "exp", json!("4102444800"));
    assert!(
        matches!(refused(rsa.sign(&text_exp)), TokenRefused::BadClaim { name, .. } if name == "exp")
    );
    let no_sub = Value::Object(
        good.as_object()
            .unwrap()
            .clone()
            .into_iter()
            .filter(|(k, _)| k != "sub")
            .collect(),
    );
    assert_eq!(
        refused(rsa.sign(&no_sub)),
        TokenRefused::MissingClaim("sub".into())
    );
    // A shared-secret token is refused before any key is looked at, whatever it says.
    let hs = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &good,
        &EncodingKey::from_secret(b"guessable").unwrap(),
    )
    .unwrap();
    assert!(matches!(refused(hs), TokenRefused::Algorithm(alg) if alg == "HS256"));
    // An unsigned token (`alg: none`) is not even a header this crate accepts.
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let unsigned = format!(
        "{}.{}.",
        b64.encode(br#"{"alg":"none","typ":"JWT"}"#),
        b64.encode(serde_json::to_vec(&good).unwrap())
    );
    assert!(matches!(refused(unsigned), TokenRefused::Malformed(_)));
    for (refusal, status, code) in [
        (TokenRefused::Signature, 401, Some("invalid_token")),
        (
            TokenRefused::InsufficientScope { missing: vec![] },
            403,
            Some("insufficient_scope"),
        ),
    ] {
        assert_eq!((refusal.status(), refusal.error_code()), (status, code));
    }
}

#[test]
fn expiry_and_not_before_are_read_on_the_hosts_clock_with_a_small_leeway() {
    let rsa = Signer::rsa(RSA_A, "rsa-a");
    let keys = Keys::with(&[&rsa]);
    let (validator, clock) = validator(settings(), &keys);
    let token = rsa.sign(&claims(&clock));
    let exp = clock.now_ms() / 1000 + 600;
    // Ten minutes, then the leeway's minute: still good at its last second.
    clock.advance(Duration::from_secs(600 + 60));
    assert!(validator.validate(&token).is_ok());
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        validator.validate(&token).unwrap_err(),
        TokenRefused::Expired { exp, now: exp + 61 }
    );
    let later = clock.now_ms() / 1000 + 3600;
    let early = rsa.sign(&with(claims(&clock), "nbf", json!(later)));
    assert!(matches!(
        validator.validate(&early).unwrap_err(),
        TokenRefused::NotYetValid { nbf, .. } if nbf == later
    ));
    clock.advance(Duration::from_secs(3600 - 60));
    assert!(validator.validate(&early).is_err(), "expired by now");
}

#[test]
fn the_principal_is_the_configured_claim_after_the_configured_prefix() {
    let rsa = Signer::rsa(RSA_A, "rsa-a");
    let keys = Keys::with(&[&rsa]);
    let by_email = OAuthSettings {
        principal_claim: "email".into(),
        principal_prefix: "idp/".into(),
        ..settings()
    };
    assert_eq!(by_email.problem(), None);
    let (validator, clock) = validator(by_email, &keys);
    let grant = validator.validate(&rsa.sign(&claims(&clock))).unwrap();
    assert_eq!(grant.principal, "idp/ada@example.com");
    let bob = with(claims(&clock), "email", json!("bob@example.com"));
    assert_eq!(
        validator.validate(&rsa.sign(&bob)).unwrap().principal,
        "idp/bob@example.com"
    );
    let object = with(claims(&clock), "email", json!({"a": 1}));
    assert!(matches!(
        validator.validate(&rsa.sign(&object)).unwrap_err(),
        TokenRefused::BadClaim { name, .. } if name == "email"
    ));
}

#[test]
fn no_subject_is_a_static_tokens_principal_by_default_and_a_prefix_that_allows_it_is_refused() {
    let rsa = Signer::rsa(RSA_A, "rsa-a");
    let keys = Keys::with(&[&rsa]);
    let (validator, clock) = validator(settings(), &keys);
    // A user who chose the name of a static token as their subject.
    let alice = with(claims(&clock), "sub", json!("alice"));
    let principal = validator.validate(&rsa.sign(&alice)).unwrap().principal;
    assert_ne!(principal, "alice", "the static token alice's principal");
    assert!(
        !crate::auth::tokens::valid_name(&principal),
        "{principal:?} could name a token"
    );
    assert_eq!(settings().problem(), None, "the default prefix is safe");
    for prefix in ["", "oauth.", "a", "idp-"] {
        let colliding = OAuthSettings {
            principal_prefix: prefix.into(),
            ..settings()
        };
        let problem = colliding.problem().unwrap_or_default();
        assert!(
            problem.contains("principal prefix"),
            "{prefix:?}: {problem:?}"
        );
    }
    for prefix in ["oauth:", "idp/", "a@", &"x".repeat(64)] {
        let apart = OAuthSettings {
            principal_prefix: prefix.to_owned(),
            ..settings()
        };
        assert_eq!(apart.problem(), None, "{prefix:?}");
    }
}

#[test]
fn an_access_tokens_type_is_accepted_and_another_jwts_is_refused() {
    let rsa = Signer::rsa(RSA_A, "rsa-a");
    let keys = Keys::with(&[&rsa]);
    let (validator, clock) = validator(settings(), &keys);
    let typed = |typ: Option<&str>| {
        let mut header = Header::new(rsa.alg);
        header.kid = Some(rsa.kid.clone());
        header.typ = typ.map(str::to_owned);
        jsonwebtoken::encode(&header, &claims(&clock), &rsa.key).unwrap()
    };
    for typ in [
        Some("at+jwt"),
        Some("application/at+jwt"),
        Some("AT+JWT"),
        Some("JWT"),
        None,
    ] {
        assert!(validator.validate(&typed(typ)).is_ok(), "{typ:?}");
    }
    for typ in ["logout+jwt", "secevent+jwt", "dpop+jwt"] {
        assert_eq!(
            validator.validate(&typed(Some(typ))).unwrap_err(),
            TokenRefused::Type(typ.into())
        );
    }
}

#[test]
fn an_unknown_key_id_fetches_the_keys_again_but_not_more_than_twice_a_minute() {
    let old = Signer::rsa(RSA_A, "2026-01");
    let keys = Keys::with(&[&old]);
    let (validator, clock) = validator(settings(), &keys);
    assert!(validator.validate(&old.sign(&claims(&clock))).is_ok());
    assert_eq!(keys.fetches(), 1);

    // The issuer rotates: a token under the new key makes the server fetch again.
    let new = Signer::ec(EC_A, "2026-02");
    keys.set.lock().unwrap().push(new.jwk());
    clock.advance(KeyCache::MIN_REFRESH);
    assert!(validator.validate(&new.sign(&claims(&clock))).is_ok());
    assert_eq!(keys.fetches(), 2);

    // Made-up key ids: no fetch until the interval since the last one has passed.
    for kid in ["x1", "x2", "x3"] {
        clock.advance(Duration::from_secs(1));
        let err = validator
            .validate(&new.sign_as(Some(kid), &claims(&clock)))
            .unwrap_err();
        assert_eq!(err, TokenRefused::UnknownKey(Some(kid.into())));
    }
    assert_eq!(
        keys.fetches(),
        2,
        "still within the interval of the last fetch"
    );
    clock.advance(KeyCache::MIN_REFRESH);
    let _ = validator.validate(&new.sign_as(Some("x4"), &claims(&clock)));
    assert_eq!(keys.fetches(), 3);
    // Known keys still verify meanwhile, with no fetch.
    assert!(validator.validate(&old.sign(&claims(&clock))).is_ok());
    assert_eq!(keys.fetches(), 3);
}

#[test]
fn an_issuer_out_of_reach_is_told_apart_and_stale_keys_still_verify() {
    let rsa = Signer::rsa(RSA_A, "rsa-a");
    let keys = Keys::with(&[&rsa]);
    *keys.down.lock().unwrap() = true;
    let (validator, clock) = validator(settings(), &keys);
    let refused = validator.validate(&rsa.sign(&claims(&clock))).unwrap_err();
    assert!(
        matches!(refused, TokenRefused::Keys(KeysError::Fetch { .. })),
        "{refused:?}"
    );
    assert_eq!((refused.status(), refused.error_code()), (503, None));

    *keys.down.lock().unwrap() = false;
    clock.advance(KeyCache::MIN_REFRESH);
    assert!(validator.validate(&rsa.sign(&claims(&clock))).is_ok());
    *keys.down.lock().unwrap() = true;
    clock.advance(KeyCache::MAX_AGE);
    assert!(
        validator.validate(&rsa.sign(&claims(&clock))).is_ok(),
        "old keys verify while the issuer is away"
    );
    assert_eq!(
        keys.fetches(),
        3,
        "the stale keys were fetched again (and failed)"
    );
}

/// A key source whose fetches hang until the test opens it, as an issuer that
/// accepts connections and never answers.
#[derive(Clone, Default)]
struct Hanging {
    keys: Keys,
    open: Arc<(Mutex<bool>, std::sync::Condvar)>,
    entered: Arc<AtomicUsize>,
}

impl KeySource for Hanging {
    fn fetch(&self) -> Result<JwkSet, KeysError> {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let (open, changed) = &*self.open;
        let mut open = open.lock().unwrap();
        while !*open {
            open = changed.wait(open).unwrap();
        }
        drop(open);
        self.keys.fetch()
    }
}

impl Hanging {
    fn release(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }
}

#[test]
fn a_hanging_issuer_holds_one_request_and_the_others_are_refused_at_once() {
    let rsa = Signer::rsa(RSA_A, "rsa-a");
    let hanging = Hanging {
        keys: Keys::with(&[&rsa]),
        ..Hanging::default()
    };
    let clock = ManualClock::default();
    let validator = Arc::new(Validator::new(
        settings(),
        Box::new(hanging.clone()),
        Arc::new(clock.clone()),
    ));
    let first = {
        let (validator, token) = (Arc::clone(&validator), rsa.sign(&claims(&clock)));
        std::thread::spawn(move || validator.validate(&token))
    };
    let began = std::time::Instant::now();
    while hanging.entered.load(Ordering::SeqCst) == 0 {
        assert!(began.elapsed() < Duration::from_secs(10), "no fetch began");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Tokens with made-up key ids while the issuer hangs: each is answered at once,
    // not after the fetch (which held the cache's lock all along, once).
    let (answers, answered) = std::sync::mpsc::channel();
    for kid in ["made-up-1", "made-up-2", "made-up-3"] {
        let (validator, token) = (
            Arc::clone(&validator),
            rsa.sign_as(Some(kid), &claims(&clock)),
        );
        let answers = answers.clone();
        std::thread::spawn(move || answers.send(validator.validate(&token)));
    }
    for _ in 0..3 {
        let refused = answered.recv_timeout(Duration::from_secs(5));
        if refused.is_err() {
            hanging.release();
            panic!("a token waited for the hanging issuer's fetch");
        }
        let refused = refused.unwrap().unwrap_err();
        assert_eq!(refused, TokenRefused::Keys(KeysError::Busy));
        assert_eq!(refused.status(), 503);
    }
    assert_eq!(
        hanging.entered.load(Ordering::SeqCst),
        1,
        "one fetch at a time"
    );
    hanging.release();
    let grant = first.join().unwrap().unwrap();
    assert_eq!(grant.principal, "oauth:user-42");
    assert_eq!(hanging.keys.fetches(), 1);
}

#[test]
fn a_refusal_for_want_of_keys_tells_the_client_nothing_of_where_they_are() {
    let refused = TokenRefused::Keys(KeysError::Fetch {
        url: "http://10.1.2.3:8443/internal/jwks".into(),
        reason: "connection refused".into(),
    });
    let told = refused.to_string();
    assert!(
        !told.contains("10.1.2.3") && !told.contains("jwks"),
        "{told}"
    );
    assert_eq!(refused.status(), 503);
}

#[test]
fn a_token_without_a_kid_uses_the_only_key_and_is_refused_among_several() {
    let rsa = Signer::rsa(RSA_A, "rsa-a");
    let keys = Keys::with(&[&rsa]);
    let (validator, clock) = validator(settings(), &keys);
    assert!(
        validator
            .validate(&rsa.sign_as(None, &claims(&clock)))
            .is_ok()
    );
    keys.set
        .lock()
        .unwrap()
        .push(Signer::ec(EC_A, "ec-a").jwk());
    clock.advance(KeyCache::MAX_AGE);
    assert_eq!(
        validator
            .validate(&rsa.sign_as(None, &claims(&clock)))
            .unwrap_err(),
        TokenRefused::UnknownKey(None)
    );
}

#[test]
fn the_metadata_and_the_challenge_name_the_resource_and_its_authorization_server() {
    let keys = Keys::default();
    let (validator, _) = validator(settings(), &keys);
    let url = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";
    assert_eq!(validator.metadata_url(), url);
    assert_eq!(
        validator.challenge(None),
        format!("Bearer resource_metadata=\"{url}\", scope=\"mcp:tools\"")
    );
    let challenge = validator.challenge(Some(&TokenRefused::Signature));
    assert!(
        challenge.starts_with(&format!(
            "Bearer resource_metadata=\"{url}\", error=\"invalid_token\", error_description=\""
        )),
        "{challenge}"
    );
    let scope = validator.challenge(Some(&TokenRefused::InsufficientScope {
        missing: vec!["mcp:tools".into()],
    }));
    assert!(
        scope.contains("error=\"insufficient_scope\"") && scope.ends_with("scope=\"mcp:tools\""),
        "{scope}"
    );
    let doc = protected_resource_metadata(validator.settings());
    assert_eq!(doc["resource"], RESOURCE);
    assert_eq!(doc["authorization_servers"], json!([ISSUER]));
    assert_eq!(doc["scopes_supported"], json!(["mcp:tools"]));
    let s = validator.settings();
    assert!(is_metadata_path(METADATA_PATH, s));
    assert!(is_metadata_path(
        "/.well-known/oauth-protected-resource/mcp",
        s
    ));
    assert!(!is_metadata_path(
        "/.well-known/oauth-protected-resource/other",
        s
    ));
    assert!(!is_metadata_path("/mcp", s));
}

#[test]
fn settings_that_cannot_work_are_named_and_metadata_urls_follow_the_rfcs() {
    assert_eq!(settings().problem(), None);
    let bad = OAuthSettings::new("auth.example.com", RESOURCE);
    assert!(bad.problem().unwrap().contains("the issuer"));
    let bad = OAuthSettings::new(ISSUER, "/mcp");
    assert!(bad.problem().unwrap().contains("the resource"));
    assert_eq!(
        metadata_urls(ISSUER),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant",
            "https://auth.example.com/tenant/.well-known/openid-configuration",
        ]
    );
    assert_eq!(
        metadata_urls("https://auth.example.com/"),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com/.well-known/openid-configuration",
        ]
    );
}
