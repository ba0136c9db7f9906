//! `mcpsum suggest-policy`, `mcpsum taint list` and `mcpsum taint reset`.

use std::io::IsTerminal;

use serde_json::json;

use crate::error::{Error, Exit, Result};
use crate::output::{self, paint, sanitize_line, style};
use crate::{paths, taint};

/// `suggest-policy --name NAME`: JSON on stdout, reasons on stderr; never edits the lock.
pub fn suggest(
    lockfile_flag: Option<&std::path::Path>,
    name: &str,
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
    output::info(&format!(
        "review, then paste into `servers.{name}` of `{}` (mcpsum does not edit it)",
        path.display()
    ));
    output::stdout_json(&policy);
    Ok(Exit::Ok)
}

/// `taint list [--json]`.
pub fn list(json_out: bool) -> Result<Exit> {
    let state_dir = paths::state_dir()?;
    let sessions = taint::list_sessions(&state_dir).map_err(|e| {
        Error::new(format!(
            "cannot read `{}`",
            taint::taint_dir(&state_dir).display()
        ))
        .cause(e)
    })?;
    if json_out {
        let doc: Vec<_> = sessions
            .iter()
            .map(|(s, alive)| json!({"session": s, "active": alive}))
            .collect();
        output::stdout_json(&json!({"sessions": doc}));
        return Ok(Exit::Ok);
    }
    if sessions.is_empty() {
        output::stdout("no client sessions\n");
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
