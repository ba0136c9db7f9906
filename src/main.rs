//! The `mcpsum` binary: parse arguments, run, map the outcome to an exit code.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = mcpsum::cli::Cli::parse();
    let color = match cli.color {
        mcpsum::cli::Color::Auto => anstream::ColorChoice::Auto,
        mcpsum::cli::Color::Always => anstream::ColorChoice::Always,
        mcpsum::cli::Color::Never => anstream::ColorChoice::Never,
    };
    mcpsum::output::init(color, cli.quiet, cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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
    match result {
        Ok(exit) => std::process::ExitCode::from(exit as u8),
        Err(e) => {
            mcpsum::output::error(&e);
            std::process::ExitCode::from(e.exit() as u8)
        }
    }
}
