//! Command-line arguments as the user types them (clap types only).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Pin, verify, proxy and sandbox MCP servers.
#[derive(Debug, Parser)]
#[command(name = "mcpsum", version, about, long_about = None, max_term_width = 100)]
pub struct Cli {
    /// The lockfile (default: `$MCPSUM_LOCKFILE`, else `mcp.lock` here or in a parent).
    #[arg(long, global = true, value_name = "PATH")]
    pub lockfile: Option<PathBuf>,
    /// When to use colour (`NO_COLOR` is honoured).
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    /// Print only errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Print more detail.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `--color`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Color {
    /// Colour on a terminal.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a server, read its whole surface and pin it in the lockfile.
    #[command(
        after_help = "Examples:\n  mcpsum lock --name time --env PATH --env HOME -- uvx mcp-server-time==2026.10.19\n  mcpsum lock --name time                  # re-lock with the recorded command"
    )]
    Lock(LockArgs),
    /// Compare each server's live surface with the lockfile.
    #[command(
        after_help = "Exit status: 0 clean or informational drift only, 1 definitional drift\n(or informational with --strict), 2 could not verify.\n\nExamples:\n  mcpsum verify\n  mcpsum verify --name time --strict --json"
    )]
    Verify(VerifyArgs),
    /// Show what the lockfile pins.
    #[command(after_help = "Examples:\n  mcpsum show\n  mcpsum show --name time --json")]
    Show(ShowArgs),
    /// Run a locked server behind mcpsum: put this in the client's config instead of the server.
    #[command(
        after_help = "Client config example:\n  {\"command\": \"mcpsum\", \"args\": [\"proxy\", \"--name\", \"time\", \"--lockfile\", \"/abs/path/mcp.lock\"]}\n\nThe command, environment and surface come from the lockfile only."
    )]
    Proxy(ProxyArgs),
    /// Print taint labels for a server from its locked annotations, for review.
    #[command(
        after_help = "Example:\n  mcpsum suggest-policy --name fetch > policy.json   # review, then paste into mcp.lock"
    )]
    SuggestPolicy(SuggestArgs),
    /// Client sessions and their taint.
    #[command(subcommand)]
    Taint(TaintCommand),
    /// Sandbox tools.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Show the audit log: calls, refusals, approvals, drift, egress, starts and exits.
    #[command(
        after_help = "The log is `audit.jsonl` in the state directory (`$MCPSUM_STATE_DIR`, else\n`$XDG_STATE_HOME/mcpsum`, else `~/.local/state/mcpsum`). Times are UTC.\n\nExamples:\n  mcpsum audit --since 2h\n  mcpsum audit --server time --follow\n  mcpsum audit --session 4242-123456 --json | jq .event"
    )]
    Audit(AuditArgs),
}

/// `mcpsum audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only records of this server (repeatable).
    #[arg(long, value_name = "NAME")]
    pub server: Vec<String>,
    /// Only records of this client session, as `mcpsum taint list` shows it (repeatable).
    #[arg(long, value_name = "ID")]
    pub session: Vec<String>,
    /// Only records of the last DURATION: a number and a unit, `90s`, `10m`, `2h`, `3d`, `1w`.
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Print the matching records as JSON lines, as they are in the log.
    #[arg(long)]
    pub json: bool,
    /// Keep printing records as they are appended, until interrupted.
    #[arg(short, long)]
    pub follow: bool,
}

/// `mcpsum suggest-policy`.
#[derive(Debug, Args)]
pub struct SuggestArgs {
    /// The server to label.
    #[arg(long)]
    pub name: String,
}

/// `mcpsum taint ...`.
#[derive(Debug, Subcommand)]
pub enum TaintCommand {
    /// Show each client session: client, servers, taint and approvals.
    List {
        /// Print one JSON document on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Clear the taint of a session (only from a terminal).
    #[command(
        after_help = "Examples:\n  mcpsum taint reset 4242-123456\n  mcpsum taint reset --all"
    )]
    Reset {
        /// The session id from `mcpsum taint list`.
        session: Option<String>,
        /// Every session.
        #[arg(long, conflicts_with = "session")]
        all: bool,
    },
}

/// `mcpsum sandbox ...`.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Build a server's sandbox as the proxy would, run a probe in it and show each promise.
    #[command(
        after_help = "Exit status: 0 every expectation holds, 1 one does not, 2 the sandbox cannot be built.\n\nExample:\n  mcpsum sandbox test --name time"
    )]
    Test(SandboxTestArgs),
}

/// `mcpsum sandbox test`.
#[derive(Debug, Args)]
pub struct SandboxTestArgs {
    /// The server whose sandbox to test.
    #[arg(long)]
    pub name: String,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `mcpsum proxy`. It takes no command: the lockfile's is the only one it runs.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// The server's name in the lockfile.
    #[arg(long)]
    pub name: String,
    /// Largest JSON-RPC message accepted from the client or the server, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "N")]
    pub max_message_bytes: usize,
    /// Bound on the server's start-up handshake and each list request, in seconds.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub timeout_secs: u64,
}

/// `mcpsum lock`.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// The server's name in the lockfile and in client configs.
    #[arg(long)]
    pub name: String,
    /// Pass this environment variable to the server (repeatable). Values are never stored.
    #[arg(long = "env", value_name = "VAR")]
    pub env: Vec<String>,
    /// A JSON `policy.sandbox` object: the server runs sandboxed from its very first start.
    #[arg(long, value_name = "FILE")]
    pub sandbox: Option<PathBuf>,
    /// Bound on each request to the server, in seconds (the first may include a download).
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub timeout_secs: u64,
    /// The server's command and arguments (required for a new entry).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `mcpsum verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Verify only this server (repeatable; default: all).
    #[arg(long)]
    pub name: Vec<String>,
    /// Fail (exit 1) on informational drift too.
    #[arg(long)]
    pub strict: bool,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    /// Bound on each request to a server, in seconds.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub timeout_secs: u64,
}

/// `mcpsum show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Show only this server.
    #[arg(long)]
    pub name: Option<String>,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}
