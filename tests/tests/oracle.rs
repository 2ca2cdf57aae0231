//! The oracle of the invocation key (issue 21): two argument objects are one call
//! exactly when the tool's own parsed view of them is equal.
//!
//! The guest `parsed_echo` returns its arguments as serde parsed them (and
//! `lang::oracle` does the same through a Python and a JavaScript tool). A property
//! test generates a value of its arguments, two random *spellings* of it (defaults
//! written out or left out, `null` or absence for a `None`, key order, `1.0`, `1e2`
//! and `1E+0` for integers, exponents for floats, `-0`, `\u` escapes in strings and
//! property names, whitespace, big integers near 2^53, `u64::MAX` and `i64::MIN`),
//! and for the second call either the same value, a neighbouring one (integers one
//! off) or a different one. For each spelling it asks the host for the key
//! (`Host::key_for`, what `justonce key` prints), calls the tool through the host (a
//! fresh conversation per call, so nothing replays) and outside it
//! (`Runtime::call_unguarded`, the tool's view of the text exactly as sent), and
//! checks ([`Broke`]):
//!
//! - **delivered**: what the tool parsed through the host is what it parses from the
//!   text that was sent (no number rounded on the way), whenever it parses that text;
//! - **one key per view**: the two keys are equal iff the two views through the host
//!   are equal;
//! - **refusals**: the host refuses a spelling the tool parses only where an untagged
//!   enum makes the branch uncertain (the reason names its path, `/shape`), or for an
//!   integer literal past 64 bits that no double holds exactly (`1797…000` padded
//!   with zeros: a float tool reads the nearest double, an integer tool the digits,
//!   and one key cannot be right for both); those
//!   are counted and printed.
//!
//! A failure prints the case shrunk (proptest), then each spelling choice set back
//! to the plain one where the failure stays, so the spellings left differ only where
//! it matters. `JUSTONCE_ORACLE_CASES` sets the number of cases (default 256 for
//! `parsed_echo`, 48 for the slower Python and JavaScript tools), for soaks;
//! `JUSTONCE_ORACLE_SURVEY=1` runs them all without stopping and prints how many
//! cases broke each check, then a shrunk example of each.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use justonce::{CallRequest, Error, Host, InvocationKey, Limits, ManualClock, Outcome, Runtime};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRng, TestRunner};
use serde_json::Value;

/// Cases per `cargo test` for a Rust tool unless `JUSTONCE_ORACLE_CASES` says
/// otherwise.
const DEFAULT_CASES: u32 = 256;

/// A tool the oracle checks: the runtime that loaded it and a host on that runtime.
pub(crate) struct Target {
    pub tool: &'static str,
    pub runtime: Arc<Runtime>,
    pub host: Host,
    /// Where the host may refuse a spelling as an uncertain branch (the JSON pointer
    /// of an untagged enum, which its refusal names).
    pub uncertain: Option<&'static str>,
    /// Cases per `cargo test` unless `JUSTONCE_ORACLE_CASES` says otherwise.
    pub cases: u32,
    /// How many smaller cases proptest tries when one fails.
    pub shrink_iters: u32,
    /// Spellings refused that way.
    pub refusals: AtomicUsize,
}

impl Target {
    /// `tool` from `runtime`, under a host on a manual clock.
    pub fn new(tool: &'static str, runtime: Arc<Runtime>, uncertain: Option<&'static str>) -> Self {
        let host = Host::builder()
            .runtime(runtime.clone())
            .limits(runtime.limits().clone())
            .clock(Arc::new(ManualClock::default()))
            .build()
            .expect("host");
        Self {
            tool,
            runtime,
            host,
            uncertain,
            cases: DEFAULT_CASES,
            shrink_iters: 2000,
            refusals: AtomicUsize::new(0),
        }
    }
}

/// `parsed_echo`, compiled once for the test binary.
static PARSED_ECHO: LazyLock<Target> = LazyLock::new(|| {
    let mut runtime = Runtime::new(Limits::default()).expect("runtime");
    runtime
        .load_file(Path::new(justonce_tests::guests::PARSED_ECHO_COMPONENT))
        .expect("parsed_echo loads");
    Target::new("parsed_echo", Arc::new(runtime), Some("/shape"))
});

/// Makes each call's conversation new, so no call replays an earlier one.
static CALLS: AtomicU64 = AtomicU64::new(0);

// ---------------------------------------------------------------------------------
// A value of the arguments, with what a spelling may leave out.

/// A JSON value of the arguments as the tool means it.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// Properties in their canonical order.
    Obj(Vec<Prop>),
    Arr(Vec<Node>),
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Null,
}

/// One property; `omittable` when leaving it out means the same (it holds its
/// default, or it is a `None`, written `null`).
#[derive(Clone, Debug)]
pub(crate) struct Prop {
    pub key: String,
    pub value: Node,
    pub omittable: bool,
}

pub(crate) fn prop(key: &str, value: Node) -> Prop {
    Prop {
        key: key.to_owned(),
        value,
        omittable: false,
    }
}

/// A field with a serde default: omittable when it holds `default`.
pub(crate) fn defaulted<T: PartialEq>(
    key: &str,
    value: T,
    default: T,
    node: fn(T) -> Node,
) -> Prop {
    let omittable = value == default;
    Prop {
        omittable,
        ..prop(key, node(value))
    }
}

/// An `Option` field: `None` is `null`, and may be left out.
pub(crate) fn optional(key: &str, value: Option<Node>) -> Prop {
    Prop {
        omittable: value.is_none(),
        ..prop(key, value.unwrap_or(Node::Null))
    }
}

pub(crate) fn obj(props: Vec<Prop>) -> Node {
    Node::Obj(props)
}

pub(crate) fn string(s: String) -> Node {
    Node::Str(s)
}

// ---------------------------------------------------------------------------------
// Strategies, one per type of the guest's arguments (tests/guests/parsed_echo).

/// Short strings over an alphabet that needs escapes, leaves ASCII and the BMP, and
/// is small enough that two random strings are often equal.
pub(crate) fn text() -> impl Strategy<Value = String> + Clone {
    let alphabet = vec![
        'a', 'b', ' ', 'é', '€', '😀', '"', '\\', '/', '\n', '\u{1}', '\u{7f}', '\u{2028}',
    ];
    prop::collection::vec(prop::sample::select(alphabet), 0..4)
        .prop_map(|chars| chars.into_iter().collect())
}

pub(crate) fn one_of_or_text(
    words: &'static [&'static str],
) -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        3 => prop::sample::select(words).prop_map(str::to_owned),
        1 => text(),
    ]
}

pub(crate) const TWO_53: u64 = 1 << 53;

pub(crate) fn u64s() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![
        0..1000u64,
        prop::sample::select(vec![100, 1_000_000, 12_345_678_901_234_567_890]),
        TWO_53 - 2..=TWO_53 + 2,
        u64::MAX - 2..=u64::MAX,
        any::<u64>(),
    ]
}

pub(crate) fn i64s() -> impl Strategy<Value = i64> + Clone {
    let two_53 = TWO_53 as i64;
    prop_oneof![
        -1000..1000i64,
        two_53 - 2..=two_53 + 2,
        -two_53 - 2..=-two_53 + 2,
        i64::MIN..=i64::MIN + 2,
        i64::MAX - 2..=i64::MAX,
        any::<i64>(),
    ]
}

pub(crate) fn f64s() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![
        (-100..100i32).prop_map(f64::from),
        (-400..400i32).prop_map(|q| f64::from(q) / 4.0),
        prop::sample::select(vec![
            -0.0,
            0.1,
            1e-7,
            1e21,
            1e22,
            123_456_789.125,
            9_007_199_254_740_992.0,
            1.797_693_134_862_315_7e308,
            5e-324,
        ]),
    ]
}

/// An `Address` (the Rust guest's, and the Python and JS oracle tools'): `unit` and
/// `zip` optional.
pub(crate) fn address() -> impl Strategy<Value = Node> + Clone {
    (text(), prop::option::of(text()), prop::option::of(u64s())).prop_map(|(street, unit, zip)| {
        obj(vec![
            prop("street", string(street)),
            optional("unit", unit.map(string)),
            optional("zip", zip.map(Node::U64)),
        ])
    })
}

/// `Pay`, externally tagged.
fn pay() -> impl Strategy<Value = Node> + Clone {
    prop_oneof![
        (text(), one_of_or_text(&["visa", "amex"])).prop_map(|(last4, network)| {
            let card = obj(vec![
                prop("last4", string(last4)),
                defaulted("network", network, "visa".into(), string),
            ]);
            obj(vec![prop("Card", card)])
        }),
        u64s().prop_map(|cents| obj(vec![prop("Cash", Node::U64(cents))])),
        Just(Node::Str("Voucher".into())),
    ]
}

/// `Action`, internally tagged by `kind`.
fn action() -> impl Strategy<Value = Node> + Clone {
    let kind = |k: &str| prop("kind", string(k.into()));
    prop_oneof![
        one_of_or_text(&["now", "later"]).prop_map(move |at| obj(vec![
            kind("Cancel"),
            defaulted("at", at, "now".into(), string),
        ])),
        (
            one_of_or_text(&["ups", "dhl"]),
            any::<bool>(),
            prop::option::of(text())
        )
            .prop_map(move |(carrier, express, tracking)| obj(vec![
                kind("Ship"),
                prop("carrier", string(carrier)),
                defaulted("express", express, false, Node::Bool),
                optional("tracking", tracking.map(string)),
            ])),
        Just(obj(vec![kind("Hold")])),
    ]
}

/// `Step`, adjacently tagged by `t` with content `c`.
fn step() -> impl Strategy<Value = Node> + Clone {
    let tagged = |t: &str, c: Option<Node>| {
        let mut props = vec![prop("t", string(t.into()))];
        props.extend(c.map(|c| prop("c", c)));
        obj(props)
    };
    prop_oneof![
        prop_oneof![Just(5u64), u64s()].prop_map(move |secs| tagged(
            "Wait",
            Some(obj(vec![defaulted("secs", secs, 5, Node::U64)]))
        )),
        text().prop_map(move |s| tagged("Say", Some(string(s)))),
        i64s().prop_map(move |n| tagged("Count", Some(Node::I64(n)))),
        Just(tagged("Stop", None)),
    ]
}

/// `Shape`, untagged: `Named` and `Labeled` share `label`.
fn shape() -> impl Strategy<Value = Node> + Clone {
    prop_oneof![
        (f64s(), f64s())
            .prop_map(|(x, y)| obj(vec![prop("x", Node::F64(x)), prop("y", Node::F64(y))])),
        (text(), prop::sample::select(vec![0u32, 1, 7, u32::MAX])).prop_map(|(label, weight)| {
            obj(vec![
                prop("label", string(label)),
                defaulted("weight", u64::from(weight), 0, Node::U64),
            ])
        }),
        (text(), one_of_or_text(&["red", "blue"])).prop_map(|(label, color)| {
            obj(vec![
                prop("label", string(label)),
                defaulted("color", color, "red".into(), string),
            ])
        }),
        u64s().prop_map(Node::U64),
        text().prop_map(Node::Str),
    ]
}

/// The scalar fields of `Args`.
fn scalars() -> impl Strategy<Value = Vec<Prop>> {
    (
        u64s(),
        i64s(),
        f64s(),
        text(),
        prop::option::of(text()),
        prop_oneof![Just(0u64), u64s()],
        prop_oneof![Just(-1i64), i64s()],
        one_of_or_text(&["EUR", "USD"]),
    )
        .prop_map(|(id, delta, ratio, name, note, limit, offset, currency)| {
            vec![
                prop("id", Node::U64(id)),
                prop("delta", Node::I64(delta)),
                prop("ratio", Node::F64(ratio)),
                prop("name", string(name)),
                optional("note", note.map(string)),
                defaulted("limit", limit, 0, Node::U64),
                defaulted("offset", offset, -1, Node::I64),
                defaulted("currency", currency, "EUR".into(), string),
            ]
        })
}

/// The structured fields of `Args`.
fn structured() -> impl Strategy<Value = Vec<Prop>> {
    (
        address(),
        prop::option::of(address()),
        pay(),
        action(),
        step(),
        shape(),
        prop::option::of(action()),
        prop::collection::vec(pay(), 0..3),
        prop::collection::btree_map(text(), step(), 0..3),
    )
        .prop_map(
            |(address, shipping, pay, action, step, shape, next, pays, steps)| {
                let steps: BTreeMap<String, Node> = steps;
                vec![
                    prop("address", address),
                    optional("shipping", shipping),
                    prop("pay", pay),
                    prop("action", action),
                    prop("step", step),
                    prop("shape", shape),
                    optional("next", next),
                    Prop {
                        omittable: pays.is_empty(),
                        ..prop("pays", Node::Arr(pays))
                    },
                    Prop {
                        omittable: steps.is_empty(),
                        ..prop(
                            "steps",
                            obj(steps.into_iter().map(|(k, v)| prop(&k, v)).collect()),
                        )
                    },
                ]
            },
        )
}

/// A value of `Args`.
fn args() -> impl Strategy<Value = Node> {
    (scalars(), structured()).prop_map(|(mut props, more)| {
        props.extend(more);
        Node::Obj(props)
    })
}

// ---------------------------------------------------------------------------------
// Spellings: a list of choices, read one at a time; 0 (and running out) is the
// plain spelling, so shrinking the list shrinks toward it. Each place reads the same
// number of choices whatever they are, so zeroing one changes only its own place.

struct Speller<'c> {
    choices: &'c [u8],
    at: usize,
    out: String,
}

impl Speller<'_> {
    fn choose(&mut self, n: u8) -> u8 {
        let choice = self.choices.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        choice % n
    }

    fn space(&mut self) {
        match self.choose(6) {
            1 => self.out.push(' '),
            2 => self.out.push_str("\n  "),
            _ => {}
        }
    }

    fn node(&mut self, node: &Node) {
        self.space();
        match node {
            Node::Obj(props) => self.object(props),
            Node::Arr(items) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.node(item);
                }
                self.space();
                self.out.push(']');
            }
            Node::Str(s) => self.string(s),
            Node::U64(v) => self.unsigned(*v, ""),
            Node::I64(v) => {
                let minus_zero = self.choose(4) == 1;
                if *v < 0 {
                    self.unsigned(v.unsigned_abs(), "-");
                } else if *v == 0 && minus_zero {
                    self.out.push_str("-0");
                } else {
                    self.unsigned(v.unsigned_abs(), "");
                }
            }
            Node::F64(x) => {
                let spelled = match self.choose(4) {
                    1 => format!("{x:?}"),
                    2 => format!("{x:e}"),
                    3 => format!("{x:E}"),
                    _ => format!("{x}"),
                };
                self.out.push_str(&spelled);
            }
            Node::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Node::Null => self.out.push_str("null"),
        }
        self.space();
    }

    fn object(&mut self, props: &[Prop]) {
        let mut order: Vec<&Prop> = props.iter().collect();
        let (how, by) = (self.choose(3), usize::from(self.choose(u8::MAX)));
        match how {
            1 => order.reverse(),
            2 if !order.is_empty() => {
                let by = by % order.len();
                order.rotate_left(by);
            }
            _ => {}
        }
        self.out.push('{');
        let mut first = true;
        for p in order {
            if self.choose(2) == 1 && p.omittable {
                continue;
            }
            if !first {
                self.out.push(',');
            }
            first = false;
            self.space();
            self.string(&p.key);
            self.space();
            self.out.push(':');
            self.node(&p.value);
        }
        self.space();
        self.out.push('}');
    }

    /// An integer `sign``digits`: plain, or where a double holds it exactly, as
    /// `N.0`, `Ne0`, `N/10^k e k` or `NE+0`.
    fn unsigned(&mut self, v: u64, sign: &str) {
        self.out.push_str(sign);
        let choice = self.choose(5);
        let choice = if v <= TWO_53 { choice } else { 0 };
        match choice {
            1 => write!(self.out, "{v}.0"),
            2 => write!(self.out, "{v}e0"),
            3 => {
                let (mut mantissa, mut exponent) = (v, 0);
                while mantissa != 0 && mantissa % 10 == 0 {
                    mantissa /= 10;
                    exponent += 1;
                }
                write!(self.out, "{mantissa}e{exponent}")
            }
            4 => write!(self.out, "{v}E+0"),
            _ => write!(self.out, "{v}"),
        }
        .expect("writing to a String");
    }

    /// A JSON string: minimal escapes, every non-ASCII character escaped, or a
    /// choice per character.
    fn string(&mut self, s: &str) {
        let mode = self.choose(3);
        self.out.push('"');
        for c in s.chars() {
            let this_one = self.choose(2) == 1;
            let escape = match mode {
                0 => false,
                1 => !c.is_ascii() || c.is_ascii_control(),
                _ => this_one,
            };
            if escape {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(self.out, "\\u{unit:04x}").expect("writing to a String");
                }
            } else {
                let plain = serde_json::to_string(&c.to_string()).expect("a string serializes");
                self.out.push_str(&plain[1..plain.len() - 1]);
            }
        }
        self.out.push('"');
    }
}

/// `node` spelled by `choices`.
fn spell(node: &Node, choices: &[u8]) -> String {
    let mut speller = Speller {
        choices,
        at: 0,
        out: String::new(),
    };
    speller.node(node);
    speller.out
}

// ---------------------------------------------------------------------------------
// What the host and the tool make of one spelling.

/// One spelling as the host keys it and as the tool sees it.
#[derive(Debug)]
struct Seen {
    text: String,
    /// The key, or the host's refusal.
    key: Result<InvocationKey, String>,
    /// What the tool parsed, through the host (or the tool's error).
    delivered: Result<Value, String>,
    /// What the tool parses from the text as sent, outside the host.
    sent: Result<Value, String>,
}

fn observe(target: &Target, text: String) -> Seen {
    let Target {
        tool: name,
        runtime,
        host,
        ..
    } = target;
    let mut keyed = CallRequest::new(*name, text.clone());
    keyed.conversation = Some("oracle".into());
    let key = host.key_for(&keyed).map_err(|e| refusal(&e));
    let mut call = CallRequest::new(*name, text.clone());
    call.conversation = Some(format!("oracle-{}", CALLS.fetch_add(1, Ordering::Relaxed)));
    let delivered = match host.call(&call) {
        Ok(response) => {
            assert!(!response.replayed, "a fresh conversation never replays");
            match response.outcome {
                Outcome::Success { result, .. } => Ok(result),
                Outcome::ToolError { code, message, .. } => Err(format!("{code}: {message}")),
                Outcome::Trap { reason, message } => panic!("{name} trapped ({reason}): {message}"),
            }
        }
        Err(e) => Err(refusal(&e)),
    };
    let sent = runtime
        .call_unguarded(name, &text)
        .map_err(|e| e.to_string())
        .map(|out| serde_json::from_str(&out).expect("the tool returns JSON"));
    Seen {
        text,
        key,
        delivered,
        sent,
    }
}

/// The host's refusal of a spelling, or a panic for anything else.
fn refusal(e: &Error) -> String {
    match e {
        Error::InvalidArguments { reason, .. } => format!("refused: {reason}"),
        other => panic!("the host failed on a spelling: {other}"),
    }
}

/// Which check a case broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Broke {
    /// The tool parsed something else through the host than from the text sent.
    Delivered,
    /// The host refused a spelling the tool parses, not for an untagged enum.
    Refused,
    /// Equal views under two keys: one call keyed twice.
    TwoKeysOneView,
    /// One key over two views: two calls keyed once.
    OneKeyTwoViews,
}

fn refused(seen: &Seen) -> bool {
    seen.key
        .as_ref()
        .err()
        .or(seen.delivered.as_ref().err())
        .is_some_and(|e| e.starts_with("refused: "))
}

/// Checks one spelling on its own.
fn check_one(target: &Target, seen: &Seen) -> Result<(), Broke> {
    if refused(seen) {
        let reason = seen.key.as_ref().err().or(seen.delivered.as_ref().err());
        let uncertain = target
            .uncertain
            .is_some_and(|path| reason.is_some_and(|r| r.contains(path)));
        // The one other refusal by design: an integer literal past 64 bits that no
        // double holds exactly (a float tool would take the nearest double, an
        // integer tool the digits: no one key is right for both).
        let inexact = reason.is_some_and(|r| r.contains("does not fit in 64 bits"));
        let uncertain = uncertain || inexact;
        if seen.sent.is_ok() && !uncertain {
            return Err(Broke::Refused);
        }
        return Ok(());
    }
    match (&seen.sent, &seen.delivered) {
        (Ok(sent), Ok(delivered)) if sent != delivered => Err(Broke::Delivered),
        (Ok(_), Err(_)) => Err(Broke::Delivered),
        _ => Ok(()),
    }
}

/// The checks a pair of spellings breaks, in [`Broke`]'s order.
fn breaks(target: &Target, a: &Seen, b: &Seen) -> Vec<Broke> {
    let mut broken: Vec<Broke> = [a, b]
        .into_iter()
        .filter_map(|s| check_one(target, s).err())
        .collect();
    if !refused(a) && !refused(b) {
        let same_key = a.key == b.key;
        match (&a.delivered, &b.delivered) {
            (Ok(x), Ok(y)) if x == y && !same_key => broken.push(Broke::TwoKeysOneView),
            (Ok(x), Ok(y)) if x != y && same_key => broken.push(Broke::OneKeyTwoViews),
            (Ok(_), Err(_)) | (Err(_), Ok(_)) if same_key => broken.push(Broke::OneKeyTwoViews),
            _ => {}
        }
    }
    broken.sort();
    broken.dedup();
    broken
}

/// How many of `a` and `b` the host refused as an uncertain untagged branch.
fn ambiguous(target: &Target, a: &Seen, b: &Seen) -> usize {
    [a, b]
        .into_iter()
        .filter(|s| refused(s) && s.sent.is_ok() && check_one(target, s).is_ok())
        .count()
}

fn describe(broke: Broke, a: &Seen, b: &Seen) -> String {
    let side = |name: &str, s: &Seen| {
        let show = |r: &Result<Value, String>| match r {
            Ok(v) => v.to_string(),
            Err(e) => format!("error: {e}"),
        };
        format!(
            "{name}: {}\n   key:       {:?}\n   delivered: {}\n   sent:      {}\n",
            s.text,
            s.key,
            show(&s.delivered),
            show(&s.sent)
        )
    };
    format!("{broke:?}\n{}{}", side("a", a), side("b", b))
}

/// A case: a value, a second value for `b` or none, the [`nudge`]s that make `b`'s
/// value from the first when there is no second, and the two spellings.
type Case = (Node, Option<Node>, Vec<u8>, Vec<u8>, Vec<u8>);

/// Values of a tool's arguments.
pub(crate) type Values = fn() -> BoxedStrategy<Node>;

fn cases(values: Values) -> impl Strategy<Value = Case> {
    let choices = || prop::collection::vec(any::<u8>(), 0..600);
    (
        values(),
        prop::option::weighted(0.2, values()),
        // Mostly the same value respelled; sometimes a neighbour.
        prop_oneof![
            3 => Just(Vec::new()),
            1 => prop::collection::vec(any::<u8>(), 1..40),
        ],
        choices(),
        choices(),
    )
}

/// `node` with some integers one more or one less, by `choices` (one per integer, in
/// order; 0 or none left keeps it): a neighbouring value, which a tool that rounds
/// big integers cannot tell from `node`.
fn nudge(node: &Node, choices: &mut std::slice::Iter<'_, u8>) -> Node {
    let mut by = || choices.next().map_or(0, |c| c % 3);
    match node {
        Node::Obj(props) => Node::Obj(
            props
                .iter()
                .map(|p| {
                    let value = nudge(&p.value, choices);
                    // A default nudged is a value that must be written.
                    let same = format!("{value:?}") == format!("{:?}", p.value);
                    Prop {
                        omittable: p.omittable && same,
                        key: p.key.clone(),
                        value,
                    }
                })
                .collect(),
        ),
        Node::Arr(items) => Node::Arr(items.iter().map(|n| nudge(n, choices)).collect()),
        Node::U64(v) => Node::U64(match by() {
            1 => v.saturating_add(1),
            2 => v.saturating_sub(1),
            _ => *v,
        }),
        Node::I64(v) => Node::I64(match by() {
            1 => v.saturating_add(1),
            2 => v.saturating_sub(1),
            _ => *v,
        }),
        other => other.clone(),
    }
}

fn run_case(target: &Target, (value, other, nudges, choices_a, choices_b): &Case) -> (Seen, Seen) {
    let a = observe(target, spell(value, choices_a));
    let second = other
        .clone()
        .unwrap_or_else(|| nudge(value, &mut nudges.iter()));
    let b = observe(target, spell(&second, choices_b));
    (a, b)
}

/// Shrinks a case that breaks `broke` further than proptest can (dropping a choice
/// shifts the ones after it): sets each choice to the plain spelling where the case
/// still breaks it, so what is left is the difference that matters.
fn minimize(target: &Target, mut case: Case, broke: Broke) -> (Seen, Seen) {
    let still = |case: &Case| {
        let (a, b) = run_case(target, case);
        breaks(target, &a, &b).contains(&broke)
    };
    // As many tries as proptest's shrinking had: a slow tool gets fewer.
    let mut budget = target.shrink_iters;
    for side in [2, 3, 4] {
        for i in 0..choices(&mut case, side).len() {
            if budget == 0 {
                break;
            }
            let kept = std::mem::take(&mut choices(&mut case, side)[i]);
            if kept == 0 {
                continue;
            }
            budget -= 1;
            if !still(&case) {
                choices(&mut case, side)[i] = kept;
            }
        }
    }
    run_case(target, &case)
}

/// The choices of `case` at tuple position `side` (2, 3 or 4).
fn choices(case: &mut Case, side: usize) -> &mut Vec<u8> {
    match side {
        2 => &mut case.2,
        3 => &mut case.3,
        _ => &mut case.4,
    }
}

/// Looks for a case that breaks `target` (any check if `None`) in `count` cases;
/// the one found, shrunk, with the check it breaks.
fn search(
    target: &Target,
    values: Values,
    count: u32,
    looked_for: Option<Broke>,
) -> Option<(Broke, Seen, Seen)> {
    let hit = |a: &Seen, b: &Seen| {
        let broken = breaks(target, a, b);
        match looked_for {
            None => broken.first().copied(),
            Some(t) => broken.contains(&t).then_some(t),
        }
    };
    let result = runner(target, count).run(&cases(values), |case| {
        let (a, b) = run_case(target, &case);
        target
            .refusals
            .fetch_add(ambiguous(target, &a, &b), Ordering::Relaxed);
        match hit(&a, &b) {
            Some(broke) => Err(TestCaseError::fail(format!("{broke:?}"))),
            None => Ok(()),
        }
    });
    match result {
        Ok(()) => None,
        Err(TestError::Fail(_, case)) => {
            let (a, b) = run_case(target, &case);
            let broke = hit(&a, &b).expect("the shrunk case fails");
            let (a, b) = minimize(target, case, broke);
            Some((broke, a, b))
        }
        Err(e) => panic!("{e}"),
    }
}

fn case_count(target: &Target) -> u32 {
    std::env::var("JUSTONCE_ORACLE_CASES")
        .ok()
        .map(|n| n.parse().expect("JUSTONCE_ORACLE_CASES is a number"))
        .unwrap_or(target.cases)
}

fn runner(target: &Target, cases: u32) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: target.shrink_iters,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(Default::default()))
}

#[test]
fn one_key_exactly_when_the_tool_sees_one_value() {
    check_tool(&PARSED_ECHO, || args().boxed());
}

/// Runs the oracle on `target` with arguments from `values`: `JUSTONCE_ORACLE_CASES`
/// cases, or with `JUSTONCE_ORACLE_SURVEY` the survey; panics with a shrunk
/// counterexample.
pub(crate) fn check_tool(target: &'static Target, values: Values) {
    // The strategies nest deeply, and unoptimized their trees need more than a test
    // thread's stack.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || oracle(target, values))
        .expect("a thread")
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
}

fn oracle(target: &Target, values: Values) {
    let count = case_count(target);
    if std::env::var_os("JUSTONCE_ORACLE_SURVEY").is_some() {
        return survey(target, values, count);
    }
    let started = Instant::now();
    let found = search(target, values, count, None);
    println!(
        "oracle of {}: {count} cases in {:.1} s, {} spellings refused as an uncertain untagged branch",
        target.tool,
        started.elapsed().as_secs_f64(),
        target.refusals.load(Ordering::Relaxed)
    );
    if let Some((broke, a, b)) = found {
        panic!(
            "the key and {} disagree (shrunk):\n{}",
            target.tool,
            describe(broke, &a, &b)
        );
    }
}

/// Runs every case without stopping, prints how many broke each check, then a shrunk
/// example of each.
fn survey(target: &Target, values: Values, count: u32) {
    let mut runner = runner(target, count);
    let strategy = cases(values);
    let mut broken: BTreeMap<Broke, usize> = BTreeMap::new();
    let mut refusals = 0;
    let started = Instant::now();
    for _ in 0..count {
        let case = strategy.new_tree(&mut runner).expect("a case").current();
        let (a, b) = run_case(target, &case);
        refusals += ambiguous(target, &a, &b);
        for broke in breaks(target, &a, &b) {
            *broken.entry(broke).or_default() += 1;
        }
    }
    println!(
        "oracle survey of {}: {count} cases in {:.1} s, {refusals} spellings refused as an uncertain untagged branch, broken: {broken:?}",
        target.tool,
        started.elapsed().as_secs_f64()
    );
    for broke in broken.keys() {
        if let Some((broke, a, b)) = search(target, values, count, Some(*broke)) {
            println!("{}", describe(broke, &a, &b));
        }
    }
    assert!(broken.is_empty(), "cases broke the oracle: {broken:?}");
}
