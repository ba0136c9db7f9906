//! Writes real ClientHellos made by a rustls client into a directory, one file each: the seeds
//! of the `client_hello` fuzz target (`fuzz/make-seeds.sh` runs this), and the first of them
//! again with an outer Encrypted Client Hello extension (0xfe0d) added, which the reader refuses.
//! No network: the client writes its first flight into memory.
//!
//! ```sh
//! cargo run -p mcpsum-egress --example client_hellos -- fuzz/corpus/client_hello
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore, SupportedProtocolVersion};

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).expect("usage: client_hellos DIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let all = rustls::ALL_VERSIONS;
    let tls12: &[&SupportedProtocolVersion] = &[&rustls::version::TLS12];
    let tls13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
    let hellos = [
        (
            "rustls-tls13-sni-alpn",
            all,
            "api.github.com",
            &["h2", "http/1.1"][..],
            true,
        ),
        ("rustls-tls13-only", tls13, "a.example.com", &[], true),
        (
            "rustls-tls12-only",
            tls12,
            "a.example.com",
            &["http/1.1"],
            true,
        ),
        ("rustls-no-sni", all, "api.github.com", &[], false),
        ("rustls-ip-literal", all, "127.0.0.1", &[], true),
    ];
    for (name, versions, host, alpn, sni) in hellos {
        let mut config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(versions)
                .unwrap()
                .with_root_certificates(RootCertStore::empty())
                .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
        config.enable_sni = sni;
        let server = ServerName::try_from(host.to_string()).unwrap();
        let mut conn = ClientConnection::new(Arc::new(config), server).unwrap();
        let mut out = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut out).unwrap();
        }
        if name == "rustls-tls13-sni-alpn" {
            std::fs::write(dir.join("rustls-tls13-ech-outer"), with_ech(&out)).unwrap();
        }
        std::fs::write(dir.join(name), out).unwrap();
    }
}

/// `hello` (one record, one ClientHello) with an outer `encrypted_client_hello` extension first
/// in its list: HKDF-SHA256 / AES-128-GCM, a 32-byte key and an opaque payload.
fn with_ech(hello: &[u8]) -> Vec<u8> {
    let mut body = vec![0x00, 0x00, 0x01, 0x00, 0x01, 0x2a, 0x00, 0x20];
    body.extend((0..32u8).map(|i| i.wrapping_mul(7)));
    body.extend_from_slice(&[0x00, 0xd0]);
    body.extend((0..208u8).map(|i| i.wrapping_mul(13) ^ 0x5a));
    let mut msg = hello[9..].to_vec();
    let mut pos = 2 + 32;
    pos += 1 + usize::from(msg[pos]);
    pos += 2 + usize::from(u16::from_be_bytes([msg[pos], msg[pos + 1]]));
    pos += 1 + usize::from(msg[pos]);
    let old = u16::from_be_bytes([msg[pos], msg[pos + 1]]);
    let added = u16::try_from(4 + body.len()).unwrap();
    msg[pos..pos + 2].copy_from_slice(&(old + added).to_be_bytes());
    let mut ext = vec![0xfe, 0x0d];
    ext.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    ext.extend_from_slice(&body);
    msg.splice(pos + 2..pos + 2, ext);
    let mut out = vec![0x16, hello[1], hello[2]];
    out.extend_from_slice(&u16::try_from(4 + msg.len()).unwrap().to_be_bytes());
    out.push(1);
    out.extend_from_slice(&u32::try_from(msg.len()).unwrap().to_be_bytes()[1..]);
    out.extend_from_slice(&msg);
    out
}
