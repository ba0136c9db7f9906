//! `verify` reports for CI: SARIF 2.1.0 for code scanning and GitHub Actions workflow commands
//! (annotations). Both turn each drifted item, changed field and failed server into one result
//! that points at its place in the lockfile. Pure: this module builds text, `output` prints it.
//!
//! Everything a server sent (item keys, error text, definitions in diffs) is hostile: it is
//! first made terminal-safe with `crate::text::sanitize`, then escaped for the format it lands in
//! (SARIF's embedded-link and placeholder syntax, GitHub's `%`/CR/LF and property escapes), so
//! it can neither forge a link or another annotation nor hide text from the reviewer.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::drift::{self, Class, Drift, FieldChange, ItemChange};
use crate::error::{Error, Exit};
use crate::lockfile::{Kind, Locator, Position, Sha256Digest, Span};
use crate::text::{sanitize, sanitize_line};

/// What verifying one server came to (the reports here are made of these).
pub enum Outcome {
    /// The server answered; its drift (possibly none).
    Checked(Drift),
    /// It could not be verified.
    Failed(Error),
}

/// The schema a SARIF log names: the OASIS 2.1.0 schema with errata 01.
pub const SARIF_SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// What one `verify` run found, for the CI formats.
pub struct Report<'a> {
    /// The lockfile as given or found.
    pub lockfile: &'a Path,
    /// Its text, exactly as loaded (for line and column numbers).
    pub lock_text: &'a str,
    /// The directory paths are reported relative to (the current directory).
    pub cwd: Option<&'a Path>,
    /// `--strict`.
    pub strict: bool,
    /// The exit status `verify` ends with.
    pub exit: Exit,
    /// Each verified server and what happened to it, by name.
    pub results: &'a [(String, Outcome)],
    /// The lockfile's signature.
    pub signature: &'a crate::signing::Status,
}

/// The report as a SARIF 2.1.0 log (pretty JSON and a newline).
pub fn sarif(report: &Report<'_>) -> String {
    let target = Target::of(report.lockfile, report.cwd);
    sarif_log(
        findings(report),
        Some(&target),
        report.exit,
        report.strict,
        Some(&report.signature.to_ci_json()),
    )
}

/// The report of a run that verified nothing because the lockfile could not be found, read or
/// validated, or a `--name` is not in it: one `lockfile-not-used` result, as SARIF (`sarif`)
/// or as a workflow command.
pub fn not_run(
    sarif: bool,
    lockfile: Option<&Path>,
    cwd: Option<&Path>,
    signature: Option<&Value>,
    err: &crate::Error,
) -> String {
    let target = lockfile.map(|l| Target::of(l, cwd));
    let span = lockfile.and_then(|l| error_position(&err.to_string(), l));
    let finding = Finding {
        rule: "lockfile-not-used".into(),
        level: Level::Error,
        title: "the lockfile could not be used".into(),
        summary: sanitize_line(&err.one_line()),
        detail: details_of(&err.to_string()),
        detail_name: "details",
        hint: err.hint_text().map_or_else(
            || "run `mcpsum verify` to see why".to_owned(),
            sanitize_line,
        ),
        span: span.map(|p| (Span { start: p, end: p }, false)),
        identity: "lockfile-not-used".into(),
        properties: Map::new(),
    };
    if sarif {
        sarif_log(
            vec![finding],
            target.as_ref(),
            Exit::CannotRun,
            false,
            signature,
        )
    } else {
        github_lines(vec![finding], target.as_ref())
    }
}

/// The first `PATH:LINE:COLUMN` naming `lockfile` in an error's text (validation problems
/// carry one).
fn error_position(text: &str, lockfile: &Path) -> Option<Position> {
    let prefix = format!("{}:", lockfile.display());
    text.match_indices(&prefix).find_map(|(i, _)| {
        let mut parts = text[i + prefix.len()..].splitn(3, ':');
        let line = parts.next()?.parse().ok()?;
        let column = parts.next()?.parse().ok()?;
        Some(Position { line, column })
    })
}

fn sarif_log(
    findings: Vec<Finding>,
    target: Option<&Target>,
    exit: Exit,
    strict: bool,
    signature: Option<&Value>,
) -> String {
    let rules = rules();
    let results: Vec<Value> = findings
        .into_iter()
        .map(|f| {
            let rule_index = rules.iter().position(|r| r.id == f.rule).unwrap_or(0);
            let mut locations = Vec::new();
            if let Some(t) = target {
                let mut location = json!({"artifactLocation": {"uri": t.uri}});
                if let Some((span, whole)) = f.span {
                    let mut region = json!({
                        "startLine": span.start.line,
                        "startColumn": span.start.column,
                    });
                    if whole {
                        region["endLine"] = json!(span.end.line);
                        region["endColumn"] = json!(span.end.column);
                    }
                    location["region"] = region;
                }
                locations.push(json!({"physicalLocation": location}));
            }
            let mut properties = f.properties;
            if !f.detail.is_empty() {
                properties.insert(f.detail_name.into(), Value::String(f.detail));
            }
            json!({
                "ruleId": f.rule,
                "ruleIndex": rule_index,
                "level": f.level.sarif(),
                "message": {"text": sarif_text(&format!("{}\n\nhint: {}", f.summary, f.hint))},
                "locations": locations,
                "partialFingerprints": {
                    "mcpsumResult/v1": Sha256Digest::of_bytes(f.identity.as_bytes()).to_string(),
                },
                "properties": properties,
            })
        })
        .collect();
    let version = env!("CARGO_PKG_VERSION");
    let doc = json!({
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "mcpsum",
                "version": version,
                "semanticVersion": version,
                "rules": rules.iter().map(Rule::to_sarif).collect::<Vec<_>>(),
            }},
            "invocations": [{
                "executionSuccessful": exit != Exit::CannotRun,
                "exitCode": exit as i32,
            }],
            "columnKind": "utf16CodeUnits",
            "results": results,
            "properties": {"strict": strict, "signature": signature},
        }],
    });
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_default();
    out.push('\n');
    out
}

/// The report as GitHub Actions workflow commands: one `::error`, `::warning` or `::notice`
/// line per result, then one plain status line per server for the job log.
pub fn github(report: &Report<'_>) -> String {
    let target = Target::of(report.lockfile, report.cwd);
    let mut out = github_lines(findings(report), Some(&target));
    // Status lines are mcpsum's own words around validated server names (ASCII letters, digits,
    // `.`, `_`, `-`), so none can start a workflow command.
    for (name, outcome) in report.results {
        let line = match outcome {
            Outcome::Failed(_) => format!("error {name}: could not verify"),
            Outcome::Checked(d) => match d.class() {
                Class::Clean => format!("ok {name}: clean"),
                Class::Informational => format!(
                    "{} {name}: informational drift",
                    if report.strict { "drift" } else { "info" }
                ),
                Class::Definitional => format!("drift {name}: definitional drift"),
            },
        };
        out.push_str(&line);
        out.push('\n');
    }
    if report.results.is_empty() {
        out.push_str("no servers locked\n");
    }
    // mcpsum's words around a fingerprint, a key type and the principals of the reader's own
    // allowed-signers file: made one plain line so that nothing in it starts a command.
    let sig = report.signature;
    out.push_str(&sanitize_line(&format!(
        "signature {}: {}",
        sig.state_name(),
        sig.summary()
    )));
    out.push('\n');
    out
}

/// One workflow command per finding.
fn github_lines(findings: Vec<Finding>, target: Option<&Target>) -> String {
    let mut out = String::new();
    for f in findings {
        let mut props = Vec::new();
        if let Some(t) = target {
            props.push(format!("file={}", gh_property(&t.display)));
        }
        if let Some((span, whole)) = f.span {
            props.push(format!("line={}", span.start.line));
            if whole && span.end.line > span.start.line {
                props.push(format!("endLine={}", span.end.line));
            } else {
                props.push(format!("col={}", span.start.column));
            }
        }
        props.push(format!(
            "title={}",
            gh_property(&format!("mcpsum: {}", f.title))
        ));
        let mut message = f.summary;
        if !f.detail.is_empty() {
            message.push('\n');
            message.push_str(f.detail.trim_end());
        }
        message.push_str("\n\nhint: ");
        message.push_str(&f.hint);
        out.push_str(&format!(
            "::{} {}::{}\n",
            f.level.github(),
            props.join(","),
            gh_data(&message)
        ));
    }
    out
}

/// Severity of one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Error,
    Warning,
    Note,
}

impl Level {
    fn sarif(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "note",
        }
    }

    fn github(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "notice",
        }
    }
}

/// One result, before it is written in either format.
struct Finding {
    /// The rule's id (one per kind of drift).
    rule: String,
    level: Level,
    /// A short title: the rule and the server.
    title: String,
    /// One line: what changed, where. Server text in it is sanitized, not yet escaped.
    summary: String,
    /// The reviewer's diff or the error's detail lines (sanitized, uncoloured), possibly empty.
    detail: String,
    /// What `detail` is, as a SARIF property name: `diff` or `details`.
    detail_name: &'static str,
    /// The next step.
    hint: String,
    /// Where in the lockfile, and whether the span is the whole value (else only its start).
    span: Option<(Span, bool)>,
    /// Stable identity across runs, for fingerprints.
    identity: String,
    properties: Map<String, Value>,
}

fn findings(report: &Report<'_>) -> Vec<Finding> {
    let locator = Locator::new(report.lock_text);
    let mut out = Vec::new();
    for (server, outcome) in report.results {
        match outcome {
            Outcome::Checked(d) => {
                for c in &d.items {
                    out.push(item_finding(&locator, server, c));
                }
                for f in &d.fields {
                    out.push(field_finding(&locator, server, f, report.strict));
                }
            }
            Outcome::Failed(e) => {
                let mut properties = Map::new();
                properties.insert("server".into(), json!(server));
                properties.insert("error".into(), json!(e.one_line()));
                out.push(Finding {
                    rule: "server-not-verified".into(),
                    level: Level::Error,
                    title: format!("server `{server}` could not be verified"),
                    summary: sanitize_line(&e.one_line()),
                    detail: details_of(&e.to_string()),
                    detail_name: "details",
                    hint: e.hint_text().map_or_else(
                        || format!("run `mcpsum verify --name {server}` to see why"),
                        sanitize_line,
                    ),
                    span: locator.server(server).map(|s| (s, false)),
                    identity: format!("{server}\0not-verified"),
                    properties,
                });
            }
        }
    }
    out
}

fn item_finding(locator: &Locator, server: &str, c: &ItemChange) -> Finding {
    let noun = c.kind.noun();
    let key = sanitize_line(&c.key);
    let summary = match c.change {
        "added" => {
            format!("server `{server}` now lists {noun} `{key}`, which the lockfile does not pin")
        }
        "removed" => format!("server `{server}` no longer lists the locked {noun} `{key}`"),
        _ => format!("{noun} `{key}` of server `{server}` changed since it was locked"),
    };
    let span = if c.change == "added" {
        locator
            .field(server, c.kind.field())
            .map(|s| (s, false))
            .or_else(|| locator.server(server).map(|s| (s, false)))
    } else {
        locator.item(server, c.kind, &c.key).map(|s| (s, true))
    };
    let one = Drift {
        items: vec![c.clone()],
        fields: Vec::new(),
    };
    let mut properties = Map::new();
    properties.insert("server".into(), json!(server));
    properties.insert("kind".into(), json!(noun));
    properties.insert("key".into(), json!(c.key));
    properties.insert("change".into(), json!(c.change));
    properties.insert("class".into(), json!(Class::Definitional));
    properties.insert("lockedDigest".into(), json!(c.locked_digest));
    properties.insert("liveDigest".into(), json!(c.live_digest));
    Finding {
        rule: item_rule_id(c.kind, c.change),
        level: Level::Error,
        title: format!("{noun} {} (server `{server}`)", c.change),
        summary,
        detail: plain(&drift::render(&one, "")),
        detail_name: "diff",
        hint: definitional_hint(server),
        span,
        identity: format!("{server}\0{}\0{}\0{}", c.kind.field(), c.key, c.change),
        properties,
    }
}

fn field_finding(locator: &Locator, server: &str, f: &FieldChange, strict: bool) -> Finding {
    let rule = field_rule(f);
    let (level, hint) = match f.class {
        Class::Definitional => (Level::Error, definitional_hint(server)),
        _ if strict => (
            Level::Warning,
            format!(
                "informational drift fails `--strict`; if the new value is expected, run `mcpsum lock --name {server}` and commit the lockfile"
            ),
        ),
        _ => (
            Level::Note,
            format!(
                "informational: allowed, and clients still see the locked value; `mcpsum lock --name {server}` records the new one"
            ),
        ),
    };
    let summary = match rule.id {
        "protocol-version-dropped" => format!(
            "server `{server}` no longer lists the locked protocol version {}",
            sanitize_line(&f.locked.to_string())
        ),
        "era-changed" => format!(
            "server `{server}` now speaks another protocol era ({} locked, {} now)",
            sanitize_line(&f.locked.to_string()),
            sanitize_line(&f.live.to_string())
        ),
        _ => format!(
            "`{}` of server `{server}` changed since it was locked",
            f.field
        ),
    };
    let one = Drift {
        items: Vec::new(),
        fields: vec![f.clone()],
    };
    let mut properties = Map::new();
    properties.insert("server".into(), json!(server));
    properties.insert("field".into(), json!(f.field));
    properties.insert("class".into(), json!(f.class));
    properties.insert("locked".into(), f.locked.clone());
    properties.insert("live".into(), f.live.clone());
    Finding {
        title: format!("{} (server `{server}`)", rule.short),
        rule: rule.id.to_owned(),
        level,
        summary,
        detail: plain(&drift::render(&one, "")),
        detail_name: "diff",
        hint,
        span: locator
            .field(server, rule.field)
            .or_else(|| locator.field(server, "protocolVersion"))
            .map(|s| (s, true))
            .or_else(|| locator.server(server).map(|s| (s, false))),
        identity: format!("{server}\0{}", f.field),
        properties,
    }
}

fn definitional_hint(server: &str) -> String {
    format!(
        "review the change with `mcpsum verify --name {server}`; if it is expected, run `mcpsum lock --name {server}` and commit the lockfile, otherwise do not use the server"
    )
}

/// An error's detail lines (the server's last stderr lines), sanitized; its message and causes
/// are the summary already.
fn details_of(rendered: &str) -> String {
    let body = rendered.split("\n\nhint: ").next().unwrap_or_default();
    let lines: Vec<&str> = body
        .lines()
        .skip(1)
        .map(str::trim_start)
        .filter(|l| !l.starts_with("caused by: "))
        .collect();
    sanitize(&lines.join("\n"))
}

/// Text without colour codes (`drift::render` paints; the CI formats are never coloured).
fn plain(text: &str) -> String {
    anstream::adapter::strip_str(text).to_string()
}

/// A plain-text SARIF message: `\`, `[` and `]` are backslash-escaped so no text can form an
/// embedded link (SARIF 2.1.0 §3.11.6), and `{`/`}` are doubled as the placeholder syntax
/// requires (§3.11.5).
fn sarif_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '{' => out.push_str("{{"),
            '}' => out.push_str("}}"),
            _ => out.push(c),
        }
    }
    out
}

/// A workflow command's message: `%`, CR and LF are percent-encoded, as the runner decodes
/// them, so the whole message stays on the command's one line.
fn gh_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: as [`gh_data`], plus `:` and `,`, which would end the
/// value or the property list.
fn gh_property(text: &str) -> String {
    gh_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// The lockfile as the report names it: relative to the current directory when it is inside it
/// (what code scanning and the Actions runner resolve against the checkout), else absolute.
struct Target {
    /// For `file=`.
    display: String,
    /// For `artifactLocation.uri`: a relative reference or a `file://` URI, percent-encoded.
    uri: String,
}

impl Target {
    fn of(lockfile: &Path, cwd: Option<&Path>) -> Self {
        let absolute = match cwd {
            Some(c) if lockfile.is_relative() => crate::paths::normalize(&c.join(lockfile)),
            _ => crate::paths::normalize(lockfile),
        };
        let relative = if absolute.is_relative() {
            // No current directory to resolve against: keep the path as given.
            Some(absolute.as_path())
        } else {
            cwd.and_then(|c| absolute.strip_prefix(crate::paths::normalize(c)).ok())
        };
        match relative {
            Some(rel) if !rel.as_os_str().is_empty() => {
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                let uri_parts: Vec<String> = rel
                    .components()
                    .map(|c| percent_encode(os_bytes(c.as_os_str()).as_ref()))
                    .collect();
                Self {
                    display: parts.join("/"),
                    uri: uri_parts.join("/"),
                }
            }
            _ => Self {
                display: absolute.display().to_string(),
                uri: format!(
                    "file://{}",
                    percent_encode(os_bytes(absolute.as_os_str()).as_ref()).replace("%2F", "/")
                ),
            },
        }
    }
}

#[cfg(unix)]
fn os_bytes(s: &std::ffi::OsStr) -> std::borrow::Cow<'_, [u8]> {
    use std::os::unix::ffi::OsStrExt;
    std::borrow::Cow::Borrowed(s.as_bytes())
}

#[cfg(not(unix))]
fn os_bytes(s: &std::ffi::OsStr) -> std::borrow::Cow<'_, [u8]> {
    std::borrow::Cow::Owned(s.to_string_lossy().into_owned().into_bytes())
}

/// Every byte but RFC 3986 unreserved characters as `%XX`.
fn percent_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One kind of result: its SARIF reporting descriptor.
struct Rule {
    id: String,
    name: String,
    short: String,
    full: String,
    help: String,
    level: Level,
    class: &'static str,
}

impl Rule {
    fn to_sarif(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "shortDescription": {"text": self.short},
            "fullDescription": {"text": self.full},
            "help": {"text": self.help},
            "defaultConfiguration": {"level": self.level.sarif()},
            "properties": {"tags": ["mcp", "supply-chain", self.class]},
        })
    }
}

const REVIEW: &str = "Review the change with `mcpsum verify --name SERVER`. If it is expected, run `mcpsum lock --name SERVER` and commit the lockfile; if not, do not use the server.";
const DEFINITIONAL: &str = "Definitional drift: what the model sees is no longer what was reviewed, so `mcpsum verify` exits 1 and `mcpsum proxy` quarantines the server until the change is locked.";
const INFORMATIONAL: &str = "Informational drift: reported and allowed (`mcpsum verify --strict` exits 1 on it); clients still see the locked value.";

fn item_rule_id(kind: Kind, change: &str) -> String {
    format!("{}-{change}", kind.noun().replace(' ', "-"))
}

/// Every rule, in a fixed order (results refer to them by index).
fn rules() -> Vec<Rule> {
    let mut rules = Vec::new();
    for kind in Kind::ALL {
        let noun = kind.noun();
        let name: String = noun
            .split(' ')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect();
        for (change, verb, full) in [
            (
                "added",
                "Added",
                format!("The server lists a {noun} the lockfile does not pin."),
            ),
            (
                "removed",
                "Removed",
                format!("The server no longer lists a {noun} the lockfile pins."),
            ),
            (
                "changed",
                "Changed",
                format!(
                    "A {noun} the lockfile pins has another definition now (its description, schema, annotations or any other field); a changed description can carry new instructions to the model."
                ),
            ),
        ] {
            rules.push(Rule {
                id: item_rule_id(kind, change),
                name: format!("{name}{verb}"),
                short: format!("{noun} {change}"),
                full: format!("{full} {DEFINITIONAL}"),
                help: format!("{full} {DEFINITIONAL} {REVIEW}"),
                level: Level::Error,
                class: "definitional",
            });
        }
    }
    for r in &FIELD_RULES {
        let class = if r.definitional {
            DEFINITIONAL
        } else {
            INFORMATIONAL
        };
        rules.push(Rule {
            id: r.id.into(),
            name: r.name.into(),
            short: r.short.into(),
            full: format!("{} {class}", r.full),
            help: format!("{} {class} {REVIEW}", r.full),
            level: if r.definitional {
                Level::Error
            } else {
                Level::Note
            },
            class: if r.definitional {
                "definitional"
            } else {
                "informational"
            },
        });
    }
    rules.push(Rule {
        id: "lockfile-not-used".into(),
        name: "LockfileNotUsed".into(),
        short: "lockfile could not be used".into(),
        full: "mcpsum could not find, read or validate the lockfile (a digest that does not match its item means the file was edited outside `mcpsum lock`), or a `--name` is not in it, so no server was verified and `mcpsum verify` exits 2.".into(),
        help: "Run `mcpsum verify` to see every problem with its line. Inspect a digest mismatch with `git diff mcp.lock` and restore the file with `git checkout -- mcp.lock` unless the edit is yours and reviewed.".into(),
        level: Level::Error,
        class: "error",
    });
    rules.push(Rule {
        id: "server-not-verified".into(),
        name: "ServerNotVerified".into(),
        short: "server could not be verified".into(),
        full: "mcpsum could not start the server or read its surface (it exited, timed out, spoke no MCP, or its sandbox could not be built), so nothing about it was verified and `mcpsum verify` exits 2.".into(),
        help: "Run `mcpsum verify --name SERVER` to see the error and the server's last stderr lines; its hint says what to change (the command, `--env`, `--timeout-secs` or `policy.sandbox`).".into(),
        level: Level::Error,
        class: "error",
    });
    rules
}

/// A rule for a changed top-level field of an entry.
struct FieldRule {
    id: &'static str,
    name: &'static str,
    short: &'static str,
    full: &'static str,
    definitional: bool,
    /// The entry field its results point at.
    field: &'static str,
}

/// The field rules; the generic `field-changed` comes last.
const FIELD_RULES: [FieldRule; 8] = [
    FieldRule {
        id: "instructions-changed",
        name: "InstructionsChanged",
        short: "instructions changed",
        full: "The server's instructions differ from the locked ones.",
        definitional: true,
        field: "instructions",
    },
    FieldRule {
        id: "era-changed",
        name: "EraChanged",
        short: "protocol era changed",
        full: "The server now speaks another protocol era (initialize or server/discover) than the one it was locked in.",
        definitional: true,
        field: "protocolVersion",
    },
    FieldRule {
        id: "protocol-version-dropped",
        name: "ProtocolVersionDropped",
        short: "locked protocol version dropped",
        full: "A 2026-07-28 server no longer lists the protocol version it was locked with, so it cannot be spoken to as locked.",
        definitional: true,
        field: "supportedVersions",
    },
    FieldRule {
        id: "server-info-changed",
        name: "ServerInfoChanged",
        short: "serverInfo changed",
        full: "The server reports another `serverInfo` (name, version) than the locked one.",
        definitional: false,
        field: "serverInfo",
    },
    FieldRule {
        id: "capabilities-changed",
        name: "CapabilitiesChanged",
        short: "capabilities changed",
        full: "The server reports other capabilities than the locked ones.",
        definitional: false,
        field: "capabilities",
    },
    FieldRule {
        id: "protocol-version-changed",
        name: "ProtocolVersionChanged",
        short: "protocolVersion changed",
        full: "The server negotiates another protocol version than the locked one.",
        definitional: false,
        field: "protocolVersion",
    },
    FieldRule {
        id: "supported-versions-changed",
        name: "SupportedVersionsChanged",
        short: "supportedVersions changed",
        full: "A 2026-07-28 server lists other supported versions than the locked ones.",
        definitional: false,
        field: "supportedVersions",
    },
    FieldRule {
        id: "field-changed",
        name: "FieldChanged",
        short: "entry field changed",
        full: "A field of the server's entry differs from what the live server reports.",
        definitional: false,
        field: "protocolVersion",
    },
];

/// The rule for a changed top-level field (`drift` names the fields).
fn field_rule(f: &FieldChange) -> &'static FieldRule {
    let id = match f.field {
        "instructions" => "instructions-changed",
        "era" => "era-changed",
        "serverInfo" => "server-info-changed",
        "capabilities" => "capabilities-changed",
        "protocolVersion" => "protocol-version-changed",
        "supportedVersions" => "supported-versions-changed",
        other if other.starts_with("supportedVersions (") => "protocol-version-dropped",
        _ => "field-changed",
    };
    FIELD_RULES
        .iter()
        .find(|r| r.id == id)
        .unwrap_or(&FIELD_RULES[FIELD_RULES.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_escapes_follow_the_runner() {
        assert_eq!(gh_data("a%b\r\nc:d,e"), "a%25b%0D%0Ac:d,e");
        assert_eq!(gh_property("a%b\r\nc:d,e"), "a%25b%0D%0Ac%3Ad%2Ce");
        // Escaping `%` first keeps an already-escaped-looking input literal.
        assert_eq!(gh_data("%0A"), "%250A");
    }

    #[test]
    fn sarif_text_cannot_form_links_or_placeholders() {
        assert_eq!(
            sarif_text(r"see [here](https://x) {0} \[a\]"),
            r"see \[here\](https://x) {{0}} \\\[a\\\]"
        );
    }

    #[test]
    fn targets_are_relative_inside_the_directory_and_file_uris_outside() {
        let cwd = Path::new("/work/repo");
        let t = Target::of(Path::new("mcp.lock"), Some(cwd));
        assert_eq!(
            (t.display.as_str(), t.uri.as_str()),
            ("mcp.lock", "mcp.lock")
        );
        let t = Target::of(Path::new("/work/repo/sub dir/./mcp.lock"), Some(cwd));
        assert_eq!(
            (t.display.as_str(), t.uri.as_str()),
            ("sub dir/mcp.lock", "sub%20dir/mcp.lock")
        );
        let t = Target::of(Path::new("../other/a:b%.lock"), Some(cwd));
        assert_eq!(
            (t.display.as_str(), t.uri.as_str()),
            ("/work/other/a:b%.lock", "file:///work/other/a%3Ab%25.lock")
        );
        let t = Target::of(Path::new("/x/mcp.lock"), None);
        assert_eq!(t.uri, "file:///x/mcp.lock");
        let t = Target::of(Path::new("./a b/mcp.lock"), None);
        assert_eq!(
            (t.display.as_str(), t.uri.as_str()),
            ("a b/mcp.lock", "a%20b/mcp.lock")
        );
    }

    #[test]
    fn every_field_drift_names_has_its_own_rule() {
        for field in [
            "instructions",
            "era",
            "serverInfo",
            "capabilities",
            "protocolVersion",
            "supportedVersions",
            "supportedVersions (the locked protocolVersion is no longer listed)",
        ] {
            let f = FieldChange {
                field: Box::leak(field.to_owned().into_boxed_str()),
                class: Class::Informational,
                locked: Value::Null,
                live: Value::Null,
            };
            assert_ne!(field_rule(&f).id, "field-changed", "{field}");
        }
        let ids: Vec<String> = rules().into_iter().map(|r| r.id).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "{ids:?}");
        assert!(ids.contains(&"resource-template-changed".to_owned()));
    }
}
