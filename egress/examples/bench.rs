//! Egress micro-benchmark: tunnel throughput against a direct loopback TCP connection, and the
//! set-up time the proxy adds, side by side in one run. Prints figures; asserts nothing.
//!
//! ```sh
//! cargo run --release -p mcpsum-egress --example bench            # 1 GiB per transfer
//! cargo run --release -p mcpsum-egress --example bench -- 256      # MiB per transfer
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    FakeResolver, Mode, client_config, connect_request, connect_via, pki, server_name, tls_server,
};
use mcpsum_egress::{Allowlist, AuditSink, EgressConfig, EgressRecord, serve};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CHUNK: usize = 64 * 1024;

#[tokio::main]
async fn main() {
    let mib: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1024);
    let total = mib * 1024 * 1024;

    let pki = pki(&["bench.example", "127.0.0.1"]);
    let tls_sink = tls_server(pki.server.clone(), Mode::Sink).await;
    let tls_echo = tls_server(pki.server.clone(), Mode::Echo).await;
    let raw_sink = raw_sink_server().await;

    let allow: Vec<String> = [
        format!("bench.example:{}", tls_echo.port()),
        format!("127.0.0.1:{}", tls_echo.port()),
        format!("127.0.0.1:{}", tls_sink.port()),
        format!("127.0.0.1:{}", raw_sink.port()),
    ]
    .into();
    let resolver = FakeResolver::with(&[("bench.example", &["127.0.0.1"])]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap();
    // Audit to a Vec-free sink that still serialises each record, as the real log would.
    let audit: AuditSink = Arc::new(|r: &EgressRecord| {
        std::hint::black_box(r.to_json_line());
        Ok(())
    });
    let mut config = EgressConfig::new("bench", "s", Allowlist::parse(&allow).unwrap());
    config.limits.zero_copy = true;
    let mut copying = config.clone();
    copying.limits.zero_copy = false;
    let listener_copy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_copy = listener_copy.local_addr().unwrap();
    let never = std::future::pending::<()>;
    tokio::spawn(serve(
        listener,
        Arc::new(config),
        resolver.clone(),
        audit.clone(),
        never(),
    ));
    tokio::spawn(serve(
        listener_copy,
        Arc::new(copying),
        resolver,
        audit,
        never(),
    ));

    let hello = client_hello("127.0.0.1");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "egress bench: {mib} MiB per transfer, {CHUNK} B writes; {cores} cores, loadavg {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "{:<40} {:>10} {:>18} {:>18}   CPU ms/GiB: direct / splice / copy",
        "throughput (best of 3)", "direct", "proxied (splice)", "proxied (copy)"
    );
    let mut raw: [Option<Run>; 3] = [None; 3];
    let mut tls: [Option<Run>; 3] = [None; 3];
    for _ in 0..3 {
        raw[0] = Run::best(raw[0], raw_transfer(raw_sink, None, total).await);
        raw[1] = Run::best(
            raw[1],
            raw_transfer(proxy, Some((raw_sink, &hello)), total).await,
        );
        raw[2] = Run::best(
            raw[2],
            raw_transfer(proxy_copy, Some((raw_sink, &hello)), total).await,
        );
        tls[0] = Run::best(tls[0], tls_transfer(&pki.ca, tls_sink, None, total).await);
        tls[1] = Run::best(
            tls[1],
            tls_transfer(&pki.ca, proxy, Some(tls_sink), total).await,
        );
        tls[2] = Run::best(
            tls[2],
            tls_transfer(&pki.ca, proxy_copy, Some(tls_sink), total).await,
        );
    }
    let row = |name: &str, r: [Option<Run>; 3]| {
        let [d, p, c] = r.map(|x| x.unwrap());
        println!(
            "{name:<40} {:>5.0} MB/s {:>5.0} MB/s {:>5.1}% {:>5.0} MB/s {:>5.1}%   {:.0} / {:.0} / {:.0}",
            d.mbps,
            p.mbps,
            100.0 * p.mbps / d.mbps,
            c.mbps,
            100.0 * c.mbps / d.mbps,
            d.cpu_ms_per_gib,
            p.cpu_ms_per_gib,
            c.cpu_ms_per_gib,
        );
    };
    row("raw TCP after a ClientHello (relay only)", raw);
    row("TLS 1.3 (rustls, ring) bulk data", tls);

    let n = 300;
    let mut direct_tcp = Vec::new();
    let mut proxied_tcp = Vec::new();
    let mut direct_tls = Vec::new();
    let mut proxied_tls = Vec::new();
    for _ in 0..n {
        direct_tcp.push(time(TcpStream::connect(tls_echo)).await);
        proxied_tcp.push(
            time(async {
                connect_via(
                    proxy,
                    &connect_request(&format!("127.0.0.1:{}", tls_echo.port())),
                )
                .await
            })
            .await,
        );
        direct_tls.push(time(handshake(&pki.ca, tls_echo, None, "bench.example")).await);
        proxied_tls.push(time(handshake(&pki.ca, proxy, Some(tls_echo), "bench.example")).await);
    }
    println!();
    println!(
        "{:<44} {:>10} {:>10} {:>10}",
        format!("set-up, {n} runs (median / p90)"),
        "direct",
        "proxied",
        "added"
    );
    let srow = |name: &str, d: &mut Vec<Duration>, p: &mut Vec<Duration>| {
        let (dm, d9) = stats(d);
        let (pm, p9) = stats(p);
        println!(
            "{name:<44} {:>7.3} ms {:>7.3} ms {:>7.3} ms   (p90 {:.3} / {:.3})",
            ms(dm),
            ms(pm),
            ms(pm) - ms(dm),
            ms(d9),
            ms(p9)
        );
    };
    srow(
        "TCP connect vs CONNECT IP:port -> 200",
        &mut direct_tcp,
        &mut proxied_tcp,
    );
    srow(
        "TCP + TLS handshake, name target (no DNS)",
        &mut direct_tls,
        &mut proxied_tls,
    );
}

async fn time<F: std::future::Future>(f: F) -> Duration {
    let t = Instant::now();
    std::hint::black_box(f.await);
    t.elapsed()
}

fn stats(v: &mut [Duration]) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[v.len() * 9 / 10])
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

/// Counts what it reads until EOF, then replies with the count.
async fn raw_sink_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; CHUNK];
                let mut n: u64 = 0;
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k as u64,
                    }
                }
                let _ = s.write_all(&n.to_be_bytes()).await;
            });
        }
    });
    addr
}

async fn pump<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, total: u64) {
    let buf = vec![0x5au8; CHUNK];
    let mut sent = 0u64;
    while sent < total {
        let k = (total - sent).min(CHUNK as u64) as usize;
        s.write_all(&buf[..k]).await.unwrap();
        sent += k as u64;
    }
    s.shutdown().await.unwrap();
    let mut count = [0u8; 8];
    s.read_exact(&mut count).await.unwrap();
}

/// MB/s of `total` bytes to the raw sink, directly or through the proxy (after a real hello).
async fn raw_transfer(addr: SocketAddr, via: Option<(SocketAddr, &[u8])>, total: u64) -> Run {
    let (t, c) = (Instant::now(), cpu_ticks());
    let mut s = match via {
        None => TcpStream::connect(addr).await.unwrap(),
        Some((sink, hello)) => {
            let (mut s, status, _) = connect_via(
                addr,
                &connect_request(&format!("127.0.0.1:{}", sink.port())),
            )
            .await;
            assert_eq!(status, 200);
            s.write_all(hello).await.unwrap();
            s
        }
    };
    pump(&mut s, total).await;
    Run::measure(t, c, total)
}

async fn tls_transfer(
    ca: &rustls::pki_types::CertificateDer<'static>,
    addr: SocketAddr,
    via: Option<SocketAddr>,
    total: u64,
) -> Run {
    let (t, c) = (Instant::now(), cpu_ticks());
    let mut tls = handshake(ca, addr, via, "127.0.0.1").await;
    pump(&mut tls, total).await;
    Run::measure(t, c, total)
}

/// One transfer: wall-clock throughput, and the CPU time the whole process (client, proxy and
/// server together) spent per GiB, which stays meaningful when other jobs share the cores.
#[derive(Clone, Copy)]
struct Run {
    mbps: f64,
    cpu_ms_per_gib: f64,
}

impl Run {
    fn measure(t: Instant, ticks: u64, total: u64) -> Run {
        let wall = t.elapsed().as_secs_f64();
        let cpu_ms = (cpu_ticks() - ticks) as f64 * 10.0;
        Run {
            mbps: total as f64 / wall / 1e6,
            cpu_ms_per_gib: cpu_ms / (total as f64 / f64::from(1u32 << 30)),
        }
    }
    fn best(a: Option<Run>, b: Run) -> Option<Run> {
        Some(match a {
            None => b,
            Some(a) => Run {
                mbps: a.mbps.max(b.mbps),
                cpu_ms_per_gib: a.cpu_ms_per_gib.min(b.cpu_ms_per_gib),
            },
        })
    }
}

/// utime + stime of this process in clock ticks (100 per second on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields after the command: state is index 0, utime is field 14 overall (index 11 here).
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

async fn handshake(
    ca: &rustls::pki_types::CertificateDer<'static>,
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
