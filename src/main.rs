//! The `mcpsum` binary: parse arguments, run, map the outcome to an exit code.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() -> std::process::ExitCode {
    // The sandbox launcher and its probe are this same binary, re-executed (hidden subcommands,
    // handled before argument parsing and before any thread exists).
    // Later launches re-execute this very file even if it is replaced on disk; on failure they
    // fall back to `/proc/self/exe`.
    let _ = mcpsum_sandbox::open_self_exe();
    let mut args = std::env::args_os();
    let _argv0 = args.next();
    match args.next() {
        Some(a) if a == mcpsum_sandbox::EXEC_SUBCOMMAND => {
            mcpsum_sandbox::launcher_main(args.collect())
        }
        Some(a) if a == mcpsum_sandbox::PROBE_SUBCOMMAND => {
            mcpsum_sandbox::probe_main(args.collect())
        }
        Some(a) if a == mcpsum_sandbox::GUARD_SUBCOMMAND => {
            mcpsum_sandbox::guard_main(args.collect())
        }
        _ => {}
    }
    let cli = mcpsum::cli::Cli::parse();
    // Servers' detached children come back to mcpsum, which ends them before it exits.
    mcpsum::mcp::process::become_subreaper();
    let color = match cli.color {
        mcpsum::cli::Color::Auto => anstream::ColorChoice::Auto,
        mcpsum::cli::Color::Always => anstream::ColorChoice::Always,
        mcpsum::cli::Color::Never => anstream::ColorChoice::Never,
    };
    mcpsum::output::init(color, cli.quiet, cli.verbose);
    // One thread: mcpsum's work is I/O between pipes, and hand-offs between worker threads
    // cost more than they give (proxy latency per call).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            mcpsum::output::error(&mcpsum::Error::new("cannot start the async runtime").cause(e));
            return std::process::ExitCode::from(2);
        }
    };
    let result = runtime.block_on(mcpsum::run(cli));
    // Do not wait for stray blocking tasks (stdin readers) at exit.
    runtime.shutdown_background();
    mcpsum::mcp::process::kill_adopted_orphans();
    match result {
        Ok(exit) => std::process::ExitCode::from(exit as u8),
        Err(e) => {
            mcpsum::output::error(&e);
            std::process::ExitCode::from(e.exit() as u8)
        }
    }
}
