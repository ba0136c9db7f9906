//! `mcpsum proxy --name NAME`: the stdio proxy a client runs instead of the server (SPEC §5).
//!
//! mcpsum is a server on the client link and a client on the server link. It loads and checks the
//! lock, starts exactly the locked command with exactly the passthrough environment, talks to the
//! server only in its locked era, reads the live surface and compares it before serving anything.
//! The client sees the lock and nothing else: `initialize` / `server/discover` and every list are
//! answered from the lock; calls reach the server only for locked items; definitional drift, at
//! start or later, quarantines the server (-32002 for every later request).
//!
//! One loop owns all state and both links, so there are no locks and no unbounded queues: it
//! reads a line from either side ([`LineReader`]), and what it sends is written at once or
//! queued in that peer's outbox; while a queue is over its bound, no more input is
//! read, so a slow reader on either side slows the other down instead of growing memory. The
//! messages of a call (request, answer, progress) are relayed from an envelope scan without
//! building values (`fast.rs`); everything else is parsed whole. Whether a client's request
//! may reach the server is decided once, for both paths, in `admission.rs`.

mod admission;
mod batch;
mod fast;
mod gate;
mod outbox;
mod uri;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use admission::{Admission, Call, Facts, Params, Refusal, Request};
use outbox::{Out, Outbox};

use crate::audit::AuditLog;
use crate::drift::{self, Class};
use crate::error::{Error, Exit, Result};
use crate::lockfile::{self, Era, Kind, ServerEntry, Sha256Digest, canonical_items};
use crate::mcp::client::{self, BATCH_VERSION, Options, with_modern_meta};
use crate::mcp::envelope::Scan;
use crate::mcp::framing::{self, Frame, LineReader};
use crate::mcp::{
    LATEST_LEGACY, LEGACY_VERSIONS, META_LOG_LEVEL, META_SERVER_INFO, MODERN_VERSION, codes,
};
use crate::output;

/// Items per page when serving a locked list.
const PAGE_SIZE: usize = 100;
/// Requests in flight towards the server, at most.
const MAX_IN_FLIGHT: usize = 4096;
/// How often mcpsum re-opens its own listen stream after the server ended it.
const MAX_LISTEN_REOPENS: u32 = 3;
/// `_meta` key of a 2026-07-28 subscription id.
const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
/// Audit records for dropped junk, at most, before only counting.
const MAX_DROP_RECORDS: u64 = 100;
/// Warnings on stderr for lines of the server's stdout that are not JSON, at most.
const MAX_BANNER_WARNINGS: u64 = 20;

/// A map keyed by the ids mcpsum gives its own requests to the server. They are sequential and
/// never chosen by a peer, so a multiplicative hash spreads them well without SipHash's cost.
type IdMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

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

/// Runs the proxy until the client leaves or the server exits.
pub async fn run(lockfile_flag: Option<&std::path::Path>, opts: &ProxyOptions) -> Result<Exit> {
    let path = crate::paths::require_lockfile(lockfile_flag)?;
    // Refused before any server starts; the client's requests get the reason
    // (`commands::proxy`).
    let (lock, signature) = crate::signing::load(&path, &opts.trust)?;
    let entry = crate::launch::entry(&lock, &path, &opts.name)?.clone();
    drop(lock);
    let state_dir = crate::paths::ensure_state_dir()?;
    let session = crate::session::current();
    let audit = AuditLog::open(&state_dir, &session.id, &opts.name)?;
    crate::proxy_start::warn_unset_env(&audit, &opts.name, &entry.env_passthrough);

    let launch =
        crate::launch::launch_for(&opts.name, &entry, &path, true, crate::pin::Check::Quick)?
            .learning(opts.learn, &state_dir)?;
    let started = Instant::now();
    let copts = Options {
        timeout: opts.timeout,
        max_message: opts.max_message,
        progress: None,
    };
    let locked_era = entry.era();
    let max = opts.max_message;
    // Fail closed before answering anything: a sandbox that cannot be built here is reported as
    // a start that failed, as `lock` and `verify` report it.
    if let Some(spec) = &launch.sandbox
        && let Err(e) = crate::sandboxing::check(&launch.server, &launch.argv, spec)
    {
        let failure = client::Failure {
            error: client::ClientError::Spawn(crate::mcp::process::SpawnError::Sandbox(e)),
            stderr: Vec::new(),
        };
        return Err(crate::launch::server_error(
            "cannot start",
            &launch,
            failure,
        ));
    }

    // The client link is up at once: the handshake is answered from the lock while the server
    // starts (a slow `uvx`/`npx` start would otherwise outlast a client's discover probe); every
    // other request waits until the live surface has been compared with the lock.
    let mut client_in = LineReader::new(client_stdin(), max, &[]);
    let mut to_client = Outbox::new();
    to_client.attach(client_stdout());
    let mut signalled = signals()?;

    let taint = gate::TaintGate::new(&entry)?;
    let mut proxy = Proxy {
        taint,
        name: opts.name.clone(),
        server_era: locked_era,
        server_version: entry.protocol_version.clone(),
        entry,
        audit,
        quarantine: None,
        client_legacy_caps: None,
        client_version: None,
        log_level: None,
        log_requests: Default::default(),
        batches: RefCell::new(Vec::new()),
        next_server_id: 0,
        pending: IdMap::default(),
        next_relay: 0,
        relayed: HashMap::new(),
        rounds: HashMap::new(),
        next_round: 0,
        listen_reopens: 0,
        subscriptions: HashMap::new(),
        legacy_streams: Vec::new(),
        streams: IdMap::default(),
        rereads: BTreeMap::new(),
        reread_timeout: opts.timeout,
        to_client: RefCell::new(to_client),
        to_server: RefCell::new(Outbox::new()),
        scan: Scan::default(),
        drops: 0,
        banners: 0,
        max_message: opts.max_message,
    };

    // What the client sent with the start is read first: a handshake in it is answered before
    // anything else happens (the session's taint state, spawning the server, which blocks this
    // thread until the child has exec'd).
    let mut early: Vec<Input> = Vec::new();
    // One turn of the runtime lets its driver learn that the pipe is readable.
    tokio::task::yield_now().await;
    while early.len() < EARLY_MAX {
        let Some(frame) = ready(client_in.next_frame()) else {
            break;
        };
        match frame {
            Ok(Some(Frame::Line(line))) if is_handshake(&line) => {
                proxy.on_client_line(line).await;
            }
            Ok(Some(frame)) => early.push(Input::of(frame, &client_in)),
            Ok(None) | Err(_) => {
                early.push(Input::Eof);
                break;
            }
        }
    }
    proxy.write_now();
    proxy.taint.open_store(&state_dir, &session, &opts.name)?;

    // Boxed, so that dropping it ends the server at once.
    let mut starting = Box::pin(start_server(&launch, locked_era, copts));
    // A client that closed its stdin after requests (a one-shot client, a shell pipe) still gets
    // their answers; one that asked nothing but the handshake needs no server.
    let mut client_gone = early.iter().any(|i| matches!(i, Input::Eof));
    let outcome = loop {
        if client_gone && !early.iter().any(Input::asks) {
            break Err("client closed stdin while the server started");
        }
        proxy.write_now();
        let busy = proxy.to_client.borrow().busy();
        tokio::select! {
            r = &mut starting => break Ok(r),
            frame = client_in.next_frame(), if !client_gone && early.len() < EARLY_MAX && proxy.has_room() => match frame {
                Ok(Some(Frame::Line(line))) if is_handshake(&line) => proxy.on_client_line(line).await,
                Ok(None) | Err(_) => {
                    early.push(Input::Eof);
                    client_gone = true;
                }
                Ok(Some(frame)) => early.push(Input::of(frame, &client_in)),
            },
            () = drain(&proxy.to_client), if busy => {}
            _ = &mut signalled => break Err("signal while the server started"),
        }
    };
    let (mut conn, live) = match outcome {
        Ok(Ok(started_server)) => started_server,
        Ok(Err(StartFailure {
            error,
            version_drop: true,
        })) => {
            // It cannot be spoken to as locked: quarantined, as drift would have it. Every
            // request but the handshake gets -32002 until the client leaves.
            proxy.quarantine_now(&error.one_line());
            proxy.to_server.borrow_mut().attach(tokio::io::sink());
            proxy.replay(early).await;
            loop {
                proxy.write_now();
                let busy = proxy.to_client.borrow().busy();
                tokio::select! {
                    frame = client_in.next_frame(), if proxy.has_room() => match frame {
                        Ok(Some(Frame::Line(line))) => proxy.on_client_line(line).await,
                        Ok(Some(Frame::TooLong(n))) => {
                            proxy.client_too_long(n, client_in.head()).await;
                        }
                        Ok(None) | Err(_) => break,
                    },
                    () = drain(&proxy.to_client), if busy => {}
                    _ = &mut signalled => break,
                }
            }
            proxy.audit.note(
                "exit",
                json!({"reason": "client closed stdin", "duration_ms": started.elapsed().as_millis() as u64}),
            );
            proxy.close_client().await;
            return Ok(Exit::Ok);
        }
        Ok(Err(StartFailure { error, .. })) => {
            // What the client asked meanwhile gets an answer before the proxy stops.
            let why = crate::proxy_start::client_message(&opts.name, &error);
            for input in &early {
                if let Input::Line(line) = input
                    && let Ok(msg) = serde_json::from_slice::<Value>(line)
                    && let (Some(id), Some(_)) = (msg.get("id"), msg.get("method"))
                {
                    let data = crate::proxy_start::error_data(&opts.name, &error);
                    proxy
                        .reply_error(id, codes::INTERNAL, &why, Some(data))
                        .await;
                }
            }
            proxy.close_client().await;
            return Err(error);
        }
        Err(reason) => {
            // Dropping the start ends the server's process group.
            drop(starting);
            proxy.audit.note(
                "exit",
                json!({"reason": reason, "duration_ms": started.elapsed().as_millis() as u64}),
            );
            proxy.close_client().await;
            return Ok(Exit::Ok);
        }
    };
    proxy.audit.note(
        "start",
        json!({"pid": conn.process.child.id(), "era": era_name(live.era), "duration_ms": started.elapsed().as_millis() as u64, "client_pid": session.client_pid, "signature": signature.state_name(), "signer": signature.signer().map(|s| &s.fingerprint)}),
    );
    // Lines that were not JSON-RPC during the start were warned of by the connection.
    for what in conn.take_skipped() {
        proxy.drop_junk("server", &what);
    }
    proxy.server_era = conn.era();
    proxy.server_version = conn.version().to_owned();
    proxy.next_server_id = conn.next_id();
    // The rest of a batch the server sent during the start comes first.
    let queued: Vec<u8> = conn
        .take_queued()
        .iter()
        .flat_map(framing::encode)
        .collect();
    let mut process = conn.process;
    let (Some(server_stdin), Some(server_out)) = (process.stdin.take(), process.stdout.take())
    else {
        return Err(Error::new("the server's stdio is gone"));
    };
    let mut buffered = queued;
    buffered.extend_from_slice(server_out.buffer());
    let server_out = server_out.into_inner();
    // A large result passes in fewer reads and wake-ups through a larger pipe (best effort).
    // Only this one pipe, and not much larger: the kernel counts every pipe's size against a
    // per-user budget (`pipe-user-pages-soft`), beyond which the user's new pipes get one page.
    let _ = nix::fcntl::fcntl(&server_out, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
    let mut server_in = LineReader::new(server_out, max, &buffered);
    proxy.to_server.borrow_mut().attach(server_stdin);

    proxy.check_start(&live);
    // A 2026-07-28 server announces changes only on a listen stream, and only for the kinds
    // whose capability has `listChanged` (mcp-server-time has none and refuses the stream).
    let announces = ["tools", "prompts", "resources"].iter().any(|k| {
        proxy.entry.capabilities[k]
            .get("listChanged")
            .and_then(Value::as_bool)
            == Some(true)
    });
    if proxy.server_era == Era::Modern && announces {
        proxy.open_listen().await;
    }
    // What the client sent while the server started, in order.
    proxy.replay(early).await;

    // Approval prompts that get no answer time out (the timer runs only while one is open).
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // When the last message passed: for a short while after it, the loop polls instead of
    // sleeping (see `SPIN`).
    let mut last_message = std::time::Instant::now();
    let exit = if client_gone {
        End::ClientLeft
    } else {
        loop {
            // No more input is read while a peer does not take what it was sent: a slow reader
            // slows the other side down instead of growing memory.
            // Lines already read are handled before anything is written, so that what a burst of
            // them produces goes out in one write per peer; a lone message is written at once.
            let buffered = match proxy.client_room().then(|| client_in.buffered()).flatten() {
                Some(frame) => Some(Link::Client(Ok(Some(frame)))),
                None => proxy
                    .server_room()
                    .then(|| server_in.buffered())
                    .flatten()
                    .map(|f| Link::Server(Ok(Some(f)))),
            };
            let event = match buffered {
                Some(event) => event,
                None => {
                    proxy.write_now();
                    let (client_room, server_room) = (proxy.client_room(), proxy.server_room());
                    let client_busy = proxy.to_client.borrow().busy();
                    let server_busy = proxy.to_server.borrow().busy();
                    let spin = last_message.elapsed() < SPIN;
                    tokio::select! {
                        // Input first, polling last: a ready line never loses a draw to a turn.
                        biased;
                        _ = tick.tick(), if proxy.taint.prompts_open() || !proxy.rereads.is_empty() => Link::Tick,
                        frame = client_in.next_frame(), if client_room => Link::Client(frame),
                        frame = server_in.next_frame(), if server_room => Link::Server(frame),
                        () = drain(&proxy.to_client), if client_busy => Link::Written,
                        () = drain(&proxy.to_server), if server_busy => Link::Written,
                        _ = &mut signalled => break End::Signal,
                        () = tokio::task::yield_now(), if spin => Link::Spin,
                    }
                }
            };
            if matches!(event, Link::Client(Ok(Some(_))) | Link::Server(Ok(Some(_)))) {
                last_message = std::time::Instant::now();
            }
            match event {
                Link::Client(Ok(Some(Frame::Line(line)))) => proxy.on_client_line(line).await,
                Link::Client(Ok(Some(Frame::TooLong(n)))) => {
                    proxy.client_too_long(n, client_in.head()).await;
                }
                Link::Client(Ok(None) | Err(_)) => break End::ClientLeft,
                Link::Server(Ok(Some(Frame::Line(line)))) => proxy.on_server_line(line).await,
                Link::Server(Ok(Some(Frame::TooLong(n)))) => {
                    proxy.server_too_long(n, server_in.head()).await;
                }
                Link::Server(Ok(None) | Err(_)) => break End::ServerExited,
                Link::Tick => {
                    proxy.expire_approvals().await;
                    proxy.expire_rereads();
                }
                Link::Written => {}
                // Gives the processor to a peer woken on this one (the wake-up just sent usually
                // lands here), so that polling never delays the peer it waits for.
                Link::Spin => std::thread::yield_now(),
            }
        }
    };

    match exit {
        End::ServerExited => {
            let why = format!("server `{}` exited before answering", opts.name);
            proxy.fail_in_flight(&why).await;
            let status = tokio::time::timeout(Duration::from_secs(2), process.child.wait()).await;
            let status = match status {
                Ok(Ok(s)) => s.to_string(),
                _ => "unknown status".to_owned(),
            };
            process.shutdown(Duration::from_millis(100)).await;
            proxy.audit.note("exit", json!({"reason": "server exited", "status": status, "duration_ms": started.elapsed().as_millis() as u64}));
            proxy.close_client().await;
            output::warn(&format!(
                "server `{}` exited ({status}); the proxy stops",
                opts.name
            ));
            Ok(Exit::Problem)
        }
        End::ClientLeft | End::Signal => {
            let reason = if matches!(exit, End::Signal) {
                "signal"
            } else {
                "client closed stdin"
            };
            proxy.audit.note(
                "exit",
                json!({"reason": reason, "duration_ms": started.elapsed().as_millis() as u64}),
            );
            // Closing our side of the server's stdin lets a well-behaved server exit by itself;
            // then the whole process group is ended.
            let mut to_server = proxy.to_server.replace(Outbox::new());
            to_server.close(Duration::from_millis(500)).await;
            if matches!(exit, End::ClientLeft) {
                proxy.withdraw_prompts().await;
                proxy.last_answers(&mut server_in, &mut signalled).await;
                // What is still unanswered gets an error, so that a batch of it is answered too.
                let why = format!(
                    "server `{}` did not answer within {} s of the client closing its stdin",
                    opts.name,
                    LAST_ANSWERS.as_secs()
                );
                proxy.fail_in_flight(&why).await;
            }
            process.shutdown(Duration::from_secs(2)).await;
            proxy.close_client().await;
            Ok(Exit::Ok)
        }
    }
}

/// Lines the client may send while the server starts, at most, before mcpsum stops reading.
const EARLY_MAX: usize = 64;
/// After the client closed its stdin, how long the answers to its requests still in flight
/// may take to reach it (the specification's "wait briefly" before the server is ended).
const LAST_ANSWERS: Duration = Duration::from_secs(5);
/// How long after a message the main loop keeps polling both peers (each turn asks the kernel,
/// without blocking, whether a pipe is readable) rather than sleeping until one is. A request's
/// answer or a client's next request usually follows within this; catching it while awake saves
/// the wake-up of a sleeping thread, which on an idle (virtual) machine costs tens of
/// microseconds per hop. The price is at most this much CPU time after each message; a busy
/// link never waits, so never polls.
const SPIN: Duration = Duration::from_micros(100);
/// Size asked for the server's stdout pipe.
const PIPE_SIZE: i32 = 256 << 10;

/// The output of `f` if it is ready without waiting.
fn ready<F: std::future::Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

/// Resolves on the first SIGTERM, SIGINT, SIGHUP (a closing terminal) or SIGQUIT: each ends
/// the proxy as stdin EOF does, with its audit records written and the server's tree ended.
/// The signals are awaited in a task of their own, so that the main loop polls one cheap
/// receiver per turn.
fn signals() -> Result<tokio::sync::oneshot::Receiver<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let install = |kind: SignalKind, name: &str| {
        signal(kind).map_err(|e| Error::new(format!("cannot install the {name} handler")).cause(e))
    };
    let mut term = install(SignalKind::terminate(), "SIGTERM")?;
    let mut int = install(SignalKind::interrupt(), "SIGINT")?;
    let mut hup = install(SignalKind::hangup(), "SIGHUP")?;
    let mut quit = install(SignalKind::quit(), "SIGQUIT")?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {}
            _ = quit.recv() => {}
        }
        let _ = tx.send(());
    });
    Ok(rx)
}

/// Waits until everything queued for a peer is written (or the peer is gone).
async fn drain(outbox: &RefCell<Outbox>) {
    std::future::poll_fn(|cx| outbox.borrow_mut().poll_drain(cx)).await;
}

/// Our stdin as an async reader: a pipe (what clients give) is read directly through the
/// reactor; anything else (a terminal, a file) through tokio's blocking helper thread, which
/// costs a thread hand-off per read.
fn client_stdin() -> Box<dyn tokio::io::AsyncRead + Unpin + Send> {
    use std::os::fd::AsFd;
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok());
    match pipe {
        Some(p) => Box::new(p),
        None => Box::new(tokio::io::stdin()),
    }
}

/// Our stdout as an async writer, like [`client_stdin`].
fn client_stdout() -> Box<dyn tokio::io::AsyncWrite + Unpin + Send> {
    use std::os::fd::AsFd;
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| {
            // As for the server's stdout: a large answer goes out in fewer writes and wake-ups.
            let _ = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
            tokio::net::unix::pipe::Sender::from_owned_fd(fd).ok()
        });
    match pipe {
        Some(p) => Box::new(p),
        None => Box::new(tokio::io::stdout()),
    }
}

/// What woke the main loop.
enum Link {
    Client(std::io::Result<Option<Frame>>),
    Server(std::io::Result<Option<Frame>>),
    Tick,
    Written,
    /// Nothing yet, while polling instead of sleeping.
    Spin,
}

enum End {
    ClientLeft,
    ServerExited,
    Signal,
}

/// A client message kept while the server starts.
enum Input {
    Line(Vec<u8>),
    /// A message over the limit: its length and its first bytes.
    TooLong(usize, Vec<u8>),
    Eof,
}

impl Input {
    fn of<R: tokio::io::AsyncRead + Unpin>(frame: Frame, reader: &LineReader<R>) -> Self {
        match frame {
            Frame::Line(line) => Input::Line(line),
            Frame::TooLong(n) => Input::TooLong(n, reader.head().to_vec()),
        }
    }
}

/// Why the server could not be started and read; `version_drop` when it no longer speaks the
/// locked 2026-07-28 version (the proxy quarantines it then, rather than stopping).
struct StartFailure {
    error: Error,
    version_drop: bool,
}

/// Starts the server in its locked era and reads its live surface.
async fn start_server(
    launch: &crate::mcp::process::Launch,
    era: Era,
    copts: Options,
) -> std::result::Result<(client::Connection, lockfile::Surface), StartFailure> {
    let (mut conn, hs) = client::connect(launch, Some(era), copts)
        .await
        .map_err(|f| StartFailure {
            version_drop: f.error.is_version_drop(),
            error: crate::launch::server_error("cannot start", launch, f),
        })?;
    let items = match client::read_lists(&mut conn, &hs).await {
        Ok(items) => items,
        Err(e) => {
            conn.close().await;
            return Err(StartFailure {
                error: Error::new(format!(
                    "cannot read the surface of server `{}`",
                    launch.server
                ))
                .cause(e),
                version_drop: false,
            });
        }
    };
    let live = hs.into_surface(items);
    Ok((conn, live))
}

impl Input {
    /// Whether this is a line that asks for an answer: a request, or a batch.
    fn asks(&self) -> bool {
        let Input::Line(line) = self else {
            return false;
        };
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(o)) => request_id(&o).is_some(),
            Ok(Value::Array(_)) => true,
            _ => false,
        }
    }
}

/// The id of a message that is a request (a method and an id that is not null).
fn request_id(obj: &Map<String, Value>) -> Option<&Value> {
    obj.get("method")?;
    obj.get("id").filter(|id| !id.is_null())
}

/// The level from which a 2026-07-28 request's `_meta` asks for log messages while it runs
/// (its place in [`LOG_LEVELS`]; an unknown level asks for all of them).
fn asks_logs(meta: Option<&Value>) -> Option<usize> {
    let level = meta?.get(META_LOG_LEVEL)?;
    Some(log_rank(level.as_str()).unwrap_or(0))
}

/// A level's place in [`LOG_LEVELS`], from `debug` (0) up.
fn log_rank(level: Option<&str>) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| Some(*l) == level)
}

/// Whether `id` is a JSON-RPC id as MCP allows it: a string or an integer (any number with an
/// integral value, so `1e3` and integers beyond 64 bits too; they are echoed as read).
fn valid_id(id: &Value) -> bool {
    id.is_string() || id.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// What makes a message from the client invalid JSON-RPC, if anything. Responses (to mcpsum's
/// own requests) are left to [`Proxy::client_response`].
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

/// Whether a client line is a handshake request that the lock alone answers.
fn is_handshake(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Peek<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
        id: Option<Value>,
    }
    serde_json::from_slice::<Peek<'_>>(line).is_ok_and(|p| {
        p.id.is_some_and(|id| !id.is_null())
            && p.method
                .is_some_and(|m| matches!(&*m, "initialize" | "server/discover" | "ping"))
    })
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

/// A legacy client's request to a 2026-07-28 server, kept for a retry after an input round.
struct Retry {
    /// The client's params, as it sent them.
    params: Value,
    /// Input rounds so far.
    rounds: u32,
}

/// Input rounds a request may take, at most (as the TypeScript SDK's shim).
const MAX_INPUT_ROUNDS: u32 = 8;

/// What an id of ours on the client link stands for.
enum Relayed {
    /// A legacy server's own request (sampling, elicitation, roots): the server's id.
    Server(Value),
    /// One question of a 2026-07-28 server's input round, asked of a legacy client.
    Input { round: u64, key: String },
}

/// An input round in progress: the server answered `input_required` to a legacy client's
/// request; mcpsum asks the client each question as a real request, then retries.
struct Round {
    client_id: Value,
    method: String,
    item: String,
    /// As [`Pending::Client::taints`].
    taints: bool,
    started: Instant,
    retry: Box<Retry>,
    request_state: Option<Value>,
    answers: Map<String, Value>,
    outstanding: usize,
}

struct Reread {
    items: Vec<Value>,
    cursors: std::collections::HashSet<String>,
    /// When its last page was asked for: a server that does not answer a page within the
    /// timeout (as `lock` bounds each list request) is quarantined.
    asked: Instant,
    /// Another `list_changed` came while it ran (it may have read a page from before it).
    again: bool,
}

struct Proxy {
    name: String,
    entry: ServerEntry,
    server_era: Era,
    server_version: String,
    audit: AuditLog,
    quarantine: Option<String>,
    /// Capabilities a legacy client declared in `initialize`.
    client_legacy_caps: Option<Value>,
    /// The version a legacy client negotiated in `initialize`.
    client_version: Option<String>,
    /// The level a legacy client set with `logging/setLevel`, for a 2026-07-28 server (which
    /// takes it on every request).
    log_level: Option<&'static str>,
    /// Server-side ids of a 2026-07-28 client's requests that asked for log messages, each with
    /// the level it asked for (its place in [`LOG_LEVELS`]); some may have been answered since.
    /// That era sends log messages only while such a request runs.
    log_requests: IdMap<usize>,
    /// The client's batches (2025-03-26) that wait for answers.
    batches: RefCell<Vec<batch::Batch>>,
    next_server_id: u64,
    pending: IdMap<Pending>,
    next_relay: u64,
    /// Our id on the client link → what it stands for (server requests relayed to the client,
    /// questions of input rounds).
    relayed: HashMap<String, Relayed>,
    /// Input rounds in progress, by their number.
    rounds: HashMap<u64, Round>,
    next_round: u64,
    /// Times mcpsum re-opened its own listen stream.
    listen_reopens: u32,
    /// Legacy `resources/subscribe` to a 2026-07-28 server: URI → the listen stream's id.
    subscriptions: HashMap<String, u64>,
    /// A 2026-07-28 client's listen streams to a legacy server: its id and the URIs that
    /// mcpsum subscribed to for it.
    legacy_streams: Vec<(Value, Vec<String>)>,
    /// Server-side listen id → the client's listen id (2026-07-28 subscriptions).
    streams: IdMap<Value>,
    rereads: BTreeMap<Kind, Reread>,
    /// How long a re-read may take before the server is quarantined (`--timeout-secs`).
    reread_timeout: Duration,
    /// What waits to be written to the client and to the server.
    to_client: RefCell<Outbox>,
    to_server: RefCell<Outbox>,
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

/// The log levels of `logging/setLevel` and `logLevel` (RFC 5424's).
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Requests of the legacy era that 2026-07-28 removed: a request in that era gets -32601 for
/// them, as from a server of that era (`initialize` is the legacy handshake and answered as such).
const REMOVED_IN_MODERN: [&str; 4] = [
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

impl Proxy {
    // ----- start-up -----

    /// Handles, in order, what the client sent while the server started.
    async fn replay(&mut self, early: Vec<Input>) {
        for input in early {
            match input {
                Input::Line(line) => self.on_client_line(line).await,
                Input::TooLong(n, head) => self.client_too_long(n, &head).await,
                Input::Eof => {}
            }
        }
    }

    fn check_start(&mut self, live: &lockfile::Surface) {
        match drift::compare(&self.entry, live) {
            Ok(d) => match d.class() {
                Class::Clean => {}
                Class::Informational => {
                    self.audit.note("drift", json!({"class": "informational", "fields": d.fields.iter().map(|f| f.field).collect::<Vec<_>>()}));
                }
                Class::Definitional => self.quarantine_now(&d.summary()),
            },
            Err(e) => self.quarantine_now(&e.to_string()),
        }
    }

    fn quarantine_now(&mut self, what: &str) {
        if self.quarantine.is_some() {
            return;
        }
        self.audit
            .note("drift", json!({"class": "definitional", "reason": what}));
        self.audit.note("quarantine", json!({"reason": what}));
        output::warn(&format!(
            "server `{}` is quarantined: its surface drifted from the lock ({}); review with `mcpsum verify --name {}`",
            self.name,
            output::sanitize_line(what),
            self.name
        ));
        self.quarantine = Some(what.to_owned());
    }

    async fn open_listen(&mut self) {
        let id = self.alloc_id();
        self.pending.insert(id, Pending::Listen);
        let params = with_modern_meta(
            json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}}),
            &self.server_version,
            json!({}),
        );
        self.send_server(
            json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params}),
        )
        .await;
    }

    /// The server ended (`done`) or refused mcpsum's own listen stream: open it again, a few
    /// times, since without it mid-session drift of a 2026-07-28 server goes unseen.
    async fn listen_ended(&mut self, done: bool) {
        if done && self.listen_reopens < MAX_LISTEN_REOPENS {
            self.listen_reopens += 1;
            return self.open_listen().await;
        }
        self.audit.note(
            "drift",
            json!({"class": "unwatched", "reason": "the server ended mcpsum's subscriptions/listen stream; mid-session drift is not detected until the next start"}),
        );
        output::warn(&format!(
            "server `{}` ended mcpsum's subscriptions/listen stream; mid-session drift is not detected until the next start",
            self.name
        ));
    }

    fn alloc_id(&mut self) -> u64 {
        let id = self.next_server_id;
        self.next_server_id += 1;
        id
    }

    // ----- sending -----

    async fn send_client(&self, msg: Value) {
        let answers = msg.get("method").is_none().then(|| msg.get("id")).flatten();
        self.push_client(answers, framing::encode(&msg));
    }

    async fn send_server(&self, msg: Value) {
        self.to_server
            .borrow_mut()
            .push(Out::bytes(framing::encode(&msg)));
    }

    /// Writes what waits for either peer as far as its pipe takes it, without waiting.
    fn write_now(&self) {
        self.to_client.borrow_mut().write_now();
        self.to_server.borrow_mut().write_now();
    }

    /// Whether both peers take what they are sent, so that more input may be read.
    fn has_room(&self) -> bool {
        self.to_client.borrow().has_room() && self.to_server.borrow().has_room()
    }

    /// Whether the client's next line may be read: what it asks goes to the server, which takes
    /// it, and what mcpsum answers itself (lists from the lock) is bounded.
    fn client_room(&self) -> bool {
        self.to_server.borrow().has_room() && self.to_client.borrow().bytes() < self.hard_cap()
    }

    /// Whether the server's next line may be read: it goes to the client, which takes it. The
    /// server's own stdin may be full meanwhile: a server that answers one request at a time
    /// stops reading while it writes a large answer, and must be read for its stdin to drain
    /// (else both would wait on each other). What a server line makes mcpsum send back to the
    /// server (a ping's answer) is bounded all the same.
    fn server_room(&self) -> bool {
        self.to_client.borrow().has_room() && self.to_server.borrow().bytes() < self.hard_cap()
    }

    /// What may wait for a peer that does not read, at most, before mcpsum stops reading the
    /// side that adds to it: room for the largest batch or message that was read whole.
    fn hard_cap(&self) -> usize {
        self.max_message.saturating_mul(2).saturating_add(4 << 20)
    }

    /// Writes what waits for the client (for a little while), then closes our stdout.
    async fn close_client(&mut self) {
        let mut to_client = self.to_client.replace(Outbox::new());
        to_client.close(Duration::from_secs(2)).await;
    }

    async fn reply(&self, id: &Value, result: Value) {
        self.send_client(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    async fn reply_error(&self, id: &Value, code: i64, message: &str, data: Option<Value>) {
        let mut err = json!({"code": code, "message": message});
        if let Some(d) = data {
            err["data"] = d;
        }
        self.send_client(json!({"jsonrpc": "2.0", "id": id, "error": err}))
            .await;
    }

    async fn refuse(&self, id: &Value, method: &str, item: &str, code: i64, message: &str) {
        self.refuse_with(id, method, item, code, message, None)
            .await;
    }

    /// [`Self::refuse`] with the error's `data`.
    async fn refuse_with(
        &self,
        id: &Value,
        method: &str,
        item: &str,
        code: i64,
        message: &str,
        data: Option<Value>,
    ) {
        self.audit.note(
            "refused",
            json!({"method": method, "item": item, "decision": "refuse", "reason": message}),
        );
        self.reply_error(id, code, message, data).await;
    }

    fn drop_junk(&mut self, from: &str, what: &str) {
        self.note_capped(json!({"from": from, "decision": "drop", "reason": what}));
    }

    /// A "refused" record a peer can cause without bound (junk, requests refused unrelayed):
    /// the first [`MAX_DROP_RECORDS`] of them are written, the rest counted.
    fn note_capped(&mut self, record: Value) {
        self.drops += 1;
        if self.drops <= MAX_DROP_RECORDS {
            self.audit.note("refused", record);
        } else if self.drops == MAX_DROP_RECORDS + 1 {
            self.audit.note("refused", json!({"decision": "drop", "reason": format!("more than {MAX_DROP_RECORDS} messages refused or dropped: further ones are not recorded")}));
        }
    }

    // ----- client side -----

    async fn client_too_long(&mut self, n: usize, head: &[u8]) {
        self.drop_junk("client", &format!("message of {n} bytes over the limit"));
        let (id, method) = head_fields(head);
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
                return self.fail_round(round, &message).await;
            }
            if let Some(Relayed::Server(server_id)) = relayed {
                let message = format!(
                    "the client's answer of {n} bytes is over mcpsum's limit of {limit} bytes"
                );
                return self
                    .send_server(json!({"jsonrpc": "2.0", "id": server_id, "error": {"code": codes::INTERNAL, "message": message}}))
                    .await;
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
        )
        .await;
    }

    /// The general path for a client message: parsed whole into a `Value`.
    async fn client_message(&mut self, line: &[u8]) {
        let msg = match crate::canonical::parse_strict_slice(line) {
            Ok(v) => v,
            Err(e) => {
                self.drop_junk("client", "invalid JSON");
                self.reply_error(
                    &Value::Null,
                    codes::PARSE,
                    &format!("parse error: {e}"),
                    None,
                )
                .await;
                return;
            }
        };
        match msg {
            Value::Object(obj) => self.client_object(obj).await,
            Value::Array(items) => self.client_batch(items).await,
            _ => {
                self.drop_junk("client", "not a JSON-RPC object");
                self.reply_error(
                    &Value::Null,
                    codes::INVALID_REQUEST,
                    "a message must be a JSON-RPC object",
                    None,
                )
                .await;
            }
        }
    }

    /// A client message that is one JSON-RPC object.
    async fn client_object(&mut self, obj: Map<String, Value>) {
        let id = obj.get("id").cloned();
        let method = obj.get("method").and_then(Value::as_str).map(str::to_owned);
        if let Some(why) = envelope_problem(&obj) {
            self.drop_junk("client", why);
            // Answered as JSON-RPC says, with id null when its own is missing or unusable.
            let id = id.filter(valid_id).unwrap_or(Value::Null);
            return self
                .reply_error(&id, codes::INVALID_REQUEST, why, None)
                .await;
        }
        let params = obj.get("params").cloned();
        match (method, id) {
            (Some(method), Some(id)) if !id.is_null() => {
                self.client_request(&id, &method, params).await
            }
            (Some(method), _) => self.client_notification(&method, params).await,
            (None, Some(id)) => self.client_response(&id, &obj).await,
            (None, None) => self.drop_junk("client", "neither request, notification nor response"),
        }
    }

    async fn client_request(&mut self, id: &Value, method: &str, params: Option<Value>) {
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
                return self.refuse_admission(id, method, item, r, modern).await;
            }
            Admission::Local => {
                return match request {
                    Some(Request::Initialize) => self.answer_initialize(id, params.as_ref()).await,
                    Some(Request::Discover) => self.answer_discover(id).await,
                    Some(Request::List(kind)) => {
                        self.answer_list(id, kind, params.as_ref(), modern).await
                    }
                    _ => self.reply(id, json!({})).await,
                };
            }
            // Sinks on a tainted session wait for the person's approval (I6).
            Admission::Ask {
                mark,
                prompt,
                by,
                taint_after,
            } => match self
                .ask(id, method, params, (item, taint_after), &mark, &prompt, by)
                .await
            {
                gate::Gate::Forward(p) => (p, taint_after),
                gate::Gate::Handled => return,
            },
            Admission::Forward { taint_after } => (params, taint_after),
        };
        match request {
            Some(Request::Subscribe { uri, .. }) if self.server_era == Era::Modern => {
                // 2026-07-28 has no resources/subscribe: a listen stream stands for it.
                return self.subscribe_by_listen(id, method, uri.to_owned()).await;
            }
            Some(Request::SetLevel { level }) if self.server_era == Era::Modern => {
                // 2026-07-28 has no setLevel: each request carries the level instead (admission
                // refused a level it does not know).
                if let Some(rank) = log_rank(level) {
                    self.log_level = Some(LOG_LEVELS[rank]);
                }
                return self.reply(id, json!({})).await;
            }
            Some(Request::Listen) if self.server_era == Era::Legacy => {
                // A legacy server has resources/subscribe instead.
                return self.listen_by_subscribe(id, params.as_ref()).await;
            }
            _ => {}
        }
        let item = item.to_owned();
        let retry = self.retry_for(method, params.as_ref(), modern);
        self.forward(id, method, params, modern, (item, taints), retry)
            .await;
    }

    /// The admission of `call` ([`admission::admit`]) with this proxy's facts.
    fn admit(&mut self, call: &Call<'_>) -> Admission {
        let (labels, store) = self.taint.parts();
        let facts = Facts {
            server: &self.name,
            entry: &self.entry,
            server_era: self.server_era,
            quarantined: self.quarantine.is_some(),
            labels,
            client_version: self.client_version.as_deref(),
            client_legacy_caps: self.client_legacy_caps.as_ref(),
        };
        admission::admit(call, &facts, store)
    }

    /// Carries out a refusal of [`admission::admit`].
    async fn refuse_admission(
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
                self.audit.note(
                    "refused",
                    json!({"method": method, "decision": "refuse", "reason": message}),
                );
                self.reply_error(id, code, &message, data).await;
            }
            Refusal::Removed(message) => {
                self.refuse(id, method, "", codes::METHOD_NOT_FOUND, &message)
                    .await;
            }
            Refusal::Quarantined => self.refuse_quarantined(id, method).await,
            Refusal::Params(message) => {
                self.refuse(id, method, "", codes::INVALID_PARAMS, &message)
                    .await;
            }
            Refusal::Item { code, message } => {
                // To the client an unlocked resource does not exist: the not-found error of
                // 2026-07-28 names the URI in `data.uri`, which legacy clients may read too.
                let data = matches!(
                    method,
                    "resources/read" | "resources/subscribe" | "resources/unsubscribe"
                )
                .then(|| json!({ "uri": item }));
                self.refuse_with(id, method, item, code, &message, data)
                    .await;
            }
            Refusal::Method { code, message } => self.refuse(id, method, "", code, &message).await,
            Refusal::Gate(gated) => self.refuse_gated(id, method, item, gated, modern).await,
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

    async fn refuse_quarantined(&self, id: &Value, method: &str) {
        let what = self.quarantine.as_deref().unwrap_or_default();
        let message = format!(
            "mcpsum: server `{}` is quarantined because its surface drifted from mcp.lock ({what}); review the change with `mcpsum verify --name {}`",
            self.name, self.name
        );
        self.audit.note(
            "refused",
            json!({"method": method, "decision": "refuse", "reason": "quarantined"}),
        );
        let data = json!({"server": self.name, "drift": what, "review": format!("mcpsum verify --name {}", self.name)});
        self.reply_error(id, codes::QUARANTINED, &message, Some(data))
            .await;
    }

    fn uri_locked(&self, u: &str) -> bool {
        admission::uri_locked(&self.entry, u)
    }

    async fn forward(
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
            return self
                .refuse(
                    client_id,
                    method,
                    &item,
                    codes::INTERNAL,
                    "too many requests in flight; retry later",
                )
                .await;
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
        let wants_logs = asks_logs(params.get("_meta")).filter(|_| modern_client);
        let params = self.to_server_params(params, modern_client);
        let sid = self.alloc_id();
        if let Some(rank) = wants_logs {
            self.log_requests.insert(sid, rank);
        }
        if method == "subscriptions/listen" {
            self.streams.insert(sid, client_id.clone());
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
            },
        );
        self.send_server(json!({"jsonrpc": "2.0", "id": sid, "method": method, "params": params}))
            .await;
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
                    && let Some(level) = self.log_level
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

    async fn answer_initialize(&mut self, id: &Value, params: Option<&Value>) {
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
        self.reply(id, result).await;
    }

    /// The discover result, from the lock (its `_meta` was checked with every 2026-07-28 request's).
    async fn answer_discover(&mut self, id: &Value) {
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
        self.reply(id, result).await;
    }

    async fn answer_list(&mut self, id: &Value, kind: Kind, params: Option<&Value>, modern: bool) {
        if self.entry.capabilities.get(kind.capability()).is_none() {
            return self
                .refuse(
                    id,
                    kind.list_method(),
                    "",
                    codes::METHOD_NOT_FOUND,
                    &format!("server `{}` offers no {}", self.name, kind.plural()),
                )
                .await;
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
                    return self
                        .reply_error(id, codes::INVALID_PARAMS, "invalid cursor", None)
                        .await;
                }
            },
            Some(_) => {
                return self
                    .reply_error(id, codes::INVALID_PARAMS, "invalid cursor", None)
                    .await;
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
        self.reply(id, Value::Object(result)).await;
    }

    async fn client_notification(&mut self, method: &str, params: Option<Value>) {
        match method {
            "notifications/initialized" => {
                // The server started before this client came and asked mcpsum for roots then (it
                // got none). A client that declared roots has its own: tell the server they
                // changed, so that it asks again and the question reaches the client.
                let roots = self
                    .client_legacy_caps
                    .as_ref()
                    .is_some_and(|c| c.get("roots").is_some());
                if roots && self.server_era == Era::Legacy && self.quarantine.is_none() {
                    self.send_server(
                        json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
                    )
                    .await;
                }
            }
            "notifications/cancelled" => {
                let rid = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .cloned()
                    .unwrap_or(Value::Null);
                self.batch_cancelled(&rid);
                if self.cancel_held(&rid).await || self.end_legacy_stream(&rid).await {
                    return;
                }
                let round = self
                    .rounds
                    .iter()
                    .find_map(|(n, r)| (r.client_id == rid).then_some(*n));
                if let Some(n) = round {
                    // Mid input round: nothing is pending at the server; forget the round.
                    if let Some(r) = self.rounds.remove(&n) {
                        self.cancel_questions(n, "the call was cancelled").await;
                        self.audit.note(
                            "call",
                            json!({"method": r.method, "item": r.item, "decision": "allow", "ok": false, "reason": "cancelled by the client", "duration_ms": r.started.elapsed().as_millis() as u64}),
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
                        self.streams.remove(&sid);
                        self.audit.note(
                            "call",
                            json!({"method": method, "item": item, "decision": "allow", "ok": false, "reason": "cancelled by the client", "duration_ms": started.elapsed().as_millis() as u64}),
                        );
                    }
                    let mut p = params.unwrap_or_else(|| json!({}));
                    p["requestId"] = json!(sid);
                    let p = self.to_server_params(p, false);
                    self.send_server(json!({"jsonrpc": "2.0", "method": method, "params": if self.server_era == Era::Legacy { strip_modern_meta(p) } else { p }})).await;
                }
            }
            "notifications/progress" | "notifications/roots/list_changed"
                if self.server_era == Era::Legacy =>
            {
                let mut msg = json!({"jsonrpc": "2.0", "method": method});
                if let Some(p) = params {
                    msg["params"] = p;
                }
                self.send_server(msg).await;
            }
            _ => self.drop_junk("client", &format!("notification `{method}` not forwarded")),
        }
    }

    async fn client_response(&mut self, id: &Value, obj: &Map<String, Value>) {
        if self.approval_answer(id, obj).await {
            return;
        }
        let key = id.as_str().map(str::to_owned).unwrap_or_default();
        let server_id = match self.relayed.remove(&key) {
            None => return self.drop_junk("client", "response to an unknown id"),
            Some(Relayed::Input { round, key }) => {
                return self.round_answer(round, key, obj).await;
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
        self.send_server(msg).await;
    }

    // ----- server side -----

    async fn server_too_long(&mut self, n: usize, head: &[u8]) {
        self.drop_junk("server", &format!("message of {n} bytes over the limit"));
        let limit = self.max_message;
        let (id, method) = head_fields(head);
        let Some(id) = id else { return };
        if method {
            // A request of the server's: it gets the error, nobody else sees it.
            let message = format!("message of {n} bytes is over mcpsum's limit of {limit} bytes");
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INVALID_REQUEST, "message": message}}))
                .await;
        }
        let Some(pending) = id.as_u64().and_then(|sid| self.pending.remove(&sid)) else {
            return;
        };
        let sid = id.as_u64().unwrap_or_default();
        match pending {
            Pending::Listen | Pending::Internal => {}
            Pending::Subscription { uri, client_id } => {
                self.subscription_failed(&uri, client_id, "an answer over the size limit")
                    .await;
            }
            Pending::Reread(kind) => {
                self.rereads.remove(&kind);
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
                self.streams.remove(&sid);
                self.audit.note(
                    "call",
                    json!({"method": method, "item": item, "decision": "allow", "ok": false, "reason": "answer over the size limit", "duration_ms": started.elapsed().as_millis() as u64, "bytes": n}),
                );
                let message = format!(
                    "the answer of server `{}` ({n} bytes) is over mcpsum's limit of {limit} bytes (`mcpsum proxy --max-message-bytes`)",
                    self.name
                );
                self.reply_error(&client_id, codes::INTERNAL, &message, None)
                    .await;
            }
        }
    }

    /// The general path for a server message: parsed whole into a `Value`.
    async fn server_message(&mut self, line: &[u8]) {
        match crate::canonical::parse_strict_slice(line) {
            Ok(Value::Object(obj)) => self.server_object(obj).await,
            Ok(Value::Array(items))
                if self.server_version == BATCH_VERSION && !items.is_empty() =>
            {
                for item in items {
                    match item {
                        Value::Object(obj) => self.server_object(obj).await,
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
            output::warn(&format!(
                "server `{}` wrote a line that is not JSON on its stdout; skipped it: {short:?}",
                output::sanitize_line(&self.name)
            ));
        }
        if self.banners == MAX_BANNER_WARNINGS {
            output::warn(&format!(
                "server `{}`: further lines that are not JSON are skipped without a warning",
                output::sanitize_line(&self.name)
            ));
        }
    }

    /// A server message that is one JSON-RPC object.
    async fn server_object(&mut self, obj: Map<String, Value>) {
        let method = obj.get("method").and_then(Value::as_str).map(str::to_owned);
        match (method, obj.get("id").cloned()) {
            (Some(m), Some(id)) if !id.is_null() => {
                self.server_request(&id, &m, obj.get("params").cloned())
                    .await
            }
            (Some(m), _) => {
                self.server_notification(&m, obj.get("params").cloned())
                    .await
            }
            (None, Some(id)) => self.server_response(&id, obj).await,
            (None, None) => self.drop_junk("server", "neither request, notification nor response"),
        }
    }

    async fn server_response(&mut self, id: &Value, obj: Map<String, Value>) {
        let Some(sid) = id.as_u64() else {
            return self.drop_junk("server", "response with an id mcpsum never sent");
        };
        let Some(pending) = self.pending.remove(&sid) else {
            return self.drop_junk("server", "response to an unknown id");
        };
        match pending {
            Pending::Listen => self.listen_ended(obj.contains_key("result")).await,
            Pending::Internal => {}
            Pending::Subscription { uri, client_id } => {
                let why = obj
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the server ended the stream")
                    .to_owned();
                self.subscription_failed(&uri, client_id, &why).await;
            }
            Pending::Reread(kind) => self.reread_page(kind, &obj).await,
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
            } => {
                let stream = self.streams.remove(&sid);
                let input_required = obj
                    .get("result")
                    .and_then(|r| r.get("resultType"))
                    .and_then(Value::as_str)
                    == Some("input_required");
                if input_required && self.quarantine.is_some() {
                    // Questions of a quarantined server reach no one.
                    return self.refuse_quarantined(&client_id, &method).await;
                }
                if input_required
                    && let Some(caps) = client_caps
                    && let Some(asked) = undeclared_question(
                        &caps,
                        obj.get("result").and_then(|r| r.get("inputRequests")),
                    )
                {
                    self.audit.note("refused", json!({"from": "server", "method": asked, "decision": "refuse", "reason": "the client did not declare this capability"}));
                    let msg = self.undeclared(&asked);
                    return self
                        .reply_error(&client_id, codes::INTERNAL, &msg, None)
                        .await;
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
                    return self.start_round(round, result.get("inputRequests")).await;
                }
                let mut out = json!({"jsonrpc": "2.0", "id": client_id});
                let ok = if obj.contains_key("result") && obj.contains_key("error") {
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
                    false
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
                        false
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
                                out["result"] = result;
                                true
                            }
                            Err(why) => {
                                out["error"] = json!({"code": codes::INTERNAL, "message": why});
                                false
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
                    false
                } else {
                    out["error"] = json!({"code": codes::INTERNAL, "message": "the server answered without result or error"});
                    false
                };
                let bytes = framing::encode(&out);
                self.audit
                    .note_call(&method, &item, ok, started.elapsed(), bytes.len());
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

    async fn server_request(&mut self, id: &Value, method: &str, params: Option<Value>) {
        if method == "ping" {
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "result": {}}))
                .await;
        }
        if self.quarantine.is_some() {
            // A quarantined server reaches neither the client nor the model.
            self.note_capped(json!({"from": "server", "method": method, "decision": "refuse", "reason": "quarantined"}));
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::QUARANTINED, "message": "the server is quarantined: its surface drifted from mcp.lock"}}))
                .await;
        }
        let declared = self
            .client_legacy_caps
            .as_ref()
            .is_some_and(|c| client_accepts(c, method, params.as_ref()));
        if !declared && method == "roots/list" {
            // mcpsum declares `roots` to every server, so the question gets an answer: no roots
            // of the client's, and the server keeps serving what its command line gave it.
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "result": {"roots": []}}))
                .await;
        }
        if !declared {
            self.note_capped(json!({"from": "server", "method": method, "decision": "refuse", "reason": "the client did not declare this capability"}));
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::METHOD_NOT_FOUND, "message": format!("the client does not accept `{method}`")}}))
                .await;
        }
        // Its text reaches the client (a sampling request goes to the model): the session is
        // tainted first, or the request is not relayed.
        if method != "roots/list"
            && let Err(why) = self.before_server_request(method)
        {
            return self
                .send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INTERNAL, "message": why}}))
                .await;
        }
        let ours = format!("mcpsum-{}", self.next_relay);
        self.next_relay += 1;
        if self.relayed.len() >= MAX_IN_FLIGHT {
            return self.send_server(json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INTERNAL, "message": "too many requests in flight"}})).await;
        }
        self.relayed
            .insert(ours.clone(), Relayed::Server(id.clone()));
        let mut msg = json!({"jsonrpc": "2.0", "id": ours, "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send_client(msg).await;
    }

    async fn server_notification(&mut self, method: &str, params: Option<Value>) {
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
                return self.listen_ended(true).await;
            }
            if let Some(Pending::Subscription { uri, client_id }) = self.pending.remove(&rid) {
                return self
                    .subscription_failed(&uri, client_id, "the server ended the stream")
                    .await;
            }
            if let Some(client_id) = self.streams.remove(&rid) {
                self.pending.remove(&rid);
                let mut p = params.unwrap_or_else(|| json!({}));
                p["requestId"] = client_id.clone();
                if p.get("_meta")
                    .and_then(|m| m.get(META_SUBSCRIPTION))
                    .is_some()
                {
                    p["_meta"][META_SUBSCRIPTION] = client_id;
                }
                return self
                    .send_client(json!({"jsonrpc": "2.0", "method": method, "params": p}))
                    .await;
            }
        }
        if self.quarantine.is_some() {
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
                self.start_reread(k).await;
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
                        self.reply(&id, json!({})).await;
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
                    self.send_client(json!({"jsonrpc": "2.0", "method": method, "params": p}))
                        .await;
                }
                _ => self.drop_junk("server", &format!("notification `{method}` not forwarded")),
            }
            return;
        }
        if method == "notifications/resources/updated"
            && self.server_era == Era::Legacy
            && !self.legacy_streams.is_empty()
        {
            // For a 2026-07-28 client's listen streams: tagged with each stream's id.
            let uri = params
                .as_ref()
                .and_then(|p| p.get("uri"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let tagged: Vec<Value> = self
                .legacy_streams
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
                self.send_client(json!({"jsonrpc": "2.0", "method": method, "params": p}))
                    .await;
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
            match self.streams.get(&s) {
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
        self.send_client(msg).await;
    }

    // ----- subscriptions/listen to a legacy server -----

    /// A 2026-07-28 client's listen stream to a legacy server: mcpsum subscribes to each
    /// locked URI asked for and acknowledges the subset it honours; list changes are never
    /// honoured (the client's lists are the lock). The stream stays open until the client
    /// cancels it.
    async fn listen_by_subscribe(&mut self, id: &Value, params: Option<&Value>) {
        let can = self.entry.capabilities["resources"]["subscribe"] == json!(true);
        let uris: Vec<String> = params
            .and_then(|p| p.get("notifications"))
            .and_then(|n| n.get("resourceSubscriptions"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .filter(|u| can && self.uri_locked(u))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if self.legacy_streams.len() >= MAX_IN_FLIGHT
            || self.pending.len() + uris.len() > MAX_IN_FLIGHT
        {
            return self
                .refuse(
                    id,
                    "subscriptions/listen",
                    "",
                    codes::INTERNAL,
                    "too many subscriptions; retry later",
                )
                .await;
        }
        for uri in &uris {
            let taken = self.legacy_streams.iter().any(|(_, us)| us.contains(uri));
            if !taken {
                let sid = self.alloc_id();
                self.pending.insert(sid, Pending::Internal);
                self.send_server(json!({"jsonrpc": "2.0", "id": sid, "method": "resources/subscribe", "params": {"uri": uri}}))
                    .await;
            }
        }
        let mut honoured = Map::new();
        if !uris.is_empty() {
            honoured.insert("resourceSubscriptions".into(), json!(uris));
        }
        self.legacy_streams.push((id.clone(), uris));
        self.audit.note(
            "call",
            json!({"method": "subscriptions/listen", "decision": "allow", "ok": true}),
        );
        self.send_client(
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": {META_SUBSCRIPTION: id}, "notifications": honoured}}),
        )
        .await;
    }

    /// The client cancelled a listen stream that stands on legacy subscriptions; `true` if so.
    async fn end_legacy_stream(&mut self, rid: &Value) -> bool {
        let Some(i) = self.legacy_streams.iter().position(|(id, _)| id == rid) else {
            return false;
        };
        let (_, uris) = self.legacy_streams.remove(i);
        for uri in uris {
            let still = self.legacy_streams.iter().any(|(_, us)| us.contains(&uri));
            if !still && self.pending.len() < MAX_IN_FLIGHT {
                let sid = self.alloc_id();
                self.pending.insert(sid, Pending::Internal);
                self.send_server(json!({"jsonrpc": "2.0", "id": sid, "method": "resources/unsubscribe", "params": {"uri": uri}}))
                    .await;
            }
        }
        true
    }

    // ----- resources/subscribe to a 2026-07-28 server -----

    async fn subscribe_by_listen(&mut self, id: &Value, method: &str, uri: String) {
        let existing = self.subscriptions.get(&uri).copied();
        if method == "resources/unsubscribe" {
            if let Some(sid) = existing {
                self.subscriptions.remove(&uri);
                self.pending.remove(&sid);
                let params =
                    with_modern_meta(json!({"requestId": sid}), &self.server_version, json!({}));
                self.send_server(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}))
                    .await;
            }
            self.audit.note(
                "call",
                json!({"method": method, "item": uri, "decision": "allow", "ok": true}),
            );
            return self.reply(id, json!({})).await;
        }
        if existing.is_some() {
            return self.reply(id, json!({})).await;
        }
        if self.pending.len() >= MAX_IN_FLIGHT {
            return self
                .refuse(
                    id,
                    method,
                    &uri,
                    codes::INTERNAL,
                    "too many requests in flight; retry later",
                )
                .await;
        }
        let sid = self.alloc_id();
        self.subscriptions.insert(uri.clone(), sid);
        self.pending.insert(
            sid,
            Pending::Subscription {
                uri: uri.clone(),
                client_id: Some(id.clone()),
            },
        );
        self.audit.note(
            "call",
            json!({"method": method, "item": uri, "decision": "allow", "ok": true}),
        );
        let params = with_modern_meta(
            json!({"notifications": {"resourceSubscriptions": [uri]}}),
            &self.server_version,
            json!({}),
        );
        self.send_server(json!({"jsonrpc": "2.0", "id": sid, "method": "subscriptions/listen", "params": params}))
            .await;
    }

    /// A subscription's stream ended or was refused: an unanswered subscribe gets the error.
    async fn subscription_failed(&mut self, uri: &str, client_id: Option<Value>, why: &str) {
        self.subscriptions.remove(uri);
        if let Some(id) = client_id {
            let message = format!(
                "server `{}` refused the subscription to `{uri}`: {why}",
                self.name
            );
            self.reply_error(&id, codes::INTERNAL, &message, None).await;
        }
    }

    // ----- input rounds: a 2026-07-28 server, a legacy client -----

    /// Asks the legacy client each question of the server's `input_required` answer as a real
    /// request (`elicitation/create`, `sampling/createMessage`, `roots/list`); the request is
    /// retried with the answers once all are in.
    async fn start_round(&mut self, mut round: Round, requests: Option<&Value>) {
        round.retry.rounds += 1;
        let n = self.next_round;
        self.next_round += 1;
        let questions: Vec<(String, Value)> = match requests {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => {
                self.rounds.insert(n, round);
                return self
                    .fail_round(n, "the server's inputRequests is not an object")
                    .await;
            }
        };
        let too_many = round.retry.rounds > MAX_INPUT_ROUNDS
            || self.rounds.len() >= MAX_IN_FLIGHT
            || self.relayed.len() + questions.len() > MAX_IN_FLIGHT;
        self.rounds.insert(n, round);
        if too_many {
            let msg = format!(
                "server `{}` asked for input more than {MAX_INPUT_ROUNDS} times, or too many requests are in flight",
                self.name
            );
            return self.fail_round(n, &msg).await;
        }
        let caps = self.client_legacy_caps.clone().unwrap_or_else(|| json!({}));
        let mut asks = Vec::new();
        for (key, q) in questions {
            let method = q.get("method").and_then(Value::as_str).unwrap_or_default();
            if !client_accepts(&caps, method, q.get("params")) {
                let msg = self.undeclared(method);
                return self.fail_round(n, &msg).await;
            }
            let ours = format!("mcpsum-{}", self.next_relay);
            self.next_relay += 1;
            let mut msg = json!({"jsonrpc": "2.0", "id": ours, "method": method});
            if let Some(p) = q.get("params") {
                msg["params"] = p.clone();
            }
            asks.push((ours, key, msg));
        }
        if let Some(r) = self.rounds.get_mut(&n) {
            r.outstanding = asks.len();
        }
        if asks.is_empty() {
            // State only (load shedding): retry at once.
            return self.retry_round(n).await;
        }
        // The server's questions carry its text to the client (a sampling request goes to the
        // model): a source's round taints the session before they are sent.
        if let Some(r) = self.rounds.get(&n) {
            let (method, item, taints) = (r.method.clone(), r.item.clone(), r.taints);
            if let Err(why) = self.after_result(&method, &item, taints) {
                return self.fail_round(n, &why).await;
            }
        }
        for (ours, key, msg) in asks {
            self.relayed.insert(ours, Relayed::Input { round: n, key });
            self.send_client(msg).await;
        }
    }

    async fn round_answer(&mut self, n: u64, key: String, obj: &Map<String, Value>) {
        let Some(result) = obj.get("result") else {
            let why = obj
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("no result")
                .to_owned();
            return self
                .fail_round(
                    n,
                    &format!("the client could not answer the server's question: {why}"),
                )
                .await;
        };
        let Some(r) = self.rounds.get_mut(&n) else {
            return;
        };
        r.answers.insert(key, result.clone());
        r.outstanding = r.outstanding.saturating_sub(1);
        if r.outstanding == 0 {
            self.retry_round(n).await;
        }
    }

    /// Sends the request again, with the answers and the server's `requestState`.
    async fn retry_round(&mut self, n: u64) {
        let Some(r) = self.rounds.remove(&n) else {
            return;
        };
        if self.quarantine.is_some() {
            // The retry is a new request to the server.
            return self.refuse_quarantined(&r.client_id, &r.method).await;
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
        )
        .await;
    }

    /// Forgets the questions of round `n` still open at the client, and tells the client to
    /// drop them (a dialog left open would ask the person for nothing).
    async fn cancel_questions(&mut self, n: u64, reason: &str) {
        let open: Vec<String> = self
            .relayed
            .iter()
            .filter(|(_, v)| matches!(v, Relayed::Input { round, .. } if *round == n))
            .map(|(k, _)| k.clone())
            .collect();
        for key in open {
            self.relayed.remove(&key);
            self.send_client(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": key, "reason": reason}}))
                .await;
        }
    }

    async fn fail_round(&mut self, n: u64, why: &str) {
        let Some(r) = self.rounds.remove(&n) else {
            return;
        };
        self.cancel_questions(n, why).await;
        self.audit.note(
            "call",
            json!({"method": r.method, "item": r.item, "decision": "allow", "ok": false, "reason": why, "duration_ms": r.started.elapsed().as_millis() as u64}),
        );
        self.reply_error(&r.client_id, codes::INTERNAL, why, None)
            .await;
    }

    // ----- mid-session drift -----

    async fn start_reread(&mut self, kind: Kind) {
        if self.quarantine.is_some() {
            return;
        }
        if let Some(running) = self.rereads.get_mut(&kind) {
            running.again = true;
            return;
        }
        self.rereads.insert(
            kind,
            Reread {
                items: Vec::new(),
                cursors: Default::default(),
                asked: Instant::now(),
                again: false,
            },
        );
        self.request_page(kind, None).await;
    }

    /// Quarantines the server if a re-read's page is late: asked for longer than the timeout
    /// ago, with no older request still unanswered. A server that announces a change and never
    /// shows the new list is treated as one that drifted.
    fn expire_rereads(&mut self) {
        // A server still busy with a request older than the page (one that answers in order)
        // gets until that one is answered.
        let oldest_busy = self
            .pending
            .values()
            .filter_map(|p| match p {
                Pending::Client { started, .. } => Some(*started),
                _ => None,
            })
            .min();
        let late = self
            .rereads
            .iter()
            .find(|(_, r)| {
                r.asked.elapsed() > self.reread_timeout
                    && oldest_busy.is_none_or(|busy| busy > r.asked)
            })
            .map(|(k, _)| *k);
        if let Some(kind) = late {
            self.rereads.clear();
            self.quarantine_now(&format!(
                "the server announced a change of its {} and did not answer a page of them within {} s",
                kind.plural(),
                self.reread_timeout.as_secs()
            ));
        }
    }

    async fn request_page(&mut self, kind: Kind, cursor: Option<String>) {
        let sid = self.alloc_id();
        self.pending.insert(sid, Pending::Reread(kind));
        let mut params = match cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        if self.server_era == Era::Modern {
            params = with_modern_meta(
                params,
                &self.server_version,
                crate::mcp::client_capabilities(),
            );
        }
        self.send_server(
            json!({"jsonrpc": "2.0", "id": sid, "method": kind.list_method(), "params": params}),
        )
        .await;
    }

    async fn reread_page(&mut self, kind: Kind, obj: &Map<String, Value>) {
        let Some(mut state) = self.rereads.remove(&kind) else {
            return;
        };
        let result = obj.get("result");
        let Some(page) = result
            .and_then(|r| r.get(kind.field()))
            .and_then(Value::as_array)
        else {
            return self.quarantine_now(&format!(
                "re-reading {} after list_changed failed",
                kind.plural()
            ));
        };
        state.items.extend(page.iter().cloned());
        if state.cursors.len() >= lockfile::MAX_ITEMS_PER_KIND {
            return self.quarantine_now(&format!(
                "the server pages its {} without end (more than {} pages)",
                kind.plural(),
                lockfile::MAX_ITEMS_PER_KIND
            ));
        }
        if state.items.len() > lockfile::MAX_ITEMS_PER_KIND {
            return self.quarantine_now(&format!(
                "the server now lists more than {} {}",
                lockfile::MAX_ITEMS_PER_KIND,
                kind.plural()
            ));
        }
        if let Some(Value::String(next)) = result.and_then(|r| r.get("nextCursor")) {
            if !state.cursors.insert(next.clone()) {
                return self
                    .quarantine_now(&format!("the server repeated a {} cursor", kind.plural()));
            }
            let next = next.clone();
            state.asked = Instant::now();
            self.rereads.insert(kind, state);
            return self.request_page(kind, Some(next)).await;
        }
        let live = match canonical_items(kind, &state.items) {
            Ok(items) => items,
            Err(e) => return self.quarantine_now(&e.to_string()),
        };
        let locked = self.entry.items(kind);
        let same = live.len() == locked.len()
            && live
                .iter()
                .zip(locked)
                .all(|(a, b)| Sha256Digest::of_json(a) == Sha256Digest::of_json(b));
        if !same {
            let mut surface = self.entry.surface();
            surface.items.insert(kind, live);
            let what = drift::compare(&self.entry, &surface)
                .map(|d| d.summary())
                .unwrap_or_else(|e| e.to_string());
            self.quarantine_now(&what);
        } else if state.again {
            // The list may have changed again after a page was read: read it once more.
            self.start_reread(kind).await;
        }
    }

    /// After the client closed its stdin (and the server's stdin was closed): the answers to the
    /// client's requests still in flight are relayed for up to [`LAST_ANSWERS`]; a server that
    /// exits first fails the rest with an error, as it would in the session.
    async fn last_answers(
        &mut self,
        server_in: &mut LineReader<tokio::process::ChildStdout>,
        signalled: &mut tokio::sync::oneshot::Receiver<()>,
    ) {
        let deadline = tokio::time::Instant::now() + LAST_ANSWERS;
        // Not once a write found the client's stdout gone as well: nothing would reach it.
        while !self.to_client.borrow().is_closed()
            && self
                .pending
                .values()
                .any(|p| matches!(p, Pending::Client { .. }))
        {
            self.write_now();
            let busy = self.to_client.borrow().busy();
            tokio::select! {
                frame = server_in.next_frame() => match frame {
                    Ok(Some(Frame::Line(line))) => self.on_server_line(line).await,
                    Ok(Some(Frame::TooLong(n))) => self.server_too_long(n, server_in.head()).await,
                    Ok(None) | Err(_) => {
                        let why = format!("server `{}` exited before answering", self.name);
                        self.fail_in_flight(&why).await;
                        break;
                    }
                },
                () = drain(&self.to_client), if busy => {}
                () = tokio::time::sleep_until(deadline) => break,
                _ = &mut *signalled => break,
            }
        }
    }

    /// Whether a server's `notifications/message` is for the client: a legacy client takes them
    /// at any time (it set the level at the server), a 2026-07-28 client only while one of its
    /// requests that carried `logLevel` runs.
    fn client_wants_logs(&mut self, level: Option<&str>) -> bool {
        if self.client_version.is_some() {
            return true;
        }
        let pending = &self.pending;
        self.log_requests.retain(|sid, _| pending.contains_key(sid));
        // A level mcpsum does not know passes if any request asked for messages.
        let rank = log_rank(level).unwrap_or(LOG_LEVELS.len());
        self.log_requests.values().any(|asked| *asked <= rank)
    }

    /// Answers every request still in flight (and every input round) with an error: `why`.
    async fn fail_in_flight(&mut self, why: &str) {
        let rounds: Vec<u64> = self.rounds.keys().copied().collect();
        for n in rounds {
            self.fail_round(n, why).await;
        }
        let pending: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
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
            self.audit.note(
                "refused",
                json!({"method": method, "item": item, "decision": "fail", "reason": why}),
            );
            self.reply_error(&client_id, codes::INTERNAL, why, None)
                .await;
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

/// The top-level `id` of a JSON-RPC message read from its first bytes (a message over the size
/// limit is never parsed whole), and whether a top-level `method` key came before the cut.
/// Keys inside nested objects are ignored, so an `id` inside a result never counts.
fn head_fields(head: &[u8]) -> (Option<Value>, bool) {
    let (mut id, mut method) = (None, false);
    let mut depth = 0usize;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < head.len() && head[j] != b'"' {
                    j += if head[j] == b'\\' { 2 } else { 1 };
                }
                if j >= head.len() {
                    break;
                }
                let key = &head[start..j];
                i = j + 1;
                if depth != 1 {
                    continue;
                }
                let mut k = i;
                while k < head.len() && head[k].is_ascii_whitespace() {
                    k += 1;
                }
                if head.get(k) != Some(&b':') {
                    continue;
                }
                match key {
                    b"method" => method = true,
                    b"id" => {
                        // A value that runs to the cut may be truncated: not an id then.
                        let rest = &head[k + 1..];
                        let mut values = serde_json::Deserializer::from_slice(rest).into_iter();
                        id = values
                            .next()
                            .and_then(Result::ok)
                            .filter(|v: &Value| v.is_string() || v.is_number())
                            .filter(|_| values.byte_offset() < rest.len());
                    }
                    _ => {}
                }
                i = k + 1;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    (id, method)
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

#[cfg(test)]
mod tests {
    use super::head_fields;
    use serde_json::json;

    #[test]
    fn head_fields_finds_the_top_level_id_only() {
        let cases: [(&str, Option<serde_json::Value>, bool); 9] = [
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"xxxx"#,
                Some(json!(7)),
                false,
            ),
            (
                r#"{"result":{"id":5,"x":"y"},"id":"a\"b","#,
                Some(json!("a\"b")),
                false,
            ),
            (r#"{"result":{"id":5,"x":"#, None, false),
            (
                r#"{ "id" : 12 , "method":"tools/call","params":{"arguments":{"pad":"xx"#,
                Some(json!(12)),
                true,
            ),
            (
                r#"{"method":"notifications/message","params":{"id":3,"data":"xxx"#,
                None,
                true,
            ),
            (r#"{"jsonrpc":"2.0","id":1"#, None, false),
            (r#"{"jsonrpc":"2.0","id":1}"#, Some(json!(1)), false),
            (r#"{"text":"{\"id\":9}","id":null,"#, None, false),
            (r#"not json at all "id":4"#, None, false),
        ];
        for (head, id, method) in cases {
            assert_eq!(head_fields(head.as_bytes()), (id, method), "{head}");
        }
    }
}
