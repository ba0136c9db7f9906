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
        Error::new(format!(
            "no `{LOCKFILE_NAME}` in the current directory or any parent"
        ))
        .hint("create one with `mcpsum lock --name NAME -- COMMAND...`, or pass `--lockfile PATH`")
    })
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
            Error::new("cannot find the state directory: neither `MCPSUM_STATE_DIR`, `XDG_STATE_HOME` nor `HOME` is set")
                .hint("set `MCPSUM_STATE_DIR` to a private directory")
        })
}

/// Creates the state directory (mode 0700) if needed.
pub fn ensure_state_dir() -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = state_dir()?;
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                Error::new(format!(
                    "cannot create the state directory `{}`",
                    dir.display()
                ))
                .cause(e)
            })?;
    }
    Ok(dir)
}

/// `$HOME`.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
