//! `mcpsum audit`: the audit log (`audit.jsonl` in the state directory, written by
//! [`crate::audit`] and the egress proxy) as a readable table or as its JSON lines, filtered by
//! server, session and age, and optionally followed as it grows.
//!
//! The log is streamed one line at a time, so a big log costs time, not memory; a filter on
//! server or session skips most lines before any JSON is parsed. A line that is not a whole
//! record (a partly written last line, damage, an overlong line) is skipped and counted on
//! stderr, never fatal. Everything in a record may come from a server or a client (tool names,
//! reasons, hosts), so the table passes every value through [`crate::text::sanitize_line`], and the
//! JSON lines are escaped for a terminal (never for a pipe, where they stay byte for byte).

use std::borrow::Cow;
use std::fs::File;
use std::io::{IsTerminal, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use anstyle::Style;
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;

use crate::audit::{AUDIT_FILE, CallOutcome};
use crate::cli::AuditArgs;
use crate::error::{Error, Exit, Result};
use crate::lines::{Frame, Line, Lines};
use crate::output::{self, paint, style};
use crate::paths;
use crate::text::sanitize_line;

/// Lines longer than this are not records (the largest real ones are a few KiB); they are
/// skipped without being held in memory.
const MAX_LINE: usize = 1 << 20;

/// Table or JSON text is written to stdout in chunks of about this size.
const FLUSH_AT: usize = 64 * 1024;

/// How often `--follow` looks for new lines, rotation and a closed stdout.
const POLL: Duration = Duration::from_millis(250);

/// Runs `audit`.
pub async fn run(args: &AuditArgs) -> Result<Exit> {
    let filter = Filter::new(args)?;
    let path = paths::state_dir()?.join(AUDIT_FILE);
    let mut view = View::new(args.json);
    if args.follow {
        return follow(&path, &filter, &mut view).await;
    }
    let Some(file) = open(&path)? else {
        output::info(&format!(
            "no audit log yet: `{}` does not exist (the proxy writes it when a server starts)",
            path.display()
        ));
        return Ok(Exit::Ok);
    };
    let mut log = Log::new(file, &path)?;
    log.drain(&path, &filter, &mut view)?;
    let incomplete = log.finish(&filter, &mut view);
    view.flush();
    log.report_skipped(&path, false);
    if incomplete {
        output::warn(&format!(
            "the last line of `{}` is incomplete (a proxy may be writing it); it was skipped",
            path.display()
        ));
    }
    if view.shown == 0 {
        output::info(if filter.is_empty() {
            "the audit log has no records"
        } else {
            "no audit records match"
        });
    }
    Ok(Exit::Ok)
}

// ----- filters -----

/// The validated filters.
struct Filter {
    servers: Vec<String>,
    sessions: Vec<String>,
    since: Option<OffsetDateTime>,
    /// The call outcomes wanted; empty for any record.
    outcomes: Vec<CallOutcome>,
    /// `"NAME"` as JSON writes it, for each server; a line without any of them cannot match.
    server_needles: Vec<memchr::memmem::Finder<'static>>,
    session_needles: Vec<memchr::memmem::Finder<'static>>,
}

impl Filter {
    fn new(args: &AuditArgs) -> Result<Self> {
        let since = match &args.since {
            None => None,
            Some(text) => {
                let d = parse_duration(text).ok_or_else(|| {
                    Error::new(format!("`--since {text}` is not a duration"))
                        .hint("use a number and a unit: `90s`, `10m`, `2h`, `3d` or `1w` (or a sum: `1h30m`)")
                })?;
                // A cut-off before the earliest representable time keeps everything.
                time::Duration::try_from(d)
                    .ok()
                    .and_then(|d| OffsetDateTime::now_utc().checked_sub(d))
            }
        };
        Ok(Self {
            server_needles: needles(&args.server),
            session_needles: needles(&args.session),
            servers: args.server.clone(),
            sessions: args.session.clone(),
            since,
            // clap accepts only the outcomes' names.
            outcomes: CallOutcome::ALL
                .into_iter()
                .filter(|o| args.outcome.iter().any(|a| a == o.as_str()))
                .collect(),
        })
    }

    fn is_empty(&self) -> bool {
        self.servers.is_empty()
            && self.sessions.is_empty()
            && self.since.is_none()
            && self.outcomes.is_empty()
    }

    /// False when the line cannot match, decided without parsing it.
    fn may_match(&self, line: &[u8]) -> bool {
        let any = |needles: &[memchr::memmem::Finder<'static>]| {
            needles.is_empty() || needles.iter().any(|n| n.find(line).is_some())
        };
        any(&self.server_needles) && any(&self.session_needles)
    }

    fn matches(&self, head: &Head<'_>, ts: Option<OffsetDateTime>, line: &[u8]) -> Match {
        let wanted =
            |list: &[String], value: &str| list.is_empty() || list.iter().any(|v| v == value);
        if !wanted(&self.servers, &head.server) || !wanted(&self.sessions, &head.session) {
            return Match::No;
        }
        if !self.outcomes.is_empty() {
            if head.event != "call" {
                return Match::No;
            }
            let Ok(f) = serde_json::from_slice::<OutcomeFields<'_>>(line) else {
                return Match::Broken;
            };
            match CallOutcome::of_record(f.outcome.as_deref(), f.ok) {
                Some(o) if self.outcomes.contains(&o) => {}
                _ => return Match::No,
            }
        }
        match (self.since, ts) {
            (None, _) => Match::Yes,
            (Some(cut), Some(ts)) if ts >= cut => Match::Yes,
            (Some(_), Some(_)) => Match::No,
            // A record whose time cannot be read cannot be placed after the cut-off.
            (Some(_), None) => Match::Broken,
        }
    }
}

enum Match {
    Yes,
    No,
    Broken,
}

/// Substring finders for the JSON form of each value. Only plain values (server names and
/// session ids are) get one: those have exactly one JSON spelling, so the pre-filter can never
/// drop a line that would match; any other value is left to the full comparison.
fn needles(values: &[String]) -> Vec<memchr::memmem::Finder<'static>> {
    if values.iter().any(|v| {
        !v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    }) {
        return Vec::new();
    }
    values
        .iter()
        .map(|v| memchr::memmem::Finder::new(format!("\"{v}\"").as_bytes()).into_owned())
        .collect()
}

/// `90s`, `10m`, `2h`, `3d`, `1w`, a sum such as `1h30m` or a fraction such as `1.5h`
/// (`humantime`'s grammar: every number has a unit, no sign).
fn parse_duration(text: &str) -> Option<Duration> {
    humantime::parse_duration(text.trim()).ok()
}

// ----- reading -----

/// The fields every record has. Other fields are skipped unparsed (but checked to be JSON).
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    ts: Cow<'a, str>,
    #[serde(borrow)]
    session: Cow<'a, str>,
    #[serde(borrow)]
    server: Cow<'a, str>,
    #[serde(borrow)]
    event: Cow<'a, str>,
}

/// What a `call` record says of how the call ended.
#[derive(Deserialize)]
struct OutcomeFields<'a> {
    #[serde(borrow)]
    outcome: Option<Cow<'a, str>>,
    ok: Option<bool>,
}

/// The log file being read, line by line.
struct Log {
    file: File,
    /// Its lines; a partial last line stays here until its newline arrives.
    lines: Lines,
    /// Device and inode, to notice a rotation.
    id: (u64, u64),
    /// Bytes read, to notice a truncation.
    offset: u64,
    /// The first and the last bytes read (up to [`TAIL`] each): a file truncated and written
    /// past `offset` again between two polls has other bytes there (records differ in their
    /// time, at the start, more than at their end).
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Whole lines read.
    line_no: u64,
    skipped: Skipped,
}

/// Lines that are not audit records.
#[derive(Default)]
struct Skipped {
    count: u64,
    first: u64,
    reported: u64,
}

impl Skipped {
    fn skip(&mut self, line_no: u64) {
        if self.count == 0 {
            self.first = line_no;
        }
        self.count += 1;
    }
}

fn open(path: &Path) -> Result<Option<File>> {
    match fs_err::File::open(path) {
        Ok(f) => Ok(Some(f.into_parts().0)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(read_error(path, e)),
    }
}

fn read_error(path: &Path, e: std::io::Error) -> Error {
    Error::new(format!("cannot read the audit log `{}`", path.display()))
        .cause(e)
        .hint("the log belongs to the user who runs the proxies (mode 0600); run `mcpsum audit` as that user, with the same `MCPSUM_STATE_DIR`")
}

impl Log {
    fn new(file: File, path: &Path) -> Result<Self> {
        let meta = file.metadata().map_err(|e| read_error(path, e))?;
        Ok(Self {
            file,
            lines: Lines::new(MAX_LINE),
            id: (meta.dev(), meta.ino()),
            offset: 0,
            head: Vec::new(),
            tail: Vec::new(),
            line_no: 0,
            skipped: Skipped::default(),
        })
    }

    /// Reads more of the file; false at its end.
    fn read_more(&mut self) -> std::io::Result<bool> {
        let read = self.lines.read_from(&mut self.file)?;
        let missing = TAIL - self.head.len();
        self.head
            .extend_from_slice(&read[..read.len().min(missing)]);
        self.tail
            .extend_from_slice(&read[read.len().saturating_sub(TAIL)..]);
        let excess = self.tail.len().saturating_sub(TAIL);
        self.tail.drain(..excess);
        self.offset += read.len() as u64;
        Ok(!read.is_empty())
    }

    /// Shows every whole line up to the end of the file.
    fn drain(&mut self, path: &Path, filter: &Filter, view: &mut View) -> Result<()> {
        loop {
            while let Some(line) = self.lines.take_line() {
                self.line_no += 1;
                let record = match line {
                    Line::Whole(line) => consider(line, filter, view),
                    Line::TooLong(_) => false,
                };
                if !record {
                    self.skipped.skip(self.line_no);
                }
            }
            if !self.read_more().map_err(|e| read_error(path, e))? {
                return Ok(());
            }
        }
    }

    /// At the end of a read without `--follow`: a last line without its newline is shown if
    /// it is a whole record; true when it is not (a record still being written).
    fn finish(&mut self, filter: &Filter, view: &mut View) -> bool {
        match self.lines.finish() {
            None => false,
            Some(Frame::TooLong(_)) => {
                self.skipped.skip(self.line_no + 1);
                false
            }
            Some(Frame::Line(line)) => {
                !line.iter().all(u8::is_ascii_whitespace) && !consider(&line, filter, view)
            }
        }
    }

    /// Reports skipped lines not reported yet (all of them at the end of a plain read; as they
    /// come when following).
    fn report_skipped(&mut self, path: &Path, following: bool) {
        let new = self.skipped.count - self.skipped.reported;
        if new == 0 {
            return;
        }
        self.skipped.reported = self.skipped.count;
        let what = if new == 1 {
            "1 line that is not an audit record".to_owned()
        } else {
            format!("{new} lines that are not audit records")
        };
        let at = if following {
            format!("up to line {}", self.line_no)
        } else if new == 1 {
            format!("line {}", self.skipped.first)
        } else {
            format!("the first is line {}", self.skipped.first)
        };
        output::warn(&format!("skipped {what} in `{}` ({at})", path.display()));
    }

    /// What became of the file at `path` since it was opened.
    fn check(&self, path: &Path) -> FileState {
        match fs_err::metadata(path) {
            Err(_) => FileState::Gone,
            Ok(m) if (m.dev(), m.ino()) != self.id => FileState::Replaced,
            Ok(m) if m.len() < self.offset => FileState::Truncated,
            Ok(_) => FileState::Same,
        }
    }

    /// Whether the first bytes of the file and those before `offset` are still the ones
    /// consumed there.
    fn read_unchanged(&self) -> bool {
        use std::os::unix::fs::FileExt;
        let same = |bytes: &[u8], at: u64| {
            let mut now = vec![0; bytes.len()];
            self.file.read_exact_at(&mut now, at).is_ok() && now == bytes
        };
        same(&self.head, 0) && same(&self.tail, self.offset - self.tail.len() as u64)
    }

    /// Says the file was truncated, and reads it again from its start.
    fn restart(&mut self, path: &Path) -> Result<()> {
        output::info(&format!(
            "`{}` was truncated; reading it from the start",
            path.display()
        ));
        self.file
            .seek(SeekFrom::Start(0))
            .map_err(|e| read_error(path, e))?;
        self.offset = 0;
        self.head.clear();
        self.tail.clear();
        self.lines.clear();
        self.line_no = 0;
        Ok(())
    }
}

/// Bytes kept of what was consumed first and last, to notice a file rewritten past the offset.
const TAIL: usize = 64;

enum FileState {
    Same,
    Truncated,
    Replaced,
    Gone,
}

/// Shows the line if it matches; false when it is not a whole audit record.
fn consider(line: &[u8], filter: &Filter, view: &mut View) -> bool {
    if line.iter().all(u8::is_ascii_whitespace) {
        return true;
    }
    if !filter.may_match(line) {
        return true;
    }
    // Not UTF-8 is not a record: serde skips the fields `Head` does not name without checking
    // them, and `--json` prints a record as it is.
    if std::str::from_utf8(line).is_err() {
        return false;
    }
    let Ok(head) = serde_json::from_slice::<Head<'_>>(line) else {
        return false;
    };
    let ts = parse_ts(&head.ts);
    match filter.matches(&head, ts, line) {
        Match::Yes => {
            view.show(line, &head, ts);
            true
        }
        Match::No => true,
        Match::Broken => false,
    }
}

fn parse_ts(ts: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()
}

// ----- following -----

async fn follow(path: &Path, filter: &Filter, view: &mut View) -> Result<Exit> {
    use tokio::signal::unix::{SignalKind, signal};
    let signal_error = |e| Error::new("cannot watch for Ctrl-C (SIGINT) and SIGTERM").cause(e);
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut log: Option<Log> = None;
    let mut said_waiting = false;
    loop {
        if log.is_none() {
            match open(path)? {
                Some(f) => log = Some(Log::new(f, path)?),
                None if !said_waiting => {
                    output::info(&format!(
                        "waiting for `{}` (the proxy writes it when a server starts)",
                        path.display()
                    ));
                    said_waiting = true;
                }
                None => {}
            }
        }
        let mut again = false;
        if let Some(current) = log.as_mut() {
            // Truncated and written past the offset again since the last poll: checked before
            // reading on, which would show the new file's later records first.
            if !current.read_unchanged() {
                current.restart(path)?;
            }
            current.drain(path, filter, view)?;
            match current.check(path) {
                FileState::Same | FileState::Gone => {}
                FileState::Truncated => {
                    current.restart(path)?;
                    again = true;
                }
                FileState::Replaced => {
                    // Rotated: finish the old file (proxies may have appended since the drain
                    // above), then read the new one from its start, as `tail -F` does.
                    current.drain(path, filter, view)?;
                    if current.lines.pending() {
                        current.skipped.skip(current.line_no + 1);
                    }
                    current.report_skipped(path, true);
                    if let Some(f) = open(path)? {
                        output::info(&format!(
                            "`{}` was replaced (rotated); reading the new file",
                            path.display()
                        ));
                        *current = Log::new(f, path)?;
                        again = true;
                    }
                }
            }
            current.report_skipped(path, true);
        }
        view.flush();
        if output::stdout_closed() {
            return Ok(Exit::Ok);
        }
        if again {
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = interrupt.recv() => return Ok(Exit::Ok),
            _ = terminate.recv() => return Ok(Exit::Ok),
        }
    }
}

// ----- showing -----

/// Where matching records go: the table or JSON lines, buffered.
struct View {
    json: bool,
    /// stdout is a terminal: JSON lines get their invisible characters escaped.
    terminal: bool,
    out: String,
    shown: u64,
}

impl View {
    fn new(json: bool) -> Self {
        Self {
            json,
            terminal: std::io::stdout().is_terminal(),
            out: String::new(),
            shown: 0,
        }
    }

    fn show(&mut self, line: &[u8], head: &Head<'_>, ts: Option<OffsetDateTime>) {
        if self.json {
            // Checked to be UTF-8 in `consider`.
            let text = String::from_utf8_lossy(line);
            if self.terminal {
                self.out.push_str(&crate::text::terminal_json(&text));
            } else {
                self.out.push_str(&text);
            }
            self.out.push('\n');
        } else {
            if self.shown == 0 {
                self.out.push_str(&paint(
                    style::BOLD,
                    format!(
                        "{:<19}  {:<12}  {:<16}  {:<10}  DETAIL",
                        "TIME (UTC)", "SERVER", "SESSION", "EVENT"
                    ),
                ));
                self.out.push('\n');
            }
            self.out.push_str(&row(head, ts, line));
            self.out.push('\n');
        }
        self.shown += 1;
        if self.out.len() >= FLUSH_AT {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            output::stdout(&self.out);
            self.out.clear();
        }
    }
}

/// One table row.
fn row(head: &Head<'_>, ts: Option<OffsetDateTime>, line: &[u8]) -> String {
    let time = match ts {
        Some(t) => t
            .to_offset(time::UtcOffset::UTC)
            .format(time::macros::format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second]"
            ))
            .unwrap_or_else(|_| sanitize_line(&head.ts)),
        None => sanitize_line(&head.ts),
    };
    let (detail, tone) = match serde_json::from_slice::<Fields<'_>>(line) {
        Ok(fields) => detail(&head.event, &fields).unwrap_or_else(|| (other(line), Style::new())),
        // A field of an unexpected type (another version's record): show what is there.
        Err(_) => (other(line), Style::new()),
    };
    let event = sanitize_line(&head.event);
    format!(
        "{time:<19}  {:<12}  {:<16}  {}  {}",
        sanitize_line(&head.server),
        sanitize_line(&head.session),
        paint(tone, format!("{event:<10}")),
        paint(tone, sanitize_line(&detail)),
    )
}

/// The fields the table shows, borrowed from the line where possible (parsing a whole
/// `serde_json::Value` per record would cost about as much again).
#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    item: Option<Cow<'a, str>>,
    #[serde(borrow)]
    decision: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reason: Option<Cow<'a, str>>,
    #[serde(borrow)]
    class: Option<Cow<'a, str>>,
    #[serde(borrow)]
    from: Option<Cow<'a, str>>,
    /// A process exit status (text) or an egress HTTP status (number).
    status: Option<Value>,
    #[serde(borrow)]
    era: Option<Cow<'a, str>>,
    #[serde(borrow)]
    host: Option<Cow<'a, str>>,
    #[serde(borrow)]
    target: Option<Cow<'a, str>>,
    #[serde(borrow)]
    connected: Option<Cow<'a, str>>,
    #[serde(borrow)]
    detail: Option<Cow<'a, str>>,
    #[serde(borrow)]
    fields: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow)]
    tainted_by: Option<TaintedBy<'a>>,
    ok: Option<bool>,
    #[serde(borrow)]
    outcome: Option<Cow<'a, str>>,
    pid: Option<u64>,
    client_pid: Option<u64>,
    duration_ms: Option<u64>,
    bytes: Option<u64>,
    port: Option<u64>,
    bytes_up: Option<u64>,
    bytes_down: Option<u64>,
}

#[derive(Deserialize)]
struct TaintedBy<'a> {
    #[serde(borrow)]
    server: Option<Cow<'a, str>>,
    #[serde(borrow)]
    item: Option<Cow<'a, str>>,
}

fn text<'s>(field: &'s Option<Cow<'_, str>>) -> Option<&'s str> {
    field.as_deref().filter(|s| !s.is_empty())
}

impl Fields<'_> {
    /// `method item`, or whichever of them the record has.
    fn what(&self) -> String {
        [text(&self.method), text(&self.item)]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn reason(&self) -> &str {
        text(&self.reason).unwrap_or("no reason recorded")
    }
}

/// A record of an event this version does not know, or of unexpected shape: its fields other
/// than the four every record has, as compact JSON.
fn other(line: &[u8]) -> String {
    let mut rest: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
    if let Some(obj) = rest.as_object_mut() {
        for k in ["ts", "session", "server", "event"] {
            obj.remove(k);
        }
    }
    crate::text::ellipsize(&rest.to_string(), 300)
}

/// The detail column of a record and the tone of its row (plain text: the caller sanitizes
/// it); `None` for an event this version does not know.
fn detail(event: &str, f: &Fields<'_>) -> Option<(String, Style)> {
    let plain = Style::new();
    let took = f.duration_ms.map(millis);
    Some(match event {
        "start" => {
            let mut parts = Vec::new();
            if let Some(pid) = f.pid {
                parts.push(format!("pid {pid}"));
            }
            if let Some(era) = text(&f.era) {
                parts.push(format!("{era} era"));
            }
            if let Some(t) = &took {
                parts.push(format!("ready in {t}"));
            }
            if let Some(pid) = f.client_pid {
                parts.push(format!("client pid {pid}"));
            }
            if parts.is_empty() {
                ("server started".to_owned(), plain)
            } else {
                (format!("server started: {}", parts.join(", ")), plain)
            }
        }
        "exit" => {
            let mut s = text(&f.reason).unwrap_or("ended").to_owned();
            if let Some(status) = f.status.as_ref().and_then(Value::as_str) {
                s.push_str(&format!(" ({status})"));
            }
            if let Some(t) = took {
                s.push_str(&format!(" after {t}"));
            }
            (s, plain)
        }
        "call" => {
            let head = f.what();
            let (mut s, tone) = if text(&f.decision) == Some("taint") {
                let mut s = format!("{head}: tainted the session");
                if let Some(r) = text(&f.reason) {
                    s.push_str(&format!(" ({r})"));
                }
                (s, style::WARN)
            } else if CallOutcome::of_record(text(&f.outcome), f.ok) == Some(CallOutcome::ToolError)
            {
                // Its `reason` is mcpsum's own words, written for readers that know only `ok`.
                (
                    format!("{head}: tool error (its result has `isError: true`)"),
                    style::WARN,
                )
            } else if f.ok == Some(false) {
                (format!("{head}: failed: {}", f.reason()), style::WARN)
            } else {
                (format!("{head}: ok"), plain)
            };
            if let Some(t) = took {
                s.push_str(&format!(", {t}"));
            }
            if let Some(b) = f.bytes {
                s.push_str(&format!(", {}", bytes(b)));
            }
            (s, tone)
        }
        "refused" => {
            let reason = f.reason();
            let s = match (text(&f.decision), text(&f.from)) {
                (Some("drop"), from) => format!(
                    "dropped a message from the {}: {reason}",
                    from.unwrap_or("client")
                ),
                (Some("fail"), _) => format!("{}: failed: {reason}", f.what()),
                (_, Some(from)) => format!("{} from the {from}: refused: {reason}", f.what()),
                _ => format!("{}: refused: {reason}", f.what()),
            };
            (s, style::ERROR)
        }
        "approval" => {
            let decision = text(&f.decision).unwrap_or("?");
            let mut s = format!("{}: {decision}", f.what());
            if let Some(r) = text(&f.reason) {
                s.push_str(&format!(" ({r})"));
            }
            if let Some(t) = &f.tainted_by {
                s.push_str(&format!(
                    "; tainted by {} on server {}",
                    text(&t.item).unwrap_or("?"),
                    text(&t.server).unwrap_or("?")
                ));
            }
            let tone = match decision {
                "accept" => style::OK,
                "asked" => plain,
                _ => style::ERROR,
            };
            (s, tone)
        }
        "drift" => {
            let class = text(&f.class).unwrap_or("drift");
            let what = match &f.fields {
                Some(fields) if !fields.is_empty() => fields.join(", "),
                _ => text(&f.reason).unwrap_or("").to_owned(),
            };
            let tone = if class == "definitional" {
                style::ERROR
            } else {
                style::WARN
            };
            (format!("{class}: {what}"), tone)
        }
        "quarantine" => (format!("quarantined: {}", f.reason()), style::ERROR),
        "egress" => {
            let target = match (text(&f.host), f.port) {
                (Some(h), Some(p)) => format!("{h}:{p}"),
                (Some(h), None) => h.to_owned(),
                _ => text(&f.target).unwrap_or("(no target read)").to_owned(),
            };
            let took = took.unwrap_or_else(|| "?".to_owned());
            if text(&f.decision) == Some("allow") {
                let via = text(&f.connected).unwrap_or("?");
                let up = bytes(f.bytes_up.unwrap_or(0));
                let down = bytes(f.bytes_down.unwrap_or(0));
                (
                    format!("allow {target} via {via}, up {up}, down {down}, {took}"),
                    plain,
                )
            } else {
                let mut s = format!("deny {target}");
                if let Some(code) = f.status.as_ref().and_then(Value::as_u64) {
                    s.push_str(&format!(" ({code})"));
                }
                s.push_str(&format!(": {}", text(&f.reason).unwrap_or("?")));
                if let Some(d) = text(&f.detail) {
                    s.push_str(&format!(" ({d})"));
                }
                (s, style::ERROR)
            }
        }
        _ => return None,
    })
}

fn millis(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1_000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1_000)
    }
}

/// A byte count in SI units with one decimal (`517 B`, `4.1 kB`, `2.0 MB`).
fn bytes(n: u64) -> String {
    bytesize::ByteSize::b(n).display().si().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn byte_counts() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(517), "517 B");
        assert_eq!(bytes(4_100), "4.1 kB");
        assert_eq!(bytes(2_000_000), "2.0 MB");
        assert_eq!(bytes(3_500_000_000), "3.5 GB");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7_200)));
        assert_eq!(parse_duration("3d"), Some(Duration::from_secs(259_200)));
        assert_eq!(parse_duration("1w"), Some(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5_400)));
        for bad in ["", "m", "10", "10x", "-1h", "99999999999999999999d"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn details_of_each_event() {
        let rec = |extra: Value| {
            let mut v = serde_json::json!({"ts": "2026-01-02T03:04:05.678Z", "session": "1-2", "server": "s", "event": "x"});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        let cases = [
            (
                rec(
                    serde_json::json!({"event": "call", "method": "tools/call", "item": "echo", "decision": "allow", "ok": true, "duration_ms": 12, "bytes": 1_500}),
                ),
                "tools/call echo: ok, 12 ms, 1.5 kB",
            ),
            (
                rec(
                    serde_json::json!({"event": "call", "method": "tools/call", "item": "echo", "decision": "allow", "ok": false, "outcome": "tool-error", "reason": "the tool reported an error (its result has `isError: true`)", "duration_ms": 12, "bytes": 90}),
                ),
                "tools/call echo: tool error (its result has `isError: true`), 12 ms, 90 B",
            ),
            (
                // A record from before `outcome`: `ok` alone.
                rec(
                    serde_json::json!({"event": "call", "method": "tools/call", "item": "echo", "decision": "allow", "ok": false, "reason": "cancelled by the client", "duration_ms": 12}),
                ),
                "tools/call echo: failed: cancelled by the client, 12 ms",
            ),
            (
                rec(
                    serde_json::json!({"event": "egress", "host": "api.example.com", "port": 443, "connected": "203.0.113.5:443", "decision": "allow", "bytes_up": 517, "bytes_down": 4_096, "duration_ms": 2_500}),
                ),
                "allow api.example.com:443 via 203.0.113.5:443, up 517 B, down 4.1 kB, 2.5 s",
            ),
            (
                rec(
                    serde_json::json!({"event": "egress", "target": "evil:1", "host": null, "decision": "deny", "reason": "not_listed", "detail": "no allowlist entry", "status": 403}),
                ),
                "deny evil:1 (403): not_listed (no allowlist entry)",
            ),
            (
                rec(
                    serde_json::json!({"event": "drift", "class": "informational", "fields": ["serverInfo", "instructions"]}),
                ),
                "informational: serverInfo, instructions",
            ),
            (
                rec(
                    serde_json::json!({"event": "approval", "method": "tools/call", "item": "send", "decision": "decline", "reason": "no", "tainted_by": {"server": "web", "item": "tool read_page", "ts": "t"}}),
                ),
                "tools/call send: decline (no); tainted by tool read_page on server web",
            ),
            (
                rec(
                    serde_json::json!({"event": "exit", "reason": "server exited", "status": "exit status: 3", "duration_ms": 61_000}),
                ),
                "server exited (exit status: 3) after 1 min 1 s",
            ),
            (
                rec(serde_json::json!({"event": "new-kind", "a": 1})),
                "{\"a\":1}",
            ),
            // A known event whose field has another type is shown as its fields.
            (
                rec(serde_json::json!({"event": "exit", "pid": "3"})),
                "{\"pid\":\"3\"}",
            ),
        ];
        for (record, want) in cases {
            let line = record.to_string();
            let head: Head<'_> = serde_json::from_str(&line).unwrap();
            let row =
                anstream::adapter::strip_str(&row(&head, parse_ts(&head.ts), line.as_bytes()))
                    .to_string();
            let cols: Vec<&str> = row.splitn(5, "  ").collect();
            assert_eq!(cols[0], "2026-01-02 03:04:05");
            assert_eq!(row.rsplit_once("  ").unwrap().1, want, "{row}");
        }
    }
}
