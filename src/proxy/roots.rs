//! Roots across the eras: a legacy server asks `roots/list` as a request of its own, in the
//! middle of a call; a 2026-07-28 client is asked questions only in an answer to its own request
//! (`input_required`). mcp-wire.md §13 bridges the two by keeping the server's call open: the
//! client's call is answered with `input_required` asking `roots/list`, the server's request is
//! answered with what the client's retry carries, and the server's answer to the call, held
//! meanwhile, goes to the retry.
//!
//! Only a call of a client that declared `roots` in its `_meta` capabilities, and the only such
//! call in flight (the server's request does not say which call it belongs to), is used;
//! otherwise the server gets no roots, as before (mcpsum declares `roots` to every server). The
//! retry's own arguments are not sent anywhere: the call runs as it was first sent and admitted.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{Core, Pending};
use crate::lockfile::Era;
use crate::mcp::codes;

/// The key of mcpsum's `roots/list` question in a 2026-07-28 `inputRequests` map.
pub(super) const ROOTS_KEY: &str = "io.mcpsum/roots";
/// mcpsum's `requestState` for such a question starts with this.
pub(super) const ROOTS_STATE_PREFIX: &str = "mcpsum-roots-";
/// How long a client has to retry with its roots before the call is given up.
const ROOTS_TIMEOUT: Duration = Duration::from_secs(120);

/// A call of the client's whose server asked for roots, waiting for the client's retry.
struct Parked {
    /// The call's id at the server: it is still in flight there.
    sid: u64,
    /// The id of the server's `roots/list`.
    server_id: Value,
    method: String,
    item: String,
    /// The server's answer to the call, if it came before the retry.
    answer: Option<Map<String, Value>>,
    deadline: Instant,
}

/// The calls waiting for a client's roots, by mcpsum's `requestState`.
#[derive(Default)]
pub(super) struct Roots {
    parked: HashMap<String, Parked>,
    next: u64,
}

impl Roots {
    /// Whether a call waits for the client's roots.
    pub(super) fn any(&self) -> bool {
        !self.parked.is_empty()
    }

    /// Whether the call of server id `sid` waits for the client's roots.
    pub(super) fn is_parked(&self, sid: u64) -> bool {
        self.parked.values().any(|p| p.sid == sid)
    }

    /// Keeps the server's answer to a call that waits for the client's roots; gives it back
    /// when `sid` is no such call.
    pub(super) fn hold(
        &mut self,
        sid: u64,
        answer: Map<String, Value>,
    ) -> Option<Map<String, Value>> {
        match self.parked.values_mut().find(|p| p.sid == sid) {
            Some(p) => {
                p.answer = Some(answer);
                None
            }
            None => Some(answer),
        }
    }

    /// Forgets every waiting call; returns their server ids.
    pub(super) fn clear(&mut self) -> Vec<u64> {
        self.parked.drain().map(|(_, p)| p.sid).collect()
    }
}

impl Core {
    /// A legacy server's `roots/list` (id `server_id`) for a 2026-07-28 client: asked of the
    /// client in the answer to its call that declared roots. `false` when there is no one such
    /// call, or the client is a legacy one.
    pub(super) fn roots_by_input(&mut self, server_id: &Value) -> bool {
        if self.server_era != Era::Legacy || self.client_version.is_some() {
            return false;
        }
        let mut calls = self.pending.iter().filter_map(|(sid, p)| match p {
            Pending::Client {
                client_roots: true, ..
            } if !self.roots.is_parked(*sid) => Some(*sid),
            _ => None,
        });
        let (Some(sid), None) = (calls.next(), calls.next()) else {
            return false;
        };
        let Some(Pending::Client {
            client_id,
            method,
            item,
            ..
        }) = self.pending.get_mut(&sid)
        else {
            return false;
        };
        // The client's request is answered now; the call goes on under the retry's id.
        let asked = std::mem::replace(client_id, Value::Null);
        let (method, item) = (method.clone(), item.clone());
        let state = format!("{ROOTS_STATE_PREFIX}{}", self.roots.next);
        self.roots.next += 1;
        self.note(
            "call",
            json!({"method": "roots/list", "item": item, "decision": "ask", "reason": "the server asked for roots during the client's call: asked of the client with input_required"}),
        );
        self.roots.parked.insert(
            state.clone(),
            Parked {
                sid,
                server_id: server_id.clone(),
                method,
                item,
                answer: None,
                deadline: Instant::now() + ROOTS_TIMEOUT,
            },
        );
        self.reply(
            &asked,
            json!({
                "resultType": "input_required",
                "inputRequests": {ROOTS_KEY: {"method": "roots/list", "params": {}}},
                "requestState": state,
            }),
        );
        true
    }

    /// A 2026-07-28 client's request whose `requestState` is mcpsum's `roots/list` question:
    /// its answer goes to the server, and the call waiting for it goes on under `id`. `false`
    /// when the request is no such retry.
    pub(super) fn roots_retry(&mut self, id: &Value, method: &str, params: Option<&Value>) -> bool {
        let Some(state) = params
            .and_then(|p| p.get("requestState"))
            .and_then(Value::as_str)
            .filter(|s| s.starts_with(ROOTS_STATE_PREFIX))
        else {
            return false;
        };
        let Some(parked) = self.roots.parked.remove(state) else {
            self.reply_error(
                id,
                codes::INVALID_PARAMS,
                "mcpsum refused the retry: its `requestState` answers no question of mcpsum's that is still open (it timed out, or was answered); call again",
                None,
            );
            return true;
        };
        let item = super::Request::parse(method, params)
            .map(|r| r.item().to_owned())
            .unwrap_or_default();
        if method != parked.method || item != parked.item {
            self.reply_error(
                id,
                codes::INVALID_PARAMS,
                "mcpsum refused the retry: its `requestState` belongs to another call; retry the call it was given for",
                None,
            );
            self.roots.parked.insert(state.to_owned(), parked);
            return true;
        }
        if self.quarantined() {
            self.send_server(json!({"jsonrpc": "2.0", "id": parked.server_id, "error": {"code": codes::QUARANTINED, "message": "the server is quarantined: its surface drifted from mcp.lock"}}));
            self.refuse_quarantined(id, method);
            return true;
        }
        let roots = params
            .and_then(|p| p.get("inputResponses"))
            .and_then(|r| r.get(ROOTS_KEY))
            .and_then(|a| a.get("roots"))
            .filter(|r| r.is_array());
        let answer = match roots {
            Some(r) => json!({"jsonrpc": "2.0", "id": parked.server_id, "result": {"roots": r}}),
            None => {
                json!({"jsonrpc": "2.0", "id": parked.server_id, "error": {"code": codes::INTERNAL, "message": "the client did not answer the question for its roots"}})
            }
        };
        self.note(
            "call",
            json!({"method": "roots/list", "item": parked.item, "decision": "allow", "ok": roots.is_some(), "outcome": if roots.is_some() { "ok" } else { "error" }}),
        );
        self.send_server(answer);
        if let Some(Pending::Client { client_id, .. }) = self.pending.get_mut(&parked.sid) {
            *client_id = id.clone();
        }
        if let Some(answer) = parked.answer {
            self.server_response(&json!(parked.sid), answer);
        }
        true
    }

    /// Gives up calls whose client did not retry with its roots in time: the server's
    /// `roots/list` gets an error and its call is cancelled.
    pub(super) fn expire_roots(&mut self) {
        let now = Instant::now();
        let late: Vec<String> = self
            .roots
            .parked
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in late {
            let Some(p) = self.roots.parked.remove(&key) else {
                continue;
            };
            self.pending.remove(&p.sid);
            self.send_server(json!({"jsonrpc": "2.0", "id": p.server_id, "error": {"code": codes::INTERNAL, "message": "the client did not answer the question for its roots in time"}}));
            self.send_server(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": p.sid, "reason": "the client did not give its roots"}}));
            self.note(
                "call",
                json!({"method": p.method, "item": p.item, "decision": "allow", "ok": false, "outcome": "error", "reason": "the client did not retry with its roots in time"}),
            );
        }
    }
}
