//! Bounded line reading: the one implementation, used by the MCP framing (the client of `lock`
//! and `verify`, and the proxy's [`crate::mcp::framing::LineReader`]), a server's stderr
//! ([`crate::mcp::process`]) and the audit log reader ([`crate::commands::audit`]).
//!
//! [`Lines`] does no I/O itself: bytes go in ([`Lines::push`], [`Lines::read_from`],
//! [`Lines::read_async`]) and lines come out ([`Lines::take_frame`], [`Lines::take_line`],
//! [`Lines::finish`]). The rules, written once:
//!
//! - a line ends at `\n`; a `\r` before it is removed (CRLF input reads like LF input);
//! - at the end of input, a last line without a newline still counts ([`Lines::finish`]);
//! - a line longer than the limit (its bytes before the newline, a `\r` included) is hostile or
//!   broken input: its bytes are dropped as they arrive, never buffered, its first bytes are kept
//!   ([`Lines::head`]), and it comes out as [`Frame::TooLong`] with its length once it ends, after
//!   which reading carries on with the next line. Memory is bounded by the limit plus one read;
//! - every line comes out, blank ones too; what a blank line means is the caller's business (the
//!   MCP framing skips them, the audit reader counts them).
//!
//! It reads into one buffer and looks for the newline only in bytes not yet searched; a long line
//! is handed over with the buffer it was read into instead of being copied out of it.

use std::io::Read;

use tokio::io::{AsyncRead, AsyncReadExt};

/// One line.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line without its newline (a trailing `\r` is removed too).
    Line(Vec<u8>),
    /// A line over the limit, dropped; its length in bytes.
    TooLong(usize),
}

/// One line, borrowed from the reader's buffer ([`Lines::take_line`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A complete line without its newline (a trailing `\r` is removed too).
    Whole(&'a [u8]),
    /// A line over the limit, dropped; its length in bytes.
    TooLong(usize),
}

/// Bytes of a line over the limit kept by default ([`Lines::head`]): enough to tell whose
/// message it was, say by its `id`.
pub const HEAD_BYTES: usize = 1024;

/// Bytes asked of each read, at least.
pub const READ_CHUNK: usize = 64 * 1024;

/// Lines at least this long are handed over with their buffer instead of copied out of it.
const HAND_OVER: usize = 64 * 1024;

/// The line splitter with a limit per line (see the module's rules).
#[derive(Debug)]
pub struct Lines {
    buf: Vec<u8>,
    /// Where the line being read starts in `buf`.
    start: usize,
    /// Bytes after `start` already searched for a newline.
    searched: usize,
    limit: usize,
    /// How many bytes of a line over the limit [`Lines::head`] keeps.
    head_len: usize,
    /// Length so far of a line over the limit whose bytes are being dropped.
    skipping: Option<usize>,
    head: Vec<u8>,
}

/// Where the next line is in the buffer.
enum Span {
    Line(usize, usize),
    TooLong(usize),
}

impl Lines {
    /// A splitter for lines of at most `limit` bytes that keeps [`HEAD_BYTES`] of a longer one.
    pub fn new(limit: usize) -> Self {
        Self::with_head(limit, HEAD_BYTES)
    }

    /// A splitter for lines of at most `limit` bytes that keeps `head_len` bytes of a longer one.
    pub fn with_head(limit: usize, head_len: usize) -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            searched: 0,
            limit,
            head_len,
            skipping: None,
            head: Vec::new(),
        }
    }

    /// Adds bytes read elsewhere (say by the `BufReader` of a handshake).
    pub fn push(&mut self, bytes: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(bytes);
    }

    /// Reads once from `reader` into the buffer (retrying an interrupted read) and returns the
    /// bytes read, empty at the end of input.
    pub fn read_from<R: Read>(&mut self, reader: &mut R) -> std::io::Result<&[u8]> {
        self.compact();
        let len = self.buf.len();
        self.buf.resize(len + READ_CHUNK, 0);
        let n = loop {
            match reader.read(&mut self.buf[len..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(len);
                    return Err(e);
                }
            }
        };
        self.buf.truncate(len + n);
        Ok(&self.buf[len..])
    }

    /// Reads once from `reader` into the buffer and returns how many bytes it read, 0 at the end
    /// of input. Cancel-safe: dropping the future loses no input.
    pub async fn read_async<R: AsyncRead + Unpin>(
        &mut self,
        reader: &mut R,
    ) -> std::io::Result<usize> {
        self.compact();
        if self.buf.capacity() - self.buf.len() < READ_CHUNK {
            self.buf.reserve(READ_CHUNK);
        }
        reader.read_buf(&mut self.buf).await
    }

    /// The next complete line, borrowed; `None` until more bytes arrive.
    pub fn take_line(&mut self) -> Option<Line<'_>> {
        Some(match self.next_span()? {
            Span::Line(from, to) => Line::Whole(&self.buf[from..to]),
            Span::TooLong(n) => Line::TooLong(n),
        })
    }

    /// The next complete line as its own vector; `None` until more bytes arrive.
    pub fn take_frame(&mut self) -> Option<Frame> {
        Some(match self.next_span()? {
            Span::Line(from, to) => Frame::Line(self.split_off(from, to)),
            Span::TooLong(n) => Frame::TooLong(n),
        })
    }

    /// The end of input: the last line if it has no newline (`None` when nothing is left).
    /// Take the complete lines first.
    pub fn finish(&mut self) -> Option<Frame> {
        let (start, end) = (self.start, self.buf.len());
        self.start = end;
        self.searched = 0;
        if let Some(n) = self.skipping.take() {
            self.keep_head(start, end);
            return Some(Frame::TooLong(n + end - start));
        }
        if start == end {
            return None;
        }
        if end - start > self.limit {
            self.head.clear();
            self.keep_head(start, end);
            return Some(Frame::TooLong(end - start));
        }
        self.head.clear();
        let cr = usize::from(self.buf[end - 1] == b'\r');
        Some(Frame::Line(self.buf[start..end - cr].to_vec()))
    }

    /// The first bytes of the line last reported as too long (or being dropped now).
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// A line over the limit is being dropped (its newline has not come yet).
    pub fn skipping(&self) -> bool {
        self.skipping.is_some()
    }

    /// Bytes of a line without its newline yet are held or being dropped.
    pub fn pending(&self) -> bool {
        self.skipping.is_some() || self.start < self.buf.len()
    }

    /// Forgets everything read (to read the input again from its start).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.start = 0;
        self.searched = 0;
        self.skipping = None;
        self.head.clear();
    }

    fn next_span(&mut self) -> Option<Span> {
        let from = self.start + self.searched;
        let Some(k) = memchr::memchr(b'\n', &self.buf[from..]) else {
            self.searched = self.buf.len() - self.start;
            if self.skipping.is_some() || self.searched > self.limit {
                self.drop_pending();
            }
            return None;
        };
        let (line_start, end) = (self.start, from + k);
        self.start = end + 1;
        self.searched = 0;
        if let Some(n) = self.skipping.take() {
            self.keep_head(line_start, end);
            return Some(Span::TooLong(n + end - line_start));
        }
        if end - line_start > self.limit {
            self.head.clear();
            self.keep_head(line_start, end);
            return Some(Span::TooLong(end - line_start));
        }
        self.head.clear();
        let cr = usize::from(end > line_start && self.buf[end - 1] == b'\r');
        Some(Span::Line(line_start, end - cr))
    }

    /// Moves the unread bytes to the front of the buffer.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// Drops the bytes of a line over the limit, keeping its head and counting it.
    fn drop_pending(&mut self) {
        let (start, end) = (self.start, self.buf.len());
        if self.skipping.is_none() {
            self.head.clear();
        }
        self.keep_head(start, end);
        *self.skipping.get_or_insert(0) += end - start;
        self.buf.truncate(start);
        self.searched = 0;
    }

    fn keep_head(&mut self, start: usize, end: usize) {
        let more = self
            .head_len
            .saturating_sub(self.head.len())
            .min(end - start);
        self.head.extend_from_slice(&self.buf[start..start + more]);
    }

    /// The line `buf[from..to]` as its own vector: copied when short; when long, the buffer
    /// itself, and what follows the line moves to a new buffer.
    fn split_off(&mut self, from: usize, to: usize) -> Vec<u8> {
        if to - from < HAND_OVER {
            return self.buf[from..to].to_vec();
        }
        let rest = self.buf[self.start..].to_vec();
        let mut line = std::mem::replace(&mut self.buf, rest);
        self.start = 0;
        line.truncate(to);
        line.drain(..from);
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Yields its bytes at most `cap` at a time.
    struct Chunked<'a> {
        data: &'a [u8],
        cap: usize,
    }

    impl Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.cap.min(self.data.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// Every line of `input` read `cap` bytes at a time, with the head kept of each long one.
    fn read_all(input: &[u8], limit: usize, cap: usize) -> Vec<(Frame, Vec<u8>)> {
        let mut reader = Chunked { data: input, cap };
        let mut lines = Lines::with_head(limit, 8);
        let mut out = Vec::new();
        loop {
            while let Some(frame) = lines.take_frame() {
                out.push((frame, lines.head().to_vec()));
            }
            if lines.read_from(&mut reader).unwrap().is_empty() {
                break;
            }
        }
        if let Some(frame) = lines.finish() {
            out.push((frame, lines.head().to_vec()));
        }
        assert_eq!(lines.finish(), None, "finish twice");
        out
    }

    fn line(bytes: &[u8]) -> (Frame, Vec<u8>) {
        (Frame::Line(bytes.to_vec()), Vec::new())
    }

    const CAPS: [usize; 6] = [1, 2, 3, 7, 64, 1 << 20];

    #[test]
    fn lines_end_at_newlines_and_crlf_reads_like_lf() {
        for cap in CAPS {
            assert_eq!(
                read_all(b"a\r\nb\n\n\r\n c \nlast", 10, cap),
                [
                    line(b"a"),
                    line(b"b"),
                    line(b""),
                    line(b""),
                    line(b" c "),
                    line(b"last")
                ],
                "capacity {cap}"
            );
            // Only the one `\r` before the newline goes; others are the line's.
            assert_eq!(
                read_all(b"\r\ra\r\r\n", 10, cap),
                [line(b"\r\ra\r")],
                "capacity {cap}"
            );
        }
    }

    #[test]
    fn a_last_line_without_a_newline_counts() {
        for cap in CAPS {
            assert_eq!(read_all(b"x\ny", 10, cap), [line(b"x"), line(b"y")]);
            assert_eq!(read_all(b"x\ny\r", 10, cap), [line(b"x"), line(b"y")]);
            assert_eq!(read_all(b"x\n", 10, cap), [line(b"x")]);
            assert_eq!(read_all(b"", 10, cap), []);
        }
    }

    #[test]
    fn the_limit_counts_the_bytes_before_the_newline() {
        for cap in CAPS {
            // Exactly the limit passes, one more does not; the `\r` counts.
            assert_eq!(
                read_all(b"0123\n", 4, cap),
                [line(b"0123")],
                "capacity {cap}"
            );
            assert_eq!(
                read_all(b"0123\r\n", 4, cap),
                [(Frame::TooLong(5), b"0123\r".to_vec())],
                "capacity {cap}"
            );
            assert_eq!(
                read_all(b"01234\n", 4, cap),
                [(Frame::TooLong(5), b"01234".to_vec())],
                "capacity {cap}"
            );
        }
    }

    #[test]
    fn over_long_lines_are_dropped_with_their_head_and_reading_goes_on() {
        let input = b"ok\n0123456789abcdef\nnext\n0123456789\r\n\nlast0123456789";
        for cap in CAPS {
            assert_eq!(
                read_all(input, 6, cap),
                [
                    line(b"ok"),
                    (Frame::TooLong(16), b"01234567".to_vec()),
                    line(b"next"),
                    (Frame::TooLong(11), b"01234567".to_vec()),
                    line(b""),
                    (Frame::TooLong(14), b"last0123".to_vec()),
                ],
                "capacity {cap}"
            );
        }
    }

    #[test]
    fn an_over_long_line_is_not_buffered() {
        let mut input = vec![b'z'; 10 << 20];
        input.extend_from_slice(b"\n{}\n");
        let mut reader = Chunked {
            data: &input,
            cap: 1 << 16,
        };
        let mut lines = Lines::new(1 << 20);
        let mut max_capacity = 0;
        let first = loop {
            if let Some(frame) = lines.take_frame() {
                break frame;
            }
            assert!(!lines.read_from(&mut reader).unwrap().is_empty());
            max_capacity = max_capacity.max(lines.buf.capacity());
        };
        assert_eq!(first, Frame::TooLong(10 << 20));
        assert!(!lines.skipping());
        assert!(max_capacity < 3 << 20, "{max_capacity}");
        assert_eq!(lines.head(), &[b'z'; HEAD_BYTES][..]);
        assert_eq!(lines.take_frame(), Some(Frame::Line(b"{}".to_vec())));
        assert!(!lines.pending());
    }

    #[test]
    fn borrowed_and_owned_lines_agree_and_long_lines_are_handed_over() {
        let long = vec![b'y'; HAND_OVER * 3 + 5];
        let mut input = b"{\"a\":1}\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\r\n{\"b\":2}\n");
        let mut owned = Lines::new(1 << 20);
        owned.push(&input);
        let mut borrowed = Lines::new(1 << 20);
        borrowed.push(&input);
        for expected in [&b"{\"a\":1}"[..], &long, b"{\"b\":2}"] {
            assert_eq!(borrowed.take_line(), Some(Line::Whole(expected)));
            assert_eq!(owned.take_frame(), Some(Frame::Line(expected.to_vec())));
        }
        assert_eq!(owned.take_frame(), None);
        assert_eq!(borrowed.take_line(), None);
    }

    #[test]
    fn clear_forgets_a_partial_line() {
        let mut lines = Lines::new(4);
        lines.push(b"abc");
        assert_eq!(lines.take_frame(), None);
        assert!(lines.pending());
        lines.clear();
        assert!(!lines.pending());
        lines.push(b"d\n");
        assert_eq!(lines.take_frame(), Some(Frame::Line(b"d".to_vec())));
    }
}
