//! Test helpers: a CA and certificates made at test time, a TLS echo/sink server on loopback, a
//! client that speaks CONNECT, a fake resolver, and an in-memory audit sink.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use mcpsum_egress::{AuditSink, BoxFuture, EgressRecord, Resolver};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A fresh CA and a server certificate for `names` (DNS names or IP literals).
pub struct Pki {
    pub ca: CertificateDer<'static>,
    pub server: Arc<ServerConfig>,
}

pub fn pki(names: &[&str]) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_params =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let server = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca_cert.der().clone()], key)
        .unwrap();
    Pki {
        ca: ca_cert.der().clone(),
        server: Arc::new(server),
    }
}

pub fn client_config(ca: &CertificateDer<'static>, alpn: &[&str]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let mut c = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    Arc::new(c)
}

/// What the TLS server does with each connection.
#[derive(Clone, Copy)]
pub enum Mode {
    /// Echo everything back until EOF.
    Echo,
    /// Read and discard until EOF, then reply with the 8-byte count.
    Sink,
    /// Read an 8-byte length, then discard that many bytes, then reply with the 8-byte count
    /// (the bench: relays such as squid and tinyproxy close the whole tunnel at the client's
    /// half-close, so the end of a transfer cannot be an EOF).
    SinkSized,
}

/// A TLS server on 127.0.0.1:0.
pub async fn tls_server(config: Arc<ServerConfig>, mode: Mode) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 64 * 1024];
                let mut total: u64 = 0;
                if let Mode::SinkSized = mode {
                    let mut len = [0u8; 8];
                    if tls.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let want = u64::from_be_bytes(len);
                    while total < want {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => total += n as u64,
                        }
                    }
                    let _ = tls.write_all(&total.to_be_bytes()).await;
                    let _ = tls.flush().await;
                    // Wait for the client to close (the count must not race our close).
                    let _ = tls.read(&mut buf).await;
                    return;
                }
                loop {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            total += n as u64;
                            if let Mode::Echo = mode
                                && tls.write_all(&buf[..n]).await.is_err()
                            {
                                return;
                            }
                        }
                    }
                }
                if let Mode::Sink = mode {
                    let _ = tls.write_all(&total.to_be_bytes()).await;
                }
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}

/// Send `CONNECT target` (plus `extra` in the same write) and read the response head byte by byte,
/// so no tunnel byte is consumed. Returns the stream, the status and the whole response head.
pub async fn connect_via(proxy: SocketAddr, request: &str) -> (TcpStream, u16, String) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (s, status, text)
}

pub fn connect_request(target: &str) -> String {
    format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")
}

/// Read the rest of a plain response body (after the head) until EOF.
pub async fn read_rest(s: &mut TcpStream) -> String {
    let mut v = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut v)).await;
    String::from_utf8_lossy(&v).into_owned()
}

/// A resolver with a fixed table that counts its calls.
#[derive(Default)]
pub struct FakeResolver {
    pub table: HashMap<String, Vec<IpAddr>>,
    pub calls: AtomicUsize,
}

impl FakeResolver {
    pub fn with(entries: &[(&str, &[&str])]) -> Arc<FakeResolver> {
        Arc::new(FakeResolver {
            table: entries
                .iter()
                .map(|(h, ips)| {
                    (
                        h.to_string(),
                        ips.iter().map(|i| i.parse().unwrap()).collect(),
                    )
                })
                .collect(),
            calls: AtomicUsize::new(0),
        })
    }
}

impl Resolver for FakeResolver {
    fn resolve<'a>(&'a self, host: &'a str, _port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let answer = self
            .table
            .get(host)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such host"));
        Box::pin(async move { answer })
    }
}

/// An audit sink collecting records in memory.
pub fn memory_audit() -> (AuditSink, Arc<Mutex<Vec<EgressRecord>>>) {
    let records = Arc::new(Mutex::new(Vec::new()));
    let r2 = records.clone();
    let sink: AuditSink = Arc::new(move |rec: &EgressRecord| {
        r2.lock().unwrap().push(rec.clone());
        Ok(())
    });
    (sink, records)
}

/// Wait until `n` records exist (the record of a connection is written when it closes).
pub async fn wait_records(records: &Arc<Mutex<Vec<EgressRecord>>>, n: usize) -> Vec<EgressRecord> {
    for _ in 0..500 {
        {
            let v = records.lock().unwrap();
            if v.len() >= n {
                return v.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "expected {n} audit records, got {:?}",
        records.lock().unwrap()
    );
}

/// A stream wrapper counting the bytes that really cross the socket.
pub struct Counting<S> {
    pub inner: S,
    pub read: Arc<AtomicU64>,
    pub written: Arc<AtomicU64>,
}

impl<S> Counting<S> {
    pub fn new(inner: S) -> Self {
        Counting {
            inner,
            read: Arc::default(),
            written: Arc::default(),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counting<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.read.fetch_add(n as u64, Ordering::SeqCst);
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counting<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.written.fetch_add(*n as u64, Ordering::SeqCst);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

pub fn server_name(s: &str) -> ServerName<'static> {
    ServerName::try_from(s.to_string()).unwrap()
}

/// `hello` (one handshake record holding one ClientHello, as a rustls client writes it) with the
/// extension `ty` (body `body`) put first in its extension list, every length fixed up.
pub fn with_extension(hello: &[u8], ty: u16, body: &[u8]) -> Vec<u8> {
    assert_eq!((hello[0], hello[5]), (0x16, 1), "a ClientHello record");
    let mut msg = hello[9..].to_vec();
    let mut pos = 2 + 32;
    pos += 1 + usize::from(msg[pos]);
    pos += 2 + usize::from(u16::from_be_bytes([msg[pos], msg[pos + 1]]));
    pos += 1 + usize::from(msg[pos]);
    let old = u16::from_be_bytes([msg[pos], msg[pos + 1]]);
    let added = u16::try_from(4 + body.len()).unwrap();
    msg[pos..pos + 2].copy_from_slice(&(old + added).to_be_bytes());
    let mut ext = ty.to_be_bytes().to_vec();
    ext.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    ext.extend_from_slice(body);
    msg.splice(pos + 2..pos + 2, ext);
    let mut out = vec![0x16, hello[1], hello[2]];
    out.extend_from_slice(&u16::try_from(4 + msg.len()).unwrap().to_be_bytes());
    out.push(1);
    out.extend_from_slice(&u32::try_from(msg.len()).unwrap().to_be_bytes()[1..]);
    out.extend_from_slice(&msg);
    out
}

/// The body of an outer `encrypted_client_hello` extension (draft-ietf-tls-esni 5): type outer,
/// HKDF-SHA256 / AES-128-GCM, a config id, a 32-byte encapsulated key and an encrypted inner
/// hello (opaque bytes: the proxy never decrypts it).
pub fn ech_outer_body() -> Vec<u8> {
    let mut b = vec![0x00, 0x00, 0x01, 0x00, 0x01, 0x2a];
    b.extend_from_slice(&32u16.to_be_bytes());
    b.extend((0..32u8).map(|i| i.wrapping_mul(7)));
    b.extend_from_slice(&208u16.to_be_bytes());
    b.extend((0..208u8).map(|i| i.wrapping_mul(13) ^ 0x5a));
    b
}
