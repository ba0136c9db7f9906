//! The egress proxy's request parsing (`mcpsum_egress::{head_end, parse_head}` and
//! `Target::parse`) on the bytes a client sends before the proxy replies.
//!
//! Checked:
//! - the end of the head found while the bytes arrive in pieces (searching only the new bytes
//!   and the three before them, as the proxy does) is the end found in the whole buffer, and is
//!   the end of a plain line model: lines end at LF (a CR before it is part of the ending, RFC
//!   9112 2.2 lets a recipient take a bare LF), and the head ends with the first empty line
//!   after a line end, whichever ending each line used (`\n\n`, `\n\r\n`, `\r\n\n`,
//!   `\r\n\r\n`);
//! - parsing the head never panics; a refused method is a non-empty token other than `CONNECT`;
//!   an accepted authority is non-empty printable ASCII without spaces;
//! - a target that parses is normalised (lower case, no trailing dot, LDH labels), its printed
//!   form parses to the same target, an allowlist holding that form admits it (and a wildcard
//!   over its parent, when it has one), and its host is an SNI that fits it.
#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use mcpsum_egress::{
    Allowlist, HeadError, Host, Target, TargetDecision, decide_target, head_end, parse_head,
    sni_matches,
};
use mcpsum_fuzz::{Chunks, seed_of};

fuzz_target!(|data: &[u8]| {
    let whole = head_end(data);
    assert_eq!(incremental_head_end(data, seed_of(data)), whole);
    assert_eq!(incremental_head_end(data, 1), whole);
    assert_eq!(whole, model_head_end(data));
    let Some(end) = whole else { return };
    assert!(end <= data.len());
    assert!(data[..end].ends_with(b"\n\n") || data[..end].ends_with(b"\n\r\n"));

    let authority = match parse_head(&data[..end]) {
        Err(HeadError::Method(m)) => {
            assert!(!m.is_empty() && m != "CONNECT", "method {m:?}");
            assert!(
                m.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-'),
                "method {m:?}"
            );
            return;
        }
        Err(e) => {
            let _ = e.to_string();
            return;
        }
        Ok(a) => a,
    };
    assert!(!authority.is_empty());
    assert!(
        authority.bytes().all(|b| b.is_ascii_graphic()),
        "authority {authority:?}"
    );
    if let Ok(target) = Target::parse(authority) {
        check_target(&target);
    }
});

/// The end of the head by lines: just past the first line that is empty (or only a CR) and
/// follows a line end.
fn model_head_end(data: &[u8]) -> Option<usize> {
    let mut start = None;
    for (i, &b) in data.iter().enumerate() {
        if b != b'\n' {
            continue;
        }
        if let Some(s) = start
            && matches!(&data[s..i], b"" | b"\r")
        {
            return Some(i + 1);
        }
        start = Some(i + 1);
    }
    None
}

/// `head_end` as the proxy's `read_head` uses it: after each read, search from three bytes
/// before the new ones.
fn incremental_head_end(data: &[u8], seed: u64) -> Option<usize> {
    let mut buf: Vec<u8> = Vec::new();
    for piece in Chunks::new(seed, 64).split(data) {
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(piece);
        if let Some(end) = head_end(&buf[from..]) {
            return Some(end + from);
        }
    }
    None
}

fn check_target(target: &Target) {
    let printed = match &target.host {
        Host::Name(n) => {
            assert!(
                !n.is_empty() && n.len() <= 253 && !n.ends_with('.'),
                "name {n:?}"
            );
            for label in n.split('.') {
                assert!((1..=63).contains(&label.len()), "label {label:?}");
                assert!(
                    !label.starts_with('-') && !label.ends_with('-'),
                    "label {label:?}"
                );
                assert!(
                    label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                    "label {label:?}"
                );
            }
            format!("{n}:{}", target.port)
        }
        Host::Ip(IpAddr::V4(a)) => format!("{a}:{}", target.port),
        Host::Ip(IpAddr::V6(a)) => format!("[{a}]:{}", target.port),
    };
    assert_ne!(target.port, 0);
    assert_eq!(Target::parse(&printed).as_ref(), Ok(target), "{printed}");

    match &target.host {
        Host::Ip(ip) if ip.is_unspecified() || ip.is_multicast() => {
            // Never an allowlist entry; nothing to match.
            assert!(Allowlist::parse(&[printed]).is_err());
        }
        Host::Ip(ip) => {
            let list = Allowlist::parse(std::slice::from_ref(&printed))
                .unwrap_or_else(|e| panic!("{printed}: {e:?}"));
            assert!(list.lists_ip(*ip, target.port));
            assert!(matches!(
                decide_target(&list, target),
                TargetDecision::Connect { .. }
            ));
            assert!(sni_matches(target, None));
        }
        Host::Name(n) => {
            let list = Allowlist::parse(std::slice::from_ref(&printed))
                .unwrap_or_else(|e| panic!("{printed}: {e:?}"));
            assert!(matches!(
                decide_target(&list, target),
                TargetDecision::Resolve { .. }
            ));
            assert!(sni_matches(target, Some(n)));
            assert!(sni_matches(target, Some(&n.to_ascii_uppercase())));
            assert!(!sni_matches(target, None));
            // A wildcard over the parent admits it when the parent has two labels or more.
            if let Some((_, parent)) = n.split_once('.')
                && parent.contains('.')
            {
                let wild = format!("*.{parent}:{}", target.port);
                let list = Allowlist::parse(std::slice::from_ref(&wild))
                    .unwrap_or_else(|e| panic!("{wild}: {e:?}"));
                assert!(
                    list.find(target).is_some(),
                    "{wild} does not admit {printed}"
                );
            }
        }
    }
}
