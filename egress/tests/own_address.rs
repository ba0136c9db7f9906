//! A listed name that resolves to one of the proxy host's own public addresses must not reach the
//! host's services. Proving that needs such an address on an interface, so the test runs in a
//! network namespace of its own: a dedicated thread unshares one (root only), puts public-class
//! addresses on its loopback device, and runs the proxy and a "host service" bound to the
//! wildcard address there. No packet can leave that namespace, so whose addresses these are
//! elsewhere does not matter. Skips with a printed reason without root or `ip`, unless
//! `MCPSUM_REQUIRE_SANDBOX=1`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{
    FakeResolver, client_config, connect_request, connect_via, memory_audit, pki, read_rest,
    server_name, wait_records,
};
use mcpsum_egress::{
    AddressClass, Allowlist, Decision, Dropped, EgressConfig, Reason, classify, serve,
};
use nix::sched::{CloneFlags, unshare};
use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Public-class addresses given to the namespace's loopback device, and a range routed to it.
const OWN_V4: &str = "198.20.0.1";
const LISTED_V4: &str = "198.20.0.2";
const OWN_V6: &str = "2a00::1";
const ROUTED_V4: &str = "198.20.1.0/24";
const IN_ROUTED_V4: &str = "198.20.1.5";
/// Public-class, but no route to it: connecting fails at once, and nothing leaves.
const UNREACHABLE_V4: &str = "198.20.2.1";

#[test]
fn names_resolving_to_this_hosts_own_addresses_are_refused() {
    let thread = std::thread::spawn(|| {
        // Only this thread (and the `ip` it runs) moves to the new namespace; the test process
        // and its other threads stay where they are.
        if let Err(e) = unshare(CloneFlags::CLONE_NEWNET) {
            return Some(format!(
                "cannot create a network namespace ({e}); needs root"
            ));
        }
        let setup = [
            "link set lo up".to_owned(),
            format!("addr add {OWN_V4}/32 dev lo"),
            format!("addr add {LISTED_V4}/32 dev lo"),
            format!("addr add {OWN_V6}/128 dev lo nodad"),
            format!("route add local {ROUTED_V4} dev lo"),
        ];
        for args in setup {
            match Command::new("ip")
                .args(args.split(' '))
                .stdin(Stdio::null())
                .output()
            {
                Err(e) => return Some(format!("cannot run `ip` ({e})")),
                Ok(out) => assert!(
                    out.status.success(),
                    "ip {args}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
            }
        }
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(in_namespace());
        None
    });
    match thread.join() {
        Ok(None) => {}
        Ok(Some(why)) if std::env::var_os("MCPSUM_REQUIRE_SANDBOX").is_some_and(|v| v == "1") => {
            panic!("MCPSUM_REQUIRE_SANDBOX=1 but {why}")
        }
        Ok(Some(why)) => eprintln!("skipped: {why}"),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

async fn in_namespace() {
    for ip in [OWN_V4, LISTED_V4, OWN_V6, IN_ROUTED_V4, UNREACHABLE_V4] {
        assert_eq!(classify(ip.parse().unwrap()), AddressClass::Public, "{ip}");
    }
    // The host service, on every address of the namespace, as a service bound to `::` is on a
    // real host. It reports the address each connection came in on and the bytes it got.
    let service = TcpListener::bind("[::]:0").await.unwrap();
    let port = service.local_addr().unwrap().port();
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<(IpAddr, usize)>();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = service.accept().await.unwrap();
            let at = s.local_addr().unwrap().ip().to_canonical();
            let tx = seen_tx.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let _ = s.read_to_end(&mut got).await;
                let _ = tx.send((at, got.len()));
            });
        }
    });

    let resolver = FakeResolver::with(&[
        ("own4.test", &[OWN_V4]),
        ("own6.test", &[OWN_V6]),
        ("routed4.test", &[IN_ROUTED_V4]),
        ("fallback.test", &[OWN_V4, "127.0.0.1"]),
        ("mixed.test", &[OWN_V4, UNREACHABLE_V4]),
    ]);
    let allow: Vec<String> = [
        "own4.test",
        "own6.test",
        "routed4.test",
        "fallback.test",
        "mixed.test",
        "127.0.0.1",
        LISTED_V4,
    ]
    .iter()
    .map(|h| format!("{h}:{port}"))
    .collect();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let proxy = listener.local_addr().unwrap();
    let (audit, records) = memory_audit();
    let config = EgressConfig::new("gh", "sess-1", Allowlist::parse(&allow).unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(serve(
        TcpListener::from_std(listener).unwrap(),
        Arc::new(config),
        resolver,
        audit,
        async {
            let _ = stopped.await;
        },
    ));

    // A name on one of the host's addresses, or in a range routed to the host: 403, and the
    // service saw a connection closed before any byte.
    for (host, ip) in [
        ("own4.test", OWN_V4),
        ("own6.test", OWN_V6),
        ("routed4.test", IN_ROUTED_V4),
    ] {
        let (mut s, status, _) =
            connect_via(proxy, &connect_request(&format!("{host}:{port}"))).await;
        assert_eq!(status, 403, "{host}");
        let body = read_rest(&mut s).await;
        assert!(
            body.contains(&format!(
                "`{host}` resolves only to non-public addresses ({ip} host_local)"
            )),
            "{host}: {body}"
        );
        assert_eq!(next(&mut seen).await, (ip.parse().unwrap(), 0), "{host}");
    }
    // The host's own address and one that cannot be reached: 502, naming both.
    let (mut s, status, _) =
        connect_via(proxy, &connect_request(&format!("mixed.test:{port}"))).await;
    assert_eq!(status, 502);
    let body = read_rest(&mut s).await;
    assert!(
        body.contains(&format!("{UNREACHABLE_V4}:{port}: "))
            && body.contains(&format!("(skipped as this host's own: {OWN_V4})")),
        "{body}"
    );
    assert_eq!(next(&mut seen).await, (OWN_V4.parse().unwrap(), 0));
    // One of several addresses is the host's own: skipped, the next one (listed) is used.
    let target = format!("fallback.test:{port}");
    let (s, status, _) = connect_via(proxy, &connect_request(&target)).await;
    assert_eq!(status, 200);
    let hello = tunnel_hello(s, "fallback.test").await;
    assert_eq!(next(&mut seen).await, (OWN_V4.parse().unwrap(), 0));
    assert_eq!(next(&mut seen).await, ("127.0.0.1".parse().unwrap(), hello));
    // A listed IP target reaches whatever it is, the host included.
    let (s, status, _) = connect_via(proxy, &connect_request(&format!("{LISTED_V4}:{port}"))).await;
    assert_eq!(status, 200);
    let hello = tunnel_hello(s, LISTED_V4).await;
    assert_eq!(next(&mut seen).await, (LISTED_V4.parse().unwrap(), hello));

    let mut records = wait_records(&records, 6).await;
    // In the order the connections were made, not the order they closed in.
    records.sort_by_key(|r| r.conn);
    let got: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.host.clone().unwrap(),
                r.decision,
                r.reason,
                r.status,
                r.dropped.clone(),
                r.connected.clone(),
                r.bytes_up,
            )
        })
        .collect();
    let local = |ip: &str| {
        vec![Dropped {
            address: ip.into(),
            class: AddressClass::HostLocal,
        }]
    };
    let refused = |host: &str, ip: &str| {
        let d = local(ip);
        (
            host.to_owned(),
            Decision::Deny,
            Reason::NonPublic,
            Some(403),
            d,
            None,
            0,
        )
    };
    assert_eq!(
        got,
        vec![
            refused("own4.test", OWN_V4),
            refused("own6.test", OWN_V6),
            refused("routed4.test", IN_ROUTED_V4),
            (
                "mixed.test".to_owned(),
                Decision::Deny,
                Reason::ConnectError,
                Some(502),
                local(OWN_V4),
                None,
                0,
            ),
            (
                "fallback.test".to_owned(),
                Decision::Allow,
                Reason::Ok,
                Some(200),
                local(OWN_V4),
                Some(format!("127.0.0.1:{port}")),
                records[4].bytes_up,
            ),
            (
                LISTED_V4.to_owned(),
                Decision::Allow,
                Reason::Ok,
                Some(200),
                vec![],
                Some(format!("{LISTED_V4}:{port}")),
                records[5].bytes_up,
            ),
        ]
    );
    assert!(records[4].bytes_up > 0 && records[5].bytes_up > 0);
    let _ = stop.send(());
    done.await.unwrap().unwrap();
}

/// Send a ClientHello for `name` through an open tunnel, then close it; the hello's length.
async fn tunnel_hello(mut tcp: tokio::net::TcpStream, name: &str) -> usize {
    let pki = pki(&[name]);
    let mut conn =
        rustls::ClientConnection::new(client_config(&pki.ca, &[]), server_name(name)).unwrap();
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).unwrap();
    }
    tcp.write_all(&hello).await.unwrap();
    tcp.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut rest)).await;
    hello.len()
}

/// The next connection the host service saw: the address it came in on and its bytes.
async fn next(seen: &mut mpsc::UnboundedReceiver<(IpAddr, usize)>) -> (IpAddr, usize) {
    tokio::time::timeout(Duration::from_secs(5), seen.recv())
        .await
        .expect("the host service saw a connection")
        .unwrap()
}
