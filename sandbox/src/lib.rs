//! mcpsum's Linux sandbox launcher (I5): Landlock, seccomp, a user + mount namespace that shows
//! everything outside the write set read-only, limits of the server's tree, and (only when
//! `network.allow` lists hosts) a network namespace with an egress bridge.
//!
//! # Flow
//!
//! 1. [`validate`] checks a `policy.sandbox` (all problems in one pass).
//! 2. [`plan()`] turns a [`LaunchRequest`] into a [`SandboxPlan`] (pure; unit-tested as a value).
//! 3. [`prepare`] makes the private `${TMP}` (0700, removed when [`Prepared`] drops), the bridge
//!    socketpair (allow mode) and a [`std::process::Command`] that runs the launcher binary
//!    ([`LAUNCHER_NAME`], beside the running binary, opened by [`open_launcher`]) as
//!    `mcpsum-launch __sandbox-exec <spec>`. The caller sets stdio, `process_group(0)`, and
//!    spawns it.
//! 4. The launcher ([`launcher_binary_main`], single-threaded, in the child) applies, in order:
//!    `PR_SET_PDEATHSIG`, closing inherited descriptors, [host root only: a pids cgroup of its
//!    own with `pids.max` = the task limit, which `RLIMIT_NPROC` cannot be for uid 0; where no
//!    pids controller can be used the launch goes on and says so],
//!    `unshare(NEWUSER|NEWNS[|NEWNET])`,
//!    `setgroups deny`, identity uid/gid map, the read-only view (every mount read-only, the write
//!    set bound read-write again; skipped, with a seccomp compensation, where no user namespace
//!    can be made and `network.allow` is `[]`), `RLIMIT_NPROC` and `RLIMIT_CORE`, [allow mode:
//!    `lo` up, bind `127.0.0.1:0`, send port + fd over `SCM_RIGHTS`], capabilities dropped,
//!    Landlock, seccomp (the spec's table, then the floor no spec can lift), `execve`. Any
//!    failure: one line
//!    `sandbox setup failed, server not started: <layer>: <cause>; <fix>` on stderr, exit 126.
//! 5. In allow mode [`Prepared::receive_listener`] returns the listening socket (inside the
//!    server's namespace) that mcpsum's egress proxy accepts on.
//!
//! [`sandbox_test`] runs the same path with the probe ([`probe_main`], `__sandbox-probe`) as the
//! command and returns one row per promise.
//!
//! # Runtime base read set
//!
//! Every sandboxed server may read (and execute) [`RUNTIME_BASE`], skipping entries the system
//! does not have: code (`/usr`, `/lib`, `/lib64`, `/lib32`, `/bin`, `/sbin`), loader and identity
//! (`/etc/ld.so.cache`, `/etc/ld.so.conf(.d)`, `/etc/passwd`, `/etc/group`,
//! `/etc/nsswitch.conf`), time and locale (`/etc/localtime`, `/etc/timezone`,
//! `/etc/locale.alias`), TLS trust stores and OpenSSL configuration, never the key folders
//! ([`TLS_KEY_DIRS`]: `/etc/ssl/private`, `/etc/pki/tls/private`): `/etc/ssl/certs`,
//! `/etc/ssl/openssl.cnf(.d)`, `/etc/ssl/cert.pem`, `/etc/ssl/ca-bundle.pem`,
//! `/etc/ca-certificates(.conf)`, `/etc/pki/tls/certs`, `/etc/pki/tls/cert.pem`,
//! `/etc/pki/tls/openssl.cnf`, `/etc/pki/tls/openssl.d`, `/etc/pki/ca-trust/extracted`,
//! `/etc/crypto-policies`; resolver files (`/etc/hosts`, `/etc/host.conf`, `/etc/gai.conf`,
//! `/etc/resolv.conf`; no resolver is reachable inside), Debian links (`/etc/alternatives`,
//! `/etc/python*`, `/etc/mime.types`, `/etc/os-release`), `/dev/random`, `/dev/urandom`, all of
//! `/proc` read-only (Node counts CPUs from it; other processes' `environ` and memory stay
//! closed by Landlock's ptrace rules), `/sys/devices/system/cpu`, `/sys/fs/cgroup`,
//! `/sys/kernel/mm/transparent_hugepage`. `/dev/null`, `/dev/zero`, `/dev/full` are readable and
//! writable. `/etc` as a whole is not in the base (as root it would expose `shadow`).
//!
//! Every rule names a real path (`/lib` is `/usr/lib` on a merged-`/usr` system): the launcher
//! refuses a rule whose opened descriptor leads anywhere else (a path swapped for a link after
//! planning).
//!
//! Interpreter discovery adds the install prefix (the parent of a `bin/` or `shims/` directory)
//! of the command and of its `#!` interpreter (or the command `env` runs, `-S` included) when
//! they lie outside the base. Each path is made real first (`#!/etc/../bin/python3` is
//! `/usr/bin/python3`, not a prefix `/etc/..` that Landlock would open as `/`); a relative
//! interpreter is refused.
//!
//! The protected homes are [`Protected::home`] (`$HOME`) and [`Protected::other_homes`] (the
//! passwd home of the effective uid); the people's homes are [`user_homes`] (`/etc/passwd`
//! entries with a login shell, or below `/home` or `/root`). Below any of them a command's folder
//! widens only to a known install layout ([`HOME_INSTALL_LAYOUTS`]: nvm, pyenv versions and
//! root, uv tools and uv-managed Pythons, volta, fnm, asdf, mise, rustup toolchains, npm's
//! `~/.npm-global/lib/node_modules/P`, and `~/.cargo/bin` as itself); `~/.local/bin/srv` and any
//! other folder give the command's own folder: the rest of a home holds tokens no list names in
//! advance. Elsewhere the prefix is the parent of `bin/`. A prefix never is a home or an ancestor
//! of one, and never covers a protected path, a credential path ([`CREDENTIAL_PATHS`] below any
//! home) or the TLS keys: it shrinks to the file's directory, or the file itself. As a last
//! check ([`check_read_set`]) no read rule is `/` or an ancestor of a protected home, whatever
//! its origin, by path or by `(st_dev, st_ino)` (a bind mount of `/` or of a home under another
//! path); the launcher repeats the identity check on each opened descriptor. A `filesystem.*` entry may still open a credential path
//! on purpose; [`exposed_credentials`] names it, `lock` warns and `sandbox test` shows the row.
//! Likewise a `filesystem.write` entry on a system folder ([`SYSTEM_DIRS`]: `/usr`, `/opt`,
//! `/etc`, `/var/lib`, …, or an ancestor of one): [`system_write_rules`] names it, `lock` warns.
//!
//! # Environment
//!
//! The server gets exactly [`LaunchRequest::env`] (I2), plus `TMPDIR`/`TMP` = `${TMP}`, plus, for
//! `uv`/`uvx`, `UV_CACHE_DIR` and `UV_TOOL_DIR`, and for `npm`/`npx`, `npm_config_cache`, pointed
//! at `<state_dir>/cache/<server>/{uv,uv-tools,npm}` and added to the write set (design 7.3: those
//! launchers need a writable cache even offline; a compromised server can only poison its own).
//! These cache variables are an addition to I2 and override passed-through values. In allow mode
//! the launcher adds `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` (and lower-case twins) =
//! `http://127.0.0.1:PORT`, empty `NO_PROXY`/`no_proxy` and `NODE_USE_ENV_PROXY=1`.
//!
//! # Process tree
//!
//! The launcher first forks a guard that stays outside the sandbox: a child subreaper that ends
//! the server's whole tree (`setsid` daemons included) when the server exits or when mcpsum dies,
//! even by `SIGKILL` (`PR_SET_PDEATHSIG` fires on the death of the *thread* that spawned it, so
//! spawn from a long-lived thread: a tokio worker or the main thread, not `spawn_blocking`). The
//! guard exits with the server's status. The caller puts the launcher in its own process group
//! and signals the group for a graceful stop. `setsid`/`setpgid` stay allowed.

#![warn(missing_docs)]
// The std calls the workspace's `clippy.toml` steers to `fs-err` (its errors name the path), and
// the environment setters.
#![deny(clippy::disallowed_methods)]

use std::ffi::OsString;
use std::time::Duration;

mod observe;
mod plan;
mod policy;
mod report_model;

#[cfg(target_os = "linux")]
mod apparmor;
#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
mod fail;
#[cfg(target_os = "linux")]
mod guard;
#[cfg(target_os = "linux")]
mod launcher;
#[cfg(target_os = "linux")]
mod learn;
#[cfg(target_os = "linux")]
mod prepare;
#[cfg(target_os = "linux")]
mod probe;
#[cfg(target_os = "linux")]
mod report;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
mod sys;

pub use observe::{Observation, entry_path, opened_path, read_observations};
pub use plan::{
    ArgCmp, CLONE_NEW_FLAGS, CREDENTIAL_PATHS, Compensation, DEFAULT_PATH, EnvValue, FsRule,
    HOME_INSTALL_LAYOUTS, LandlockPlan, LaunchRequest, Origin, RUNTIME_BASE, RW_DEVICES,
    ReadOnlyView, SYSTEM_DIRS, SandboxPlan, SeccompTable, SyscallRule, TLS_KEY_DIRS, cache_env,
    check_read_set, compensations, credential_paths, exposed_credentials, is_system_folder,
    passwd_homes, plan, plan_for_kernel, plan_with_view, resolve_command, seccomp_table,
    system_write_rules, user_homes,
};
pub use policy::{
    Limits, NetworkMode, PolicyError, PolicyPath, Protected, SandboxPolicy, ValidatedPolicy,
    check_tasks, validate,
};

pub use report_model::{EgressCheck, EgressHook, LayerRow, RefusedBy, ReportRow, SandboxReport};

/// The variables that point a server at an egress proxy listening on `127.0.0.1:port`, with
/// their values: every proxy variable the common runtimes read (upper and lower case), no
/// exceptions (`NO_PROXY` empty), and Node's opt-in to honouring them. The launcher sets these
/// behind the bridge; learn mode sets them for its recording proxy.
pub fn egress_environment(port: u16) -> Vec<(OsString, OsString)> {
    let url = OsString::from(format!("http://127.0.0.1:{port}"));
    let mut env: Vec<(OsString, OsString)> = [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "https_proxy",
        "http_proxy",
        "all_proxy",
    ]
    .into_iter()
    .map(|n| (OsString::from(n), url.clone()))
    .collect();
    env.push(("NO_PROXY".into(), OsString::new()));
    env.push(("no_proxy".into(), OsString::new()));
    env.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    env
}

/// File name of the launcher binary, installed beside `mcpsum` (see [`launcher_binary_main`]).
pub const LAUNCHER_NAME: &str = "mcpsum-launch";
/// The launcher's entry point that applies a spec's layers and executes the server.
pub const EXEC_SUBCOMMAND: &str = "__sandbox-exec";
/// Name of the hidden subcommand that runs [`probe_main`].
pub const PROBE_SUBCOMMAND: &str = "__sandbox-probe";
/// The launcher's entry point that runs a server without a sandbox policy under its guard (and
/// the seccomp floor) alone.
pub const GUARD_SUBCOMMAND: &str = "__guard";
/// The entry point of `mcpsum` that runs a server without any sandbox under its guard while
/// recording what it does (learn mode), see [`learn_main`].
pub const LEARN_SUBCOMMAND: &str = "__learn";
/// The calls the launcher's seccomp floor refuses (EPERM) to whatever it executes, whatever its
/// spec or arguments say: creating or joining a namespace and every mount call. `clone` with a
/// `CLONE_NEW*` flag is refused too, and `clone3` answers ENOSYS (its flags are out of a
/// filter's reach; libc falls back to `clone`).
pub const FLOOR_SYSCALLS: &[&str] = &[
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
];
/// Exit status of the launcher when a layer cannot be applied.
pub const SETUP_FAILED_EXIT: i32 = 126;
/// How the launcher's one stderr line starts when a layer cannot be applied; `<layer>: <cause>;
/// <fix>` follows.
pub const SETUP_FAILED_PREFIX: &str = "sandbox setup failed, server not started: ";
/// The hint for Ubuntu's user-namespace restriction.
pub const APPARMOR_FIX: &str = "run scripts/install-apparmor.sh (as root) to install the AppArmor profile of mcpsum's launcher `mcpsum-launch`";

/// Why a sandbox could not be planned, prepared or tested.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// Not Linux: a server with a sandbox policy does not start.
    #[error(
        "sandbox: needs Linux (Landlock, seccomp, namespaces), so a server whose entry has `policy.sandbox` does not start on this system; run it on Linux. There is no flag to run it unsandboxed: removing `policy.sandbox` would drop the protection for everyone who shares the lockfile"
    )]
    Unsupported,
    /// A layer cannot be applied. Display: `<layer>: <cause>; <fix>`.
    #[error("{layer}: {cause}; {fix}")]
    Layer {
        /// `landlock`, `seccomp`, `user namespace`, `egress bridge`, `exec`, ...
        layer: String,
        /// What went wrong.
        cause: String,
        /// What to do.
        fix: String,
    },
    /// An I/O error while preparing (names what was being done).
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl SandboxError {
    pub(crate) fn layer(
        layer: impl Into<String>,
        cause: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        SandboxError::Layer {
            layer: layer.into(),
            cause: cause.into(),
            fix: fix.into(),
        }
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SandboxError::Io {
            context: context.into(),
            source,
        }
    }
}

#[cfg(target_os = "linux")]
pub use prepare::{Prepared, open_launcher, open_launcher_at, prepare};
#[cfg(target_os = "linux")]
pub use report::{sandbox_test, sandbox_test_plan};

/// The running kernel's Landlock ABI version (0: absent or disabled), for `mcpsum doctor`.
#[cfg(target_os = "linux")]
pub fn landlock_abi_version() -> u32 {
    sys::landlock_abi()
}

/// Whether AppArmor takes every capability from a user namespace the launcher makes (Ubuntu
/// >= 23.10 without the launcher's profile loaded), for `mcpsum doctor`.
#[cfg(target_os = "linux")]
pub fn apparmor_blocks_launcher() -> bool {
    apparmor::apparmor_restricts_userns()
}

/// Non-Linux stand-ins: every entry point refuses with [`SandboxError::Unsupported`].
#[cfg(not(target_os = "linux"))]
mod unsupported;
#[cfg(not(target_os = "linux"))]
pub use unsupported::*;

/// The whole `main` of the launcher binary ([`LAUNCHER_NAME`]), the one file the AppArmor
/// profile grants `userns` to. It has exactly one entry point, `__sandbox-exec SPEC`: it applies
/// every layer of the spec and `execve`s the server; on failure it prints one line and exits
/// 126. (A server without a sandbox policy is started by `mcpsum __guard`, see [`guard_main`]:
/// mcpsum holds no grant, so that server keeps what it would have outside mcpsum.)
///
/// Whatever the spec says, what it executes runs under the seccomp floor ([`FLOOR_SYSCALLS`]): it can create no namespace and mount nothing, so the profile's
/// `userns` grant never reaches a server. Anything else prints a usage line and exits 2,
/// executing nothing. Never returns.
pub fn launcher_binary_main() -> ! {
    let mut args = std::env::args_os();
    let _argv0 = args.next();
    let mode = args.next();
    let rest: Vec<OsString> = args.collect();
    #[cfg(target_os = "linux")]
    {
        match mode {
            Some(m) if m == EXEC_SUBCOMMAND => launcher::main(rest),
            _ => launcher_usage(),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (mode, rest);
        unsupported::fail()
    }
}

/// Entry point of `mcpsum __guard PARENT_PID PROGRAM ARGV0 [ARGS...]`: a server without a sandbox
/// policy, under the guard alone (its tree ends with it and with mcpsum), executed as it would
/// run outside mcpsum: no seccomp floor, no `no_new_privs`. It is an entry point of `mcpsum`,
/// never of the launcher, so the launcher's AppArmor `userns` grant cannot reach such a server.
/// Never returns.
pub fn guard_main(args: Vec<OsString>) -> ! {
    #[cfg(target_os = "linux")]
    {
        guard::guard_main(args)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        unsupported::fail()
    }
}

/// Entry point of `mcpsum __learn FILE PARENT_PID PROGRAM ARGV0 [ARGS...]` (learn mode): as
/// [`guard_main`], and the guard records every file the server's whole tree opens for reading
/// or writing, executes or creates, and every address it connects to, appending one JSON
/// [`Observation`] per new line to `FILE`. The server runs with `no_new_privs` (a seccomp
/// listener needs it), otherwise unrestricted. Never returns.
pub fn learn_main(args: Vec<OsString>) -> ! {
    #[cfg(target_os = "linux")]
    {
        guard::learn_main(args)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        unsupported::fail()
    }
}

/// Someone ran the launcher by hand.
#[cfg(target_os = "linux")]
fn launcher_usage() -> ! {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "error: `{LAUNCHER_NAME}` is mcpsum's sandbox launcher and is not meant to be run by hand\n\n\
         hint: run servers through `mcpsum` (`mcpsum lock`, `mcpsum proxy`, `mcpsum sandbox test`)"
    );
    std::process::exit(2)
}

/// Entry point of `mcpsum __sandbox-probe ARGS`: runs inside the sandbox, performs the
/// operations of its JSON argument and prints the observations as JSON on stdout. Never returns.
pub fn probe_main(args: Vec<OsString>) -> ! {
    #[cfg(target_os = "linux")]
    {
        probe::main(args)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        unsupported::fail()
    }
}

/// The command that starts `program` (resolved) with `argv` (`argv[0]` first) under a guard
/// that ends the server's whole tree with it or with this process, even a `SIGKILL`ed one. Set
/// its environment, stdio and process group as for the server itself. Fails when the launcher
/// binary is missing (the guard is part of it). Elsewhere than Linux, the program itself.
pub fn guarded_command(
    program: &std::path::Path,
    argv: &[String],
) -> Result<std::process::Command, SandboxError> {
    #[cfg(target_os = "linux")]
    {
        guard::guarded_command(program, argv, None)
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new(program);
        if let Some((first, rest)) = argv.split_first() {
            command.arg0(first).args(rest);
        }
        Ok(command)
    }
}

/// [`guarded_command`], learning: the guard records what the server's tree does into
/// `observations` (see [`learn_main`]). Elsewhere than Linux, [`SandboxError::Unsupported`].
pub fn learning_command(
    program: &std::path::Path,
    argv: &[String],
    observations: &std::path::Path,
) -> Result<std::process::Command, SandboxError> {
    #[cfg(target_os = "linux")]
    {
        guard::guarded_command(program, argv, Some(observations))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (program, argv, observations);
        Err(SandboxError::Unsupported)
    }
}

/// Kills every descendant of this process, round after round, reaping them, until none is left
/// (what a guard does when its server ends; mcpsum, a subreaper too, does it before it exits),
/// then removes the task cgroups of guards killed before they could (see `cgroup`).
/// Elsewhere than Linux, nothing.
pub fn end_descendants() {
    #[cfg(target_os = "linux")]
    {
        guard::end_tree();
        cgroup::sweep();
    }
}

/// Default time [`Prepared::receive_listener`] should wait for the launcher (design 4.6).
pub const BRIDGE_TIMEOUT: Duration = Duration::from_secs(5);
