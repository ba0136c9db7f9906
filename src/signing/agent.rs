//! Whether the running `ssh-agent` holds a key: the one question `mcpsum sign` asks it itself,
//! so that it can say what signed. `ssh-keygen -Y sign -f KEY` signs with the agent when the
//! agent holds KEY and with the private key file otherwise, without saying which; `sign` asks
//! first (the agent protocol's identity list, draft-miller-ssh-agent section 3.4), then makes
//! `ssh-keygen` use only that one: `-U` for the agent, no `SSH_AUTH_SOCK` for the file.

use std::io::{Read, Write};
use std::path::PathBuf;

const REQUEST_IDENTITIES: u8 = 11;
const IDENTITIES_ANSWER: u8 = 12;
/// The longest reply read (OpenSSH's own limit for an agent reply).
const MAX_REPLY: usize = 256 * 1024;

/// What the agent says about a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holds {
    /// It holds the key; the agent's socket.
    Yes(PathBuf),
    /// It does not hold it.
    No(PathBuf),
    /// `SSH_AUTH_SOCK` is not set.
    NoAgent,
    /// The agent at that socket could not be asked (the error).
    Unreachable(PathBuf, String),
}

impl Holds {
    /// Why the agent did not sign, for a message: `no `ssh-agent` is running (...)`.
    pub fn why_not(&self) -> String {
        match self {
            Holds::Yes(sock) => format!("`ssh-agent` at `{}` holds it", sock.display()),
            Holds::No(sock) => format!("`ssh-agent` at `{}` does not hold it", sock.display()),
            Holds::NoAgent => "no `ssh-agent` is running (`SSH_AUTH_SOCK` is not set)".to_owned(),
            Holds::Unreachable(sock, e) => {
                format!("`ssh-agent` at `{}` cannot be asked ({e})", sock.display())
            }
        }
    }
}

/// Whether the agent `SSH_AUTH_SOCK` names holds the key whose wire blob is `blob` (for a
/// certificate, the certificate's blob: as `ssh-keygen` compares them, a certificate is held
/// only as that certificate).
pub fn holds(blob: &[u8]) -> Holds {
    let Some(sock) = std::env::var_os("SSH_AUTH_SOCK").filter(|s| !s.is_empty()) else {
        return Holds::NoAgent;
    };
    let sock = PathBuf::from(sock);
    match identities(&sock) {
        Ok(keys) if keys.iter().any(|k| k == blob) => Holds::Yes(sock),
        Ok(_) => Holds::No(sock),
        Err(e) => Holds::Unreachable(sock, e),
    }
}

/// The key blobs the agent at `sock` holds.
fn identities(sock: &std::path::Path) -> Result<Vec<Vec<u8>>, String> {
    let mut stream = std::os::unix::net::UnixStream::connect(sock).map_err(|e| e.to_string())?;
    // An agent that never answers is not waited for forever.
    let limit = Some(std::time::Duration::from_secs(10));
    stream
        .set_read_timeout(limit)
        .and_then(|()| stream.set_write_timeout(limit))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(&[0, 0, 0, 1, REQUEST_IDENTITIES])
        .map_err(|e| e.to_string())?;
    let mut len = [0; 4];
    stream.read_exact(&mut len).map_err(|e| e.to_string())?;
    let len = usize::try_from(u32::from_be_bytes(len)).unwrap_or(usize::MAX);
    if len == 0 || len > MAX_REPLY {
        return Err(format!("a reply of {len} bytes"));
    }
    let mut reply = vec![0; len];
    stream.read_exact(&mut reply).map_err(|e| e.to_string())?;
    parse_identities(&reply).ok_or_else(|| "an unexpected reply".to_owned())
}

fn parse_identities(reply: &[u8]) -> Option<Vec<Vec<u8>>> {
    let (&kind, mut rest) = reply.split_first()?;
    if kind != IDENTITIES_ANSWER {
        return None;
    }
    let count = read_u32(&mut rest)?;
    let mut keys = Vec::new();
    for _ in 0..count {
        keys.push(read_string(&mut rest)?.to_vec());
        let _comment = read_string(&mut rest)?;
    }
    rest.is_empty().then_some(keys)
}

fn read_u32(rest: &mut &[u8]) -> Option<u32> {
    let (head, tail) = rest.split_first_chunk::<4>()?;
    *rest = tail;
    Some(u32::from_be_bytes(*head))
}

fn read_string<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(read_u32(rest)?).ok()?;
    if len > rest.len() {
        return None;
    }
    let (s, tail) = rest.split_at(len);
    *rest = tail;
    Some(s)
}

/// The wire blob of the first key in an OpenSSH public key or certificate file
/// (`TYPE BASE64 [COMMENT]`), if it is one.
pub fn file_blob(text: &str) -> Option<Vec<u8>> {
    use base64ct::Encoding as _;
    let text = text.trim();
    let mut words = text
        .strip_prefix("key::")
        .unwrap_or(text)
        .split_whitespace();
    let kind = words.next()?;
    let blob = base64ct::Base64::decode_vec(words.next()?).ok()?;
    // The blob names its type first, as the line does.
    let named =
        blob.get(4..4 + usize::try_from(u32::from_be_bytes(*blob.first_chunk::<4>()?)).ok()?)?;
    (named == kind.as_bytes()).then_some(blob)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_answer_is_read_whole() {
        let mut reply = vec![IDENTITIES_ANSWER, 0, 0, 0, 1];
        reply.extend_from_slice(&[0, 0, 0, 2, b'k', b'1', 0, 0, 0, 1, b'c']);
        assert_eq!(parse_identities(&reply), Some(vec![b"k1".to_vec()]));
        reply.push(0);
        assert_eq!(parse_identities(&reply), None);
        assert_eq!(parse_identities(&[5]), None);
    }

    #[test]
    fn a_file_blob_names_its_type() {
        let line =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE c";
        let blob = file_blob(line).expect("a key");
        assert_eq!(&blob[4..15], b"ssh-ed25519");
        assert_eq!(file_blob(&line.replace("ssh-ed25519", "ssh-rsa")), None);
        assert_eq!(file_blob("not a key"), None);
    }
}
