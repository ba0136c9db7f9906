//! One module per subcommand. Each returns the exit status or a user-facing error.

pub mod audit;
pub mod ci;
pub mod diff;
pub mod doctor;
pub mod import;
pub mod lock;
pub mod proxy;
pub mod remove;
pub mod sandbox;
pub mod shell;
pub mod show;
pub mod sign;
pub mod taint;
pub mod verify;

use std::time::Duration;

pub use crate::launch::{entry, launch, launch_for, pin_launch, server_error, unknown_server};
use crate::mcp::client::Options;
use crate::mcp::framing::DEFAULT_MAX_MESSAGE;

/// Request options from `--timeout-secs`, showing progress through `progress` if given.
pub fn options(timeout_secs: u64, progress: Option<crate::progress::Reporter>) -> Options {
    Options {
        timeout: Duration::from_secs(timeout_secs.max(1)),
        max_message: DEFAULT_MAX_MESSAGE,
        progress,
    }
}
