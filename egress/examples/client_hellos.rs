//! Writes real ClientHellos made by a rustls client into a directory, one file each: the seeds
//! of the `client_hello` fuzz target (`fuzz/make-seeds.sh` runs this), and the first of them
//! again with an outer Encrypted Client Hello extension (0xfe0d) added, which the reader refuses.
//! No network: the client writes its first flight into memory.
//!
//! ```sh
//! cargo run -p mcpsum-egress --example client_hellos -- fuzz/corpus/client_hello
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The tests' ClientHello helpers, so a seed and a test hello are made the same way.
#[path = "../tests/common/mod.rs"]
mod common;

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
/// in its list, built by the same helpers the ECH tests use.
fn with_ech(hello: &[u8]) -> Vec<u8> {
    common::with_extension(
        hello,
        mcpsum_egress::ECH_EXTENSION,
        &common::ech_outer_body(),
    )
}
