//! Linux relay with `splice(2)`: each direction goes through a private pipe, so tunnel bytes move
//! between the two sockets inside the kernel instead of through a user-space buffer. Opt-in
//! ([`crate::Limits::zero_copy`]) because on loopback it costs more CPU in total, not less
//! (`examples/bench.rs`, Linux 6.18, 2 cores): the relay thread spends about what the copying
//! relay's does (with a 1 MiB pipe, `F_SETPIPE_SZ`, a third to a half less), but the endpoints
//! spend 300-500 ms more per GiB, so the total rises by about half and throughput falls. The
//! spliced pages are the sender's own: the receiver copies out of memory that is no longer in
//! the cache (`perf`: its copy-out alone takes three times the samples of all copy-outs with the
//! copying relay) and the sender cannot recycle its page fragments, whereas the copying relay
//! hands on pages it has just written. Each tunnel also costs four descriptors, and pipe capacity
//! counts against the user's pipe budget (`/proc/sys/fs/pipe-user-pages-soft`), so the pipes
//! keep their default size. It may pay off when the upstream is a real NIC and the CPU is not
//! the limit; measure before turning it on.
//! Only nix's safe wrappers are used; this crate stays `forbid(unsafe_code)`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use nix::fcntl::{OFlag, SpliceFFlags, splice};
use nix::sys::socket::{Shutdown, shutdown};
use nix::unistd::pipe2;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// At most this many tunnels splice at once: each costs four pipe descriptors, and with the
/// connection cap this keeps the proxy's descriptors well under the usual soft limit of 1024.
/// Further tunnels use the copying relay.
pub(crate) const MAX_SPLICING: usize = 64;

static SPLICING: AtomicUsize = AtomicUsize::new(0);

/// A slot among [`MAX_SPLICING`], released on drop.
pub(crate) struct Slot(());

impl Slot {
    pub(crate) fn try_take() -> Option<Slot> {
        SPLICING
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_SPLICING).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        SPLICING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Two pipes, one per direction.
pub(crate) struct Pipes {
    up: (OwnedFd, OwnedFd),
    down: (OwnedFd, OwnedFd),
}

impl Pipes {
    pub(crate) fn new() -> io::Result<Pipes> {
        let flags = OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        let pipes = Pipes {
            up: pipe2(flags)?,
            down: pipe2(flags)?,
        };
        Ok(pipes)
    }
}

/// Relay until both directions reached EOF, or either failed. Counts are updated as bytes leave
/// the pipe for the destination socket, so they survive a reset.
pub(crate) async fn relay(
    client: &TcpStream,
    upstream: &TcpStream,
    pipes: Pipes,
    up: &AtomicU64,
    down: &AtomicU64,
) -> io::Result<()> {
    let a = one_way(client, upstream, &pipes.up, up);
    let b = one_way(upstream, client, &pipes.down, down);
    tokio::pin!(a, b);
    tokio::select! {
        r = &mut a => { r?; b.await }
        r = &mut b => { r?; a.await }
    }
}

const CHUNK: usize = 1 << 20;

async fn one_way(
    from: &TcpStream,
    to: &TcpStream,
    pipe: &(OwnedFd, OwnedFd),
    count: &AtomicU64,
) -> io::Result<()> {
    let (pipe_r, pipe_w) = (pipe.0.as_fd(), pipe.1.as_fd());
    let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
    loop {
        // The pipe is empty here, so EAGAIN can only mean the socket has nothing to read.
        from.readable().await?;
        let n = match from.try_io(Interest::READABLE, || {
            splice(from.as_fd(), None, pipe_w, None, CHUNK, flags).map_err(io::Error::from)
        }) {
            Ok(0) => {
                // EOF: pass the half-close on and let the other direction finish.
                let _ = shutdown(to.as_raw_fd(), Shutdown::Write);
                return Ok(());
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        let mut left = n;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                splice(pipe_r, None, to.as_fd(), None, left, flags).map_err(io::Error::from)
            }) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => {
                    left -= m;
                    count.fetch_add(m as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}
