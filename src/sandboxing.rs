//! The bridge between a locked `policy.sandbox` and the `mcpsum-sandbox` launcher crate (I5),
//! plus the egress proxy for servers whose `network.allow` lists hosts. Everything here fails
//! closed: a sandbox that cannot be built means the server does not start.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::lockfile::SandboxPolicy;

/// How long the launcher may take to hand over the egress listener.
const BRIDGE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a launch needs to build a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The locked policy.
    pub policy: SandboxPolicy,
    /// The lockfile the entry came from (a write rule must never cover it).
    pub lockfile: PathBuf,
}

/// A sandboxed command ready to spawn.
pub struct Prepared {
    /// The launcher command.
    pub command: std::process::Command,
    /// State that lives as long as the server.
    pub running: Running,
}

/// A running sandbox's private state: its `${TMP}` (removed on drop) and the egress proxy.
pub struct Running {
    prepared: mcpsum_sandbox::Prepared,
    egress: Option<(mcpsum_egress::Allowlist, String)>,
    state_dir: PathBuf,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Running {
    /// Finishes set-up once the launcher runs: in allow mode, receives the listener from inside
    /// the server's network namespace and starts the egress proxy on it.
    pub async fn after_spawn(&mut self) -> Result<(), String> {
        let Some((allowlist, server)) = self.egress.take() else {
            return Ok(());
        };
        let listener = self
            .prepared
            .receive_listener(BRIDGE_TIMEOUT)
            .map_err(not_started)?
            .ok_or_else(|| not_started("egress bridge: no listener"))?;
        self.shutdown = Some(start_egress(
            &tokio::runtime::Handle::current(),
            listener,
            server,
            allowlist,
            &self.state_dir,
        )?);
        Ok(())
    }
}

/// Starts the egress proxy on `listener` (the socket the launcher bound inside the server's
/// network namespace), auditing every connection to `state_dir`'s audit log. It runs until the
/// returned sender is dropped or fires.
pub fn start_egress(
    handle: &tokio::runtime::Handle,
    listener: std::net::TcpListener,
    server: String,
    allowlist: mcpsum_egress::Allowlist,
    state_dir: &Path,
) -> Result<tokio::sync::oneshot::Sender<()>, String> {
    let _in_runtime = handle.enter();
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("egress bridge: {e}"))?;
    let listener =
        tokio::net::TcpListener::from_std(listener).map_err(|e| format!("egress bridge: {e}"))?;
    let session = crate::session::current().id;
    let audit = Arc::new(
        crate::audit::AuditLog::open(state_dir, &session, &server).map_err(|e| e.one_line())?,
    );
    let config = Arc::new(mcpsum_egress::EgressConfig::new(server, session, allowlist));
    let sink: mcpsum_egress::AuditSink = Arc::new(move |record| {
        let value = serde_json::to_value(record).map_err(std::io::Error::other)?;
        audit.append_raw(&value)
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    handle.spawn(mcpsum_egress::serve(
        listener,
        config,
        Arc::new(mcpsum_egress::SystemResolver),
        sink,
        async move {
            let _ = rx.await;
        },
    ));
    Ok(tx)
}

/// The paths a write rule must never cover, for this machine.
pub fn protected(lockfile: &Path) -> Result<mcpsum_sandbox::Protected, String> {
    let state_dir = crate::paths::ensure_state_dir().map_err(|e| e.one_line())?;
    let binary = std::env::current_exe()
        .and_then(fs_err::canonicalize)
        .map_err(|e| format!("cannot find the mcpsum binary: {e}"))?;
    let lockfile = std::path::absolute(lockfile).unwrap_or_else(|_| lockfile.to_path_buf());
    Ok(mcpsum_sandbox::Protected {
        lockfile,
        state_dir,
        binary,
        home: crate::paths::home_dir(),
        other_homes: crate::paths::passwd_home().into_iter().collect(),
    })
}

/// Validates the policy on this machine and builds the launch request.
pub fn request(
    server: &str,
    argv: &[String],
    spec: &SandboxSpec,
    env: Vec<(OsString, OsString)>,
) -> Result<(mcpsum_sandbox::LaunchRequest, mcpsum_sandbox::Protected), String> {
    let protected = protected(&spec.lockfile)?;
    let raw = spec.policy.raw();
    let policy = mcpsum_sandbox::validate(&raw, &protected);
    let mut problems: Vec<String> = match &policy {
        Ok(_) => Vec::new(),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    };
    if let Err(errors) = mcpsum_egress::Allowlist::parse(&raw.allow) {
        problems.extend(errors.iter().map(|e| format!("network.allow: {e}")));
    }
    let policy = match policy {
        Ok(p) if problems.is_empty() => p,
        _ => {
            let lines: Vec<String> = problems
                .iter()
                .map(|p| {
                    format!(
                        "  servers.{server}.policy.sandbox.{}",
                        p.replacen('`', "", 2)
                    )
                })
                .collect();
            return Err(format!(
                "sandbox policy of server `{server}` refused, server not started ({} problem{}):\n{}",
                lines.len(),
                if lines.len() == 1 { "" } else { "s" },
                lines.join("\n")
            ));
        }
    };
    let req = mcpsum_sandbox::LaunchRequest {
        server: server.to_owned(),
        policy,
        argv: argv.to_vec(),
        env,
        state_dir: protected.state_dir.clone(),
    };
    Ok((req, protected))
}

/// Builds the sandboxed command that runs `argv` (server `server`'s) with `env`.
pub fn prepare(
    server: &str,
    argv: &[String],
    spec: &SandboxSpec,
    env: Vec<(OsString, OsString)>,
) -> Result<Prepared, String> {
    let (req, protected) = request(server, argv, spec, env)?;
    let plan = mcpsum_sandbox::plan(&req).map_err(not_started)?;
    let mut prepared = mcpsum_sandbox::prepare(plan).map_err(not_started)?;
    let command = std::mem::replace(
        &mut prepared.command,
        std::process::Command::new("/nonexistent"),
    );
    let egress = if spec.policy.network.allow.is_empty() {
        None
    } else {
        let allowlist = mcpsum_egress::Allowlist::parse(&spec.policy.network.allow)
            .map_err(|_| "network.allow is invalid".to_owned())?;
        Some((allowlist, server.to_owned()))
    };
    Ok(Prepared {
        command,
        running: Running {
            prepared,
            egress,
            state_dir: protected.state_dir,
            shutdown: None,
        },
    })
}

/// Whether the sandbox of `argv` (server `server`'s) can be planned here (paths exist, no
/// protected path is writable), without starting anything: the proxy checks it before it
/// answers a client.
pub fn check(server: &str, argv: &[String], spec: &SandboxSpec) -> Result<(), String> {
    let (req, _) = request(server, argv, spec, Vec::new())?;
    mcpsum_sandbox::plan(&req).map(drop).map_err(not_started)
}

/// The message of a sandbox that cannot be set up.
fn not_started(e: impl std::fmt::Display) -> String {
    format!("sandbox setup failed, server not started: {e}")
}
