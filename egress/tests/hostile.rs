//! Hostile input never panics: arbitrary bytes into the ClientHello reader, arbitrary text into
//! the allowlist and target parsers.
#![allow(clippy::unwrap_used)]

use mcpsum_egress::{Allowlist, HelloReader, Target};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn hello_reader_never_panics(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..8)) {
        let mut r = HelloReader::new(1024);
        for c in &chunks {
            if r.push(c).is_err() {
                break;
            }
        }
    }

    #[test]
    fn hello_reader_never_panics_on_handshake_records(
        body in prop::collection::vec(any::<u8>(), 0..600),
        len in any::<u16>(),
    ) {
        // Start like a real handshake record so the bytes reach rustls.
        let mut bytes = vec![0x16, 0x03, 0x01];
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes.extend_from_slice(&body);
        let _ = HelloReader::new(64 * 1024).push(&bytes);
    }

    #[test]
    fn parsers_never_panic(s in "\\PC{0,80}", t in "[a-z0-9.:\\[\\]*%_-]{0,40}") {
        let _ = Target::parse(&s);
        let _ = Target::parse(&t);
        let _ = Allowlist::parse(&[s.clone(), t.clone()]);
    }

    #[test]
    fn accepted_entries_round_trip(t in "[a-z0-9.:\\[\\]*-]{0,40}") {
        if let Ok(list) = Allowlist::parse(std::slice::from_ref(&t)) {
            let shown = list.entries()[0].to_string();
            prop_assert_eq!(Allowlist::parse(&[shown]).unwrap(), list);
        }
    }
}
