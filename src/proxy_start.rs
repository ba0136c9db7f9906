//! What happens around the proxy's start (`crate::proxy` owns the relay itself, and
//! `commands::proxy` runs both; this module imports neither): a proxy that
//! cannot start (no lockfile, an unknown name, an invalid lockfile, a server that dies at
//! start) answers every request its client sends with a JSON-RPC error that says what is wrong
//! and what to run, and writes a `start failed` audit record with the server's last stderr
//! lines; and the start warns of `envPassthrough` variables that are not set.
//!
//! Without this a client shows only "connection closed", and the error is in a stderr log the
//! person does not know of (clients such as Claude Desktop keep it in a file).

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::audit::AuditLog;
use crate::error::Error;
use crate::mcp::codes;
use crate::mcp::framing::{Frame, LineReader};
use crate::output;

/// The message a client shows for a request the proxy cannot serve because it did not start:
/// what failed, why, and what to run.
pub fn client_message(name: &str, err: &Error) -> String {
    let mut msg = format!(
        "mcpsum: server `{name}` could not be started: {}",
        err.one_line()
    );
    if let Some(hint) = err.hint_text() {
        msg.push_str("; ");
        msg.push_str(hint);
    }
    msg
}

/// The `data` of that error: the same parts as fields, the server's last stderr lines and the
/// connections its sandbox's egress proxy refused during the start.
pub fn error_data(name: &str, err: &Error) -> Value {
    json!({
        "server": name,
        "error": err.one_line(),
        "hint": err.hint_text(),
        "stderr": stderr_lines(err),
        "egress_refused": egress_lines(err),
    })
}

/// Warns (stderr and audit) of each `envPassthrough` name not set in mcpsum's environment:
/// clients such as the MCP Inspector start mcpsum with a reduced environment, and the server
/// then dies without a word or behaves differently than when it was locked.
pub fn warn_unset_env(audit: &AuditLog, name: &str, env_passthrough: &[String]) {
    let unset = crate::mcp::process::unset_names(env_passthrough);
    if unset.is_empty() {
        return;
    }
    let list = unset
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ");
    output::warn(&format!(
        "server `{name}` lists {list} in `envPassthrough`, but {} not set in the environment the client gave mcpsum, so the server does not get {}; set {} in the client's config (its `env` key)",
        if unset.len() == 1 {
            "it is"
        } else {
            "they are"
        },
        if unset.len() == 1 { "it" } else { "them" },
        if unset.len() == 1 { "it" } else { "them" },
    ));
    audit.note("env unset", json!({"variables": unset}));
}

/// The server's last stderr lines, as [`crate::launch::server_error`] puts them in the error.
fn stderr_lines(err: &Error) -> Vec<String> {
    err.detail_lines()
        .iter()
        .filter_map(|l| l.strip_prefix("  | "))
        .map(str::to_owned)
        .collect()
}

/// The egress refusals of the start, as [`crate::launch::server_error`] puts them in the error.
fn egress_lines(err: &Error) -> Vec<String> {
    err.cause_lines()
        .iter()
        .filter(|l| l.starts_with("egress refused"))
        .cloned()
        .collect()
}

/// Appends the `start failed` record, when the audit log can be opened (a missing or
/// unprivate state directory is itself the error then, already shown).
pub fn note_start_failed(name: &str, err: &Error) {
    let Ok(dir) = crate::paths::ensure_state_dir() else {
        return;
    };
    let session = crate::session::current();
    let Ok(audit) = AuditLog::open(&dir, &session.id, name) else {
        return;
    };
    audit.note(
        "start failed",
        json!({
            "error": err.one_line(),
            "hint": err.hint_text(),
            "stderr": stderr_lines(err),
            "egress_refused": egress_lines(err),
            "client_pid": session.client_pid,
        }),
    );
}

/// Answers each request on stdin (alone or in a batch) with the start error, until the client
/// closes stdin or a signal comes. Notifications and responses need no answer.
pub async fn answer_until_eof(name: &str, err: &Error, max: usize) {
    use tokio::signal::unix::{SignalKind, signal};
    let message = client_message(name, err);
    let data = error_data(name, err);
    let answer = |id: &Value| json!({"jsonrpc": "2.0", "id": id, "error": {"code": codes::INTERNAL, "message": message, "data": data}});
    let mut input = LineReader::new(crate::stdio::client_stdin(), max, &[]);
    let mut out = crate::stdio::client_stdout();
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    loop {
        let frame = tokio::select! {
            f = input.next_frame() => f,
            _ = term.recv() => return,
            _ = int.recv() => return,
            _ = hup.recv() => return,
        };
        let line = match frame {
            Ok(Some(Frame::Line(line))) => line,
            Ok(Some(Frame::TooLong(_))) => continue,
            Ok(None) | Err(_) => return,
        };
        let reply = match serde_json::from_slice::<Value>(&line) {
            Ok(Value::Object(o)) => o.get("method").and(o.get("id")).map(answer),
            Ok(Value::Array(items)) => {
                let answers: Vec<Value> = items
                    .iter()
                    .filter_map(|m| m.get("method").and(m.get("id")).map(answer))
                    .collect();
                (!answers.is_empty()).then_some(Value::Array(answers))
            }
            _ => None,
        };
        let Some(reply) = reply else {
            continue;
        };
        let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
        bytes.push(b'\n');
        if out.write_all(&bytes).await.and(out.flush().await).is_err() {
            return;
        }
    }
}
