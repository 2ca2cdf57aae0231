//! justonce — a WebAssembly tool host that makes every retry of an agent's tool call safe.
//!
//! Tools are WebAssembly components (wasm32-wasip2) built against the `justonce-guest`
//! SDK. They reach the world only through the guarded `effects` import: the host gives
//! every effect an idempotency key derived once from the invocation, journals it in
//! SQLite before the provider runs, retries with the same key and replays the first
//! outcome to every retry.
//!
//! ```no_run
//! use justonce::{CallRequest, Host};
//!
//! # fn main() -> anyhow::Result<()> {
//! let host = Host::builder()
//!     .database(".justonce/state.db")
//!     .example_tools()
//!     .build()?;
//! let request = CallRequest::new("send_receipt", r#"{"orders":[{"order_id":4417,"email":"ada@example.com","amount_cents":1299}]}"#)
//!     .conversation("conv-1");
//! let first = host.call(&request)?;
//! let retry = host.call(&request)?;
//! assert_eq!(first.key, retry.key);
//! assert!(retry.replayed);
//! # Ok(())
//! # }
//! ```

mod ask;
mod ask_person;
mod auth;
mod builder;
mod call;
mod cli;
mod clock;
mod config;
mod console;
mod delivery;
mod determinism;
mod error;
mod examples;
mod fault;
mod guard;
mod host;
mod http;
mod jcs;
mod journal;
mod keys;
mod maintenance;
mod mcp;
mod metrics;
mod mutants;
mod normalize;
mod outcome;
mod probe;
mod provider;
mod providers;
mod readiness;
pub mod registry;
mod replay;
mod retention;
mod retry;
mod runtime;
mod serving;
mod sim;
mod sweep;
mod trust;
pub mod upstream;
mod upstream_switch;

#[cfg(test)]
mod layering_tests;
#[cfg(test)]
mod test_log;

pub use ask::{
    AskContext, Asked, Asker, Question, StateCheck, StateKeys, check_request_state, request_state,
    with_asker,
};
pub use builder::{HostBuilder, Reload};
pub use call::{CallRequest, CallResponse, DEFAULT_SCOPE, principal_scope};
pub use clock::{Clock, ManualClock, SystemClock, rfc3339};
pub use config::{Config, McpSettings, OAuthConfig, SweepSettings};
pub use error::{EndsBy, Error, LoadFault};
pub use guard::HandOver;
pub use host::Host;
pub use http::{HttpConfig, Service, StatusRequest};
pub use journal::{
    Action, BadHostName, CallStory, DecidedBy, Durability, GcReport, Holder, HostIdentity,
    JournalEffect, JournalEntry, JournalMark, JournalOperation, JournalStats, LeaseStatus,
    Operated, Operator, Resolution, ScheduledGc, Turn, UnresolvedEffect,
};
pub use keys::{EffectKey, Fingerprint, InvocationKey};
pub use outcome::Outcome;
pub use probe::ProbeAnswer;
pub use provider::{
    EarlierAttempt, EffectRequest, Probed, Provider, ProviderClass, ProviderError, ReadRequest,
};
pub use readiness::NotReady;
pub use retention::{Retention, ToolWindows, Unscoped};
pub use retry::RetryPolicy;
pub use runtime::{DirSwap, Limits, LoadedTool, RefusedTool, Runtime, SwapReport};
pub use sweep::{ScheduledSweep, SweepReport};

/// The `justonce` command line. Only the binary calls it.
#[doc(hidden)]
pub fn main_cli() -> std::process::ExitCode {
    cli::main()
}

/// What the integration tests, the benchmark and the binary reach that is not part
/// of the embedding surface. Not covered by any compatibility promise.
#[doc(hidden)]
pub mod __private {
    pub use crate::auth::oauth;
    pub use crate::auth::tokens;
    pub use crate::console::{Console, DEFAULT_TTL_MS as CONSOLE_SESSION_TTL_MS};
    pub use crate::delivery::{Deliverer, DeliveryOutcome, DeliveryPolicy};
    pub use crate::examples::{ALL as EXAMPLE_TOOLS, SEND_RECEIPT};
    pub use crate::fault::{ENV as FAULT_ENV, FaultPoint};
    pub use crate::http::HttpConfig;
    pub use crate::http::local_api::{Behaviour, LocalApi};
    pub use crate::journal::CURRENT_VERSION;
    /// The schemas of earlier releases, for the tests of rolling upgrades.
    pub mod schemas {
        pub use crate::journal::postgres::schema::{
            CURRENT_VERSION as POSTGRES_CURRENT, PREVIOUS_RELEASE as POSTGRES_PREVIOUS,
            migrate_to as postgres_migrate_to,
        };
        pub use crate::journal::sqlite::schema::{
            CURRENT_VERSION as SQLITE_CURRENT, PREVIOUS_RELEASE as SQLITE_PREVIOUS,
            migrate_to as sqlite_migrate_to,
        };
    }
    pub use crate::journal::postgres::testing as postgres_testing;
    pub use crate::keys::effect_key;
    pub use crate::maintenance::{JournalMarks, Maintenance};
    pub use crate::mcp::http::TOO_MANY_CALLS;
    pub use crate::mcp::{
        Catalog, HttpOptions, LIST_CHANGED, MAX_QUEUED_CALLS, Server, ServerConfig, Shutdown,
        http_server,
    };
    pub use crate::mutants::Mutant;
    pub use crate::providers::{
        InjectedFault, KvProvider, MailProvider, OutboxMessage, OutboxProvider,
    };
    pub use crate::registry::testing::TestRegistry;
    pub use crate::runtime::CONCURRENT_CALLS;
    pub use crate::runtime::CacheStats;
    pub use crate::runtime::log_listener::{GuestNote, LogLevel, with_log_listener};
    pub use crate::serving::admission::{Admission, Permit};
    pub use crate::serving::{
        HttpServer, METRICS_PATH, MetricsRunning, MetricsServer, OAuth, PlainRequest,
        PlainResponse, Routes, Running, ServerOptions,
    };
    pub use crate::sim::{FaultKind, JournalKind, Options, Report, StoreError, run};
}
