//! `mcpsum suggest-policy`, `mcpsum taint list` and `mcpsum taint reset`.

use std::io::IsTerminal;

use serde_json::json;

use crate::error::{Error, Exit, Result};
use crate::output::{self, paint, style};
use crate::text::sanitize_line;
use crate::{lockfile, paths, taint};

/// `suggest-policy --name NAME [--write]`: JSON on stdout, reasons on stderr; with `--write`,
/// the labels are also added to the entry's `policy.taint` (kept labels stay, new ones join
/// them), under the advisory lock on a fresh read, as `lock` writes.
pub fn suggest(
    lockfile_flag: Option<&std::path::Path>,
    name: &str,
    write: bool,
    trust: &crate::signing::Trust,
) -> Result<Exit> {
    let path = paths::require_lockfile(lockfile_flag)?;
    let (lock, _) = crate::signing::load(&path, trust)?;
    let entry = super::entry(&lock, &path, name)?;
    let (policy, reasons) = taint::suggest(entry);
    output::info(&format!(
        "labels for `{name}` from its locked annotations (hints are the server's claims; a missing hint counts as \"may reach the outside world\" and \"may write\"):"
    ));
    for r in &reasons {
        output::info(&format!("  {r}"));
    }
    if !write {
        output::info(&format!(
            "review, then paste into `servers.{name}` of `{}`, or run `mcpsum suggest-policy --name {name} --write` to add them",
            path.display()
        ));
        output::stdout_json(&policy);
        return Ok(Exit::Ok);
    }
    drop(lock);
    output::stdout_json(&policy);
    let proposed: lockfile::TaintPolicy = serde_json::from_value(policy["policy"]["taint"].clone())
        .map_err(|e| Error::new("the suggested labels do not form a taint policy").cause(e))?;
    lockfile::refuse_symlink(&path)?;
    let guard = lockfile::LockGuard::acquire(&path)?;
    let mut lock = lockfile::load(&path)?;
    let Some(entry) = lock.servers.get_mut(name) else {
        return Err(super::unknown_server(&lock, &path, name));
    };
    let policy = entry.policy.get_or_insert_with(lockfile::Policy::default);
    let taint = policy
        .taint
        .get_or_insert_with(lockfile::TaintPolicy::default);
    let mut added = Vec::new();
    for (kept, new, label) in [
        (&mut taint.sources, proposed.sources, "source"),
        (&mut taint.sinks, proposed.sinks, "sink"),
    ] {
        for n in new {
            if !kept.contains(&n) {
                added.push(format!("{label} `{}`", sanitize_line(&n)));
                kept.push(n);
            }
        }
    }
    if added.is_empty() {
        output::info(&format!(
            "`servers.{name}.policy.taint` of `{}` already has every label; nothing written",
            path.display()
        ));
        return Ok(Exit::Ok);
    }
    lockfile::check_entry(&path, name, &lock.servers[name])?;
    crate::signing::warn_if_stale_before(&path);
    lockfile::write_atomic(&path, &lockfile::to_bytes(&lock))?;
    drop(guard);
    output::info(&format!(
        "{} to `servers.{name}.policy.taint` of `{}`: {}",
        paint(style::OK, "added"),
        path.display(),
        added.join(", ")
    ));
    crate::signing::warn_after_write(&path, trust);
    Ok(Exit::Ok)
}

/// `taint list [--json] [--active] [--server NAME]`.
pub fn list(json_out: bool, active: bool, servers: &[String]) -> Result<Exit> {
    let state_dir = paths::state_dir()?;
    let mut sessions = taint::list_sessions(&state_dir).map_err(|e| {
        Error::new(format!(
            "cannot read `{}`",
            taint::taint_dir(&state_dir).display()
        ))
        .cause(e)
    })?;
    // Every session ever is kept; a person looks for the live ones or one server's.
    sessions.retain(|(s, alive)| {
        (!active || *alive) && (servers.is_empty() || s.servers.iter().any(|n| servers.contains(n)))
    });
    if json_out {
        let doc: Vec<_> = sessions
            .iter()
            .map(|(s, alive)| json!({"session": s, "active": alive}))
            .collect();
        output::stdout_json(&json!({"sessions": doc}));
        return Ok(Exit::Ok);
    }
    if sessions.is_empty() {
        output::stdout(if active || !servers.is_empty() {
            "no client sessions match\n"
        } else {
            "no client sessions\n"
        });
        return Ok(Exit::Ok);
    }
    let mut out = String::new();
    for (s, alive) in &sessions {
        let status = if *alive { "active" } else { "ended" };
        out.push_str(&format!(
            "{}  {}  client {} (pid {}), started {}\n",
            paint(style::BOLD, sanitize_line(&s.session)),
            status,
            sanitize_line(s.client.as_deref().unwrap_or("unknown")),
            s.client_pid,
            sanitize_line(&s.started)
        ));
        out.push_str(&format!(
            "  servers    {}\n",
            s.servers
                .iter()
                .map(|n| sanitize_line(n))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for (server, chain) in &s.chains {
            // Client first, down to the proxy.
            let hops: Vec<String> = chain
                .iter()
                .rev()
                .map(|h| format!("{} ({})", sanitize_line(&h.name), h.pid))
                .collect();
            out.push_str(&format!(
                "  via        {}: {} → mcpsum\n",
                sanitize_line(server),
                hops.join(" → ")
            ));
        }
        match &s.taint {
            Some(m) => out.push_str(&format!(
                "  taint      {} by `{}` on server `{}` at {}\n",
                paint(style::WARN, "tainted"),
                sanitize_line(&m.item),
                sanitize_line(&m.server),
                sanitize_line(&m.ts)
            )),
            None => out.push_str("  taint      clean\n"),
        }
        let a = &s.approvals;
        out.push_str(&format!(
            "  approvals  {} asked, {} accepted, {} declined, {} refused without a prompt\n",
            a.asked, a.accepted, a.declined, a.refused
        ));
    }
    output::stdout(&out);
    Ok(Exit::Ok)
}

/// `taint reset SESSION | --all`: only from a terminal, since clearing taint is a person's
/// decision, not a tool's.
pub fn reset(session: Option<&str>, all: bool) -> Result<Exit> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(Error::new("`mcpsum taint reset` runs only on a terminal")
            .cause("clearing taint is a person's decision after reviewing what the session read, so a script or an agent cannot do it")
            .hint("run it yourself in a terminal, after `mcpsum taint list`"));
    }
    let target = match (session, all) {
        (Some(s), false) => Some(s),
        (None, true) => None,
        _ => {
            return Err(Error::new("name one SESSION or pass `--all`")
                .hint("see `mcpsum taint list` for session ids"));
        }
    };
    let state_dir = paths::state_dir()?;
    if let Some(s) = target {
        let known = taint::list_sessions(&state_dir).unwrap_or_default();
        if !known.iter().any(|(st, _)| st.session == s) {
            return Err(Error::new(format!("no client session `{s}`"))
                .hint("see `mcpsum taint list` for session ids"));
        }
    }
    let n =
        taint::reset(&state_dir, target).map_err(|e| Error::new("cannot reset taint").cause(e))?;
    output::info(&format!(
        "cleared the taint of {n} session{}",
        if n == 1 { "" } else { "s" }
    ));
    Ok(Exit::Ok)
}
