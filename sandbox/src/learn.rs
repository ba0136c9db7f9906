//! Learn mode (`mcpsum proxy --learn`): the guard watches what the server's whole process tree
//! opens, executes, creates and connects to, without restricting any of it, and appends each
//! new observation as one JSON line to the server's observation file. mcpsum turns the file
//! into a `policy.sandbox` proposal (`mcpsum sandbox suggest`); this module only records.
//!
//! Mechanism: seccomp user notification with the continue response, which an ordinary user
//! may use (design note in the crate's README). The server side of the guard's fork sets
//! `no_new_privs`, installs a filter that returns `SECCOMP_RET_USER_NOTIF` for the watched
//! calls and hands the listener to the guard over a socket pair before it executes the server.
//! The guard reads each call's path (or address) from the caller's memory with
//! `process_vm_readv`, resolves relative paths through `/proc/TID/cwd` and `/proc/TID/fd/N`,
//! checks that the notification is still valid (the caller did not die and its pid was not
//! reused while we read) and lets the call continue. It sees requests, not results (failed
//! lookups are filtered afterwards, by mcpsum), and has the usual time-of-check race: what it
//! read may differ from what the kernel then uses, which is fine for a proposal a person
//! reviews and is why this is never used to enforce anything.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::{IoSliceMut, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

use crate::observe::Observation;

/// The guard's part of learning, made before the fork: the socket pair the server side sends
/// its listener over, and the observation file.
pub(crate) struct Learner {
    guard_end: OwnedFd,
    server_end: OwnedFd,
    out: std::fs::File,
}

/// The guard side once the fork happened: the listener's reader runs on its own thread.
impl Learner {
    /// Opens (creating, 0600, appending) the observation file and makes the socket pair.
    pub(crate) fn new(file: &Path) -> Result<Self, String> {
        use fs_err::os::unix::fs::OpenOptionsExt;
        if !crate::sys::notify_sizes_fit().map_err(|e| {
            format!("seccomp user notification is not available on this kernel ({e}); learning needs Linux 5.14 or later")
        })? {
            return Err("this kernel's seccomp notifications are larger than mcpsum knows; learning is not available with this build".into());
        }
        let out = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(file)
            .map_err(|e| format!("cannot open the observation file: {e}"))?
            .into_file();
        let (guard_end, server_end) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| format!("learn: socketpair: {e}"))?;
        Ok(Self {
            guard_end,
            server_end,
            out,
        })
    }

    /// In the guard, after the fork: receives the server side's listener and starts answering
    /// it on a thread of its own. Returns the descriptors the guard must keep open. Without a
    /// listener (the server side failed before it sent one) nothing is watched.
    pub(crate) fn in_guard(self) -> Vec<RawFd> {
        let Learner {
            guard_end,
            server_end,
            out,
        } = self;
        drop(server_end);
        let Some(listener) = receive_fd(&guard_end) else {
            return Vec::new();
        };
        drop(guard_end);
        let keep = vec![listener.as_raw_fd(), out.as_raw_fd()];
        let spawned = std::thread::Builder::new()
            .name("learn".into())
            .spawn(move || answer(&listener, out));
        if spawned.is_err() {
            // Without the reader every watched call would wait forever: better none.
            return Vec::new();
        }
        keep
    }

    /// On the server side, after the fork and before `execve`: sets `no_new_privs`, installs
    /// the notifying filter and sends its listener to the guard.
    pub(crate) fn in_server(self) -> Result<(), String> {
        let Learner {
            guard_end,
            server_end,
            out,
        } = self;
        drop(guard_end);
        drop(out);
        nix::sys::prctl::set_no_new_privs().map_err(|e| format!("learn: no_new_privs: {e}"))?;
        let prog = program();
        let listener = crate::sys::install_notify_filter(&prog)
            .map_err(|e| format!("learn: seccomp listener: {e}"))?;
        let fds = [listener.as_raw_fd()];
        let cmsg = [ControlMessage::ScmRights(&fds)];
        let iov = [std::io::IoSlice::new(b"L")];
        sendmsg::<()>(server_end.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
            .map_err(|e| format!("learn: handing the listener to the guard: {e}"))?;
        Ok(())
    }
}

fn receive_fd(sock: &OwnedFd) -> Option<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .ok()?;
    let mut received = None;
    for c in msg.cmsgs().ok()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for fd in fds {
                let owned = crate::sys::adopt_received_fd(fd);
                if received.is_none() {
                    received = Some(owned);
                }
            }
        }
    }
    received
}

/// What a watched call means.
#[derive(Clone, Copy)]
enum Kind {
    /// `open(path, flags)`.
    Open { path: u8, flags: u8 },
    /// `openat(dirfd, path, flags)`.
    OpenAt { flags: u8 },
    /// `openat2(dirfd, path, how)`: flags are the first u64 of `how`.
    OpenAt2,
    /// A write to the path in argument `path` (relative to the cwd); `entry`: the call adds or
    /// removes a folder entry (`unlink`, `symlink`, ...), not only writes (`truncate`).
    WritePath { path: u8, entry: bool },
    /// A write to the path in argument `path` relative to the descriptor in argument `dir`.
    WriteAt { dir: u8, path: u8, entry: bool },
    /// `creat(path, mode)`: an entry only when `path` did not exist.
    Creat,
    /// `renameat(olddir, old, newdir, new)` and `renameat2`: both paths are written.
    RenameAt,
    /// `rename(old, new)`.
    Rename,
    /// `execve(path, ...)`.
    Exec,
    /// `execveat(dirfd, path, ..., flags)`.
    ExecAt,
    /// `mkdir(path, mode)`.
    Mkdir,
    /// `mkdirat(dirfd, path, mode)`.
    MkdirAt,
    /// `connect(fd, addr, len)`.
    Connect,
}

/// The watched calls of this architecture.
fn watched() -> Vec<(libc::c_long, Kind)> {
    let at = |dir, path| Kind::WriteAt {
        dir,
        path,
        entry: true,
    };
    #[cfg(target_arch = "x86_64")]
    let entry = |path| Kind::WritePath { path, entry: true };
    let mut v = vec![
        (libc::SYS_openat, Kind::OpenAt { flags: 2 }),
        (libc::SYS_openat2, Kind::OpenAt2),
        (libc::SYS_execve, Kind::Exec),
        (libc::SYS_execveat, Kind::ExecAt),
        (libc::SYS_mkdirat, Kind::MkdirAt),
        (libc::SYS_connect, Kind::Connect),
        (libc::SYS_unlinkat, at(0, 1)),
        (libc::SYS_renameat2, Kind::RenameAt),
        (
            libc::SYS_truncate,
            Kind::WritePath {
                path: 0,
                entry: false,
            },
        ),
        (libc::SYS_symlinkat, at(1, 2)),
        (libc::SYS_linkat, at(2, 3)),
        (libc::SYS_mknodat, at(0, 1)),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        (libc::SYS_open, Kind::Open { path: 0, flags: 1 }),
        (libc::SYS_creat, Kind::Creat),
        (libc::SYS_mkdir, Kind::Mkdir),
        (libc::SYS_unlink, entry(0)),
        (libc::SYS_rmdir, entry(0)),
        (libc::SYS_rename, Kind::Rename),
        (libc::SYS_renameat, Kind::RenameAt),
        (libc::SYS_symlink, entry(1)),
        (libc::SYS_link, entry(1)),
        (libc::SYS_mknod, entry(0)),
    ]);
    v
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

/// The filter: the native architecture's watched calls notify, everything else is allowed
/// (another architecture's calls and x32 numbers are not watched: see the design note).
fn program() -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let calls = watched();
    let n = u8::try_from(calls.len()).unwrap_or(u8::MAX); // about 20: fits a jump offset
    let mut prog = vec![
        ins(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        ins(JEQ_K, 0, n.saturating_add(1), AUDIT_ARCH),
        ins(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
    ];
    for (i, (nr, _)) in calls.iter().enumerate() {
        let i = u8::try_from(i).unwrap_or(u8::MAX);
        prog.push(ins(JEQ_K, n - i, 0, u32::try_from(*nr).unwrap_or(u32::MAX)));
    }
    prog.push(ins(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW));
    prog.push(ins(RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF));
    prog
}

/// The guard's learning thread: answers every notification with "continue", after recording
/// what it asked for. Ends when the listener does (no process is left under the filter).
fn answer(listener: &OwnedFd, mut out: std::fs::File) {
    let calls = watched();
    let mut seen: HashSet<Observation> = HashSet::new();
    loop {
        let n = match crate::sys::notify_receive(listener.as_fd()) {
            Ok(n) => n,
            // The caller died between the notification and our read; or a signal.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => continue,
            Err(_) => return,
        };
        let kind = calls
            .iter()
            .find(|(nr, _)| i64::from(n.nr) == *nr)
            .map(|(_, k)| *k);
        let observed = kind.map(|k| observe(&n, k)).unwrap_or_default();
        let valid = crate::sys::notify_id_valid(listener.as_fd(), n.id);
        // Continue first: the caller waits for us; writing the line can come after.
        let _ = crate::sys::notify_continue(listener.as_fd(), n.id);
        if !valid {
            continue;
        }
        for o in observed {
            if seen.contains(&o) {
                continue;
            }
            if let Ok(mut line) = serde_json::to_vec(&o) {
                line.push(b'\n');
                // One write per line on an O_APPEND file: lines of concurrent sessions never
                // interleave.
                let _ = out.write_all(&line);
            }
            seen.insert(o);
        }
    }
}

/// What the call of `n` asks for. Runs before the call is let through, so "does the path exist"
/// is answered as of before the call (a `mkdir` of an existing folder creates nothing).
fn observe(n: &crate::sys::Notification, kind: Kind) -> Vec<Observation> {
    let paths: Vec<PathBuf> = match kind {
        Kind::Rename => {
            let cwd = at_dir(n.pid, libc::AT_FDCWD);
            [0u8, 1]
                .iter()
                .filter_map(|i| {
                    let raw = read_c_string(n.pid, n.args[usize::from(*i)])?;
                    resolve(cwd.clone(), &raw)
                })
                .collect()
        }
        Kind::RenameAt => [(0usize, 1usize), (2, 3)]
            .iter()
            .filter_map(|(d, p)| {
                let dir = at_dir(n.pid, low_i32(n.args[*d]));
                let raw = read_c_string(n.pid, n.args[*p])?;
                resolve(dir, &raw)
            })
            .collect(),
        _ => return observe_one(n, kind).unwrap_or_default(),
    };
    paths.into_iter().flat_map(write_entry).collect()
}

/// A write that changes the entries of the path's folder.
fn write_entry(path: PathBuf) -> [Observation; 2] {
    [
        Observation::Write { path: path.clone() },
        Observation::Entry { path },
    ]
}

/// A write to `path`: of an entry of its folder (`unlink`, `symlink`, ...) or of the file alone
/// (`truncate`).
fn write_obs(path: PathBuf, entry: bool) -> Vec<Observation> {
    if entry {
        write_entry(path).to_vec()
    } else {
        vec![Observation::Write { path }]
    }
}

/// Whether `path` has no entry (as of now: before the watched call runs).
fn absent(path: &Path) -> bool {
    fs_err::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

fn observe_one(n: &crate::sys::Notification, kind: Kind) -> Option<Vec<Observation>> {
    let pid = n.pid;
    let arg = |i: u8| n.args[usize::from(i)];
    let cwd = || at_dir(pid, libc::AT_FDCWD);
    let at = |dir: u8| at_dir(pid, low_i32(arg(dir)));
    let path_at = |dir: Option<PathBuf>, p: u8| -> Option<PathBuf> {
        let raw = read_c_string(pid, arg(p))?;
        resolve(dir, &raw)
    };
    match kind {
        Kind::Open { path, flags } => open_all(path_at(cwd(), path)?, arg(flags)),
        Kind::OpenAt { flags } => open_all(path_at(at(0), 1)?, arg(flags)),
        Kind::OpenAt2 => {
            let mut how = [0u8; 8];
            read_remote(pid, arg(2), &mut how)?;
            open_all(path_at(at(0), 1)?, u64::from_ne_bytes(how))
        }
        Kind::WritePath { path, entry } => Some(write_obs(path_at(cwd(), path)?, entry)),
        Kind::WriteAt { dir, path, entry } => Some(write_obs(path_at(at(dir), path)?, entry)),
        Kind::Creat => {
            let path = path_at(cwd(), 0)?;
            Some(if absent(&path) {
                write_entry(path).to_vec()
            } else {
                vec![Observation::Write { path }]
            })
        }
        Kind::Exec => Some(vec![Observation::Exec {
            path: path_at(cwd(), 0)?,
        }]),
        Kind::ExecAt => {
            let raw = read_c_string(pid, arg(1))?;
            let path = if raw.is_empty() {
                at(0)?
            } else {
                resolve(at(0), &raw)?
            };
            Some(vec![Observation::Exec { path }])
        }
        Kind::Mkdir => mkdir_obs(path_at(cwd(), 0)?),
        Kind::MkdirAt => mkdir_obs(path_at(at(0), 1)?),
        Kind::Connect => Some(connect_obs(pid, arg(1), arg(2)).into_iter().collect()),
        Kind::Rename | Kind::RenameAt => None,
    }
}

/// The `int` in the low half of a syscall argument (the kernel ignores the high half).
fn low_i32(arg: u64) -> i32 {
    let low = u32::try_from(arg & 0xffff_ffff).unwrap_or(0);
    i32::from_ne_bytes(low.to_ne_bytes())
}

/// A `mkdir` creates a folder only where none was (`mkdir -p /usr/share/x` asks for `/usr` too).
fn mkdir_obs(path: PathBuf) -> Option<Vec<Observation>> {
    Some(if absent(&path) {
        vec![Observation::Mkdir { path }]
    } else {
        Vec::new()
    })
}

/// [`open_obs`], with the [`Observation::Entry`] of an `O_CREAT` that makes a new file. An open follows a link in the last component (unless `O_NOFOLLOW`, when it fails), so what
/// it reads, writes or creates is the link's target, recorded as such: a sandbox grants the
/// target's path, and the link's folder only for a change of the link itself.
fn open_all(path: PathBuf, flags: u64) -> Option<Vec<Observation>> {
    let follows = low_i32(flags) & libc::O_NOFOLLOW == 0;
    let is_link = fs_err::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
    let path = if follows && is_link {
        crate::observe::opened_path(&path).unwrap_or(path)
    } else {
        path
    };
    let creates = low_i32(flags) & libc::O_CREAT != 0 && absent(&path);
    let o = open_obs(path.clone(), flags)?;
    Some(if creates {
        vec![o, Observation::Entry { path }]
    } else {
        vec![o]
    })
}

fn open_obs(path: PathBuf, flags: u64) -> Option<Observation> {
    let flags = low_i32(flags);
    // An `O_PATH` descriptor reads nothing (Landlock does not check it either).
    if flags & libc::O_PATH != 0 {
        return None;
    }
    let writes =
        flags & libc::O_ACCMODE != libc::O_RDONLY || flags & (libc::O_CREAT | libc::O_TRUNC) != 0;
    Some(if writes {
        Observation::Write { path }
    } else {
        Observation::Read { path }
    })
}

fn connect_obs(pid: u32, addr: u64, len: u64) -> Option<Observation> {
    let len = usize::try_from(len)
        .ok()?
        .min(std::mem::size_of::<libc::sockaddr_un>());
    let mut buf = vec![0u8; len];
    read_remote(pid, addr, &mut buf)?;
    let family = i32::from(u16::from_ne_bytes([*buf.first()?, *buf.get(1)?]));
    match family {
        libc::AF_INET if buf.len() >= 8 => {
            let port = u16::from_be_bytes([buf[2], buf[3]]);
            let ip = std::net::Ipv4Addr::new(buf[4], buf[5], buf[6], buf[7]);
            Some(Observation::Connect {
                addr: format!("{ip}:{port}"),
            })
        }
        libc::AF_INET6 if buf.len() >= 24 => {
            let port = u16::from_be_bytes([buf[2], buf[3]]);
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&buf[8..24]);
            let ip = std::net::Ipv6Addr::from(octets);
            Some(Observation::Connect {
                addr: format!("[{ip}]:{port}"),
            })
        }
        libc::AF_UNIX if buf.len() > 2 => {
            let name = &buf[2..];
            let path = if name[0] == 0 {
                let end = name[1..]
                    .iter()
                    .position(|b| *b == 0)
                    .map_or(name.len(), |e| e + 1);
                let mut p = b"@".to_vec();
                p.extend_from_slice(&name[1..end]);
                PathBuf::from(OsString::from_vec(p))
            } else {
                let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
                PathBuf::from(OsString::from_vec(name[..end].to_vec()))
            };
            Some(Observation::Unix { path })
        }
        _ => None,
    }
}

/// The folder a relative path of `pid` is resolved against: its cwd for `AT_FDCWD`, else the
/// path behind its descriptor `dirfd`.
fn at_dir(pid: u32, dirfd: i32) -> Option<PathBuf> {
    let link = if dirfd == libc::AT_FDCWD {
        format!("/proc/{pid}/cwd")
    } else {
        format!("/proc/{pid}/fd/{dirfd}")
    };
    let target = fs_err::read_link(link).ok()?;
    target.is_absolute().then_some(target)
}

/// `raw` made absolute against `dir` (when relative) and lexically normalised.
fn resolve(dir: Option<PathBuf>, raw: &[u8]) -> Option<PathBuf> {
    if raw.is_empty() {
        return None;
    }
    let p = Path::new(std::ffi::OsStr::from_bytes(raw));
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir?.join(p)
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

/// Reads `buf.len()` bytes of `pid`'s memory at `addr`; `None` when any is unreadable.
fn read_remote(pid: u32, addr: u64, buf: &mut [u8]) -> Option<()> {
    let pid = Pid::from_raw(i32::try_from(pid).ok()?);
    let len = buf.len();
    let remote = [RemoteIoVec {
        base: usize::try_from(addr).ok()?,
        len,
    }];
    let mut local = [IoSliceMut::new(buf)];
    (process_vm_readv(pid, &mut local, &remote).ok()? == len).then_some(())
}

/// The NUL-terminated string at `addr` in `pid`'s memory (at most `PATH_MAX` bytes), read a
/// page at a time so that a string near the end of a mapping is still read.
fn read_c_string(pid: u32, addr: u64) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    const MAX: usize = 4096;
    if addr == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < MAX {
        let room = usize::try_from(PAGE - at % PAGE).ok()?;
        let mut chunk = vec![0u8; room];
        read_remote(pid, at, &mut chunk)?;
        if let Some(end) = chunk.iter().position(|b| *b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Some(out);
        }
        out.extend_from_slice(&chunk);
        at += u64::try_from(room).ok()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_made_absolute_and_normalised() {
        let d = Some(PathBuf::from("/srv/app"));
        assert_eq!(
            resolve(d.clone(), b"../data/./x.txt"),
            Some(PathBuf::from("/srv/data/x.txt"))
        );
        assert_eq!(
            resolve(d.clone(), b"/etc//passwd"),
            Some(PathBuf::from("/etc/passwd"))
        );
        assert_eq!(resolve(None, b"rel"), None);
        assert_eq!(resolve(d, b""), None);
    }

    #[test]
    fn open_flags_decide_read_or_write() {
        let p = PathBuf::from("/x");
        let flags = |f: i32| u64::try_from(f).unwrap();
        assert_eq!(
            open_obs(p.clone(), flags(libc::O_RDONLY)),
            Some(Observation::Read { path: p.clone() })
        );
        assert_eq!(
            open_obs(p.clone(), flags(libc::O_WRONLY | libc::O_CREAT)),
            Some(Observation::Write { path: p.clone() })
        );
        assert_eq!(open_obs(p, flags(libc::O_PATH)), None);
    }

    #[test]
    fn only_a_folder_or_file_that_was_not_there_is_a_creation() {
        let dir = tempfile::tempdir().unwrap();
        // `mkdir -p /usr/share/x` asks for `/usr` first: EEXIST, nothing made.
        assert_eq!(mkdir_obs(PathBuf::from("/usr")), Some(Vec::new()));
        let new = dir.path().join("new");
        assert_eq!(
            mkdir_obs(new.clone()),
            Some(vec![Observation::Mkdir { path: new.clone() }])
        );
        let flags = u64::try_from(libc::O_WRONLY | libc::O_CREAT).unwrap();
        assert_eq!(
            open_all(new.clone(), flags),
            Some(vec![
                Observation::Write { path: new.clone() },
                Observation::Entry { path: new.clone() }
            ])
        );
        fs_err::write(&new, "x").unwrap();
        assert_eq!(
            open_all(new.clone(), flags),
            Some(vec![Observation::Write { path: new }])
        );
    }

    #[test]
    fn an_open_through_a_link_is_recorded_at_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        fs_err::create_dir_all(root.join("data")).unwrap();
        fs_err::create_dir_all(root.join("tmpl")).unwrap();
        fs_err::write(root.join("data/f"), "x").unwrap();
        let link = root.join("tmpl/lnk");
        std::os::unix::fs::symlink(root.join("data/f"), &link).unwrap();
        let flags = |f: i32| u64::try_from(f).unwrap();
        assert_eq!(
            open_all(link.clone(), flags(libc::O_RDONLY)),
            Some(vec![Observation::Read {
                path: root.join("data/f")
            }])
        );
        assert_eq!(
            open_all(link.clone(), flags(libc::O_WRONLY | libc::O_TRUNC)),
            Some(vec![Observation::Write {
                path: root.join("data/f")
            }])
        );
        // Through a dangling link, `O_CREAT` makes the target: an entry of the target's folder.
        let dangling = root.join("tmpl/new");
        std::os::unix::fs::symlink("../data/g", &dangling).unwrap();
        let target = root.join("data/g");
        assert_eq!(
            open_all(dangling, flags(libc::O_WRONLY | libc::O_CREAT)),
            Some(vec![
                Observation::Write {
                    path: target.clone()
                },
                Observation::Entry { path: target }
            ])
        );
        // `O_NOFOLLOW` opens fail on a link: recorded as named.
        assert_eq!(
            open_all(link.clone(), flags(libc::O_RDONLY | libc::O_NOFOLLOW)),
            Some(vec![Observation::Read { path: link }])
        );
        // Unlinking the link is a change of its own folder.
        let l = root.join("tmpl/lnk");
        assert_eq!(
            write_obs(l.clone(), true),
            [
                Observation::Write { path: l.clone() },
                Observation::Entry { path: l }
            ]
        );
    }

    #[test]
    fn the_filter_jumps_land_on_its_two_returns() {
        let prog = program();
        let n = watched().len();
        assert_eq!(prog.len(), n + 5);
        // The arch check's false branch is the allow.
        assert_eq!(2 + usize::from(prog[1].jf), n + 3);
        for i in 0..n {
            assert_eq!(3 + i + 1 + usize::from(prog[3 + i].jt), n + 4);
        }
        assert_eq!(prog[n + 4].k, libc::SECCOMP_RET_USER_NOTIF);
    }
}
