//! Writing `mcp.lock`: pure formatting plus an atomic replace under an advisory lock.
//!
//! The bytes are pretty JSON with two-space indentation and one trailing newline, servers sorted
//! by name (a `BTreeMap`), fields in the seed's order (struct order). The digest input is a
//! separate thing (RFC 8785 per item); pretty text is never hashed.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Lockfile, ServerEntry};
use crate::error::{Error, Result};

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

/// Replaces `path` with `bytes` atomically (call it under [`LockGuard`]): a temporary file in the
/// same directory, fsync,
/// rename over, fsync the directory. An interrupted write leaves the old file whole.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = parent_dir(path);
    let fail = |e: std::io::Error| {
        Error::new(format!("cannot write `{}`", path.display()))
            .cause(e)
            .hint("check that the directory exists and is writable; the old file is unchanged")
    };
    remove_stale_temporaries(&dir);
    let mut tmp = tempfile::Builder::new()
        .prefix(".mcp.lock.")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(fail)?;
    // Keep the mode of the file being replaced (a lockfile is committed, usually 0644).
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions())
        .unwrap_or_else(|_| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::Permissions::from_mode(0o644)
        });
    tmp.as_file().set_permissions(mode).map_err(fail)?;
    tmp.write_all(bytes).map_err(fail)?;
    tmp.as_file().sync_all().map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    File::open(&dir).and_then(|d| d.sync_all()).map_err(fail)?;
    Ok(())
}

/// Removes `.mcp.lock.*.tmp` files left by a writer that was killed mid-write. Writers hold the
/// directory lock ([`LockGuard`]) while writing, so under the lock any such file is stale.
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".mcp.lock.") && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// An exclusive advisory lock on the lockfile's directory, held while reading, modifying and
/// writing, so two `mcpsum lock` runs at once both land. The directory is locked rather than the
/// file because the file is replaced by rename (a lock on the old inode would protect nothing),
/// and no sidecar file is left in the repository.
pub struct LockGuard {
    dir: File,
}

impl LockGuard {
    /// Blocks until the lock is held.
    pub fn acquire(lockfile: &Path) -> Result<Self> {
        let dir_path = parent_dir(lockfile);
        let dir = File::open(&dir_path).map_err(|e| {
            Error::new(format!("cannot open `{}` to lock it", dir_path.display())).cause(e)
        })?;
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
