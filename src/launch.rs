//! What starting a locked server takes, for the proxy and the commands alike: the entry of a
//! name in the lockfile, the [`Launch`] of an entry, and the user-facing error of a server
//! that failed to start or answer. It sits beside both so that the proxy does not depend on
//! the commands.

use std::path::Path;

use crate::error::{Error, Result};
use crate::lockfile::{Entry, Lockfile, ServerEntry};
use crate::mcp::client::{ClientError, Failure};
use crate::mcp::process::Launch;

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
/// as a package runner would resolve it today.
pub fn launch_for(
    name: &str,
    entry: &ServerEntry,
    lockfile: &Path,
    forward_stderr: bool,
    check: crate::pin::Check,
) -> Result<Launch> {
    let mut l = launch(
        name,
        &entry.command,
        &entry.env_passthrough,
        entry.sandbox(),
        lockfile,
        forward_stderr,
    );
    if let Some(artifacts) = &entry.artifacts {
        pin_launch(&mut l, &entry.command, artifacts, check)?;
    }
    Ok(l)
}

/// Points `l` at the pinned install of `artifacts`: its argv runs the server from there, and a
/// sandbox may read the install (read-only) and the interpreter it links to.
pub fn pin_launch(
    l: &mut Launch,
    command: &[String],
    artifacts: &crate::lockfile::Artifacts,
    check: crate::pin::Check,
) -> Result<()> {
    let pinned = crate::pin::prepare(&l.server, command, artifacts, check)?;
    l.argv = pinned.argv;
    if let Some(spec) = &mut l.sandbox {
        for path in pinned.read {
            if !spec.policy.filesystem.read.contains(&path) {
                spec.policy.filesystem.read.push(path);
            }
        }
    }
    Ok(())
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
    }
}

/// Turns a client failure into a user-facing error naming the server, with the server's last
/// stderr lines and a hint that fits the failure.
pub fn server_error(what: &str, launch: &Launch, failure: Failure) -> Error {
    let Failure { error, stderr } = failure;
    let mut err = Error::new(format!("{what} server `{}`", launch.server)).cause(&error);
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
    let hint = match &error {
        _ if sandbox_denied => "the sandbox refused something the server needs (see its stderr above); if that is expected of it, add the path to `policy.sandbox.filesystem.read` (or `write`) and run `mcpsum sandbox test --name NAME` to see the read and write sets".to_owned(),
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
            "the server gets no environment variables unless they are listed, and `uvx`/`npx` servers need {}: lock it with {}",
            missing_basics.join(" and "),
            missing_basics.iter().map(|v| format!("`--env {v}`")).collect::<Vec<_>>().join(" ")
        ),
        ClientError::Timeout { .. } => "raise `--timeout-secs` if the server is slow to start (a first download), or check that it speaks MCP on stdio".to_owned(),
        _ => "check that the command starts an MCP server on stdio; run it by hand to see its output".to_owned(),
    };
    err.hint(hint)
}
