//! justonce's integration tests: one binary, real components end to end.

mod support;

mod cli;
mod concurrency;
mod contract;
mod crash;
mod determinism;
mod lease;
mod resolve;
mod retry;
