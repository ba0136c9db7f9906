//! Command-line arguments as the user types them (clap types only).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Pin, verify, proxy and sandbox MCP servers.
#[derive(Debug, Parser)]
#[command(
    name = "mcpsum",
    version,
    about,
    long_about = None,
    max_term_width = 100,
    after_help = "Platforms: Linux. Elsewhere the sandbox does not exist, so a server whose entry has\n`policy.sandbox` refuses to start (with no flag to run it unsandboxed); `mcpsum doctor` says\nwhat this machine offers.\n\nExamples:\n  mcpsum lock --name time -- uvx mcp-server-time==2026.10.19\n  mcpsum show\n  mcpsum verify                    # 0 clean, 1 drift, 2 could not verify\n  mcpsum sandbox test --name time\n\nSee `mcpsum help COMMAND` for the examples of each command."
)]
pub struct Cli {
    /// The lockfile (default: `$MCPSUM_LOCKFILE`, else `mcp.lock` here or in a parent).
    #[arg(long, global = true, value_name = "PATH")]
    pub lockfile: Option<PathBuf>,
    /// The allowed-signers file that makes a signed lockfile mandatory (default:
    /// `$MCPSUM_ALLOWED_SIGNERS`, else `$XDG_CONFIG_HOME/mcpsum/allowed_signers` if it exists).
    #[arg(long, global = true, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
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
        override_usage = "mcpsum lock [OPTIONS] --name <NAME> [-- <COMMAND>...]\n       mcpsum lock [OPTIONS] --all",
        after_help = "A `uvx` or `npx` command's whole dependency closure is pinned too (`artifacts`, with\nhashes), and every start runs the server from a hash-checked install of it. A re-lock keeps\nthose pins where they still satisfy the requirements, as `npm install` or `cargo` do with a\nlockfile; `--upgrade` takes the newest releases.\n\nExamples:\n  mcpsum lock --name time -- uvx mcp-server-time==2026.10.19\n  mcpsum lock --name time                          # re-lock with the recorded command\n  mcpsum lock --name time --upgrade                # re-lock, taking new dependency releases\n  mcpsum lock --all                                # re-lock every server, in parallel\n  mcpsum lock --name time --sandbox sandbox.json   # re-lock it, run under this sandbox policy"
    )]
    Lock(LockArgs),
    /// Remove servers from the lockfile.
    #[command(
        after_help = "Client configs that run a removed server through `mcpsum proxy` stop working:\nput them back with `mcpsum import --undo`, or edit them.\n\nExamples:\n  mcpsum remove --name time\n  mcpsum remove --name time --name fetch"
    )]
    Remove(RemoveArgs),
    /// Show how the lockfile changed against a git revision or another lockfile.
    #[command(
        long_about = "Show how the lockfile changed against a git revision or another lockfile.\n\nEach of OLD and NEW is a lockfile path if such a file exists, else a git revision of the\nlockfile (`git show REV:mcp.lock`). OLD defaults to `HEAD`, NEW to the working lockfile. Changes\nare shown as `verify` shows drift, with the command, environment names and policy besides.",
        after_help = "Exit status: 0 no definitional change, 1 definitional changes, 2 a side could not be read.\n\nExamples:\n  mcpsum diff                      # HEAD against the working mcp.lock\n  mcpsum diff main\n  mcpsum diff old.lock new.lock --json"
    )]
    Diff(DiffArgs),
    /// Check this machine for what mcpsum needs, and say how to fix what is missing.
    #[command(
        after_help = "Exit status: 0 nothing wrong, 1 a problem was found (each with its fix).\n\nExamples:\n  mcpsum doctor\n  mcpsum doctor --json"
    )]
    Doctor(DoctorArgs),
    /// Compare each server's live surface with the lockfile.
    #[command(
        after_help = "Exit status: 0 clean or informational drift only, 1 definitional drift\n(or informational with --strict), 2 could not verify; the same in every --format.\n\nExamples:\n  mcpsum verify\n  mcpsum verify --name time --strict --json\n  mcpsum verify --format github                 # annotations in a GitHub Actions job\n  mcpsum verify --format sarif > mcpsum.sarif   # for code scanning"
    )]
    Verify(VerifyArgs),
    /// Sign the lockfile with an SSH key: write `mcp.lock.sig` beside it.
    #[command(
        long_about = "Sign the lockfile with an SSH key: write `mcp.lock.sig` beside it.\n\nThe signature is an SSH signature (SSHSIG, namespace `mcpsum`) over the lockfile's exact bytes,\nso `ssh-keygen -Y verify -n mcpsum` checks it too. Once an allowed-signers file is in force\n(`--allowed-signers`, `MCPSUM_ALLOWED_SIGNERS`, or `~/.config/mcpsum/allowed_signers`), `verify`,\n`show`, `proxy`, `sandbox test` and `suggest-policy` refuse a lockfile without a valid signature by\na key it lists for namespace `mcpsum`.",
        after_help = "Examples:\n  mcpsum sign --key ~/.ssh/id_ed25519\n  mcpsum sign --key ~/.ssh/id_rsa.pub          # the key in ssh-agent signs\n  mcpsum sign                                 # git's user.signingkey (gpg.format ssh)\n\nssh-keygen checks it too:\n  ssh-keygen -Y verify -n mcpsum -f allowed_signers -I alice@example.com -s mcp.lock.sig < mcp.lock"
    )]
    Sign(SignArgs),
    /// Show what the lockfile pins.
    #[command(after_help = "Examples:\n  mcpsum show\n  mcpsum show --name time --json")]
    Show(ShowArgs),
    /// Run a locked server behind mcpsum: put this in the client's config instead of the server.
    #[command(
        after_help = "Examples:\n  mcpsum proxy --name time --lockfile /abs/path/mcp.lock\n  mcpsum proxy --name time --learn    # record what it uses, for `mcpsum sandbox suggest`\n\nClient config:\n  {\"command\": \"mcpsum\", \"args\": [\"proxy\", \"--name\", \"time\", \"--lockfile\", \"/abs/path/mcp.lock\"]}\n\nThe command, environment and surface come from the lockfile only."
    )]
    Proxy(ProxyArgs),
    /// Print taint labels for a server from its locked annotations, for review (`--write` adds
    /// them to the lockfile).
    #[command(
        after_help = "Examples:\n  mcpsum suggest-policy --name fetch > policy.json   # review, then paste into mcp.lock\n  mcpsum suggest-policy --name fetch --write         # or add the labels to mcp.lock"
    )]
    SuggestPolicy(SuggestArgs),
    /// Lock the MCP servers your clients already run and route them through mcpsum.
    #[command(
        long_about = "Lock the MCP servers your clients already run and route them through mcpsum.\n\nReads the MCP configs of Claude Desktop, Claude Code, Cursor, VS Code, Codex and Windsurf (in the\ncurrent directory and in your home directory), lists every server, locks each stdio server as\n`mcpsum lock` would (several at once), and shows the change that would run it as\n`mcpsum proxy --name NAME --lockfile ABS_PATH`. Only the names of environment variables are read,\nnever their values. Remote (HTTP, SSE) servers are listed and left as they are.\n\nServers of a project's configs (`./.mcp.json`, `./.cursor/mcp.json`, ...) are locked into the\nproject's `mcp.lock` (here or in a parent, else a new `./mcp.lock`). Servers of your user-level\nconfigs (`~/.cursor/mcp.json`, `~/.claude.json`, Claude Desktop's, ...), which every project sees,\nare locked into the user-level lockfile `$XDG_CONFIG_HOME/mcpsum/mcp.lock` (default\n`~/.config/mcpsum/mcp.lock`). `--lockfile` (or `$MCPSUM_LOCKFILE`) puts them all into one file.\n\nWithout `--write` the servers are still locked (the lockfiles are written, as it says before it\nstarts), but no client config is changed. With `--write` each config is rewritten in place: only\nthe `command` and `args` values change; a backup is kept beside the file, and `--undo` restores\nit.",
        after_help = "Examples:\n  mcpsum import                                  # lock the servers, show the config change\n  mcpsum import --from cursor                    # only Cursor's configs\n  mcpsum import --from ./.vscode/mcp.json        # one file\n  mcpsum import --env GITHUB_TOKEN --write       # pass a variable the servers need\n  mcpsum import --undo                           # put the files back as they were"
    )]
    Import(ImportArgs),
    /// Client sessions and their taint.
    #[command(
        subcommand,
        after_help = "Examples:\n  mcpsum taint list\n  mcpsum taint reset --all"
    )]
    Taint(TaintCommand),
    /// Sandbox tools.
    #[command(
        subcommand,
        after_help = "Examples:\n  mcpsum sandbox test --name time\n  mcpsum sandbox suggest --name time"
    )]
    Sandbox(SandboxCommand),
    /// Print a shell completion script on stdout.
    #[command(
        after_help = "Examples:\n  mcpsum completions bash > ~/.local/share/bash-completion/completions/mcpsum\n  mcpsum completions zsh > ~/.zfunc/_mcpsum     # with `fpath+=~/.zfunc` before `compinit`\n  mcpsum completions fish > ~/.config/fish/completions/mcpsum.fish"
    )]
    Completions(CompletionsArgs),
    /// Print the man page, or write one page per command into a directory.
    #[command(
        after_help = "Examples:\n  mcpsum man | man -l -\n  mcpsum man --out /usr/local/share/man/man1"
    )]
    Man(ManArgs),
    /// Show the audit log: calls, refusals, approvals, drift, egress, starts and exits.
    #[command(
        after_help = "The log is `audit.jsonl` in the state directory (`$MCPSUM_STATE_DIR`, else\n`$XDG_STATE_HOME/mcpsum`, else `~/.local/state/mcpsum`). Times are UTC.\n\nExamples:\n  mcpsum audit --since 2h\n  mcpsum audit --server time --follow\n  mcpsum audit --session 4242-123456 --json | jq .event"
    )]
    Audit(AuditArgs),
}

/// `mcpsum sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The key: a private key file (Ed25519, ECDSA, RSA), or a public key file whose private
    /// half is in the running `ssh-agent` (default: git's `user.signingkey`).
    #[arg(long, value_name = "PATH")]
    pub key: Option<PathBuf>,
}

/// `mcpsum completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `mcpsum man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `mcpsum.1` and one page per command (`mcpsum-verify.1`, ...) into this directory
    /// instead of printing `mcpsum.1`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `mcpsum import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Read only this client's configs (claude-desktop, claude-code, cursor, vscode, codex,
    /// windsurf), or only this file.
    #[arg(long, value_name = "CLIENT|PATH")]
    pub from: Option<String>,
    /// Rewrite the client configs too (default: lock the servers and only show the config change).
    #[arg(long)]
    pub write: bool,
    /// Restore the files the last `import --write` rewrote, byte for byte.
    #[arg(long, conflicts_with_all = ["from", "write", "env"])]
    pub undo: bool,
    /// Also pass this variable to every imported server (repeatable). Values are never stored.
    #[arg(long = "env", value_name = "VAR")]
    pub env: Vec<String>,
    /// Seconds to wait for each answer of a server while locking it (the first may include a
    /// download). A server silent on the era probe (`server/discover`) is taken for a legacy
    /// one and asked `initialize` on a fresh start, so one that never answers fails after twice
    /// N seconds; a server that does not answer in time is killed at once.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub timeout_secs: u64,
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
    /// Only the calls that ended so (repeatable): `ok` (a result), `tool-error` (a tool result
    /// with `isError: true`: the tool reports it failed) or `error` (a JSON-RPC error, or no
    /// answer). Older records without `outcome` count by their `ok`.
    #[arg(long, value_name = "OUTCOME", value_parser = ["ok", "tool-error", "error"])]
    pub outcome: Vec<String>,
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
    /// Also add the labels to the server's `policy.taint` in the lockfile (after showing them).
    #[arg(long)]
    pub write: bool,
}

/// `mcpsum remove`.
#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The server to remove (repeatable).
    #[arg(long, required = true)]
    pub name: Vec<String>,
}

/// `mcpsum diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The old side: a lockfile path, or a git revision of the lockfile (default: `HEAD`).
    #[arg(value_name = "OLD")]
    pub old: Option<String>,
    /// The new side: a lockfile path, or a git revision (default: the working lockfile).
    #[arg(value_name = "NEW")]
    pub new: Option<String>,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `mcpsum doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `mcpsum taint ...`.
#[derive(Debug, Subcommand)]
pub enum TaintCommand {
    /// Show each client session: client, servers, how each proxy reached the client, taint and
    /// approvals.
    #[command(
        after_help = "Examples:\n  mcpsum taint list\n  mcpsum taint list --active --server fetch\n  mcpsum taint list --json"
    )]
    List {
        /// Print one JSON document on stdout.
        #[arg(long)]
        json: bool,
        /// Only sessions whose client is still running.
        #[arg(long)]
        active: bool,
        /// Only sessions that used this server (repeatable).
        #[arg(long, value_name = "NAME")]
        server: Vec<String>,
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
        after_help = "Exit status: 0 every expectation holds, 1 one does not, 2 the sandbox cannot be built.\n\nExamples:\n  mcpsum sandbox test --name time\n  mcpsum sandbox test --name time --json"
    )]
    Test(SandboxTestArgs),
    /// Propose a `policy.sandbox` from what `mcpsum proxy --learn` observed, for review.
    #[command(
        after_help = "The proposal is printed; mcp.lock is edited only with `--write`, which shows the change to the\nentry's `policy` as a diff and then merges it in. Paths the runtime base already grants are\nleft out, and so is anything that looks secret (credential files, `~/.ssh`, keyrings, browser\nprofiles), with a warning. Observations add up over learning sessions (`mcpsum proxy --name NAME --learn`) until `--reset`.\n\nExamples:\n  mcpsum sandbox suggest --name time\n  mcpsum sandbox suggest --name time --json > sandbox.json\n  mcpsum sandbox suggest --name time --write\n  mcpsum sandbox suggest --name time --reset"
    )]
    Suggest(SandboxSuggestArgs),
}

/// `mcpsum sandbox suggest`.
#[derive(Debug, Args)]
pub struct SandboxSuggestArgs {
    /// The server whose observations to use.
    #[arg(long)]
    pub name: String,
    /// Print only the `policy.sandbox` object, as JSON.
    #[arg(long, conflicts_with = "reset")]
    pub json: bool,
    /// Also merge the proposal into the server's `policy.sandbox` in the lockfile (after
    /// showing the change as a diff): entries already there stay, new ones join them.
    #[arg(long, conflicts_with = "reset")]
    pub write: bool,
    /// Forget the server's observations instead.
    #[arg(long)]
    pub reset: bool,
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
    /// Seconds to wait for each answer of the server at start (its handshake and each list
    /// request) and on a re-read. A `modern` entry's server silent on `server/discover` is asked
    /// `initialize` on a fresh start, so it fails after twice N seconds; a server that does not answer in
    /// time is killed at once.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub timeout_secs: u64,
    /// Learn mode: run the server without its sandbox while recording what its processes
    /// read, write, execute and create and which hosts they ask for, then propose a policy
    /// with `mcpsum sandbox suggest --name NAME`.
    #[arg(long)]
    pub learn: bool,
}

/// `mcpsum lock`.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// The server's name in the lockfile and in client configs.
    #[arg(
        long,
        required_unless_present = "all",
        default_value = "",
        hide_default_value = true
    )]
    pub name: String,
    /// Re-lock every server in the lockfile with its recorded command, in parallel.
    #[arg(long, conflicts_with_all = ["name", "sandbox", "command", "era"])]
    pub all: bool,
    /// Pass this environment variable to the server (repeatable). Values are never stored.
    #[arg(long = "env", value_name = "VAR")]
    pub env: Vec<String>,
    /// A JSON `policy.sandbox` object: the server runs sandboxed from its very first start.
    #[arg(long, value_name = "FILE")]
    pub sandbox: Option<PathBuf>,
    /// Seconds to wait for each answer of the server (the first may include a download). A new
    /// entry's era detection takes silence on `server/discover` for a legacy server and asks
    /// `initialize` on a fresh start, so a server that never answers fails after twice N
    /// seconds (N for a re-lock, asked in its entry's era only); a server that does not answer
    /// in time is killed at once.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub timeout_secs: u64,
    /// The protocol era to lock the server in. Without it a new entry (or a new command) is
    /// `auto`, and a re-lock keeps the entry's era (and fails if the server no longer speaks it).
    #[arg(long, value_enum, value_name = "ERA")]
    pub era: Option<EraFlag>,
    /// Let this npm package of the closure run its install script when the pinned install is
    /// made (repeatable; recorded in the entry as `installScript`, kept by later re-locks).
    /// Scripts run outside any sandbox; without this a package with one is refused.
    #[arg(long = "allow-install-scripts", value_name = "PKG")]
    pub allow_install_scripts: Vec<String>,
    /// Resolve a `uvx` or `npx` closure afresh, taking the newest releases its requirements
    /// allow. Without it a re-lock keeps each pinned version that still satisfies them, as
    /// `npm install` or `cargo` do with a lockfile, and changes only what must change.
    #[arg(short = 'U', long)]
    pub upgrade: bool,
    /// The server's command and arguments (required for a new entry).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `mcpsum lock --era`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EraFlag {
    /// Detect it: `server/discover` first, `initialize` if that fails (the lockfile format's rule).
    Auto,
    /// Lock through `initialize`, even when the server also answers `server/discover`.
    Legacy,
    /// Lock through `server/discover` (2026-07-28); fail if the server does not answer it.
    Modern,
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
    /// How to report on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text, value_name = "FORMAT")]
    pub format: Format,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Seconds to wait for each answer of a server. A `modern` entry's server silent on
    /// `server/discover` is asked `initialize` on a fresh start (to report an era change), so
    /// it fails after twice N seconds, a `legacy` one after N s; a server that does not answer in time is
    /// killed at once.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub timeout_secs: u64,
}

/// `mcpsum verify --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A readable report with diffs.
    Text,
    /// One JSON document.
    Json,
    /// SARIF 2.1.0, for code scanning (one result per drifted item or failed server).
    Sarif,
    /// GitHub Actions workflow commands: one annotation on `mcp.lock` per result.
    Github,
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

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::Cli;

    /// `mcpsum ...` example lines: the words before a `#` comment, a `>` or a `|`.
    fn example_args(line: &str) -> Option<Vec<String>> {
        let line = line.trim_start();
        if !line.starts_with("mcpsum ") {
            return None;
        }
        let end = [" #", " >", " |"]
            .iter()
            .filter_map(|m| line.find(m))
            .min()
            .unwrap_or(line.len());
        Some(line[..end].split_whitespace().map(str::to_owned).collect())
    }

    fn all_after_help(cmd: &clap::Command, out: &mut Vec<String>) {
        if let Some(h) = cmd.get_after_help() {
            out.push(h.to_string());
        }
        for sub in cmd.get_subcommands() {
            all_after_help(sub, out);
        }
    }

    #[test]
    fn every_example_parses() {
        let mut texts = Vec::new();
        all_after_help(&Cli::command(), &mut texts);
        // The README and the CI guide show commands too; they must agree with the parser.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for doc in ["README.md", "docs/github-actions.md"] {
            // Only what is inside fenced code blocks.
            let text = fs_err::read_to_string(root.join(doc)).unwrap();
            let mut fenced = false;
            let mut code = String::new();
            for line in text.lines() {
                if line.trim_start().starts_with("```") {
                    fenced = !fenced;
                } else if fenced {
                    code.push_str(line);
                    code.push('\n');
                }
            }
            texts.push(code);
        }
        let mut n = 0;
        for text in &texts {
            for line in text.lines() {
                let line = line.trim_start().trim_start_matches("run: ");
                if let Some(args) = example_args(line) {
                    n += 1;
                    if let Err(e) = Cli::try_parse_from(&args) {
                        panic!("`{line}` does not parse:\n{e}");
                    }
                }
            }
        }
        assert!(n > 30, "only {n} examples found");
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
