//! Newline-delimited JSON-RPC framing with a size limit per message.
//!
//! A peer is hostile input: a line longer than the limit is skipped (its bytes are read and
//! dropped, never buffered) and reported as [`Frame::TooLong`]; the reader then carries on with
//! the next line. Memory per reader is bounded by the limit.
//!
//! [`read_frame`] serves the sequential client of `lock` and `verify`; the proxy reads with
//! [`LineReader`], which reads straight into one buffer (no copy through a `BufReader`), looks
//! for the newline only in bytes not yet searched, and hands a long line over with the buffer it
//! was read into instead of copying it.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt};

/// Default limit for one message: 64 MiB.
pub const DEFAULT_MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// One framed line.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line without its newline (a trailing `\r` is removed too).
    Line(Vec<u8>),
    /// A line over the limit, skipped; its length in bytes.
    TooLong(usize),
}

/// Bytes of an oversized line kept by [`read_frame_with_head`].
pub const HEAD_BYTES: usize = 1024;

/// Reads the next line; `Ok(None)` at end of input. A final line without a newline counts.
/// Blank lines are skipped.
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> std::io::Result<Option<Frame>> {
    read_frame_with_head(reader, limit, &mut Vec::new()).await
}

/// [`read_frame`] that also keeps the first [`HEAD_BYTES`] of a line over the limit in `head`
/// (emptied otherwise), so that the caller can tell whose message it was, say by its `id`.
pub async fn read_frame_with_head<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
    head: &mut Vec<u8>,
) -> std::io::Result<Option<Frame>> {
    head.clear();
    let mut buf = Vec::new();
    let mut skipped: Option<usize> = None;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            // EOF.
            return Ok(match skipped {
                Some(n) => Some(Frame::TooLong(n)),
                None if buf.iter().all(u8::is_ascii_whitespace) => None,
                None => Some(Frame::Line(trim_cr(buf))),
            });
        }
        let (chunk, found) = match memchr(available) {
            Some(i) => (&available[..i], Some(i)),
            None => (available, None),
        };
        match skipped.as_mut() {
            Some(n) => {
                *n += chunk.len();
                let more = HEAD_BYTES.saturating_sub(head.len()).min(chunk.len());
                head.extend_from_slice(&chunk[..more]);
            }
            None if buf.len() + chunk.len() > limit => {
                skipped = Some(buf.len() + chunk.len());
                head.extend_from_slice(&buf[..buf.len().min(HEAD_BYTES)]);
                let more = HEAD_BYTES.saturating_sub(head.len()).min(chunk.len());
                head.extend_from_slice(&chunk[..more]);
                buf = Vec::new();
            }
            None => buf.extend_from_slice(chunk),
        }
        let consumed = chunk.len() + usize::from(found.is_some());
        reader.consume(consumed);
        if found.is_some() {
            if let Some(n) = skipped {
                return Ok(Some(Frame::TooLong(n)));
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                buf.clear();
                continue;
            }
            return Ok(Some(Frame::Line(trim_cr(buf))));
        }
    }
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

/// Bytes asked of each read, at least.
const READ_CHUNK: usize = 64 * 1024;
/// Lines at least this long are handed over with their buffer instead of copied out of it.
const HAND_OVER: usize = 64 * 1024;

/// Reads newline-delimited messages with a size limit, as [`read_frame_with_head`] does, but
/// straight into one reusable buffer.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Where the line being read starts in `buf`.
    start: usize,
    /// Bytes after `start` already searched for a newline.
    searched: usize,
    limit: usize,
    /// Length so far of a line over the limit whose bytes are being dropped.
    skipping: Option<usize>,
    head: Vec<u8>,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of `inner` with a limit per line; `buffered` are bytes already read from it
    /// (say by the `BufReader` of a handshake).
    pub fn new(inner: R, limit: usize, buffered: &[u8]) -> Self {
        Self {
            inner,
            buf: buffered.to_vec(),
            start: 0,
            searched: 0,
            limit,
            skipping: None,
            head: Vec::new(),
            eof: false,
        }
    }

    /// The first [`HEAD_BYTES`] of the line last reported as [`Frame::TooLong`].
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The next line if it is already read, without reading more.
    pub fn buffered(&mut self) -> Option<Frame> {
        self.take_frame()
    }

    /// The next line; `Ok(None)` at end of input, where a final line without a newline counts.
    /// Blank lines are skipped. Cancel-safe: dropping the future loses no input, so it can
    /// wait in a `select!`.
    pub async fn next_frame(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            if let Some(frame) = self.take_frame() {
                return Ok(Some(frame));
            }
            if self.eof {
                return Ok(self.finish());
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK {
                self.buf.reserve(READ_CHUNK);
            }
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                self.eof = true;
            }
        }
    }

    /// A complete line from the buffer, if there is one.
    fn take_frame(&mut self) -> Option<Frame> {
        loop {
            let from = self.start + self.searched;
            let Some(k) = memchr(&self.buf[from..]) else {
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
                return Some(Frame::TooLong(n + end - line_start));
            }
            if end - line_start > self.limit {
                self.head.clear();
                self.keep_head(line_start, end);
                return Some(Frame::TooLong(end - line_start));
            }
            let line = &self.buf[line_start..end];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let cr = usize::from(line.last() == Some(&b'\r'));
            self.head.clear();
            return Some(Frame::Line(self.split_off(line_start, end - cr)));
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
        let more = HEAD_BYTES.saturating_sub(self.head.len()).min(end - start);
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

    fn finish(&mut self) -> Option<Frame> {
        let rest = &self.buf[self.start..];
        let frame = match self.skipping.take() {
            Some(n) => Some(Frame::TooLong(n + rest.len())),
            None if rest.iter().all(u8::is_ascii_whitespace) => None,
            None => Some(Frame::Line(trim_cr(rest.to_vec()))),
        };
        self.start = self.buf.len();
        self.searched = 0;
        frame
    }
}

fn trim_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

/// Serializes a message as one line (compact JSON never contains a raw newline).
pub fn encode(message: &serde_json::Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(message).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn frames(input: &[u8], limit: usize, cap: usize) -> Vec<Frame> {
        let mut r = BufReader::with_capacity(cap, input);
        let mut out = Vec::new();
        loop {
            match read_frame(&mut r, limit).await {
                Ok(Some(f)) => out.push(f),
                Ok(None) => break,
                Err(e) => panic!("{e}"),
            }
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_skips_oversized_ones() {
        let input = b"{\"a\":1}\r\n\n0123456789abcdef\n{}\nlast";
        for cap in [1, 3, 8, 64] {
            assert_eq!(
                frames(input, 10, cap).await,
                vec![
                    Frame::Line(b"{\"a\":1}".to_vec()),
                    Frame::TooLong(16),
                    Frame::Line(b"{}".to_vec()),
                    Frame::Line(b"last".to_vec()),
                ],
                "capacity {cap}"
            );
        }
    }

    #[tokio::test]
    async fn oversized_line_keeps_its_head() -> std::io::Result<()> {
        let line = format!("{{\"id\":7,\"result\":\"{}\"}}\n{{}}\n", "x".repeat(5000));
        for cap in [1, 7, 64, 8192] {
            let mut r = BufReader::with_capacity(cap, line.as_bytes());
            let mut head = Vec::new();
            let f = read_frame_with_head(&mut r, 100, &mut head).await?;
            assert_eq!(f, Some(Frame::TooLong(5000 + 20)), "capacity {cap}");
            assert_eq!(head, line.as_bytes()[..HEAD_BYTES], "capacity {cap}");
            let f = read_frame_with_head(&mut r, 100, &mut head).await?;
            assert_eq!(f, Some(Frame::Line(b"{}".to_vec())));
            assert!(head.is_empty());
        }
        Ok(())
    }

    /// Yields its bytes at most `cap` at a time.
    struct Chunked {
        data: Vec<u8>,
        pos: usize,
        cap: usize,
    }

    impl AsyncRead for Chunked {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let n = self
                .cap
                .min(self.data.len() - self.pos)
                .min(buf.remaining());
            let pos = self.pos;
            buf.put_slice(&self.data[pos..pos + n]);
            self.pos += n;
            std::task::Poll::Ready(Ok(()))
        }
    }

    async fn line_frames(input: &[u8], limit: usize, cap: usize) -> Vec<(Frame, Vec<u8>)> {
        let inner = Chunked {
            data: input.to_vec(),
            pos: 0,
            cap,
        };
        let mut r = LineReader::new(inner, limit, &[]);
        let mut out = Vec::new();
        while let Some(f) = r.next_frame().await.unwrap() {
            out.push((f, r.head().to_vec()));
        }
        out
    }

    #[tokio::test]
    async fn line_reader_frames_as_read_frame_does() {
        let big = format!("{{\"id\":7,\"result\":\"{}\"}}\n{{}}\n", "x".repeat(5000));
        let inputs: [(&[u8], usize); 4] = [
            (b"{\"a\":1}\r\n\n0123456789abcdef\n{}\nlast", 10),
            (big.as_bytes(), 100),
            (b"0123456789abc", 4),
            (b" \n\r\n", 4),
        ];
        for (input, limit) in inputs {
            for cap in [1, 3, 7, 8, 64, 8192, 1 << 20] {
                let mut r = BufReader::with_capacity(cap, input);
                let mut expected = Vec::new();
                let mut head = Vec::new();
                while let Some(f) = read_frame_with_head(&mut r, limit, &mut head)
                    .await
                    .unwrap()
                {
                    expected.push((f, head.clone()));
                }
                assert_eq!(
                    line_frames(input, limit, cap).await,
                    expected,
                    "capacity {cap}, input {}",
                    String::from_utf8_lossy(&input[..input.len().min(40)])
                );
            }
        }
    }

    #[tokio::test]
    async fn long_lines_are_handed_over_and_what_follows_is_kept() {
        let long = vec![b'y'; HAND_OVER * 3 + 5];
        let mut input = b"{\"a\":1}\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\r\n{\"b\":2}\n");
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\n{\"c\":3}");
        for cap in [1000, 70_000, 1 << 20] {
            let frames: Vec<Frame> = line_frames(&input, 1 << 20, cap)
                .await
                .into_iter()
                .map(|(f, _)| f)
                .collect();
            assert_eq!(
                frames,
                vec![
                    Frame::Line(b"{\"a\":1}".to_vec()),
                    Frame::Line(long.clone()),
                    Frame::Line(b"{\"b\":2}".to_vec()),
                    Frame::Line(long.clone()),
                    Frame::Line(b"{\"c\":3}".to_vec()),
                ],
                "capacity {cap}"
            );
        }
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_not_buffered() {
        let mut input = vec![b'z'; 10 << 20];
        input.extend_from_slice(b"\n{}\n");
        let inner = Chunked {
            data: input,
            pos: 0,
            cap: 1 << 16,
        };
        let mut r = LineReader::new(inner, 1 << 20, &[]);
        assert_eq!(
            r.next_frame().await.unwrap(),
            Some(Frame::TooLong(10 << 20))
        );
        assert!(r.buf.capacity() < 3 << 20, "{}", r.buf.capacity());
        assert_eq!(r.head(), &[b'z'; HEAD_BYTES][..]);
        assert_eq!(
            r.next_frame().await.unwrap(),
            Some(Frame::Line(b"{}".to_vec()))
        );
        assert_eq!(r.next_frame().await.unwrap(), None);
    }

    #[tokio::test]
    async fn oversized_final_line_is_reported() {
        assert_eq!(
            frames(b"0123456789abc", 4, 5).await,
            vec![Frame::TooLong(13)]
        );
        assert_eq!(frames(b"", 4, 5).await, vec![]);
    }
}
