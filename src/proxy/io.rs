//! The proxy's I/O and lifecycle: the two line readers, the two outboxes, signals and
//! backpressure, around the [`Core`], which decides everything and does no I/O of its own
//! (but the session's taint state). The lifecycle is the core's [`Phase`]: `Starting` (the
//! handshake is answered from the lock while the server starts), `Serving` or `Quarantined`
//! (drift, or a server that no longer speaks its locked version), then `Draining` once the
//! client closed its stdin.
//!
//! One loop owns the core and both links, so there are no locks and no unbounded queues: it
//! reads a line from either side ([`LineReader`]), hands it to the core, and carries out the
//! core's actions at once: what it sends is written or queued in that peer's outbox; while a
//! queue is over its bound, no more input is read, so a slow reader on either side slows the
//! other down instead of growing memory.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::outbox::Outbox;
use super::{Action, Core, ProxyOptions, era_name, gate};
use crate::audit::{AuditLog, CallOutcome};
use crate::error::{Error, Exit, Result};
use crate::lockfile::{self, Era};
use crate::mcp::client::{self, Options};
use crate::mcp::codes;
use crate::mcp::framing::{self, Frame, LineReader};
use crate::output;

/// What the loop writes to: the two peers' outboxes and the audit log.
struct Io {
    name: String,
    to_client: Outbox,
    to_server: Outbox,
    audit: AuditLog,
    /// Records the main loop's turn produced, written after its messages (see
    /// [`Io::apply_messages`]).
    records: Vec<Record>,
    /// `--max-message-bytes`.
    max_message: usize,
}

/// An audit record waiting for the end of the main loop's turn.
enum Record {
    Note(&'static str, Value),
    Call {
        method: String,
        item: String,
        outcome: CallOutcome,
        took: Duration,
        bytes: usize,
    },
}

/// Records kept for the end of a turn, at most: a burst of lines that each leave a record and
/// no message (junk the proxy drops) is written as it goes.
const RECORDS_MAX: usize = 64;

impl Io {
    /// Carries out what the core asked for, in order, audit records included.
    fn apply(&mut self, core: &mut Core) {
        self.apply_messages(core);
        self.write_records();
    }

    /// Carries out what the core asked for, in order, but for the audit records, which wait
    /// for [`Io::write_now`]: an answer goes out before the file write that records it, so that
    /// a call's round trip does not include an append to `audit.jsonl` (a few microseconds on
    /// ext4, more when the disk is busy). The records are written, in order, before the loop
    /// waits for input; the session's taint state, which decides, is not among them (the core
    /// writes it before it lets a source's answer go).
    fn apply_messages(&mut self, core: &mut Core) {
        core.drain_actions(|action| match action {
            Action::ToClient(out) => self.to_client.push(out),
            Action::ToServer(out) => self.to_server.push(out),
            Action::Audit { event, fields } => self.records.push(Record::Note(event, fields)),
            Action::AuditCall {
                method,
                item,
                outcome,
                took,
                bytes,
            } => self.records.push(Record::Call {
                method,
                item,
                outcome,
                took,
                bytes,
            }),
            Action::Warn(message) => output::warn(&message),
            Action::Quarantine(what) => {
                self.records.push(Record::Note(
                    "drift",
                    json!({"class": "definitional", "reason": what}),
                ));
                self.records
                    .push(Record::Note("quarantine", json!({"reason": what})));
                output::warn(&format!(
                    "server `{}` is quarantined: its surface drifted from the lock ({}); review with `mcpsum verify --name {}`",
                    self.name,
                    crate::text::sanitize_line(&what),
                    self.name
                ));
            }
        });
        if self.records.len() > RECORDS_MAX {
            self.write_records();
        }
    }

    /// Appends the audit records waiting, in order.
    fn write_records(&mut self) {
        for record in self.records.drain(..) {
            match record {
                Record::Note(event, fields) => self.audit.note(event, fields),
                Record::Call {
                    method,
                    item,
                    outcome,
                    took,
                    bytes,
                } => self.audit.note_call(&method, &item, outcome, took, bytes),
            }
        }
    }

    /// Writes what waits for either peer as far as its pipe takes it, without waiting.
    fn write_now(&mut self) {
        self.to_client.write_now();
        self.to_server.write_now();
        self.write_records();
    }

    /// Whether both peers take what they are sent, so that more input may be read.
    fn has_room(&self) -> bool {
        self.to_client.has_room() && self.to_server.has_room()
    }

    /// Whether the client's next line may be read: what it asks goes to the server, which takes
    /// it, and what mcpsum answers itself (lists from the lock) is bounded.
    fn client_room(&self) -> bool {
        self.to_server.has_room() && self.to_client.bytes() < self.hard_cap()
    }

    /// Whether the server's next line may be read: it goes to the client, which takes it. The
    /// server's own stdin may be full meanwhile: a server that answers one request at a time
    /// stops reading while it writes a large answer, and must be read for its stdin to drain
    /// (else both would wait on each other). What a server line makes mcpsum send back to the
    /// server (a ping's answer) is bounded all the same.
    fn server_room(&self) -> bool {
        self.to_client.has_room() && self.to_server.bytes() < self.hard_cap()
    }

    /// What may wait for a peer that does not read, at most, before mcpsum stops reading the
    /// side that adds to it: room for the largest batch or message that was read whole.
    fn hard_cap(&self) -> usize {
        self.max_message.saturating_mul(2).saturating_add(4 << 20)
    }

    /// Writes what waits for the client (for a little while), then closes our stdout.
    async fn close_client(&mut self, core: &mut Core) {
        self.apply(core);
        let mut to_client = std::mem::replace(&mut self.to_client, Outbox::new());
        to_client.close(Duration::from_secs(2)).await;
    }

    /// An audit record of the loop's own, after what the core asked for.
    fn note(&mut self, core: &mut Core, event: &str, fields: Value) {
        self.apply(core);
        self.audit.note(event, fields);
    }
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

    // A pinned install is found (made, if missing) now; the check that none of its files
    // changed runs after the handshake is answered, and the server starts only once it passed.
    let (launch, pin_check) =
        crate::launch::launch_for(&opts.name, &entry, &path, true, crate::pin::Check::Deferred)?;
    let launch = launch.learning(opts.learn, &state_dir)?;
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
        let failure = client::Failure::before_start(client::ClientError::Spawn(
            crate::mcp::process::SpawnError::Sandbox(e),
        ));
        return Err(crate::launch::server_error(
            "cannot start",
            &launch,
            failure,
        ));
    }

    // The client link is up at once: the handshake is answered from the lock while the server
    // starts (a slow `uvx`/`npx` start would otherwise outlast a client's discover probe); every
    // other request waits until the live surface has been compared with the lock.
    let mut client_in = LineReader::new(crate::stdio::client_stdin(), max, &[]);
    let mut io = Io {
        name: opts.name.clone(),
        to_client: Outbox::new(),
        to_server: Outbox::new(),
        audit,
        records: Vec::new(),
        max_message: opts.max_message,
    };
    io.to_client.attach(crate::stdio::client_stdout());
    let mut signalled = signals()?;

    let taint = gate::TaintGate::new(&entry)?;
    let mut core = Core::new(&opts.name, entry, taint, opts.timeout, opts.max_message);

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
                core.on_client_line(line);
                io.apply(&mut core);
            }
            Ok(Some(frame)) => early.push(Input::of(frame, &client_in)),
            Ok(None) | Err(_) => {
                early.push(Input::Eof);
                break;
            }
        }
    }
    io.write_now();
    core.taint.open_store(&state_dir, &session, &opts.name)?;

    // The pinned install's change check, on a thread of its own (it stats every file): the
    // server is not started until it passed, and one that failed is the start's failure.
    let mut checking = pin_check.map(|c| tokio::task::spawn_blocking(move || c.run()));
    let mut copts = Some(copts);
    // Boxed, so that dropping it ends the server at once.
    let mut starting = None;
    // A client that closed its stdin after requests (a one-shot client, a shell pipe) still gets
    // their answers; one that asked nothing but the handshake needs no server (but hears of an
    // install that was changed).
    let mut client_gone = early.iter().any(|i| matches!(i, Input::Eof));
    let outcome = loop {
        if client_gone && !early.iter().any(Input::asks) && checking.is_none() {
            break Err("client closed stdin while the server started");
        }
        if checking.is_none()
            && let Some(copts) = copts.take()
        {
            starting = Some(Box::pin(start_server(&launch, locked_era, copts)));
        }
        io.apply(&mut core);
        io.write_now();
        let busy = io.to_client.busy();
        let room = io.has_room();
        tokio::select! {
            checked = some_or_never(checking.as_mut()), if checking.is_some() => {
                checking = None;
                let checked = checked.unwrap_or_else(|e| {
                    Err(Error::new(format!("cannot check the pinned install of server `{}`", opts.name)).cause(e))
                });
                if let Err(error) = checked {
                    break Ok(Err(StartFailure { error, version_drop: false }));
                }
            }
            r = some_or_never(starting.as_mut()), if starting.is_some() => break Ok(r),
            frame = client_in.next_frame(), if !client_gone && early.len() < EARLY_MAX && room => match frame {
                Ok(Some(Frame::Line(line))) if is_handshake(&line) => core.on_client_line(line),
                Ok(None) | Err(_) => {
                    early.push(Input::Eof);
                    client_gone = true;
                }
                Ok(Some(frame)) => early.push(Input::of(frame, &client_in)),
            },
            () = drain(&mut io.to_client), if busy => {}
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
            core.quarantine_now(&error.one_line());
            io.to_server.attach(tokio::io::sink());
            replay(&mut core, &mut io, early);
            loop {
                io.apply(&mut core);
                io.write_now();
                let busy = io.to_client.busy();
                let room = io.has_room();
                tokio::select! {
                    frame = client_in.next_frame(), if room => match frame {
                        Ok(Some(Frame::Line(line))) => core.on_client_line(line),
                        Ok(Some(Frame::TooLong(n))) => core.client_too_long(n, client_in.head()),
                        Ok(None) | Err(_) => break,
                    },
                    () = drain(&mut io.to_client), if busy => {}
                    _ = &mut signalled => break,
                }
            }
            core.client_left();
            io.note(
                &mut core,
                "exit",
                json!({"reason": "client closed stdin", "duration_ms": started.elapsed().as_millis() as u64}),
            );
            io.close_client(&mut core).await;
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
                    core.reply_error(id, codes::INTERNAL, &why, Some(data));
                }
            }
            io.close_client(&mut core).await;
            return Err(error);
        }
        Err(reason) => {
            // Dropping the start ends the server's process group.
            drop(starting);
            io.note(
                &mut core,
                "exit",
                json!({"reason": reason, "duration_ms": started.elapsed().as_millis() as u64}),
            );
            io.close_client(&mut core).await;
            return Ok(Exit::Ok);
        }
    };
    io.note(
        &mut core,
        "start",
        json!({"pid": conn.process.child.id(), "era": era_name(live.era), "duration_ms": started.elapsed().as_millis() as u64, "client_pid": session.client_pid, "signature": signature.state_name(), "signer": signature.signer().map(|s| &s.fingerprint)}),
    );
    // Lines that were not JSON-RPC during the start were warned of by the connection.
    for what in conn.take_skipped() {
        core.drop_junk("server", &what);
    }
    let (era, version, next_id) = (conn.era(), conn.version().to_owned(), conn.next_id());
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
    let _ = nix::fcntl::fcntl(
        &server_out,
        nix::fcntl::FcntlArg::F_SETPIPE_SZ(crate::stdio::PIPE_SIZE),
    );
    let mut server_in = LineReader::new(server_out, max, &buffered);
    io.to_server.attach(server_stdin);

    core.serve(&live, era, &version, next_id);
    // What the client sent while the server started, in order.
    replay(&mut core, &mut io, early);

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
            // What the last message made the core do is queued before the room is measured.
            io.apply_messages(&mut core);
            // No more input is read while a peer does not take what it was sent: a slow reader
            // slows the other side down instead of growing memory.
            // Lines already read are handled before anything is written, so that what a burst of
            // them produces goes out in one write per peer; a lone message is written at once.
            let buffered = match io.client_room().then(|| client_in.buffered()).flatten() {
                Some(frame) => Some(Link::Client(Ok(Some(frame)))),
                None => io
                    .server_room()
                    .then(|| server_in.buffered())
                    .flatten()
                    .map(|f| Link::Server(Ok(Some(f)))),
            };
            let event = match buffered {
                Some(event) => event,
                None => {
                    io.write_now();
                    let (client_room, server_room) = (io.client_room(), io.server_room());
                    let client_busy = io.to_client.busy();
                    let server_busy = io.to_server.busy();
                    let spin = last_message.elapsed() < SPIN;
                    let timed = core.wants_tick();
                    tokio::select! {
                        // Input first, polling last: a ready line never loses a draw to a turn.
                        biased;
                        _ = tick.tick(), if timed => Link::Tick,
                        frame = client_in.next_frame(), if client_room => Link::Client(frame),
                        frame = server_in.next_frame(), if server_room => Link::Server(frame),
                        () = drain(&mut io.to_client), if client_busy => Link::Written,
                        () = drain(&mut io.to_server), if server_busy => Link::Written,
                        _ = &mut signalled => break End::Signal,
                        () = tokio::task::yield_now(), if spin => Link::Spin,
                    }
                }
            };
            if matches!(event, Link::Client(Ok(Some(_))) | Link::Server(Ok(Some(_)))) {
                last_message = std::time::Instant::now();
            }
            match event {
                Link::Client(Ok(Some(Frame::Line(line)))) => core.on_client_line(line),
                Link::Client(Ok(Some(Frame::TooLong(n)))) => {
                    core.client_too_long(n, client_in.head());
                }
                Link::Client(Ok(None) | Err(_)) => break End::ClientLeft,
                Link::Server(Ok(Some(Frame::Line(line)))) => core.on_server_line(line),
                Link::Server(Ok(Some(Frame::TooLong(n)))) => {
                    core.server_too_long(n, server_in.head());
                }
                Link::Server(Ok(None) | Err(_)) => break End::ServerExited,
                Link::Tick => core.on_tick(),
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
            core.fail_in_flight(&why);
            io.apply(&mut core);
            let status = tokio::time::timeout(Duration::from_secs(2), process.child.wait()).await;
            let status = match status {
                Ok(Ok(s)) => s.to_string(),
                _ => "unknown status".to_owned(),
            };
            process.shutdown(Duration::from_millis(100)).await;
            io.note(&mut core, "exit", json!({"reason": "server exited", "status": status, "duration_ms": started.elapsed().as_millis() as u64}));
            io.close_client(&mut core).await;
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
            io.note(
                &mut core,
                "exit",
                json!({"reason": reason, "duration_ms": started.elapsed().as_millis() as u64}),
            );
            // Closing our side of the server's stdin lets a well-behaved server exit by itself;
            // then the whole process group is ended.
            let mut to_server = std::mem::replace(&mut io.to_server, Outbox::new());
            to_server.close(Duration::from_millis(500)).await;
            if matches!(exit, End::ClientLeft) {
                core.client_left();
                io.apply(&mut core);
                last_answers(&mut core, &mut io, &mut server_in, &mut signalled).await;
                // What is still unanswered gets an error, so that a batch of it is answered too.
                let why = format!(
                    "server `{}` did not answer within {} s of the client closing its stdin",
                    opts.name,
                    LAST_ANSWERS.as_secs()
                );
                core.fail_in_flight(&why);
            }
            io.apply(&mut core);
            process.shutdown(Duration::from_secs(2)).await;
            io.close_client(&mut core).await;
            Ok(Exit::Ok)
        }
    }
}

/// Hands the core, in order, what the client sent while the server started.
fn replay(core: &mut Core, io: &mut Io, early: Vec<Input>) {
    for input in early {
        match input {
            Input::Line(line) => core.on_client_line(line),
            Input::TooLong(n, head) => core.client_too_long(n, &head),
            Input::Eof => {}
        }
        // Applied message by message, as the main loop does.
        io.apply(core);
    }
}

/// After the client closed its stdin (and the server's stdin was closed): the answers to the
/// client's requests still in flight are relayed for up to [`LAST_ANSWERS`]; a server that
/// exits first fails the rest with an error, as it would in the session.
async fn last_answers(
    core: &mut Core,
    io: &mut Io,
    server_in: &mut LineReader<tokio::process::ChildStdout>,
    signalled: &mut tokio::sync::oneshot::Receiver<()>,
) {
    let deadline = tokio::time::Instant::now() + LAST_ANSWERS;
    // Not once a write found the client's stdout gone as well: nothing would reach it.
    while !io.to_client.is_closed() && core.client_requests_pending() {
        io.apply(core);
        io.write_now();
        let busy = io.to_client.busy();
        tokio::select! {
            frame = server_in.next_frame() => match frame {
                Ok(Some(Frame::Line(line))) => core.on_server_line(line),
                Ok(Some(Frame::TooLong(n))) => core.server_too_long(n, server_in.head()),
                Ok(None) | Err(_) => {
                    let why = format!("server `{}` exited before answering", core.name);
                    core.fail_in_flight(&why);
                    break;
                }
            },
            () = drain(&mut io.to_client), if busy => {}
            () = tokio::time::sleep_until(deadline) => break,
            _ = &mut *signalled => break,
        }
    }
    io.apply(core);
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
async fn drain(outbox: &mut Outbox) {
    std::future::poll_fn(|cx| outbox.poll_drain(cx)).await;
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
/// What `f` gives, or never anything when there is none (a `select!` branch that its condition
/// keeps off then).
async fn some_or_never<F: std::future::Future + Unpin>(f: Option<&mut F>) -> F::Output {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn start_server(
    launch: &crate::launch::Launch,
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
            Ok(Value::Object(o)) => super::request_id(&o).is_some(),
            Ok(Value::Array(_)) => true,
            _ => false,
        }
    }
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
