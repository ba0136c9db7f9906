//! Test harness for `mcpsum-sandbox`'s integration tests (not shipped: `mcpsum` dispatches the
//! probe, `mcpsum-launch` is the launcher). The harness is both: it opens itself as the launcher
//! and routes `__sandbox-exec` / `__guard` / `__sandbox-probe` to the crate.
//!
//! Usage: `sandbox-harness test|run <config json>`; `test` prints the `sandbox test` report as
//! JSON, `run` runs `argv` in the sandbox with inherited stdio and exits with its status.

#[cfg(not(target_os = "linux"))]
fn main() {}

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    linux::main()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::OsString;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::os::unix::process::CommandExt;
    use std::path::PathBuf;
    use std::process::ExitCode;

    use mcpsum_sandbox::{
        EXEC_SUBCOMMAND, EgressCheck, EgressHook, GUARD_SUBCOMMAND, LaunchRequest,
        PROBE_SUBCOMMAND, Protected, SandboxPolicy,
    };
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Config {
        read: Vec<String>,
        write: Vec<String>,
        allow: Vec<String>,
        lockfile: PathBuf,
        state_dir: PathBuf,
        home: Option<PathBuf>,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        /// `host:port` targets the fake egress proxy answers 200 to; anything else gets 403.
        #[serde(default)]
        egress_allowed: Vec<String>,
        /// CONNECT checks: target and expected status.
        #[serde(default)]
        egress_checks: Vec<(String, u16)>,
        /// Test-only: variables added to the launcher command after `prepare` (must be refused).
        #[serde(default)]
        extra_env: Vec<(String, String)>,
        /// Test-only weakening: seccomp denylist entries to drop from the plan.
        #[serde(default)]
        weaken_seccomp: Vec<String>,
    }

    pub(crate) fn main() -> ExitCode {
        let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
        let Some(cmd) = args.first().cloned() else {
            eprintln!("usage: sandbox-harness test|run CONFIG");
            return ExitCode::from(2);
        };
        args.remove(0);
        // The harness is its own launcher (mcpsum uses the separate `mcpsum-launch`).
        if cmd == EXEC_SUBCOMMAND {
            mcpsum_sandbox::launcher_binary_main();
        }
        if cmd == GUARD_SUBCOMMAND {
            mcpsum_sandbox::guard_main(args);
        }
        if cmd == PROBE_SUBCOMMAND {
            mcpsum_sandbox::probe_main(args);
        }
        match std::env::current_exe() {
            Ok(me) => mcpsum_sandbox::open_launcher_at(&me),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
        let Some(cfg) = args
            .first()
            .and_then(|a| serde_json::from_str::<Config>(&a.to_string_lossy()).ok())
        else {
            eprintln!("bad config");
            return ExitCode::from(2);
        };
        match run(&cmd.to_string_lossy(), cfg) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        }
    }

    fn run(cmd: &str, cfg: Config) -> Result<ExitCode, String> {
        let protected = Protected {
            lockfile: cfg.lockfile.clone(),
            state_dir: cfg.state_dir.clone(),
            binary: std::env::current_exe().map_err(|e| e.to_string())?,
            home: cfg.home.clone(),
            other_homes: Vec::new(),
        };
        let policy = SandboxPolicy {
            read: cfg.read.clone(),
            write: cfg.write.clone(),
            allow: cfg.allow.clone(),
            tasks: None,
        };
        let validated = mcpsum_sandbox::validate(&policy, &protected).map_err(|errs| {
            errs.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        })?;
        let req = LaunchRequest {
            server: "test".into(),
            policy: validated,
            argv: cfg.argv.clone(),
            env: cfg.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            state_dir: cfg.state_dir.clone(),
        };
        let allowed = cfg.egress_allowed.clone();
        match cmd {
            "test" => {
                let hook = (!cfg.allow.is_empty()).then(|| EgressHook {
                    serve: Box::new(move |l: TcpListener| {
                        std::thread::spawn(move || fake_egress(&l, &allowed));
                    }),
                    checks: cfg
                        .egress_checks
                        .iter()
                        .map(|(t, s)| EgressCheck {
                            target: t.clone(),
                            expected_status: *s,
                        })
                        .collect(),
                });
                let mut plan = mcpsum_sandbox::plan(&req).map_err(|e| e.to_string())?;
                plan.seccomp
                    .eperm
                    .retain(|r| !cfg.weaken_seccomp.contains(&r.syscall));
                let report = mcpsum_sandbox::sandbox_test_plan(plan, &protected, hook)
                    .map_err(|e| e.to_string())?;
                let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
                println!("{json}");
                Ok(if report.passed() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                })
            }
            "run" => {
                let plan = mcpsum_sandbox::plan(&req).map_err(|e| e.to_string())?;
                let mut prepared = mcpsum_sandbox::prepare(plan).map_err(|e| e.to_string())?;
                prepared.command.process_group(0);
                for (k, v) in &cfg.extra_env {
                    prepared.command.env(k, v);
                }
                let mut child = prepared.command.spawn().map_err(|e| e.to_string())?;
                match prepared.receive_listener(mcpsum_sandbox::BRIDGE_TIMEOUT) {
                    Ok(Some(l)) => {
                        std::thread::spawn(move || fake_egress(&l, &allowed));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(e.to_string());
                    }
                }
                let status = child.wait().map_err(|e| e.to_string())?;
                drop(prepared);
                Ok(ExitCode::from(
                    u8::try_from(status.code().unwrap_or(128)).unwrap_or(1),
                ))
            }
            "bench" => {
                // Launch overhead, side by side: a plain spawn of argv vs the same under the
                // sandbox (plan + prepare + launcher + exec + exit), 50 runs each.
                let n = 50u32;
                let t = std::time::Instant::now();
                for _ in 0..n {
                    std::process::Command::new(&cfg.argv[0])
                        .args(&cfg.argv[1..])
                        .env_clear()
                        .status()
                        .map_err(|e| e.to_string())?;
                }
                let plain = t.elapsed() / n;
                let t = std::time::Instant::now();
                for _ in 0..n {
                    let plan = mcpsum_sandbox::plan(&req).map_err(|e| e.to_string())?;
                    let mut prepared = mcpsum_sandbox::prepare(plan).map_err(|e| e.to_string())?;
                    let mut child = prepared.command.spawn().map_err(|e| e.to_string())?;
                    let _l = prepared
                        .receive_listener(mcpsum_sandbox::BRIDGE_TIMEOUT)
                        .map_err(|e| e.to_string())?;
                    child.wait().map_err(|e| e.to_string())?;
                }
                let sandboxed = t.elapsed() / n;
                println!(
                    "plain {plain:?} sandboxed {sandboxed:?} overhead {:?}",
                    sandboxed.saturating_sub(plain)
                );
                Ok(ExitCode::SUCCESS)
            }
            other => Err(format!("unknown mode {other}")),
        }
    }

    /// Stands in for mcpsum's egress proxy: answers `CONNECT` with 200 for listed targets, else 403.
    fn fake_egress(listener: &TcpListener, allowed: &[String]) {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            let mut head = Vec::new();
            let mut buf = [0u8; 256];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&head);
            let target = text.split_whitespace().nth(1).unwrap_or("");
            let reply = if text.starts_with("CONNECT ") && allowed.iter().any(|a| a == target) {
                "HTTP/1.1 200 Connection established\r\n\r\n"
            } else {
                "HTTP/1.1 403 Forbidden\r\n\r\n"
            };
            let _ = s.write_all(reply.as_bytes());
        }
    }
}
