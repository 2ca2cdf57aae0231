//! justonce's integration tests: one binary, real components end to end.

mod support;

mod bad_input;
mod cli;
mod config_file;
mod contract;
mod loading;
mod retry;
mod sandbox;
