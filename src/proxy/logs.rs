//! Log levels across the eras: a legacy client sets one level at the server
//! (`logging/setLevel`), a 2026-07-28 client asks for log messages on each request
//! (`_meta` `logLevel`) and gets them only while that request runs. The proxy keeps what it
//! needs to bridge the two here.

use super::{Core, IdMap, Pending};
use crate::mcp::META_LOG_LEVEL;
use serde_json::Value;

/// The log levels of `logging/setLevel` and `logLevel` (RFC 5424's).
pub(super) const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The log levels of the session.
#[derive(Debug, Default)]
pub(super) struct Logs {
    /// The level a legacy client set with `logging/setLevel`, for a 2026-07-28 server (which
    /// takes it on every request).
    pub(super) level: Option<&'static str>,
    /// Server-side ids of a 2026-07-28 client's requests that asked for log messages, each with
    /// the level it asked for (its place in [`LOG_LEVELS`]); some may have been answered since.
    /// That era sends log messages only while such a request runs.
    pub(super) requests: IdMap<usize>,
}

impl Logs {
    /// Whether a log message at `level` is for the client: `legacy_client` takes them at any
    /// time (it set the level at the server); a 2026-07-28 client only while one of its
    /// requests that asked for them (and is in `pending`) runs.
    fn wanted(
        &mut self,
        level: Option<&str>,
        legacy_client: bool,
        pending: &IdMap<Pending>,
    ) -> bool {
        if legacy_client {
            return true;
        }
        self.requests.retain(|sid, _| pending.contains_key(sid));
        // A level mcpsum does not know passes if any request asked for messages.
        let rank = log_rank(level).unwrap_or(LOG_LEVELS.len());
        self.requests.values().any(|asked| *asked <= rank)
    }
}

impl Core {
    /// Whether a server's `notifications/message` is for the client (see [`Logs::wanted`]).
    pub(super) fn client_wants_logs(&mut self, level: Option<&str>) -> bool {
        let legacy_client = self.client_version.is_some();
        self.logs.wanted(level, legacy_client, &self.pending)
    }
}

/// The level from which a 2026-07-28 request's `_meta` asks for log messages while it runs
/// (its place in [`LOG_LEVELS`]; an unknown level asks for all of them).
pub(super) fn asks_logs(meta: Option<&Value>) -> Option<usize> {
    let level = meta?.get(META_LOG_LEVEL)?;
    Some(log_rank(level.as_str()).unwrap_or(0))
}

/// A level's place in [`LOG_LEVELS`], from `debug` (0) up.
pub(super) fn log_rank(level: Option<&str>) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| Some(*l) == level)
}
