//! A test build of mcpsum whose `sandbox test` checks a deliberately weakened sandbox: the
//! seccomp rules named in `MCPSUM_TEST_WEAKEN_SECCOMP` (comma-separated syscall names) are
//! dropped from the plan before it is built and probed. The report must then fail (exit 1) on
//! exactly those rows. Built by `cargo test` for the integration tests; never installed.
//!
//! `MCPSUM_TEST_SWAP_PATH=FROM=>TO` replaces `FROM` with a link to `TO` (moving `FROM` to
//! `FROM.swapped`) after the plan is made and before the launcher opens its rules: a path
//! swapped between validation and launch, which the launcher must refuse.

fn weaken(plan: &mut mcpsum_sandbox::SandboxPlan) {
    let names = std::env::var("MCPSUM_TEST_WEAKEN_SECCOMP").unwrap_or_default();
    let names: Vec<&str> = names.split(',').filter(|n| !n.is_empty()).collect();
    plan.seccomp
        .eperm
        .retain(|rule| !names.contains(&rule.syscall.as_str()));
    if let Some((from, to)) = std::env::var("MCPSUM_TEST_SWAP_PATH")
        .ok()
        .as_deref()
        .and_then(|v| v.split_once("=>"))
    {
        let moved = format!("{from}.swapped");
        if let Err(e) =
            std::fs::rename(from, &moved).and_then(|()| std::os::unix::fs::symlink(to, from))
        {
            // The test then sees no refusal and fails, with this line in its output.
            eprintln!("weakened-sandbox: cannot swap `{from}` for a link to `{to}`: {e}");
        }
    }
}

fn main() -> std::process::ExitCode {
    mcpsum::commands::sandbox::weaken_for_tests(weaken);
    mcpsum::main()
}
