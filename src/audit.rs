//! The audit log: one JSON object per line, appended to `audit.jsonl` in the state directory.
//!
//! Several proxies append at once: the file is opened with `O_APPEND` and each record is one
//! `write` of one line, so records never interleave. Records never carry argument values or
//! environment values; a digest of the arguments is enough to correlate.
//!
//! Every string a record carries may come from a client or a server (a tool name, a URI, a host,
//! a reason that quotes them), so every record passes `cap` on its way to the file: a string
//! longer than [`FIELD_MAX`] bytes keeps a prefix and the SHA-256 digest of the whole. A client
//! that names a 4 MiB tool costs the log a few hundred bytes, not 4 MiB per record.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The audit log's file name in the state directory.
pub const AUDIT_FILE: &str = "audit.jsonl";

/// The most bytes of a string a record keeps (a longer one keeps a prefix of at most this and
/// the digest of the whole).
pub const FIELD_MAX: usize = 256;
/// The same for a `reason`: mcpsum's own explanation, which may quote names and run longer.
pub const REASON_MAX: usize = 1024;
/// The most elements of an array a record keeps.
pub const ARRAY_MAX: usize = 64;

/// `text` as a record keeps it: whole when it is at most `max` bytes, else its first bytes (cut
/// on a char boundary) and `… (N bytes, sha256:HEX)`, `max` bytes in all, so two long values
/// can still be told apart and matched with the value they came from.
pub fn capped(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let digest = crate::lockfile::Sha256Digest::of_bytes(text.as_bytes());
    let tail = format!("… ({} bytes, {digest})", text.len());
    // The whole fits in `max`, so a capped record is within its limits (capping is idempotent).
    let mut cut = max.saturating_sub(tail.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    std::borrow::Cow::Owned(format!("{}{tail}", &text[..cut]))
}

/// Caps every string (at any depth) and every array of a record, in place; `key` is the
/// member's name, for the limit of a `reason`.
fn cap(value: &mut Value, key: Option<&str>) {
    match value {
        Value::String(s) => {
            let max = if key == Some("reason") {
                REASON_MAX
            } else {
                FIELD_MAX
            };
            if let std::borrow::Cow::Owned(c) = capped(s, max) {
                *s = c;
            }
        }
        Value::Array(items) => {
            if items.len() > ARRAY_MAX {
                // The last element says how many were left out: `ARRAY_MAX` in all.
                let more = items.len() - (ARRAY_MAX - 1);
                items.truncate(ARRAY_MAX - 1);
                items.push(Value::String(format!("… ({more} more)")));
            }
            for v in items.iter_mut() {
                cap(v, key);
            }
        }
        Value::Object(map) => {
            // Keys are mcpsum's own, but a map of names a peer sent could have long ones.
            if map.keys().any(|k| k.len() > FIELD_MAX) {
                let old = std::mem::take(map);
                for (k, v) in old {
                    map.insert(capped(&k, FIELD_MAX).into_owned(), v);
                }
            }
            for (k, v) in map.iter_mut() {
                cap(v, Some(k));
            }
        }
        _ => {}
    }
}

/// Whether [`cap`] would change `value`.
fn needs_cap(value: &Value, key: Option<&str>) -> bool {
    match value {
        Value::String(s) => {
            s.len()
                > if key == Some("reason") {
                    REASON_MAX
                } else {
                    FIELD_MAX
                }
        }
        Value::Array(items) => items.len() > ARRAY_MAX || items.iter().any(|v| needs_cap(v, key)),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.len() > FIELD_MAX || needs_cap(v, Some(k))),
        _ => false,
    }
}

/// An open audit log for one server in one client session.
pub struct AuditLog {
    file: Mutex<Writer>,
    path: PathBuf,
    session: String,
    server: String,
    /// `,"session":...,"server":...`, as every record has it.
    who: String,
}

/// The file and a line buffer reused for every record.
struct Writer {
    file: std::fs::File,
    line: Vec<u8>,
}

/// The current time as RFC 3339 UTC.
pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

impl AuditLog {
    /// Opens (creating, mode 0600) `audit.jsonl` in `state_dir`.
    pub fn open(state_dir: &Path, session: &str, server: &str) -> Result<Self> {
        use fs_err::os::unix::fs::OpenOptionsExt;
        let path = state_dir.join(AUDIT_FILE);
        let file = fs_err::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            // A link planted in its place is not followed to append to another file.
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| {
                // fs-err's error names the path.
                Error::new("cannot open the audit log")
                    .cause(e)
                    .hint("the audit log must be writable before any server starts; check the state directory (`MCPSUM_STATE_DIR`)")
            })?
            .into_file();
        let (session, server) = (capped(session, FIELD_MAX), capped(server, FIELD_MAX));
        let who = format!(
            ",\"session\":{},\"server\":{}",
            Value::String(session.clone().into_owned()),
            Value::String(server.clone().into_owned())
        );
        Ok(Self {
            file: Mutex::new(Writer {
                file,
                line: Vec::new(),
            }),
            path,
            session: session.into_owned(),
            server: server.into_owned(),
            who,
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record: `ts`, `session`, `server`, `event`, then `fields`.
    pub fn record(&self, event: &str, fields: Value) -> std::io::Result<()> {
        let mut obj = Map::new();
        obj.insert("ts".into(), Value::String(now_rfc3339()));
        obj.insert("session".into(), Value::String(self.session.clone()));
        obj.insert("server".into(), Value::String(self.server.clone()));
        obj.insert("event".into(), Value::String(event.to_owned()));
        if let Value::Object(extra) = fields {
            for (k, v) in extra {
                obj.entry(k).or_insert(v);
            }
        }
        let mut record = Value::Object(obj);
        cap(&mut record, None);
        self.append_with(|line| {
            let _ = serde_json::to_writer(&mut *line, &record);
        })
    }

    /// Appends a record that already carries its own `ts`, `session`, `server` and `event`
    /// (the egress proxy's). Every record goes through here or [`AuditLog::note_call`], which
    /// cap what they write.
    pub fn append_raw(&self, record: &Value) -> std::io::Result<()> {
        let record = if needs_cap(record, None) {
            let mut r = record.clone();
            cap(&mut r, None);
            std::borrow::Cow::Owned(r)
        } else {
            std::borrow::Cow::Borrowed(record)
        };
        self.append_with(|line| {
            let _ = serde_json::to_writer(&mut *line, &*record);
        })
    }

    /// Appends the line `fill` writes (without its newline) in one `write`.
    fn append_with(&self, fill: impl FnOnce(&mut Vec<u8>)) -> std::io::Result<()> {
        let mut w = self
            .file
            .lock()
            .map_err(|_| std::io::Error::other("audit log lock poisoned"))?;
        let Writer { file, line } = &mut *w;
        line.clear();
        fill(line);
        line.push(b'\n');
        let result = file.write_all(line);
        if line.capacity() > 64 * 1024 {
            *line = Vec::new();
        }
        result
    }

    /// The record of a relayed call's answer, the most frequent record: the same fields, in
    /// the same order, as `note("call", {"method", "item", "decision": "allow", "ok",
    /// "outcome", ["reason",] "duration_ms", "bytes"})`, written without building a `Value`.
    pub fn note_call(
        &self,
        method: &str,
        item: &str,
        outcome: CallOutcome,
        took: Duration,
        bytes: usize,
    ) {
        let written = self.append_with(|line| {
            line.extend_from_slice(b"{\"ts\":\"");
            let _ = time::OffsetDateTime::now_utc()
                .format_into(line, &time::format_description::well_known::Rfc3339);
            line.extend_from_slice(b"\"");
            line.extend_from_slice(self.who.as_bytes());
            line.extend_from_slice(b",\"event\":\"call\",\"method\":");
            let _ = serde_json::to_writer(&mut *line, &capped(method, FIELD_MAX));
            line.extend_from_slice(b",\"item\":");
            let _ = serde_json::to_writer(&mut *line, &capped(item, FIELD_MAX));
            let _ = write!(
                line,
                ",\"decision\":\"allow\",\"ok\":{},\"outcome\":\"{}\"",
                outcome == CallOutcome::Ok,
                outcome.as_str()
            );
            if let Some(reason) = outcome.reason() {
                line.extend_from_slice(b",\"reason\":");
                let _ = serde_json::to_writer(&mut *line, reason);
            }
            let _ = write!(
                line,
                ",\"duration_ms\":{},\"bytes\":{bytes}}}",
                took.as_millis()
            );
        });
        if let Err(e) = written {
            self.warn_unwritten(&e);
        }
    }

    /// Appends a record, reporting (not failing) when the log cannot be written.
    pub fn note(&self, event: &str, fields: Value) {
        if let Err(e) = self.record(event, fields) {
            self.warn_unwritten(&e);
        }
    }

    fn warn_unwritten(&self, e: &std::io::Error) {
        crate::output::warn(&format!(
            "cannot write the audit log `{}`: {e}; check the free space and the permissions of the state directory (`MCPSUM_STATE_DIR`)",
            self.path.display()
        ));
    }
}

/// How a relayed call ended, as its `call` record's `outcome` says. Records written before
/// `outcome` existed carry only `ok`: `true` reads as [`CallOutcome::Ok`], `false` as
/// [`CallOutcome::Error`] (see [`CallOutcome::of_record`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// The server answered with a result.
    Ok,
    /// The server answered a `tools/call` with a result that has `isError: true`: the call
    /// reached the tool, and the tool reports that it failed. `ok` is `false` in the record.
    ToolError,
    /// A JSON-RPC error, or no answer mcpsum could relay.
    Error,
}

impl CallOutcome {
    /// Every outcome, as `mcpsum audit --outcome` takes them.
    pub const ALL: [CallOutcome; 3] = [Self::Ok, Self::ToolError, Self::Error];

    /// The `outcome` value in the record.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool-error",
            Self::Error => "error",
        }
    }

    /// The outcome a record's `outcome` and `ok` fields give; `None` for neither.
    pub fn of_record(outcome: Option<&str>, ok: Option<bool>) -> Option<Self> {
        match outcome {
            Some(text) => Self::ALL.into_iter().find(|o| o.as_str() == text),
            None => ok.map(|ok| if ok { Self::Ok } else { Self::Error }),
        }
    }

    /// The record's `reason` for an outcome that is not an error of mcpsum's or the server's
    /// own words, so that readers which know only `ok` (older `mcpsum audit`) say why.
    fn reason(self) -> Option<&'static str> {
        match self {
            Self::ToolError => Some("the tool reported an error (its result has `isError: true`)"),
            Self::Ok | Self::Error => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_strings_keep_a_prefix_cut_on_a_char_boundary_and_the_digest() {
        assert_eq!(capped("short", 8), "short");
        // The tail `… (1257 bytes, sha256:<64 hex>)` takes 88 bytes, leaving 168 for the prefix;
        // `é` is two bytes at 167..169, so the cut falls before it.
        let long = format!("{}é{}", "a".repeat(167), "b".repeat(1088));
        let c = capped(&long, FIELD_MAX);
        assert!(c.len() <= FIELD_MAX, "{}", c.len());
        assert!(
            c.starts_with(&format!("{}… (1257 bytes, sha256:", "a".repeat(167))),
            "{c}"
        );
        assert!(c.ends_with(&format!(
            "{})",
            crate::lockfile::Sha256Digest::of_bytes(long.as_bytes())
        )));
        let mut v = json!({"item": long, "reason": "r".repeat(2000), "nested": {"x": ["y".repeat(300)]},
                           "list": (0..100).collect::<Vec<_>>()});
        assert!(needs_cap(&v, None));
        cap(&mut v, None);
        assert!(!needs_cap(&v, None), "{v}");
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .starts_with(&"r".repeat(REASON_MAX - 100))
        );
        assert_eq!(v["list"].as_array().unwrap().len(), ARRAY_MAX);
        assert_eq!(v["list"][ARRAY_MAX - 1], "… (37 more)");
        assert!(v["nested"]["x"][0].as_str().unwrap().len() < 400);
    }

    /// The proxy's fast path writes call records by hand; they must be the records `note` writes.
    #[test]
    fn a_call_record_written_by_hand_equals_the_general_one() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), "s-1", "time\"x").unwrap();
        log.note_call(
            "tools/call",
            "get\u{1b}time",
            CallOutcome::ToolError,
            Duration::from_millis(12),
            5,
        );
        log.note(
            "call",
            json!({"method": "tools/call", "item": "get\u{1b}time", "decision": "allow",
                   "ok": false, "outcome": "tool-error",
                   "reason": "the tool reported an error (its result has `isError: true`)",
                   "duration_ms": 12, "bytes": 5}),
        );
        // Both cap a long item the same way.
        let long = "n".repeat(5000);
        log.note_call(
            "tools/call",
            &long,
            CallOutcome::Ok,
            Duration::from_millis(12),
            5,
        );
        log.note(
            "call",
            json!({"method": "tools/call", "item": long, "decision": "allow",
                   "ok": true, "outcome": "ok", "duration_ms": 12, "bytes": 5}),
        );
        let text = fs_err::read_to_string(dir.path().join(AUDIT_FILE)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[2].len() < 512, "{}", lines[2]);
        let without_ts = |line: &str| line[line.find("\",\"session\"").unwrap()..].to_owned();
        assert_eq!(without_ts(lines[0]), without_ts(lines[1]));
        assert_eq!(without_ts(lines[2]), without_ts(lines[3]));
        assert!(lines[0].starts_with("{\"ts\":\""), "{}", lines[0]);
    }
}
