//! The launcher: `mcpsum __sandbox-exec <spec>`, a fresh single-threaded process that applies
//! every layer to itself and `execve`s the server (design 4, launcher side).
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

use crate::plan::SeccompTable;
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
    pub(crate) seccomp: SeccompTable,
    pub(crate) protected: Vec<(String, PathBuf)>,
    pub(crate) env_names: Vec<String>,
    pub(crate) parent_pid: i32,
    pub(crate) bridge_fd: Option<RawFd>,
}

/// A layer that could not be applied: printed as one line, then exit 126.
struct Fail {
    layer: &'static str,
    cause: String,
    fix: String,
}

fn fail(layer: &'static str, cause: impl ToString, fix: impl Into<String>) -> Fail {
    Fail {
        layer,
        cause: cause.to_string(),
        fix: fix.into(),
    }
}

pub(crate) fn main(args: Vec<OsString>) -> ! {
    let err = match run(&args) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    let line = format!(
        "sandbox setup failed, server not started: {}: {}; {}\n",
        err.layer, err.cause, err.fix
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    std::process::exit(SETUP_FAILED_EXIT)
}

enum Never {}

fn run(args: &[OsString]) -> Result<Never, Fail> {
    const BUG: &str = "this is a bug in mcpsum; please report it";
    let [spec] = args else {
        return Err(fail("launcher", "expected exactly one argument", BUG));
    };
    let spec: LauncherSpec = serde_json::from_slice(spec.as_bytes())
        .map_err(|e| fail("launcher", format!("bad spec: {e}"), BUG))?;

    // 1. Die with the spawning thread; then make sure it did not die already.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| fail("launcher", format!("PR_SET_PDEATHSIG: {e}"), BUG))?;
    if nix::unistd::getppid().as_raw() != spec.parent_pid {
        return Err(fail(
            "launcher",
            "mcpsum exited before the server started",
            "retry",
        ));
    }

    // 2. Close every inherited descriptor but stdio and the bridge.
    let max = u32::MAX;
    match spec.bridge_fd.and_then(|fd| u32::try_from(fd).ok()) {
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
    })?;

    // 3. Allow mode: own user + network namespace, loopback, the bridged listener.
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    check_env(&env, &spec.env_names)?;
    let mut bridge_port = None;
    if spec.egress {
        let Some(bridge) = spec.bridge_fd else {
            return Err(fail("egress bridge", "no bridge descriptor", BUG));
        };
        enter_namespaces()?;
        let port = bridge_listener(bridge)?;
        bridge_port = Some(port);
        let url = OsString::from(format!("http://127.0.0.1:{port}"));
        for name in [
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "ALL_PROXY",
            "https_proxy",
            "http_proxy",
            "all_proxy",
        ] {
            set(&mut env, name, url.clone());
        }
        set(&mut env, "NO_PROXY", OsString::new());
        set(&mut env, "no_proxy", OsString::new());
        set(&mut env, "NODE_USE_ENV_PROXY", "1".into());
    }

    // Prepare the exec arguments now: nothing may be read after Landlock that is not allowed.
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
    let compiled = crate::seccomp::compile(&spec.seccomp)
        .map_err(|e| fail("seccomp", e, "this architecture is not supported"))?;

    // 5. Capabilities.
    drop_capabilities()?;
    // 6. Landlock.
    apply_landlock(&spec, bridge_port)?;
    // 7. seccomp (last: nothing of the set-up is filtered).
    crate::seccomp::install(&compiled).map_err(|e| {
        fail(
            "seccomp",
            e,
            "use a kernel with CONFIG_SECCOMP_FILTER, outside a container that forbids it",
        )
    })?;
    // 8. exec.
    let e = match nix::unistd::execve(&program, &argv, &envp) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    Err(fail(
        "exec",
        format!("`{}`: {e}", spec.program.display()),
        "make sure its directory is readable in the sandbox (add it to filesystem.read)",
    ))
}

fn set(env: &mut Vec<(OsString, OsString)>, name: &str, value: OsString) {
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

fn enter_namespaces() -> Result<(), Fail> {
    use nix::sched::{CloneFlags, unshare};
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).map_err(|e| {
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
    })?;
    let write = |file: &str, data: String| {
        std::fs::write(file, data).map_err(|e| {
            let fix = if e.kind() == std::io::ErrorKind::PermissionDenied {
                APPARMOR_FIX.to_string()
            } else {
                "use a kernel with user namespaces".to_string()
            };
            fail("user namespace", format!("{file}: {e}"), fix)
        })
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    crate::sys::loopback_up().map_err(|e| {
        let fix = if e.raw_os_error() == Some(libc::EPERM) {
            APPARMOR_FIX
        } else {
            "use a kernel with network namespaces"
        };
        fail("network namespace", format!("bringing lo up: {e}"), fix)
    })
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
        if check {
            recheck_write_target(fd.as_fd(), path, &spec.protected)?;
        }
        let is_dir = nix::sys::stat::fstat(fd.as_fd())
            .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
            .unwrap_or(true);
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

/// Design 4.1: re-check the opened descriptor, so a symlink swapped in after validation cannot
/// widen the write set to a protected path.
fn recheck_write_target(
    fd: BorrowedFd<'_>,
    path: &Path,
    protected: &[(String, PathBuf)],
) -> Result<(), Fail> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let real = std::fs::read_link(&link).map_err(|e| {
        fail(
            "landlock",
            format!("`{}`: cannot re-check: {e}", path.display()),
            "retry",
        )
    })?;
    if let Some((what, p)) = protected.iter().find(|(_, p)| p.starts_with(&real)) {
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
