//! `mcpsum sandbox test`: build the server's sandbox exactly as the proxy would, with the probe as
//! the command, and compare each observation with what the plan promises.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use crate::plan::{EnvValue, FsRule, Origin, ReadOnlyView, SandboxPlan, plan};
use crate::policy::{NetworkMode, PolicyPath, Protected};
use crate::probe::{MetaCall, Outcome, ProbeOp};
use crate::report_model::{EgressHook, LayerRow, RefusedBy, ReportRow, SandboxReport};
use crate::{BRIDGE_TIMEOUT, LaunchRequest, PROBE_SUBCOMMAND, SETUP_FAILED_EXIT, SandboxError};

/// How long the probe may run.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Debug)]
enum Expect {
    Allowed,
    Refused,
    Errno(&'static str),
    /// Refused with one of these errnos.
    Errnos(&'static [&'static str]),
    Value(String),
    /// Informational: any outcome passes (a documented compensation).
    Any(String),
    /// Any of these values passes; the text says what is expected.
    OneOf(Vec<String>, String),
    /// A value containing this text passes; the text says what is expected.
    Contains(&'static str, String),
}

impl Expect {
    fn text(&self) -> String {
        match self {
            Expect::Allowed => "allowed".into(),
            Expect::Refused => "refused".into(),
            Expect::Errno(e) => format!("refused ({e})"),
            Expect::Errnos(es) => format!("refused ({})", es.join(" or ")),
            Expect::Value(v) => v.clone(),
            Expect::Any(why) | Expect::OneOf(_, why) | Expect::Contains(_, why) => why.clone(),
        }
    }

    fn pass(&self, o: &Outcome) -> bool {
        match (self, o) {
            (Expect::Allowed, Outcome::Ok)
            | (Expect::Refused, Outcome::Errno(_))
            | (Expect::Any(_), _) => true,
            (Expect::Errno(e), Outcome::Errno(g)) => e == g,
            (Expect::Errnos(es), Outcome::Errno(g)) => es.contains(&g.as_str()),
            (Expect::Value(v), Outcome::Value(g)) => v == g,
            (Expect::OneOf(vs, _), Outcome::Value(g)) => vs.contains(g),
            (Expect::Contains(part, _), Outcome::Value(g)) => g.contains(part),
            _ => false,
        }
    }
}

/// Builds `req`'s sandbox as the proxy would, runs the probe (the current executable with
/// `__sandbox-probe`) in it, and returns one row per promise. `Err` means the sandbox could not
/// be built (exit 2); a report with a failed row means a promise does not hold (exit 1).
///
/// The probe binary itself is added to the read set (it replaces the locked command); the
/// command's prefixes found on the server's `PATH` stay in the read set, so the check covers the
/// set the real server gets.
pub fn sandbox_test(
    req: &LaunchRequest,
    protected: &Protected,
    egress: Option<EgressHook>,
) -> Result<SandboxReport, SandboxError> {
    sandbox_test_plan(plan(req)?, protected, egress)
}

/// [`sandbox_test`] on a given plan. Expectations come from the plan, so a test build can weaken
/// a layer (drop a seccomp rule, add a write rule) and see the report fail.
pub fn sandbox_test_plan(
    mut plan: SandboxPlan,
    protected: &Protected,
    egress: Option<EgressHook>,
) -> Result<SandboxReport, SandboxError> {
    let exe = std::env::current_exe()
        .and_then(fs_err::canonicalize)
        .map_err(|e| SandboxError::io("finding the current executable", e))?;

    // Targets outside the sandbox: a listening pathname and abstract Unix socket (think
    // ssh-agent, Docker) and a TCP listener on the host's loopback.
    let outside = tempfile::Builder::new()
        .prefix("mcpsum-probe-")
        .tempdir()
        .map_err(|e| SandboxError::io("creating a temporary directory", e))?;
    let sock_path = outside.path().join("agent.sock");
    let _unix = std::os::unix::net::UnixListener::bind(&sock_path)
        .map_err(|e| SandboxError::io(format!("binding `{}`", sock_path.display()), e))?;
    let abstract_name = format!("mcpsum-probe-{}-{}", std::process::id(), unique());
    let _abstract = {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
            .and_then(|a| std::os::unix::net::UnixListener::bind_addr(&a))
            .map_err(|e| SandboxError::io("binding an abstract unix socket", e))?
    };
    // A file outside every rule that only `truncate(2)` touches (Landlock governs that call
    // from ABI 3 on; below, the seccomp compensation must refuse it).
    let trunc_path = outside.path().join("truncate-me");
    fs_err::write(&trunc_path, b"outside")
        .map_err(|e| SandboxError::io("writing the probe's truncation target", e))?;
    let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| SandboxError::io("binding 127.0.0.1:0", e))?;
    let tcp_addr = tcp
        .local_addr()
        .map_err(|e| SandboxError::io("binding 127.0.0.1:0", e))?;

    let checks = build_checks(
        &plan,
        protected,
        &sock_path,
        &abstract_name,
        &trunc_path,
        tcp_addr,
        egress.as_ref(),
    );
    let ops: Vec<ProbeOp> = checks.iter().map(|(_, op, _)| op.clone()).collect();
    let ops_json = serde_json::to_string(&ops)
        .map_err(|e| SandboxError::layer("probe", e.to_string(), "use UTF-8 paths"))?;
    plan.program.clone_from(&exe);
    plan.argv = vec![
        exe.to_string_lossy().into_owned(),
        PROBE_SUBCOMMAND.into(),
        ops_json,
    ];
    plan.read.push(FsRule {
        path: PolicyPath::Host(exe),
        origin: Origin::Probe,
        required: true,
    });
    let layers = layer_rows(&plan);
    let set = |rules: &[FsRule]| {
        rules
            .iter()
            .filter(|r| r.required || path_exists(&r.path))
            .map(|r| (r.path.to_string(), r.origin.to_string()))
            .collect::<Vec<_>>()
    };
    let read_set = set(&plan.read);
    let write_set = set(&plan.write);
    let server = plan.server.clone();

    let mut prepared = crate::prepare(plan)?;
    prepared
        .command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = prepared
        .command
        .spawn()
        .map_err(|e| SandboxError::io("starting the sandbox launcher", e))?;
    let pgid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
    let kill = || {
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    };
    let mut _listener = None;
    match prepared.receive_listener(BRIDGE_TIMEOUT) {
        Ok(Some(l)) => match egress {
            Some(hook) => (hook.serve)(l),
            None => _listener = Some(l),
        },
        Ok(None) => {}
        Err(e) => {
            kill();
            let _ = child.wait();
            let stderr = read_all(child.stderr.take());
            return Err(setup_error(&stderr).unwrap_or(e));
        }
    }

    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let out = read_all(stdout.take());
        let err = read_all(stderr.take());
        let _ = tx.send((out, err));
    });
    let (out, err) = match rx.recv_timeout(PROBE_TIMEOUT) {
        Ok(v) => v,
        Err(_) => {
            kill();
            let _ = child.wait();
            return Err(SandboxError::layer(
                "probe",
                format!("no answer within {PROBE_TIMEOUT:?}"),
                "retry; if it persists, report it",
            ));
        }
    };
    let status = child
        .wait()
        .map_err(|e| SandboxError::io("waiting for the probe", e))?;
    if status.code() == Some(SETUP_FAILED_EXIT)
        && let Some(e) = setup_error(&err)
    {
        return Err(e);
    }
    let outcomes: Vec<Outcome> = serde_json::from_str(out.trim()).map_err(|_| {
        SandboxError::layer(
            "probe",
            format!("unreadable answer ({status}); stderr: {}", err.trim()),
            "make sure the binary dispatches `__sandbox-probe` to mcpsum_sandbox::probe_main",
        )
    })?;
    if outcomes.len() != checks.len() {
        return Err(SandboxError::layer(
            "probe",
            "answered a different number of checks",
            "report it",
        ));
    }
    let rows = checks
        .into_iter()
        .zip(outcomes)
        .map(|((check, op, expect), got)| {
            let outside = outside_the_sandbox(&op, &got);
            ReportRow {
                check,
                expected: expect.text(),
                observed: got.text(),
                pass: expect.pass(&got),
                refused_by: outside.as_ref().map(|o| match o {
                    Outcome::Ok => RefusedBy::Sandbox,
                    _ => RefusedBy::OutsideToo,
                }),
                outside: outside.as_ref().map(Outcome::text),
            }
        })
        .collect();
    drop(prepared);
    Ok(SandboxReport {
        server,
        layers,
        read_set,
        write_set,
        rows,
    })
}

/// What `op` does outside the sandbox, made here by the same user, when the probe saw it refused
/// inside: a refusal that plain file permissions (or a missing path) make anyway shows nothing
/// about the sandbox. Only file accesses and a pathname socket are compared; each is harmless
/// where it is allowed (see `probe`: reads read one byte, writes append nothing or create and
/// remove a file of their own, metadata calls set what is there). `${TMP}` paths exist only
/// inside.
fn outside_the_sandbox(op: &ProbeOp, inside: &Outcome) -> Option<Outcome> {
    if !matches!(inside, Outcome::Errno(_)) {
        return None;
    }
    let (ProbeOp::Read(path)
    | ProbeOp::Write(path)
    | ProbeOp::Truncate(path)
    | ProbeOp::Meta(_, path)
    | ProbeOp::UnixConnect(path)) = op
    else {
        return None;
    };
    if path.starts_with(crate::probe::TMP_MARK) {
        return None;
    }
    match crate::probe::run(op) {
        // Replacing an attribute the file does not have passed every permission check.
        Outcome::Errno(e)
            if e == "ENODATA" && matches!(op, ProbeOp::Meta(MetaCall::Setxattr, _)) =>
        {
            Some(Outcome::Ok)
        }
        got => Some(got),
    }
}

fn unique() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()))
}

fn path_exists(p: &PolicyPath) -> bool {
    match p {
        PolicyPath::Host(h) => h.exists(),
        PolicyPath::Tmp(_) => true,
    }
}

fn read_all(r: Option<impl Read>) -> String {
    let mut s = String::new();
    if let Some(mut r) = r {
        let _ = r.read_to_string(&mut s);
    }
    s
}

/// Parses the launcher's one line back into a [`SandboxError::Layer`].
fn setup_error(stderr: &str) -> Option<SandboxError> {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix(crate::SETUP_FAILED_PREFIX))?;
    let (layer, rest) = line.split_once(": ")?;
    let (cause, fix) = rest.rsplit_once("; ").unwrap_or((rest, ""));
    Some(SandboxError::layer(layer, cause, fix))
}

fn covered(p: &Path, rules: &[FsRule]) -> bool {
    rules
        .iter()
        .any(|r| matches!(&r.path, PolicyPath::Host(h) if p.starts_with(h)))
}

fn probe_path(p: &PolicyPath) -> PathBuf {
    match p {
        PolicyPath::Host(h) => h.clone(),
        PolicyPath::Tmp(rel) => Path::new(crate::probe::TMP_MARK).join(rel),
    }
}

fn build_checks(
    plan: &SandboxPlan,
    protected: &Protected,
    sock_path: &Path,
    abstract_name: &str,
    trunc_path: &Path,
    outside_tcp: SocketAddr,
    egress: Option<&EgressHook>,
) -> Vec<(String, ProbeOp, Expect)> {
    let egress_mode = matches!(plan.network, NetworkMode::Egress { .. });
    let mut c: Vec<(String, ProbeOp, Expect)> = Vec::new();
    for r in plan.read.iter().filter(|r| r.required) {
        c.push((
            format!("read {} ({})", r.path, r.origin),
            ProbeOp::Read(probe_path(&r.path)),
            Expect::Allowed,
        ));
    }
    for r in &plan.write {
        c.push((
            format!("write {} ({})", r.path, r.origin),
            ProbeOp::Write(probe_path(&r.path)),
            Expect::Allowed,
        ));
    }
    let all: Vec<FsRule> = plan.read.iter().chain(&plan.write).cloned().collect();
    // `$HOME` and the user's home in passwd, when they differ: both are protected alike.
    for home in protected.home.iter().chain(&protected.other_homes) {
        let home = crate::policy::canonical_or_lexical(home);
        if !covered(&home, &all) {
            c.push((
                format!("read home {}", home.display()),
                ProbeOp::Read(home),
                Expect::Refused,
            ));
        }
    }
    // Credential exclusions: each listed credential path that exists stays closed, unless a
    // `filesystem.*` entry opens it on purpose (then the row is the warning).
    for home in protected.home.iter().chain(&protected.other_homes) {
        for cred in crate::plan::credential_paths(home) {
            if cred.symlink_metadata().is_err() {
                continue;
            }
            // Listed: the entry covers it, or lies inside it (then the entry is what opens).
            let listed = all.iter().find_map(|r| match (&r.path, &r.origin) {
                (PolicyPath::Host(h), Origin::Policy(key))
                    if cred.starts_with(h) || h.starts_with(&cred) =>
                {
                    Some((key, if h.starts_with(&cred) { h } else { &cred }))
                }
                _ => None,
            });
            c.push(match listed {
                Some((key, opened)) => (
                    format!(
                        "read credential {} (warning: opened by `{key}`)",
                        opened.display()
                    ),
                    ProbeOp::Read(opened.clone()),
                    Expect::Any(format!("readable: listed in `{key}`")),
                ),
                None => (
                    format!("read credential {}", cred.display()),
                    ProbeOp::Read(cred),
                    Expect::Refused,
                ),
            });
        }
    }
    for dir in crate::plan::TLS_KEY_DIRS.iter().map(Path::new) {
        if dir.exists() && !covered(dir, &all) {
            c.push((
                format!("read TLS private keys {}", dir.display()),
                ProbeOp::Read(dir.to_path_buf()),
                Expect::Refused,
            ));
        }
    }
    let lock = crate::policy::canonical_or_lexical(&protected.lockfile);
    if lock.exists() && !covered(&lock, &all) {
        c.push((
            format!("read lockfile {}", lock.display()),
            ProbeOp::Read(lock.clone()),
            Expect::Refused,
        ));
    }
    if let Some(dir) = lock.parent().filter(|d| d.exists()) {
        c.push((
            format!("write elsewhere {}", dir.display()),
            ProbeOp::Write(dir.to_path_buf()),
            Expect::Refused,
        ));
    }
    let host_tmp = crate::policy::canonical_or_lexical(&std::env::temp_dir());
    if !covered(&host_tmp, &plan.write) {
        c.push((
            format!("write elsewhere {}", host_tmp.display()),
            ProbeOp::Write(host_tmp),
            Expect::Refused,
        ));
    }

    // Path-based truncation: Landlock's right from ABI 3, the seccomp rule below it.
    let seccomp_truncate = plan.seccomp.eperm.iter().any(|r| r.syscall == "truncate");
    c.push((
        format!(
            "truncate ({}) {}",
            if seccomp_truncate {
                "seccomp"
            } else {
                "landlock"
            },
            trunc_path.display()
        ),
        ProbeOp::Truncate(trunc_path.to_path_buf()),
        // The read-only view answers before Landlock does.
        if seccomp_truncate {
            Expect::Errno("EPERM")
        } else {
            Expect::Errnos(&["EACCES", "EROFS"])
        },
    ));

    metadata_checks(&mut c, plan, protected, trunc_path);
    limit_checks(&mut c, plan);

    // Landlock denies ptrace-class access outside the domain, even with /proc readable.
    c.push((
        "read environ of a process outside".into(),
        ProbeOp::Read(PathBuf::from(format!(
            "/proc/{}/environ",
            std::process::id()
        ))),
        Expect::Refused,
    ));

    let mut names = plan.env_names();
    if egress_mode {
        for (n, _) in crate::egress_environment(0) {
            let n = n.to_string_lossy();
            if !names.iter().any(|x| *x == n) {
                names.push(n.into_owned());
            }
        }
    }
    names.sort();
    c.push((
        "environment: only passed variables".into(),
        ProbeOp::EnvNames,
        Expect::Value(names.join(" ")),
    ));

    let inet = if egress_mode {
        Expect::Allowed
    } else {
        Expect::Errno("EPERM")
    };
    c.push((
        "socket(AF_INET)".into(),
        ProbeOp::Socket(libc::AF_INET),
        inet.clone(),
    ));
    c.push((
        "socket(AF_INET6)".into(),
        ProbeOp::Socket(libc::AF_INET6),
        inet,
    ));
    for (name, fam) in [
        ("socket(AF_UNIX)", libc::AF_UNIX),
        ("socket(AF_NETLINK)", libc::AF_NETLINK),
        ("socket(AF_PACKET)", libc::AF_PACKET),
        ("socket(AF_VSOCK)", libc::AF_VSOCK),
    ] {
        c.push((name.into(), ProbeOp::Socket(fam), Expect::Errno("EPERM")));
    }
    c.push((
        "socketpair(AF_UNIX)".into(),
        ProbeOp::SocketPairUnix,
        Expect::Allowed,
    ));
    c.push((
        format!("connect unix socket outside {}", sock_path.display()),
        ProbeOp::UnixConnect(sock_path.to_path_buf()),
        Expect::Refused,
    ));
    c.push((
        format!("connect abstract unix socket outside @{abstract_name}"),
        ProbeOp::AbstractConnect(abstract_name.into()),
        Expect::Refused,
    ));
    c.push((
        format!("direct connect to host loopback {outside_tcp}"),
        ProbeOp::TcpConnect(outside_tcp),
        Expect::Refused,
    ));
    if egress_mode {
        c.push((
            "connect to the egress bridge port".into(),
            ProbeOp::ProxyPort,
            Expect::Allowed,
        ));
        if let Some(hook) = egress {
            for chk in &hook.checks {
                c.push((
                    format!("egress CONNECT {}", chk.target),
                    ProbeOp::ProxyConnect(chk.target.clone()),
                    if chk.expected_status == 200 {
                        // The allowlist let it through; whether the host answers is not the
                        // sandbox's promise (502: unreachable or unresolvable from here).
                        Expect::OneOf(
                            vec!["HTTP 200".into(), "HTTP 502".into()],
                            "accepted (200, or 502 if unreachable)".into(),
                        )
                    } else {
                        Expect::Value(format!("HTTP {}", chk.expected_status))
                    },
                ));
            }
        }
    }

    let scoped = plan.landlock.abi >= 6;
    c.push((
        "signal a process outside (parent)".into(),
        ProbeOp::SignalParent,
        if scoped {
            Expect::Errno("EPERM")
        } else {
            Expect::Any("allowed below Landlock ABI 6 (no signal scope)".into())
        },
    ));
    for name in [
        "ptrace",
        "mount",
        "bpf",
        "keyctl",
        "perf_event_open",
        "io_uring_setup",
        "personality",
        "prlimit parent",
        "setpriority parent",
        "chmod setuid",
        "chmod world-writable",
        "chown",
        "shmget",
        "socketpair dgram",
    ] {
        c.push((
            name.into(),
            ProbeOp::Syscall(name.into()),
            Expect::Errno("EPERM"),
        ));
    }
    c.push((
        "clone3".into(),
        ProbeOp::Syscall("clone3".into()),
        Expect::Errno("ENOSYS"),
    ));
    if cfg!(target_arch = "x86_64") {
        c.push((
            "x32 syscall".into(),
            ProbeOp::Syscall("x32".into()),
            Expect::Errno("EPERM"),
        ));
    }
    let zero = Expect::Value("0000000000000000".into());
    c.push((
        "NoNewPrivs".into(),
        ProbeOp::Status("NoNewPrivs".into()),
        Expect::Value("1".into()),
    ));
    for cap in ["CapEff", "CapPrm", "CapInh", "CapAmb"] {
        c.push((cap.into(), ProbeOp::Status(cap.into()), zero.clone()));
    }
    c.push((
        "Seccomp mode".into(),
        ProbeOp::Status("Seccomp".into()),
        Expect::Value("2".into()),
    ));
    let filters = 2
        + usize::from(plan.seccomp.x32_guard && cfg!(target_arch = "x86_64"))
        + crate::seccomp::FLOOR_FILTERS;
    c.push((
        "seccomp filters".into(),
        ProbeOp::Status("Seccomp_filters".into()),
        Expect::Value(filters.to_string()),
    ));
    c.push((
        "Landlock ABI".into(),
        ProbeOp::LandlockAbi,
        Expect::Value(plan.landlock.abi.to_string()),
    ));
    // Last: without the filter it would move the probe into a new user namespace.
    c.push((
        "unshare".into(),
        ProbeOp::Syscall("unshare".into()),
        Expect::Errno("EPERM"),
    ));
    c
}

/// Modes, owners, times and xattrs outside the write set (Landlock governs none of them): the
/// read-only view answers EROFS, seccomp EPERM. A mode change in `${TMP}` works where the view is
/// in place; its compensation refuses it too.
fn metadata_checks(
    c: &mut Vec<(String, ProbeOp, Expect)>,
    plan: &SandboxPlan,
    protected: &Protected,
    outside_file: &Path,
) {
    let mut targets: Vec<(&str, PathBuf)> = Vec::new();
    if let Some(home) = &protected.home {
        targets.push(("home", crate::policy::canonical_or_lexical(home)));
    }
    targets.push((
        "lockfile",
        crate::policy::canonical_or_lexical(&protected.lockfile),
    ));
    if let Some(PolicyPath::Host(p)) = plan
        .read
        .iter()
        .find(|r| r.required && matches!(r.origin, Origin::Policy(_) | Origin::Command))
        .map(|r| &r.path)
    {
        targets.push(("read-granted", p.clone()));
    }
    targets.push(("file outside", outside_file.to_path_buf()));
    for (what, path) in targets {
        if !path.exists() || covered(&path, &plan.write) {
            continue;
        }
        for call in [
            MetaCall::Chmod,
            MetaCall::Utimensat,
            MetaCall::Chown,
            MetaCall::Setxattr,
        ] {
            c.push((
                format!("{} {what} {}", call.name(), path.display()),
                ProbeOp::Meta(call, path.clone()),
                Expect::Errnos(&["EROFS", "EPERM"]),
            ));
        }
    }
    c.push((
        "chmod 0600 a file in ${TMP}".into(),
        ProbeOp::ChmodNew(PathBuf::from(crate::probe::TMP_MARK)),
        match plan.view {
            ReadOnlyView::MountNamespace => Expect::Allowed,
            ReadOnlyView::Seccomp(_) => Expect::Errno("EPERM"),
        },
    ));
}

/// The task limit in force and core dumps off.
fn limit_checks(c: &mut Vec<(String, ProbeOp, Expect)>, plan: &SandboxPlan) {
    let tasks = plan.limits.tasks;
    let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NPROC)
        .map_or(tasks, |(_, h)| h);
    c.push((
        "task limit (RLIMIT_NPROC)".into(),
        ProbeOp::Limit("tasks".into()),
        match plan.view {
            _ if crate::plan::task_limit_exempt() => Expect::Any(
                "not enforced: the kernel exempts uid 0 from RLIMIT_NPROC (see the pids cgroup)"
                    .into(),
            ),
            ReadOnlyView::MountNamespace => Expect::Value(tasks.min(hard).to_string()),
            ReadOnlyView::Seccomp(_) => Expect::Any(format!("the user's running tasks + {tasks}")),
        },
    ));
    if crate::plan::task_limit_exempt() {
        c.push((
            "task limit for root (pids cgroup)".into(),
            ProbeOp::Limit("cgroup".into()),
            match crate::cgroup::available() {
                Ok(dir) => Expect::Contains(
                    "/mcpsum-",
                    format!(
                        "a pids cgroup of its own below `{}`, pids.max {tasks}",
                        dir.display()
                    ),
                ),
                Err(why) => Expect::Any(format!(
                    "missing: no pids cgroup ({why}); the limit does not bind root"
                )),
            },
        ));
    }
    c.push((
        "core dumps (RLIMIT_CORE)".into(),
        ProbeOp::Limit("core".into()),
        Expect::Value("0".into()),
    ));
}

fn layer_rows(plan: &SandboxPlan) -> Vec<LayerRow> {
    let mut rows = vec![LayerRow {
        layer: "landlock".into(),
        status: format!(
            "ABI {} (required >= {})",
            plan.landlock.abi, plan.landlock.required
        ),
    }];
    for comp in &plan.landlock.compensations {
        rows.push(LayerRow {
            layer: format!("landlock {} (ABI {})", comp.feature, comp.abi),
            status: format!("missing: {}", comp.instead),
        });
    }
    rows.push(LayerRow {
        layer: "seccomp".into(),
        status: format!(
            "{}{} calls -> ENOSYS, {} rules -> EPERM",
            if plan.seccomp.x32_guard {
                "x32 guard, "
            } else {
                ""
            },
            plan.seccomp.enosys.len(),
            plan.seccomp.eperm.len()
        ),
    });
    rows.push(LayerRow {
        layer: "namespaces".into(),
        status: match (&plan.network, &plan.view) {
            (NetworkMode::None, ReadOnlyView::MountNamespace) => {
                "user + mount (network.allow is [])".into()
            }
            (NetworkMode::None, ReadOnlyView::Seccomp(why)) => {
                format!("none ({why}; network.allow is [])")
            }
            (NetworkMode::Egress { .. }, _) => {
                "user + mount + network (loopback only), egress bridge by fd passing".into()
            }
        },
    });
    rows.push(LayerRow {
        layer: "read-only view".into(),
        status: plan.view.to_string(),
    });
    rows.push(LayerRow {
        layer: "limits".into(),
        status: match plan.view {
            _ if crate::plan::task_limit_exempt() => match crate::cgroup::available() {
                Ok(dir) => format!(
                    "at most {} tasks in the server's tree by a pids cgroup of its own below `{}` (root is exempt from RLIMIT_NPROC), core dumps off",
                    plan.limits.tasks,
                    dir.display()
                ),
                Err(why) => format!(
                    "missing: root (uid 0) is exempt from RLIMIT_NPROC and no pids cgroup can be used ({why}), the limit of {} tasks does not bind; core dumps off",
                    plan.limits.tasks
                ),
            },
            ReadOnlyView::MountNamespace => format!(
                "at most {} tasks in the server's tree, core dumps off",
                plan.limits.tasks
            ),
            ReadOnlyView::Seccomp(_) => format!(
                "missing own user namespace: at most {} tasks more than the user runs at launch, core dumps off",
                plan.limits.tasks
            ),
        },
    });
    let extra: Vec<String> = plan
        .env
        .iter()
        .filter(|(_, v)| !matches!(v, EnvValue::Given(_)))
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    rows.push(LayerRow {
        layer: "environment".into(),
        status: format!("passed variables plus {}", extra.join(", ")),
    });
    rows
}
