//! Rewriting a config file: splices over the byte ranges the readers found, a masked diff of the
//! result for people to read, and backups beside the file.
//!
//! Only the `command` and `args` values of routed entries change; every other byte of the file
//! (order, comments, unknown keys, spacing, line endings) is copied as it was.

use std::ops::Range;
use std::path::{Path, PathBuf};

use super::clients::{ArgsAt, Stdio};
use super::literal::{json_string, toml_string};
use crate::fsutil;
use crate::output::{paint, style};

/// Replace `range` of the original text with `text`.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    /// Bytes of the original text (empty for an insertion).
    pub range: Range<usize>,
    /// What goes there.
    pub text: String,
}

/// The edits that route `entry` through `mcpsum proxy --name NAME --lockfile LOCKFILE`.
pub fn route(entry: &Stdio, toml: bool, program: &str, name: &str, lockfile: &str) -> Vec<Edit> {
    let quote = |s: &str| {
        if toml { toml_string(s) } else { json_string(s) }
    };
    let args = ["proxy", "--name", name, "--lockfile", lockfile]
        .iter()
        .map(|a| quote(a))
        .collect::<Vec<_>>()
        .join(", ");
    let array = format!("[{args}]");
    let mut edits = vec![Edit {
        range: entry.splice.command.clone(),
        text: quote(program),
    }];
    edits.push(match &entry.splice.args {
        ArgsAt::Replace(r) => Edit {
            range: r.clone(),
            text: array,
        },
        ArgsAt::Insert { at, before, after } => Edit {
            range: *at..*at,
            text: format!("{before}{array}{after}"),
        },
    });
    edits
}

/// `text` with `edits` applied. Edits are on the original's byte offsets and must not overlap.
pub fn apply(text: &str, edits: &[Edit]) -> Result<String, String> {
    let mut sorted: Vec<&Edit> = edits.iter().collect();
    sorted.sort_by_key(|e| (e.range.start, e.range.end));
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for e in sorted {
        if e.range.start < at || e.range.end > text.len() {
            return Err("two changes overlap".into());
        }
        let (Some(keep), true) = (
            text.get(at..e.range.start),
            text.is_char_boundary(e.range.end),
        ) else {
            return Err("a change does not fall on character boundaries".into());
        };
        out.push_str(keep);
        out.push_str(&e.text);
        at = e.range.end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// Edits that hide each masked string value behind `"…"` in a diff.
pub fn masks(masked: &[Range<usize>]) -> Vec<Edit> {
    masked
        .iter()
        .map(|r| Edit {
            range: r.clone(),
            text: "\"…\"".into(),
        })
        .collect()
}

/// A unified diff of two masked texts, two lines of context, coloured on a terminal.
pub fn render_diff(label: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = String::new();
    out.push_str(&paint(style::REMOVED, format!("--- {label}\n")));
    out.push_str(&paint(style::ADDED, format!("+++ {label}\n")));
    for hunk in diff.unified_diff().context_radius(2).iter_hunks() {
        out.push_str(&paint(style::HUNK, format!("{}\n", hunk.header())));
        for change in hunk.iter_changes() {
            // Config text is the user's or a tool's: no control characters reach the terminal.
            let line = crate::text::sanitize_line(change.value().trim_end_matches(['\n', '\r']));
            let (sign, st) = match change.tag() {
                similar::ChangeTag::Delete => ("-", Some(style::REMOVED)),
                similar::ChangeTag::Insert => ("+", Some(style::ADDED)),
                similar::ChangeTag::Equal => (" ", None),
            };
            match st {
                Some(st) => out.push_str(&paint(st, format!("{sign}{line}"))),
                None => out.push_str(&format!("{sign}{line}")),
            }
            out.push('\n');
        }
    }
    out
}

/// Writes `bytes` to a new file beside `path`, `NAME.mcpsum-backup-STAMP` (never over an existing
/// file), with `path`'s mode and owner ([`fsutil::create_new`]). Returns the backup's path.
pub fn write_backup(
    path: &Path,
    bytes: &[u8],
    like: &std::fs::Metadata,
    stamp: &str,
) -> std::io::Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = fsutil::parent_dir(path);
    for n in 1..1000 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let backup = dir.join(format!("{name}.mcpsum-backup-{stamp}{suffix}"));
        match fsutil::create_new(&backup, bytes, like) {
            Ok(()) => return Ok(backup),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "too many backups with the same time stamp",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::import::clients::{Kind, Shape, Source, parse};
    use pretty_assertions::assert_eq;

    fn routed(shape: Shape, text: &str) -> String {
        let source = Source {
            path: PathBuf::from("/x"),
            client: super::super::clients::Client::Other,
            shape,
        };
        let p = parse(&source, text).unwrap();
        let mut edits = Vec::new();
        for e in &p.entries {
            if let Kind::Stdio(s) = &e.kind {
                edits.extend(route(
                    s,
                    source.is_toml(),
                    "/bin/mcpsum",
                    &e.name,
                    "/l/mcp.lock",
                ));
            }
        }
        apply(text, &edits).unwrap()
    }

    #[test]
    fn json_splices_only_command_and_args() {
        let text = "{\r\n  // hi\r\n  \"mcpServers\": {\r\n    \"a\": { \"command\": \"npx\" /* c */, \"env\": {\"K\": \"v\"}, \"x\": 1 },\r\n    \"b\": {\"command\": \"uvx\", \"args\": [\r\n      \"t\"\r\n    ],}\r\n  },\r\n}\r\n";
        assert_eq!(
            routed(Shape::McpServers, text),
            "{\r\n  // hi\r\n  \"mcpServers\": {\r\n    \"a\": { \"command\": \"/bin/mcpsum\", \"args\": [\"proxy\", \"--name\", \"a\", \"--lockfile\", \"/l/mcp.lock\"] /* c */, \"env\": {\"K\": \"v\"}, \"x\": 1 },\r\n    \"b\": {\"command\": \"/bin/mcpsum\", \"args\": [\"proxy\", \"--name\", \"b\", \"--lockfile\", \"/l/mcp.lock\"],}\r\n  },\r\n}\r\n"
        );
    }

    #[test]
    fn toml_splices_only_command_and_args() {
        let text = "# top\n[mcp_servers.a]\ncommand = \"npx\" # runner\nenv = { K = \"v\" }\n\n[mcp_servers.b]\ncommand = 'uvx'\nargs = [\n  'x', # why\n]\n[other]\nk = 1\n[mcp_servers.c]\ncommand = \"q\"";
        assert_eq!(
            routed(Shape::CodexToml, text),
            "# top\n[mcp_servers.a]\ncommand = \"/bin/mcpsum\" # runner\nargs = [\"proxy\", \"--name\", \"a\", \"--lockfile\", \"/l/mcp.lock\"]\nenv = { K = \"v\" }\n\n[mcp_servers.b]\ncommand = \"/bin/mcpsum\"\nargs = [\"proxy\", \"--name\", \"b\", \"--lockfile\", \"/l/mcp.lock\"]\n[other]\nk = 1\n[mcp_servers.c]\ncommand = \"/bin/mcpsum\"\nargs = [\"proxy\", \"--name\", \"c\", \"--lockfile\", \"/l/mcp.lock\"]"
        );
        let inline = "mcp_servers = { a = { command = \"npx\", env = { K = \"v\" } } }\n";
        assert_eq!(
            routed(Shape::CodexToml, inline),
            "mcp_servers = { a = { command = \"/bin/mcpsum\", args = [\"proxy\", \"--name\", \"a\", \"--lockfile\", \"/l/mcp.lock\"], env = { K = \"v\" } } }\n"
        );
    }

    #[test]
    fn overlapping_edits_are_refused() {
        let e = |a, b| Edit {
            range: a..b,
            text: String::new(),
        };
        assert!(apply("abcdef", &[e(0, 3), e(2, 4)]).is_err());
        assert_eq!(apply("abcdef", &[e(3, 4), e(0, 1)]).unwrap(), "bcef");
    }
}
