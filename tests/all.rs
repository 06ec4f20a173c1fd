//! End-to-end tests through the public interfaces (HTTP API, CLI, a real
//! host process), compiled as one binary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs
)]

mod suite;
mod support;
