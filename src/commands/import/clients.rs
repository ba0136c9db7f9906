//! Where each client keeps its MCP servers, and readers that turn a config file into entries.
//!
//! A reader keeps, for each stdio entry, the byte ranges of its `command` and `args` values, so
//! `edit.rs` can splice just those and leave every other byte of the file alone. Environment
//! variable values are never read: only their names. The shapes, as each client documents them:
//!
//! - Claude Desktop: `claude_desktop_config.json`, `{"mcpServers": {NAME: {command, args, env}}}`
//!   (`~/.config/Claude/` on Linux, `~/Library/Application Support/Claude/` on macOS).
//! - Claude Code: project `.mcp.json` with `mcpServers`; the user file `~/.claude.json` has
//!   `mcpServers` at the top (user scope) and `projects.<path>.mcpServers` (local scope). Entries
//!   may say `"type": "stdio" | "http" | "sse"`; `${VAR}` and `${VAR:-default}` are expanded in
//!   `command`, `args`, `env`, `url` and `headers`.
//! - Cursor: `.cursor/mcp.json` and `~/.cursor/mcp.json`, `mcpServers`; remote entries have `url`.
//! - VS Code: `.vscode/mcp.json` (and the user profile's `mcp.json`), key `servers`, JSON with
//!   comments and trailing commas; entries say `"type": "stdio" | "http" | "sse"`, may use
//!   `envFile`, and `inputs` defines `${input:ID}` prompts.
//! - Codex: `~/.codex/config.toml` (or `$CODEX_HOME`) and a trusted project's `.codex/config.toml`,
//!   tables `[mcp_servers.NAME]` with `command`, `args`, `env`, `env_vars`, `cwd`, `enabled`;
//!   remote ones have `url`.
//! - Windsurf: `~/.codeium/windsurf/mcp_config.json`, `mcpServers`; remote ones have `serverUrl`
//!   (or `url`); `${VAR}` is interpolated in `command`, `args`, `env`, `serverUrl`, `url`, `headers`.

use std::ops::Range;
use std::path::{Path, PathBuf};

use jsonc_parser::ast;

use crate::lockfile::valid_env_name;

/// A client whose config `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Client {
    /// Claude Desktop.
    ClaudeDesktop,
    /// Claude Code.
    ClaudeCode,
    /// Cursor.
    Cursor,
    /// VS Code.
    VsCode,
    /// Codex.
    Codex,
    /// Windsurf.
    Windsurf,
    /// A file given with `--from PATH` that belongs to none of the above.
    Other,
}

impl Client {
    /// The clients `--from` names, in search order.
    pub const NAMED: [Client; 6] = [
        Client::ClaudeDesktop,
        Client::ClaudeCode,
        Client::Cursor,
        Client::VsCode,
        Client::Codex,
        Client::Windsurf,
    ];

    /// The name `--from` takes, also used to tell clashing lock names apart.
    pub fn slug(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::VsCode => "vscode",
            Client::Codex => "codex",
            Client::Windsurf => "windsurf",
            Client::Other => "file",
        }
    }

    /// The client's name for people.
    pub fn title(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::VsCode => "VS Code",
            Client::Codex => "Codex",
            Client::Windsurf => "Windsurf",
            Client::Other => "config file",
        }
    }

    /// The client `--from` names, if `s` is one.
    pub fn parse(s: &str) -> Option<Client> {
        Client::NAMED.into_iter().find(|c| c.slug() == s)
    }
}

/// How a file lays out its servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `{"mcpServers": {...}}` (Claude Desktop, Claude Code's `.mcp.json`, Cursor, Windsurf).
    McpServers,
    /// `{"servers": {...}}` (VS Code).
    Servers,
    /// `~/.claude.json`: `mcpServers` and `projects.<path>.mcpServers`.
    ClaudeUser,
    /// Codex's TOML: `[mcp_servers.NAME]`.
    CodexToml,
    /// A file of unknown origin: `mcpServers`, else `servers`.
    AnyJson,
}

/// A config file to read.
#[derive(Debug, Clone)]
pub struct Source {
    /// Where it is (absolute).
    pub path: PathBuf,
    /// Whose it is.
    pub client: Client,
    /// Its layout.
    pub shape: Shape,
}

impl Source {
    /// Whether the file is TOML (else JSON or JSON with comments).
    pub fn is_toml(&self) -> bool {
        self.shape == Shape::CodexToml
    }
}

/// Where each client's configs may be, project files (under `cwd`) first.
pub fn candidates(client: Client, cwd: &Path, home: Option<&Path>) -> Vec<Source> {
    let mut out = project_candidates(client, cwd);
    out.extend(user_candidates(client, home));
    out
}

/// Where each client keeps a project's config, under `cwd`.
fn project_candidates(client: Client, cwd: &Path) -> Vec<Source> {
    let src = |rel: &str, shape| Source {
        path: cwd.join(rel),
        client,
        shape,
    };
    match client {
        Client::ClaudeCode => vec![src(".mcp.json", Shape::McpServers)],
        Client::Cursor => vec![src(".cursor/mcp.json", Shape::McpServers)],
        Client::VsCode => vec![src(".vscode/mcp.json", Shape::Servers)],
        Client::Codex => vec![src(".codex/config.toml", Shape::CodexToml)],
        Client::ClaudeDesktop | Client::Windsurf | Client::Other => Vec::new(),
    }
}

/// Where each client keeps the user's own config (every project of the user sees its servers).
fn user_candidates(client: Client, home: Option<&Path>) -> Vec<Source> {
    let src = |path: PathBuf, shape| Source {
        path,
        client,
        shape,
    };
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".config")));
    let mac = home.map(|h| h.join("Library/Application Support"));
    let mut out = Vec::new();
    match client {
        Client::ClaudeDesktop => {
            for base in [config_home, mac].into_iter().flatten() {
                out.push(src(
                    base.join("Claude/claude_desktop_config.json"),
                    Shape::McpServers,
                ));
            }
        }
        Client::ClaudeCode => {
            if let Some(h) = home {
                out.push(src(h.join(".claude.json"), Shape::ClaudeUser));
            }
        }
        Client::Cursor => {
            if let Some(h) = home {
                out.push(src(h.join(".cursor/mcp.json"), Shape::McpServers));
            }
        }
        Client::VsCode => {
            for base in [config_home, mac].into_iter().flatten() {
                out.push(src(base.join("Code/User/mcp.json"), Shape::Servers));
            }
        }
        Client::Codex => {
            let codex_home = std::env::var_os("CODEX_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".codex")));
            if let Some(c) = codex_home {
                out.push(src(c.join("config.toml"), Shape::CodexToml));
            }
        }
        Client::Windsurf => {
            if let Some(h) = home {
                out.push(src(
                    h.join(".codeium/windsurf/mcp_config.json"),
                    Shape::McpServers,
                ));
            }
        }
        Client::Other => {}
    }
    out
}

/// Whether the file at `real` (symlinks resolved) is a user-level config: one a client keeps for
/// the user rather than for a project (`~/.cursor/mcp.json`, `~/.claude.json`, Claude Desktop's
/// config, ...), wherever `import` runs from, also when that is the home folder itself.
pub fn is_user_level(real: &Path, home: Option<&Path>) -> bool {
    Client::NAMED
        .iter()
        .flat_map(|c| user_candidates(*c, home))
        .any(|s| s.path == real || fs_err::canonicalize(&s.path).is_ok_and(|p| p == real))
}

/// The client and layout of a file given by path, from its name and folder.
pub fn source_for_path(path: &Path) -> Source {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (client, shape) = if name.ends_with(".toml") {
        (Client::Codex, Shape::CodexToml)
    } else if name == ".claude.json" {
        (Client::ClaudeCode, Shape::ClaudeUser)
    } else if name == ".mcp.json" {
        (Client::ClaudeCode, Shape::McpServers)
    } else if name == "claude_desktop_config.json" {
        (Client::ClaudeDesktop, Shape::McpServers)
    } else if name == "mcp_config.json" && parent == "windsurf" {
        (Client::Windsurf, Shape::McpServers)
    } else if name == "mcp.json" && parent == ".cursor" {
        (Client::Cursor, Shape::McpServers)
    } else if name == "mcp.json" && (parent == ".vscode" || parent == "User") {
        (Client::VsCode, Shape::Servers)
    } else {
        (Client::Other, Shape::AnyJson)
    };
    Source {
        path: path.to_path_buf(),
        client,
        shape,
    }
}

/// One server entry of a config file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its key in the file.
    pub name: String,
    /// Where it is in the file, for messages: `mcpServers.github`.
    pub location: String,
    /// What it is.
    pub kind: Kind,
}

/// What an entry is, as far as `import` is concerned.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A server the client starts as a process: it can be locked and routed.
    Stdio(Stdio),
    /// Already `mcpsum proxy --name NAME`: left alone.
    Routed {
        /// The `--name` it runs, if it says.
        lock_name: Option<String>,
    },
    /// A remote server (HTTP, SSE): listed, never changed.
    Remote {
        /// `http`, `sse`, or how the file says it.
        transport: String,
        /// `scheme://host` of its URL, without the path, which may carry a key.
        origin: Option<String>,
    },
    /// Not imported, and why.
    Skipped(String),
}

/// A stdio entry: what to lock and where its values are in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Stdio {
    /// `command` followed by `args`.
    pub argv: Vec<String>,
    /// Names of the variables its `env` (and Codex's `env_vars`) sets or forwards.
    pub env: Vec<String>,
    /// Where to splice.
    pub splice: Splice,
}

/// The byte ranges a rewrite replaces.
#[derive(Debug, Clone, PartialEq)]
pub struct Splice {
    /// The `command` value.
    pub command: Range<usize>,
    /// The `args` value, or where to add one.
    pub args: ArgsAt,
}

/// Where the new `args` goes.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgsAt {
    /// Replace the existing value.
    Replace(Range<usize>),
    /// Insert `before`, the array, then `after` at byte `at`.
    Insert {
        /// Byte offset.
        at: usize,
        /// Text before the array (`, "args": `).
        before: String,
        /// Text after the array (a line ending).
        after: String,
    },
}

/// A file read: its entries and the string values a diff must not show.
#[derive(Debug)]
pub struct Parsed {
    /// Every server entry, in file order.
    pub entries: Vec<Entry>,
    /// Byte ranges of string values other than commands and arguments (environment values,
    /// headers, URLs, the client's own settings): masked in every diff `import` prints.
    pub masked: Vec<Range<usize>>,
}

/// Reads `text` as `source` says. The error is one line, without file content.
pub fn parse(source: &Source, text: &str) -> Result<Parsed, String> {
    // A byte order mark is kept in the file; ranges count from the file's first byte.
    let offset = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let body = &text[offset..];
    let mut parsed = if source.is_toml() {
        parse_toml(body)?
    } else {
        parse_json(source.shape, body)?
    };
    if offset > 0 {
        for e in &mut parsed.entries {
            if let Kind::Stdio(s) = &mut e.kind {
                s.splice.command = shift(&s.splice.command, offset);
                match &mut s.splice.args {
                    ArgsAt::Replace(r) => *r = shift(r, offset),
                    ArgsAt::Insert { at, .. } => *at += offset,
                }
            }
        }
        parsed.masked = parsed.masked.iter().map(|r| shift(r, offset)).collect();
    }
    Ok(parsed)
}

fn shift(r: &Range<usize>, by: usize) -> Range<usize> {
    r.start + by..r.end + by
}

/// A value read (or why it could not be), with its byte range.
type Located<T> = Option<Result<(T, Range<usize>), String>>;

/// What a reader found in one entry, before it becomes an [`Entry`].
struct Fields {
    command: Located<String>,
    args: Located<Vec<String>>,
    env_names: Result<Vec<String>, String>,
    transport: Option<String>,
    url: Option<String>,
    disabled: bool,
    cwd: bool,
    env_file: bool,
}

/// Turns the fields of one entry into its kind. `insert_args` says where an `args` would go.
fn classify(f: Fields, insert_args: impl FnOnce(&Range<usize>) -> Result<ArgsAt, String>) -> Kind {
    let remote_type = f
        .transport
        .as_deref()
        .filter(|t| !matches!(*t, "stdio" | "local"));
    if let Some(t) = remote_type {
        return Kind::Remote {
            transport: t.to_owned(),
            origin: f.url.as_deref().map(origin),
        };
    }
    let (command, command_range) = match f.command {
        Some(Ok(c)) => c,
        Some(Err(e)) => return Kind::Skipped(e),
        None => {
            return match f.url {
                Some(u) => Kind::Remote {
                    transport: "http".into(),
                    origin: Some(origin(&u)),
                },
                None => Kind::Skipped("it has neither `command` nor a URL".into()),
            };
        }
    };
    let (args, args_range) = match f.args {
        Some(Ok((a, r))) => (a, Some(r)),
        Some(Err(e)) => return Kind::Skipped(e),
        None => (Vec::new(), None),
    };
    if is_mcpsum(&command) && args.first().is_some_and(|a| a == "proxy") {
        let lock_name = args
            .iter()
            .position(|a| a == "--name")
            .and_then(|i| args.get(i + 1))
            .cloned();
        return Kind::Routed { lock_name };
    }
    if f.disabled {
        return Kind::Skipped("it is disabled in this file".into());
    }
    if command.is_empty() {
        return Kind::Skipped("its `command` is empty".into());
    }
    if f.cwd {
        return Kind::Skipped(
            "it sets `cwd`, and `mcpsum proxy` runs servers in the client's working directory; lock it by hand from that directory".into(),
        );
    }
    if f.env_file {
        return Kind::Skipped(
            "it loads `envFile`, whose variable names mcpsum cannot know without reading their values; lock it by hand with `--env NAME` for each".into(),
        );
    }
    let env = match f.env_names {
        Ok(e) => e,
        Err(e) => return Kind::Skipped(e),
    };
    let mut argv = vec![command];
    argv.extend(args);
    if let Some(var) = argv.iter().find_map(|a| client_variable(a)) {
        return Kind::Skipped(format!(
            "it uses `{var}`, which the client fills in when it starts the server, while mcpsum runs the locked command as it is; lock it by hand with the value"
        ));
    }
    let args = match args_range {
        Some(r) => ArgsAt::Replace(r),
        None => match insert_args(&command_range) {
            Ok(a) => a,
            Err(e) => return Kind::Skipped(e),
        },
    };
    Kind::Stdio(Stdio {
        argv,
        env,
        splice: Splice {
            command: command_range,
            args,
        },
    })
}

/// Whether `command` runs mcpsum (any path whose file name is `mcpsum`).
pub fn is_mcpsum(command: &str) -> bool {
    Path::new(command)
        .file_name()
        .is_some_and(|n| n == "mcpsum")
}

/// The first `${...}` in `s`, without its default (`${VAR:-…}`): every client that interpolates
/// uses this form.
fn client_variable(s: &str) -> Option<String> {
    let start = s.find("${")?;
    let rest = &s[start..];
    let close = rest.find('}');
    let default = rest.find(":-").filter(|d| close.is_none_or(|c| *d < c));
    Some(match (default, close) {
        (Some(d), _) => format!("{}…}}", &rest[..d + 2]),
        (None, Some(c)) => rest[..=c].to_owned(),
        (None, None) => rest.to_owned(),
    })
}

/// `scheme://host[:port]` of a URL; the path and query are left out (they may carry a key).
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or(authority);
    if scheme.is_empty() {
        host.to_owned()
    } else {
        format!("{scheme}://{host}")
    }
}

fn check_env_names(names: Vec<String>, what: &str) -> Result<Vec<String>, String> {
    match names.iter().find(|n| !valid_env_name(n)) {
        Some(bad) => Err(format!(
            "its `{what}` names `{bad}`, which is not a variable name mcpsum can pass through"
        )),
        None => Ok(names),
    }
}

// ----- JSON and JSON with comments -----

fn parse_json(shape: Shape, body: &str) -> Result<Parsed, String> {
    let parsed = jsonc_parser::parse_to_ast(
        body,
        &jsonc_parser::CollectOptions::default(),
        &jsonc_parser::ParseOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    let Some(ast::Value::Object(root)) = parsed.value else {
        return Err("the top level is not a JSON object".into());
    };
    let mut entries = Vec::new();
    let mut keep = Vec::new();
    match shape {
        Shape::McpServers => json_servers(&root, "mcpServers", "", &mut entries, &mut keep)?,
        Shape::Servers => json_servers(&root, "servers", "", &mut entries, &mut keep)?,
        Shape::AnyJson => {
            if unique_prop(&root, "mcpServers")?.is_some() {
                json_servers(&root, "mcpServers", "", &mut entries, &mut keep)?;
            } else {
                json_servers(&root, "servers", "", &mut entries, &mut keep)?;
            }
        }
        Shape::ClaudeUser => {
            json_servers(&root, "mcpServers", "", &mut entries, &mut keep)?;
            if let Some(projects) = unique_prop(&root, "projects")? {
                let ast::Value::Object(projects) = &projects.value else {
                    return Err("`projects` is not an object".into());
                };
                check_duplicates(projects, "projects")?;
                for p in &projects.properties {
                    if let ast::Value::Object(project) = &p.value {
                        let prefix = format!(
                            "projects[{}].",
                            super::literal::json_string(p.name.as_str())
                        );
                        json_servers(project, "mcpServers", &prefix, &mut entries, &mut keep)?;
                    }
                }
            }
        }
        Shape::CodexToml => return Err("not a JSON layout".into()),
    }
    let mut strings = Vec::new();
    json_strings(&ast::Value::Object(root), &mut strings);
    Ok(Parsed {
        entries,
        masked: unkept(strings, &keep),
    })
}

/// The property `name` of `obj`; two of them is an error (clients disagree on which one wins).
fn unique_prop<'a, 'b>(
    obj: &'b ast::Object<'a>,
    name: &str,
) -> Result<Option<&'b ast::ObjectProp<'a>>, String> {
    let mut found = obj.properties.iter().filter(|p| p.name.as_str() == name);
    let first = found.next();
    if found.next().is_some() {
        return Err(format!("`{name}` appears twice in one object"));
    }
    Ok(first)
}

fn check_duplicates(obj: &ast::Object<'_>, what: &str) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for p in &obj.properties {
        if !seen.insert(p.name.as_str()) {
            return Err(format!(
                "`{what}` has two entries named {}",
                super::literal::json_string(p.name.as_str())
            ));
        }
    }
    Ok(())
}

fn json_servers(
    parent: &ast::Object<'_>,
    key: &str,
    prefix: &str,
    entries: &mut Vec<Entry>,
    keep: &mut Vec<Range<usize>>,
) -> Result<(), String> {
    let Some(servers) = unique_prop(parent, key)? else {
        return Ok(());
    };
    let ast::Value::Object(servers) = &servers.value else {
        return Err(format!("`{prefix}{key}` is not an object"));
    };
    check_duplicates(servers, &format!("{prefix}{key}"))?;
    for p in &servers.properties {
        let name = p.name.as_str().to_owned();
        let location = format!("{prefix}{key}.{name}");
        let kind = match &p.value {
            ast::Value::Object(o) => json_entry(o, keep).unwrap_or_else(Kind::Skipped),
            _ => Kind::Skipped("it is not an object".into()),
        };
        entries.push(Entry {
            name,
            location,
            kind,
        });
    }
    Ok(())
}

fn json_entry(o: &ast::Object<'_>, keep: &mut Vec<Range<usize>>) -> Result<Kind, String> {
    let string = |key: &str| -> Result<Option<(String, Range<usize>)>, String> {
        match unique_prop(o, key)? {
            None => Ok(None),
            Some(p) => match &p.value {
                ast::Value::StringLit(s) => Ok(Some((s.value.to_string(), range(s.range)))),
                _ => Err(format!("its `{key}` is not a string")),
            },
        }
    };
    let command = unique_prop(o, "command")?.map(|p| match &p.value {
        ast::Value::StringLit(s) => {
            keep.push(range(s.range));
            Ok((s.value.to_string(), range(s.range)))
        }
        _ => Err("its `command` is not a string".to_owned()),
    });
    let args = unique_prop(o, "args")?.map(|p| match &p.value {
        ast::Value::Array(a) => {
            keep.push(range(a.range));
            a.elements
                .iter()
                .map(|v| match v {
                    ast::Value::StringLit(s) => Ok(s.value.to_string()),
                    _ => Err("its `args` has an item that is not a string".to_owned()),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|a2| (a2, range(a.range)))
        }
        _ => Err("its `args` is not a list".to_owned()),
    });
    let env_names = match unique_prop(o, "env")? {
        None => Ok(Vec::new()),
        Some(p) => match &p.value {
            ast::Value::Object(env) => check_duplicates(env, "env").and_then(|()| {
                check_env_names(
                    env.properties
                        .iter()
                        .map(|p| p.name.as_str().to_owned())
                        .collect(),
                    "env",
                )
            }),
            _ => Err("its `env` is not an object".into()),
        },
    };
    let transport = string("type")?;
    if let Some((_, r)) = &transport {
        keep.push(r.clone());
    }
    let url = match string("url")? {
        Some(u) => Some(u.0),
        None => string("serverUrl")?.map(|u| u.0),
    };
    let disabled = matches!(
        unique_prop(o, "disabled")?.map(|p| &p.value),
        Some(ast::Value::BooleanLit(b)) if b.value
    );
    let fields = Fields {
        command,
        args,
        env_names,
        transport: transport.map(|t| t.0),
        url,
        disabled,
        cwd: unique_prop(o, "cwd")?.is_some(),
        env_file: unique_prop(o, "envFile")?.is_some(),
    };
    Ok(classify(fields, |command| {
        Ok(ArgsAt::Insert {
            at: command.end,
            before: ", \"args\": ".into(),
            after: String::new(),
        })
    }))
}

fn range(r: jsonc_parser::common::Range) -> Range<usize> {
    r.start..r.end
}

/// Every string value (not key) in the tree.
fn json_strings(v: &ast::Value<'_>, out: &mut Vec<Range<usize>>) {
    match v {
        ast::Value::StringLit(s) => out.push(range(s.range)),
        ast::Value::Array(a) => a.elements.iter().for_each(|e| json_strings(e, out)),
        ast::Value::Object(o) => o
            .properties
            .iter()
            .for_each(|p| json_strings(&p.value, out)),
        _ => {}
    }
}

/// The ranges of `all` that no range of `keep` contains.
fn unkept(all: Vec<Range<usize>>, keep: &[Range<usize>]) -> Vec<Range<usize>> {
    all.into_iter()
        .filter(|r| !keep.iter().any(|k| k.start <= r.start && r.end <= k.end))
        .collect()
}

// ----- TOML (Codex) -----

fn parse_toml(body: &str) -> Result<Parsed, String> {
    let doc = toml_edit::Document::parse(body).map_err(|e| {
        // The message only: the error's own rendering quotes the line, which may hold a value.
        let at = e.span().map(|s| line_col(body, s.start));
        match at {
            Some((l, c)) => format!("{} on line {l} column {c}", e.message().trim_end()),
            None => e.message().trim_end().to_owned(),
        }
    })?;
    let mut entries = Vec::new();
    let mut keep = Vec::new();
    match doc.get("mcp_servers") {
        None => {}
        Some(toml_edit::Item::Table(t)) => {
            for (name, item) in t.iter() {
                let kind = match item {
                    toml_edit::Item::Table(st) => {
                        toml_entry(&TomlTable::Table(st), body, &mut keep)
                    }
                    toml_edit::Item::Value(toml_edit::Value::InlineTable(it)) => {
                        toml_entry(&TomlTable::Inline(it), body, &mut keep)
                    }
                    _ => Kind::Skipped("it is not a table".into()),
                };
                entries.push(Entry {
                    name: name.to_owned(),
                    location: format!("mcp_servers.{name}"),
                    kind,
                });
            }
        }
        Some(toml_edit::Item::Value(toml_edit::Value::InlineTable(t))) => {
            for (name, v) in t.iter() {
                let kind = match v {
                    toml_edit::Value::InlineTable(it) => {
                        toml_entry(&TomlTable::Inline(it), body, &mut keep)
                    }
                    _ => Kind::Skipped("it is not a table".into()),
                };
                entries.push(Entry {
                    name: name.to_owned(),
                    location: format!("mcp_servers.{name}"),
                    kind,
                });
            }
        }
        Some(_) => return Err("`mcp_servers` is not a table".into()),
    }
    let mut strings = Vec::new();
    toml_strings(doc.as_item(), &mut strings);
    Ok(Parsed {
        entries,
        masked: unkept(strings, &keep),
    })
}

fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// A server's table in either TOML form.
enum TomlTable<'a> {
    Table(&'a toml_edit::Table),
    Inline(&'a toml_edit::InlineTable),
}

impl TomlTable<'_> {
    fn get(&self, key: &str) -> Option<TomlNode<'_>> {
        match self {
            TomlTable::Table(t) => t.get(key).map(|i| match i {
                toml_edit::Item::Value(v) => TomlNode::Value(v),
                toml_edit::Item::Table(t) => TomlNode::Table(t),
                _ => TomlNode::Other,
            }),
            TomlTable::Inline(t) => t.get(key).map(TomlNode::Value),
        }
    }
}

enum TomlNode<'a> {
    Value(&'a toml_edit::Value),
    Table(&'a toml_edit::Table),
    Other,
}

fn toml_entry(t: &TomlTable<'_>, body: &str, keep: &mut Vec<Range<usize>>) -> Kind {
    let command = t.get("command").map(|n| match n {
        TomlNode::Value(toml_edit::Value::String(s)) => match s.span() {
            Some(r) => {
                keep.push(r.clone());
                Ok((s.value().clone(), r))
            }
            None => Err("mcpsum cannot locate its `command` in the file".to_owned()),
        },
        _ => Err("its `command` is not a string".to_owned()),
    });
    let args = t.get("args").map(|n| match n {
        TomlNode::Value(toml_edit::Value::Array(a)) => {
            let Some(r) = a.span() else {
                return Err("mcpsum cannot locate its `args` in the file".to_owned());
            };
            keep.push(r.clone());
            a.iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| "its `args` has an item that is not a string".to_owned())
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|a2| (a2, r))
        }
        _ => Err("its `args` is not a list".to_owned()),
    });
    let mut names = Vec::new();
    let mut env_err = None;
    match t.get("env") {
        None => {}
        Some(TomlNode::Table(e)) => names.extend(e.iter().map(|(k, _)| k.to_owned())),
        Some(TomlNode::Value(toml_edit::Value::InlineTable(e))) => {
            names.extend(e.iter().map(|(k, _)| k.to_owned()));
        }
        Some(_) => env_err = Some("its `env` is not a table".to_owned()),
    }
    // `env_vars`: names Codex forwards from its own environment, plain or `{ name = ... }`.
    match t.get("env_vars") {
        None => {}
        Some(TomlNode::Value(toml_edit::Value::Array(a))) => {
            for v in a.iter() {
                let n = match v {
                    toml_edit::Value::String(s) => Some(s.value().clone()),
                    toml_edit::Value::InlineTable(it) => {
                        it.get("name").and_then(|n| n.as_str()).map(str::to_owned)
                    }
                    _ => None,
                };
                match n {
                    Some(n) => names.push(n),
                    None => env_err = Some("its `env_vars` has an item without a name".to_owned()),
                }
            }
        }
        Some(_) => env_err = Some("its `env_vars` is not a list".to_owned()),
    }
    let string = |key: &str| match t.get(key) {
        Some(TomlNode::Value(v)) => v.as_str().map(str::to_owned),
        _ => None,
    };
    let disabled = matches!(
        t.get("enabled"),
        Some(TomlNode::Value(toml_edit::Value::Boolean(b))) if !*b.value()
    );
    let fields = Fields {
        command,
        args,
        env_names: match env_err {
            Some(e) => Err(e),
            None => {
                names.sort();
                names.dedup();
                check_env_names(names, "env")
            }
        },
        transport: None,
        url: string("url"),
        disabled,
        cwd: t.get("cwd").is_some(),
        env_file: false,
    };
    classify(fields, |command| {
        match t {
        TomlTable::Inline(_) => Ok(ArgsAt::Insert {
            at: command.end,
            before: ", args = ".into(),
            after: String::new(),
        }),
        TomlTable::Table(tt) if tt.is_dotted() => Err(
            "it has no `args`, and mcpsum adds one only to a `[mcp_servers.NAME]` table, not to dotted keys; add `args = []` by hand".into(),
        ),
        TomlTable::Table(_) => {
            // On a line of its own, after the line holding `command` (its comment stays there).
            let rest = &body[command.end..];
            Ok(match rest.find('\n') {
                Some(i) => {
                    let eol = if rest[..i].ends_with('\r') { "\r\n" } else { "\n" };
                    ArgsAt::Insert {
                        at: command.end + i + 1,
                        before: "args = ".into(),
                        after: eol.into(),
                    }
                }
                None => ArgsAt::Insert {
                    at: body.len(),
                    before: "\nargs = ".into(),
                    after: String::new(),
                },
            })
        }
    }
    })
}

fn toml_strings(item: &toml_edit::Item, out: &mut Vec<Range<usize>>) {
    match item {
        toml_edit::Item::Value(v) => toml_value_strings(v, out),
        toml_edit::Item::Table(t) => t.iter().for_each(|(_, i)| toml_strings(i, out)),
        toml_edit::Item::ArrayOfTables(a) => a
            .iter()
            .for_each(|t| t.iter().for_each(|(_, i)| toml_strings(i, out))),
        toml_edit::Item::None => {}
    }
}

fn toml_value_strings(v: &toml_edit::Value, out: &mut Vec<Range<usize>>) {
    match v {
        toml_edit::Value::String(s) => out.extend(s.span()),
        toml_edit::Value::Array(a) => a.iter().for_each(|e| toml_value_strings(e, out)),
        toml_edit::Value::InlineTable(t) => t.iter().for_each(|(_, e)| toml_value_strings(e, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn src(shape: Shape) -> Source {
        Source {
            path: PathBuf::from("/x"),
            client: Client::Other,
            shape,
        }
    }

    fn stdio(p: &Parsed, i: usize) -> &Stdio {
        match &p.entries[i].kind {
            Kind::Stdio(s) => s,
            k => panic!("entry {i} is {k:?}"),
        }
    }

    #[test]
    fn json_ranges_cover_exactly_the_values() {
        let text = "\u{feff}{\"mcpServers\": {\"a\": {\"command\": \"npx\", // c\n \"args\": [\"-y\",\n \"x\"], \"env\": {\"K\": \"v\"}}}}";
        let p = parse(&src(Shape::McpServers), text).unwrap();
        let s = stdio(&p, 0);
        assert_eq!(&text[s.splice.command.clone()], "\"npx\"");
        let ArgsAt::Replace(r) = &s.splice.args else {
            panic!()
        };
        assert_eq!(&text[r.clone()], "[\"-y\",\n \"x\"]");
        assert_eq!(s.argv, ["npx", "-y", "x"]);
        assert_eq!(s.env, ["K"]);
        let masked: Vec<&str> = p.masked.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(masked, ["\"v\""]);
    }

    #[test]
    fn toml_ranges_cover_exactly_the_values() {
        let text = "model = \"o3\"\n[mcp_servers.a]\ncommand = \"npx\" # runner\r\nenv = { K = \"v\" }\nenv_vars = [\"B\", { name = \"C\", source = \"remote\" }]\n[mcp_servers.b]\ncommand = 'x'";
        let p = parse(&src(Shape::CodexToml), text).unwrap();
        let a = stdio(&p, 0);
        assert_eq!(&text[a.splice.command.clone()], "\"npx\"");
        assert_eq!(a.env, ["B", "C", "K"]);
        let ArgsAt::Insert { at, before, after } = &a.splice.args else {
            panic!()
        };
        assert_eq!(
            &text[..*at],
            "model = \"o3\"\n[mcp_servers.a]\ncommand = \"npx\" # runner\r\n"
        );
        assert_eq!((before.as_str(), after.as_str()), ("args = ", "\r\n"));
        let b = stdio(&p, 1);
        assert_eq!(&text[b.splice.command.clone()], "'x'");
        assert!(
            matches!(&b.splice.args, ArgsAt::Insert { at, before, .. } if *at == text.len() && before == "\nargs = ")
        );
        let masked: Vec<&str> = p.masked.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(masked, ["\"o3\"", "\"v\"", "\"B\"", "\"C\"", "\"remote\""]);
    }

    #[test]
    fn kinds() {
        let text = r#"{"servers": {
            "r": {"type": "http", "url": "https://user:pw@mcp.example.com/k/SECRET?x=1"},
            "w": {"serverUrl": "https://h.example/sse"},
            "p": {"command": "/opt/bin/mcpsum", "args": ["proxy", "--name", "p2", "--lockfile", "/l"]},
            "v": {"type": "stdio", "command": "node", "args": ["${workspaceFolder}/s.js"]},
            "d": {"command": "x", "disabled": true},
            "e": {"command": "x", "env": {"not-a-name": "1"}},
            "f": {"command": "x", "envFile": "${workspaceFolder}/.env"},
            "c": {"command": "x", "cwd": "/tmp"},
            "n": {"command": 3},
            "z": {}
        }}"#;
        let p = parse(&src(Shape::Servers), text).unwrap();
        let kinds: Vec<(&str, String)> = p
            .entries
            .iter()
            .map(|e| {
                let k = match &e.kind {
                    Kind::Remote { transport, origin } => format!("remote {transport} {origin:?}"),
                    Kind::Routed { lock_name } => format!("routed {lock_name:?}"),
                    Kind::Skipped(r) => format!("skip {}", &r[..r.len().min(24)]),
                    Kind::Stdio(s) => format!("stdio {:?}", s.argv),
                };
                (e.name.as_str(), k)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("r", "remote http Some(\"https://mcp.example.com\")".into()),
                ("w", "remote http Some(\"https://h.example\")".into()),
                ("p", "routed Some(\"p2\")".into()),
                ("v", "skip it uses `${workspaceFold".into()),
                ("d", "skip it is disabled in this f".into()),
                ("e", "skip its `env` names `not-a-n".into()),
                ("f", "skip it loads `envFile`, whos".into()),
                ("c", "skip it sets `cwd`, and `mcps".into()),
                ("n", "skip its `command` is not a s".into()),
                ("z", "skip it has neither `command`".into()),
            ]
        );
    }

    #[test]
    fn duplicates_and_errors_name_no_content() {
        let dup = r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#;
        let e = parse(&src(Shape::McpServers), dup).unwrap_err();
        assert!(e.contains("two entries named \"a\""), "{e}");
        let bad = "[mcp_servers.a]\nenv = { K = \"SECRET-VALUE\" \n";
        let e = parse(&src(Shape::CodexToml), bad).unwrap_err();
        assert!(!e.contains("SECRET"), "{e}");
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn claude_user_file_reads_projects() {
        let text = r#"{"numStartups": 3, "mcpServers": {"u": {"command": "a"}},
            "projects": {"/home/me/p": {"allowedTools": [], "mcpServers": {"l": {"type": "stdio", "command": "b", "args": []}}}}}"#;
        let p = parse(&src(Shape::ClaudeUser), text).unwrap();
        let locs: Vec<&str> = p.entries.iter().map(|e| e.location.as_str()).collect();
        assert_eq!(
            locs,
            ["mcpServers.u", "projects[\"/home/me/p\"].mcpServers.l"]
        );
    }
}
