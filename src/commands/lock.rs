//! `mcpsum lock`: start a server, read its whole surface and pin it.
//!
//! The server runs before the lockfile is locked (it may take a while to start); the
//! read-modify-write then happens under the advisory lock on a fresh read of the file, so two
//! `lock` runs at once both land. On any failure the existing file is untouched.

use crate::cli::{EraFlag, LockArgs};
use crate::drift;
use crate::error::{Error, Exit, Result};
use crate::lockfile::{
    self, Era, Kind, Lockfile, Policy, ServerEntry, valid_env_name, valid_server_name,
};
use crate::mcp::client::{self, Ask, ClientError};
use crate::output::{self, paint, style};
use crate::paths;

/// Runs `lock`.
pub async fn run(lockfile_flag: Option<&std::path::Path>, args: &LockArgs) -> Result<Exit> {
    let path = paths::find_lockfile(lockfile_flag)?
        .unwrap_or_else(|| std::path::PathBuf::from(paths::LOCKFILE_NAME));
    let exit = lock_at(&path, args).await?;
    crate::signing::warn_if_stale(&path);
    Ok(exit)
}

/// Locks one server into the lockfile at `path`: the whole of `lock` once the file is known.
/// `import` locks each server it finds through here too, so both pin a surface the same way.
pub async fn lock_at(path: &std::path::Path, args: &LockArgs) -> Result<Exit> {
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

    let (command, env) = match (&previous, args.command.is_empty()) {
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
            let mut env = prev.env_passthrough.clone();
            env.extend(args.env.iter().cloned());
            (prev.command.clone(), env)
        }
        (Some(prev), false) => {
            if prev.command != args.command {
                output::info(&format!(
                    "replacing the command of `{}`: {} -> {}",
                    args.name,
                    output::sanitize_line(&super::show::shell_words(&prev.command)),
                    output::sanitize_line(&super::show::shell_words(&args.command))
                ));
            }
            (args.command.clone(), args.env.clone())
        }
        (None, false) => (args.command.clone(), args.env.clone()),
    };
    let mut env = env;
    env.sort();
    env.dedup();

    // The policy is the person's: keep it; `--sandbox` sets the sandbox part.
    let mut policy: Option<Policy> = previous.as_ref().and_then(|p| p.policy.clone());
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
                Error::new(e).hint(format!(
                    "fix `{}`; the server was not started",
                    file.display()
                ))
            })?;
        // Allowed (the policy is the person's), but never silently.
        for (key, credential) in mcpsum_sandbox::exposed_credentials(&req.policy) {
            output::warn(&format!(
                "server `{}`: `{key}` opens the credentials at `{}` to the server; narrow the entry unless the server needs them",
                args.name,
                output::sanitize_line(&credential.display().to_string())
            ));
        }
        policy.get_or_insert_with(Policy::default).sandbox = Some(sandbox);
    }

    let launch = super::launch(
        &args.name,
        &command,
        &env,
        policy.as_ref().and_then(|p| p.sandbox.as_ref()),
        &path,
        false,
    );
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
    output::info(&format!(
        "{} `{}`: {}",
        paint(style::BOLD, "starting"),
        args.name,
        output::sanitize_line(&super::show::shell_words(&command))
    ));
    // A re-lock of the same command keeps the entry's era: a server that speaks both never
    // switches silently. A new command is a new server: its era is detected.
    let kept_era = previous
        .as_ref()
        .filter(|p| p.command == command)
        .map(ServerEntry::era);
    let ask = match (args.era, kept_era) {
        (Some(EraFlag::Auto), _) | (None, None) => Ask::Detect,
        (Some(EraFlag::Legacy), _) => Ask::Only(Era::Legacy),
        (Some(EraFlag::Modern), _) => Ask::Only(Era::Modern),
        (None, Some(era)) => Ask::Only(era),
    };
    let mut progress = crate::progress::Progress::start();
    let reporter = progress.server(&args.name, &super::show::shell_words(&command));
    let surface =
        client::read_surface_as(&launch, ask, super::options(args.timeout_secs, reporter)).await;
    progress.finish();
    let surface = surface.map_err(|f| {
        let refused = match &f.error {
            ClientError::EraRefused { era, .. } => Some(*era),
            _ => None,
        };
        let err = super::server_error("cannot lock", &launch, f);
        match refused {
            Some(era) => err.hint(era_hint(&args.name, era, args.era.is_none())),
            None => err,
        }
    })?;
    let dual_era = (surface.era == Era::Modern && args.era != Some(EraFlag::Modern))
        .then(|| legacy_versions_listed(&surface))
        .flatten();

    let mut entry = ServerEntry::from_surface(command, env, surface, policy).map_err(|e| {
        Error::new(format!("cannot lock server `{}`", args.name))
            .cause(e)
            .hint("mcpsum never pins a partial or ambiguous surface; fix the server or report it to its authors")
    })?;
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

/// The pre-2026 versions a 2026-07-28 server lists, if any: it speaks both eras.
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
        .map(|v| output::sanitize_line(v))
        .collect();
    (!legacy.is_empty()).then(|| legacy.join(", "))
}

/// What to do when the server does not speak the era it was asked in: `kept` when that was the
/// entry's era (a re-lock without `--era`), not a flag.
fn era_hint(name: &str, refused: Era, kept: bool) -> String {
    let (other, other_name) = match refused {
        Era::Modern => ("legacy", "the legacy era"),
        Era::Legacy => ("modern", "2026-07-28"),
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
    let counts = Kind::ALL
        .iter()
        .map(|k| format!("{} {}", entry.items(*k).len(), k.plural()))
        .collect::<Vec<_>>()
        .join(", ");
    output::info(&format!(
        "{} `{name}` in `{}`: {}, protocol {}, {} {}; {counts}",
        paint(style::OK, "locked"),
        path.display(),
        entry.era(),
        output::sanitize_line(&entry.protocol_version),
        output::sanitize_line(
            info.get("name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?")
        ),
        output::sanitize_line(
            info.get("version")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?")
        ),
    ));
    if let Some(prev) = previous {
        match drift::compare(prev, &entry.surface()) {
            Ok(d) if d.class() == drift::Class::Clean => {
                output::info("  unchanged since the previous lock")
            }
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
            output::sanitize_line(label)
        ));
    }
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
