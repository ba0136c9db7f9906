//! The bridge between a locked `policy.sandbox` and the `mcpsum-sandbox` launcher crate (I5),
//! plus the egress proxy for servers whose `network.allow` lists hosts. Everything here fails
//! closed: a sandbox that cannot be built means the server does not start.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::lockfile::SandboxPolicy;
use crate::refusals::{EgressRefusal, Refusals};

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
    refusals: Refusals,
}

impl Running {
    /// The egress proxy's refusals so far (none without `network.allow`).
    pub fn refusals(&self) -> (Vec<EgressRefusal>, usize) {
        self.refusals.taken()
    }
}

/// The wire layer keeps a sandbox's state alive beside its server, and asks it to finish once
/// the launcher runs.
impl crate::mcp::process::Companion for Running {
    fn after_spawn(
        &mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + '_>> {
        Box::pin(Running::after_spawn(self))
    }

    fn refusals(&self) -> (Vec<EgressRefusal>, usize) {
        Running::refusals(self)
    }
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
        self.shutdown = Some(start_egress_keeping(
            &tokio::runtime::Handle::current(),
            listener,
            server,
            allowlist,
            &self.state_dir,
            Some(self.refusals.clone()),
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
    start_egress_keeping(handle, listener, server, allowlist, state_dir, None)
}

/// [`start_egress`], also keeping the proxy's refusals in `refusals`, if given (for the error
/// of a start that fails).
fn start_egress_keeping(
    handle: &tokio::runtime::Handle,
    listener: std::net::TcpListener,
    server: String,
    allowlist: mcpsum_egress::Allowlist,
    state_dir: &Path,
    refusals: Option<Refusals>,
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
        if let Some(kept) = &refusals
            && let Some(refusal) = EgressRefusal::of_record(record)
        {
            kept.push(refusal);
        }
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

/// Warns about rules that open credentials to the server or let it write a system folder:
/// allowed (the policy is the person's), but never silently. `lock --sandbox` and `sandbox
/// test` both say it.
pub fn warn_wide_rules(server: &str, policy: &mcpsum_sandbox::ValidatedPolicy) {
    for (key, credential) in mcpsum_sandbox::exposed_credentials(policy) {
        crate::output::warn(&format!(
            "server `{server}`: `{key}` opens the credentials at `{}` to the server; narrow the entry unless the server needs them",
            crate::text::sanitize_line(&credential.display().to_string())
        ));
    }
    for (key, dir) in mcpsum_sandbox::system_write_rules(policy) {
        crate::output::warn(&format!(
            "server `{server}`: `{key}` lets the server write the system folder `{}`, which other programs run or read; narrow the entry to the files or the folder it needs",
            crate::text::sanitize_line(&dir.display().to_string())
        ));
    }
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
            refusals: Refusals::default(),
        },
    })
}

/// Whether the sandbox of `argv` (server `server`'s) can be planned here (paths exist, no
/// protected path is writable), without starting anything: the proxy checks it before it
/// answers a client.
///
/// This plan is dropped on purpose. [`prepare`] plans again at spawn. The launcher re-checks
/// each rule at launch: a path swapped for a link, a bind mount of `/` or a protected home, a
/// write rule that now covers a protected path. It does not re-check a derived read rule (the
/// runtime base, a command's or interpreter's prefix) against the lists only the plan holds:
/// the credential paths with their link targets, the homes in `/etc/passwd`, the state
/// directory for write rules. Those come from the filesystem as it is when the plan is made.
/// Reusing this plan would judge them as they were before the handshake and the pin check.
pub fn check(server: &str, argv: &[String], spec: &SandboxSpec) -> Result<(), String> {
    let (req, _) = request(server, argv, spec, Vec::new())?;
    mcpsum_sandbox::plan(&req).map(drop).map_err(not_started)
}

/// The message of a sandbox that cannot be set up.
fn not_started(e: impl std::fmt::Display) -> String {
    format!("sandbox setup failed, server not started: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpsum_egress::{AddressClass, Decision, Dropped, EgressRecord, Reason};
    use pretty_assertions::assert_eq;

    fn record(host: &str, port: u16, reason: Reason, dropped: &[&str]) -> EgressRecord {
        let mut r = EgressRecord::new("s", "1-2", 1, 40_000);
        r.target = Some(format!("{host}:{port}"));
        r.host = Some(host.to_owned());
        r.port = Some(port);
        r.reason = reason;
        r.detail = "why".to_owned();
        r.dropped = dropped
            .iter()
            .map(|a| Dropped {
                address: (*a).to_owned(),
                class: AddressClass::Loopback,
            })
            .collect();
        r
    }

    #[test]
    fn a_refusal_names_the_entry_that_would_allow_it() {
        let refusal =
            |r: &EgressRecord| EgressRefusal::of_record(r).map(|r| (r.target, r.reason, r.allow));
        let own = |t: &str, reason: &str, allow: Option<&str>| {
            Some((t.to_owned(), reason.to_owned(), allow.map(str::to_owned)))
        };
        assert_eq!(
            refusal(&record("evil.test", 443, Reason::NotListed, &[])),
            own("evil.test:443", "not_listed", Some("evil.test:443"))
        );
        assert_eq!(
            refusal(&record(
                "localhost",
                9,
                Reason::NonPublic,
                &["::1", "127.0.0.1"]
            )),
            own("localhost:9", "non_public", Some("[::1]:9"))
        );
        assert_eq!(
            refusal(&record("2001:db8::1", 443, Reason::NotListed, &[])),
            own("[2001:db8::1]:443", "not_listed", Some("[2001:db8::1]:443"))
        );
        // No allowlist entry helps a connection that is not TLS to the host it names.
        assert_eq!(
            refusal(&record("good.test", 443, Reason::SniMismatch, &[])),
            own("good.test:443", "sni_mismatch", None)
        );
        // Not refusals: a tunnel, and the proxy closing as the server ends.
        let mut allowed = record("good.test", 443, Reason::Ok, &[]);
        allowed.decision = Decision::Allow;
        assert_eq!(refusal(&allowed), None);
        assert_eq!(
            refusal(&record("good.test", 443, Reason::Shutdown, &[])),
            None
        );
        let line = EgressRefusal::of_record(&record("evil.test", 443, Reason::NotListed, &[]))
            .unwrap()
            .line();
        assert_eq!(line, "egress refused: evil.test:443 (not_listed: why)");
    }

    #[test]
    fn refusals_past_the_first_few_are_counted() {
        let kept = Refusals::default();
        for i in 0..8 {
            let r = record(&format!("h{i}.test"), 443, Reason::NotListed, &[]);
            kept.push(EgressRefusal::of_record(&r).unwrap());
        }
        // A retry of a refusal kept is not news.
        let again = record("h0.test", 443, Reason::NotListed, &[]);
        kept.push(EgressRefusal::of_record(&again).unwrap());
        let (first, more) = kept.taken();
        assert_eq!(first.len(), Refusals::KEPT);
        assert_eq!(more, 8 - Refusals::KEPT);
    }
}
