//! The launcher: `mcpsum-launch __sandbox-exec <spec>`, a fresh single-threaded process that
//! applies every layer to itself and `execve`s the server (design 4, launcher side).
//!
//! It owns the order of operations; the policy decisions were all made by the plan, which
//! `prepare` serialises into the [`LauncherSpec`] argument (paths, rules, seccomp table, env
//! names; never environment values, which arrive as the process environment).

use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use serde::{Deserialize, Serialize};

pub(crate) use crate::fail::{BUG, Fail, fail};
use crate::plan::{ReadOnlyView, SeccompTable};
use crate::policy::Limits;
use crate::{APPARMOR_FIX, SETUP_FAILED_EXIT};

/// What the launcher applies, resolved (no `${TMP}` placeholders left).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct LauncherSpec {
    pub(crate) program: PathBuf,
    pub(crate) argv: Vec<String>,
    pub(crate) read: Vec<(PathBuf, bool)>,
    pub(crate) write: Vec<(PathBuf, bool)>,
    pub(crate) devices: Vec<PathBuf>,
    pub(crate) egress: bool,
    pub(crate) landlock_abi: u32,
    /// The plan's table; absent means empty. Either way the floor is stacked after it.
    #[serde(default)]
    pub(crate) seccomp: SeccompTable,
    pub(crate) view: ReadOnlyView,
    pub(crate) limits: Limits,
    pub(crate) protected: Vec<(String, PathBuf)>,
    pub(crate) env_names: Vec<String>,
    pub(crate) parent_pid: i32,
    pub(crate) bridge_fd: Option<RawFd>,
}

pub(crate) fn main(args: Vec<OsString>) -> ! {
    let err = match run(&args) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    let _ = std::io::stderr().write_all(format!("{err}\n").as_bytes());
    std::process::exit(SETUP_FAILED_EXIT)
}

fn run(args: &[OsString]) -> Result<std::convert::Infallible, Fail> {
    let [spec] = args else {
        return Err(fail("launcher", "expected exactly one argument", BUG));
    };
    let spec: LauncherSpec = serde_json::from_slice(spec.as_bytes())
        .map_err(|e| fail("launcher", format!("bad spec: {e}"), BUG))?;
    Err(launch(&mut RealSys::default(), &spec))
}

/// The kernel operations of the launcher, in a trait so a recording fake can check their order
/// (youki's `Syscall` pattern). Each returns the one-line failure of its layer.
pub(crate) trait Sys {
    /// Splits off the guard (see `guard`), which stays outside the sandbox and ends the server's
    /// whole tree with it or with mcpsum; returns the guard's pid, the launcher's new parent.
    fn guard(&mut self, parent: i32) -> Result<i32, Fail>;
    /// `PR_SET_PDEATHSIG(SIGKILL)`; returns the parent pid seen afterwards.
    fn die_with_parent(&mut self) -> Result<i32, Fail>;
    /// Closes every descriptor above 2 except `keep`.
    fn close_fds(&mut self, keep: Option<RawFd>) -> Result<(), Fail>;
    /// For a server that would run as the host's root, which the kernel exempts from
    /// `RLIMIT_NPROC`: moves the launcher into a pids cgroup of its own named for `guard`, with
    /// `pids.max` = `tasks` (see `cgroup`). `Ok(false)`: not root, nothing to do. `Err`: why no
    /// pids controller can be used (the launch goes on; the limit does not bind root).
    fn task_cgroup(&mut self, tasks: u64, guard: i32) -> Result<bool, String>;
    /// The environment `prepare` gave the launcher.
    fn environment(&mut self) -> Vec<(OsString, OsString)>;
    /// `unshare(NEWUSER|NEWNS[|NEWNET])`; on failure nothing changed (the caller may
    /// compensate).
    fn unshare(&mut self, network: bool) -> Result<(), nix::errno::Errno>;
    /// `setgroups deny`, identity maps, `lo` up (`network`).
    fn enter_namespaces(&mut self, network: bool) -> Result<(), Fail>;
    /// In the new mount namespace: everything read-only but the write set.
    fn read_only_view(&mut self, spec: &LauncherSpec) -> Result<(), Fail>;
    /// `RLIMIT_NPROC` (counted in the own user namespace, or over the user's tasks without one)
    /// and `RLIMIT_CORE` 0.
    fn limits(&mut self, limits: &Limits, own_userns: bool) -> Result<(), Fail>;
    /// Binds `127.0.0.1:0`, sends port + listener on `bridge`, closes both; returns the port.
    fn bridge_listener(&mut self, bridge: RawFd) -> Result<u16, Fail>;
    /// Clears ambient, bounding (when possible), inheritable, effective, permitted.
    fn drop_capabilities(&mut self) -> Result<(), Fail>;
    /// Creates and enforces the Landlock ruleset.
    fn landlock(&mut self, spec: &LauncherSpec, bridge_port: Option<u16>) -> Result<(), Fail>;
    /// Installs the compiled seccomp filters.
    fn seccomp(&mut self, compiled: &crate::seccomp::Compiled) -> Result<(), Fail>;
    /// `execve`; returns only on failure.
    fn exec(&mut self, program: &CString, argv: &[CString], envp: &[CString]) -> Fail;
    /// One line on stderr (the server's log) naming a compensation decided at launch.
    fn note(&mut self, line: &str);
}

/// Applies every layer in the order of design 4 and execs. Returns only the failure.
pub(crate) fn launch(sys: &mut impl Sys, spec: &LauncherSpec) -> Fail {
    match launch_inner(sys, spec) {
        Ok(f) | Err(f) => f,
    }
}

fn launch_inner(sys: &mut impl Sys, spec: &LauncherSpec) -> Result<Fail, Fail> {
    // 0. The guard: the tree ends with the server and with mcpsum, even a `SIGKILL`ed one.
    let guard = sys.guard(spec.parent_pid)?;
    // 1. Die with the guard; then make sure it did not die already.
    if sys.die_with_parent()? != guard {
        return Err(fail(
            "launcher",
            "mcpsum exited before the server started",
            "retry",
        ));
    }
    // 2. Close every inherited descriptor but stdio and the bridge.
    sys.close_fds(spec.bridge_fd)?;

    // 3. Own user + mount namespace (and network namespace, loopback, the bridged listener in
    //    allow mode), the read-only view, the limits.
    let mut env = sys.environment();
    check_env(&env, &spec.env_names)?;
    // Still root with every capability and in the host's namespaces: the one moment a root
    // launcher can make and enter a cgroup; the tree after it stays there.
    if let Err(why) = sys.task_cgroup(spec.limits.tasks, guard) {
        sys.note(&format!(
            "mcpsum sandbox: no pids cgroup ({why}): the kernel exempts uid 0 from RLIMIT_NPROC, the limit of {} tasks does not bind this root server",
            spec.limits.tasks
        ));
    }
    let mut seccomp = spec.seccomp.clone();
    let mut own_userns = spec.egress || spec.view == ReadOnlyView::MountNamespace;
    if own_userns {
        match sys.unshare(spec.egress) {
            Ok(()) => {
                sys.enter_namespaces(spec.egress)?;
                sys.read_only_view(spec)?;
            }
            // `network.allow: []` needs no namespace: where the kernel refuses one that the
            // plan expected (a container's seccomp profile), the named compensation stands in.
            Err(e) if !spec.egress => {
                crate::plan::compensate_metadata(&mut seccomp);
                own_userns = false;
                sys.note(&format!(
                    "mcpsum sandbox: no user namespace (unshare: {e}): seccomp refuses every mode, owner, time and xattr change, also in the write set; the task limit counts the user's tasks"
                ));
            }
            Err(e) => return Err(unshare_failure(e)),
        }
    }
    sys.limits(&spec.limits, own_userns)?;
    let mut bridge_port = None;
    if spec.egress {
        let Some(bridge) = spec.bridge_fd else {
            return Err(fail("egress bridge", "no bridge descriptor", BUG));
        };
        let port = sys.bridge_listener(bridge)?;
        bridge_port = Some(port);
        // 4. The proxy variables (the rest of the environment was built by `prepare`).
        for (name, value) in crate::egress_environment(port) {
            set(&mut env, name, value);
        }
    }

    // Build the exec arguments and filters now: after Landlock only allowed paths can be read.
    let c = |s: &[u8], what: &str| {
        CString::new(s).map_err(|_| fail("exec", format!("{what} contains a NUL byte"), BUG))
    };
    let program = c(spec.program.as_os_str().as_bytes(), "program")?;
    let argv = spec
        .argv
        .iter()
        .map(|a| c(a.as_bytes(), "argv"))
        .collect::<Result<Vec<_>, _>>()?;
    let envp = env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            c(&kv, "environment")
        })
        .collect::<Result<Vec<_>, _>>()?;
    let compiled = crate::seccomp::compile(&seccomp)
        .map_err(|e| fail("seccomp", e, "this architecture is not supported"))?;

    // 5. Capabilities, 6. Landlock, 7. seccomp (last: nothing of the set-up is filtered).
    sys.drop_capabilities()?;
    sys.landlock(spec, bridge_port)?;
    sys.seccomp(&compiled)?;
    // 8. exec.
    Ok(sys.exec(&program, &argv, &envp))
}

/// The real kernel.
#[derive(Default)]
struct RealSys {
    /// The effective uid and gid from before `unshare` (unmapped afterwards, until mapped).
    ids: Option<(u32, u32)>,
}

impl Sys for RealSys {
    fn guard(&mut self, parent: i32) -> Result<i32, Fail> {
        crate::guard::split(parent)
    }

    fn die_with_parent(&mut self) -> Result<i32, Fail> {
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
            .map_err(|e| fail("launcher", format!("PR_SET_PDEATHSIG: {e}"), BUG))?;
        Ok(nix::unistd::getppid().as_raw())
    }

    fn close_fds(&mut self, keep: Option<RawFd>) -> Result<(), Fail> {
        let max = u32::MAX;
        match keep.and_then(|fd| u32::try_from(fd).ok()) {
            Some(b) => crate::sys::close_range(3, b.saturating_sub(1))
                .and_then(|()| crate::sys::close_range(b.saturating_add(1), max)),
            None => crate::sys::close_range(3, max),
        }
        .map_err(|e| {
            fail(
                "launcher",
                format!("close_range: {e}"),
                "use a kernel >= 5.9",
            )
        })
    }

    fn task_cgroup(&mut self, tasks: u64, guard: i32) -> Result<bool, String> {
        if !crate::plan::task_limit_exempt() {
            return Ok(false);
        }
        crate::cgroup::enter(guard, tasks).map(|_| true)
    }

    fn environment(&mut self) -> Vec<(OsString, OsString)> {
        std::env::vars_os().collect()
    }

    fn unshare(&mut self, network: bool) -> Result<(), nix::errno::Errno> {
        use nix::sched::{CloneFlags, unshare};
        let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
        if network {
            flags |= CloneFlags::CLONE_NEWNET;
        }
        self.ids = Some((
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        ));
        unshare(flags)
    }

    fn enter_namespaces(&mut self, network: bool) -> Result<(), Fail> {
        // The profile attaches to this launcher binary, not to mcpsum: only here can the label
        // be read (design 8).
        crate::apparmor::check_apparmor_userns()
            .map_err(|cause| fail("user namespace", cause, APPARMOR_FIX))?;
        let Some((uid, gid)) = self.ids else {
            return Err(fail("user namespace", "mapped before unshare", BUG));
        };
        enter_namespaces(uid, gid, network)
    }

    fn read_only_view(&mut self, spec: &LauncherSpec) -> Result<(), Fail> {
        read_only_view(spec)
    }

    fn limits(&mut self, limits: &Limits, own_userns: bool) -> Result<(), Fail> {
        apply_limits(limits, own_userns)
    }

    fn bridge_listener(&mut self, bridge: RawFd) -> Result<u16, Fail> {
        bridge_listener(bridge)
    }

    fn drop_capabilities(&mut self) -> Result<(), Fail> {
        drop_capabilities()
    }

    fn landlock(&mut self, spec: &LauncherSpec, bridge_port: Option<u16>) -> Result<(), Fail> {
        apply_landlock(spec, bridge_port)
    }

    fn seccomp(&mut self, compiled: &crate::seccomp::Compiled) -> Result<(), Fail> {
        crate::seccomp::install(compiled).map_err(|e| {
            fail(
                "seccomp",
                e,
                "use a kernel with CONFIG_SECCOMP_FILTER, outside a container that forbids it",
            )
        })
    }

    fn note(&mut self, line: &str) {
        let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
    }

    fn exec(&mut self, program: &CString, argv: &[CString], envp: &[CString]) -> Fail {
        // Rust's start-up ignores `SIGPIPE`, and `exec` would pass that on: the server gets the
        // default, as it would from a shell.
        crate::sys::default_signal(nix::sys::signal::Signal::SIGPIPE);
        let e = match nix::unistd::execve(program, argv, envp) {
            Ok(never) => match never {},
            Err(e) => e,
        };
        fail(
            "exec",
            format!("`{}`: {e}", program.to_string_lossy()),
            "make sure its directory is readable in the sandbox (add it to filesystem.read)",
        )
    }
}

fn set(env: &mut Vec<(OsString, OsString)>, name: impl AsRef<std::ffi::OsStr>, value: OsString) {
    let name = name.as_ref();
    env.retain(|(k, _)| k != name);
    env.push((name.into(), value));
}

/// I2: the environment must be exactly the planned names (values were set by `prepare`).
fn check_env(env: &[(OsString, OsString)], expected: &[String]) -> Result<(), Fail> {
    let mut got: Vec<String> = env
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    let mut want = expected.to_vec();
    got.sort();
    want.sort();
    if got == want {
        Ok(())
    } else {
        let extra: Vec<&String> = got.iter().filter(|n| !want.contains(n)).collect();
        Err(fail(
            "environment",
            format!("unexpected variables {extra:?}"),
            "start the launcher through mcpsum_sandbox::prepare, which clears the environment",
        ))
    }
}

/// The one line for a user namespace the kernel refused.
fn unshare_failure(e: nix::errno::Errno) -> Fail {
    let fix = match e {
        nix::errno::Errno::EPERM => {
            "allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1` on Debian), or run outside a container whose seccomp policy forbids them; if on Ubuntu, ".to_string() + APPARMOR_FIX
        }
        nix::errno::Errno::ENOSPC | nix::errno::Errno::EUSERS => {
            "raise `user.max_user_namespaces` (it is 0 or exhausted)".into()
        }
        _ => "use a kernel with user and network namespaces".into(),
    };
    fail("user namespace", format!("unshare: {e}"), fix)
}

/// After `unshare`: `setgroups deny`, identity maps of `uid` and `gid` (the ids from before),
/// and (`network`) `lo` up.
fn enter_namespaces(uid: u32, gid: u32, network: bool) -> Result<(), Fail> {
    let write = |file: &str, data: String| {
        fs_err::write(file, data).map_err(|e| {
            let fix = if e.kind() == std::io::ErrorKind::PermissionDenied {
                APPARMOR_FIX.to_string()
            } else {
                "use a kernel with user namespaces".to_string()
            };
            // The `fs-err` error names the file.
            fail("user namespace", e.to_string(), fix)
        })
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    if !network {
        return Ok(());
    }
    crate::sys::loopback_up().map_err(|e| {
        let fix = if e.raw_os_error() == Some(libc::EPERM) {
            APPARMOR_FIX
        } else {
            "use a kernel with network namespaces"
        };
        fail("network namespace", format!("bringing lo up: {e}"), fix)
    })
}

/// Design 4, launcher step 3e: in the launcher's own mount namespace, makes every mount
/// read-only and binds the write set read-write again, so modes, owners, times and extended
/// attributes outside it cannot change (`EROFS`), whatever the user, root included. Mounts made
/// read-only here are not locked (the namespace's owner may undo it, but the server has no
/// capability left and seccomp refuses the mount calls); a mount that was read-only before stays
/// so, also inside the write set.
fn read_only_view(spec: &LauncherSpec) -> Result<(), Fail> {
    use nix::fcntl::{OFlag, open};
    use nix::mount::{MsFlags, mount};
    let layer = "read-only view";
    let fix = "use a kernel >= 5.12 (mount_setattr) outside a container that forbids mounts in a user namespace";
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| fail(layer, format!("making `/` private: {e}"), fix))?;
    // Copies of the write set, taken while it is still writable: attached again below, they
    // keep their write access (and their own submounts) on top of the read-only tree.
    let mut binds = Vec::new();
    let guarded = crate::plan::guarded_identities(&spec.protected);
    for (path, required) in &spec.write {
        let target = match open(
            path,
            OFlag::O_PATH | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(_) if !required => continue,
            Err(e) => {
                return Err(fail(
                    layer,
                    format!("`{}`: {e}", path.display()),
                    "create the path or remove it from the policy",
                ));
            }
        };
        recheck_opened(target.as_fd(), path, Some(&spec.protected))?;
        recheck_identity(target.as_fd(), path, &guarded)?;
        let tree = crate::sys::clone_tree(target.as_fd()).map_err(|e| {
            fail(
                layer,
                format!("copying the mount of `{}`: {e}", path.display()),
                fix,
            )
        })?;
        binds.push((path, target, tree));
    }
    crate::sys::set_read_only_recursive(c"/")
        .map_err(|e| fail(layer, format!("remounting `/` read-only: {e}"), fix))?;
    for (path, target, tree) in &binds {
        crate::sys::attach_tree(tree.as_fd(), target.as_fd()).map_err(|e| {
            fail(
                layer,
                format!("binding `{}` writable: {e}", path.display()),
                fix,
            )
        })?;
    }
    // A working directory inside the write set still names the read-only mount below it.
    if let Ok(cwd) = std::env::current_dir() {
        let _ = std::env::set_current_dir(cwd);
    }
    Ok(())
}

/// Core dumps off; at most `limits.tasks` tasks in the server's tree. In the launcher's own user
/// namespace `RLIMIT_NPROC` counts that tree alone (Linux >= 5.14 counts it per namespace).
/// Without one it counts every task of the user, so the limit is what runs now plus the
/// policy's. The host's uid 0 is exempt from it in every namespace: for root the task cgroup
/// (entered before `unshare`, see `cgroup`) holds the limit instead.
fn apply_limits(limits: &Limits, own_userns: bool) -> Result<(), Fail> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let layer = "limits";
    setrlimit(Resource::RLIMIT_CORE, 0, 0)
        .map_err(|e| fail(layer, format!("RLIMIT_CORE: {e}"), BUG))?;
    let tasks = if own_userns {
        limits.tasks
    } else {
        running_tasks(nix::unistd::getuid().as_raw()).saturating_add(limits.tasks)
    };
    let (_, hard) = getrlimit(Resource::RLIMIT_NPROC)
        .map_err(|e| fail(layer, format!("RLIMIT_NPROC: {e}"), BUG))?;
    let n = tasks.min(hard);
    setrlimit(Resource::RLIMIT_NPROC, n, n)
        .map_err(|e| fail(layer, format!("RLIMIT_NPROC {n}: {e}"), BUG))
}

/// The tasks (threads) of every process whose real uid is `uid`, as `RLIMIT_NPROC` counts them.
fn running_tasks(uid: u32) -> u64 {
    let mut n = 0u64;
    for entry in fs_err::read_dir("/proc").into_iter().flatten().flatten() {
        if !entry.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(status) = fs_err::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if field("Uid:") == Some(u64::from(uid)) {
            n = n.saturating_add(field("Threads:").unwrap_or(1));
        }
    }
    n
}

/// Binds `127.0.0.1:0` inside the namespace and sends port + listener to mcpsum.
fn bridge_listener(bridge: RawFd) -> Result<u16, Fail> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let fix = "retry; if it persists, report it";
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| fail("egress bridge", format!("bind 127.0.0.1:0: {e}"), fix))?;
    let port = listener
        .local_addr()
        .map_err(|e| fail("egress bridge", e, fix))?
        .port();
    let bytes = port.to_be_bytes();
    let fds = [listener.as_raw_fd()];
    let iov = [std::io::IoSlice::new(&bytes)];
    sendmsg::<()>(
        bridge,
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(|e| fail("egress bridge", format!("sending the listener: {e}"), fix))?;
    drop(listener);
    nix::unistd::close(bridge).map_err(|e| fail("egress bridge", e, fix))?;
    Ok(port)
}

fn drop_capabilities() -> Result<(), Fail> {
    use caps::{CapSet, Capability};
    let fix = "report it; the sandbox cannot run with capabilities left";
    let err =
        |what: &str, e: caps::errors::CapsError| fail("capabilities", format!("{what}: {e}"), fix);
    caps::clear(None, CapSet::Ambient).map_err(|e| err("ambient", e))?;
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).unwrap_or(false) {
        caps::clear(None, CapSet::Bounding).map_err(|e| err("bounding", e))?;
    }
    for set in [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        caps::clear(None, set).map_err(|e| err("clear", e))?;
    }
    Ok(())
}

fn apply_landlock(spec: &LauncherSpec, bridge_port: Option<u16>) -> Result<(), Fail> {
    let lfail = |e: &dyn std::fmt::Display| {
        fail(
            "landlock",
            e.to_string(),
            "use a kernel >= 5.13 with `landlock` in the `lsm=` list",
        )
    };
    let now = crate::sys::landlock_abi();
    if now != spec.landlock_abi || now < 1 {
        return Err(fail(
            "landlock",
            format!("kernel ABI {now}, planned for {}", spec.landlock_abi),
            "use a kernel >= 5.13 with `landlock` in the `lsm=` list",
        ));
    }
    let newest = ABI::V6;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .map_err(|e| lfail(&e))?
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(newest))
        .map_err(|e| lfail(&e))?;
    let net = if spec.egress {
        AccessNet::ConnectTcp.into()
    } else {
        AccessNet::BindTcp | AccessNet::ConnectTcp
    };
    ruleset = ruleset
        .handle_access(net)
        .map_err(|e| lfail(&e))?
        .scope(Scope::from_all(newest))
        .map_err(|e| lfail(&e))?;
    let mut created = ruleset.create().map_err(|e| lfail(&e))?;

    // The identities of `/` and the homes, taken once for every rule below.
    let guarded = crate::plan::guarded_identities(&spec.protected);
    let read = AccessFs::from_read(newest);
    let all = AccessFs::from_all(newest);
    let file_mask = AccessFs::from_file(newest);
    let mut add = |path: &Path,
                   access: landlock::BitFlags<AccessFs>,
                   required: bool,
                   check: bool|
     -> Result<(), Fail> {
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            Err(_) if !required => return Ok(()),
            Err(e) => {
                return Err(fail(
                    "landlock",
                    format!("`{}`: {e}", path.display()),
                    "create the path or remove it from the policy",
                ));
            }
        };
        recheck_opened(fd.as_fd(), path, check.then_some(spec.protected.as_slice()))?;
        let is_dir = recheck_identity(fd.as_fd(), path, &guarded)? == libc::S_IFDIR;
        let access = if is_dir { access } else { access & file_mask };
        (&mut created)
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| lfail(&e))?;
        Ok(())
    };
    for (p, required) in &spec.read {
        add(p, read, *required, false)?;
    }
    for (p, required) in &spec.write {
        add(p, all, *required, true)?;
    }
    for p in &spec.devices {
        add(p, AccessFs::ReadFile | AccessFs::WriteFile, false, false)?;
    }
    if let Some(port) = bridge_port {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| lfail(&e))?;
    }
    let status = created.restrict_self().map_err(|e| lfail(&e))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(fail(
            "landlock",
            "not enforced",
            "use a kernel >= 5.13 with `landlock` in the `lsm=` list",
        ));
    }
    Ok(())
}

/// Design 4.1: re-check each opened rule path, read and write rules alike. The plan names real
/// paths; a path swapped for a link (or a folder moved) between planning and now would make
/// the descriptor, and so the Landlock rule, point somewhere never validated: refuse it. A
/// write rule (`protected` given) is also checked against the protected paths once more.
fn recheck_opened(
    fd: BorrowedFd<'_>,
    path: &Path,
    protected: Option<&[(String, PathBuf)]>,
) -> Result<(), Fail> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let real = fs_err::read_link(&link).map_err(|e| {
        fail(
            "landlock",
            format!("`{}`: cannot re-check: {e}", path.display()),
            "retry",
        )
    })?;
    if real != path {
        return Err(fail(
            "policy",
            format!(
                "`{}` changed after validation: validated as `{}`, now opens `{}`",
                path.display(),
                path.display(),
                real.display()
            ),
            "check for a replaced symlink or a moved folder, then start the server again",
        ));
    }
    if let Some((what, p)) = protected
        .unwrap_or_default()
        .iter()
        .find(|(_, p)| p.starts_with(&real))
    {
        return Err(fail(
            "policy",
            format!(
                "filesystem.write `{}` now resolves to `{}`, which covers {what} (`{}`)",
                path.display(),
                real.display(),
                p.display()
            ),
            "check for a replaced symlink, then fix the policy",
        ));
    }
    Ok(())
}

/// Design 4.1, by identity: the opened descriptor (`fstat`) is not `/`, a protected home or an
/// ancestor of one under another path (a bind mount made after planning, or one the plan's own
/// check raced with). Every rule, read or write, devices too.
/// `guarded` is [`crate::plan::guarded_identities`], taken once before the rules are opened.
/// Returns the descriptor's file type bits (`S_IFMT` of `st_mode`).
fn recheck_identity(
    fd: BorrowedFd<'_>,
    path: &Path,
    guarded: &[crate::plan::Guarded],
) -> Result<libc::mode_t, Fail> {
    let st = nix::sys::stat::fstat(fd).map_err(|e| {
        fail(
            "landlock",
            format!("`{}`: cannot re-check: {e}", path.display()),
            "retry",
        )
    })?;
    let id = (st.st_dev, st.st_ino);
    if let Some((what, real)) = crate::plan::disguised(path, id, guarded) {
        return Err(fail(
            "policy",
            format!(
                "`{}` is {what} (`{}`) mounted elsewhere: it would open {what} to the server",
                path.display(),
                real.display()
            ),
            "remove the bind mount or list the folder the server needs itself, then start the server again",
        ));
    }
    Ok(st.st_mode & libc::S_IFMT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::NetworkMode;

    /// Records each call; fails the one named in `fail_at`.
    struct Fake {
        calls: Vec<&'static str>,
        fail_at: Option<&'static str>,
        env: Vec<(OsString, OsString)>,
        parent: i32,
    }

    impl Fake {
        fn step(&mut self, name: &'static str) -> Result<(), Fail> {
            self.calls.push(name);
            if self.fail_at == Some(name) {
                Err(fail("fake", name, "none"))
            } else {
                Ok(())
            }
        }
    }

    impl Sys for Fake {
        fn guard(&mut self, parent: i32) -> Result<i32, Fail> {
            assert_eq!(parent, 7);
            self.step("guard").map(|()| 70)
        }
        fn die_with_parent(&mut self) -> Result<i32, Fail> {
            self.step("pdeathsig").map(|()| self.parent)
        }
        fn close_fds(&mut self, _keep: Option<RawFd>) -> Result<(), Fail> {
            self.step("close_fds")
        }
        fn task_cgroup(&mut self, _tasks: u64, guard: i32) -> Result<bool, String> {
            assert_eq!(guard, 70);
            self.calls.push("cgroup");
            match self.fail_at {
                Some("cgroup") => Err("none".into()),
                _ => Ok(true),
            }
        }
        fn environment(&mut self) -> Vec<(OsString, OsString)> {
            self.env.clone()
        }
        fn unshare(&mut self, _network: bool) -> Result<(), nix::errno::Errno> {
            self.calls.push("unshare");
            match self.fail_at {
                Some("unshare") => Err(nix::errno::Errno::EPERM),
                _ => Ok(()),
            }
        }
        fn enter_namespaces(&mut self, _network: bool) -> Result<(), Fail> {
            self.step("namespaces")
        }
        fn note(&mut self, _line: &str) {
            self.calls.push("note");
        }
        fn read_only_view(&mut self, _spec: &LauncherSpec) -> Result<(), Fail> {
            self.step("view")
        }
        fn limits(&mut self, _limits: &Limits, own_userns: bool) -> Result<(), Fail> {
            self.step(if own_userns {
                "limits"
            } else {
                "limits (user)"
            })
        }
        fn bridge_listener(&mut self, _bridge: RawFd) -> Result<u16, Fail> {
            self.step("bridge").map(|()| 4242)
        }
        fn drop_capabilities(&mut self) -> Result<(), Fail> {
            self.step("caps")
        }
        fn landlock(&mut self, _spec: &LauncherSpec, port: Option<u16>) -> Result<(), Fail> {
            assert_eq!(port, self.calls.contains(&"bridge").then_some(4242));
            self.step("landlock")
        }
        fn seccomp(&mut self, compiled: &crate::seccomp::Compiled) -> Result<(), Fail> {
            assert_eq!(compiled.programs.len(), 3 + crate::seccomp::FLOOR_FILTERS);
            self.step("seccomp")
        }
        fn exec(&mut self, _p: &CString, _a: &[CString], envp: &[CString]) -> Fail {
            self.calls.push("exec");
            let names: Vec<String> = envp
                .iter()
                .map(|kv| {
                    kv.to_string_lossy()
                        .split('=')
                        .next()
                        .unwrap_or("")
                        .to_string()
                })
                .collect();
            fail("fake-exec", names.join(" "), "")
        }
    }

    fn spec(egress: bool) -> LauncherSpec {
        spec_with(egress, ReadOnlyView::MountNamespace)
    }

    fn spec_with(egress: bool, view: ReadOnlyView) -> LauncherSpec {
        let mode = if egress {
            NetworkMode::Egress {
                allow: vec!["a:1".into()],
            }
        } else {
            NetworkMode::None
        };
        LauncherSpec {
            program: "/bin/true".into(),
            argv: vec!["true".into()],
            read: vec![],
            write: vec![],
            devices: vec![],
            egress,
            landlock_abi: 7,
            seccomp: crate::plan::seccomp_table(&mode, 7, &view),
            view,
            limits: Limits::default(),
            protected: vec![],
            env_names: vec!["TMPDIR".into()],
            parent_pid: 7,
            bridge_fd: egress.then_some(3),
        }
    }

    fn fake(fail_at: Option<&'static str>) -> Fake {
        Fake {
            calls: vec![],
            fail_at,
            env: vec![("TMPDIR".into(), "/t".into())],
            parent: 70,
        }
    }

    const START: [&str; 4] = ["guard", "pdeathsig", "close_fds", "cgroup"];

    fn calls(rest: &[&'static str]) -> Vec<&'static str> {
        START.iter().chain(rest).copied().collect()
    }

    #[test]
    fn an_opened_rule_that_is_the_root_or_a_home_under_another_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        fs_err::create_dir_all(home.join("data")).unwrap();
        let protected = vec![("the home directory".to_string(), home.clone())];
        // A link opened as a rule stands in for a bind mount: the descriptor is `/` or the home.
        for (target, what) in [
            (Path::new("/"), "the whole filesystem"),
            (&home, "the home directory"),
        ] {
            let alias = root.join("alias");
            let _ = fs_err::remove_file(&alias);
            std::os::unix::fs::symlink(target, &alias).unwrap();
            let fd = PathFd::new(&alias).unwrap();
            let guarded = crate::plan::guarded_identities(&protected);
            let e = recheck_identity(fd.as_fd(), &alias, &guarded).unwrap_err();
            assert!(
                e.to_string().contains(&format!(
                    "`{}` is {what} (`{}`) mounted elsewhere",
                    alias.display(),
                    target.display()
                )),
                "{e}"
            );
        }
        // The home by its own path, and a folder inside it, are what they say.
        for ok in [home.clone(), home.join("data")] {
            let fd = PathFd::new(&ok).unwrap();
            let guarded = crate::plan::guarded_identities(&protected);
            recheck_identity(fd.as_fd(), &ok, &guarded).unwrap();
        }
    }

    #[test]
    fn a_rule_whose_path_now_leads_elsewhere_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        let (data, home) = (root.join("data"), root.join("home"));
        fs_err::create_dir_all(&data).unwrap();
        fs_err::create_dir_all(&home).unwrap();
        let fd = PathFd::new(&data).unwrap();
        recheck_opened(fd.as_fd(), &data, None).unwrap();
        // `data` validated, then swapped for a link to the home directory.
        fs_err::rename(&data, root.join("data.old")).unwrap();
        std::os::unix::fs::symlink(&home, &data).unwrap();
        let fd = PathFd::new(&data).unwrap();
        for protected in [None, Some(&[][..])] {
            let e = recheck_opened(fd.as_fd(), &data, protected).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "{}policy: `{d}` changed after validation: validated as `{d}`, now opens `{h}`; check for a replaced symlink or a moved folder, then start the server again",
                    crate::SETUP_FAILED_PREFIX,
                    d = data.display(),
                    h = home.display()
                )
            );
        }
        // A write rule that still is what was validated, but covers a protected path.
        let fd = PathFd::new(&root).unwrap();
        let protected = vec![("the home directory".to_string(), home.clone())];
        let e = recheck_opened(fd.as_fd(), &root, Some(&protected)).unwrap_err();
        assert!(e.to_string().contains("covers the home directory"), "{e}");
    }

    #[test]
    fn order_without_network() {
        let mut f = fake(None);
        let end = launch(&mut f, &spec(false));
        assert_eq!(
            f.calls,
            calls(&[
                "unshare",
                "namespaces",
                "view",
                "limits",
                "caps",
                "landlock",
                "seccomp",
                "exec"
            ])
        );
        assert_eq!(end.cause, "TMPDIR");
    }

    #[test]
    fn without_a_user_namespace_the_limit_counts_the_users_tasks() {
        let mut f = fake(None);
        launch(
            &mut f,
            &spec_with(false, ReadOnlyView::Seccomp("test".into())),
        );
        assert_eq!(
            f.calls,
            calls(&["limits (user)", "caps", "landlock", "seccomp", "exec"])
        );
    }

    #[test]
    fn order_with_egress_and_proxy_variables() {
        let mut f = fake(None);
        let end = launch(&mut f, &spec(true));
        assert_eq!(
            f.calls,
            calls(&[
                "unshare",
                "namespaces",
                "view",
                "limits",
                "bridge",
                "caps",
                "landlock",
                "seccomp",
                "exec"
            ])
        );
        assert_eq!(
            end.cause,
            "TMPDIR HTTPS_PROXY HTTP_PROXY ALL_PROXY https_proxy http_proxy all_proxy NO_PROXY no_proxy NODE_USE_ENV_PROXY"
        );
    }

    #[test]
    fn a_failing_layer_stops_everything_after_it() {
        let all = [
            "unshare",
            "namespaces",
            "view",
            "limits",
            "bridge",
            "caps",
            "landlock",
            "seccomp",
        ];
        for (n, at) in all.iter().enumerate() {
            let mut f = fake(Some(at));
            let end = launch(&mut f, &spec(true));
            assert_eq!(f.calls, calls(&all[..=n]), "{at}");
            // With hosts listed a refused user namespace is a failure, never compensated.
            let layer = if *at == "unshare" {
                "user namespace"
            } else {
                "fake"
            };
            assert_eq!(end.layer, layer);
        }
    }

    #[test]
    fn without_a_pids_cgroup_the_launch_goes_on_and_says_so() {
        let mut f = fake(Some("cgroup"));
        launch(&mut f, &spec(false));
        assert_eq!(
            f.calls,
            [
                "guard",
                "pdeathsig",
                "close_fds",
                "cgroup",
                "note",
                "unshare",
                "namespaces",
                "view",
                "limits",
                "caps",
                "landlock",
                "seccomp",
                "exec"
            ]
        );
    }

    #[test]
    fn a_refused_user_namespace_is_compensated_without_network() {
        let mut f = fake(Some("unshare"));
        launch(&mut f, &spec(false));
        assert_eq!(
            f.calls,
            calls(&[
                "unshare",
                "note",
                "limits (user)",
                "caps",
                "landlock",
                "seccomp",
                "exec"
            ])
        );
    }

    #[test]
    fn parent_gone_or_unexpected_env_stops_before_any_layer() {
        let mut f = fake(None);
        f.parent = 1;
        let end = launch(&mut f, &spec(false));
        assert_eq!(f.calls, ["guard", "pdeathsig"]);
        assert_eq!(end.cause, "mcpsum exited before the server started");

        let mut f = fake(None);
        f.env.push(("LEAK".into(), "x".into()));
        let end = launch(&mut f, &spec(false));
        assert_eq!(f.calls, ["guard", "pdeathsig", "close_fds"]);
        assert_eq!(end.layer, "environment");
    }
}
