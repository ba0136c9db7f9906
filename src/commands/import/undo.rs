//! The record of rewritten files (`import-manifest.json` in the state directory) and
//! `mcpsum import --undo`.
//!
//! Each `import --write` appends one record: for every file it rewrote, where the backup is and
//! the digests of the file before and after. `--undo` takes the last record and restores every
//! file in it from its backup, byte for byte, but only when every file is still exactly what
//! the import wrote: a file changed since then (by hand, or by its client) is not overwritten.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Exit, Result};
use crate::lockfile::{LockGuard, Sha256Digest};
use crate::output::{self, paint, style};
use crate::paths;

/// The manifest's file name in the state directory.
pub const MANIFEST_NAME: &str = "import-manifest.json";

/// The whole manifest.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    /// Always 1.
    pub version: u32,
    /// One record per `import --write` that rewrote something, oldest first.
    pub imports: Vec<ImportRecord>,
}

/// One `import --write`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportRecord {
    /// When (RFC 3339, UTC).
    pub at: String,
    /// The lockfile the routed entries name.
    pub lockfile: PathBuf,
    /// The files rewritten.
    pub files: Vec<FileRecord>,
}

/// One rewritten file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileRecord {
    /// The file (its real path, symlinks resolved).
    pub path: PathBuf,
    /// Whose config it is (`cursor`, ...).
    pub client: String,
    /// The lockfile its routed entries name, when it is not the record's (a user-level config
    /// routed to the user-level lockfile, in an import that also routed a project's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockfile: Option<PathBuf>,
    /// The copy of the file as it was.
    pub backup: PathBuf,
    /// Digest of the file before the import (and of the backup).
    pub before: Sha256Digest,
    /// Digest of the file as the import wrote it.
    pub after: Sha256Digest,
    /// The entries routed through mcpsum.
    pub servers: Vec<String>,
}

/// The manifest's path.
pub fn manifest_path() -> Result<PathBuf> {
    Ok(paths::state_dir()?.join(MANIFEST_NAME))
}

/// Reads the manifest (empty when there is none).
pub fn load(path: &Path) -> Result<Manifest> {
    if !path.exists() {
        return Ok(Manifest {
            version: 1,
            imports: Vec::new(),
        });
    }
    let bytes = fs_err::read(path)
        .map_err(|e| Error::new(format!("cannot read `{}`", path.display())).cause(e))?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
        Error::new(format!("`{}` is not a valid import manifest", path.display()))
            .cause(e)
            .hint("the backups beside each rewritten file (`*.mcpsum-backup-*`) are the files as they were; restore them by hand")
    })?;
    if manifest.version != 1 {
        return Err(Error::new(format!(
            "`{}` has version {}, which this mcpsum does not read",
            path.display(),
            manifest.version
        ))
        .hint("use the mcpsum that wrote it, or restore the `*.mcpsum-backup-*` files by hand"));
    }
    Ok(manifest)
}

/// Writes the manifest atomically (mode 0600: it names files in your home directory).
pub fn save(path: &Path, manifest: &Manifest) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(manifest).unwrap_or_default();
    bytes.push(b'\n');
    let fail = |e: std::io::Error| {
        Error::new(format!("cannot write `{}`", path.display()))
            .cause(e)
            .hint("check that the state directory is writable (`MCPSUM_STATE_DIR`)")
    };
    crate::fsutil::replace(path, &bytes, crate::fsutil::Replace::default()).map_err(fail)
}

/// Appends `record` to the manifest under the state directory's lock.
pub fn append(record: ImportRecord) -> Result<()> {
    paths::ensure_state_dir()?;
    let path = manifest_path()?;
    let _guard = LockGuard::acquire(&path)?;
    let mut manifest = load(&path)?;
    manifest.imports.push(record);
    save(&path, &manifest)
}

/// What `--undo` finds for one file.
enum FileState {
    /// Exactly as the import wrote it: restore it.
    AsWritten(Vec<u8>),
    /// Already as it was before the import (restored by hand, or the write never happened).
    AsBefore,
}

/// Runs `mcpsum import --undo`.
pub fn run() -> Result<Exit> {
    let path = manifest_path()?;
    if !path.exists() {
        return Err(nothing_to_undo(&path));
    }
    let _guard = LockGuard::acquire(&path)?;
    let mut manifest = load(&path)?;
    let Some(record) = manifest.imports.last() else {
        return Err(nothing_to_undo(&path));
    };

    // Check every file first: either all of them are restored or none.
    let mut problems = Vec::new();
    let mut plan = Vec::new();
    for f in &record.files {
        match check(f) {
            Ok(state) => plan.push((f, state)),
            Err(p) => problems.push(p),
        }
    }
    if !problems.is_empty() {
        let n = problems.len();
        return Err(Error::new(format!(
            "cannot undo the import of {}: {n} file{} changed since then or lost {} backup",
            record.at,
            super::plural(n),
            if n == 1 { "its" } else { "their" },
        ))
        .details(problems)
        .hint("nothing was restored. Compare each file with its backup (`diff BACKUP FILE`) and copy back what you want by hand; clients such as Claude Code rewrite their own files, so a changed file may hold their edits too. Once a file matches its backup again, `mcpsum import --undo` goes on with the rest"));
    }

    for (f, state) in &plan {
        if let FileState::AsWritten(backup) = state {
            let like = fs_err::metadata(&f.backup).map_err(|e| {
                Error::new(format!("cannot read `{}`", f.backup.display())).cause(e)
            })?;
            let opts = crate::fsutil::Replace {
                like: Some(&like),
                ..crate::fsutil::Replace::default()
            };
            crate::fsutil::replace(&f.path, backup, opts).map_err(|e| {
                Error::new(format!("cannot restore `{}`", f.path.display()))
                    .cause(e)
                    .hint(format!(
                        "its backup `{}` is untouched; copy it back by hand",
                        f.backup.display()
                    ))
            })?;
        }
        output::info(&format!(
            "{} `{}` ({}){}",
            paint(style::OK, "restored"),
            f.path.display(),
            f.client,
            if matches!(state, FileState::AsBefore) {
                ": it was already as before the import"
            } else {
                ""
            }
        ));
    }
    // Backups go only once every file is back, so an interrupted undo can be run again.
    for (f, _) in &plan {
        let _ = fs_err::remove_file(&f.backup);
    }
    // Each lockfile the restored entries named, the record's first.
    let mut lockfiles: Vec<PathBuf> = Vec::new();
    for f in record.files.iter().filter(|f| !f.servers.is_empty()) {
        let l = f.lockfile.as_ref().unwrap_or(&record.lockfile);
        if !lockfiles.contains(l) {
            lockfiles.push(l.clone());
        }
    }
    manifest.imports.pop();
    save(&path, &manifest)?;
    if !lockfiles.is_empty() {
        output::info(&format!(
            "the lock entries in {} are kept; remove the ones you no longer want with `mcpsum remove --lockfile LOCKFILE --name NAME`",
            lockfiles
                .iter()
                .map(|l| format!("`{}`", l.display()))
                .collect::<Vec<_>>()
                .join(" and "),
        ));
    }
    if !manifest.imports.is_empty() {
        output::info(&format!(
            "{} earlier import{} can be undone too: run `mcpsum import --undo` again",
            manifest.imports.len(),
            super::plural(manifest.imports.len())
        ));
    }
    Ok(Exit::Ok)
}

fn nothing_to_undo(path: &Path) -> Error {
    Error::new("nothing to undo: no `mcpsum import --write` is recorded")
        .cause(format!("no record in `{}`", path.display()))
        .hint("`--undo` restores the files of the last `mcpsum import --write` run with this state directory (`MCPSUM_STATE_DIR`)")
}

/// Whether `f` can be restored: the backup must be the file as it was, and the file must be
/// what the import wrote (or already back as it was).
fn check(f: &FileRecord) -> std::result::Result<FileState, String> {
    let backup = fs_err::read(&f.backup).map_err(|e| {
        format!(
            "`{}`: its backup `{}` cannot be read ({e})",
            f.path.display(),
            f.backup.display()
        )
    })?;
    if Sha256Digest::of_bytes(&backup) != f.before {
        return Err(format!(
            "`{}`: its backup `{}` changed since the import",
            f.path.display(),
            f.backup.display()
        ));
    }
    let current = fs_err::read(&f.path).map_err(|e| {
        format!(
            "`{}` cannot be read ({e}); its backup is `{}`",
            f.path.display(),
            f.backup.display()
        )
    })?;
    let digest = Sha256Digest::of_bytes(&current);
    if digest == f.after {
        Ok(FileState::AsWritten(backup))
    } else if digest == f.before {
        Ok(FileState::AsBefore)
    } else {
        Err(format!(
            "`{}` changed since the import; its backup is `{}`",
            f.path.display(),
            f.backup.display()
        ))
    }
}
