//! Egress micro-benchmark: tunnel throughput against a direct loopback TCP connection, and the
//! set-up time the proxy adds, side by side in one run. Prints figures; asserts nothing except
//! that every byte arrived.
//!
//! ```sh
//! cargo run --release -p mcpsum-egress --example bench                # 1 GiB per transfer, 5 rounds
//! cargo run --release -p mcpsum-egress --example bench -- 256 9       # MiB per transfer, rounds
//! cargo run --release -p mcpsum-egress --example bench -- 256 3 --only copy,raw   # for perf/strace
//! cargo run --release -p mcpsum-egress --example bench -- 256 --json  # for benches/bench.rs
//! ```
//!
//! `--only` takes paths (`direct`, `copy`, `squid`, `tinyproxy`), kinds (`raw`, `tls`) and
//! `setup`; a group none of whose items is named runs whole, except `setup`, which runs only when
//! named (or without `--only`).
//!
//! Each party runs on its own thread with its own current-thread runtime, as in mcpsum (whose
//! egress proxy runs on its current-thread runtime, in another process than the server): the
//! client on the main thread, the servers on `bench-server`, mcpsum's proxy on `bench-proxy`.
//! The peers are other CONNECT relays, squid and tinyproxy, each started by the bench as its own
//! process on a free loopback port, configured as a plain tunnel (no cache, no access log, any
//! port, loopback clients only), and killed when the bench ends; a peer that is not installed
//! is skipped with a note. A direct, a proxied and a peer transfer use the same client and
//! server code and move the same bytes (the hello included); only the path differs. Each round
//! runs every path once, in a rotating order. Besides each path against direct, the bench
//! reports mcpsum's relay against the best peer of the same run: throughput (median over rounds
//! of the ratio to the fastest peer of that round) and the relay's on-CPU time per GiB (against
//! the lowest peer median).
//!
//! Besides wall-clock throughput, which other load on the machine distorts, the bench reports each
//! thread's on-CPU time per GiB (`/proc/self/task/TID/schedstat`), which load barely changes;
//! for a peer process, its CPU-time clock (`clock_getcpuclockid`), the same scheduler count
//! summed over its threads (exited ones included: tinyproxy runs one per connection). On
//! loopback a socket write also runs the receiving socket's TCP input, and a read's ACK can push
//! the peer's queued data, so work moves between the threads: compare totals.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::cast_precision_loss
)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    FakeResolver, Mode, client_config, connect_request, connect_via, pki, server_name, tls_server,
};
use mcpsum_egress::{Allowlist, AuditSink, EgressConfig, EgressRecord, serve};
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;

/// Size of each write of the client, and of each read of the servers.
const CHUNK: usize = 64 * 1024;
const PATHS: [&str; 4] = ["direct", "copy", "squid", "tinyproxy"];
/// Indices in [`PATHS`] of the peers: other CONNECT relays, run as plain loopback proxies.
const PEERS: std::ops::Range<usize> = 2..4;
const KINDS: [&str; 2] = ["raw", "tls"];

struct Args {
    mib: u64,
    rounds: usize,
    only: Vec<String>,
    json: bool,
}

impl Args {
    fn parse() -> Args {
        let mut a = Args {
            mib: 1024,
            rounds: 5,
            only: Vec::new(),
            json: false,
        };
        let mut numbers = 0;
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--json" => a.json = true,
                "--only" => {
                    let list = it.next().expect("--only needs a list, e.g. copy,raw");
                    a.only = list.split(',').map(str::to_owned).collect();
                }
                n => {
                    let v: u64 = n
                        .parse()
                        .expect("usage: bench [MiB] [rounds] [--only LIST]");
                    if numbers == 0 {
                        a.mib = v.max(1);
                    } else {
                        a.rounds = usize::try_from(v).unwrap_or(1).max(1);
                    }
                    numbers += 1;
                }
            }
        }
        a
    }

    /// Whether `item` runs: all of a group run unless `--only` names one of that group.
    fn wants(&self, item: &str, group: &[&str]) -> bool {
        let named = |x: &&str| self.only.iter().any(|o| o == x);
        !group.iter().any(named) || named(&item)
    }
}

fn main() {
    let args = Args::parse();
    let server = Worker::start("bench-server");
    let proxy = Worker::start("bench-proxy");
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    client.block_on(bench(&args, &server, &proxy));
}

/// A thread running a current-thread runtime until the process ends.
struct Worker {
    handle: Handle,
    tid: u32,
}

impl Worker {
    fn start(name: &str) -> Worker {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                tx.send((rt.handle().clone(), this_tid())).unwrap();
                rt.block_on(std::future::pending::<()>());
            })
            .unwrap();
        let (handle, tid) = rx.recv().unwrap();
        Worker { handle, tid }
    }

    /// Run `f` on this worker's thread and wait for its result.
    async fn run<F>(&self, f: F) -> F::Output
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(f).await.unwrap()
    }
}

fn this_tid() -> u32 {
    let link = std::fs::read_link("/proc/thread-self").unwrap();
    link.file_name().unwrap().to_str().unwrap().parse().unwrap()
}

/// On-CPU nanoseconds of thread `tid` of this process.
fn cpu_ns(tid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Voluntary and involuntary context switches of thread `tid` of this process.
fn switches(tid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    s.lines()
        .filter(|l| l.contains("ctxt_switches"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

async fn bench(args: &Args, server: &Worker, proxy: &Worker) {
    let total = args.mib * 1024 * 1024;
    let pki = pki(&["bench.example", "127.0.0.1"]);
    let (tls_sink, tls_echo, raw_sink) = {
        let cfg = pki.server.clone();
        server
            .run(async move {
                (
                    tls_server(cfg.clone(), Mode::SinkSized).await,
                    tls_server(cfg, Mode::Echo).await,
                    raw_sink_server().await,
                )
            })
            .await
    };

    let allow: Vec<String> = [
        format!("bench.example:{}", tls_echo.port()),
        format!("127.0.0.1:{}", tls_echo.port()),
        format!("127.0.0.1:{}", tls_sink.port()),
        format!("127.0.0.1:{}", raw_sink.port()),
    ]
    .into();
    let resolver = FakeResolver::with(&[("bench.example", &["127.0.0.1"])]);
    // Audit to a sink that still serialises each record, as the real log would.
    let audit: AuditSink = Arc::new(|r: &EgressRecord| {
        std::hint::black_box(r.to_json_line());
        Ok(())
    });
    let copying = EgressConfig::new("bench", "s", Allowlist::parse(&allow).unwrap());
    let proxy_copy = proxy
        .run(async move {
            let a = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = a.local_addr().unwrap();
            let never = std::future::pending::<()>;
            tokio::spawn(serve(a, Arc::new(copying), resolver, audit, never()));
            addr
        })
        .await;

    // The peers, started here on free loopback ports and stopped when the bench ends.
    let peers: Vec<Option<Peer>> = PEERS
        .map(|p| {
            if args.wants(PATHS[p], &PATHS) {
                Peer::start(PATHS[p])
            } else {
                None
            }
        })
        .collect();

    let hello = client_hello("127.0.0.1");
    let load = loadavg();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    if !args.json {
        println!(
            "egress bench: {} MiB per transfer, {} KiB writes, rounds: {}; {cores} cores, \
             loadavg {load}",
            args.mib,
            CHUNK / 1024,
            args.rounds
        );
    }
    let threads = Threads {
        client: this_tid(),
        server: server.tid,
        proxy: proxy.tid,
    };
    let ca = &pki.ca;
    // runs[kind][path], one entry per round.
    let n = PATHS.len();
    let mut runs: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); n]; 2];
    for round in 0..args.rounds {
        // Rotate the order so no path always runs first, or always right after another.
        for k in 0..n {
            let path = (round + k) % n;
            if !args.wants(PATHS[path], &PATHS) {
                continue;
            }
            let (via, relay) = match path {
                0 => (None, Relay::Thread(threads.proxy)),
                1 => (Some(proxy_copy), Relay::Thread(threads.proxy)),
                p => match &peers[p - PEERS.start] {
                    Some(peer) => (Some(peer.addr), Relay::Process(peer.pid)),
                    None => continue,
                },
            };
            if args.wants("raw", &KINDS) {
                let r = threads
                    .measure(total, relay, raw_transfer(raw_sink, via, &hello, total))
                    .await;
                runs[0][path].push(r);
            }
            if args.wants("tls", &KINDS) {
                let r = threads
                    .measure(total, relay, tls_transfer(ca, tls_sink, via, total))
                    .await;
                runs[1][path].push(r);
            }
        }
    }
    let against: Vec<Option<AgainstPeers>> = runs.iter().map(|r| AgainstPeers::of(r)).collect();
    let figures: Vec<Vec<Option<Figures>>> = runs
        .iter()
        .map(|by_path| {
            by_path
                .iter()
                .map(|r| Figures::of(r, &by_path[0]))
                .collect()
        })
        .collect();
    let setup = if args.only.is_empty() || args.only.iter().any(|o| o == "setup") {
        Some(setup_times(ca, tls_echo, proxy_copy).await)
    } else {
        None
    };

    if args.json {
        let mut out = json!({
            "mib": args.mib,
            "rounds": args.rounds,
            "write_bytes": CHUNK,
            "cores": cores,
            "loadavg": load,
        });
        for (k, kind) in KINDS.iter().enumerate() {
            for (p, path) in PATHS.iter().enumerate() {
                if let Some(f) = &figures[k][p] {
                    out[*kind][*path] = f.json();
                }
            }
            if let Some(a) = &against[k] {
                out[*kind]["copy_vs_best_peer"] = a.json();
            }
        }
        for peer in peers.iter().flatten() {
            out["peers"][peer.name] = json!({"version": peer.version, "config": peer.config});
        }
        if let Some(s) = &setup {
            out["setup"] = s.json();
        }
        println!("{out}");
        return;
    }
    print_figures(&figures);
    print_against(&against, &peers);
    if let Some(s) = &setup {
        s.print();
    }
}

/// mcpsum's copying relay against the best peer of the same run: throughput (median over rounds
/// of the copy path's MB/s over the fastest peer's in that round) and the relay's on-CPU time per
/// GiB (median) over the lowest peer median.
struct AgainstPeers {
    /// The peer that was fastest in most rounds (named in the output).
    fastest: &'static str,
    throughput_ratio: f64,
    /// The peer with the lowest median on-CPU time per GiB.
    leanest: &'static str,
    relay_cpu_ratio: f64,
}

impl AgainstPeers {
    fn of(by_path: &[Vec<Run>]) -> Option<AgainstPeers> {
        let copy = &by_path[1];
        let peers: Vec<usize> = PEERS
            .filter(|p| !by_path[*p].is_empty() && by_path[*p].len() == copy.len())
            .collect();
        if copy.is_empty() || peers.is_empty() {
            return None;
        }
        let mut wins = vec![0usize; PATHS.len()];
        let ratios: Vec<f64> = (0..copy.len())
            .map(|round| {
                let best = peers
                    .iter()
                    .copied()
                    .max_by(|a, b| by_path[*a][round].mbps.total_cmp(&by_path[*b][round].mbps))
                    .unwrap();
                wins[best] += 1;
                copy[round].mbps / by_path[best][round].mbps
            })
            .collect();
        let fastest = peers.iter().copied().max_by_key(|p| wins[*p]).unwrap();
        let relay = |p: usize| median(by_path[p].iter().map(|r| r.cpu[2]).collect());
        let leanest = peers
            .iter()
            .copied()
            .min_by(|a, b| relay(*a).total_cmp(&relay(*b)))
            .unwrap();
        Some(AgainstPeers {
            fastest: PATHS[fastest],
            throughput_ratio: median(ratios),
            leanest: PATHS[leanest],
            relay_cpu_ratio: relay(1) / relay(leanest),
        })
    }

    fn json(&self) -> Value {
        json!({
            "fastest_peer": self.fastest,
            "throughput_ratio_median": self.throughput_ratio,
            "leanest_peer": self.leanest,
            "relay_cpu_ratio": self.relay_cpu_ratio,
        })
    }
}

fn print_against(against: &[Option<AgainstPeers>], peers: &[Option<Peer>]) {
    let versions: Vec<String> = peers
        .iter()
        .flatten()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect();
    if versions.is_empty() {
        println!(
            "
no peer relay ran (squid, tinyproxy: install them, scripts/install-test-deps.sh)"
        );
        return;
    }
    println!(
        "
copying relay against the best peer ({})",
        versions.join(", ")
    );
    for (k, name) in KINDS.iter().enumerate() {
        if let Some(a) = &against[k] {
            println!(
                "{name:<5} throughput {:.0}% of {} (median over rounds); relay on-CPU per GiB {:.0}% of {}",
                100.0 * a.throughput_ratio,
                a.fastest,
                100.0 * a.relay_cpu_ratio,
                a.leanest
            );
        }
    }
}

/// Whose on-CPU time is the relay's: a thread of this process (mcpsum's proxy) or a whole peer
/// process (every thread it has or had: tinyproxy runs one per connection).
#[derive(Clone, Copy)]
enum Relay {
    Thread(u32),
    Process(i32),
}

impl Relay {
    /// On-CPU nanoseconds. A thread's from `schedstat`; a process's from its CPU-time clock
    /// (`clock_getcpuclockid`), the same scheduler count summed over its threads, exited ones
    /// included, plus that of any child process it started.
    fn cpu_ns(self) -> u64 {
        match self {
            Relay::Thread(tid) => cpu_ns(tid),
            Relay::Process(pid) => std::iter::once(pid)
                .chain(descendants(pid))
                .map(process_cpu_ns)
                .sum(),
        }
    }

    fn switches(self) -> u64 {
        match self {
            Relay::Thread(tid) => switches(tid),
            Relay::Process(pid) => {
                let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                s.lines()
                    .filter(|l| l.contains("ctxt_switches"))
                    .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .sum()
            }
        }
    }
}

fn process_cpu_ns(pid: i32) -> u64 {
    use nix::time::{clock_getcpuclockid, clock_gettime};
    clock_getcpuclockid(nix::unistd::Pid::from_raw(pid))
        .and_then(clock_gettime)
        .map_or(0, |t| {
            u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
                + u64::try_from(t.tv_nsec()).unwrap_or(0)
        })
}

fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    for t in tasks.flatten() {
        let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        for c in list.split_whitespace().filter_map(|c| c.parse().ok()) {
            out.push(c);
            out.extend(descendants(c));
        }
    }
    out
}

/// Another CONNECT relay, started for the bench on a free loopback port with a configuration that
/// makes it a plain tunnel: no cache, no access log, any port, loopback clients only. Stopped
/// (killed) when dropped.
struct Peer {
    name: &'static str,
    version: String,
    /// The configuration, one line, for the method text.
    config: String,
    addr: SocketAddr,
    pid: i32,
    child: std::process::Child,
    _dir: TempDir,
}

impl Peer {
    /// Starts `name` (`squid`, `tinyproxy`); `None` (with a line on stderr) when it is not
    /// installed or does not come up.
    fn start(name: &'static str) -> Option<Peer> {
        let bin = ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
            .iter()
            .map(|d| std::path::Path::new(d).join(name))
            .find(|p| p.exists());
        let Some(bin) = bin else {
            eprintln!(
                "bench: `{name}` is not installed; skipping it (scripts/install-test-deps.sh installs it)"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("mcpsum-bench-peer-")
            .tempdir()
            .unwrap();
        // Whoever the peer drops to must reach its pid file.
        std::fs::set_permissions(
            dir.path(),
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o777),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let d = dir.path().display();
        let (config, args, version_arg): (Vec<String>, Vec<String>, &str) = match name {
            "squid" => (
                vec![
                    format!("http_port 127.0.0.1:{port}"),
                    "http_access allow localhost".into(),
                    "http_access deny all".into(),
                    "cache deny all".into(),
                    "cache_mem 8 MB".into(),
                    "access_log none".into(),
                    format!("cache_log {d}/cache.log"),
                    format!("pid_filename {d}/squid.pid"),
                    format!("coredump_dir {d}"),
                    "pinger_enable off".into(),
                    "netdb_filename none".into(),
                    "shutdown_lifetime 0 seconds".into(),
                ],
                vec!["-N".into(), "-f".into(), format!("{d}/peer.conf")],
                "-v",
            ),
            "tinyproxy" => (
                vec![
                    format!("Port {port}"),
                    "Listen 127.0.0.1".into(),
                    "Allow 127.0.0.1".into(),
                    "Timeout 600".into(),
                    "MaxClients 64".into(),
                    "LogLevel Critical".into(),
                    format!("LogFile \"{d}/tinyproxy.log\""),
                    format!("PidFile \"{d}/tinyproxy.pid\""),
                    "User nobody".into(),
                    "Group nogroup".into(),
                ],
                vec!["-d".into(), "-c".into(), format!("{d}/peer.conf")],
                "-v",
            ),
            _ => unreachable!("unknown peer {name}"),
        };
        std::fs::write(dir.path().join("peer.conf"), config.join("\n") + "\n").unwrap();
        let version = std::process::Command::new(&bin)
            .arg(version_arg)
            .output()
            .map(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                text.split_whitespace()
                    .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
                    .unwrap_or("unknown")
                    .to_owned()
            })
            .unwrap_or_else(|_| "unknown".into());
        let mut child = std::process::Command::new(&bin)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(addr).is_err() {
            if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                eprintln!("bench: `{name}` did not listen on {addr}; skipping it");
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid = i32::try_from(child.id()).unwrap();
        Some(Peer {
            name,
            version,
            config: config
                .join("; ")
                .replace(&d.to_string(), "DIR")
                .replace(&port.to_string(), "PORT"),
            addr,
            pid,
            child,
            _dir: dir,
        })
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_figures(figures: &[Vec<Option<Figures>>]) {
    let names = ["raw TCP after a ClientHello", "TLS 1.3 (rustls, ring) bulk"];
    let paths = ["direct", "copying relay", "squid", "tinyproxy"];
    println!(
        "\nthroughput, MB/s best of rounds (proxied/direct: median over rounds of the same round's ratio)"
    );
    for (k, name) in names.iter().enumerate() {
        if figures[k].iter().all(Option::is_none) {
            continue;
        }
        let mut line = format!("{name:<30}");
        for (p, path) in paths.iter().enumerate() {
            if let Some(f) = &figures[k][p] {
                line += &format!("  {path} {:.0}", f.mbps_best);
                if let Some(r) = f.ratio {
                    line += &format!(" ({:.0}%)", 100.0 * r);
                }
            }
        }
        println!("{line}");
    }
    println!(
        "\non-CPU ms per GiB, medians over rounds: client + server + relay = total; switches per GiB"
    );
    for (k, name) in KINDS.iter().enumerate() {
        for (p, path) in paths.iter().enumerate() {
            if let Some(f) = &figures[k][p] {
                println!(
                    "{:<34} {:>5.0} + {:>5.0} + {:>5.0} = {:>5.0}   {:>6.0} / {:>6.0} / {:>6.0}",
                    format!("{name}, {path}"),
                    f.client,
                    f.server,
                    f.relay,
                    f.total,
                    f.switches[0],
                    f.switches[1],
                    f.switches[2],
                );
            }
        }
    }
}

struct Threads {
    client: u32,
    server: u32,
    proxy: u32,
}

impl Threads {
    /// Run one transfer of `total` bytes and measure it; `relay` is who relays it (the proxy
    /// thread, or a peer process).
    async fn measure<F: std::future::Future<Output = ()>>(
        &self,
        total: u64,
        relay: Relay,
        f: F,
    ) -> Run {
        let who = [
            Relay::Thread(self.client),
            Relay::Thread(self.server),
            relay,
        ];
        let cpu0 = who.map(Relay::cpu_ns);
        let sw0 = who.map(Relay::switches);
        let t = Instant::now();
        f.await;
        let wall = t.elapsed().as_secs_f64();
        let cpu1 = who.map(Relay::cpu_ns);
        let sw1 = who.map(Relay::switches);
        let gib = total as f64 / f64::from(1u32 << 30);
        let per_gib = |i: usize| (cpu1[i] - cpu0[i]) as f64 / 1e6 / gib;
        Run {
            mbps: total as f64 / wall / 1e6,
            cpu: [per_gib(0), per_gib(1), per_gib(2)],
            switches: [0, 1, 2].map(|i| (sw1[i] - sw0[i]) as f64 / gib),
        }
    }
}

/// One transfer: wall-clock MB/s, and per thread (client, server, relay) on-CPU ms per GiB and
/// context switches per GiB.
#[derive(Clone, Copy)]
struct Run {
    mbps: f64,
    cpu: [f64; 3],
    switches: [f64; 3],
}

/// One path's figures over the rounds.
struct Figures {
    mbps_best: f64,
    mbps_median: f64,
    /// Median over rounds of this path's MB/s over the direct path's in the same round.
    ratio: Option<f64>,
    client: f64,
    server: f64,
    relay: f64,
    total: f64,
    switches: [f64; 3],
}

impl Figures {
    fn of(runs: &[Run], direct: &[Run]) -> Option<Figures> {
        if runs.is_empty() {
            return None;
        }
        let med = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f).collect());
        let ratio = (!direct.is_empty()).then(|| {
            median(
                runs.iter()
                    .zip(direct)
                    .map(|(r, d)| r.mbps / d.mbps)
                    .collect(),
            )
        });
        Some(Figures {
            mbps_best: runs.iter().map(|r| r.mbps).fold(0.0, f64::max),
            mbps_median: med(&|r| r.mbps),
            ratio,
            client: med(&|r| r.cpu[0]),
            server: med(&|r| r.cpu[1]),
            relay: med(&|r| r.cpu[2]),
            total: med(&|r| r.cpu.iter().sum()),
            switches: [0, 1, 2].map(|i| med(&|r| r.switches[i])),
        })
    }

    fn json(&self) -> Value {
        json!({
            "mbps_best": self.mbps_best,
            "mbps_median": self.mbps_median,
            "ratio_median": self.ratio,
            "cpu_ms_per_gib": {
                "client": self.client,
                "server": self.server,
                "relay": self.relay,
                "total": self.total,
            },
            "switches_per_gib": {
                "client": self.switches[0],
                "server": self.switches[1],
                "relay": self.switches[2],
            },
        })
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Set-up times of the direct and the proxied path, sorted.
type Pair = (Vec<Duration>, Vec<Duration>);

struct Setup {
    runs: usize,
    /// A TCP connect against `CONNECT IP:port` -> 200.
    tcp: Pair,
    /// A TCP connect and TLS handshake, directly and through the proxy.
    tls: Pair,
}

async fn setup_times(ca: &CertificateDer<'static>, echo: SocketAddr, proxy: SocketAddr) -> Setup {
    let runs = 300;
    let mut s = Setup {
        runs,
        tcp: (Vec::new(), Vec::new()),
        tls: (Vec::new(), Vec::new()),
    };
    let target = connect_request(&format!("127.0.0.1:{}", echo.port()));
    for _ in 0..runs {
        s.tcp.0.push(time(TcpStream::connect(echo)).await);
        s.tcp.1.push(time(connect_via(proxy, &target)).await);
        s.tls
            .0
            .push(time(handshake(ca, echo, None, "bench.example")).await);
        s.tls
            .1
            .push(time(handshake(ca, proxy, Some(echo), "bench.example")).await);
    }
    for v in [&mut s.tcp.0, &mut s.tcp.1, &mut s.tls.0, &mut s.tls.1] {
        v.sort();
    }
    s
}

impl Setup {
    fn rows(&self) -> [(&'static str, &'static str, &Pair); 2] {
        [
            ("tcp", "TCP connect vs CONNECT IP:port -> 200", &self.tcp),
            (
                "tls",
                "TCP + TLS handshake, name target (no DNS)",
                &self.tls,
            ),
        ]
    }

    fn print(&self) {
        println!(
            "\n{:<44} {:>10} {:>10} {:>10}",
            format!("set-up, {} runs (median / p90)", self.runs),
            "direct",
            "proxied",
            "added"
        );
        for (_, name, (d, p)) in self.rows() {
            let (dm, pm) = (ms(pct(d, 50)), ms(pct(p, 50)));
            println!(
                "{name:<44} {dm:>7.3} ms {pm:>7.3} ms {:>7.3} ms   (p90 {:.3} / {:.3})",
                pm - dm,
                ms(pct(d, 90)),
                ms(pct(p, 90))
            );
        }
    }

    fn json(&self) -> Value {
        let mut out = json!({"runs": self.runs});
        for (key, _, (d, p)) in self.rows() {
            out[key] = json!({
                "direct_ms": ms(pct(d, 50)),
                "proxied_ms": ms(pct(p, 50)),
                "added_ms": ms(pct(p, 50)) - ms(pct(d, 50)),
                "direct_p90_ms": ms(pct(d, 90)),
                "proxied_p90_ms": ms(pct(p, 90)),
            });
        }
        out
    }
}

async fn time<F: std::future::Future>(f: F) -> Duration {
    let t = Instant::now();
    std::hint::black_box(f.await);
    t.elapsed()
}

/// The `p`th percentile of sorted `v`.
fn pct(v: &[Duration], p: usize) -> Duration {
    v[(v.len() - 1) * p / 100]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn client_hello(name: &str) -> Vec<u8> {
    let config = client_config(&pki(&["x"]).ca, &[]);
    let mut conn =
        rustls::ClientConnection::new(config, ServerName::try_from(name.to_string()).unwrap())
            .unwrap();
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).unwrap();
    }
    out
}

/// Skips the ClientHello record the client sends first, reads an 8-byte length and counts that
/// many bytes, then replies with the count. The end of a transfer is a length, not an EOF:
/// squid and tinyproxy close the whole tunnel at the client's half-close.
async fn raw_sink_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let mut head = [0u8; 5];
                if s.read_exact(&mut head).await.is_err() {
                    return;
                }
                let mut hello = vec![0u8; usize::from(u16::from_be_bytes([head[3], head[4]]))];
                let mut len = [0u8; 8];
                if s.read_exact(&mut hello).await.is_err() || s.read_exact(&mut len).await.is_err()
                {
                    return;
                }
                let want = u64::from_be_bytes(len);
                let mut buf = vec![0u8; CHUNK];
                let mut n: u64 = 0;
                while n < want {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k as u64,
                    }
                }
                let _ = s.write_all(&n.to_be_bytes()).await;
                // Wait for the client to close (the count must not race our close).
                let _ = s.read(&mut buf).await;
            });
        }
    });
    addr
}

/// Announce `total`, write `total` bytes, and check the server's count of what it received.
async fn pump<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, total: u64) {
    let buf = vec![0x5au8; CHUNK];
    s.write_all(&total.to_be_bytes()).await.unwrap();
    let mut sent = 0u64;
    while sent < total {
        let k = (total - sent).min(CHUNK as u64) as usize;
        s.write_all(&buf[..k]).await.unwrap();
        sent += k as u64;
    }
    s.flush().await.unwrap();
    let mut count = [0u8; 8];
    s.read_exact(&mut count).await.unwrap();
    assert_eq!(u64::from_be_bytes(count), total, "bytes lost");
}

/// `total` bytes to the raw sink, directly or through the proxy. Both send the same hello first
/// (the proxy requires one), so both move the same bytes.
async fn raw_transfer(sink: SocketAddr, via: Option<SocketAddr>, hello: &[u8], total: u64) {
    let mut s = match via {
        None => {
            let s = TcpStream::connect(sink).await.unwrap();
            s.set_nodelay(true).unwrap();
            s
        }
        Some(proxy) => {
            let target = format!("127.0.0.1:{}", sink.port());
            let (s, status, _) = connect_via(proxy, &connect_request(&target)).await;
            assert_eq!(status, 200);
            s
        }
    };
    s.write_all(hello).await.unwrap();
    pump(&mut s, total).await;
}

async fn tls_transfer(
    ca: &CertificateDer<'static>,
    sink: SocketAddr,
    via: Option<SocketAddr>,
    total: u64,
) {
    let mut tls = match via {
        None => handshake(ca, sink, None, "127.0.0.1").await,
        Some(proxy) => handshake(ca, proxy, Some(sink), "127.0.0.1").await,
    };
    pump(&mut tls, total).await;
}

/// A TLS session to `addr`, or, when `via` is given, to `via` through the proxy at `addr`. Both
/// sockets have `TCP_NODELAY`, as `connect_via` sets it.
async fn handshake(
    ca: &CertificateDer<'static>,
    addr: SocketAddr,
    via: Option<SocketAddr>,
    name: &str,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = match via {
        None => {
            let s = TcpStream::connect(addr).await.unwrap();
            s.set_nodelay(true).unwrap();
            s
        }
        Some(up) => {
            let target = if name == "127.0.0.1" {
                format!("127.0.0.1:{}", up.port())
            } else {
                format!("{name}:{}", up.port())
            };
            let (s, status, _) = connect_via(addr, &connect_request(&target)).await;
            assert_eq!(status, 200, "{target}");
            s
        }
    };
    let connector = tokio_rustls::TlsConnector::from(client_config(ca, &[]));
    connector.connect(server_name(name), tcp).await.unwrap()
}
