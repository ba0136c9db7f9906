//! The lockfile loader (`mcpsum::lockfile::load_from_bytes`) on arbitrary bytes.
//!
//! Every input is loaded twice: as given, and, when it has the lockfile's shape, with its items
//! sorted and every digest recomputed (the fuzzer cannot forge SHA-256, so without the second
//! pass it would never get past the digest checks to the policy rules and the accepting path).
//!
//! Checked: loading never panics, nor does rendering its error; a file that loads writes back
//! (`to_bytes`) to bytes that load to the same servers and write to the same bytes again; each
//! of its entries passes `check_entry` (what `lock` runs before writing) and is rebuilt unchanged
//! by `ServerEntry::from_surface` from the surface the proxy serves.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mcpsum::lockfile::{self, Digests, Kind, Lockfile, ServerEntry, canonical_items};

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(fixed) = with_fresh_digests(data) {
        check(&fixed);
    }
});

fn check(data: &[u8]) {
    let path = Path::new("fuzz/mcp.lock");
    match lockfile::load_from_bytes(path, data) {
        Err(e) => {
            let _ = e.to_string();
            let _ = e.one_line();
        }
        Ok(lock) => {
            let written = lockfile::to_bytes(&lock);
            let again = lockfile::load_from_bytes(path, &written).unwrap_or_else(|e| {
                panic!(
                    "a loaded lockfile, written back, does not load: {e}\n{}",
                    String::from_utf8_lossy(&written)
                )
            });
            assert_eq!(
                again.servers, lock.servers,
                "servers changed on a round trip"
            );
            assert_eq!(again.lockfile_version, lock.required_version());
            assert_eq!(lockfile::to_bytes(&again), written, "writing is not stable");
            for (name, entry) in &lock.servers {
                // What `lock` checks before it writes an entry agrees with what loading checked.
                if let Err(e) = lockfile::check_entry(path, name, entry) {
                    panic!("server `{name}` loaded but fails `check_entry`: {e}");
                }
                // The surface the proxy serves from an entry builds the same entry again.
                let rebuilt = ServerEntry::from_surface(
                    entry.command.clone(),
                    entry.env_passthrough.clone(),
                    entry.surface(),
                    entry.policy.clone(),
                )
                .unwrap_or_else(|e| panic!("server `{name}`: {e}"));
                // `lock` sorts the variables and drops an empty `policy: {}`; the loader keeps
                // both as written.
                let mut want = entry.clone();
                want.env_passthrough.sort();
                want.policy = want.policy.filter(|p| !p.is_empty());
                assert_eq!(
                    rebuilt, want,
                    "server `{name}`: entry -> surface -> entry differs"
                );
            }
        }
    }
}

/// The input with items in canonical order and digests that match them, or `None` when it does
/// not deserialize as a lockfile at all.
fn with_fresh_digests(data: &[u8]) -> Option<Vec<u8>> {
    let mut lock: Lockfile = serde_json::from_slice(data).ok()?;
    for entry in lock.servers.values_mut() {
        for kind in Kind::ALL {
            if let Ok(sorted) = canonical_items(kind, entry.items(kind)) {
                *items_mut(entry, kind) = sorted;
            }
        }
        entry.digests = Digests::compute(
            entry.instructions.as_deref(),
            &entry.tools,
            &entry.prompts,
            &entry.resources,
            &entry.resource_templates,
        );
    }
    serde_json::to_vec(&lock).ok()
}

fn items_mut(entry: &mut ServerEntry, kind: Kind) -> &mut Vec<serde_json::Value> {
    match kind {
        Kind::Tool => &mut entry.tools,
        Kind::Prompt => &mut entry.prompts,
        Kind::Resource => &mut entry.resources,
        Kind::ResourceTemplate => &mut entry.resource_templates,
    }
}
