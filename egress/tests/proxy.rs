//! The proxy end to end on loopback: a fake resolver, a TLS server with a CA made at test time,
//! real rustls clients through `CONNECT`, and the audit records of every case.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    Counting, FakeResolver, Mode, client_config, connect_request, connect_via, ech_outer_body,
    memory_audit, pki, read_rest, server_name, tls_server, wait_records, with_extension,
};
use mcpsum_egress::{
    AddressClass, Allowlist, AuditSink, Decision, Dropped, EgressConfig, EgressRecord, Reason,
    Resolver, serve,
};
use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

struct Proxy {
    addr: SocketAddr,
    records: Arc<Mutex<Vec<EgressRecord>>>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<io::Result<()>>,
}

impl Proxy {
    async fn start(allow: &[String], resolver: Arc<dyn Resolver>) -> Proxy {
        let (audit, records) = memory_audit();
        Self::start_with(allow, resolver, audit, records, |_| {}).await
    }

    async fn start_with(
        allow: &[String],
        resolver: Arc<dyn Resolver>,
        audit: AuditSink,
        records: Arc<Mutex<Vec<EgressRecord>>>,
        tweak: impl FnOnce(&mut EgressConfig),
    ) -> Proxy {
        // As in production: a std listener made non-blocking, then handed to tokio.
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let listener = TcpListener::from_std(std_listener).unwrap();
        let mut config = EgressConfig::new("gh", "sess-1", Allowlist::parse(allow).unwrap());
        config.timeouts.hello = Duration::from_secs(2);
        tweak(&mut config);
        let (tx, rx) = oneshot::channel::<()>();
        let done = tokio::spawn(serve(listener, Arc::new(config), resolver, audit, async {
            let _ = rx.await;
        }));
        Proxy {
            addr,
            records,
            stop: Some(tx),
            done,
        }
    }

    async fn stop(mut self) -> io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(Duration::from_secs(5), self.done)
            .await
            .expect("serve returns after shutdown")
            .unwrap()
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The fields a test pins down; timestamps, peer ports and durations vary.
#[derive(Debug, PartialEq)]
struct Seen {
    target: Option<String>,
    host: Option<String>,
    rule: Option<String>,
    resolved: Vec<String>,
    dropped: Vec<Dropped>,
    connected: Option<String>,
    sni: Option<String>,
    decision: Decision,
    reason: Reason,
    status: Option<u16>,
}

fn seen(r: &EgressRecord) -> Seen {
    assert_eq!(r.event, "egress");
    assert_eq!(r.server, "gh");
    assert_eq!(r.session, "sess-1");
    Seen {
        target: r.target.clone(),
        host: r.host.clone(),
        rule: r.rule.clone(),
        resolved: r.resolved.clone(),
        dropped: r.dropped.clone(),
        connected: r.connected.clone(),
        sni: r.sni.clone(),
        decision: r.decision,
        reason: r.reason,
        status: r.status,
    }
}

#[tokio::test]
async fn allowed_name_tunnels_end_to_end() {
    let pki = pki(&["test.example"]);
    let upstream = tls_server(pki.server.clone(), Mode::Echo).await;
    let port = upstream.port();
    let resolver = FakeResolver::with(&[("test.example", &["::1", "127.0.0.1"])]);
    let (audit, records) = memory_audit();
    let proxy = Proxy::start_with(
        &strings(&[
            &format!("test.example:{port}"),
            &format!("127.0.0.1:{port}"),
        ]),
        resolver.clone(),
        audit,
        records,
        |_| {},
    )
    .await;

    let target = format!("Test.Example:{port}");
    let (tcp, status, _) = connect_via(proxy.addr, &connect_request(&target)).await;
    assert_eq!(status, 200);
    let counted = Counting::new(tcp);
    let (read, written) = (counted.read.clone(), counted.written.clone());
    let connector = tokio_rustls::TlsConnector::from(client_config(&pki.ca, &["http/1.1"]));
    let mut tls = connector
        .connect(server_name("test.example"), counted)
        .await
        .expect("TLS handshake through the tunnel");
    let payload = vec![7u8; 100_000];
    tls.write_all(&payload).await.unwrap();
    let mut back = vec![0u8; payload.len()];
    tls.read_exact(&mut back).await.unwrap();
    assert_eq!(back, payload);
    tls.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let _ = tls.read_to_end(&mut rest).await;
    drop(tls);

    let records = wait_records(&proxy.records, 1).await;
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(
        seen(r),
        Seen {
            target: Some(target),
            host: Some("test.example".into()),
            rule: Some(format!("test.example:{port}")),
            resolved: strings(&["::1", "127.0.0.1"]),
            dropped: vec![Dropped {
                address: "::1".into(),
                class: AddressClass::Loopback
            }],
            connected: Some(format!("127.0.0.1:{port}")),
            sni: Some("test.example".into()),
            decision: Decision::Allow,
            reason: Reason::Ok,
            status: Some(200),
        }
    );
    assert_eq!(r.alpn, strings(&["http/1.1"]));
    assert_eq!(r.port, Some(port));
    assert_eq!(
        r.bytes_up,
        written.load(Ordering::SeqCst),
        "every byte the client sent"
    );
    assert_eq!(
        r.bytes_down,
        read.load(Ordering::SeqCst),
        "every byte the client got"
    );
    assert!(r.bytes_up > 100_000 && r.bytes_down > 100_000);
    assert_eq!(resolver.calls.load(Ordering::SeqCst), 1);
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn unlisted_target_is_403_without_lookup() {
    let resolver = FakeResolver::with(&[("evil.example", &["127.0.0.1"])]);
    let proxy = Proxy::start(&strings(&["test.example:443"]), resolver.clone()).await;
    for target in [
        "evil.example:443",
        "test.example:444",
        "sub.test.example:443",
        "127.0.0.1:443",
    ] {
        let (mut s, status, _) = connect_via(proxy.addr, &connect_request(target)).await;
        assert_eq!(status, 403, "{target}");
        assert!(read_rest(&mut s).await.contains("is not in network.allow"));
    }
    let records = wait_records(&proxy.records, 4).await;
    for r in &records {
        assert_eq!(
            (r.decision, r.reason, r.status),
            (Decision::Deny, Reason::NotListed, Some(403))
        );
        assert_eq!(r.rule, None);
        assert_eq!(r.connected, None);
    }
    assert_eq!(
        resolver.calls.load(Ordering::SeqCst),
        0,
        "no lookup for unlisted targets"
    );
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn name_resolving_to_loopback_needs_the_ip_listed() {
    let pki = pki(&["test.example"]);
    let upstream = tls_server(pki.server.clone(), Mode::Echo).await;
    let port = upstream.port();
    let resolver = FakeResolver::with(&[
        ("test.example", &["127.0.0.1"]),
        ("doc.example", &["192.0.2.10", "10.1.2.3"]),
    ]);
    let proxy = Proxy::start(
        &strings(&[
            &format!("test.example:{port}"),
            &format!("doc.example:{port}"),
        ]),
        resolver.clone(),
    )
    .await;
    let (mut s, status, _) = connect_via(
        proxy.addr,
        &connect_request(&format!("test.example:{port}")),
    )
    .await;
    assert_eq!(status, 403);
    assert!(
        read_rest(&mut s)
            .await
            .contains("resolves only to non-public addresses")
    );
    let (_s, status, _) =
        connect_via(proxy.addr, &connect_request(&format!("doc.example:{port}"))).await;
    assert_eq!(status, 403);
    let records = wait_records(&proxy.records, 2).await;
    let by_host = |h: &str| {
        records
            .iter()
            .find(|r| r.host.as_deref() == Some(h))
            .unwrap()
    };
    assert_eq!(
        seen(by_host("test.example")),
        Seen {
            target: Some(format!("test.example:{port}")),
            host: Some("test.example".into()),
            rule: Some(format!("test.example:{port}")),
            resolved: strings(&["127.0.0.1"]),
            dropped: vec![Dropped {
                address: "127.0.0.1".into(),
                class: AddressClass::Loopback
            }],
            connected: None,
            sni: None,
            decision: Decision::Deny,
            reason: Reason::NonPublic,
            status: Some(403),
        }
    );
    let doc = by_host("doc.example");
    assert_eq!(doc.reason, Reason::NonPublic);
    assert_eq!(
        doc.dropped.iter().map(|d| d.class).collect::<Vec<_>>(),
        vec![AddressClass::Documentation, AddressClass::Private]
    );
    proxy.stop().await.unwrap();

    // The same name with `127.0.0.1:port` listed too: allowed.
    let proxy = Proxy::start(
        &strings(&[
            &format!("test.example:{port}"),
            &format!("127.0.0.1:{port}"),
        ]),
        resolver,
    )
    .await;
    let (tcp, status, _) = connect_via(
        proxy.addr,
        &connect_request(&format!("test.example:{port}")),
    )
    .await;
    assert_eq!(status, 200);
    let connector = tokio_rustls::TlsConnector::from(client_config(&pki.ca, &[]));
    let mut tls = connector
        .connect(server_name("test.example"), tcp)
        .await
        .unwrap();
    tls.write_all(b"ping").await.unwrap();
    let mut pong = [0u8; 4];
    tls.read_exact(&mut pong).await.unwrap();
    assert_eq!(&pong, b"ping");
    drop(tls);
    let r = &wait_records(&proxy.records, 1).await[0];
    assert_eq!((r.decision, r.reason), (Decision::Allow, Reason::Ok));
    assert!(r.dropped.is_empty());
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn plain_get_is_405() {
    let resolver = FakeResolver::with(&[]);
    let proxy = Proxy::start(&strings(&["test.example:80"]), resolver.clone()).await;
    let (mut s, status, head) = connect_via(
        proxy.addr,
        "GET http://test.example/ HTTP/1.1\r\nHost: test.example\r\n\r\n",
    )
    .await;
    assert_eq!(status, 405);
    assert!(head.contains("Allow: CONNECT"));
    assert!(read_rest(&mut s).await.contains("only HTTPS via CONNECT"));
    let r = &wait_records(&proxy.records, 1).await[0];
    assert_eq!(
        (r.decision, r.reason, r.status),
        (Decision::Deny, Reason::Method, Some(405))
    );
    assert_eq!(r.target.as_deref(), Some("http://test.example/"));
    assert_eq!(resolver.calls.load(Ordering::SeqCst), 0);
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn malformed_and_pipelined_requests_are_400() {
    let proxy = Proxy::start(&strings(&["test.example:443"]), FakeResolver::with(&[])).await;
    for request in [
        "CONNECT test.example HTTP/1.1\r\n\r\n".to_string(),
        "CONNECT 2130706433:443 HTTP/1.1\r\n\r\n".to_string(),
        "CONNECT test.example:443 HTTP/2\r\n\r\n".to_string(),
        "CONNECT test.example:443 HTTP/1.1\r\n\r\n\x16\x03\x01".to_string(),
        format!(
            "CONNECT test.example:443 HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(9000)
        ),
    ] {
        let (_s, status, _) = connect_via(proxy.addr, &request).await;
        assert_eq!(status, 400, "{}", &request[..40.min(request.len())]);
    }
    let records = wait_records(&proxy.records, 5).await;
    assert!(
        records
            .iter()
            .all(|r| r.reason == Reason::Malformed && r.status == Some(400))
    );
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn a_head_with_bare_lf_line_ends_is_answered_at_once() {
    // Each line may end in LF or CRLF, the empty line included: every mix ends the head, so the
    // client gets its answer instead of a 408 once the head timeout has run out.
    let (audit, records) = memory_audit();
    let proxy = Proxy::start_with(
        &strings(&["test.example:443"]),
        FakeResolver::with(&[]),
        audit,
        records,
        |c| c.timeouts.head = Duration::from_secs(2),
    )
    .await;
    let requests = [
        "CONNECT evil.example:443 HTTP/1.1\nHost: evil.example:443\n\r\n",
        "CONNECT evil.example:443 HTTP/1.1\nHost: evil.example:443\n\n",
        "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\n",
        "CONNECT evil.example:443 HTTP/1.1\n\r\n",
    ];
    for request in requests {
        let (_s, status, _) = connect_via(proxy.addr, request).await;
        assert_eq!(status, 403, "{request:?}");
    }
    let records = wait_records(&proxy.records, requests.len()).await;
    assert!(
        records.iter().all(|r| r.reason == Reason::NotListed),
        "{records:#?}"
    );
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn mismatched_or_missing_sni_is_closed() {
    let pki = pki(&["test.example", "other.example"]);
    let upstream = tls_server(pki.server.clone(), Mode::Echo).await;
    let port = upstream.port();
    let resolver = FakeResolver::with(&[("test.example", &["127.0.0.1"])]);
    let proxy = Proxy::start(
        &strings(&[
            &format!("test.example:{port}"),
            &format!("127.0.0.1:{port}"),
        ]),
        resolver,
    )
    .await;
    // SNI names another host the upstream would happily serve.
    let (tcp, status, _) = connect_via(
        proxy.addr,
        &connect_request(&format!("test.example:{port}")),
    )
    .await;
    assert_eq!(status, 200);
    let connector = tokio_rustls::TlsConnector::from(client_config(&pki.ca, &[]));
    assert!(
        connector
            .connect(server_name("other.example"), tcp)
            .await
            .is_err()
    );
    // No SNI at all.
    let (tcp, status, _) = connect_via(
        proxy.addr,
        &connect_request(&format!("test.example:{port}")),
    )
    .await;
    assert_eq!(status, 200);
    let mut no_sni = (*client_config(&pki.ca, &[])).clone();
    no_sni.enable_sni = false;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(no_sni));
    assert!(
        connector
            .connect(server_name("test.example"), tcp)
            .await
            .is_err()
    );

    let records = wait_records(&proxy.records, 2).await;
    let mut got: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.decision,
                r.reason,
                r.sni.clone(),
                r.bytes_up,
                r.bytes_down,
            )
        })
        .collect();
    got.sort_by(|a, b| a.2.cmp(&b.2));
    assert_eq!(
        got,
        vec![
            (Decision::Deny, Reason::SniMismatch, None, 0, 0),
            (
                Decision::Deny,
                Reason::SniMismatch,
                Some("other.example".into()),
                0,
                0
            ),
        ]
    );
    assert!(
        records
            .iter()
            .all(|r| r.connected == Some(format!("127.0.0.1:{port}")))
    );
    proxy.stop().await.unwrap();
}

/// Encrypted Client Hello: the outer SNI names the allowed host, the encrypted inner hello may
/// name any other behind the same front. The tunnel is closed before a byte goes upstream, and
/// the record says why.
#[tokio::test]
async fn a_hello_with_encrypted_client_hello_is_closed() {
    let pki = pki(&["test.example"]);
    let upstream = tls_server(pki.server.clone(), Mode::Echo).await;
    let port = upstream.port();
    let resolver = FakeResolver::with(&[("test.example", &["127.0.0.1"])]);
    let proxy = Proxy::start(
        &strings(&[
            &format!("test.example:{port}"),
            &format!("127.0.0.1:{port}"),
        ]),
        resolver,
    )
    .await;
    let (mut tcp, status, _) = connect_via(
        proxy.addr,
        &connect_request(&format!("test.example:{port}")),
    )
    .await;
    assert_eq!(status, 200);
    let mut conn =
        rustls::ClientConnection::new(client_config(&pki.ca, &[]), server_name("test.example"))
            .unwrap();
    let mut plain = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut plain).unwrap();
    }
    let hello = with_extension(&plain, mcpsum_egress::ECH_EXTENSION, &ech_outer_body());
    tcp.write_all(&hello).await.unwrap();
    let mut buf = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "closed without a byte from upstream");
    let r = &wait_records(&proxy.records, 1).await[0];
    assert_eq!(
        (r.decision, r.reason, r.bytes_up, r.bytes_down),
        (Decision::Deny, Reason::Ech, 0, 0)
    );
    assert!(
        r.detail
            .contains("Encrypted Client Hello (extension 0xfe0d)"),
        "{}",
        r.detail
    );
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn non_tls_tunnel_is_closed() {
    let pki = pki(&["test.example"]);
    let upstream = tls_server(pki.server.clone(), Mode::Echo).await;
    let port = upstream.port();
    let proxy = Proxy::start(
        &strings(&[&format!("127.0.0.1:{port}")]),
        FakeResolver::with(&[]),
    )
    .await;
    let (mut tcp, status, _) =
        connect_via(proxy.addr, &connect_request(&format!("127.0.0.1:{port}"))).await;
    assert_eq!(status, 200);
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "closed without a byte from upstream");
    let r = &wait_records(&proxy.records, 1).await[0];
    assert_eq!(
        (r.decision, r.reason, r.bytes_up, r.bytes_down),
        (Decision::Deny, Reason::NotTls, 0, 0)
    );
    assert!(r.detail.contains("plain HTTP is refused"), "{}", r.detail);
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn listed_ip_target_works_without_sni_or_lookup() {
    let pki = pki(&["127.0.0.1"]);
    let upstream = tls_server(pki.server.clone(), Mode::Echo).await;
    let port = upstream.port();
    let resolver = FakeResolver::with(&[]);
    let proxy = Proxy::start(&strings(&[&format!("127.0.0.1:{port}")]), resolver.clone()).await;
    let (tcp, status, _) =
        connect_via(proxy.addr, &connect_request(&format!("127.0.0.1:{port}"))).await;
    assert_eq!(status, 200);
    let connector = tokio_rustls::TlsConnector::from(client_config(&pki.ca, &[]));
    let mut tls = connector
        .connect(server_name("127.0.0.1"), tcp)
        .await
        .unwrap();
    tls.write_all(b"hello").await.unwrap();
    let mut back = [0u8; 5];
    tls.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"hello");
    tls.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let _ = tls.read_to_end(&mut rest).await;
    drop(tls);
    let r = &wait_records(&proxy.records, 1).await[0];
    assert_eq!(
        seen(r),
        Seen {
            target: Some(format!("127.0.0.1:{port}")),
            host: Some("127.0.0.1".into()),
            rule: Some(format!("127.0.0.1:{port}")),
            resolved: vec![],
            dropped: vec![],
            connected: Some(format!("127.0.0.1:{port}")),
            sni: None,
            decision: Decision::Allow,
            reason: Reason::Ok,
            status: Some(200),
        }
    );
    assert!(r.bytes_up > 0 && r.bytes_down > 0);
    assert_eq!(resolver.calls.load(Ordering::SeqCst), 0);
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn connect_failure_is_502() {
    // A port nothing listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let proxy = Proxy::start(
        &strings(&[&format!("127.0.0.1:{port}")]),
        FakeResolver::with(&[]),
    )
    .await;
    let (_s, status, _) =
        connect_via(proxy.addr, &connect_request(&format!("127.0.0.1:{port}"))).await;
    assert_eq!(status, 502);
    let r = &wait_records(&proxy.records, 1).await[0];
    assert_eq!(
        (r.reason, r.connected.clone()),
        (Reason::ConnectError, None)
    );
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn shutdown_closes_open_tunnels_with_a_record() {
    let pki = pki(&["127.0.0.1"]);
    let upstream = tls_server(pki.server.clone(), Mode::Echo).await;
    let port = upstream.port();
    let proxy = Proxy::start(
        &strings(&[&format!("127.0.0.1:{port}")]),
        FakeResolver::with(&[]),
    )
    .await;
    let (tcp, _, _) = connect_via(proxy.addr, &connect_request(&format!("127.0.0.1:{port}"))).await;
    let connector = tokio_rustls::TlsConnector::from(client_config(&pki.ca, &[]));
    let mut tls = connector
        .connect(server_name("127.0.0.1"), tcp)
        .await
        .unwrap();
    tls.write_all(b"x").await.unwrap();
    let mut one = [0u8; 1];
    tls.read_exact(&mut one).await.unwrap();
    let records = proxy.records.clone();
    proxy.stop().await.unwrap();
    let r = &wait_records(&records, 1).await[0];
    assert_eq!((r.decision, r.reason), (Decision::Allow, Reason::Shutdown));
    assert!(r.bytes_up > 0 && r.bytes_down > 0);
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut rest))
        .await
        .unwrap();
    assert!(n.is_err() || rest.is_empty(), "tunnel closed");
}

#[tokio::test]
async fn audit_failure_fails_closed() {
    let records = Arc::new(Mutex::new(Vec::new()));
    let audit: AuditSink = Arc::new(|_rec: &EgressRecord| Err(io::Error::other("disk full")));
    let proxy = Proxy::start_with(
        &strings(&["test.example:443"]),
        FakeResolver::with(&[]),
        audit,
        records,
        |_| {},
    )
    .await;
    let addr = proxy.addr;
    let (_s, status, _) = connect_via(addr, "GET / HTTP/1.1\r\n\r\n").await;
    assert_eq!(status, 405);
    let err = tokio::time::timeout(Duration::from_secs(5), proxy.done)
        .await
        .expect("serve stops by itself")
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("disk full"), "{err}");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "listener closed"
    );
}

#[tokio::test]
async fn unresolvable_name_is_502() {
    let resolver = FakeResolver::with(&[]);
    let proxy = Proxy::start(&strings(&["gone.example:443"]), resolver.clone()).await;
    let (mut s, status, _) = connect_via(proxy.addr, &connect_request("gone.example:443")).await;
    assert_eq!(status, 502);
    assert!(
        read_rest(&mut s)
            .await
            .contains("resolving `gone.example` failed")
    );
    let r = &wait_records(&proxy.records, 1).await[0];
    assert_eq!((r.decision, r.reason), (Decision::Deny, Reason::DnsError));
    assert_eq!(resolver.calls.load(Ordering::SeqCst), 1);
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn connection_cap_queues_further_clients() {
    let (audit, records) = memory_audit();
    let proxy = Proxy::start_with(
        &strings(&["test.example:443"]),
        FakeResolver::with(&[]),
        audit,
        records,
        |c| {
            c.limits.max_connections = 1;
            c.timeouts.head = Duration::from_millis(300);
        },
    )
    .await;
    // The first client says nothing and holds the only slot until its head times out.
    let mut idle = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    let (_s, status, _) = connect_via(proxy.addr, "GET / HTTP/1.1\r\n\r\n").await;
    assert_eq!(status, 405);
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "served only after the slot freed"
    );
    let mut head = String::new();
    let _ = idle.read_to_string(&mut head).await;
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    let records = wait_records(&proxy.records, 2).await;
    assert_eq!(
        records.iter().map(|r| r.reason).collect::<Vec<_>>(),
        vec![Reason::Timeout, Reason::Method]
    );
    proxy.stop().await.unwrap();
}

#[tokio::test]
async fn byte_counts_survive_an_upstream_reset() {
    // A plain TCP upstream (the proxy never looks past the hello): reads the hello, sends 1000
    // bytes, waits until the client has them, then resets the connection.
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = upstream.local_addr().unwrap().port();
    let (got_tx, got_rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut s, _) = upstream.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).await.unwrap();
        s.write_all(&[9u8; 1000]).await.unwrap();
        let _ = got_rx.await;
        s.set_zero_linger().unwrap();
        drop(s);
    });
    let proxy = Proxy::start(
        &strings(&[&format!("127.0.0.1:{port}")]),
        FakeResolver::with(&[]),
    )
    .await;
    let (mut tcp, status, _) =
        connect_via(proxy.addr, &connect_request(&format!("127.0.0.1:{port}"))).await;
    assert_eq!(status, 200);
    let hello = {
        let pki = pki(&["127.0.0.1"]);
        let mut conn =
            rustls::ClientConnection::new(client_config(&pki.ca, &[]), server_name("127.0.0.1"))
                .unwrap();
        let mut out = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut out).unwrap();
        }
        out
    };
    tcp.write_all(&hello).await.unwrap();
    let mut data = [0u8; 1000];
    tcp.read_exact(&mut data).await.unwrap();
    got_tx.send(()).unwrap();
    let r = &wait_records(&proxy.records, 1).await[0];
    assert_eq!((r.decision, r.reason), (Decision::Allow, Reason::Ok));
    assert_eq!((r.bytes_up, r.bytes_down), (hello.len() as u64, 1000));
    assert!(r.detail.starts_with("tunnel ended: "), "{}", r.detail);
    proxy.stop().await.unwrap();
}
