//! mcpsum benchmarks: every figure the speed sections of the lock-core, proxy and sandbox issues
//! ask for, each printed beside a baseline measured in the same run. Nothing is asserted: the
//! output is Markdown tables that `scripts/bench.sh` writes into `BENCHMARKS.md`.
//!
//! ```sh
//! cargo build --release && cargo bench --bench bench                 # everything (~2 min)
//! cargo bench --bench bench -- --quick --only proxy,sandbox           # fewer iterations, some areas
//! ```
//!
//! Areas: `canon`, `show`, `sign`, `lock`, `verify`, `proxy`, `sandbox`, `egress`. The bench drives the
//! release binary `target/release/mcpsum` as a subprocess (`egress`: the egress crate's example
//! `target/release/examples/bench`). Servers: the scriptable Python fake
//! (`tests/servers/mcp_fake.py`) and a native server built into this bench binary
//! (`bench --serve-native`, a few microseconds per call), so that what mcpsum adds can be told
//! apart from a Python server's own cost and noise. Progress goes to stderr, tables to stdout.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::cast_precision_loss
)]

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use mcpsum::canonical::canonicalize;
use mcpsum::lockfile::Sha256Digest;
use serde_json::{Value, json};

const PYTHON: &str = "/usr/bin/python3";

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

struct Row {
    figure: String,
    value: String,
    baseline: String,
    target: String,
    met: Option<bool>,
}

struct Table {
    title: String,
    note: String,
    rows: Vec<Row>,
}

impl Table {
    fn new(title: &str, note: &str) -> Self {
        Self {
            title: title.into(),
            note: note.into(),
            rows: Vec::new(),
        }
    }

    fn row(
        &mut self,
        figure: &str,
        value: String,
        baseline: String,
        target: &str,
        met: Option<bool>,
    ) {
        eprintln!("  {figure}: {value}   [{baseline}]");
        self.rows.push(Row {
            figure: figure.into(),
            value,
            baseline,
            target: target.into(),
            met,
        });
    }

    fn print(&self) {
        println!("### {}\n", self.title);
        if !self.note.is_empty() {
            println!("{}\n", self.note);
        }
        println!("| figure | measured | baseline (same run) | target | met |");
        println!("|---|---|---|---|---|");
        for r in &self.rows {
            let met = match r.met {
                Some(true) => "**met**",
                Some(false) => "**not met**",
                None => "–",
            };
            println!(
                "| {} | {} | {} | {} | {} |",
                r.figure, r.value, r.baseline, r.target, met
            );
        }
        println!();
    }
}

// ---------------------------------------------------------------------------------------------
// Small statistics and formatting
// ---------------------------------------------------------------------------------------------

fn pct(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s[((s.len() - 1) * p + 50) / 100]
}

fn median(v: &[Duration]) -> Duration {
    pct(v, 50)
}

fn median_f(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Signed difference a − b in microseconds.
fn diff_us(a: Duration, b: Duration) -> f64 {
    us(a) - us(b)
}

fn fmt_us(x: f64) -> String {
    format!("{x:.0} µs")
}

fn fmt_ms(x: f64) -> String {
    if x.abs() < 10.0 {
        format!("{x:.2} ms")
    } else {
        format!("{x:.1} ms")
    }
}

// ---------------------------------------------------------------------------------------------
// Environment of the run
// ---------------------------------------------------------------------------------------------

struct Ctx {
    root: PathBuf,
    mcpsum: PathBuf,
    fake: PathBuf,
    me: PathBuf,
    tmp: tempfile::TempDir,
    quick: bool,
}

impl Ctx {
    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    fn s(p: &Path) -> String {
        p.to_str().expect("utf-8 path").to_owned()
    }

    fn n(&self, full: usize, quick: usize) -> usize {
        if self.quick { quick } else { full }
    }

    /// `mcpsum` with the bench's lockfile, state directory and no colour.
    fn mcpsum(&self, lockfile: &Path) -> Command {
        let mut c = Command::new(&self.mcpsum);
        c.arg("--lockfile")
            .arg(lockfile)
            .arg("--color")
            .arg("never")
            .env("MCPSUM_STATE_DIR", self.path("state"))
            .env_remove("MCPSUM_LOCKFILE")
            .stdin(Stdio::null());
        c
    }

    fn write_json(&self, name: &str, v: &Value) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
        p
    }

    /// The fake server's argv for a scenario file.
    fn fake_argv(&self, scenario: &Path) -> Vec<String> {
        vec![PYTHON.into(), Self::s(&self.fake), Self::s(scenario)]
    }

    /// The native server's argv.
    fn native_argv(&self, extra: &[&str]) -> Vec<String> {
        let mut v = vec![Self::s(&self.me), "--serve-native".into()];
        v.extend(extra.iter().map(|s| (*s).to_owned()));
        v
    }

    /// `mcpsum lock --name NAME [--sandbox FILE] -- ARGV`; panics with stderr on failure.
    fn lock(&self, lockfile: &Path, name: &str, sandbox: Option<&Path>, argv: &[String]) {
        let mut c = self.mcpsum(lockfile);
        c.arg("lock").arg("--name").arg(name);
        if let Some(s) = sandbox {
            c.arg("--sandbox").arg(s);
        }
        c.arg("--").args(argv);
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "mcpsum lock {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Wall time of a command run to completion, output discarded.
fn wall(mut c: Command) -> Duration {
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .stdin(Stdio::null());
    let t = Instant::now();
    let st = c.status().unwrap();
    let d = t.elapsed();
    assert!(st.success(), "{c:?} failed: {st}");
    d
}

// ---------------------------------------------------------------------------------------------
// A JSON-RPC peer over a child's stdio
// ---------------------------------------------------------------------------------------------

struct Peer {
    child: Child,
    tx: Option<ChildStdin>,
    rx: BufReader<ChildStdout>,
    next: u64,
    line: Vec<u8>,
}

impl Peer {
    fn spawn(mut c: Command, stderr: &Path) -> Peer {
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(stderr)
            .unwrap();
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(err);
        let mut child = c.spawn().unwrap();
        let tx = child.stdin.take();
        let rx = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        Peer {
            child,
            tx,
            rx,
            next: 1,
            line: Vec::with_capacity(1 << 16),
        }
    }

    fn argv(argv: &[String], stderr: &Path) -> Peer {
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        Peer::spawn(c, stderr)
    }

    fn send(&mut self, bytes: &[u8]) {
        let tx = self.tx.as_mut().unwrap();
        tx.write_all(bytes).unwrap();
        tx.flush().unwrap();
    }

    /// Reads one line into `self.line`; returns its length (0 on EOF).
    fn read_line(&mut self) -> usize {
        self.line.clear();
        self.rx.read_until(b'\n', &mut self.line).unwrap()
    }

    /// Sends a request and waits for its answer, skipping notifications and server requests.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let mut msg = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap();
        msg.push(b'\n');
        self.send(&msg);
        self.wait_for(id)
    }

    fn wait_for(&mut self, id: u64) -> Value {
        loop {
            assert!(
                self.read_line() > 0,
                "peer closed while waiting for answer {id}"
            );
            let v: Value = serde_json::from_slice(&self.line).unwrap();
            if v.get("method").is_none() && v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }

    fn notify(&mut self, method: &str) {
        self.send(format!("{{\"jsonrpc\":\"2.0\",\"method\":\"{method}\"}}\n").as_bytes());
    }

    /// The legacy handshake a 2025-11-25 client does.
    fn initialize(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "mcpsum-bench", "version": "0"}}),
        );
        assert!(r.get("result").is_some(), "initialize failed: {r}");
        self.notify("notifications/initialized");
        r
    }

    /// One small `tools/call echo`; returns its round trip.
    fn echo_call(&mut self) -> Duration {
        let id = self.next;
        self.next += 1;
        let msg = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"n\":{id}}}}}}}\n"
        );
        let t = Instant::now();
        self.send(msg.as_bytes());
        let v = self.wait_for(id);
        let d = t.elapsed();
        assert!(v.get("result").is_some(), "echo call failed: {v}");
        d
    }

    /// One `tools/call big` of `bytes`; returns (round trip, answer line length).
    fn big_call(&mut self, bytes: usize) -> (Duration, usize) {
        let id = self.next;
        self.next += 1;
        let msg = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"big\",\"arguments\":{{\"bytes\":{bytes}}}}}}}\n"
        );
        let t = Instant::now();
        self.send(msg.as_bytes());
        let n = self.read_line();
        let d = t.elapsed();
        assert!(
            n > bytes,
            "big call: short answer ({n} bytes): {}",
            String::from_utf8_lossy(&self.line[..n.min(300)])
        );
        (d, n)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin and waits (killing after 3 s).
    fn close(mut self) {
        drop(self.tx.take());
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// On-CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`, nanoseconds): unlike wall time
/// it does not grow when other work on the machine takes the core away. (The thread's own
/// `/proc/thread-self/schedstat` is only brought up to date at scheduler ticks and switches, so
/// it reads 0 or a whole tick for work shorter than a few milliseconds.)
fn thread_cpu() -> Duration {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
    Duration::from(t)
}

fn schedstat(p: &Path) -> Duration {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    Duration::from_nanos(
        s.split_whitespace()
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0),
    )
}

/// On-CPU time of a live process and all its live descendants.
fn tree_cpu(pid: u32) -> Duration {
    let mut total = proc_cpu(pid);
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return total;
    };
    for task in dir.filter_map(Result::ok) {
        let kids = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for kid in kids.split_whitespace().filter_map(|k| k.parse().ok()) {
            total += tree_cpu(kid);
        }
    }
    total
}

/// On-CPU time of a live process: the sum over its threads.
fn proc_cpu(pid: u32) -> Duration {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    dir.filter_map(Result::ok)
        .map(|e| schedstat(&e.path().join("schedstat")))
        .sum()
}

fn proc_status_kib(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|r| {
            r.trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// The native server (`bench --serve-native [--tools N] [--delay-ms N] [--record FILE]`)
// ---------------------------------------------------------------------------------------------

fn synthetic_tool(i: usize) -> Value {
    json!({"name": format!("tool_{i:04}"), "description": format!("Synthetic tool number {i}"),
           "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}}})
}

fn serve_native(args: &[String]) -> ! {
    let opt = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let n_tools: usize = opt("--tools").map_or(0, |v| v.parse().unwrap());
    if let Some(d) = opt("--delay-ms") {
        std::thread::sleep(Duration::from_millis(d.parse().unwrap()));
    }
    let mut record = opt("--record").map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap()
    });
    if let Some(f) = record.as_mut() {
        writeln!(f, "{}", json!({"event": "start"})).unwrap();
    }
    let mut tools = vec![
        json!({"name": "echo", "description": "Echo the arguments", "inputSchema": {"type": "object"}}),
        json!({"name": "big", "description": "A text of `bytes` x", "inputSchema": {"type": "object"}}),
    ];
    tools.extend((0..n_tools).map(synthetic_tool));
    let stdin = std::io::stdin().lock();
    let mut input = BufReader::with_capacity(1 << 16, stdin);
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            std::process::exit(0);
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if let Some(f) = record.as_mut() {
            writeln!(f, "{}", json!({"event": "recv", "msg": msg})).unwrap();
        }
        let Some(id) = msg.get("id").cloned() else {
            continue; // a notification
        };
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let result: Result<Value, (i64, &str)> = match method {
            "initialize" => Ok(json!({
                "protocolVersion": params.get("protocolVersion").cloned().unwrap_or(json!("2025-11-25")),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "native", "version": "1.0.0"}})),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": tools})),
            "tools/call" => match params.get("name").and_then(Value::as_str) {
                Some("echo") => Ok(json!({"content": [{"type": "text",
                    "text": params.get("arguments").map(Value::to_string).unwrap_or_default()}]})),
                Some("big") => {
                    let n = params
                        .pointer("/arguments/bytes")
                        .and_then(Value::as_u64)
                        .unwrap_or(1024) as usize;
                    write!(out, "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"").unwrap();
                    let chunk = vec![b'x'; 1 << 16];
                    let mut left = n;
                    while left > 0 {
                        let k = left.min(chunk.len());
                        out.write_all(&chunk[..k]).unwrap();
                        left -= k;
                    }
                    out.write_all(b"\"}]}}\n").unwrap();
                    out.flush().unwrap();
                    continue;
                }
                _ => Err((-32602, "unknown tool")),
            },
            _ => Err((-32601, "method not found")),
        };
        let resp = match result {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            Err((code, m)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": m}})
            }
        };
        serde_json::to_writer(&mut out, &resp).unwrap();
        out.write_all(b"\n").unwrap();
        out.flush().unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers written into the temp dir: a Python line relay and a rusage wrapper
// ---------------------------------------------------------------------------------------------

const RELAY_PY: &str = r#"import subprocess, sys, threading
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def up():
    for line in iter(sys.stdin.buffer.readline, b""):
        p.stdin.write(line); p.stdin.flush()
    p.stdin.close()
threading.Thread(target=up, daemon=True).start()
out = sys.stdout.buffer
for line in iter(p.stdout.readline, b""):
    out.write(line); out.flush()
p.wait()
"#;

/// Runs argv[2:] with stdin from argv[1] (`-` = /dev/null) and prints the children's CPU seconds
/// (user + system, microsecond resolution) and the wall seconds.
const RUSAGE_PY: &str = r#"import resource, subprocess, sys, time
stdin = subprocess.DEVNULL if sys.argv[1] == "-" else open(sys.argv[1], "rb")
t = time.monotonic()
p = subprocess.run(sys.argv[2:], stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
w = time.monotonic() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime + r.ru_stime, w, p.returncode)
"#;

/// (CPU seconds of the whole child tree that was reaped, wall seconds).
fn rusage(ctx: &Ctx, stdin: Option<&Path>, argv: &[String]) -> (f64, f64) {
    let out = Command::new(PYTHON)
        .arg(ctx.path("rusage.py"))
        .arg(stdin.map_or("-".to_owned(), Ctx::s))
        .args(argv)
        .env("MCPSUM_STATE_DIR", ctx.path("state"))
        .output()
        .unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    let f: Vec<&str> = s.split_whitespace().collect();
    assert_eq!(f.get(2), Some(&"0"), "rusage run failed: {argv:?}: {s}");
    (f[0].parse().unwrap(), f[1].parse().unwrap())
}

/// Splits a transcript (`{"event":"start"}`, `{"event":"recv","msg":…}` lines) into one stdin
/// file per server process.
fn replay_files(ctx: &Ctx, transcript: &Path, tag: &str) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(transcript).unwrap();
    let mut spawns: Vec<String> = Vec::new();
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        match v["event"].as_str() {
            Some("start") => spawns.push(String::new()),
            Some("recv") => {
                let last = spawns.last_mut().unwrap();
                last.push_str(&v["msg"].to_string());
                last.push('\n');
            }
            _ => {}
        }
    }
    spawns
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let p = ctx.path(&format!("replay-{tag}-{i}.jsonl"));
            std::fs::write(&p, s).unwrap();
            p
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Areas
// ---------------------------------------------------------------------------------------------

/// A large tool whose schema has `n` properties: nested objects, unsorted keys, floats,
/// escapes and non-ASCII text, the things canonicalization spends time on.
fn large_tool(n: usize) -> Value {
    let mut props = serde_json::Map::new();
    for i in 0..n {
        props.insert(
            format!("prop_{:05}_{}", (i * 7919) % 100_000, if i % 3 == 0 { "é" } else { "x" }),
            json!({
                "type": if i % 2 == 0 { "number" } else { "string" },
                "description": format!("Property {i}: \"quoted\", tab\t, emoji 😀, ünïcödé, line\nbreak"),
                "minimum": (i as f64) * 0.1 + 1e-7,
                "maximum": 1.5e21 + i as f64,
                "multipleOf": 0.001,
                "default": i,
                "enum": [1, 2.5, -0.0, 1e300, "a", null, true],
                "zz": {"b": [1, 2, 3], "a": {"y": "z", "x": 2.718_3e-5}},
            }),
        );
    }
    json!({"name": "large_tool", "description": "d".repeat(1000),
           "inputSchema": {"type": "object", "properties": props}})
}

/// Issue 4: the taint check on a clean session, the cost a sink call pays before it is
/// forwarded (label lookup + `SessionStore::tainted`, which stats the session file and re-reads
/// it only when it changed), against a plain label lookup.
fn bench_taint(ctx: &Ctx) -> Table {
    eprintln!("== taint");
    let mut t = Table::new(
        "Taint check per call on a clean session",
        "In-process: `Labels::is_sink` + `SessionStore::tainted()` on a session file shared as the          proxy shares it (state written once by `update`), against `Labels::is_sink` alone.          Median over the rounds of the mean per call.",
    );
    let state = ctx.path("taint-bench-state");
    std::fs::create_dir_all(&state).unwrap();
    let session = mcpsum::session::Session {
        id: "1-1".into(),
        client_pid: 1,
        client_start: 1,
        chain: Vec::new(),
    };
    let mut store = mcpsum::taint::SessionStore::open(&state, &session).unwrap();
    store
        .update(|s| {
            s.servers.insert("bench".into());
        })
        .unwrap();
    let labels = mcpsum::taint::Labels::default();
    let call = mcpsum::taint::Call::Tool("send");
    let n = ctx.n(200_000, 20_000);
    let rounds = 7;
    let per_call = |f: &mut dyn FnMut() -> bool| {
        let mut ds = Vec::new();
        for _ in 0..rounds {
            let t0 = Instant::now();
            for _ in 0..n {
                std::hint::black_box(f());
            }
            ds.push(t0.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
        ds.sort_by(f64::total_cmp);
        ds[ds.len() / 2]
    };
    let check = per_call(&mut || labels.is_sink(call) | store.tainted().unwrap().is_some());
    let lookup = per_call(&mut || labels.is_sink(call));
    t.row(
        "clean-session check per call (label + stat of the session file)",
        format!("{check:.2} µs"),
        format!("label lookup alone {lookup:.3} µs"),
        "≤ 20 µs",
        Some(check <= 20.0),
    );
    t
}

/// What checking the lockfile's signature adds to `show` and to the proxy's start (issue 19):
/// the same runs with and without an allowed-signers file in force, interleaved.
fn bench_sign(ctx: &Ctx) -> Table {
    eprintln!("== sign (signature check in show and proxy start)");
    let lock = ctx.path("sign.lock");
    let argv = ctx.native_argv(&["--tools", "98"]);
    std::thread::scope(|s| {
        for i in 0..20 {
            let (argv, lock) = (&argv, &lock);
            s.spawn(move || ctx.lock(lock, &format!("server{i:02}"), None, argv));
        }
    });
    let bytes = std::fs::read(&lock).unwrap();
    let size = bytes.len();
    // The baseline: the same bytes, never signed, no allowed-signers file (mcpsum before #19).
    let base = ctx.path("unsigned.lock");
    std::fs::write(&base, &bytes).unwrap();
    let runs = ctx.n(100, 20);
    let starts = ctx.n(40, 10);
    let mut t = Table::new(
        "Signed lockfile: what the signature check adds",
        &format!(
            "The `show` lockfile (20 servers × 100 tools, {:.2} MB), signed by `mcpsum sign` \
             with each key type (SHA-256 message hash) and once by a bare `ssh-keygen -Y sign -n \
             mcpsum` (SHA-512); \"with\" passes `--allowed-signers` listing the key, \
             \"without\" is a copy of the same bytes with no signature and no allowed-signers \
             file (what mcpsum did before signing existed). `show`: {runs} wall-time \
             runs of each, interleaved. Proxy start: spawn `mcpsum proxy --name server00` (native \
             server), send `initialize`, time to its answer (the check runs before it), {starts} \
             of each, interleaved. In-process: the thread's on-CPU time of \
             `mcpsum::signing::check` (read the signature and allowed signers, hash of the \
             file, verify), median of {runs}. Added = median with − median without.",
            size as f64 / 1e6
        ),
    );
    let err = ctx.path("sign-stderr.log");
    // `mcpsum sign` (SHA-256 message hash) with each key type, and one signature as a bare
    // `ssh-keygen -Y sign` makes it (SHA-512).
    for (label, kind, bits, by_ssh_keygen) in [
        ("ed25519", "ed25519", None, false),
        ("ecdsa", "ecdsa", Some("256"), false),
        ("rsa", "rsa", Some("3072"), false),
        ("ed25519, ssh-keygen's SHA-512", "ed25519", None, true),
    ] {
        let key = ctx.path(&format!("sign_{kind}_{by_ssh_keygen}"));
        let mut c = Command::new("ssh-keygen");
        c.args(["-q", "-t", kind, "-N", "", "-f"]).arg(&key);
        if let Some(b) = bits {
            c.args(["-b", b]);
        }
        assert!(c.status().unwrap().success(), "ssh-keygen -t {kind}");
        let _ = std::fs::remove_file(ctx.path("sign.lock.sig"));
        let st = if by_ssh_keygen {
            Command::new("ssh-keygen")
                .args(["-Y", "sign", "-n", "mcpsum", "-f"])
                .arg(&key)
                .arg(&lock)
                .stderr(Stdio::null())
                .status()
                .unwrap()
        } else {
            let mut c = ctx.mcpsum(&lock);
            c.arg("sign").arg("--key").arg(&key).stderr(Stdio::null());
            c.status().unwrap()
        };
        assert!(st.success(), "signing with {label}");
        let public = std::fs::read_to_string(format!("{}.pub", key.display())).unwrap();
        let anchor = ctx.path(&format!("allowed_{kind}_{by_ssh_keygen}"));
        std::fs::write(&anchor, format!("bench@example.com {public}")).unwrap();
        let with = |c: &mut Command| {
            c.arg("--allowed-signers").arg(&anchor);
        };
        let (mut show_with, mut show_without) = (vec![], vec![]);
        for _ in 0..runs {
            let mut c = ctx.mcpsum(&base);
            c.arg("show");
            show_without.push(wall(c));
            let mut c = ctx.mcpsum(&lock);
            with(&mut c);
            c.arg("show");
            show_with.push(wall(c));
        }
        let (mut start_with, mut start_without) = (vec![], vec![]);
        for i in 0..starts * 2 {
            let mut c = ctx.mcpsum(if i % 2 == 1 { &lock } else { &base });
            if i % 2 == 1 {
                with(&mut c);
            }
            c.args(["proxy", "--name", "server00"]);
            let t0 = Instant::now();
            let mut p = Peer::spawn(c, &err);
            p.initialize();
            let d = t0.elapsed();
            p.close();
            if i % 2 == 1 {
                start_with.push(d);
            } else {
                start_without.push(d);
            }
        }
        let trust = mcpsum::signing::Trust::new(Some(anchor.clone()));
        let mut check = vec![];
        for _ in 0..runs {
            let t0 = thread_cpu();
            std::hint::black_box(mcpsum::signing::check(&lock, &bytes, &trust).unwrap());
            check.push(thread_cpu() - t0);
        }
        let added = |w: &[Duration], wo: &[Duration]| ms(median(w)) - ms(median(wo));
        t.row(
            &format!("`show` added, {label}"),
            fmt_ms(added(&show_with, &show_without)),
            format!(
                "with {} · without {}",
                fmt_ms(ms(median(&show_with))),
                fmt_ms(ms(median(&show_without)))
            ),
            "≤ 1 ms",
            Some(added(&show_with, &show_without) <= 1.0),
        );
        t.row(
            &format!("proxy start added, {label}"),
            fmt_ms(added(&start_with, &start_without)),
            format!(
                "with {} · without {}",
                fmt_ms(ms(median(&start_with))),
                fmt_ms(ms(median(&start_without)))
            ),
            "≤ 1 ms",
            Some(added(&start_with, &start_without) <= 1.0),
        );
        t.row(
            &format!("in-process check, {label}"),
            fmt_ms(ms(median(&check))),
            "–".to_owned(),
            "diagnostic",
            None,
        );
    }
    t
}

fn bench_canon(ctx: &Ctx) -> Table {
    eprintln!("== canonicalizer");
    let mut t = Table::new(
        "Canonicalizer (RFC 8785) throughput on large items",
        "In-process, `mcpsum::canonical::canonicalize` and `Sha256Digest::of_json` against \
         `serde_json_canonicalizer::to_vec` (the crate that would replace ours) and \
         `serde_json::to_vec` (not canonical: the floor) of the same `Value`; both canonical \
         forms are checked to be the same bytes first. MB/s = size of `to_vec` output (10^6 B) \
         per second of the thread's on-CPU time (`CLOCK_THREAD_CPUTIME_ID`), median of the \
         iterations.",
    );
    let numbers: Vec<Value> = (0..200_000)
        .map(|i| json!((i as f64) * 1.000_001 + 0.123))
        .collect();
    let items = [
        ("schema with 5,000 properties", large_tool(5_000)),
        (
            "4 MB description (mixed text)",
            json!({"name": "long", "description": "Plain words, \"quotes\", ünïcödé ✓ 😀\n".repeat(100_000),
                   "inputSchema": {"type": "object"}}),
        ),
        (
            "200,000 floats",
            json!({"name": "nums", "inputSchema": {"type": "object", "default": numbers}}),
        ),
    ];
    let iters = ctx.n(15, 4);
    for (name, v) in &items {
        let size = serde_json::to_vec(v).unwrap().len();
        let time = |f: &dyn Fn() -> usize| {
            let mut ds = Vec::new();
            for _ in 0..iters {
                let t0 = thread_cpu();
                std::hint::black_box(f());
                ds.push(thread_cpu() - t0);
            }
            median(&ds)
        };
        let ours = canonicalize(v);
        let theirs = serde_json_canonicalizer::to_vec(v).unwrap();
        let same = if ours == theirs {
            "same bytes"
        } else {
            "DIFFERENT bytes"
        };
        let d_json = time(&|| serde_json::to_vec(v).unwrap().len());
        let d_canon = time(&|| canonicalize(v).len());
        let d_crate = time(&|| serde_json_canonicalizer::to_vec(v).unwrap().len());
        let d_digest = time(&|| {
            Sha256Digest::of_json(v);
            0
        });
        let mbs = |d: Duration| size as f64 / 1e6 / d.as_secs_f64();
        t.row(
            &format!("{name} ({:.1} MB): canonicalize", size as f64 / 1e6),
            format!(
                "{:.0} MB/s ({:.0}% of to_vec)",
                mbs(d_canon),
                100.0 * mbs(d_canon) / mbs(d_json)
            ),
            format!("to_vec {:.0} MB/s", mbs(d_json)),
            "compare",
            None,
        );
        t.row(
            &format!("{name}: ours against `serde_json_canonicalizer` ({same})"),
            format!(
                "ours {:.0} MB/s, {:.2}× the crate's",
                mbs(d_canon),
                mbs(d_canon) / mbs(d_crate)
            ),
            format!("serde_json_canonicalizer {:.0} MB/s", mbs(d_crate)),
            "ours faster",
            Some(d_canon < d_crate && ours == theirs),
        );
        t.row(
            &format!("{name}: digest (canonicalize + SHA-256)"),
            format!("{:.0} MB/s", mbs(d_digest)),
            format!("to_vec {:.0} MB/s", mbs(d_json)),
            "compare",
            None,
        );
    }
    t
}

fn bench_show(ctx: &Ctx) -> Table {
    eprintln!("== show (20 servers × 100 tools)");
    let lock = ctx.path("show.lock");
    // Lock the native server under 20 names, in parallel (the advisory lock serialises writes).
    let argv = ctx.native_argv(&["--tools", "98"]); // + echo + big = 100 tools
    std::thread::scope(|s| {
        for i in 0..20 {
            let (argv, lock) = (&argv, &lock);
            s.spawn(move || ctx.lock(lock, &format!("server{i:02}"), None, argv));
        }
    });
    let l = mcpsum::lockfile::load(&lock).unwrap();
    let tools: usize = l.servers.values().map(|e| e.tools.len()).sum();
    let size = std::fs::metadata(&lock).unwrap().len();
    let runs = ctx.n(100, 20);
    let (mut show, mut show_json, mut truth, mut version) = (vec![], vec![], vec![], vec![]);
    let mut load = vec![];
    for _ in 0..runs {
        let mut c = ctx.mcpsum(&lock);
        c.arg("show");
        show.push(wall(c));
        let mut c = ctx.mcpsum(&lock);
        c.args(["show", "--json"]);
        show_json.push(wall(c));
        truth.push(wall(Command::new("/bin/true")));
        let mut c = ctx.mcpsum(&lock);
        c.arg("--version");
        version.push(wall(c));
        let t0 = thread_cpu();
        std::hint::black_box(mcpsum::lockfile::load(&lock).unwrap());
        load.push(thread_cpu() - t0);
    }
    let cpu_runs = ctx.n(15, 5);
    let mcpsum_argv = |extra: &[&str]| {
        let mut a = vec![Ctx::s(&ctx.mcpsum), "--lockfile".to_owned(), Ctx::s(&lock)];
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    };
    let cpu_show: Vec<f64> = (0..cpu_runs)
        .map(|_| rusage(ctx, None, &mcpsum_argv(&["show"])).0)
        .collect();
    let cpu_version: Vec<f64> = (0..cpu_runs)
        .map(|_| rusage(ctx, None, &mcpsum_argv(&["--version"])).0)
        .collect();
    let mut t = Table::new(
        "`mcpsum show` on 20 servers × 100 tools",
        &format!(
            "Lockfile of {} servers, {tools} tools, {:.2} MB (every digest recomputed on load). \
             Wall time from spawn to exit, stdout to /dev/null, {runs} runs interleaved; CPU = \
             user + system from `getrusage(RUSAGE_CHILDREN)` of a wrapper ({cpu_runs} runs); the \
             in-process load is the thread's on-CPU time.",
            l.servers.len(),
            size as f64 / 1e6
        ),
    );
    let base = format!(
        "`/bin/true` {} · `mcpsum --version` {}",
        fmt_ms(ms(median(&truth))),
        fmt_ms(ms(median(&version)))
    );
    for (name, v) in [
        ("`show` wall, median", &show),
        ("`show --json` wall, median", &show_json),
    ] {
        let m = ms(median(v));
        t.row(
            name,
            format!("{} (p90 {})", fmt_ms(m), fmt_ms(ms(pct(v, 90)))),
            base.clone(),
            "< 5 ms",
            Some(m < 5.0),
        );
    }
    t.row(
        "`show` CPU (user + system), median",
        fmt_ms(median_f(&cpu_show) * 1e3),
        format!(
            "`mcpsum --version` {}",
            fmt_ms(median_f(&cpu_version) * 1e3)
        ),
        "(< 5 ms wall)",
        None,
    );
    t.row(
        "`show` minus `mcpsum --version` (load + digests + print)",
        fmt_ms(ms(median(&show)) - ms(median(&version))),
        format!(
            "in-process `mcpsum::lockfile::load` of the same file {}",
            fmt_ms(ms(median(&load)))
        ),
        "diagnostic",
        None,
    );
    t
}

fn bench_lock(ctx: &Ctx) -> Table {
    eprintln!("== lock of a 1,000-tool server");
    let mut t = Table::new(
        "`mcpsum lock` of a 1,000-tool server: mcpsum's own CPU",
        "CPU = user + system of the whole reaped process tree (`getrusage(RUSAGE_CHILDREN)` of a \
         wrapper, µs resolution). The server alone is measured by replaying, into a fresh server \
         process per spawn, exactly the messages mcpsum sent it (recorded from a locking run); \
         mcpsum's own CPU = tree − server. A legacy server is started twice (the \
         `server/discover` probe, then `initialize`). Medians.",
    );
    let runs = ctx.n(9, 3);
    let fake_scen = |rec: Option<&Path>| {
        let mut s = json!({"generateTools": 1000});
        if let Some(r) = rec {
            s["transcript"] = json!(Ctx::s(r));
        }
        s
    };
    let rec_fake = ctx.path("rec-fake.jsonl");
    let rec_native = ctx.path("rec-native.jsonl");
    let scen_plain = ctx.write_json("fake1000.json", &fake_scen(None));
    let scen_rec = ctx.write_json("fake1000-rec.json", &fake_scen(Some(&rec_fake)));
    let servers: Vec<(&str, Vec<String>, Vec<String>, PathBuf)> = vec![
        (
            "Python fake",
            ctx.fake_argv(&scen_plain),
            ctx.fake_argv(&scen_rec),
            rec_fake.clone(),
        ),
        (
            "native",
            ctx.native_argv(&["--tools", "998"]),
            ctx.native_argv(&["--tools", "998", "--record", &Ctx::s(&rec_native)]),
            rec_native.clone(),
        ),
    ];
    for (name, argv, argv_rec, rec) in servers {
        let lock = ctx.path("lock1000.lock");
        let _ = std::fs::remove_file(&lock);
        ctx.lock(&lock, "rec", None, &argv_rec);
        let replays = replay_files(ctx, &rec, name);
        let l = mcpsum::lockfile::load(&lock).unwrap();
        let n_tools = l.servers["rec"].tools.len();
        let (mut tree, mut walls, mut server) = (vec![], vec![], vec![]);
        for _ in 0..runs {
            let _ = std::fs::remove_file(&lock);
            let mut a = vec![Ctx::s(&ctx.mcpsum), "--lockfile".into(), Ctx::s(&lock)];
            a.extend(["lock", "--name", "big", "--"].map(String::from));
            a.extend(argv.iter().cloned());
            let (cpu, w) = rusage(ctx, None, &a);
            tree.push(cpu);
            walls.push(w);
            let mut sum = 0.0;
            for r in &replays {
                sum += rusage(ctx, Some(r), &argv).0;
            }
            server.push(sum);
        }
        let (tree_m, server_m) = (median_f(&tree) * 1e3, median_f(&server) * 1e3);
        let items = &l.servers["rec"].tools;
        let digest_cpu: Vec<Duration> = (0..5)
            .map(|_| {
                let t0 = thread_cpu();
                std::hint::black_box(mcpsum::lockfile::item_digests(
                    mcpsum::lockfile::Kind::Tool,
                    items,
                ));
                std::hint::black_box(mcpsum::lockfile::to_bytes(&l));
                thread_cpu() - t0
            })
            .collect();
        let own = tree_m - server_m;
        t.row(
            &format!(
                "{name} server, {n_tools} tools, {} spawns: mcpsum CPU beyond the server",
                replays.len()
            ),
            fmt_ms(own),
            format!(
                "tree {} − server alone {} (wall {}); in-process item digests + lockfile bytes \
                 of these tools {}",
                fmt_ms(tree_m),
                fmt_ms(server_m),
                fmt_ms(median_f(&walls) * 1e3),
                fmt_ms(ms(median(&digest_cpu)))
            ),
            "< 30 ms",
            Some(own < 30.0),
        );
    }
    t
}

fn bench_verify(ctx: &Ctx) -> Table {
    eprintln!("== verify of 10 slow-starting servers");
    let scen = ctx.write_json("verify.json", &json!({"generateTools": 20}));
    let inner = ctx.fake_argv(&scen).join(" ");
    let fake: Vec<String> = vec![
        "/bin/sh".into(),
        "-c".into(),
        format!("/bin/sleep 0.3; exec {inner}"),
    ];
    let native = ctx.native_argv(&["--tools", "18", "--delay-ms", "300"]);
    let rounds = ctx.n(3, 1);
    let mut t = Table::new(
        "`mcpsum verify` of 10 servers that each take ~300 ms to start",
        &format!(
            "Python fake: `/bin/sh -c '/bin/sleep 0.3; exec python3 mcp_fake.py …'` (20 tools); \
             its ~50 ms of Python start-up CPU per server competes for the machine's cores when \
             10 start at once. Native: `bench --serve-native --delay-ms 300` (20 tools, \
             negligible CPU), which isolates mcpsum's own concurrency. Baselines: `verify --name` \
             of each server alone, in the same round. Medians of {rounds} round(s)."
        ),
    );
    for (label, argv) in [("Python fake", &fake), ("native", &native)] {
        let lock = ctx.path(&format!("verify-{}.lock", label.replace(' ', "_")));
        std::thread::scope(|s| {
            for i in 0..10 {
                let (argv, lock) = (argv, &lock);
                s.spawn(move || ctx.lock(lock, &format!("slow{i}"), None, argv));
            }
        });
        let (mut all, mut slowest, mut sums, mut cpu) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            let argv_all = vec![
                Ctx::s(&ctx.mcpsum),
                "--lockfile".to_owned(),
                Ctx::s(&lock),
                "verify".to_owned(),
            ];
            let (c, w) = rusage(ctx, None, &argv_all);
            all.push(Duration::from_secs_f64(w));
            cpu.push(c);
            let singles: Vec<Duration> = (0..10)
                .map(|i| {
                    let mut c = ctx.mcpsum(&lock);
                    c.args(["verify", "--name", &format!("slow{i}")]);
                    wall(c)
                })
                .collect();
            slowest.push(*singles.iter().max().unwrap());
            sums.push(singles.iter().sum());
        }
        let (a, m, s) = (ms(median(&all)), ms(median(&slowest)), ms(median(&sums)));
        t.row(
            &format!("{label} servers: `verify` of all 10, wall"),
            format!(
                "{} ({:.2}× the slowest, {:.0}% of the sum)",
                fmt_ms(a),
                a / m,
                100.0 * a / s
            ),
            format!(
                "slowest single {} · sum of singles {} · CPU of the whole run (mcpsum + 10 \
                 servers) {}",
                fmt_ms(m),
                fmt_ms(s),
                fmt_ms(median_f(&cpu) * 1e3)
            ),
            "close to the slowest (≤ 1.5×), not the sum",
            Some(a <= 1.5 * m),
        );
    }
    t
}

struct ProxyCase {
    label: &'static str,
    direct: Vec<String>,
    lock_name: &'static str,
}

fn bench_proxy(ctx: &Ctx) -> Vec<Table> {
    eprintln!("== proxy");
    let lock = ctx.path("proxy.lock");
    let scen = ctx.write_json(
        "proxy.json",
        &json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}},
                          {"name": "big", "inputSchema": {"type": "object"}}]}),
    );
    std::fs::write(ctx.path("relay.py"), RELAY_PY).unwrap();
    let cases = [
        ProxyCase {
            label: "Python fake",
            direct: ctx.fake_argv(&scen),
            lock_name: "fake",
        },
        ProxyCase {
            label: "native",
            direct: ctx.native_argv(&[]),
            lock_name: "native",
        },
    ];
    for c in &cases {
        ctx.lock(&lock, c.lock_name, None, &c.direct);
    }
    let err = ctx.path("proxy-stderr.log");
    let proxy_cmd = |name: &str| {
        let mut c = ctx.mcpsum(&lock);
        c.args(["proxy", "--name", name]);
        c
    };
    let relay_argv = |direct: &[String]| {
        let mut v = vec![PYTHON.to_owned(), Ctx::s(&ctx.path("relay.py"))];
        v.extend(direct.iter().cloned());
        v
    };

    // --- latency -------------------------------------------------------------------------
    let calls = ctx.n(2000, 300);
    let warm = ctx.n(200, 50);
    let mut lat = Table::new(
        "Proxy: added latency per small `tools/call`",
        &format!(
            "{calls} sequential `tools/call echo` per path after {warm} warm-up calls; the three \
             paths to one kind of server are open at once and called in turn (direct, proxy, \
             Python relay), so they see the same machine state. Added = percentile through the \
             path − the same percentile direct. The Python relay is a 12-line \
             `readline`/`write`/`flush` line relay, the reference point for a transparent relay."
        ),
    );
    for c in &cases {
        let mut peers = [
            Peer::argv(&c.direct, &err),
            Peer::spawn(proxy_cmd(c.lock_name), &err),
            Peer::argv(&relay_argv(&c.direct), &err),
        ];
        for p in &mut peers {
            p.initialize();
        }
        let mut rtts: [Vec<Duration>; 3] = [vec![], vec![], vec![]];
        for _ in 0..warm {
            for p in &mut peers {
                p.echo_call();
            }
        }
        let cpu0: Vec<Duration> = peers.iter().map(|p| proc_cpu(p.pid())).collect();
        for _ in 0..calls {
            for (k, p) in peers.iter_mut().enumerate() {
                rtts[k].push(p.echo_call());
            }
        }
        let cpu: Vec<f64> = peers
            .iter()
            .zip(&cpu0)
            .map(|(p, c0)| us(proc_cpu(p.pid()).saturating_sub(*c0)) / calls as f64)
            .collect();
        for p in peers {
            p.close();
        }
        let [d, p, r] = &rtts;
        let (a50, a99) = (
            diff_us(pct(p, 50), pct(d, 50)),
            diff_us(pct(p, 99), pct(d, 99)),
        );
        let (r50, r99) = (
            diff_us(pct(r, 50), pct(d, 50)),
            diff_us(pct(r, 99), pct(d, 99)),
        );
        let base = format!(
            "direct p50 {} p99 {} · via proxy p50 {} p99 {}",
            fmt_us(us(pct(d, 50))),
            fmt_us(us(pct(d, 99))),
            fmt_us(us(pct(p, 50))),
            fmt_us(us(pct(p, 99)))
        );
        lat.row(
            &format!("{} server: added p50 / p99, mcpsum proxy", c.label),
            format!("{} / {}", fmt_us(a50), fmt_us(a99)),
            base,
            "p50 ≤ 25 µs, p99 ≤ 150 µs",
            Some(a50 <= 25.0 && a99 <= 150.0),
        );
        lat.row(
            &format!(
                "{} server: on-CPU time per call of the mcpsum proxy process",
                c.label
            ),
            fmt_us(cpu[1]),
            format!(
                "Python relay process {} · the server itself (direct) {}",
                fmt_us(cpu[2]),
                fmt_us(cpu[0])
            ),
            "diagnostic",
            None,
        );
        lat.row(
            &format!(
                "{} server: added p50 / p99, Python relay (reference)",
                c.label
            ),
            format!("{} / {}", fmt_us(r50), fmt_us(r99)),
            format!(
                "via relay p50 {} p99 {}",
                fmt_us(us(pct(r, 50))),
                fmt_us(us(pct(r, 99)))
            ),
            "reference",
            None,
        );
    }

    // --- throughput ----------------------------------------------------------------------
    let size = 10_000_000;
    let reps = ctx.n(10, 3);
    let mut thr = Table::new(
        "Proxy: a 10 MB tool result",
        &format!(
            "`tools/call big` answering 10,000,000 `x` (one JSON line of ~10 MB), request sent → \
             whole answer line read, median of {reps} after one warm-up, direct and through the \
             proxy alternately. End-to-end rate = line bytes / round trip; the proxy's own rate = \
             line bytes / (round trip through the proxy − direct round trip)."
        ),
    );
    for c in &cases {
        let mut direct = Peer::argv(&c.direct, &err);
        let mut proxied = Peer::spawn(proxy_cmd(c.lock_name), &err);
        direct.initialize();
        proxied.initialize();
        direct.big_call(size);
        proxied.big_call(size);
        let (mut dd, mut pd, mut len) = (vec![], vec![], 0);
        let cpu0 = proc_cpu(proxied.pid());
        for _ in 0..reps {
            let (d, n) = direct.big_call(size);
            dd.push(d);
            let (d, n2) = proxied.big_call(size);
            pd.push(d);
            len = n.max(n2);
        }
        let proxy_cpu = proc_cpu(proxied.pid()).saturating_sub(cpu0) / reps as u32;
        direct.close();
        proxied.close();
        let line = direct_line_like(size);
        let mut floor = vec![];
        for _ in 0..reps {
            let t0 = thread_cpu();
            let v: Value = serde_json::from_slice(&line).unwrap();
            std::hint::black_box(serde_json::to_vec(&v).unwrap());
            floor.push(thread_cpu() - t0);
        }
        let fl = median(&floor);
        let (dm, pm) = (median(&dd), median(&pd));
        let added = pm.saturating_sub(dm).as_secs_f64();
        let own = if added > 0.0 {
            len as f64 / added / 1e9
        } else {
            f64::INFINITY
        };
        thr.row(
            &format!(
                "{} server: proxy's own rate (added {})",
                c.label,
                fmt_ms(added * 1e3)
            ),
            format!("{own:.2} GB/s"),
            format!(
                "end to end: direct {:.2} GB/s ({}) · via proxy {:.2} GB/s ({})",
                len as f64 / dm.as_secs_f64() / 1e9,
                fmt_ms(ms(dm)),
                len as f64 / pm.as_secs_f64() / 1e9,
                fmt_ms(ms(pm)),
            ),
            "≥ 1 GB/s",
            Some(own >= 1.0),
        );
        thr.row(
            &format!(
                "{} server: proxy on-CPU time per 10 MB answer",
                c.label
            ),
            format!(
                "{} = {:.2} GB/s of CPU",
                fmt_ms(ms(proxy_cpu)),
                len as f64 / proxy_cpu.as_secs_f64() / 1e9
            ),
            format!(
                "in-process `from_slice::<Value>` + `to_vec` of such a line (on-CPU) {} = {:.2} GB/s",
                fmt_ms(ms(fl)),
                len as f64 / fl.as_secs_f64() / 1e9
            ),
            "diagnostic",
            None,
        );
    }

    // --- memory --------------------------------------------------------------------------
    let mut mem = Table::new(
        "Proxy: memory",
        "`VmRSS`/`VmHWM` of the `mcpsum proxy` process from `/proc/<pid>/status` (the server \
         is a separate process, the native one). Idle: after `initialize` and `tools/list` have \
         been answered, 200 ms later. Peak: `VmHWM` after one `tools/call` answered with a \
         single JSON line just under the default 64 MiB message limit.",
    );
    {
        let mut p = Peer::spawn(proxy_cmd("native"), &err);
        p.initialize();
        p.request("tools/list", json!({}));
        std::thread::sleep(Duration::from_millis(200));
        let idle = proxy_status(&p, "VmRSS");
        let hwm_before = proxy_status(&p, "VmHWM");
        let mut d = Peer::argv(&ctx.native_argv(&[]), &err);
        d.initialize();
        std::thread::sleep(Duration::from_millis(100));
        let server_idle = proc_status_kib(d.pid(), "VmRSS");
        mem.row(
            "idle RSS of the proxy",
            format!("{:.1} MB", idle as f64 / 1024.0),
            format!("native server alone {:.1} MB", server_idle as f64 / 1024.0),
            "≤ 10 MB",
            Some(idle as f64 * 1024.0 <= 10e6),
        );
        let msg = 64 * 1024 * 1024 - 4096;
        let (dt, n) = p.big_call(msg);
        let peak = proxy_status(&p, "VmHWM");
        let (dd, _) = d.big_call(msg);
        d.close();
        p.close();
        mem.row(
            &format!("peak RSS after a {:.1} MiB message", n as f64 / 1048576.0),
            format!(
                "{:.1} MB = {:.2}× the message",
                peak as f64 / 1024.0,
                peak as f64 * 1024.0 / n as f64
            ),
            format!(
                "peak before it {:.1} MB; round trip {} via proxy, {} direct",
                hwm_before as f64 / 1024.0,
                fmt_ms(ms(dt)),
                fmt_ms(ms(dd))
            ),
            "< 3× the message",
            Some((peak as f64 * 1024.0) < 3.0 * n as f64),
        );
    }

    // --- start-up ------------------------------------------------------------------------
    let runs = ctx.n(30, 8);
    ctx.lock(
        &lock,
        "native-slow",
        None,
        &ctx.native_argv(&["--delay-ms", "200"]),
    );
    let mut start = Table::new(
        "Proxy: start-up until the first `initialize` answer, excluding the server",
        &format!(
            "Through the proxy: spawn `mcpsum proxy`, send `initialize` at once, time to its \
             answer; then one `tools/call echo`, time (from spawn) to its answer, which needs \
             the server up and its surface checked. Server alone: spawn it directly and do what \
             the proxy must (`initialize`, `notifications/initialized`, `tools/list`), then the \
             same call. {runs} pairs run back to back; differences are medians of the per-pair \
             differences. Whether the server is on the path to the `initialize` answer is checked \
             with a native server that sleeps 200 ms before reading: if the proxy answers before \
             that server could, the answer does not wait for the server and the start-up \
             excluding the server is the whole time to the answer. The proxy's on-CPU time (its \
             threads' `schedstat`, read when the `initialize` answer arrives) excludes the \
             server, a separate process."
        ),
    );
    let mut slow = vec![];
    for _ in 0..ctx.n(5, 3) {
        let t0 = Instant::now();
        let mut p = Peer::spawn(proxy_cmd("native-slow"), &err);
        p.initialize();
        slow.push(t0.elapsed());
        p.close();
    }
    let waits = ms(median(&slow)) >= 200.0;
    for c in &cases {
        let (mut init, mut first, mut alone_init, mut alone_first, mut cpu) =
            (vec![], vec![], vec![], vec![], vec![]);
        let (mut d_init, mut d_first) = (vec![], vec![]);
        for _ in 0..runs {
            let t0 = Instant::now();
            let mut p = Peer::spawn(proxy_cmd(c.lock_name), &err);
            p.initialize();
            let ti = t0.elapsed();
            cpu.push(proc_cpu(p.pid()));
            p.echo_call();
            let tf = t0.elapsed();
            p.close();
            let t0 = Instant::now();
            let mut d = Peer::argv(&c.direct, &err);
            d.initialize();
            d.request("tools/list", json!({}));
            let ai = t0.elapsed();
            d.echo_call();
            let af = t0.elapsed();
            d.close();
            init.push(ti);
            first.push(tf);
            alone_init.push(ai);
            alone_first.push(af);
            d_init.push(ms(ti) - ms(ai));
            d_first.push(ms(tf) - ms(af));
        }
        let own = if waits {
            median_f(&d_init)
        } else {
            ms(median(&init))
        };
        start.row(
            &format!(
                "{} server: to the `initialize` answer, excluding the server",
                c.label
            ),
            fmt_ms(own),
            format!(
                "via proxy {} · server handshake + list alone {} · the answer {} for the server \
                 (200 ms-delayed server: {})",
                fmt_ms(ms(median(&init))),
                fmt_ms(ms(median(&alone_init))),
                if waits { "waits" } else { "does not wait" },
                fmt_ms(ms(median(&slow)))
            ),
            "≤ 5 ms",
            Some(own <= 5.0),
        );
        start.row(
            &format!(
                "{} server: to the first `tools/call` answer, beyond the server",
                c.label
            ),
            fmt_ms(median_f(&d_first)),
            format!(
                "via proxy {} · server alone (handshake, list, call) {}",
                fmt_ms(ms(median(&first))),
                fmt_ms(ms(median(&alone_first)))
            ),
            "(≤ 5 ms)",
            None,
        );
        start.row(
            &format!(
                "{} server: proxy on-CPU time until the `initialize` answer",
                c.label
            ),
            fmt_ms(ms(median(&cpu))),
            String::new(),
            "diagnostic",
            None,
        );
    }
    vec![lat, thr, mem, start]
}

/// A `tools/call` answer line like the `big` tool's, for the in-process floor.
fn direct_line_like(bytes: usize) -> Vec<u8> {
    let mut v = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":""#.to_vec();
    v.resize(v.len() + bytes, b'x');
    v.extend_from_slice(b"\"}]}}");
    v
}

fn proxy_status(p: &Peer, key: &str) -> u64 {
    proc_status_kib(p.pid(), key)
}

fn bench_sandbox(ctx: &Ctx) -> Table {
    eprintln!("== sandbox launch overhead");
    let lock = ctx.path("sandbox.lock");
    let me_dir = Ctx::s(ctx.me.parent().unwrap());
    let scen = ctx.write_json(
        "sandbox.json",
        &json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
    );
    let fake_dirs = [Ctx::s(ctx.fake.parent().unwrap()), Ctx::s(ctx.tmp.path())];
    let policy = |read: &[String], allow: &[&str]| json!({"filesystem": {"read": read}, "network": {"allow": allow}});
    let sb_native_none = ctx.write_json(
        "sb-native-none.json",
        &policy(std::slice::from_ref(&me_dir), &[]),
    );
    let sb_native_host = ctx.write_json(
        "sb-native-host.json",
        &policy(std::slice::from_ref(&me_dir), &["example.com:443"]),
    );
    let sb_fake_none = ctx.write_json("sb-fake-none.json", &policy(&fake_dirs, &[]));
    let sb_fake_host = ctx.write_json(
        "sb-fake-host.json",
        &policy(&fake_dirs, &["example.com:443"]),
    );
    let native = ctx.native_argv(&[]);
    let fake = ctx.fake_argv(&scen);
    type Variant<'a> = (&'a str, Option<&'a Path>);
    let groups: [(&str, &Vec<String>, [Variant; 3]); 2] = [
        (
            "native",
            &native,
            [
                ("plain", None),
                ("allow []", Some(&sb_native_none)),
                ("hosts", Some(&sb_native_host)),
            ],
        ),
        (
            "Python fake",
            &fake,
            [
                ("plain", None),
                ("allow []", Some(&sb_fake_none)),
                ("hosts", Some(&sb_fake_host)),
            ],
        ),
    ];
    let runs = ctx.n(40, 8);
    let err = ctx.path("sandbox-stderr.log");
    let mut t = Table::new(
        "Sandbox launch overhead",
        &format!(
            "Same server, same lockfile, entries differing only in `policy.sandbox`: none, \
             `network.allow: []` (user namespace, Landlock, seccomp, private TMP), and \
             `allow: [\"example.com:443\"]` (plus a network namespace and the egress bridge). \
             One launch = `mcpsum proxy` spawned → `initialize` → first `tools/call` answered \
             (one server start, its surface checked); \
             `lock` = a whole `mcpsum lock` (two server starts for these legacy servers). \
             {runs} rounds, each running the three variants back to back; overhead = median over \
             the rounds of (sandboxed − plain) of the same round. Extra CPU: on-CPU time of the \
             proxy and every live process under it when the first call is answered \
             (`schedstat`), and `getrusage(RUSAGE_CHILDREN)` of a wrapper for `lock`; unlike wall \
             time it is not inflated by other load on the machine."
        ),
    );
    for (label, argv, variants) in groups {
        for (v, sb) in &variants {
            ctx.lock(
                &lock,
                &format!(
                    "{}-{}",
                    label.replace(' ', "_"),
                    v.replace(['[', ']', ' '], "")
                ),
                *sb,
                argv,
            );
        }
        let names: Vec<String> = variants
            .iter()
            .map(|(v, _)| {
                format!(
                    "{}-{}",
                    label.replace(' ', "_"),
                    v.replace(['[', ']', ' '], "")
                )
            })
            .collect();
        let mut launch: [Vec<Duration>; 3] = [vec![], vec![], vec![]];
        let mut locks: [Vec<Duration>; 3] = [vec![], vec![], vec![]];
        let mut launch_cpu: [Vec<Duration>; 3] = [vec![], vec![], vec![]];
        let mut lock_cpu: [Vec<Duration>; 3] = [vec![], vec![], vec![]];
        let scratch = ctx.path("sandbox-scratch.lock");
        for _ in 0..runs {
            for (k, (_, sb)) in variants.iter().enumerate() {
                let mut c = ctx.mcpsum(&lock);
                c.args(["proxy", "--name", &names[k]]);
                let t0 = Instant::now();
                let mut p = Peer::spawn(c, &err);
                p.initialize();
                p.echo_call();
                launch[k].push(t0.elapsed());
                launch_cpu[k].push(tree_cpu(p.pid()));
                p.close();
                let _ = std::fs::remove_file(&scratch);
                let mut a = vec![
                    Ctx::s(&ctx.mcpsum),
                    "--lockfile".to_owned(),
                    Ctx::s(&scratch),
                    "lock".to_owned(),
                    "--name".to_owned(),
                    "x".to_owned(),
                ];
                if let Some(s) = sb {
                    a.extend(["--sandbox".to_owned(), Ctx::s(s)]);
                }
                a.push("--".to_owned());
                a.extend(argv.iter().cloned());
                let (cpu, w) = rusage(ctx, None, &a);
                locks[k].push(Duration::from_secs_f64(w));
                lock_cpu[k].push(Duration::from_secs_f64(cpu));
            }
        }
        let base_l = ms(median(&launch[0]));
        let base_k = ms(median(&locks[0]));
        for (k, (v, _)) in variants.iter().enumerate().skip(1) {
            let paired = |v: &[Vec<Duration>; 3]| {
                let d: Vec<f64> = v[k]
                    .iter()
                    .zip(&v[0])
                    .map(|(a, b)| ms(*a) - ms(*b))
                    .collect();
                median_f(&d)
            };
            let ol = paired(&launch);
            let ok = paired(&locks);
            let ocl = paired(&launch_cpu);
            let ock = paired(&lock_cpu);
            let (target, limit) = if k == 1 {
                ("≤ 3 ms", 3.0)
            } else {
                ("≤ 8 ms", 8.0)
            };
            t.row(
                &format!("{label} server, `{v}`: launch overhead (proxy → first call)"),
                fmt_ms(ol),
                format!(
                    "sandboxed {} · plain {}",
                    fmt_ms(ms(median(&launch[k]))),
                    fmt_ms(base_l)
                ),
                target,
                Some(ol <= limit),
            );
            t.row(
                &format!("{label} server, `{v}`: extra CPU, whole process tree"),
                format!(
                    "launch {} · `lock` {} ({} per start)",
                    fmt_ms(ocl),
                    fmt_ms(ock),
                    fmt_ms(ock / 2.0)
                ),
                format!(
                    "plain: launch {} · `lock` {}",
                    fmt_ms(ms(median(&launch_cpu[0]))),
                    fmt_ms(ms(median(&lock_cpu[0])))
                ),
                "diagnostic",
                None,
            );
            t.row(
                &format!("{label} server, `{v}`: `lock` overhead (2 starts)"),
                format!("{} ({} per start)", fmt_ms(ok), fmt_ms(ok / 2.0)),
                format!(
                    "sandboxed {} · plain {}",
                    fmt_ms(ms(median(&locks[k]))),
                    fmt_ms(base_k)
                ),
                target,
                Some(ok / 2.0 <= limit),
            );
        }
    }
    t
}

// ---------------------------------------------------------------------------------------------
// Egress proxy (issue 6)
// ---------------------------------------------------------------------------------------------

/// Runs the egress crate's own bench (`egress/examples/bench.rs`, in-process client, proxy and
/// servers on their own threads) and turns its JSON into a table.
fn bench_egress(ctx: &Ctx) -> Table {
    eprintln!("== egress tunnel throughput and set-up");
    let exe = ctx.root.join("target/release/examples/bench");
    assert!(
        exe.exists(),
        "{} is missing: run `cargo build --release -p mcpsum-egress --example bench` first \
         (scripts/bench.sh does)",
        exe.display()
    );
    let (mib, rounds) = (ctx.n(256, 128), ctx.n(7, 3));
    let out = Command::new(&exe)
        .args([mib.to_string(), rounds.to_string(), "--json".into()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} failed: {}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let peers: Vec<String> = v["peers"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(name, p)| {
                    format!(
                        "{name} {} (`{}`)",
                        p["version"].as_str().unwrap_or("?"),
                        p["config"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let peers_text = if peers.is_empty() {
        "No peer was installed in this run (`apt-get install squid tinyproxy`).".to_owned()
    } else {
        format!("Peers in this run: {}.", peers.join("; "))
    };
    let mut t = Table::new(
        "Egress tunnel: throughput and set-up",
        &format!(
            "`cargo run --release -p mcpsum-egress --example bench -- {mib} {rounds}` (this \
             bench runs it with `--json`). One process, each party on its own thread with its own \
             current-thread runtime: the client, the servers, and the proxy (as in mcpsum, a \
             current-thread runtime). Direct = the client connects to the server over loopback \
             TCP; proxied = the same client and server, the same bytes (a ClientHello, then \
             {mib} MiB in 64 KiB writes, counted by the server), through `CONNECT` to the proxy. \
             Peers: squid and tinyproxy (Debian packages), each started by the bench on a free \
             loopback port as a plain CONNECT relay (no cache, no access log, any port, loopback \
             clients only) and stopped after; the same client, server and bytes go through them. \
             {rounds} rounds, each running every path once in a rotating order; throughput = \
             best MB/s over the rounds, and proxied/direct = median over the rounds of the two \
             paths' ratio in the same round; against the best peer = median over the rounds of \
             the copying relay's MB/s over the fastest peer's in that round. On-CPU time per GiB \
             of each thread from `/proc/self/task/*/schedstat`, and of a peer process from its \
             CPU-time clock (`clock_getcpuclockid`: the same scheduler count, summed over its \
             threads, exited ones included, and its children), medians over the rounds. On \
             loopback a write also runs the receiving socket's TCP input and a read's ACK can \
             push the peer's queued data, so work moves between threads: compare the totals. \
             The set-up rows compare 300 direct connects or handshakes with the same through the \
             proxy (median). {peers_text}"
        ),
    );
    let f = |kind: &str, path: &str, key: &str| v[kind][path][key].as_f64().unwrap_or(f64::NAN);
    let cpu = |kind: &str, path: &str, who: &str| {
        v[kind][path]["cpu_ms_per_gib"][who]
            .as_f64()
            .unwrap_or(f64::NAN)
    };
    let peer_names: Vec<&str> = ["squid", "tinyproxy"]
        .into_iter()
        .filter(|p| v["raw"][*p].is_object() || v["tls"][*p].is_object())
        .collect();
    for (kind, name) in [
        ("raw", "raw TCP after a ClientHello"),
        ("tls", "TLS 1.3 bulk data (rustls, ring)"),
    ] {
        let direct = format!("direct {:.0} MB/s", f(kind, "direct", "mbps_best"));
        let ratio = f(kind, "copy", "ratio_median");
        let of_direct = |path: &str| {
            format!(
                "{path} {:.0} MB/s · {:.0}% of direct",
                f(kind, path, "mbps_best"),
                100.0 * f(kind, path, "ratio_median")
            )
        };
        t.row(
            &format!("{name}: tunnel throughput, copying relay"),
            format!(
                "{:.0} MB/s · {:.0}% of direct",
                f(kind, "copy", "mbps_best"),
                100.0 * ratio
            ),
            direct.clone(),
            "≥ 90 % of direct",
            Some(ratio >= 0.9),
        );
        let against = &v[kind]["copy_vs_best_peer"];
        if against.is_object() {
            let tput = against["throughput_ratio_median"]
                .as_f64()
                .unwrap_or(f64::NAN);
            let fastest = against["fastest_peer"].as_str().unwrap_or("?");
            t.row(
                &format!("{name}: tunnel throughput against the best peer"),
                format!("{:.0}% of {fastest}", 100.0 * tput),
                peer_names
                    .iter()
                    .copied()
                    .map(of_direct)
                    .collect::<Vec<_>>()
                    .join(" · "),
                "≥ 100 % of the best peer",
                Some(tput >= 1.0),
            );
            let relay = against["relay_cpu_ratio"].as_f64().unwrap_or(f64::NAN);
            let leanest = against["leanest_peer"].as_str().unwrap_or("?");
            t.row(
                &format!("{name}: relay on-CPU per GiB against the best peer"),
                format!(
                    "{:.0} ms · {:.0}% of {leanest}",
                    cpu(kind, "copy", "relay"),
                    100.0 * relay
                ),
                peer_names
                    .iter()
                    .map(|p| format!("{p} {:.0} ms", cpu(kind, p, "relay")))
                    .collect::<Vec<_>>()
                    .join(" · "),
                "≤ 100 % of the best peer",
                Some(relay <= 1.0),
            );
        }
        let split = |path: &str| {
            format!(
                "{path} {:.0} + {:.0} + {:.0} = {:.0} ms",
                cpu(kind, path, "client"),
                cpu(kind, path, "server"),
                cpu(kind, path, "relay"),
                cpu(kind, path, "total")
            )
        };
        t.row(
            &format!("{name}: on-CPU per GiB, client + server + relay"),
            std::iter::once("copy")
                .chain(peer_names.iter().copied())
                .map(split)
                .collect::<Vec<_>>()
                .join(" · "),
            format!(
                "direct {:.0} + {:.0} = {:.0} ms",
                cpu(kind, "direct", "client"),
                cpu(kind, "direct", "server"),
                cpu(kind, "direct", "total")
            ),
            "diagnostic",
            None,
        );
    }
    for (key, name) in [
        (
            "tcp",
            "added set-up: TCP connect vs `CONNECT IP:port` → 200",
        ),
        (
            "tls",
            "added set-up: TCP + TLS handshake, name target (no DNS)",
        ),
    ] {
        let s = &v["setup"][key];
        let g = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
        let added = g("added_ms");
        t.row(
            name,
            fmt_ms(added),
            format!(
                "direct {} · proxied {}",
                fmt_ms(g("direct_ms")),
                fmt_ms(g("proxied_ms"))
            ),
            "≤ 1 ms",
            Some(added <= 1.0),
        );
    }
    t
}

// ---------------------------------------------------------------------------------------------

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--serve-native") {
        serve_native(&args);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let only: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(str::to_owned).collect());
    let want = |area: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == area));

    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mcpsum = root.join("target/release/mcpsum");
    // The in-process areas need no binary.
    let in_process = ["canon", "taint"];
    let needs_binary = only
        .as_ref()
        .is_none_or(|o| o.iter().any(|x| !in_process.contains(&x.as_str())));
    assert!(
        !needs_binary || mcpsum.exists(),
        "{} is missing: run `cargo build --release` first (scripts/bench.sh does)",
        mcpsum.display()
    );
    let ctx = Ctx {
        fake: root.join("tests/servers/mcp_fake.py"),
        me: std::env::current_exe().unwrap(),
        mcpsum,
        root,
        tmp: tempfile::Builder::new()
            .prefix("mcpsum-bench-")
            .tempdir()
            .unwrap(),
        quick,
    };
    std::fs::create_dir_all(ctx.path("state")).unwrap();
    std::fs::write(ctx.path("rusage.py"), RUSAGE_PY).unwrap();
    eprintln!(
        "mcpsum bench: binary {}, temp {}{}",
        ctx.mcpsum.display(),
        ctx.tmp.path().display(),
        if quick { " (quick)" } else { "" }
    );
    let load_before = loadavg();
    let started = Instant::now();
    let mut tables = Vec::new();
    if want("canon") {
        tables.push(bench_canon(&ctx));
    }
    if want("taint") {
        tables.push(bench_taint(&ctx));
    }
    if want("show") {
        tables.push(bench_show(&ctx));
    }
    if want("sign") {
        tables.push(bench_sign(&ctx));
    }
    if want("lock") {
        tables.push(bench_lock(&ctx));
    }
    if want("verify") {
        tables.push(bench_verify(&ctx));
    }
    if want("proxy") {
        tables.extend(bench_proxy(&ctx));
    }
    if want("sandbox") {
        tables.push(bench_sandbox(&ctx));
    }
    if want("egress") {
        tables.push(bench_egress(&ctx));
    }
    for t in &tables {
        t.print();
    }
    let met = tables
        .iter()
        .flat_map(|t| &t.rows)
        .filter(|r| r.met == Some(true))
        .count();
    let not = tables
        .iter()
        .flat_map(|t| &t.rows)
        .filter(|r| r.met == Some(false))
        .count();
    println!(
        "Targets: {met} met, {not} not met. Bench wall time {:.0} s; load average (1, 5, 15 min) \
         {load_before} at the start, {} at the end; binary copied from `{}`.",
        started.elapsed().as_secs_f64(),
        loadavg(),
        ctx.root.join("target/release/mcpsum").display()
    );
}
