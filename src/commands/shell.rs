//! `mcpsum completions` and `mcpsum man`: shell completion scripts and man pages, generated from
//! the same clap definitions (`cli.rs`) as `--help`, so the three cannot disagree.

use std::path::Path;

use clap::CommandFactory;
use roff::{Roff, bold, roman};

use crate::cli::Cli;
use crate::error::{Error, Exit, Result};
use crate::output;

/// Prints the completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<Exit> {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "mcpsum", &mut script);
    let script = String::from_utf8_lossy(&script);
    output::stdout(&with_server_names(shell, &script));
    Ok(Exit::Ok)
}

/// The argument that asks for [`server_names`] (see `crate::main`).
pub const SERVER_NAMES: &str = "__server-names";

/// `mcpsum __server-names`: the names in the lockfile, one a line; nothing (and exit 0) when
/// there is no lockfile or it does not load, since a completion must never print an error.
pub fn server_names(lockfile_flag: Option<&Path>) -> Result<Exit> {
    let Ok(Some(path)) = crate::paths::find_lockfile(lockfile_flag) else {
        return Ok(Exit::Ok);
    };
    let Ok(lock) = crate::lockfile::load_summary(&path) else {
        return Ok(Exit::Ok);
    };
    let mut out = String::new();
    for name in lock.servers.keys() {
        out.push_str(name);
        out.push('\n');
    }
    output::stdout(&out);
    Ok(Exit::Ok)
}

/// The generated script, with `--name` (and `audit --server`) completing the lockfile's server
/// names through `mcpsum __server-names`, with the `--lockfile` the line gives.
fn with_server_names(shell: clap_complete::Shell, script: &str) -> String {
    use clap_complete::Shell;
    match shell {
        Shell::Bash => format!("{script}{BASH_NAMES}"),
        Shell::Fish => format!("{script}{FISH_NAMES}"),
        Shell::Zsh => {
            let script = script.replace(":NAME:_default'", ":NAME:_mcpsum_server_names'");
            // After the `#compdef` line, which must stay the first for autoloading.
            match script.split_once('\n') {
                Some((first, rest)) => format!("{first}\n{ZSH_NAMES}{rest}"),
                None => script,
            }
        }
        _ => script.to_owned(),
    }
}

const BASH_NAMES: &str = r#"
_mcpsum_server_names() {
    local i lockfile=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ "${COMP_WORDS[i]}" == "--lockfile" ]]; then
            lockfile=(--lockfile "${COMP_WORDS[i + 1]}")
        fi
    done
    "${COMP_WORDS[0]}" "${lockfile[@]}" __server-names 2>/dev/null
}
_mcpsum_with_names() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD - 1]}"
    if [[ "$prev" == "--name" || "$prev" == "--server" ]]; then
        COMPREPLY=($(compgen -W "$(_mcpsum_server_names)" -- "$cur"))
        return 0
    fi
    _mcpsum "$@"
}
if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _mcpsum_with_names -o nosort -o bashdefault -o default mcpsum
else
    complete -F _mcpsum_with_names -o bashdefault -o default mcpsum
fi
"#;

const FISH_NAMES: &str = r#"
function __mcpsum_server_names
    set -l words (commandline -opc)
    set -l lockfile
    for i in (seq (count $words))
        if test "$words[$i]" = --lockfile
            set lockfile --lockfile $words[(math $i + 1)]
        end
    end
    $words[1] $lockfile __server-names 2>/dev/null
end
complete -c mcpsum -l name -f -a '(__mcpsum_server_names)'
complete -c mcpsum -n '__fish_seen_subcommand_from audit' -l server -f -a '(__mcpsum_server_names)'
"#;

const ZSH_NAMES: &str = r#"_mcpsum_server_names() {
    local -a names lockfile
    local i
    for ((i = 1; i < ${#words}; i++)); do
        [[ "${words[i]}" == "--lockfile" ]] && lockfile=(--lockfile "${words[i+1]}")
    done
    names=(${(f)"$(${words[1]} $lockfile __server-names 2>/dev/null)"})
    _describe 'server' names
}
"#;

/// Prints `mcpsum.1` on stdout, or writes it and one page per command into `out`.
pub fn man(out: Option<&Path>) -> Result<Exit> {
    // clap's `help` subcommand gets no page: `man mcpsum-verify` is the help.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Building gives every subcommand its full name (`mcpsum-taint-list`) and usage line.
    cmd.build();
    let Some(dir) = out else {
        output::stdout(&page(&cmd));
        return Ok(Exit::Ok);
    };
    fs_err::create_dir_all(dir).map_err(|e| {
        Error::new(format!("cannot create `{}`", dir.display()))
            .cause(e)
            .hint("pass a directory you can write to with `--out DIR`")
    })?;
    let mut written = Vec::new();
    write_pages(&cmd, dir, &mut written)?;
    for path in written {
        output::info(&format!("wrote `{}`", path.display()));
    }
    Ok(Exit::Ok)
}

/// The page for `cmd` and, recursively, for each visible subcommand.
fn write_pages(
    cmd: &clap::Command,
    dir: &Path,
    written: &mut Vec<std::path::PathBuf>,
) -> Result<()> {
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let path = dir.join(format!("{name}.1"));
    fs_err::write(&path, page(cmd)).map_err(|e| {
        Error::new(format!("cannot write `{}`", path.display()))
            .cause(e)
            .hint("pass a directory you can write to with `--out DIR`")
    })?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

/// One man page: clap_mangen's sections, then the `after_help` text as proper sections.
///
/// clap_mangen would put `after_help` into one filled paragraph, which runs example command
/// lines together; here each paragraph whose first line is a heading (`Examples:`) becomes a
/// section of its own, its lines kept as they are.
fn page(cmd: &clap::Command) -> String {
    let after = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(ToString::to_string);
    let bare = cmd
        .clone()
        .after_help(None::<&str>)
        .after_long_help(None::<&str>);
    let mut out = Vec::new();
    // Rendering into a Vec cannot fail.
    let _ = clap_mangen::Man::new(bare).render(&mut out);
    if let Some(text) = after {
        let mut roff = Roff::new();
        render_after_help(&mut roff, &text);
        let _ = roff.to_writer(&mut out);
    }
    if cmd.get_name() == "mcpsum" {
        let mut roff = Roff::new();
        root_sections(&mut roff);
        let _ = roff.to_writer(&mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What `mcpsum(1)` says beyond `--help`: the exit status of every command, the files and
/// variables mcpsum reads, and the policy format a person writes into the lockfile.
fn root_sections(roff: &mut Roff) {
    let section = |roff: &mut Roff, title: &str, items: &[(&str, &str)]| {
        roff.control("SH", [title]);
        for (term, text) in items {
            roff.control("TP", []);
            roff.text([bold(*term)]);
            roff.text([roman(*text)]);
        }
    };
    section(
        roff,
        "EXIT STATUS",
        &[
            (
                "0",
                "Success. `verify` and `diff` found no definitional drift (informational drift is reported only); `doctor` found no problem.",
            ),
            (
                "1",
                "A check ran and said no: definitional drift (informational drift too with `--strict`), a definitional change in `diff`, a failed `sandbox test` expectation, a problem found by `doctor`.",
            ),
            (
                "2",
                "mcpsum could not do its job: bad usage, an unreadable or invalid file (a digest mismatch, an unknown key, a refused policy), a server that failed to start, a sandbox this system cannot build.",
            ),
        ],
    );
    section(
        roff,
        "FILES",
        &[
            (
                "mcp.lock",
                "The lockfile: `--lockfile`, else `$MCPSUM_LOCKFILE`, else `mcp.lock` in the current directory or its nearest parent. Written only by `lock`, `remove`, `import` and `suggest-policy --write`, atomically, under an advisory lock on its directory.",
            ),
            (
                "$STATE/audit.jsonl",
                "The audit log: calls, refusals, approvals, drift, egress, starts, failed starts and exits, one JSON record per line (`mcpsum audit`).",
            ),
            (
                "$STATE/taint/",
                "The taint state of each client session (`mcpsum taint list`).",
            ),
            (
                "$STATE",
                "The state directory: `$MCPSUM_STATE_DIR`, else `$XDG_STATE_HOME/mcpsum`, else `~/.local/state/mcpsum`. It must belong to the user and not be writable by others (`mcpsum doctor` checks it).",
            ),
        ],
    );
    section(
        roff,
        "ENVIRONMENT",
        &[
            (
                "MCPSUM_LOCKFILE",
                "The lockfile when `--lockfile` is not given.",
            ),
            ("MCPSUM_STATE_DIR", "The state directory."),
            (
                "XDG_STATE_HOME, HOME",
                "Where the state directory is when `MCPSUM_STATE_DIR` is not set; `HOME` also locates the client configs `import` and `doctor` read.",
            ),
            (
                "XDG_CONFIG_HOME",
                "Where `import` and `doctor` look for Claude Desktop's config on Linux.",
            ),
            (
                "NO_COLOR",
                "No colour, whatever `--color auto` would choose.",
            ),
            (
                "envPassthrough names",
                "A server gets exactly the variables its entry lists in `envPassthrough`, with the values mcpsum has; nothing else, and values are never stored. The proxy warns of a listed variable that is not set.",
            ),
        ],
    );
    roff.control("SH", ["POLICY"]);
    roff.text([roman("Each entry of the lockfile may carry a `policy`, written by people and not covered by the digests:")]);
    roff.control("nf", []);
    for line in [
        "\"policy\": {",
        "  \"taint\": {\"sources\": [\"fetch\", \"resources:*\"], \"sinks\": [\"send_mail\"]},",
        "  \"sandbox\": {",
        "    \"filesystem\": {\"read\": [\"~/notes\"], \"write\": [\"${TMP}\"]},",
        "    \"network\": {\"allow\": [\"api.example.com:443\"]},",
        "    \"limits\": {\"tasks\": 256}",
        "  }",
        "}",
    ] {
        roff.text([roman(line)]);
    }
    roff.control("fi", []);
    roff.text([roman("Taint: a call to a sink after a source's result reached the client needs the person's approval. `mcpsum suggest-policy --name NAME --write` proposes and adds labels from the locked annotations. Sandbox: the server reads only its own files plus `filesystem.read`, writes only `filesystem.write`, and reaches only the hosts in `network.allow` (none when absent); `mcpsum sandbox test --name NAME` shows each promise holding.")]);
}

/// `Heading:` paragraphs become `.SH HEADING` with their lines unfilled; `Heading: text`
/// paragraphs become `.SH HEADING` with the text filled; other paragraphs go under NOTES.
fn render_after_help(roff: &mut Roff, text: &str) {
    let mut notes: Vec<&str> = Vec::new();
    for para in text.split("\n\n") {
        let mut lines = para.lines();
        let Some(first) = lines.next() else { continue };
        if let Some(heading) = first.strip_suffix(':').filter(|h| !h.contains(": ")) {
            roff.control("SH", [heading.to_uppercase().as_str()]);
            roff.control("nf", []);
            for line in lines {
                example_line(roff, line.trim_start());
            }
            roff.control("fi", []);
        } else if let Some((heading, rest)) = first
            .split_once(": ")
            .filter(|(h, _)| h.chars().all(|c| c.is_ascii_alphabetic() || c == ' '))
        {
            roff.control("SH", [heading.to_uppercase().as_str()]);
            let body: Vec<&str> = std::iter::once(rest).chain(lines).collect();
            roff.text([roman(body.join(" "))]);
        } else {
            notes.push(para);
        }
    }
    if !notes.is_empty() {
        roff.control("SH", ["NOTES"]);
        for para in notes {
            roff.control("PP", []);
            roff.text([roman(para.replace('\n', " "))]);
        }
    }
}

/// An example: the command in bold, a trailing `# comment` in roman.
fn example_line(roff: &mut Roff, line: &str) {
    match line.split_once("  #") {
        Some((command, comment)) if line.starts_with("mcpsum ") => {
            roff.text([
                bold(command.trim_end()),
                roman(format!("    #{}", comment.trim_end())),
            ]);
        }
        _ if line.starts_with("mcpsum ") => {
            roff.text([bold(line)]);
        }
        _ => {
            roff.text([roman(line)]);
        }
    }
}
