//! The JSON-RPC line framing (`mcpsum::mcp::framing`) on an arbitrary byte stream.
//!
//! The stream is read two ways, with limits from 0 bytes to the default 64 MiB, over a reader
//! that delivers short reads and spurious `Pending`s: by the proxy's `LineReader` (a few of the
//! first bytes handed over as already buffered, as after a handshake), and by `read_frame`
//! through a `BufReader` of a few sizes. Both are compared frame by frame with a plain model: split at `\n`; a line longer than the limit is `TooLong`
//! with its length and its first `HEAD_BYTES` kept; a blank (ASCII whitespace) line is skipped;
//! otherwise the line, less one trailing `\r`. A final line without `\n` counts.
//!
//! When the stream is one JSON value, `encode` of it must read back as exactly one line that
//! parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpsum::mcp::framing::{
    DEFAULT_MAX_MESSAGE, Frame, HEAD_BYTES, LineReader, encode, read_frame,
};
use mcpsum_fuzz::{ChunkedReader, block_on, seed_of};
use tokio::io::BufReader;

const LIMITS: [usize; 6] = [0, 1, 16, 100, HEAD_BYTES + 1, DEFAULT_MAX_MESSAGE];

fuzz_target!(|data: &[u8]| {
    let seed = seed_of(data);
    for (i, &limit) in LIMITS.iter().enumerate() {
        let want = model(data, limit);
        let capacity = 1 + (seed >> (8 * i)) as usize % 64;
        let got = frames(data, limit, capacity, seed.rotate_left(i as u32 * 7));
        assert_eq!(got, want, "limit {limit}, {capacity} bytes buffered");
        let plain: Vec<Frame> = want.into_iter().map(|(f, _)| f).collect();
        let got = sequential(data, limit, capacity, seed.rotate_left(i as u32 * 11));
        assert_eq!(got, plain, "read_frame: limit {limit}, buffer {capacity}");
    }

    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let line = encode(&value);
        assert_eq!(
            line.iter().filter(|&&b| b == b'\n').count(),
            1,
            "one newline"
        );
        assert_eq!(line.last(), Some(&b'\n'));
        let got = frames(&line, DEFAULT_MAX_MESSAGE, 7, seed);
        let [(Frame::Line(text), _)] = got.as_slice() else {
            panic!("encode did not give one line: {got:?}");
        };
        let back: serde_json::Value = serde_json::from_slice(text).expect("encoded line parses");
        assert_eq!(back, value);
    }
});

/// Frames (with the head of each over-long one) as the proxy's `LineReader` reads them, the
/// first `buffered` bytes handed over as already read.
fn frames(data: &[u8], limit: usize, buffered: usize, seed: u64) -> Vec<(Frame, Vec<u8>)> {
    let (first, rest) = data.split_at(buffered.min(data.len()));
    let mut reader = LineReader::new(ChunkedReader::new(rest, seed, 97), limit, first);
    let mut out = Vec::new();
    while let Some(frame) = block_on(reader.next_frame()).expect("a slice reader does not fail") {
        let head = match frame {
            Frame::TooLong(_) => reader.head().to_vec(),
            Frame::Line(_) => Vec::new(),
        };
        out.push((frame, head));
    }
    out
}

/// Frames as `read_frame` reads them through a `BufReader` of `capacity` bytes.
fn sequential(data: &[u8], limit: usize, capacity: usize, seed: u64) -> Vec<Frame> {
    let mut reader = BufReader::with_capacity(capacity, ChunkedReader::new(data, seed, 97));
    let mut out = Vec::new();
    while let Some(frame) =
        block_on(read_frame(&mut reader, limit)).expect("a slice reader does not fail")
    {
        out.push(frame);
    }
    out
}

fn model(data: &[u8], limit: usize) -> Vec<(Frame, Vec<u8>)> {
    let mut out = Vec::new();
    for line in data.split(|&b| b == b'\n') {
        if line.len() > limit {
            let head = line[..line.len().min(HEAD_BYTES)].to_vec();
            out.push((Frame::TooLong(line.len()), head));
        } else if !line.iter().all(u8::is_ascii_whitespace) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            out.push((Frame::Line(line.to_vec()), Vec::new()));
        }
    }
    out
}
