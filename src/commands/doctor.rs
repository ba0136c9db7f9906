//! `mcpsum doctor`: what this machine offers mcpsum and what is in its way, each problem with
//! its fix. It reads only: kernel features (Landlock, seccomp, user namespaces and Ubuntu's
//! AppArmor restriction of them), the launcher beside the binary, the state directory, the
//! project's lockfile and the user-level one with the signature of each (judged as the proxy
//! judges it, against the allowed-signers file in force), and the MCP configs of the clients
//! `import` knows (which servers they route through mcpsum). It starts nothing and writes
//! nothing.

use serde_json::{Value, json};

use crate::cli::DoctorArgs;
use crate::commands::import::clients::{self, Client, Kind};
use crate::error::{Exit, Result};
use crate::output::{self, paint, style};
use crate::signing::{self, Reason, State, Trust};
use crate::text::sanitize_line;
use crate::{lockfile, paths};

/// How a check came out; ordered by strictness so the run's verdict is the `max()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Ok,
    /// Worth knowing; nothing fails because of it.
    Note,
    /// Something mcpsum needs is missing or wrong.
    Problem,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Note => "note",
            Status::Problem => "problem",
        }
    }
}

/// One finding: what was checked, what was found, and the fix when there is one.
struct Check {
    area: &'static str,
    status: Status,
    found: String,
    fix: Option<String>,
}

fn check(area: &'static str, status: Status, found: impl Into<String>) -> Check {
    Check {
        area,
        status,
        found: found.into(),
        fix: None,
    }
}

impl Check {
    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// Runs `doctor`.
pub fn run(
    lockfile_flag: Option<&std::path::Path>,
    args: &DoctorArgs,
    trust: &Trust,
) -> Result<Exit> {
    let mut checks = Vec::new();
    sandbox_checks(&mut checks);
    checks.push(launcher_check());
    checks.push(state_check());
    lockfile_checks(lockfile_flag, trust, &mut checks);
    client_checks(&mut checks);

    let worst = checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
    let exit = if worst == Status::Problem {
        Exit::Problem
    } else {
        Exit::Ok
    };
    if args.json {
        let doc: Vec<Value> = checks
            .iter()
            .map(|c| json!({"area": c.area, "status": c.status.word(), "found": c.found, "fix": c.fix}))
            .collect();
        output::stdout_json(&json!({"exitCode": exit as i32, "checks": doc}));
        return Ok(exit);
    }
    let mut out = String::new();
    for c in &checks {
        let mark = match c.status {
            Status::Ok => paint(style::OK, "ok"),
            Status::Note => paint(style::WARN, "note"),
            Status::Problem => paint(style::ERROR, "problem"),
        };
        out.push_str(&format!("{mark} {}: {}\n", c.area, sanitize_line(&c.found)));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("  fix: {}\n", sanitize_line(fix)));
        }
    }
    let problems = checks
        .iter()
        .filter(|c| c.status == Status::Problem)
        .count();
    out.push_str(&match problems {
        0 => "\nno problems found\n".to_owned(),
        1 => "\n1 problem found\n".to_owned(),
        n => format!("\n{n} problems found\n"),
    });
    output::stdout(&out);
    Ok(exit)
}

/// Landlock, seccomp, user namespaces and AppArmor: what `policy.sandbox` needs of the kernel.
#[cfg(target_os = "linux")]
fn sandbox_checks(out: &mut Vec<Check>) {
    let abi = mcpsum_sandbox::landlock_abi_version();
    out.push(if abi == 0 {
        check("landlock", Status::Problem, "Landlock is absent or disabled, so servers with `policy.sandbox` refuse to start")
            .fix("boot a kernel >= 5.13 with `landlock` in its `lsm=` list (see `/sys/kernel/security/lsm`)")
    } else if abi < 4 {
        check("landlock", Status::Note, format!("ABI {abi}: network rules and some file rights come from seccomp instead (`mcpsum sandbox test --name NAME` shows each)"))
    } else {
        check("landlock", Status::Ok, format!("ABI {abi}"))
    });
    let status = read_trim("/proc/self/status");
    let seccomp = status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:"))
        .map(str::trim);
    out.push(match seccomp {
        Some(_) => check(
            "seccomp",
            Status::Ok,
            "the kernel filters system calls (`Seccomp:` in `/proc/self/status`)",
        ),
        None => check(
            "seccomp",
            Status::Problem,
            "the kernel has no seccomp, so no server can start under mcpsum's launcher",
        )
        .fix("use a kernel built with CONFIG_SECCOMP_FILTER"),
    });
    let max_userns = read_trim("/proc/sys/user/max_user_namespaces");
    let debian = read_trim("/proc/sys/kernel/unprivileged_userns_clone");
    out.push(if max_userns == "0" {
        check("user namespaces", Status::Problem, "`user.max_user_namespaces` is 0, so the sandbox cannot build its namespaces")
            .fix("`sudo sysctl -w user.max_user_namespaces=15000` (and in `/etc/sysctl.d/` to keep it)")
    } else if debian == "0" {
        check("user namespaces", Status::Problem, "`kernel.unprivileged_userns_clone` is 0, so the sandbox cannot build its namespaces")
            .fix("`sudo sysctl -w kernel.unprivileged_userns_clone=1` (and in `/etc/sysctl.d/` to keep it)")
    } else {
        check("user namespaces", Status::Ok, "unprivileged user namespaces are allowed")
    });
    out.push(if mcpsum_sandbox::apparmor_blocks_launcher() {
        check("apparmor", Status::Problem, "AppArmor restricts unprivileged user namespaces and the profile of `mcpsum-launch` is not loaded")
            .fix(mcpsum_sandbox::APPARMOR_FIX)
    } else if read_trim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" {
        check("apparmor", Status::Ok, "user namespaces are restricted, and the profile of `mcpsum-launch` is loaded")
    } else {
        check("apparmor", Status::Ok, "no restriction of user namespaces")
    });
}

/// Elsewhere the sandbox does not exist: said once, with what it means for a lockfile.
#[cfg(not(target_os = "linux"))]
fn sandbox_checks(out: &mut Vec<Check>) {
    out.push(check("sandbox", Status::Note, "the sandbox needs Linux: servers with `policy.sandbox` refuse to start here; the rest of mcpsum works"));
}

/// The launcher binary every server starts through.
fn launcher_check() -> Check {
    let exe = std::env::current_exe().ok();
    let launcher = exe
        .as_deref()
        .and_then(std::path::Path::parent)
        .map(|d| d.join(mcpsum_sandbox::LAUNCHER_NAME));
    match launcher {
        Some(p) if p.is_file() => check("launcher", Status::Ok, format!("`{}`", p.display())),
        Some(p) => check(
            "launcher",
            Status::Problem,
            format!("`{}` is missing, so no server can start", p.display()),
        )
        .fix(format!(
            "install `{}` beside `mcpsum` (`cargo install` puts both in place)",
            mcpsum_sandbox::LAUNCHER_NAME
        )),
        None => check(
            "launcher",
            Status::Problem,
            "cannot tell where the `mcpsum` binary is",
        )
        .fix("run mcpsum by its installed path"),
    }
}

/// The state directory: taint state and the audit log, which no other user may change.
fn state_check() -> Check {
    let dir = match paths::state_dir() {
        Ok(d) => d,
        Err(e) => {
            let c = check("state directory", Status::Problem, e.one_line());
            return match e.hint_text() {
                Some(h) => c.fix(h),
                None => c,
            };
        }
    };
    if !dir.exists() {
        return check(
            "state directory",
            Status::Ok,
            format!(
                "`{}` (created, mode 0700, when first needed)",
                dir.display()
            ),
        );
    }
    match paths::private_dir_problem(&dir) {
        None => check("state directory", Status::Ok, format!("`{}`, private", dir.display())),
        Some(why) => check("state directory", Status::Problem, format!("`{}` is not private: {why}", dir.display()))
            .fix(format!("make it yours and not writable by others (`chmod go-w {}`), or set `MCPSUM_STATE_DIR` to a private directory", dir.display())),
    }
}

/// The lockfile this directory uses and the user-level one (`import`'s, for the servers of
/// user-level client configs) when it exists: whether each loads, and its signature.
fn lockfile_checks(flag: Option<&std::path::Path>, trust: &Trust, out: &mut Vec<Check>) {
    let project = match paths::find_lockfile(flag) {
        Ok(Some(p)) => Some(p),
        Ok(None) => {
            out.push(check("lockfile", Status::Note, format!("no `{}` here or in a parent", paths::LOCKFILE_NAME))
                .fix("create one with `mcpsum import` (the servers your clients run) or `mcpsum lock --name NAME -- COMMAND...`"));
            None
        }
        Err(e) => {
            out.push(check("lockfile", Status::Problem, e.one_line()));
            None
        }
    };
    if let Some(path) = &project {
        out.push(lockfile_check("lockfile", path));
        out.extend(signature_check("lockfile signature", path, trust));
    }
    let user = paths::user_lockfile().filter(|p| p.is_file());
    if let Some(user) = user {
        let same = project
            .as_ref()
            .is_some_and(|p| fs_err::canonicalize(p).ok() == fs_err::canonicalize(&user).ok());
        if !same {
            out.push(lockfile_check("user lockfile", &user));
            out.extend(signature_check("user lockfile signature", &user, trust));
        }
    }
}

/// The signature of the lockfile at `path`, judged as the proxy judges it: with an
/// allowed-signers file in force, one that is not valid is a problem (every proxy refuses the
/// lockfile's servers). Nothing when the lockfile cannot be read (its own check says so).
fn signature_check(area: &'static str, path: &std::path::Path, trust: &Trust) -> Option<Check> {
    let bytes = lockfile::read_bytes(path).ok()?;
    let status = match signing::inspect(path, &bytes, trust) {
        Ok(s) => s,
        // The allowed-signers file in force cannot be used: every command that reads a
        // lockfile refuses, the proxy included.
        Err(e) => {
            let c = check(area, Status::Problem, e.one_line());
            return Some(match e.hint_text() {
                Some(h) => c.fix(h),
                None => c,
            });
        }
    };
    let shown = path.display();
    Some(match (&status.state, &status.anchor) {
        (State::Valid(_), _) => check(area, Status::Ok, format!("`{shown}`: {}", status.summary())),
        (State::Invalid { detail, hint, .. }, Some(anchor)) => check(
            area,
            Status::Problem,
            format!(
                "`{shown}` has no valid signature: {detail}; the allowed signers `{}` are in force, so every proxy refuses its servers",
                anchor.path.display()
            ),
        )
        .fix(hint.replace("ALLOWED_SIGNERS", &format!("`{}`", anchor.path.display()))),
        (
            State::Invalid {
                reason,
                detail,
                hint,
                ..
            },
            None,
        ) => {
            let c = check(
                area,
                Status::Note,
                format!(
                    "`{shown}`: {detail}; no allowed-signers file is in force, so proxies do not require a signature"
                ),
            );
            match reason {
                Reason::Unsigned => c,
                _ => c.fix(hint.replace("ALLOWED_SIGNERS", "your allowed-signers file")),
            }
        }
    })
}

/// Whether the lockfile at `path` loads, and what it holds.
fn lockfile_check(area: &'static str, path: &std::path::Path) -> Check {
    let path = path.to_path_buf();
    match lockfile::load(&path) {
        Ok(lock) => {
            let sandboxed = lock
                .servers
                .values()
                .filter(|e| e.sandbox().is_some())
                .count();
            check(
                area,
                Status::Ok,
                format!(
                    "`{}`: {} server{}, {sandboxed} with `policy.sandbox`",
                    path.display(),
                    lock.servers.len(),
                    if lock.servers.len() == 1 { "" } else { "s" }
                ),
            )
        }
        Err(e) => {
            let c = check(
                area,
                Status::Problem,
                format!("`{}` does not load: {}", path.display(), e.one_line()),
            );
            match e.hint_text() {
                Some(h) => c.fix(h),
                None => c,
            }
        }
    }
}

/// Each client config found: which of its servers run through mcpsum and which do not.
fn client_checks(out: &mut Vec<Check>) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let home = paths::home_dir();
    let mut found = false;
    for client in Client::NAMED {
        for source in clients::candidates(client, &cwd, home.as_deref()) {
            let Ok(text) = fs_err::read_to_string(&source.path) else {
                continue;
            };
            found = true;
            let label = format!("{} `{}`", client.title(), source.path.display());
            let parsed = match clients::parse(&source, &text) {
                Ok(p) => p,
                Err(e) => {
                    out.push(
                        check(
                            "client config",
                            Status::Problem,
                            format!("{label} cannot be read: {e}"),
                        )
                        .fix("fix the file's syntax; the client cannot read it either"),
                    );
                    continue;
                }
            };
            let (mut routed, mut direct, mut remote) = (Vec::new(), Vec::new(), Vec::new());
            for e in &parsed.entries {
                match &e.kind {
                    Kind::Routed { lock_name } => routed.push(match lock_name {
                        Some(n) if n != &e.name => format!("{} (as `{n}`)", e.name),
                        _ => e.name.clone(),
                    }),
                    Kind::Stdio(_) => direct.push(e.name.clone()),
                    Kind::Remote { .. } => remote.push(e.name.clone()),
                    Kind::Skipped(_) => {}
                }
            }
            let list = |v: &[String]| {
                v.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut found_text = label.clone();
            if !routed.is_empty() {
                found_text.push_str(&format!("; through mcpsum: {}", list(&routed)));
            }
            if !remote.is_empty() {
                found_text.push_str(&format!("; remote, not proxied: {}", list(&remote)));
            }
            if direct.is_empty() {
                if routed.is_empty() && remote.is_empty() {
                    found_text.push_str("; no servers");
                }
                out.push(check("client config", Status::Ok, found_text));
            } else {
                found_text.push_str(&format!("; not through mcpsum: {}", list(&direct)));
                out.push(check("client config", Status::Note, found_text).fix(format!(
                    "lock them and route them through mcpsum with `mcpsum import --from {} --write`",
                    if client == Client::Other { "PATH" } else { client.slug() }
                )));
            }
        }
    }
    if !found {
        out.push(check(
            "client config",
            Status::Note,
            "no MCP client config found here or in your home directory",
        ));
    }
}

/// A small kernel or proc file, trimmed; empty when it cannot be read.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn read_trim(path: &str) -> String {
    fs_err::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}
