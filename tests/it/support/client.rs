//! The one JSON-RPC test client: a process (normally `mcpsum proxy`) driven over its stdio line
//! by line, as a client of either era, and the [`Era`] a test client speaks or a fake server
//! serves.
//!
//! A reader thread turns each line of the process's stdout into a [`Value`] (a line that is not
//! JSON becomes a string) and hands it over a bounded channel, so a test that stops reading
//! stops the proxy's writes as a slow client would. Waiting for a response keeps every other
//! message in [`Client::seen`]; the `next*` helpers say whether they look there too.
//!
//! [`pipe`] is the same client for a test that sends everything at once and reads the answers
//! after the process ended (a proxy that cannot start, say), with [`initialize`] and
//! [`initialized`] for its handshake.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Run, World};

/// The 2026-07-28 protocol version.
pub const MODERN: &str = "2026-07-28";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPS: &str = "io.modelcontextprotocol/clientCapabilities";

/// The era a test client speaks, or a fake server serves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Era {
    /// `initialize` and a session (2025-11-25 and before).
    Legacy,
    /// 2026-07-28: `server/discover`, the version and capabilities in each request's `_meta`.
    Modern,
}

/// Both eras, for tests that run in each.
pub const ERAS: [Era; 2] = [Era::Legacy, Era::Modern];

impl Era {
    /// The fake server's `era` key.
    pub fn scenario_name(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }

    /// The Python SDK client's `mode` (`tests/it/clients/sdk_client.py`).
    pub fn sdk_mode(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => MODERN,
        }
    }
}

/// A running process driven over its stdio as a JSON-RPC client.
pub struct Client {
    pub child: Child,
    /// Our end of its stdin; set to `None` to close it.
    pub stdin: Option<ChildStdin>,
    /// Its stdout, one message a line.
    pub rx: mpsc::Receiver<Value>,
    /// Where its stderr goes, if kept.
    stderr: Option<PathBuf>,
    /// Messages read while waiting for something else (notifications, server requests).
    pub seen: Vec<Value>,
    pub era: Era,
    /// The client capabilities it declares (in `initialize`, or in each 2026-07-28 request).
    pub caps: Value,
    /// The version a legacy client asks for in `initialize`.
    pub version: &'static str,
    /// Its `clientInfo.name`.
    name: &'static str,
    /// How long it waits for an answer.
    patience: Duration,
    /// An approval prompt (`elicitation/create`) that comes while a request waits is refused
    /// with an error at once, as a client that cannot show it would, instead of kept.
    refuse_prompts: bool,
    /// The id of the next [`Client::request_next`].
    next_id: u64,
    /// When dropped: close stdin and give the process this long to end before killing it.
    grace: Option<Duration>,
}

impl Client {
    /// `mcpsum --lockfile LOCKFILE proxy --name NAME EXTRA...` in the world's directory, with
    /// nothing in its environment but the state dir and `env`.
    pub fn proxy_cmd(w: &World, name: &str, extra: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mcpsum"));
        c.env_clear()
            .env("MCPSUM_STATE_DIR", w.path().join("state"))
            .envs(env.iter().copied())
            .current_dir(w.path())
            .arg("--lockfile")
            .arg(w.lockfile())
            .args(["proxy", "--name", name])
            .args(extra);
        c
    }

    /// `mcpsum proxy --name NAME` as a client of `era` (no handshake yet), stderr kept.
    pub fn start(w: &World, name: &str, era: Era) -> Self {
        Self::start_with(w, name, era, &[], &[])
    }

    /// [`Client::start`] with more arguments and environment ([`Client::proxy_cmd`]).
    pub fn start_with(
        w: &World,
        name: &str,
        era: Era,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let stderr = unique(
            w.path()
                .join(format!("proxy-{name}-{}.stderr", std::process::id())),
        );
        Self::spawn(Self::proxy_cmd(w, name, extra, env), Some(stderr)).with_era(era)
    }

    /// Runs `cmd` with its stdin and stdout piped to this client and its stderr into the file
    /// `stderr` (or nowhere). A legacy client of `2025-06-18` that declares no capabilities.
    pub fn spawn(mut cmd: Command, stderr: Option<PathBuf>) -> Self {
        let err = match &stderr {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("stderr file")),
            None => Stdio::null(),
        };
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .expect("start the client's process");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::sync_channel(1024);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            rx,
            stderr,
            seen: Vec::new(),
            era: Era::Legacy,
            caps: json!({}),
            version: "2025-06-18",
            name: "mcpsum-it",
            patience: Duration::from_secs(30),
            refuse_prompts: false,
            next_id: 1,
            grace: None,
        }
    }

    /// Speaks `era`.
    pub fn with_era(mut self, era: Era) -> Self {
        self.era = era;
        self
    }

    /// Declares `caps`.
    pub fn with_caps(mut self, caps: Value) -> Self {
        self.caps = caps;
        self
    }

    /// As a legacy client, asks for `version`.
    pub fn with_version(mut self, version: &'static str) -> Self {
        self.version = version;
        self
    }

    /// Calls itself `name` in `clientInfo`.
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// Waits this long for each answer.
    pub fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// Refuses every approval prompt that comes while a request waits (see the field).
    pub fn refusing_prompts(mut self) -> Self {
        self.refuse_prompts = true;
        self
    }

    /// When dropped, closes stdin and waits up to `grace` for the process to end (so a proxy
    /// cleans up as after a client's EOF) before killing it.
    pub fn ending_gracefully(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the process wrote to stderr so far (empty when it is not kept).
    pub fn stderr(&self) -> String {
        self.stderr
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the proxy");
        stdin.flush().expect("flush");
    }

    /// Sends one message as one line.
    pub fn send(&mut self, msg: &Value) {
        let mut line = serde_json::to_vec(msg).expect("json");
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Params in this client's era: a 2026-07-28 client adds the `_meta` pair.
    pub fn params(&self, params: Value) -> Value {
        self.params_caps(params, self.caps.clone())
    }

    /// [`Client::params`] declaring `caps`.
    pub fn params_caps(&self, mut params: Value, caps: Value) -> Value {
        if self.era == Era::Modern {
            params["_meta"][META_VERSION] = json!(MODERN);
            params["_meta"][META_CAPS] = caps;
        }
        params
    }

    /// Sends a request in this client's era.
    pub fn send_request(&mut self, id: impl Into<Value>, method: &str, params: Value) {
        let params = self.params(params);
        let id = id.into();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// The next message from the process, if one comes within `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> Option<Value> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Waits for the response to `id`, keeping everything else in `seen` (an approval prompt
    /// is refused instead when the client refuses prompts).
    #[track_caller]
    pub fn response(&mut self, id: &Value) -> Value {
        let is_it = |m: &Value| m.get("method").is_none() && m.get("id") == Some(id);
        if let Some(i) = self.seen.iter().position(is_it) {
            return self.seen.remove(i);
        }
        let answer = self.refuse_prompts.then_some(None);
        self.await_response(id, answer).0
    }

    /// Sends a request in this client's era and waits for its response.
    #[track_caller]
    pub fn request(&mut self, id: impl Into<Value>, method: &str, params: Value) -> Value {
        let id = id.into();
        self.send_request(id.clone(), method, params);
        self.response(&id)
    }

    /// A request with the next number as its id.
    #[track_caller]
    pub fn request_next(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.request(id, method, params)
    }

    /// Sends a request in this client's era and waits for its response, answering every
    /// approval prompt (`elicitation/create`) on the way with `answer` (an error when `None`).
    /// Returns the response and the prompts' params.
    #[track_caller]
    pub fn request_seen(
        &mut self,
        id: impl Into<Value>,
        method: &str,
        params: Value,
        answer: Option<&Value>,
    ) -> (Value, Vec<Value>) {
        let id = id.into();
        self.send_request(id.clone(), method, params);
        self.await_response(&id, Some(answer))
    }

    /// [`Client::request_seen`] without the prompts.
    #[track_caller]
    pub fn request_answering(
        &mut self,
        id: impl Into<Value>,
        method: &str,
        params: Value,
        answer: Option<&Value>,
    ) -> Value {
        self.request_seen(id, method, params, answer).0
    }

    /// The legacy handshake (at [`Client::version`], declaring [`Client::caps`]) or the
    /// 2026-07-28 discovery, as this client's era has it; returns the response.
    #[track_caller]
    pub fn hello(&mut self) -> Value {
        match self.era {
            Era::Legacy => {
                let params = initialize_params(self.version, self.caps.clone(), self.name);
                let r = self.request("init", "initialize", params);
                self.send(&initialized());
                r
            }
            Era::Modern => self.request("disc", "server/discover", json!({})),
        }
    }

    /// A legacy handshake at `version`, declaring `caps`; returns the result.
    #[track_caller]
    pub fn hello_with(&mut self, version: &str, caps: Value) -> Value {
        let r = self.request(
            "init",
            "initialize",
            initialize_params(version, caps, self.name),
        );
        self.send(&initialized());
        r.get("result")
            .unwrap_or_else(|| panic!("expected a result, got {r:#}"))
            .clone()
    }

    /// The next message with this `method` (a request or notification to the client), from
    /// `seen` first; the others are kept in `seen`.
    #[track_caller]
    pub fn next_with_method(&mut self, method: &str) -> Value {
        if let Some(i) = self.seen.iter().position(|m| m["method"] == method) {
            return self.seen.remove(i);
        }
        let deadline = Instant::now() + self.patience;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(m) = self.recv(left) else {
                panic!(
                    "no {method} from the proxy\n--- seen\n{:#?}\n--- stderr\n{}",
                    self.seen,
                    self.stderr()
                );
            };
            if m["method"] == method {
                return m;
            }
            self.seen.push(m);
        }
    }

    /// The next new message (not one in `seen`) that satisfies `pred`; those before it are
    /// dropped.
    #[track_caller]
    pub fn next(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + self.patience;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(msg) = self.recv(left) else {
                panic!("never got {what}\n--- stderr\n{}", self.stderr());
            };
            if pred(&msg) {
                return msg;
            }
        }
    }

    /// A `tools/call`'s response.
    #[track_caller]
    pub fn call(&mut self, id: impl Into<Value>, tool: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
    }

    /// Closes stdin (EOF, as a client that is done).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Closes stdin and waits (20 s) for the exit code.
    #[track_caller]
    pub fn finish(&mut self) -> i32 {
        self.stdin = None;
        self.wait()
    }

    /// [`Client::finish`], asserting the exit code is 0.
    #[track_caller]
    pub fn finish_ok(&mut self) {
        let code = self.finish();
        assert_eq!(code, 0, "the proxy failed\n--- stderr\n{}", self.stderr());
    }

    /// Waits (20 s) for the exit code.
    #[track_caller]
    pub fn wait(&mut self) -> i32 {
        let status = self.wait_for(Duration::from_secs(20));
        let Some(status) = status else {
            panic!("the proxy did not exit\n--- stderr\n{}", self.stderr());
        };
        status.code().unwrap_or(-1)
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_for(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the response to `id`; `answer` says what becomes of an approval prompt on the
    /// way: kept in `seen` (`None`), or answered (`Some`: with the value, or an error).
    #[track_caller]
    fn await_response(
        &mut self,
        id: &Value,
        answer: Option<Option<&Value>>,
    ) -> (Value, Vec<Value>) {
        let mut asked = Vec::new();
        let deadline = Instant::now() + self.patience;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(msg) = self.recv(left) else {
                panic!(
                    "no response to id {id} from the proxy\n--- seen\n{:#?}\n--- stderr\n{}",
                    self.seen,
                    self.stderr()
                );
            };
            if let Some(answer) = answer
                && msg["method"] == "elicitation/create"
            {
                asked.push(msg["params"].clone());
                let reply = match answer {
                    Some(a) => json!({"jsonrpc": "2.0", "id": msg["id"], "result": a}),
                    None => json!({"jsonrpc": "2.0", "id": msg["id"],
                                   "error": {"code": -32600, "message": "no"}}),
                };
                self.send(&reply);
                continue;
            }
            if msg.get("method").is_none() && msg.get("id") == Some(id) {
                return (msg, asked);
            }
            self.seen.push(msg);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(grace) = self.grace {
            self.stdin = None;
            if self.wait_for(grace).is_some() {
                return;
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `p`, or `p` with a number before its extension (`x.1.json`) when a file of that name exists
/// already.
pub fn unique(p: PathBuf) -> PathBuf {
    let ext = p.extension().map(|e| e.to_string_lossy().into_owned());
    let mut n = 0;
    loop {
        let c = match (n, &ext) {
            (0, _) => p.clone(),
            (_, Some(ext)) => p.with_extension(format!("{n}.{ext}")),
            (_, None) => p.with_extension(n.to_string()),
        };
        if !c.exists() {
            return c;
        }
        n += 1;
    }
}

/// The params of a legacy `initialize` at `version`, declaring `caps`, from client `name`.
fn initialize_params(version: &str, caps: Value, name: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": caps,
           "clientInfo": {"name": name, "version": "1"}})
}

/// A legacy `initialize` request at `version` that declares no capabilities, for
/// [`pipe`].
pub fn initialize(id: impl Into<Value>, version: &str) -> Value {
    let params = initialize_params(version, json!({}), "mcpsum-it");
    json!({"jsonrpc": "2.0", "id": id.into(), "method": "initialize", "params": params})
}

/// The notification that ends a legacy handshake.
pub fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// How long [`pipe`] waits for its process to end.
const PIPE_PATIENCE: Duration = Duration::from_secs(60);

/// A client that sends everything at once: runs `cmd` with `lines` on its stdin, one message a
/// line, then closes it (EOF) and waits (60 s at most) for the process to end. Returns the run
/// (exit code, stdout, stderr) and what came on stdout, one message a line (a line that is not
/// JSON becomes a string). A process that ends before reading every line is not an error here:
/// the exit code and the answers say what became of them.
#[track_caller]
pub fn pipe(cmd: &mut Command, lines: &[Value]) -> (Run, Vec<Value>) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the client's process");
    let mut bytes = Vec::new();
    for l in lines {
        bytes.extend(serde_json::to_vec(l).expect("json"));
        bytes.push(b'\n');
    }
    let mut stdin = child.stdin.take().expect("stdin");
    // From threads: a process that answers before it reads the rest could otherwise block
    // both ends.
    let writer = std::thread::spawn(move || match stdin.write_all(&bytes) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    });
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + PIPE_PATIENCE;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    writer
        .join()
        .expect("writer")
        .expect("write to the process");
    let stdout = String::from_utf8_lossy(&out.join().expect("stdout")).into_owned();
    let stderr = String::from_utf8_lossy(&err.join().expect("stderr")).into_owned();
    let Some(status) = status else {
        panic!(
            "the process did not end within {PIPE_PATIENCE:?} of its stdin closing\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        );
    };
    let msgs = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.to_owned())))
        .collect();
    let run = Run {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    };
    (run, msgs)
}
