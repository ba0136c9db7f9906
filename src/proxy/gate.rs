//! The taint gate (I6) of the proxy: sources taint the client session, sinks need the person's
//! approval while it is tainted, asked through the client (`elicitation/create` for a legacy
//! client, an `input_required` result for a 2026-07-28 client).
//!
//! A sink call on a clean session costs one `stat` of the session file. A tool that is both a
//! source and a sink is checked first and taints after its result reaches the client.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::Core;
use super::admission::{Ask, Gated, INPUT_KEY, TaintState};
use crate::error::{Error, Result};
use crate::lockfile::ServerEntry;
use crate::mcp::{META_CLIENT_INFO, codes};
use crate::session::Session;
use crate::taint::{self, Approver, Call, Labels, SessionStore, TaintMark, quoted_name};

/// How long a legacy client's person has to answer the prompt.
const LEGACY_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);
/// Our ids for approval prompts on the client link start with this.
const APPROVAL_PREFIX: &str = "mcpsum-approval-";
/// Calls held for an answer, at most.
const MAX_HELD: usize = 64;

/// The gate's state in one proxy.
pub(super) struct TaintGate {
    labels: Labels,
    store: Option<SessionStore>,
    approver: Approver,
    held: HashMap<String, Held>,
    next: u64,
    client_known: bool,
    /// The client's name and version, noted before the session's state was opened.
    client: Option<String>,
    /// The arguments of the approved call about to be forwarded (a 2026-07-28 client's): the
    /// server's own questions on it may be answered without asking again.
    pub(super) approved_call: Option<crate::lockfile::Sha256Digest>,
}

/// A legacy client's sink call, held until the person answers.
struct Held {
    client_id: Value,
    method: String,
    params: Option<Value>,
    item: String,
    /// As [`super::Pending::Client`]'s `taints`.
    taints: bool,
    deadline: Instant,
}

impl TaintGate {
    /// Whether an approval prompt waits for the person's answer.
    pub(super) fn prompts_open(&self) -> bool {
        !self.held.is_empty()
    }

    /// A continuation token for an approved call whose server asked questions of its own.
    pub(super) fn continuation(
        &self,
        server: &str,
        item: &str,
        args: &crate::lockfile::Sha256Digest,
        server_state: Option<String>,
    ) -> String {
        self.approver
            .mint_continuation(server, item, args, server_state)
    }

    /// The labels, and the session's state that [`super::admission::admit`] reads.
    pub(super) fn parts(&mut self) -> (&Labels, &mut Option<SessionStore>) {
        (&self.labels, &mut self.store)
    }

    /// Whether the client's name is known (and recorded in the session).
    pub(super) fn client_known(&self) -> bool {
        self.client_known
    }

    /// The gate of `entry`'s labels; the session's state is opened later, with
    /// [`TaintGate::open_store`], before any call is served.
    pub(super) fn new(entry: &ServerEntry) -> Result<Self> {
        let approver =
            Approver::new().map_err(|e| Error::new("cannot make an approval key").cause(e))?;
        Ok(Self {
            labels: Labels::of(entry),
            store: None,
            approver,
            held: HashMap::new(),
            next: 0,
            client_known: false,
            client: None,
            approved_call: None,
        })
    }

    /// Opens the session's shared state and registers this server in it (with the client's
    /// name, if it is known by now). With labels, a state that cannot be opened stops the proxy
    /// (fail closed).
    pub(super) fn open_store(
        &mut self,
        state_dir: &std::path::Path,
        session: &Session,
        server: &str,
    ) -> Result<()> {
        let client = self.client.take();
        let store = SessionStore::open(state_dir, session).and_then(|mut s| {
            s.update(|st| {
                st.servers.insert(server.to_owned());
                st.chains.insert(server.to_owned(), session.chain.clone());
                if client.is_some() {
                    st.client = client;
                }
            })?;
            Ok(s)
        });
        match store {
            Ok(s) => self.store = Some(s),
            Err(e) if self.labels.any() => {
                return Err(Error::new(format!(
                    "cannot open the taint state of this client session in `{}`",
                    taint::taint_dir(state_dir).display()
                ))
                .cause(e)
                .hint("server has `policy.taint`, so mcpsum will not run it without its taint state; check the state directory"));
            }
            Err(_) => {}
        }
        Ok(())
    }
}

impl TaintState for Option<SessionStore> {
    fn tainted(&mut self) -> Result<Option<TaintMark>, String> {
        match self.as_mut().map(SessionStore::tainted) {
            None => Ok(None),
            Some(r) => r.map_err(|e| e.to_string()),
        }
    }
}

/// What the labels call `method` on `item`, for the requests that carry content.
fn call_of<'a>(method: &str, item: &'a str) -> Option<Call<'a>> {
    match method {
        "tools/call" => Some(Call::Tool(item)),
        "resources/read" => Some(Call::ResourceRead),
        "prompts/get" => Some(Call::PromptGet),
        _ => None,
    }
}

/// What the gate decided about a request.
pub(super) enum Gate {
    /// Forward it with these params.
    Forward(Option<Value>),
    /// It was answered or held.
    Handled,
}

impl Core {
    /// Records the client's name and version in the session, once.
    pub(super) fn note_client(&mut self, method: &str, params: Option<&Value>) {
        if self.taint.client_known {
            return;
        }
        let info = match method {
            "initialize" => params.and_then(|p| p.get("clientInfo")),
            _ => params
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get(META_CLIENT_INFO)),
        };
        let Some(info) = info else { return };
        let name = info.get("name").and_then(Value::as_str).unwrap_or("?");
        let version = info.get("version").and_then(Value::as_str).unwrap_or("?");
        let client: String = format!("{name} {version}").chars().take(120).collect();
        self.taint.client_known = true;
        match self.taint.store.as_mut() {
            Some(store) => {
                let _ = store.update(|s| s.client = Some(client));
            }
            None => self.taint.client = Some(client),
        }
    }

    /// Carries out a refusal of the taint gate ([`super::admission::admit`]).
    pub(super) fn refuse_gated(
        &mut self,
        id: &Value,
        method: &str,
        item: &str,
        refusal: Gated,
        modern: bool,
    ) {
        match refusal {
            Gated::Unshowable { mark, why } => {
                self.count(|a| a.refused += 1);
                self.audit_approval(method, item, "refused", &why, &mark);
                let msg = unshowable_text(&self.name, item, &why, &self.session_id());
                self.refuse_sink(id, method, item, &msg, modern);
            }
            Gated::NoPrompt { mark } if modern => {
                let why = self.no_prompt(method, item, &mark);
                self.reply_error(
                    id,
                    codes::MISSING_CAPABILITY,
                    &why,
                    Some(json!({"requiredCapabilities": {"elicitation": {"form": {}}}})),
                );
            }
            Gated::NoPrompt { mark } => {
                let why = self.no_prompt(method, item, &mark);
                self.refuse_sink(id, method, item, &why, false);
            }
            Gated::TaintUnreadable(why) => {
                self.refuse_sink(id, method, item, &why, modern);
            }
        }
    }

    /// Asks the person to approve a sink call on a tainted session, as admission decided.
    #[expect(
        clippy::too_many_arguments,
        reason = "one call site; the pieces are all different"
    )]
    pub(super) fn ask(
        &mut self,
        id: &Value,
        method: &str,
        params: Option<Value>,
        (item, taints): (&str, bool),
        mark: &TaintMark,
        message: &str,
        by: Ask,
    ) -> Gate {
        let args = taint::arguments_digest(params.as_ref().and_then(|p| p.get("arguments")));
        match by {
            Ask::Retry => {
                return self.approval_retry(id, method, params, item, mark, &args);
            }
            Ask::InputRequired => {
                let token = self.taint.approver.mint(&self.name, item, &args);
                self.count(|a| a.asked += 1);
                self.audit_approval(
                    method,
                    item,
                    "asked",
                    "input_required sent to the client",
                    mark,
                );
                self.reply(
                    id,
                    json!({
                        "resultType": "input_required",
                        "inputRequests": {INPUT_KEY: {"method": "elicitation/create", "params": {
                            "mode": "form",
                            "message": message,
                            "requestedSchema": taint::prompt_schema(),
                        }}},
                        "requestState": token,
                    }),
                );
                return Gate::Handled;
            }
            Ask::Elicitation => {}
        }
        if self.taint.held.len() >= MAX_HELD {
            self.refuse_sink(
                id,
                method,
                item,
                "too many calls are waiting for approval; answer those first",
                false,
            );
            return Gate::Handled;
        }
        let ours = format!("{APPROVAL_PREFIX}{}", self.taint.next);
        self.taint.next += 1;
        self.taint.held.insert(
            ours.clone(),
            Held {
                client_id: id.clone(),
                method: method.to_owned(),
                params,
                item: item.to_owned(),
                taints,
                deadline: Instant::now() + LEGACY_APPROVAL_TIMEOUT,
            },
        );
        self.count(|a| a.asked += 1);
        self.audit_approval(
            method,
            item,
            "asked",
            "elicitation/create sent to the client",
            mark,
        );
        self.send_client(
            json!({"jsonrpc": "2.0", "id": ours, "method": "elicitation/create", "params": {
                "message": message,
                "requestedSchema": taint::prompt_schema(),
            }}),
        );
        Gate::Handled
    }

    /// A 2026-07-28 client's retry that carries mcpsum's approval: the state must be ours,
    /// unaltered, unused and for exactly this call.
    fn approval_retry(
        &mut self,
        id: &Value,
        method: &str,
        params: Option<Value>,
        item: &str,
        mark: &TaintMark,
        args: &crate::lockfile::Sha256Digest,
    ) -> Gate {
        let mut p = params.unwrap_or_else(|| json!({}));
        let state = p.get("requestState").and_then(Value::as_str);
        let answer = p.get("inputResponses").and_then(|r| r.get(INPUT_KEY));
        let Some(state) = state else {
            // Admission saw a retry: a request without state is none (fail closed).
            self.reply_error(id, codes::INVALID_PARAMS, "mcpsum refused the approval: the retry carries no `requestState`; the call was not made", None);
            return Gate::Handled;
        };
        let carried = match self.taint.approver.check(state, &self.name, item, args) {
            Ok(carried) => carried,
            Err(e) => {
                self.count(|a| a.refused += 1);
                self.audit_approval(method, item, "refused", &e.to_string(), mark);
                self.reply_error(
                    id,
                    codes::INVALID_PARAMS,
                    &format!("mcpsum refused the approval: {e}; the call was not made"),
                    None,
                );
                return Gate::Handled;
            }
        };
        if let Some(server_state) = carried {
            // The approved call again, with answers to the server's own questions: it goes
            // on under the approval given, with the server's state put back.
            self.audit_approval(
                method,
                item,
                "continue",
                "the approved call answers the server's own questions",
                mark,
            );
            if let Some(obj) = p.as_object_mut() {
                match server_state {
                    Some(s) => obj.insert("requestState".into(), Value::String(s)),
                    None => obj.remove("requestState"),
                };
            }
            self.taint.approved_call = Some(*args);
            return Gate::Forward(Some(p));
        }
        let Some(answer) = answer else {
            self.count(|a| a.refused += 1);
            self.reply_error(id, codes::INVALID_PARAMS, &format!("mcpsum refused the approval: the retry carries no answer to mcpsum's question (`{INPUT_KEY}` in `inputResponses`); the call was not made, so call it again to be asked"), None);
            return Gate::Handled;
        };
        if taint::approves(answer) {
            self.count(|a| a.accepted += 1);
            self.audit_approval(method, item, "accept", "the person allowed the call", mark);
            self.taint.approved_call = Some(*args);
            return Gate::Forward(Some(strip_approval(p)));
        }
        self.count(|a| a.declined += 1);
        let action = answer_action(Some(answer));
        let (reason, msg) = not_allowed_text(&self.name, item, &action);
        self.audit_approval(method, item, &action, reason, mark);
        self.refuse_sink(id, method, item, &msg, true);
        Gate::Handled
    }

    /// A client's answer to one of mcpsum's approval prompts; `false` when the id is not ours.
    pub(super) fn approval_answer(&mut self, id: &Value, obj: &Map<String, Value>) -> bool {
        let Some(key) = id.as_str().filter(|k| k.starts_with(APPROVAL_PREFIX)) else {
            return false;
        };
        let Some(held) = self.taint.held.remove(key) else {
            self.drop_junk(
                "client",
                "answer to an approval prompt that is no longer open",
            );
            return true;
        };
        let mark = self.current_mark();
        let approved = obj.get("result").is_some_and(taint::approves);
        if approved {
            self.count(|a| a.accepted += 1);
            self.audit_approval(
                &held.method,
                &held.item,
                "accept",
                "the person allowed the call",
                &mark,
            );
            if self.quarantined() {
                // The server drifted while the person was deciding: the call goes nowhere.
                self.refuse_quarantined(&held.client_id, &held.method);
                return true;
            }
            let retry = self.retry_for(&held.method, held.params.as_ref(), false);
            self.forward(
                &held.client_id,
                &held.method,
                held.params,
                false,
                (held.item, held.taints),
                retry,
            );
        } else {
            let action = match obj.get("result") {
                Some(r) => answer_action(Some(r)),
                None => "error".to_owned(),
            };
            self.count(|a| a.declined += 1);
            let (reason, msg) = not_allowed_text(&self.name, &held.item, &action);
            self.audit_approval(&held.method, &held.item, &action, reason, &mark);
            self.refuse_sink(&held.client_id, &held.method, &held.item, &msg, false);
        }
        true
    }

    /// Refuses held calls whose prompt was not answered in time.
    pub(super) fn expire_approvals(&mut self) {
        let now = Instant::now();
        self.end_prompts(|h| h.deadline <= now, "approval timed out");
    }

    /// The client closed its stdin: no prompt can be answered any more, so each held call is
    /// refused (and audited) rather than left without an answer.
    pub(super) fn withdraw_prompts(&mut self) {
        self.end_prompts(|_| true, "the client closed its stdin");
    }

    /// Refuses the held calls `which` picks, as unanswered prompts: a decision, audited.
    fn end_prompts(&mut self, which: impl Fn(&Held) -> bool, why: &str) {
        let ended: Vec<String> = self
            .taint
            .held
            .iter()
            .filter(|(_, h)| which(h))
            .map(|(k, _)| k.clone())
            .collect();
        for key in ended {
            let Some(held) = self.taint.held.remove(&key) else {
                continue;
            };
            let mark = self.current_mark();
            self.count(|a| a.declined += 1);
            self.audit_approval(
                &held.method,
                &held.item,
                "timeout",
                &format!("no answer to the approval prompt: {why}"),
                &mark,
            );
            self.send_client(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": key, "reason": why}}));
            let msg = format!(
                "no answer to mcpsum's approval prompt for `{}` on server `{}` ({why}); the call was not made",
                quoted_name(&held.item),
                quoted_name(&self.name)
            );
            self.refuse_sink(&held.client_id, &held.method, &held.item, &msg, false);
        }
    }

    /// The client cancelled a held call: withdraw its prompt.
    pub(super) fn cancel_held(&mut self, client_id: &Value) -> bool {
        let Some(key) = self
            .taint
            .held
            .iter()
            .find(|(_, h)| h.client_id == *client_id)
            .map(|(k, _)| k.clone())
        else {
            return false;
        };
        self.taint.held.remove(&key);
        self.send_client(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": key, "reason": "the call was cancelled"}}));
        true
    }

    /// An answer of the server to `method` on `item` is about to reach the client: a source's
    /// answer taints the session first, whatever it is (a result, `isError` or not, a JSON-RPC
    /// error, an input round's questions), since its text reaches the model all the same. Only
    /// answers mcpsum makes itself (refusals, time-outs) do not come here. `Err`
    /// (what to answer instead) when the taint cannot be recorded in the session's state: the
    /// result is then withheld, since the session's other proxies would not know to ask before
    /// their sinks (fail closed).
    pub(super) fn after_result(
        &mut self,
        method: &str,
        item: &str,
        taints: bool,
    ) -> Result<(), String> {
        // Whether it taints was admission's decision ([`super::admission::admit`]).
        let Some(call) = call_of(method, item).filter(|_| taints) else {
            return Ok(());
        };
        self.taint_now(
            &source_name(call, item),
            method,
            item,
            "a source's answer reached the client",
            &format!("the result of `{item}`"),
        )
    }

    /// The name a source call's taint mark gives it; `None` when the call is no source.
    fn source_of(&self, method: &str, item: &str) -> Option<String> {
        let call = call_of(method, item)?;
        self.taint
            .labels
            .is_source(call)
            .then(|| source_name(call, item))
    }

    /// The server's source call in flight (method and item), if any, a client's call or one
    /// in an input round.
    pub(super) fn source_in_flight(&self) -> Option<(String, String)> {
        let is_source = |m: &str, i: &str| self.source_of(m, i).is_some();
        self.pending
            .values()
            .find_map(|p| match p {
                super::Pending::Client { method, item, .. } if is_source(method, item) => {
                    Some((method.clone(), item.clone()))
                }
                _ => None,
            })
            .or_else(|| {
                self.rounds
                    .open
                    .values()
                    .find(|r| is_source(&r.method, &r.item))
                    .map(|r| (r.method.clone(), r.item.clone()))
            })
    }

    /// Before a server's own request (`method`: sampling, elicitation, anything but `ping` and
    /// `roots/list`) reaches the client: it carries the server's text, to the model as often as
    /// not. It taints with the source call in flight; a server with source labels and no
    /// source call in flight taints anyway, naming the request (its text may be a source's
    /// all the same). `Err` (the message for the server) when the taint cannot be recorded:
    /// the request is not relayed then.
    pub(super) fn before_server_request(&mut self, method: &str) -> Result<(), String> {
        let what = format!("the request `{method}`");
        if let Some((m, i)) = self.source_in_flight() {
            let source = self.source_of(&m, &i).unwrap_or_default();
            return self.taint_now(
                &source,
                &m,
                &i,
                "a server request reached the client during a source call",
                &what,
            );
        }
        if !self.taint.labels.has_sources() {
            return Ok(());
        }
        self.taint_now(
            &format!("{method} (outside any call)"),
            method,
            "",
            "a server request reached the client while no source call was in flight",
            &what,
        )
    }

    /// Before a server's log or progress notification reaches the client during a source
    /// call: its text may be the source's. `Err` when the taint cannot be recorded: the
    /// notification is dropped then.
    pub(super) fn before_server_notification(&mut self, method: &str) -> Result<(), String> {
        let Some((m, i)) = self.source_in_flight() else {
            return Ok(());
        };
        let source = self.source_of(&m, &i).unwrap_or_default();
        self.taint_now(
            &source,
            &m,
            &i,
            "a server notification reached the client during a source call",
            &format!("the notification `{method}`"),
        )
    }

    /// Records the session's taint by `source` (when not tainted yet) before `what` reaches
    /// the client; `Err` (the message for whom `what` is withheld from) when that fails.
    fn taint_now(
        &mut self,
        source: &str,
        method: &str,
        item: &str,
        reason: &str,
        what: &str,
    ) -> Result<(), String> {
        let server = self.name.clone();
        let Some(store) = self.taint.store.as_mut() else {
            return Ok(());
        };
        // Already tainted: nothing to record, so no lock to take (each log or progress message
        // of a source call comes here). The state in memory stands for the file while a `stat`
        // finds it unchanged, so a taint cleared meanwhile (`mcpsum taint reset`) is seen.
        if matches!(store.is_tainted(), Ok(true)) {
            return Ok(());
        }
        let mark = TaintMark {
            server,
            // A URI is the client's: the state file and every prompt that names the source
            // keep a prefix and the digest, as the audit log does.
            item: crate::audit::capped(source, crate::audit::FIELD_MAX).into_owned(),
            ts: crate::audit::now_rfc3339(),
        };
        let tainted_now = store.update(|s| {
            if s.taint.is_none() {
                s.taint = Some(mark.clone());
                true
            } else {
                false
            }
        });
        match tainted_now {
            Ok(true) => {
                self.note(
                    "call",
                    json!({"method": method, "item": item, "decision": "taint", "reason": reason}),
                );
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => {
                self.warn(format!(
                    "cannot record the taint of this session: {e}; {what} is withheld"
                ));
                self.note("refused", json!({"method": method, "item": item, "decision": "withhold", "reason": "the taint of a source's text could not be recorded in the session state"}));
                Err(format!(
                    "{what} (server `{}`) is withheld: it is untrusted content, and mcpsum could not record that in this session's state ({e}), so the session's other servers would not ask before acting; check the state directory",
                    self.name
                ))
            }
        }
    }

    /// Counts and audits a refusal because the client cannot show a form prompt; returns the
    /// text that tells the person why and how to proceed.
    fn no_prompt(&mut self, method: &str, item: &str, mark: &TaintMark) -> String {
        self.count(|a| a.refused += 1);
        self.audit_approval(
            method,
            item,
            "refused",
            "the client cannot show an approval prompt (it does not support MCP forms, called elicitation)",
            mark,
        );
        no_prompt_text(&self.name, item, mark, &self.session_id())
    }

    /// The session id a refusal tells the person to reset; `SESSION` when the state is not open.
    fn session_id(&self) -> String {
        self.taint
            .store
            .as_ref()
            .map_or_else(|| "SESSION".to_owned(), |s| s.session_id().to_owned())
    }

    fn current_mark(&mut self) -> TaintMark {
        self.taint
            .store
            .as_mut()
            .and_then(|s| s.tainted().ok().flatten())
            .unwrap_or_else(|| TaintMark {
                server: "?".into(),
                item: "?".into(),
                ts: String::new(),
            })
    }

    fn count(&mut self, f: impl FnOnce(&mut taint::Approvals)) {
        if let Some(store) = self.taint.store.as_mut() {
            let _ = store.update(|s| f(&mut s.approvals));
        }
    }

    fn audit_approval(
        &self,
        method: &str,
        item: &str,
        decision: &str,
        reason: &str,
        mark: &TaintMark,
    ) {
        self.note(
            "approval",
            json!({"method": method, "item": item, "decision": decision, "reason": reason,
                   "tainted_by": {"server": mark.server, "item": mark.item, "ts": mark.ts}}),
        );
    }

    /// Refuses a sink call: a tool result with `isError` (the model reads why) for `tools/call`,
    /// a JSON-RPC error otherwise.
    fn refuse_sink(&self, id: &Value, method: &str, item: &str, why: &str, modern: bool) {
        self.note(
            "refused",
            json!({"method": method, "item": item, "decision": "refuse", "reason": why}),
        );
        if method == "tools/call" {
            let mut result = json!({"content": [{"type": "text", "text": why}], "isError": true});
            if modern {
                // A 2026-07-28 result names its type.
                result["resultType"] = json!("complete");
            }
            self.reply(id, result);
        } else {
            self.reply_error(id, codes::INVALID_REQUEST, why, None);
        }
    }
}

fn no_prompt_text(server: &str, item: &str, mark: &TaintMark, session: &str) -> String {
    let (server, item) = (quoted_name(server), quoted_name(item));
    format!(
        "mcpsum did not make the call `{item}` on server `{server}`. Earlier in this session, `{}` on server `{}` returned content from outside, which can carry instructions planted by someone else, so mcpsum asks the person before a call that can send data out; this client cannot show that question (it does not support MCP forms, called elicitation). To go on, use a client that supports MCP forms, or, if what the session read is safe, clear the session in a terminal with `mcpsum taint reset {session}` and make the call again.",
        quoted_name(&mark.item),
        quoted_name(&mark.server)
    )
}

/// The person's answer to a prompt that did not approve, as audited: the client's `action`
/// (`decline`, `cancel`, or another word, shown safely), `accept-unticked` for an `accept`
/// without `approve: true` (the box left unticked: a no, and not the same as a decline).
fn answer_action(result: Option<&Value>) -> String {
    match result.and_then(|r| r.get("action")).and_then(Value::as_str) {
        Some("accept") => "accept-unticked".to_owned(),
        Some(other) => crate::text::sanitize_line(&other.chars().take(40).collect::<String>()),
        None => "decline".to_owned(),
    }
}

/// The audit reason and the refusal text for a prompt the person did not approve with.
fn not_allowed_text(server: &str, item: &str, action: &str) -> (&'static str, String) {
    let (server, item) = (quoted_name(server), quoted_name(item));
    if action == "accept-unticked" {
        return (
            "the person answered accept without ticking `Allow this call`",
            format!(
                "the person did not allow `{item}` on server `{server}`: they answered accept to mcpsum's approval prompt without ticking `Allow this call`, which mcpsum takes as a no; the call was not made. To allow it, call it again and tick the box"
            ),
        );
    }
    (
        "the person did not allow the call",
        format!(
            "the person did not allow `{item}` on server `{server}` ({action}); the call was not made"
        ),
    )
}

/// The refusal of a sink call whose arguments an approval prompt cannot show whole.
fn unshowable_text(server: &str, item: &str, why: &str, session: &str) -> String {
    let (server, item) = (quoted_name(server), quoted_name(item));
    format!(
        "mcpsum refused `{item}` on server `{server}` without asking: this session read untrusted content, so the call needs the person's approval, but {why}. Make the call with shorter arguments, or, if what the session read is safe, clear the session in a terminal with `mcpsum taint reset {session}` and make the call again."
    )
}

/// Removes mcpsum's answer and state from a retried request before it goes to the server.
fn strip_approval(mut params: Value) -> Value {
    if let Some(obj) = params.as_object_mut() {
        obj.remove("requestState");
        let empty = match obj.get_mut("inputResponses").and_then(Value::as_object_mut) {
            Some(r) => {
                r.remove(INPUT_KEY);
                r.is_empty()
            }
            None => false,
        };
        if empty {
            obj.remove("inputResponses");
        }
    }
    params
}

/// The name a source call's taint mark gives it.
fn source_name(call: Call<'_>, item: &str) -> String {
    match call {
        Call::Tool(t) => t.to_owned(),
        Call::ResourceRead | Call::PromptGet => format!("{} {item}", call.label()),
    }
}
