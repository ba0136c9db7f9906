//! The messages of a call relayed from an envelope scan ([`crate::mcp::envelope`]), without
//! building values: a client's `tools/call`, `prompts/get` or `resources/read`, the server's
//! answer, and its progress and log notifications. The scan checks the whole line as strictly
//! as the general path's parse; the proxy reads the members it decides on (method, id, the
//! item's name or URI, `_meta`, `isError`, the result's era fields) and copies the rest as the
//! peer wrote it, under its own id.
//!
//! Anything these paths do not do exactly as the general path would (an unlocked item, a sink
//! on a tainted session, an `input_required` answer, a stream's tag, a result that is not an
//! object, ...) goes to the general path, which parses the line whole. A fast path decides
//! before it changes any state, so the general path always starts afresh.

use std::time::Instant;

use serde_json::{Map, Value, json};

use super::admission::{Admission, Call, Params, Request};
use super::outbox::Splice;
use super::{Action, Core, MAX_IN_FLIGHT, META_SUBSCRIPTION, Pending, Retry};
use crate::audit::CallOutcome;
use crate::lockfile::Era;
use crate::mcp::META_SERVER_INFO;
use crate::mcp::codes;
use crate::mcp::envelope::{Message, Raw};

/// The result members a legacy client does not get from a 2026-07-28 server.
const MODERN_RESULT_FIELDS: [&str; 3] = ["resultType", "ttlMs", "cacheScope"];

impl Core {
    /// A line from the client.
    pub(super) fn on_client_line(&mut self, line: Vec<u8>) {
        let mut scan = std::mem::take(&mut self.scan);
        let relay = match scan.message(&line) {
            Ok(m) => self.call_fast(&m),
            Err(_) => None,
        };
        self.scan = scan;
        match relay {
            Some(s) => self.push(Action::ToServer(s.finish(line))),
            None => self.client_message(&line),
        }
    }

    /// A line from the server.
    pub(super) fn on_server_line(&mut self, line: Vec<u8>) {
        let mut scan = std::mem::take(&mut self.scan);
        let relay = match scan.message(&line) {
            Ok(m) if !self.batch_open() => self.server_fast(&m),
            _ => None,
        };
        self.scan = scan;
        match relay {
            Some(s) => self.push(Action::ToClient(s.finish(line))),
            None => self.server_message(&line),
        }
    }

    /// A call of a locked item that passes the taint gate as it is: the request for the
    /// server, its id remapped, its params copied but for `_meta` in the server's era.
    fn call_fast(&mut self, m: &Message<'_>) -> Option<Splice> {
        let method = match &*m.get("method")?.as_str()? {
            "tools/call" => "tools/call",
            "prompts/get" => "prompts/get",
            "resources/read" => "resources/read",
            _ => return None,
        };
        let id = m.get("id").filter(|id| !id.is_null())?;
        // The retry that answers a server's `roots/list` continues a call (`roots.rs`).
        if m.get_in("params", "requestState")
            .and_then(|s| s.as_str())
            .is_some_and(|s| s.starts_with(super::roots::ROOTS_STATE_PREFIX))
        {
            return None;
        }
        // The general path answers an invalid envelope.
        if &*m.get("jsonrpc")?.as_str()? != "2.0" || !super::valid_id(&id.to_value()?) {
            return None;
        }
        // Not admission's business: the general path records the client's name first, and
        // answers a call beyond the bound on calls in flight.
        if !self.taint.client_known()
            || self.pending.len() >= MAX_IN_FLIGHT
            || !m.get("params")?.is_object()
        {
            return None;
        }
        // A member that is missing or not a string is answered on the general path.
        let item = match method {
            "resources/read" => m.get_in("params", "uri")?.as_str()?,
            _ => m.get_in("params", "name")?.as_str()?,
        };
        let request = match method {
            "tools/call" => Request::ToolsCall { name: &item },
            "prompts/get" => Request::PromptsGet { name: &item },
            _ => Request::ResourcesRead { uri: &item },
        };
        let meta = match m.get_in("params", "_meta") {
            Some(raw) => Some(raw.to_value()?),
            None => None,
        };
        let call = Call {
            method,
            request: Ok(request),
            meta: meta.as_ref(),
            params: Params::Scanned(*m),
        };
        let modern = call.modern();
        // Only a call admitted as it is goes on here: every other answer (a refusal, an
        // approval prompt) is carried out on the general path.
        let Admission::Forward { taint_after } = self.admit(&call) else {
            return None;
        };
        let client_id = id.to_value()?;
        // A legacy client's call to a 2026-07-28 server may come back as an input round, which
        // retries it with the params as the client sent them (arguments are small; results,
        // which are not, are still relayed unparsed).
        let retry = match (self.server_era, modern) {
            (Era::Modern, false) => Some(Box::new(Retry {
                params: m.get("params")?.to_value()?,
                rounds: 0,
            })),
            _ => None,
        };
        let client_caps = self.client_caps_for_rounds(modern, meta.as_ref());
        let client_roots = self.client_roots(method, modern, meta.as_ref());
        let wants_logs = super::asks_logs(meta.as_ref()).filter(|_| modern);
        let mut own = Map::new();
        if let Some(v) = meta {
            own.insert("_meta".into(), v);
        }
        let own = self.to_server_params(Value::Object(own), modern);

        let sid = self.alloc_id();
        if let Some(rank) = wants_logs {
            self.logs.requests.insert(sid, rank);
        }
        self.pending.insert(
            sid,
            Pending::Client {
                client_id,
                method: method.to_owned(),
                item: item.into_owned(),
                modern_client: modern,
                started: Instant::now(),
                retry,
                client_caps,
                approved: None,
                taints: taint_after,
                client_roots,
            },
        );
        let line = m.text().as_bytes();
        let mut s = Splice::with_capacity(line.len() + 128);
        s.text(br#"{"jsonrpc":"2.0","id":"#);
        s.with(|b| {
            let _ = serde_json::to_writer(&mut *b, &sid);
        });
        s.text(br#","method":""#);
        s.text(method.as_bytes());
        s.text(br#"","params":{"#);
        let mut first = true;
        for e in m.entries_in("params") {
            // `task` is not advertised (see `served_capabilities`): the call runs as a plain one.
            if e.key == "_meta" || (method == "tools/call" && e.key == "task") {
                continue;
            }
            if !std::mem::take(&mut first) {
                s.text(b",");
            }
            s.text(e.key_json.as_bytes());
            s.text(b":");
            s.line(line, e.value.range());
        }
        for (k, v) in own.as_object().into_iter().flatten() {
            if !std::mem::take(&mut first) {
                s.text(b",");
            }
            s.with(|b| {
                let _ = serde_json::to_writer(&mut *b, k);
                b.push(b':');
                let _ = serde_json::to_writer(&mut *b, v);
            });
        }
        s.text(b"}}\n");
        Some(s)
    }

    /// A message from the server: the answer to a relayed call, or a notification.
    fn server_fast(&mut self, m: &Message<'_>) -> Option<Splice> {
        if let Some(method) = m.get("method") {
            // A quarantined server's notifications, and log messages no request asked for,
            // are dropped on the general path.
            if self.quarantined() {
                return None;
            }
            // During a source call, a log or progress message taints first: the general path.
            if self.source_in_flight().is_some() {
                return None;
            }
            if &*method.as_str()? == "notifications/message" {
                let level = m.get_in("params", "level").and_then(|l| l.as_str());
                if !self.client_wants_logs(level.as_deref()) {
                    return None;
                }
            }
            return notification_fast(m, method);
        }
        let sid = m.get("id")?.to_value()?.as_u64()?;
        // Held for the retry of a call that waits for the client's roots: the general path.
        if self.roots.any() && self.roots.is_parked(sid) {
            return None;
        }
        // An `input_required` answer (to a legacy client's call: its retry is kept) is not
        // `complete`, so it goes to the general path below, which runs the input round.
        let Some(Pending::Client {
            modern_client,
            method,
            ..
        }) = self.pending.get(&sid)
        else {
            return None;
        };
        let modern_client = *modern_client;
        if modern_client && self.server_era == Era::Legacy && method == "resources/read" {
            // It gains the caching fields on the general path.
            return None;
        }
        let (result, error) = (m.get("result"), m.get("error"));
        if result.is_some() && error.is_some() {
            // Forbidden by JSON-RPC: answered on the general path.
            return None;
        }
        let mut drop_fields: &[&str] = &[];
        let mut add_type = false;
        match result {
            Some(r) if !r.is_object() => return None,
            None if error.is_none() => return None,
            Some(_) => match (self.server_era, modern_client) {
                (Era::Legacy, true) => add_type = m.get_in("result", "resultType").is_none(),
                // An input round's questions are checked on the general path.
                (Era::Modern, true)
                    if m.get_in("result", "resultType")
                        .is_some_and(|t| t.as_str().as_deref() != Some("complete")) =>
                {
                    return None;
                }
                (Era::Modern, false) => {
                    let t = m.get_in("result", "resultType");
                    if t.is_some_and(|t| t.as_str().as_deref() != Some("complete")) {
                        return None;
                    }
                    drop_fields = &MODERN_RESULT_FIELDS;
                }
                _ => {}
            },
            None => {}
        }

        let Some(Pending::Client {
            client_id,
            method,
            item,
            started,
            taints,
            ..
        }) = self.pending.remove(&sid)
        else {
            return None;
        };
        let stream = self.streams.ids.remove(&sid).is_some();
        let line = m.text().as_bytes();
        let mut s = Splice::with_capacity(line.len() + 64);
        s.text(br#"{"jsonrpc":"2.0","id":"#);
        s.with(|b| {
            let _ = serde_json::to_writer(&mut *b, &client_id);
        });
        let outcome = match (result, error) {
            (Some(r), _) => {
                s.text(br#","result":"#);
                let meta = m
                    .get_in("result", "_meta")
                    .and_then(|raw| self.result_meta(raw, stream, &client_id));
                let dropped = drop_fields.iter().any(|k| m.get_in("result", k).is_some());
                if meta.is_none() && !add_type && !dropped {
                    s.line(line, r.range());
                } else {
                    s.text(b"{");
                    let mut first = true;
                    for e in m.entries_in("result") {
                        if drop_fields.contains(&e.key) {
                            continue;
                        }
                        if !std::mem::take(&mut first) {
                            s.text(b",");
                        }
                        s.text(e.key_json.as_bytes());
                        s.text(b":");
                        match (&meta, e.key) {
                            (Some(v), "_meta") => s.with(|b| {
                                let _ = serde_json::to_writer(&mut *b, v);
                            }),
                            _ => s.line(line, e.value.range()),
                        }
                    }
                    if add_type {
                        if !first {
                            s.text(b",");
                        }
                        s.text(br#""resultType":"complete""#);
                    }
                    s.text(b"}");
                }
                // MCP reports a tool's failure in its result; the audit log says so.
                if method == "tools/call"
                    && m.get_in("result", "isError")
                        .is_some_and(|v| v.json() == "true")
                {
                    CallOutcome::ToolError
                } else {
                    CallOutcome::Ok
                }
            }
            (None, Some(e)) => {
                s.text(br#","error":"#);
                s.line(line, e.range());
                CallOutcome::Error
            }
            (None, None) => return None,
        };
        // A source's answer reaches the client, result or error (clients show an error's text
        // to the model as the tool's output): the session is tainted first.
        if let Err(why) = self.after_result(&method, &item, taints) {
            let mut e = Splice::with_capacity(why.len() + 96);
            e.with(|b| {
                let answer = json!({"jsonrpc": "2.0", "id": client_id, "error": {"code": codes::INTERNAL, "message": why}});
                let _ = serde_json::to_writer(&mut *b, &answer);
            });
            e.text(b"\n");
            self.note_call(method, item, CallOutcome::Error, started.elapsed(), e.len());
            return Some(e);
        }
        s.text(b"}\n");
        self.note_call(method, item, outcome, started.elapsed(), s.len());
        Some(s)
    }

    /// A result's `_meta` as the client gets it, when that differs from what the server sent:
    /// the locked `serverInfo`, and the client's own id on the end of its listen stream.
    fn result_meta(&self, raw: Raw<'_>, stream: bool, client_id: &Value) -> Option<Value> {
        let mut meta = raw.to_value()?;
        let obj = meta.as_object_mut()?;
        let info = obj.contains_key(META_SERVER_INFO);
        let tag = stream && obj.contains_key(META_SUBSCRIPTION);
        if info {
            obj.insert(META_SERVER_INFO.into(), self.entry.server_info.clone());
        }
        if tag {
            obj.insert(META_SUBSCRIPTION.into(), client_id.clone());
        }
        (info || tag).then_some(meta)
    }
}

/// Progress and log notifications pass as they are, unless a stream's tag needs remapping.
fn notification_fast(m: &Message<'_>, method: Raw<'_>) -> Option<Splice> {
    let method = match &*method.as_str()? {
        "notifications/progress" => "notifications/progress",
        "notifications/message" => "notifications/message",
        _ => return None,
    };
    if m.get("id").is_some_and(|id| !id.is_null()) {
        return None;
    }
    if let Some(meta) = m.get_in("params", "_meta")
        && meta.to_value()?.get(META_SUBSCRIPTION).is_some()
    {
        return None;
    }
    let mut s = Splice::with_capacity(m.text().len() + 64);
    s.text(br#"{"jsonrpc":"2.0","method":""#);
    s.text(method.as_bytes());
    s.text(b"\"");
    if let Some(p) = m.get("params") {
        s.text(br#","params":"#);
        s.line(m.text().as_bytes(), p.range());
    }
    s.text(b"}\n");
    Some(s)
}
