//! Test guest: the oracle of the invocation key (tests/tests/oracle.rs). Its
//! arguments use every shape serde and schemars give Rust tools (nested structs,
//! `Option`, both kinds of `#[serde(default)]`, the four enum representations with
//! defaulted fields in their variants, `Option<Enum>`, enums in a `Vec` and a
//! `BTreeMap`, `u64`, `i64`, `f64`, `String`), and it returns them re-serialized:
//! its own parsed view of the call, which two argument objects share exactly when
//! they are one call.

use std::collections::BTreeMap;

use justonce_guest::{Tool, ToolError, export_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Every shape at once.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Args {
    /// An id that may be past 2^53.
    id: u64,
    /// A signed amount, to `i64::MIN`.
    delta: i64,
    /// A ratio.
    ratio: f64,
    /// A name.
    name: String,
    /// A note, or none.
    note: Option<String>,
    /// A limit, 0 when left out.
    #[serde(default)]
    limit: u64,
    /// An offset, -1 when left out.
    #[serde(default = "minus_one")]
    offset: i64,
    /// A currency, EUR when left out.
    #[serde(default = "eur")]
    currency: String,
    /// A nested struct.
    address: Address,
    /// An optional nested struct.
    shipping: Option<Address>,
    /// An externally tagged enum.
    pay: Pay,
    /// An internally tagged enum.
    action: Action,
    /// An adjacently tagged enum.
    step: Step,
    /// An untagged enum.
    shape: Shape,
    /// An optional enum.
    next: Option<Action>,
    /// Enums in an array.
    #[serde(default)]
    pays: Vec<Pay>,
    /// Enums in a map.
    #[serde(default)]
    steps: BTreeMap<String, Step>,
}

fn minus_one() -> i64 {
    -1
}

fn eur() -> String {
    "EUR".into()
}

fn visa() -> String {
    "visa".into()
}

fn now() -> String {
    "now".into()
}

fn five() -> u64 {
    5
}

fn red() -> String {
    "red".into()
}

/// A postal address.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Address {
    /// The street.
    street: String,
    /// The unit, none when left out.
    #[serde(default)]
    unit: Option<String>,
    /// The postal code, or none.
    zip: Option<u64>,
}

/// Externally tagged: `"Voucher"`, `{"Cash": 5}`, `{"Card": {...}}`.
#[derive(Deserialize, Serialize, JsonSchema)]
enum Pay {
    /// A card.
    Card {
        /// The last four digits.
        last4: String,
        /// The network, visa when left out.
        #[serde(default = "visa")]
        network: String,
    },
    /// Cash, in cents.
    Cash(u64),
    /// A voucher.
    Voucher,
}

/// Internally tagged by `kind`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind")]
enum Action {
    /// Cancel.
    Cancel {
        /// When, "now" when left out.
        #[serde(default = "now")]
        at: String,
    },
    /// Ship.
    Ship {
        /// The carrier.
        carrier: String,
        /// Express, false when left out.
        #[serde(default)]
        express: bool,
        /// A tracking number, or none.
        tracking: Option<String>,
    },
    /// Hold.
    Hold,
}

/// Adjacently tagged by `t` with its content in `c`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(tag = "t", content = "c")]
enum Step {
    /// Wait.
    Wait {
        /// Seconds, 5 when left out.
        #[serde(default = "five")]
        secs: u64,
    },
    /// Say something.
    Say(String),
    /// Count by this much.
    Count(i64),
    /// Stop.
    Stop,
}

/// Untagged: the first variant that parses.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
enum Shape {
    /// A point.
    Point(Point),
    /// A named weight.
    Named(Named),
    /// A labeled colour: the same `label` as `Named`.
    Labeled(Labeled),
    /// A bare number.
    Raw(u64),
    /// A bare string.
    Text(String),
}

/// A point.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Point {
    /// x.
    x: f64,
    /// y.
    y: f64,
}

/// A label with a weight.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Named {
    /// The label.
    label: String,
    /// The weight, 0 when left out.
    #[serde(default)]
    weight: u32,
}

/// A label with a colour.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Labeled {
    /// The label.
    label: String,
    /// The colour, red when left out.
    #[serde(default = "red")]
    color: String,
}

struct ParsedEcho;

impl Tool for ParsedEcho {
    type Args = Args;
    type Output = Args;
    const NAME: &'static str = "parsed_echo";
    const DESCRIPTION: &'static str = "Returns its arguments as it parsed them.";

    fn call(args: Args) -> Result<Args, ToolError> {
        Ok(args)
    }
}

export_tool!(ParsedEcho);
