//! The rows `mcpsum sandbox test` prints, and the egress hook. Plain data, on every OS.

use std::net::TcpListener;

use serde::Serialize;

/// One `CONNECT` the probe makes through the egress proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressCheck {
    /// `host:port` as the server would send it.
    pub target: String,
    /// The HTTP status expected from mcpsum's proxy: 200 listed, 403 unlisted.
    pub expected_status: u16,
}

/// Lets mcpsum run its egress proxy for `sandbox test` in allow mode.
pub struct EgressHook {
    /// Called with the bridged listener (in the server's namespace, blocking mode) once the
    /// launcher reported it, before the probe makes its `CONNECT`s. Start serving and return.
    pub serve: Box<dyn FnOnce(TcpListener) + Send>,
    /// The `CONNECT` rows to add.
    pub checks: Vec<EgressCheck>,
}

impl std::fmt::Debug for EgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressHook")
            .field("checks", &self.checks)
            .finish_non_exhaustive()
    }
}

/// One row of the table: check, expected, observed, pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReportRow {
    /// What is checked.
    pub check: String,
    /// What the policy promises.
    pub expected: String,
    /// What the probe saw.
    pub observed: String,
    /// Whether they agree.
    pub pass: bool,
}

/// Which layer applied how (printed above the table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerRow {
    /// Layer name.
    pub layer: String,
    /// What was applied, or the compensation in place.
    pub status: String,
}

/// The result of [`sandbox_test`](crate::sandbox_test).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SandboxReport {
    /// Server name.
    pub server: String,
    /// Layers and compensations.
    pub layers: Vec<LayerRow>,
    /// The read set: path and why it is there.
    pub read_set: Vec<(String, String)>,
    /// The write set: path and why it is there.
    pub write_set: Vec<(String, String)>,
    /// The checks.
    pub rows: Vec<ReportRow>,
}

impl SandboxReport {
    /// True when every expectation held (exit 0), else exit 1.
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.pass)
    }
}

/// A plain-text rendering (no colour): layers, read and write sets, then the table
/// `check | expected | observed | pass`.
impl std::fmt::Display for SandboxReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "sandbox of `{}`", self.server)?;
        for l in &self.layers {
            writeln!(f, "  {}: {}", l.layer, l.status)?;
        }
        writeln!(f, "read set:")?;
        for (p, why) in &self.read_set {
            writeln!(f, "  {p}  ({why})")?;
        }
        writeln!(f, "write set:")?;
        for (p, why) in &self.write_set {
            writeln!(f, "  {p}  ({why})")?;
        }
        let width = |get: fn(&ReportRow) -> &str, title: &str| {
            self.rows
                .iter()
                .map(|r| get(r).chars().count())
                .chain([title.len()])
                .max()
                .unwrap_or(0)
        };
        let (wc, we, wo) = (
            width(|r| &r.check, "check"),
            width(|r| &r.expected, "expected"),
            width(|r| &r.observed, "observed"),
        );
        writeln!(
            f,
            "{:wc$}  {:we$}  {:wo$}  pass",
            "check", "expected", "observed"
        )?;
        for r in &self.rows {
            writeln!(
                f,
                "{:wc$}  {:we$}  {:wo$}  {}",
                r.check,
                r.expected,
                r.observed,
                if r.pass { "ok" } else { "FAIL" }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_an_aligned_table() {
        let r = SandboxReport {
            server: "time".into(),
            layers: vec![LayerRow {
                layer: "landlock".into(),
                status: "ABI 7 (required >= 1)".into(),
            }],
            read_set: vec![("/usr".into(), "runtime base".into())],
            write_set: vec![("${TMP}".into(), "private tmp".into())],
            rows: vec![
                ReportRow {
                    check: "ptrace".into(),
                    expected: "refused (EPERM)".into(),
                    observed: "refused (EPERM)".into(),
                    pass: true,
                },
                ReportRow {
                    check: "read home /home/u".into(),
                    expected: "refused".into(),
                    observed: "allowed".into(),
                    pass: false,
                },
            ],
        };
        assert!(!r.passed());
        assert_eq!(
            r.to_string(),
            "\
sandbox of `time`
  landlock: ABI 7 (required >= 1)
read set:
  /usr  (runtime base)
write set:
  ${TMP}  (private tmp)
check              expected         observed         pass
ptrace             refused (EPERM)  refused (EPERM)  ok
read home /home/u  refused          allowed          FAIL
"
        );
    }
}
