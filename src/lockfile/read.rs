//! Reading `mcp.lock`: peek at the version, parse strictly (no duplicate or unknown keys), then
//! validate every rule and recompute every digest, gathering all problems in one pass (I3).

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{
    Digests, Era, Kind, Lockfile, PROMPTS_WILDCARD, RESOURCES_WILDCARD, SUPPORTED_VERSIONS,
    ServerEntry, canonical_items, valid_env_name, valid_server_name,
};
use crate::canonical::parse_strict_slice;
use crate::error::{Error, Result};

/// Reads and validates the lockfile at `path`.
pub fn load(path: &Path) -> Result<Lockfile> {
    let bytes = read_bytes(path)?;
    load_from_bytes(path, &bytes)
}

/// The lockfile's bytes, for a caller that also needs its text (reports that point into it).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    fs_err::read(path).map_err(|e| {
        Error::new(format!("cannot read `{}`", path.display()))
            .cause(io_cause(&e))
            .hint("run `mcpsum lock --name NAME -- COMMAND...` to create it, or pass `--lockfile PATH`")
    })
}

/// Like [`load`], but a missing file is `None`.
pub fn load_optional(path: &Path) -> Result<Option<Lockfile>> {
    if !path.exists() {
        return Ok(None);
    }
    load(path).map(Some)
}

fn io_cause(e: &std::io::Error) -> String {
    // fs-err already names the path; keep only the OS reason.
    std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string)
}

/// Parses and validates lockfile bytes; `path` is only used in messages.
pub fn load_from_bytes(path: &Path, bytes: &[u8]) -> Result<Lockfile> {
    let shown = path.display();
    let invalid = |what: String| {
        Error::new(format!("`{shown}` is not a valid lockfile"))
            .cause(what)
            .hint(format!(
                "fix the file by hand or restore it with `git checkout -- {shown}`"
            ))
    };

    // Step 1: strict JSON (duplicate keys are errors) and the version peek.
    let value = parse_strict_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    let Some(obj) = value.as_object() else {
        return Err(invalid("the top level must be a JSON object".into()));
    };
    match obj.get("lockfileVersion") {
        Some(Value::Number(n))
            if n.as_u64()
                .is_some_and(|v| SUPPORTED_VERSIONS.iter().any(|&s| u64::from(s) == v)) => {}
        Some(other) => {
            return Err(Error::new(format!(
                "`{shown}` has lockfileVersion {other}, which this mcpsum does not read"
            ))
            .cause("this build reads lockfile versions 1 and 2")
            .hint("upgrade mcpsum, or re-create the file with `mcpsum lock`"));
        }
        None => return Err(invalid("missing `lockfileVersion`".into())),
    }

    // Step 2: the typed model, with the key path of the first structural problem.
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(e.to_string()))?;
    let mut de = serde_json::Deserializer::from_str(text);
    let lock: Lockfile = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        invalid(format!(
            "{shown}:{}:{}: at `{path}`: {}",
            inner.line(),
            inner.column(),
            strip_position(&inner.to_string())
        ))
    })?;

    // Step 3: every rule and every digest, all problems at once.
    let problems: Vec<String> = validate(&lock)
        .into_iter()
        .map(|p| match locate(text, &p) {
            Some((line, col)) => format!("{shown}:{line}:{col}: {p}"),
            None => p,
        })
        .collect();
    if !problems.is_empty() {
        let digest_problem = problems.iter().any(|p| p.contains("digest"));
        let n = problems.len();
        let mut err = Error::new(format!(
            "`{shown}` failed validation ({n} problem{})",
            if n == 1 { "" } else { "s" }
        ))
        .details(problems);
        err = if digest_problem {
            err.hint(format!(
                "inspect the change with `git diff {shown}`; run `mcpsum lock --name NAME` only if the new surface is expected"
            ))
        } else {
            err.hint(format!("fix the named keys in `{shown}`"))
        };
        return Err(err);
    }
    Ok(lock)
}

/// Where in the file a validation problem is, found from the key path and item it names:
/// the JSON string anchors are searched in order, starting at `"servers"`.
fn locate(text: &str, problem: &str) -> Option<(usize, usize)> {
    let mut anchors: Vec<String> = Vec::new();
    if let Some(rest) = problem.strip_prefix("servers.") {
        let (path, tail) = rest.split_once(": ")?;
        anchors.extend(
            path.split('.')
                .map(|seg| seg.split('[').next().unwrap_or(seg).to_owned()),
        );
        anchors.extend(backticked(tail));
    } else if let Some(rest) = problem.strip_prefix("server `") {
        let (name, tail) = rest.split_once('`')?;
        anchors.push(name.to_owned());
        if tail.starts_with(", surface") {
            anchors.push("surface".into());
        } else {
            anchors.push("digests".into());
            match backticked(tail) {
                Some(key) => anchors.push(key),
                None => anchors.push("instructions".into()),
            }
        }
    } else {
        return None;
    }
    let mut pos = text.find("\"servers\"")?;
    for anchor in &anchors {
        let quoted = serde_json::to_string(anchor).ok()?;
        pos += text[pos..].find(&quoted)?;
    }
    let before = &text[..pos];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(pos, |i| pos - i - 1) + 1;
    Some((line, col))
}

/// The first `backticked` word of a message.
fn backticked(text: &str) -> Option<String> {
    let start = text.find('`')? + 1;
    let len = text[start..].find('`')?;
    Some(text[start..start + len].to_owned())
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

/// Checks one entry about to be written as a load would (its digests, labels and policy).
pub fn check_entry(path: &Path, name: &str, entry: &ServerEntry) -> Result<()> {
    let mut problems = Vec::new();
    validate_entry(name, entry, &mut problems);
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::new(format!(
        "the entry for server `{name}` would not be valid; `{}` was left unchanged",
        path.display()
    ))
    .details(problems)
    .hint("this is a bug in mcpsum; please report it with the server's output"))
}

/// Checks every rule of the format; returns one line per problem.
pub(crate) fn validate(lock: &Lockfile) -> Vec<String> {
    let mut problems = Vec::new();
    let needs_v2 = lock
        .servers
        .values()
        .any(|e| e.supported_versions.is_some());
    if lock.lockfile_version == 1 && needs_v2 {
        let names: Vec<&str> = lock
            .servers
            .iter()
            .filter(|(_, e)| e.supported_versions.is_some())
            .map(|(n, _)| n.as_str())
            .collect();
        problems.push(format!(
            "lockfileVersion 1 cannot hold `supportedVersions` (server{} {}); such entries need version 2",
            if names.len() == 1 { "" } else { "s" },
            names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    for (name, entry) in &lock.servers {
        validate_entry(name, entry, &mut problems);
    }
    problems
}

fn validate_entry(name: &str, entry: &ServerEntry, problems: &mut Vec<String>) {
    let at = |key: &str| format!("servers.{name}.{key}");
    if !valid_server_name(name) {
        problems.push(format!(
            "server name `{name}`: use 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        ));
    }
    if entry.command.is_empty() || entry.command[0].is_empty() {
        problems.push(format!("{}: must name a program", at("command")));
    }
    let mut seen = BTreeSet::new();
    for (i, var) in entry.env_passthrough.iter().enumerate() {
        if !valid_env_name(var) {
            problems.push(format!(
                "{}[{i}]: `{var}` is not a variable name",
                at("envPassthrough")
            ));
        }
        if !seen.insert(var) {
            problems.push(format!(
                "{}[{i}]: `{var}` is listed twice",
                at("envPassthrough")
            ));
        }
    }
    match (&entry.supported_versions, entry.protocol_version.as_str()) {
        (Some(list), v) if !list.iter().any(|s| s == v) => problems.push(format!(
            "{}: `{v}` is not among `supportedVersions`",
            at("protocolVersion")
        )),
        (None, crate::mcp::MODERN_VERSION) => problems.push(format!(
            "{}: a 2026-07-28 entry must record `supportedVersions`",
            at("protocolVersion")
        )),
        (_, "") => problems.push(format!("{}: must not be empty", at("protocolVersion"))),
        _ => {}
    }
    if entry.era() == Era::Modern && entry.protocol_version != crate::mcp::MODERN_VERSION {
        problems.push(format!(
            "{}: a `server/discover` entry must speak {}",
            at("protocolVersion"),
            crate::mcp::MODERN_VERSION
        ));
    }
    if !entry.server_info.is_object() {
        problems.push(format!("{}: must be an object", at("serverInfo")));
    }
    if !entry.capabilities.is_object() {
        problems.push(format!("{}: must be an object", at("capabilities")));
    }

    // Items: keys, order, duplicates, the cap; then every digest.
    for kind in Kind::ALL {
        let items = entry.items(kind);
        match canonical_items(kind, items) {
            Ok(sorted) if sorted.as_slice() != items => problems.push(format!(
                "{}: items are not sorted by `{}`",
                at(kind.field()),
                kind.key_field()
            )),
            Ok(_) => {}
            Err(e) => problems.push(format!("{}: {e}", at(kind.field()))),
        }
    }
    let computed = Digests::compute(
        entry.instructions.as_deref(),
        &entry.tools,
        &entry.prompts,
        &entry.resources,
        &entry.resource_templates,
    );
    let recorded = &entry.digests;
    for kind in Kind::ALL {
        let (rec, comp) = (recorded.of_kind(kind), computed.of_kind(kind));
        for (key, c) in comp {
            match rec.get(key) {
                Some(r) if r == c => {}
                Some(r) => problems.push(format!(
                    "server `{name}`, {} `{key}`: digest mismatch (recorded {r}, computed {c})",
                    kind.noun()
                )),
                None => problems.push(format!(
                    "server `{name}`, {} `{key}`: no digest recorded in `digests.{}`",
                    kind.noun(),
                    kind.field()
                )),
            }
        }
        for key in rec.keys().filter(|k| !comp.contains_key(*k)) {
            problems.push(format!(
                "server `{name}`, {} `{key}`: digest recorded for an item that is not in `{}`",
                kind.noun(),
                kind.field()
            ));
        }
    }
    if recorded.instructions != computed.instructions {
        problems.push(format!(
            "server `{name}`, instructions: digest mismatch (recorded {}, computed {})",
            opt_digest(recorded.instructions.as_ref()),
            opt_digest(computed.instructions.as_ref())
        ));
    }
    // The surface digest is checked over the recorded digests, so a consistent edit of items
    // and item digests still has to update it.
    let surface = recorded.surface_digest();
    if recorded.surface != surface {
        problems.push(format!(
            "server `{name}`, surface: digest mismatch (recorded {}, computed {surface})",
            recorded.surface
        ));
    }

    // Policy labels: every name a locked tool or one of the two wildcards.
    if let Some(taint) = entry.taint() {
        let tools: BTreeSet<&str> = entry
            .tools
            .iter()
            .filter_map(|t| Kind::Tool.key_of(t))
            .collect();
        for (field, labels) in [("sources", &taint.sources), ("sinks", &taint.sinks)] {
            let mut seen = BTreeSet::new();
            for (i, label) in labels.iter().enumerate() {
                let ok = label == RESOURCES_WILDCARD
                    || label == PROMPTS_WILDCARD
                    || tools.contains(label.as_str());
                if !ok {
                    problems.push(format!(
                        "{}[{i}]: `{label}` is not a locked tool of server `{name}` (nor `{RESOURCES_WILDCARD}` / `{PROMPTS_WILDCARD}`)",
                        at(&format!("policy.taint.{field}"))
                    ));
                }
                if !seen.insert(label) {
                    problems.push(format!(
                        "{}[{i}]: `{label}` is listed twice",
                        at(&format!("policy.taint.{field}"))
                    ));
                }
            }
        }
    }
    if let Some(sandbox) = entry.sandbox() {
        for problem in crate::sandboxing::check_policy_syntax(sandbox) {
            problems.push(format!("{}: {problem}", at("policy.sandbox")));
        }
    }
}

fn opt_digest(d: Option<&super::Sha256Digest>) -> String {
    d.map_or_else(|| "null".to_owned(), ToString::to_string)
}

/// Only for parsing a `--sandbox FILE` argument: the `policy.sandbox` object alone.
pub(crate) fn parse_sandbox_policy(path: &Path, bytes: &[u8]) -> Result<super::SandboxPolicy> {
    let shown = path.display();
    let value = parse_strict_slice(bytes)
        .map_err(|e| Error::new(format!("`{shown}` is not valid JSON")).cause(e))?;
    let value = match value {
        // Accept both the bare object and `{"policy": {"sandbox": ...}}` / `{"sandbox": ...}`.
        Value::Object(ref m) if m.len() == 1 && m.contains_key("sandbox") => m["sandbox"].clone(),
        other => other,
    };
    super::SandboxPolicy::deserialize(&value).map_err(|e| {
        Error::new(format!("`{shown}` is not a valid `policy.sandbox` object"))
            .cause(e)
            .hint("expected {\"filesystem\": {\"read\": [...], \"write\": [...]}, \"network\": {\"allow\": [...]}}")
    })
}
