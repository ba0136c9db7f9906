//! The audit record of one egress connection (design 6.4; SPEC §5 `"event": "egress"`). The proxy
//! fills it in as the connection progresses and hands it to the audit sink exactly once.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::class::AddressClass;

/// One JSON line per connection. Values of environment variables never appear here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EgressRecord {
    /// When the connection was accepted (RFC 3339, UTC, milliseconds).
    pub ts: String,
    /// Always `"egress"`.
    pub event: &'static str,
    /// The client session.
    pub session: String,
    /// The server whose namespace the connection came from.
    pub server: String,
    /// Connection counter, from 1, per [`crate::serve`] call.
    pub conn: u64,
    /// Source port of the client inside the server's namespace.
    pub peer: u16,
    /// The request target as sent (at most 300 bytes, lossy), or null if none was read.
    pub target: Option<String>,
    /// The normalised host, when the target parsed.
    pub host: Option<String>,
    /// The port, when the target parsed.
    pub port: Option<u16>,
    /// The allowlist entry that matched, or null.
    pub rule: Option<String>,
    /// Addresses the name resolved to (empty for IP targets and refusals before lookup).
    pub resolved: Vec<String>,
    /// Resolved addresses that were dropped, with their class: before connecting, or (class
    /// `host_local`) once a connection showed the address is this host's own; that connection
    /// is closed before any byte is sent on it.
    pub dropped: Vec<Dropped>,
    /// The pinned upstream `address:port`, or null.
    pub connected: Option<String>,
    /// The ClientHello's SNI, when a hello was read and had one.
    pub sni: Option<String>,
    /// The ALPN protocols the ClientHello offered, as graphic ASCII with any other byte written
    /// `\xNN` (see [`crate::ClientHelloInfo::alpn`]).
    pub alpn: Vec<String>,
    /// `allow` when a tunnel was relayed, else `deny`.
    pub decision: Decision,
    /// Why, as a stable code.
    pub reason: Reason,
    /// Why, in words.
    pub detail: String,
    /// HTTP status sent to the client (200 for tunnels), or null when none was sent.
    pub status: Option<u16>,
    /// Bytes relayed from the client to the upstream (incl. the ClientHello).
    pub bytes_up: u64,
    /// Bytes relayed from the upstream to the client.
    pub bytes_down: u64,
    /// From accept to close, in milliseconds.
    pub duration_ms: u64,
}

/// A resolved address that was not used, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dropped {
    /// The address.
    pub address: String,
    /// Its class (never `public`).
    pub class: AddressClass,
}

/// The outcome of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// A tunnel was established and relayed.
    Allow,
    /// The connection was refused or closed before relaying.
    Deny,
}

/// Stable reason codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// The tunnel was relayed (however it ended; see `detail`).
    Ok,
    /// No allowlist entry admits the target (403, no lookup done).
    NotListed,
    /// The name resolved only to non-public, unlisted addresses (403), counting this host's own
    /// addresses (class `host_local`) as non-public.
    NonPublic,
    /// A method other than `CONNECT` (405).
    Method,
    /// A malformed request, target, oversized head, or bytes sent before our reply (400).
    Malformed,
    /// The tunnel did not start with a valid TLS ClientHello.
    NotTls,
    /// The ClientHello's SNI does not name the `CONNECT` host.
    SniMismatch,
    /// The ClientHello uses Encrypted Client Hello: the host it really asks for is hidden
    /// behind its (outer) SNI, which may name an allowed one.
    Ech,
    /// The name could not be resolved (502).
    DnsError,
    /// No kept address accepted a connection (502).
    ConnectError,
    /// A step ran out of time (head 408, lookup 504, ClientHello: closed).
    Timeout,
    /// The proxy shut down (server exit or audit failure) while the connection was open.
    Shutdown,
}

impl EgressRecord {
    /// A record for a connection just accepted; the proxy fills in the rest.
    pub fn new(server: &str, session: &str, conn: u64, peer: u16) -> EgressRecord {
        EgressRecord {
            ts: rfc3339_now(),
            event: "egress",
            session: session.to_owned(),
            server: server.to_owned(),
            conn,
            peer,
            target: None,
            host: None,
            port: None,
            rule: None,
            resolved: Vec::new(),
            dropped: Vec::new(),
            connected: None,
            sni: None,
            alpn: Vec::new(),
            decision: Decision::Deny,
            reason: Reason::Malformed,
            detail: String::new(),
            status: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
        }
    }

    /// The record as one JSON line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        // Serialising plain strings, numbers and enums cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for now, without a date crate.
fn rfc3339_now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs(), d.subsec_millis())
}

fn rfc3339(secs: u64, millis: u32) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Howard Hinnant's `civil_from_days`, for days since 1970-01-01 (non-negative).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_796_212_800, 999), "2026-12-02T12:00:00.999Z");
        assert_eq!(rfc3339(4_107_542_399, 0), "2100-02-28T23:59:59.000Z");
    }

    #[test]
    fn serialises_event_and_codes() {
        let mut r = EgressRecord::new("gh", "s1", 1, 40000);
        r.ts = "T".into();
        r.reason = Reason::SniMismatch;
        r.dropped.push(Dropped {
            address: "127.0.0.1".into(),
            class: AddressClass::Loopback,
        });
        let v: serde_json::Value = serde_json::from_str(&r.to_json_line()).unwrap();
        assert_eq!(v["event"], "egress");
        assert_eq!(v["decision"], "deny");
        assert_eq!(v["reason"], "sni_mismatch");
        assert_eq!(v["dropped"][0]["class"], "loopback");
        r.dropped[0].class = AddressClass::HostLocal;
        let v: serde_json::Value = serde_json::from_str(&r.to_json_line()).unwrap();
        assert_eq!(v["dropped"][0]["class"], AddressClass::HostLocal.as_str());
        assert_eq!(v["dropped"][0]["class"], "host_local");
        assert_eq!(v["target"], serde_json::Value::Null);
    }
}
