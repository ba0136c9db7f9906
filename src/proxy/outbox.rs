//! Messages on their way to one peer: queued while the main loop handles the lines it has
//! already read, then written together, at once when the pipe takes them, or as it frees up
//! (within a bound the main loop respects before reading more).
//!
//! A message is our own bytes and, for relayed results and arguments, ranges of the line it was
//! received in: that line is moved along, never copied, so a 64 MiB answer is held once.
//! Whatever is queued when the pipe frees up goes out in one vectored write.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::AsyncWrite;

/// The main loop reads no more input while this many bytes wait for one peer.
const ROOM_BYTES: usize = 1 << 20;
/// ... or this many messages.
const ROOM_MESSAGES: usize = 256;
/// Slices per vectored write, at most.
const MAX_SLICES: usize = 64;
/// Ranges of a received line shorter than this are copied rather than referenced.
const SPLICE_MIN: usize = 4096;

/// One message to write.
#[derive(Debug)]
pub(super) struct Out {
    own: Vec<u8>,
    line: Vec<u8>,
    /// The message in order; empty means all of `own`.
    parts: Vec<(Src, Range<usize>)>,
    len: usize,
}

#[derive(Debug, Clone, Copy)]
enum Src {
    Own,
    Line,
}

impl Out {
    /// A message that is all our own bytes (newline included).
    pub(super) fn bytes(own: Vec<u8>) -> Self {
        let len = own.len();
        Self {
            own,
            line: Vec::new(),
            parts: Vec::new(),
            len,
        }
    }

    /// Its length in bytes.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The message's bytes, in one piece.
    #[cfg(test)]
    pub(super) fn to_vec(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len);
        for i in 0..self.part_count() {
            bytes.extend_from_slice(self.part(i));
        }
        bytes
    }

    fn part_count(&self) -> usize {
        self.parts.len().max(1)
    }

    fn part(&self, i: usize) -> &[u8] {
        match self.parts.get(i) {
            None => &self.own,
            Some((Src::Own, r)) => &self.own[r.clone()],
            Some((Src::Line, r)) => &self.line[r.clone()],
        }
    }
}

/// Builds an [`Out`] from our own bytes and ranges of a received line.
#[derive(Debug, Default)]
pub(super) struct Splice {
    own: Vec<u8>,
    parts: Vec<(Src, Range<usize>)>,
    /// Start of the run of `own` not yet in `parts`.
    run: usize,
    len: usize,
}

impl Splice {
    /// A builder that needs no reallocation for messages up to about `capacity` bytes (ranges
    /// of a long line are referenced, not copied).
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Self {
            own: Vec::with_capacity(capacity.min(SPLICE_MIN * 2)),
            ..Self::default()
        }
    }

    /// Our own bytes.
    pub(super) fn text(&mut self, bytes: &[u8]) {
        self.own.extend_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Our own bytes, written by `f` (say a serializer).
    pub(super) fn with(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        let before = self.own.len();
        f(&mut self.own);
        self.len += self.own.len() - before;
    }

    /// The bytes `range` of the received `line`: copied when short, referenced otherwise.
    pub(super) fn line(&mut self, line: &[u8], range: Range<usize>) {
        self.len += range.len();
        if range.len() < SPLICE_MIN {
            self.own.extend_from_slice(&line[range]);
            return;
        }
        self.close_run();
        self.parts.push((Src::Line, range));
    }

    /// The message's length so far.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn close_run(&mut self) {
        if self.own.len() > self.run {
            self.parts.push((Src::Own, self.run..self.own.len()));
            self.run = self.own.len();
        }
    }

    /// The message, with `line` the line the ranges refer to (dropped if none does).
    pub(super) fn finish(mut self, line: Vec<u8>) -> Out {
        if self.parts.is_empty() {
            return Out::bytes(self.own);
        }
        self.close_run();
        Out {
            own: self.own,
            line,
            parts: self.parts,
            len: self.len,
        }
    }
}

/// The queue towards one peer and its writer.
pub(super) struct Outbox {
    writer: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    q: Queue,
    /// Written since the last flush (which a writer through a helper thread needs).
    unflushed: bool,
}

#[derive(Default)]
struct Queue {
    messages: VecDeque<Out>,
    /// Bytes of the first message already written.
    done: usize,
    bytes: usize,
    /// The peer is gone; what is sent to it is dropped.
    closed: bool,
}

impl Queue {
    fn advance(&mut self, mut n: usize) {
        self.bytes -= n;
        while let Some(first) = self.messages.front() {
            let left = first.len() - self.done;
            if n < left {
                self.done += n;
                return;
            }
            n -= left;
            self.done = 0;
            self.messages.pop_front();
        }
    }

    /// The peer stopped reading for good: forget what waits for it, so that nothing blocks on
    /// a dead pipe.
    fn close(&mut self) {
        self.closed = true;
        self.messages.clear();
        self.bytes = 0;
        self.done = 0;
    }

    /// The unwritten bytes, as slices.
    fn slices(&self) -> Vec<IoSlice<'_>> {
        let mut slices = Vec::with_capacity(MAX_SLICES.min(self.messages.len() * 3));
        let mut skip = self.done;
        for out in &self.messages {
            for i in 0..out.part_count() {
                let part = out.part(i);
                if skip >= part.len() {
                    skip -= part.len();
                    continue;
                }
                slices.push(IoSlice::new(&part[skip..]));
                skip = 0;
                if slices.len() == MAX_SLICES {
                    return slices;
                }
            }
        }
        slices
    }
}

impl Outbox {
    /// An outbox whose writer comes later ([`Outbox::attach`]); messages queue until then.
    pub(super) fn new() -> Self {
        Self {
            writer: None,
            q: Queue::default(),
            unflushed: false,
        }
    }

    /// Starts writing to `writer`.
    pub(super) fn attach(&mut self, writer: impl AsyncWrite + Send + 'static) {
        self.writer = Some(Box::pin(writer));
        self.write_now();
    }

    /// Queues a message; [`Outbox::write_now`] or [`Outbox::poll_drain`] writes it.
    pub(super) fn push(&mut self, out: Out) {
        if self.q.closed || out.len() == 0 {
            return;
        }
        self.q.bytes += out.len();
        self.q.messages.push_back(out);
    }

    /// Whether the main loop may read more input that could add to this queue.
    pub(super) fn has_room(&self) -> bool {
        self.q.bytes < ROOM_BYTES && self.q.messages.len() < ROOM_MESSAGES
    }

    /// Bytes waiting.
    pub(super) fn bytes(&self) -> usize {
        self.q.bytes
    }

    /// Whether the peer is gone (a write found its pipe closed).
    pub(super) fn is_closed(&self) -> bool {
        self.q.closed
    }

    /// Whether anything waits to be written or flushed.
    pub(super) fn busy(&self) -> bool {
        !self.q.closed && self.writer.is_some() && (!self.q.messages.is_empty() || self.unflushed)
    }

    /// Writes what the writer takes without waiting: everything queued, in one vectored write
    /// when the pipe has room.
    pub(super) fn write_now(&mut self) {
        let mut cx = Context::from_waker(Waker::noop());
        let _ = self.poll_drain(&mut cx);
    }

    /// Writes until everything is written and flushed; `Ready` also when the peer is gone.
    /// Cancel-safe: progress is kept in `self`.
    pub(super) fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(writer) = self.writer.as_mut() else {
            return Poll::Pending;
        };
        loop {
            if self.q.closed {
                return Poll::Ready(());
            }
            if self.q.messages.is_empty() {
                if !self.unflushed {
                    return Poll::Ready(());
                }
                let Poll::Ready(r) = writer.as_mut().poll_flush(cx) else {
                    return Poll::Pending;
                };
                self.unflushed = false;
                if r.is_err() {
                    self.q.close();
                }
                return Poll::Ready(());
            }
            let slices = self.q.slices();
            let written = match writer.as_mut().poll_write_vectored(cx, &slices) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0) | Err(_)) => {
                    drop(slices);
                    self.q.close();
                    return Poll::Ready(());
                }
                Poll::Ready(Ok(n)) => n,
            };
            drop(slices);
            self.unflushed = true;
            self.q.advance(written);
        }
    }

    /// Writes what is queued (for at most `grace`), then closes the writer, which ends the
    /// peer's input.
    pub(super) async fn close(&mut self, grace: Duration) {
        if self.writer.is_some() {
            let drained = std::future::poll_fn(|cx| self.poll_drain(cx));
            let _ = tokio::time::timeout(grace, drained).await;
        }
        if let Some(mut w) = self.writer.take() {
            let shut = std::future::poll_fn(|cx| w.as_mut().poll_shutdown(cx));
            let _ = tokio::time::timeout(grace, shut).await;
        }
        self.q.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn spliced(line: &[u8], ranges: &[Range<usize>]) -> Out {
        let mut s = Splice::default();
        s.text(b"<");
        for r in ranges {
            s.line(line, r.clone());
            s.text(b"|");
        }
        s.text(b">\n");
        s.finish(line.to_vec())
    }

    #[tokio::test]
    async fn spliced_messages_are_written_whole_and_in_order_through_a_small_pipe() {
        let line: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let ranges = [0..10, 10..100_000, 150_000..150_001, 100_000..200_000];
        let mut expected = Vec::new();
        let mut messages = Vec::new();
        for k in 0..5 {
            let out = spliced(&line, &ranges[..=k % ranges.len()]);
            let mut bytes = b"<".to_vec();
            for r in &ranges[..=k % ranges.len()] {
                bytes.extend_from_slice(&line[r.clone()]);
                bytes.push(b'|');
            }
            bytes.extend_from_slice(b">\n");
            assert_eq!(out.len(), bytes.len());
            expected.extend_from_slice(&bytes);
            messages.push(out);
            messages.push(Out::bytes(b"small\n".to_vec()));
            expected.extend_from_slice(b"small\n");
        }
        let (w, mut r) = tokio::io::duplex(1000);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.map(|_| got)
        });
        let mut outbox = Outbox::new();
        outbox.attach(w);
        for m in messages {
            outbox.push(m);
        }
        assert!(outbox.busy());
        outbox.close(Duration::from_secs(10)).await;
        assert!(reader.await.unwrap().unwrap() == expected);
    }

    #[tokio::test]
    async fn a_gone_peer_drops_the_queue() {
        let (w, r) = tokio::io::duplex(10);
        drop(r);
        let mut outbox = Outbox::new();
        outbox.push(Out::bytes(b"queued before the writer\n".to_vec()));
        assert!(outbox.has_room());
        outbox.attach(w);
        outbox.push(Out::bytes(vec![b'x'; 100]));
        outbox.write_now();
        assert!(!outbox.busy());
        assert_eq!(outbox.q.bytes, 0);
    }
}
