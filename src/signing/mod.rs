//! Signed lockfiles (issue 19): an SSH signature (SSHSIG, namespace `mcpsum`) over the exact
//! bytes of `mcp.lock`, kept beside it as `mcp.lock.sig`, and the trust anchor that makes one
//! mandatory: an allowed-signers file outside the repository, in ssh-keygen's format.
//!
//! The digests in the lockfile detect accidental edits, not someone who can write the file: they
//! can recompute them. A signature by a key the reader lists in their own allowed-signers file
//! (or one their organisation deploys) ties the bytes to a person who reviewed them. So when an
//! allowed-signers file is in force, every command that serves or shows what the lock pins
//! (`verify`, `show`, `proxy`, `sandbox test`, `suggest-policy`) refuses a lockfile without a
//! valid signature from a listed key, with the reason: unsigned, changed since signing, unknown
//! key, wrong namespace or expired. Without one nothing is required, and `verify` reports
//! whether the file is signed and by which key.
//!
//! This module checks; `sign` makes signatures (in-process, or through `ssh-keygen` for RSA and
//! agent-held keys), `allowed` reads the anchor, `pattern` is OpenSSH's pattern matching.

pub mod allowed;
mod pattern;
pub mod sign;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use ssh_key::public::KeyData;
use ssh_key::{HashAlg, PublicKey, SshSig};

use crate::error::{Error, Result};

/// The SSHSIG namespace of a lockfile signature: `ssh-keygen -Y sign -n mcpsum`. A signature
/// made for another purpose (`git` commits, `file`) cannot be passed off as one for the lock.
pub const NAMESPACE: &str = "mcpsum";

/// The environment variable naming the allowed-signers file.
pub const ENV: &str = "MCPSUM_ALLOWED_SIGNERS";

/// `mcp.lock.sig` beside `mcp.lock` (the file name with `.sig` added).
pub fn sig_path(lockfile: &Path) -> PathBuf {
    let mut name = lockfile
        .file_name()
        .map(std::ffi::OsStr::to_os_string)
        .unwrap_or_default();
    name.push(".sig");
    lockfile.with_file_name(name)
}

/// Where the allowed-signers file is looked for: `--allowed-signers` (the "low" flag).
#[derive(Debug, Clone, Default)]
pub struct Trust {
    flag: Option<PathBuf>,
}

/// How the allowed-signers file in force was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--allowed-signers FILE`.
    Flag,
    /// `$MCPSUM_ALLOWED_SIGNERS`.
    Env,
    /// `$XDG_CONFIG_HOME/mcpsum/allowed_signers` or `~/.config/mcpsum/allowed_signers`.
    Config,
}

impl Source {
    fn how(self) -> &'static str {
        match self {
            Source::Flag => "given by `--allowed-signers`",
            Source::Env => "named by `MCPSUM_ALLOWED_SIGNERS`",
            Source::Config => "your configuration",
        }
    }
}

/// The allowed-signers file in force, read and parsed.
#[derive(Debug, Clone)]
pub struct Anchor {
    /// Its path.
    pub path: PathBuf,
    /// How it was found.
    pub source: Source,
    /// Its lines that name a key.
    pub entries: Vec<allowed::Entry>,
}

impl Trust {
    /// The trust settings for `--allowed-signers` (given or not).
    pub fn new(flag: Option<PathBuf>) -> Self {
        Self { flag }
    }

    /// The allowed-signers file in force, if any: `--allowed-signers`, else
    /// `$MCPSUM_ALLOWED_SIGNERS`, else `$XDG_CONFIG_HOME/mcpsum/allowed_signers` (default
    /// `~/.config/mcpsum/allowed_signers`). A file named by the flag or the variable must
    /// exist; the configuration file is in force only when it is there. One that cannot be read
    /// or parsed is an error, never "no anchor": fail closed.
    pub fn anchor(&self) -> Result<Option<Anchor>> {
        let (path, source) = if let Some(p) = &self.flag {
            (p.clone(), Source::Flag)
        } else if let Some(p) = std::env::var_os(ENV).filter(|v| !v.is_empty()) {
            (PathBuf::from(p), Source::Env)
        } else {
            let config = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| crate::paths::home_dir().map(|h| h.join(".config")));
            let Some(config) = config else {
                return Ok(None);
            };
            (config.join("mcpsum/allowed_signers"), Source::Config)
        };
        let text = match fs_err::read_to_string(&path) {
            Ok(t) => t,
            // Only the default place may be absent: nothing is there, not even a dangling link,
            // or a folder on the way cannot be searched (a home that is not this user's, as a
            // client may pass), so no file of the user's can be there. A file that is there but
            // cannot be read is an error.
            Err(_) if source == Source::Config && path.symlink_metadata().is_err() => {
                return Ok(None);
            }
            Err(e) => {
                return Err(Error::new(format!(
                    "cannot read the allowed signers `{}` ({})",
                    path.display(),
                    source.how()
                ))
                .cause(
                    std::error::Error::source(&e)
                        .map_or_else(|| e.to_string(), ToString::to_string),
                )
                .hint(match source {
                    Source::Flag => {
                        "pass an existing allowed-signers file to `--allowed-signers`".to_owned()
                    }
                    Source::Env => {
                        format!("point `{ENV}` at an existing allowed-signers file, or unset it")
                    }
                    Source::Config => {
                        "make the file readable; mcpsum does not run without the signers it names"
                            .to_owned()
                    }
                }));
            }
        };
        let entries = allowed::parse(&text, &local_offset).map_err(|problems| {
            let n = problems.len();
            Error::new(format!(
                "the allowed signers `{}` ({}) cannot be read: {n} bad line{}",
                path.display(),
                source.how(),
                if n == 1 { "" } else { "s" }
            ))
            .details(
                problems
                    .into_iter()
                    .map(|p| format!("{}:{p}", path.display())),
            )
            .hint("fix each line: `PRINCIPALS [namespaces=\"mcpsum\",valid-before=\"YYYYMMDD\"] KEYTYPE BASE64`, as `ssh-keygen(1)` describes under ALLOWED SIGNERS")
        })?;
        Ok(Some(Anchor {
            path,
            source,
            entries,
        }))
    }
}

/// The offset of local time at `at`, for allowed-signers times written without `Z`. `None` when
/// the system cannot say (the time is then refused, not guessed).
fn local_offset(at: time::PrimitiveDateTime) -> Option<time::UtcOffset> {
    time::UtcOffset::local_offset_at(at.assume_utc()).ok()
}

/// The key that made a signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// `SHA256:...`, as `ssh-keygen -l` prints it.
    pub fingerprint: String,
    /// `ED25519`, `ECDSA`, `RSA`, as ssh-keygen names the key type.
    pub kind: String,
    /// The principals of the allowed-signers line that accepted it (when one is in force).
    pub principals: Option<String>,
    /// That line's number.
    pub line: Option<usize>,
}

impl Signer {
    fn of(key: &KeyData) -> Self {
        Self {
            fingerprint: key.fingerprint(HashAlg::Sha256).to_string(),
            kind: kind_name(key),
            principals: None,
            line: None,
        }
    }

    /// `alice@example.com (ED25519 key SHA256:...)`, or the key alone.
    pub fn describe(&self) -> String {
        match &self.principals {
            Some(p) => format!("`{p}` ({} key {})", self.kind, self.fingerprint),
            None => format!("{} key {}", self.kind, self.fingerprint),
        }
    }

    fn to_json(&self) -> Value {
        json!({"fingerprint": self.fingerprint, "keyType": self.kind, "principals": self.principals, "line": self.line})
    }
}

/// ssh-keygen's name for a key's type.
pub fn kind_name(key: &KeyData) -> String {
    match key.algorithm() {
        ssh_key::Algorithm::Ed25519 => "ED25519".to_owned(),
        ssh_key::Algorithm::Ecdsa { .. } => "ECDSA".to_owned(),
        ssh_key::Algorithm::Rsa { .. } => "RSA".to_owned(),
        other => other.as_str().to_owned(),
    }
}

/// Why a signature is not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// There is no `mcp.lock.sig`.
    Unsigned,
    /// `mcp.lock.sig` is not an SSH signature mcpsum can read.
    Unreadable,
    /// The signature does not match the lockfile's bytes: it changed since it was signed.
    Changed,
    /// The key is not in the allowed-signers file (or only as a `cert-authority`).
    UnknownKey,
    /// The signature is for another namespace, or the key's line does not allow `mcpsum`.
    WrongNamespace,
    /// The key's line is outside its `valid-after`/`valid-before` interval.
    Expired,
}

impl Reason {
    /// The reason as JSON output names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Unsigned => "unsigned",
            Reason::Unreadable => "unreadable",
            Reason::Changed => "changed",
            Reason::UnknownKey => "unknown-key",
            Reason::WrongNamespace => "wrong-namespace",
            Reason::Expired => "expired",
        }
    }
}

/// What the signature of a lockfile says.
#[derive(Debug, Clone)]
pub enum State {
    /// A signature over these bytes for `mcpsum`, by a listed key when an anchor is in force.
    Valid(Signer),
    /// No signature, or one that is not accepted: the reason, the key if it could be read,
    /// and what exactly is wrong (one line, without the lockfile's name).
    Invalid {
        /// Why.
        reason: Reason,
        /// The key that made it, if known.
        signer: Option<Signer>,
        /// What is wrong.
        detail: String,
        /// What to do (without the allowed signers' place, which the refusal adds).
        hint: String,
    },
}

/// A lockfile's signature and the allowed-signers file it was judged against.
#[derive(Debug, Clone)]
pub struct Status {
    /// `mcp.lock.sig`.
    pub sig_file: PathBuf,
    /// The allowed-signers file in force, if any.
    pub anchor: Option<Anchor>,
    /// The verdict.
    pub state: State,
}

impl Status {
    /// The key that signed, when the signature is accepted.
    pub fn signer(&self) -> Option<&Signer> {
        match &self.state {
            State::Valid(s) => Some(s),
            State::Invalid { .. } => None,
        }
    }

    /// `valid`, or the reason it is not.
    pub fn state_name(&self) -> &'static str {
        match &self.state {
            State::Valid(_) => "valid",
            State::Invalid { reason, .. } => reason.as_str(),
        }
    }

    /// The JSON form `verify --format json|sarif` carries.
    pub fn to_json(&self) -> Value {
        let (signer, detail) = match &self.state {
            State::Valid(s) => (Some(s), None),
            State::Invalid { signer, detail, .. } => (signer.as_ref(), Some(detail)),
        };
        json!({
            "state": self.state_name(),
            "required": self.anchor.is_some(),
            "file": self.sig_file.display().to_string(),
            "allowedSigners": self.anchor.as_ref().map(|a| a.path.display().to_string()),
            "signer": signer.map(Signer::to_json),
            "reason": detail,
        })
    }

    /// [`Status::to_json`] without the signature file's path, for the CI formats (which name
    /// files relative to the repository, and the signature is always beside the lockfile).
    pub fn to_ci_json(&self) -> Value {
        let mut v = self.to_json();
        if let Some(o) = v.as_object_mut() {
            o.remove("file");
        }
        v
    }

    /// One line for a report: `signed by ...`, `not signed`, or what is wrong.
    pub fn summary(&self) -> String {
        match (&self.state, &self.anchor) {
            (State::Valid(s), Some(a)) => format!(
                "signed by {}, listed in `{}`:{}",
                s.describe(),
                a.path.display(),
                s.line.unwrap_or_default()
            ),
            (State::Valid(s), None) => format!(
                "signed by {} (no allowed-signers file in force to say whose key it is)",
                s.describe()
            ),
            (State::Invalid { detail, .. }, _) => detail.clone(),
        }
    }

    /// The refusal when an allowed-signers file is in force and the signature is not accepted.
    pub fn refusal(&self, lockfile: &Path) -> Option<Error> {
        let anchor = self.anchor.as_ref()?;
        let State::Invalid { detail, hint, .. } = &self.state else {
            return None;
        };
        Some(
            Error::new(format!(
                "`{}` has no valid signature: {detail}",
                lockfile.display()
            ))
            .cause(format!(
                "the allowed signers `{}` ({}) require a signature by a listed key for namespace `{NAMESPACE}`",
                anchor.path.display(),
                anchor.source.how()
            ))
            .hint(hint.replace("ALLOWED_SIGNERS", &format!("`{}`", anchor.path.display()))),
        )
    }
}

/// The signature of the lockfile at `lockfile` whose bytes are `bytes`, judged against the
/// allowed-signers file in force (if any). An error only when that file cannot be used; an
/// unreadable signature is a state, so that without an anchor nothing fails.
pub fn inspect(lockfile: &Path, bytes: &[u8], trust: &Trust) -> Result<Status> {
    let anchor = trust.anchor()?;
    let sig_file = sig_path(lockfile);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let state = judge(&sig_file, bytes, anchor.as_ref(), now);
    Ok(Status {
        sig_file,
        anchor,
        state,
    })
}

/// [`inspect`], refusing (exit 2) when an anchor is in force and the signature is not accepted.
pub fn check(lockfile: &Path, bytes: &[u8], trust: &Trust) -> Result<Status> {
    let status = inspect(lockfile, bytes, trust)?;
    match status.refusal(lockfile) {
        Some(e) => Err(e),
        None => Ok(status),
    }
}

/// [`check`] when an anchor is in force; nothing at all (not even reading the signature) when
/// none is, for commands that only need the refusal (`show`).
pub fn enforce(lockfile: &Path, bytes: &[u8], trust: &Trust) -> Result<()> {
    let Some(anchor) = trust.anchor()? else {
        return Ok(());
    };
    let sig_file = sig_path(lockfile);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let status = Status {
        state: judge(&sig_file, bytes, Some(&anchor), now),
        sig_file,
        anchor: Some(anchor),
    };
    match status.refusal(lockfile) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Reads, checks the signature of ([`check`]) and validates the lockfile, from one read of its
/// bytes: what is verified is what is used.
pub fn load(lockfile: &Path, trust: &Trust) -> Result<(crate::lockfile::Lockfile, Status)> {
    let bytes = crate::lockfile::read_bytes(lockfile)?;
    let status = check(lockfile, &bytes, trust)?;
    let lock = crate::lockfile::load_from_bytes(lockfile, &bytes)?;
    Ok((lock, status))
}

/// After `lock` or `import` wrote the lockfile: if it has a signature that no longer matches,
/// says so and that `mcpsum sign` is next.
pub fn warn_if_stale(lockfile: &Path) {
    let sig_file = sig_path(lockfile);
    if sig_file.symlink_metadata().is_err() {
        return;
    }
    let Ok(bytes) = fs_err::read(lockfile) else {
        return;
    };
    if let State::Invalid { .. } = judge(&sig_file, &bytes, None, 0) {
        crate::output::warn(&format!(
            "`{}` changed, and its signature `{}` no longer matches it; review the change, then run `mcpsum sign` (a listed signer) and commit both files",
            lockfile.display(),
            sig_file.display()
        ));
    }
}

fn invalid(reason: Reason, signer: Option<Signer>, detail: String, hint: &str) -> State {
    State::Invalid {
        reason,
        signer,
        detail,
        hint: hint.to_owned(),
    }
}

const SIGN_HINT: &str = "have a signer listed in ALLOWED_SIGNERS review it and run `mcpsum sign`, then commit `mcp.lock.sig`";

/// The verdict on `sig_file` over `bytes`, in ssh-keygen's order: the signature must read, be
/// for namespace `mcpsum` and match the bytes; then a line of the anchor must list its key,
/// allow the namespace and be valid `now` (SSHSIG carries no time: `valid-before` is checked
/// against the time of verification, as ssh-keygen does without `-Overify-time`).
fn judge(sig_file: &Path, bytes: &[u8], anchor: Option<&Anchor>, now: i64) -> State {
    // Named as it sits beside the lockfile, which every message names in full.
    let shown = sig_file.file_name().map_or_else(
        || sig_file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let text = match fs_err::read(sig_file) {
        Ok(t) => t,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound && sig_file.symlink_metadata().is_err() =>
        {
            return invalid(
                Reason::Unsigned,
                None,
                format!("it is not signed (there is no `{shown}` beside it)"),
                SIGN_HINT,
            );
        }
        Err(e) => {
            return invalid(
                Reason::Unreadable,
                None,
                format!("cannot read `{shown}` ({e})"),
                "make the signature file readable, or sign again with `mcpsum sign`",
            );
        }
    };
    let sig = match SshSig::from_pem(&text) {
        Ok(s) => s,
        Err(e) => {
            return invalid(
                Reason::Unreadable,
                None,
                format!("`{shown}` is not an SSH signature mcpsum can read ({e})"),
                &format!("sign it again: {SIGN_HINT}"),
            );
        }
    };
    let signer = Signer::of(sig.public_key());
    if sig.namespace() != NAMESPACE {
        return invalid(
            Reason::WrongNamespace,
            Some(signer.clone()),
            format!(
                "`{shown}` (by {}) is a signature for namespace `{}`, not `{NAMESPACE}`",
                signer.describe(),
                crate::output::sanitize_line(sig.namespace())
            ),
            &format!(
                "a signature made for another purpose does not sign the lockfile: {SIGN_HINT} (it signs for namespace `{NAMESPACE}`, as `ssh-keygen -Y sign -n {NAMESPACE}` does)"
            ),
        );
    }
    let key = PublicKey::from(sig.public_key().clone());
    if key.verify(NAMESPACE, bytes, &sig).is_err() {
        return invalid(
            Reason::Changed,
            Some(signer.clone()),
            format!(
                "it changed since it was signed (`{shown}` by {} does not match its bytes)",
                signer.describe()
            ),
            &format!(
                "review what changed since the signature (`git log -p` on both files); if the change is expected, {SIGN_HINT}"
            ),
        );
    }
    let Some(anchor) = anchor else {
        return State::Valid(signer);
    };
    let mut refused = Vec::new();
    for entry in &anchor.entries {
        match entry.judge(sig.public_key(), NAMESPACE, now) {
            allowed::Verdict::OtherKey => {}
            allowed::Verdict::Accepted => {
                return State::Valid(Signer {
                    principals: Some(entry.principals.clone()),
                    line: Some(entry.line),
                    ..signer
                });
            }
            allowed::Verdict::Refused(r) => refused.push((entry, r)),
        }
    }
    let place = |e: &allowed::Entry| format!("`{}`:{}", anchor.path.display(), e.line);
    let Some((entry, refusal)) = refused
        .iter()
        .find(|(_, r)| *r != allowed::Refusal::CertAuthority)
        .or_else(|| refused.first())
    else {
        return invalid(
            Reason::UnknownKey,
            Some(signer.clone()),
            format!(
                "it is signed by an unknown key: {} is not in `{}`",
                signer.describe(),
                anchor.path.display()
            ),
            &format!(
                "if you trust that key, add a line for it to ALLOWED_SIGNERS (`PRINCIPAL namespaces=\"{NAMESPACE}\" KEYTYPE BASE64`, the public key from `ssh-keygen -y`); otherwise {SIGN_HINT}"
            ),
        );
    };
    let who = Signer {
        principals: Some(entry.principals.clone()),
        line: Some(entry.line),
        ..signer
    };
    match refusal {
        allowed::Refusal::CertAuthority => invalid(
            Reason::UnknownKey,
            Some(who.clone()),
            format!(
                "it is signed by {}, which {} lists only as a `cert-authority` (it vouches for certificates, it does not sign itself)",
                who.describe(),
                place(entry)
            ),
            &format!("list the key without `cert-authority` in ALLOWED_SIGNERS, or {SIGN_HINT}"),
        ),
        allowed::Refusal::Namespace(ns) => invalid(
            Reason::WrongNamespace,
            Some(who.clone()),
            format!(
                "the key of {} may sign only for namespaces `{}` ({}), not `{NAMESPACE}`",
                who.describe(),
                crate::output::sanitize_line(ns),
                place(entry)
            ),
            &format!(
                "add `{NAMESPACE}` to that line's `namespaces=` in ALLOWED_SIGNERS if the key may sign lockfiles, or {SIGN_HINT}"
            ),
        ),
        allowed::Refusal::Expired(t) => invalid(
            Reason::Expired,
            Some(who.clone()),
            format!(
                "the key of {} expired at {} (`valid-before` in {})",
                who.describe(),
                rfc3339(*t),
                place(entry)
            ),
            &format!(
                "renew the key's `valid-before` in ALLOWED_SIGNERS if it may still sign, or {SIGN_HINT}"
            ),
        ),
        allowed::Refusal::NotYetValid(t) => invalid(
            Reason::Expired,
            Some(who.clone()),
            format!(
                "the key of {} is not valid before {} (`valid-after` in {})",
                who.describe(),
                rfc3339(*t),
                place(entry)
            ),
            &format!(
                "wait until then, correct the `valid-after` in ALLOWED_SIGNERS, or {SIGN_HINT}"
            ),
        ),
    }
}

fn rfc3339(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| t.to_string())
}
