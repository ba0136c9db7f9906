//! Making a lockfile signature. An unencrypted Ed25519 or ECDSA private key file signs in-process
//! with the `ssh-key` crate: no other program runs, nothing leaves the process. Everything else
//! goes through `ssh-keygen -Y sign`, the reference implementation, which already knows how to
//! ask for a passphrase, have the running `ssh-agent` sign, or sign with RSA (`rsa-sha2-512`):
//! the crate cannot sign with RSA (RustCrypto/SSH issue 387), and `agent` asks the agent only
//! which keys it holds, leaving the signing request to `ssh-keygen`.
//! Which of the agent and a key file signs is decided here, not left to `ssh-keygen` (which
//! prefers the agent and falls back to the file silently): the agent is asked whether it holds
//! the key (`agent`), and `ssh-keygen` is then held to that one, so `sign` says what signed.
//! Either way the result is read back and verified over the same bytes before it is kept.
//!
//! The message hash is SHA-256 (`-O hashalg=sha256` for `ssh-keygen`), which PROTOCOL.sshsig
//! allows beside SHA-512 and `ssh-keygen -Y verify` accepts: every reader hashes the whole
//! lockfile on every `show` and proxy start, and SHA-256 runs on the CPU's SHA extensions at about
//! twice SHA-512's speed (BENCHMARKS.md). A SHA-512 signature (`ssh-keygen -Y sign`'s default) is
//! accepted too.

use std::io::Write;
use std::path::{Path, PathBuf};

use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey};

use super::{NAMESPACE, Signer, agent};
use crate::error::{Error, Result};

/// The key to sign with.
#[derive(Debug, Clone)]
pub enum Key {
    /// A private key file, or a public key file whose private half the agent holds.
    File(PathBuf),
    /// A public key given as text (git's `user.signingkey = key::ssh-ed25519 AAAA...`).
    Literal(String),
}

/// How a signature was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// In this process, from the private key file.
    InProcess,
    /// By `ssh-keygen -Y sign` with this private key file, the agent not used: for a public key
    /// given, why the agent did not sign (none running, or it does not hold the key).
    KeyFile {
        /// The private key file.
        private: PathBuf,
        /// Why not the agent, when a public key was given.
        not_agent: Option<String>,
    },
    /// By the agent at this socket (through `ssh-keygen -Y sign -U`).
    Agent(PathBuf),
}

/// An armored signature and who made it.
#[derive(Debug)]
pub struct Signed {
    /// The `-----BEGIN SSH SIGNATURE-----` text, with a trailing newline.
    pub pem: String,
    /// The key that signed.
    pub signer: Signer,
    /// How.
    pub method: Method,
}

/// Signs `bytes` with `key` for namespace `mcpsum` and checks the result.
pub fn sign(bytes: &[u8], key: &Key) -> Result<Signed> {
    let (pem, expected, method) = match key {
        Key::Literal(text) => {
            let public = parse_public(text).map_err(|e| {
                Error::new("git's `user.signingkey` is not an SSH public key")
                    .cause(e)
                    .hint(
                        "set it to a key file or `key::ssh-ed25519 AAAA...`, or pass `--key PATH`",
                    )
            })?;
            let blob = public
                .to_bytes()
                .map_err(|e| Error::new("cannot encode git's `user.signingkey`").cause(e))?;
            // Only the agent can sign for a key given as text: there is no file beside it.
            let sock = match agent::holds(&blob) {
                Ok(sock) => sock,
                Err(not) => {
                    return Err(Error::new(format!(
                        "cannot sign with git's `user.signingkey`, {}: {}",
                        super::Signer::of(public.key_data()).describe(),
                        not.why_not()
                    ))
                    .hint("add its private key to the agent (`ssh-add KEY`), or pass the private key file to `--key`"));
                }
            };
            let dir = tempfile::tempdir()
                .map_err(|e| Error::new("cannot create a temporary directory").cause(e))?;
            let file = dir.path().join("signing_key.pub");
            fs_err::write(&file, format!("{}\n", text.trim()))
                .map_err(|e| Error::new("cannot write the public key for `ssh-keygen`").cause(e))?;
            (
                ssh_keygen(bytes, &file, Via::Agent)?,
                Some(public),
                Method::Agent(sock),
            )
        }
        Key::File(path) => {
            let text = fs_err::read_to_string(path).map_err(|e| {
                Error::new(format!("cannot read the key `{}`", path.display()))
                    .cause(crate::fsutil::without_path(&e, path))
                    .hint("pass a private key file, or a public key file whose key is in `ssh-agent`, to `--key`")
            })?;
            match PrivateKey::from_openssh(&text) {
                Ok(private) if !private.is_encrypted() && in_process(&private) => {
                    let sig = private
                        .sign(NAMESPACE, HashAlg::Sha256, bytes)
                        .map_err(|e| {
                            Error::new(format!("cannot sign with `{}`", path.display())).cause(e)
                        })?;
                    let pem = sig
                        .to_pem(LineEnding::LF)
                        .map_err(|e| Error::new("cannot encode the signature").cause(e))?;
                    (pem, Some(private.public_key().clone()), Method::InProcess)
                }
                // RSA, an encrypted key (ssh-keygen asks for the passphrase), a security key:
                // the agent if it holds the key (as `ssh-keygen` prefers it), else the file.
                Ok(private) => {
                    let public = private.public_key().clone();
                    let blob = public.to_bytes().ok();
                    let (pem, method) = private_through_ssh_keygen(bytes, path, blob.as_deref())?;
                    (pem, Some(public), method)
                }
                Err(_) => match agent::file_blob(&text) {
                    // A public key or a certificate: the agent, else the private key beside it.
                    Some(blob) => {
                        let (pem, method) = public_through_ssh_keygen(bytes, path, &blob)?;
                        (pem, parse_public(&text).ok(), method)
                    }
                    // A PEM or PKCS#8 private key: ssh-keygen reads those too.
                    None => {
                        let (pem, method) = private_through_ssh_keygen(bytes, path, None)?;
                        (pem, None, method)
                    }
                },
            }
        }
    };
    // Read back as every reader reads it (a signature by a certificate carries it).
    let sig = super::sshsig::parse(pem.as_bytes()).map_err(|e| {
        let hint = e.hint.clone();
        let err = Error::new("the signature made is not one mcpsum accepts").cause(e);
        match hint {
            Some(h) => err.hint(h),
            None => err,
        }
    })?;
    if let Some(expected) = &expected
        && sig.key.key() != expected.key_data()
    {
        return Err(
            Error::new("the signature was made by another key than the one asked for")
                .hint("check which keys `ssh-agent` holds (`ssh-add -L`)"),
        );
    }
    let verified = sig.namespace == NAMESPACE
        && super::sshsig::signed_data(&sig, bytes)
            .is_some_and(|d| super::sshsig::verify(sig.key.key(), &d, &sig.signature));
    if !verified {
        return Err(Error::new("the signature made does not verify"));
    }
    let mut pem = pem;
    if !pem.ends_with('\n') {
        pem.push('\n');
    }
    Ok(Signed {
        signer: Signer::of_sig(&sig.key),
        pem,
        method,
    })
}

/// Ed25519 and ECDSA (P-256, P-384) sign here, deterministically (RFC 8032, RFC 6979).
fn in_process(key: &PrivateKey) -> bool {
    matches!(
        key.algorithm(),
        ssh_key::Algorithm::Ed25519
            | ssh_key::Algorithm::Ecdsa {
                curve: ssh_key::EcdsaCurve::NistP256 | ssh_key::EcdsaCurve::NistP384
            }
    )
}

fn parse_public(text: &str) -> std::result::Result<PublicKey, ssh_key::Error> {
    let text = text.trim();
    PublicKey::from_openssh(text.strip_prefix("key::").unwrap_or(text))
}

/// Which key `ssh-keygen` may sign with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The agent's (`-U`).
    Agent,
    /// The private key file's.
    File,
}

/// Signs through `ssh-keygen` for the private key file `key`: by the agent when it holds the key
/// whose blob is `blob` (as `ssh-keygen` prefers it), else with the file itself.
fn private_through_ssh_keygen(
    bytes: &[u8],
    key: &Path,
    blob: Option<&[u8]>,
) -> Result<(String, Method)> {
    if let Some(Ok(sock)) = blob.map(agent::holds) {
        return Ok((ssh_keygen(bytes, key, Via::Agent)?, Method::Agent(sock)));
    }
    let pem = ssh_keygen(bytes, key, Via::File)?;
    Ok((
        pem,
        Method::KeyFile {
            private: key.to_owned(),
            not_agent: None,
        },
    ))
}

/// Signs through `ssh-keygen` for the public key or certificate file `key` (whose blob is
/// `blob`): by the agent when it holds it, else with the private key beside it; says which,
/// and for the file why not the agent.
fn public_through_ssh_keygen(bytes: &[u8], key: &Path, blob: &[u8]) -> Result<(String, Method)> {
    let not = match agent::holds(blob) {
        Ok(sock) => return Ok((ssh_keygen(bytes, key, Via::Agent)?, Method::Agent(sock))),
        Err(not) => not.why_not(),
    };
    let Some(private) = beside(key).filter(|p| p.symlink_metadata().is_ok()) else {
        let beside = beside(key).map_or_else(
            || "no private key beside it (named as it is without `.pub`)".to_owned(),
            |p| format!("no private key `{}` beside it", p.display()),
        );
        return Err(Error::new(format!(
            "cannot sign with `{}`: {not}, and there is {beside}",
            key.display(),
        ))
        .hint("add the key to the agent (`ssh-add PRIVATE_KEY`) and sign again, or pass the private key file to `--key`"));
    };
    let pem = ssh_keygen(bytes, key, Via::File)?;
    Ok((
        pem,
        Method::KeyFile {
            private,
            not_agent: Some(not),
        },
    ))
}

/// The private key `ssh-keygen` looks for beside a public key or certificate file:
/// `KEY-cert.pub` and `KEY.pub` name `KEY`.
fn beside(public: &Path) -> Option<PathBuf> {
    let name = public.file_name()?.to_str()?;
    let stem = name
        .strip_suffix("-cert.pub")
        .or_else(|| name.strip_suffix(".pub"))
        .filter(|s| !s.is_empty())?;
    Some(public.with_file_name(stem))
}

/// `ssh-keygen -Y sign -n mcpsum -f KEY` with the bytes on stdin: the signature comes back on
/// stdout. It reads a passphrase from the terminal itself; `via` says which of the agent and the
/// private key file it may sign with.
fn ssh_keygen(bytes: &[u8], key: &Path, via: Via) -> Result<String> {
    let mut command = std::process::Command::new("ssh-keygen");
    command.args(["-Y", "sign", "-n", NAMESPACE, "-O", "hashalg=sha256"]);
    match via {
        // Only the agent: it fails rather than fall back to a file.
        Via::Agent => command.arg("-U"),
        // Only the file: without the agent's socket it cannot be asked.
        Via::File => command.env_remove("SSH_AUTH_SOCK"),
    };
    let mut child = command
        .arg("-f")
        .arg(key)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::new("cannot run `ssh-keygen`")
                .cause(e)
                .hint("install OpenSSH's `ssh-keygen` (8.9 or later): RSA keys and keys held by `ssh-agent` sign through it; Ed25519 and ECDSA key files sign without it")
        })?;
    let stdin = child.stdin.take();
    // Written from a thread: the pipe holds less than a large lockfile.
    let out = std::thread::scope(|s| {
        s.spawn(move || {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(bytes);
            }
        });
        child.wait_with_output()
    })
    .map_err(|e| Error::new("`ssh-keygen -Y sign` failed").cause(e))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut err = Error::new(format!(
            "`ssh-keygen -Y sign -f {}` failed ({})",
            key.display(),
            out.status
        ));
        for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
            err = err.cause(line.trim());
        }
        return Err(err.hint(match via {
            Via::Agent => {
                "check that the running agent still holds the key (`ssh-add -l`, `SSH_AUTH_SOCK`)"
            }
            Via::File => "check the private key file's passphrase and permissions",
        }));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| Error::new("`ssh-keygen -Y sign` wrote something other than a signature"))
}
