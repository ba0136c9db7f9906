//! Parent side of a launch (design 4, steps 3-6): the private `${TMP}`, the cache directories,
//! the bridge socketpair, and the [`Command`] that runs the launcher binary ([`LAUNCHER_NAME`],
//! found beside the running binary and opened once at start).

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::launcher::LauncherSpec;
use crate::plan::{EnvValue, SandboxPlan};
use crate::policy::{NetworkMode, PolicyPath};
use crate::{EXEC_SUBCOMMAND, LAUNCHER_NAME, SandboxError};

/// The launcher binary, opened at start by [`open_launcher`] or [`open_launcher_at`]; the
/// error says where it was looked for.
static LAUNCHER: OnceLock<Result<OwnedFd, String>> = OnceLock::new();

/// Opens the launcher ([`LAUNCHER_NAME`]) that sits beside the running binary (`O_PATH`), so
/// every later launch executes this very file, even if it is replaced on disk while mcpsum runs
/// (design 4.5). Call it once, early in `main`. A missing launcher is remembered, not returned
/// here: commands that launch nothing still work, and each launch then refuses with an error
/// that says where it looked.
pub fn open_launcher() {
    match fs_err::read_link("/proc/self/exe") {
        Ok(exe) => open_launcher_at(&exe.with_file_name(LAUNCHER_NAME)),
        Err(e) => {
            let _ = LAUNCHER.set(Err(format!(
                "cannot find the running binary to look for `{LAUNCHER_NAME}` beside it: {e}"
            )));
        }
    }
}

/// [`open_launcher`] for a launcher at `path` (the sandbox crate's test harness is its own
/// launcher). The first call wins.
pub fn open_launcher_at(path: &Path) {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::Mode;
    if LAUNCHER.get().is_some() {
        return;
    }
    let opened = match open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()) {
        Ok(fd) if is_executable_file(&fd) => Ok(fd),
        Ok(_) => Err(missing_launcher(path, "is not an executable file")),
        Err(nix::errno::Errno::ENOENT) => Err(missing_launcher(path, "does not exist")),
        Err(e) => Err(missing_launcher(path, &format!("cannot be opened ({e})"))),
    };
    let _ = LAUNCHER.set(opened);
}

const BUG_FIX: &str = "this is a bug in mcpsum; please report it";

fn missing_launcher(path: &Path, why: &str) -> String {
    format!(
        "`{}` {why}: mcpsum starts every server through its launcher `{LAUNCHER_NAME}`, which \
         must sit beside the `mcpsum` binary",
        path.display()
    )
}

/// What to do about a missing launcher.
const MISSING_FIX: &str = "install both binaries into the same directory (`cargo install` does; \
     from a build, copy `target/release/mcpsum-launch` next to `mcpsum`)";

fn is_executable_file(fd: &OwnedFd) -> bool {
    nix::sys::stat::fstat(fd)
        .is_ok_and(|st| (st.st_mode & libc::S_IFMT) == libc::S_IFREG && st.st_mode & 0o111 != 0)
}

/// The path that executes the opened launcher, or why there is none.
pub(crate) fn launcher_path() -> Result<PathBuf, SandboxError> {
    match LAUNCHER.get() {
        // The child resolves `/proc/self/fd/N` in its own (inherited) descriptor table before
        // `execve` closes the CLOEXEC descriptor.
        Some(Ok(fd)) => Ok(PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))),
        Some(Err(cause)) => Err(SandboxError::layer("launcher", cause, MISSING_FIX)),
        None => Err(SandboxError::layer(
            "launcher",
            "the launcher was never looked for (`open_launcher` not called)",
            BUG_FIX,
        )),
    }
}

/// A prepared launch. Keep it alive as long as the server runs: dropping it removes `${TMP}`.
#[derive(Debug)]
pub struct Prepared {
    /// `<launcher> __sandbox-exec <spec>` with the server's final environment (after
    /// `env_clear`). Set stdin/stdout/stderr and `process_group(0)`, then spawn it (for tokio:
    /// `tokio::process::Command::from(command)`).
    pub command: Command,
    tmp: tempfile::TempDir,
    bridge: Option<OwnedFd>,
    child_end: Option<OwnedFd>,
}

impl Prepared {
    /// The private `${TMP}` of this launch.
    pub fn tmp_dir(&self) -> &Path {
        self.tmp.path()
    }

    /// Allow mode only (else `Ok(None)`): after the command was spawned, waits up to `timeout`
    /// for the launcher to send the listening socket it bound to `127.0.0.1:0` inside the
    /// server's network namespace. Returns it blocking; call `set_nonblocking(true)` before
    /// `tokio::net::TcpListener::from_std`. An error means the server must not run: kill it.
    pub fn receive_listener(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<std::net::TcpListener>, SandboxError> {
        use nix::sys::socket::{
            ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt::ReceiveTimeout,
        };
        let Some(bridge) = self.bridge.take() else {
            return Ok(None);
        };
        // Our copy of the child's end must go, or EOF never arrives if the launcher dies.
        self.child_end = None;
        let fix = "the launcher's error line is on the server's stderr";
        let tv = nix::sys::time::TimeVal::new(
            i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            i64::from(timeout.subsec_micros()),
        );
        setsockopt(&bridge, ReceiveTimeout, &tv)
            .map_err(|e| SandboxError::layer("egress bridge", e.to_string(), fix))?;
        let mut buf = [0u8; 2];
        let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let msg = recvmsg::<()>(
            bridge.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(|e| {
            let cause = if e == nix::errno::Errno::EAGAIN {
                format!("the launcher did not report within {timeout:?}")
            } else {
                format!("receiving the listener: {e}")
            };
            SandboxError::layer("egress bridge", cause, fix)
        })?;
        let mut fds = Vec::new();
        for c in msg
            .cmsgs()
            .map_err(|e| SandboxError::layer("egress bridge", e.to_string(), fix))?
        {
            if let ControlMessageOwned::ScmRights(v) = c {
                fds.extend(v.into_iter().map(crate::sys::adopt_received_fd));
            }
        }
        let n = msg.bytes;
        if n == 0 && fds.is_empty() {
            return Err(SandboxError::layer(
                "egress bridge",
                "the launcher exited before reporting its listener",
                fix,
            ));
        }
        let (Some(fd), 1, 2) = (fds.pop(), fds.len() + 1, n) else {
            return Err(SandboxError::layer(
                "egress bridge",
                "malformed message from the launcher",
                fix,
            ));
        };
        let listener = std::net::TcpListener::from(fd);
        let port = u16::from_be_bytes(buf);
        match listener.local_addr() {
            Ok(a) if a.port() == port && a.ip().is_loopback() => Ok(Some(listener)),
            _ => Err(SandboxError::layer(
                "egress bridge",
                "the received socket is not the announced loopback listener",
                fix,
            )),
        }
    }
}

/// Creates the private `${TMP}`, the directories of the plan and the bridge, and builds the
/// launcher command. See [`Prepared`].
pub fn prepare(plan: SandboxPlan) -> Result<Prepared, SandboxError> {
    let egress = matches!(plan.network, NetworkMode::Egress { .. });
    let tmp = make_tmp()?;
    // The launcher compares each opened rule with its path: name `${TMP}` by its real path
    // (`TMPDIR` may lead through a link).
    let tmp_real = crate::policy::canonical_or_lexical(tmp.path());
    let resolve = |p: &PolicyPath| match p {
        PolicyPath::Host(h) => h.clone(),
        PolicyPath::Tmp(rel) => tmp_real.join(rel),
    };
    for d in &plan.create_dirs {
        let path = resolve(d);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .map_err(|e| SandboxError::io(format!("creating `{}`", path.display()), e))?;
    }

    let (bridge, child_end) = if egress {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (a, b) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| SandboxError::io("creating the bridge socketpair", e.into()))?;
        (Some(a), Some(b))
    } else {
        (None, None)
    };

    let spec = LauncherSpec {
        program: plan.program.clone(),
        argv: plan.argv.clone(),
        read: plan
            .read
            .iter()
            .map(|r| (resolve(&r.path), r.required))
            .collect(),
        write: plan
            .write
            .iter()
            .map(|r| (resolve(&r.path), r.required))
            .collect(),
        devices: plan.devices.clone(),
        egress,
        landlock_abi: plan.landlock.abi,
        seccomp: plan.seccomp.clone(),
        view: plan.view.clone(),
        limits: plan.limits,
        protected: plan.protected.clone(),
        env_names: plan.env_names(),
        parent_pid: i32::try_from(std::process::id()).unwrap_or(0),
        bridge_fd: child_end.as_ref().map(AsRawFd::as_raw_fd),
    };
    let spec = serde_json::to_string(&spec).map_err(|e| {
        SandboxError::layer(
            "launcher",
            format!("a path is not UTF-8: {e}"),
            "use UTF-8 paths",
        )
    })?;

    let mut command = Command::new(launcher_path()?);
    command.arg(EXEC_SUBCOMMAND).arg(spec).env_clear();
    for (name, value) in &plan.env {
        let v: OsString = match value {
            EnvValue::Given(v) => v.clone(),
            EnvValue::Tmp => tmp.path().as_os_str().to_owned(),
            EnvValue::Path(p) => p.as_os_str().to_owned(),
        };
        command.env(name, v);
    }
    if let Some(fd) = &child_end {
        crate::sys::inherit_fd_in_child(&mut command, fd.as_raw_fd());
    }
    Ok(Prepared {
        command,
        tmp,
        bridge,
        child_end,
    })
}

/// A fresh 0700 directory under `$XDG_RUNTIME_DIR/mcpsum/` or `/tmp/mcpsum-<uid>/`.
fn make_tmp() -> Result<tempfile::TempDir, SandboxError> {
    let uid = nix::unistd::geteuid().as_raw();
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && owned_dir(p, uid))
        .map_or_else(
            || std::env::temp_dir().join(format!("mcpsum-{uid}")),
            |p| p.join("mcpsum"),
        );
    match std::fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(SandboxError::io(
                format!("creating `{}`", base.display()),
                e,
            ));
        }
    }
    // Another user could have made `/tmp/mcpsum-<uid>` first (or a symlink): refuse it.
    if !owned_dir(&base, uid) {
        return Err(SandboxError::layer(
            "tmp",
            format!("`{}` is not a directory owned by uid {uid}", base.display()),
            "remove it and retry",
        ));
    }
    let _ = fs_err::set_permissions(&base, std::fs::Permissions::from_mode(0o700));
    let dir = tempfile::Builder::new()
        .prefix("tmp-")
        .tempdir_in(&base)
        .map_err(|e| {
            SandboxError::io(format!("creating a directory in `{}`", base.display()), e)
        })?;
    fs_err::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .map_err(|e| SandboxError::io("making the temporary directory private (0700)", e))?;
    Ok(dir)
}

fn owned_dir(p: &Path, uid: u32) -> bool {
    fs_err::symlink_metadata(p).is_ok_and(|m| m.is_dir() && m.uid() == uid)
}

#[cfg(test)]
mod env_tests {
    use crate::{LaunchRequest, NetworkMode, ValidatedPolicy};

    /// I2: values travel only as the launcher's environment, never in its argv (which any
    /// process can read in `/proc/PID/cmdline`).
    #[test]
    fn env_values_are_never_in_the_launcher_argv() {
        let state = tempfile::tempdir().unwrap();
        let req = LaunchRequest {
            server: "s".into(),
            policy: ValidatedPolicy {
                read: vec![],
                write: vec![],
                network: NetworkMode::None,
                limits: crate::Limits::default(),
                protected: vec![],
            },
            argv: vec!["/bin/true".into()],
            env: vec![("API_TOKEN".into(), "tok-123-secret".into())],
            state_dir: state.path().into(),
        };
        let plan = crate::plan_for_kernel(&req, 7).unwrap();
        crate::open_launcher_at(std::path::Path::new("/bin/true"));
        let prepared = crate::prepare(plan).unwrap();
        let args: Vec<String> = prepared
            .command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[0], crate::EXEC_SUBCOMMAND);
        assert!(args.iter().all(|a| !a.contains("tok-123-secret")));
        assert!(args[1].contains("API_TOKEN"));
        let envs: Vec<(String, String)> = prepared
            .command
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                )
            })
            .collect();
        let tmp = prepared.tmp_dir().to_string_lossy().into_owned();
        assert_eq!(
            envs,
            [
                ("API_TOKEN".to_string(), "tok-123-secret".to_string()),
                ("TMP".to_string(), tmp.clone()),
                ("TMPDIR".to_string(), tmp.clone()),
            ]
        );
        let dir = prepared.tmp_dir().to_path_buf();
        assert!(dir.is_dir());
        drop(prepared);
        assert!(!dir.exists(), "private tmp removed on drop");
    }
}
