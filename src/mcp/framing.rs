//! Newline-delimited JSON-RPC framing with a size limit per message.
//!
//! A peer is hostile input: a line longer than the limit is skipped (its bytes are read and
//! dropped, never buffered) and reported as [`Frame::TooLong`]; the reader then carries on with
//! the next line. Memory per reader is bounded by the limit. The line rules themselves (limit,
//! `\r\n`, a last line without a newline) are [`crate::lines`]'; this module adds MCP's own:
//! blank lines between messages are skipped.
//!
//! [`read_frame`] serves the sequential client of `lock` and `verify`, which reads through the
//! `BufReader` the proxy later takes over; the proxy reads with [`LineReader`], which reads
//! straight into one buffer (no copy through a `BufReader`) and hands a long line over with the
//! buffer it was read into instead of copying it.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead};

use crate::lines::Lines;
pub use crate::lines::{Frame, HEAD_BYTES};

/// Default limit for one message: 64 MiB.
pub const DEFAULT_MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// Reads the next message line; `Ok(None)` at end of input. A final line without a newline
/// counts. Blank lines are skipped. Consumes from `reader` exactly up to the line's newline, so
/// what follows stays in the `BufReader` for the next call (or for the proxy).
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> std::io::Result<Option<Frame>> {
    let mut lines = Lines::new(limit);
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(lines.finish().filter(|f| !is_blank(f)));
        }
        let take = memchr::memchr(b'\n', available).map_or(available.len(), |i| i + 1);
        lines.push(&available[..take]);
        reader.consume(take);
        // Without a newline this only drops the bytes of a line already over the limit.
        match lines.take_frame() {
            Some(frame) if !is_blank(&frame) => return Ok(Some(frame)),
            _ => {}
        }
    }
}

/// Reads newline-delimited messages with a size limit, as [`read_frame`] does, but straight
/// into one reusable buffer.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    lines: Lines,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of `inner` with a limit per line; `buffered` are bytes already read from it
    /// (say by the `BufReader` of a handshake).
    pub fn new(inner: R, limit: usize, buffered: &[u8]) -> Self {
        let mut lines = Lines::new(limit);
        lines.push(buffered);
        Self {
            inner,
            lines,
            eof: false,
        }
    }

    /// The first [`HEAD_BYTES`] of the line last reported as [`Frame::TooLong`].
    pub fn head(&self) -> &[u8] {
        self.lines.head()
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
                return Ok(self.lines.finish().filter(|f| !is_blank(f)));
            }
            if self.lines.read_async(&mut self.inner).await? == 0 {
                self.eof = true;
            }
        }
    }

    /// A complete line from the buffer that is not blank, if there is one.
    fn take_frame(&mut self) -> Option<Frame> {
        loop {
            let frame = self.lines.take_frame()?;
            if !is_blank(&frame) {
                return Some(frame);
            }
        }
    }
}

/// A line of nothing but whitespace, which separates no message from another.
fn is_blank(frame: &Frame) -> bool {
    matches!(frame, Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace))
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
    use tokio::io::{AsyncReadExt, BufReader};

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
    async fn read_frame_leaves_what_follows_in_the_reader() -> std::io::Result<()> {
        let mut r = BufReader::with_capacity(64, &b"{\"a\":1}\n{\"b\":2}\n"[..]);
        assert_eq!(
            read_frame(&mut r, 100).await?,
            Some(Frame::Line(b"{\"a\":1}".to_vec()))
        );
        assert_eq!(r.buffer(), b"{\"b\":2}\n");
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).await?;
        assert_eq!(rest, b"{\"b\":2}\n");
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
        let inputs: [(&[u8], usize); 5] = [
            (b"{\"a\":1}\r\n\n0123456789abcdef\n{}\nlast", 10),
            (big.as_bytes(), 100),
            (b"0123456789abc", 4),
            (b" \n\r\n", 4),
            (b"{}\n  ", 4),
        ];
        for (input, limit) in inputs {
            for cap in [1, 3, 7, 8, 64, 8192, 1 << 20] {
                let expected = frames(input, limit, cap).await;
                let got = line_frames(input, limit, cap).await;
                assert_eq!(
                    got.iter().map(|(f, _)| f).collect::<Vec<_>>(),
                    expected.iter().collect::<Vec<_>>(),
                    "capacity {cap}, input {}",
                    String::from_utf8_lossy(&input[..input.len().min(40)])
                );
            }
        }
    }

    #[tokio::test]
    async fn oversized_line_keeps_its_head() {
        let line = format!("{{\"id\":7,\"result\":\"{}\"}}\n{{}}\n", "x".repeat(5000));
        for cap in [1, 7, 64, 8192] {
            let frames = line_frames(line.as_bytes(), 100, cap).await;
            assert_eq!(
                frames,
                vec![
                    (
                        Frame::TooLong(5000 + 20),
                        line.as_bytes()[..HEAD_BYTES].to_vec()
                    ),
                    (Frame::Line(b"{}".to_vec()), Vec::new()),
                ],
                "capacity {cap}"
            );
        }
    }

    #[tokio::test]
    async fn long_lines_are_handed_over_and_what_follows_is_kept() {
        let long = vec![b'y'; 64 * 1024 * 3 + 5];
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
    async fn oversized_final_line_is_reported() {
        assert_eq!(
            frames(b"0123456789abc", 4, 5).await,
            vec![Frame::TooLong(13)]
        );
        assert_eq!(frames(b"", 4, 5).await, vec![]);
        assert_eq!(
            line_frames(b"0123456789abc", 4, 5).await,
            vec![(Frame::TooLong(13), b"0123456789abc".to_vec())]
        );
    }
}
