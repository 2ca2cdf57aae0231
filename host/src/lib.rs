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

pub mod cli;
pub mod clock;
pub mod config;
pub mod delivery;
pub mod determinism;
pub mod error;
pub mod examples;
pub mod fault;
pub mod guard;
pub mod host;
pub mod http;
pub mod jcs;
pub mod keys;
pub mod mcp;
pub mod outcome;
pub mod provider;
pub mod providers;
pub mod replay;
pub mod retry;
pub mod runtime;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::Config;
pub use error::Error;
pub use host::{CallRequest, CallResponse, Host, HostBuilder};
pub use keys::{EffectKey, Fingerprint, InvocationKey};
pub use outcome::Outcome;
pub use provider::{EffectRequest, Provider, ProviderClass, ProviderError, ReadRequest};
pub use retry::RetryPolicy;
