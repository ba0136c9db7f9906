//! mcpsum: pin what MCP servers show a model in a reviewed lockfile, verify it, and run servers
//! through a proxy that serves only the pinned surface, under an OS sandbox and a taint policy.
#![forbid(unsafe_code)]

pub mod audit;
pub mod canonical;
pub mod cli;
pub mod commands;
pub mod drift;
pub mod error;
pub mod lockfile;
pub mod mcp;
pub mod output;
pub mod paths;
pub mod progress;
pub mod proxy;
pub mod sandboxing;
pub mod session;
pub mod taint;

pub use error::{Error, Exit, Result};

/// Runs the parsed command line and returns the exit status.
pub async fn run(cli: cli::Cli) -> Result<Exit> {
    let lockfile = cli.lockfile.as_deref();
    match &cli.command {
        cli::Command::Lock(a) => commands::lock::run(lockfile, a).await,
        cli::Command::Verify(a) => commands::verify::run(lockfile, a).await,
        cli::Command::Show(a) => commands::show::run(lockfile, a),
        cli::Command::SuggestPolicy(a) => commands::taint::suggest(lockfile, &a.name),
        cli::Command::Taint(cli::TaintCommand::List { json }) => commands::taint::list(*json),
        cli::Command::Taint(cli::TaintCommand::Reset { session, all }) => {
            commands::taint::reset(session.as_deref(), *all)
        }
        cli::Command::Audit(a) => commands::audit::run(a).await,
        cli::Command::Sandbox(cli::SandboxCommand::Test(a)) => {
            commands::sandbox::run(lockfile, a).await
        }
        cli::Command::Proxy(a) => {
            let opts = proxy::ProxyOptions {
                name: a.name.clone(),
                max_message: a.max_message_bytes,
                timeout: std::time::Duration::from_secs(a.timeout_secs.max(1)),
            };
            proxy::run(lockfile, &opts).await
        }
    }
}
