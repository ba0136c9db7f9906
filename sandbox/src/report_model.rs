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
    /// For a refused file access (read, write, truncate, a metadata change, a pathname socket):
    /// whether the sandbox is what refused it, from the same access made outside the sandbox by
    /// the same user. Absent for other rows, for accesses that succeeded, and for `${TMP}` paths
    /// (which exist only inside).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_by: Option<RefusedBy>,
    /// What that same access did outside the sandbox (`allowed`, `refused (EACCES)`), when
    /// `refused_by` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside: Option<String>,
}

/// Who refused a file access the probe saw refused inside the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusedBy {
    /// The sandbox: the same access outside it, by the same user, succeeds.
    Sandbox,
    /// Not the sandbox alone: the same access outside it is refused too (file permissions, a
    /// missing path, a read-only mount), so the row shows nothing about the sandbox.
    OutsideToo,
}

impl ReportRow {
    /// `observed`, saying for a refused file access whether the sandbox is what refused it:
    /// `refused by the sandbox (EACCES)`, or `refused (EACCES; permissions refuse it too)`.
    pub fn observed_text(&self) -> String {
        match (self.refused_by, self.outside.as_deref()) {
            (Some(RefusedBy::Sandbox), _) => match self.observed.strip_prefix("refused ") {
                Some(rest) => format!("refused by the sandbox {rest}"),
                None => self.observed.clone(),
            },
            (Some(RefusedBy::OutsideToo), Some(outside)) => {
                let errno = outside
                    .strip_prefix("refused (")
                    .and_then(|e| e.strip_suffix(')'))
                    .unwrap_or(outside);
                let why = match errno {
                    "EACCES" | "EPERM" => "permissions refuse it too".to_owned(),
                    "EROFS" => "read-only outside too".to_owned(),
                    "ENOENT" | "ENOTDIR" => "missing outside too".to_owned(),
                    other => format!("outside too: {other}"),
                };
                match self.observed.strip_suffix(')') {
                    Some(head) => format!("{head}; {why})"),
                    None => format!("{} ({why})", self.observed),
                }
            }
            _ => self.observed.clone(),
        }
    }
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
            self.rows
                .iter()
                .map(|r| r.observed_text().chars().count())
                .chain(["observed".len()])
                .max()
                .unwrap_or(0),
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
                r.observed_text(),
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
                    refused_by: None,
                    outside: None,
                },
                ReportRow {
                    check: "read home /home/u".into(),
                    expected: "refused".into(),
                    observed: "allowed".into(),
                    pass: false,
                    refused_by: None,
                    outside: None,
                },
                ReportRow {
                    check: "read lockfile /p/mcp.lock".into(),
                    expected: "refused".into(),
                    observed: "refused (EACCES)".into(),
                    pass: true,
                    refused_by: Some(RefusedBy::Sandbox),
                    outside: Some("allowed".into()),
                },
                ReportRow {
                    check: "read home /nonexistent".into(),
                    expected: "refused".into(),
                    observed: "refused (EACCES)".into(),
                    pass: true,
                    refused_by: Some(RefusedBy::OutsideToo),
                    outside: Some("refused (ENOENT)".into()),
                },
                ReportRow {
                    check: "write elsewhere /srv".into(),
                    expected: "refused".into(),
                    observed: "refused (EROFS)".into(),
                    pass: true,
                    refused_by: Some(RefusedBy::OutsideToo),
                    outside: Some("refused (EACCES)".into()),
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
check                      expected         observed                                    pass
ptrace                     refused (EPERM)  refused (EPERM)                             ok
read home /home/u          refused          allowed                                     FAIL
read lockfile /p/mcp.lock  refused          refused by the sandbox (EACCES)             ok
read home /nonexistent     refused          refused (EACCES; missing outside too)       ok
write elsewhere /srv       refused          refused (EROFS; permissions refuse it too)  ok
"
        );
    }
}
