//! `mcpsum lock`: start a server, read its whole surface and pin it.
//!
//! The server runs before the lockfile is locked (it may take a while to start); the
//! read-modify-write then happens under the advisory lock on a fresh read of the file, so two
//! `lock` runs at once both land. On any failure the existing file is untouched.

use crate::cli::{EraFlag, LockArgs};
use crate::drift;
use crate::error::{Error, Exit, Result};
use crate::lockfile::{
    self, Era, Lockfile, Policy, ServerEntry, valid_env_name, valid_server_name,
};
use crate::mcp::client::{self, Ask, ClientError};
use crate::output::{self, paint, style};
use crate::paths;
use crate::signing::Trust;

/// Runs `lock`.
pub async fn run(
    lockfile_flag: Option<&std::path::Path>,
    args: &LockArgs,
    trust: &Trust,
) -> Result<Exit> {
    if args.all {
        let path = paths::require_lockfile(lockfile_flag)?;
        crate::signing::warn_if_stale_before(&path);
        return lock_all(&path, args, trust).await;
    }
    let path = paths::find_lockfile(lockfile_flag)?
        .unwrap_or_else(|| std::path::PathBuf::from(paths::LOCKFILE_NAME));
    crate::signing::warn_if_stale_before(&path);
    let exit = lock_at(&path, args, trust).await?;
    crate::signing::warn_after_write(&path, trust);
    Ok(exit)
}

/// `lock --all`: every entry re-locked with its recorded command, all at once. Each one lands
/// on its own (its read-modify-write is under the advisory lock, as for `lock --name`), so one
/// server that fails leaves the others locked; each change is shown as a re-lock shows it.
///
/// When an allowed-signers file is in force and the lockfile has no valid signature, the
/// commands it records are not trusted: nothing is run.
async fn lock_all(path: &std::path::Path, args: &LockArgs, trust: &Trust) -> Result<Exit> {
    let bytes = lockfile::read_bytes(path)?;
    let status = crate::signing::inspect(path, &bytes, trust)?;
    let lock = lockfile::load_from_bytes(path, &bytes)?;
    drop(bytes);
    if let Some(why) = status.refusal(path) {
        return Err(Error::new(format!(
            "`{}` has no valid signature, so mcpsum will not run the commands it records",
            path.display()
        ))
        .cause(why.one_line())
        .hint(format!(
            "have a signer listed in `{}` review the lockfile and run `mcpsum sign`, or lock each server with the command you mean to run: `mcpsum lock --name NAME -- COMMAND...`",
            status.anchor.as_ref().map_or_else(String::new, |a| a.path.display().to_string())
        )));
    }
    if lock.servers.is_empty() {
        output::info(&format!("no servers locked in `{}`", path.display()));
        return Ok(Exit::Ok);
    }
    let jobs = lock
        .servers
        .keys()
        .map(|name| {
            (
                path.to_path_buf(),
                LockArgs {
                    name: name.clone(),
                    all: false,
                    env: args.env.clone(),
                    sandbox: None,
                    timeout_secs: args.timeout_secs,
                    era: None,
                    allow_install_scripts: Vec::new(),
                    upgrade: args.upgrade,
                    command: Vec::new(),
                },
            )
        })
        .collect();
    drop(lock);
    let mut failed = Vec::new();
    let results = lock_many(jobs, trust).await;
    let count = results.len();
    for (_, name, result) in results {
        if let Err(e) = result {
            output::error(&e);
            failed.push(name);
        }
    }
    // Once for the file, as `lock --name` warns, when any entry was written.
    if failed.len() < count {
        crate::signing::warn_after_write(path, trust);
    }
    if failed.is_empty() {
        return Ok(Exit::Ok);
    }
    Err(Error::new(format!(
        "{} of the servers in `{}` could not be locked: {}",
        failed.len(),
        path.display(),
        failed
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .hint(format!(
        "their entries are unchanged; fix each as its error above says, then run `mcpsum lock --name {}`",
        failed[0]
    )))
}

/// Locks each `(lockfile, args)` at once, as `lock --all` does (each read-modify-write under its
/// lockfile's advisory lock, so all of them land), with one progress display; each result comes
/// back with its lockfile and server name, in the order given. `import` locks what it found
/// through here.
pub async fn lock_many(
    jobs: Vec<(std::path::PathBuf, LockArgs)>,
    trust: &Trust,
) -> Vec<(std::path::PathBuf, String, Result<Exit>)> {
    if jobs.is_empty() {
        return Vec::new();
    }
    let progress = std::sync::Arc::new(crate::progress::Progress::start());
    let mut tasks = Vec::new();
    for (path, one) in jobs {
        let name = one.name.clone();
        let (task_path, progress, trust) = (path.clone(), progress.clone(), trust.clone());
        tasks.push((
            path,
            name,
            tokio::spawn(async move { lock_one(&task_path, &one, &trust, Some(&progress)).await }),
        ));
    }
    let mut out = Vec::new();
    for (path, name, task) in tasks {
        let result = task
            .await
            .unwrap_or_else(|e| Err(Error::new(format!("locking `{name}` crashed")).cause(e)));
        out.push((path, name, result));
    }
    drop(progress);
    out
}

/// Locks one server into the lockfile at `path`: the whole of `lock` once the file is known.
/// `import` locks each server it finds through here too, so both pin a surface the same way.
pub async fn lock_at(path: &std::path::Path, args: &LockArgs, trust: &Trust) -> Result<Exit> {
    lock_one(path, args, trust, None).await
}

/// [`lock_at`], showing progress on `shared` when several servers are locked at once.
async fn lock_one(
    path: &std::path::Path,
    args: &LockArgs,
    trust: &Trust,
    shared: Option<&crate::progress::Progress>,
) -> Result<Exit> {
    if !valid_server_name(&args.name) {
        return Err(
            Error::new(format!("`{}` is not a valid server name", args.name))
                .hint("use 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
        );
    }
    check_env_flags(&args.env)?;
    // Before the server starts (it may take a while): the write at the end would refuse anyway.
    lockfile::refuse_symlink(path)?;
    let path = path.to_path_buf();
    let existing_file = lockfile::load_optional_with_bytes(&path)?;
    let previous = existing_file
        .as_ref()
        .and_then(|(_, l)| l.servers.get(&args.name))
        .cloned();
    // An allowed-signers file is in force and the lockfile has no valid signature: what its
    // entry records (the command, its environment, its pinned code) chooses nothing that runs.
    let untrusted = match (&existing_file, &previous) {
        (Some((bytes, _)), Some(_)) => {
            let status = crate::signing::inspect(&path, bytes, trust)?;
            status.refusal(&path).map(|why| (why, status))
        }
        _ => None,
    };

    let given = usable_command(&args.name, &args.command)?;
    let (command, env) = match (&previous, given.is_empty()) {
        (None, true) => {
            return Err(Error::new(format!(
                "server `{}` is not in `{}` yet, so a command is needed",
                args.name,
                path.display()
            ))
            .hint(format!(
                "pass it after `--`: `mcpsum lock --name {} -- COMMAND ARGS...`",
                args.name
            )));
        }
        (Some(prev), true) => {
            if let Some((why, status)) = &untrusted {
                return Err(Error::new(format!(
                    "`{}` has no valid signature, so mcpsum will not run the command it records for server `{}`",
                    path.display(),
                    args.name
                ))
                .cause(why.one_line())
                .hint(format!(
                    "if that is the command you mean to run, give it after `--`: `mcpsum lock --name {} -- {}`; or have a signer listed in `{}` review the lockfile and run `mcpsum sign` first",
                    args.name,
                    crate::text::sanitize_line(&super::show::shell_words(&prev.command)),
                    status.anchor.as_ref().map_or_else(String::new, |a| a.path.display().to_string())
                )));
            }
            let mut env = prev.env_passthrough.clone();
            env.extend(args.env.iter().cloned());
            (prev.command.clone(), env)
        }
        (Some(prev), false) => {
            if prev.command != given {
                output::info(&format!(
                    "replacing the command of `{}`: {} -> {}",
                    args.name,
                    crate::text::sanitize_line(&super::show::shell_words(&prev.command)),
                    crate::text::sanitize_line(&super::show::shell_words(&given))
                ));
            }
            (given, args.env.clone())
        }
        (None, false) => (given, args.env.clone()),
    };
    let mut env = env;
    env.sort();
    env.dedup();
    if let Some(why) = unpinned_runner(&command) {
        output::warn(&format!(
            "server `{}`: {why}, so what it runs can change without any drift showing (the surface may stay the same while the code changes); pin a version in the command",
            args.name
        ));
    }

    // The policy is the person's: keep it; `--sandbox` sets the sandbox part. Of an untrusted
    // entry (a command given, see above) it is kept in the written entry, where the review
    // before `mcpsum sign` sees it in the diff. Of what it says only its sandbox acts now: a
    // sandbox can only take away from what the person's command could do unconfined, so it
    // still confines this run (`--sandbox FILE` replaces it); its `envPassthrough` passes
    // nothing (only the variables `--env` names).
    let mut policy: Option<Policy> = previous.as_ref().and_then(|p| p.policy.clone());
    if untrusted.is_some()
        && let Some(prev) = &previous
    {
        warn_untrusted_policy(&path, &args.name, prev, args.sandbox.is_some());
    }
    if let Some(file) = &args.sandbox {
        let bytes = fs_err::read(file)
            .map_err(|e| Error::new(format!("cannot read `{}`", file.display())).cause(e))?;
        let sandbox = lockfile::parse_sandbox_policy(file, &bytes).map_err(|e| {
            Error::new(format!("the sandbox policy for server `{}` is not valid", args.name))
                .cause(e.one_line())
                .hint("expected {\"filesystem\": {\"read\": [...], \"write\": [...]}, \"network\": {\"allow\": [...]}}")
        })?;
        // Every problem at once, checked on this machine before the server ever starts.
        let spec = crate::sandboxing::SandboxSpec {
            policy: sandbox.clone(),
            lockfile: path.clone(),
        };
        let (req, _) = crate::sandboxing::request(&args.name, &command, &spec, Vec::new())
            .map_err(|e| {
                // One problem a line, as the error prints details, not one line with `\n` in it.
                let mut lines = e.lines();
                Error::new(lines.next().unwrap_or_default().trim_end_matches(':'))
                    .details(lines.map(|l| l.trim_start().to_owned()))
                    .hint(format!(
                        "fix `{}`; the server was not started",
                        file.display()
                    ))
            })?;
        crate::sandboxing::warn_wide_rules(&args.name, &req.policy);
        policy.get_or_insert_with(Policy::default).sandbox = Some(sandbox);
    }

    // The code a package runner runs: its whole closure, resolved as the runner would resolve
    // it here, pinned, installed hash-checked, and the server read from that install.
    let previous_artifacts = previous
        .as_ref()
        .filter(|p| p.command == command && untrusted.is_none())
        .and_then(|p| p.artifacts.clone());
    // What the resolution keeps, as a lockfile tool keeps its lock: the entry's closure (also
    // under a new command, whose changed requirement moves only what it must), unless
    // `--upgrade` asks for the newest releases. An untrusted entry's closure decides nothing.
    let seed = previous
        .as_ref()
        .filter(|_| untrusted.is_none() && !args.upgrade)
        .and_then(|p| p.artifacts.clone());
    // The closure is resolved on a thread of its own (a registry round trip). A re-lock of a
    // pinned command whose install is here starts the server from that install meanwhile: when
    // the resolution is the same, as it mostly is, that surface is the one; when it differs,
    // the server is started again from the new closure's install.
    let resolving = {
        let (name, command, previous, allow) = (
            args.name.clone(),
            command.clone(),
            previous_artifacts.clone(),
            args.allow_install_scripts.clone(),
        );
        tokio::task::spawn_blocking(move || {
            let prior = crate::pin::Prior {
                same_command: previous.as_ref(),
                keep: seed.as_ref(),
            };
            crate::pin::resolve(&name, &command, prior, &allow)
        })
    };
    let early = previous_artifacts.filter(crate::pin::is_installed);
    // What confines the run now: the entry's policy, or for an untrusted entry its sandbox
    // alone (or the one `--sandbox` gave).
    let launch_policy = if untrusted.is_some() {
        policy
            .as_ref()
            .and_then(|p| p.sandbox.clone())
            .map(|sandbox| Policy {
                sandbox: Some(sandbox),
                taint: None,
            })
    } else {
        policy.clone()
    };
    let unset = crate::mcp::process::unset_names(&env);
    if !unset.is_empty() {
        output::warn(&format!(
            "{} not set in mcpsum's environment, so the server will not get {}",
            unset
                .iter()
                .map(|v| format!("`{v}` is"))
                .collect::<Vec<_>>()
                .join(", "),
            if unset.len() == 1 { "it" } else { "them" }
        ));
    }
    // A re-lock of the same command keeps the entry's era: a server that speaks both never
    // switches silently. A new command is a new server: its era is detected.
    let kept_era = previous
        .as_ref()
        .filter(|p| p.command == command && untrusted.is_none())
        .map(ServerEntry::era);
    let ask = match (args.era, kept_era) {
        (Some(EraFlag::Auto), _) | (None, None) => Ask::Detect,
        (Some(EraFlag::Legacy), _) => Ask::Only(Era::Legacy),
        (Some(EraFlag::Modern), _) => Ask::Only(Era::Modern),
        (None, Some(era)) => Ask::Only(era),
    };
    let start = Start {
        args,
        command: &command,
        env: &env,
        policy: launch_policy.as_ref(),
        path: &path,
        ask,
        shared,
    };
    let resolved = |r: std::result::Result<Result<_>, tokio::task::JoinError>| {
        r.unwrap_or_else(|e| {
            Err(Error::new(format!("cannot pin the code of server `{}`", args.name)).cause(e))
        })
    };
    let (artifacts, surface) = match early {
        Some(early) => {
            let (r, surface) = tokio::join!(resolving, start.read(Some(&early)));
            let artifacts = resolved(r)?;
            if artifacts.as_ref() == Some(&early) {
                (artifacts, surface?)
            } else {
                let surface = start.read(artifacts.as_ref()).await?;
                (artifacts, surface)
            }
        }
        None => {
            let artifacts = resolved(resolving.await)?;
            let surface = start.read(artifacts.as_ref()).await?;
            (artifacts, surface)
        }
    };
    let dual_era = (surface.era == Era::Modern && args.era != Some(EraFlag::Modern))
        .then(|| legacy_versions_listed(&surface))
        .flatten();

    let mut entry = ServerEntry::from_surface(command, env, surface, policy)
        .map_err(|e| {
            Error::new(format!("cannot lock server `{}`", args.name))
                .cause(e)
                .hint("mcpsum never pins a partial or ambiguous surface; fix the server or report it to its authors")
        })?
        .with_artifacts(artifacts);
    let dropped = lockfile::prune_policy(&mut entry);

    // Read-modify-write under the advisory lock, on a fresh read.
    let guard = lockfile::LockGuard::acquire(&path)?;
    // Unchanged bytes since the first read are not parsed and checked again.
    let mut lock =
        lockfile::reload_optional(&path, existing_file)?.unwrap_or_else(Lockfile::default);
    // The other entries were validated by the load above; check the new one as a load
    // would, without re-parsing and re-digesting the whole file.
    lockfile::check_entry(&path, &args.name, &entry)?;
    lock.servers.insert(args.name.clone(), entry);
    lockfile::write_atomic(&path, &lockfile::to_bytes(&lock))?;
    drop(guard);

    // `import` locks server after server in one process: the file is freed, not left behind.
    report(
        &args.name,
        &path,
        previous.as_ref(),
        &lock.servers[&args.name],
        &dropped,
    );
    if let Some(versions) = dual_era {
        output::info(&format!(
            "{} `{}` also speaks the legacy era (it lists {versions}) and was locked in 2026-07-28; what it offers only to legacy clients (sampling, elicitation, resource subscriptions) does not pass the proxy then; to keep the legacy era, run `mcpsum lock --name {} --era legacy`",
            paint(style::BOLD, "note:"),
            args.name,
            args.name
        ));
    }
    Ok(Exit::Ok)
}

/// What of an untrusted entry is applied while locking it with a given command, and what is
/// not: its sandbox policy confines the run (unless `--sandbox` replaced it), its
/// `envPassthrough` passes nothing (taint labels act only in the proxy).
fn warn_untrusted_policy(
    path: &std::path::Path,
    name: &str,
    prev: &ServerEntry,
    sandbox_given: bool,
) {
    let sandbox = prev.policy.as_ref().is_some_and(|p| p.sandbox.is_some());
    let taint = prev.policy.as_ref().is_some_and(|p| p.taint.is_some());
    let mut parts = Vec::new();
    if sandbox && !sandbox_given {
        parts.push(
            "its `policy.sandbox` still confines this run, since a sandbox only takes away from what the command could do (give `--sandbox FILE` to confine it by a policy you checked instead)"
                .to_owned(),
        );
    }
    if !prev.env_passthrough.is_empty() {
        parts.push(format!(
            "its `envPassthrough` ({}) passes nothing to the server (only what `--env` names)",
            prev.env_passthrough
                .iter()
                .map(|v| format!("`{}`", crate::text::sanitize_line(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if parts.is_empty() {
        return;
    }
    let kept = match (sandbox && !sandbox_given, taint) {
        (true, true) => "its `policy.sandbox` and taint labels are kept in the new entry",
        (true, false) => "its `policy.sandbox` is kept in the new entry",
        (false, true) => "its taint labels are kept in the new entry",
        (false, false) => "",
    };
    let kept = if kept.is_empty() {
        String::new()
    } else {
        format!("; {kept}: review them in the diff before `mcpsum sign`")
    };
    output::warn(&format!(
        "server `{name}`: `{}` has no valid signature, so its entry is not trusted while locking: {}{kept}",
        path.display(),
        parts.join("; ")
    ));
}

/// The pre-2026 versions a 2026-07-28 server lists, if any: it speaks both eras.
/// What starting the server being locked takes, to start it from one closure or another.
struct Start<'a> {
    args: &'a LockArgs,
    command: &'a [String],
    env: &'a [String],
    policy: Option<&'a Policy>,
    path: &'a std::path::Path,
    ask: Ask,
    shared: Option<&'a crate::progress::Progress>,
}

impl Start<'_> {
    /// Starts the server (from the pinned install of `artifacts`, made when missing and
    /// checked unchanged) and reads its surface.
    async fn read(&self, artifacts: Option<&lockfile::Artifacts>) -> Result<lockfile::Surface> {
        let args = self.args;
        let mut launch = super::launch(
            &args.name,
            self.command,
            self.env,
            self.policy.and_then(|p| p.sandbox.as_ref()),
            self.path,
            // `-v` shows the server's stderr as it comes (a slow download, a crash).
            output::verbose(),
        );
        if let Some(a) = artifacts {
            // The install's files against what the state directory recorded when it was made
            // (one `statx` each), re-hashed only when that differs; `verify` re-hashes them all.
            let pending =
                super::pin_launch(&mut launch, self.command, a, crate::pin::Check::Deferred)?;
            if let Some(pending) = pending {
                tokio::task::spawn_blocking(move || pending.run())
                    .await
                    .map_err(|e| Error::new("cannot check the pinned install").cause(e))??;
            }
        }
        output::info(&format!(
            "{} `{}`: {}",
            paint(style::BOLD, "starting"),
            args.name,
            crate::text::sanitize_line(&super::show::shell_words(self.command))
        ));
        let mut own = self.shared.is_none().then(crate::progress::Progress::start);
        let reporter = self
            .shared
            .or(own.as_ref())
            .and_then(|p| p.server(&args.name, &super::show::shell_words(self.command)));
        let surface = client::read_surface_as(
            &launch,
            self.ask,
            super::options(args.timeout_secs, reporter),
        )
        .await;
        if let Some(p) = own.as_mut() {
            p.finish();
        }
        surface.map_err(|f| {
            let refused = match &f.error {
                ClientError::EraRefused { era, .. } => Some(*era),
                _ => None,
            };
            let err = super::server_error("cannot lock", &launch, f);
            match refused {
                Some(era) => err.hint(era_hint(&args.name, era, args.era.is_none())),
                None => err,
            }
        })
    }
}

fn legacy_versions_listed(surface: &lockfile::Surface) -> Option<String> {
    let legacy: Vec<String> = surface
        .supported_versions
        .iter()
        .flatten()
        .filter(|v| {
            v.get(..4)
                .and_then(|year| year.parse::<u32>().ok())
                .is_some_and(|year| year < 2026)
        })
        .map(|v| crate::text::sanitize_line(v))
        .collect();
    (!legacy.is_empty()).then(|| legacy.join(", "))
}

/// What to do when the server does not speak the era it was asked in: `kept` when that was the
/// entry's era (a re-lock without `--era`), not a flag.
fn era_hint(name: &str, refused: Era, kept: bool) -> String {
    let (other, other_name) = match refused {
        Era::Modern => ("legacy", "the legacy era"),
        Era::Legacy => ("modern", crate::protocol::MODERN_VERSION),
    };
    let why = if kept {
        format!("server `{name}` is locked in {refused} and a re-lock keeps its era; ")
    } else {
        String::new()
    };
    format!(
        "{why}to lock it in {other_name}, run `mcpsum lock --name {name} --era {other}`, or let mcpsum detect its era with `--era auto`"
    )
}

fn report(
    name: &str,
    path: &std::path::Path,
    previous: Option<&ServerEntry>,
    entry: &ServerEntry,
    dropped: &[String],
) {
    let info = &entry.server_info;
    let counts = super::show::item_counts(entry);
    output::info(&format!(
        "{} `{name}` in `{}`: {}, protocol {}, {}; {counts}",
        paint(style::OK, "locked"),
        path.display(),
        entry.era(),
        crate::text::sanitize_line(&entry.protocol_version),
        super::show::server_label(info),
    ));
    if let Some(a) = &entry.artifacts {
        output::info(&format!(
            "  code pinned: {} packages ({}{}), installed hash-checked",
            a.packages.len(),
            a.installer,
            match (&a.python, &a.node) {
                (Some(p), _) => format!(", Python {p}"),
                (None, Some(n)) => format!(", Node.js {n}"),
                (None, None) => String::new(),
            }
        ));
    }
    if let Some(prev) = previous {
        let code = crate::pin::changes(prev.artifacts.as_ref(), entry.artifacts.as_ref());
        if !code.is_empty() {
            output::info("  code changes against the previous lock:");
            for line in &code {
                output::info(&format!("    {}", crate::text::sanitize_line(line)));
            }
        }
        match drift::compare(prev, &entry.surface()) {
            Ok(d) if d.class() == drift::Class::Clean => output::info(if code.is_empty() {
                "  unchanged since the previous lock"
            } else {
                "  surface unchanged since the previous lock"
            }),
            Ok(d) => {
                output::info("  changes against the previous lock:");
                output::info(drift::render(&d, "    ").trim_end());
            }
            Err(_) => {}
        }
    }
    for label in dropped {
        output::warn(&format!(
            "dropped the taint label {} of `{name}`: that tool is no longer listed; label a renamed tool again",
            crate::text::sanitize_line(label)
        ));
    }
}

/// The command as the proxy can run it: a URL is refused (it names a remote server, which
/// mcpsum does not pin yet), and a relative program path (`./run.py`), or an argument that is a
/// relative path to an existing file, is made absolute: the proxy runs from the client's working
/// directory, not this one.
fn usable_command(name: &str, argv: &[String]) -> Result<Vec<String>> {
    let Some(program) = argv.first() else {
        return Ok(Vec::new());
    };
    if program.starts_with("http://") || program.starts_with("https://") {
        return Err(Error::new(format!(
            "the command of server `{name}` is a URL (`{}`): remote servers are not supported yet",
            crate::text::sanitize_line(program)
        ))
        .hint("mcpsum pins servers it starts as a process on stdio; give the command that starts the server, after `--`"));
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Error::new("cannot read the current directory").cause(e))?;
    let mut out = Vec::with_capacity(argv.len());
    for (i, arg) in argv.iter().enumerate() {
        let path = std::path::Path::new(arg);
        let relative_program = i == 0 && arg.contains('/') && path.is_relative();
        let relative_file =
            i > 0 && (arg.starts_with("./") || arg.starts_with("../")) && cwd.join(path).is_file();
        if relative_program || relative_file {
            let abs = crate::paths::normalize(&cwd.join(path));
            let abs = abs.display().to_string();
            output::info(&format!(
                "using `{}` for `{}`: the proxy runs from the client's working directory",
                crate::text::sanitize_line(&abs),
                crate::text::sanitize_line(arg)
            ));
            out.push(abs);
        } else {
            out.push(arg.clone());
        }
    }
    Ok(out)
}

/// Why a package-runner command may run other code tomorrow: `npx`/`bunx` with a package
/// without `@VERSION`, `uvx` with one without `==VERSION` (or `@VERSION`).
fn unpinned_runner(argv: &[String]) -> Option<String> {
    let program = std::path::Path::new(argv.first()?)
        .file_name()?
        .to_string_lossy()
        .into_owned();
    let rest = &argv[1..];
    let (npm, python) = (
        matches!(program.as_str(), "npx" | "bunx"),
        matches!(program.as_str(), "uvx" | "pipx"),
    );
    if !npm && !python {
        return None;
    }
    // `uvx --from SPEC cmd` and `npx --package SPEC cmd` name the package in the flag.
    let mut spec = None;
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        if let Some(v) = a
            .strip_prefix("--from=")
            .or_else(|| a.strip_prefix("--package="))
        {
            spec = Some(v.to_owned());
            break;
        }
        if a == "--from" || a == "--package" || a == "-p" {
            spec = rest.get(i + 1).cloned();
            break;
        }
        if a == "run" && program == "pipx" {
            i += 1;
            continue;
        }
        if !a.starts_with('-') {
            spec = Some(a.clone());
            break;
        }
        i += 1;
    }
    let spec = spec?;
    let pinned = if npm {
        // `@scope/pkg@1.2.3`: the version's `@` comes after the first character.
        spec.get(1..).is_some_and(|s| s.contains('@'))
            && !spec.ends_with("@latest")
            && !spec.ends_with("@next")
    } else {
        spec.contains("==") || (spec.contains('@') && !spec.ends_with("@latest"))
    };
    (!pinned).then(|| {
        format!(
            "`{program}` runs `{}` without a pinned version",
            crate::text::sanitize_line(&spec)
        )
    })
}

/// `--env` takes variable names, never `NAME=value`.
pub(crate) fn check_env_flags(env: &[String]) -> Result<()> {
    let bad: Vec<String> = env
        .iter()
        .filter(|v| !valid_env_name(v))
        .map(|v| format!("`{v}`"))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(Error::new(format!("`--env` takes variable names, not {}", bad.join(", ")))
        .hint("pass `--env NAME`; the value is read from mcpsum's environment when the server starts and never stored"))
}
