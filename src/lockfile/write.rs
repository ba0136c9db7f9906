//! Writing `mcp.lock`: pure formatting plus an atomic replace under an advisory lock.
//!
//! The bytes are pretty JSON with two-space indentation and one trailing newline, servers sorted
//! by name (a `BTreeMap`), fields in the seed's order (struct order). The digest input is a
//! separate thing (RFC 8785 per item); pretty text is never hashed.

use std::fs::File;
use std::path::Path;

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Lockfile, ServerEntry};
use crate::error::{Error, Result};
use crate::fsutil::{self, parent_dir};

/// The file's bytes. The version is the one the content requires.
pub fn to_bytes(lock: &Lockfile) -> Vec<u8> {
    /// [`Lockfile`] with the version and generator of this write, borrowing the entries.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Written<'a> {
        lockfile_version: u32,
        generator: String,
        servers: &'a BTreeMap<String, ServerEntry>,
    }
    let written = Written {
        lockfile_version: lock.required_version(),
        generator: super::generator(),
        servers: &lock.servers,
    };
    // Serializing plain data into a Vec cannot fail.
    let mut out = serde_json::to_vec_pretty(&written).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Replaces `path` with `bytes` atomically (call it under [`LockGuard`]) with
/// [`fsutil::replace`]. An interrupted write leaves the old file whole. A `path` that is a symbolic link is refused ([`refuse_symlink`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    // Checked again here, under the lock, as the last step before the rename: this is the one
    // function that writes `mcp.lock`, so no caller can forget it.
    refuse_symlink(path)?;
    let dir = parent_dir(path);
    let fail = |e: std::io::Error| {
        Error::new(format!("cannot write `{}`", path.display()))
            .cause(e)
            .hint("check that the directory exists and is writable; the old file is unchanged")
    };
    remove_stale_temporaries(&dir);
    // A new lockfile is committed, so readable by all (0644); an existing one keeps its mode.
    let opts = fsutil::Replace {
        new_mode: 0o644,
        ..fsutil::Replace::default()
    };
    fsutil::replace(path, bytes, opts).map_err(fail)?;
    Ok(())
}

/// Refuses a lockfile path that is a symbolic link, before anything is written to it.
///
/// Renaming over the path would silently replace the link with a regular file and leave the file
/// it points to stale; writing through it would be worse: a repository can commit `mcp.lock` as
/// a link to any file its user can write (`~/.bashrc`), and `lock` in that checkout would
/// overwrite it. So a write goes only to a path that is not a link, and the error says which
/// path to pass to update the target deliberately. Reading through a link is left alone: it
/// changes nothing.
pub fn refuse_symlink(path: &Path) -> Result<()> {
    let Ok(meta) = fs_err::symlink_metadata(path) else {
        // Missing (a new lockfile) or unreadable: the write itself reports that.
        return Ok(());
    };
    if !meta.file_type().is_symlink() {
        return Ok(());
    }
    let target = fs_err::read_link(path).ok();
    let named = target.as_ref().map_or_else(
        || "a target mcpsum cannot read".to_owned(),
        |t| format!("`{}`", t.display()),
    );
    let refusal = "mcpsum does not write a lockfile through a link, which could point at any file you can write";
    let refused = |what: &str| {
        Error::new(format!(
            "cannot write `{}`: it is a symbolic link to {named}{what}",
            path.display()
        ))
    };
    let remove = "remove the link, or pass `--lockfile PATH` naming a regular file";
    match fs_err::canonicalize(path) {
        Ok(real) => Err(refused("").cause(refusal).hint(format!(
            "to update the file it points to, pass `--lockfile {}`; to keep a lockfile here, replace the link with a regular file",
            real.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let hint = match target {
                // Relative to the link's own directory, as the kernel resolves it.
                Some(t) => format!(
                    "to create the file it points to, pass `--lockfile {}`; otherwise remove the link",
                    path.parent().map_or_else(|| t.clone(), |dir| dir.join(&t)).display()
                ),
                None => remove.to_owned(),
            };
            Err(refused(", which does not exist").cause(refusal).hint(hint))
        }
        Err(e) => Err(refused(", which cannot be resolved")
            .cause(e)
            .cause(refusal)
            .hint(remove)),
    }
}

/// Removes `.mcp.lock.*.tmp` files left by a writer that was killed mid-write. Writers hold the
/// directory lock ([`LockGuard`]) while writing, so under the lock any such file is stale.
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = fs_err::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".mcp.lock.") && name.ends_with(".tmp") {
            let _ = fs_err::remove_file(entry.path());
        }
    }
}

/// An exclusive advisory lock on the lockfile's directory, held while reading, modifying and
/// writing, so two `mcpsum lock` runs at once both land. The directory is locked rather than the
/// file because the file is replaced by rename (a lock on the old inode would protect nothing),
/// and no sidecar file is left in the repository. It is the directory of the path as given, not
/// of a link's target: [`write_atomic`] refuses a link, so that is where the rename happens.
pub struct LockGuard {
    dir: File,
}

impl LockGuard {
    /// Blocks until the lock is held.
    pub fn acquire(lockfile: &Path) -> Result<Self> {
        let dir_path = parent_dir(lockfile);
        let dir = fs_err::File::open(&dir_path)
            .map_err(|e| {
                Error::new(format!("cannot open `{}` to lock it", dir_path.display())).cause(e)
            })?
            .into_parts()
            .0;
        dir.lock()
            .map_err(|e| Error::new(format!("cannot lock `{}`", dir_path.display())).cause(e))?;
        Ok(Self { dir })
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.dir.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writer itself refuses a link, whoever calls it: the file it points to keeps its bytes
    /// and the link stays a link.
    #[test]
    fn write_atomic_refuses_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("bashrc");
        fs_err::write(&target, "keep me\n").unwrap();
        let link = dir.path().join("mcp.lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = write_atomic(&link, b"{}\n").expect_err("a link is refused");
        assert!(err.to_string().contains("is a symbolic link to"), "{err}");
        assert_eq!(fs_err::read_to_string(&target).unwrap(), "keep me\n");
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    }
}
