//! `mcpsum verify`: start each selected server in its locked era, under its sandbox, and compare
//! its live surface with the lock. Servers are verified concurrently.

use serde_json::{Value, json};

use crate::cli::{Format, VerifyArgs};
use crate::drift::{self, Class, Drift};
use crate::error::{Error, Exit, Result};
use crate::lockfile;
use crate::mcp::client;
use crate::output::{self, paint, style};
use crate::paths;

pub use super::ci::Outcome;

/// A report of a run that verified nothing, printed before the error goes to stderr as usual:
/// the CI formats' consumers expect a document and a result to show, and `--json` promises one
/// JSON document. Its keys are those of the normal `--json` report (no server was verified, so
/// `servers` is empty) plus the run's own `error`, `details` and `hint`, named as a failed
/// server's are.
fn not_run(
    format: Format,
    strict: bool,
    lockfile: Option<&std::path::Path>,
    signature: Option<&crate::signing::Status>,
    err: Error,
) -> Error {
    match format {
        Format::Sarif | Format::Github => {
            let cwd = std::env::current_dir().ok();
            output::stdout(&super::ci::not_run(
                format == Format::Sarif,
                lockfile,
                cwd.as_deref(),
                signature.map(crate::signing::Status::to_ci_json).as_ref(),
                &err,
            ));
        }
        Format::Json => output::stdout_json(&json!({
            "lockfile": lockfile.map(|p| p.display().to_string()),
            "strict": strict,
            "exitCode": err.exit() as i32,
            "signature": signature.map(crate::signing::Status::to_json),
            "servers": [],
            "error": err.one_line(),
            "details": err.detail_lines(),
            "hint": err.hint_text(),
        })),
        Format::Text => {}
    }
    err
}

/// Runs `verify`.
pub async fn run(
    lockfile_flag: Option<&std::path::Path>,
    args: &VerifyArgs,
    trust: &crate::signing::Trust,
) -> Result<Exit> {
    let format = if args.json { Format::Json } else { args.format };
    let path = paths::require_lockfile(lockfile_flag)
        .map_err(|e| not_run(format, args.strict, None, None, e))?;
    // One read: the signature is checked over, and the CI formats point at lines of, the very
    // bytes that were verified.
    let bytes = lockfile::read_bytes(&path)
        .map_err(|e| not_run(format, args.strict, Some(&path), None, e))?;
    let signature = crate::signing::inspect(&path, &bytes, trust)
        .map_err(|e| not_run(format, args.strict, Some(&path), None, e))?;
    // With an allowed-signers file in force, no server runs from a lockfile it does not accept.
    if let Some(e) = signature.refusal(&path) {
        return Err(not_run(
            format,
            args.strict,
            Some(&path),
            Some(&signature),
            e,
        ));
    }
    let lock = lockfile::load_from_bytes(&path, &bytes)
        .map_err(|e| not_run(format, args.strict, Some(&path), Some(&signature), e))?;
    let names: Vec<String> = if args.name.is_empty() {
        lock.servers.keys().cloned().collect()
    } else {
        for n in &args.name {
            super::entry(&lock, &path, n)
                .map_err(|e| not_run(format, args.strict, Some(&path), Some(&signature), e))?;
        }
        let mut n = args.name.clone();
        n.sort();
        n.dedup();
        n
    };
    let mut progress = crate::progress::Progress::start();
    let mut tasks = Vec::new();
    for name in &names {
        let entry = lock.servers[name].clone();
        let launch = match super::launch_for(
            name,
            &entry,
            &path,
            output::verbose(),
            crate::pin::Check::Full,
        ) {
            // `Full` leaves nothing pending.
            Ok((launch, _checked)) => launch,
            Err(e) => {
                tasks.push(tokio::spawn(async move { Outcome::Failed(e) }));
                continue;
            }
        };
        let opts = super::options(
            args.timeout_secs,
            progress.server(name, &super::show::shell_words(&entry.command)),
        );
        tasks.push(tokio::spawn(async move {
            match client::read_surface(&launch, Some(entry.era()), opts).await {
                Ok(surface) => match drift::compare(&entry, &surface) {
                    Ok(d) => Outcome::Checked(d),
                    // An item without its key, or two with one key: the server answered, but
                    // with a surface no lock could hold, so only its authors can fix it.
                    Err(e) => Outcome::Failed(
                        Error::new(format!("cannot verify server `{}`", launch.server))
                            .cause(e)
                            .hint("the server misbehaves: its live surface cannot be compared with the lock; report it to the server's authors"),
                    ),
                },
                // The seed's drift table: a 2026-07-28 server that no longer lists the locked
                // version cannot be spoken to as locked; that is a change of its surface.
                Err(crate::mcp::client::Failure {
                    error: crate::mcp::client::ClientError::VersionDropped { supported },
                    ..
                }) => Outcome::Checked(Drift {
                    items: Vec::new(),
                    fields: vec![drift::FieldChange {
                        field: "supportedVersions (the locked protocolVersion is no longer listed)",
                        class: Class::Definitional,
                        locked: Value::String(entry.protocol_version.clone()),
                        live: supported.into_iter().map(Value::String).collect(),
                    }],
                }),
                Err(f) => Outcome::Failed(super::server_error("cannot verify", &launch, f)),
            }
        }));
    }
    let mut results = Vec::new();
    for (name, task) in names.iter().zip(tasks) {
        let outcome = task.await.unwrap_or_else(|e| {
            Outcome::Failed(Error::new(format!("verifying `{name}` crashed")).cause(e))
        });
        results.push((name.clone(), outcome));
    }
    progress.finish();

    let mut exit = Exit::Ok;
    for (_, outcome) in &results {
        let this = match outcome {
            Outcome::Failed(_) => Exit::CannotRun,
            Outcome::Checked(d) => match d.class() {
                Class::Definitional => Exit::Problem,
                Class::Informational if args.strict => Exit::Problem,
                _ => Exit::Ok,
            },
        };
        exit = exit.max(this);
    }

    if matches!(format, Format::Sarif | Format::Github) {
        let cwd = std::env::current_dir().ok();
        let report = super::ci::Report {
            lockfile: &path,
            lock_text: std::str::from_utf8(&bytes).unwrap_or_default(),
            cwd: cwd.as_deref(),
            strict: args.strict,
            exit,
            results: &results,
            signature: &signature,
        };
        output::stdout(&if format == Format::Sarif {
            super::ci::sarif(&report)
        } else {
            super::ci::github(&report)
        });
        return Ok(exit);
    }

    if format == Format::Json {
        let servers: Vec<Value> = results
            .iter()
            .map(|(name, o)| match o {
                Outcome::Checked(d) => json!({
                    "name": name,
                    "status": d.class(),
                    "items": d.items,
                    "fields": d.fields,
                    // The report a person reads, uncoloured: digests alone do not say what
                    // changed, and the live definitions are not in the lockfile to diff.
                    "diff": super::diff::plain(&drift::render(d, "")),
                }),
                Outcome::Failed(e) => json!({"name": name, "status": "error", "error": e.one_line(), "hint": e.hint_text()}),
            })
            .collect();
        let doc = json!({"lockfile": path.display().to_string(), "strict": args.strict, "exitCode": exit as i32, "signature": signature.to_json(), "servers": servers});
        output::stdout_json(&doc);
        return Ok(exit);
    }

    let mut out = String::new();
    // Whether the file is signed, and by whom, first: what every server was verified against.
    let mark = match &signature.state {
        crate::signing::State::Valid(_) => style::OK,
        crate::signing::State::Invalid { .. } => style::WARN,
    };
    // `-q` prints only what needs attention: a signature that is required and not valid was
    // refused above.
    if !output::quiet() {
        out.push_str(&format!(
            "{}: {}\n",
            paint(mark, "signature"),
            crate::text::sanitize_line(&signature.summary())
        ));
    }
    if results.is_empty() {
        out.push_str("no servers locked\n");
    }
    for (name, outcome) in &results {
        match outcome {
            Outcome::Checked(d) => match d.class() {
                // `-q` prints only what needs attention.
                Class::Clean if output::quiet() => {}
                Class::Clean => {
                    out.push_str(&format!("{} {name}: clean\n", paint(style::OK, "ok")));
                }
                Class::Informational => {
                    let mark = if args.strict {
                        paint(style::ERROR, "drift")
                    } else {
                        paint(style::WARN, "info")
                    };
                    out.push_str(&format!("{mark} {name}: informational drift\n"));
                    out.push_str(&drift::render(d, "  "));
                }
                Class::Definitional => {
                    out.push_str(&format!(
                        "{} {name}: definitional drift: {}\n",
                        paint(style::ERROR, "drift"),
                        d.summary()
                    ));
                    out.push_str(&drift::render(d, "  "));
                }
            },
            Outcome::Failed(e) => {
                out.push_str(&format!(
                    "{} {name}: could not verify\n",
                    paint(style::ERROR, "error")
                ));
                for line in crate::text::sanitize(&e.to_string()).lines() {
                    out.push_str(&format!("  {line}\n"));
                }
            }
        }
    }
    if exit == Exit::Problem {
        out.push_str(&format!(
            "\n{}: review the changes; if they are expected, run {} and commit `{}`\n",
            paint(style::BOLD, "hint"),
            results
                .iter()
                .filter(|(_, o)| match o {
                    Outcome::Checked(d) =>
                        d.class() == Class::Definitional
                            || (args.strict && d.class() == Class::Informational),
                    Outcome::Failed(_) => false,
                })
                .map(|(n, _)| format!("`mcpsum lock --name {n}`"))
                .collect::<Vec<_>>()
                .join(", "),
            path.display()
        ));
    }
    output::stdout(&out);
    Ok(exit)
}
