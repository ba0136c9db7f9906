//! Writing files whole: the one atomic replace every file mcpsum rewrites goes through (the
//! lockfile, client configs and their backups, the import manifest, taint state).
//!
//! A replace is a temporary file in the same folder (so the rename cannot cross file systems),
//! given the old file's mode and owner, written, fsynced, renamed over the path, and the folder
//! fsynced so the rename itself survives a power loss. A reader sees the old bytes or the new,
//! never a mix; a writer killed midway leaves the old file and at most a `.NAME.*.tmp` beside it,
//! which is never renamed by anyone. A path that is a symbolic link is refused: renaming would
//! replace the link, and following it could write any file the user can write.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How [`replace`] treats the file it writes.
#[derive(Debug, Clone, Copy)]
pub struct Replace<'a> {
    /// Take mode and owner from this file rather than from the one being replaced (restoring a
    /// backup gives the original's mode back).
    pub like: Option<&'a std::fs::Metadata>,
    /// The mode of a file that did not exist before (and has no `like`).
    pub new_mode: u32,
    /// Fsync the data and the folder. Off only for state that dies with its process anyway.
    pub durable: bool,
}

impl Default for Replace<'_> {
    fn default() -> Self {
        Self {
            like: None,
            new_mode: 0o600,
            durable: true,
        }
    }
}

/// The error for a path that is a symbolic link.
fn link_refused(path: &Path) -> std::io::Error {
    std::io::Error::other(format!(
        "`{}` is a symbolic link; mcpsum does not write through links",
        path.display()
    ))
}

/// What went wrong in `e`, an error of an `fs_err` call on `path`, without the path it names
/// (`failed to open file `PATH`: CAUSE` gives CAUSE), for a message that names the file itself;
/// all of it when it is worded otherwise.
pub fn without_path(e: &std::io::Error, path: &Path) -> String {
    let text = e.to_string();
    let named = format!("`{}`: ", path.display());
    match text.find(&named) {
        Some(at) => text[at + named.len()..].to_owned(),
        None => text,
    }
}

/// Replaces `path` with `bytes` atomically (see the module docs).
pub fn replace(path: &Path, bytes: &[u8], opts: Replace<'_>) -> std::io::Result<()> {
    replace_with(path, bytes, opts, |_| Ok(()))
}

/// [`replace`] with a step run on the written temporary file just before the rename: tests use
/// it to stand for a write interrupted there.
fn replace_with(
    path: &Path,
    bytes: &[u8],
    opts: Replace<'_>,
    before_rename: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let old = match fs_err::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => return Err(link_refused(path)),
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let dir = parent_dir(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", file_name(path)))
        .suffix(".tmp")
        .tempfile_in(&dir)?;
    match opts.like.or(old.as_ref()) {
        Some(like) => same_mode_and_owner(tmp.as_file(), like)?,
        None => tmp
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(opts.new_mode))?,
    }
    tmp.write_all(bytes)?;
    if opts.durable {
        tmp.as_file().sync_all()?;
    }
    before_rename(tmp.path())?;
    // Checked again as the last step: a link put there since the first check is refused too
    // (the rename would replace the link, not follow it, but the caller asked for a file).
    if fs_err::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(link_refused(path));
    }
    tmp.persist(path).map_err(|e| e.error)?;
    if opts.durable {
        fs_err::File::open(&dir)?.sync_all()?;
    }
    Ok(())
}

/// Writes `bytes` to `path`, which must not exist yet (a link there counts as existing and is
/// never followed), with the mode and owner of `like`. On failure nothing is left at `path`.
pub fn create_new(path: &Path, bytes: &[u8], like: &std::fs::Metadata) -> std::io::Result<()> {
    let mut file = fs_err::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    let written = same_mode_and_owner(file.file(), like)
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| file.file().sync_all());
    if let Err(e) = written {
        let _ = fs_err::remove_file(path);
        return Err(e);
    }
    fs_err::File::open(parent_dir(path))?.sync_all()
}

/// Gives `file` the mode and owner of `like`: a config may hold secrets (mode 0600), and a
/// rewrite by root must not leave a user's file owned by root.
fn same_mode_and_owner(file: &std::fs::File, like: &std::fs::Metadata) -> std::io::Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(like.mode() & 0o7777))?;
    let mine = file.metadata()?;
    if mine.uid() != like.uid() || mine.gid() != like.gid() {
        std::os::unix::fs::fchown(file, Some(like.uid()), Some(like.gid()))?;
    }
    Ok(())
}

/// The folder `path` is in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs_err::metadata(path).unwrap().mode() & 0o7777
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        fs_err::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn replaces_and_keeps_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        fs_err::write(&path, "old").unwrap();
        fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        replace(&path, b"new", Replace::default()).unwrap();
        assert_eq!(fs_err::read_to_string(&path).unwrap(), "new");
        assert_eq!(mode(&path), 0o640);
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_new_file_gets_the_new_mode_and_like_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let opts = Replace {
            new_mode: 0o644,
            ..Replace::default()
        };
        replace(&path, b"a", opts).unwrap();
        assert_eq!(mode(&path), 0o644);
        let other = dir.path().join("backup");
        fs_err::write(&other, "b").unwrap();
        fs_err::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
        let like = fs_err::metadata(&other).unwrap();
        let opts = Replace {
            like: Some(&like),
            ..Replace::default()
        };
        replace(&path, b"b", opts).unwrap();
        assert_eq!(mode(&path), 0o600);
    }

    /// As root, the owner of the replaced file is kept (a root `import` of a user's config).
    #[test]
    fn keeps_the_owner() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        fs_err::write(&path, "old").unwrap();
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        replace(&path, b"new", Replace::default()).unwrap();
        let meta = fs_err::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    }

    #[test]
    fn refuses_a_symbolic_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("bashrc");
        fs_err::write(&target, "keep me\n").unwrap();
        let link = dir.path().join("mcp.lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = replace(&link, b"{}\n", Replace::default()).unwrap_err();
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert_eq!(fs_err::read_to_string(&target).unwrap(), "keep me\n");
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        // A dangling link is refused as well (it would create the file it names).
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(replace(&dangling, b"x", Replace::default()).is_err());
        assert!(!dir.path().join("nowhere").exists());
        assert!(create_new(&dangling, b"x", &fs_err::metadata(&target).unwrap()).is_err());
        assert!(!dir.path().join("nowhere").exists());
    }

    /// A write that stops before the rename leaves the old file whole, and a temporary file left
    /// by a killed writer is never what the path ends up holding.
    #[test]
    fn an_interrupted_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.lock");
        fs_err::write(&path, "old").unwrap();
        let mut seen = None;
        let err = replace_with(&path, b"new", Replace::default(), |tmp| {
            seen = Some(fs_err::read_to_string(tmp).unwrap());
            Err(std::io::Error::other("killed"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "killed");
        assert_eq!(seen.as_deref(), Some("new"));
        assert_eq!(fs_err::read_to_string(&path).unwrap(), "old");
        assert!(leftovers(dir.path()).is_empty());

        let stale = dir.path().join(".mcp.lock.left.tmp");
        fs_err::write(&stale, "half").unwrap();
        replace(&path, b"new", Replace::default()).unwrap();
        assert_eq!(fs_err::read_to_string(&path).unwrap(), "new");
        assert_eq!(fs_err::read_to_string(&stale).unwrap(), "half");
    }

    #[test]
    fn create_new_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("backup");
        fs_err::write(&path, "first").unwrap();
        let like = fs_err::metadata(&path).unwrap();
        let err = create_new(&path, b"second", &like).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(fs_err::read_to_string(&path).unwrap(), "first");
    }
}
