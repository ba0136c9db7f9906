//! The ClientHello reader against real hellos written by a rustls client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use mcpsum_egress::{ClientHelloInfo, HelloError, HelloReader};
use pretty_assertions::assert_eq;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore};

fn hello_bytes(config: ClientConfig, name: &str) -> Vec<u8> {
    let mut conn = ClientConnection::new(
        Arc::new(config),
        ServerName::try_from(name.to_string()).unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).unwrap();
    }
    out
}

fn config(versions: &[&'static rustls::SupportedProtocolVersion], alpn: &[&str]) -> ClientConfig {
    let mut c = ClientConfig::builder_with_provider(common::provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    c
}

fn read_all(bytes: &[u8]) -> Result<Option<ClientHelloInfo>, HelloError> {
    HelloReader::new(64 * 1024).push(bytes)
}

/// Re-frame a single-record hello as two handshake records split at `at` payload bytes.
fn split_record(bytes: &[u8], at: usize) -> Vec<u8> {
    assert_eq!(bytes[0], 0x16);
    let len = usize::from(u16::from_be_bytes([bytes[3], bytes[4]]));
    assert_eq!(bytes.len(), 5 + len, "one record");
    let payload = &bytes[5..];
    let mut out = Vec::new();
    for part in [&payload[..at], &payload[at..]] {
        out.extend_from_slice(&bytes[..3]);
        out.extend_from_slice(&u16::try_from(part.len()).unwrap().to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

#[test]
fn sni_and_alpn_from_a_tls13_hello() {
    let bytes = hello_bytes(
        config(rustls::ALL_VERSIONS, &["h2", "http/1.1"]),
        "API.GitHub.com",
    );
    let info = read_all(&bytes).unwrap().unwrap();
    assert_eq!(
        info,
        ClientHelloInfo {
            sni: Some("api.github.com".into()),
            alpn: vec!["h2".into(), "http/1.1".into()],
        }
    );
}

#[test]
fn alpn_names_that_are_not_printable_are_escaped() {
    // A client chooses its ALPN bytes; U+009B (CSI) or ESC must not reach a terminal that shows
    // the audit log.
    let mut c = config(rustls::ALL_VERSIONS, &[]);
    c.alpn_protocols = vec![
        b"h2".to_vec(),
        "\u{9b}2J".as_bytes().to_vec(),
        b"\x1b[0m x\\".to_vec(),
    ];
    let info = read_all(&hello_bytes(c, "a.example.com")).unwrap().unwrap();
    assert_eq!(info.alpn, vec!["h2", "\\xc2\\x9b2J", "\\x1b[0m\\x20x\\x5c"]);
}

#[test]
fn hello_without_sni() {
    let mut c = config(rustls::ALL_VERSIONS, &[]);
    c.enable_sni = false;
    let info = read_all(&hello_bytes(c, "api.github.com"))
        .unwrap()
        .unwrap();
    assert_eq!(info.sni, None);
    assert!(info.alpn.is_empty());
}

#[test]
fn ip_literal_is_not_sni() {
    let info = read_all(&hello_bytes(config(rustls::ALL_VERSIONS, &[]), "127.0.0.1"))
        .unwrap()
        .unwrap();
    assert_eq!(info.sni, None);
}

#[test]
fn tls12_only_hello() {
    let bytes = hello_bytes(config(&[&rustls::version::TLS12], &[]), "a.example.com");
    let info = read_all(&bytes).unwrap().unwrap();
    assert_eq!(info.sni.as_deref(), Some("a.example.com"));
}

#[test]
fn hello_split_across_two_records_and_fed_byte_by_byte() {
    let bytes = hello_bytes(config(rustls::ALL_VERSIONS, &[]), "a.example.com");
    let split = split_record(&bytes, 40);
    let info = read_all(&split).unwrap().unwrap();
    assert_eq!(info.sni.as_deref(), Some("a.example.com"));

    let mut r = HelloReader::new(64 * 1024);
    let mut got = None;
    for (i, b) in split.iter().enumerate() {
        if let Some(info) = r.push(std::slice::from_ref(b)).unwrap() {
            assert_eq!(i, split.len() - 1, "complete only at the last byte");
            got = Some(info);
        }
    }
    assert_eq!(got.unwrap().sni.as_deref(), Some("a.example.com"));
    // The bytes are kept verbatim, as split, for forwarding.
    assert_eq!(r.bytes(), &split[..]);
}

#[test]
fn truncated_hello_needs_more() {
    let bytes = hello_bytes(config(rustls::ALL_VERSIONS, &[]), "a.example.com");
    let mut r = HelloReader::new(64 * 1024);
    assert_eq!(r.push(&bytes[..bytes.len() - 1]), Ok(None));
    assert_eq!(
        r.push(&bytes[bytes.len() - 1..])
            .unwrap()
            .unwrap()
            .sni
            .as_deref(),
        Some("a.example.com")
    );
}

#[test]
fn non_tls_bytes_are_refused_at_the_first_byte() {
    assert_eq!(
        read_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
        Err(HelloError::NotTls(b'G'))
    );
    assert_eq!(
        read_all(b"SSH-2.0-OpenSSH_9.2\r\n"),
        Err(HelloError::NotTls(b'S'))
    );
}

#[test]
fn garbage_handshake_record_is_invalid() {
    // A handshake record whose message is not a ClientHello.
    let bogus = [0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00];
    assert!(matches!(read_all(&bogus), Err(HelloError::Invalid(_))));
}

#[test]
fn limit_is_enforced() {
    let bytes = hello_bytes(config(rustls::ALL_VERSIONS, &[]), "a.example.com");
    let mut r = HelloReader::new(100);
    assert_eq!(r.push(&bytes), Err(HelloError::TooLarge(100)));
}

#[tokio::test]
async fn async_reader_returns_hello_and_bytes() {
    let bytes = hello_bytes(config(rustls::ALL_VERSIONS, &[]), "a.example.com");
    let mut with_more = bytes.clone();
    let mut reader: &[u8] = &with_more;
    let (info, got) = mcpsum_egress::read_client_hello(&mut reader, 64 * 1024)
        .await
        .unwrap();
    assert_eq!(info.sni.as_deref(), Some("a.example.com"));
    assert_eq!(got, bytes);
    with_more.truncate(10);
    let mut reader: &[u8] = &with_more;
    assert_eq!(
        mcpsum_egress::read_client_hello(&mut reader, 64 * 1024).await,
        Err(HelloError::Truncated)
    );
}

/// A hello with Encrypted Client Hello: the SNI is the outer, public name (it may be allowed)
/// while the inner hello names any host behind the same front. Refused, however it is framed.
#[test]
fn a_hello_with_encrypted_client_hello_is_refused() {
    let plain = hello_bytes(config(rustls::ALL_VERSIONS, &["h2"]), "public.example");
    let ech = common::with_extension(
        &plain,
        mcpsum_egress::ECH_EXTENSION,
        &common::ech_outer_body(),
    );
    // The rewritten hello is still one rustls reads; only the extension differs.
    let other = common::with_extension(&plain, 0x7a7a, &common::ech_outer_body());
    assert_eq!(
        read_all(&other).unwrap().unwrap().sni.as_deref(),
        Some("public.example")
    );
    assert_eq!(read_all(&ech), Err(HelloError::EncryptedClientHello));
    assert_eq!(
        read_all(&split_record(&ech, 50)),
        Err(HelloError::EncryptedClientHello)
    );
    let mut r = HelloReader::new(64 * 1024);
    let mut got = Ok(None);
    for b in &ech {
        got = r.push(std::slice::from_ref(b));
        if !matches!(got, Ok(None)) {
            break;
        }
    }
    assert_eq!(got, Err(HelloError::EncryptedClientHello));
    assert!(
        HelloError::EncryptedClientHello
            .to_string()
            .contains("Encrypted Client Hello (extension 0xfe0d)")
    );
}
