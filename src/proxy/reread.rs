//! Mid-session drift: a server's `list_changed` is never passed on (the client's lists are the
//! lock); mcpsum re-reads the list and quarantines the server if it differs from the lock, or
//! if the server does not show it in time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{Core, Pending};
use crate::drift;
use crate::lockfile::{self, Era, Kind, Sha256Digest, canonical_items};
use crate::mcp::client::with_modern_meta;

pub(super) struct Reread {
    items: Vec<Value>,
    cursors: std::collections::HashSet<String>,
    /// When its last page was asked for: a server that does not answer a page within the
    /// timeout (as `lock` bounds each list request) is quarantined.
    asked: Instant,
    /// Another `list_changed` came while it ran (it may have read a page from before it).
    again: bool,
}

/// The re-reads running, at most one per kind.
pub(super) struct Rereads {
    pub(super) running: BTreeMap<Kind, Reread>,
    /// How long a re-read may take before the server is quarantined (`--timeout-secs`).
    pub(super) timeout: Duration,
}

impl Core {
    pub(super) fn start_reread(&mut self, kind: Kind) {
        if self.quarantined() {
            return;
        }
        if let Some(running) = self.rereads.running.get_mut(&kind) {
            running.again = true;
            return;
        }
        self.rereads.running.insert(
            kind,
            Reread {
                items: Vec::new(),
                cursors: Default::default(),
                asked: Instant::now(),
                again: false,
            },
        );
        self.request_page(kind, None);
    }

    /// Quarantines the server if a re-read's page is late: asked for longer than the timeout
    /// ago, with no older request still unanswered. A server that announces a change and never
    /// shows the new list is treated as one that drifted.
    pub(super) fn expire_rereads(&mut self) {
        // A server still busy with a request older than the page (one that answers in order)
        // gets until that one is answered.
        let oldest_busy = self
            .pending
            .values()
            .filter_map(|p| match p {
                Pending::Client { started, .. } => Some(*started),
                _ => None,
            })
            .min();
        let late = self
            .rereads
            .running
            .iter()
            .find(|(_, r)| {
                r.asked.elapsed() > self.rereads.timeout
                    && oldest_busy.is_none_or(|busy| busy > r.asked)
            })
            .map(|(k, _)| *k);
        if let Some(kind) = late {
            self.rereads.running.clear();
            self.quarantine_now(&format!(
                "the server announced a change of its {} and did not answer a page of them within {} s",
                kind.plural(),
                self.rereads.timeout.as_secs()
            ));
        }
    }

    pub(super) fn request_page(&mut self, kind: Kind, cursor: Option<String>) {
        let sid = self.alloc_id();
        self.pending.insert(sid, Pending::Reread(kind));
        let mut params = match cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        if self.server_era == Era::Modern {
            params = with_modern_meta(
                params,
                &self.server_version,
                crate::mcp::client_capabilities(),
            );
        }
        self.send_server(
            json!({"jsonrpc": "2.0", "id": sid, "method": kind.list_method(), "params": params}),
        );
    }

    pub(super) fn reread_page(&mut self, kind: Kind, obj: &Map<String, Value>) {
        let Some(mut state) = self.rereads.running.remove(&kind) else {
            return;
        };
        let result = obj.get("result");
        let Some(page) = result
            .and_then(|r| r.get(kind.field()))
            .and_then(Value::as_array)
        else {
            return self.quarantine_now(&format!(
                "re-reading {} after list_changed failed",
                kind.plural()
            ));
        };
        state.items.extend(page.iter().cloned());
        if state.cursors.len() >= lockfile::MAX_ITEMS_PER_KIND {
            return self.quarantine_now(&format!(
                "the server pages its {} without end (more than {} pages)",
                kind.plural(),
                lockfile::MAX_ITEMS_PER_KIND
            ));
        }
        if state.items.len() > lockfile::MAX_ITEMS_PER_KIND {
            return self.quarantine_now(&format!(
                "the server now lists more than {} {}",
                lockfile::MAX_ITEMS_PER_KIND,
                kind.plural()
            ));
        }
        if let Some(Value::String(next)) = result.and_then(|r| r.get("nextCursor")) {
            if !state.cursors.insert(next.clone()) {
                return self
                    .quarantine_now(&format!("the server repeated a {} cursor", kind.plural()));
            }
            let next = next.clone();
            state.asked = Instant::now();
            self.rereads.running.insert(kind, state);
            return self.request_page(kind, Some(next));
        }
        let live = match canonical_items(kind, &state.items) {
            Ok(items) => items,
            Err(e) => return self.quarantine_now(&e.to_string()),
        };
        let locked = self.entry.items(kind);
        let same = live.len() == locked.len()
            && live
                .iter()
                .zip(locked)
                .all(|(a, b)| Sha256Digest::of_json(a) == Sha256Digest::of_json(b));
        if !same {
            let mut surface = self.entry.surface();
            surface.items.insert(kind, live);
            let what = drift::compare(&self.entry, &surface)
                .map(|d| d.summary())
                .unwrap_or_else(|e| e.to_string());
            self.quarantine_now(&what);
        } else if state.again {
            // The list may have changed again after a page was read: read it once more.
            self.start_reread(kind);
        }
    }
}
