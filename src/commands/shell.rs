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
    output::stdout(&String::from_utf8_lossy(&script));
    Ok(Exit::Ok)
}

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
    String::from_utf8_lossy(&out).into_owned()
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
