//! `mcpsum sandbox test --name NAME`: build NAME's sandbox exactly as the proxy would, run the
//! probe (this binary) inside it, and print each promise: check, expected, observed, pass.

use std::io::IsTerminal;

use crate::cli::SandboxTestArgs;
use crate::error::{Error, Exit, Result};
use crate::lockfile;
use crate::output::{self, paint, style};
use crate::paths;
use crate::text::sanitize_line;

/// A host that is never in an allowlist, for the "unlisted is refused" row.
const UNLISTED: &str = "unlisted.mcpsum.invalid:443";

/// A change to the plan that `sandbox test` checks, set only by test builds (the
/// `weakened-sandbox` example) to show that a weakened layer fails the report. The `mcpsum`
/// binary never sets it.
static WEAKEN: std::sync::OnceLock<fn(&mut mcpsum_sandbox::SandboxPlan)> =
    std::sync::OnceLock::new();

/// Makes this process's `sandbox test` check a plan weakened by `f`. For test builds only.
#[doc(hidden)]
pub fn weaken_for_tests(f: fn(&mut mcpsum_sandbox::SandboxPlan)) {
    let _ = WEAKEN.set(f);
}

/// Runs `sandbox test`.
pub async fn run(
    lockfile_flag: Option<&std::path::Path>,
    args: &SandboxTestArgs,
    trust: &crate::signing::Trust,
) -> Result<Exit> {
    let path = paths::require_lockfile(lockfile_flag)?;
    let (lock, _) = crate::signing::load(&path, trust)?;
    let entry = super::entry(&lock, &path, &args.name)?;
    let Some(policy) = entry.sandbox() else {
        return Err(
            Error::new(format!("server `{}` has no `policy.sandbox`", args.name))
                .hint("add one (see `mcpsum lock --sandbox FILE`), then run this again"),
        );
    };
    // A pinned server runs from its install, which the sandbox must let it read.
    // `Full` leaves nothing pending.
    let (launch, _checked) =
        super::launch_for(&args.name, entry, &path, false, crate::pin::Check::Full)?;
    let spec = launch
        .sandbox
        .clone()
        .unwrap_or(crate::sandboxing::SandboxSpec {
            policy: policy.clone(),
            lockfile: path.clone(),
        });
    let env = crate::mcp::process::server_env(&entry.env_passthrough);
    let (req, protected) = crate::sandboxing::request(&args.name, &launch.argv, &spec, env)
        .map_err(|e| Error::new(e).hint("fix `policy.sandbox` in the lockfile"))?;
    crate::sandboxing::warn_wide_rules(&args.name, &req.policy);

    let egress = if policy.network.allow.is_empty() {
        None
    } else {
        let allowlist = mcpsum_egress::Allowlist::parse(&policy.network.allow)
            .map_err(|_| Error::new("network.allow is invalid"))?;
        let mut checks: Vec<mcpsum_sandbox::EgressCheck> = policy
            .network
            .allow
            .iter()
            .filter(|a| !a.starts_with("*."))
            .map(|a| mcpsum_sandbox::EgressCheck {
                target: a.clone(),
                expected_status: 200,
            })
            .collect();
        checks.push(mcpsum_sandbox::EgressCheck {
            target: UNLISTED.to_owned(),
            expected_status: 403,
        });
        let handle = tokio::runtime::Handle::current();
        let state_dir = protected.state_dir.clone();
        let server = args.name.clone();
        let serve = Box::new(move |listener: std::net::TcpListener| {
            match crate::sandboxing::start_egress(&handle, listener, server, allowlist, &state_dir)
            {
                // The probe's checks end with the test; keep the proxy up until then.
                Ok(tx) => std::mem::forget(tx),
                // The CONNECT rows then fail and say so; the reason is here.
                Err(e) => output::warn(&format!("cannot start the egress proxy: {e}")),
            }
        });
        Some(mcpsum_sandbox::EgressHook { serve, checks })
    };

    // What learn mode saw this server do and this policy would refuse (a note, not a check).
    let learned = learned_refusals(&args.name, &req, &protected);
    let report = tokio::task::spawn_blocking(move || {
        let mut plan = mcpsum_sandbox::plan(&req)?;
        if let Some(weaken) = WEAKEN.get() {
            weaken(&mut plan);
        }
        mcpsum_sandbox::sandbox_test_plan(plan, &protected, egress)
    })
    .await
    .map_err(|e| Error::new("the sandbox test crashed").cause(e))?
    .map_err(|e| {
        Error::new(format!(
            "the sandbox of server `{}` cannot be built",
            args.name
        ))
        .cause(e)
        .hint("the server would not start either (fail closed); apply the fix named above")
    })?;

    if args.json {
        let mut doc =
            serde_json::json!({"server": args.name, "passed": report.passed(), "report": report});
        if let Some(refused) = &learned {
            doc["learned"] = serde_json::json!({"refused": refused});
        }
        output::stdout_json(&doc);
    } else {
        let mut text = render(&report);
        if let Some(refused) = &learned {
            text.push_str(&render_learned(&args.name, refused));
        }
        output::stdout(&text);
    }
    Ok(if report.passed() {
        Exit::Ok
    } else {
        Exit::Problem
    })
}

/// Of what learn mode observed server `name` doing, what the policy of `req` would refuse;
/// `None` when it was never learned.
fn learned_refusals(
    name: &str,
    req: &mcpsum_sandbox::LaunchRequest,
    protected: &mcpsum_sandbox::Protected,
) -> Option<Vec<String>> {
    let state_dir = paths::state_dir().ok()?;
    let observations = crate::learning::load(&state_dir, name).ok()?;
    if observations.is_empty() {
        return None;
    }
    let plan = mcpsum_sandbox::plan(req).ok()?;
    let ctx = crate::learning::context_of(&plan, protected);
    let mut refused = crate::learning::refused(&observations, &ctx);
    let allow = match &plan.network {
        mcpsum_sandbox::NetworkMode::None => Vec::new(),
        mcpsum_sandbox::NetworkMode::Egress { allow } => allow.clone(),
    };
    let list = mcpsum_egress::Allowlist::parse(&allow).ok();
    for o in &observations {
        if let mcpsum_sandbox::Observation::Host { target, .. } = o
            && let Ok(t) = mcpsum_egress::Target::parse(target)
            && list.as_ref().is_none_or(|l| l.find(&t).is_none())
        {
            let line = format!("connect {target}");
            if !refused.contains(&line) {
                refused.push(line);
            }
        }
    }
    Some(refused)
}

fn render_learned(name: &str, refused: &[String]) -> String {
    if refused.is_empty() {
        return "\nlearn mode: this policy grants everything the server was observed using\n"
            .to_owned();
    }
    let mut out = format!(
        "\nlearn mode: this policy would refuse {} thing{} the server was observed doing:\n",
        refused.len(),
        if refused.len() == 1 { "" } else { "s" }
    );
    for r in refused {
        out.push_str(&format!("  {}\n", sanitize_line(r)));
    }
    out.push_str(&format!(
        "\nhint: `mcpsum sandbox suggest --name {name}` proposes a policy for what was observed; it leaves out, and says why, what looks secret, what is too wide to grant (a folder only listed, a system folder) and what the private `${{TMP}}` covers, so some of these may stay refused\n"
    ));
    out
}

fn render(report: &mcpsum_sandbox::SandboxReport) -> String {
    let mut out = format!(
        "{}\n",
        paint(style::BOLD, format!("sandbox of `{}`", report.server))
    );
    for l in &report.layers {
        out.push_str(&format!("  {:<16} {}\n", l.layer, l.status));
    }
    if output::verbose() {
        out.push_str("  read set:\n");
        for (p, why) in &report.read_set {
            out.push_str(&format!(
                "    {}  {}\n",
                sanitize_line(p),
                paint(style::DIM, sanitize_line(why))
            ));
        }
        out.push_str("  write set:\n");
        for (p, why) in &report.write_set {
            out.push_str(&format!(
                "    {}  {}\n",
                sanitize_line(p),
                paint(style::DIM, sanitize_line(why))
            ));
        }
    }
    // Cells are cut to fit a terminal's width only: in a CI log or a file a row names its whole
    // path, and the same report reads the same wherever the project is checked out.
    let cut: fn(String, usize) -> String = if std::io::stdout().is_terminal() {
        |text, max| crate::text::ellipsize(&text, max)
    } else {
        |text, _| text
    };
    let rows: Vec<[String; 3]> = report
        .rows
        .iter()
        .map(|r| {
            [
                cut(sanitize_line(&r.check), 60),
                cut(sanitize_line(&r.expected), 40),
                cut(sanitize_line(&r.observed_text()), 44),
            ]
        })
        .collect();
    let width = |i: usize, min: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(min)
            .max(min)
    };
    let (w0, w1, w2) = (width(0, 5), width(1, 8), width(2, 8));
    out.push_str(&format!(
        "\n{:<w0$}  {:<w1$}  {:<w2$}  pass\n",
        "check", "expected", "observed"
    ));
    for (r, cells) in report.rows.iter().zip(&rows) {
        let pass = if r.pass {
            paint(style::OK, "yes")
        } else {
            paint(style::ERROR, "NO")
        };
        out.push_str(&format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {pass}\n",
            cells[0], cells[1], cells[2]
        ));
    }
    // A refusal that plain file permissions make anyway passes, but shows nothing about the
    // sandbox: say so, so a reader does not take it for the sandbox at work.
    let outside_too = report
        .rows
        .iter()
        .filter(|r| r.refused_by == Some(mcpsum_sandbox::RefusedBy::OutsideToo))
        .count();
    if outside_too > 0 {
        out.push_str(&format!(
            "\n{} {outside_too} refusal{} marked above happen{} outside the sandbox too, for this user (file permissions, or a path that does not exist): {} nothing about the sandbox\n",
            paint(style::WARN, "note:"),
            if outside_too == 1 { "" } else { "s" },
            if outside_too == 1 { "s" } else { "" },
            if outside_too == 1 { "that row shows" } else { "those rows show" },
        ));
    }
    let failed = report.rows.iter().filter(|r| !r.pass).count();
    out.push_str(&if failed == 0 {
        format!(
            "\n{} every expectation holds ({} checks)\n",
            paint(style::OK, "ok"),
            report.rows.len()
        )
    } else {
        // The failed checks are named, so that nobody has to scan every row for a "NO".
        let mut text = format!(
            "\n{} {failed} of {} expectations do not hold:\n",
            paint(style::ERROR, "FAILED"),
            report.rows.len()
        );
        for r in report.rows.iter().filter(|r| !r.pass) {
            text.push_str(&format!(
                "  {}: expected {}, observed {}\n",
                sanitize_line(&r.check),
                sanitize_line(&r.expected),
                sanitize_line(&r.observed_text())
            ));
        }
        text
    });
    out
}

/// `sandbox suggest --name NAME [--json] [--reset]`.
pub fn suggest(
    lockfile_flag: Option<&std::path::Path>,
    args: &crate::cli::SandboxSuggestArgs,
    trust: &crate::signing::Trust,
) -> Result<Exit> {
    let path = paths::require_lockfile(lockfile_flag)?;
    let lock = lockfile::load(&path)?;
    let entry = super::entry(&lock, &path, &args.name)?;
    let state_dir = paths::state_dir()?;
    let file = crate::learning::observation_file(&state_dir, &args.name);
    if args.reset {
        match fs_err::remove_file(&file) {
            Ok(()) => output::info(&format!(
                "forgot what server `{}` was observed doing (`{}` removed)",
                args.name,
                file.display()
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => output::info(&format!(
                "server `{}` has no observations to forget",
                args.name
            )),
            Err(e) => return Err(Error::new("cannot reset the observations").cause(e)),
        }
        return Ok(Exit::Ok);
    }
    let observations = crate::learning::load(&state_dir, &args.name)
        .map_err(|e| Error::new("cannot read the observations").cause(e))?;
    if observations.is_empty() {
        return Err(Error::new(format!(
            "server `{}` has no observations to suggest a sandbox from",
            args.name
        ))
        .hint(format!(
            "run it once in learn mode, through its client or by hand: `mcpsum proxy --name {} --learn`",
            args.name
        )));
    }
    let ctx = base_context(&args.name, entry, &path)?;
    let s = crate::learning::suggest(&observations, &ctx);
    // Paths, socket names and `CONNECT` targets come from the server: escaped.
    for w in &s.warnings {
        output::warn(&sanitize_line(w));
    }
    for n in &s.notes {
        output::info(&sanitize_line(n));
    }
    if args.json {
        output::stdout_json(&s.policy());
        if args.write {
            return write_suggestion(&path, &args.name, &s, true, trust);
        }
        return Ok(Exit::Ok);
    }
    if args.write {
        return write_suggestion(&path, &args.name, &s, false, trust);
    }
    let mut out = format!(
        "{}\n",
        paint(
            style::BOLD,
            format!(
                "proposed `policy.sandbox` for server `{}`, from {} observations",
                args.name,
                observations.len()
            )
        )
    );
    let rows: Vec<(&str, &crate::learning::Proposed)> = s
        .read
        .iter()
        .map(|p| ("read", p))
        .chain(s.write.iter().map(|p| ("write", p)))
        .chain(s.allow.iter().map(|p| ("allow", p)))
        .collect();
    let width = rows
        .iter()
        .map(|(_, p)| p.entry.chars().count())
        .max()
        .unwrap_or(0);
    for (kind, p) in &rows {
        out.push_str(&format!(
            "  {kind:<5}  {:<width$}  {}\n",
            sanitize_line(&p.entry),
            paint(style::DIM, sanitize_line(&p.why))
        ));
    }
    if s.allow.is_empty() {
        out.push_str("  allow  []  it asked for no host\n");
    }
    out.push_str(&format!(
        "\nreview it, then paste it as `servers.{name}.policy.sandbox` into `{}` (or run `mcpsum sandbox suggest --name {name} --write` to merge it in) and check it with `mcpsum sandbox test --name {name}`:\n",
        path.display(),
        name = args.name,
    ));
    out.push_str(&serde_json::to_string_pretty(&s.policy()).unwrap_or_default());
    out.push('\n');
    output::stdout(&out);
    Ok(Exit::Ok)
}

/// `sandbox suggest --write`: merges the proposal into `servers.NAME.policy.sandbox` (entries
/// already there stay, and a proposed path an entry already covers is not added), shows the
/// change to the entry's `policy` as a diff, checks the merged policy as the proxy would, and
/// writes the lockfile atomically under its advisory lock on a fresh read, as `lock` does.
fn write_suggestion(
    path: &std::path::Path,
    name: &str,
    s: &crate::learning::Suggestion,
    json: bool,
    trust: &crate::signing::Trust,
) -> Result<Exit> {
    lockfile::refuse_symlink(path)?;
    let guard = lockfile::LockGuard::acquire(path)?;
    let mut lock = lockfile::load(path)?;
    let Some(entry) = lock.servers.get_mut(name) else {
        return Err(super::unknown_server(&lock, path, name));
    };
    let policy_json = |p: &Option<lockfile::Policy>| {
        serde_json::to_value(p.clone().unwrap_or_default()).unwrap_or_default()
    };
    let before = policy_json(&entry.policy);
    let had_sandbox = entry.sandbox().is_some();
    let policy = entry.policy.get_or_insert_with(lockfile::Policy::default);
    let sandbox = policy
        .sandbox
        .get_or_insert_with(lockfile::SandboxPolicy::default);
    let mut added = Vec::new();
    let covered = |kept: &[String], p: &str| {
        kept.iter()
            .any(|k| std::path::Path::new(p).starts_with(std::path::Path::new(k)))
    };
    for p in &s.write {
        if !covered(&sandbox.filesystem.write, &p.entry) {
            added.push(format!("write `{}`", sanitize_line(&p.entry)));
            sandbox.filesystem.write.push(p.entry.clone());
        }
    }
    for p in &s.read {
        let kept: Vec<String> = sandbox
            .filesystem
            .read
            .iter()
            .chain(&sandbox.filesystem.write)
            .cloned()
            .collect();
        if !covered(&kept, &p.entry) {
            added.push(format!("read `{}`", sanitize_line(&p.entry)));
            sandbox.filesystem.read.push(p.entry.clone());
        }
    }
    for p in &s.allow {
        if !sandbox.network.allow.contains(&p.entry) {
            added.push(format!("allow `{}`", sanitize_line(&p.entry)));
            sandbox.network.allow.push(p.entry.clone());
        }
    }
    if added.is_empty() && had_sandbox {
        output::info(&format!(
            "`servers.{name}.policy.sandbox` of `{}` already grants everything proposed; nothing written",
            path.display()
        ));
        return Ok(Exit::Ok);
    }
    let merged = sandbox.clone();
    let after = policy_json(&entry.policy);
    let command = entry.command.clone();
    let diff = format!(
        "{}\n{}",
        paint(
            style::BOLD,
            format!("servers.{name}.policy of `{}`:", path.display())
        ),
        crate::drift::json_diff(&before, &after, "  ")
    );
    // With `--json` stdout holds the one document; the diff is for the person, on stderr.
    if json {
        output::info(diff.trim_end());
    } else {
        output::stdout(&diff);
    }
    // Fail closed: a merged policy the proxy would refuse (a path that does not exist here, a
    // write that covers a protected path) is not written.
    lockfile::check_entry(path, name, &lock.servers[name])?;
    let spec = crate::sandboxing::SandboxSpec {
        policy: merged,
        lockfile: path.to_path_buf(),
    };
    crate::sandboxing::request(name, &command, &spec, Vec::new()).map_err(|e| {
        Error::new(format!(
            "the merged `policy.sandbox` of server `{name}` would be refused; `{}` was left unchanged",
            path.display()
        ))
        .cause(e)
        .hint(format!(
            "learn again (`mcpsum sandbox suggest --name {name} --reset`, then `mcpsum proxy --name {name} --learn`), or edit the policy by hand"
        ))
    })?;
    crate::signing::warn_if_stale_before(path);
    lockfile::write_atomic(path, &lockfile::to_bytes(&lock))?;
    drop(guard);
    output::info(&format!(
        "{} to `servers.{name}.policy.sandbox` of `{}`: {}; check it with `mcpsum sandbox test --name {name}`",
        paint(style::OK, "added"),
        path.display(),
        if added.is_empty() {
            "an empty sandbox (no path, no host)".to_owned()
        } else {
            added.join(", ")
        }
    ));
    crate::signing::warn_after_write(path, trust);
    Ok(Exit::Ok)
}

/// What the sandbox of `name` grants with an empty policy (its runtime base, command and
/// interpreter prefixes, caches), as a learning context.
fn base_context(
    name: &str,
    entry: &lockfile::ServerEntry,
    path: &std::path::Path,
) -> Result<crate::learning::Context> {
    let spec = crate::sandboxing::SandboxSpec {
        policy: lockfile::SandboxPolicy::default(),
        lockfile: path.to_path_buf(),
    };
    let env = crate::mcp::process::server_env(&entry.env_passthrough);
    let (req, protected) = crate::sandboxing::request(name, &entry.command, &spec, env)
        .map_err(|e| Error::new(format!("cannot plan the sandbox of server `{name}`")).cause(e))?;
    let plan = mcpsum_sandbox::plan(&req).map_err(|e| {
        Error::new(format!("cannot plan the sandbox of server `{name}`"))
            .cause(e)
            .hint("the sandbox needs Linux with Landlock; check the command with `mcpsum show`")
    })?;
    Ok(crate::learning::context_of(&plan, &protected))
}
