//! The ClientHello reader (`mcpsum_egress::HelloReader`, `read_client_hello`) on the bytes a
//! client sends into a tunnel.
//!
//! The input is fed whole, in pseudo-random pieces, and through `read_client_hello` over a
//! reader with short reads and spurious `Pending`s. Checked: never a panic; all three agree on
//! whether a complete hello is there and on what it says; the bytes kept for forwarding are
//! exactly the bytes fed; a reported SNI is lower case; a small limit is never exceeded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpsum_egress::{ClientHelloInfo, HelloError, HelloReader, read_client_hello};
use mcpsum_fuzz::{ChunkedReader, Chunks, block_on, seed_of};

/// Above any input libFuzzer makes here (`-max_len` stays below it), so it never decides.
const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let seed = seed_of(data);

    let mut whole = HelloReader::new(LIMIT);
    let all = whole.push(data);
    match &all {
        Ok(Some(info)) => {
            check_info(info);
            assert_eq!(whole.bytes(), data);
        }
        Ok(None) => assert_eq!(whole.bytes(), data),
        Err(_) => {}
    }

    // In pieces: the same outcome, decided at the piece that completes the hello.
    let mut pieces = HelloReader::new(LIMIT);
    let mut fed = 0;
    let mut split = Ok(None);
    for piece in Chunks::new(seed, 300).split(data) {
        fed += piece.len();
        split = pieces.push(piece);
        if !matches!(split, Ok(None)) {
            break;
        }
    }
    if split.is_ok() {
        assert_eq!(pieces.bytes(), &data[..fed]);
    }
    assert_same(&all, &split);

    // Through the async reader: end of input before a complete hello is `Truncated`.
    let mut reader = ChunkedReader::new(data, seed.rotate_left(17), 300);
    let read = block_on(read_client_hello(&mut reader, LIMIT));
    let read_info = match &read {
        Ok((info, bytes)) => {
            assert_eq!(bytes.as_slice(), &data[..reader.consumed]);
            Ok(Some(info.clone()))
        }
        Err(HelloError::Truncated) => {
            assert!(matches!(all, Ok(None)), "truncated, but fed whole: {all:?}");
            Ok(None)
        }
        Err(e) => Err(e.clone()),
    };
    assert_same(&all, &read_info);

    // A limit below the input: refused as too large unless a hello completes within it.
    if data.len() > 1 {
        let limit = data.len() / 2;
        let mut small = HelloReader::new(limit);
        let mut out = Ok(None);
        for piece in Chunks::new(seed, 64).split(data) {
            out = small.push(piece);
            if !matches!(out, Ok(None)) {
                break;
            }
        }
        match out {
            Ok(Some(_)) => assert!(small.bytes().len() <= limit),
            Ok(None) => panic!(
                "{} bytes fed under a limit of {limit}, no verdict",
                data.len()
            ),
            Err(_) => {}
        }
    }
});

fn check_info(info: &ClientHelloInfo) {
    if let Some(sni) = &info.sni {
        assert_eq!(sni, &sni.to_ascii_lowercase(), "SNI not lower case");
        assert!(!sni.is_empty());
    }
}

/// Same verdict: both complete with the same info, both need more, or both refuse (for the same
/// reason when the first byte already decides).
fn assert_same(
    a: &Result<Option<ClientHelloInfo>, HelloError>,
    b: &Result<Option<ClientHelloInfo>, HelloError>,
) {
    match (a, b) {
        (Ok(x), Ok(y)) => assert_eq!(x, y),
        (Err(HelloError::NotTls(x)), Err(HelloError::NotTls(y))) => assert_eq!(x, y),
        (Err(_), Err(_)) => {}
        _ => panic!("whole: {a:?}, in pieces: {b:?}"),
    }
}
