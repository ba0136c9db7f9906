//! Where mcpsum's files live: the lockfile (SPEC §2) and the state directory.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The lockfile's file name.
pub const LOCKFILE_NAME: &str = "mcp.lock";

/// `--lockfile`, else `$MCPSUM_LOCKFILE`, else `mcp.lock` in the current directory or its nearest
/// ancestor. `None` when none exists (only `lock` may then create `./mcp.lock`).
pub fn find_lockfile(flag: Option<&Path>) -> Result<Option<PathBuf>> {
    if let Some(p) = flag {
        return Ok(Some(p.to_path_buf()));
    }
    if let Some(p) = std::env::var_os("MCPSUM_LOCKFILE").filter(|v| !v.is_empty()) {
        return Ok(Some(PathBuf::from(p)));
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Error::new("cannot read the current directory").cause(e))?;
    Ok(cwd
        .ancestors()
        .map(|d| d.join(LOCKFILE_NAME))
        // A link counts even when dangling or looping: the read then says what is wrong with
        // it, rather than that there is no lockfile (or a parent's being used instead).
        .find(|p| p.is_file() || p.symlink_metadata().is_ok_and(|m| m.is_symlink())))
}

/// The lockfile a reading command uses; an error naming the search when there is none.
pub fn require_lockfile(flag: Option<&Path>) -> Result<PathBuf> {
    find_lockfile(flag)?.ok_or_else(|| {
        let error = Error::new(format!(
            "no `{LOCKFILE_NAME}` in the current directory or any parent"
        ));
        // Servers imported from a user-level client config are locked there, not in a project.
        match user_lockfile().filter(|p| p.is_file()) {
            Some(user) => error.hint(format!(
                "the servers imported from user-level client configs are in `{}`: pass `--lockfile {}`; or create a project's with `mcpsum lock --name NAME -- COMMAND...`",
                user.display(),
                user.display()
            )),
            None => error.hint(
                "create one with `mcpsum lock --name NAME -- COMMAND...`, or pass `--lockfile PATH`",
            ),
        }
    })
}

/// The lockfile named by `--lockfile` or `$MCPSUM_LOCKFILE`, if either is given.
pub fn explicit_lockfile(flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf).or_else(|| {
        std::env::var_os("MCPSUM_LOCKFILE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// The user-level lockfile, for servers of the user's own client configs (`~/.cursor/mcp.json`,
/// `~/.claude.json`, Claude Desktop's): `$XDG_CONFIG_HOME/mcpsum/mcp.lock`, else
/// `~/.config/mcpsum/mcp.lock`. `import` locks them there, since every project sees them.
pub fn user_lockfile() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home_dir().map(|h| h.join(".config")))
        .map(|c| c.join("mcpsum").join(LOCKFILE_NAME))
}

/// `$MCPSUM_STATE_DIR`, else `$XDG_STATE_HOME/mcpsum`, else `~/.local/state/mcpsum`.
pub fn state_dir() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("MCPSUM_STATE_DIR").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    if let Some(p) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p).join("mcpsum"));
    }
    home_dir()
        .map(|h| h.join(".local/state/mcpsum"))
        .ok_or_else(|| {
            Error::new("cannot find the state directory: neither `MCPSUM_STATE_DIR`, `XDG_STATE_HOME` nor `HOME` is set, and the user has no home in `/etc/passwd`")
                .hint("set `MCPSUM_STATE_DIR` to a private directory")
        })
}

/// Creates the state directory (mode 0700) if needed, and refuses one that is not private
/// ([`private_dir_problem`]).
pub fn ensure_state_dir() -> Result<PathBuf> {
    let dir = state_dir()?;
    if !dir.is_dir() {
        create_private_dir(&dir).map_err(|e| {
            Error::new(format!(
                "cannot create the state directory `{}`",
                dir.display()
            ))
            .cause(e)
        })?;
    }
    if let Some(why) = private_dir_problem(&dir) {
        return Err(Error::new(format!(
            "the state directory `{}` is not private: {why}",
            dir.display()
        ))
        .hint(format!(
            "it holds the taint state and the audit log, which no other user may change: make it yours and not writable by others (`chmod go-w {}`), or set `MCPSUM_STATE_DIR` to a private directory",
            dir.display()
        )));
    }
    Ok(dir)
}

/// Creates `dir` and its missing parents, each made mode 0700 (the state directory and the
/// folders below it hold what no other user may read or change). A folder that exists is left
/// as it is.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// What makes `dir` unfit to hold state another user must not change, if anything: it is not
/// a directory, not owned by this user, or writable by its group or others. A sticky world-
/// writable directory (`/tmp`) is refused too: others may add files there, such as links named
/// like the state's own files.
pub fn private_dir_problem(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = match fs_err::metadata(dir) {
        Ok(m) => m,
        Err(e) => return Some(format!("cannot read it ({e})")),
    };
    if !meta.is_dir() {
        return Some("it is not a directory".to_owned());
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Some(format!(
            "it belongs to uid {}, not to uid {me} that runs mcpsum",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Some(format!("its mode {mode:04o} lets others write to it"));
    }
    None
}

/// `$HOME`, else the passwd home of the effective uid ([`passwd_home`]): clients that start
/// mcpsum with an empty environment still get `~` and the state directory of the user.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(passwd_home)
}

/// The home directory `/etc/passwd` (through NSS) gives the effective uid, when it names an
/// absolute folder other than `/`. The sandbox protects it besides `$HOME`: `$HOME` is whatever
/// the client passed, and a wrong one must not leave the real home open.
pub fn passwd_home() -> Option<PathBuf> {
    let user = nix::unistd::User::from_uid(nix::unistd::geteuid()).ok()??;
    Some(user.dir).filter(|d| d.is_absolute() && d.parent().is_some())
}

/// `path` without `.` components and with `..` applied, lexically: no link is followed and the
/// file need not exist (a lockfile that is a link is named where it is, not where it points).
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_dir_and_its_new_parents_are_0700_and_an_existing_one_is_kept() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let mode = |p: &Path| fs_err::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = root.path().join("a/b/c");
        create_private_dir(&dir).unwrap();
        for p in [root.path().join("a"), root.path().join("a/b"), dir.clone()] {
            assert_eq!(mode(&p), 0o700, "{}", p.display());
        }
        fs_err::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o750);
    }
}
