//! The bridge between a locked `policy.sandbox` and the `mcpsum-sandbox` launcher crate (I5).
//! Everything here fails closed: a sandbox that cannot be built means the server does not start.

use std::ffi::OsString;
use std::path::Path;

use crate::lockfile::SandboxPolicy;
use crate::mcp::process::Launch;

/// What a launch needs to build a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The locked policy.
    pub policy: SandboxPolicy,
    /// The lockfile the entry came from (a write rule must never cover it).
    pub lockfile: std::path::PathBuf,
}

/// A sandboxed command ready to spawn.
pub struct Prepared {
    /// The launcher command.
    pub command: std::process::Command,
    /// State that lives as long as the server.
    pub running: Running,
}

/// A running sandbox's private state.
pub struct Running {
    _private: (),
}

impl Running {
    /// Finishes set-up once the launcher runs (the egress bridge in allow mode).
    pub async fn after_spawn(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// Builds the sandboxed command for `launch`.
pub fn prepare(
    launch: &Launch,
    _spec: &SandboxSpec,
    _program: &Path,
    _env: Vec<(OsString, OsString)>,
) -> Result<Prepared, String> {
    Err(format!(
        "sandbox: server `{}` has `policy.sandbox`, and this build cannot apply it yet; the server was not started (remove `policy.sandbox` to run it unsandboxed)",
        launch.server
    ))
}

/// Syntax checks of a sandbox policy that hold wherever the file is read (paths absolute,
/// `~/...` or `${TMP}/...`, no `..`). Existence and protected paths are checked when the sandbox
/// is built, on the machine that runs the server.
pub fn check_policy_syntax(policy: &SandboxPolicy) -> Vec<String> {
    let mut problems = Vec::new();
    for (field, paths) in [
        ("filesystem.read", &policy.filesystem.read),
        ("filesystem.write", &policy.filesystem.write),
    ] {
        for (i, p) in paths.iter().enumerate() {
            let rooted = p.starts_with('/')
                || p.starts_with("~/")
                || p == "~"
                || p.starts_with("${TMP}/")
                || p == "${TMP}";
            if !rooted {
                problems.push(format!(
                    "{field}[{i}]: `{p}` must be absolute, `~/...` or `${{TMP}}/...`"
                ));
            }
            if p.split('/').any(|c| c == "..") {
                problems.push(format!("{field}[{i}]: `{p}` must not contain `..`"));
            }
        }
    }
    problems
}
