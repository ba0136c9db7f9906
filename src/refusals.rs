//! What a sandboxed server's egress proxy refused during a start, as the start's error shows
//! it. A leaf below the wire layer: a failed start (`mcp::client::Failure`) carries these, the
//! sandbox bridge (`sandboxing`) collects them, the launch (`launch`) words the hint. It imports
//! nothing from the crate.

use std::sync::Arc;

/// A connection of the server that the egress proxy refused, as a start error shows it: the
/// audit log has the whole record, but a server that fails at start because of it should be
/// told of on the terminal and to the client, not only in `mcpsum audit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRefusal {
    /// `host:port` as the server asked for it (or the request target as sent).
    pub target: String,
    /// The egress reason code (`not_listed`, `non_public`, ...).
    pub reason: String,
    /// The egress proxy's words.
    pub detail: String,
    /// The `network.allow` entry that would let the connection through, when one would.
    pub allow: Option<String>,
}

impl EgressRefusal {
    /// The refusal of `record`; `None` for an allowed connection, or one the proxy closed
    /// because it shut down (the server was ending).
    pub fn of_record(record: &mcpsum_egress::EgressRecord) -> Option<Self> {
        use mcpsum_egress::{Decision, Reason};
        if record.decision != Decision::Deny || record.reason == Reason::Shutdown {
            return None;
        }
        let target = match (&record.host, record.port) {
            (Some(host), Some(port)) if host.contains(':') => format!("[{host}]:{port}"),
            (Some(host), Some(port)) => format!("{host}:{port}"),
            _ => record.target.clone().unwrap_or_else(|| "?".to_owned()),
        };
        let allow = match record.reason {
            Reason::NotListed => Some(target.clone()),
            // A listed name that resolved only to non-public addresses: each address must be
            // listed itself (the egress proxy's rule against DNS rebinding).
            Reason::NonPublic => record.dropped.first().and_then(|d| {
                let ip = d.address.parse::<std::net::IpAddr>().ok()?;
                Some(std::net::SocketAddr::new(ip, record.port?).to_string())
            }),
            _ => None,
        };
        let reason = serde_json::to_value(record.reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "refused".to_owned());
        Some(Self {
            target,
            reason,
            detail: record.detail.clone(),
            allow,
        })
    }

    /// `egress refused: evil.test:443 (not_listed: no allowlist entry ...)`.
    pub fn line(&self) -> String {
        if self.detail.is_empty() {
            format!("egress refused: {} ({})", self.target, self.reason)
        } else {
            format!(
                "egress refused: {} ({}: {})",
                self.target, self.reason, self.detail
            )
        }
    }
}

/// The refusals of one server's egress proxy, the first [`Refusals::KEPT`] of them.
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<std::sync::Mutex<(Vec<EgressRefusal>, usize)>>);

impl Refusals {
    /// Refusals kept for the error; the rest are counted (the audit log has them all).
    pub const KEPT: usize = 5;

    /// Keeps `refusal`, unless it repeats one kept (a server retrying); counts it when
    /// [`Refusals::KEPT`] are kept already.
    pub fn push(&self, refusal: EgressRefusal) {
        if let Ok(mut r) = self.0.lock() {
            if r.0.contains(&refusal) {
                return;
            }
            if r.0.len() < Self::KEPT {
                r.0.push(refusal);
            } else {
                r.1 += 1;
            }
        }
    }

    /// The refusals kept, and how many more there were.
    pub fn taken(&self) -> (Vec<EgressRefusal>, usize) {
        self.0
            .lock()
            .map(|r| (r.0.clone(), r.1))
            .unwrap_or_default()
    }
}
