//! mcpsum: pin what MCP servers show a model in a reviewed lockfile, verify it, and run servers
//! through a proxy that serves only the pinned surface, under an OS sandbox and a taint policy.
//!
//! # Layers
//!
//! Each module imports only its own layer and those below it; `scripts/import-cycles.py` checks
//! this (its `LAYERS` is this list) and that no two files import each other in a cycle. Lowest
//! first:
//!
//! 1. **Base**: [`text`] (sanitising shown text), [`error`], [`output`] (the terminal writer),
//!    [`progress`], [`paths`], [`fsutil`] (the atomic writer), [`lines`] (the bounded line
//!    reader), [`protocol`] (the MCP revisions), [`canonical`] (RFC 8785 JSON), [`refusals`],
//!    [`session`], [`stdio`]. They import only each other (`text` nothing at all); every layer
//!    above uses them.
//! 2. **Lockfile**: [`lockfile`] (read, check, write `mcp.lock`), [`signing`], [`drift`],
//!    [`audit`] (the audit log), [`pin`] (pinned installs). Imports base; used by everything
//!    above.
//! 3. **Wire**: [`mcp`] (framing, the JSON-RPC client, starting a server's process). Imports the
//!    lockfile and base layers; it does not build sandboxes or learn mode (it starts what a
//!    [`mcp::process::Start`] describes), and uses of the sandbox crate only what ends a
//!    server's tree and reads its set-up failures. Used by the policy layer and above.
//! 4. **Policy**: [`sandboxing`] (the bridge to the `mcpsum-sandbox` crate and the egress
//!    proxy), [`learning`] (learn mode), [`taint`], [`launch`] (how a locked entry starts: it
//!    builds the sandboxed, learning or guarded command the wire layer spawns),
//!    [`proxy_start`]. Imports the wire layer and below; used by the proxy and the commands.
//! 5. **Proxy**: [`proxy`] (serving the pinned surface to a client). Imports the policy layer
//!    and below; used by the `proxy` command.
//! 6. **Commands**: [`commands`] (one module per subcommand) and [`cli`] (their arguments).
//!    Import anything below; only this crate root (`run`, `main`) imports them.
#![forbid(unsafe_code)]
// The std calls `clippy.toml` steers to `fs-err` (and the environment setters).
#![deny(clippy::disallowed_methods)]

pub mod audit;
pub mod canonical;
pub mod cli;
pub mod commands;
pub mod drift;
pub mod error;
pub mod fsutil;
pub mod launch;
pub mod learning;
pub mod lines;
pub mod lockfile;
pub mod mcp;
pub mod output;
pub mod paths;
pub mod pin;
pub mod progress;
pub mod protocol;
pub mod proxy;
pub mod proxy_start;
pub mod refusals;
pub mod sandboxing;
pub mod session;
pub mod signing;
pub mod stdio;
pub mod taint;
pub mod text;

pub use error::{Error, Exit, Result};

/// Runs the parsed command line and returns the exit status.
pub async fn run(cli: cli::Cli) -> Result<Exit> {
    let lockfile = cli.lockfile.as_deref();
    let trust = signing::Trust::new(cli.allowed_signers.clone());
    match &cli.command {
        cli::Command::Lock(a) => commands::lock::run(lockfile, a, &trust).await,
        cli::Command::Verify(a) => commands::verify::run(lockfile, a, &trust).await,
        cli::Command::Remove(a) => commands::remove::run(lockfile, a, &trust),
        cli::Command::Diff(a) => json_on_error(a.json, commands::diff::run(lockfile, a)),
        cli::Command::Doctor(a) => commands::doctor::run(lockfile, a, &trust),
        cli::Command::Show(a) => json_on_error(a.json, commands::show::run(lockfile, a, &trust)),
        cli::Command::Sign(a) => commands::sign::run(lockfile, a, &trust),
        cli::Command::Import(a) => commands::import::run(lockfile, a, &trust).await,
        cli::Command::SuggestPolicy(a) => {
            commands::taint::suggest(lockfile, &a.name, a.write, &trust)
        }
        cli::Command::Taint(cli::TaintCommand::List {
            json,
            active,
            server,
        }) => json_on_error(*json, commands::taint::list(*json, *active, server)),
        cli::Command::Taint(cli::TaintCommand::Reset { session, all }) => {
            commands::taint::reset(session.as_deref(), *all)
        }
        cli::Command::Audit(a) => commands::audit::run(a).await,
        cli::Command::Sandbox(cli::SandboxCommand::Test(a)) => {
            json_on_error(a.json, commands::sandbox::run(lockfile, a, &trust).await)
        }
        cli::Command::Sandbox(cli::SandboxCommand::Suggest(a)) => {
            json_on_error(a.json, commands::sandbox::suggest(lockfile, a, &trust))
        }
        cli::Command::Completions(a) => commands::shell::completions(a.shell),
        cli::Command::Man(a) => commands::shell::man(a.out.as_deref()),
        cli::Command::Proxy(a) => commands::proxy::run(lockfile, a, trust).await,
    }
}

/// The whole program: hidden re-executed subcommands first, then argument parsing, the command,
/// and the exit code. The `mcpsum` binary is this function.
pub fn main() -> std::process::ExitCode {
    // The probe of `sandbox test` (run as the sandboxed command) and the guard of a server
    // without a sandbox policy are this binary (hidden subcommands, handled before argument
    // parsing and before any thread exists). The sandbox launcher is not: it is the separate
    // `mcpsum-launch` binary, the only one the AppArmor profile attaches to.
    let mut args = std::env::args_os();
    let _argv0 = args.next();
    match args.next() {
        Some(a) if a == mcpsum_sandbox::PROBE_SUBCOMMAND => {
            mcpsum_sandbox::probe_main(args.collect())
        }
        Some(a) if a == mcpsum_sandbox::GUARD_SUBCOMMAND => {
            mcpsum_sandbox::guard_main(args.collect())
        }
        Some(a) if a == mcpsum_sandbox::LEARN_SUBCOMMAND => {
            mcpsum_sandbox::learn_main(args.collect())
        }
        _ => {}
    }
    // The completion scripts ask `mcpsum [--lockfile PATH] __server-names` for `--name`'s
    // values: not a subcommand, so that no completion or page lists it.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw
        .last()
        .is_some_and(|a| a == commands::shell::SERVER_NAMES)
    {
        let flag = match raw.as_slice() {
            [f, path, _] if f == "--lockfile" => Some(std::path::PathBuf::from(path)),
            _ => None,
        };
        return exit_code(commands::shell::server_names(flag.as_deref()));
    }
    let cli = <cli::Cli as clap::Parser>::parse();
    let color = match cli.color {
        crate::cli::Color::Auto => anstream::ColorChoice::Auto,
        crate::cli::Color::Always => anstream::ColorChoice::Always,
        crate::cli::Color::Never => anstream::ColorChoice::Never,
    };
    crate::output::init(color, cli.quiet, cli.verbose);
    // `show` only reads the lockfile: no runtime, no children to look after.
    if let cli::Command::Show(args) = &cli.command {
        let trust = signing::Trust::new(cli.allowed_signers.clone());
        let result = commands::show::run(cli.lockfile.as_deref(), args, &trust);
        return exit_code(json_on_error(args.json, result));
    }
    run_async(cli)
}

/// A command asked for `--json` that fails before printing its document prints one that says
/// why (`error`, `details`, `hint`, `exitCode`), so that a machine reading stdout gets one
/// document either way; the error also goes to stderr as usual.
fn json_on_error(json: bool, result: Result<Exit>) -> Result<Exit> {
    if json && let Err(e) = &result {
        crate::output::stdout_json(&serde_json::json!({
            "exitCode": e.exit() as i32,
            "error": e.one_line(),
            "details": e.detail_lines(),
            "hint": e.hint_text(),
        }));
    }
    result
}

/// Runs every command but `show` on a runtime. Kept out of line: the future of [`run`] holds
/// every command's state and takes tens of kilobytes of stack, which `show` need not touch.
#[inline(never)]
fn run_async(cli: cli::Cli) -> std::process::ExitCode {
    pin_self_exe();
    // Servers' detached children come back to mcpsum, which ends them before it exits.
    crate::mcp::process::become_subreaper();
    // One thread: mcpsum's work is I/O between pipes, and hand-offs between worker threads
    // cost more than they give (proxy latency per call).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::output::error(&crate::Error::new("cannot start the async runtime").cause(e));
            return std::process::ExitCode::from(2);
        }
    };
    let result = runtime.block_on(crate::run(cli));
    // Do not wait for stray blocking tasks (stdin readers) at exit.
    runtime.shutdown_background();
    crate::mcp::process::kill_adopted_orphans();
    exit_code(result)
}

/// Opens the launcher beside this binary so that every later launch (sandboxed or guarded
/// servers, probes) runs this very file even if it is replaced on disk. A missing launcher makes
/// each launch fail with an error that says where it was looked for. Called before any thread
/// exists, by every command that may launch something (not `show`).
fn pin_self_exe() {
    mcpsum_sandbox::open_launcher();
}

/// The process's exit code for a command's result; an error is printed first.
fn exit_code(result: Result<Exit>) -> std::process::ExitCode {
    match result {
        Ok(exit) => std::process::ExitCode::from(exit as u8),
        Err(e) => {
            crate::output::error(&e);
            std::process::ExitCode::from(e.exit() as u8)
        }
    }
}
