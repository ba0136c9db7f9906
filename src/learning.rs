//! Learn mode (#18): `mcpsum proxy --learn` runs a server without its sandbox while the
//! guard (`mcpsum-sandbox`'s `learn` module) records what its whole process tree opens,
//! executes and creates, and a recording egress proxy learns the hosts it asks for by name.
//! Observations accumulate per server in `<state>/learn/<server>.jsonl` until
//! `mcpsum sandbox suggest --name X --reset`. This module owns that file, the recording proxy,
//! and [`suggest`]: observations → a `policy.sandbox` proposal a person reviews (it never
//! edits `mcp.lock`).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcpsum_sandbox::Observation;

/// The folder of the observation files, below the state directory.
pub const LEARN_DIR: &str = "learn";

/// The observation file of `server`.
pub fn observation_file(state_dir: &Path, server: &str) -> PathBuf {
    state_dir.join(LEARN_DIR).join(format!("{server}.jsonl"))
}

/// The observation file of `server`, its folder made (0700) if needed.
pub fn ensure_observation_file(state_dir: &Path, server: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = state_dir.join(LEARN_DIR);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    Ok(observation_file(state_dir, server))
}

/// Reads the observations of `server`: none when it was never learned.
pub fn load(state_dir: &Path, server: &str) -> Result<Vec<Observation>, String> {
    let file = observation_file(state_dir, server);
    match fs_err::read_to_string(&file) {
        Ok(text) => Ok(mcpsum_sandbox::read_observations(&text).0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e.to_string()),
    }
}

/// A learning session's recording egress proxy; it stops when this drops.
pub struct Recorder {
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

/// Alive as long as the server it records; nothing to finish once it runs.
impl crate::mcp::process::Companion for Recorder {}

/// Starts learning for `server`: notes in the audit log that this session is a learning one,
/// and starts the recording egress proxy on a loopback port of the host, whose address the
/// returned variables give the server (as the sandbox's allow mode does). Each `CONNECT` is
/// let through whatever it names, audited, and recorded as an [`Observation::Host`].
pub fn start(
    server: &str,
    observations: &Path,
) -> Result<(Vec<(OsString, OsString)>, Recorder), String> {
    let state_dir = crate::paths::ensure_state_dir().map_err(|e| e.one_line())?;
    let session = crate::session::current().id;
    let audit = Arc::new(
        crate::audit::AuditLog::open(&state_dir, &session, server).map_err(|e| e.one_line())?,
    );
    audit
        .record(
            "learn",
            serde_json::json!({"observations": observations.display().to_string(), "sandbox": "off while learning"}),
        )
        .map_err(|e| format!("cannot write the audit log: {e}"))?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| format!("learning egress proxy: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("learning egress proxy: {e}"))?
        .port();
    let out = Arc::new(std::sync::Mutex::new(append(observations)?));
    write_observation(
        &out,
        &Observation::Proxy {
            addr: format!("127.0.0.1:{port}"),
        },
    );
    let handle = tokio::runtime::Handle::current();
    let _in_runtime = handle.enter();
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("learning egress proxy: {e}"))?;
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| format!("learning egress proxy: {e}"))?;
    let empty = mcpsum_egress::Allowlist::parse(&[]).map_err(|_| "empty allowlist".to_owned())?;
    let mut config = mcpsum_egress::EgressConfig::new(server, session, empty);
    config.learn = true;
    let sink: mcpsum_egress::AuditSink = Arc::new(move |record| {
        if let Some(target) = &record.target {
            write_observation(
                &out,
                &Observation::Host {
                    target: target.clone(),
                    resolved: record.resolved.clone(),
                },
            );
        }
        let value = serde_json::to_value(record).map_err(std::io::Error::other)?;
        audit.append_raw(&value)
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    handle.spawn(mcpsum_egress::serve(
        listener,
        Arc::new(config),
        Arc::new(mcpsum_egress::SystemResolver),
        sink,
        async move {
            let _ = rx.await;
        },
    ));
    let env = mcpsum_sandbox::egress_environment(port);
    Ok((env, Recorder { _shutdown: tx }))
}

fn append(file: &Path) -> Result<fs_err::File, String> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(file)
        .map_err(|e| e.to_string())
}

fn write_observation(out: &std::sync::Mutex<fs_err::File>, o: &Observation) {
    use std::io::Write;
    if let (Ok(mut line), Ok(mut f)) = (serde_json::to_vec(o), out.lock()) {
        line.push(b'\n');
        let _ = f.write_all(&line);
    }
}

/// What is already granted without any policy entry, and what must never be proposed.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// `$HOME` (written `~`).
    pub home: Option<PathBuf>,
    /// Every person's home (never proposed whole, nor an ancestor of one).
    pub homes: Vec<PathBuf>,
    /// Readable without a policy entry: the runtime base, the command's and interpreter's
    /// prefixes, the per-server caches (host paths, real).
    pub granted_read: Vec<PathBuf>,
    /// Writable without a policy entry.
    pub granted_write: Vec<PathBuf>,
    /// The shared temporary folders (`/tmp`, `/var/tmp`, `/dev/shm`): the sandbox gives a
    /// private `${TMP}` (`TMPDIR`) instead, so what a server creates right in them is left out.
    pub tmp: Vec<PathBuf>,
    /// Secrets: the credential paths below every home, the TLS key folders.
    pub secrets: Vec<PathBuf>,
    /// Paths no write rule may cover (the lockfile, its folder, the state directory, the
    /// binary): a write there is reported, never proposed.
    pub protected: Vec<PathBuf>,
}

/// One proposed entry and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Proposed {
    /// The entry as it goes into the policy (`~/…` below `$HOME`).
    pub entry: String,
    /// Why, for the text form.
    pub why: String,
}

/// A proposal: the entries, and what was left out and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Suggestion {
    /// `filesystem.read`.
    pub read: Vec<Proposed>,
    /// `filesystem.write`.
    pub write: Vec<Proposed>,
    /// `network.allow`.
    pub allow: Vec<Proposed>,
    /// Left out because it looks secret (or would cover a protected path): review these.
    pub warnings: Vec<String>,
    /// Left out for another reason (granted already, a failed lookup, a direct connection).
    pub notes: Vec<String>,
}

impl Suggestion {
    /// The `policy.sandbox` object to paste (secrets are never in it).
    pub fn policy(&self) -> serde_json::Value {
        let list = |v: &[Proposed]| v.iter().map(|p| p.entry.clone()).collect::<Vec<_>>();
        serde_json::json!({
            "filesystem": {"read": list(&self.read), "write": list(&self.write)},
            "network": {"allow": list(&self.allow)},
        })
    }
}

/// What the kind of a collapsed folder is, for the explanation.
fn root_kind(dir: &Path) -> Option<&'static str> {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if dir.join("pyvenv.cfg").is_file() {
        Some("a Python virtual environment")
    } else if name == "node_modules" {
        Some("a Node package tree (`node_modules`)")
    } else if dir.join(".git").exists() {
        Some("a git repository (the project's folder)")
    } else if (dir.join("bin").is_dir() && has_child_prefix(&dir.join("lib"), "python"))
        || dir.join("lib/node_modules").is_dir()
    {
        Some("an interpreter's install prefix")
    } else {
        None
    }
}

fn has_child_prefix(dir: &Path, prefix: &str) -> bool {
    fs_err::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
    })
}

/// The known root `path` lies in (nearest first; the outermost `node_modules`), if any.
fn known_root(path: &Path) -> Option<(PathBuf, &'static str)> {
    let mut outer_modules = None;
    for a in path.ancestors().skip(1) {
        if a.file_name().is_some_and(|n| n == "node_modules") {
            outer_modules = Some(a.to_path_buf());
        }
    }
    if let Some(m) = outer_modules {
        return Some((m, "a Node package tree (`node_modules`)"));
    }
    path.ancestors()
        .skip(1)
        .find_map(|a| root_kind(a).map(|k| (a.to_path_buf(), k)))
}

impl Context {
    fn is_home_or_above(&self, p: &Path) -> bool {
        self.homes
            .iter()
            .chain(&self.home)
            .any(|h| h.starts_with(p))
    }

    /// Whether a folder rule `p` is one a person would write: never `/`, a home or an ancestor
    /// of one, a whole top-level folder, `/etc` or below it, nor anything holding a secret or
    /// (for writes) a protected path.
    fn folder_ok(&self, p: &Path, write: bool) -> bool {
        let system = mcpsum_sandbox::is_system_folder(p);
        let home_shared = self.homes.iter().chain(&self.home).any(|h| {
            HOME_SHARED_DIRS
                .iter()
                .any(|d| h.join(d).starts_with(p) && p.starts_with(h))
        });
        let too_wide = p.components().count() <= 2
            || system
            || home_shared
            || self.is_home_or_above(p)
            || p.starts_with("/etc");
        let holds_secret = self.secrets.iter().any(|s| s.starts_with(p));
        let holds_protected = write && self.protected.iter().any(|s| s.starts_with(p));
        !(too_wide || holds_secret || holds_protected)
    }

    /// A temporary right in a shared temporary folder (`/tmp/tmpab12cd`), or the folder
    /// itself: what a server puts in `TMPDIR`, which the sandbox makes private. Deeper paths
    /// (a project kept below `/tmp`) are paths like any other.
    fn in_shared_tmp(&self, p: &Path) -> bool {
        self.tmp
            .iter()
            .any(|t| p == t || p.parent() == Some(t.as_path()))
    }

    fn secret(&self, p: &Path) -> bool {
        self.secrets.iter().any(|s| p.starts_with(s))
    }

    fn shown(&self, p: &Path) -> String {
        if let Some(home) = &self.home
            && let Ok(rel) = p.strip_prefix(home)
            && !rel.as_os_str().is_empty()
        {
            return format!("~/{}", rel.display());
        }
        p.display().to_string()
    }
}

/// Folders of a home that hold every application's settings (and so, sooner or later, tokens).
const HOME_SHARED_DIRS: &[&str] = &[
    ".config",
    ".local",
    ".local/share",
    ".local/state",
    ".cache",
];

/// `path` made real: the path itself where it exists, else its folder's real path and its name
/// (a file created and removed again, a lock renamed away).
fn real_or_parent(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = fs_err::canonicalize(path) {
        return Some(real);
    }
    let parent = fs_err::canonicalize(path.parent()?).ok()?;
    Some(parent.join(path.file_name()?))
}

/// Up to `n` names of `set`, quoted, then how many more.
fn some_names(set: &BTreeSet<String>, n: usize) -> String {
    let mut out: Vec<String> = set.iter().take(n).map(|n| format!("`{n}`")).collect();
    if set.len() > n {
        out.push(format!("{} more", set.len() - n));
    }
    out.join(", ")
}

/// Why a write rule is proposed.
#[derive(Default)]
struct WriteWhy {
    /// Names it created, removed or renamed right in the folder.
    changed: BTreeSet<String>,
    /// Folders it made right in the folder.
    made: BTreeSet<String>,
    /// Files it wrote that existed (for an exact file rule).
    exact: bool,
    /// A folder that exists, itself written (not an entry in it).
    dir_written: bool,
    /// A folder it created, kept as itself because the folder it was made in is too wide.
    created_itself: Option<PathBuf>,
}

impl WriteWhy {
    fn is_folder(&self) -> bool {
        !self.exact || !self.changed.is_empty() || !self.made.is_empty()
    }

    fn text(&self) -> String {
        if let Some(parent) = &self.created_itself {
            return format!(
                "a folder it created, granted as itself (and what is below it): the folder it was made in, `{}`, is too wide to grant, so this one must exist before a sandboxed start",
                parent.display()
            );
        }
        if self.dir_written && self.changed.is_empty() && self.made.is_empty() {
            return "a folder it wrote to, granted with what is below it".into();
        }
        if self.exact && self.changed.is_empty() && self.made.is_empty() {
            return "a file it wrote (this file only: it created, removed or renamed nothing beside it)".into();
        }
        let mut parts = Vec::new();
        if !self.changed.is_empty() {
            parts.push(format!(
                "it created, removed or renamed files right in this folder ({})",
                some_names(&self.changed, 4)
            ));
        }
        if !self.made.is_empty() {
            parts.push(format!(
                "it made the folder(s) {} in it",
                some_names(&self.made, 4)
            ));
        }
        format!(
            "a folder: {}; a sandbox grants that only on the whole folder, what is below it included",
            parts.join(", and ")
        )
    }
}

/// Whether a write rule on `dir` covers a git repository's hooks or configuration (code that
/// runs the next time a person uses git there).
fn covers_git_hooks(dir: &Path) -> bool {
    let in_git = dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == ".git"));
    match in_git {
        Some(git) => dir == git || dir.starts_with(git.join("hooks")),
        None => dir.join(".git").exists(),
    }
}

/// The temporary folders the server made right in a shared temporary folder
/// (`/tmp/tmpab12cd`, made by `mkdtemp`): in the sandbox they are made in its private `${TMP}`
/// instead, so nothing below them is proposed.
fn own_temporaries(
    ctx: &Context,
    mkdirs: &BTreeSet<PathBuf>,
    entries: &BTreeSet<PathBuf>,
) -> Vec<PathBuf> {
    mkdirs
        .iter()
        .chain(entries)
        .filter(|p| ctx.tmp.iter().any(|t| p.parent() == Some(t.as_path())))
        .cloned()
        .collect()
}

/// Turns observations into a proposal (see the module docs and the README's "Learn mode").
pub fn suggest(observations: &[Observation], ctx: &Context) -> Suggestion {
    let mut s = Suggestion::default();
    let mut reads: BTreeSet<PathBuf> = BTreeSet::new();
    let mut writes: BTreeSet<PathBuf> = BTreeSet::new();
    let mut entries: BTreeSet<PathBuf> = BTreeSet::new();
    let mut mkdirs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut failed = 0usize;
    let mut proxy_addrs: BTreeSet<String> = BTreeSet::new();
    let mut direct: BTreeSet<String> = BTreeSet::new();
    let mut hosts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for o in observations {
        match o {
            Observation::Read { path } => match fs_err::canonicalize(path) {
                Ok(real) => {
                    reads.insert(real);
                }
                Err(_) => failed += 1,
            },
            Observation::Exec { path } => match fs_err::canonicalize(path) {
                Ok(real) => {
                    if let Some(interp) = interpreter_of(&real) {
                        reads.insert(interp);
                    }
                    reads.insert(real);
                }
                Err(_) => failed += 1,
            },
            Observation::Write { path } => match real_or_parent(path) {
                Some(real) => {
                    writes.insert(real);
                }
                None => failed += 1,
            },
            Observation::Entry { path } => {
                if let Some(real) = real_or_parent(path) {
                    entries.insert(real);
                }
            }
            Observation::Mkdir { path } => match real_or_parent(path) {
                Some(real) => {
                    mkdirs.insert(real);
                }
                None => failed += 1,
            },
            Observation::Connect { addr } => {
                direct.insert(addr.clone());
            }
            Observation::Proxy { addr } => {
                proxy_addrs.insert(addr.clone());
            }
            // glibc asks nscd for users and hosts first and falls back when it is refused.
            Observation::Unix { path } if path.ends_with("nscd/socket") => s.notes.push(format!(
                "connected to `{}` (glibc's name service cache): refused in the sandbox, where glibc falls back to the files; left out",
                path.display()
            )),
            Observation::Unix { path } => s.warnings.push(format!(
                "connected to the Unix socket `{}`: every sandbox refuses Unix sockets (an agent or Docker socket would be a way out); left out",
                path.display()
            )),
            Observation::Host { target, resolved } => {
                let e = hosts.entry(target.to_ascii_lowercase()).or_default();
                e.extend(resolved.iter().cloned());
            }
        }
    }
    if failed > 0 {
        s.notes.push(format!(
            "{failed} lookup{} of paths that do not exist (probes that failed) left out",
            if failed == 1 { "" } else { "s" }
        ));
    }
    let own_tmp = own_temporaries(ctx, &mkdirs, &entries);
    let in_tmp = |p: &Path| ctx.in_shared_tmp(p) || own_tmp.iter().any(|t| p.starts_with(t));

    // Writes. A write to a file that exists is granted on that file alone; creating, removing
    // or renaming an entry (git's `index.lock` renamed over `index`) needs the folder, and
    // making a folder needs the folder it is made in.
    let mut write_rules: BTreeMap<PathBuf, WriteWhy> = BTreeMap::new();
    let mut tmp_writes: BTreeSet<PathBuf> = BTreeSet::new();
    let writes_and_mkdirs = writes
        .iter()
        .map(|w| (w, false))
        .chain(mkdirs.iter().map(|m| (m, true)));
    for (w, made) in writes_and_mkdirs {
        if ctx.secret(w) {
            s.warnings.push(format!(
                "wrote `{}`, which looks secret (a credential file or key): left out, grant it by hand only if you mean to",
                ctx.shown(w)
            ));
            continue;
        }
        if ctx.protected.iter().any(|p| w.starts_with(p)) {
            s.warnings.push(format!(
                "wrote `{}`, a path mcpsum protects (its lockfile, state or binary): no policy may grant it; left out",
                ctx.shown(w)
            ));
            continue;
        }
        if in_tmp(w) {
            let top = own_tmp
                .iter()
                .find(|t| w.starts_with(t))
                .cloned()
                .unwrap_or_else(|| w.clone());
            tmp_writes.insert(top);
            continue;
        }
        if ctx.granted_write.iter().any(|g| w.starts_with(g)) {
            continue;
        }
        let name = w
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let folder_change = made || entries.contains(w) || !w.exists();
        if !folder_change && w.is_dir() {
            if ctx.folder_ok(w, true) {
                write_rules.entry(w.clone()).or_default().dir_written = true;
            } else {
                s.warnings.push(format!(
                    "wrote to the folder `{}`: too wide to grant (a top-level or system folder, a home or its settings, or it holds a secret or mcpsum's own files); left out",
                    ctx.shown(w)
                ));
            }
            continue;
        }
        if !folder_change {
            write_rules.entry(w.clone()).or_default().exact = true;
            continue;
        }
        let Some(parent) = w.parent() else { continue };
        if ctx.granted_write.iter().any(|g| parent.starts_with(g)) {
            continue;
        }
        if ctx.folder_ok(parent, true) {
            let why = write_rules.entry(parent.to_path_buf()).or_default();
            if made {
                why.made.insert(name);
            } else {
                why.changed.insert(name);
            }
        } else if made && w.is_dir() && ctx.folder_ok(w, true) {
            write_rules.entry(w.clone()).or_default().created_itself = Some(parent.to_path_buf());
        } else if made && w.is_dir() {
            s.notes.push(format!(
                "asked to create the folder `{}`, a top-level or system folder (or a home's settings) that is never proposed: it most likely existed already (an observation file of an older mcpsum records the `mkdir` of every parent of `mkdir -p`); left out",
                ctx.shown(w)
            ));
        } else {
            s.warnings.push(format!(
                "{} `{}`, which needs write on the whole folder `{}`: too wide to grant (a top-level or system folder, a home or its settings, or it holds a secret or mcpsum's own files); left out",
                if made { "created the folder" } else { "created, removed or renamed" },
                ctx.shown(w),
                ctx.shown(parent)
            ));
        }
    }
    for t in &tmp_writes {
        s.notes.push(format!(
            "wrote `{}` in a shared temporary folder (or a temporary folder it made there itself): in the sandbox it works in its private `${{TMP}}` (`TMPDIR`), readable and writable, instead; left out",
            ctx.shown(t)
        ));
    }
    let write_roots: Vec<PathBuf> = write_rules
        .iter()
        .filter(|(_, w)| w.is_folder())
        .map(|(p, _)| p.clone())
        .collect();
    for (path, why) in &write_rules {
        if write_roots.iter().any(|o| o != path && path.starts_with(o)) {
            continue;
        }
        if why.is_folder() && covers_git_hooks(path) {
            s.warnings.push(format!(
                "the proposed write `{}` covers a git repository's `.git/hooks` and `.git/config`: a sandboxed server could plant a hook or change the configuration, which git runs the next time you use it there. It is proposed because the server {} in that folder, which a sandbox can grant only on the whole folder; review it before you paste it",
                ctx.shown(path),
                if why.changed.is_empty() {
                    "made folders".to_owned()
                } else {
                    format!(
                        "created, removed or renamed {} (git writes `index` by creating `index.lock` and renaming it)",
                        some_names(&why.changed, 4)
                    )
                }
            ));
        }
        s.write.push(Proposed {
            entry: ctx.shown(path),
            why: why.text(),
        });
    }

    // Reads: files collapsed into known roots, else exact. A folder it only listed is left
    // out: a read rule on a folder grants its whole tree, not the listing alone.
    let mut read_rules: BTreeMap<PathBuf, (usize, String)> = BTreeMap::new();
    let mut secret_reads: BTreeSet<PathBuf> = BTreeSet::new();
    let mut listed: BTreeSet<PathBuf> = BTreeSet::new();
    let mut tmp_reads = 0usize;
    for r in &reads {
        if ctx.secret(r) {
            let shown = ctx
                .secrets
                .iter()
                .filter(|s| r.starts_with(s))
                .max_by_key(|s| s.components().count())
                .cloned()
                .unwrap_or_else(|| r.clone());
            secret_reads.insert(shown);
            continue;
        }
        if ctx
            .granted_read
            .iter()
            .chain(&ctx.granted_write)
            .chain(write_rules.keys())
            .any(|g| r.starts_with(g))
        {
            continue;
        }
        if in_tmp(r) {
            tmp_reads += 1;
            continue;
        }
        let (rule, why) = match known_root(r) {
            Some((root, kind)) if ctx.folder_ok(&root, false) => {
                (root, format!("{kind}, granted whole"))
            }
            _ if r.is_dir() => {
                listed.insert(r.clone());
                continue;
            }
            _ => (r.clone(), "a file it read (this file only)".into()),
        };
        if ctx.is_home_or_above(&rule) || rule.parent().is_none() {
            s.warnings.push(format!(
                "read `{}`: too wide to grant; left out",
                ctx.shown(&rule)
            ));
            continue;
        }
        let e = read_rules.entry(rule).or_insert((0, why));
        e.0 += 1;
    }
    for secret in secret_reads {
        s.warnings.push(format!(
            "read `{}`, which looks secret (credentials, keys, a keyring or a browser profile): left out of the proposal; grant it by hand only if the server truly needs it",
            ctx.shown(&secret)
        ));
    }
    if tmp_reads > 0 {
        s.notes.push(format!(
            "{tmp_reads} read{} in the shared temporary folder left out (the sandbox's `${{TMP}}` is private)",
            if tmp_reads == 1 { "" } else { "s" }
        ));
    }
    let read_roots: Vec<PathBuf> = read_rules.keys().cloned().collect();
    let listed: BTreeSet<String> = listed
        .iter()
        .filter(|l| !read_roots.iter().any(|r| l.starts_with(r)))
        .map(|l| ctx.shown(l))
        .collect();
    if !listed.is_empty() {
        s.notes.push(format!(
            "listed the folder{} {}: left out, since a read rule on a folder grants everything below it (a sandbox cannot grant the listing alone); add one by hand only if the server must list it and nothing below it is private",
            if listed.len() == 1 { "" } else { "s" },
            some_names(&listed, 12)
        ));
    }
    for (rule, (n, why)) in &read_rules {
        if read_roots.iter().any(|o| o != rule && rule.starts_with(o)) {
            continue;
        }
        let what = if rule.is_dir() {
            format!(
                "{why}: {n} path{} read below it",
                if *n == 1 { "" } else { "s" }
            )
        } else {
            why.clone()
        };
        s.read.push(Proposed {
            entry: ctx.shown(rule),
            why: what,
        });
    }

    // Hosts, by the names the server asked mcpsum's proxy for.
    for (target, resolved) in &hosts {
        if mcpsum_egress::Allowlist::parse(std::slice::from_ref(target)).is_err() {
            s.notes.push(format!(
                "asked the proxy for `{target}`, which is not a valid `network.allow` entry; left out"
            ));
            continue;
        }
        s.allow.push(Proposed {
            entry: target.clone(),
            why: "asked mcpsum's egress proxy for it (HTTPS `CONNECT`)".into(),
        });
        let port = target.rsplit_once(':').map_or("", |(_, p)| p);
        let ips: BTreeSet<std::net::IpAddr> =
            resolved.iter().filter_map(|a| a.parse().ok()).collect();
        if !ips.is_empty()
            && ips
                .iter()
                .all(|ip| !mcpsum_egress::classify(*ip).is_public())
        {
            for ip in ips {
                let entry = match ip {
                    std::net::IpAddr::V4(v4) => format!("{v4}:{port}"),
                    std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
                };
                if s.allow.iter().any(|p| p.entry == entry) || hosts.contains_key(&entry) {
                    continue;
                }
                s.warnings.push(format!(
                    "`{target}` resolved only to the non-public address {ip}, which the egress proxy refuses unless `{entry}` is listed too: it is proposed, check that the server is meant to reach it"
                ));
                s.allow.push(Proposed {
                    entry,
                    why: format!("the non-public address `{target}` resolved to"),
                });
            }
        }
    }
    s.allow.sort_by(|a, b| a.entry.cmp(&b.entry));
    for addr in direct {
        let port = addr.rsplit_once(':').map_or("", |(_, p)| p);
        if proxy_addrs.contains(&addr) || port == "53" {
            continue;
        }
        s.notes.push(format!(
            "connected to `{addr}` directly (not through `HTTPS_PROXY`): a sandboxed server can only reach hosts over HTTPS through mcpsum's proxy, by name; left out"
        ));
    }
    s
}

/// The program the kernel loads for `exe` before it runs, which no call shows: the ELF
/// interpreter (`PT_INTERP`, the dynamic loader) or the `#!` line's interpreter.
fn interpreter_of(exe: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = vec![0u8; 4096];
    let n = fs_err::File::open(exe).ok()?.read(&mut head).ok()?;
    head.truncate(n);
    if let Some(rest) = head.strip_prefix(b"#!") {
        let line = rest.split(|b| *b == b'\n').next()?;
        let line = std::str::from_utf8(line).ok()?.trim();
        let prog = line.split_whitespace().next()?;
        return fs_err::canonicalize(prog).ok();
    }
    elf_interp(exe, &head)
}

fn elf_interp(exe: &Path, head: &[u8]) -> Option<PathBuf> {
    use std::io::{Read, Seek, SeekFrom};
    // 64-bit little-endian ELF only (the platforms mcpsum sandboxes).
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?));
    let u64_of = |b: &[u8], o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_of(head, 32)?).ok()?;
    let phentsize = usize::from(u16_at(54)?);
    let phnum = usize::from(u16_at(56)?);
    let mut f = fs_err::File::open(exe).ok()?;
    for i in 0..phnum.min(64) {
        let mut ph = [0u8; 56];
        f.seek(SeekFrom::Start(u64::try_from(phoff + i * phentsize).ok()?))
            .ok()?;
        f.read_exact(&mut ph).ok()?;
        if u32::from_le_bytes(ph[..4].try_into().ok()?) != 3 {
            continue; // not PT_INTERP
        }
        let off = u64_of(&ph, 8)?;
        let size = usize::try_from(u64_of(&ph, 32)?).ok()?.min(4096);
        let mut name = vec![0u8; size];
        f.seek(SeekFrom::Start(off)).ok()?;
        f.read_exact(&mut name).ok()?;
        let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
        let p = PathBuf::from(String::from_utf8(name[..end].to_vec()).ok()?);
        return fs_err::canonicalize(p).ok();
    }
    None
}

/// Of `observations`, the paths the given read and write rules (host paths) would refuse:
/// for `sandbox test`'s note. Failed lookups, secrets and the shared temporary folders are
/// left out (they are no reason to widen a policy).
pub fn refused(observations: &[Observation], ctx: &Context) -> Vec<String> {
    let mut out = BTreeSet::new();
    let mut made = BTreeSet::new();
    let mut entries = BTreeSet::new();
    for o in observations {
        match o {
            Observation::Mkdir { path } => made.extend(real_or_parent(path)),
            Observation::Entry { path } => entries.extend(real_or_parent(path)),
            _ => {}
        }
    }
    let own = own_temporaries(ctx, &made, &entries);
    for o in observations {
        let (path, write) = match o {
            Observation::Read { path } | Observation::Exec { path } => (path, false),
            Observation::Write { path } | Observation::Mkdir { path } => (path, true),
            _ => continue,
        };
        let Ok(real) = fs_err::canonicalize(path) else {
            continue;
        };
        if ctx.secret(&real) || ctx.in_shared_tmp(&real) || own.iter().any(|t| real.starts_with(t))
        {
            continue;
        }
        let granted = if write {
            ctx.granted_write.iter().any(|g| real.starts_with(g))
        } else {
            ctx.granted_read
                .iter()
                .chain(&ctx.granted_write)
                .any(|g| real.starts_with(g))
        };
        if !granted {
            out.insert(format!(
                "{} {}",
                if write { "write" } else { "read" },
                ctx.shown(&real)
            ));
        }
    }
    out.into_iter().collect()
}

/// The context of `plan` (a plan of the server's own command, so its prefixes count):
/// granted = its read and write rules, with the homes, secrets and protected paths of
/// `protected`.
pub fn context_of(
    plan: &mcpsum_sandbox::SandboxPlan,
    protected: &mcpsum_sandbox::Protected,
) -> Context {
    let host = |rules: &[mcpsum_sandbox::FsRule]| -> Vec<PathBuf> {
        rules
            .iter()
            .filter_map(|r| match &r.path {
                mcpsum_sandbox::PolicyPath::Host(p) => Some(p.clone()),
                mcpsum_sandbox::PolicyPath::Tmp(_) => None,
            })
            .collect()
    };
    let mut homes: Vec<PathBuf> = mcpsum_sandbox::user_homes();
    homes.extend(protected.home.iter().cloned());
    homes.extend(protected.other_homes.iter().cloned());
    homes.sort();
    homes.dedup();
    let mut secrets: Vec<PathBuf> = homes
        .iter()
        .flat_map(|h| mcpsum_sandbox::credential_paths(h))
        .collect();
    secrets.extend(mcpsum_sandbox::TLS_KEY_DIRS.iter().map(PathBuf::from));
    secrets.extend(["/etc/shadow", "/etc/gshadow", "/etc/ssh"].map(PathBuf::from));
    let mut granted_read = host(&plan.read);
    granted_read.extend(plan.devices.iter().cloned());
    let mut granted_write = host(&plan.write);
    granted_write.extend(plan.devices.iter().cloned());
    let lock_dir = protected
        .lockfile
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Context {
        home: protected
            .home
            .as_ref()
            .map(|h| fs_err::canonicalize(h).unwrap_or_else(|_| h.clone())),
        homes,
        granted_read,
        granted_write,
        tmp: ["/tmp", "/var/tmp", "/dev/shm"]
            .iter()
            .filter_map(|p| fs_err::canonicalize(p).ok())
            .collect(),
        secrets,
        protected: vec![
            protected.lockfile.clone(),
            lock_dir,
            protected.state_dir.clone(),
            protected.binary.clone(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(p: &Path) -> Observation {
        Observation::Read {
            path: p.to_path_buf(),
        }
    }

    fn world() -> (tempfile::TempDir, PathBuf, Context) {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        for d in [
            "home/.ssh",
            "home/proj/.git",
            "home/proj/src",
            "home/proj/out",
            "home/venv/lib/python3.11/site-packages/pkg",
            "etcish",
        ] {
            fs_err::create_dir_all(root.join(d)).unwrap();
        }
        fs_err::write(root.join("home/venv/pyvenv.cfg"), "").unwrap();
        for f in [
            "home/.ssh/id_ed25519",
            "home/proj/src/a.py",
            "home/proj/src/b.py",
            "home/venv/lib/python3.11/site-packages/pkg/__init__.py",
            "home/notes.txt",
        ] {
            fs_err::write(root.join(f), "x").unwrap();
        }
        let ctx = Context {
            home: Some(home.clone()),
            homes: vec![home.clone()],
            secrets: mcpsum_sandbox::credential_paths(&home),
            ..Context::default()
        };
        (dir, root, ctx)
    }

    #[test]
    fn known_roots_collapse_and_homes_stay_exact_and_secrets_stay_out() {
        let (_d, root, ctx) = world();
        let obs = vec![
            read(&root.join("home/proj/src/a.py")),
            read(&root.join("home/proj/src/b.py")),
            read(&root.join("home/venv/lib/python3.11/site-packages/pkg/__init__.py")),
            read(&root.join("home/notes.txt")),
            read(&root.join("home/.ssh/id_ed25519")),
            read(&root.join("home/missing.txt")),
            Observation::Write {
                path: root.join("home/proj/out/new.txt"),
            },
        ];
        let s = suggest(&obs, &ctx);
        let entries: Vec<&str> = s.read.iter().map(|p| p.entry.as_str()).collect();
        assert_eq!(entries, ["~/notes.txt", "~/proj", "~/venv"]);
        assert!(s.read[0].why.contains("this file only"), "{:?}", s.read);
        for folder in &s.read[1..] {
            assert!(
                folder.why.contains("granted whole") && !folder.why.contains("a file"),
                "{:?}",
                s.read
            );
        }
        let writes: Vec<&str> = s.write.iter().map(|p| p.entry.as_str()).collect();
        assert_eq!(writes, ["~/proj/out"]);
        assert!(
            s.warnings.iter().any(|w| w.contains("~/.ssh")),
            "{:?}",
            s.warnings
        );
        let policy = s.policy().to_string();
        assert!(!policy.contains(".ssh"), "{policy}");
        assert!(
            s.notes.iter().any(|n| n.contains("1 lookup")),
            "{:?}",
            s.notes
        );
    }

    #[test]
    fn never_the_root_a_home_or_a_top_level_folder() {
        let (_d, root, mut ctx) = world();
        ctx.homes.push(root.clone());
        // A write of a file right in the home: exact, never `~`.
        let s = suggest(
            &[Observation::Write {
                path: root.join("home/notes.txt"),
            }],
            &ctx,
        );
        assert_eq!(s.write.len(), 1);
        assert_eq!(s.write[0].entry, "~/notes.txt");
        assert!(!ctx.folder_ok(Path::new("/usr"), false));
        assert!(!ctx.folder_ok(Path::new("/"), false));
        assert!(!ctx.folder_ok(Path::new("/etc/ssl/x"), false));
    }

    fn entries(s: &[Proposed]) -> Vec<&str> {
        s.iter().map(|p| p.entry.as_str()).collect()
    }

    #[test]
    fn a_mkdir_of_a_system_folder_or_a_written_folder_there_is_never_a_write_rule() {
        let (_d, root, ctx) = world();
        // `mkdir -p /usr/share/x` asks for `/usr` and `/usr/share` too (EEXIST); an older
        // observation file still has them.
        let obs = vec![
            Observation::Mkdir {
                path: "/usr".into(),
            },
            Observation::Mkdir {
                path: "/usr/share".into(),
            },
            Observation::Write {
                path: "/opt".into(),
            },
            Observation::Write {
                path: "/var/lib".into(),
            },
            Observation::Mkdir {
                path: root.join("home/proj/out"),
            },
        ];
        let s = suggest(&obs, &ctx);
        assert_eq!(entries(&s.write), ["~/proj"], "{:?}", s.write);
        assert!(
            s.write[0].why.contains("made the folder(s) `out`"),
            "{:?}",
            s.write
        );
        for sys in ["/usr", "/usr/share", "/opt", "/var/lib"] {
            assert!(!ctx.folder_ok(Path::new(sys), true), "{sys}");
        }
    }

    #[test]
    fn a_listed_folder_grants_nothing_and_never_its_secrets() {
        let (_d, root, mut ctx) = world();
        let home = root.join("home");
        fs_err::create_dir_all(home.join(".config/gh")).unwrap();
        fs_err::write(home.join(".config/gh/hosts.yml"), "token").unwrap();
        fs_err::create_dir_all(root.join("data/plain")).unwrap();
        ctx.secrets = mcpsum_sandbox::credential_paths(&home);
        ctx.secrets.push("/etc/shadow".into());
        let obs = vec![
            read(Path::new("/etc")),
            read(Path::new("/opt")),
            read(&home.join(".config")),
            read(&root.join("data/plain")),
            read(&root.join("data")),
        ];
        let s = suggest(&obs, &ctx);
        assert!(s.read.is_empty(), "{:?}", s.read);
        assert!(
            s.notes
                .iter()
                .any(|n| n.contains("listed the folders") && n.contains("~/.config")),
            "{:?}",
            s.notes
        );
        let policy = s.policy().to_string();
        for never in ["/etc", "/opt", ".config", "plain"] {
            assert!(!policy.contains(never), "{never}: {policy}");
        }
        // Nor a home's settings folder as a rule of its own, nor one holding a secret.
        assert!(!ctx.folder_ok(&home.join(".config"), false));
        assert!(!ctx.folder_ok(&home.join(".local/share"), false));
    }

    #[test]
    fn a_write_to_an_existing_file_is_exact_and_a_rename_needs_the_folder() {
        let (_d, root, ctx) = world();
        let git = root.join("home/proj/.git");
        fs_err::create_dir_all(git.join("hooks")).unwrap();
        fs_err::write(git.join("index"), "x").unwrap();
        fs_err::write(root.join("home/proj/src/a.py"), "x").unwrap();
        // Only an existing file written in place: that file alone.
        let s = suggest(
            &[Observation::Write {
                path: root.join("home/proj/src/a.py"),
            }],
            &ctx,
        );
        assert_eq!(entries(&s.write), ["~/proj/src/a.py"], "{:?}", s.write);
        assert!(s.write[0].why.contains("this file only"), "{:?}", s.write);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        // git's `index.lock` created, then renamed over `index`: the folder, with a warning
        // that it covers the hooks.
        let lock = git.join("index.lock");
        let obs = vec![
            Observation::Write { path: lock.clone() },
            Observation::Entry { path: lock },
            Observation::Write {
                path: git.join("index"),
            },
            Observation::Entry {
                path: git.join("index"),
            },
        ];
        let s = suggest(&obs, &ctx);
        assert_eq!(entries(&s.write), ["~/proj/.git"], "{:?}", s.write);
        assert!(s.write[0].why.contains("`index.lock`"), "{:?}", s.write);
        assert!(
            s.warnings.iter().any(|w| w.contains(".git/hooks")),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn what_it_makes_in_a_temporary_folder_of_its_own_is_left_out() {
        let (_d, root, mut ctx) = world();
        let tmp = root.join("shared-tmp");
        fs_err::create_dir_all(tmp.join("tmpq1w2e3/sub")).unwrap();
        ctx.tmp = vec![tmp.clone()];
        let obs = vec![
            Observation::Mkdir {
                path: tmp.join("tmpq1w2e3"),
            },
            Observation::Mkdir {
                path: tmp.join("tmpq1w2e3/sub"),
            },
            Observation::Write {
                path: tmp.join("tmpq1w2e3/sub/f.txt"),
            },
        ];
        let s = suggest(&obs, &ctx);
        assert!(s.write.is_empty(), "{:?}", s.write);
        assert!(
            s.notes.iter().any(|n| n.contains("${TMP}")),
            "{:?}",
            s.notes
        );
        assert!(refused(&obs, &ctx).is_empty());
    }

    #[test]
    fn a_host_that_resolves_to_loopback_also_proposes_its_address() {
        let ctx = Context::default();
        let s = suggest(
            &[
                Observation::Host {
                    target: "localhost:8443".into(),
                    resolved: vec!["127.0.0.1".into()],
                },
                Observation::Host {
                    target: "api.example.com:443".into(),
                    resolved: vec!["93.184.216.34".into()],
                },
                Observation::Proxy {
                    addr: "127.0.0.1:4000".into(),
                },
                Observation::Connect {
                    addr: "127.0.0.1:4000".into(),
                },
            ],
            &ctx,
        );
        let allow: Vec<&str> = s.allow.iter().map(|p| p.entry.as_str()).collect();
        assert_eq!(
            allow,
            ["127.0.0.1:8443", "api.example.com:443", "localhost:8443"]
        );
        assert!(s.notes.is_empty(), "{:?}", s.notes);
        assert_eq!(s.policy()["filesystem"]["read"], serde_json::json!([]));
    }

    #[test]
    fn the_elf_interpreter_of_a_binary_is_found() {
        let Some(interp) = interpreter_of(Path::new("/bin/sh")) else {
            return; // a static shell
        };
        assert!(
            interp.to_string_lossy().contains("ld"),
            "{}",
            interp.display()
        );
    }
}
