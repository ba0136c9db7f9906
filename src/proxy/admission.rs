//! The one decision whether a client's request may reach the server: [`admit`]. It owns the
//! checks of a request on its way in (its `_meta` in the 2026-07-28 era, a method that era
//! removed, quarantine, the shape of its params, whether the item is locked, a task-only tool,
//! and the taint gate of I6), so the fast path (`fast.rs`) and the general path (`mod.rs`)
//! cannot drift apart: both parse the request into a [`Request`], ask [`admit`], and carry out
//! its [`Admission`].
//!
//! The decision does no I/O of its own: what it needs of the proxy is passed in as [`Facts`],
//! and the session's taint state, which costs a `stat`, is read through [`TaintState`] only for
//! a sink call.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::{LOG_LEVELS, REMOVED_IN_MODERN, log_rank, uri};
use crate::lockfile::{Era, Kind, ServerEntry};
use crate::mcp::envelope::Message;
use crate::mcp::{META_CAPABILITIES, META_LOG_LEVEL, META_VERSION, MODERN_VERSION, codes};
use crate::taint::{self, Approver, Labels, Shown, TaintMark, quoted_name};

/// The key of mcpsum's question in a 2026-07-28 `inputRequests` map.
pub(super) const INPUT_KEY: &str = "io.mcpsum/approval";

/// A client request, its method and the params the decision reads, parsed once.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Request<'a> {
    Initialize,
    Discover,
    Ping,
    /// `tools/list`, `prompts/list`, ...
    List(Kind),
    ToolsCall {
        name: &'a str,
    },
    PromptsGet {
        name: &'a str,
    },
    ResourcesRead {
        uri: &'a str,
    },
    /// `resources/subscribe` (`on`) or `resources/unsubscribe`.
    Subscribe {
        uri: &'a str,
        on: bool,
    },
    /// `completion/complete`: whether its `ref` names a locked prompt or resource, and the
    /// name (or URI) it names.
    Complete {
        locked: Option<CompleteRef<'a>>,
        item: &'a str,
    },
    SetLevel {
        level: Option<&'a str>,
    },
    Listen,
    /// A method mcpsum does not forward.
    Other,
}

/// What a `completion/complete` refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CompleteRef<'a> {
    Prompt(&'a str),
    Resource(&'a str),
}

impl<'a> Request<'a> {
    /// The request of `method` with `params` (as parsed whole): `Err` says, for the client,
    /// which param is missing or of the wrong type.
    pub(super) fn parse(method: &str, params: Option<&'a Value>) -> Result<Self, String> {
        let str_param = |key: &str, what: &str| -> Result<&'a str, String> {
            let obj = match params {
                None | Some(Value::Null) => None,
                Some(Value::Object(o)) => Some(o),
                Some(other) => {
                    return Err(format!(
                        "invalid params of `{method}`: `params` must be an object, not {}",
                        type_name(other)
                    ));
                }
            };
            match obj.and_then(|o| o.get(key)) {
                None => Err(format!(
                    "invalid params of `{method}`: missing `{key}` ({what}, a string)"
                )),
                Some(Value::String(s)) => Ok(s),
                Some(other) => Err(format!(
                    "invalid params of `{method}`: `{key}` must be a string ({what}), not {}",
                    type_name(other)
                )),
            }
        };
        Ok(match method {
            "initialize" => Self::Initialize,
            "server/discover" => Self::Discover,
            "ping" => Self::Ping,
            "tools/call" => Self::ToolsCall {
                name: str_param("name", "the tool to call")?,
            },
            "prompts/get" => Self::PromptsGet {
                name: str_param("name", "the prompt to get")?,
            },
            "resources/read" => Self::ResourcesRead {
                uri: str_param("uri", "the resource to read")?,
            },
            "resources/subscribe" | "resources/unsubscribe" => Self::Subscribe {
                uri: str_param("uri", "the resource to follow")?,
                on: method == "resources/subscribe",
            },
            "completion/complete" => {
                let r = params.and_then(|p| p.get("ref"));
                let field = |k: &str| r.and_then(|r| r.get(k)).and_then(Value::as_str);
                let locked = match field("type") {
                    Some("ref/prompt") => field("name").map(CompleteRef::Prompt),
                    Some("ref/resource") => field("uri").map(CompleteRef::Resource),
                    _ => None,
                };
                Self::Complete {
                    locked,
                    item: field("name").or_else(|| field("uri")).unwrap_or_default(),
                }
            }
            "logging/setLevel" => Self::SetLevel {
                level: params.and_then(|p| p.get("level")).and_then(Value::as_str),
            },
            "subscriptions/listen" => Self::Listen,
            m => match Kind::ALL.into_iter().find(|k| k.list_method() == m) {
                Some(kind) => Self::List(kind),
                None => Self::Other,
            },
        })
    }

    /// The item the request is about, as audited and as the taint gate names it.
    pub(super) fn item(&self) -> &'a str {
        match *self {
            Self::ToolsCall { name } | Self::PromptsGet { name } => name,
            Self::ResourcesRead { uri } | Self::Subscribe { uri, .. } => uri,
            Self::Complete { item, .. } => item,
            _ => "",
        }
    }

    /// The call as the taint labels name it, for the requests that carry content.
    fn labelled(&self) -> Option<taint::Call<'a>> {
        match *self {
            Self::ToolsCall { name } => Some(taint::Call::Tool(name)),
            Self::ResourcesRead { .. } => Some(taint::Call::ResourceRead),
            Self::PromptsGet { .. } => Some(taint::Call::PromptGet),
            _ => None,
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The params of a request, as far as the taint gate reads them past the item: the arguments
/// an approval prompt shows, and whether it answers mcpsum's approval. Read only for a sink on
/// a tainted session, so the fast path builds no value for them.
#[derive(Clone, Copy)]
pub(super) enum Params<'a> {
    /// Parsed whole (the general path).
    Parsed(Option<&'a Value>),
    /// Scanned (the fast path).
    Scanned(Message<'a>),
}

impl Params<'_> {
    fn arguments(&self) -> Option<Cow<'_, Value>> {
        match self {
            Self::Parsed(p) => p.and_then(|p| p.get("arguments")).map(Cow::Borrowed),
            Self::Scanned(m) => m
                .get_in("params", "arguments")
                .and_then(|r| r.to_value())
                .map(Cow::Owned),
        }
    }

    /// Whether it is a 2026-07-28 retry that carries mcpsum's approval (its answer, or the
    /// continuation token of an approved call).
    fn answers_approval(&self) -> bool {
        match self {
            Self::Parsed(p) => {
                let state = p
                    .and_then(|p| p.get("requestState"))
                    .and_then(Value::as_str);
                let answer = p
                    .and_then(|p| p.get("inputResponses"))
                    .and_then(|r| r.get(INPUT_KEY));
                state.is_some_and(|s| answer.is_some() || Approver::is_token(s))
            }
            Self::Scanned(m) => {
                let Some(state) = m.get_in("params", "requestState") else {
                    return false;
                };
                let Some(state) = state.as_str() else {
                    return false;
                };
                Approver::is_token(&state)
                    || m.get_in("params", "inputResponses")
                        .and_then(|r| r.to_value())
                        .is_some_and(|r| r.get(INPUT_KEY).is_some())
            }
        }
    }
}

/// One request as [`admit`] decides on it.
pub(super) struct Call<'a> {
    pub(super) method: &'a str,
    /// The request, or what is wrong with its params.
    pub(super) request: Result<Request<'a>, String>,
    /// Its `_meta`, if any.
    pub(super) meta: Option<&'a Value>,
    pub(super) params: Params<'a>,
}

impl Call<'_> {
    /// Whether it is a 2026-07-28 request: its `_meta` names a version, or declares client
    /// capabilities (a key of that era only; without the version it is refused for it).
    pub(super) fn modern(&self) -> bool {
        self.meta.is_some_and(modern_meta)
    }
}

/// What the decision reads of the proxy.
pub(super) struct Facts<'a> {
    pub(super) server: &'a str,
    pub(super) entry: &'a ServerEntry,
    pub(super) server_era: Era,
    pub(super) quarantined: bool,
    pub(super) labels: &'a Labels,
    /// The version a legacy client negotiated, and the capabilities it declared.
    pub(super) client_version: Option<&'a str>,
    pub(super) client_legacy_caps: Option<&'a Value>,
}

/// The session's taint state, read only when a sink is called.
pub(super) trait TaintState {
    /// The session's taint, if it is tainted; `Err` when the state cannot be read.
    fn tainted(&mut self) -> Result<Option<TaintMark>, String>;
}

/// How the person is asked to approve a sink call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask {
    /// A legacy client: `elicitation/create`, the call held until the answer.
    Elicitation,
    /// A 2026-07-28 client: an `input_required` result with mcpsum's question.
    InputRequired,
    /// A 2026-07-28 client's retry carrying mcpsum's approval: it is checked.
    Retry,
}

/// Why a request does not reach the server.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Refusal {
    /// A 2026-07-28 request's `_meta` is wrong.
    Meta {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// A 2026-07-28 request of a method that era removed.
    Removed(String),
    /// The server is quarantined.
    Quarantined,
    /// A param is missing or of the wrong type.
    Params(String),
    /// The item is not locked, or cannot be relayed: refused naming it.
    Item { code: i64, message: String },
    /// A request mcpsum does not forward (unknown, or the server does not offer it).
    Method { code: i64, message: String },
    /// The taint gate refused a sink call.
    Gate(Gated),
}

/// Why the taint gate refused a sink call.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Gated {
    /// The session's taint state cannot be read (fail closed).
    TaintUnreadable(String),
    /// The session is tainted, and an approval prompt could not show the arguments whole.
    Unshowable { mark: TaintMark, why: String },
    /// The session is tainted, and the client cannot show an approval prompt.
    NoPrompt { mark: TaintMark },
}

/// The decision about one request.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Admission {
    /// mcpsum answers it from the lock itself (handshake, lists).
    Local,
    /// It goes to the server; a source's answer taints the session after it.
    Forward {
        taint_after: bool,
    },
    /// A sink on a tainted session: the person decides, asked with `prompt`.
    Ask {
        mark: TaintMark,
        prompt: String,
        by: Ask,
        taint_after: bool,
    },
    Refuse(Refusal),
}

/// The decision whether `call` may reach the server.
pub(super) fn admit(call: &Call<'_>, facts: &Facts<'_>, taint: &mut dyn TaintState) -> Admission {
    let refuse = Admission::Refuse;
    if let Some((code, message, data)) = modern_meta_problem(call.method, call.meta) {
        return refuse(Refusal::Meta {
            code,
            message,
            data,
        });
    }
    let modern = call.modern();
    if modern && REMOVED_IN_MODERN.contains(&call.method) {
        return refuse(Refusal::Removed(removed_in_modern(call.method)));
    }
    if matches!(
        call.request,
        Ok(Request::Initialize | Request::Discover | Request::Ping)
    ) {
        return Admission::Local;
    }
    if facts.quarantined {
        return refuse(Refusal::Quarantined);
    }
    let request = match &call.request {
        Ok(r) => r,
        Err(why) => return refuse(Refusal::Params(why.clone())),
    };
    if let Some(refusal) = locked_problem(request, call.method, facts) {
        return refuse(refusal);
    }
    if let Request::List(_) = request {
        return Admission::Local;
    }
    gate(call, request, modern, facts, taint)
}

/// Why the item of `request` may not be relayed, if it may not.
fn locked_problem(request: &Request<'_>, method: &str, facts: &Facts<'_>) -> Option<Refusal> {
    let entry = facts.entry;
    // The names come from the client: quoted as the approval prompt quotes them.
    let server = Shown(facts.server);
    let item = |message: String| {
        Some(Refusal::Item {
            code: codes::INVALID_PARAMS,
            message,
        })
    };
    match *request {
        Request::ToolsCall { name } => match entry.item(Kind::Tool, name) {
            None => item(format!(
                "tool `{}` is not in mcp.lock for server `{server}`; mcpsum serves only locked tools",
                quoted_name(name)
            )),
            Some(tool) if task_only(tool) => Some(Refusal::Item {
                code: codes::METHOD_NOT_FOUND,
                message: format!(
                    "tool `{}` of server `{server}` runs only as a task (`execution.taskSupport` is \"required\"), and mcpsum does not relay tasks: their results would bypass its checks",
                    quoted_name(name)
                ),
            }),
            Some(_) => None,
        },
        Request::PromptsGet { name } => {
            entry
                .item(Kind::Prompt, name)
                .is_none()
                .then(|| Refusal::Item {
                    code: codes::INVALID_PARAMS,
                    message: format!(
                        "prompt `{}` is not in mcp.lock for server `{server}`; mcpsum serves only locked prompts",
                        quoted_name(name)
                    ),
                })
        }
        Request::ResourcesRead { uri } | Request::Subscribe { uri, .. } => {
            if uri_locked(entry, uri) {
                return None;
            }
            item(format!(
                "resource `{}` is not in mcp.lock for server `{server}` and matches no locked template",
                quoted_name(uri)
            ))
        }
        Request::Complete { locked, .. } => {
            let ok = match locked {
                Some(CompleteRef::Prompt(n)) => entry.item(Kind::Prompt, n).is_some(),
                Some(CompleteRef::Resource(u)) => {
                    entry.item(Kind::Resource, u).is_some()
                        || entry.item(Kind::ResourceTemplate, u).is_some()
                }
                None => false,
            };
            (!ok || entry.capabilities.get("completions").is_none()).then(|| Refusal::Method {
                code: codes::INVALID_PARAMS,
                message: "completion is only forwarded for a locked prompt or resource of a server that offers completions".into(),
            })
        }
        Request::SetLevel { level } => {
            if entry.capabilities.get("logging").is_none() {
                return Some(Refusal::Method {
                    code: codes::METHOD_NOT_FOUND,
                    message: format!("server `{server}` does not offer logging"),
                });
            }
            // 2026-07-28 has no setLevel: mcpsum puts the level on each request, and a level
            // the server would refuse on each of them is refused here, once.
            (facts.server_era == Era::Modern && log_rank(level).is_none()).then(|| {
                Refusal::Params(format!("`level` must be one of {}", LOG_LEVELS.join(", ")))
            })
        }
        Request::Other => Some(Refusal::Method {
            code: codes::METHOD_NOT_FOUND,
            message: format!("mcpsum does not forward `{}`", quoted_name(method)),
        }),
        Request::Initialize
        | Request::Discover
        | Request::Ping
        | Request::List(_)
        | Request::Listen => None,
    }
}

/// The taint gate (I6): sinks on a tainted session need the person's approval.
fn gate(
    call: &Call<'_>,
    request: &Request<'_>,
    modern: bool,
    facts: &Facts<'_>,
    taint: &mut dyn TaintState,
) -> Admission {
    let Some(labelled) = request.labelled() else {
        return Admission::Forward { taint_after: false };
    };
    let taint_after = facts.labels.is_source(labelled);
    if !facts.labels.is_sink(labelled) {
        return Admission::Forward { taint_after };
    }
    let item = request.item();
    let mark = match taint.tainted() {
        Ok(None) => return Admission::Forward { taint_after },
        Ok(Some(mark)) => mark,
        Err(e) => {
            return Admission::Refuse(Refusal::Gate(Gated::TaintUnreadable(format!(
                "mcpsum cannot read this session's taint state ({e}), so it refuses calls that need approval"
            ))));
        }
    };
    let arguments = call.params.arguments();
    let prompt = match taint::prompt_text(facts.server, item, arguments.as_deref(), &mark) {
        Ok(p) => p,
        // A prompt that showed part of the arguments could hide what the call does.
        Err(why) => return Admission::Refuse(Refusal::Gate(Gated::Unshowable { mark, why })),
    };
    let by = if modern {
        if call.params.answers_approval() {
            Ask::Retry
        } else if call
            .meta
            .and_then(|m| m.get(META_CAPABILITIES))
            .and_then(|c| c.get("elicitation"))
            .is_some_and(form_elicitation)
        {
            Ask::InputRequired
        } else {
            return Admission::Refuse(Refusal::Gate(Gated::NoPrompt { mark }));
        }
    } else {
        // Elicitation came with 2025-06-18: a session of an earlier version has none, whatever
        // its capabilities say.
        let can_ask = !facts
            .client_version
            .is_some_and(|v| crate::protocol::BEFORE_ELICITATION.contains(&v))
            && facts
                .client_legacy_caps
                .and_then(|c| c.get("elicitation"))
                .is_some_and(form_elicitation);
        if !can_ask {
            return Admission::Refuse(Refusal::Gate(Gated::NoPrompt { mark }));
        }
        Ask::Elicitation
    };
    Admission::Ask {
        mark,
        prompt,
        by,
        taint_after,
    }
}

/// Whether `u` is a locked resource or matches a locked template.
pub(super) fn uri_locked(entry: &ServerEntry, u: &str) -> bool {
    entry.item(Kind::Resource, u).is_some()
        || entry
            .resource_templates
            .iter()
            .filter_map(|t| Kind::ResourceTemplate.key_of(t))
            .any(|t| uri::matches(t, u))
}

/// Whether a tool can be called only as a task (2025-11-25), which mcpsum does not relay.
fn task_only(tool: &Value) -> bool {
    tool.get("execution")
        .and_then(|e| e.get("taskSupport"))
        .and_then(Value::as_str)
        == Some("required")
}

/// Whether an `elicitation` capability covers form prompts: `{}` (form only, 2025-06-18) or
/// one that lists `form`.
pub(super) fn form_elicitation(e: &Value) -> bool {
    e.as_object()
        .is_some_and(|o| o.is_empty() || o.contains_key("form"))
}

/// Whether a request's `_meta` carries a key only 2026-07-28 requests have: the version, or
/// the client's capabilities.
fn modern_meta(meta: &Value) -> bool {
    meta.get(META_VERSION).is_some() || meta.get(META_CAPABILITIES).is_some()
}

/// The refusal of a method 2026-07-28 removed, with what takes its place there, and that
/// `initialize` speaks an earlier version that has it.
fn removed_in_modern(method: &str) -> String {
    let instead = match method {
        "resources/subscribe" | "resources/unsubscribe" => {
            "; changes to a resource come on a `subscriptions/listen` stream".to_owned()
        }
        "logging/setLevel" => {
            format!("; a request asks for log messages with `_meta[\"{META_LOG_LEVEL}\"]`")
        }
        "ping" => "; every request stands alone, so there is no connection to check".to_owned(),
        _ => String::new(),
    };
    format!(
        "`{method}` does not exist in protocol version {MODERN_VERSION}{instead}; send `initialize` first to use an earlier version that has it"
    )
}

/// What is wrong with a 2026-07-28 request's `_meta` (a request that names a version, or
/// uses a method of that era only): the error code, message and data to answer with.
fn modern_meta_problem(method: &str, meta: Option<&Value>) -> Option<(i64, String, Option<Value>)> {
    let version = meta.and_then(|m| m.get(META_VERSION));
    let modern_only = matches!(method, "server/discover" | "subscriptions/listen");
    if !meta.is_some_and(modern_meta) && !modern_only {
        return None;
    }
    match version.and_then(Value::as_str) {
        Some(MODERN_VERSION) => {}
        Some(v) => {
            return Some((
                codes::UNSUPPORTED_VERSION,
                format!(
                    "unsupported protocol version `{v}`: send {MODERN_VERSION}, or `initialize` for an earlier version"
                ),
                Some(json!({"supported": [MODERN_VERSION], "requested": v})),
            ));
        }
        None => {
            return Some((
                codes::INVALID_PARAMS,
                format!("`{method}` needs `_meta[\"{META_VERSION}\"]` (a string)"),
                None,
            ));
        }
    }
    let caps = meta.and_then(|m| m.get(META_CAPABILITIES));
    if !caps.is_some_and(Value::is_object) {
        return Some((
            codes::INVALID_PARAMS,
            format!(
                "`{method}` needs `_meta[\"{META_CAPABILITIES}\"]` (an object; `{{}}` declares none)"
            ),
            None,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::*;
    use crate::lockfile::{Policy, Surface, TaintPolicy};

    const MODERN_META: &str = "io.modelcontextprotocol/protocolVersion";

    fn entry(era: Era) -> ServerEntry {
        let mut items = BTreeMap::new();
        items.insert(
            Kind::Tool,
            vec![
                json!({"name": "read_mail", "inputSchema": {"type": "object"}}),
                json!({"name": "send", "inputSchema": {"type": "object"}}),
                json!({"name": "fetch", "inputSchema": {"type": "object"}}),
                json!({"name": "plain", "inputSchema": {"type": "object"}}),
                json!({"name": "long_job", "inputSchema": {"type": "object"},
                       "execution": {"taskSupport": "required"}}),
            ],
        );
        items.insert(Kind::Prompt, vec![json!({"name": "greet"})]);
        items.insert(
            Kind::Resource,
            vec![json!({"uri": "notes://inbox", "name": "inbox"})],
        );
        items.insert(
            Kind::ResourceTemplate,
            vec![json!({"uriTemplate": "notes://note/{id}", "name": "note"})],
        );
        let surface = Surface {
            era,
            protocol_version: match era {
                Era::Legacy => "2025-06-18".into(),
                Era::Modern => MODERN_VERSION.into(),
            },
            supported_versions: None,
            server_info: json!({"name": "mail", "version": "1"}),
            capabilities: json!({"tools": {}, "prompts": {}, "resources": {}, "completions": {}}),
            instructions: None,
            items,
        };
        let policy = Policy {
            taint: Some(TaintPolicy {
                sources: vec!["read_mail".into(), "fetch".into(), "resources:*".into()],
                sinks: vec!["send".into(), "fetch".into(), "prompts:*".into()],
            }),
            sandbox: None,
        };
        match ServerEntry::from_surface(vec!["mail".into()], vec![], surface, Some(policy)) {
            Ok(e) => e,
            Err(e) => panic!("test entry: {e}"),
        }
    }

    fn mark() -> TaintMark {
        TaintMark {
            server: "web".into(),
            item: "read_mail".into(),
            ts: "2026-01-01T00:00:00Z".into(),
        }
    }

    /// The session's taint state as a case sets it, counting its reads.
    struct Fake {
        state: Result<Option<TaintMark>, String>,
        reads: usize,
    }

    impl TaintState for Fake {
        fn tainted(&mut self) -> Result<Option<TaintMark>, String> {
            self.reads += 1;
            self.state.clone()
        }
    }

    /// The client of a case: its era and what it declared.
    #[derive(Clone, Copy)]
    enum Client {
        /// A legacy client of this version, with form elicitation or without.
        Legacy(&'static str, bool),
        /// A 2026-07-28 client, with form elicitation or without.
        Modern(bool),
    }

    struct Case {
        what: &'static str,
        method: &'static str,
        params: Value,
        client: Client,
        server_era: Era,
        quarantined: bool,
        taint: Result<Option<TaintMark>, String>,
        expect: Admission,
        /// Whether the decision must read the taint state.
        reads: bool,
    }

    fn case(what: &'static str, method: &'static str, params: Value, expect: Admission) -> Case {
        Case {
            what,
            method,
            params,
            client: Client::Legacy("2025-06-18", true),
            server_era: Era::Legacy,
            quarantined: false,
            taint: Ok(None),
            expect,
            reads: false,
        }
    }

    fn forward(taint_after: bool) -> Admission {
        Admission::Forward { taint_after }
    }

    fn item_refusal(code: i64, message: &str) -> Admission {
        Admission::Refuse(Refusal::Item {
            code,
            message: message.into(),
        })
    }

    fn ask(item: &str, arguments: Option<&Value>, by: Ask, taint_after: bool) -> Admission {
        let prompt = match taint::prompt_text("mail", item, arguments, &mark()) {
            Ok(p) => p,
            Err(e) => panic!("prompt: {e}"),
        };
        Admission::Ask {
            mark: mark(),
            prompt,
            by,
            taint_after,
        }
    }

    fn run(c: Case) {
        let entry = entry(c.server_era);
        let labels = Labels::of(&entry);
        let (version, caps) = match c.client {
            Client::Legacy(v, form) => (
                Some(v),
                Some(if form {
                    json!({"elicitation": {}})
                } else {
                    json!({})
                }),
            ),
            Client::Modern(_) => (None, None),
        };
        let mut params = c.params.clone();
        if let (Client::Modern(form), Some(p)) = (c.client, params.as_object_mut()) {
            let caps = if form {
                json!({"elicitation": {"form": {}}})
            } else {
                json!({})
            };
            p.insert(
                "_meta".into(),
                json!({MODERN_META: MODERN_VERSION, META_CAPABILITIES: caps}),
            );
        }
        let facts = Facts {
            server: "mail",
            entry: &entry,
            server_era: c.server_era,
            quarantined: c.quarantined,
            labels: &labels,
            client_version: version,
            client_legacy_caps: caps.as_ref(),
        };
        let call = Call {
            method: c.method,
            request: Request::parse(c.method, Some(&params)),
            meta: params.get("_meta"),
            params: Params::Parsed(Some(&params)),
        };
        let mut taint = Fake {
            state: c.taint,
            reads: 0,
        };
        let got = admit(&call, &facts, &mut taint);
        assert_eq!(got, c.expect, "{}", c.what);
        assert_eq!(
            taint.reads > 0,
            c.reads,
            "{}: reads of the taint state",
            c.what
        );
    }

    #[test]
    fn admission_table() {
        let args = json!({"to": "x@example.com"});
        let tainted = Ok(Some(mark()));
        let cases = vec![
            case("a locked tool", "tools/call", json!({"name": "plain"}), forward(false)),
            case(
                "a source taints after",
                "tools/call",
                json!({"name": "read_mail"}),
                forward(true),
            ),
            case(
                "an unlocked tool",
                "tools/call",
                json!({"name": "ghost"}),
                item_refusal(
                    codes::INVALID_PARAMS,
                    "tool `ghost` is not in mcp.lock for server `mail`; mcpsum serves only locked tools",
                ),
            ),
            case(
                "a task-only tool",
                "tools/call",
                json!({"name": "long_job"}),
                item_refusal(
                    codes::METHOD_NOT_FOUND,
                    "tool `long_job` of server `mail` runs only as a task (`execution.taskSupport` is \"required\"), and mcpsum does not relay tasks: their results would bypass its checks",
                ),
            ),
            case(
                "a missing name",
                "tools/call",
                json!({}),
                Admission::Refuse(Refusal::Params(
                    "invalid params of `tools/call`: missing `name` (the tool to call, a string)"
                        .into(),
                )),
            ),
            case(
                "a locked resource is a source",
                "resources/read",
                json!({"uri": "notes://inbox"}),
                forward(true),
            ),
            case(
                "a template match",
                "resources/read",
                json!({"uri": "notes://note/42"}),
                forward(true),
            ),
            case(
                "past the template",
                "resources/read",
                json!({"uri": "notes://note/42/x"}),
                item_refusal(
                    codes::INVALID_PARAMS,
                    "resource `notes://note/42/x` is not in mcp.lock for server `mail` and matches no locked template",
                ),
            ),
            case(
                "a subscription to a template match",
                "resources/subscribe",
                json!({"uri": "notes://note/7"}),
                forward(false),
            ),
            case(
                "an unlocked prompt",
                "prompts/get",
                json!({"name": "ghost"}),
                item_refusal(
                    codes::INVALID_PARAMS,
                    "prompt `ghost` is not in mcp.lock for server `mail`; mcpsum serves only locked prompts",
                ),
            ),
            case(
                "completion of a locked prompt",
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "greet"}}),
                forward(false),
            ),
            case(
                "an unknown method",
                "tools/destroy",
                json!({}),
                Admission::Refuse(Refusal::Method {
                    code: codes::METHOD_NOT_FOUND,
                    message: "mcpsum does not forward `tools/destroy`".into(),
                }),
            ),
            case("a list", "tools/list", json!({}), Admission::Local),
            Case {
                quarantined: true,
                ..case(
                    "quarantined",
                    "tools/call",
                    json!({"name": "plain"}),
                    Admission::Refuse(Refusal::Quarantined),
                )
            },
            Case {
                quarantined: true,
                ..case(
                    "the handshake while quarantined",
                    "initialize",
                    json!({}),
                    Admission::Local,
                )
            },
            Case {
                quarantined: true,
                ..case(
                    "a list while quarantined",
                    "prompts/list",
                    json!({}),
                    Admission::Refuse(Refusal::Quarantined),
                )
            },
            Case {
                reads: true,
                ..case(
                    "a sink on a clean session",
                    "tools/call",
                    json!({"name": "send", "arguments": args}),
                    forward(false),
                )
            },
            Case {
                reads: true,
                taint: tainted.clone(),
                ..case(
                    "a sink on a tainted session, a legacy client with elicitation",
                    "tools/call",
                    json!({"name": "send", "arguments": args}),
                    ask("send", Some(&args), Ask::Elicitation, false),
                )
            },
            Case {
                reads: true,
                taint: tainted.clone(),
                ..case(
                    "source and sink: asked, and taints after",
                    "tools/call",
                    json!({"name": "fetch", "arguments": args}),
                    ask("fetch", Some(&args), Ask::Elicitation, true),
                )
            },
            Case {
                reads: true,
                taint: tainted.clone(),
                ..case(
                    "a sink prompt label on a tainted session",
                    "prompts/get",
                    json!({"name": "greet"}),
                    ask("greet", None, Ask::Elicitation, false),
                )
            },
            Case {
                taint: tainted.clone(),
                ..case(
                    "a tainted session does not stop a plain tool",
                    "tools/call",
                    json!({"name": "read_mail"}),
                    forward(true),
                )
            },
            Case {
                reads: true,
                taint: tainted.clone(),
                client: Client::Legacy("2025-06-18", false),
                ..case(
                    "a legacy client without elicitation",
                    "tools/call",
                    json!({"name": "send", "arguments": args}),
                    Admission::Refuse(Refusal::Gate(Gated::NoPrompt { mark: mark() })),
                )
            },
            Case {
                reads: true,
                taint: tainted.clone(),
                client: Client::Legacy("2025-03-26", true),
                ..case(
                    "a 2025-03-26 session has no elicitation, whatever it declares",
                    "tools/call",
                    json!({"name": "send", "arguments": args}),
                    Admission::Refuse(Refusal::Gate(Gated::NoPrompt { mark: mark() })),
                )
            },
            Case {
                reads: true,
                taint: tainted.clone(),
                client: Client::Modern(true),
                server_era: Era::Modern,
                ..case(
                    "a 2026-07-28 client with form elicitation",
                    "tools/call",
                    json!({"name": "send", "arguments": args}),
                    ask("send", Some(&args), Ask::InputRequired, false),
                )
            },
            Case {
                reads: true,
                taint: tainted.clone(),
                client: Client::Modern(false),
                ..case(
                    "a 2026-07-28 client without elicitation",
                    "tools/call",
                    json!({"name": "send", "arguments": args}),
                    Admission::Refuse(Refusal::Gate(Gated::NoPrompt { mark: mark() })),
                )
            },
            Case {
                reads: true,
                taint: tainted.clone(),
                client: Client::Modern(false),
                ..case(
                    "a 2026-07-28 retry with mcpsum's answer is checked, capability or not",
                    "tools/call",
                    json!({"name": "send", "arguments": args, "requestState": "opaque",
                           "inputResponses": {INPUT_KEY: {"action": "accept"}}}),
                    ask("send", Some(&args), Ask::Retry, false),
                )
            },
            Case {
                reads: true,
                taint: tainted.clone(),
                ..case(
                    "arguments a prompt cannot show whole",
                    "tools/call",
                    json!({"name": "send", "arguments": {"body": "x".repeat(200_000)}}),
                    Admission::Refuse(Refusal::Gate(Gated::Unshowable {
                        mark: mark(),
                        why: match taint::prompt_text(
                            "mail",
                            "send",
                            Some(&json!({"body": "x".repeat(200_000)})),
                            &mark(),
                        ) {
                            Ok(_) => panic!("a prompt showed 200 kB of arguments"),
                            Err(why) => why,
                        },
                    })),
                )
            },
            Case {
                reads: true,
                taint: Err("permission denied".into()),
                ..case(
                    "an unreadable taint state fails closed",
                    "tools/call",
                    json!({"name": "send"}),
                    Admission::Refuse(Refusal::Gate(Gated::TaintUnreadable(
                        "mcpsum cannot read this session's taint state (permission denied), so it refuses calls that need approval".into(),
                    ))),
                )
            },
            Case {
                client: Client::Modern(true),
                ..case(
                    "a method 2026-07-28 removed",
                    "resources/subscribe",
                    json!({"uri": "notes://inbox"}),
                    Admission::Refuse(Refusal::Removed(removed_in_modern("resources/subscribe"))),
                )
            },
            case(
                "a version mcpsum does not speak",
                "tools/call",
                json!({"name": "plain", "_meta": {MODERN_META: "2099-01-01"}}),
                Admission::Refuse(Refusal::Meta {
                    code: codes::UNSUPPORTED_VERSION,
                    message: format!("unsupported protocol version `2099-01-01`: send {MODERN_VERSION}, or `initialize` for an earlier version"),
                    data: Some(json!({"supported": [MODERN_VERSION], "requested": "2099-01-01"})),
                }),
            ),
            case(
                "client capabilities without a version: a 2026-07-28 request missing its version",
                "tools/list",
                json!({"_meta": {META_CAPABILITIES: {}}}),
                Admission::Refuse(Refusal::Meta {
                    code: codes::INVALID_PARAMS,
                    message: format!("`tools/list` needs `_meta[\"{META_VERSION}\"]` (a string)"),
                    data: None,
                }),
            ),
            Case {
                quarantined: true,
                ..case(
                    "`_meta` is checked before quarantine",
                    "tools/call",
                    json!({"name": "plain", "_meta": {MODERN_META: MODERN_VERSION}}),
                    Admission::Refuse(Refusal::Meta {
                        code: codes::INVALID_PARAMS,
                        message: format!("`tools/call` needs `_meta[\"{META_CAPABILITIES}\"]` (an object; `{{}}` declares none)"),
                        data: None,
                    }),
                )
            },
        ];
        for c in cases {
            run(c);
        }
    }

    /// The fast path's view of a call (scanned, not parsed) gets the same answer.
    #[test]
    fn scanned_params_read_the_same() {
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send","arguments":{"to":"x@example.com"},"requestState":"s","inputResponses":{"io.mcpsum/approval":{}}}}"#;
        let mut scan = crate::mcp::envelope::Scan::default();
        let m = match scan.message(line.as_bytes()) {
            Ok(m) => m,
            Err(e) => panic!("scan: {e:?}"),
        };
        let parsed: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
        let (a, b) = (Params::Scanned(m), Params::Parsed(parsed.get("params")));
        assert_eq!(a.arguments(), b.arguments());
        assert!(a.answers_approval() && b.answers_approval());
    }
}
