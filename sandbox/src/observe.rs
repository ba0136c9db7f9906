//! What learn mode records (see `learn`, Linux only): one [`Observation`] per JSON line of a
//! server's observation file. Platform-free, so that mcpsum can read a file anywhere.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What one observation says the server did. Stored as one JSON line per distinct value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Observation {
    /// Opened `path` for reading (a file, or a folder to list it).
    Read {
        /// Absolute, lexically normalised (not resolved: the call may have failed).
        path: PathBuf,
    },
    /// Opened `path` for writing, created, truncated, removed or renamed it.
    Write {
        /// As for [`Observation::Read`].
        path: PathBuf,
    },
    /// Executed `path`.
    Exec {
        /// As for [`Observation::Read`].
        path: PathBuf,
    },
    /// Created the folder `path` (it did not exist when the call was made: a `mkdir` of a
    /// folder that exists, as `mkdir -p` makes on each parent, is not recorded).
    Mkdir {
        /// As for [`Observation::Read`].
        path: PathBuf,
    },
    /// Changed the entries of `path`'s folder: created `path` (a file that did not exist, a
    /// link, a node), removed or renamed it. Recorded besides the [`Observation::Write`]: a
    /// sandbox grants such a change only on the whole folder, a write to a file that exists on
    /// the file alone.
    Entry {
        /// As for [`Observation::Read`].
        path: PathBuf,
    },
    /// Connected a socket to `addr` (`IP:port`, `[IPv6]:port`), as the `connect` call named it.
    Connect {
        /// The address.
        addr: String,
    },
    /// Connected to the Unix socket at `path` (refused in every sandbox mode).
    Unix {
        /// The socket's path (`@name` for an abstract one).
        path: PathBuf,
    },
    /// The learning egress proxy's own address in this session (recorded by mcpsum, so that
    /// the server's connections to it are not taken for direct ones).
    Proxy {
        /// `127.0.0.1:PORT`.
        addr: String,
    },
    /// Asked mcpsum's egress proxy for `host:port` with `CONNECT` (recorded by mcpsum).
    Host {
        /// The target as the server sent it.
        target: String,
        /// The addresses mcpsum resolved it to.
        #[serde(default)]
        resolved: Vec<String>,
    },
}

/// Reads an observation file: one JSON [`Observation`] per line; lines that do not parse (a
/// line cut by a crash, a newer mcpsum's kind) are counted and skipped.
pub fn read_observations(text: &str) -> (Vec<Observation>, usize) {
    let mut skipped = 0;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str(line) {
            Ok(o) => out.push(o),
            Err(_) => skipped += 1,
        }
    }
    out.sort();
    out.dedup();
    (out, skipped)
}

/// Where a change of `path`'s folder entry happens (an [`Observation::Entry`]): its folder made
/// real, and its own name. A link there is the entry itself and is never followed: `unlink`,
/// `rename` onto it and `symlink` change the folder the link is in, not its target's.
pub fn entry_path(path: &Path) -> Option<PathBuf> {
    let parent = fs_err::canonicalize(path.parent()?).ok()?;
    Some(parent.join(path.file_name()?))
}

/// What an open of `path` reaches, made real: the file a link there points to (the path Landlock
/// checks), also when that does not exist (an `O_CREAT` through a dangling link creates its
/// target); `path`'s own entry when nothing is there. `None` when its folder does not exist or
/// the links loop.
pub fn opened_path(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = fs_err::canonicalize(path) {
        return Some(real);
    }
    let mut at = entry_path(path)?;
    // As many links as the kernel follows (`MAXSYMLINKS`).
    for _ in 0..40 {
        match fs_err::read_link(&at) {
            Ok(target) => at = entry_path(&at.parent()?.join(target))?,
            Err(_) => return Some(at),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_never_followed_and_an_open_always_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        fs_err::create_dir_all(root.join("data")).unwrap();
        fs_err::create_dir_all(root.join("links")).unwrap();
        fs_err::write(root.join("data/f"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("data/f"), root.join("links/to-f")).unwrap();
        std::os::unix::fs::symlink("../data/new", root.join("links/dangling")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("links/loop")).unwrap();
        let via = root.join("links/../links/to-f");
        assert_eq!(entry_path(&via), Some(root.join("links/to-f")));
        assert_eq!(opened_path(&via), Some(root.join("data/f")));
        assert_eq!(
            opened_path(&root.join("links/dangling")),
            Some(root.join("data/new"))
        );
        assert_eq!(
            opened_path(&root.join("links/gone")),
            Some(root.join("links/gone"))
        );
        assert_eq!(opened_path(&root.join("links/loop")), None);
        assert_eq!(opened_path(&root.join("nowhere/f")), None);
    }

    #[test]
    fn observation_lines_round_trip() {
        let o = [
            Observation::Read { path: "/a".into() },
            Observation::Host {
                target: "example.com:443".into(),
                resolved: vec!["93.184.216.34".into()],
            },
        ];
        let text: String = o
            .iter()
            .map(|o| serde_json::to_string(o).unwrap() + "\n")
            .collect::<String>()
            + "{broken\n";
        let (back, skipped) = read_observations(&text);
        assert_eq!(skipped, 1);
        assert_eq!(back, vec![o[0].clone(), o[1].clone()]);
    }
}
