//! mcpsum's integration tests: the real binary against the scriptable fake MCP server
//! (`tests/servers/mcp_fake.py`) and, when installed, real servers from `target/test-deps`.
//!
//! Run: `cargo test -p mcpsum --test it`. Set `MCPSUM_REQUIRE_REAL_SERVERS=1` to make a missing
//! `target/test-deps` a failure instead of a skip (CI does).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test that cannot set up its world should fail loudly, right there"
)]

mod audit;
mod bad_input;
mod cishell;
mod conformance;
mod crash;
#[cfg(target_os = "linux")]
mod egress;
mod era;
mod everyday;
mod golden;
mod hostile;
mod import;
#[cfg(target_os = "linux")]
mod learn;
mod lock;
#[cfg(target_os = "linux")]
mod pin;
mod progress;
mod proxy;
mod real;
mod relock;
mod roundtrip;
#[cfg(target_os = "linux")]
mod sandbox;
mod sign;
mod support;
mod taint;
mod terminal;
mod verify;
