//! `mcpsum show`: what the lockfile pins, per server.

use serde::Serialize;
use serde_json::Value;

use crate::cli::ShowArgs;
use crate::error::{Exit, Result};
use crate::lockfile::{self, ItemSummary, Kind, LockedItem};
use crate::output::{self, paint_stdout, style};
use crate::paths;
use crate::text::sanitize_line;

/// Runs `show`.
pub fn run(
    lockfile_flag: Option<&std::path::Path>,
    args: &ShowArgs,
    trust: &crate::signing::Trust,
) -> Result<Exit> {
    let path = paths::require_lockfile(lockfile_flag)?;
    let bytes = lockfile::read_bytes(&path)?;
    let bytes: &[u8] = &bytes;
    // What the lock pins is shown only from a lockfile the allowed signers accept. The check
    // hashes the whole file (for 0.78 MB: 1.3 ms with the SHA-512 `ssh-keygen` signs with, 0.4 ms
    // with the SHA-256 of `mcpsum sign`), so beside it this thread does
    // everything that shows nothing: the parse, and the whole text, written once the check has
    // passed. Without a check the text is written as it is made, in pieces. Only names, keys
    // and annotations of items are shown: a summary of each is enough, and reading one costs a
    // fraction of building the item (every digest is still checked).
    let (lock, shown) = crate::signing::enforce(&path, bytes, trust, |checking| {
        let lock = lockfile::load_summary_from_bytes(&path, bytes)?;
        let shown = if checking {
            render(&path, &lock, args, false)?
        } else {
            None
        };
        Ok::<_, crate::error::Error>((lock, shown))
    })??;
    match shown {
        Some(Shown::Text(text)) => output::stdout(&text),
        Some(Shown::Json(text)) => output::stdout_json_text(&text),
        None => {
            render(&path, &lock, args, true)?;
        }
    }
    lockfile::release_at_exit(lock);
    Ok(Exit::Ok)
}

/// What `show` prints, made whole to be written later.
enum Shown {
    Text(String),
    Json(String),
}

/// What `show` prints: with `stream`, written as it is made (the text in pieces of about
/// 16 KiB: one buffer, reused, touches fewer fresh pages than the whole text, and thousands of
/// items make tens of kilobytes; JSON serialized straight into stdout), else returned whole.
fn render(
    path: &std::path::Path,
    lock: &lockfile::Lockfile<ItemSummary>,
    args: &ShowArgs,
    stream: bool,
) -> Result<Option<Shown>> {
    let selected: Vec<(&String, &Entry)> = match &args.name {
        Some(name) => vec![(name, super::entry(lock, path, name)?)],
        None => lock.servers.iter().collect(),
    };
    if args.json {
        let doc = JsonDoc {
            lockfile: path.display().to_string(),
            lockfile_version: lock.lockfile_version,
            servers: JsonServers(&selected),
        };
        if stream {
            output::stdout_json(&doc);
            return Ok(None);
        }
        return Ok(Some(Shown::Json(output::json_text(&doc))));
    }
    const PIECE: usize = 16 * 1024;
    let mut out = String::with_capacity(2 * PIECE);
    for (i, (name, entry)) in selected.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        push_entry(&mut out, name, entry);
        if stream && out.len() >= PIECE {
            output::stdout(&out);
            out.clear();
        }
    }
    if selected.is_empty() {
        out.push_str("no servers locked\n");
    }
    if stream {
        output::stdout(&out);
        return Ok(None);
    }
    Ok(Some(Shown::Text(out)))
}

/// An entry as `show` reads it.
type Entry = lockfile::Entry<ItemSummary>;

fn hints(tool: &ItemSummary) -> Vec<String> {
    let ann = tool.annotations();
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

fn labels(entry: &Entry, tool: &str) -> Vec<&'static str> {
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

/// `serverInfo`'s name and version for people, sanitized: `?` for a missing name, and no
/// version (rather than an empty word) when the server reports none.
pub fn server_label(info: &Value) -> String {
    let name = info.get("name").and_then(Value::as_str).unwrap_or("?");
    match info.get("version").and_then(Value::as_str).map(str::trim) {
        Some("") => sanitize_line(name),
        Some(v) => sanitize_line(&format!("{name} {v}")),
        None => sanitize_line(&format!("{name} ?")),
    }
}

/// Appends the human-readable form of one entry to `s`.
fn push_entry(s: &mut String, name: &str, e: &Entry) {
    let info = &e.server_info;
    let server = server_label(info);
    s.push_str(&format!("{}\n", paint_stdout(style::BOLD, name)));
    s.push_str(&format!(
        "  command      {}\n",
        sanitize_line(&shell_words(&e.command))
    ));
    push_code(s, e);
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
        sanitize_line(&e.protocol_version)
    ));
    if let Some(v) = &e.supported_versions {
        s.push_str(&format!(
            "  supported    {}\n",
            sanitize_line(&v.join(", "))
        ));
    }
    s.push_str(&format!("  server       {server}\n"));
    s.push_str(&format!(
        "  surface      {}, instructions {}\n",
        item_counts(e),
        if e.instructions.is_some() {
            "yes"
        } else {
            "none"
        }
    ));
    s.push_str(&format!("  digest       {}\n", e.digests.surface));
    // One line per item, appended in place: with thousands of items, a string per line shows.
    for tool in &e.tools {
        let tname = tool.key(Kind::Tool).unwrap_or_default();
        let h = hints(tool);
        let l = labels(e, tname);
        s.push_str("    ");
        crate::text::push_sanitized_line(s, tname);
        if !h.is_empty() {
            s.push_str("  ");
            s.push_str(&paint_stdout(style::DIM, h.join(" ")));
        }
        if !l.is_empty() {
            s.push_str("  [");
            s.push_str(&paint_stdout(style::WARN, l.join(", ")));
            s.push(']');
        }
        s.push('\n');
    }
    for kind in [Kind::Prompt, Kind::Resource, Kind::ResourceTemplate] {
        let noun = paint_stdout(style::DIM, kind.noun());
        for item in e.items(kind) {
            s.push_str("    ");
            s.push_str(&noun);
            s.push(' ');
            crate::text::push_sanitized_line(s, item.key(kind).unwrap_or_default());
            s.push('\n');
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
                sanitize_line(
                    &sb.filesystem
                        .write
                        .iter()
                        .map(|w| format!(", {w}"))
                        .collect::<String>()
                )
            ));
            s.push_str(&format!(
                "  network      {}\n",
                if sb.network.allow.is_empty() {
                    "none".to_owned()
                } else {
                    or_none(&sb.network.allow)
                }
            ));
            let tasks = sb.limits.as_ref().and_then(|l| l.tasks);
            s.push_str(&format!(
                "  limits       tasks: {}; core dumps: off\n",
                tasks.map_or_else(
                    || format!("{} (default)", mcpsum_sandbox::Limits::DEFAULT_TASKS),
                    |t| t.to_string()
                )
            ));
        }
        None => s.push_str("  sandbox      none\n"),
    }
}

/// What code the entry runs: its pinned closure and the install the server starts from, or
/// that it is not pinned.
fn push_code(s: &mut String, e: &Entry) {
    let Some(a) = &e.artifacts else {
        let why = match crate::pin::runner::parse(&e.command) {
            None => "not a `uvx` or `npx` command",
            Some(Ok(_)) => "locked before mcpsum pinned code; re-lock it to pin",
            Some(Err(_)) => "its runner options cannot be pinned",
        };
        s.push_str(&format!("  code         not pinned ({why})\n"));
        return;
    };
    s.push_str(&format!(
        "  code         pinned: {} packages ({}{}), {}\n",
        a.packages.len(),
        a.installer,
        match (&a.python, &a.node) {
            (Some(p), _) => format!(", Python {}", sanitize_line(p)),
            (None, Some(n)) => format!(", Node.js {}", sanitize_line(n)),
            (None, None) => String::new(),
        },
        e.digests
            .artifacts
            .map(|d| d.to_string())
            .unwrap_or_default()
    ));
    if let Some(runs) = pinned_argv(e) {
        s.push_str(&format!("  runs         {}\n", sanitize_line(&runs)));
    }
    for p in &a.packages {
        s.push_str(&format!(
            "    {} {}  {}{}\n",
            sanitize_line(&p.name),
            sanitize_line(&p.version),
            paint_stdout(style::DIM, sanitize_line(&p.hash)),
            if p.install_script {
                "  (install script allowed)"
            } else {
                ""
            }
        ));
    }
}

/// The argv a pinned entry runs, from its install (whether or not it is made yet).
fn pinned_argv(e: &Entry) -> Option<String> {
    let a = e.artifacts.as_ref()?;
    let dir = crate::pin::install_dir(a).ok()?;
    let argv = match crate::pin::runner::parse(&e.command)? {
        Ok(crate::pin::runner::Runner::Uv(run)) => {
            let mut argv = vec![dir.join("bin").join(&run.script).display().to_string()];
            argv.extend(run.args);
            argv
        }
        Ok(crate::pin::runner::Runner::Npm(run)) => {
            let (top, _) = crate::pin::npm::split_spec(&run.spec)?;
            let mut argv = vec![
                "node".to_owned(),
                format!("{}/node_modules/{top}/…", dir.display()),
            ];
            argv.extend(run.args);
            argv
        }
        Err(_) => return None,
    };
    let made = if crate::pin::is_installed(a) {
        ""
    } else {
        " (not installed here yet: made from the recorded hashes at the first start)"
    };
    Some(format!("{}{made}", shell_words(&argv)))
}

/// A list from the file for one line of the terminal (sanitized), or `none`.
fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_owned()
    } else {
        sanitize_line(&v.join(", "))
    }
}

/// Quotes argv for display, as a POSIX shell would read it back (`shlex`). A NUL byte, which no
/// real argv holds but a lockfile string can, is kept: callers sanitize the line for the
/// terminal anyway.
pub fn shell_words(argv: &[String]) -> String {
    shlex::Quoter::new()
        .allow_nul(true)
        .join(argv.iter().map(String::as_str))
        // Only a NUL is refused, and it is allowed above.
        .unwrap_or_else(|_| argv.join(" "))
}

#[cfg(test)]
mod shell_words_tests {
    use super::shell_words;

    #[test]
    fn quotes_what_a_shell_would_split_or_expand() {
        let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            shell_words(&argv(&["npx", "-y", "@scope/pkg@1.2"])),
            "npx -y @scope/pkg@1.2"
        );
        assert_eq!(shell_words(&argv(&["a b", ""])), "'a b' ''");
        let round = argv(&["it's", "$HOME", "`x`", "a\\b", "{x}"]);
        assert_eq!(shlex::split(&shell_words(&round)), Some(round));
    }
}

/// The `--json` document, serialized straight from the entries (no intermediate `Value`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonDoc<'a> {
    lockfile: String,
    lockfile_version: u32,
    servers: JsonServers<'a>,
}

/// The selected entries as an object keyed by name, in order.
struct JsonServers<'a>(&'a [(&'a String, &'a Entry)]);

impl Serialize for JsonServers<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(n, e)| (*n, JsonEntry::new(e))))
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonEntry<'a> {
    command: &'a [String],
    /// The pinned closure, if any (`null`: the code is not pinned).
    artifacts: Option<&'a lockfile::Artifacts>,
    env_passthrough: &'a [String],
    era: &'static str,
    protocol_version: &'a str,
    supported_versions: Option<&'a [String]>,
    server_info: &'a Value,
    counts: JsonCounts,
    instructions: bool,
    tools: Vec<JsonTool<'a>>,
    prompts: Vec<&'a str>,
    resources: Vec<&'a str>,
    resource_templates: Vec<&'a str>,
    policy: Option<&'a lockfile::Policy>,
    surface_digest: &'a lockfile::Sha256Digest,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonCounts {
    tools: usize,
    prompts: usize,
    resources: usize,
    resource_templates: usize,
}

#[derive(Serialize)]
struct JsonTool<'a> {
    name: &'a str,
    /// `null` when the tool has none.
    annotations: Option<&'a Value>,
    labels: Vec<&'static str>,
}

impl<'a> JsonEntry<'a> {
    fn new(e: &'a Entry) -> Self {
        let keys = |kind: Kind| -> Vec<&'a str> {
            e.items(kind).iter().filter_map(|i| i.key(kind)).collect()
        };
        Self {
            command: &e.command,
            artifacts: e.artifacts.as_ref(),
            env_passthrough: &e.env_passthrough,
            era: match e.era() {
                lockfile::Era::Legacy => "legacy",
                lockfile::Era::Modern => crate::protocol::MODERN_VERSION,
            },
            protocol_version: &e.protocol_version,
            supported_versions: e.supported_versions.as_deref(),
            server_info: &e.server_info,
            counts: JsonCounts {
                tools: e.tools.len(),
                prompts: e.prompts.len(),
                resources: e.resources.len(),
                resource_templates: e.resource_templates.len(),
            },
            instructions: e.instructions.is_some(),
            tools: e
                .tools
                .iter()
                .map(|t| {
                    let name = t.key(Kind::Tool).unwrap_or_default();
                    JsonTool {
                        name,
                        annotations: t.annotations(),
                        labels: labels(e, name),
                    }
                })
                .collect(),
            prompts: keys(Kind::Prompt),
            resources: keys(Kind::Resource),
            resource_templates: keys(Kind::ResourceTemplate),
            policy: e.policy.as_ref(),
            surface_digest: &e.digests.surface,
        }
    }
}

/// How many items of each kind an entry pins, as people read it: `1 tool, 0 prompts, ...`.
pub(crate) fn item_counts<I>(entry: &crate::lockfile::Entry<I>) -> String {
    crate::lockfile::Kind::ALL
        .iter()
        .map(|k| {
            let n = entry.items(*k).len();
            format!("{n} {}", if n == 1 { k.noun() } else { k.plural() })
        })
        .collect::<Vec<_>>()
        .join(", ")
}
