use std::collections::VecDeque;
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;

use super::*;
use crate::clock::ManualClock;
use crate::upstream::test_http::{Received, receive};

const SECRET: &str = "cs_5a8e1f0b2c7d";

/// A token endpoint answering `answers` in turn (the last one again when they run
/// out); what it was sent.
struct Endpoint {
    url: String,
    sent: Arc<Mutex<Vec<Received>>>,
}

impl Endpoint {
    fn start(answers: &[(u16, &str)]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let mut answers: VecDeque<(u16, String)> =
            answers.iter().map(|(s, b)| (*s, (*b).to_owned())).collect();
        let log = Arc::clone(&sent);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let request = receive(&mut BufReader::new(&stream));
                log.lock().unwrap().push(request);
                let (status, body) = if answers.len() > 1 {
                    answers.pop_front().unwrap()
                } else {
                    answers.front().cloned().unwrap()
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self { url, sent }
    }

    fn fetches(&self) -> usize {
        self.sent.lock().unwrap().len()
    }
}

fn grant(url: &str) -> UpstreamOAuth {
    UpstreamOAuth::ClientCredentials(ClientCredentials {
        token_url: url.to_owned(),
        client_id: "justonce-gw".into(),
        client_secret: SECRET.into(),
        scope: Some("tools:call read".into()),
        audience: Some("https://api.example.com".into()),
        auth: ClientAuth::Basic,
    })
}

fn bearer(oauth: &UpstreamOAuth, clock: &ManualClock, credentials: &Credentials) -> Bearer {
    Bearer::new(
        "issues",
        Source::of(oauth, "justonce-gw", SECRET),
        Arc::new(clock.clone()),
        Duration::from_secs(10),
        credentials.clone(),
    )
}

/// Writes `text` to the file at `path` and sets its modification time to `at`.
fn rewrite(path: &std::path::Path, text: &str, at: SystemTime) {
    std::fs::write(path, text).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(at).unwrap();
}

fn token_answer(token: &str, expires_in: u64) -> String {
    format!(r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":{expires_in}}}"#)
}

#[test]
fn a_token_is_fetched_once_while_fresh_and_again_shortly_before_it_expires() {
    let first = token_answer("at_first_11111111", 600);
    let second = token_answer("at_second_2222222", 600);
    let endpoint = Endpoint::start(&[(200, &first), (200, &second)]);
    let clock = ManualClock::new(1_000_000);
    let credentials = Credentials::default();
    let bearer = bearer(&grant(&endpoint.url), &clock, &credentials);
    for _ in 0..5 {
        assert_eq!(bearer.token().unwrap(), "at_first_11111111");
    }
    assert_eq!(endpoint.fetches(), 1);
    // 600 s of life, fetched again a minute before its end.
    clock.advance(Duration::from_secs(539));
    assert_eq!(bearer.token().unwrap(), "at_first_11111111");
    clock.advance(Duration::from_secs(1));
    assert_eq!(bearer.token().unwrap(), "at_second_2222222");
    assert_eq!(endpoint.fetches(), 2);
    // Both learned: stripped wherever they are echoed.
    assert_eq!(
        credentials.text("at_first_11111111 at_second_2222222".into()),
        "[redacted] [redacted]"
    );
}

#[test]
fn the_grant_is_a_form_post_with_the_client_in_basic_and_its_scope_and_audience() {
    let endpoint = Endpoint::start(&[(200, &token_answer("at_form_33333333", 3600))]);
    let clock = ManualClock::new(0);
    bearer(&grant(&endpoint.url), &clock, &Credentials::default())
        .token()
        .unwrap();
    let sent = endpoint.sent.lock().unwrap();
    let request = &sent[0];
    assert!(request.line.starts_with("POST /token "), "{}", request.line);
    assert_eq!(
        request.headers["content-type"],
        "application/x-www-form-urlencoded"
    );
    let basic = request.headers["authorization"]
        .strip_prefix("Basic ")
        .unwrap();
    let pair = base64::engine::general_purpose::STANDARD
        .decode(basic)
        .unwrap();
    assert_eq!(
        String::from_utf8(pair).unwrap(),
        format!("justonce-gw:{SECRET}")
    );
    let form: Vec<(String, String)> = form_urlencoded::parse(&request.body).into_owned().collect();
    assert_eq!(
        form,
        [
            ("grant_type".into(), "client_credentials".into()),
            ("scope".into(), "tools:call read".into()),
            ("audience".into(), "https://api.example.com".into()),
        ]
    );
}

#[test]
fn a_rejected_token_is_fetched_anew_and_an_older_rejection_keeps_the_new_one() {
    let endpoint = Endpoint::start(&[
        (200, &token_answer("at_old_444444444", 3600)),
        (200, &token_answer("at_new_555555555", 3600)),
    ]);
    let clock = ManualClock::new(0);
    let bearer = bearer(&grant(&endpoint.url), &clock, &Credentials::default());
    let old = bearer.token().unwrap();
    bearer.rejected(&old);
    assert_eq!(bearer.token().unwrap(), "at_new_555555555");
    // A request that was sent with the old token is refused later: the new one stays.
    bearer.rejected(&old);
    assert_eq!(bearer.token().unwrap(), "at_new_555555555");
    assert_eq!(endpoint.fetches(), 2);
}

#[test]
fn a_refusing_or_failing_endpoint_is_named_without_the_secret() {
    let refusing = Endpoint::start(&[(
        401,
        r#"{"error":"invalid_client","error_description":"bad secret cs_5a8e1f0b2c7d"}"#,
    )]);
    let clock = ManualClock::new(0);
    let credentials = Credentials::new(&[SECRET.to_owned()]);
    let error = bearer(&grant(&refusing.url), &clock, &credentials)
        .token()
        .unwrap_err();
    let TokenError::Refused(why) = &error else {
        panic!("{error:?}")
    };
    assert!(
        why.starts_with("upstream `issues`: its OAuth token endpoint http://"),
        "{why}"
    );
    assert!(why.contains("HTTP 401: `invalid_client`"), "{why}");
    assert!(!why.contains(SECRET), "{why}");

    let failing = Endpoint::start(&[(503, "{}")]);
    let error = bearer(&grant(&failing.url), &clock, &credentials)
        .token()
        .unwrap_err();
    assert!(
        matches!(&error, TokenError::Unavailable(why) if why.ends_with("answered HTTP 503")),
        "{error:?}"
    );

    let not_bearer = Endpoint::start(&[(
        200,
        r#"{"access_token":"at_mac_66666666","token_type":"mac"}"#,
    )]);
    let error = bearer(&grant(&not_bearer.url), &clock, &credentials)
        .token()
        .unwrap_err();
    assert!(
        matches!(&error, TokenError::Refused(why) if why.contains("type \"mac\"") && !why.contains("66666666")),
        "{error:?}"
    );
}

#[test]
fn a_token_file_is_read_again_when_it_changes_and_after_a_rejection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("issues.token");
    std::fs::write(&path, "tf_first_77777777\n").unwrap();
    let clock = ManualClock::new(0);
    let credentials = Credentials::default();
    let bearer = bearer(
        &UpstreamOAuth::TokenFile(path.clone()),
        &clock,
        &credentials,
    );
    assert_eq!(bearer.token().unwrap(), "tf_first_77777777");

    // Rewritten with its modification time kept: not read again.
    let then = modified(&path).unwrap();
    rewrite(&path, "tf_unseen_8888888\n", then);
    assert_eq!(bearer.token().unwrap(), "tf_first_77777777");
    // Refused by the upstream: read again.
    bearer.rejected("tf_first_77777777");
    assert_eq!(bearer.token().unwrap(), "tf_unseen_8888888");

    // Its modification time changed: read again.
    rewrite(&path, "tf_second_9999999\n", then + Duration::from_secs(5));
    assert_eq!(bearer.token().unwrap(), "tf_second_9999999");
    assert_eq!(
        credentials.text("tf_first_77777777 tf_second_9999999".into()),
        "[redacted] [redacted]"
    );

    rewrite(&path, "  \n", then + Duration::from_secs(9));
    let error = bearer.token().unwrap_err();
    assert!(
        matches!(&error, TokenError::Refused(why) if why.starts_with("upstream `issues`: its OAuth token file ") && why.ends_with(" is empty")),
        "{error:?}"
    );
    std::fs::remove_file(&path).unwrap();
    let error = bearer.token().unwrap_err();
    assert!(
        matches!(&error, TokenError::Refused(why) if why.contains("cannot be read")),
        "{error:?}"
    );
}

#[test]
fn the_refresh_margin_is_a_minute_or_half_a_short_life() {
    assert_eq!(
        refresh_margin(Duration::from_secs(3600)),
        Duration::from_secs(60)
    );
    assert_eq!(
        refresh_margin(Duration::from_secs(30)),
        Duration::from_secs(15)
    );
}

/// The form of the `n`th request the endpoint was sent.
fn form_of(endpoint: &Endpoint, n: usize) -> Vec<(String, String)> {
    let sent = endpoint.sent.lock().unwrap();
    form_urlencoded::parse(&sent[n].body).into_owned().collect()
}

#[test]
fn client_secret_post_sends_the_client_in_the_form_and_no_basic() {
    let endpoint = Endpoint::start(&[(200, &token_answer("at_post_66666666", 3600))]);
    let UpstreamOAuth::ClientCredentials(mut settings) = grant(&endpoint.url) else {
        unreachable!()
    };
    settings.auth = ClientAuth::Post;
    let clock = ManualClock::new(0);
    let token = bearer(
        &UpstreamOAuth::ClientCredentials(settings),
        &clock,
        &Credentials::default(),
    )
    .token()
    .unwrap();
    assert_eq!(token, "at_post_66666666");
    let sent = endpoint.sent.lock().unwrap();
    assert!(
        !sent[0].headers.contains_key("authorization"),
        "{:?}",
        sent[0].headers
    );
    drop(sent);
    assert_eq!(
        form_of(&endpoint, 0),
        [
            ("grant_type".into(), "client_credentials".into()),
            ("scope".into(), "tools:call read".into()),
            ("audience".into(), "https://api.example.com".into()),
            ("client_id".into(), "justonce-gw".into()),
            ("client_secret".into(), SECRET.into()),
        ]
    );
}

fn refreshable(token: &str, refresh: &str, expires_in: u64) -> String {
    format!(
        r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":{expires_in},"refresh_token":"{refresh}"}}"#
    )
}

#[test]
fn a_token_with_a_refresh_token_is_renewed_with_it_before_it_expires_and_the_grant_is_the_fallback()
{
    let endpoint = Endpoint::start(&[
        (
            200,
            &refreshable("at_one_777777777", "rt_one_77777777", 600),
        ),
        // The refresh answers a new token and no refresh token: the old one is kept.
        (200, &token_answer("at_two_888888888", 600)),
        // The kept refresh token is refused: the grant again.
        (400, r#"{"error":"invalid_grant"}"#),
        (200, &token_answer("at_three_99999999", 600)),
    ]);
    let clock = ManualClock::new(0);
    let credentials = Credentials::default();
    let bearer = bearer(&grant(&endpoint.url), &clock, &credentials);
    assert_eq!(bearer.token().unwrap(), "at_one_777777777");
    clock.advance(Duration::from_secs(540));
    assert_eq!(bearer.token().unwrap(), "at_two_888888888");
    assert_eq!(
        form_of(&endpoint, 1),
        [
            ("grant_type".into(), "refresh_token".into()),
            ("refresh_token".into(), "rt_one_77777777".into()),
        ]
    );
    // The refresh carries the client as the grant does.
    assert!(endpoint.sent.lock().unwrap()[1].headers["authorization"].starts_with("Basic "));
    clock.advance(Duration::from_secs(540));
    assert_eq!(bearer.token().unwrap(), "at_three_99999999");
    assert_eq!(form_of(&endpoint, 2)[1].1, "rt_one_77777777");
    assert_eq!(form_of(&endpoint, 3)[0].1, "client_credentials");
    assert_eq!(endpoint.fetches(), 4);
    // The refresh token is a credential too.
    assert_eq!(credentials.text("rt_one_77777777".into()), "[redacted]");
}

/// A refresh token the endpoint does not rotate is still sent after many
/// refreshes: it stays stripped though more than `MAX_LEARNED` access tokens were
/// learned since it was.
#[test]
fn a_refresh_token_kept_across_many_refreshes_stays_stripped() {
    let first = refreshable("at_first_1234567", "rt_kept_66666666", 600);
    let renewed: Vec<String> = (0..20)
        .map(|n| token_answer(&format!("at_renewed_{n:06}"), 600))
        .collect();
    let mut answers = vec![(200, first.as_str())];
    answers.extend(renewed.iter().map(|answer| (200, answer.as_str())));
    let endpoint = Endpoint::start(&answers);
    let clock = ManualClock::new(0);
    let credentials = Credentials::default();
    let bearer = bearer(&grant(&endpoint.url), &clock, &credentials);
    assert_eq!(bearer.token().unwrap(), "at_first_1234567");
    for n in 0..20 {
        clock.advance(Duration::from_secs(540));
        assert_eq!(bearer.token().unwrap(), format!("at_renewed_{n:06}"));
    }
    assert_eq!(form_of(&endpoint, 20)[1].1, "rt_kept_66666666");
    assert_eq!(
        credentials.text("echo rt_kept_66666666".into()),
        "echo [redacted]"
    );
}
