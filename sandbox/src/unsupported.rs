//! Stand-ins for systems without the Linux sandbox: every entry refuses with
//! [`SandboxError::Unsupported`], so a server with a sandbox policy never starts unconfined.

use std::time::Duration;

use crate::{EgressHook, LaunchRequest, Protected, SandboxError, SandboxPlan, SandboxReport};

/// A prepared launch (never built on this system).
#[derive(Debug)]
pub struct Prepared {
    /// The launcher command.
    pub command: std::process::Command,
}

impl Prepared {
    /// The private `${TMP}` (never made here).
    pub fn tmp_dir(&self) -> &std::path::Path {
        std::path::Path::new("")
    }

    /// Always [`SandboxError::Unsupported`].
    pub fn receive_listener(
        &mut self,
        _timeout: Duration,
    ) -> Result<Option<std::net::TcpListener>, SandboxError> {
        Err(SandboxError::Unsupported)
    }
}

/// Does nothing here.
pub fn open_launcher() {}

/// Does nothing here.
pub fn open_launcher_at(_path: &std::path::Path) {}

/// Always [`SandboxError::Unsupported`].
pub fn prepare(_plan: SandboxPlan) -> Result<Prepared, SandboxError> {
    Err(SandboxError::Unsupported)
}

/// Always [`SandboxError::Unsupported`].
pub fn sandbox_test(
    _req: &LaunchRequest,
    _protected: &Protected,
    _egress: Option<EgressHook>,
) -> Result<SandboxReport, SandboxError> {
    Err(SandboxError::Unsupported)
}

/// Always [`SandboxError::Unsupported`].
pub fn sandbox_test_plan(
    _plan: SandboxPlan,
    _protected: &Protected,
    _egress: Option<EgressHook>,
) -> Result<SandboxReport, SandboxError> {
    Err(SandboxError::Unsupported)
}

pub(crate) fn fail() -> ! {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "sandbox setup failed, server not started: {}",
        SandboxError::Unsupported
    );
    std::process::exit(crate::SETUP_FAILED_EXIT)
}
