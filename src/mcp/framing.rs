//! Newline-delimited JSON-RPC framing with a size limit per message.
//!
//! A peer is hostile input: a line longer than the limit is skipped (its bytes are read and
//! dropped, never buffered) and reported as [`Frame::TooLong`]; the reader then carries on with
//! the next line. Memory per reader is bounded by the limit.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

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
    bytes.iter().position(|&b| b == b'\n')
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

    #[tokio::test]
    async fn oversized_final_line_is_reported() {
        assert_eq!(
            frames(b"0123456789abc", 4, 5).await,
            vec![Frame::TooLong(13)]
        );
        assert_eq!(frames(b"", 4, 5).await, vec![]);
    }
}
