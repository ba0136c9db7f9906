//! The accept loop and the per-connection state machine of design 6.1. The pure decisions live in
//! [`crate::decide`]; this module does the I/O, enforces the size and time limits, and produces
//! exactly one [`EgressRecord`] per accepted connection.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::timeout;

use crate::allowlist::{Allowlist, Host, Target};
use crate::class::AddressClass;
use crate::decide::{
    TargetDecision, connection_is_local, decide_target, sni_matches, vet_addresses,
};
use crate::head::{HeadError, head_end, parse_head};
use crate::hello::{HelloError, read_client_hello};
use crate::record::{Decision, Dropped, EgressRecord, Reason};

/// A boxed, `Send` future, as returned by [`Resolver::resolve`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where audit records go. An `Err` makes the proxy fail closed: it stops accepting and closes
/// every open tunnel.
pub type AuditSink = Arc<dyn Fn(&EgressRecord) -> io::Result<()> + Send + Sync>;

/// Name resolution, done by mcpsum in the host namespace (the server's namespace has no resolver).
pub trait Resolver: Send + Sync {
    /// The addresses of `host`, in preference order. `port` is passed through for resolvers that
    /// want it (`getaddrinfo` does); it does not change the answer.
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>>;
}

/// The system resolver (`getaddrinfo`, honouring `/etc/hosts` and `nsswitch.conf`), run on
/// tokio's blocking pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let mut out: Vec<IpAddr> = Vec::new();
            for sa in tokio::net::lookup_host((host, port)).await? {
                if !out.contains(&sa.ip()) {
                    out.push(sa.ip());
                }
            }
            Ok(out)
        })
    }
}

/// Time limits for each step of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Reading the request head (default 10 s).
    pub head: Duration,
    /// Resolving the name (default 10 s).
    pub resolve: Duration,
    /// Connecting to each kept address (default 10 s each).
    pub connect: Duration,
    /// Reading the ClientHello after our 200 (default 10 s).
    pub hello: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        let ten = Duration::from_secs(10);
        Timeouts {
            head: ten,
            resolve: ten,
            connect: ten,
            hello: ten,
        }
    }
}

/// Size limits; together they bound the memory of one connection (at most about
/// `hello_bytes + 2 * relay_buffer`) and of the proxy (`max_connections` of those).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Request head (default 8 KiB).
    pub head_bytes: usize,
    /// ClientHello (default 64 KiB).
    pub hello_bytes: usize,
    /// Concurrent connections (default 256). Further clients wait in the listen backlog, so a
    /// flood cannot exhaust file descriptors.
    pub max_connections: usize,
    /// Largest relay buffer per direction (default 256 KiB). Each direction starts with
    /// [`RELAY_BUFFER_START`] (or this, if smaller) and doubles its buffer each time one read
    /// fills it, up to this: only a direction whose sender keeps ahead of the relay grows, so an
    /// interactive tunnel keeps the small buffer, and a bulk one moves more bytes per read and
    /// write (egress bench on loopback, 2 cores under load: the relay's on-CPU time per GiB went
    /// from a median of about 0.75-0.85 of squid's to about 0.68 (raw) and 0.61 (TLS) at 256 KiB,
    /// 0.42-0.54 at 1 MiB; the total over client, server and relay did not rise). 256 KiB keeps a
    /// server that fills every connection it may open to at most 128 MiB of relay buffers.
    pub relay_buffer: usize,
}

/// The size each relay direction's buffer starts at (see [`Limits::relay_buffer`]).
pub const RELAY_BUFFER_START: usize = 64 * 1024;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            head_bytes: 8 * 1024,
            hello_bytes: 64 * 1024,
            max_connections: 256,
            relay_buffer: 256 * 1024,
        }
    }
}

/// Everything [`serve`] needs to know about one server.
#[derive(Debug, Clone)]
pub struct EgressConfig {
    /// The server name, for audit records.
    pub server: String,
    /// The client session, for audit records.
    pub session: String,
    /// The parsed `network.allow`.
    pub allowlist: Allowlist,
    /// Time limits.
    pub timeouts: Timeouts,
    /// Size limits.
    pub limits: Limits,
    /// Learn mode (`mcpsum proxy --learn`, where the server runs without a sandbox): every
    /// target is tried whatever the allowlist and the address classes say, so that each
    /// record names what the server asked for. Never set for a sandboxed server.
    pub learn: bool,
}

impl EgressConfig {
    /// A configuration with the default limits.
    pub fn new(
        server: impl Into<String>,
        session: impl Into<String>,
        allowlist: Allowlist,
    ) -> Self {
        EgressConfig {
            server: server.into(),
            session: session.into(),
            allowlist,
            timeouts: Timeouts::default(),
            limits: Limits::default(),
            learn: false,
        }
    }
}

/// Accept on `listener` until `shutdown` completes, handling each connection per design 6.1, and
/// pass exactly one [`EgressRecord`] per connection to `audit`.
///
/// `listener` is normally the socket the sandbox launcher bound inside the server's network
/// namespace and passed over `SCM_RIGHTS`: wrap it as `std::net::TcpListener`, call
/// `set_nonblocking(true)`, then `tokio::net::TcpListener::from_std`.
///
/// On `shutdown` (or an audit failure) the proxy stops accepting, closes the open tunnels, waits
/// for their records, and returns.
///
/// # Errors
///
/// The first error returned by `audit`, after every connection has been closed (fail closed).
pub async fn serve<S>(
    listener: TcpListener,
    config: Arc<EgressConfig>,
    resolver: Arc<dyn Resolver>,
    audit: AuditSink,
    shutdown: S,
) -> io::Result<()>
where
    S: Future<Output = ()> + Send,
{
    let (close_tx, mut close_rx) = watch::channel(false);
    let close_tx = Arc::new(close_tx);
    let audit_error: Arc<Mutex<Option<io::Error>>> = Arc::new(Mutex::new(None));
    let permits = Arc::new(Semaphore::new(config.limits.max_connections.max(1)));
    let mut tasks = JoinSet::new();
    let mut conn: u64 = 0;
    tokio::pin!(shutdown);

    loop {
        while tasks.try_join_next().is_some() {}
        let permit = tokio::select! {
            () = &mut shutdown => break,
            () = closed(&mut close_rx) => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            () = closed(&mut close_rx) => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(_) => {
                    // EMFILE, ECONNABORTED and friends: transient; do not spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        conn += 1;
        let (config, resolver, audit) = (config.clone(), resolver.clone(), audit.clone());
        let (close_tx, close_rx, audit_error) =
            (close_tx.clone(), close_tx.subscribe(), audit_error.clone());
        tasks.spawn(async move {
            let _permit = permit;
            let record = handle(stream, peer, conn, &config, &*resolver, close_rx).await;
            if let Err(e) = audit(&record) {
                if let Ok(mut slot) = audit_error.lock() {
                    slot.get_or_insert(e);
                }
                close_tx.send_replace(true);
            }
        });
    }

    close_tx.send_replace(true);
    drop(listener);
    while tasks.join_next().await.is_some() {}
    let failed = audit_error.lock().ok().and_then(|mut slot| slot.take());
    match failed {
        Some(e) => Err(io::Error::new(
            e.kind(),
            format!("egress audit record could not be written, egress closed: {e}"),
        )),
        None => Ok(()),
    }
}

/// Completes once the close flag is set (or its sender is gone). The guard `wait_for` returns is
/// dropped here, so the futures holding this stay `Send`.
async fn closed(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|closed| *closed).await;
}

struct Outcome {
    reason: Reason,
    detail: String,
}

impl Outcome {
    fn new(reason: Reason, detail: impl Into<String>) -> Outcome {
        Outcome {
            reason,
            detail: detail.into(),
        }
    }
}

async fn handle(
    mut client: TcpStream,
    peer: SocketAddr,
    conn: u64,
    config: &EgressConfig,
    resolver: &dyn Resolver,
    mut close: watch::Receiver<bool>,
) -> EgressRecord {
    let start = Instant::now();
    let mut rec = EgressRecord::new(&config.server, &config.session, conn, peer.port());
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let outcome = tokio::select! {
        o = run(&mut client, config, resolver, &mut rec, &up, &down) => o,
        () = closed(&mut close) => {
            Outcome::new(Reason::Shutdown, "egress proxy shut down; connection closed")
        }
    };
    rec.reason = outcome.reason;
    rec.detail = outcome.detail;
    rec.bytes_up = up.load(Ordering::Relaxed);
    rec.bytes_down = down.load(Ordering::Relaxed);
    rec.duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    rec
}

/// Design 6.1 steps 2-10 for one connection. Fills `rec` as it goes; `rec.decision` becomes
/// `allow` only once the tunnel is relayed.
async fn run(
    client: &mut TcpStream,
    config: &EgressConfig,
    resolver: &dyn Resolver,
    rec: &mut EgressRecord,
    up: &AtomicU64,
    down: &AtomicU64,
) -> Outcome {
    let t = config.timeouts;
    let limits = config.limits;
    let _ = client.set_nodelay(true);

    // 2. The request head.
    let head = match timeout(t.head, read_head(client, limits.head_bytes)).await {
        Err(_) => {
            let d = format!("no complete request head within {}", secs(t.head));
            return refuse(client, rec, 408, Reason::Timeout, d).await;
        }
        Ok(Err(HeadRead::TooLarge)) => {
            let d = format!("request head exceeds {} bytes", limits.head_bytes);
            return refuse(client, rec, 400, Reason::Malformed, d).await;
        }
        Ok(Err(HeadRead::Closed)) => {
            return Outcome::new(
                Reason::Malformed,
                "client closed before a complete request head",
            );
        }
        Ok(Ok(head)) => head,
    };
    let (bytes, end) = head;
    let authority = match parse_head(&bytes[..end]) {
        Ok(a) => a,
        Err(e @ HeadError::Method(_)) => {
            rec.target = request_target(&bytes[..end]);
            return refuse(client, rec, 405, Reason::Method, e.to_string()).await;
        }
        Err(e) => return refuse(client, rec, 400, Reason::Malformed, e.to_string()).await,
    };
    rec.target = Some(clip(authority));
    if bytes.len() > end {
        let d = "bytes sent after the request head before the proxy replied (no pipelining)";
        return refuse(client, rec, 400, Reason::Malformed, d).await;
    }

    // 3-4. Normalise and match.
    let target = match Target::parse(authority) {
        Ok(t) => t,
        Err(problem) => {
            let d = format!("target `{}`: {problem}", clip(authority));
            return refuse(client, rec, 400, Reason::Malformed, d).await;
        }
    };
    let host = target.host_text();
    rec.host = Some(host.clone());
    rec.port = Some(target.port);
    let decision = match (decide_target(&config.allowlist, &target), &target.host) {
        (TargetDecision::NotListed, Host::Name(_)) if config.learn => TargetDecision::Resolve {
            rule: String::new(),
        },
        (TargetDecision::NotListed, Host::Ip(ip)) if config.learn => TargetDecision::Connect {
            rule: String::new(),
            addr: SocketAddr::new(*ip, target.port),
        },
        (d, _) => d,
    };
    let candidates = match decision {
        TargetDecision::NotListed => {
            let d = format!("`{}` is not in network.allow", clip(authority));
            return refuse(client, rec, 403, Reason::NotListed, d).await;
        }
        TargetDecision::Connect { rule, addr } => {
            rec.rule = Some(rule).filter(|r| !r.is_empty());
            vec![addr]
        }
        TargetDecision::Resolve { rule } => {
            rec.rule = Some(rule).filter(|r| !r.is_empty());
            // 5. Resolve here, in the host namespace, and vet every address.
            let ips = match timeout(t.resolve, resolver.resolve(&host, target.port)).await {
                Err(_) => {
                    let d = format!("resolving `{host}` took more than {}", secs(t.resolve));
                    return refuse(client, rec, 504, Reason::Timeout, d).await;
                }
                Ok(Err(e)) => {
                    let d = format!("resolving `{host}` failed: {e}");
                    return refuse(client, rec, 502, Reason::DnsError, d).await;
                }
                Ok(Ok(ips)) if ips.is_empty() => {
                    let d = format!("`{host}` has no addresses");
                    return refuse(client, rec, 502, Reason::DnsError, d).await;
                }
                Ok(Ok(ips)) => ips,
            };
            rec.resolved = ips.iter().map(ToString::to_string).collect();
            let mut vetted = vet_addresses(&config.allowlist, target.port, &ips);
            if config.learn {
                // Learning: the addresses are recorded (`resolved`), and all are tried.
                vetted.kept = ips
                    .iter()
                    .map(|ip| SocketAddr::new(*ip, target.port))
                    .collect();
                vetted.dropped.clear();
            }
            rec.dropped = vetted
                .dropped
                .iter()
                .map(|(ip, class)| Dropped {
                    address: ip.to_string(),
                    class: *class,
                })
                .collect();
            if vetted.kept.is_empty() {
                let d = non_public(&host, target.port, &rec.dropped);
                return refuse(client, rec, 403, Reason::NonPublic, d).await;
            }
            vetted.kept
        }
    };

    // 6. Connect in order and pin the first success: never resolved again (DNS rebinding).
    let mut last_error = String::new();
    let mut upstream = None;
    for addr in candidates {
        let stream = match timeout(t.connect, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                last_error = format!("{addr}: {e}");
                continue;
            }
            Err(_) => {
                last_error = format!("{addr}: no answer within {}", secs(t.connect));
                continue;
            }
        };
        // A public address can still be this host's own, which shows only once connected (see
        // `connection_is_local`): drop it like a refused class, closing the connection before a
        // byte is sent on it. A listed `IP:port` (an IP target is one) may reach anything.
        if !config.learn && !config.allowlist.lists_ip(addr.ip(), addr.port()) {
            match stream.local_addr() {
                Ok(local) if !connection_is_local(local.ip(), addr.ip()) => {}
                Ok(_) => {
                    drop(stream);
                    rec.dropped.push(Dropped {
                        address: addr.ip().to_string(),
                        class: AddressClass::HostLocal,
                    });
                    continue;
                }
                Err(e) => {
                    drop(stream);
                    last_error = format!(
                        "{addr}: the connection's local address is unknown ({e}), so it could be \
                         this host"
                    );
                    continue;
                }
            }
        }
        upstream = Some((stream, addr));
        break;
    }
    let Some((mut upstream, addr)) = upstream else {
        if last_error.is_empty() {
            // Every kept address was this host's own.
            let d = non_public(&host, target.port, &rec.dropped);
            return refuse(client, rec, 403, Reason::NonPublic, d).await;
        }
        let own: Vec<&str> = rec
            .dropped
            .iter()
            .filter(|d| d.class == AddressClass::HostLocal)
            .map(|d| d.address.as_str())
            .collect();
        let mut d = format!("could not connect to `{host}`: {last_error}");
        if !own.is_empty() {
            d.push_str(&format!(
                " (skipped as this host's own: {})",
                own.join(", ")
            ));
        }
        return refuse(client, rec, 502, Reason::ConnectError, d).await;
    };
    let _ = upstream.set_nodelay(true);
    rec.connected = Some(addr.to_string());

    // No bytes may arrive before our reply: the tunnel must start with our 200, then the hello.
    let mut probe = [0u8; 1];
    match client.try_read(&mut probe) {
        Ok(0) => return Outcome::new(Reason::Malformed, "client closed before the proxy replied"),
        Ok(_) => {
            let d = "bytes sent after the request head before the proxy replied (no pipelining)";
            return refuse(client, rec, 400, Reason::Malformed, d).await;
        }
        Err(_) => {}
    }

    // 7.
    if let Err(e) = client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
    {
        return Outcome::new(Reason::Malformed, format!("client went away: {e}"));
    }
    rec.status = Some(200);

    // 8. The ClientHello, read but never terminated.
    let (hello, hello_bytes) =
        match timeout(t.hello, read_client_hello(client, limits.hello_bytes)).await {
            Err(_) => {
                let d = format!("no complete ClientHello within {}", secs(t.hello));
                return Outcome::new(Reason::Timeout, d);
            }
            Ok(Err(e @ (HelloError::NotTls(_) | HelloError::Invalid(_)))) => {
                return Outcome::new(Reason::NotTls, e.to_string());
            }
            Ok(Err(e @ HelloError::EncryptedClientHello)) => {
                return Outcome::new(Reason::Ech, e.to_string());
            }
            Ok(Err(e)) => return Outcome::new(Reason::NotTls, e.to_string()),
            Ok(Ok(x)) => x,
        };
    rec.sni = hello.sni.clone();
    rec.alpn = hello.alpn;

    // 9. SNI must name the host asked for.
    if !sni_matches(&target, hello.sni.as_deref()) {
        let d = match &hello.sni {
            Some(sni) => format!("SNI `{sni}` does not match the CONNECT host `{host}`"),
            None => format!("no SNI in the ClientHello for the CONNECT host `{host}`"),
        };
        return Outcome::new(Reason::SniMismatch, d);
    }
    // 10. Forward the hello unchanged, then relay.
    if let Err(e) = upstream.write_all(&hello_bytes).await {
        return Outcome::new(Reason::ConnectError, format!("upstream {addr} closed: {e}"));
    }
    up.fetch_add(hello_bytes.len() as u64, Ordering::Relaxed);
    drop(hello_bytes);
    rec.decision = Decision::Allow;
    let result = relay(client, &mut upstream, up, down, limits.relay_buffer).await;
    match result {
        Ok(()) => Outcome::new(Reason::Ok, "tunnel closed"),
        Err(e) => Outcome::new(Reason::Ok, format!("tunnel ended: {e}")),
    }
}

enum HeadRead {
    TooLarge,
    Closed,
}

/// Read until the blank line ending the head. Returns the bytes read and the end of the head.
async fn read_head<R: AsyncRead + Unpin>(
    r: &mut R,
    limit: usize,
) -> Result<(Vec<u8>, usize), HeadRead> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(HeadRead::Closed),
            Ok(n) => n,
        };
        // Look for the end from a little before the new bytes (the terminator may straddle).
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf[from..]).map(|e| e + from) {
            if end > limit {
                return Err(HeadRead::TooLarge);
            }
            return Ok((buf, end));
        }
        if buf.len() > limit {
            return Err(HeadRead::TooLarge);
        }
    }
}

/// The detail of a `non_public` refusal: what `host` resolved to and how to allow an address.
fn non_public(host: &str, port: u16, dropped: &[Dropped]) -> String {
    let classes: Vec<String> = dropped
        .iter()
        .map(|d| format!("{} {}", d.address, d.class))
        .collect();
    // The entry that would allow the first of them, in the allowlist's own syntax.
    let entry = match dropped
        .first()
        .map(|d| d.address.parse::<std::net::IpAddr>())
    {
        Some(Ok(ip)) => std::net::SocketAddr::new(ip, port).to_string(),
        _ => format!("IP:{port}"),
    };
    format!(
        "`{host}` resolves only to non-public addresses ({}); list `{entry}` too to allow it",
        classes.join(", ")
    )
}

/// The target of a non-CONNECT request line, for the record.
fn request_target(head: &[u8]) -> Option<String> {
    let line = head.split(|&b| b == b'\n').next()?;
    let text = String::from_utf8_lossy(line);
    text.split(' ').nth(1).map(clip)
}

/// At most 300 bytes of hostile text for the record, on a char boundary.
fn clip(s: &str) -> String {
    let mut end = s.len().min(300);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// Send an HTTP error and close. The body is for a human reading a client's error output.
async fn refuse(
    client: &mut TcpStream,
    rec: &mut EgressRecord,
    status: u16,
    reason: Reason,
    detail: impl Into<String>,
) -> Outcome {
    let detail = detail.into();
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let allow = if status == 405 {
        "Allow: CONNECT\r\n"
    } else {
        ""
    };
    let body = format!("mcpsum egress: {detail}\n");
    let response = format!(
        "HTTP/1.1 {status} {phrase}\r\n{allow}Content-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let sent = timeout(Duration::from_secs(5), async {
        client.write_all(response.as_bytes()).await?;
        client.shutdown().await
    })
    .await;
    if matches!(sent, Ok(Ok(()))) {
        rec.status = Some(status);
        // Read what the client still sends (briefly, bounded) so closing with unread data does
        // not turn into a reset that destroys the response before the client reads it.
        let _ = timeout(Duration::from_millis(200), async {
            let mut sink = [0u8; 4096];
            let mut total = 0usize;
            while total < 64 * 1024 {
                match client.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n,
                }
            }
        })
        .await;
    }
    Outcome::new(reason, detail)
}

/// Relay both directions until both have ended, or either fails. Counts are kept in `up`/`down`
/// as bytes are written, so they survive a reset (tokio's `copy_bidirectional` loses them).
async fn relay(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    up: &AtomicU64,
    down: &AtomicU64,
    buffer: usize,
) -> io::Result<()> {
    let (mut cr, mut cw) = client.split();
    let (mut ur, mut uw) = upstream.split();
    let a = copy_counting(&mut cr, &mut uw, up, buffer);
    let b = copy_counting(&mut ur, &mut cw, down, buffer);
    tokio::pin!(a, b);
    tokio::select! {
        r = &mut a => { r?; b.await }
        r = &mut b => { r?; a.await }
    }
}

async fn copy_counting<R, W>(r: &mut R, w: &mut W, count: &AtomicU64, max: usize) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = RelayBuffer::new(max);
    loop {
        let n = r.read(buf.space()).await?;
        if n == 0 {
            // Half-close: pass the EOF on and keep relaying the other way.
            let _ = w.shutdown().await;
            return Ok(());
        }
        let mut off = 0;
        while off < n {
            let m = w.write(&buf.space()[off..n]).await?;
            if m == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            off += m;
            count.fetch_add(m as u64, Ordering::Relaxed);
        }
        buf.after_read(n);
    }
}

/// One direction's buffer: starts at [`RELAY_BUFFER_START`] and doubles after a read that
/// filled it (the sender is ahead: more was likely queued), never beyond `max`.
struct RelayBuffer {
    bytes: Vec<u8>,
    max: usize,
}

impl RelayBuffer {
    fn new(max: usize) -> RelayBuffer {
        let max = max.max(1024);
        RelayBuffer {
            bytes: vec![0u8; RELAY_BUFFER_START.min(max)],
            max,
        }
    }

    fn space(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// Called once the `n` bytes read have been written on: grow if they filled the buffer.
    fn after_read(&mut self, n: usize) {
        if n == self.bytes.len() && self.bytes.len() < self.max {
            let next = self.bytes.len().saturating_mul(2).min(self.max);
            self.bytes.resize(next, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_buffer_doubles_only_after_a_full_read_and_stops_at_its_limit() {
        let mut b = RelayBuffer::new(300 * 1024);
        assert_eq!(b.space().len(), RELAY_BUFFER_START);
        b.after_read(RELAY_BUFFER_START - 1);
        assert_eq!(
            b.space().len(),
            RELAY_BUFFER_START,
            "a short read does not grow it"
        );
        b.after_read(RELAY_BUFFER_START);
        assert_eq!(b.space().len(), 2 * RELAY_BUFFER_START);
        b.after_read(2 * RELAY_BUFFER_START);
        assert_eq!(b.space().len(), 256 * 1024);
        b.after_read(256 * 1024);
        assert_eq!(b.space().len(), 300 * 1024, "capped at the limit");
        b.after_read(300 * 1024);
        assert_eq!(b.space().len(), 300 * 1024);
        // A limit below the start size is the size.
        assert_eq!(RelayBuffer::new(4096).space().len(), 4096);
    }

    #[tokio::test]
    async fn the_copy_passes_every_byte_in_order_while_its_buffer_grows() {
        // The writer side of a small pipe forces short writes; the reader gets whole buffers.
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut src: &[u8] = &data;
        let (mut w, mut r) = tokio::io::duplex(7 * 1024);
        let count = AtomicU64::new(0);
        let reader = async {
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.map(|_| got)
        };
        let (copied, got) =
            tokio::join!(copy_counting(&mut src, &mut w, &count, 256 * 1024), reader);
        copied.unwrap();
        assert_eq!(got.unwrap(), data);
        assert_eq!(count.load(Ordering::Relaxed), data.len() as u64);
    }
}
