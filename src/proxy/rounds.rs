//! Input rounds: a 2026-07-28 server answers a legacy client's request with `input_required`;
//! mcpsum asks the client each question as a real request (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`), then retries the request with the answers, as the
//! TypeScript SDK's shim does.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::{Core, MAX_IN_FLIGHT, Relayed, client_accepts};
use crate::mcp::codes;

/// Input rounds a request may take, at most (as the TypeScript SDK's shim).
const MAX_INPUT_ROUNDS: u32 = 8;

/// A legacy client's request to a 2026-07-28 server, kept for a retry after an input round.
pub(super) struct Retry {
    /// The client's params, as it sent them.
    pub(super) params: Value,
    /// Input rounds so far.
    pub(super) rounds: u32,
}

/// An input round in progress: the server answered `input_required` to a legacy client's
/// request; mcpsum asks the client each question as a real request, then retries.
pub(super) struct Round {
    pub(super) client_id: Value,
    pub(super) method: String,
    pub(super) item: String,
    /// As `Pending::Client::taints`.
    pub(super) taints: bool,
    pub(super) started: Instant,
    pub(super) retry: Box<Retry>,
    pub(super) request_state: Option<Value>,
    pub(super) answers: Map<String, Value>,
    pub(super) outstanding: usize,
}

/// The input rounds in progress.
#[derive(Default)]
pub(super) struct Rounds {
    /// By their number.
    pub(super) open: HashMap<u64, Round>,
    pub(super) next: u64,
}

impl Core {
    /// Asks the legacy client each question of the server's `input_required` answer as a real
    /// request (`elicitation/create`, `sampling/createMessage`, `roots/list`); the request is
    /// retried with the answers once all are in.
    pub(super) fn start_round(&mut self, mut round: Round, requests: Option<&Value>) {
        round.retry.rounds += 1;
        let n = self.rounds.next;
        self.rounds.next += 1;
        let questions: Vec<(String, Value)> = match requests {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => {
                self.rounds.open.insert(n, round);
                return self.fail_round(n, "the server's inputRequests is not an object");
            }
        };
        let too_many = round.retry.rounds > MAX_INPUT_ROUNDS
            || self.rounds.open.len() >= MAX_IN_FLIGHT
            || self.relayed.len() + questions.len() > MAX_IN_FLIGHT;
        self.rounds.open.insert(n, round);
        if too_many {
            let msg = format!(
                "server `{}` asked for input more than {MAX_INPUT_ROUNDS} times, or too many requests are in flight",
                self.name
            );
            return self.fail_round(n, &msg);
        }
        let caps = self.client_legacy_caps.clone().unwrap_or_else(|| json!({}));
        let mut asks = Vec::new();
        for (key, q) in questions {
            let method = q.get("method").and_then(Value::as_str).unwrap_or_default();
            if !client_accepts(&caps, method, q.get("params")) {
                let msg = self.undeclared(method);
                return self.fail_round(n, &msg);
            }
            let ours = format!("mcpsum-{}", self.next_relay);
            self.next_relay += 1;
            let mut msg = json!({"jsonrpc": "2.0", "id": ours, "method": method});
            if let Some(p) = q.get("params") {
                msg["params"] = p.clone();
            }
            asks.push((ours, key, msg));
        }
        if let Some(r) = self.rounds.open.get_mut(&n) {
            r.outstanding = asks.len();
        }
        if asks.is_empty() {
            // State only (load shedding): retry at once.
            return self.retry_round(n);
        }
        // The server's questions carry its text to the client (a sampling request goes to the
        // model): a source's round taints the session before they are sent.
        if let Some(r) = self.rounds.open.get(&n) {
            let (method, item, taints) = (r.method.clone(), r.item.clone(), r.taints);
            if let Err(why) = self.after_result(&method, &item, taints) {
                return self.fail_round(n, &why);
            }
        }
        for (ours, key, msg) in asks {
            self.relayed.insert(ours, Relayed::Input { round: n, key });
            self.send_client(msg);
        }
    }

    pub(super) fn round_answer(&mut self, n: u64, key: String, obj: &Map<String, Value>) {
        let Some(result) = obj.get("result") else {
            let why = obj
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("no result")
                .to_owned();
            return self.fail_round(
                n,
                &format!("the client could not answer the server's question: {why}"),
            );
        };
        let Some(r) = self.rounds.open.get_mut(&n) else {
            return;
        };
        r.answers.insert(key, result.clone());
        r.outstanding = r.outstanding.saturating_sub(1);
        if r.outstanding == 0 {
            self.retry_round(n);
        }
    }

    /// Sends the request again, with the answers and the server's `requestState`.
    pub(super) fn retry_round(&mut self, n: u64) {
        let Some(r) = self.rounds.open.remove(&n) else {
            return;
        };
        if self.quarantined() {
            // The retry is a new request to the server.
            return self.refuse_quarantined(&r.client_id, &r.method);
        }
        let mut params = r.retry.params.clone();
        if let Some(p) = params.as_object_mut() {
            p.remove("inputResponses");
            p.remove("requestState");
            if !r.answers.is_empty() {
                p.insert("inputResponses".into(), Value::Object(r.answers));
            }
            if let Some(state) = r.request_state {
                p.insert("requestState".into(), state);
            }
        }
        self.forward(
            &r.client_id,
            &r.method,
            Some(params),
            false,
            (r.item, r.taints),
            Some(r.retry),
        );
    }

    /// Forgets the questions of round `n` still open at the client, and tells the client to
    /// drop them (a dialog left open would ask the person for nothing).
    pub(super) fn cancel_questions(&mut self, n: u64, reason: &str) {
        let open: Vec<String> = self
            .relayed
            .iter()
            .filter(|(_, v)| matches!(v, Relayed::Input { round, .. } if *round == n))
            .map(|(k, _)| k.clone())
            .collect();
        for key in open {
            self.relayed.remove(&key);
            self.send_client(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": key, "reason": reason}}));
        }
    }

    pub(super) fn fail_round(&mut self, n: u64, why: &str) {
        let Some(r) = self.rounds.open.remove(&n) else {
            return;
        };
        self.cancel_questions(n, why);
        self.note(
            "call",
            json!({"method": r.method, "item": r.item, "decision": "allow", "ok": false, "outcome": "error", "reason": why, "duration_ms": r.started.elapsed().as_millis() as u64}),
        );
        self.reply_error(&r.client_id, codes::INTERNAL, why, None);
    }
}
