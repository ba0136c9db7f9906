//! `mcpsum proxy`: the relay (`crate::proxy`), and what its client is told when it cannot start
//! (`crate::proxy_start`).

use std::time::Duration;

use crate::cli::ProxyArgs;
use crate::error::{Error, Exit, Result};
use crate::output;

/// Runs `mcpsum proxy`: the proxy, and what its client is told when it cannot start.
pub async fn run(
    lockfile: Option<&std::path::Path>,
    args: &ProxyArgs,
    trust: crate::signing::Trust,
) -> Result<Exit> {
    let opts = crate::proxy::ProxyOptions {
        name: args.name.clone(),
        max_message: args.max_message_bytes,
        timeout: Duration::from_secs(args.timeout_secs.max(1)),
        learn: args.learn,
        trust,
    };
    let result = match crate::paths::find_lockfile(lockfile) {
        Ok(Some(_)) => crate::proxy::run(lockfile, &opts).await,
        Ok(None) => Err(no_lockfile(&args.name)),
        Err(e) => Err(e),
    };
    let err = match result {
        Ok(exit) => return Ok(exit),
        Err(e) => e,
    };
    // On the terminal (and in the client's stderr log) at once, not when the client leaves.
    output::error(&err);
    crate::proxy_start::note_start_failed(&args.name, &err);
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        crate::proxy_start::answer_until_eof(&args.name, &err, args.max_message_bytes).await;
    }
    Ok(Exit::CannotRun)
}

/// No lockfile where the proxy looked: a client starts it in a folder of its own choosing (often
/// `/` or the home), so the usual fix is `--lockfile` in the client's config.
fn no_lockfile(name: &str) -> Error {
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| "?".to_owned());
    Error::new(format!(
        "no `{}` for server `{name}` in `{cwd}` (the folder the client started mcpsum in) or any parent",
        crate::paths::LOCKFILE_NAME
    ))
    .hint(format!(
        "add `--lockfile /abs/path/mcp.lock` to the proxy's args in the client's config, or lock the server first: `mcpsum lock --name {name} -- COMMAND...`"
    ))
}
