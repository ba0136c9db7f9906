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

mod agent;
pub mod allowed;
mod pattern;
pub mod sign;
pub mod sshsig;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use ssh_key::HashAlg;
use ssh_key::public::KeyData;

use sshsig::SigKey;

use crate::error::{Error, Result};

/// The SSHSIG namespace of a lockfile signature: `ssh-keygen -Y sign -n mcpsum`. A signature
/// made for another purpose (`git` commits, `file`) cannot be passed off as one for the lock.
pub const NAMESPACE: &str = "mcpsum";

/// The environment variable naming the allowed-signers file.
pub const ENV: &str = "MCPSUM_ALLOWED_SIGNERS";

/// `$XDG_CONFIG_HOME/mcpsum/allowed_signers` (default `~/.config/mcpsum/allowed_signers`).
fn default_anchor_path() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| crate::paths::home_dir().map(|h| h.join(".config")))
        .map(|c| c.join("mcpsum/allowed_signers"))
}

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

    /// [`Trust::anchor`] for judging `lockfile`, refusing an allowed-signers file that the
    /// lockfile's own project holds. A flag or a variable can come from a client config that the
    /// repository itself carries (`.vscode/mcp.json`, `.cursor/mcp.json`), so a file they name
    /// inside that repository would let whoever can change the lockfile also choose who may
    /// sign it. The repository is the git work tree holding the lockfile; the home itself kept
    /// in git (dotfiles) is not one a clone brings.
    pub fn anchor_for(&self, lockfile: &Path) -> Result<Option<Anchor>> {
        let Some(anchor) = self.anchor()? else {
            return Ok(None);
        };
        if anchor.source == Source::Config {
            return Ok(Some(anchor));
        }
        let real = |p: &Path| fs_err::canonicalize(p).ok();
        let (Some(file), Some(folder)) = (
            real(&anchor.path),
            lockfile
                .parent()
                .map(|d| {
                    if d.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        d
                    }
                })
                .and_then(real),
        ) else {
            return Ok(Some(anchor));
        };
        if default_anchor_path().and_then(|d| real(&d)).as_ref() == Some(&file) {
            return Ok(Some(anchor));
        }
        let home = crate::paths::home_dir().and_then(|h| real(&h));
        let Some(project) = folder
            .ancestors()
            .find(|d| d.join(".git").symlink_metadata().is_ok())
        else {
            return Ok(Some(anchor));
        };
        if !file.starts_with(project) || home.as_deref() == Some(project) {
            return Ok(Some(anchor));
        }
        Err(Error::new(format!(
            "the allowed signers `{}` ({}) are inside the git work tree `{}` that holds `{}`; a trust anchor must come from outside what it vouches for",
            anchor.path.display(),
            anchor.source.how(),
            project.display(),
            lockfile.display()
        ))
        .hint(format!(
            "keep the allowed-signers file outside the repository (`~/.config/mcpsum/allowed_signers`, or a path your organisation manages) and point `--allowed-signers` or `{ENV}` there, or unset them"
        )))
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
            let Some(path) = default_anchor_path() else {
                return Ok(None);
            };
            (path, Source::Config)
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
                .cause(crate::fsutil::without_path(&e, &path))
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
    /// The certificate the signature carries, if it was made with one.
    pub certificate: Option<CertInfo>,
}

/// What names an SSH certificate: its key id, serial and the CA that signed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// `-I` of `ssh-keygen -s`.
    pub key_id: String,
    /// Its serial number.
    pub serial: u64,
    /// The CA key's `SHA256:...` fingerprint.
    pub ca: String,
}

impl Signer {
    /// A plain key.
    pub fn of(key: &KeyData) -> Self {
        Self {
            fingerprint: key.fingerprint(HashAlg::Sha256).to_string(),
            kind: kind_name(key),
            principals: None,
            line: None,
            certificate: None,
        }
    }

    /// The key of a signature: for a certificate its subject key (`ED25519-CERT`, as
    /// ssh-keygen names it) and what names the certificate.
    pub(crate) fn of_sig(key: &SigKey) -> Self {
        match key {
            SigKey::Plain(k) => Self::of(k),
            SigKey::Cert(c) => Self {
                kind: format!("{}-CERT", kind_name(c.public_key())),
                certificate: Some(CertInfo {
                    key_id: crate::text::sanitize_line(c.key_id()),
                    serial: c.serial(),
                    ca: c.signature_key().fingerprint(HashAlg::Sha256).to_string(),
                }),
                ..Self::of(c.public_key())
            },
        }
    }

    /// `alice@example.com (ED25519 key SHA256:...)`, or the key alone; a certificate's id and
    /// CA follow.
    pub fn describe(&self) -> String {
        let cert = self.certificate.as_ref().map_or_else(String::new, |c| {
            format!(", certificate `{}` by CA key {}", c.key_id, c.ca)
        });
        match &self.principals {
            Some(p) => format!("`{p}` ({} key {}{cert})", self.kind, self.fingerprint),
            None => format!("{} key {}{cert}", self.kind, self.fingerprint),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "fingerprint": self.fingerprint,
            "keyType": self.kind,
            "principals": self.principals,
            "line": self.line,
            "certificate": self.certificate.as_ref().map(|c| json!({"keyId": c.key_id, "serial": c.serial, "ca": c.ca})),
        })
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
    /// The key's line is outside its `valid-after`/`valid-before` interval, or the
    /// certificate outside its validity window.
    Expired,
    /// The certificate lists no principal that the `cert-authority` line of its CA allows, or
    /// it is not a user certificate.
    Principal,
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
            Reason::Principal => "principal",
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
    let anchor = trust.anchor_for(lockfile)?;
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

/// [`check`] when an anchor is in force, while `work` runs on this thread (the parse of the
/// same bytes, and whatever can be prepared from it without showing anything); nothing at all
/// (not even reading the signature) when none is, for commands that only need the refusal
/// (`show`). `work` is told whether a check runs beside it. A refusal comes before whatever
/// `work` returned.
pub fn enforce<T>(
    lockfile: &Path,
    bytes: &[u8],
    trust: &Trust,
    work: impl FnOnce(bool) -> T,
) -> Result<T> {
    let Some(anchor) = trust.anchor_for(lockfile)? else {
        return Ok(work(false));
    };
    let sig_file = sig_path(lockfile);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let (state, done) = alongside(
        true,
        || judge(&sig_file, bytes, Some(&anchor), now),
        || work(true),
    );
    let status = Status {
        state,
        sig_file,
        anchor: Some(anchor),
    };
    match status.refusal(lockfile) {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

/// Reads, checks the signature of ([`check`]) and validates the lockfile, from one read of its
/// bytes: what is verified is what is used. The check runs beside the parse when there is a
/// signature to check.
pub fn load(lockfile: &Path, trust: &Trust) -> Result<(crate::lockfile::Lockfile, Status)> {
    let bytes = crate::lockfile::read_bytes(lockfile)?;
    let bytes: &[u8] = &bytes;
    let anchor = trust.anchor_for(lockfile)?;
    let sig_file = sig_path(lockfile);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let (state, lock) = alongside(
        sig_file.symlink_metadata().is_ok(),
        || judge(&sig_file, bytes, anchor.as_ref(), now),
        || crate::lockfile::load_from_bytes(lockfile, bytes),
    );
    let status = Status {
        sig_file,
        anchor,
        state,
    };
    if let Some(e) = status.refusal(lockfile) {
        return Err(e);
    }
    Ok((lock?, status))
}

/// `check()` and `work()`: with `parallel`, `check` on a thread of its own while `work` runs
/// on this one. Checking a signature hashes the whole lockfile (0.78 MB: 0.43 ms with SHA-256,
/// 1.3 ms with SHA-512, which no CPU instruction speeds up here), about as long as parsing it
/// takes, so side by side the check adds little more than the thread's start to the wall time.
fn alongside<C: Send, T>(
    parallel: bool,
    check: impl FnOnce() -> C + Send,
    work: impl FnOnce() -> T,
) -> (C, T) {
    if !parallel {
        let c = check();
        return (c, work());
    }
    let here = nix::sched::sched_getcpu().ok();
    std::thread::scope(|s| {
        let handle = s.spawn(move || {
            elsewhere(here);
            check()
        });
        // A new thread placed on this processor waits until this one blocks: the turn given
        // here lets it start and move itself to another one ([`elsewhere`]).
        std::thread::yield_now();
        let done = work();
        match handle.join() {
            Ok(c) => (c, done),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Moves the calling thread off processor `cpu` (the spawning thread's), when another one is
/// allowed: a new thread is often placed on its parent's processor and then takes turns with it
/// instead of running beside it, while the other one idles (seen on 2-CPU machines: the hash
/// ran while the parse waited). Best effort: the thread stays where it is when this fails.
fn elsewhere(cpu: Option<usize>) {
    use nix::sched::{sched_getaffinity, sched_setaffinity};
    use nix::unistd::Pid;
    let (Some(cpu), Ok(mut set)) = (cpu, sched_getaffinity(Pid::from_raw(0))) else {
        return;
    };
    let others = (0..nix::sched::CpuSet::count())
        .filter(|&c| c != cpu && set.is_set(c).unwrap_or(false))
        .count();
    if others > 0 && set.unset(cpu).is_ok() {
        let _ = sched_setaffinity(Pid::from_raw(0), &set);
    }
}

/// The lockfile's signature file, when there is one that no longer matches the lockfile's
/// bytes (judged without an anchor: whether it matches, not whom it trusts).
fn stale_signature(lockfile: &Path) -> Option<PathBuf> {
    let sig_file = sig_path(lockfile);
    sig_file.symlink_metadata().ok()?;
    let bytes = fs_err::read(lockfile).ok()?;
    matches!(judge(&sig_file, &bytes, None, 0), State::Invalid { .. }).then_some(sig_file)
}

/// Before a command changes the lockfile: if it has a signature that already no longer matches
/// it, says so, so that the warning after the write is not read as this command's change alone
/// (signing then would vouch for whatever else changed, another person's edit among it).
pub fn warn_if_stale_before(lockfile: &Path) {
    if let Some(sig_file) = stale_signature(lockfile) {
        crate::output::warn(&format!(
            "`{}` had already changed since `{}` signed it, before this command: the next `mcpsum sign` vouches for that change too; review the whole change since the signature (`git diff` of `{}` against the signed commit), not only this command's",
            lockfile.display(),
            sig_file.display(),
            lockfile.display()
        ));
    }
}

/// After a command wrote the lockfile (`lock`, `import`, `remove`, `suggest-policy --write`,
/// `sandbox suggest --write`), once: a warning when it has no valid signature:
/// with an allowed-signers file in force, that proxies refuse its servers until a signer it
/// lists runs `mcpsum sign` (a new lockfile is unsigned, a changed one no longer matches);
/// without one, only a signature that no longer matches (`warn_if_stale`). An anchor that
/// cannot be read is left to the next command that needs it, which refuses naming it.
pub fn warn_after_write(lockfile: &Path, trust: &Trust) {
    let Ok(Some(anchor)) = trust.anchor_for(lockfile) else {
        return warn_if_stale(lockfile);
    };
    let Ok(bytes) = fs_err::read(lockfile) else {
        return;
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    if let State::Invalid { detail, .. } = judge(&sig_path(lockfile), &bytes, Some(&anchor), now) {
        crate::output::warn(&format!(
            "`{}` has no valid signature: {detail}; the allowed signers `{}` ({}) are in force, so proxies will refuse its servers until a signer listed there reviews it and runs `mcpsum sign`, then commits `{}`",
            lockfile.display(),
            anchor.path.display(),
            anchor.source.how(),
            sig_path(lockfile).display()
        ));
    }
}

/// Without an anchor, after a write: if the lockfile has a signature that no longer matches,
/// says so and that `mcpsum sign` is next.
fn warn_if_stale(lockfile: &Path) {
    if let Some(sig_file) = stale_signature(lockfile) {
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
    // The lockfile's name: the signature's without `.sig` (`sig_path`).
    let lock = shown.strip_suffix(".sig").unwrap_or("mcp.lock");
    let sign_hint = format!(
        "have a signer listed in ALLOWED_SIGNERS review it and run `mcpsum sign`, then commit `{shown}`"
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
                &sign_hint,
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
    let sig = match sshsig::parse(&text) {
        Ok(s) => s,
        Err(e) if e.private_key => {
            return invalid(
                Reason::Unreadable,
                None,
                format!(
                    "`{shown}` holds a private key where the signature belongs: whoever could read the file has that key, so treat it as leaked"
                ),
                &format!(
                    "make a new key and stop trusting the old one (take it out of ALLOWED_SIGNERS, `authorized_keys` and wherever else it is listed); delete `{shown}`, and if it was ever committed, remove it from git's history (e.g. `git filter-repo --invert-paths --path {shown}`) and have every clone fetch the rewritten history; then sign with the new key: `mcpsum sign --key NEW_KEY`"
                ),
            );
        }
        Err(e) if e.junk => {
            return invalid(
                Reason::Unreadable,
                None,
                format!(
                    "`{shown}` is not an SSH signature: it {e}; expected an armored `-----BEGIN SSH SIGNATURE-----` block, as `mcpsum sign` and `ssh-keygen -Y sign -n {NAMESPACE}` write"
                ),
                &format!(
                    "make it again: have a signer listed in ALLOWED_SIGNERS review the lockfile and run `mcpsum sign` (or `ssh-keygen -Y sign -n {NAMESPACE} -f KEY {lock}`), then commit `{shown}`"
                ),
            );
        }
        Err(e) => {
            return invalid(
                Reason::Unreadable,
                None,
                format!("`{shown}` is an SSH signature mcpsum does not accept: it {e}"),
                &e.hint
                    .clone()
                    .unwrap_or_else(|| format!("sign it again: {sign_hint}")),
            );
        }
    };
    let signer = Signer::of_sig(&sig.key);
    if sig.namespace != NAMESPACE {
        return invalid(
            Reason::WrongNamespace,
            Some(signer.clone()),
            format!(
                "`{shown}` (by {}) is a signature for namespace `{}`, not `{NAMESPACE}`",
                signer.describe(),
                crate::text::sanitize_line(&sig.namespace)
            ),
            &format!(
                "a signature made for another purpose does not sign the lockfile: {sign_hint} (it signs for namespace `{NAMESPACE}`, as `ssh-keygen -Y sign -n {NAMESPACE}` does)"
            ),
        );
    }
    if let Some(why) = sshsig::weak_key(sig.key.key()) {
        return invalid(
            Reason::Unreadable,
            Some(signer.clone()),
            format!("`{shown}` (by {}) is made with {why}", signer.describe()),
            &format!(
                "sign it again with an Ed25519, ECDSA or RSA key of 2048 bits or more: {sign_hint}"
            ),
        );
    }
    let signed = sshsig::signed_data(&sig, bytes);
    if !signed.is_some_and(|d| sshsig::verify(sig.key.key(), &d, &sig.signature)) {
        return invalid(
            Reason::Changed,
            Some(signer.clone()),
            format!(
                "it changed since it was signed (`{shown}` by {} does not match its bytes)",
                signer.describe()
            ),
            &format!(
                "review what changed since the signature (`git log -p` on both files); if the change is expected, {sign_hint}"
            ),
        );
    }
    let Some(anchor) = anchor else {
        return State::Valid(signer);
    };
    let mut refused = Vec::new();
    for entry in &anchor.entries {
        match entry.judge(&sig.key, NAMESPACE, now) {
            allowed::Verdict::OtherKey => {}
            allowed::Verdict::Accepted(matched) => {
                return State::Valid(Signer {
                    principals: Some(matched.unwrap_or_else(|| entry.principals.clone())),
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
        if let SigKey::Cert(cert) = &sig.key {
            return untrusted_certificate(cert, signer, anchor, &sign_hint);
        }
        return invalid(
            Reason::UnknownKey,
            Some(signer.clone()),
            format!(
                "it is signed by an unknown key: {} is not in `{}`",
                signer.describe(),
                anchor.path.display()
            ),
            &format!(
                "if you trust that key, add a line for it to ALLOWED_SIGNERS (`PRINCIPAL namespaces=\"{NAMESPACE}\" KEYTYPE BASE64`, the public key from `ssh-keygen -y`); otherwise {sign_hint}"
            ),
        );
    };
    let who = Signer {
        principals: Some(entry.principals.clone()),
        line: Some(entry.line),
        ..signer
    };
    let cert_id = who
        .certificate
        .as_ref()
        .map_or_else(String::new, |c| c.key_id.clone());
    match refusal {
        allowed::Refusal::CertNotUser => invalid(
            Reason::Principal,
            Some(who.clone()),
            format!(
                "it is signed with the host certificate `{cert_id}` by a CA that {} trusts; only a user certificate can sign",
                place(entry)
            ),
            &format!(
                "sign with a user certificate (`ssh-keygen -s CA_KEY -I ID -n PRINCIPAL KEY.pub`, without `-h`), or {sign_hint}"
            ),
        ),
        allowed::Refusal::CertNotYetValid(t) => invalid(
            Reason::Expired,
            Some(who.clone()),
            format!(
                "it is signed with the certificate `{cert_id}` (by the CA {} trusts), which is not valid before {}",
                place(entry),
                rfc3339(i64::try_from(*t).unwrap_or(i64::MAX))
            ),
            &format!(
                "wait until then, or have the CA issue a certificate valid now and sign again; or {sign_hint}"
            ),
        ),
        allowed::Refusal::CertExpired(t) => invalid(
            Reason::Expired,
            Some(who.clone()),
            format!(
                "it is signed with the certificate `{cert_id}` (by the CA {} trusts), which expired at {}",
                place(entry),
                rfc3339(i64::try_from(*t).unwrap_or(i64::MAX))
            ),
            &format!(
                "have the CA issue a new certificate (`ssh-keygen -s CA_KEY -V ...`) and sign again; or {sign_hint}"
            ),
        ),
        allowed::Refusal::CertNoPrincipals => invalid(
            Reason::Principal,
            Some(who.clone()),
            format!(
                "it is signed with the certificate `{cert_id}` (by the CA {} trusts), which lists no principals (ssh-keygen accepts no such certificate)",
                place(entry)
            ),
            &format!(
                "have the CA certify the signer's principal (`ssh-keygen -s CA_KEY -n PRINCIPAL`) and sign again; or {sign_hint}"
            ),
        ),
        allowed::Refusal::CertPrincipal(names) => invalid(
            Reason::Principal,
            Some(who.clone()),
            format!(
                "it is signed with the certificate `{cert_id}` for principals `{}`, none of which {} allows (`{}`)",
                crate::text::sanitize_line(&names.join(",")),
                place(entry),
                crate::text::sanitize_line(&entry.principals)
            ),
            &format!(
                "have the CA certify a principal that line allows (`ssh-keygen -s CA_KEY -n PRINCIPAL`), or add the principal to that line in ALLOWED_SIGNERS; or {sign_hint}"
            ),
        ),
        allowed::Refusal::CertAuthority => invalid(
            Reason::UnknownKey,
            Some(who.clone()),
            format!(
                "it is signed by {}, which {} lists only as a `cert-authority` (it vouches for certificates, it does not sign itself)",
                who.describe(),
                place(entry)
            ),
            &format!("list the key without `cert-authority` in ALLOWED_SIGNERS, or {sign_hint}"),
        ),
        allowed::Refusal::Namespace(ns) => invalid(
            Reason::WrongNamespace,
            Some(who.clone()),
            format!(
                "the key of {} may sign only for namespaces `{}` ({}), not `{NAMESPACE}`",
                who.describe(),
                crate::text::sanitize_line(ns),
                place(entry)
            ),
            &format!(
                "add `{NAMESPACE}` to that line's `namespaces=` in ALLOWED_SIGNERS if the key may sign lockfiles, or {sign_hint}"
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
                "renew the key's `valid-before` in ALLOWED_SIGNERS if it may still sign, or {sign_hint}"
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
                "wait until then, correct the `valid-after` in ALLOWED_SIGNERS, or {sign_hint}"
            ),
        ),
    }
}

/// A signature made with a certificate that no `cert-authority` line of the anchor accepts or
/// refuses: its CA is not listed as one. A line naming its subject key, or its CA key, without
/// `cert-authority` does not accept it (as ssh-keygen does not): the message says so.
fn untrusted_certificate(
    cert: &sshsig::Cert,
    signer: Signer,
    anchor: &Anchor,
    sign_hint: &str,
) -> State {
    let ca = cert.signature_key().fingerprint(HashAlg::Sha256);
    let id = signer
        .certificate
        .as_ref()
        .map_or_else(String::new, |c| c.key_id.clone());
    let plain = |key: &KeyData| {
        anchor
            .entries
            .iter()
            .find(|e| !e.cert_authority && e.key.key_data() == key)
    };
    let place = |e: &allowed::Entry| format!("`{}`:{}", anchor.path.display(), e.line);
    let (detail, hint) = if let Some(e) = plain(cert.public_key()) {
        (
            format!(
                "it is signed with the certificate `{id}` (by CA key {ca}) for a key that {} lists as a plain key; a certificate is accepted only through a `cert-authority` line for its CA",
                place(e)
            ),
            format!(
                "sign with the plain key (`mcpsum sign --key KEY`, not its `-cert.pub`), or add `PRINCIPALS cert-authority CA_KEY` to ALLOWED_SIGNERS if you trust its CA; or {sign_hint}"
            ),
        )
    } else if let Some(e) = plain(cert.signature_key()) {
        (
            format!(
                "it is signed with the certificate `{id}` by CA key {ca}, which {} lists without `cert-authority` (such a line accepts that key's own signatures, not certificates it signed)",
                place(e)
            ),
            format!(
                "add `cert-authority` to that line's options in ALLOWED_SIGNERS if the CA may vouch for signers; or {sign_hint}"
            ),
        )
    } else {
        (
            format!(
                "it is signed with the certificate `{id}` by CA key {ca}, which no `cert-authority` line in `{}` lists: the CA is not trusted",
                anchor.path.display()
            ),
            format!(
                "if you trust that CA, add `PRINCIPALS cert-authority KEYTYPE BASE64` (the CA's public key) to ALLOWED_SIGNERS; otherwise {sign_hint}"
            ),
        )
    };
    invalid(Reason::UnknownKey, Some(signer), detail, &hint)
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
