//! The `network.allow` parser (`mcpsum_egress::Allowlist::parse`), one entry per input line.
//!
//! Checked:
//! - all bad entries are reported in one pass, in order, each with its index, its text and the
//!   problem a parse of that entry alone gives; the good ones parse alone too;
//! - an accepted list keeps each distinct entry once, and each entry prints (`Display`) to text
//!   that parses back to itself;
//! - an exact entry admits the target written the same way (`Target::parse` of the entry text)
//!   and a wildcard admits a name one label below its suffix but never the suffix itself;
//! - entry and target grammars agree: text that is a valid exact entry is a valid target, and a
//!   valid target is a valid entry unless its address is unspecified or multicast.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpsum_egress::{Allowlist, Host, Pattern, Target};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lines: Vec<String> = text.split('\n').map(str::to_owned).collect();

    match Allowlist::parse(&lines) {
        Err(errors) => {
            assert!(!errors.is_empty());
            assert!(errors.windows(2).all(|w| w[0].index < w[1].index));
            let mut bad = errors.iter().peekable();
            for (i, line) in lines.iter().enumerate() {
                let alone = Allowlist::parse(std::slice::from_ref(line));
                if bad.peek().is_some_and(|e| e.index == i) {
                    let e = bad.next().expect("peeked");
                    assert_eq!(&e.entry, line);
                    let alone = alone.expect_err("refused in a list, accepted alone");
                    assert_eq!(alone[0].problem, e.problem);
                    assert!(e.to_string().starts_with(&format!("network.allow[{i}] ")));
                } else {
                    assert!(alone.is_ok(), "accepted in a list, refused alone: {line:?}");
                }
            }
        }
        Ok(list) => {
            let entries = list.entries();
            assert!(entries.len() <= lines.len());
            for (i, a) in entries.iter().enumerate() {
                assert!(!entries[i + 1..].contains(a), "duplicate kept: {a}");
                let printed = a.to_string();
                let again = Allowlist::parse(std::slice::from_ref(&printed))
                    .unwrap_or_else(|e| panic!("`{printed}` does not re-parse: {e:?}"));
                assert_eq!(again.entries(), std::slice::from_ref(a), "{printed}");
                match &a.pattern {
                    Pattern::Wildcard(suffix) => {
                        let below = Target::parse(&format!("x.{suffix}:{}", a.port))
                            .unwrap_or_else(|e| panic!("x.{suffix}: {e}"));
                        assert!(a.matches(&below), "{a} does not admit {below:?}");
                        assert!(list.find(&below).is_some());
                        let apex = Target::parse(&format!("{suffix}:{}", a.port))
                            .unwrap_or_else(|e| panic!("{suffix}: {e}"));
                        assert!(!a.matches(&apex), "{a} admits its own suffix");
                    }
                    Pattern::Name(_) | Pattern::Ip(_) => {
                        let t = Target::parse(&printed)
                            .unwrap_or_else(|e| panic!("entry `{printed}` is no target: {e}"));
                        assert!(a.matches(&t), "{a} does not admit {t:?}");
                        if let Pattern::Ip(ip) = a.pattern {
                            assert!(list.lists_ip(ip, a.port));
                        }
                    }
                }
            }
        }
    }

    // The two grammars agree on every line.
    for line in &lines {
        let entry = Allowlist::parse(std::slice::from_ref(line));
        let target = Target::parse(line);
        let wildcard = line.starts_with("*.");
        match (&entry, &target) {
            (Ok(list), Ok(t)) => {
                assert!(!wildcard);
                assert!(
                    list.find(t).is_some(),
                    "`{line}` as entry does not admit itself"
                );
            }
            (Ok(_), Err(e)) => assert!(wildcard, "`{line}` is an entry but no target: {e}"),
            (Err(e), Ok(t)) => {
                let Host::Ip(ip) = t.host else {
                    panic!("`{line}` is a target but no entry: {e:?}");
                };
                assert!(ip.is_unspecified() || ip.is_multicast(), "`{line}`: {e:?}");
            }
            (Err(_), Err(_)) => {}
        }
    }
});
