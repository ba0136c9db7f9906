//! `mcpsum diff [OLD] [NEW]`: the change between two versions of a lockfile, shown as `verify`
//! shows drift, entry by entry, plus what drift does not cover: the command, the environment
//! names and the policy.
//!
//! A side is a lockfile path when such a file exists, else a git revision of the working
//! lockfile, read with `git show REV:./mcp.lock` in the lockfile's directory. Both sides are
//! loaded as any lockfile is (digests checked), so a tampered revision is an error, not a diff.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cli::DiffArgs;
use crate::drift::{self, Class, Drift, FieldChange};
use crate::error::{Error, Exit, Result};
use crate::lockfile::{self, Lockfile, ServerEntry};
use crate::output::{self, paint, style};
use crate::paths;

/// One side of the comparison.
struct Side {
    /// How it is named in the output: a path, or `REV:mcp.lock`.
    label: String,
    lock: Lockfile,
}

/// How one server changed.
enum Change {
    Added(Box<ServerEntry>),
    Removed,
    Changed(Drift),
}

/// Runs `diff`.
pub fn run(lockfile_flag: Option<&Path>, args: &DiffArgs) -> Result<Exit> {
    let path = paths::require_lockfile(lockfile_flag)?;
    let old = side(&path, Some(args.old.as_deref().unwrap_or("HEAD")))?;
    let new = side(&path, args.new.as_deref())?;
    let names: BTreeSet<&String> = old
        .lock
        .servers
        .keys()
        .chain(new.lock.servers.keys())
        .collect();
    let mut changes = Vec::new();
    for name in names {
        let change = match (old.lock.servers.get(name), new.lock.servers.get(name)) {
            (None, Some(n)) => Change::Added(Box::new(n.clone())),
            (Some(_), None) => Change::Removed,
            (Some(o), Some(n)) => Change::Changed(entry_drift(name, o, n)?),
            (None, None) => continue,
        };
        changes.push((name.clone(), change));
    }
    let exit = if changes.iter().any(|(_, c)| match c {
        Change::Added(_) | Change::Removed => true,
        Change::Changed(d) => d.class() == Class::Definitional,
    }) {
        Exit::Problem
    } else {
        Exit::Ok
    };
    if args.json {
        let servers: Vec<Value> = changes
            .iter()
            .map(|(name, c)| match c {
                Change::Added(_) => json!({"name": name, "status": "added"}),
                Change::Removed => json!({"name": name, "status": "removed"}),
                Change::Changed(d) => json!({
                    "name": name,
                    "status": d.class(),
                    "items": d.items,
                    "fields": d.fields,
                    "diff": plain(&drift::render(d, "")),
                }),
            })
            .collect();
        output::stdout_json(&json!({
            "old": old.label,
            "new": new.label,
            "exitCode": exit as i32,
            "servers": servers,
        }));
        return Ok(exit);
    }
    let mut out = format!(
        "{} {}\n{} {}\n",
        paint(style::REMOVED, "---"),
        old.label,
        paint(style::ADDED, "+++"),
        new.label
    );
    if changes.is_empty() {
        out.push_str("no servers in either lockfile\n");
    }
    for (name, change) in &changes {
        match change {
            Change::Added(entry) => {
                out.push_str(&format!(
                    "{} {name}: {}\n",
                    paint(style::ADDED, "added"),
                    crate::text::sanitize_line(&super::show::shell_words(&entry.command))
                ));
                out.push_str(&format!("  {}\n", super::show::item_counts(entry)));
            }
            Change::Removed => {
                out.push_str(&format!("{} {name}\n", paint(style::REMOVED, "removed")));
            }
            Change::Changed(d) => match d.class() {
                Class::Clean => {
                    out.push_str(&format!("{} {name}: unchanged\n", paint(style::OK, "ok")));
                }
                Class::Informational => {
                    out.push_str(&format!(
                        "{} {name}: informational changes\n",
                        paint(style::WARN, "info")
                    ));
                    out.push_str(&drift::render(d, "  "));
                }
                Class::Definitional => {
                    out.push_str(&format!(
                        "{} {name}: definitional changes: {}\n",
                        paint(style::ERROR, "changed"),
                        d.summary()
                    ));
                    out.push_str(&drift::render(d, "  "));
                }
            },
        }
    }
    output::stdout(&out);
    Ok(exit)
}

/// `text` without colour: for JSON, which is never painted.
pub fn plain(text: &str) -> String {
    anstream::adapter::strip_str(text).to_string()
}

/// The drift of the surface, and the entry's own fields that drift does not cover (they are
/// the person's, and a changed command is a changed server).
fn entry_drift(name: &str, old: &ServerEntry, new: &ServerEntry) -> Result<Drift> {
    let mut d = drift::compare(old, &new.surface())
        .map_err(|e| Error::new(format!("cannot compare server `{name}`")).cause(e))?;
    let own: [(&'static str, Value, Value); 3] = [
        ("command", json!(old.command), json!(new.command)),
        (
            "envPassthrough",
            json!(old.env_passthrough),
            json!(new.env_passthrough),
        ),
        ("policy", json!(old.policy), json!(new.policy)),
    ];
    for (field, locked, live) in own {
        if locked != live {
            d.fields.push(FieldChange {
                field,
                class: Class::Definitional,
                locked,
                live,
            });
        }
    }
    Ok(d)
}

/// Reads one side: `spec` as a file when one exists, else as a git revision; `None` is the
/// working lockfile.
fn side(path: &Path, spec: Option<&str>) -> Result<Side> {
    let Some(spec) = spec else {
        return Ok(Side {
            label: path.display().to_string(),
            lock: lockfile::load(path)?,
        });
    };
    let file = PathBuf::from(spec);
    if file.is_file() {
        return Ok(Side {
            label: spec.to_owned(),
            lock: lockfile::load(&file)?,
        });
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .map_or_else(|| paths::LOCKFILE_NAME.into(), |n| n.to_string_lossy());
    let label = format!("{spec}:{file_name}");
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["show", "--no-textconv"])
        .arg(format!("{spec}:./{file_name}"))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            Error::new(format!("cannot run `git` to read `{label}`"))
                .cause(e)
                .hint("install git, or name two lockfile paths: `mcpsum diff OLD.lock NEW.lock`")
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr
            .lines()
            .next()
            .unwrap_or("git failed")
            .trim()
            .to_owned();
        // A lockfile new since the revision: every server is added.
        if why.contains("exists on disk, but not in") || why.contains("does not exist in") {
            output::info(&format!(
                "`{}` is not in revision `{spec}`; every server shows as added",
                path.display()
            ));
            return Ok(Side {
                label,
                lock: Lockfile::default(),
            });
        }
        return Err(Error::new(format!("cannot read `{label}`"))
            .cause(crate::text::sanitize_line(&why))
            .hint(format!(
                "`{spec}` is neither a file nor a git revision of `{}`; name a revision (`HEAD`, `main`, a commit) or a lockfile path",
                path.display()
            )));
    }
    let lock = lockfile::load_from_bytes(Path::new(&label), &out.stdout)?;
    Ok(Side { label, lock })
}
