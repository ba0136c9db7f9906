//! `mcpsum sandbox test --name NAME`: build NAME's sandbox exactly as the proxy would, run the
//! probe (this binary) inside it, and print each promise: check, expected, observed, pass.

use crate::cli::SandboxTestArgs;
use crate::error::{Error, Exit, Result};
use crate::output::{self, paint, sanitize_line, style};
use crate::paths;

/// A host that is never in an allowlist, for the "unlisted is refused" row.
const UNLISTED: &str = "unlisted.mcpsum.invalid:443";

/// A change to the plan that `sandbox test` checks, set only by test builds (the
/// `weakened-sandbox` example) to show that a weakened layer fails the report. The `mcpsum`
/// binary never sets it.
static WEAKEN: std::sync::OnceLock<fn(&mut mcpsum_sandbox::SandboxPlan)> =
    std::sync::OnceLock::new();

/// Makes this process's `sandbox test` check a plan weakened by `f`. For test builds only.
#[doc(hidden)]
pub fn weaken_for_tests(f: fn(&mut mcpsum_sandbox::SandboxPlan)) {
    let _ = WEAKEN.set(f);
}

/// Runs `sandbox test`.
pub async fn run(
    lockfile_flag: Option<&std::path::Path>,
    args: &SandboxTestArgs,
    trust: &crate::signing::Trust,
) -> Result<Exit> {
    let path = paths::require_lockfile(lockfile_flag)?;
    let (lock, _) = crate::signing::load(&path, trust)?;
    let entry = super::entry(&lock, &path, &args.name)?;
    let Some(policy) = entry.sandbox() else {
        return Err(
            Error::new(format!("server `{}` has no `policy.sandbox`", args.name))
                .hint("add one (see `mcpsum lock --sandbox FILE`), then run this again"),
        );
    };
    let spec = crate::sandboxing::SandboxSpec {
        policy: policy.clone(),
        lockfile: path.clone(),
    };
    let env = crate::mcp::process::server_env(&entry.env_passthrough);
    let (req, protected) = crate::sandboxing::request(&args.name, &entry.command, &spec, env)
        .map_err(|e| Error::new(e).hint("fix `policy.sandbox` in the lockfile"))?;

    let egress = if policy.network.allow.is_empty() {
        None
    } else {
        let allowlist = mcpsum_egress::Allowlist::parse(&policy.network.allow)
            .map_err(|_| Error::new("network.allow is invalid"))?;
        let mut checks: Vec<mcpsum_sandbox::EgressCheck> = policy
            .network
            .allow
            .iter()
            .filter(|a| !a.starts_with("*."))
            .map(|a| mcpsum_sandbox::EgressCheck {
                target: a.clone(),
                expected_status: 200,
            })
            .collect();
        checks.push(mcpsum_sandbox::EgressCheck {
            target: UNLISTED.to_owned(),
            expected_status: 403,
        });
        let handle = tokio::runtime::Handle::current();
        let state_dir = protected.state_dir.clone();
        let server = args.name.clone();
        let serve = Box::new(move |listener: std::net::TcpListener| {
            match crate::sandboxing::start_egress(&handle, listener, server, allowlist, &state_dir)
            {
                // The probe's checks end with the test; keep the proxy up until then.
                Ok(tx) => std::mem::forget(tx),
                // The CONNECT rows then fail and say so; the reason is here.
                Err(e) => output::warn(&format!("cannot start the egress proxy: {e}")),
            }
        });
        Some(mcpsum_sandbox::EgressHook { serve, checks })
    };

    let report = tokio::task::spawn_blocking(move || {
        let mut plan = mcpsum_sandbox::plan(&req)?;
        if let Some(weaken) = WEAKEN.get() {
            weaken(&mut plan);
        }
        mcpsum_sandbox::sandbox_test_plan(plan, &protected, egress)
    })
    .await
    .map_err(|e| Error::new("the sandbox test crashed").cause(e))?
    .map_err(|e| {
        Error::new(format!(
            "the sandbox of server `{}` cannot be built",
            args.name
        ))
        .cause(e)
        .hint("the server would not start either (fail closed); apply the fix named above")
    })?;

    if args.json {
        let doc =
            serde_json::json!({"server": args.name, "passed": report.passed(), "report": report});
        output::stdout_json(&doc);
    } else {
        output::stdout(&render(&report));
    }
    Ok(if report.passed() {
        Exit::Ok
    } else {
        Exit::Problem
    })
}

fn render(report: &mcpsum_sandbox::SandboxReport) -> String {
    let mut out = format!(
        "{}\n",
        paint(style::BOLD, format!("sandbox of `{}`", report.server))
    );
    for l in &report.layers {
        out.push_str(&format!("  {:<16} {}\n", l.layer, l.status));
    }
    if output::verbose() {
        out.push_str("  read set:\n");
        for (p, why) in &report.read_set {
            out.push_str(&format!(
                "    {}  {}\n",
                sanitize_line(p),
                paint(style::DIM, sanitize_line(why))
            ));
        }
        out.push_str("  write set:\n");
        for (p, why) in &report.write_set {
            out.push_str(&format!(
                "    {}  {}\n",
                sanitize_line(p),
                paint(style::DIM, sanitize_line(why))
            ));
        }
    }
    let rows: Vec<[String; 3]> = report
        .rows
        .iter()
        .map(|r| {
            [
                output::ellipsize(&sanitize_line(&r.check), 60),
                output::ellipsize(&sanitize_line(&r.expected), 40),
                output::ellipsize(&sanitize_line(&r.observed), 28),
            ]
        })
        .collect();
    let width = |i: usize, min: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(min)
            .max(min)
    };
    let (w0, w1, w2) = (width(0, 5), width(1, 8), width(2, 8));
    out.push_str(&format!(
        "\n{:<w0$}  {:<w1$}  {:<w2$}  pass\n",
        "check", "expected", "observed"
    ));
    for (r, cells) in report.rows.iter().zip(&rows) {
        let pass = if r.pass {
            paint(style::OK, "yes")
        } else {
            paint(style::ERROR, "NO")
        };
        out.push_str(&format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {pass}\n",
            cells[0], cells[1], cells[2]
        ));
    }
    let failed = report.rows.iter().filter(|r| !r.pass).count();
    out.push_str(&if failed == 0 {
        format!(
            "\n{} every expectation holds ({} checks)\n",
            paint(style::OK, "ok"),
            report.rows.len()
        )
    } else {
        format!(
            "\n{} {failed} of {} expectations do not hold\n",
            paint(style::ERROR, "FAILED"),
            report.rows.len()
        )
    });
    out
}
