//! The audit log: one JSON object per line, appended to `audit.jsonl` in the state directory.
//!
//! Several proxies append at once: the file is opened with `O_APPEND` and each record is one
//! `write` of one line, so records never interleave. Records never carry argument values or
//! environment values; a digest of the arguments is enough to correlate.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The audit log's file name in the state directory.
pub const AUDIT_FILE: &str = "audit.jsonl";

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
        use std::os::unix::fs::OpenOptionsExt;
        let path = state_dir.join(AUDIT_FILE);
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            // A link planted in its place is not followed to append to another file.
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| {
                Error::new(format!("cannot open the audit log `{}`", path.display()))
                    .cause(e)
                    .hint("the audit log must be writable before any server starts; check the state directory (`MCPSUM_STATE_DIR`)")
            })?;
        let who = format!(
            ",\"session\":{},\"server\":{}",
            Value::String(session.to_owned()),
            Value::String(server.to_owned())
        );
        Ok(Self {
            file: Mutex::new(Writer {
                file,
                line: Vec::new(),
            }),
            path,
            session: session.to_owned(),
            server: server.to_owned(),
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
        self.append_raw(&Value::Object(obj))
    }

    /// Appends a record that already carries its own `ts`, `session`, `server` and `event`
    /// (the egress proxy's).
    pub fn append_raw(&self, record: &Value) -> std::io::Result<()> {
        self.append_with(|line| {
            let _ = serde_json::to_writer(&mut *line, record);
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
    /// "duration_ms", "bytes"})`, written without building a `Value`.
    pub fn note_call(&self, method: &str, item: &str, ok: bool, took: Duration, bytes: usize) {
        let written = self.append_with(|line| {
            line.extend_from_slice(b"{\"ts\":\"");
            let _ = time::OffsetDateTime::now_utc()
                .format_into(line, &time::format_description::well_known::Rfc3339);
            line.extend_from_slice(b"\"");
            line.extend_from_slice(self.who.as_bytes());
            line.extend_from_slice(b",\"event\":\"call\",\"method\":");
            let _ = serde_json::to_writer(&mut *line, method);
            line.extend_from_slice(b",\"item\":");
            let _ = serde_json::to_writer(&mut *line, item);
            let _ = write!(
                line,
                ",\"decision\":\"allow\",\"ok\":{ok},\"duration_ms\":{},\"bytes\":{bytes}}}",
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The proxy's fast path writes call records by hand; they must be the records `note` writes.
    #[test]
    fn a_call_record_written_by_hand_equals_the_general_one() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), "s-1", "time\"x").unwrap();
        log.note_call(
            "tools/call",
            "get\u{1b}time",
            true,
            Duration::from_millis(12),
            5,
        );
        log.note(
            "call",
            json!({"method": "tools/call", "item": "get\u{1b}time", "decision": "allow",
                   "ok": true, "duration_ms": 12, "bytes": 5}),
        );
        let text = std::fs::read_to_string(dir.path().join(AUDIT_FILE)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let without_ts = |line: &str| line[line.find("\",\"session\"").unwrap()..].to_owned();
        assert_eq!(without_ts(lines[0]), without_ts(lines[1]));
        assert!(lines[0].starts_with("{\"ts\":\""), "{}", lines[0]);
    }
}
