//! The probe: `mcpsum __sandbox-probe <ops>`, run inside the sandbox by `sandbox test`.
//!
//! It performs each operation of its JSON argument and prints one JSON array on stdout, one
//! [`Outcome`] per operation, in order. It only observes: expectations are the caller's. Every
//! operation is harmless if the sandbox is missing (a probe in a weakened build must not mount
//! over `/` or stop its parent): `ptrace` uses `PTRACE_TRACEME`, `mount` targets a path that
//! does not exist, raw syscalls get NULL arguments. Environment values are never printed.

// What the probe observes is the errno of each attempt (`EACCES`, `EROFS`): `fs-err` keeps no OS
// error number in the errors it makes, so the probe calls std's functions.
#![expect(
    clippy::disallowed_methods,
    reason = "the probe reports each attempt's errno, which fs-err's errors do not keep"
)]

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A probe path starting with this marker is resolved against `TMPDIR` inside the sandbox (the
/// private tmp is made after the probe's arguments are fixed).
pub(crate) const TMP_MARK: &str = "${TMP}";

fn resolve(p: &std::path::Path) -> PathBuf {
    match (p.strip_prefix(TMP_MARK), std::env::var_os("TMPDIR")) {
        (Ok(rel), Some(tmp)) => PathBuf::from(tmp).join(rel),
        _ => p.to_path_buf(),
    }
}

/// One operation of the probe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ProbeOp {
    /// Open and read a file, or list a directory.
    Read(PathBuf),
    /// Open a file for writing (no truncation), or create and remove a file in a directory.
    Write(PathBuf),
    /// `truncate(2)` a file to its current length (path-based: Landlock governs it from ABI 3,
    /// seccomp denies it below).
    Truncate(PathBuf),
    /// `socket(family, SOCK_STREAM or SOCK_DGRAM, 0)`.
    Socket(i32),
    /// `socketpair(AF_UNIX, SOCK_STREAM)`.
    SocketPairUnix,
    /// Connect to a pathname Unix socket.
    UnixConnect(PathBuf),
    /// Connect to an abstract Unix socket.
    AbstractConnect(String),
    /// Direct TCP connect.
    TcpConnect(SocketAddr),
    /// Connect to the bridge port named by `HTTPS_PROXY`.
    ProxyPort,
    /// `CONNECT host:port` through `HTTPS_PROXY`; observes the HTTP status.
    ProxyConnect(String),
    /// A named refusal check (`ptrace`, `mount`, `unshare`, `bpf`, `keyctl`, ...).
    Syscall(String),
    /// A field of `/proc/self/status`.
    Status(String),
    /// `kill(getppid(), 0)`: signals to a process outside the sandbox.
    SignalParent,
    /// The sorted names of the environment.
    EnvNames,
    /// The Landlock ABI as seen from inside.
    LandlockAbi,
    /// A metadata change of a path that changes nothing even where it is allowed: `chmod` to
    /// its mode, `utimensat` to its times, `chown` to -1/-1, `setxattr` replacing an attribute
    /// it does not have.
    Meta(MetaCall, PathBuf),
    /// Creates a file in the directory, `chmod`s it 0600 and removes it.
    ChmodNew(PathBuf),
    /// The soft limit of `RLIMIT_NPROC` (`tasks`) or `RLIMIT_CORE` (`core`), or the path of the
    /// pids cgroup (`cgroup`).
    Limit(String),
}

/// The metadata calls of [`ProbeOp::Meta`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum MetaCall {
    /// `chmod(2)` to the current mode.
    Chmod,
    /// `utimensat(2)` to the current access and modification times.
    Utimensat,
    /// `chown(path, -1, -1)`.
    Chown,
    /// `setxattr(XATTR_REPLACE)` of `user.mcpsum-probe`.
    Setxattr,
}

impl MetaCall {
    pub(crate) fn name(self) -> &'static str {
        match self {
            MetaCall::Chmod => "chmod",
            MetaCall::Utimensat => "utimensat",
            MetaCall::Chown => "chown",
            MetaCall::Setxattr => "setxattr",
        }
    }
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Outcome {
    /// Succeeded.
    Ok,
    /// Failed with this errno (name as `nix` prints it, e.g. `EACCES`).
    Errno(String),
    /// Failed another way.
    Failed(String),
    /// A value (status fields, env names, HTTP status).
    Value(String),
}

impl Outcome {
    pub(crate) fn text(&self) -> String {
        match self {
            Outcome::Ok => "allowed".into(),
            Outcome::Errno(e) => format!("refused ({e})"),
            Outcome::Failed(e) => format!("failed ({e})"),
            Outcome::Value(v) => v.clone(),
        }
    }
}

pub(crate) fn main(args: Vec<OsString>) -> ! {
    let ops: Vec<ProbeOp> = match args.as_slice() {
        [a] => serde_json::from_slice(a.as_bytes()).unwrap_or_default(),
        _ => Vec::new(),
    };
    let out: Vec<Outcome> = ops.iter().map(run).collect();
    let text = serde_json::to_string(&out).unwrap_or_else(|_| "[]".into());
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.write_all(b"\n");
    let _ = stdout.flush();
    std::process::exit(0)
}

fn io(e: &std::io::Error) -> Outcome {
    match e.raw_os_error() {
        Some(n) => Outcome::Errno(format!("{:?}", nix::errno::Errno::from_raw(n))),
        None => Outcome::Failed(e.to_string()),
    }
}

fn errno(e: nix::errno::Errno) -> Outcome {
    Outcome::Errno(format!("{e:?}"))
}

fn res<T>(r: std::io::Result<T>) -> Outcome {
    match r {
        Ok(_) => Outcome::Ok,
        Err(e) => io(&e),
    }
}

pub(crate) fn run(op: &ProbeOp) -> Outcome {
    match op {
        ProbeOp::Read(p) => {
            let p = &resolve(p);
            if p.is_dir() {
                res(std::fs::read_dir(p).and_then(|mut d| d.next().transpose()))
            } else {
                res(std::fs::File::open(p).and_then(|mut f| f.read(&mut [0u8; 1])))
            }
        }
        ProbeOp::Write(p) => {
            let p = &resolve(p);
            if p.is_dir() {
                let f = p.join(format!(".mcpsum-probe-{}", std::process::id()));
                let r = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&f);
                if r.is_ok() {
                    let _ = std::fs::remove_file(&f);
                }
                res(r)
            } else {
                res(std::fs::OpenOptions::new().append(true).open(p))
            }
        }
        ProbeOp::Truncate(p) => {
            let p = &resolve(p);
            match std::fs::metadata(p) {
                Ok(m) => match nix::unistd::truncate(p, i64::try_from(m.len()).unwrap_or(0)) {
                    Ok(()) => Outcome::Ok,
                    Err(e) => errno(e),
                },
                Err(e) => io(&e),
            }
        }
        ProbeOp::Socket(family) => socket(*family),
        ProbeOp::SocketPairUnix => {
            use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
            match socketpair(
                AddressFamily::Unix,
                SockType::Stream,
                None,
                SockFlag::empty(),
            ) {
                Ok(_) => Outcome::Ok,
                Err(e) => errno(e),
            }
        }
        ProbeOp::UnixConnect(p) => res(std::os::unix::net::UnixStream::connect(p)),
        ProbeOp::AbstractConnect(name) => {
            use std::os::linux::net::SocketAddrExt;
            res(
                std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                    .and_then(|a| std::os::unix::net::UnixStream::connect_addr(&a)),
            )
        }
        ProbeOp::TcpConnect(addr) => res(TcpStream::connect_timeout(addr, Duration::from_secs(3))),
        ProbeOp::ProxyPort => match proxy_addr() {
            Some(a) => res(TcpStream::connect_timeout(&a, Duration::from_secs(3))),
            None => Outcome::Failed("HTTPS_PROXY not set".into()),
        },
        ProbeOp::ProxyConnect(target) => proxy_connect(target),
        ProbeOp::Syscall(name) => syscall(name),
        ProbeOp::Status(field) => {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            status
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{field}:")))
                .map_or_else(
                    || Outcome::Failed(format!("no {field} in /proc/self/status")),
                    |v| Outcome::Value(v.trim().to_string()),
                )
        }
        ProbeOp::SignalParent => match nix::sys::signal::kill(nix::unistd::getppid(), None) {
            Ok(()) => Outcome::Ok,
            Err(e) => errno(e),
        },
        ProbeOp::EnvNames => {
            let mut names: Vec<String> = std::env::vars_os()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect();
            names.sort();
            Outcome::Value(names.join(" "))
        }
        ProbeOp::LandlockAbi => Outcome::Value(crate::sys::landlock_abi().to_string()),
        ProbeOp::Meta(call, p) => meta(*call, &resolve(p)),
        ProbeOp::ChmodNew(dir) => {
            use std::os::unix::fs::PermissionsExt;
            let f = resolve(dir).join(format!(".mcpsum-probe-chmod-{}", std::process::id()));
            if let Err(e) = std::fs::write(&f, b"") {
                return io(&e);
            }
            let r = std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600));
            let _ = std::fs::remove_file(&f);
            res(r)
        }
        // The pids cgroup the probe runs in (`/proc/self/cgroup`; the cgroup files themselves
        // are outside every rule).
        ProbeOp::Limit(which) if which == "cgroup" => {
            match std::fs::read_to_string("/proc/self/cgroup") {
                Ok(text) => Outcome::Value(
                    text.lines()
                        .find(|l| {
                            l.split(':')
                                .nth(1)
                                .is_some_and(|c| c.split(',').any(|c| c == "pids"))
                        })
                        .or_else(|| text.lines().find(|l| l.starts_with("0::")))
                        .and_then(|l| l.splitn(3, ':').nth(2))
                        .unwrap_or("none")
                        .to_string(),
                ),
                Err(e) => io(&e),
            }
        }
        ProbeOp::Limit(which) => {
            use nix::sys::resource::{Resource, getrlimit};
            let r = if which == "core" {
                Resource::RLIMIT_CORE
            } else {
                Resource::RLIMIT_NPROC
            };
            match getrlimit(r) {
                Ok((soft, _)) => Outcome::Value(soft.to_string()),
                Err(e) => errno(e),
            }
        }
    }
}

fn meta(call: MetaCall, p: &std::path::Path) -> Outcome {
    use std::os::unix::fs::MetadataExt;
    let m = match std::fs::metadata(p) {
        Ok(m) => m,
        Err(e) => return io(&e),
    };
    let r = match call {
        MetaCall::Chmod => {
            use std::os::unix::fs::PermissionsExt;
            return res(std::fs::set_permissions(
                p,
                std::fs::Permissions::from_mode(m.mode() & 0o7777),
            ));
        }
        MetaCall::Utimensat => {
            use nix::sys::stat::{UtimensatFlags, utimensat};
            use nix::sys::time::TimeSpec;
            let atime = TimeSpec::new(m.atime(), m.atime_nsec());
            let mtime = TimeSpec::new(m.mtime(), m.mtime_nsec());
            utimensat(
                nix::fcntl::AT_FDCWD,
                p,
                &atime,
                &mtime,
                UtimensatFlags::FollowSymlink,
            )
        }
        MetaCall::Chown => nix::unistd::chown(p, None, None),
        MetaCall::Setxattr => {
            return res(crate::sys::replace_xattr(p, c"user.mcpsum-probe"));
        }
    };
    match r {
        Ok(()) => Outcome::Ok,
        Err(e) => errno(e),
    }
}

fn metadata(check: &str) -> Outcome {
    use nix::sys::stat::{FchmodatFlags, Mode, fchmodat};
    let Some(dir) = std::env::var_os("TMPDIR") else {
        return Outcome::Failed("TMPDIR not set".into());
    };
    let file = PathBuf::from(dir).join(format!("probe-{}", check.replace(' ', "-")));
    if let Err(e) = std::fs::write(&file, b"") {
        return io(&e);
    }
    let r = match check {
        "chmod setuid" => fchmodat(
            nix::fcntl::AT_FDCWD,
            &file,
            Mode::from_bits_truncate(0o4700),
            FchmodatFlags::FollowSymlink,
        ),
        "chmod world-writable" => fchmodat(
            nix::fcntl::AT_FDCWD,
            &file,
            Mode::from_bits_truncate(0o666),
            FchmodatFlags::FollowSymlink,
        ),
        _ => nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &file,
            None,
            None,
            nix::fcntl::AtFlags::empty(),
        ),
    };
    let _ = std::fs::remove_file(&file);
    match r {
        Ok(()) => Outcome::Ok,
        Err(e) => errno(e),
    }
}

fn socket(family: i32) -> Outcome {
    let ty = if family == libc::AF_PACKET || family == libc::AF_NETLINK {
        libc::SOCK_DGRAM
    } else {
        libc::SOCK_STREAM
    };
    match crate::sys::scalar_syscall(
        libc::SYS_socket,
        [libc::c_long::from(family), libc::c_long::from(ty), 0, 0],
    ) {
        Ok(fd) => {
            let _ = i32::try_from(fd).map(nix::unistd::close);
            Outcome::Ok
        }
        Err(e) => errno(nix::errno::Errno::from_raw(e)),
    }
}

fn proxy_addr() -> Option<SocketAddr> {
    let url = std::env::var("HTTPS_PROXY").ok()?;
    let hostport = url.strip_prefix("http://")?.trim_end_matches('/');
    hostport.parse().ok()
}

fn proxy_connect(target: &str) -> Outcome {
    let Some(addr) = proxy_addr() else {
        return Outcome::Failed("HTTPS_PROXY not set".into());
    };
    let mut s = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        Ok(s) => s,
        Err(e) => return io(&e),
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(15)));
    let req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    if let Err(e) = s.write_all(req.as_bytes()) {
        return io(&e);
    }
    let mut buf = [0u8; 512];
    let mut got = Vec::new();
    while !got.windows(2).any(|w| w == b"\r\n") && got.len() < 512 {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(buf.get(..n).unwrap_or_default()),
            Err(e) => return io(&e),
        }
    }
    let line = String::from_utf8_lossy(&got);
    match line.split_whitespace().nth(1) {
        Some(code) => Outcome::Value(format!("HTTP {code}")),
        None => Outcome::Failed("no HTTP status".into()),
    }
}

fn syscall(name: &str) -> Outcome {
    use crate::sys::scalar_syscall;
    let r = match name {
        "ptrace" => scalar_syscall(
            libc::SYS_ptrace,
            [libc::PTRACE_TRACEME as libc::c_long, 0, 0, 0],
        ),
        "mount" => {
            return match nix::mount::mount(
                None::<&str>,
                "/nonexistent-mcpsum-probe",
                Some("tmpfs"),
                nix::mount::MsFlags::empty(),
                None::<&str>,
            ) {
                Ok(()) => Outcome::Ok,
                Err(e) => errno(e),
            };
        }
        "unshare" => {
            return match nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER) {
                Ok(()) => Outcome::Ok,
                Err(e) => errno(e),
            };
        }
        "bpf" => scalar_syscall(libc::SYS_bpf, [0, 0, 0, 0]),
        "keyctl" => scalar_syscall(libc::SYS_keyctl, [0, -3, 0, 0]),
        "perf_event_open" => scalar_syscall(libc::SYS_perf_event_open, [0, 0, -1, -1]),
        "io_uring_setup" => scalar_syscall(libc::SYS_io_uring_setup, [1, 0, 0, 0]),
        "clone3" => scalar_syscall(libc::SYS_clone3, [0, 0, 0, 0]),
        "personality" => scalar_syscall(libc::SYS_personality, [0x0040_0000, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        "x32" => scalar_syscall(0x4000_0000 | libc::SYS_getpid, [0, 0, 0, 0]),
        // The parent's open-file limit, read only (no new limit given).
        "prlimit parent" => scalar_syscall(
            libc::SYS_prlimit64,
            [
                libc::c_long::from(nix::unistd::getppid().as_raw()),
                libc::c_long::from(libc::RLIMIT_NOFILE),
                0,
                0,
            ],
        ),
        // The parent's priority, set to what it is (the raw call returns 20 - nice).
        "setpriority parent" => {
            let ppid = libc::c_long::from(nix::unistd::getppid().as_raw());
            let prio = libc::c_long::from(libc::PRIO_PROCESS);
            match scalar_syscall(libc::SYS_getpriority, [prio, ppid, 0, 0]) {
                Ok(raw) => scalar_syscall(libc::SYS_setpriority, [prio, ppid, 20 - raw, 0]),
                Err(e) => Err(e),
            }
        }
        // An ID lookup that finds nothing where IPC is allowed.
        "shmget" => scalar_syscall(libc::SYS_shmget, [0x6d63_7073, 0, 0, 0]),
        "socketpair dgram" => {
            use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
            return match socketpair(
                AddressFamily::Unix,
                SockType::Datagram,
                None,
                SockFlag::empty(),
            ) {
                Ok(_) => Outcome::Ok,
                Err(e) => errno(e),
            };
        }
        // Metadata changes on a file of the probe's own, in `${TMP}`.
        "chmod setuid" | "chmod world-writable" | "chown" => return metadata(name),
        other => return Outcome::Failed(format!("unknown check {other}")),
    };
    match r {
        Ok(_) => Outcome::Ok,
        Err(e) => errno(nix::errno::Errno::from_raw(e)),
    }
}
