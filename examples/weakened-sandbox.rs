//! A test build of mcpsum whose `sandbox test` checks a deliberately weakened sandbox: the
//! seccomp rules named in `MCPSUM_TEST_WEAKEN_SECCOMP` (comma-separated syscall names) are
//! dropped from the plan before it is built and probed. The report must then fail (exit 1) on
//! exactly those rows. Built by `cargo test` for the integration tests; never installed.

fn weaken(plan: &mut mcpsum_sandbox::SandboxPlan) {
    let names = std::env::var("MCPSUM_TEST_WEAKEN_SECCOMP").unwrap_or_default();
    let names: Vec<&str> = names.split(',').filter(|n| !n.is_empty()).collect();
    plan.seccomp
        .eperm
        .retain(|rule| !names.contains(&rule.syscall.as_str()));
}

fn main() -> std::process::ExitCode {
    mcpsum::commands::sandbox::weaken_for_tests(weaken);
    mcpsum::main()
}
