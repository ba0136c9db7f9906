//! Client sessions: every proxy started by the same client process belongs to one session,
//! identified by the client's pid and its start time (so a reused pid is a new session).
//!
//! The client is the nearest ancestor that is not a shell or a launcher wrapper: clients start
//! servers through `sh -c '...'`, `npx mcpsum`, `uvx`, `env`, `timeout` and the like, and those
//! processes are per server, so taken as the client they would give each server a session of
//! its own and taint would never cross. What a process is comes from the binary it runs
//! (`/proc/PID/exe`, which it cannot change) and its command line; never from its `comm` or its
//! `argv[0]` alone, which any process can set to anything. A wrapper missing from the names
//! (strace, sudo, a version manager's shim, a secrets runner) is known by its stdio: it passes
//! its own stdin and stdout on, so they are the very pipes of mcpsum's, while the client holds
//! the other ends on other descriptors and has its own stdio. A tracer (strace) that is the
//! parent of the process it traces is a wrapper too. Taking a wrapper for the client
//! splits a session (taint would not cross); taking the client for a wrapper merges sessions,
//! the safe direction.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The session of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// `<pid>-<starttime>` of the client process.
    pub id: String,
    /// The client's pid.
    pub client_pid: u32,
    /// The client's start time in clock ticks since boot (`/proc/PID/stat` field 22).
    pub client_start: u64,
    /// The processes from this one's parent up to the client (the last hop), for `taint list`.
    pub chain: Vec<Hop>,
}

/// One process between mcpsum and its client, or the client itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    /// Its pid.
    pub pid: u32,
    /// What it is: the name of the binary it runs, and for a runtime the launcher it runs
    /// (`node (npx)`).
    pub name: String,
}

/// Hops followed at most: past this the process is taken as the client.
const MAX_HOPS: usize = 16;

/// The session of the current process: its client found past shells and launcher wrappers.
/// Computed once: every part of the proxy (the egress bridge too) sees the same session.
pub fn current() -> Session {
    static CURRENT: OnceLock<Session> = OnceLock::new();
    CURRENT
        .get_or_init(|| of_parent(std::os::unix::process::parent_id()))
        .clone()
}

/// The session whose client is `parent` or the first ancestor of it that is not a wrapper.
fn of_parent(parent: u32) -> Session {
    let mut pid = parent;
    let mut chain = Vec::new();
    let ours = stdio_of("self");
    let mut below = "self".to_owned();
    loop {
        let name = what(pid);
        let wrapper = name.as_ref().is_some_and(|(_, w)| *w)
            || (ours.is_some() && stdio_of(&pid.to_string()) == ours)
            || tracer_of(&below) == Some(pid);
        below = pid.to_string();
        chain.push(Hop {
            pid,
            name: name.map_or_else(|| "?".to_owned(), |(n, _)| n),
        });
        if !wrapper || chain.len() >= MAX_HOPS {
            break;
        }
        // A wrapper whose parent is init (or unknown) is the client itself: taking init would
        // put every orphaned wrapper's proxies in one session.
        match parent_of(pid) {
            Some(p) if p > 1 => pid = p,
            _ => break,
        }
    }
    let start = start_time(pid).unwrap_or(0);
    Session {
        id: format!("{pid}-{start}"),
        client_pid: pid,
        client_start: start,
        chain,
    }
}

/// What process `pid` is (its name for `taint list`), and whether it is a wrapper; `None` when
/// it cannot be read (gone, or another user's): then it is taken as the client.
fn what(pid: u32) -> Option<(String, bool)> {
    let exe = fs_err::read_link(format!("/proc/{pid}/exe")).ok()?;
    let cmdline = fs_err::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Some(classify(&exe, &argv))
}

/// The name of a process running binary `exe` with `argv`, and whether it is a shell or a
/// launcher that runs mcpsum for a client (as opposed to the client).
pub fn classify(exe: &Path, argv: &[String]) -> (String, bool) {
    let base = |p: &str| {
        Path::new(p)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut binary = base(&exe.to_string_lossy());
    // A deleted binary (upgraded while running) reads `NAME (deleted)`.
    if let Some(b) = binary.strip_suffix(" (deleted)") {
        binary = b.to_owned();
    }
    // A multi-call binary is the applet its `argv[0]` names; the binary itself says it is one.
    let name = if matches!(binary.as_str(), "busybox" | "coreutils") {
        argv.first().map(|a| base(a)).unwrap_or_default()
    } else {
        binary.clone()
    };
    let args = argv.get(1..).unwrap_or_default();
    let wrapper = match name.as_str() {
        "sh" | "bash" | "dash" | "zsh" | "fish" | "ksh" | "mksh" | "ash" | "yash" => {
            // A shell that runs a command (`-c`, also bundled as `-lc`) or a script; an
            // interactive shell is where a person runs mcpsum by hand, and is the client.
            args.iter().any(|a| {
                a == "-c"
                    || (a.starts_with('-') && !a.starts_with("--") && a.contains('c'))
                    || !a.starts_with('-')
            })
        }
        "env" | "timeout" | "nice" | "setsid" | "nohup" | "stdbuf" | "ionice" | "chrt"
        | "taskset" | "time" | "flock" | "unbuffer" | "tini" | "dumb-init" => true,
        "uvx" | "pnpx" | "bunx" => true,
        "uv" => matches!(
            args.first().map(String::as_str),
            Some("run" | "tool" | "tool-run")
        ),
        "npx" => true,
        "npm" | "pnpm" | "yarn" | "bun" => matches!(
            args.first().map(String::as_str),
            Some("exec" | "x" | "dlx" | "run" | "run-script")
        ),
        "node" | "nodejs" => {
            // Node running a launcher's script: `node /usr/bin/npx ...`, `node .../npx-cli.js`.
            let script = args
                .iter()
                .find(|a| !a.starts_with('-'))
                .map(|a| base(a))
                .unwrap_or_default();
            let launcher = match script.as_str() {
                "npx" | "npx-cli.js" => Some("npx"),
                "npm" | "npm-cli.js" => {
                    let after: Vec<&String> = args
                        .iter()
                        .skip_while(|a| base(a) != script)
                        .skip(1)
                        .collect();
                    matches!(
                        after.first().map(|a| a.as_str()),
                        Some("exec" | "x" | "run" | "run-script")
                    )
                    .then_some("npm")
                }
                "pnpm" | "pnpm.cjs" | "pnpx" => Some("pnpm"),
                "yarn" | "yarn.js" => Some("yarn"),
                _ => None,
            };
            if let Some(l) = launcher {
                return (format!("{name} ({l})"), true);
            }
            false
        }
        _ => false,
    };
    (name, wrapper)
}

/// Process `pid`'s stdin and stdout when both are pipes or sockets (`pipe:[inode]`): objects
/// that only the processes sharing them have. A terminal is shared by every process of a
/// person's shell, the client among them, so it says nothing; `None` then.
fn stdio_of(pid: &str) -> Option<[PathBuf; 2]> {
    let link = |fd: u8| {
        fs_err::read_link(format!("/proc/{pid}/fd/{fd}"))
            .ok()
            .filter(|l| {
                let l = l.to_string_lossy();
                l.starts_with("pipe:[") || l.starts_with("socket:[")
            })
    };
    Some([link(0)?, link(1)?])
}

/// The pid tracing process `pid` (`TracerPid` of `/proc/PID/status`), if any: a tracer that
/// is its parent (strace, ltrace) runs it for the client, yet gives it stdio of its own.
fn tracer_of(pid: &str) -> Option<u32> {
    let status = fs_err::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let tracer: u32 = status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))?
        .trim()
        .parse()
        .ok()?;
    (tracer != 0).then_some(tracer)
}

/// A process's parent pid (`/proc/PID/stat` field 4), or `None` when it is gone.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A process's start time, or `None` when it is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: split after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the client process of a session still runs.
pub fn alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(exe: &str, argv: &[&str]) -> (String, bool) {
        let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
        classify(Path::new(exe), &argv)
    }

    #[test]
    fn shells_running_a_command_or_a_script_are_wrappers_interactive_ones_are_not() {
        assert_eq!(
            of("/usr/bin/dash", &["sh", "-c", "mcpsum proxy"]),
            ("dash".into(), true)
        );
        assert_eq!(
            of("/usr/bin/bash", &["bash", "-lc", "x"]),
            ("bash".into(), true)
        );
        assert_eq!(of("/usr/bin/zsh", &["zsh", "run.sh"]), ("zsh".into(), true));
        assert_eq!(of("/usr/bin/bash", &["-bash"]), ("bash".into(), false));
        assert_eq!(of("/usr/bin/bash", &["bash", "-i"]), ("bash".into(), false));
        assert_eq!(
            of("/usr/bin/bash (deleted)", &["bash", "-c", "x"]),
            ("bash".into(), true)
        );
    }

    #[test]
    fn launchers_are_wrappers_by_their_binary_not_their_argv0() {
        assert!(of("/usr/bin/env", &["env", "mcpsum"]).1);
        assert!(of("/usr/bin/timeout", &["timeout", "9", "mcpsum"]).1);
        assert!(of("/root/.local/bin/uvx", &["uvx", "mcpsum"]).1);
        assert!(of("/root/.local/bin/uv", &["uv", "tool", "run", "mcpsum"]).1);
        assert!(!of("/root/.local/bin/uv", &["uv", "pip", "list"]).1);
        assert_eq!(
            of("/usr/bin/node", &["node", "/usr/bin/npx", "-y", "mcpsum"]),
            ("node (npx)".into(), true)
        );
        assert!(
            of(
                "/usr/bin/node",
                &[
                    "node",
                    "/usr/lib/node_modules/npm/bin/npm-cli.js",
                    "exec",
                    "mcpsum"
                ]
            )
            .1
        );
        assert!(!of("/usr/bin/node", &["node", "/opt/client/index.js"]).1);
        // A client that calls itself `sh` is still what its binary is.
        assert_eq!(
            of("/opt/client/bin/client", &["sh", "-c", "x"]),
            ("client".into(), false)
        );
        // A multi-call binary is its applet.
        assert_eq!(of("/bin/busybox", &["sh", "-c", "x"]), ("sh".into(), true));
        assert!(!of("/bin/busybox", &["vi"]).1);
    }
}
