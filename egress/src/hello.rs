//! Reading (never terminating) the TLS ClientHello at the start of a tunnel, with
//! `rustls::server::Acceptor`, which needs no crypto provider. The bytes are kept verbatim so they
//! can be forwarded upstream unchanged. Input is hostile: every problem is an error, never a panic.
//!
//! A hello with Encrypted Client Hello (extension `0xfe0d`) is refused: its SNI is the outer,
//! public name, which may be an allowed host while the inner, encrypted one names any other
//! server behind the same front. rustls does not report the extension to a server, so this module
//! reads the extension list itself, from the bytes rustls has already accepted as a hello.

use std::io;

use rustls::server::Acceptor;

/// The TLS record content type of a handshake record.
const HANDSHAKE: u8 = 0x16;
/// The handshake message type of a ClientHello.
const CLIENT_HELLO: u8 = 1;
/// The `encrypted_client_hello` extension (draft-ietf-tls-esni, IANA TLS ExtensionType 0xfe0d).
pub const ECH_EXTENSION: u16 = 0xfe0d;

/// What the ClientHello said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHelloInfo {
    /// The SNI host name, lower-case; `None` when absent (an IP literal sent as SNI counts as
    /// absent).
    pub sni: Option<String>,
    /// The offered ALPN protocols, empty when none. A protocol name is opaque bytes (RFC 7301
    /// 3.1) chosen by the client, so it is kept as graphic ASCII with every other byte (space,
    /// controls, non-ASCII) and `\` itself written `\xNN`: `h2` stays `h2`, the bytes `c2 9b`
    /// become `\xc2\x9b`.
    pub alpn: Vec<String>,
}

/// Why the start of a tunnel is not an acceptable ClientHello.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HelloError {
    /// The first byte is not a TLS handshake record (plain HTTP, SSH, ...).
    #[error(
        "the tunnel did not start with a TLS handshake (first byte 0x{0:02x}); plain HTTP is refused"
    )]
    NotTls(u8),
    /// rustls refused the bytes as a ClientHello.
    #[error("not a valid TLS ClientHello: {0}")]
    Invalid(String),
    /// More than the limit arrived without a complete ClientHello.
    #[error("no complete ClientHello within {0} bytes")]
    TooLarge(usize),
    /// The client closed (or stopped) before the ClientHello was complete.
    #[error("the client closed the tunnel before a complete ClientHello")]
    Truncated,
    /// The ClientHello carries Encrypted Client Hello: the host it really asks for is encrypted.
    #[error(
        "the ClientHello uses Encrypted Client Hello (extension 0xfe0d), which hides the host it really asks for behind its SNI; ECH is refused (turn it off in the client)"
    )]
    EncryptedClientHello,
}

/// Incremental ClientHello reader: feed bytes as they arrive with [`HelloReader::push`].
pub struct HelloReader {
    acceptor: Acceptor,
    buf: Vec<u8>,
    limit: usize,
}

impl HelloReader {
    /// A reader that gives up after `limit` bytes.
    pub fn new(limit: usize) -> HelloReader {
        HelloReader {
            acceptor: Acceptor::default(),
            buf: Vec::new(),
            limit,
        }
    }

    /// Feed the next bytes. `Ok(None)`: need more. `Ok(Some(info))`: the hello is complete; every
    /// byte fed so far (the hello and anything after it) is in [`HelloReader::bytes`].
    pub fn push(&mut self, bytes: &[u8]) -> Result<Option<ClientHelloInfo>, HelloError> {
        if self.buf.is_empty()
            && let Some(&first) = bytes.first()
            && first != HANDSHAKE
        {
            return Err(HelloError::NotTls(first));
        }
        if self.buf.len() + bytes.len() > self.limit {
            return Err(HelloError::TooLarge(self.limit));
        }
        self.buf.extend_from_slice(bytes);
        let mut rest = bytes;
        while !rest.is_empty() {
            match self.acceptor.read_tls(&mut rest) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(HelloError::Invalid(e.to_string())),
            }
            match self.acceptor.accept() {
                Ok(Some(accepted)) => {
                    match extension_types(&self.buf) {
                        Some(types) if types.contains(&ECH_EXTENSION) => {
                            return Err(HelloError::EncryptedClientHello);
                        }
                        Some(_) => {}
                        None => {
                            return Err(HelloError::Invalid(
                                "the extension list cannot be read".into(),
                            ));
                        }
                    }
                    let hello = accepted.client_hello();
                    let sni = hello.server_name().map(str::to_owned);
                    let alpn = hello
                        .alpn()
                        .map(|it| it.map(alpn_text).collect())
                        .unwrap_or_default();
                    return Ok(Some(ClientHelloInfo { sni, alpn }));
                }
                Ok(None) => {}
                Err((e, _alert)) => return Err(HelloError::Invalid(e.to_string())),
            }
        }
        if !rest.is_empty() {
            // rustls' buffer would not take more although the hello is not complete.
            return Err(HelloError::TooLarge(self.limit));
        }
        Ok(None)
    }

    /// Every byte fed so far, verbatim.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Take the bytes fed so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// The extension types of the ClientHello at the start of `records` (TLS handshake records, the
/// hello possibly split across several, anything after it ignored), in order; `None` when the
/// bytes hold no well-formed hello.
fn extension_types(records: &[u8]) -> Option<Vec<u16>> {
    let mut msg = Vec::new();
    let mut rest = records;
    let need = loop {
        let (header, body) = split(rest, 5)?;
        if header[0] != HANDSHAKE {
            return None;
        }
        let (fragment, next) = split(
            body,
            usize::from(u16::from_be_bytes([header[3], header[4]])),
        )?;
        msg.extend_from_slice(fragment);
        rest = next;
        if let [_, a, b, c, ..] = msg[..] {
            let need = 4 + (usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c));
            if msg.len() >= need {
                break need;
            }
        }
    };
    let (header, body) = split(&msg[..need], 4)?;
    if header[0] != CLIENT_HELLO {
        return None;
    }
    // legacy_version, random, session id, cipher suites, compression methods.
    let (_, r) = split(body, 2 + 32)?;
    let r = skip_vec(r, 1)?;
    let r = skip_vec(r, 2)?;
    let r = skip_vec(r, 1)?;
    if r.is_empty() {
        return Some(Vec::new());
    }
    let (len, r) = split(r, 2)?;
    let (mut list, _) = split(r, usize::from(u16::from_be_bytes([len[0], len[1]])))?;
    let mut types = Vec::new();
    while !list.is_empty() {
        let (head, r) = split(list, 4)?;
        types.push(u16::from_be_bytes([head[0], head[1]]));
        (_, list) = split(r, usize::from(u16::from_be_bytes([head[2], head[3]])))?;
    }
    Some(types)
}

/// `bytes` split after `n`, or `None` when it is shorter.
fn split(bytes: &[u8], n: usize) -> Option<(&[u8], &[u8])> {
    (bytes.len() >= n).then(|| bytes.split_at(n))
}

/// What follows a vector with a `width`-byte length (1 or 2) at the start of `bytes`.
fn skip_vec(bytes: &[u8], width: usize) -> Option<&[u8]> {
    let (len, rest) = split(bytes, width)?;
    let n = len.iter().fold(0usize, |n, b| n << 8 | usize::from(*b));
    split(rest, n).map(|(_, after)| after)
}

/// An ALPN protocol name as audit text. Decoding it as UTF-8 (even lossily) would let a client
/// put C1 controls such as U+009B (CSI) or bidi overrides into `mcpsum audit` output, where a
/// terminal or a log viewer acts on them; `\` is escaped too, so the text maps back to one byte
/// string.
fn alpn_text(id: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(id.len());
    for &b in id {
        if b.is_ascii_graphic() && b != b'\\' {
            out.push(char::from(b));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// Read a ClientHello from `reader` (no timeout here; the caller bounds the time). Returns what it
/// said and every byte read, to forward unchanged.
pub async fn read_client_hello<R>(
    reader: &mut R,
    limit: usize,
) -> Result<(ClientHelloInfo, Vec<u8>), HelloError>
where
    R: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
    let mut hr = HelloReader::new(limit);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) => return Err(HelloError::Truncated),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(HelloError::Truncated),
        };
        if let Some(info) = hr.push(&chunk[..n])? {
            return Ok((info, hr.into_bytes()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn alpn_names_become_graphic_ascii() {
        let cases: &[(&[u8], &str)] = &[
            (b"h2", "h2"),
            (b"http/1.1", "http/1.1"),
            (b"~!{}\"'", "~!{}\"'"),
            // U+009B (CSI) in UTF-8, and as a lone Latin-1 byte.
            ("x\u{9b}31m".as_bytes(), "x\\xc2\\x9b31m"),
            (b"\x9b", "\\x9b"),
            (b"a\x1b[2Jb", "a\\x1b[2Jb"),
            (b"a b\t\r\n\x7f\x00", "a\\x20b\\x09\\x0d\\x0a\\x7f\\x00"),
            // `\` itself, so no name can pass for the escaped form of another.
            (b"a\\x41", "a\\x5cx41"),
            ("é".as_bytes(), "\\xc3\\xa9"),
        ];
        for (bytes, want) in cases {
            assert_eq!(alpn_text(bytes), *want, "{bytes:?}");
        }
    }
}
