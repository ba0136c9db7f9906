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
    let dir = state_dir.join(LEARN_DIR);
    crate::paths::create_private_dir(&dir)
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

    /// Whether a folder rule `p` is one a person would write: see [`Context::too_wide`].
    fn folder_ok(&self, p: &Path, write: bool) -> bool {
        self.too_wide(p, write).is_none()
    }

    /// Why a folder rule `p` is refused, if it is: `/` and the top-level folders, the system
    /// folders (`/usr`, `/opt`, `/var/lib`, ...), `/etc` and below it, a home or an ancestor of
    /// one, a home's settings folders ([`HOME_SHARED_DIRS`]: `~/.config`, `~/.local`, ...), a
    /// folder holding a secret, and (for writes) one holding a path mcpsum protects (its
    /// lockfile, state or binary).
    fn too_wide(&self, p: &Path, write: bool) -> Option<&'static str> {
        let home_shared = self.homes.iter().chain(&self.home).any(|h| {
            HOME_SHARED_DIRS
                .iter()
                .any(|d| h.join(d).starts_with(p) && p.starts_with(h))
        });
        Some(if p.parent().is_none() {
            "the root folder"
        } else if p.components().count() <= 2 {
            "a top-level folder"
        } else if self.is_home_or_above(p) {
            "a home, or a folder holding one"
        } else if mcpsum_sandbox::is_system_folder(p) || p.starts_with("/etc") {
            "a system folder"
        } else if home_shared {
            "a home's settings folder"
        } else if self.secrets.iter().any(|s| s.starts_with(p)) {
            "it holds a secret"
        } else if write && self.protected.iter().any(|s| s.starts_with(p)) {
            "it holds mcpsum's own files (its lockfile, state or binary)"
        } else {
            return None;
        })
    }

    /// The code path of a home ([`HOME_CODE_PATHS`]) a write rule on `p` would reach (`p` is
    /// in it, or a folder rule holds it), and what runs from it.
    fn runs_as_code(&self, p: &Path, folder: bool) -> Option<(PathBuf, &'static str)> {
        self.homes.iter().chain(&self.home).find_map(|h| {
            HOME_CODE_PATHS.iter().find_map(|(c, what)| {
                let c = h.join(c);
                let hit = p.starts_with(&c) || (folder && c.starts_with(p) && p.starts_with(h));
                hit.then_some((c, *what))
            })
        })
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

/// Paths of a home whose contents run as code outside any sandbox (the next login, shell,
/// session, `git` or Python start): never proposed for writing, nor a folder holding one.
const HOME_CODE_PATHS: &[(&str, &str)] = &[
    ("bin", "programs on your `PATH`"),
    (".local/bin", "programs on your `PATH`"),
    (".config/autostart", "programs your desktop starts at login"),
    (".config/systemd", "services systemd starts for you"),
    (".local/share/systemd", "services systemd starts for you"),
    (
        ".config/environment.d",
        "your session's environment (`LD_PRELOAD`, `PATH`)",
    ),
    (
        ".pam_environment",
        "your session's environment (`LD_PRELOAD`, `PATH`)",
    ),
    (
        ".local/share/applications",
        "the commands your desktop runs to open files",
    ),
    (
        ".config/plasma-workspace",
        "scripts your desktop runs at login",
    ),
    (".profile", "a login shell's startup file"),
    (".bash_profile", "a login shell's startup file"),
    (".bash_login", "a login shell's startup file"),
    (".bash_logout", "a shell's exit file"),
    (".bashrc", "a shell's startup file"),
    (".zshenv", "a shell's startup file"),
    (".zprofile", "a login shell's startup file"),
    (".zshrc", "a shell's startup file"),
    (".zlogin", "a login shell's startup file"),
    (".zlogout", "a shell's exit file"),
    (".config/fish", "a shell's startup files"),
    (".cshrc", "a shell's startup file"),
    (".tcshrc", "a shell's startup file"),
    (".kshrc", "a shell's startup file"),
    (".xprofile", "an X session's startup file"),
    (".xinitrc", "an X session's startup file"),
    (".xsession", "an X session's startup file"),
    (".xsessionrc", "an X session's startup file"),
    (".ssh/rc", "what sshd runs at each login"),
    (
        ".gitconfig",
        "git's settings (`core.hooksPath`, `core.fsmonitor`, aliases run programs)",
    ),
    (
        ".config/git",
        "git's settings (`core.hooksPath`, `core.fsmonitor`, aliases run programs)",
    ),
    (
        ".local/lib",
        "Python's user site-packages (its `.pth` files run at each Python start)",
    ),
    (
        ".npmrc",
        "npm's settings (`node-options`, `script-shell` run programs)",
    ),
    (".vimrc", "an editor's startup file"),
    (".config/nvim", "an editor's startup files"),
    (".emacs", "an editor's startup file"),
    (".emacs.d", "an editor's startup files"),
];

/// Folders of a home that hold every application's settings (and so, sooner or later, tokens).
const HOME_SHARED_DIRS: &[&str] = &[
    ".config",
    ".local",
    ".local/share",
    ".local/state",
    ".cache",
];

/// The file paths of observations, made real as a sandbox sees them.
#[derive(Default)]
struct FilePaths {
    /// Read (existing, real).
    reads: BTreeSet<PathBuf>,
    /// Executed (existing, real).
    execs: BTreeSet<PathBuf>,
    /// Written: what an open reaches (a link's target), or the entry an entry change names.
    writes: BTreeSet<PathBuf>,
    /// Created, removed or renamed: the folder made real, the entry's own name (a link is
    /// never followed, see [`mcpsum_sandbox::entry_path`]).
    entries: BTreeSet<PathBuf>,
    /// Folders made, as entries are.
    mkdirs: BTreeSet<PathBuf>,
    /// Reads, executions and writes of paths whose folder does not exist (failed probes).
    failed: usize,
}

impl FilePaths {
    fn of(observations: &[Observation]) -> Self {
        // The `Write` recorded with an `Entry` of the same path is the entry change's own: the
        // link an `unlink` or a `rename` names is not followed. (An open through a link is
        // recorded at its target: see the guard.)
        let entry_paths: BTreeSet<&Path> = observations
            .iter()
            .filter_map(|o| match o {
                Observation::Entry { path } => Some(path.as_path()),
                _ => None,
            })
            .collect();
        let mut out = Self::default();
        for o in observations {
            let (set, real) = match o {
                Observation::Read { path } => (&mut out.reads, fs_err::canonicalize(path).ok()),
                Observation::Exec { path } => (&mut out.execs, fs_err::canonicalize(path).ok()),
                Observation::Write { path } if entry_paths.contains(path.as_path()) => {
                    (&mut out.writes, mcpsum_sandbox::entry_path(path))
                }
                Observation::Write { path } => (&mut out.writes, mcpsum_sandbox::opened_path(path)),
                Observation::Mkdir { path } => (&mut out.mkdirs, mcpsum_sandbox::entry_path(path)),
                Observation::Entry { path } => {
                    if let Some(real) = mcpsum_sandbox::entry_path(path) {
                        out.writes.insert(real.clone());
                        out.entries.insert(real);
                    }
                    continue;
                }
                _ => continue,
            };
            match real {
                Some(real) => {
                    set.insert(real);
                }
                None => out.failed += 1,
            }
        }
        out
    }
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

/// What of a git repository a write rule on `p` reaches that runs code the next time a person
/// uses git there, if anything: a path inside a `.git/hooks` (also a submodule's, below
/// `.git/modules`), a `.git/config`, or (a folder rule) a folder holding a `.git` or being a git
/// folder, looked for down to [`GIT_DEPTH`] levels below it without following links.
fn git_risk(p: &Path, folder: bool) -> Option<&'static str> {
    let git = p
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == ".git"));
    if let Some(git) = git {
        let inner = p.strip_prefix(git).unwrap_or(Path::new(""));
        if inner.components().any(|c| c.as_os_str() == "hooks") {
            return Some("is inside a git repository's hooks (`.git/hooks`), which git runs");
        }
        if p.file_name().is_some_and(|n| n == "config") {
            return Some(
                "is a git repository's configuration (`.git/config`), whose settings (`core.hooksPath`, `core.fsmonitor`, aliases) run programs",
            );
        }
    }
    if folder && holds_git(p, GIT_DEPTH) {
        return Some(
            "covers a git repository's `.git/hooks` and `.git/config`: a sandboxed server could plant a hook or change the configuration, which git runs the next time you use it there",
        );
    }
    None
}

/// How deep below a folder rule [`git_risk`] looks for a repository.
const GIT_DEPTH: usize = 3;

/// Whether `dir` is a git folder (a `.git`, or one with `HEAD`, `config` and `hooks` such as
/// `.git/modules/sub`) or holds one (a `.git` entry, folder or file) `depth` levels below it
/// or less; links are not followed, and the walk looks at 20 000 entries at most.
fn holds_git(dir: &Path, depth: usize) -> bool {
    fn walk(dir: &Path, depth: usize, budget: &mut usize) -> bool {
        if dir.file_name().is_some_and(|n| n == ".git")
            || ["HEAD", "config", "hooks"]
                .iter()
                .all(|n| dir.join(n).exists())
        {
            return true;
        }
        if depth == 0 {
            return false;
        }
        let Ok(rd) = fs_err::read_dir(dir) else {
            return false;
        };
        for e in rd.flatten() {
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            if e.file_name() == ".git"
                || (e.file_type().is_ok_and(|t| t.is_dir()) && walk(&e.path(), depth - 1, budget))
            {
                return true;
            }
        }
        false
    }
    walk(dir, depth, &mut 20_000)
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
    let FilePaths {
        mut reads,
        execs,
        writes,
        entries,
        mkdirs,
        failed,
    } = FilePaths::of(observations);
    for exec in &execs {
        reads.insert(exec.clone());
        reads.extend(interpreter_of(exec));
    }
    let mut proxy_addrs: BTreeSet<String> = BTreeSet::new();
    let mut direct: BTreeSet<String> = BTreeSet::new();
    let mut hosts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for o in observations {
        match o {
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
            Observation::Read { .. }
            | Observation::Exec { .. }
            | Observation::Write { .. }
            | Observation::Mkdir { .. }
            | Observation::Entry { .. } => {}
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
            match ctx.too_wide(w, true) {
                None => write_rules.entry(w.clone()).or_default().dir_written = true,
                Some(why) => s.warnings.push(format!(
                    "wrote to the folder `{}`: too wide to grant ({why}); left out",
                    ctx.shown(w)
                )),
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
        let parent_wide = ctx.too_wide(parent, true);
        match parent_wide {
            None => {
                let why = write_rules.entry(parent.to_path_buf()).or_default();
                if made {
                    why.made.insert(name);
                } else {
                    why.changed.insert(name);
                }
            }
            Some(_) if made && w.is_dir() && ctx.folder_ok(w, true) => {
                write_rules.entry(w.clone()).or_default().created_itself =
                    Some(parent.to_path_buf());
            }
            Some(parent_why) if made && w.is_dir() => s.notes.push(format!(
                "asked to create the folder `{}` ({}) in `{}` ({parent_why}): neither is ever proposed; left out (an older mcpsum's observation file also records the `mkdir` of folders that existed, as `mkdir -p` asks for every parent)",
                ctx.shown(w),
                ctx.too_wide(w, true).unwrap_or("too wide"),
                ctx.shown(parent)
            )),
            Some(parent_why) => s.warnings.push(format!(
                "{} `{}`, which needs write on the whole folder `{}`: too wide to grant ({parent_why}); left out",
                if made { "created the folder" } else { "created, removed or renamed" },
                ctx.shown(w),
                ctx.shown(parent)
            )),
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
        if let Some((code, what)) = ctx.runs_as_code(path, why.is_folder()) {
            s.warnings.push(format!(
                "wrote {}`{}`, but `{}` holds {what}, which run outside any sandbox: a sandboxed server could plant code there; never proposed, grant it by hand only if you mean to",
                if why.is_folder() { "in " } else { "" },
                ctx.shown(path),
                ctx.shown(&code)
            ));
            continue;
        }
        if let Some(risk) = git_risk(path, why.is_folder()) {
            s.warnings.push(format!(
                "the proposed write `{}` {risk}. It is proposed because the server {} there; review it before you paste it",
                ctx.shown(path),
                if why.is_folder() && why.changed.is_empty() && !why.made.is_empty() {
                    "made folders".to_owned()
                } else if !why.changed.is_empty() {
                    format!(
                        "created, removed or renamed {} (git writes `index` by creating `index.lock` and renaming it), which a sandbox grants only on the whole folder",
                        some_names(&why.changed, 4)
                    )
                } else {
                    "wrote it".to_owned()
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
/// for `sandbox test`'s note. A file created, removed or renamed needs write on its folder
/// (`write ~/proj/.git` for git's `index.lock` beside a rule on `index` alone), a file written on
/// the file (also when it is gone since). Failed lookups, secrets and the shared temporary
/// folders are left out (they are no reason to widen a policy).
pub fn refused(observations: &[Observation], ctx: &Context) -> Vec<String> {
    let paths = FilePaths::of(observations);
    let own = own_temporaries(ctx, &paths.mkdirs, &paths.entries);
    let skip =
        |p: &Path| ctx.secret(p) || ctx.in_shared_tmp(p) || own.iter().any(|t| p.starts_with(t));
    let readable = |p: &Path| {
        ctx.granted_read
            .iter()
            .chain(&ctx.granted_write)
            .any(|g| p.starts_with(g))
    };
    let writable = |p: &Path| ctx.granted_write.iter().any(|g| p.starts_with(g));
    let mut out = BTreeSet::new();
    for r in paths.reads.iter().chain(&paths.execs) {
        if !skip(r) && !readable(r) {
            out.insert(format!("read {}", ctx.shown(r)));
        }
    }
    for w in &paths.writes {
        if !skip(w) && !paths.entries.contains(w) && !writable(w) {
            out.insert(format!("write {}", ctx.shown(w)));
        }
    }
    for (e, what) in paths
        .entries
        .iter()
        .map(|e| (e, "create, remove or rename"))
        .chain(paths.mkdirs.iter().map(|m| (m, "make the folder")))
    {
        let Some(folder) = e.parent() else { continue };
        if !skip(e) && !writable(folder) {
            out.insert(format!(
                "write {} (to {what} `{}` in it)",
                ctx.shown(folder),
                e.file_name().unwrap_or_default().to_string_lossy()
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

    fn write_entry(p: &Path) -> [Observation; 2] {
        [
            Observation::Write {
                path: p.to_path_buf(),
            },
            Observation::Entry {
                path: p.to_path_buf(),
            },
        ]
    }

    #[test]
    fn a_link_made_removed_or_renamed_onto_grants_its_own_folder_never_its_targets() {
        let (_d, root, ctx) = world();
        let home = root.join("home");
        fs_err::create_dir_all(home.join("shared/data")).unwrap();
        fs_err::create_dir_all(home.join("tmpl")).unwrap();
        fs_err::write(home.join("shared/data/f"), "x").unwrap();
        let link = home.join("tmpl/lnk");
        std::os::unix::fs::symlink(home.join("shared/data/f"), &link).unwrap();
        // `ln -s`, then `unlink` and `ln -s` again (the link exists when `suggest` runs), and
        // `ln -sf` as a temporary link renamed onto the link.
        for obs in [
            write_entry(&link).to_vec(),
            [write_entry(&home.join("tmpl/.lnk.tmp")), write_entry(&link)].concat(),
        ] {
            let s = suggest(&obs, &ctx);
            assert_eq!(entries(&s.write), ["~/tmpl"], "{:?}", s.write);
            assert!(s.write[0].why.contains("`lnk`"), "{:?}", s.write);
            let refused = refused(&obs, &ctx);
            assert!(
                refused.iter().all(|r| !r.contains("shared")) && !refused.is_empty(),
                "{refused:?}"
            );
        }
        // A file written through the link (an older observation file names the link): the
        // sandbox checks the target, that file alone.
        let s = suggest(&[Observation::Write { path: link.clone() }], &ctx);
        assert_eq!(entries(&s.write), ["~/shared/data/f"], "{:?}", s.write);
        let s = suggest(&[read(&link)], &ctx);
        assert_eq!(entries(&s.read), ["~/shared/data/f"], "{:?}", s.read);
    }

    #[test]
    fn every_write_that_reaches_what_git_runs_is_warned_about() {
        let (_d, root, ctx) = world();
        let home = root.join("home");
        let git = home.join("code/repo/.git");
        for d in ["hooks", "modules/sub/hooks"] {
            fs_err::create_dir_all(git.join(d)).unwrap();
        }
        for f in ["config", "HEAD", "modules/sub/config", "modules/sub/HEAD"] {
            fs_err::write(git.join(f), "x").unwrap();
        }
        fs_err::write(git.join("hooks/pre-commit"), "x").unwrap();
        let warned = |obs: &[Observation], rule: &str| {
            let s = suggest(obs, &ctx);
            assert_eq!(entries(&s.write), [rule], "{:?}", s.write);
            assert!(
                s.warnings
                    .iter()
                    .any(|w| w.contains(rule) && w.contains("git")),
                "{rule}: {:?}",
                s.warnings
            );
        };
        let write = |p: &Path| Observation::Write {
            path: p.to_path_buf(),
        };
        warned(&[write(&git.join("config"))], "~/code/repo/.git/config");
        warned(
            &[write(&git.join("hooks/pre-commit"))],
            "~/code/repo/.git/hooks/pre-commit",
        );
        warned(&write_entry(&home.join("code/new.txt")), "~/code");
        warned(
            &write_entry(&git.join("modules/sub/index.lock")),
            "~/code/repo/.git/modules/sub",
        );
        warned(
            &write_entry(&git.join("modules/new")),
            "~/code/repo/.git/modules",
        );
        // Objects and refs run nothing.
        fs_err::create_dir_all(git.join("objects/ab")).unwrap();
        let s = suggest(&write_entry(&git.join("objects/ab/tmp_obj")), &ctx);
        assert_eq!(entries(&s.write), ["~/code/repo/.git/objects/ab"]);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }

    #[test]
    fn what_runs_as_code_is_never_proposed_for_writing() {
        let (_d, root, ctx) = world();
        let home = root.join("home");
        for d in [
            ".local/bin",
            "bin",
            ".config/systemd/user",
            ".config/autostart",
        ] {
            fs_err::create_dir_all(home.join(d)).unwrap();
        }
        fs_err::write(home.join(".bashrc"), "x").unwrap();
        fs_err::write(home.join(".config/autostart/a.desktop"), "x").unwrap();
        let cases = [
            write_entry(&home.join(".local/bin/tool")).to_vec(),
            write_entry(&home.join("bin/tool")).to_vec(),
            write_entry(&home.join(".config/systemd/user/x.service")).to_vec(),
            vec![Observation::Write {
                path: home.join(".config/autostart/a.desktop"),
            }],
            vec![Observation::Write {
                path: home.join(".bashrc"),
            }],
            vec![Observation::Mkdir {
                path: home.join(".config/systemd/user/default.target.wants"),
            }],
        ];
        for obs in cases {
            let s = suggest(&obs, &ctx);
            assert!(s.write.is_empty(), "{obs:?}: {:?}", s.write);
            assert!(
                s.warnings.iter().any(|w| w.contains("outside any sandbox")),
                "{obs:?}: {:?}",
                s.warnings
            );
        }
        // A file of its own beside them is proposed.
        fs_err::create_dir_all(home.join(".local/share/app")).unwrap();
        let s = suggest(&write_entry(&home.join(".local/share/app/db")), &ctx);
        assert_eq!(entries(&s.write), ["~/.local/share/app"], "{:?}", s.write);
    }

    #[test]
    fn each_left_out_folder_says_why() {
        let (_d, root, ctx) = world();
        let s = suggest(
            &[Observation::Mkdir {
                path: "/newtop".into(),
            }],
            &ctx,
        );
        let all = [s.warnings, s.notes].concat();
        assert!(
            all.len() == 1 && all[0].contains("`/`: too wide to grant (the root folder)"),
            "{all:?}"
        );
        // A folder that exists, as an older observation file records `mkdir -p`'s parents.
        let s = suggest(
            &[Observation::Mkdir {
                path: root.join("home/.config"),
            }],
            &ctx,
        );
        fs_err::create_dir_all(root.join("home/.config")).unwrap();
        let s2 = suggest(
            &[Observation::Mkdir {
                path: root.join("home/.config"),
            }],
            &ctx,
        );
        assert!(s.write.is_empty() && s2.write.is_empty());
        let note = s2.notes.join("\n");
        assert!(
            note.contains("(a home's settings folder)")
                && note.contains("(a home, or a folder holding one)")
                && !note.contains("most likely"),
            "{note}"
        );
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("a home, or a folder holding one")),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn refused_counts_the_files_created_beside_a_file_rule() {
        let (_d, root, mut ctx) = world();
        let git = root.join("home/proj/.git");
        fs_err::write(git.join("index"), "x").unwrap();
        ctx.granted_write = vec![git.join("index")];
        let mut obs = write_entry(&git.join("index.lock")).to_vec();
        obs.extend(write_entry(&git.join("index")));
        obs.push(Observation::Write {
            path: root.join("home/proj/out/gone.txt"),
        });
        let r = refused(&obs, &ctx);
        assert!(
            r.iter()
                .any(|l| l.starts_with("write ~/proj/.git ") && l.contains("`index.lock`")),
            "{r:?}"
        );
        assert!(r.contains(&"write ~/proj/out/gone.txt".to_owned()), "{r:?}");
        ctx.granted_write = vec![git.clone(), root.join("home/proj/out")];
        assert!(refused(&obs, &ctx).is_empty(), "{:?}", refused(&obs, &ctx));
    }
}
