//! The only module that writes to the terminal. stdout carries data that can be piped; stderr
//! carries progress, diagnostics and errors. Colour follows `--color`, `NO_COLOR` and whether the
//! stream is a terminal (through `anstream`, which strips styles when they must not be shown).

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use anstyle::{AnsiColor, Style};

static QUIET: AtomicBool = AtomicBool::new(false);
static VERBOSE: AtomicU8 = AtomicU8::new(0);

/// Sets the colour choice and verbosity once, at start.
pub fn init(color: anstream::ColorChoice, quiet: bool, verbose: u8) {
    color.write_global();
    QUIET.store(quiet, Ordering::Relaxed);
    VERBOSE.store(verbose, Ordering::Relaxed);
}

/// Whether `-q` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Whether `-v` was given.
pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed) > 0
}

/// Styles used across the output.
pub mod style {
    use super::{AnsiColor, Style};
    /// Something added.
    pub const ADDED: Style = AnsiColor::Green.on_default();
    /// Something removed.
    pub const REMOVED: Style = AnsiColor::Red.on_default();
    /// A heading or a name.
    pub const BOLD: Style = Style::new().bold();
    /// Secondary text.
    pub const DIM: Style = Style::new().dimmed();
    /// A warning or a change.
    pub const WARN: Style = AnsiColor::Yellow.on_default();
    /// An error label.
    pub const ERROR: Style = AnsiColor::Red.on_default().bold();
    /// Success.
    pub const OK: Style = AnsiColor::Green.on_default().bold();
    /// Diff hunk headers.
    pub const HUNK: Style = AnsiColor::Cyan.on_default();
}

/// `text` wrapped in `style` (stripped later when colour is off).
pub fn paint(style: Style, text: impl std::fmt::Display) -> String {
    format!("{style}{text}{style:#}")
}

/// Like [`paint`] for text bound for stdout, but plain when stdout shows no colour: `anstream`
/// would strip the styles again, a scan that costs more than writing them (a tenth of a
/// millisecond for `show` of 2,000 tools).
pub fn paint_stdout(style: Style, text: impl std::fmt::Display) -> String {
    static STYLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let styled = *STYLED.get_or_init(|| {
        anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never
    });
    if styled {
        paint(style, text)
    } else {
        text.to_string()
    }
}

/// Writes data to stdout. A closed pipe (`mcpsum show | head`) ends the run quietly.
pub fn stdout(text: &str) {
    // Printable ASCII and whitespace (a `--json` document, mostly) is what `anstream` would
    // write unchanged whether it strips styles or not, so it skips the stripping scan.
    let result = if text
        .bytes()
        .all(|b| matches!(b, b' '..=b'~' | b'\n' | b'\t' | b'\r'))
    {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush())
    } else {
        let mut out = anstream::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush())
    };
    end_if_stdout_closed(result);
}

/// Ends the run with 0 when a write to stdout failed because its reader has gone.
#[expect(
    clippy::exit,
    reason = "a closed stdout pipe ends the run with 0, as ripgrep does"
)]
fn end_if_stdout_closed(result: std::io::Result<()>) {
    if let Err(e) = result
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
}

/// Writes `doc` to stdout as pretty JSON and a newline, serialized straight into a buffered
/// stdout rather than into one string first (a 230 KB document: 0.9 ms less). JSON text has no
/// control characters (`serde_json` escapes them), so there is nothing for `anstream` to strip.
/// A closed pipe ends the run quietly, as with [`stdout`].
///
/// On a terminal the characters [`sanitize`](crate::text::sanitize) escapes (DEL, C1 controls, bidirectional
/// overrides), which `serde_json` writes as they are, are written as `\uXXXX` escapes instead
/// ([`terminal_json`](crate::text::terminal_json)): the same JSON, which cannot reorder or hide what a reviewer reads.
pub fn stdout_json<T: serde::Serialize>(doc: &T) {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        return stdout_json_text(&json_text(doc));
    }
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let result = serde_json::to_writer_pretty(&mut out, doc)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    end_if_stdout_closed(result);
}

/// `doc` as [`stdout_json`] writes it (pretty, a newline, terminal-safe on a terminal), as a
/// text to write later with [`stdout_json_text`].
pub fn json_text<T: serde::Serialize>(doc: &T) -> String {
    use std::io::IsTerminal;
    let mut text = serde_json::to_string_pretty(doc).unwrap_or_default();
    text.push('\n');
    if std::io::stdout().is_terminal() {
        return crate::text::terminal_json(&text).into_owned();
    }
    text
}

/// Writes a text made by [`json_text`] to stdout as it is (JSON has nothing for `anstream` to
/// strip); a closed pipe ends the run quietly, as with [`stdout`].
pub fn stdout_json_text(text: &str) {
    let mut out = std::io::stdout().lock();
    end_if_stdout_closed(out.write_all(text.as_bytes()).and_then(|()| out.flush()));
}

/// Whether stdout's reader has gone (a closed pipe, a hung-up terminal), checked without
/// writing: a command that waits for data (`audit --follow`) ends then instead of at its next
/// write.
pub fn stdout_closed() -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let out = std::io::stdout();
    let mut fds = [PollFd::new(out.as_fd(), PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// Writes a line to stderr unless `-q`.
pub fn info(text: &str) {
    if !quiet() {
        clear_status();
        let mut err = anstream::stderr().lock();
        let _ = writeln!(err, "{text}");
    }
}

/// Writes a warning line to stderr unless `-q`.
pub fn warn(text: &str) {
    if !quiet() {
        clear_status();
        let mut err = anstream::stderr().lock();
        let _ = writeln!(err, "{}: {text}", paint(style::WARN.bold(), "warning"));
    }
}

/// Writes an error to stderr, always.
pub fn error(err: &crate::Error) {
    clear_status();
    let mut out = anstream::stderr().lock();
    // Error text is mcpsum's own words around server-sent fragments (error messages, stderr
    // lines): none of it may drive the terminal.
    let text = crate::text::sanitize(&err.to_string());
    let (body, hint) = match text.split_once("\n\nhint: ") {
        Some((b, h)) => (b, Some(h)),
        None => (text.as_str(), None),
    };
    let _ = writeln!(out, "{}: {body}", paint(style::ERROR, "error"));
    if let Some(h) = hint {
        let _ = writeln!(out, "\n{}: {h}", paint(style::BOLD, "hint"));
    }
}

/// A line a server wrote to its stderr, relayed by the proxy.
pub fn server_stderr(server: &str, line: &str) {
    clear_status();
    let mut err = anstream::stderr().lock();
    let _ = writeln!(err, "[{server}] {}", crate::text::sanitize_line(line));
}

// ----- the status line (`progress`) -----

/// The status line on screen now ("" when none), redrawn in place with `\r`.
static STATUS: Mutex<String> = Mutex::new(String::new());

/// Whether a status line may be shown: stderr is a terminal and `-q` was not given. Nothing of
/// it reaches a pipe or a file.
pub fn status_enabled() -> bool {
    !quiet() && std::io::stderr().is_terminal()
}

/// The terminal's width for a status line (one column spare, so the cursor never wraps).
pub fn status_width() -> usize {
    terminal_size::terminal_size_of(std::io::stderr())
        .map_or(80, |(w, _)| usize::from(w.0))
        .saturating_sub(1)
        .max(20)
}

/// Replaces the status line with `text` ("" clears it). Carriage return and spaces only, no
/// escape sequences, so it works on any terminal and with colour off. Callers keep `text` to
/// one line that fits [`status_width`].
pub fn status(text: &str) {
    let Ok(mut shown) = STATUS.lock() else {
        return;
    };
    if *shown == text {
        return;
    }
    let mut line = String::with_capacity(text.len() + shown.len() + 2);
    line.push('\r');
    line.push_str(text);
    let (old, new) = (shown.chars().count(), text.chars().count());
    if old > new {
        line.extend(std::iter::repeat_n(' ', old - new));
        line.push('\r');
        line.push_str(text);
    }
    // Unbuffered std stderr, not `anstream`: the line has no styles to strip.
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(line.as_bytes()).and_then(|()| err.flush());
    text.clone_into(&mut shown);
}

/// Clears the status line before other stderr output; the next tick draws it again below.
fn clear_status() {
    // Nothing is written when no status is shown.
    status("");
}
