//! Every `unsafe` block of mcpsum, behind safe functions.
//!
//! What the safe crates (nix, caps, landlock, seccompiler) do not cover: the Landlock ABI query,
//! `close_range`, the `lo` ioctl, adopting a descriptor received over `SCM_RIGHTS`, clearing
//! `FD_CLOEXEC` between `fork` and `exec`, the new mount API of the read-only view
//! (`open_tree`, `mount_setattr`, `move_mount`), the probe's raw syscalls with scalar
//! arguments, and learn mode's seccomp user notification (the listener filter and the
//! `SECCOMP_IOCTL_NOTIF_*` ioctls, which no safe crate wraps).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The running kernel's Landlock ABI version, 0 when Landlock is absent or disabled.
pub(crate) fn landlock_abi() -> u32 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attr and size 0 only returns the ABI
    // version; the kernel reads and writes no memory of ours.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// Closes every descriptor in `first..=last` (`close_range(2)`, Linux 5.9).
pub(crate) fn close_range(first: u32, last: u32) -> io::Result<()> {
    if first > last {
        return Ok(());
    }
    // SAFETY: closing descriptors cannot violate memory safety; the launcher is single-threaded
    // and owns no `OwnedFd` in this range (it only keeps 0, 1, 2 and the bridge).
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Brings the loopback interface of the current network namespace up (`SIOCSIFFLAGS`).
pub(crate) fn loopback_up() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let sock = nix::sys::socket::socket(
        nix::sys::socket::AddressFamily::Inet,
        nix::sys::socket::SockType::Datagram,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io::Error::from)?;
    // SAFETY: `ifreq` is a plain C struct for which all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = libc::c_char::try_from(*src).unwrap_or(0);
    }
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into `req`, which lives for
    // the call; `sock` is an open descriptor.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &raw mut req) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after SIOCGIFFLAGS the union holds `ifru_flags`, which we read.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    let up = libc::c_short::try_from(libc::IFF_UP | libc::IFF_RUNNING).unwrap_or(0);
    req.ifr_ifru.ifru_flags = flags | up;
    // SAFETY: SIOCSIFFLAGS only reads `req`, valid for the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &raw const req) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Adopts a descriptor that `recvmsg` returned in an `SCM_RIGHTS` message.
pub(crate) fn adopt_received_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: the kernel installed `fd` in our table for this message (with MSG_CMSG_CLOEXEC);
    // nothing else owns it, so the `OwnedFd` becomes its only owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Makes `fd` (created with `FD_CLOEXEC`) survive the `exec` of `cmd`'s child only, so no other
/// process mcpsum spawns concurrently inherits it.
pub(crate) fn inherit_fd_in_child(cmd: &mut Command, fd: RawFd) {
    let hook = move || {
        // SAFETY: fcntl(F_SETFD) is async-signal-safe; it allocates nothing and takes no lock, as
        // code between fork and exec must. `fd` is open in the child (inherited from the parent,
        // which keeps it open until after the spawn).
        let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    // SAFETY: the closure only calls fcntl, which is async-signal-safe (see above).
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// Runs a syscall whose arguments are integers or null pointers (the probe's refusal checks),
/// returning its result or errno. No argument is ever a pointer to our memory, so the kernel
/// cannot write into this process.
pub(crate) fn scalar_syscall(nr: libc::c_long, a: [libc::c_long; 4]) -> Result<libc::c_long, i32> {
    // SAFETY: every argument is a scalar or 0 (NULL); the syscalls the probe names (ptrace
    // TRACEME, bpf/perf/io_uring/clone3 with NULL attrs, keyctl GET_KEYRING_ID, x32 numbers,
    // prlimit64 with NULL limits, get/setpriority to the current value, shmget of a key without
    // IPC_CREAT) either fail with an errno, act only on the calling process or change nothing.
    let rc = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3]) };
    if rc < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(rc)
    }
}

/// `fork(2)`: `None` in the child, `Some(child)` in the parent.
pub(crate) fn fork() -> nix::Result<Option<nix::unistd::Pid>> {
    // SAFETY: only the launcher calls this, first thing after it starts: a fresh process with
    // one thread (nothing spawned a thread before `launcher_main`), so no lock can be held by
    // another thread across the fork and both sides may allocate freely.
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Child => Ok(None),
        nix::unistd::ForkResult::Parent { child } => Ok(Some(child)),
    }
}

/// Restores the default action of `sig` (the guard mirroring a server killed by `sig`; the
/// launcher undoing Rust's ignored `SIGPIPE` before `exec`).
pub(crate) fn default_signal(sig: nix::sys::signal::Signal) {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, sigaction};
    let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: installing `SIG_DFL` runs no code of ours in signal context, so no handler can
    // break async-signal-safety or observe inconsistent state.
    let _ = unsafe { sigaction(sig, &dfl) };
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const OPEN_TREE_CLONE: libc::c_uint = 0x1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

fn rc(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Makes the mount at `path` (a mount root) and every mount below it read-only
/// (`mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY)`, Linux 5.12).
pub(crate) fn set_read_only_recursive(path: &std::ffi::CStr) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `path` is a NUL-terminated string and `attr` a `struct mount_attr` whose size is
    // passed; both live for the call, and the kernel only reads them.
    rc(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            AT_RECURSIVE,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// A detached copy of the mount tree at the object `at` refers to, with every mount below it
/// (`open_tree(OPEN_TREE_CLONE | AT_RECURSIVE | AT_EMPTY_PATH)`, Linux 5.2).
pub(crate) fn clone_tree(at: std::os::fd::BorrowedFd<'_>) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    let flags = OPEN_TREE_CLONE
        | AT_RECURSIVE
        | libc::c_uint::try_from(libc::AT_EMPTY_PATH | libc::O_CLOEXEC).unwrap_or(0);
    // SAFETY: an empty NUL-terminated path with AT_EMPTY_PATH makes the kernel use `at`, an open
    // descriptor; it reads the path and returns a new descriptor or -1.
    let fd =
        rc(unsafe { libc::syscall(libc::SYS_open_tree, at.as_raw_fd(), c"".as_ptr(), flags) })?;
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: `open_tree` just returned this descriptor, which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Attaches the detached tree `tree` on top of the object `target` refers to (`move_mount`).
pub(crate) fn attach_tree(
    tree: std::os::fd::BorrowedFd<'_>,
    target: std::os::fd::BorrowedFd<'_>,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: both paths are empty NUL-terminated strings and both descriptors are open; with
    // the two EMPTY_PATH flags the kernel uses the descriptors and writes no memory of ours.
    rc(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// `setxattr(path, name, "", 0, XATTR_REPLACE)`: replaces an existing attribute with an empty
/// value; fails with `ENODATA` (changing nothing) when the file does not have it.
pub(crate) fn replace_xattr(path: &std::path::Path, name: &std::ffi::CStr) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `path` and `name` are NUL-terminated strings living for the call; the value
    // pointer is valid for its length 0. The kernel only reads them.
    let r = unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            c"".as_ptr().cast(),
            0,
            libc::XATTR_REPLACE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One seccomp user notification (learn mode): the calling thread, the syscall and its
/// arguments, as the kernel reported them before the call ran.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Notification {
    /// The notification's cookie (what [`notify_continue`] and [`notify_id_valid`] take).
    pub(crate) id: u64,
    /// The thread that made the call (a thread id in our pid namespace).
    pub(crate) pid: u32,
    /// The syscall number.
    pub(crate) nr: i32,
    /// Its six arguments.
    pub(crate) args: [u64; 6],
}

/// Installs the classic-BPF program `prog` as a seccomp filter on the calling thread with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`, returning the listener descriptor whose reader answers
/// every call the program returns `SECCOMP_RET_USER_NOTIF` for. The caller has set
/// `no_new_privs` (or holds `CAP_SYS_ADMIN`).
pub(crate) fn install_notify_filter(prog: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let len = u16::try_from(prog.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, `len` instructions long, both alive for the call; the
    // kernel copies (and checks) the program and never writes through the pointer.
    let fd = rc(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &raw const fprog,
        )
    })?;
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: `seccomp` just returned this descriptor (close-on-exec), which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether the kernel's notification structures fit ours (`SECCOMP_GET_NOTIF_SIZES`): a newer
/// kernel may write a larger `struct seccomp_notif`, which [`notify_receive`] must not let it.
pub(crate) fn notify_sizes_fit() -> io::Result<bool> {
    let mut sizes = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: SECCOMP_GET_NOTIF_SIZES writes one `struct seccomp_notif_sizes` into `sizes`,
    // which lives for the call; flags must be 0.
    rc(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0u32,
            &raw mut sizes,
        )
    })?;
    Ok(
        usize::from(sizes.seccomp_notif) <= std::mem::size_of::<libc::seccomp_notif>()
            && usize::from(sizes.seccomp_notif_resp)
                <= std::mem::size_of::<libc::seccomp_notif_resp>(),
    )
}

/// Waits for the next notification on `listener` (`SECCOMP_IOCTL_NOTIF_RECV`).
pub(crate) fn notify_receive(listener: std::os::fd::BorrowedFd<'_>) -> io::Result<Notification> {
    use std::os::fd::AsRawFd;
    // SAFETY: `struct seccomp_notif` is plain integers, for which all-zero bytes are valid; the
    // kernel requires the buffer zeroed.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one `struct seccomp_notif` into `n`, alive for the call; the
    // kernel's struct is no larger than ours (`notify_sizes_fit`, checked before any listener
    // is made).
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &raw mut n,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Notification {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr,
        args: n.data.args,
    })
}

/// Whether notification `id` is still pending (`SECCOMP_IOCTL_NOTIF_ID_VALID`): its thread has
/// not died (and its pid not been reused) since it was received, so what was read from that
/// pid's memory and `/proc` entries was the caller's.
pub(crate) fn notify_id_valid(listener: std::os::fd::BorrowedFd<'_>, id: u64) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: the ioctl reads one u64 from `id`, alive for the call, and writes nothing.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &raw const id,
        ) == 0
    }
}

/// Lets the call of notification `id` go on as if no filter had stopped it
/// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
pub(crate) fn notify_continue(listener: std::os::fd::BorrowedFd<'_>, id: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: u32::try_from(libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE).unwrap_or(1),
    };
    // SAFETY: the ioctl reads one `struct seccomp_notif_resp` from `resp`, alive for the call.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &raw const resp,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
