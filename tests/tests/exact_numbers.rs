//! No number is rounded (DESIGN.md, "Two layers of keys"): ids past 2^53 are two
//! calls with two keys, and each reaches the tool, and the API behind it, with the
//! digits the agent sent.

use justonce::__private::LocalApi;
use justonce::{CallRequest, HttpConfig, Outcome};

use crate::support::process::justonce;
use crate::support::{TestHost, test_host};

const TWO_TO_THE_53_PLUS_ONE: u64 = 9_007_199_254_740_993;

fn refund(order: &str) -> CallRequest {
    CallRequest::new(
        "refund",
        format!(r#"{{"order_id":{order},"amount_cents":1}}"#),
    )
    .conversation("conv-exact")
}

/// A payments API on loopback and a host whose `refund` tool may call it.
fn payments_host() -> (LocalApi, TestHost) {
    let api = LocalApi::start().unwrap();
    let t = test_host(|b| {
        b.http(
            HttpConfig::default()
                .service("payments", api.url())
                .allow("refund", api.url()),
        )
    });
    (api, t)
}

#[test]
fn two_orders_a_double_cannot_tell_apart_are_two_refunds_each_for_its_own_order() {
    let (api, t) = payments_host();

    let first = t.host.call(&refund("9007199254740993")).unwrap();
    let second = t.host.call(&refund("9007199254740992")).unwrap();
    assert!(
        matches!(first.outcome, Outcome::Success { .. }),
        "{first:?}"
    );
    assert!(
        !second.replayed,
        "the second order was answered the first's refund"
    );
    assert_ne!(first.key, second.key);
    let applied = api.applied();
    assert_eq!(applied.len(), 2);
    assert_eq!(
        applied[0].body["order_id"].as_u64(),
        Some(TWO_TO_THE_53_PLUS_ONE)
    );
    assert_eq!(
        applied[1].body["order_id"].as_u64(),
        Some(TWO_TO_THE_53_PLUS_ONE - 1)
    );

    // The same order spelled another way is the same call: replayed, nothing sent.
    let again = t.host.call(&refund("9007199254740993.0")).unwrap();
    assert!(again.replayed);
    assert_eq!(again.key, first.key);
    assert_eq!(again.outcome, first.outcome);
    assert_eq!(api.requests().len(), 2);

    // A u64's largest value reaches the tool (a Rust u64) and the API intact.
    let max = t.host.call(&refund(&u64::MAX.to_string())).unwrap();
    assert!(matches!(max.outcome, Outcome::Success { .. }), "{max:?}");
    assert_eq!(api.applied()[2].body["order_id"].as_u64(), Some(u64::MAX));
}

/// A `u64` id may come as its digits in a string (what a model is told to send where
/// its client parses numbers as doubles): the same call as the number, replayed under
/// its key, and the tool and the API get the number; other digits are another call;
/// digits past the type's range are refused with their exact digits, nothing stored.
#[test]
fn an_id_sent_as_its_digits_is_the_same_call_as_the_number_and_reaches_the_api_exact() {
    let (api, t) = payments_host();
    let as_digits = t.host.call(&refund("\"9007199254740993\"")).unwrap();
    assert!(
        matches!(as_digits.outcome, Outcome::Success { .. }),
        "{as_digits:?}"
    );
    assert!(!as_digits.replayed);
    let applied = api.applied();
    assert_eq!(applied.len(), 1);
    assert_eq!(
        applied[0].body["order_id"].as_u64(),
        Some(TWO_TO_THE_53_PLUS_ONE),
        "the API got the number, exact: {:?}",
        applied[0].body
    );

    // The retry as a number: replayed, the same key, nothing sent again.
    let as_number = t.host.call(&refund("9007199254740993")).unwrap();
    assert!(as_number.replayed);
    assert_eq!(as_number.key, as_digits.key);
    assert_eq!(as_number.outcome, as_digits.outcome);
    assert_eq!(api.requests().len(), 1);

    // The opposite case: the neighbour's digits are another order.
    let neighbour = t.host.call(&refund("\"9007199254740992\"")).unwrap();
    assert!(!neighbour.replayed);
    assert_ne!(neighbour.key, as_digits.key);
    assert_eq!(api.applied().len(), 2);

    // Digits past u64::MAX: refused, the digits named as sent, nothing stored or sent.
    let before = t.host.journal(None, 10).unwrap().len();
    let err = t
        .host
        .call(&refund("\"18446744073709551616\""))
        .unwrap_err();
    match &err {
        justonce::Error::InvalidArguments { reason, .. } => assert!(
            reason.contains("at /order_id:") && reason.contains("18446744073709551616"),
            "{reason}"
        ),
        other => panic!("expected invalid arguments: {other:?}"),
    }
    assert_eq!(t.host.journal(None, 10).unwrap().len(), before);
    assert_eq!(api.requests().len(), 2);
}

/// An id past what the tool's `u64` takes is the author's (or agent's) bad input,
/// refused before anything is stored or sent, not a saved tool error (issue 27, 8).
#[test]
fn an_id_past_u64_max_is_invalid_arguments_and_nothing_is_stored() {
    let (api, t) = payments_host();
    let err = t.host.call(&refund("18446744073709551616")).unwrap_err();
    match &err {
        justonce::Error::InvalidArguments { reason, .. } => {
            assert!(reason.contains("at /order_id:"), "{reason}")
        }
        other => panic!("expected invalid arguments: {other:?}"),
    }
    assert!(
        t.host.journal(None, 10).unwrap().is_empty(),
        "nothing stored"
    );
    assert!(api.requests().is_empty(), "nothing sent");
}

#[test]
fn key_gives_ids_past_2_pow_53_their_own_keys_and_refuses_what_it_would_round() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let key = |order: &str| {
        let args = format!(r#"{{"order_id": {order}, "amount_cents": 1}}"#);
        let out = justonce(&db, &["key", "refund", "--args", &args], None);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, odd, _) = key("9007199254740993");
    assert_eq!(code, Some(0));
    let (_, even, _) = key("9007199254740992");
    assert_ne!(odd, even);
    assert_eq!(key("9.007199254740993e15").1, odd);
    assert_eq!(key("18446744073709551615").0, Some(0));
    // Past 64 bits a double would round it: refused with the literal, nothing keyed.
    let (code, stdout, stderr) = key("18446744073709551617");
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("18446744073709551617"), "{stderr}");
    assert!(stderr.contains("send it as a string"), "{stderr}");
}
