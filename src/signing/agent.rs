//! Whether the running `ssh-agent` holds a key: the one question `mcpsum sign` asks it itself,
//! so that it can say what signed. `ssh-keygen -Y sign -f KEY` signs with the agent when the
//! agent holds KEY and with the private key file otherwise, without saying which; `sign` asks
//! first (the agent protocol's identity list, draft-miller-ssh-agent section 3.4), then makes
//! `ssh-keygen` use only that one: `-U` for the agent, no `SSH_AUTH_SOCK` for the file.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const REQUEST_IDENTITIES: u8 = 11;
const IDENTITIES_ANSWER: u8 = 12;
/// The agent's refusal of a request.
const FAILURE: u8 = 5;
/// The longest reply read (OpenSSH's own limit for an agent reply).
const MAX_REPLY: usize = 256 * 1024;
/// How long the whole exchange with the agent may take, however it dribbles its reply.
const DEADLINE: Duration = Duration::from_secs(10);

/// Why the agent will not sign with a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotHeld {
    /// It does not hold it; the agent's socket.
    No(PathBuf),
    /// `SSH_AUTH_SOCK` is not set.
    NoAgent,
    /// The agent could not be asked: why, in words that name the socket.
    Unreachable(String),
}

impl NotHeld {
    /// Why the agent did not sign, for a message: `no `ssh-agent` is running: ...`.
    pub fn why_not(&self) -> String {
        match self {
            NotHeld::No(sock) => format!("`ssh-agent` at `{}` does not hold it", sock.display()),
            NotHeld::NoAgent => "no `ssh-agent` is running: `SSH_AUTH_SOCK` is not set".to_owned(),
            NotHeld::Unreachable(why) => why.clone(),
        }
    }
}

/// The socket of the agent `SSH_AUTH_SOCK` names, if it holds the key whose wire blob is `blob`
/// (for a certificate, the certificate's blob: as `ssh-keygen` compares them, a certificate is
/// held only as that certificate).
pub fn holds(blob: &[u8]) -> Result<PathBuf, NotHeld> {
    let Some(sock) = std::env::var_os("SSH_AUTH_SOCK").filter(|s| !s.is_empty()) else {
        return Err(NotHeld::NoAgent);
    };
    let sock = PathBuf::from(sock);
    match identities(&sock, DEADLINE) {
        Ok(keys) if keys.iter().any(|k| k == blob) => Ok(sock),
        Ok(_) => Err(NotHeld::No(sock)),
        Err(why) => Err(NotHeld::Unreachable(why)),
    }
}

/// The key blobs the agent at `sock` holds, asked and answered within `deadline`; else why not.
fn identities(sock: &Path, deadline: Duration) -> Result<Vec<Vec<u8>>, String> {
    let shown = sock.display();
    let mut stream = UnixStream::connect(sock).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("the agent socket `{shown}` does not exist"),
        std::io::ErrorKind::ConnectionRefused => {
            format!("no agent listens on the socket `{shown}`")
        }
        std::io::ErrorKind::PermissionDenied => {
            format!("the agent socket `{shown}` is not open to this user")
        }
        kind => format!("cannot connect to the agent socket `{shown}`: {kind}"),
    })?;
    let end = Instant::now() + deadline;
    let lost = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
            "the agent at `{shown}` did not answer within {} seconds",
            deadline.as_secs_f64()
        ),
        std::io::ErrorKind::UnexpectedEof
        | std::io::ErrorKind::BrokenPipe
        | std::io::ErrorKind::ConnectionReset => {
            format!("the agent at `{shown}` hung up without answering")
        }
        kind => format!("the agent at `{shown}` cannot be asked: {kind}"),
    };
    let request = [0, 0, 0, 1, REQUEST_IDENTITIES];
    let mut sent = 0;
    while sent < request.len() {
        let left = remaining(end).map_err(lost)?;
        stream.set_write_timeout(Some(left)).map_err(lost)?;
        match stream.write(&request[sent..]) {
            Ok(0) => return Err(lost(std::io::ErrorKind::BrokenPipe.into())),
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(lost(e)),
        }
    }
    let mut len = [0; 4];
    read_by(&mut stream, &mut len, end).map_err(lost)?;
    let len = usize::try_from(u32::from_be_bytes(len)).unwrap_or(usize::MAX);
    if len == 0 {
        return Err(format!("the agent at `{shown}` sent an empty reply"));
    }
    if len > MAX_REPLY {
        return Err(format!("the agent at `{shown}` sent an oversized reply"));
    }
    let mut reply = vec![0; len];
    read_by(&mut stream, &mut reply, end).map_err(lost)?;
    if reply == [FAILURE] {
        return Err(format!("the agent at `{shown}` refused the request"));
    }
    parse_identities(&reply)
        .ok_or_else(|| format!("the agent at `{shown}` sent a reply mcpsum cannot read"))
}

/// The time left until `end`, or the deadline's error (as a timed-out read's).
fn remaining(end: Instant) -> std::io::Result<Duration> {
    // A zero timeout means none at all to the socket: the last instant counts as none left.
    Some(end.saturating_duration_since(Instant::now()))
        .filter(|d| !d.is_zero())
        .ok_or_else(|| std::io::ErrorKind::TimedOut.into())
}

/// Fills `buf` from `stream` by `end`, each read waiting only for the time left.
fn read_by(stream: &mut UnixStream, buf: &mut [u8], end: Instant) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        stream.set_read_timeout(Some(remaining(end)?))?;
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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

    /// An agent at a fresh socket that reads the request, then sends `reply` a byte every
    /// `gap`; what `identities` says of it with `deadline`.
    fn ask(reply: Vec<u8>, gap: Duration, deadline: Duration) -> Result<Vec<Vec<u8>>, String> {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("agent.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let agent = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0; 5];
            conn.read_exact(&mut request).unwrap();
            assert_eq!(request, [0, 0, 0, 1, REQUEST_IDENTITIES]);
            for b in reply {
                std::thread::sleep(gap);
                // The client may have given up and hung up.
                if conn.write_all(&[b]).is_err() {
                    return;
                }
            }
        });
        let out = identities(&sock, deadline);
        agent.join().unwrap();
        out
    }

    /// `len`, then `body`, as the agent frames a reply.
    fn framed(body: &[u8]) -> Vec<u8> {
        let mut out = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn one_deadline_covers_the_whole_exchange() {
        // Nine bytes 30 ms apart take at least 270 ms: each read waits less than the deadline,
        // the whole exchange more.
        let reply = framed(&[IDENTITIES_ANSWER, 0, 0, 0, 0]);
        let err = ask(
            reply.clone(),
            Duration::from_millis(30),
            Duration::from_millis(100),
        )
        .unwrap_err();
        assert!(err.contains("did not answer within 0.1 seconds"), "{err}");
        assert!(!err.contains("os error"), "{err}");
        // Sent at once, the same reply is read.
        assert_eq!(ask(reply, Duration::ZERO, DEADLINE), Ok(vec![]));
    }

    #[test]
    fn what_the_agent_did_is_said_in_plain_words() {
        let said = |reply: Vec<u8>| ask(reply, Duration::ZERO, DEADLINE).unwrap_err();
        assert!(said(framed(&[FAILURE])).ends_with("refused the request"));
        assert!(said(vec![0xff; 4]).ends_with("sent an oversized reply"));
        assert!(said(framed(&[])).ends_with("sent an empty reply"));
        assert!(said(framed(&[IDENTITIES_ANSWER, 0])).ends_with("sent a reply mcpsum cannot read"));
        assert!(said(vec![0, 0]).ends_with("hung up without answering"));
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone.sock");
        assert_eq!(
            identities(&gone, DEADLINE),
            Err(format!(
                "the agent socket `{}` does not exist",
                gone.display()
            ))
        );
    }

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
