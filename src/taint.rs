//! Taint tracking (I6): labels, the per-client-session state shared by every proxy of a client,
//! and the unforgeable approval state handed to 2026-07-28 clients.
//!
//! A session's state lives in `<state dir>/taint/<session>.json`; every proxy of that client
//! updates it under an advisory lock on `<session>.lock` and replaces it atomically. A proxy keeps
//! the last state it read and re-reads only when the file's modification time or size changed, so
//! the check on a clean session costs one `stat`. The state directory is never writable from a
//! sandbox (the sandbox refuses write rules that cover it), so a server cannot clear its own taint.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::lockfile::{PROMPTS_WILDCARD, RESOURCES_WILDCARD, ServerEntry, Sha256Digest};
use crate::session::Session;

/// What a call is, for labelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call<'a> {
    /// `tools/call` of this tool.
    Tool(&'a str),
    /// `resources/read`.
    ResourceRead,
    /// `prompts/get`.
    PromptGet,
}

impl Call<'_> {
    /// The label that names this call in `policy.taint`.
    pub fn label(&self) -> &str {
        match self {
            Call::Tool(name) => name,
            Call::ResourceRead => RESOURCES_WILDCARD,
            Call::PromptGet => PROMPTS_WILDCARD,
        }
    }
}

/// A server's taint labels.
#[derive(Debug, Clone, Default)]
pub struct Labels {
    sources: BTreeSet<String>,
    sinks: BTreeSet<String>,
}

impl Labels {
    /// The labels of a locked entry (empty without `policy.taint`).
    pub fn of(entry: &ServerEntry) -> Self {
        entry.taint().map_or_else(Self::default, |t| Self {
            sources: t.sources.iter().cloned().collect(),
            sinks: t.sinks.iter().cloned().collect(),
        })
    }

    /// Whether a successful result of `call` taints the session.
    pub fn is_source(&self, call: Call<'_>) -> bool {
        self.sources.contains(call.label())
    }

    /// Whether `call` needs approval while the session is tainted.
    pub fn is_sink(&self, call: Call<'_>) -> bool {
        self.sinks.contains(call.label())
    }

    /// Whether any source label is set.
    pub fn has_sources(&self) -> bool {
        !self.sources.is_empty()
    }

    /// Whether any label is set.
    pub fn any(&self) -> bool {
        !self.sources.is_empty() || !self.sinks.is_empty()
    }
}

/// Where and when a session was tainted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaintMark {
    /// The server whose source result reached the client.
    pub server: String,
    /// The source (tool name, `resources:*` or `prompts:*`) and its item.
    pub item: String,
    /// When (RFC 3339).
    pub ts: String,
}

/// Approval counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approvals {
    /// Prompts shown.
    pub asked: u64,
    /// Calls the person allowed.
    pub accepted: u64,
    /// Calls the person declined or dismissed, or that timed out.
    pub declined: u64,
    /// Calls refused without a prompt (the client cannot show one).
    pub refused: u64,
}

/// One client session's state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    /// `<pid>-<starttime>` of the client process.
    pub session: String,
    /// The client's pid.
    pub client_pid: u32,
    /// The client's start time (clock ticks since boot).
    pub client_start: u64,
    /// The client's `clientInfo` name and version, once known.
    #[serde(default)]
    pub client: Option<String>,
    /// When the first proxy of the session started.
    pub started: String,
    /// Servers proxied in this session.
    #[serde(default)]
    pub servers: BTreeSet<String>,
    /// Per server, how its proxy was started: the processes from the proxy's parent up to the
    /// client (the last hop), past shells and launcher wrappers.
    #[serde(default)]
    pub chains: std::collections::BTreeMap<String, Vec<crate::session::Hop>>,
    /// Set once a source's answer reached the client.
    #[serde(default)]
    pub taint: Option<TaintMark>,
    /// Approval counts.
    #[serde(default)]
    pub approvals: Approvals,
}

impl SessionState {
    fn new(session: &Session) -> Self {
        Self {
            session: session.id.clone(),
            client_pid: session.client_pid,
            client_start: session.client_start,
            client: None,
            started: crate::audit::now_rfc3339(),
            servers: BTreeSet::new(),
            chains: std::collections::BTreeMap::new(),
            taint: None,
            approvals: Approvals::default(),
        }
    }
}

/// The taint directory inside the state directory.
pub fn taint_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("taint")
}

/// One session's state, shared through the file system by every proxy of the client.
pub struct SessionStore {
    path: PathBuf,
    lock_path: PathBuf,
    session: Session,
    /// The state as last read or written, and the file it was in.
    cache: Option<(FileKey, SessionState)>,
}

/// What tells one version of the state file from another: every write renames a new file over
/// it (a new inode), and the time and size change with the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileKey {
    dev: u64,
    ino: u64,
    mtime: SystemTime,
    len: u64,
}

impl FileKey {
    fn of(meta: &std::fs::Metadata) -> std::io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        Ok(Self {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: meta.modified()?,
            len: meta.len(),
        })
    }
}

impl SessionStore {
    /// Opens (creating the directory, mode 0700) the store of `session`.
    pub fn open(state_dir: &Path, session: &Session) -> std::io::Result<Self> {
        let dir = taint_dir(state_dir);
        crate::paths::create_private_dir(&dir)?;
        if let Some(why) = crate::paths::private_dir_problem(&dir) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("`{}` is not private: {why}", dir.display()),
            ));
        }
        Ok(Self {
            path: dir.join(format!("{}.json", session.id)),
            lock_path: dir.join(format!("{}.lock", session.id)),
            session: session.clone(),
            cache: None,
        })
    }

    /// The id of the client session this store belongs to (what `mcpsum taint reset` takes).
    pub fn session_id(&self) -> &str {
        &self.session.id
    }

    /// Applies `f` to the state under the session's lock and writes it back atomically.
    pub fn update<R>(&mut self, f: impl FnOnce(&mut SessionState) -> R) -> std::io::Result<R> {
        let lock = lock_file(&self.lock_path)?;
        let mut state = read_state(&self.path)?.unwrap_or_else(|| SessionState::new(&self.session));
        let out = f(&mut state);
        write_state(&self.path, &state)?;
        // Still under the lock: the file is the one just written. Taken after the lock, it
        // could be another proxy's newer write (a taint), which this state would then stand
        // for until the file changed again.
        self.cache = fs_err::metadata(&self.path)
            .and_then(|m| FileKey::of(&m))
            .ok()
            .map(|key| (key, state));
        drop(lock);
        Ok(out)
    }

    /// The current state; re-read from disk only when the file changed since the last read.
    pub fn current(&mut self) -> std::io::Result<SessionState> {
        let meta = match fs_err::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(SessionState::new(&self.session));
            }
            Err(e) => return Err(e),
        };
        let key = FileKey::of(&meta)?;
        if let Some((k, state)) = &self.cache
            && *k == key
        {
            return Ok(state.clone());
        }
        // A write between the stat and the read leaves a key older than the state: the next
        // call sees a changed file and reads it again, never the other way round.
        let state = read_state(&self.path)?.unwrap_or_else(|| SessionState::new(&self.session));
        self.cache = Some((key, state.clone()));
        Ok(state)
    }

    /// The taint mark, if the session is tainted.
    pub fn tainted(&mut self) -> std::io::Result<Option<TaintMark>> {
        Ok(self.current()?.taint)
    }

    /// Whether the session is tainted: one `stat` when the file has not changed since it was
    /// last read or written (the state in memory stands for it), without copying the state.
    pub fn is_tainted(&mut self) -> std::io::Result<bool> {
        let meta = match fs_err::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let key = FileKey::of(&meta)?;
        if let Some((k, state)) = &self.cache
            && *k == key
        {
            return Ok(state.taint.is_some());
        }
        Ok(self.current()?.taint.is_some())
    }
}

/// The session's lock file, open and locked. Its error names the file but not its directory,
/// which callers name (`cannot open the taint state ... in DIR`).
fn lock_file(path: &Path) -> std::io::Result<File> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    let named = |e: std::io::Error| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot open its lock file `{name}`: {}",
                crate::fsutil::without_path(&e, path)
            ),
        )
    };
    // A link planted in its place is not followed.
    let f = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(named)?;
    f.lock().map_err(named)?;
    Ok(f.into_file())
}

fn read_state(path: &Path) -> std::io::Result<Option<SessionState>> {
    match fs_err::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::other(format!("`{}` is damaged: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn write_state(path: &Path, state: &SessionState) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    // No fsync: the state lives as long as its client process, which a power loss ends too;
    // the rename keeps every reader's view whole.
    let opts = crate::fsutil::Replace {
        durable: false,
        ..crate::fsutil::Replace::default()
    };
    crate::fsutil::replace(path, &bytes, opts)
}

/// Every session's state in `state_dir`, with whether its client still runs. Sessions whose
/// client is gone and whose file is older than a day are removed.
pub fn list_sessions(state_dir: &Path) -> std::io::Result<Vec<(SessionState, bool)>> {
    let dir = taint_dir(state_dir);
    let mut out = Vec::new();
    let entries = match fs_err::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Ok(Some(state)) = read_state(&path) else {
            continue;
        };
        let alive = crate::session::alive(state.client_pid, state.client_start);
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(24 * 3600));
        if !alive && old {
            let _ = fs_err::remove_file(&path);
            let _ = fs_err::remove_file(path.with_extension("lock"));
            continue;
        }
        out.push((state, alive));
    }
    out.sort_by(|a, b| a.0.started.cmp(&b.0.started));
    Ok(out)
}

/// Clears the taint of one session (or all); returns how many were cleared.
pub fn reset(state_dir: &Path, session: Option<&str>) -> std::io::Result<usize> {
    let dir = taint_dir(state_dir);
    let mut cleared = 0;
    for (state, _) in list_sessions(state_dir)? {
        if session.is_some_and(|s| s != state.session) {
            continue;
        }
        let path = dir.join(format!("{}.json", state.session));
        let lock = lock_file(&dir.join(format!("{}.lock", state.session)))?;
        if let Some(mut fresh) = read_state(&path)? {
            if fresh.taint.take().is_some() {
                cleared += 1;
            }
            write_state(&path, &fresh)?;
        }
        drop(lock);
    }
    Ok(cleared)
}

/// The digest that binds an approval to a call's arguments.
pub fn arguments_digest(arguments: Option<&Value>) -> Sha256Digest {
    Sha256Digest::of_json(arguments.unwrap_or(&Value::Null))
}

/// How long a 2026-07-28 client has to answer mcpsum's approval question.
pub const APPROVAL_TTL: Duration = Duration::from_secs(600);

/// Mints and checks `requestState` tokens for 2026-07-28 approvals: HMAC-SHA256 over the server,
/// tool, arguments digest, expiry and a nonce, under a key that never leaves this process. A
/// token is accepted once (replays are refused) and only for the exact call it was minted for.
pub struct Approver {
    key: [u8; 32],
    used: HashMap<String, SystemTime>,
}

#[derive(Serialize, Deserialize)]
struct Claims {
    server: String,
    tool: String,
    args: String,
    exp: u64,
    nonce: String,
    /// A continuation of an approved call: the server asked questions of its own, and this
    /// carries its `requestState` to its retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cont: Option<Continuation>,
}

/// What a continuation token carries.
#[derive(Serialize, Deserialize)]
struct Continuation {
    /// The server's `requestState`; `None` when it gave none.
    state: Option<String>,
}

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Why a `requestState` was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Not a token mcpsum minted, or altered.
    Forged,
    /// Minted for another call.
    WrongCall,
    /// Past its expiry.
    Expired,
    /// Used before.
    Replayed,
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TokenError::Forged => "the approval state was not issued by this mcpsum or was altered",
            TokenError::WrongCall => "the approval state was issued for a different call",
            TokenError::Expired => "the approval state expired",
            TokenError::Replayed => "the approval state was already used",
        })
    }
}

impl Approver {
    /// A fresh random key.
    pub fn new() -> std::io::Result<Self> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Self {
            key,
            used: HashMap::new(),
        })
    }

    fn mac(&self, payload: &[u8]) -> Vec<u8> {
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable_key());
        mac.update(payload);
        mac.finalize().into_bytes().to_vec()
    }

    /// A token for this call.
    pub fn mint(&self, server: &str, tool: &str, args: &Sha256Digest) -> String {
        self.mint_claims(server, tool, args, None)
    }

    /// A token for the retry of an approved call whose server asked questions of its own: it
    /// carries the server's `requestState` and stands for the approval already given.
    pub fn mint_continuation(
        &self,
        server: &str,
        tool: &str,
        args: &Sha256Digest,
        server_state: Option<String>,
    ) -> String {
        self.mint_claims(
            server,
            tool,
            args,
            Some(Continuation {
                state: server_state,
            }),
        )
    }

    fn mint_claims(
        &self,
        server: &str,
        tool: &str,
        args: &Sha256Digest,
        cont: Option<Continuation>,
    ) -> String {
        let mut nonce = [0u8; 16];
        let _ = getrandom::fill(&mut nonce);
        let exp = (SystemTime::now() + APPROVAL_TTL)
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let claims = Claims {
            server: server.to_owned(),
            tool: tool.to_owned(),
            args: args.to_string(),
            exp,
            nonce: hex::encode(nonce),
            cont,
        };
        let payload = serde_json::to_vec(&claims).unwrap_or_default();
        format!(
            "mcpsum1.{}.{}",
            hex::encode(&payload),
            hex::encode(self.mac(&payload))
        )
    }

    /// Checks a token against the call it comes back with; consumes it on success. For a
    /// continuation, returns the server's `requestState` it carries (`Some(None)`: none).
    pub fn check(
        &mut self,
        token: &str,
        server: &str,
        tool: &str,
        args: &Sha256Digest,
    ) -> Result<Option<Option<String>>, TokenError> {
        let mut parts = token.split('.');
        let (Some("mcpsum1"), Some(p), Some(m), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Forged);
        };
        let (Ok(payload), Ok(mac)) = (hex::decode(p), hex::decode(m)) else {
            return Err(TokenError::Forged);
        };
        let mut verifier = <HmacSha256 as KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable_key());
        verifier.update(&payload);
        verifier
            .verify_slice(&mac)
            .map_err(|_| TokenError::Forged)?;
        let claims: Claims = serde_json::from_slice(&payload).map_err(|_| TokenError::Forged)?;
        if claims.server != server || claims.tool != tool || claims.args != args.to_string() {
            return Err(TokenError::WrongCall);
        }
        let now = SystemTime::now();
        let exp = SystemTime::UNIX_EPOCH + Duration::from_secs(claims.exp);
        if now > exp {
            return Err(TokenError::Expired);
        }
        self.used.retain(|_, e| *e > now);
        if self.used.insert(claims.nonce, exp).is_some() {
            return Err(TokenError::Replayed);
        }
        Ok(claims.cont.map(|c| c.state))
    }

    /// Whether `state` has the form of a token of this kind (mcpsum's, if its MAC checks).
    pub fn is_token(state: &str) -> bool {
        state.starts_with("mcpsum1.")
    }
}

#[expect(
    clippy::panic,
    reason = "HMAC accepts keys of any length; this cannot happen"
)]
fn unreachable_key() -> HmacSha256 {
    panic!("HMAC rejected a 32-byte key")
}

/// The most characters the arguments of an approval prompt may take as shown (pretty JSON,
/// escaped). Past this a person cannot be expected to read them whole, and a prompt that showed
/// part of them could hide what the call does: mcpsum refuses the call without asking.
pub const PROMPT_ARGUMENTS_MAX: usize = 8 * 1024;

/// The text of the approval prompt: server, tool, every argument (pretty JSON, in the client's
/// key order, with invisible and reordering characters escaped), and the source that tainted
/// the session. `Err` (why, for the refusal) when the arguments cannot be shown whole.
pub fn prompt_text(
    server: &str,
    tool: &str,
    arguments: Option<&Value>,
    mark: &TaintMark,
) -> Result<String, String> {
    let pretty =
        serde_json::to_string_pretty(arguments.unwrap_or(&Value::Null)).unwrap_or_default();
    let args = shown_json(&pretty);
    let n = args.chars().count();
    if n > PROMPT_ARGUMENTS_MAX {
        return Err(format!(
            "its arguments take {n} characters as shown, more than the {PROMPT_ARGUMENTS_MAX} an approval prompt shows whole, and a prompt that showed only part of them could hide what the call does"
        ));
    }
    Ok(format!(
        "mcpsum: server `{}` wants to run `{}` with these arguments (all of them):\n{args}\n\nThis session read untrusted content earlier: `{}` on server `{}` at {}. That content may be trying to steer this call. Allow it?",
        shown_name(server),
        shown_name(tool),
        shown_name(&mark.item),
        shown_name(&mark.server),
        shown_name(&mark.ts),
    ))
}

/// Whether a person could not see `c`, or it would change how the text around it reads: every
/// character of the Unicode general categories Cc, Cf, Co, Cn (controls, format characters:
/// bidirectional marks, zero-width ones, tags; private use; unassigned), Zl, Zp and Zs but the
/// plain space, Mn and Me (combining marks, which overlay the character before them), and the
/// fillers that are letters yet show nothing (Hangul fillers, the blank braille pattern).
pub fn is_hidden_char(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    if c == ' ' {
        return false;
    }
    matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::PrivateUse
            | G::Unassigned
            | G::Surrogate
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::SpaceSeparator
            | G::NonspacingMark
            | G::EnclosingMark
    ) || matches!(
        c,
        '\u{115f}' | '\u{1160}' | '\u{2800}' | '\u{3164}' | '\u{ffa0}' | SPACE_RUN_MARK
    )
}

/// Spaces in a row inside a string, at most, shown as they are; a longer run is shown as
/// `␠×N`, so spaces cannot push the rest of a value off the screen.
const MAX_SPACE_RUN: usize = 8;

/// The mark of a run of spaces; escaped where it stands for itself.
const SPACE_RUN_MARK: char = '\u{2420}';

/// Pretty JSON as the prompt shows it: each hidden character inside a string becomes its JSON
/// `\uXXXX` escape (so the text is still the same JSON), and a run of more than
/// [`MAX_SPACE_RUN`] spaces inside a string becomes `␠×N`; the layout's newlines and
/// indentation stay.
fn shown_json(pretty: &str) -> String {
    let mut out = String::with_capacity(pretty.len());
    let (mut in_string, mut escaped, mut spaces) = (false, false, 0usize);
    let flush = |out: &mut String, spaces: &mut usize| {
        if *spaces > MAX_SPACE_RUN {
            out.push_str(&format!("{SPACE_RUN_MARK}\u{d7}{spaces}"));
        } else {
            out.extend(std::iter::repeat_n(' ', *spaces));
        }
        *spaces = 0;
    };
    for c in pretty.chars() {
        if in_string && c == ' ' {
            spaces += 1;
            continue;
        }
        flush(&mut out, &mut spaces);
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        }
        if c != '\n' && is_hidden_char(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    flush(&mut out, &mut spaces);
    out
}

/// A name as the prompt shows it, on one line: hidden characters (newlines too) as `\u{..}`,
/// and a backslash doubled, so an escape cannot be faked. Every text of mcpsum's that quotes a
/// peer's name to the person or the model (prompts, refusals) quotes it through [`Shown`].
pub fn shown_name(name: &str) -> String {
    Shown(name).to_string()
}

/// A peer's name as a refusal quotes it: escaped as [`shown_name`] escapes it, and cut to a
/// prefix and the digest of the whole when it is long, as the audit log keeps it (a refusal
/// that echoed a 4 MiB name would be as large).
pub fn quoted_name(name: &str) -> String {
    shown_name(&crate::audit::capped(name, crate::audit::FIELD_MAX))
}

/// A name, displayed as [`shown_name`] shows it (without building a string first).
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(pub &'a str);

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write;
        for c in self.0.chars() {
            if c == '\\' {
                f.write_str("\\\\")?;
            } else if is_hidden_char(c) {
                write!(f, "\\u{{{:x}}}", c as u32)?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// The elicitation schema of the approval prompt.
pub fn prompt_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {"approve": {"type": "boolean", "title": "Allow this call", "default": false}},
        "required": ["approve"]
    })
}

/// Whether an `ElicitResult` approves: `accept` with `approve: true`, nothing else.
pub fn approves(result: &Value) -> bool {
    result.get("action").and_then(Value::as_str) == Some("accept")
        && result.get("content").and_then(|c| c.get("approve")) == Some(&Value::Bool(true))
}

/// `suggest-policy`: labels from the locked annotations, conservatively; reasons per tool.
pub fn suggest(entry: &ServerEntry) -> (Value, Vec<String>) {
    let mut sources = Vec::new();
    let mut sinks = Vec::new();
    let mut reasons = Vec::new();
    for tool in &entry.tools {
        let Some(name) = crate::lockfile::Kind::Tool.key_of(tool) else {
            continue;
        };
        let ann = tool.get("annotations");
        let hint = |h: &str| ann.and_then(|a| a.get(h)).and_then(Value::as_bool);
        // Hints are claims by the server: only an explicit `false`/`true` narrows the label.
        let open_world = hint("openWorldHint") != Some(false);
        let writes = hint("readOnlyHint") != Some(true);
        let why = [
            match hint("openWorldHint") {
                Some(false) => "openWorldHint=false: stays in its own world".to_owned(),
                Some(true) => "openWorldHint=true: reaches the outside world".to_owned(),
                None => "no openWorldHint: may reach the outside world".to_owned(),
            },
            match hint("readOnlyHint") {
                Some(true) => "readOnlyHint=true: does not write".to_owned(),
                Some(false) => "readOnlyHint=false: may write".to_owned(),
                None => "no readOnlyHint: may write".to_owned(),
            },
        ];
        let mut labels = Vec::new();
        if open_world {
            sources.push(name.to_owned());
            labels.push("source");
        }
        if writes || open_world {
            sinks.push(name.to_owned());
            labels.push("sink");
        }
        let verdict = if labels.is_empty() {
            "unlabelled".to_owned()
        } else {
            labels.join(" + ")
        };
        reasons.push(format!(
            "{}: {verdict} ({})",
            crate::text::sanitize_line(name),
            why.join("; ")
        ));
    }
    if !entry.resources.is_empty() || !entry.resource_templates.is_empty() {
        sources.push(RESOURCES_WILDCARD.to_owned());
        reasons.push(format!("{RESOURCES_WILDCARD}: source (the server locks resources; their contents may be untrusted)"));
    }
    if !entry.prompts.is_empty() {
        sources.push(PROMPTS_WILDCARD.to_owned());
        reasons.push(format!(
            "{PROMPTS_WILDCARD}: source (the server locks prompts; their text may be untrusted)"
        ));
    }
    (
        serde_json::json!({"policy": {"taint": {"sources": sources, "sinks": sinks}}}),
        reasons,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link planted as the lock file is not followed; the error names the file once, and not
    /// its directory, which the proxy's message names.
    #[test]
    fn a_planted_lock_link_is_refused_naming_the_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let session = Session {
            id: "3-4".into(),
            client_pid: 3,
            client_start: 4,
            chain: Vec::new(),
        };
        let mut store = SessionStore::open(dir.path(), &session).unwrap();
        let victim = dir.path().join("victim");
        fs_err::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, taint_dir(dir.path()).join("3-4.lock")).unwrap();
        let e = store.update(|_| ()).unwrap_err().to_string();
        assert!(
            e.starts_with("cannot open its lock file `3-4.lock`: "),
            "{e}"
        );
        assert!(
            !e.contains(&taint_dir(dir.path()).display().to_string()),
            "{e}"
        );
        assert_eq!(e.matches("3-4.lock").count(), 1, "{e}");
        assert_eq!(fs_err::read_to_string(&victim).unwrap(), "keep");
    }

    /// Another proxy's write is seen even when it leaves the file's time and size as they were
    /// (a write is a rename, so the file is a new one): a cache keyed on time and size alone
    /// kept serving a clean state over a taint.
    #[test]
    fn a_rewrite_with_the_same_time_and_size_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let session = Session {
            id: "1-2".into(),
            client_pid: 1,
            client_start: 2,
            chain: Vec::new(),
        };
        let mut store = SessionStore::open(dir.path(), &session).unwrap();
        store.update(|_| ()).unwrap();
        assert_eq!(store.current().unwrap().client, None);
        let path = taint_dir(dir.path()).join("1-2.json");
        let before = fs_err::metadata(&path).unwrap();
        let text = fs_err::read_to_string(&path).unwrap();
        // `"ab"` is as long as `null`.
        let other = text.replace(r#""client": null"#, r#""client": "ab""#);
        assert_eq!(other.len(), text.len());
        let tmp = dir.path().join("next");
        fs_err::write(&tmp, other).unwrap();
        fs_err::OpenOptions::new()
            .write(true)
            .open(&tmp)
            .unwrap()
            .file()
            .set_modified(before.modified().unwrap())
            .unwrap();
        fs_err::rename(&tmp, &path).unwrap();
        assert_eq!(store.current().unwrap().client.as_deref(), Some("ab"));
    }

    #[test]
    fn tokens_bind_to_the_call_and_are_single_use() {
        let mut a = Approver::new().unwrap();
        let d = arguments_digest(Some(&serde_json::json!({"to": "x"})));
        let other = arguments_digest(Some(&serde_json::json!({"to": "y"})));
        let t = a.mint("mail", "send", &d);
        assert_eq!(
            a.check(&t, "mail", "send", &other),
            Err(TokenError::WrongCall)
        );
        assert_eq!(
            a.check(&t, "mail", "delete", &d),
            Err(TokenError::WrongCall)
        );
        assert_eq!(a.check(&t, "mail", "send", &d), Ok(None));
        assert_eq!(a.check(&t, "mail", "send", &d), Err(TokenError::Replayed));
        // A continuation carries the server's state (or its absence), bound the same way.
        let c = a.mint_continuation("mail", "send", &d, Some("s-1".into()));
        assert_eq!(
            a.check(&c, "mail", "send", &other),
            Err(TokenError::WrongCall)
        );
        assert_eq!(
            a.check(&c, "mail", "send", &d),
            Ok(Some(Some("s-1".into())))
        );
        let none = a.mint_continuation("mail", "send", &d, None);
        assert_eq!(a.check(&none, "mail", "send", &d), Ok(Some(None)));
        let forged = t.replacen("mcpsum1.", "mcpsum1.00", 1);
        assert_eq!(
            a.check(&forged, "mail", "send", &d),
            Err(TokenError::Forged)
        );
        let other_key = Approver::new().unwrap().mint("mail", "send", &d);
        assert_eq!(
            a.check(&other_key, "mail", "send", &d),
            Err(TokenError::Forged)
        );
        assert_eq!(a.check("junk", "mail", "send", &d), Err(TokenError::Forged));
    }

    #[test]
    fn approval_needs_accept_and_true() {
        assert!(approves(
            &serde_json::json!({"action": "accept", "content": {"approve": true}})
        ));
        assert!(!approves(
            &serde_json::json!({"action": "accept", "content": {"approve": false}})
        ));
        assert!(!approves(
            &serde_json::json!({"action": "accept", "content": {"approve": "true"}})
        ));
        assert!(!approves(&serde_json::json!({"action": "decline"})));
        assert!(!approves(
            &serde_json::json!({"action": "cancel", "content": {"approve": true}})
        ));
    }
}
