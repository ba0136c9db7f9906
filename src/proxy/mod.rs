//! `mcpsum proxy --name NAME`: the stdio proxy a client runs instead of the server (SPEC §5).
//!
//! mcpsum is a server on the client link and a client on the server link. It loads and checks the
//! lock, starts exactly the locked command with exactly the passthrough environment, talks to the
//! server only in its locked era, reads the live surface and compares it before serving anything.
//! The client sees the lock and nothing else: `initialize` / `server/discover` and every list are
//! answered from the lock; calls reach the server only for locked items; definitional drift, at
//! start or later, quarantines the server (-32002 for every later request).
//!
//! The proxy is a core without I/O (`Core`: a message from either peer in, `Action`s out:
//! messages for either peer, audit records, warnings, quarantine) and, beside it, the I/O loop
//! and the lifecycle (`io.rs`: line readers, outboxes, signals, backpressure, `Phase`). The
//! messages of a call (request, answer, progress) are relayed from an envelope scan without
//! building values (`fast.rs`); everything else is parsed whole. Whether a client's request
//! may reach the server is decided once, for both paths, in `admission.rs`.

mod admission;
mod batch;
mod fast;
mod gate;
mod io;
mod logs;
mod outbox;
mod reread;
mod roots;
mod rounds;
mod streams;
#[cfg(test)]
mod tests;
mod uri;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use admission::{Admission, Call, Facts, Params, Refusal, Request};
use outbox::Out;

use crate::audit::CallOutcome;
use crate::drift::{self, Class};
use crate::lockfile::{self, Era, Kind, ServerEntry};
use crate::mcp::client::with_modern_meta;
use crate::mcp::envelope::{Head, Scan};
use crate::mcp::framing;
use crate::mcp::{
    LATEST_LEGACY, LEGACY_VERSIONS, META_LOG_LEVEL, META_SERVER_INFO, MODERN_VERSION, codes,
};
use crate::protocol::BATCH_VERSION;

pub use io::run;

use logs::{LOG_LEVELS, asks_logs, log_rank};
use rounds::{Retry, Round};

/// Items per page when serving a locked list.
const PAGE_SIZE: usize = 100;
/// Requests in flight towards the server, at most.
const MAX_IN_FLIGHT: usize = 4096;
/// `_meta` key of a 2026-07-28 subscription id.
const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
/// Audit records for dropped junk, at most, before only counting.
const MAX_DROP_RECORDS: u64 = 100;
/// Warnings on stderr for lines of the server's stdout that are not JSON, at most.
const MAX_BANNER_WARNINGS: u64 = 20;

/// A map keyed by the ids mcpsum gives its own requests to the server: they are sequential and
/// never chosen by a peer, so the Fx hash spreads them well without SipHash's cost.
type IdMap<V> = rustc_hash::FxHashMap<u64, V>;

/// Options of `mcpsum proxy`.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// The server's name in the lockfile.
    pub name: String,
    /// Largest message accepted from either side.
    pub max_message: usize,
    /// Bound on the start-up handshake and lists.
    pub timeout: Duration,
    /// Learn mode: how the server is launched (`crate::learning`), nothing else changes here.
    pub learn: bool,
    /// Where the allowed-signers file that may require a signed lockfile is looked for.
    pub trust: crate::signing::Trust,
}

/// The id of a message that is a request (a method and an id that is not null).
fn request_id(obj: &Map<String, Value>) -> Option<&Value> {
    obj.get("method")?;
    obj.get("id").filter(|id| !id.is_null())
}

/// Whether `id` is a JSON-RPC id as MCP allows it: a string or an integer (any number with an
/// integral value, so `1e3` and integers beyond 64 bits too; they are echoed as read).
fn valid_id(id: &Value) -> bool {
    id.is_string() || id.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// What makes a message from the client invalid JSON-RPC, if anything. Responses (to mcpsum's
/// own requests) are left to [`Core::client_response`].
fn envelope_problem(obj: &Map<String, Value>) -> Option<&'static str> {
    match obj.get("method") {
        Some(Value::String(_)) => {}
        Some(_) => return Some("invalid request: `method` must be a string"),
        None if obj.contains_key("result") || obj.contains_key("error") => return None,
        None => return Some("invalid request: neither a request, a notification nor a response"),
    }
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some("invalid request: `jsonrpc` must be \"2.0\"");
    }
    if obj.get("id").is_some_and(|id| !valid_id(id)) {
        return Some("invalid request: an id must be a string or an integer");
    }
    None
}

fn era_name(era: Era) -> &'static str {
    match era {
        Era::Legacy => "legacy",
        Era::Modern => MODERN_VERSION,
    }
}

/// A request sent to the server and not yet answered.
enum Pending {
    /// Relayed for the client.
    Client {
        client_id: Value,
        method: String,
        item: String,
        modern_client: bool,
        started: Instant,
        /// Set for a legacy client's request that a 2026-07-28 server may answer with
        /// `input_required`.
        retry: Option<Box<Retry>>,
        /// A 2026-07-28 client's declared capabilities, for a request to a 2026-07-28 server:
        /// the questions of an `input_required` answer must be ones the client accepts.
        client_caps: Option<Box<Value>>,
        /// The arguments' digest of a sink call the person approved: the server's own
        /// `requestState` on it is wrapped in a continuation token.
        approved: Option<Box<crate::lockfile::Sha256Digest>>,
        /// Admission's answer: the item is a source, so its answer taints the session.
        taints: bool,
        /// A 2026-07-28 client that declared `roots`, calling a legacy server: the server's
        /// `roots/list` during the call is asked of the client (`roots.rs`).
        client_roots: bool,
    },
    /// A page of mcpsum's own re-read of a list after `list_changed`.
    Reread(Kind),
    /// mcpsum's own `subscriptions/listen` (2026-07-28 servers).
    Listen,
    /// A listen stream standing for a legacy `resources/subscribe` to a 2026-07-28 server;
    /// `client_id` is answered on the acknowledgment.
    Subscription {
        uri: String,
        client_id: Option<Value>,
    },
    /// mcpsum's own `resources/(un)subscribe` to a legacy server for a 2026-07-28 client's
    /// listen stream; its answer goes nowhere.
    Internal,
}

/// What an id of ours on the client link stands for.
enum Relayed {
    /// A legacy server's own request (sampling, elicitation, roots): the server's id.
    Server(Value),
    /// One question of a 2026-07-28 server's input round, asked of a legacy client.
    Input { round: u64, key: String },
}

/// Where the proxy is in its life: `Starting` (the handshake is answered from the lock while
/// the server starts), then `Serving` or `Quarantined` (drift at the start or later; the
/// handshake and lists are still answered, nothing reaches the server), and `Draining` once the
/// client closed its stdin (the answers still in flight are relayed, nothing new is asked).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Starting,
    Serving,
    Quarantined(String),
    /// The client left; `quarantined` keeps why, if the server was quarantined before.
    Draining {
        quarantined: Option<String>,
    },
}

/// What the core asks of the I/O loop, which carries the actions out in order. The core itself
/// does no I/O but the session's taint state (a file under a lock, shared with the session's
/// other proxies), so its decisions can be tested by feeding it messages.
#[derive(Debug)]
enum Action {
    /// A message for the client.
    ToClient(Out),
    /// A message for the server.
    ToServer(Out),
    /// An audit record (`AuditLog::note`).
    Audit { event: &'static str, fields: Value },
    /// The record of a call's answer (`AuditLog::note_call`).
    AuditCall {
        method: String,
        item: String,
        outcome: CallOutcome,
        took: Duration,
        bytes: usize,
    },
    /// A warning for the person, on stderr.
    Warn(String),
    /// The server is quarantined from now on, for this reason (definitional drift): recorded
    /// in the audit log and warned of.
    Quarantine(String),
}

/// The proxy's state and decisions, without I/O: [`Core::on_client_line`] and
/// [`Core::on_server_line`] take a message from either peer and queue [`Action`]s.
struct Core {
    name: String,
    entry: ServerEntry,
    server_era: Era,
    server_version: String,
    /// Where the proxy is in its life; quarantine is one of its states.
    phase: Phase,
    /// Capabilities a legacy client declared in `initialize`.
    client_legacy_caps: Option<Value>,
    /// The version a legacy client negotiated in `initialize`.
    client_version: Option<String>,
    /// Log levels across the eras.
    logs: logs::Logs,
    /// The client's batches (2025-03-26) that wait for answers.
    batches: RefCell<Vec<batch::Batch>>,
    next_server_id: u64,
    pending: IdMap<Pending>,
    next_relay: u64,
    /// Our id on the client link → what it stands for (server requests relayed to the client,
    /// questions of input rounds).
    relayed: HashMap<String, Relayed>,
    /// Input rounds in progress (a 2026-07-28 server, a legacy client).
    rounds: rounds::Rounds,
    /// Subscriptions and listen streams, ours and the client's.
    streams: streams::Streams,
    /// Re-reads of lists after `list_changed` (mid-session drift).
    rereads: reread::Rereads,
    /// Calls whose legacy server asked a 2026-07-28 client's roots.
    roots: roots::Roots,
    /// What the I/O loop is to do, in order (see [`Core::drain_actions`]).
    actions: RefCell<Vec<Action>>,
    /// Scratch of the envelope scan, reused for every message.
    scan: Scan,
    drops: u64,
    /// Lines of the server's stdout that were not JSON, skipped (each warned of, up to a cap).
    banners: u64,
    /// `--max-message-bytes`, for messages.
    max_message: usize,
    /// Taint labels, the session's shared state and pending approvals (I6).
    taint: gate::TaintGate,
}

/// Requests of the legacy era that 2026-07-28 removed: a request in that era gets -32601 for
/// them, as from a server of that era (`initialize` is the legacy handshake and answered as such).
const REMOVED_IN_MODERN: [&str; 4] = [
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

impl Core {
    // ----- start-up -----

    /// The core of `entry`'s proxy, in the `Starting` phase: it answers the handshake from the
    /// lock; [`Core::serve`] takes it on once the server started.
    fn new(
        name: &str,
        entry: ServerEntry,
        taint: gate::TaintGate,
        reread_timeout: Duration,
        max_message: usize,
    ) -> Self {
        Self {
            taint,
            name: name.to_owned(),
            server_era: entry.era(),
            server_version: entry.protocol_version.clone(),
            entry,
            phase: Phase::Starting,
            client_legacy_caps: None,
            client_version: None,
            logs: logs::Logs::default(),
            batches: RefCell::new(Vec::new()),
            next_server_id: 0,
            pending: IdMap::default(),
            next_relay: 0,
            relayed: HashMap::new(),
            rounds: rounds::Rounds::default(),
            roots: roots::Roots::default(),
            streams: streams::Streams::default(),
            rereads: reread::Rereads {
                running: BTreeMap::new(),
                timeout: reread_timeout,
            },
            actions: RefCell::new(Vec::new()),
            scan: Scan::default(),
            drops: 0,
            banners: 0,
            max_message,
        }
    }

    /// The server started and spoke `version` of `era`, and its live surface was read: the
    /// surface is compared with the lock (definitional drift quarantines the server), and a
    /// 2026-07-28 server's list changes are followed. `next_id` is the first id of ours that
    /// the start-up left unused.
    fn serve(&mut self, live: &lockfile::Surface, era: Era, version: &str, next_id: u64) {
        self.server_era = era;
        self.server_version = version.to_owned();
        self.next_server_id = next_id;
        if self.phase == Phase::Starting {
            self.phase = Phase::Serving;
        }
        self.check_start(live);
        // A 2026-07-28 server announces changes only on a listen stream, and only for the kinds
        // whose capability has `listChanged` (mcp-server-time has none and refuses the stream).
        let announces = ["tools", "prompts", "resources"].iter().any(|k| {
            self.entry.capabilities[k]
                .get("listChanged")
                .and_then(Value::as_bool)
                == Some(true)
        });
        if self.server_era == Era::Modern && announces {
            self.open_listen();
        }
    }

    /// Where the proxy is in its life.
    #[cfg(test)]
    fn phase(&self) -> &Phase {
        &self.phase
    }

    /// Hands each queued action to `f`, in order.
    fn drain_actions(&mut self, mut f: impl FnMut(Action)) {
        let mut actions = self.actions.take();
        for a in actions.drain(..) {
            f(a);
        }
        // The buffer is kept, so that queueing allocates only when a burst outgrows it.
        *self.actions.get_mut() = actions;
    }

    /// Whether [`Core::on_tick`] has anything to time: an approval prompt, a re-read.
    fn wants_tick(&self) -> bool {
        self.taint.prompts_open() || !self.rereads.running.is_empty() || self.roots.any()
    }

    /// A second passed: unanswered approval prompts and late re-reads time out.
    fn on_tick(&mut self) {
        self.expire_approvals();
        self.expire_rereads();
        self.expire_roots();
    }

    /// The client closed its stdin: no prompt can be answered any more (each held call is
    /// refused), and the answers still in flight are all that is left to relay.
    fn client_left(&mut self) {
        let quarantined = self.quarantine_reason().map(str::to_owned);
        self.phase = Phase::Draining { quarantined };
        self.withdraw_prompts();
    }

    /// Whether a request of the client's waits for the server's answer.
    fn client_requests_pending(&self) -> bool {
        self.pending
            .values()
            .any(|p| matches!(p, Pending::Client { .. }))
    }

    fn check_start(&mut self, live: &lockfile::Surface) {
        match drift::compare(&self.entry, live) {
            Ok(d) => match d.class() {
                Class::Clean => {}
                Class::Informational => {
                    self.note("drift", json!({"class": "informational", "fields": d.fields.iter().map(|f| f.field).collect::<Vec<_>>()}));
                }
                Class::Definitional => self.quarantine_now(&d.summary()),
            },
            Err(e) => self.quarantine_now(&e.to_string()),
        }
    }

    fn quarantine_now(&mut self, what: &str) {
        if self.quarantined() {
            return;
        }
        self.push(Action::Quarantine(what.to_owned()));
        self.phase = match self.phase {
            Phase::Draining { .. } => Phase::Draining {
                quarantined: Some(what.to_owned()),
            },
            _ => Phase::Quarantined(what.to_owned()),
        };
    }

    /// Whether the server is quarantined.
    fn quarantined(&self) -> bool {
        self.quarantine_reason().is_some()
    }

    /// Why the server is quarantined, if it is.
    fn quarantine_reason(&self) -> Option<&str> {
        match &self.phase {
            Phase::Quarantined(why)
            | Phase::Draining {
                quarantined: Some(why),
            } => Some(why),
            _ => None,
        }
    }

    fn alloc_id(&mut self) -> u64 {
        let id = self.next_server_id;
        self.next_server_id += 1;
        id
    }

    // ----- sending -----

    fn send_client(&self, msg: Value) {
        let answers = msg.get("method").is_none().then(|| msg.get("id")).flatten();
        self.push_client(answers, framing::encode(&msg));
    }

    fn send_server(&self, msg: Value) {
        self.push(Action::ToServer(Out::bytes(framing::encode(&msg))));
    }

    /// Queues an action for the I/O loop.
    fn push(&self, action: Action) {
        self.actions.borrow_mut().push(action);
    }

    /// Queues an audit record.
    fn note(&self, event: &'static str, fields: Value) {
        self.push(Action::Audit { event, fields });
    }

    /// Queues the record of a call's answer.
    fn note_call(
        &self,
        method: String,
        item: String,
        outcome: CallOutcome,
        took: Duration,
        bytes: usize,
    ) {
        self.push(Action::AuditCall {
            method,
            item,
            outcome,
            took,
            bytes,
        });
    }

    /// Queues a warning for stderr.
    fn warn(&self, message: String) {
        self.push(Action::Warn(message));
    }

    fn reply(&self, id: &Value, result: Value) {
        self.send_client(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn reply_error(&self, id: &Value, code: i64, message: &str, data: Option<Value>) {
        let mut err = json!({"code": code, "message": message});
        if let Some(d) = data {
            err["data"] = d;
        }
        self.send_client(json!({"jsonrpc": "2.0", "id": id, "error": err}));
    }

    fn refuse(&self, id: &Value, method: &str, item: &str, code: i64, message: &str) {
        self.refuse_with(id, method, item, code, message, None);
    }

    /// [`Self::refuse`] with the error's `data`.
    fn refuse_with(
        &self,
        id: &Value,
        method: &str,
        item: &str,
        code: i64,
        message: &str,
        data: Option<Value>,
    ) {
        self.note(
            "refused",
            json!({"method": method, "item": item, "decision": "refuse", "reason": message}),
        );
        self.reply_error(id, code, message, data);
    }

    fn drop_junk(&mut self, from: &str, what: &str) {
        self.note_capped(json!({"from": from, "decision": "drop", "reason": what}));
    }

    /// A "refused" record a peer can cause without bound (junk, requests refused unrelayed):
    /// the first [`MAX_DROP_RECORDS`] of them are written, the rest counted.
    fn note_capped(&mut self, record: Value) {
        self.drops += 1;
        if self.drops <= MAX_DROP_RECORDS {
            self.note("refused", record);
        } else if self.drops == MAX_DROP_RECORDS + 1 {
            self.note("refused", json!({"decision": "drop", "reason": format!("more than {MAX_DROP_RECORDS} messages refused or dropped: further ones are not recorded")}));
        }
    }

    // ----- client side -----

    fn client_too_long(&mut self, n: usize, head: &[u8]) {
        self.drop_junk("client", &format!("message of {n} bytes over the limit"));
        let Head { id, method } = self.scan.head(head);
        let limit = self.max_message;
        if !method {
            // A response to a request the server sent through us: the server gets the error.
            let relayed = id
                .as_ref()
                .and_then(Value::as_str)
                .and_then(|k| self.relayed.remove(k));
            if let Some(Relayed::Input { round, .. }) = relayed {
                let message = format!(
                    "the client's answer of {n} bytes is over mcpsum's limit of {limit} bytes"
                );
                return self.fail_round(round, &message);
            }
            if let Some(Relayed::Server(server_id)) = relayed {
                let message = format!(
                    "the client's answer of {n} bytes is over mcpsum's limit of {limit} bytes"
                );
                return self
                    .send_server(json!({"jsonrpc": "2.0", "id": server_id, "error": {"code": codes::INTERNAL, "message": message}}));
            }
            if id.is_some() {
                return;
            }
        }
        self.reply_error(
            &id.unwrap_or(Value::Null),
            codes::INVALID_REQUEST,
            &format!(
                "message of {n} bytes is over mcpsum's limit of {limit} bytes (--max-message-bytes)"
            ),
            None,
        );
    }

    /// The general path for a client message: parsed whole into a `Value`.
    fn client_message(&mut self, line: &[u8]) {
        let msg = match crate::canonical::parse_strict_slice(line) {
            Ok(v) => v,
            Err(e) => {
                self.drop_junk("client", "invalid JSON");
                self.reply_error(
                    &Value::Null,
                    codes::PARSE,
                    &format!("parse error: {e}"),
                    None,
                );
                return;
            }
        };
        match msg {
            Value::Object(obj) => self.client_object(obj),
            Value::Array(items) => self.client_batch(items),
            _ => {
                self.drop_junk("client", "not a JSON-RPC object");
                self.reply_error(
                    &Value::Null,
                    codes::INVALID_REQUEST,
                    "a message must be a JSON-RPC object",
                    None,
                );
            }
        }
    }

    /// A client message that is one JSON-RPC object.
    fn client_object(&mut self, obj: Map<String, Value>) {
        let id = obj.get("id").cloned();
        let method = obj.get("method").and_then(Value::as_str).map(str::to_owned);
        if let Some(why) = envelope_problem(&obj) {
            self.drop_junk("client", why);
            // Answered as JSON-RPC says, with id null when its own is missing or unusable.
            let id = id.filter(valid_id).unwrap_or(Value::Null);
            return self.reply_error(&id, codes::INVALID_REQUEST, why, None);
        }
        let params = obj.get("params").cloned();
        match (method, id) {
            (Some(method), Some(id)) if !id.is_null() => self.client_request(&id, &method, params),
            (Some(method), _) => self.client_notification(&method, params),
            (None, Some(id)) => self.client_response(&id, &obj),
            (None, None) => self.drop_junk("client", "neither request, notification nor response"),
        }
    }

    fn client_request(&mut self, id: &Value, method: &str, params: Option<Value>) {
        // The retry that answers a legacy server's `roots/list` continues a call admitted before.
        if self.roots_retry(id, method, params.as_ref()) {
            return;
        }
        let parsed = params.clone();
        let call = Call {
            method,
            request: Request::parse(method, parsed.as_ref()),
            meta: parsed.as_ref().and_then(|p| p.get("_meta")),
            params: Params::Parsed(parsed.as_ref()),
        };
        let modern = call.modern();
        let admission = self.admit(&call);
        if !matches!(
            admission,
            Admission::Refuse(Refusal::Meta { .. } | Refusal::Removed(_))
        ) {
            self.note_client(method, params.as_ref());
        }
        let request = call.request.clone().ok();
        let item = request.as_ref().map(Request::item).unwrap_or_default();
        let (params, taints) = match admission {
            Admission::Refuse(r) => {
                return self.refuse_admission(id, method, item, r, modern);
            }
            Admission::Local => {
                return match request {
                    Some(Request::Initialize) => self.answer_initialize(id, params.as_ref()),
                    Some(Request::Discover) => self.answer_discover(id),
                    Some(Request::List(kind)) => {
                        self.answer_list(id, kind, params.as_ref(), modern)
                    }
                    _ => self.reply(id, json!({})),
                };
            }
            // Sinks on a tainted session wait for the person's approval (I6).
            Admission::Ask {
                mark,
                prompt,
                by,
                taint_after,
            } => match self.ask(id, method, params, (item, taint_after), &mark, &prompt, by) {
                gate::Gate::Forward(p) => (p, taint_after),
                gate::Gate::Handled => return,
            },
            Admission::Forward { taint_after } => (params, taint_after),
        };
        match request {
            Some(Request::Subscribe { uri, .. }) if self.server_era == Era::Modern => {
                // 2026-07-28 has no resources/subscribe: a listen stream stands for it.
                return self.subscribe_by_listen(id, method, uri.to_owned());
            }
            Some(Request::SetLevel { level }) if self.server_era == Era::Modern => {
                // 2026-07-28 has no setLevel: each request carries the level instead (admission
                // refused a level it does not know).
                if let Some(rank) = log_rank(level) {
                    self.logs.level = Some(LOG_LEVELS[rank]);
                }
                return self.reply(id, json!({}));
            }
            Some(Request::Listen) if self.server_era == Era::Legacy => {
                // A legacy server has resources/subscribe instead.
                return self.listen_by_subscribe(id, params.as_ref());
            }
            _ => {}
        }
        let item = item.to_owned();
        let retry = self.retry_for(method, params.as_ref(), modern);
        self.forward(id, method, params, modern, (item, taints), retry);
    }

    /// The admission of `call` ([`admission::admit`]) with this proxy's facts.
    fn admit(&mut self, call: &Call<'_>) -> Admission {
        let quarantined = self.quarantined();
        let (labels, store) = self.taint.parts();
        let facts = Facts {
            server: &self.name,
            entry: &self.entry,
            server_era: self.server_era,
            quarantined,
            labels,
            client_version: self.client_version.as_deref(),
            client_legacy_caps: self.client_legacy_caps.as_ref(),
        };
        admission::admit(call, &facts, store)
    }

    /// Carries out a refusal of [`admission::admit`].
    fn refuse_admission(
        &mut self,
        id: &Value,
        method: &str,
        item: &str,
        refusal: Refusal,
        modern: bool,
    ) {
        match refusal {
            Refusal::Meta {
                code,
                message,
                data,
            } => {
                self.note(
                    "refused",
                    json!({"method": method, "decision": "refuse", "reason": message}),
                );
                self.reply_error(id, code, &message, data);
            }
            Refusal::Removed(message) => {
                self.refuse(id, method, "", codes::METHOD_NOT_FOUND, &message);
            }
            Refusal::Quarantined => self.refuse_quarantined(id, method),
            Refusal::Params(message) => {
                self.refuse(id, method, "", codes::INVALID_PARAMS, &message);
            }
            Refusal::Item { code, message } => {
                // To the client an unlocked resource does not exist: the not-found error of
                // 2026-07-28 names the URI in `data.uri`, which legacy clients may read too.
                let data = matches!(
                    method,
                    "resources/read" | "resources/subscribe" | "resources/unsubscribe"
                )
                .then(|| json!({ "uri": item }));
                self.refuse_with(id, method, item, code, &message, data);
            }
            Refusal::Method { code, message } => self.refuse(id, method, "", code, &message),
            Refusal::Gate(gated) => self.refuse_gated(id, method, item, gated, modern),
        }
    }

    /// What to keep of a legacy client's request to a 2026-07-28 server, which may answer it
    /// with `input_required` (only `tools/call`, `prompts/get` and `resources/read` can).
    fn retry_for(
        &self,
        method: &str,
        params: Option<&Value>,
        modern_client: bool,
    ) -> Option<Box<Retry>> {
        let bridged = self.server_era == Era::Modern
            && !modern_client
            && matches!(method, "tools/call" | "prompts/get" | "resources/read");
        bridged.then(|| {
            Box::new(Retry {
                params: params.cloned().unwrap_or_else(|| json!({})),
                rounds: 0,
            })
        })
    }

    /// Why a server's question to the client was not passed on.
    fn undeclared(&self, method: &str) -> String {
        format!(
            "server `{}` asked for `{method}`, which the client did not declare; the call cannot complete with this client",
            self.name
        )
    }

    fn refuse_quarantined(&self, id: &Value, method: &str) {
        let what = self.quarantine_reason().unwrap_or_default();
        let message = format!(
            "mcpsum: server `{}` is quarantined because its surface drifted from mcp.lock ({what}); review the change with `mcpsum verify --name {}`",
            self.name, self.name
        );
        self.note(
            "refused",
            json!({"method": method, "decision": "refuse", "reason": "quarantined"}),
        );
        let data = json!({"server": self.name, "drift": what, "review": format!("mcpsum verify --name {}", self.name)});
        self.reply_error(id, codes::QUARANTINED, &message, Some(data));
    }

    fn uri_locked(&self, u: &str) -> bool {
        admission::uri_locked(&self.entry, u)
    }

    fn forward(
        &mut self,
        client_id: &Value,
        method: &str,
        params: Option<Value>,
        modern_client: bool,
        (item, taints): (String, bool),
        retry: Option<Box<Retry>>,
    ) {
        // Taken whatever happens next: it belongs to this call only.
        let approved = self.taint.approved_call.take().map(Box::new);
        if self.pending.len() >= MAX_IN_FLIGHT {
            return self.refuse(
                client_id,
                method,
                &item,
                codes::INTERNAL,
                "too many requests in flight; retry later",
            );
        }
        let mut params = params.unwrap_or_else(|| json!({}));
        if method == "subscriptions/listen" {
            // The client's view of the lists is the lock: it gets no list_changed, and it can
            // follow only locked resources (as with a legacy server's resources/subscribe).
            if let Some(n) = params
                .get_mut("notifications")
                .and_then(Value::as_object_mut)
            {
                for k in [
                    "toolsListChanged",
                    "promptsListChanged",
                    "resourcesListChanged",
                ] {
                    n.remove(k);
                }
                if let Some(uris) = n
                    .get_mut("resourceSubscriptions")
                    .and_then(Value::as_array_mut)
                {
                    uris.retain(|u| u.as_str().is_some_and(|u| self.uri_locked(u)));
                }
            }
        }
        if method == "tools/call"
            && let Some(p) = params.as_object_mut()
        {
            // Not advertised (see `served_capabilities`): the call runs as a plain call.
            p.remove("task");
        }
        let client_caps = self.client_caps_for_rounds(modern_client, params.get("_meta"));
        let client_roots = self.client_roots(method, modern_client, params.get("_meta"));
        let wants_logs = asks_logs(params.get("_meta")).filter(|_| modern_client);
        let params = self.to_server_params(params, modern_client);
        let sid = self.alloc_id();
        if let Some(rank) = wants_logs {
            self.logs.requests.insert(sid, rank);
        }
        if method == "subscriptions/listen" {
            self.streams.ids.insert(sid, client_id.clone());
        }
        self.pending.insert(
            sid,
            Pending::Client {
                client_id: client_id.clone(),
                method: method.to_owned(),
                item,
                modern_client,
                started: Instant::now(),
                retry,
                client_caps,
                approved,
                taints,
                client_roots,
            },
        );
        self.send_server(json!({"jsonrpc": "2.0", "id": sid, "method": method, "params": params}));
    }

    /// What [`Pending::Client::client_roots`] keeps for a request `method` with this `_meta`:
    /// whether a legacy server's `roots/list` during it can be asked of the client (a request
    /// a 2026-07-28 server could answer with `input_required`, of a client that declared roots).
    fn client_roots(&self, method: &str, modern_client: bool, meta: Option<&Value>) -> bool {
        modern_client
            && self.server_era == Era::Legacy
            && matches!(method, "tools/call" | "prompts/get" | "resources/read")
            && meta
                .and_then(|m| m.get(crate::mcp::META_CAPABILITIES))
                .and_then(|c| c.get("roots"))
                .is_some()
    }

    /// What [`Pending::Client::client_caps`] keeps for a request with this `_meta`.
    fn client_caps_for_rounds(
        &self,
        modern_client: bool,
        meta: Option<&Value>,
    ) -> Option<Box<Value>> {
        (modern_client && self.server_era == Era::Modern).then(|| {
            Box::new(
                meta.and_then(|m| m.get(crate::mcp::META_CAPABILITIES))
                    .cloned()
                    .unwrap_or_else(|| json!({})),
            )
        })
    }

    /// Request params in the server's era.
    fn to_server_params(&self, params: Value, modern_client: bool) -> Value {
        match self.server_era {
            Era::Legacy => strip_modern_meta(params),
            Era::Modern => {
                let caps = if modern_client {
                    let mut caps = params
                        .get("_meta")
                        .and_then(|m| m.get(crate::mcp::META_CAPABILITIES))
                        .cloned()
                        .unwrap_or_else(|| json!({}));
                    without_tasks(&mut caps);
                    caps
                } else {
                    // What the legacy client declared and mcpsum can relay as real requests.
                    let mut caps = Map::new();
                    if let Some(declared) = &self.client_legacy_caps {
                        for k in ["elicitation", "sampling", "roots"] {
                            if let Some(v) = declared.get(k) {
                                let v = if k == "roots" { json!({}) } else { v.clone() };
                                caps.insert(k.to_owned(), v);
                            }
                        }
                    }
                    Value::Object(caps)
                };
                let mut params = with_modern_meta(params, &self.server_version, caps);
                if !modern_client
                    && let Some(level) = self.logs.level
                    && let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut)
                {
                    meta.insert(META_LOG_LEVEL.into(), level.into());
                }
                params
            }
        }
    }

    /// The locked capabilities minus tasks: mcpsum does not relay `tasks/*` (a task's payload
    /// would bypass the checks on results), so it must not advertise them.
    fn served_capabilities(&self) -> Value {
        let mut caps = self.entry.capabilities.clone();
        without_tasks(&mut caps);
        caps
    }

    fn answer_initialize(&mut self, id: &Value, params: Option<&Value>) {
        let asked = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .unwrap_or(LATEST_LEGACY);
        let version = if LEGACY_VERSIONS.contains(&asked) {
            asked
        } else {
            LATEST_LEGACY
        };
        self.client_version = Some(version.to_owned());
        self.client_legacy_caps = Some(
            params
                .and_then(|p| p.get("capabilities"))
                .cloned()
                .unwrap_or_else(|| json!({})),
        );
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": self.served_capabilities(),
            "serverInfo": self.entry.server_info,
        });
        if let Some(i) = &self.entry.instructions {
            result["instructions"] = Value::String(i.clone());
        }
        self.reply(id, result);
    }

    /// The discover result, from the lock (its `_meta` was checked with every 2026-07-28 request's).
    fn answer_discover(&mut self, id: &Value) {
        let mut result = json!({
            "resultType": "complete",
            "supportedVersions": [MODERN_VERSION],
            "capabilities": self.served_capabilities(),
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {META_SERVER_INFO: self.entry.server_info},
        });
        if let Some(i) = &self.entry.instructions {
            result["instructions"] = Value::String(i.clone());
        }
        self.reply(id, result);
    }

    fn answer_list(&mut self, id: &Value, kind: Kind, params: Option<&Value>, modern: bool) {
        if self.entry.capabilities.get(kind.capability()).is_none() {
            return self.refuse(
                id,
                kind.list_method(),
                "",
                codes::METHOD_NOT_FOUND,
                &format!("server `{}` offers no {}", self.name, kind.plural()),
            );
        }
        let items = self.entry.items(kind);
        let offset = match params.and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => 0,
            Some(Value::String(c)) => match c
                .strip_prefix("mcpsum-page-")
                .and_then(|n| n.parse::<usize>().ok())
            {
                Some(n) if n <= items.len() => n,
                _ => {
                    return self.reply_error(id, codes::INVALID_PARAMS, "invalid cursor", None);
                }
            },
            Some(_) => {
                return self.reply_error(id, codes::INVALID_PARAMS, "invalid cursor", None);
            }
        };
        let end = (offset + PAGE_SIZE).min(items.len());
        let mut result = Map::new();
        result.insert(
            kind.field().into(),
            Value::Array(items[offset..end].to_vec()),
        );
        if end < items.len() {
            result.insert(
                "nextCursor".into(),
                Value::String(format!("mcpsum-page-{end}")),
            );
        }
        if modern {
            result.insert("resultType".into(), json!("complete"));
            result.insert("ttlMs".into(), json!(0));
            result.insert("cacheScope".into(), json!("private"));
        }
        self.reply(id, Value::Object(result));
    }

    fn client_notification(&mut self, method: &str, params: Option<Value>) {
        match method {
            "notifications/initialized" => {
                // The server started before this client came and asked mcpsum for roots then (it
                // got none). A client that declared roots has its own: tell the server they
                // changed, so that it asks again and the question reaches the client.
                let roots = self
                    .client_legacy_caps
                    .as_ref()
                    .is_some_and(|c| c.get("roots").is_some());
                if roots && self.server_era == Era::Legacy && !self.quarantined() {
                    self.send_server(
                        json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
                    );
                }
            }
            "notifications/cancelled" => {
                let rid = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .cloned()
                    .unwrap_or(Value::Null);
                self.batch_cancelled(&rid);
                if self.cancel_held(&rid) || self.end_legacy_stream(&rid) {
                    return;
                }
                let round = self
                    .rounds
                    .open
                    .iter()
                    .find_map(|(n, r)| (r.client_id == rid).then_some(*n));
                if let Some(n) = round {
                    // Mid input round: nothing is pending at the server; forget the round.
                    if let Some(r) = self.rounds.open.remove(&n) {
                        self.cancel_questions(n, "the call was cancelled");
                        self.note(
                            "call",
                            json!({"method": r.method, "item": r.item, "decision": "allow", "ok": false, "outcome": "error", "reason": "cancelled by the client", "duration_ms": r.started.elapsed().as_millis() as u64}),
                        );
                    }
                    return;
                }
                let sid = self.pending.iter().find_map(|(sid, p)| match p {
                    Pending::Client { client_id, .. } if *client_id == rid => Some(*sid),
                    _ => None,
                });
                if let Some(sid) = sid {
                    // The client ignores a late answer; forgetting the request keeps a client
                    // that cancels a lot from filling the in-flight table.
                    if let Some(Pending::Client {
                        method,
                        item,
                        started,
                        ..
                    }) = self.pending.remove(&sid)
                    {
                        self.streams.ids.remove(&sid);
                        self.note(
                            "call",
                            json!({"method": method, "item": item, "decision": "allow", "ok": false, "outcome": "error", "reason": "cancelled by the client", "duration_ms": started.elapsed().as_millis() as u64}),
                        );
                    }
                    let mut p = params.unwrap_or_else(|| json!({}));
                    p["requestId"] = json!(sid);
                    let p = self.to_server_params(p, false);
                    self.send_server(json!({"jsonrpc": "2.0", "method": method, "params": if self.server_era == Era::Legacy { strip_modern_meta(p) } else { p }}));
                }
            }
            "notifications/progress" | "notifications/roots/list_changed"
                if self.server_era == Era::Legacy =>
            {
                let mut msg = json!({"jsonrpc": "2.0", "method": method});
                if let Some(p) = params {
                    msg["params"] = p;
                }
                self.send_server(msg);
            }
            _ => self.drop_junk("client", &format!("notification `{method}` not forwarded")),
        }
    }

    fn client_response(&mut self, id: &Value, obj: &Map<String, Value>) {
        if self.approval_answer(id, obj) {
            return;
        }
        let key = id.as_str().map(str::to_owned).unwrap_or_default();
        let server_id = match self.relayed.remove(&key) {
            None => return self.drop_junk("client", "response to an unknown id"),
            Some(Relayed::Input { round, key }) => {
                return self.round_answer(round, key, obj);
            }
            Some(Relayed::Server(server_id)) => server_id,
        };
        let mut msg = json!({"jsonrpc": "2.0", "id": server_id});
        if let Some(r) = obj.get("result") {
            msg["result"] = r.clone();
        } else {
            msg["error"] = obj
                .get("error")
                .cloned()
                .unwrap_or_else(|| json!({"code": codes::INTERNAL, "message": "no result"}));
        }
        self.send_server(msg);
    }

    // ----- server side -----

    fn server_too_long(&mut self, n: usize, head: &[u8]) {
        self.drop_junk("server", &format!("message of {n} bytes over the limit"));
        let limit = self.max_message;
        let Head { id, method } = self.scan.head(head);
        let Some(id) = id else { return };
        if method {
            // A request of the server's: it gets the error, nobody else sees it.
            let message = format!("message of {n} bytes is over mcpsum's limit of {limit} bytes");
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INVALID_REQUEST, "message": message}}));
        }
        let Some(pending) = id.as_u64().and_then(|sid| self.pending.remove(&sid)) else {
            return;
        };
        let sid = id.as_u64().unwrap_or_default();
        match pending {
            Pending::Listen | Pending::Internal => {}
            Pending::Subscription { uri, client_id } => {
                self.subscription_failed(&uri, client_id, "an answer over the size limit");
            }
            Pending::Reread(kind) => {
                self.rereads.running.remove(&kind);
                self.quarantine_now(&format!(
                    "re-reading {} after list_changed failed: an answer of {n} bytes is over the limit of {limit} bytes",
                    kind.plural()
                ));
            }
            Pending::Client {
                client_id,
                method,
                item,
                started,
                ..
            } => {
                self.streams.ids.remove(&sid);
                self.note(
                    "call",
                    json!({"method": method, "item": item, "decision": "allow", "ok": false, "outcome": "error", "reason": "answer over the size limit", "duration_ms": started.elapsed().as_millis() as u64, "bytes": n}),
                );
                let message = format!(
                    "the answer of server `{}` ({n} bytes) is over mcpsum's limit of {limit} bytes (`mcpsum proxy --max-message-bytes`)",
                    self.name
                );
                self.reply_error(&client_id, codes::INTERNAL, &message, None);
            }
        }
    }

    /// The general path for a server message: parsed whole into a `Value`.
    fn server_message(&mut self, line: &[u8]) {
        match crate::canonical::parse_strict_slice(line) {
            Ok(Value::Object(obj)) => self.server_object(obj),
            Ok(Value::Array(items))
                if self.server_version == BATCH_VERSION && !items.is_empty() =>
            {
                for item in items {
                    match item {
                        Value::Object(obj) => self.server_object(obj),
                        _ => self.drop_junk("server", "a batch member that is not an object"),
                    }
                }
            }
            Ok(Value::Array(_)) => {
                self.drop_junk("server", "a batch outside protocol version 2025-03-26")
            }
            Ok(_) => self.drop_junk("server", "JSON that is not an object"),
            Err(_) => self.server_banner(line),
        }
    }

    /// A line of the server's stdout that is not JSON (a banner, a stray `print`): never
    /// forwarded, recorded, and warned of on stderr up to [`MAX_BANNER_WARNINGS`] times.
    fn server_banner(&mut self, line: &[u8]) {
        self.banners += 1;
        self.drop_junk(
            "server",
            &format!("a line that is not JSON ({} bytes), skipped", line.len()),
        );
        if self.banners <= MAX_BANNER_WARNINGS {
            let text = String::from_utf8_lossy(line);
            let mut short: String = text.chars().take(120).collect();
            if short.len() < text.len() {
                short.push('…');
            }
            self.warn(format!(
                "server `{}` wrote a line that is not JSON on its stdout; skipped it: {short:?}",
                crate::text::sanitize_line(&self.name)
            ));
        }
        if self.banners == MAX_BANNER_WARNINGS {
            self.warn(format!(
                "server `{}`: further lines that are not JSON are skipped without a warning",
                crate::text::sanitize_line(&self.name)
            ));
        }
    }

    /// A server message that is one JSON-RPC object.
    fn server_object(&mut self, obj: Map<String, Value>) {
        let method = obj.get("method").and_then(Value::as_str).map(str::to_owned);
        match (method, obj.get("id").cloned()) {
            (Some(m), Some(id)) if !id.is_null() => {
                self.server_request(&id, &m, obj.get("params").cloned())
            }
            (Some(m), _) => self.server_notification(&m, obj.get("params").cloned()),
            (None, Some(id)) => self.server_response(&id, obj),
            (None, None) => self.drop_junk("server", "neither request, notification nor response"),
        }
    }

    fn server_response(&mut self, id: &Value, obj: Map<String, Value>) {
        let Some(sid) = id.as_u64() else {
            return self.drop_junk("server", "response with an id mcpsum never sent");
        };
        // The answer to a call that waits for the client's roots goes to the client's retry.
        let obj = match self.roots.any() {
            true => match self.roots.hold(sid, obj) {
                Some(obj) => obj,
                None => return,
            },
            false => obj,
        };
        let Some(pending) = self.pending.remove(&sid) else {
            return self.drop_junk("server", "response to an unknown id");
        };
        match pending {
            Pending::Listen => self.listen_ended(obj.contains_key("result")),
            Pending::Internal => {}
            Pending::Subscription { uri, client_id } => {
                let why = obj
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the server ended the stream")
                    .to_owned();
                self.subscription_failed(&uri, client_id, &why);
            }
            Pending::Reread(kind) => self.reread_page(kind, &obj),
            Pending::Client {
                client_id,
                method,
                item,
                modern_client,
                started,
                retry,
                client_caps,
                approved,
                taints,
                ..
            } => {
                let stream = self.streams.ids.remove(&sid);
                let input_required = obj
                    .get("result")
                    .and_then(|r| r.get("resultType"))
                    .and_then(Value::as_str)
                    == Some("input_required");
                if input_required && self.quarantined() {
                    // Questions of a quarantined server reach no one.
                    return self.refuse_quarantined(&client_id, &method);
                }
                if input_required
                    && let Some(caps) = client_caps
                    && let Some(asked) = undeclared_question(
                        &caps,
                        obj.get("result").and_then(|r| r.get("inputRequests")),
                    )
                {
                    self.note("refused", json!({"from": "server", "method": asked, "decision": "refuse", "reason": "the client did not declare this capability"}));
                    let msg = self.undeclared(&asked);
                    return self.reply_error(&client_id, codes::INTERNAL, &msg, None);
                }
                if input_required
                    && let Some(retry) = retry
                    && let Some(result) = obj.get("result")
                {
                    let round = Round {
                        client_id,
                        method,
                        item,
                        taints,
                        started,
                        retry,
                        request_state: result.get("requestState").cloned(),
                        answers: Map::new(),
                        outstanding: 0,
                    };
                    return self.start_round(round, result.get("inputRequests"));
                }
                let mut out = json!({"jsonrpc": "2.0", "id": client_id});
                let outcome = if obj.contains_key("result") && obj.contains_key("error") {
                    // JSON-RPC forbids both: neither is relayed, but a source's text may be in
                    // either, and the client's model may see the error's.
                    let mut message = format!(
                        "server `{}` answered with both `result` and `error`, which JSON-RPC forbids; nothing of it is relayed (hint: report it to the server's authors)",
                        self.name
                    );
                    if let Err(why) = self.after_result(&method, &item, taints) {
                        message = why;
                    }
                    out["error"] = json!({"code": codes::INTERNAL, "message": message});
                    CallOutcome::Error
                } else if let Some(mut result) = obj.get("result").cloned() {
                    if input_required
                        && modern_client
                        && let Some(args) = approved
                        && let Some(r) = result.as_object_mut()
                    {
                        // The approved call's server asks questions of its own: its retry
                        // carries the approval on, and the server's state inside mcpsum's.
                        let state = r
                            .get("requestState")
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                        let token = self.taint.continuation(&self.name, &item, &args, state);
                        r.insert("requestState".into(), Value::String(token));
                    }
                    if let Some(r) = self.translate_result(&mut result, modern_client, &method) {
                        out["error"] = r;
                        CallOutcome::Error
                    } else {
                        // The end of a client's listen stream names the client's id.
                        if stream.is_some()
                            && let Some(meta) =
                                result.get_mut("_meta").and_then(Value::as_object_mut)
                            && meta.contains_key(META_SUBSCRIPTION)
                        {
                            meta.insert(META_SUBSCRIPTION.into(), client_id.clone());
                        }
                        // A source's result reaches the client: the session is tainted first.
                        match self.after_result(&method, &item, taints) {
                            Ok(()) => {
                                let outcome = result_outcome(&method, &result);
                                out["result"] = result;
                                outcome
                            }
                            Err(why) => {
                                out["error"] = json!({"code": codes::INTERNAL, "message": why});
                                CallOutcome::Error
                            }
                        }
                    }
                } else if let Some(error) = obj.get("error") {
                    // A source's error is its answer too: its message and data reach the model
                    // as the tool's output, so the session is tainted first.
                    match self.after_result(&method, &item, taints) {
                        Ok(()) => out["error"] = error.clone(),
                        Err(why) => out["error"] = json!({"code": codes::INTERNAL, "message": why}),
                    }
                    CallOutcome::Error
                } else {
                    out["error"] = json!({"code": codes::INTERNAL, "message": "the server answered without result or error"});
                    CallOutcome::Error
                };
                let bytes = framing::encode(&out);
                self.note_call(method, item, outcome, started.elapsed(), bytes.len());
                self.push_client(Some(&client_id), bytes);
            }
        }
    }

    /// Adapts a result to the client's era; `Some(error)` when it cannot be relayed.
    fn translate_result(
        &self,
        result: &mut Value,
        modern_client: bool,
        method: &str,
    ) -> Option<Value> {
        let obj = result.as_object_mut()?;
        if let Some(meta) = obj.get_mut("_meta").and_then(Value::as_object_mut)
            && meta.contains_key(META_SERVER_INFO)
        {
            meta.insert(META_SERVER_INFO.into(), self.entry.server_info.clone());
        }
        match (self.server_era, modern_client) {
            (Era::Legacy, true) => {
                obj.entry("resultType").or_insert_with(|| json!("complete"));
                if method == "resources/read" {
                    // Required on a complete read (2026-07-28); as for mcpsum's own lists:
                    // stale at once, and for this client only.
                    obj.entry("ttlMs").or_insert_with(|| json!(0));
                    obj.entry("cacheScope").or_insert_with(|| json!("private"));
                }
            }
            (Era::Modern, false) => {
                if obj
                    .get("resultType")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t != "complete")
                {
                    return Some(
                        json!({"code": codes::INTERNAL, "message": "the server asked for more input (2026-07-28 input_required), which mcpsum cannot relay to a client of an earlier protocol version"}),
                    );
                }
                for k in ["resultType", "ttlMs", "cacheScope"] {
                    obj.remove(k);
                }
            }
            _ => {}
        }
        None
    }

    fn server_request(&mut self, id: &Value, method: &str, params: Option<Value>) {
        if method == "ping" {
            return self.send_server(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
        }
        if self.quarantined() {
            // A quarantined server reaches neither the client nor the model.
            self.note_capped(json!({"from": "server", "method": method, "decision": "refuse", "reason": "quarantined"}));
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::QUARANTINED, "message": "the server is quarantined: its surface drifted from mcp.lock"}}));
        }
        let declared = self
            .client_legacy_caps
            .as_ref()
            .is_some_and(|c| client_accepts(c, method, params.as_ref()));
        if !declared && method == "roots/list" && self.roots_by_input(id) {
            return;
        }
        if !declared && method == "roots/list" {
            // mcpsum declares `roots` to every server, so the question gets an answer: no roots
            // of the client's, and the server keeps serving what its command line gave it.
            return self.send_server(json!({"jsonrpc": "2.0", "id": id, "result": {"roots": []}}));
        }
        if !declared {
            self.note_capped(json!({"from": "server", "method": method, "decision": "refuse", "reason": "the client did not declare this capability"}));
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::METHOD_NOT_FOUND, "message": format!("the client does not accept `{method}`")}}));
        }
        // Its text reaches the client (a sampling request goes to the model): the session is
        // tainted first, or the request is not relayed.
        if method != "roots/list"
            && let Err(why) = self.before_server_request(method)
        {
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INTERNAL, "message": why}}));
        }
        let ours = format!("mcpsum-{}", self.next_relay);
        self.next_relay += 1;
        if self.relayed.len() >= MAX_IN_FLIGHT {
            return self.send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INTERNAL, "message": "too many requests in flight"}}));
        }
        self.relayed
            .insert(ours.clone(), Relayed::Server(id.clone()));
        let mut msg = json!({"jsonrpc": "2.0", "id": ours, "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send_client(msg);
    }

    fn server_notification(&mut self, method: &str, params: Option<Value>) {
        let sub = params
            .as_ref()
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(META_SUBSCRIPTION))
            .and_then(Value::as_u64);
        if method == "notifications/cancelled"
            && let Some(rid) = params
                .as_ref()
                .and_then(|p| p.get("requestId"))
                .and_then(Value::as_u64)
        {
            // 2026-07-28: the server ends a listen stream, ours or a client's.
            if matches!(self.pending.get(&rid), Some(Pending::Listen)) {
                self.pending.remove(&rid);
                return self.listen_ended(true);
            }
            if let Some(Pending::Subscription { uri, client_id }) = self.pending.remove(&rid) {
                return self.subscription_failed(&uri, client_id, "the server ended the stream");
            }
            if let Some(client_id) = self.streams.ids.remove(&rid) {
                self.pending.remove(&rid);
                let mut p = params.unwrap_or_else(|| json!({}));
                p["requestId"] = client_id.clone();
                if p.get("_meta")
                    .and_then(|m| m.get(META_SUBSCRIPTION))
                    .is_some()
                {
                    p["_meta"][META_SUBSCRIPTION] = client_id;
                }
                return self.send_client(json!({"jsonrpc": "2.0", "method": method, "params": p}));
            }
        }
        if self.quarantined() {
            // Nothing more of a quarantined server reaches the client (its streams' ends above
            // are mcpsum's own bookkeeping).
            return;
        }
        let ours = sub.is_some_and(|s| matches!(self.pending.get(&s), Some(Pending::Listen)));
        let list_kind = match method {
            "notifications/tools/list_changed" => Some(vec![Kind::Tool]),
            "notifications/prompts/list_changed" => Some(vec![Kind::Prompt]),
            "notifications/resources/list_changed" => {
                Some(vec![Kind::Resource, Kind::ResourceTemplate])
            }
            _ => None,
        };
        if let Some(kinds) = list_kind {
            // Never passed on: the client's view is the lock. Re-read and compare instead.
            for k in kinds {
                self.start_reread(k);
            }
            return;
        }
        if ours {
            return;
        }
        if let Some(s) = sub
            && let Some(Pending::Subscription { client_id, .. }) = self.pending.get_mut(&s)
        {
            // A legacy client's subscription: acknowledged means subscribed; updates go to the
            // client without the stream's tag, as legacy ones do.
            match method {
                "notifications/subscriptions/acknowledged" => {
                    if let Some(id) = client_id.take() {
                        self.reply(&id, json!({}));
                    }
                }
                "notifications/resources/updated" => {
                    let mut p = params.unwrap_or_else(|| json!({}));
                    if let Some(meta) = p.get_mut("_meta").and_then(Value::as_object_mut) {
                        meta.remove(META_SUBSCRIPTION);
                        if meta.is_empty()
                            && let Some(o) = p.as_object_mut()
                        {
                            o.remove("_meta");
                        }
                    }
                    self.send_client(json!({"jsonrpc": "2.0", "method": method, "params": p}));
                }
                _ => self.drop_junk("server", &format!("notification `{method}` not forwarded")),
            }
            return;
        }
        if method == "notifications/resources/updated"
            && self.server_era == Era::Legacy
            && !self.streams.legacy.is_empty()
        {
            // For a 2026-07-28 client's listen streams: tagged with each stream's id.
            let uri = params
                .as_ref()
                .and_then(|p| p.get("uri"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let tagged: Vec<Value> = self
                .streams
                .legacy
                .iter()
                .filter(|(_, uris)| {
                    // The URI itself or a sub-resource of it.
                    uris.iter().any(|u| {
                        uri.strip_prefix(u.as_str())
                            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                    })
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in tagged {
                let mut p = params.clone().unwrap_or_else(|| json!({}));
                p["_meta"][META_SUBSCRIPTION] = id;
                self.send_client(json!({"jsonrpc": "2.0", "method": method, "params": p}));
            }
            if self.client_legacy_caps.is_none() {
                return;
            }
        }
        let mut params = params;
        match method {
            "notifications/cancelled" => {
                // The server cancels a request it sent to the client: use our id for it.
                let rid = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let Some(our) = self.relayed.iter().find_map(|(k, v)| match v {
                    Relayed::Server(v) if *v == rid => Some(k.clone()),
                    _ => None,
                }) else {
                    return;
                };
                self.relayed.remove(&our);
                if let Some(p) = params.as_mut() {
                    p["requestId"] = json!(our);
                }
            }
            "notifications/message"
                if !self.client_wants_logs(
                    params
                        .as_ref()
                        .and_then(|p| p.get("level"))
                        .and_then(Value::as_str),
                ) =>
            {
                return;
            }
            "notifications/progress"
            | "notifications/message"
            | "notifications/resources/updated"
            | "notifications/elicitation/complete"
            | "notifications/tasks/status"
            | "notifications/subscriptions/acknowledged" => {}
            _ => {
                return self.drop_junk("server", &format!("notification `{method}` not forwarded"));
            }
        }
        if let (Some(s), Some(p)) = (sub, params.as_mut()) {
            match self.streams.ids.get(&s) {
                Some(client_id) => p["_meta"][META_SUBSCRIPTION] = client_id.clone(),
                None => return,
            }
        }
        // A log or progress message during a source call may carry the source's text.
        if matches!(method, "notifications/message" | "notifications/progress")
            && self.before_server_notification(method).is_err()
        {
            return;
        }
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send_client(msg);
    }

    /// Answers every request still in flight (and every input round) with an error: `why`.
    fn fail_in_flight(&mut self, why: &str) {
        let rounds: Vec<u64> = self.rounds.open.keys().copied().collect();
        for n in rounds {
            self.fail_round(n, why);
        }
        // A call that waits for the client's roots has answered the client already.
        let parked = self.roots.clear();
        let pending: Vec<Pending> = self
            .pending
            .drain()
            .filter(|(sid, _)| !parked.contains(sid))
            .map(|(_, p)| p)
            .collect();
        for p in pending {
            let (client_id, method, item) = match p {
                Pending::Client {
                    client_id,
                    method,
                    item,
                    ..
                } => (client_id, method, item),
                Pending::Subscription {
                    uri,
                    client_id: Some(client_id),
                } => (client_id, "resources/subscribe".to_owned(), uri),
                _ => continue,
            };
            self.note(
                "refused",
                json!({"method": method, "item": item, "decision": "fail", "reason": why}),
            );
            self.reply_error(&client_id, codes::INTERNAL, why, None);
        }
    }
}

/// Removes tasks from a capability set, either side's: mcpsum relays no `tasks/*`.
fn without_tasks(caps: &mut Value) {
    if let Some(c) = caps.as_object_mut() {
        c.remove("tasks");
        if let Some(ext) = c.get_mut("extensions").and_then(Value::as_object_mut) {
            ext.remove("io.modelcontextprotocol/tasks");
        }
    }
}

/// Removes the 2026-07-28 `_meta` keys a legacy server must not see; other keys
/// (`progressToken`, vendor keys) pass unchanged.
fn strip_modern_meta(mut params: Value) -> Value {
    if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
        if meta.is_empty()
            && let Some(p) = params.as_object_mut()
        {
            p.remove("_meta");
        }
    }
    params
}

/// Whether a client that declared `caps` accepts a server's request `method` with `params`:
/// sampling, roots, and elicitation in the mode asked for (`form` unless `url`; an empty
/// `elicitation` object means form only).
fn client_accepts(caps: &Value, method: &str, params: Option<&Value>) -> bool {
    match method {
        "sampling/createMessage" => caps.get("sampling").is_some(),
        "roots/list" => caps.get("roots").is_some(),
        "elicitation/create" => {
            let Some(e) = caps.get("elicitation") else {
                return false;
            };
            let url = params.and_then(|p| p.get("mode")).and_then(Value::as_str) == Some("url");
            if url {
                e.get("url").is_some()
            } else {
                e.get("form").is_some() || e.as_object().is_some_and(Map::is_empty)
            }
        }
        _ => false,
    }
}

/// The first question of an `inputRequests` map that a client with `caps` does not accept.
fn undeclared_question(caps: &Value, requests: Option<&Value>) -> Option<String> {
    let requests = requests?.as_object()?;
    requests.values().find_map(|q| {
        let method = q.get("method").and_then(Value::as_str).unwrap_or_default();
        (!client_accepts(caps, method, q.get("params"))).then(|| method.to_owned())
    })
}

/// How a relayed result ends its call: a `tools/call` result with `isError: true` is the
/// tool's own failure (MCP reports tool errors in the result, not as JSON-RPC errors), and
/// the audit log says so rather than `ok`.
fn result_outcome(method: &str, result: &Value) -> CallOutcome {
    if method == "tools/call" && result.get("isError") == Some(&Value::Bool(true)) {
        CallOutcome::ToolError
    } else {
        CallOutcome::Ok
    }
}
