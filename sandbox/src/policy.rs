//! Policy validation: the raw `policy.sandbox` strings of `mcp.lock` become a
//! [`ValidatedPolicy`], or every problem is reported in one pass.
//!
//! This module owns the path rules of the seed (`LOCKFILE.md`, "Sandbox"): absolute, `~/...` or
//! `${TMP}/...`, no `..`, existing (except `${TMP}` paths, which exist once the private tmp is
//! made), and a write path never covers the lockfile, its directory, the state directory (audit
//! log, taint state, per-server caches), the mcpsum binary or the home directory. It leaves the
//! grammar of `network.allow` entries to `mcpsum-egress`: here only "empty or not" matters.
//!
//! Pure apart from `stat`/`realpath` on the named paths; works on every OS.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Raw `policy.sandbox` strings as written in `mcp.lock` (mcpsum parses the JSON with
/// `deny_unknown_fields` and hands these over unchanged).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// `filesystem.read`: extra paths the server may read (recursively).
    pub read: Vec<String>,
    /// `filesystem.write`: paths the server may read and write.
    pub write: Vec<String>,
    /// `network.allow`: `[]` for no network, else `host:port` entries (validated by egress).
    pub allow: Vec<String>,
    /// `limits.tasks`: the most tasks of the server's tree, when the policy sets it.
    pub tasks: Option<u64>,
}

/// Resource limits of a server's whole process tree (`policy.sandbox.limits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// The most tasks (processes and threads) the tree may have at once (`RLIMIT_NPROC`, counted
    /// in the server's own user namespace). Core dumps are always off.
    pub tasks: u64,
}

impl Limits {
    /// The task limit of a policy that sets none: room for a package manager and its children,
    /// not for a fork bomb.
    pub const DEFAULT_TASKS: u64 = 1024;
    /// The largest task limit a policy may set (the kernel's `pid_max` ceiling).
    pub const MAX_TASKS: u64 = 4_194_304;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            tasks: Limits::DEFAULT_TASKS,
        }
    }
}

/// Checks `limits.tasks` of a policy: `None` when it is acceptable, else why not (the caller
/// names the key).
pub fn check_tasks(tasks: u64) -> Option<String> {
    (!(1..=Limits::MAX_TASKS).contains(&tasks)).then(|| {
        format!(
            "{tasks} is not a task limit; write a number from 1 to {} (default {})",
            Limits::MAX_TASKS,
            Limits::DEFAULT_TASKS
        )
    })
}

/// Paths a write rule must never cover (and where per-server state lives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protected {
    /// The `mcp.lock` in use (it need not exist yet).
    pub lockfile: PathBuf,
    /// mcpsum's state directory: `audit.jsonl`, `taint/`, `cache/` (it need not exist yet).
    pub state_dir: PathBuf,
    /// The real path of the mcpsum binary.
    pub binary: PathBuf,
    /// The home directory, when known (`~` paths need it).
    pub home: Option<PathBuf>,
    /// Further homes protected like `home` but never used for `~`: the passwd home of the
    /// effective uid when `$HOME` names another folder (or none), so a wrong or missing `$HOME`
    /// leaves no home unprotected.
    pub other_homes: Vec<PathBuf>,
}

/// A path of a validated policy.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PolicyPath {
    /// A host path, canonical (symlinks resolved) at validation time.
    Host(PathBuf),
    /// A path below the private `${TMP}`, relative to it (empty for `${TMP}` itself).
    Tmp(PathBuf),
}

impl fmt::Display for PolicyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyPath::Host(p) => write!(f, "{}", p.display()),
            PolicyPath::Tmp(p) if p.as_os_str().is_empty() => write!(f, "${{TMP}}"),
            PolicyPath::Tmp(p) => write!(f, "${{TMP}}/{}", p.display()),
        }
    }
}

/// Network mode of a policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetworkMode {
    /// `network.allow: []`: no sockets at all (Landlock + seccomp; a user + mount namespace for
    /// the read-only view when one can be made).
    None,
    /// Hosts listed: own user + network namespace, egress only through mcpsum's proxy.
    Egress {
        /// The `network.allow` entries, unchanged (the egress crate parses them).
        allow: Vec<String>,
    },
}

/// A policy whose every path passed the seed's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatedPolicy {
    /// `filesystem.read` paths, in policy order, with their key (`filesystem.read[0]`).
    pub read: Vec<(String, PolicyPath)>,
    /// `filesystem.write` paths, in policy order, with their key.
    pub write: Vec<(String, PolicyPath)>,
    /// The network mode.
    pub network: NetworkMode,
    /// The resource limits of the server's tree.
    pub limits: Limits,
    /// The protected paths (canonical where they exist), with what each one is. The plan keeps
    /// them so interpreter discovery never adds a prefix that contains one, and the launcher
    /// re-checks each write rule's opened descriptor against them.
    pub protected: Vec<(String, PathBuf)>,
}

/// One problem with one path of a policy. Its `Display` names the key, the path and the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Neither absolute, `~/...` nor `${TMP}/...`.
    #[error("`{key}`: `{path}` is not absolute; write `/...`, `~/...` or `${{TMP}}/...`")]
    NotAbsolute {
        /// The key, e.g. `filesystem.write[1]`.
        key: String,
        /// The path as written.
        path: String,
    },
    /// Contains a `..` component.
    #[error("`{key}`: `{path}` contains `..`; write the path without `..`")]
    DotDot {
        /// The key.
        key: String,
        /// The path as written.
        path: String,
    },
    /// The root of the filesystem, however written (`/`, `//`, `/./`).
    #[error("`{key}`: `{path}` opens the whole filesystem; list narrower directories")]
    WholeFilesystem {
        /// The key.
        key: String,
        /// The path as written.
        path: String,
    },
    /// `~user/...` or `~` without a known home.
    #[error("`{key}`: `{path}` starts with `~` but {reason}; write an absolute path")]
    Home {
        /// The key.
        key: String,
        /// The path as written.
        path: String,
        /// Why `~` cannot be expanded.
        reason: &'static str,
    },
    /// The path does not exist (or cannot be resolved).
    #[error("`{key}`: `{path}` does not exist ({cause}); create it or remove the entry")]
    Missing {
        /// The key.
        key: String,
        /// The path as written.
        path: String,
        /// The I/O error text.
        cause: String,
    },
    /// A write path covers a protected path.
    #[error(
        "`{key}`: `{path}` covers {what} (`{protected}`); list a narrower directory that does not contain it"
    )]
    CoversProtected {
        /// The key.
        key: String,
        /// The path as written.
        path: String,
        /// What is protected: `mcp.lock`, "the directory of `mcp.lock`", ...
        what: &'static str,
        /// The protected path.
        protected: PathBuf,
    },
    /// `limits.tasks` is out of range.
    #[error("`limits.tasks`: {reason}")]
    Tasks {
        /// What is wrong and what to write.
        reason: String,
    },
    /// A write path lies inside mcpsum's state directory.
    #[error(
        "`{key}`: `{path}` is inside mcpsum's state directory (`{state_dir}`), which holds the audit log and taint state; use another directory"
    )]
    InsideStateDir {
        /// The key.
        key: String,
        /// The path as written.
        path: String,
        /// The state directory.
        state_dir: PathBuf,
    },
}

/// Validates every path exactly as the seed says and returns ALL problems in one pass.
///
/// Host paths are canonicalised (symlinks resolved) so the protected-path comparison is made on
/// real paths; the launcher repeats it on the opened descriptor right before adding the rule.
pub fn validate(
    policy: &SandboxPolicy,
    protected: &Protected,
) -> Result<ValidatedPolicy, Vec<PolicyError>> {
    let mut errors = Vec::new();
    let guards = protected_paths(protected);
    let state_dir = canonical_or_lexical(&protected.state_dir);

    let mut read = Vec::new();
    for (i, raw) in policy.read.iter().enumerate() {
        let key = format!("filesystem.read[{i}]");
        if let Some(p) = parse_one(&key, raw, protected.home.as_deref(), &mut errors) {
            read.push((key, p));
        }
    }
    let mut write = Vec::new();
    for (i, raw) in policy.write.iter().enumerate() {
        let key = format!("filesystem.write[{i}]");
        let Some(p) = parse_one(&key, raw, protected.home.as_deref(), &mut errors) else {
            continue;
        };
        if let PolicyPath::Host(real) = &p {
            let mut bad = false;
            for (what, guarded) in &guards {
                if guarded.starts_with(real) {
                    errors.push(PolicyError::CoversProtected {
                        key: key.clone(),
                        path: raw.clone(),
                        what,
                        protected: guarded.clone(),
                    });
                    bad = true;
                }
            }
            if !bad && real.starts_with(&state_dir) {
                errors.push(PolicyError::InsideStateDir {
                    key: key.clone(),
                    path: raw.clone(),
                    state_dir: state_dir.clone(),
                });
            }
        }
        write.push((key, p));
    }
    let network = if policy.allow.is_empty() {
        NetworkMode::None
    } else {
        NetworkMode::Egress {
            allow: policy.allow.clone(),
        }
    };
    let mut limits = Limits::default();
    if let Some(tasks) = policy.tasks {
        match check_tasks(tasks) {
            Some(reason) => errors.push(PolicyError::Tasks { reason }),
            None => limits.tasks = tasks,
        }
    }
    if errors.is_empty() {
        Ok(ValidatedPolicy {
            read,
            write,
            network,
            limits,
            protected: guards
                .into_iter()
                .map(|(what, p)| (what.to_string(), p))
                .collect(),
        })
    } else {
        Err(errors)
    }
}

/// Whether `path` is the root of the filesystem, however it is written (`/`, `//`, `/./`): a
/// rule that is it opens everything. The one test of it: [`validate`] applies it to each rule
/// as written (so a lockfile with one is refused wherever it is read), the plan to every read
/// rule once resolved or derived (a link to `/`, an interpreter prefix).
pub(crate) fn is_whole_filesystem(path: &Path) -> bool {
    path.has_root() && path.parent().is_none()
}

/// What the home directory is called among the protected paths (the plan finds it by name).
pub(crate) const HOME_DIRECTORY: &str = "the home directory";
/// What the mcpsum binary is called among the protected paths.
pub(crate) const BINARY: &str = "the mcpsum binary";

/// The protected paths with their names, canonical where they exist.
pub(crate) fn protected_paths(p: &Protected) -> Vec<(&'static str, PathBuf)> {
    let lock = canonical_or_lexical(&p.lockfile);
    let mut out = vec![("`mcp.lock`", lock.clone())];
    if let Some(dir) = lock.parent() {
        out.push(("the directory of `mcp.lock`", dir.to_path_buf()));
    }
    let state = canonical_or_lexical(&p.state_dir);
    out.push(("the audit log", state.join("audit.jsonl")));
    out.push(("the taint state", state.join("taint")));
    out.push(("mcpsum's state directory", state));
    out.push((BINARY, canonical_or_lexical(&p.binary)));
    for home in p.home.iter().chain(&p.other_homes) {
        let home = canonical_or_lexical(home);
        // `/` as a home (some service accounts) would make every path "inside the home".
        if home.parent().is_some() && !out.iter().any(|(w, h)| *w == HOME_DIRECTORY && *h == home) {
            out.push((HOME_DIRECTORY, home));
        }
    }
    out
}

/// Canonicalises the longest existing ancestor and appends the rest, so protected paths that do
/// not exist yet (a first `lock`, a fresh state dir) still compare against real paths.
pub(crate) fn canonical_or_lexical(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        // The path itself is tried as it is (it mostly exists). An ancestor without an entry
        // (`lstat` says not found, or not a directory on the way) cannot be canonical either:
        // one call instead of a `realpath` that fails after a `readlink` per component.
        if (rest.is_empty() || !has_no_entry(&cur))
            && let Ok(c) = fs_err::canonicalize(&cur)
        {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (cur.file_name().map(ToOwned::to_owned), cur.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                cur = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Whether `lstat` finds no entry at `path` (it or a folder on the way is missing, or a folder
/// on the way is a file): then `canonicalize` would fail too. Any other answer is not proof.
pub(crate) fn has_no_entry(path: &Path) -> bool {
    matches!(
        fs_err::symlink_metadata(path),
        Err(e) if matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        )
    )
}

fn parse_one(
    key: &str,
    raw: &str,
    home: Option<&Path>,
    errors: &mut Vec<PolicyError>,
) -> Option<PolicyPath> {
    let err_path = raw.to_string();
    if Path::new(raw)
        .components()
        .any(|c| c == Component::ParentDir)
    {
        errors.push(PolicyError::DotDot {
            key: key.into(),
            path: err_path,
        });
        return None;
    }
    if is_whole_filesystem(Path::new(raw)) {
        errors.push(PolicyError::WholeFilesystem {
            key: key.into(),
            path: err_path,
        });
        return None;
    }
    if raw == "${TMP}" {
        return Some(PolicyPath::Tmp(PathBuf::new()));
    }
    if let Some(rest) = raw.strip_prefix("${TMP}/") {
        let rel: PathBuf = Path::new(rest)
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        return Some(PolicyPath::Tmp(rel));
    }
    let expanded = if raw == "~" || raw.starts_with("~/") {
        let Some(home) = home else {
            errors.push(PolicyError::Home {
                key: key.into(),
                path: err_path,
                reason: "the home directory is not known",
            });
            return None;
        };
        match raw.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => home.to_path_buf(),
        }
    } else if raw.starts_with('~') {
        errors.push(PolicyError::Home {
            key: key.into(),
            path: err_path,
            reason: "only `~/...` (your own home) is supported",
        });
        return None;
    } else if Path::new(raw).is_absolute() {
        PathBuf::from(raw)
    } else {
        errors.push(PolicyError::NotAbsolute {
            key: key.into(),
            path: err_path,
        });
        return None;
    };
    match fs_err::canonicalize(&expanded) {
        Ok(real) => Some(PolicyPath::Host(real)),
        Err(e) => {
            errors.push(PolicyError::Missing {
                key: key.into(),
                path: err_path,
                cause: e.kind().to_string(),
            });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// The existing part is made real, the rest appended as written, whatever stops the
    /// resolution: a missing folder, a file on the way, a dangling link, a link to a folder.
    #[test]
    fn canonical_or_lexical_resolves_the_longest_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        fs_err::create_dir_all(root.join("real/sub")).unwrap();
        fs_err::write(root.join("file"), "").unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("gone"), root.join("dangling")).unwrap();
        for (given, want) in [
            ("real/sub", "real/sub"),
            ("link/sub", "real/sub"),
            ("link/sub/a/b", "real/sub/a/b"),
            ("missing/a/b", "missing/a/b"),
            ("file/a", "file/a"),
            ("dangling/a", "dangling/a"),
            ("dangling", "dangling"),
        ] {
            assert_eq!(
                canonical_or_lexical(&root.join(given)),
                root.join(want),
                "{given}"
            );
        }
        assert!(has_no_entry(&root.join("missing/a")));
        assert!(has_no_entry(&root.join("file/a")));
        assert!(has_no_entry(&root.join("dangling/a")));
        assert!(!has_no_entry(&root.join("dangling")));
        assert!(!has_no_entry(&root.join("link")));
    }

    struct Fx {
        _dir: tempfile::TempDir,
        root: PathBuf,
        protected: Protected,
    }

    fn fixture() -> Fx {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        for d in ["home/u/notes", "home/u/proj/data", "state", "bin", "other"] {
            fs_err::create_dir_all(root.join(d)).unwrap();
        }
        fs_err::write(root.join("home/u/proj/mcp.lock"), "{}").unwrap();
        fs_err::write(root.join("bin/mcpsum"), "").unwrap();
        std::os::unix::fs::symlink(root.join("home/u"), root.join("other/link-home")).unwrap();
        let protected = Protected {
            lockfile: root.join("home/u/proj/mcp.lock"),
            state_dir: root.join("state/mcpsum"),
            binary: root.join("bin/mcpsum"),
            home: Some(root.join("home/u")),
            other_homes: Vec::new(),
        };
        Fx {
            _dir: dir,
            root,
            protected,
        }
    }

    fn pol(read: &[&str], write: &[&str], allow: &[&str]) -> SandboxPolicy {
        let v = |x: &[&str]| x.iter().map(|s| (*s).to_string()).collect();
        SandboxPolicy {
            read: v(read),
            write: v(write),
            allow: v(allow),
            tasks: None,
        }
    }

    #[test]
    fn accepts_a_good_policy() {
        let fx = fixture();
        let other = fx.root.join("other");
        let got = validate(
            &pol(
                &["~/notes", other.to_str().unwrap()],
                &["${TMP}/work", "${TMP}", "~/proj/data"],
                &["api.github.com:443"],
            ),
            &fx.protected,
        )
        .unwrap();
        assert_eq!(
            got,
            ValidatedPolicy {
                read: vec![
                    (
                        "filesystem.read[0]".into(),
                        PolicyPath::Host(fx.root.join("home/u/notes"))
                    ),
                    ("filesystem.read[1]".into(), PolicyPath::Host(other)),
                ],
                write: vec![
                    (
                        "filesystem.write[0]".into(),
                        PolicyPath::Tmp(PathBuf::from("work"))
                    ),
                    (
                        "filesystem.write[1]".into(),
                        PolicyPath::Tmp(PathBuf::new())
                    ),
                    (
                        "filesystem.write[2]".into(),
                        PolicyPath::Host(fx.root.join("home/u/proj/data"))
                    ),
                ],
                network: NetworkMode::Egress {
                    allow: vec!["api.github.com:443".into()]
                },
                limits: Limits::default(),
                protected: vec![
                    ("`mcp.lock`".into(), fx.root.join("home/u/proj/mcp.lock")),
                    (
                        "the directory of `mcp.lock`".into(),
                        fx.root.join("home/u/proj")
                    ),
                    (
                        "the audit log".into(),
                        fx.root.join("state/mcpsum/audit.jsonl")
                    ),
                    ("the taint state".into(), fx.root.join("state/mcpsum/taint")),
                    (
                        "mcpsum's state directory".into(),
                        fx.root.join("state/mcpsum")
                    ),
                    ("the mcpsum binary".into(), fx.root.join("bin/mcpsum")),
                    ("the home directory".into(), fx.root.join("home/u")),
                ],
            }
        );
    }

    #[test]
    fn empty_allow_is_no_network() {
        let fx = fixture();
        let got = validate(&pol(&[], &[], &[]), &fx.protected).unwrap();
        assert_eq!(got.network, NetworkMode::None);
    }

    #[test]
    fn reports_every_problem_in_one_pass() {
        let fx = fixture();
        let r = |p: &str| fx.root.join(p).to_str().unwrap().to_string();
        let errs = validate(
            &pol(
                &["relative/path", "/a/../b", "~bob/x", &r("nope")],
                &[
                    &r("home/u/proj"),
                    "~",
                    &r("bin"),
                    &r("state"),
                    &r("other/link-home"),
                    "${TMP}/../x",
                    &r("home/u/proj/mcp.lock"),
                ],
                &[],
            ),
            &fx.protected,
        )
        .unwrap_err();
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        let text = text.join("\n").replace(fx.root.to_str().unwrap(), "R");
        let expected = "\
`filesystem.read[0]`: `relative/path` is not absolute; write `/...`, `~/...` or `${TMP}/...`
`filesystem.read[1]`: `/a/../b` contains `..`; write the path without `..`
`filesystem.read[2]`: `~bob/x` starts with `~` but only `~/...` (your own home) is supported; write an absolute path
`filesystem.read[3]`: `R/nope` does not exist (entity not found); create it or remove the entry
`filesystem.write[0]`: `R/home/u/proj` covers `mcp.lock` (`R/home/u/proj/mcp.lock`); list a narrower directory that does not contain it
`filesystem.write[0]`: `R/home/u/proj` covers the directory of `mcp.lock` (`R/home/u/proj`); list a narrower directory that does not contain it
`filesystem.write[1]`: `~` covers `mcp.lock` (`R/home/u/proj/mcp.lock`); list a narrower directory that does not contain it
`filesystem.write[1]`: `~` covers the directory of `mcp.lock` (`R/home/u/proj`); list a narrower directory that does not contain it
`filesystem.write[1]`: `~` covers the home directory (`R/home/u`); list a narrower directory that does not contain it
`filesystem.write[2]`: `R/bin` covers the mcpsum binary (`R/bin/mcpsum`); list a narrower directory that does not contain it
`filesystem.write[3]`: `R/state` covers the audit log (`R/state/mcpsum/audit.jsonl`); list a narrower directory that does not contain it
`filesystem.write[3]`: `R/state` covers the taint state (`R/state/mcpsum/taint`); list a narrower directory that does not contain it
`filesystem.write[3]`: `R/state` covers mcpsum's state directory (`R/state/mcpsum`); list a narrower directory that does not contain it
`filesystem.write[4]`: `R/other/link-home` covers `mcp.lock` (`R/home/u/proj/mcp.lock`); list a narrower directory that does not contain it
`filesystem.write[4]`: `R/other/link-home` covers the directory of `mcp.lock` (`R/home/u/proj`); list a narrower directory that does not contain it
`filesystem.write[4]`: `R/other/link-home` covers the home directory (`R/home/u`); list a narrower directory that does not contain it
`filesystem.write[5]`: `${TMP}/../x` contains `..`; write the path without `..`
`filesystem.write[6]`: `R/home/u/proj/mcp.lock` covers `mcp.lock` (`R/home/u/proj/mcp.lock`); list a narrower directory that does not contain it";
        assert_eq!(text, expected);
    }

    #[test]
    fn refuses_a_write_path_inside_the_state_dir() {
        let fx = fixture();
        let inside = fx.root.join("state/mcpsum/x");
        fs_err::create_dir_all(&inside).unwrap();
        let errs =
            validate(&pol(&[], &[inside.to_str().unwrap()], &[]), &fx.protected).unwrap_err();
        assert!(matches!(
            errs.as_slice(),
            [PolicyError::InsideStateDir { .. }]
        ));
    }

    #[test]
    fn home_unknown_is_an_error() {
        let mut fx = fixture();
        fx.protected.home = None;
        let errs = validate(&pol(&["~/notes"], &[], &[]), &fx.protected).unwrap_err();
        assert_eq!(
            errs[0].to_string(),
            "`filesystem.read[0]`: `~/notes` starts with `~` but the home directory is not known; write an absolute path"
        );
    }

    #[test]
    fn reading_protected_paths_is_allowed_when_listed() {
        let fx = fixture();
        assert!(validate(&pol(&["~", "~/proj"], &[], &[]), &fx.protected).is_ok());
    }

    #[test]
    fn task_limits_default_and_are_range_checked() {
        let fx = fixture();
        let got = validate(&pol(&[], &[], &[]), &fx.protected).unwrap();
        assert_eq!(got.limits.tasks, Limits::DEFAULT_TASKS);
        let mut p = pol(&[], &[], &[]);
        p.tasks = Some(256);
        assert_eq!(validate(&p, &fx.protected).unwrap().limits.tasks, 256);
        for bad in [0, Limits::MAX_TASKS + 1] {
            p.tasks = Some(bad);
            let errs = validate(&p, &fx.protected).unwrap_err();
            assert!(
                matches!(errs.as_slice(), [PolicyError::Tasks { .. }]),
                "{errs:?}"
            );
            assert!(errs[0].to_string().starts_with("`limits.tasks`: "));
        }
    }
}
