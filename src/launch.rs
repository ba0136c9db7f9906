//! What starting a locked server takes, for the proxy and the commands alike: the entry of a
//! name in the lockfile, the [`Launch`] of an entry, and the user-facing error of a server
//! that failed to start or answer. It sits beside both so that the proxy does not depend on
//! the commands.

use std::path::Path;

use crate::error::{Error, Result};
use crate::lockfile::{Entry, Lockfile, ServerEntry};
use crate::mcp::client::{ClientError, Failure};
use crate::mcp::process::{Companion, SpawnError, Start, server_env};

/// What to start: the locked argv, the names of the variables to pass, and how (a sandbox,
/// learn mode, or neither). The wire layer starts it through [`Start`].
#[derive(Debug, Clone)]
pub struct Launch {
    /// The server's name, for messages.
    pub server: String,
    /// The locked argv.
    pub argv: Vec<String>,
    /// The locked `envPassthrough` names.
    pub env_passthrough: Vec<String>,
    /// Forward the server's stderr lines to ours (the proxy does; lock and verify keep them).
    pub forward_stderr: bool,
    /// The sandbox to run it in, if the entry has one.
    pub sandbox: Option<crate::sandboxing::SandboxSpec>,
    /// Learn mode (`proxy --learn`): run it without the sandbox while its guard records what
    /// it does into this observation file (see `crate::learning`).
    pub learn: Option<std::path::PathBuf>,
}

impl Start for Launch {
    fn server(&self) -> &str {
        &self.server
    }

    fn argv(&self) -> &[String] {
        &self.argv
    }

    fn forward_stderr(&self) -> bool {
        self.forward_stderr
    }

    /// Learn mode: the guard records while the recording proxy lets connections through; a
    /// sandbox: the launcher command and the sandbox's running state; neither: the guard.
    fn command(
        &self,
        resolved: &Path,
    ) -> std::result::Result<(std::process::Command, Option<Box<dyn Companion>>), SpawnError> {
        let not_started = |e: &dyn std::fmt::Display| {
            SpawnError::Sandbox(format!("server `{}` not started: {e}", self.server))
        };
        let env = server_env(&self.env_passthrough);
        match (&self.sandbox, &self.learn) {
            (_, Some(observations)) => {
                let (proxy_env, recorder) = crate::learning::start(&self.server, observations)
                    .map_err(|e| {
                        SpawnError::Sandbox(format!(
                            "server `{}` not started (learn mode): {e}",
                            self.server
                        ))
                    })?;
                let mut cmd = mcpsum_sandbox::learning_command(resolved, &self.argv, observations)
                    .map_err(|e| not_started(&e))?;
                cmd.env_clear();
                cmd.envs(env);
                cmd.envs(proxy_env);
                // The per-server caches the sandbox gives `uvx`/`npx`, so that what is learned
                // is what the sandboxed server will read (and the cache `lock` warmed).
                let state_dir =
                    crate::paths::ensure_state_dir().map_err(|e| not_started(&e.one_line()))?;
                let program = self.argv.first().map(String::as_str).unwrap_or_default();
                for (var, dir) in mcpsum_sandbox::cache_env(program, &state_dir, &self.server) {
                    crate::paths::create_private_dir(&dir).map_err(|e| {
                        not_started(&format!("cannot create `{}`: {e}", dir.display()))
                    })?;
                    cmd.env(var, dir);
                }
                Ok((cmd, Some(Box::new(recorder))))
            }
            (Some(spec), None) => {
                let prepared = crate::sandboxing::prepare(&self.server, &self.argv, spec, env)
                    .map_err(SpawnError::Sandbox)?;
                Ok((prepared.command, Some(Box::new(prepared.running))))
            }
            (None, None) => {
                let mut cmd = mcpsum_sandbox::guarded_command(resolved, &self.argv)
                    .map_err(|e| not_started(&e))?;
                cmd.env_clear();
                cmd.envs(env);
                Ok((cmd, None))
            }
        }
    }
}

/// The entry named `name`, or an error listing the names there are.
pub fn entry<'a, I>(lock: &'a Lockfile<I>, path: &Path, name: &str) -> Result<&'a Entry<I>> {
    lock.servers
        .get(name)
        .ok_or_else(|| unknown_server(lock, path, name))
}

/// "no server named X" with the names that exist.
pub fn unknown_server<I>(lock: &Lockfile<I>, path: &Path, name: &str) -> Error {
    let names: Vec<String> = lock.servers.keys().map(|n| format!("`{n}`")).collect();
    let err = Error::new(format!("`{}` has no server named `{name}`", path.display()));
    if names.is_empty() {
        err.hint(format!(
            "lock it first: `mcpsum lock --name {name} -- COMMAND...`"
        ))
    } else {
        err.hint(format!("servers in this lockfile: {}", names.join(", ")))
    }
}

/// How to start a locked entry: an entry that pins `artifacts` runs from its pinned install
/// (made from the recorded hashes when missing, checked as `check` says), never from `command`
/// as a package runner would resolve it today. With [`crate::pin::Check::Deferred`], the
/// check that is left comes back with it, to run before the server starts.
pub fn launch_for(
    name: &str,
    entry: &ServerEntry,
    lockfile: &Path,
    forward_stderr: bool,
    check: crate::pin::Check,
) -> Result<(Launch, Option<crate::pin::Pending>)> {
    let mut l = launch(
        name,
        &entry.command,
        &entry.env_passthrough,
        entry.sandbox(),
        lockfile,
        forward_stderr,
    );
    let pending = match &entry.artifacts {
        Some(artifacts) => pin_launch(&mut l, &entry.command, artifacts, check)?,
        None => None,
    };
    Ok((l, pending))
}

/// Points `l` at the pinned install of `artifacts`: its argv runs the server from there, and a
/// sandbox may read the install (read-only) and the interpreter it links to. What
/// [`crate::pin::Check::Deferred`] left to check comes back (`Full`: nothing).
pub fn pin_launch(
    l: &mut Launch,
    command: &[String],
    artifacts: &crate::lockfile::Artifacts,
    check: crate::pin::Check,
) -> Result<Option<crate::pin::Pending>> {
    let pinned = crate::pin::prepare(&l.server, command, artifacts, check)?;
    l.argv = pinned.argv;
    if let Some(spec) = &mut l.sandbox {
        for path in pinned.read {
            if !spec.policy.filesystem.read.contains(&path) {
                spec.policy.filesystem.read.push(path);
            }
        }
    }
    Ok(pinned.pending)
}

/// How to start a server from its parts (a new entry has no `ServerEntry` yet).
pub fn launch(
    name: &str,
    argv: &[String],
    env_passthrough: &[String],
    sandbox: Option<&crate::lockfile::SandboxPolicy>,
    lockfile: &Path,
    forward_stderr: bool,
) -> Launch {
    Launch {
        server: name.to_owned(),
        argv: argv.to_vec(),
        env_passthrough: env_passthrough.to_vec(),
        forward_stderr,
        sandbox: sandbox.map(|p| crate::sandboxing::SandboxSpec {
            policy: p.clone(),
            lockfile: lockfile.to_path_buf(),
        }),
        learn: None,
    }
}

impl Launch {
    /// Learn mode when `learn` (`proxy --learn`): the server runs without its sandbox (a
    /// sandbox would stop it at the first path it lacks, so one session would show one path at
    /// a time) while its guard records into its observation file in `state_dir`.
    pub fn learning(mut self, learn: bool, state_dir: &Path) -> Result<Self> {
        if !learn {
            return Ok(self);
        }
        let file =
            crate::learning::ensure_observation_file(state_dir, &self.server).map_err(|e| {
                Error::new(format!("cannot learn server `{}`", self.server))
                    .cause(e)
                    .hint("check that the state directory is writable (`$MCPSUM_STATE_DIR`)")
            })?;
        if self.sandbox.is_some() {
            crate::output::warn(&format!(
                "learn mode: server `{}` runs without its `policy.sandbox` while mcpsum records what it uses",
                self.server
            ));
        }
        self.sandbox = None;
        self.learn = Some(file);
        Ok(self)
    }
}

/// Turns a client failure into a user-facing error naming the server, with the server's last
/// stderr lines and a hint that fits the failure.
pub fn server_error(what: &str, launch: &Launch, failure: Failure) -> Error {
    let Failure {
        error,
        stderr,
        egress: (refusals, more),
    } = failure;
    let mut err = Error::new(format!("{what} server `{}`", launch.server)).cause(&error);
    // What the sandbox's egress proxy refused during this start is likely why it failed: it
    // is shown here, not only in `mcpsum audit`, and reaches the client of a proxy.
    for r in &refusals {
        err = err.cause(r.line());
    }
    if more > 0 {
        err = err.cause(format!(
            "egress refused {more} more connection{} (`mcpsum audit --server {}` shows them)",
            if more == 1 { "" } else { "s" },
            launch.server
        ));
    }
    if !stderr.is_empty() {
        let mut lines = vec!["its last stderr lines:".to_owned()];
        lines.extend(stderr.iter().map(|l| format!("  | {l}")));
        err = err.details(lines);
    }
    let missing_basics: Vec<&str> = ["PATH", "HOME"]
        .into_iter()
        .filter(|v| !launch.env_passthrough.iter().any(|e| e == v))
        .collect();
    let sandbox_denied = launch.sandbox.is_some()
        && stderr.iter().any(|l| {
            l.contains("EACCES") || l.contains("Permission denied") || l.contains("EPERM")
        });
    let environment = environment_hint(launch, &stderr);
    let hint = match &error {
        _ if !refusals.is_empty() => egress_hint(&launch.server, &refusals, what == "cannot lock"),
        _ if environment.is_some() => environment.unwrap_or_default(),
        _ if sandbox_denied => format!(
            "the sandbox refused something the server needs (see its stderr above); if that is expected of it, add the path to `policy.sandbox.filesystem.read` (or `write`) and run `mcpsum sandbox test --name {}` to see the read and write sets",
            launch.server
        ),
        ClientError::Spawn(crate::mcp::process::SpawnError::Sandbox(_)) => format!(
            "the server was not started; fix `policy.sandbox` of server `{}` in the lockfile, then check it with `mcpsum sandbox test --name {}`",
            launch.server, launch.server
        ),
        ClientError::Spawn(_) => "check the command; a program name is looked up on mcpsum's own PATH".to_owned(),
        // It answered its handshake, so it started and speaks MCP on stdio: its command and
        // environment are not what failed (a missing `PATH` stops a `npx` server before that).
        ClientError::Listing { method, error } => match **error {
            ClientError::Timeout { .. } => format!(
                "the server completed its handshake but did not answer `{method}`; raise `--timeout-secs` if it is slow to list, otherwise report it to the server's authors"
            ),
            _ => format!(
                "the server completed its handshake, then failed on `{method}` as shown above: it misbehaves; report it to the server's authors"
            ),
        },
        ClientError::Exited { .. } | ClientError::Timeout { .. } if !missing_basics.is_empty() => format!(
            "the server gets no environment variables unless they are listed, and many need {}: if this one does, lock it with {}",
            missing_basics.join(" and "),
            missing_basics.iter().map(|v| format!("`--env {v}`")).collect::<Vec<_>>().join(" ")
        ),
        ClientError::Timeout { .. } => "raise `--timeout-secs` if the server is slow to start (a first download), or check that it speaks MCP on stdio".to_owned(),
        _ => "check that the command starts an MCP server on stdio; run it by hand to see its output".to_owned(),
    };
    err.hint(hint)
}

/// The next step after egress refusals: the `network.allow` entries that would let them
/// through, or why none would.
fn egress_hint(server: &str, refusals: &[crate::refusals::EgressRefusal], locking: bool) -> String {
    let mut entries: Vec<String> = Vec::new();
    for r in refusals {
        if let Some(a) = &r.allow
            && !entries.contains(a)
        {
            entries.push(a.clone());
        }
    }
    let check = format!(
        "then check it with `mcpsum sandbox test --name {server}` (`mcpsum audit --server {server}` shows every connection)"
    );
    if entries.is_empty() {
        return format!(
            "the sandbox's egress proxy refused the server's connections as shown above, for reasons another `policy.sandbox.network.allow` entry would not change (each reason says what went wrong); {check}"
        );
    }
    let list = entries
        .iter()
        .map(|e| format!("`{e}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let file = if locking {
        " (or to the `--sandbox` file)"
    } else {
        ""
    };
    format!(
        "the sandbox's egress proxy refused the server's connections shown above; if the server needs them, add {list} to `policy.sandbox.network.allow` of server `{server}`{file}, {check}"
    )
}

/// What the environment lacks, when the server's stderr shows a failure the environment causes
/// and a variable fixes: a certificate it cannot verify (a TLS-intercepting proxy), a proxy it
/// cannot reach or was not told of, a host name it cannot resolve. `PATH` and `HOME` are not
/// the answer then, whatever else is missing.
fn environment_hint(launch: &Launch, stderr: &[String]) -> Option<String> {
    let text = stderr.join("\n").to_lowercase();
    let any = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
    let (what, vars): (&str, &[&str]) = if any(&[
        "certificate verify failed",
        "unknownissuer",
        "invalid peer certificate",
        "self signed certificate",
        "self-signed certificate",
        "unable to get local issuer certificate",
        "unable_to_get_issuer_cert",
        "self_signed_cert_in_chain",
        "unable_to_verify_leaf_signature",
        "certificate has expired",
        "x509:",
    ]) {
        (
            "the server (or the package runner that starts it) cannot verify a TLS certificate; behind a TLS-intercepting proxy it needs that proxy's CA",
            &[
                "SSL_CERT_FILE",
                "NODE_EXTRA_CA_CERTS",
                "REQUESTS_CA_BUNDLE",
                "UV_NATIVE_TLS",
            ],
        )
    } else if any(&[
        "proxyerror",
        "proxy error",
        "proxy authentication required",
        "tunnel connection failed",
        "407 ",
    ]) || (text.contains("proxy") && any(&["econnrefused", "connection refused"]))
    {
        (
            "the server cannot get through the network's proxy",
            &["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"],
        )
    } else if any(&[
        "getaddrinfo",
        "enotfound",
        "eai_again",
        "name or service not known",
        "temporary failure in name resolution",
        "failed to lookup address",
        "dns error",
        "nodename nor servname",
        "could not resolve host",
    ]) {
        (
            "the server cannot resolve a host name; where the network is reached through a proxy, the server must be told of it",
            &["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"],
        )
    } else {
        return None;
    };
    let missing: Vec<&str> = vars
        .iter()
        .copied()
        .filter(|v| !launch.env_passthrough.iter().any(|e| e == v))
        .collect();
    let mut hint = format!("{what} (see its stderr above): ");
    if missing.is_empty() {
        hint.push_str(&format!(
            "{} are passed to it already; check their values in the environment that starts mcpsum",
            vars.iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    } else {
        hint.push_str(&format!(
            "set the ones that apply in the environment that starts mcpsum (the client's `env` for `mcpsum proxy`) and pass them: `mcpsum lock --name {} {}`",
            launch.server,
            missing.iter().map(|v| format!("--env {v}")).collect::<Vec<_>>().join(" ")
        ));
    }
    if launch.sandbox.is_some() && !text.contains("certificate") {
        hint.push_str("; under `policy.sandbox` the host must also be in `network.allow`");
    }
    Some(hint)
}
