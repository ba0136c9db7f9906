//! Artifact pinning: the code a package-runner server (`uvx`, `npx`) runs is the closure that
//! was locked. `lock` resolves the closure into the entry's `artifacts`; every start runs the
//! server from a hash-checked install of exactly that closure, in a content-addressed folder
//! of the user's cache (`$XDG_CACHE_HOME/mcpsum/installs/...`), made once, verified when made
//! and left read-only. Nothing here runs `uvx` or `npx` themselves.

pub mod npm;
pub mod runner;
pub mod uv;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};
use crate::lockfile::{Artifacts, Installer};
use runner::Runner;

/// The file that lists every file an install holds with its digest, written when it was made.
const MANIFEST: &str = ".mcpsum-install.json";
/// The file that marks a finished install: the artifacts' digest and a fingerprint of every
/// file's inode, size and change time, which a start compares instead of re-hashing.
const STAMP: &str = ".mcpsum-stamp";

/// How much of an existing install to check before a start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// That it was finished for these artifacts now; that no file changed since it was made is
    /// left to the returned [`Pending`], which the caller runs before the server starts (the
    /// proxy: it answers `initialize` from the lock meanwhile).
    Deferred,
    /// Every file against what was installed, now (`verify`, `sandbox test`, `lock`).
    Full,
}

/// The change check of an install that [`Check::Deferred`] left to do: run it (off the async
/// runtime: it stats every file) and start the server only when it says `Ok`.
#[must_use = "the server must not start before the install is checked"]
#[derive(Debug)]
pub struct Pending {
    name: String,
    dir: PathBuf,
    artifacts: Artifacts,
}

impl Pending {
    /// Whether the install is still what was made: every file's inode, size and change time
    /// as recorded in the state directory when it was made (one `statx` per file, no hashing),
    /// else every file re-hashed against the manifest the state directory vouches for.
    pub fn run(self) -> Result<()> {
        check_install(&self.name, &self.dir, &self.artifacts, Check::Deferred)
    }
}

/// What a pinned server is started from.
#[derive(Debug)]
pub struct Pinned {
    /// The argv that runs the server from the install.
    pub argv: Vec<String>,
    /// What the server must be able to read (the install, the interpreter it links to).
    pub read: Vec<String>,
    /// The install folder.
    pub dir: PathBuf,
    /// What [`Check::Deferred`] left to check before the server starts.
    pub pending: Option<Pending>,
}

/// `name` on mcpsum's `PATH`.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `$XDG_CACHE_HOME/mcpsum`, else `~/.cache/mcpsum`.
pub fn cache_root() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p).join("mcpsum"));
    }
    crate::paths::home_dir()
        .map(|h| h.join(".cache/mcpsum"))
        .ok_or_else(|| {
            Error::new(
                "cannot find the cache directory: neither `XDG_CACHE_HOME` nor `HOME` is set",
            )
            .hint("set `XDG_CACHE_HOME`; mcpsum keeps pinned installs in `$XDG_CACHE_HOME/mcpsum`")
        })
}

/// The content-addressed folder of a closure: its installer and the first 128 bits of the
/// artifacts' digest (short enough for a script's `#!` line).
pub fn install_dir(artifacts: &Artifacts) -> Result<PathBuf> {
    let digest = artifacts.digest().to_string();
    let hex = &digest["sha256:".len().."sha256:".len() + 32];
    Ok(cache_root()?
        .join("installs")
        .join(format!("{}-{hex}", artifacts.installer)))
}

/// Whether the install of `artifacts` is made (and finished) on this machine.
pub fn is_installed(artifacts: &Artifacts) -> bool {
    install_dir(artifacts)
        .ok()
        .and_then(|d| read_stamp(&d))
        .is_some_and(|(digest, _)| digest == artifacts.digest().to_string())
}

/// What a re-lock knows of the entry's closure before it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prior<'a> {
    /// The closure locked for this very command (a trusted entry): its allowed install scripts
    /// stay allowed, and its wheel choices tell wheels apart.
    pub same_command: Option<&'a Artifacts>,
    /// The closure whose versions the resolution keeps where they still satisfy the
    /// requirements, as `npm install` or `uv pip compile` keep an existing lock (none: resolve
    /// afresh, `lock --upgrade`).
    pub keep: Option<&'a Artifacts>,
}

/// Resolves the closure of `command` for `lock`: `None` when it is not a package runner (its
/// code is not pinned). `allow_scripts` are the npm packages whose install scripts may run
/// (those `prior.same_command` allowed stay allowed).
pub fn resolve(
    name: &str,
    command: &[String],
    prior: Prior<'_>,
    allow_scripts: &[String],
) -> Result<Option<Artifacts>> {
    let previous = prior.same_command;
    match runner::parse(command) {
        None => Ok(None),
        Some(Err(e)) => Err(Error::new(format!(
            "cannot pin the code of server `{name}`"
        ))
        .cause(e)
        .hint("write the command as `uvx [--python V] PACKAGE==VERSION ARGS...` (or `uvx --from PACKAGE==VERSION SCRIPT ARGS...`), or `npx -y PACKAGE@VERSION ARGS...`")),
        Some(Ok(Runner::Uv(_))) if !allow_scripts.is_empty() => Err(Error::new(format!(
            "cannot pin the code of server `{name}`"
        ))
        .cause("`--allow-install-scripts` is for `npx` servers: a `uvx` closure holds built wheels only, which have no install scripts")
        .hint("drop `--allow-install-scripts`")),
        Some(Ok(Runner::Uv(run))) => uv::resolve(&run, previous, prior.keep)
            .map(Some)
            .map_err(|e| pin_error(name, e)),
        Some(Ok(Runner::Npm(run))) => {
            let mut allowed = allow_scripts.to_vec();
            allowed.extend(
                previous
                    .iter()
                    .flat_map(|a| &a.packages)
                    .filter(|p| p.install_script)
                    .map(|p| p.name.clone()),
            );
            let artifacts = npm::resolve(&run, &allowed, prior.keep).map_err(|e| pin_error(name, e))?;
            for pkg in allow_scripts {
                if !artifacts
                    .packages
                    .iter()
                    .any(|p| p.install_script && p.name == *pkg)
                {
                    crate::output::warn(&format!(
                        "server `{name}`: `--allow-install-scripts {}` allows nothing: no package of its closure by that name has an install script",
                        crate::text::sanitize_line(pkg)
                    ));
                }
            }
            Ok(Some(artifacts))
        }
    }
}

fn pin_error(name: &str, e: Error) -> Error {
    let hint = e.hint_text().map(str::to_owned);
    let err = Error::new(format!("cannot pin the code of server `{name}`"))
        .cause(e.one_line())
        .details(e.detail_lines().to_vec());
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

/// Whether `command` is a package runner whose closure `lock` pins.
pub fn pins(command: &[String]) -> bool {
    matches!(runner::parse(command), Some(Ok(_)))
}

/// The start of a pinned server: its install (made from the recorded hashes when missing,
/// checked as `check` says) and the argv that runs it from there.
pub fn prepare(
    name: &str,
    command: &[String],
    artifacts: &Artifacts,
    check: Check,
) -> Result<Pinned> {
    let run = match runner::parse(command) {
        Some(Ok(run)) if installer_of(&run) == artifacts.installer => run,
        _ => {
            return Err(Error::new(format!(
                "server `{name}` pins `{}` artifacts, but its command is not a `{}` command that can run them",
                artifacts.installer,
                match artifacts.installer {
                    Installer::Uv => "uvx",
                    Installer::Npm => "npx",
                }
            ))
            .hint(format!("re-lock it: `mcpsum lock --name {name}`")));
        }
    };
    let (dir, made) = ensure(name, &run, artifacts)?;
    let pending = match check {
        _ if made => None,
        Check::Full => {
            check_install(name, &dir, artifacts, Check::Full)?;
            None
        }
        Check::Deferred => Some(Pending {
            name: name.to_owned(),
            dir: dir.clone(),
            artifacts: artifacts.clone(),
        }),
    };
    let mut read = vec![dir.display().to_string()];
    let argv = match &run {
        Runner::Uv(run) => {
            let script = dir.join("bin").join(&run.script);
            if !script.is_file() {
                return Err(Error::new(format!(
                    "the pinned install of server `{name}` has no `{}` program",
                    run.script
                ))
                .cause(format!("`{}` does not exist", script.display()))
                .hint("name the console script with `uvx --from PACKAGE==VERSION SCRIPT`, then re-lock"));
            }
            if let Some(home) = venv_home(&dir) {
                read.push(home.display().to_string());
            }
            let mut argv = vec![script.display().to_string()];
            argv.extend(run.args.iter().cloned());
            argv
        }
        Runner::Npm(run) => {
            let script = npm::entry_script(&dir, run).map_err(|e| pin_error(name, e))?;
            let node = npm::find_node(&run.program)?;
            let real = fs_err::canonicalize(&node).unwrap_or_else(|_| node.clone());
            if let Some(prefix) = real.parent().and_then(Path::parent) {
                read.push(prefix.display().to_string());
            }
            let mut argv = vec![real.display().to_string(), script.display().to_string()];
            argv.extend(run.args.iter().cloned());
            argv
        }
    };
    Ok(Pinned {
        argv,
        read,
        dir,
        pending,
    })
}

fn installer_of(run: &Runner) -> Installer {
    match run {
        Runner::Uv(_) => Installer::Uv,
        Runner::Npm(_) => Installer::Npm,
    }
}

/// The interpreter prefix a venv links to (`home` in `pyvenv.cfg` is its `bin/`).
fn venv_home(dir: &Path) -> Option<PathBuf> {
    let cfg = fs_err::read_to_string(dir.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })?;
    let real = fs_err::canonicalize(&home).unwrap_or(home);
    Some(if real.file_name().is_some_and(|n| n == "bin") {
        real.parent().map(Path::to_path_buf).unwrap_or(real)
    } else {
        real
    })
}

/// The install of `artifacts`, made when missing (or unfinished); `true` when made now (and
/// so verified already).
fn ensure(name: &str, run: &Runner, artifacts: &Artifacts) -> Result<(PathBuf, bool)> {
    let dir = install_dir(artifacts)?;
    let digest = artifacts.digest().to_string();
    if let Some((stamped, _)) = read_stamp(&dir) {
        if stamped != digest {
            return Err(Error::new(format!(
                "the install of server `{name}` at `{}` is not the one its lockfile pins",
                dir.display()
            ))
            .hint(remove_hint(&dir)));
        }
        return Ok((dir, false));
    }
    make(name, run, artifacts, &dir)?;
    Ok((dir, true))
}

/// Where the state directory vouches for an install: the digest of its manifest and the
/// fingerprint of its files when it was made (or last verified). The cache may be writable by
/// more than mcpsum (a sandboxed server whose `write` rules cover `~/.cache`), so a stamp and
/// manifest inside the install prove nothing alone; the state directory is never writable to a
/// sandboxed server (it is protected from every write rule).
fn anchor_path(dir: &Path) -> Result<PathBuf> {
    let leaf = dir.file_name().unwrap_or_default();
    Ok(crate::paths::state_dir()?.join("installs").join(leaf))
}

fn read_anchor(dir: &Path) -> Option<(String, String)> {
    let text = fs_err::read_to_string(anchor_path(dir).ok()?).ok()?;
    let mut lines = text.lines();
    Some((lines.next()?.to_owned(), lines.next()?.to_owned()))
}

/// Records what the install is now (best effort: without it, the next start re-hashes), through
/// the one atomic writer. Durable: the record outlives the process, and one lost in a power
/// failure would leave an older record to refuse a re-made install. Written only when the
/// install was made or its files' fingerprint changed, so a start pays no fsync.
fn write_anchor(dir: &Path, manifest_digest: &str, fingerprint: &str) {
    let Ok(path) = anchor_path(dir) else { return };
    let parent = crate::fsutil::parent_dir(&path);
    if crate::paths::ensure_state_dir().is_err() || fs_err::create_dir_all(&parent).is_err() {
        return;
    }
    let text = format!("{manifest_digest}\n{fingerprint}\n");
    let _ = crate::fsutil::replace(&path, text.as_bytes(), crate::fsutil::Replace::default());
}

/// Checks that the install of `artifacts` at `dir` is what was made. `Deferred`: when the
/// files' fingerprint is the one the state directory recorded, nothing was written since
/// (any write to a file, and the `chmod` it takes first, changes its change time, which no
/// user can set back; a replaced file or folder has another inode). Otherwise, and always for
/// `Full`: every file re-hashed against the manifest, which must be the one the state directory
/// recorded (a manifest rewritten to match changed files is refused); when the state directory
/// has no record (another `MCPSUM_STATE_DIR`), the manifest is trusted and recorded.
fn check_install(name: &str, dir: &Path, artifacts: &Artifacts, check: Check) -> Result<()> {
    let cannot_read = |e: std::io::Error| {
        Error::new(format!("cannot read the install `{}`", dir.display())).cause(e)
    };
    let anchor = read_anchor(dir);
    let fingerprint = fingerprint_of(dir).map_err(cannot_read)?;
    if check == Check::Deferred && anchor.as_ref().is_some_and(|(_, f)| *f == fingerprint) {
        return Ok(());
    }
    let bytes = fs_err::read(dir.join(MANIFEST)).map_err(|_| lost_manifest(name, dir))?;
    let manifest_digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    if let Some((recorded, _)) = &anchor
        && *recorded != manifest_digest
    {
        return Err(Error::new(format!(
            "the pinned install of server `{name}` was changed: its manifest `{}` is not the one written when it was made",
            dir.join(MANIFEST).display()
        ))
        .details(vec![format!(
            "recorded {recorded} in `{}`, found {manifest_digest}",
            anchor_path(dir).map(|p| p.display().to_string()).unwrap_or_default()
        )])
        .hint(remove_hint(dir)));
    }
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|_| lost_manifest(name, dir))?;
    if manifest.artifacts != artifacts.digest().to_string() {
        return Err(lost_manifest(name, dir));
    }
    verify_files(name, dir, &manifest, artifacts)?;
    if anchor.as_ref() != Some(&(manifest_digest.clone(), fingerprint.clone())) {
        write_anchor(dir, &manifest_digest, &fingerprint);
    }
    Ok(())
}

fn lost_manifest(name: &str, dir: &Path) -> Error {
    Error::new(format!(
        "the pinned install of server `{name}` at `{}` has lost its manifest",
        dir.display()
    ))
    .hint(remove_hint(dir))
}

/// Makes the install under an advisory lock (two starts at once make it once), verifies it
/// and leaves it read-only.
fn make(name: &str, run: &Runner, artifacts: &Artifacts, dir: &Path) -> Result<()> {
    let parent = crate::fsutil::parent_dir(dir);
    fs_err::create_dir_all(&parent).map_err(|e| {
        Error::new(format!("cannot create `{}`", parent.display()))
            .cause(e)
            .hint("check that the cache directory is writable, or set `XDG_CACHE_HOME`")
    })?;
    let lock_path = dir.with_extension("lock");
    let lock = fs_err::File::create(&lock_path)
        .map_err(|e| Error::new(format!("cannot create `{}`", lock_path.display())).cause(e))?
        .into_parts()
        .0;
    lock.lock()
        .map_err(|e| Error::new(format!("cannot lock `{}`", lock_path.display())).cause(e))?;
    // Made meanwhile by another start.
    if read_stamp(dir).is_some() {
        return Ok(());
    }
    // An unfinished install (no manifest): start over.
    if dir.exists() {
        make_writable(dir);
        fs_err::remove_dir_all(dir).map_err(|e| {
            Error::new(format!(
                "cannot remove the unfinished install `{}`",
                dir.display()
            ))
            .cause(e)
        })?;
    }
    let made = match run {
        Runner::Uv(run) => uv::install(&run.program, artifacts, dir),
        Runner::Npm(run) => npm::install(run, artifacts, dir),
    };
    if let Err(e) = made {
        make_writable(dir);
        let _ = fs_err::remove_dir_all(dir);
        let hint = format!(
            "the server was not started; once the registry is reachable (PyPI or `UV_INDEX_URL` for uv, `npm config get registry` for npm), or the installer's cache holds the files, run `mcpsum verify --name {name}` to make the install again, or re-lock with `mcpsum lock --name {name}` if the pinned versions are gone"
        );
        return Err(Error::new(format!(
            "cannot make the pinned install of server `{name}` from its recorded hashes"
        ))
        .cause(e.one_line())
        .details(e.detail_lines().to_vec())
        .hint(hint));
    }
    let files = hash_tree(dir)
        .map_err(|e| Error::new(format!("cannot read the install `{}`", dir.display())).cause(e))?;
    let manifest = Manifest {
        artifacts: artifacts.digest().to_string(),
        files,
    };
    let bytes = serde_json::to_vec(&manifest).unwrap_or_default();
    let manifest_digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    let cannot_write =
        |e: std::io::Error| Error::new(format!("cannot write into `{}`", dir.display())).cause(e);
    fs_err::write(dir.join(MANIFEST), bytes).map_err(cannot_write)?;
    make_read_only(dir);
    // The stamp last, with the fingerprint of the files as they are now (read-only).
    let fingerprint = fingerprint_of(dir).map_err(cannot_write)?;
    set_mode(dir, 0o755);
    let stamp = dir.join(STAMP);
    fs_err::write(&stamp, format!("{}\n{fingerprint}\n", artifacts.digest()))
        .map_err(cannot_write)?;
    set_mode(&stamp, 0o444);
    set_mode(dir, 0o555);
    // Changing the folder's mode changed its own change time, not its files'.
    write_anchor(dir, &manifest_digest, &fingerprint);
    Ok(())
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

fn remove_hint(dir: &Path) -> String {
    format!(
        "the server was not started; remove the install (`chmod -R u+w {0} && rm -rf {0}`) and the next start makes it again from the recorded hashes",
        dir.display()
    )
}

/// The artifacts' digest and the fingerprint a finished install was stamped with.
fn read_stamp(dir: &Path) -> Option<(String, String)> {
    let text = fs_err::read_to_string(dir.join(STAMP)).ok()?;
    let mut lines = text.lines();
    Some((lines.next()?.to_owned(), lines.next()?.to_owned()))
}

/// One digest over every file's path, inode, size and change time (the stamp left out).
fn fingerprint_of(dir: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let mut entries: Vec<(String, u64, u64, i64, i64)> = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs_err::read_dir(&d)? {
            let e = e?;
            let path = e.path();
            if e.file_type()?.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(dir).unwrap_or(&path);
            if rel.as_os_str() == STAMP {
                continue;
            }
            // `DirEntry::metadata` stats relative to the open directory and does not follow
            // a link: one `statx` per file.
            let m = e.metadata()?;
            entries.push((
                rel.to_string_lossy().into_owned(),
                m.ino(),
                m.size(),
                m.ctime(),
                m.ctime_nsec(),
            ));
        }
    }
    entries.sort_unstable();
    let mut h = Sha256::new();
    for (rel, ino, size, sec, nsec) in entries {
        h.update(rel.as_bytes());
        h.update(format!("\0{ino}:{size}:{sec}.{nsec}\n").as_bytes());
    }
    Ok(hex::encode(h.finalize()))
}

/// What was installed: the artifacts' digest and every file's digest (a link: its target).
#[derive(serde::Serialize, serde::Deserialize)]
struct Manifest {
    artifacts: String,
    files: BTreeMap<String, String>,
}

/// Every file under `dir` (but the manifest) by its path relative to `dir`: `sha256:<hex>` of
/// its bytes, `link:<target>` for a symbolic link.
fn hash_tree(dir: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs_err::read_dir(&d)? {
            let e = e?;
            let path = e.path();
            let rel = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let kind = e.file_type()?;
            if kind.is_symlink() {
                let target = fs_err::read_link(&path)?;
                out.insert(rel, format!("link:{}", target.display()));
            } else if kind.is_dir() {
                stack.push(path);
            } else if rel != MANIFEST && rel != STAMP {
                let bytes = fs_err::read(&path)?;
                let digest = hex::encode(Sha256::digest(&bytes));
                out.insert(rel, format!("sha256:{digest}"));
            }
        }
    }
    Ok(out)
}

/// Re-hashes every file of the install and refuses any difference, naming the packages whose
/// files changed.
fn verify_files(name: &str, dir: &Path, manifest: &Manifest, artifacts: &Artifacts) -> Result<()> {
    let now = hash_tree(dir)
        .map_err(|e| Error::new(format!("cannot read the install `{}`", dir.display())).cause(e))?;
    let mut changed = Vec::new();
    for (path, digest) in &manifest.files {
        match now.get(path) {
            Some(d) if d == digest => {}
            Some(_) => changed.push(("changed", path.as_str())),
            None => changed.push(("removed", path.as_str())),
        }
    }
    for path in now.keys().filter(|p| !manifest.files.contains_key(*p)) {
        changed.push(("added", path.as_str()));
    }
    if changed.is_empty() {
        return Ok(());
    }
    let owners = match artifacts.installer {
        Installer::Uv => file_owners(dir),
        Installer::Npm => BTreeMap::new(),
    };
    let mut packages: Vec<String> = Vec::new();
    let mut lines = Vec::new();
    for (how, path) in &changed {
        let owner = owner_of(&owners, path)
            .cloned()
            .or_else(|| npm_owner(artifacts, path))
            .unwrap_or_else(|| "the environment itself".to_owned());
        if !packages.contains(&owner) {
            packages.push(owner.clone());
        }
        lines.push(format!(
            "{how}: `{}` (package {owner})",
            crate::text::sanitize_line(path)
        ));
    }
    lines.truncate(20);
    Err(Error::new(format!(
        "the pinned install of server `{name}` was changed: {} no longer {} what was installed",
        packages.join(", "),
        if packages.len() == 1 { "is" } else { "are" }
    ))
    .details(lines)
    .hint(remove_hint(dir)))
}

/// Which package installed each file (paths relative to the install), from the `RECORD` of
/// every `.dist-info`: `name version`.
fn file_owners(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(sp) = uv::site_packages(dir) else {
        return out;
    };
    let Ok(infos) = uv::dist_infos(dir) else {
        return out;
    };
    let sp_rel = sp.strip_prefix(dir).unwrap_or(&sp).to_path_buf();
    for (pkg, info) in infos {
        let owner = format!(
            "`{pkg} {}`",
            uv::dist_info_version(&info).unwrap_or_default()
        );
        let Ok(record) = fs_err::read_to_string(info.join("RECORD")) else {
            continue;
        };
        for line in record.lines() {
            let Some(path) = line.split(',').next().filter(|p| !p.is_empty()) else {
                continue;
            };
            let joined = normalize_rel(&sp_rel.join(path));
            out.insert(joined, owner.clone());
        }
    }
    out
}

/// The package that installed `path` (relative to the install): a compiled `__pycache__/X.*.pyc`
/// belongs with `X.py`.
fn owner_of<'a>(owners: &'a BTreeMap<String, String>, path: &str) -> Option<&'a String> {
    owners.get(path).or_else(|| {
        let (parent, file) = path.rsplit_once("/__pycache__/")?;
        let stem = file.split('.').next()?;
        owners.get(&format!("{parent}/{stem}.py"))
    })
}

/// The npm package whose folder holds `path` (the deepest one).
fn npm_owner(artifacts: &Artifacts, path: &str) -> Option<String> {
    if artifacts.installer != Installer::Npm {
        return None;
    }
    artifacts
        .packages
        .iter()
        .filter(|p| path.starts_with(&format!("{}/", p.npm_path())))
        .max_by_key(|p| p.npm_path().len())
        .map(|p| format!("`{} {}`", p.name, p.version))
}

/// `a/b/../c` as `a/c`.
fn normalize_rel(p: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

fn set_modes(dir: &Path, f: fn(u32, bool) -> u32) {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![dir.to_path_buf()];
    let mut dirs = Vec::new();
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs_err::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                stack.push(e.path());
            } else if kind.is_file()
                && let Ok(meta) = e.metadata()
            {
                let mode = f(meta.permissions().mode(), false);
                let _ = fs_err::set_permissions(e.path(), std::fs::Permissions::from_mode(mode));
            }
        }
        dirs.push(d);
    }
    for d in dirs {
        if let Ok(meta) = fs_err::metadata(&d) {
            let mode = f(meta.permissions().mode(), true);
            let _ = fs_err::set_permissions(&d, std::fs::Permissions::from_mode(mode));
        }
    }
}

/// No write bit anywhere in the install.
fn make_read_only(dir: &Path) {
    set_modes(dir, |mode, _| mode & !0o222);
}

/// The owner's write bit back, to remove an install.
fn make_writable(dir: &Path) {
    set_modes(dir, |mode, _| mode | 0o200);
}

/// The package changes between two closures, as a lockfile diff reads: `~ name old → new`,
/// `+ name version`, `- name`.
pub fn changes(old: Option<&Artifacts>, new: Option<&Artifacts>) -> Vec<String> {
    type Pinned = (String, String, bool);
    let map = |a: Option<&Artifacts>| -> BTreeMap<String, Pinned> {
        a.map(|a| {
            a.packages
                .iter()
                .map(|p| {
                    (
                        p.name.clone(),
                        (p.version.clone(), p.hash.clone(), p.install_script),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let (old_map, new_map) = (map(old), map(new));
    let mut out = Vec::new();
    if let (Some(o), Some(n)) = (old, new)
        && o.python != n.python
    {
        out.push(format!(
            "~ python {} → {}",
            o.python.as_deref().unwrap_or("-"),
            n.python.as_deref().unwrap_or("-")
        ));
    }
    let names: std::collections::BTreeSet<&String> = old_map.keys().chain(new_map.keys()).collect();
    for name in names {
        match (old_map.get(name), new_map.get(name)) {
            (Some((ov, oh, os)), Some((nv, nh, ns))) if ov != nv || oh != nh || os != ns => {
                let note = match (os, ns) {
                    (false, true) => " (install script allowed)",
                    (true, false) => " (install script no longer allowed)",
                    _ => "",
                };
                if ov != nv {
                    out.push(format!("~ {name} {ov} → {nv}{note}"));
                } else if oh != nh {
                    out.push(format!("~ {name} {ov} (hash {oh} → {nh}){note}"));
                } else {
                    out.push(format!("~ {name} {ov}{note}"));
                }
            }
            (None, Some((nv, _, ns))) => out.push(format!(
                "+ {name} {nv}{}",
                if *ns { " (install script allowed)" } else { "" }
            )),
            (Some(_), None) => out.push(format!("- {name}")),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lockfile::ArtifactPackage;

    fn closure(python: &str, pkgs: &[(&str, &str, &str)]) -> Artifacts {
        Artifacts {
            installer: Installer::Uv,
            python: Some(python.to_owned()),
            node: None,
            packages: pkgs
                .iter()
                .map(|(n, v, h)| ArtifactPackage {
                    name: (*n).to_owned(),
                    version: (*v).to_owned(),
                    hash: (*h).to_owned(),
                    ..ArtifactPackage::default()
                })
                .collect(),
        }
    }

    #[test]
    fn closure_changes_read_like_a_lockfile_diff() {
        let old = closure(
            "3.11",
            &[
                ("old-dep", "1", "a"),
                ("pydantic", "2.12.3", "b"),
                ("same", "1", "c"),
            ],
        );
        let new = closure(
            "3.11",
            &[
                ("new-dep", "1.0.0", "d"),
                ("pydantic", "2.12.4", "e"),
                ("same", "1", "c"),
            ],
        );
        assert_eq!(
            changes(Some(&old), Some(&new)),
            ["+ new-dep 1.0.0", "- old-dep", "~ pydantic 2.12.3 → 2.12.4"]
        );
        assert!(changes(Some(&old), Some(&old)).is_empty());
        let rehashed = closure("3.12", &[("same", "1", "x")]);
        assert_eq!(
            changes(
                Some(&closure("3.11", &[("same", "1", "c")])),
                Some(&rehashed)
            ),
            ["~ python 3.11 → 3.12", "~ same 1 (hash c → x)"]
        );
        assert_eq!(changes(None, Some(&rehashed)), ["+ same 1"]);
        let mut allowed = rehashed.clone();
        allowed.packages[0].install_script = true;
        assert_eq!(
            changes(Some(&rehashed), Some(&allowed)),
            ["~ same 1 (install script allowed)"]
        );
        assert_eq!(
            changes(Some(&allowed), Some(&rehashed)),
            ["~ same 1 (install script no longer allowed)"]
        );
    }

    #[test]
    fn an_install_is_found_by_the_owner_of_each_file() {
        let mut owners = BTreeMap::new();
        owners.insert("lib/p/site-packages/m/a.py".to_owned(), "`m 1`".to_owned());
        assert_eq!(
            owner_of(
                &owners,
                "lib/p/site-packages/m/__pycache__/a.cpython-311.pyc"
            )
            .map(String::as_str),
            Some("`m 1`")
        );
        assert_eq!(owner_of(&owners, "bin/python"), None);
        assert_eq!(
            normalize_rel(Path::new("lib/p/site-packages/../../../bin/x")),
            "bin/x"
        );
    }
}
