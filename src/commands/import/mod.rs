//! `mcpsum import`: find the MCP servers people already configured in their clients, lock each
//! stdio server as `mcpsum lock` does, and route the client's entry through
//! `mcpsum proxy --name NAME --lockfile ABS_PATH`. `--undo` puts the files back.
//!
//! `clients.rs` knows where each client keeps its config and reads it into entries with the byte
//! ranges of their values; `edit.rs` splices only the `command` and `args` values, so every other
//! byte of a file stays as it was; `undo.rs` records each rewrite in the state directory.
//!
//! The servers of a project's configs are locked into the project's `mcp.lock`; those of the
//! user's own configs (which every project sees) into the user-level lockfile
//! (`paths::user_lockfile`), which their rewritten entries name; `--lockfile` puts all into one.
//! Every server is locked at once, as `lock --all` does.
//!
//! Without `--write` the servers are locked and the config changes shown, but no client config is
//! written. Environment variable values are never read: only names, which become the entry's
//! `envPassthrough`. The client keeps setting the values for `mcpsum proxy`, which hands exactly
//! those names to the server (I2).

pub(crate) mod clients;
mod edit;
mod literal;
mod undo;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clients::{Client, Entry, Kind, Parsed, Source};

use crate::cli::{ImportArgs, LockArgs};
use crate::error::{Error, Exit, Result};
use crate::lockfile::{self, Lockfile, Sha256Digest, valid_server_name};
use crate::output::{self, paint, style};
use crate::paths;

/// Which lockfile a config's servers go into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// A project's config: the project's `mcp.lock`.
    Project,
    /// The user's own config, which every project sees: the user-level lockfile.
    User,
    /// `--lockfile` or `$MCPSUM_LOCKFILE`: every config's servers go into that one file.
    Given,
}

/// The configs whose servers go into one lockfile, and what to do with them.
struct Group {
    scope: Scope,
    lockfile: PathBuf,
    files: Vec<Loaded>,
    plan: Plan,
}

/// Runs `import`.
pub async fn run(
    lockfile_flag: Option<&Path>,
    args: &ImportArgs,
    trust: &crate::signing::Trust,
) -> Result<Exit> {
    if args.undo {
        return undo::run();
    }
    super::lock::check_env_flags(&args.env)?;
    let cwd = std::env::current_dir()
        .map_err(|e| Error::new("cannot read the current directory").cause(e))?;
    let home = paths::home_dir();
    let program = proxy_program()?;

    let (sources, searched) = sources(args.from.as_deref(), &cwd, home.as_deref())?;
    let mut files = Vec::new();
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for source in sources {
        match load(source) {
            Ok(Some(f)) if seen.insert(f.real.clone()) => files.push(f),
            Ok(_) => {}
            Err(e) => {
                output::error(&e);
                failures.push(e.one_line());
            }
        }
    }
    if files.is_empty() && failures.is_empty() {
        return Err(Error::new("found no MCP client config to import")
            .details(searched.iter().map(|p| format!("looked for `{}`", p.display())))
            .hint("name a client or a file with `--from` (claude-desktop, claude-code, cursor, vscode, codex, windsurf, or a path)"));
    }

    let groups = groups(files, lockfile_flag, home.as_deref(), &args.env)?;
    let mut listing_text = String::new();
    for g in &groups {
        listing_text.push_str(&listing(&g.files, &g.plan, g.scope, &g.lockfile));
    }
    output::stdout(&listing_text);

    // Said before it happens: a dry run of the configs still writes the lockfiles.
    for g in &groups {
        let to_lock = g
            .plan
            .jobs
            .values()
            .filter(|j| matches!(j.action, Action::Lock))
            .count();
        if to_lock > 0 {
            output::info(&format!(
                "{} locking {to_lock} server{}{} into `{}` now{}",
                paint(style::BOLD, "note:"),
                plural(to_lock),
                match g.scope {
                    Scope::User => " of user-level configs",
                    Scope::Project if groups.len() > 1 => " of project configs",
                    _ => "",
                },
                g.lockfile.display(),
                if args.write {
                    ""
                } else {
                    "; the client configs are not changed without `--write`"
                }
            ));
        }
    }
    for g in &groups {
        if g.plan
            .jobs
            .values()
            .any(|j| matches!(j.action, Action::Lock))
        {
            crate::signing::warn_if_stale_before(&g.lockfile);
        }
    }
    // Lock every server at once, as `mcpsum lock --all` does; a failure leaves its entries as
    // they are.
    let jobs: Vec<(PathBuf, LockArgs)> = groups
        .iter()
        .flat_map(|g| {
            g.plan
                .jobs
                .values()
                .filter(|j| matches!(j.action, Action::Lock))
                .map(|job| {
                    (
                        g.lockfile.clone(),
                        LockArgs {
                            name: job.name.clone(),
                            all: false,
                            env: job.env.clone(),
                            sandbox: None,
                            timeout_secs: args.timeout_secs,
                            era: None,
                            allow_install_scripts: Vec::new(),
                            upgrade: false,
                            command: job.argv.clone(),
                        },
                    )
                })
        })
        .collect();
    let mut locked: BTreeSet<(PathBuf, String)> = groups
        .iter()
        .flat_map(|g| {
            g.plan
                .jobs
                .values()
                .filter(|j| matches!(j.action, Action::Reuse))
                .map(|j| (g.lockfile.clone(), j.name.clone()))
        })
        .collect();
    let mut newly: BTreeMap<PathBuf, usize> = BTreeMap::new();
    for (path, name, result) in super::lock::lock_many(jobs, trust).await {
        match result {
            Ok(_) => {
                *newly.entry(path.clone()).or_default() += 1;
                locked.insert((path, name));
            }
            Err(e) => {
                output::error(&e);
                failures.push(format!(
                    "server `{name}` was not locked into `{}`",
                    path.display()
                ));
            }
        }
    }

    let mut all_rewrites = Vec::new();
    for g in &groups {
        // Once for each lockfile this import wrote into.
        if newly.get(&g.lockfile).is_some_and(|n| *n > 0) {
            crate::signing::warn_after_write(&g.lockfile, trust);
        }
        let lockfile = g.lockfile.clone();
        all_rewrites.extend(rewrites(&g.files, &g.plan, &program, &lockfile, |n| {
            locked.contains(&(lockfile.clone(), n.to_owned()))
        }));
    }
    if !args.write {
        for r in &all_rewrites {
            output::stdout(&r.diff);
        }
        dry_run_summary(&groups, &newly, &all_rewrites);
        return finish(failures);
    }
    let written = write_all(&all_rewrites, &mut failures)?;
    for r in &written {
        output::stdout(&r.diff);
    }
    let routed: usize = written.iter().map(|r| r.servers.len()).sum();
    if routed > 0 {
        let lockfiles: BTreeSet<&Path> = written.iter().map(|r| r.lockfile.as_path()).collect();
        output::info(&format!(
            "{} {routed} server{} in {} file{} through mcpsum ({}); each file's backup is beside it. Restart the clients to pick up the change; `mcpsum import --undo` puts the files back",
            paint(style::OK, "routed"),
            plural(routed),
            written.len(),
            plural(written.len()),
            lockfiles_phrase(&groups, &lockfiles)
        ));
    } else if failures.is_empty() {
        output::info("nothing to rewrite: every stdio server is already routed through mcpsum");
    }
    finish(failures)
}

/// The loaded configs sorted into their lockfiles: the one given, else the project's for
/// project configs and the user-level one for user-level configs. Each group is planned
/// against its own lockfile's entries.
fn groups(
    files: Vec<Loaded>,
    lockfile_flag: Option<&Path>,
    home: Option<&Path>,
    extra_env: &[String],
) -> Result<Vec<Group>> {
    let absolute = |p: PathBuf| {
        std::path::absolute(&p)
            .map_err(|e| Error::new(format!("cannot make `{}` absolute", p.display())).cause(e))
    };
    let mut by_scope: Vec<(Scope, PathBuf, Vec<Loaded>)> = Vec::new();
    if let Some(given) = paths::explicit_lockfile(lockfile_flag) {
        by_scope.push((Scope::Given, absolute(given)?, files));
    } else {
        let (user, project): (Vec<Loaded>, Vec<Loaded>) = files
            .into_iter()
            .partition(|f| clients::is_user_level(&f.real, home));
        if !project.is_empty() {
            let lockfile =
                paths::find_lockfile(None)?.unwrap_or_else(|| PathBuf::from(paths::LOCKFILE_NAME));
            by_scope.push((Scope::Project, absolute(lockfile)?, project));
        }
        if !user.is_empty() {
            let lockfile = paths::user_lockfile().ok_or_else(|| {
                Error::new("cannot find the user-level lockfile: neither `XDG_CONFIG_HOME` nor `HOME` is set, and the user has no home in `/etc/passwd`")
                    .hint("set `HOME`, or pass `--lockfile PATH` to lock every server into one file")
            })?;
            create_parent(&lockfile)?;
            by_scope.push((Scope::User, lockfile, user));
        }
    }
    let mut out = Vec::new();
    for (scope, lockfile, files) in by_scope {
        let existing = lockfile::load_optional(&lockfile)?;
        let plan = plan(&files, existing.as_ref(), extra_env);
        out.push(Group {
            scope,
            lockfile,
            files,
            plan,
        });
    }
    Ok(out)
}

/// Creates the user-level lockfile's folder (`~/.config/mcpsum`) when it is missing.
fn create_parent(lockfile: &Path) -> Result<()> {
    let Some(dir) = lockfile.parent().filter(|d| !d.is_dir()) else {
        return Ok(());
    };
    fs_err::create_dir_all(dir).map_err(|e| {
        Error::new(format!(
            "cannot create `{}` for the user-level lockfile",
            dir.display()
        ))
        .cause(e)
        .hint("create it, or pass `--lockfile PATH` to lock every server into one file")
    })
}

/// "lockfile `P`", or "lockfiles `P` (project configs) and `U` (user-level configs)".
fn lockfiles_phrase(groups: &[Group], used: &BTreeSet<&Path>) -> String {
    let named: Vec<String> = groups
        .iter()
        .filter(|g| used.contains(g.lockfile.as_path()))
        .map(|g| match g.scope {
            Scope::User if used.len() > 1 => {
                format!("`{}` (user-level configs)", g.lockfile.display())
            }
            Scope::Project if used.len() > 1 => {
                format!("`{}` (project configs)", g.lockfile.display())
            }
            _ => format!("`{}`", g.lockfile.display()),
        })
        .collect();
    format!("lockfile{} {}", plural(named.len()), named.join(" and "))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Exit 0, or one error gathering what went wrong (each was already shown in full).
fn finish(failures: Vec<String>) -> Result<Exit> {
    if failures.is_empty() {
        return Ok(Exit::Ok);
    }
    let n = failures.len();
    Err(Error::new(format!(
        "import did not finish: {n} problem{} (shown above)",
        plural(n)
    ))
    .details(failures)
    .hint("the other servers and files were handled; fix these and run `mcpsum import` again (routed entries are left alone)"))
}

fn dry_run_summary(groups: &[Group], newly: &BTreeMap<PathBuf, usize>, rewrites: &[Rewrite]) {
    if rewrites.is_empty() {
        output::info("nothing to import: no stdio server left to route through mcpsum");
        return;
    }
    let locked: Vec<String> = groups
        .iter()
        .map(|g| {
            let n = newly.get(&g.lockfile).copied().unwrap_or(0);
            format!(
                "locked {n} server{} into `{}`",
                plural(n),
                g.lockfile.display()
            )
        })
        .collect();
    output::info(&format!(
        "{}; {}: no client config was changed. `mcpsum import --write` rewrites {} file{} as shown (keeping a backup beside each)",
        locked.join(", "),
        paint(style::BOLD, "dry run"),
        rewrites.len(),
        plural(rewrites.len())
    ));
}

// ----- finding and reading the files -----

/// A config file read from disk.
struct Loaded {
    source: Source,
    /// The file's real path (symlinks resolved): the one rewritten and restored.
    real: PathBuf,
    bytes: Vec<u8>,
    text: String,
    parsed: Parsed,
}

/// The files to read, and every path looked at (for the "found nothing" error).
fn sources(
    from: Option<&str>,
    cwd: &Path,
    home: Option<&Path>,
) -> Result<(Vec<Source>, Vec<PathBuf>)> {
    let clients: Vec<Client> = match from {
        None => Client::NAMED.to_vec(),
        Some(s) => match Client::parse(s) {
            Some(c) => vec![c],
            None => {
                let path = Path::new(s);
                if !path.is_file() {
                    return Err(Error::new(format!(
                        "`{s}` is neither a client nor a file"
                    ))
                    .hint("`--from` takes claude-desktop, claude-code, cursor, vscode, codex, windsurf, or the path of a config file"));
                }
                let abs = std::path::absolute(path)
                    .map_err(|e| Error::new(format!("cannot make `{s}` absolute")).cause(e))?;
                let source = clients::source_for_path(&abs);
                return Ok((vec![source], vec![abs]));
            }
        },
    };
    let all: Vec<Source> = clients
        .into_iter()
        .flat_map(|c| clients::candidates(c, cwd, home))
        .collect();
    let searched = all.iter().map(|s| s.path.clone()).collect();
    Ok((
        all.into_iter().filter(|s| s.path.is_file()).collect(),
        searched,
    ))
}

/// "the Cursor config `PATH`" (or "the config `PATH`" for a file of no known client).
fn config_name(source: &Source) -> String {
    match source.client {
        Client::Other => format!("the config `{}`", source.path.display()),
        c => format!("the {} config `{}`", c.title(), source.path.display()),
    }
}

/// Reads and parses one file. `None` when it does not exist.
fn load(source: Source) -> Result<Option<Loaded>> {
    let bytes = match fs_err::read(&source.path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::new(format!("cannot read {}", config_name(&source))).cause(e));
        }
    };
    let real = fs_err::canonicalize(&source.path).unwrap_or_else(|_| source.path.clone());
    let invalid = |why: String| {
        Error::new(format!("cannot read {}", config_name(&source)))
            .cause(why)
            .hint("fix the file (the client cannot read it either), or leave it out with `--from`")
    };
    let text =
        String::from_utf8(bytes.clone()).map_err(|_| invalid("it is not UTF-8 text".into()))?;
    let parsed = clients::parse(&source, &text).map_err(invalid)?;
    Ok(Some(Loaded {
        source,
        real,
        bytes,
        text,
        parsed,
    }))
}

// ----- names and what to do with each server -----

/// What `--write` does for one lock name.
enum Action {
    /// Start the server and lock it.
    Lock,
    /// The lockfile already has this name with this command and environment: use it as it is
    /// (re-locking could silently accept a surface that drifted since).
    Reuse,
}

/// One server to lock (several entries may share it).
struct Job {
    name: String,
    argv: Vec<String>,
    env: Vec<String>,
    action: Action,
}

/// What to do with each stdio entry.
struct Plan {
    /// By lock name.
    jobs: BTreeMap<String, Job>,
    /// `(file, entry)` -> lock name, for every stdio entry.
    names: BTreeMap<(usize, usize), String>,
    /// `(file, entry)` -> notes about how its name was chosen.
    notes: BTreeMap<(usize, usize), Vec<String>>,
}

type Signature = (Vec<String>, Vec<String>);

fn plan(files: &[Loaded], existing: Option<&Lockfile>, extra_env: &[String]) -> Plan {
    // Who holds each name: the lockfile first, then entries in the order they are read.
    let mut taken: BTreeMap<String, (Signature, String)> = BTreeMap::new();
    if let Some(lock) = existing {
        for (name, e) in &lock.servers {
            let mut env = e.env_passthrough.clone();
            env.sort();
            taken.insert(
                name.clone(),
                ((e.command.clone(), env), "the lockfile's entry".to_owned()),
            );
        }
    }
    let mut plan = Plan {
        jobs: BTreeMap::new(),
        names: BTreeMap::new(),
        notes: BTreeMap::new(),
    };
    for (fi, f) in files.iter().enumerate() {
        for (ei, entry) in f.parsed.entries.iter().enumerate() {
            let Kind::Stdio(s) = &entry.kind else {
                continue;
            };
            let mut env: Vec<String> = s.env.iter().chain(extra_env).cloned().collect();
            env.sort();
            env.dedup();
            let sig: Signature = (s.argv.clone(), env.clone());
            let mut notes = Vec::new();
            let base = lock_name_for(&entry.name);
            if base != entry.name {
                notes.push(format!(
                    "`{}` is not a valid lock name (1-64 of A-Z a-z 0-9 . _ -), so it is locked as `{base}`",
                    crate::text::sanitize_line(&entry.name)
                ));
            }
            let mut chosen = None;
            for n in 0.. {
                let candidate = match n {
                    0 => base.clone(),
                    1 => with_suffix(&base, f.source.client.slug()),
                    _ => with_suffix(&base, &format!("{}-{n}", f.source.client.slug())),
                };
                match taken.get(&candidate) {
                    Some((held, _)) if *held != sig => {}
                    _ => {
                        chosen = Some(candidate);
                        break;
                    }
                }
            }
            let name = chosen.unwrap_or(base.clone());
            if name != base
                && let Some((_, owner)) = taken.get(&base)
            {
                notes.push(format!(
                    "`{base}` is taken by {owner}, which runs another command or environment, so this one is locked as `{name}`"
                ));
            }
            let owner = format!(
                "`{}` in `{}`",
                crate::text::sanitize_line(&entry.name),
                f.source.path.display()
            );
            // A name the lockfile holds is chosen only when its command and environment match.
            let reuse = existing.is_some_and(|l| l.servers.contains_key(&name));
            taken.entry(name.clone()).or_insert((sig, owner));
            plan.jobs.entry(name.clone()).or_insert_with(|| Job {
                name: name.clone(),
                argv: s.argv.clone(),
                env,
                action: if reuse { Action::Reuse } else { Action::Lock },
            });
            plan.names.insert((fi, ei), name);
            if !notes.is_empty() {
                plan.notes.insert((fi, ei), notes);
            }
        }
    }
    plan
}

/// A valid lock name from a config key: each run of other characters becomes `-`.
fn lock_name_for(name: &str) -> String {
    if valid_server_name(name) {
        return name.to_owned();
    }
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed: String = out
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .chars()
        .take(64)
        .collect();
    if trimmed.is_empty() {
        "server".to_owned()
    } else {
        trimmed
    }
}

/// `base-suffix`, with `base` shortened so the whole stays within 64 characters.
fn with_suffix(base: &str, suffix: &str) -> String {
    let keep = 64usize.saturating_sub(suffix.len() + 1);
    let head: String = base.chars().take(keep).collect();
    format!("{head}-{suffix}")
}

// ----- what is shown -----

fn listing(files: &[Loaded], plan: &Plan, scope: Scope, lockfile: &Path) -> String {
    let mut out = String::new();
    for (fi, f) in files.iter().enumerate() {
        out.push_str(&format!(
            "{} {}\n",
            paint(style::BOLD, format!("{}:", f.source.client.title())),
            f.source.path.display()
        ));
        // Where its servers are locked, for a config whose servers every project sees.
        if scope == Scope::User {
            out.push_str(&format!(
                "  {}\n",
                paint(
                    style::DIM,
                    format!(
                        "a user-level config: its servers go into `{}`",
                        lockfile.display()
                    )
                )
            ));
        }
        if f.parsed.entries.is_empty() {
            out.push_str(&format!("  {}\n", paint(style::DIM, "no MCP servers")));
        }
        let width = f
            .parsed
            .entries
            .iter()
            .map(|e| e.name.chars().count())
            .max()
            .unwrap_or(0)
            .min(24);
        for (ei, e) in f.parsed.entries.iter().enumerate() {
            let name = format!("{:width$}", crate::text::sanitize_line(&e.name));
            let line = match &e.kind {
                Kind::Stdio(s) => {
                    let lock_name = plan.names.get(&(fi, ei)).cloned().unwrap_or_default();
                    let job = plan.jobs.get(&lock_name);
                    let (tag, what) = match job.map(|j| &j.action) {
                        Some(Action::Reuse) => (
                            paint(style::OK, "locked"),
                            format!("already in the lockfile as `{lock_name}` with this command"),
                        ),
                        _ => (paint(style::ADDED, "lock  "), format!("as `{lock_name}`")),
                    };
                    let env = job.map(|j| j.env.clone()).unwrap_or_default();
                    let env = if env.is_empty() {
                        "no environment".to_owned()
                    } else {
                        format!("env {}", env.join(", "))
                    };
                    format!(
                        "{tag}  {name}  {}\n          {what}; {env}",
                        crate::text::sanitize_line(&super::show::shell_words(&s.argv))
                    )
                }
                Kind::Routed { lock_name } => format!(
                    "{}  {name}  already runs through mcpsum{}; left as is",
                    paint(style::DIM, "routed"),
                    lock_name
                        .as_deref()
                        .map(|n| format!(" (`--name {}`)", crate::text::sanitize_line(n)))
                        .unwrap_or_default()
                ),
                Kind::Remote { transport, origin } => format!(
                    "{}  {name}  {} server{}: not supported yet, left as is",
                    paint(style::WARN, "remote"),
                    crate::text::sanitize_line(transport),
                    origin
                        .as_deref()
                        .map(|o| format!(" at {}", crate::text::sanitize_line(o)))
                        .unwrap_or_default()
                ),
                Kind::Skipped(why) => format!(
                    "{}  {name}  left as is: {}",
                    paint(style::WARN, "skip  "),
                    crate::text::sanitize_line(why)
                ),
            };
            out.push_str(&format!("  {line}\n"));
            for note in plan.notes.get(&(fi, ei)).into_iter().flatten() {
                out.push_str(&format!(
                    "          {}: {note}\n",
                    paint(style::WARN, "note")
                ));
            }
        }
        out.push('\n');
    }
    out
}

// ----- rewriting -----

/// One file's rewrite: the new bytes and a masked diff for people.
struct Rewrite {
    client: Client,
    /// The lockfile its routed entries name.
    lockfile: PathBuf,
    path: PathBuf,
    real: PathBuf,
    before: Vec<u8>,
    after: Vec<u8>,
    servers: Vec<String>,
    diff: String,
}

/// The rewrite of every file with at least one entry whose lock name passes `ready`. A file
/// whose rewrite fails its own check is left out, with an error shown.
fn rewrites(
    files: &[Loaded],
    plan: &Plan,
    program: &Path,
    lockfile: &Path,
    ready: impl Fn(&str) -> bool,
) -> Vec<Rewrite> {
    let program = program.display().to_string();
    let lock_arg = lockfile.display().to_string();
    let mut out = Vec::new();
    for (fi, f) in files.iter().enumerate() {
        let mut edits = Vec::new();
        let mut routed = BTreeMap::new();
        for (ei, e) in f.parsed.entries.iter().enumerate() {
            let (Kind::Stdio(s), Some(name)) = (&e.kind, plan.names.get(&(fi, ei))) else {
                continue;
            };
            if !ready(name) {
                continue;
            }
            edits.extend(edit::route(
                s,
                f.source.is_toml(),
                &program,
                name,
                &lock_arg,
            ));
            routed.insert(ei, name.clone());
        }
        if routed.is_empty() {
            continue;
        }
        match rewrite_one(f, &edits, &routed) {
            Ok((after, diff)) => out.push(Rewrite {
                client: f.source.client,
                lockfile: lockfile.to_path_buf(),
                path: f.source.path.clone(),
                real: f.real.clone(),
                before: f.bytes.clone(),
                after: after.into_bytes(),
                servers: routed.into_values().collect(),
                diff,
            }),
            Err(why) => output::error(
                &Error::new(format!(
                    "cannot rewrite `{}`; it is left as it was",
                    f.source.path.display()
                ))
                .cause(why)
                .hint("route its servers by hand (see `mcpsum proxy --help`), and report this"),
            ),
        }
    }
    out
}

/// The new text of `f` and its masked diff, after checking that the new text reads back as the
/// old one with exactly the routed entries changed.
fn rewrite_one(
    f: &Loaded,
    edits: &[edit::Edit],
    routed: &BTreeMap<usize, String>,
) -> std::result::Result<(String, String), String> {
    let new_text = edit::apply(&f.text, edits)?;
    let reread = clients::parse(&f.source, &new_text)
        .map_err(|e| format!("the rewritten text does not parse: {e}"))?;
    if reread.entries.len() != f.parsed.entries.len() {
        return Err("the rewritten text has a different number of entries".into());
    }
    for (ei, (old, new)) in f.parsed.entries.iter().zip(&reread.entries).enumerate() {
        let ok = match routed.get(&ei) {
            Some(name) => {
                new.name == old.name
                    && matches!(&new.kind, Kind::Routed { lock_name } if lock_name.as_deref() == Some(name.as_str()))
            }
            None => same_entry(old, new),
        };
        if !ok {
            return Err(format!(
                "entry `{}` does not read back as intended",
                crate::text::sanitize_line(&old.name)
            ));
        }
    }
    let mut masked_new_edits = edit::masks(&f.parsed.masked);
    masked_new_edits.extend(edits.iter().cloned());
    let old_masked = edit::apply(&f.text, &edit::masks(&f.parsed.masked))?;
    let new_masked = edit::apply(&f.text, &masked_new_edits)?;
    let diff = edit::render_diff(
        &f.source.path.display().to_string(),
        &old_masked,
        &new_masked,
    );
    Ok((new_text, diff))
}

/// Whether an entry reads the same before and after (byte offsets aside).
fn same_entry(a: &Entry, b: &Entry) -> bool {
    let same_kind = match (&a.kind, &b.kind) {
        (Kind::Stdio(x), Kind::Stdio(y)) => x.argv == y.argv && x.env == y.env,
        (x, y) => x == y,
    };
    a.name == b.name && a.location == b.location && same_kind
}

/// Backs up and rewrites every file; records them in the manifest first, so `--undo` knows of a
/// file even if the write is cut short. Returns the rewrites that landed.
fn write_all<'a>(rewrites: &'a [Rewrite], failures: &mut Vec<String>) -> Result<Vec<&'a Rewrite>> {
    if rewrites.is_empty() {
        return Ok(Vec::new());
    }
    let stamp = time::OffsetDateTime::now_utc();
    let at = stamp
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let file_stamp = stamp
        .format(time::macros::format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_default();

    let mut ready = Vec::new();
    let mut records = Vec::new();
    for r in rewrites {
        let step = || -> Result<undo::FileRecord> {
            // The servers took a while to lock: refuse a file that changed meanwhile.
            let now = fs_err::read(&r.real)
                .map_err(|e| Error::new(format!("cannot read `{}`", r.path.display())).cause(e))?;
            if now != r.before {
                return Err(Error::new(format!(
                    "`{}` changed while the servers were being locked; it is left as it is",
                    r.path.display()
                ))
                .hint("run `mcpsum import --write` again"));
            }
            let meta = fs_err::metadata(&r.real)
                .map_err(|e| Error::new(format!("cannot read `{}`", r.path.display())).cause(e))?;
            let backup =
                edit::write_backup(&r.real, &r.before, &meta, &file_stamp).map_err(|e| {
                    Error::new(format!(
                        "cannot write a backup of `{}`; it is left as it is",
                        r.path.display()
                    ))
                    .cause(e)
                    .hint("check that its directory is writable")
                })?;
            Ok(undo::FileRecord {
                path: r.real.clone(),
                client: r.client.slug().to_owned(),
                lockfile: Some(r.lockfile.clone()),
                backup,
                before: Sha256Digest::of_bytes(&r.before),
                after: Sha256Digest::of_bytes(&r.after),
                servers: r.servers.clone(),
            })
        };
        match step() {
            Ok(rec) => {
                records.push(rec);
                ready.push(r);
            }
            Err(e) => {
                output::error(&e);
                failures.push(format!("`{}` was not rewritten", r.path.display()));
            }
        }
    }
    if records.is_empty() {
        return Ok(Vec::new());
    }
    let records_backups: Vec<PathBuf> = records.iter().map(|r| r.backup.clone()).collect();
    // The record's lockfile is the first file's; a file routed to another one names its own.
    let lockfile = ready
        .first()
        .map(|r| r.lockfile.clone())
        .unwrap_or_default();
    for rec in &mut records {
        if rec.lockfile.as_ref() == Some(&lockfile) {
            rec.lockfile = None;
        }
    }
    if let Err(e) = undo::append(undo::ImportRecord {
        at,
        lockfile,
        files: records,
    }) {
        // Without a record `--undo` could not restore them: write nothing.
        for rec in &records_backups {
            let _ = fs_err::remove_file(rec);
        }
        for r in &ready {
            failures.push(format!("`{}` was not rewritten", r.path.display()));
        }
        output::error(&e);
        return Ok(Vec::new());
    }

    let mut landed = Vec::new();
    for r in ready {
        // The config keeps its own mode and owner (a file that holds secrets stays 0600).
        let written = crate::fsutil::replace(&r.real, &r.after, crate::fsutil::Replace::default());
        match written {
            Ok(()) => landed.push(r),
            Err(e) => {
                output::error(
                    &Error::new(format!(
                        "cannot write `{}`; it is left as it was",
                        r.path.display()
                    ))
                    .cause(e),
                );
                failures.push(format!("`{}` was not rewritten", r.path.display()));
            }
        }
    }
    Ok(landed)
}

/// The path client configs run mcpsum by: how it was started (so a symlink such as
/// `~/.cargo/bin/mcpsum` stays the link and survives upgrades), else this executable.
fn proxy_program() -> Result<PathBuf> {
    if let Some(arg0) = std::env::args_os().next() {
        let p = PathBuf::from(&arg0);
        let found = if p.components().count() > 1 {
            std::path::absolute(&p).ok()
        } else {
            crate::mcp::process::resolve_program(&p.to_string_lossy())
        };
        if let Some(found) = found.filter(|f| f.is_absolute() && f.is_file())
            && clients::is_mcpsum(&found.to_string_lossy())
        {
            return Ok(found);
        }
    }
    std::env::current_exe().map_err(|e| {
        Error::new("cannot find the path of the running mcpsum")
            .cause(e)
            .hint("run mcpsum by its absolute path")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn lock_names() {
        assert_eq!(lock_name_for("github"), "github");
        assert_eq!(lock_name_for("My Server!"), "My-Server-");
        assert_eq!(lock_name_for("@scope/tool"), "scope-tool");
        assert_eq!(lock_name_for("日本"), "server");
        assert_eq!(lock_name_for(&"x".repeat(80)).len(), 64);
        assert_eq!(with_suffix(&"y".repeat(64), "cursor").len(), 64);
        assert!(valid_server_name(&with_suffix(&"y".repeat(64), "cursor-2")));
    }
}
