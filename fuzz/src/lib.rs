//! Helpers shared by the fuzz targets: a deterministic way to cut an input into chunks (so that
//! one committed seed, the real bytes of a lockfile, a request or a ClientHello, is also read
//! in pieces the way a socket delivers it), an `AsyncRead` that delivers those pieces, and a
//! minimal executor for futures that never wait on anything but that reader.

use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, ReadBuf};

/// FNV-1a of the input: the seed for the chunk sizes, so the chunking is a function of the input
/// and a crash reproduces from the artifact alone.
pub fn seed_of(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Chunk sizes from 1 to `max`, pseudo-random from `seed` (xorshift).
pub struct Chunks {
    state: u64,
    max: usize,
}

impl Chunks {
    /// Sizes from 1 to `max` (at least 1).
    pub fn new(seed: u64, max: usize) -> Chunks {
        Chunks {
            state: seed | 1,
            max: max.max(1),
        }
    }

    /// The next size.
    pub fn next_size(&mut self) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        // The modulo keeps the value below `max`, which is a usize.
        #[allow(clippy::cast_possible_truncation)]
        let n = (self.state % self.max as u64) as usize;
        n + 1
    }

    /// Cut `data` into consecutive pieces.
    pub fn split<'a>(&mut self, mut data: &'a [u8]) -> Vec<&'a [u8]> {
        let mut out = Vec::new();
        while !data.is_empty() {
            let n = self.next_size().min(data.len());
            let (head, rest) = data.split_at(n);
            out.push(head);
            data = rest;
        }
        out
    }
}

/// An `AsyncRead` over a byte slice that returns short reads of pseudo-random sizes and, every
/// few reads, `Pending` first (as a socket does), then end of input.
pub struct ChunkedReader<'a> {
    data: &'a [u8],
    chunks: Chunks,
    pending_next: bool,
    /// Bytes handed out so far.
    pub consumed: usize,
}

impl<'a> ChunkedReader<'a> {
    /// Reads of 1 to `max` bytes.
    pub fn new(data: &'a [u8], seed: u64, max: usize) -> ChunkedReader<'a> {
        ChunkedReader {
            data,
            chunks: Chunks::new(seed, max),
            pending_next: false,
            consumed: 0,
        }
    }
}

impl AsyncRead for ChunkedReader<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self.chunks.next_size();
        if n.is_multiple_of(5) && !self.pending_next {
            // A spurious `Pending`: the reader above must keep its state and poll again.
            self.pending_next = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.pending_next = false;
        let n = n.min(self.data.len()).min(buf.remaining());
        let (head, rest) = self.data.split_at(n);
        buf.put_slice(head);
        self.data = rest;
        self.consumed += n;
        Poll::Ready(Ok(()))
    }
}

/// Drive a future whose only source of `Pending` is a [`ChunkedReader`] to completion.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}
