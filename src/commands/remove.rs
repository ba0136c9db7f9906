//! `mcpsum remove --name NAME`: take servers out of the lockfile.
//!
//! The read-modify-write happens under the advisory lock on a fresh read, as `lock` does, and
//! only [`lockfile::write_atomic`] writes the file. Every name is checked before anything is
//! removed: one unknown name leaves the file untouched.

use crate::cli::RemoveArgs;
use crate::error::{Error, Exit, Result};
use crate::lockfile;
use crate::output::{self, paint, style};
use crate::paths;

/// Runs `remove`.
pub fn run(
    lockfile_flag: Option<&std::path::Path>,
    args: &RemoveArgs,
    trust: &crate::signing::Trust,
) -> Result<Exit> {
    let path = paths::require_lockfile(lockfile_flag)?;
    lockfile::refuse_symlink(&path)?;
    let guard = lockfile::LockGuard::acquire(&path)?;
    let mut lock = lockfile::load(&path)?;
    let mut names = args.name.clone();
    names.sort();
    names.dedup();
    let unknown: Vec<&String> = names
        .iter()
        .filter(|n| !lock.servers.contains_key(*n))
        .collect();
    if let Some(first) = unknown.first() {
        let err = super::unknown_server(&lock, &path, first);
        return Err(if unknown.len() > 1 {
            Error::new(format!(
                "`{}` has no servers named {}",
                path.display(),
                unknown
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .hint(format!(
                "{}; nothing was removed",
                err.hint_text().unwrap_or_default()
            ))
        } else {
            Error::new(err.one_line()).hint(format!(
                "{}; nothing was removed",
                err.hint_text().unwrap_or_default()
            ))
        });
    }
    crate::signing::warn_if_stale_before(&path);
    for name in &names {
        lock.servers.remove(name);
    }
    lockfile::write_atomic(&path, &lockfile::to_bytes(&lock))?;
    drop(guard);
    crate::signing::warn_after_write(&path, trust);
    for name in &names {
        output::info(&format!(
            "{} `{name}` from `{}`",
            paint(style::OK, "removed"),
            path.display()
        ));
    }
    output::info(&format!(
        "client configs that run {} through `mcpsum proxy` now get an error that names it; `mcpsum import --undo` puts back the configs the last `import --write` changed",
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(Exit::Ok)
}
