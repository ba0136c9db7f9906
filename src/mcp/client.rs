//! A sequential MCP client over a server's stdio: era detection exactly as the lockfile format's
//! "Protocol era" section says, and every page of every list.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt;

use super::framing::{self, Frame};
use super::process::{ServerProcess, SpawnError, Start};
use super::{
    LATEST_LEGACY, LEGACY_VERSIONS, META_CAPABILITIES, META_CLIENT_INFO, META_SERVER_INFO,
    META_VERSION, MODERN_VERSION, client_capabilities, client_info, codes,
};
use crate::lockfile::{Era, Kind, MAX_ITEMS_PER_KIND, Surface};
use crate::progress::{self, Phase, Reporter};
use crate::protocol::BATCH_VERSION;

/// Pages after which a list is considered endless even if every page is empty.
const MAX_PAGES: usize = MAX_ITEMS_PER_KIND + 1;

/// The longest `nextCursor` taken, in bytes. A cursor is an opaque token, and servers send short
/// ones (an offset or a page token: tens of bytes, a few KiB at the very most for one that
/// carries a whole query), so 64 KiB leaves ample room. The bound is what matters: each cursor
/// is sent back in the next request, so without it a server could make mcpsum hold and write up
/// to the 64 MiB message limit on each of [`MAX_PAGES`] pages; with it, one cursor of at most
/// 64 KiB is held at a time and about 64 MiB are sent back in all.
const MAX_CURSOR_BYTES: usize = 64 * 1024;

/// Lines that are not JSON-RPC a server may write on its stdout over one connection, skipped
/// with a warning (a banner, a stray `print`), before mcpsum gives up on it. The SDK clients skip
/// such lines; past this many, the server is not speaking MCP on its stdout.
pub const MAX_SKIPPED_LINES: usize = 100;
/// Bytes of such lines, in all, before mcpsum gives up.
pub const MAX_SKIPPED_BYTES: usize = 1024 * 1024;

/// Why talking to a server failed.
#[derive(Debug)]
pub enum ClientError {
    /// It could not be started.
    Spawn(SpawnError),
    /// No answer within the timeout. `after_probe`: the server was silent on the era probe
    /// (`server/discover`) first, which means a legacy server, and was started afresh for
    /// `initialize`, so mcpsum waited `secs` twice.
    Timeout {
        method: String,
        secs: u64,
        after_probe: bool,
    },
    /// It closed stdout or exited.
    Exited {
        method: String,
        status: Option<String>,
    },
    /// It answered with a JSON-RPC error.
    Rpc {
        method: String,
        code: i64,
        message: String,
        data: Option<Box<Value>>,
    },
    /// A 2026-07-28 server no longer supports the version mcpsum speaks (-32022).
    VersionDropped {
        /// The versions it says it supports.
        supported: Vec<String>,
    },
    /// A 2026-07-28 server's `server/discover` result does not list the version mcpsum speaks
    /// (the text says so).
    VersionNotListed(String),
    /// It broke the protocol (not JSON, too large, wrong shapes, lists that never end, ...).
    Protocol(String),
    /// It was asked in one era only ([`Ask::Only`]) and does not speak it: `error` is how it
    /// answered that era's handshake.
    EraRefused {
        /// The era asked.
        era: Era,
        /// What happened to its handshake.
        error: Box<ClientError>,
    },
    /// It completed its handshake, then `error` happened while listing with `method`. Kept
    /// apart because the handshake shows the server started and speaks MCP on stdio, so a hint
    /// about its command or environment would mislead.
    Listing {
        method: &'static str,
        error: Box<ClientError>,
    },
    /// Writing to it failed.
    Io(std::io::Error),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Spawn(e) => write!(f, "{e}"),
            ClientError::Timeout {
                method,
                secs,
                after_probe: true,
            } => write!(
                f,
                "no answer to `server/discover` within {secs} s (silence there means a legacy server), nor to `{method}` within {secs} s after mcpsum started the server afresh: {} s in all",
                secs.saturating_mul(2)
            ),
            ClientError::Timeout { method, secs, .. } => {
                write!(f, "no answer to `{method}` within {secs} s")
            }
            ClientError::Exited { method, status } => match status {
                Some(s) => write!(
                    f,
                    "the server exited ({s}) while mcpsum waited for `{method}`"
                ),
                None => write!(
                    f,
                    "the server closed its stdout while mcpsum waited for `{method}`"
                ),
            },
            ClientError::Rpc {
                method,
                code,
                message,
                ..
            } => {
                write!(f, "`{method}` failed with JSON-RPC error {code}: {message}")
            }
            ClientError::VersionDropped { supported } => write!(
                f,
                "the server does not support protocol version {MODERN_VERSION} (it answered -32022 and supports: {}); mcpsum speaks only {MODERN_VERSION} in that era, so it does not fall back to `initialize`",
                if supported.is_empty() {
                    "nothing it named".to_owned()
                } else {
                    supported.join(", ")
                }
            ),
            ClientError::Protocol(m) | ClientError::VersionNotListed(m) => f.write_str(m),
            ClientError::Listing { error, .. } => write!(f, "{error}"),
            ClientError::EraRefused {
                era: Era::Modern,
                error,
            } => write!(
                f,
                "the server does not speak {MODERN_VERSION}: it did not answer `server/discover` as a {MODERN_VERSION} server ({error})"
            ),
            ClientError::EraRefused {
                era: Era::Legacy,
                error,
            } => write!(
                f,
                "the server does not speak the legacy era: it refused `initialize` ({error})"
            ),
            ClientError::Io(e) => write!(f, "cannot write to the server: {e}"),
        }
    }
}

impl ClientError {
    /// Whether mcpsum gave up waiting for the server (also while listing).
    pub fn is_timeout(&self) -> bool {
        match self {
            ClientError::Timeout { .. } => true,
            ClientError::Listing { error, .. } | ClientError::EraRefused { error, .. } => {
                error.is_timeout()
            }
            _ => false,
        }
    }

    /// Whether a 2026-07-28 server no longer supports the version mcpsum speaks in that era
    /// (it answered -32022, or its `server/discover` result does not list it).
    pub fn is_version_drop(&self) -> bool {
        matches!(
            self,
            ClientError::VersionDropped { .. } | ClientError::VersionNotListed(_)
        )
    }
}

/// A connection in one era, after its handshake.
pub struct Connection {
    /// The running server.
    pub process: ServerProcess,
    era: Era,
    version: String,
    next_id: u64,
    timeout: Duration,
    max_message: usize,
    progress: Option<Reporter>,
    /// The rest of a batch the server sent (2025-03-26), not yet handled.
    queued: VecDeque<Value>,
    /// The server's name, for warnings.
    server: String,
    /// What was said of each skipped line that is not JSON-RPC (for the proxy's audit log).
    skipped: Vec<String>,
    /// How many lines were skipped, and their bytes.
    skipped_lines: usize,
    skipped_bytes: usize,
}

/// What the handshake (legacy `initialize` or modern `server/discover`) told.
#[derive(Debug, Clone)]
pub struct Handshake {
    /// The era spoken.
    pub era: Era,
    /// The negotiated or picked version.
    pub protocol_version: String,
    /// Modern: the versions listed.
    pub supported_versions: Option<Vec<String>>,
    /// `serverInfo`.
    pub server_info: Value,
    /// `capabilities`.
    pub capabilities: Value,
    /// `instructions`.
    pub instructions: Option<String>,
}

impl Handshake {
    /// The whole surface: this handshake and the items read after it.
    pub fn into_surface(self, items: BTreeMap<Kind, Vec<Value>>) -> Surface {
        Surface {
            era: self.era,
            protocol_version: self.protocol_version,
            supported_versions: self.supported_versions,
            server_info: self.server_info,
            capabilities: self.capabilities,
            instructions: self.instructions,
            items,
        }
    }
}

impl Connection {
    async fn start(launch: &dyn Start, opts: &Options) -> Result<Self, ClientError> {
        progress::set(opts.progress.as_ref(), Phase::Starting);
        let process = ServerProcess::spawn(launch)
            .await
            .map_err(ClientError::Spawn)?;
        Ok(Self {
            process,
            era: Era::Legacy,
            version: LATEST_LEGACY.to_owned(),
            next_id: 0,
            timeout: opts.timeout,
            max_message: opts.max_message,
            progress: opts.progress.clone(),
            queued: VecDeque::new(),
            server: launch.server().to_owned(),
            skipped: Vec::new(),
            skipped_lines: 0,
            skipped_bytes: 0,
        })
    }

    /// The era of this connection.
    pub fn era(&self) -> Era {
        self.era
    }

    /// Sends a request and waits for its answer, answering the server's own `ping` and refusing
    /// its other requests meanwhile. Notifications are ignored.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let params = match self.era {
            Era::Modern => with_modern_meta(params, &self.version, client_capabilities()),
            Era::Legacy => params,
        };
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.send(&msg).await?;
        let secs = self.timeout.as_secs();
        match tokio::time::timeout(self.timeout, self.await_response(id, method)).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::Timeout {
                method: method.to_owned(),
                secs,
                after_probe: false,
            }),
        }
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str, params: Value) -> Result<(), ClientError> {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.send(&msg).await
    }

    async fn send(&mut self, msg: &Value) -> Result<(), ClientError> {
        let Some(stdin) = self.process.stdin.as_mut() else {
            return Err(ClientError::Io(std::io::Error::other("stdin closed")));
        };
        let line = framing::encode(msg);
        let write = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        match tokio::time::timeout(self.timeout, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(ClientError::Exited {
                method: msg["method"].as_str().unwrap_or_default().to_owned(),
                status: self.exit_status().await,
            }),
            Ok(Err(e)) => Err(ClientError::Io(e)),
            Err(_) => Err(ClientError::Timeout {
                method: msg["method"].as_str().unwrap_or_default().to_owned(),
                secs: self.timeout.as_secs(),
                after_probe: false,
            }),
        }
    }

    async fn exit_status(&mut self) -> Option<String> {
        match tokio::time::timeout(Duration::from_millis(300), self.process.child.wait()).await {
            Ok(Ok(s)) => Some(s.to_string()),
            _ => None,
        }
    }

    async fn await_response(&mut self, id: u64, method: &str) -> Result<Value, ClientError> {
        loop {
            let msg = match self.queued.pop_front() {
                Some(msg) => msg,
                None => self.read_message(method).await?,
            };
            let Some(obj) = msg.as_object() else {
                // The SDK clients skip these as they skip lines that are not JSON.
                self.skip_line(
                    "a JSON value that is not a JSON-RPC message",
                    &serde_json::to_vec(&msg).unwrap_or_default(),
                    method,
                )?;
                continue;
            };
            if let Some(m) = obj.get("method").and_then(Value::as_str) {
                if let Some(req_id) = obj.get("id") {
                    // A request from the server: answer ping and roots/list (mcpsum declares
                    // `roots`, and has none to give: the server keeps its own), refuse the rest.
                    let reply = if m == "ping" {
                        json!({"jsonrpc": "2.0", "id": req_id, "result": {}})
                    } else if m == "roots/list" {
                        json!({"jsonrpc": "2.0", "id": req_id, "result": {"roots": []}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": req_id, "error": {"code": codes::METHOD_NOT_FOUND, "message": format!("mcpsum does not answer `{m}` here")}})
                    };
                    self.send(&reply).await?;
                }
                continue;
            }
            if obj.get("id").and_then(Value::as_u64) != Some(id) {
                // An answer to something we did not ask (or no longer wait for): ignore it.
                continue;
            }
            if let Some(err) = obj.get("error") {
                return Err(ClientError::Rpc {
                    method: method.to_owned(),
                    code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .chars()
                        .take(300)
                        .collect(),
                    data: err.get("data").cloned().map(Box::new),
                });
            }
            let result = match msg {
                Value::Object(mut obj) => obj.remove("result"),
                _ => None,
            };
            return result.ok_or_else(|| {
                ClientError::Protocol(format!(
                    "the answer to `{method}` has neither `result` nor `error`"
                ))
            });
        }
    }

    /// Reads the server's next message. A 2025-03-26 server may send a batch: its first
    /// message is returned and the rest queued, in order.
    async fn read_message(&mut self, method: &str) -> Result<Value, ClientError> {
        loop {
            if let Some(msg) = self.read_json(method).await? {
                return Ok(msg);
            }
        }
    }

    /// Reads the server's next line as JSON; `Ok(None)` for a line that is not JSON, skipped.
    async fn read_json(&mut self, method: &str) -> Result<Option<Value>, ClientError> {
        let Some(stdout) = self.process.stdout.as_mut() else {
            return Err(ClientError::Io(std::io::Error::other("stdout taken")));
        };
        let frame = framing::read_frame(stdout, self.max_message)
            .await
            .map_err(ClientError::Io)?;
        let line = match frame {
            None => {
                return Err(ClientError::Exited {
                    method: method.to_owned(),
                    status: self.exit_status().await,
                });
            }
            Some(Frame::TooLong(n)) => {
                return Err(ClientError::Protocol(format!(
                    "the server sent a message of {n} bytes while mcpsum waited for `{method}`; the limit is {} bytes",
                    self.max_message
                )));
            }
            Some(Frame::Line(line)) => line,
        };
        let msg = match crate::canonical::parse_strict_slice(&line) {
            Ok(msg) => msg,
            Err(_) => {
                self.skip_line("a line that is not JSON", &line, method)?;
                return Ok(None);
            }
        };
        match msg {
            Value::Array(items) if self.version == BATCH_VERSION && !items.is_empty() => {
                let mut items = items.into_iter();
                let first = items.next().unwrap_or_default();
                self.queued.extend(items);
                Ok(Some(first))
            }
            Value::Array(_) => Err(ClientError::Protocol(format!(
                "the server sent a JSON-RPC batch while mcpsum waited for `{method}`; only protocol version {BATCH_VERSION} allows batches, and this link speaks {}: {}",
                self.version,
                preview(&line)
            ))),
            msg => Ok(Some(msg)),
        }
    }

    /// Skips a line of the server's stdout that is not a JSON-RPC message, with a warning, or
    /// gives up past [`MAX_SKIPPED_LINES`] or [`MAX_SKIPPED_BYTES`].
    fn skip_line(&mut self, what: &str, line: &[u8], method: &str) -> Result<(), ClientError> {
        self.skipped_lines += 1;
        self.skipped_bytes = self.skipped_bytes.saturating_add(line.len());
        if self.skipped_lines > MAX_SKIPPED_LINES || self.skipped_bytes > MAX_SKIPPED_BYTES {
            return Err(ClientError::Protocol(format!(
                "the server wrote more than {MAX_SKIPPED_LINES} lines (or {MAX_SKIPPED_BYTES} bytes) that are not JSON-RPC on its stdout while mcpsum waited for `{method}` (the last: {}); an MCP server writes only JSON-RPC messages there, and logs on stderr",
                preview(line)
            )));
        }
        crate::output::warn(&format!(
            "server `{}` wrote {what} on its stdout while mcpsum waited for `{method}`; skipped it: {}",
            crate::text::sanitize_line(&self.server),
            preview(line)
        ));
        self.skipped
            .push(format!("{what} ({} bytes), skipped", line.len()));
        Ok(())
    }

    /// What was said of each line that was skipped as not JSON-RPC so far (the proxy records
    /// them in its audit log).
    pub fn take_skipped(&mut self) -> Vec<String> {
        self.skipped.drain(..).collect()
    }

    /// What is left of a batch the server sent, for whoever reads the link next.
    pub fn take_queued(&mut self) -> Vec<Value> {
        self.queued.drain(..).collect()
    }

    /// The protocol version spoken on this link.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The next request id this connection would use (the proxy continues from it).
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Ends the server and its process tree.
    pub async fn close(mut self) {
        self.process.shutdown(Duration::from_millis(500)).await;
    }

    /// Ends the server and its process tree at once (see [`ServerProcess::kill_now`]).
    async fn kill(mut self) {
        self.process.kill_now().await;
    }

    async fn legacy_handshake(&mut self) -> Result<Handshake, ClientError> {
        self.era = Era::Legacy;
        let result = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": LATEST_LEGACY,
                    "capabilities": client_capabilities(),
                    "clientInfo": client_info(),
                }),
            )
            .await?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ClientError::Protocol("the `initialize` result has no `protocolVersion`".into())
            })?;
        if !LEGACY_VERSIONS.contains(&version) {
            return Err(ClientError::Protocol(format!(
                "the server answered `initialize` with protocol version `{version}`, which mcpsum does not speak (it speaks {})",
                LEGACY_VERSIONS.join(", ")
            )));
        }
        let server_info = object_field(&result, "serverInfo", "initialize")?;
        let capabilities = object_field(&result, "capabilities", "initialize")?;
        let instructions = string_or_absent(&result, "instructions", "initialize")?;
        self.version = version.to_owned();
        self.notify("notifications/initialized", Value::Null)
            .await?;
        Ok(Handshake {
            era: Era::Legacy,
            protocol_version: version.to_owned(),
            supported_versions: None,
            server_info,
            capabilities,
            instructions,
        })
    }

    /// Sends the era probe. `Ok(Probe::Modern)` is a modern server, `Ok(Probe::Legacy)` means
    /// "fall back to legacy" (with the answer that says so), `Err` fails the lock (a recognized
    /// 2026-07-28 error or a bad DiscoverResult).
    async fn modern_probe(&mut self) -> Result<Probe, ClientError> {
        self.era = Era::Legacy; // send the probe's `_meta` by hand
        let params = with_modern_meta(Value::Null, MODERN_VERSION, json!({}));
        let result = match self.request("server/discover", params).await {
            Ok(r) => r,
            Err(ClientError::Rpc { code, data, .. }) if code == codes::UNSUPPORTED_VERSION => {
                let supported = data
                    .as_ref()
                    .and_then(|d| d.get("supported"))
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                return Err(ClientError::VersionDropped { supported });
            }
            Err(ClientError::Rpc { code, message, .. }) if code == codes::MISSING_CAPABILITY => {
                return Err(ClientError::Protocol(format!(
                    "the server answered `server/discover` with the 2026-07-28 error {code} ({message}); mcpsum speaks only {MODERN_VERSION} in that era, so it does not fall back to `initialize`"
                )));
            }
            Err(
                e @ (ClientError::Rpc { .. }
                | ClientError::Timeout { .. }
                | ClientError::Exited { .. }),
            ) => {
                return Ok(Probe::Legacy(e));
            }
            Err(e) => return Err(e),
        };
        let hs = parse_discover(&result)?;
        self.era = Era::Modern;
        self.version = MODERN_VERSION.to_owned();
        Ok(Probe::Modern(hs))
    }

    /// Reads every page of one list. A kind whose capability the server did not advertise is
    /// empty. Any failure is [`ClientError::Listing`].
    pub async fn list_all(
        &mut self,
        kind: Kind,
        capabilities: &Value,
    ) -> Result<Vec<Value>, ClientError> {
        if capabilities.get(kind.capability()).is_none() {
            return Ok(Vec::new());
        }
        self.list_pages(kind)
            .await
            .map_err(|error| ClientError::Listing {
                method: kind.list_method(),
                error: Box::new(error),
            })
    }

    async fn list_pages(&mut self, kind: Kind) -> Result<Vec<Value>, ClientError> {
        let method = kind.list_method();
        let mut items = Vec::new();
        // SHA-256 of each cursor, not the cursor: up to MAX_PAGES of them are kept to tell a
        // repeat, and keeping them whole would hold up to MAX_PAGES * MAX_CURSOR_BYTES.
        let mut seen_cursors: HashSet<[u8; 32]> = HashSet::new();
        let mut cursor: Option<String> = None;
        for page in 1..=MAX_PAGES {
            progress::set(self.progress.as_ref(), Phase::Listing(kind.plural(), page));
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None if self.era == Era::Modern => json!({}),
                None => Value::Null,
            };
            let mut result = self.request(method, params).await?;
            if self.era == Era::Modern {
                check_complete(&result, method)?;
            }
            let page = result
                .get_mut(kind.field())
                .and_then(Value::as_array_mut)
                .ok_or_else(|| {
                    ClientError::Protocol(format!(
                        "the `{method}` result has no `{}` array",
                        kind.field()
                    ))
                })?;
            items.append(page);
            if items.len() > MAX_ITEMS_PER_KIND {
                return Err(ClientError::Protocol(format!(
                    "the server lists more than {MAX_ITEMS_PER_KIND} {}; mcpsum never pins a partial surface",
                    kind.plural()
                )));
            }
            match result.get("nextCursor") {
                None | Some(Value::Null) => return Ok(items),
                Some(Value::String(next)) => {
                    if next.len() > MAX_CURSOR_BYTES {
                        return Err(ClientError::Protocol(format!(
                            "the server sent a `{method}` cursor of {} bytes; mcpsum takes cursors of at most {MAX_CURSOR_BYTES} bytes and never pins a partial surface",
                            next.len()
                        )));
                    }
                    if !seen_cursors.insert(Sha256::digest(next.as_bytes()).into()) {
                        return Err(ClientError::Protocol(format!(
                            "the server repeated the `{method}` cursor `{}`; mcpsum never pins a partial surface",
                            preview(next.as_bytes())
                        )));
                    }
                    cursor = Some(next.clone());
                }
                Some(other) => {
                    return Err(ClientError::Protocol(format!(
                        "the `{method}` result has a `nextCursor` that is not a string: {other}"
                    )));
                }
            }
        }
        Err(ClientError::Protocol(format!(
            "the server pages `{method}` without end (more than {MAX_PAGES} pages)"
        )))
    }
}

/// Adds the 2026-07-28 `_meta` triple to request params.
pub fn with_modern_meta(params: Value, version: &str, capabilities: Value) -> Value {
    let mut obj = match params {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(m) = meta.as_object_mut() {
        m.insert(META_VERSION.into(), Value::String(version.to_owned()));
        m.insert(META_CAPABILITIES.into(), capabilities);
        m.insert(META_CLIENT_INFO.into(), client_info());
    }
    Value::Object(obj)
}

fn check_complete(result: &Value, method: &str) -> Result<(), ClientError> {
    match result.get("resultType") {
        None => Ok(()),
        Some(Value::String(s)) if s == "complete" => Ok(()),
        Some(other) => Err(ClientError::Protocol(format!(
            "the `{method}` result has resultType {other}; mcpsum locks only complete results"
        ))),
    }
}

/// Validates a DiscoverResult as the lockfile format's rule 2 asks.
fn parse_discover(result: &Value) -> Result<Handshake, ClientError> {
    let describe = |why: &str| {
        format!(
            "the server's `server/discover` result {why}; mcpsum does not fall back to `initialize` after a DiscoverResult"
        )
    };
    let bad = |why: &str| ClientError::Protocol(describe(why));
    match result.get("resultType") {
        Some(Value::String(s)) if s == "complete" => {}
        Some(other) => return Err(bad(&format!("has resultType {other}, not \"complete\""))),
        None => return Err(bad("has no resultType")),
    }
    let versions: Vec<String> = result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("has no `supportedVersions` array"))?
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| bad("lists a version that is not a string"))
        })
        .collect::<Result<_, _>>()?;
    if !versions.iter().any(|v| v == MODERN_VERSION) {
        return Err(ClientError::VersionNotListed(describe(&format!(
            "does not list {MODERN_VERSION} (it lists {})",
            versions.join(", ")
        ))));
    }
    let server_info = result
        .get("_meta")
        .and_then(|m| m.get(META_SERVER_INFO))
        .filter(|v| v.is_object())
        .cloned()
        .ok_or_else(|| bad(&format!("has no `_meta[\"{META_SERVER_INFO}\"]` object")))?;
    let capabilities = object_field(result, "capabilities", "server/discover")?;
    let instructions = string_or_absent(result, "instructions", "server/discover")?;
    Ok(Handshake {
        era: Era::Modern,
        protocol_version: MODERN_VERSION.to_owned(),
        supported_versions: Some(versions),
        server_info,
        capabilities,
        instructions,
    })
}

fn object_field(result: &Value, field: &str, method: &str) -> Result<Value, ClientError> {
    match result.get(field) {
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        _ => Err(ClientError::Protocol(format!(
            "the `{method}` result has no `{field}` object"
        ))),
    }
}

fn string_or_absent(
    result: &Value,
    field: &str,
    method: &str,
) -> Result<Option<String>, ClientError> {
    match result.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ClientError::Protocol(format!(
            "the `{method}` result has an `{field}` that is not a string"
        ))),
    }
}

fn preview(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let mut out: String = s.chars().take(120).collect();
    if s.chars().count() > 120 {
        out.push('…');
    }
    format!("{out:?}")
}

/// What the era probe found.
enum Probe {
    /// A 2026-07-28 server.
    Modern(Handshake),
    /// Not one: the probe's error, silence or exit, which means "legacy" to era detection.
    Legacy(ClientError),
}

/// Which era to ask a server in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Era detection as the lockfile format says (a new entry, `lock --era auto`).
    Detect,
    /// The locked era first, and on a refused `initialize` a probe, so that the caller can
    /// report an era change (verify, the proxy).
    Locked(Era),
    /// This era and no other: a server that does not speak it fails with
    /// [`ClientError::EraRefused`] (`lock --era legacy|modern`, and a re-lock, which keeps the
    /// entry's era rather than switching it silently).
    Only(Era),
}

/// Options for opening a connection.
#[derive(Debug, Clone)]
pub struct Options {
    /// Bound on each wait for one answer of the server (`--timeout-secs`).
    pub timeout: Duration,
    /// Bound on each message.
    pub max_message: usize,
    /// Where to show what the connection waits for (`lock` and `verify` on a terminal).
    pub progress: Option<Reporter>,
}

/// A failure with the server's last stderr lines.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong.
    pub error: ClientError,
    /// The server's last stderr lines.
    pub stderr: Vec<String>,
    /// The connections its sandbox's egress proxy refused during this start (often what made
    /// it fail), and how many more there were.
    pub egress: (Vec<crate::refusals::EgressRefusal>, usize),
}

impl Failure {
    /// A failure before the server ran: no stderr, no egress.
    pub fn before_start(error: ClientError) -> Self {
        Self {
            error,
            stderr: Vec::new(),
            egress: (Vec::new(), 0),
        }
    }
}

async fn fail(conn: Connection, error: ClientError) -> Failure {
    // Give the server a moment to flush stderr explaining why it failed.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stderr = conn.process.stderr.lines();
    let egress = conn.process.egress_refusals();
    if error.is_timeout() {
        // It had the time `--timeout-secs` allows: stopping it must not stretch that.
        conn.kill().await;
    } else {
        conn.close().await;
    }
    Failure {
        error,
        stderr,
        egress,
    }
}

async fn start(launch: &dyn Start, opts: &Options) -> Result<Connection, Failure> {
    Connection::start(launch, opts)
        .await
        .map_err(Failure::before_start)
}

/// Starts the server and performs the handshake. With `locked: Some(era)` the server is asked in
/// that era first (verify, re-lock, proxy); otherwise era detection runs as the format says:
/// probe with `server/discover`, and on any other error, silence or exit start a fresh process
/// and `initialize`.
pub async fn connect(
    launch: &dyn Start,
    locked: Option<Era>,
    opts: Options,
) -> Result<(Connection, Handshake), Failure> {
    connect_as(launch, locked.map_or(Ask::Detect, Ask::Locked), opts).await
}

/// [`connect`] in the era `ask` says.
pub async fn connect_as(
    launch: &dyn Start,
    ask: Ask,
    opts: Options,
) -> Result<(Connection, Handshake), Failure> {
    match ask {
        Ask::Only(Era::Legacy) => {
            let mut conn = start(launch, &opts).await?;
            return match conn.legacy_handshake().await {
                Ok(hs) => Ok((conn, hs)),
                Err(error @ ClientError::Rpc { .. }) => {
                    let error = ClientError::EraRefused {
                        era: Era::Legacy,
                        error: Box::new(error),
                    };
                    Err(fail(conn, error).await)
                }
                Err(e) => Err(fail(conn, e).await),
            };
        }
        Ask::Only(Era::Modern) => {
            let mut conn = start(launch, &opts).await?;
            return match conn.modern_probe().await {
                Ok(Probe::Modern(hs)) => Ok((conn, hs)),
                Ok(Probe::Legacy(error)) => {
                    let error = ClientError::EraRefused {
                        era: Era::Modern,
                        error: Box::new(error),
                    };
                    Err(fail(conn, error).await)
                }
                Err(e) => Err(fail(conn, e).await),
            };
        }
        Ask::Detect | Ask::Locked(_) => {}
    }
    if ask == Ask::Locked(Era::Legacy) {
        let mut conn = start(launch, &opts).await?;
        return match conn.legacy_handshake().await {
            Ok(hs) => Ok((conn, hs)),
            Err(legacy_err @ ClientError::Rpc { .. }) => {
                // The server refused `initialize`: it may have moved to 2026-07-28. Probe it on a
                // fresh process so the caller can report the era change.
                let first = fail(conn, legacy_err).await;
                let mut conn = start(launch, &opts).await?;
                match conn.modern_probe().await {
                    Ok(Probe::Modern(hs)) => Ok((conn, hs)),
                    Ok(Probe::Legacy(e)) | Err(e) if e.is_timeout() => {
                        conn.kill().await;
                        Err(first)
                    }
                    _ => {
                        conn.close().await;
                        Err(first)
                    }
                }
            }
            Err(e) => Err(fail(conn, e).await),
        };
    }
    let mut conn = start(launch, &opts).await?;
    match conn.modern_probe().await {
        Ok(Probe::Modern(hs)) => Ok((conn, hs)),
        Ok(Probe::Legacy(probe)) => {
            // A legacy server may have exited or wedged on the probe: start it afresh. One
            // that stayed silent for the whole timeout is killed rather than given a grace.
            let silent = probe.is_timeout();
            if silent {
                conn.kill().await;
            } else {
                conn.close().await;
            }
            let mut conn = start(launch, &opts).await?;
            match conn.legacy_handshake().await {
                Ok(hs) => Ok((conn, hs)),
                // Say that mcpsum waited twice, or `--timeout-secs 3` reads as if it took 6 s.
                Err(ClientError::Timeout { method, secs, .. }) if silent => {
                    let error = ClientError::Timeout {
                        method,
                        secs,
                        after_probe: true,
                    };
                    Err(fail(conn, error).await)
                }
                Err(e) => Err(fail(conn, e).await),
            }
        }
        Err(e) => Err(fail(conn, e).await),
    }
}

/// Connects and reads the whole surface; the server is ended afterwards.
pub async fn read_surface(
    launch: &dyn Start,
    locked: Option<Era>,
    opts: Options,
) -> Result<Surface, Failure> {
    read_surface_as(launch, locked.map_or(Ask::Detect, Ask::Locked), opts).await
}

/// [`read_surface`] in the era `ask` says.
pub async fn read_surface_as(
    launch: &dyn Start,
    ask: Ask,
    opts: Options,
) -> Result<Surface, Failure> {
    let reporter = opts.progress.clone();
    let result = async {
        let (mut conn, hs) = connect_as(launch, ask, opts).await?;
        match read_lists(&mut conn, &hs).await {
            Ok(items) => {
                conn.close().await;
                Ok(hs.into_surface(items))
            }
            Err(e) => Err(fail(conn, e).await),
        }
    }
    .await;
    progress::set(reporter.as_ref(), Phase::Done);
    result
}

/// Reads all four lists of a connected server.
pub async fn read_lists(
    conn: &mut Connection,
    hs: &Handshake,
) -> Result<BTreeMap<Kind, Vec<Value>>, ClientError> {
    let mut items = BTreeMap::new();
    for kind in Kind::ALL {
        items.insert(kind, conn.list_all(kind, &hs.capabilities).await?);
    }
    Ok(items)
}
