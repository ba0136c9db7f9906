//! `mcpsum show`: what the lockfile pins, per server.

use serde_json::{Value, json};

use crate::cli::ShowArgs;
use crate::error::{Exit, Result};
use crate::lockfile::{self, Kind, ServerEntry};
use crate::output::{self, paint, sanitize_line, style};
use crate::paths;

/// Runs `show`.
pub fn run(lockfile_flag: Option<&std::path::Path>, args: &ShowArgs) -> Result<Exit> {
    let path = paths::require_lockfile(lockfile_flag)?;
    let lock = lockfile::load(&path)?;
    let selected: Vec<(&String, &ServerEntry)> = match &args.name {
        Some(name) => vec![(name, super::entry(&lock, &path, name)?)],
        None => lock.servers.iter().collect(),
    };
    if args.json {
        let servers: serde_json::Map<String, Value> = selected
            .iter()
            .map(|(n, e)| ((*n).clone(), json_entry(e)))
            .collect();
        let doc = json!({"lockfile": path.display().to_string(), "lockfileVersion": lock.lockfile_version, "servers": servers});
        output::stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
        drop(selected);
        lockfile::release_at_exit(lock);
        return Ok(Exit::Ok);
    }
    let mut out = String::new();
    for (i, (name, entry)) in selected.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&human_entry(name, entry));
    }
    if selected.is_empty() {
        out.push_str("no servers locked\n");
    }
    output::stdout(&out);
    drop(selected);
    lockfile::release_at_exit(lock);
    Ok(Exit::Ok)
}

fn hints(tool: &Value) -> Vec<String> {
    let ann = tool.get("annotations");
    [
        "readOnlyHint",
        "destructiveHint",
        "idempotentHint",
        "openWorldHint",
    ]
    .iter()
    .filter_map(|h| {
        ann.and_then(|a| a.get(*h))
            .and_then(Value::as_bool)
            .map(|b| format!("{}={b}", h.trim_end_matches("Hint")))
    })
    .collect()
}

fn labels(entry: &ServerEntry, tool: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    if let Some(t) = entry.taint() {
        if t.sources.iter().any(|s| s == tool) {
            out.push("source");
        }
        if t.sinks.iter().any(|s| s == tool) {
            out.push("sink");
        }
    }
    out
}

fn human_entry(name: &str, e: &ServerEntry) -> String {
    let mut s = String::new();
    let info = &e.server_info;
    let server = sanitize_line(&format!(
        "{} {}",
        info.get("name").and_then(Value::as_str).unwrap_or("?"),
        info.get("version").and_then(Value::as_str).unwrap_or("?")
    ));
    s.push_str(&format!("{}\n", paint(style::BOLD, name)));
    s.push_str(&format!(
        "  command      {}\n",
        sanitize_line(&shell_words(&e.command))
    ));
    s.push_str(&format!(
        "  env          {}\n",
        if e.env_passthrough.is_empty() {
            "(none passed)".to_owned()
        } else {
            e.env_passthrough.join(" ")
        }
    ));
    s.push_str(&format!(
        "  era          {}, protocol {}\n",
        e.era(),
        e.protocol_version
    ));
    if let Some(v) = &e.supported_versions {
        s.push_str(&format!(
            "  supported    {}\n",
            sanitize_line(&v.join(", "))
        ));
    }
    s.push_str(&format!("  server       {server}\n"));
    s.push_str(&format!(
        "  surface      {} tools, {} prompts, {} resources, {} templates, instructions {}\n",
        e.tools.len(),
        e.prompts.len(),
        e.resources.len(),
        e.resource_templates.len(),
        if e.instructions.is_some() {
            "yes"
        } else {
            "none"
        }
    ));
    s.push_str(&format!("  digest       {}\n", e.digests.surface));
    for tool in &e.tools {
        let tname = Kind::Tool.key_of(tool).unwrap_or_default();
        let h = hints(tool);
        let l = labels(e, tname);
        let mut line = format!("    {}", sanitize_line(tname));
        if !h.is_empty() {
            line.push_str(&format!("  {}", paint(style::DIM, h.join(" "))));
        }
        if !l.is_empty() {
            line.push_str(&format!("  [{}]", paint(style::WARN, l.join(", "))));
        }
        s.push_str(&line);
        s.push('\n');
    }
    for kind in [Kind::Prompt, Kind::Resource, Kind::ResourceTemplate] {
        for item in e.items(kind) {
            s.push_str(&format!(
                "    {} {}\n",
                paint(style::DIM, kind.noun()),
                kind.key_of(item).unwrap_or_default()
            ));
        }
    }
    if let Some(t) = e.taint() {
        s.push_str(&format!(
            "  taint        sources: {}; sinks: {}\n",
            or_none(&t.sources),
            or_none(&t.sinks)
        ));
    }
    match e.sandbox() {
        Some(sb) => {
            s.push_str(&format!(
                "  sandbox      read: {}; write: ${{TMP}}{}\n",
                or_none(&sb.filesystem.read),
                sb.filesystem
                    .write
                    .iter()
                    .map(|w| format!(", {w}"))
                    .collect::<String>()
            ));
            s.push_str(&format!(
                "  network      {}\n",
                if sb.network.allow.is_empty() {
                    "none".to_owned()
                } else {
                    sb.network.allow.join(", ")
                }
            ));
        }
        None => s.push_str("  sandbox      none\n"),
    }
    s
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_owned()
    } else {
        v.join(", ")
    }
}

/// Quotes argv for display.
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=.,/:@+%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn json_entry(e: &ServerEntry) -> Value {
    let tools: Vec<Value> = e
        .tools
        .iter()
        .map(|t| {
            let name = Kind::Tool.key_of(t).unwrap_or_default();
            json!({"name": name, "annotations": t.get("annotations").cloned().unwrap_or(Value::Null), "labels": labels(e, name)})
        })
        .collect();
    json!({
        "command": e.command,
        "envPassthrough": e.env_passthrough,
        "era": match e.era() { lockfile::Era::Legacy => "legacy", lockfile::Era::Modern => "2026-07-28" },
        "protocolVersion": e.protocol_version,
        "supportedVersions": e.supported_versions,
        "serverInfo": e.server_info,
        "counts": {"tools": e.tools.len(), "prompts": e.prompts.len(), "resources": e.resources.len(), "resourceTemplates": e.resource_templates.len()},
        "instructions": e.instructions.is_some(),
        "tools": tools,
        "prompts": e.prompts.iter().filter_map(|p| Kind::Prompt.key_of(p)).collect::<Vec<_>>(),
        "resources": e.resources.iter().filter_map(|p| Kind::Resource.key_of(p)).collect::<Vec<_>>(),
        "resourceTemplates": e.resource_templates.iter().filter_map(|p| Kind::ResourceTemplate.key_of(p)).collect::<Vec<_>>(),
        "policy": e.policy,
        "surfaceDigest": e.digests.surface,
    })
}
