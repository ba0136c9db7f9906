//! JSON-RPC batches. Protocol version 2025-03-26, and only it, lets a line be an array of
//! requests and notifications; a peer MUST accept one and answer it with one array of the
//! responses. The proxy takes a client's batch apart and handles each member as if it had come
//! on its own line, holding the answers of the batch's requests until the last one is ready.
//! A batch from a 2025-03-26 server is taken apart the same way (in `server_message`).
//!
//! A batch from a client of any other version, an empty batch, and `initialize` inside a batch
//! get `-32600`, as JSON-RPC and the specification say.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::outbox::Out;
use super::{Action, Core, request_id};
use crate::mcp::codes;
use crate::mcp::framing;
use crate::protocol::BATCH_VERSION;

/// A client's batch whose answers are not all ready.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// Ids of its requests not answered yet (as JSON text, which is how the answers echo them),
    /// with how many requests share each.
    waiting: HashMap<String, usize>,
    /// Its answers so far, each without its newline.
    answers: Vec<Vec<u8>>,
    /// Its members are still being handled: answers ready now are held as well.
    filling: bool,
}

impl Batch {
    /// The one line that answers the batch.
    fn line(&self) -> Vec<u8> {
        let mut line =
            Vec::with_capacity(self.answers.iter().map(|a| a.len() + 1).sum::<usize>() + 2);
        line.push(b'[');
        for (i, a) in self.answers.iter().enumerate() {
            if i > 0 {
                line.push(b',');
            }
            line.extend_from_slice(a);
        }
        line.extend_from_slice(b"]\n");
        line
    }
}

/// An error answer, without its newline.
fn error_answer(id: &Value, message: &str) -> Vec<u8> {
    let mut bytes = framing::encode(
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INVALID_REQUEST, "message": message}}),
    );
    bytes.pop();
    bytes
}

impl Core {
    /// A line from the client that is a JSON array.
    pub(super) fn client_batch(&mut self, items: Vec<Value>) {
        if self.client_version.as_deref() != Some(BATCH_VERSION) {
            self.drop_junk("client", "a batch outside protocol version 2025-03-26");
            let this = match &self.client_version {
                Some(v) => format!("this session negotiated {v}"),
                None => "this session has not negotiated it in `initialize`".to_owned(),
            };
            let message = format!(
                "JSON-RPC batches are allowed only in protocol version {BATCH_VERSION} and {this}: send one message per line"
            );
            return self.reply_error(&Value::Null, codes::INVALID_REQUEST, &message, None);
        }
        if items.is_empty() {
            self.drop_junk("client", "an empty batch");
            return self.reply_error(
                &Value::Null,
                codes::INVALID_REQUEST,
                "an empty JSON-RPC batch",
                None,
            );
        }
        let mut batch = Batch {
            filling: true,
            ..Batch::default()
        };
        let mut members = Vec::with_capacity(items.len());
        for item in items {
            let Value::Object(obj) = item else {
                self.drop_junk("client", "a batch member that is not a JSON-RPC object");
                batch.answers.push(error_answer(
                    &Value::Null,
                    "a batch member that is not a JSON-RPC object",
                ));
                continue;
            };
            if let Some(why) = super::envelope_problem(&obj) {
                // Answered here: an unusable id could not be matched to its answer later.
                self.drop_junk("client", why);
                let id = obj.get("id").filter(|id| super::valid_id(id));
                batch
                    .answers
                    .push(error_answer(id.unwrap_or(&Value::Null), why));
                continue;
            }
            if obj.get("method").and_then(Value::as_str) == Some("initialize") {
                self.drop_junk("client", "`initialize` in a batch");
                if let Some(id) = request_id(&obj) {
                    batch.answers.push(error_answer(
                        id,
                        "`initialize` cannot be part of a JSON-RPC batch: send it on its own line",
                    ));
                }
                continue;
            }
            if let Some(id) = request_id(&obj) {
                *batch.waiting.entry(id.to_string()).or_default() += 1;
            }
            members.push(obj);
        }
        self.batches.borrow_mut().push(batch);
        for obj in members {
            self.client_object(obj);
        }
        // One batch at most fills at a time: its members are handled before the next line.
        let done = {
            let mut batches = self.batches.borrow_mut();
            batches.iter().position(|b| b.filling).map(|i| {
                batches[i].filling = false;
                (i, batches[i].waiting.is_empty())
            })
        };
        if let Some((i, true)) = done {
            self.end_batch(i);
        }
    }

    /// Sends a message to the client, or holds it when it answers a request of a batch.
    pub(super) fn push_client(&self, id: Option<&Value>, mut bytes: Vec<u8>) {
        if let Some(id) = id
            && self.waited_for(id).is_some()
        {
            bytes.pop();
            return self.unwait(id, Some(bytes));
        }
        self.push(Action::ToClient(Out::bytes(bytes)));
    }

    /// A request of a batch that was cancelled gets no answer: the batch does not wait for it.
    pub(super) fn batch_cancelled(&self, id: &Value) {
        self.unwait(id, None);
    }

    /// The batch that waits for an answer to `id`.
    fn waited_for(&self, id: &Value) -> Option<usize> {
        let batches = self.batches.borrow();
        if batches.is_empty() {
            return None;
        }
        let key = id.to_string();
        batches.iter().position(|b| b.waiting.contains_key(&key))
    }

    /// Takes `id` off the batch that waits for it, keeping `answer` (without its newline), and
    /// sends the batch's answers when that was the last.
    fn unwait(&self, id: &Value, answer: Option<Vec<u8>>) {
        let Some(i) = self.waited_for(id) else {
            return;
        };
        let done = {
            let mut batches = self.batches.borrow_mut();
            let b = &mut batches[i];
            let key = id.to_string();
            if let Some(n) = b.waiting.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    b.waiting.remove(&key);
                }
            }
            b.answers.extend(answer);
            b.waiting.is_empty() && !b.filling
        };
        if done {
            self.end_batch(i);
        }
    }

    /// Whether a batch waits for answers (the fast path, which does not hold them, stands aside).
    pub(super) fn batch_open(&self) -> bool {
        !self.batches.borrow().is_empty()
    }

    fn end_batch(&self, i: usize) {
        let b = self.batches.borrow_mut().remove(i);
        // A batch of notifications only is answered with nothing at all.
        if !b.answers.is_empty() {
            self.push(Action::ToClient(Out::bytes(b.line())));
        }
    }
}
