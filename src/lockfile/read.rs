//! Reading `mcp.lock`: parse strictly (no duplicate or unknown keys) straight into the typed model,
//! then validate every rule and recompute every digest, gathering all problems in one pass (I3).
//! A file that does not parse is parsed again step by step (the version first) to say what is
//! wrong and where.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{
    DigestMap, Entry, Era, ItemSummary, Kind, LockedItem, Lockfile, PROMPTS_WILDCARD,
    RESOURCES_WILDCARD, SUPPORTED_VERSIONS, ServerEntry, Sha256Digest, item_digests,
    items_are_canonical, sorted_keys, valid_env_name, valid_server_name,
};
use crate::canonical::parse_strict_slice;
use crate::error::{Error, Result};

/// Reads and validates the lockfile at `path`.
pub fn load(path: &Path) -> Result<Lockfile> {
    load_from_bytes(path, &read_bytes(path)?)
}

/// Like [`load`], but a missing file is `None`.
pub fn load_optional(path: &Path) -> Result<Option<Lockfile>> {
    Ok(load_optional_with_bytes(path)?.map(|(_, lock)| lock))
}

/// Like [`load_optional`], also returning the bytes that were read, so that a caller reading the
/// file again later can tell whether it changed (see [`reload_optional`]).
pub fn load_optional_with_bytes(path: &Path) -> Result<Option<(FileBytes, Lockfile)>> {
    let Some(bytes) = read_bytes_optional(path)? else {
        return Ok(None);
    };
    let lock = load_from_bytes(path, &bytes)?;
    Ok(Some((bytes, lock)))
}

/// Reads the file again; if its bytes are those of `earlier`, returns the lockfile loaded from
/// them then (the same bytes give the same lockfile) instead of parsing and checking it anew.
pub fn reload_optional(
    path: &Path,
    earlier: Option<(FileBytes, Lockfile)>,
) -> Result<Option<Lockfile>> {
    let Some(bytes) = read_bytes_optional(path)? else {
        return Ok(None);
    };
    match earlier {
        Some((old, lock)) if *old == *bytes => Ok(Some(lock)),
        _ => load_from_bytes(path, &bytes).map(Some),
    }
}

fn read_bytes_optional(path: &Path) -> Result<Option<FileBytes>> {
    if !path.exists() {
        return Ok(None);
    }
    read_bytes(path).map(Some)
}

/// The lockfile's bytes, for a caller that also needs its text (reports that point into it).
pub fn read_bytes(path: &Path) -> Result<FileBytes> {
    FileBytes::read(path).map_err(|e| {
        // A dangling link or a loop: "no such file" alone would send the reader looking for
        // the link, and `lock` refuses to write through it, so creating it is not the next step.
        if let Ok(target) = fs_err::read_link(path) {
            let err = Error::new(format!(
                "cannot read `{}`: it is a symbolic link to `{}`, which {}",
                path.display(),
                target.display(),
                if e.kind() == std::io::ErrorKind::NotFound {
                    "does not exist"
                } else {
                    "cannot be read"
                }
            ));
            let err = if e.kind() == std::io::ErrorKind::NotFound {
                err
            } else {
                err.cause(io_cause(&e))
            };
            return err.hint("point the link at an existing lockfile, or pass `--lockfile PATH`");
        }
        Error::new(format!("cannot read `{}`", path.display()))
            .cause(io_cause(&e))
            .hint("run `mcpsum lock --name NAME -- COMMAND...` to create it, or pass `--lockfile PATH`")
    })
}

/// A file's bytes. A large file is read into memory that is mapped with every page already in
/// place (`MAP_POPULATE`): reading into fresh heap memory instead takes one page fault per 4 KiB,
/// which on a virtual machine costs several microseconds each (a 780 KB lockfile: 190 faults,
/// about 0.6 ms of `show`; populating the same pages costs under half of that).
#[derive(Debug)]
pub enum FileBytes {
    /// Read into a populated anonymous mapping; the first `len` bytes are the file's.
    Mapped { map: memmap2::MmapMut, len: usize },
    /// Read into a vector: a small file, one that grew while read, or no mapping to be had.
    Owned(Vec<u8>),
}

impl FileBytes {
    /// Below this size the faults saved do not pay for setting up a mapping.
    const MAP_FROM: u64 = 64 * 1024;

    fn read(path: &Path) -> std::io::Result<Self> {
        use std::io::Read;
        let mut file = fs_err::File::open(path)?;
        let size = file.metadata()?.len();
        // One byte more than the file holds, so that its end is seen without a second buffer.
        let map = (size >= Self::MAP_FROM)
            .then(|| usize::try_from(size + 1).ok())
            .flatten()
            .and_then(|cap| {
                memmap2::MmapOptions::new()
                    .len(cap)
                    .populate()
                    .map_anon()
                    .ok()
            });
        let Some(mut map) = map else {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            return Ok(Self::Owned(bytes));
        };
        let mut len = 0;
        while len < map.len() {
            match file.read(&mut map[len..]) {
                Ok(0) => return Ok(Self::Mapped { map, len }),
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // The file grew while it was read: finish in a vector.
        let mut bytes = map[..len].to_vec();
        file.read_to_end(&mut bytes)?;
        Ok(Self::Owned(bytes))
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped { map, len } => &map[..*len],
            Self::Owned(bytes) => bytes,
        }
    }
}

fn io_cause(e: &std::io::Error) -> String {
    // fs-err already names the path; keep only the OS reason.
    std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string)
}

/// Parses and validates lockfile bytes; `path` is only used in messages.
///
/// One pass parses a well-formed file straight into the typed model (strict: no duplicate keys
/// anywhere). Only when that fails is the file parsed again, step by step, to say precisely what
/// is wrong and where.
pub fn load_from_bytes(path: &Path, bytes: &[u8]) -> Result<Lockfile> {
    let (lock, problems) = match parse_typed(bytes) {
        Some(parsed) => parsed,
        None => {
            let lock = parse_reporting(path, bytes)?;
            let problems = validate(&lock);
            (lock, problems)
        }
    };
    checked(path, bytes, lock, problems)
}

/// `lock` if validation found no problem, else the error that lists them all, each with its
/// place in the text.
fn checked<I>(
    path: &Path,
    bytes: &[u8],
    lock: Lockfile<I>,
    problems: Vec<String>,
) -> Result<Lockfile<I>> {
    if problems.is_empty() {
        return Ok(lock);
    }
    let shown = path.display();
    let text = String::from_utf8_lossy(bytes);
    let problems: Vec<String> = problems
        .into_iter()
        .map(|p| match locate(&text, &p) {
            Some((line, col)) => format!("{shown}:{line}:{col}: {p}"),
            None => p,
        })
        .collect();
    let digest_problem = problems.iter().any(|p| p.contains("digest"));
    let n = problems.len();
    let mut err = Error::new(format!(
        "`{shown}` failed validation ({n} problem{})",
        if n == 1 { "" } else { "s" }
    ))
    .details(problems);
    err = if digest_problem {
        // The servers whose digests no longer match, named as the problems name them.
        let mut names: Vec<&str> = Vec::new();
        for p in err.detail_lines() {
            if !p.contains("digest mismatch") {
                continue;
            }
            let name = p
                .split_once("server `")
                .and_then(|(_, rest)| rest.split_once("`,"))
                .map(|(name, _)| name);
            if let Some(name) = name.filter(|n| !names.contains(n)) {
                names.push(name);
            }
        }
        let relock = if names.is_empty() {
            "`mcpsum lock --name NAME`".to_owned()
        } else {
            names
                .iter()
                .map(|n| format!("`mcpsum lock --name {}`", crate::text::sanitize_line(n)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let hint = format!(
            "inspect the change with `git diff {shown}`; run {relock} only if the new surface is expected"
        );
        err.hint(hint)
    } else {
        err.hint(format!("fix the named keys in `{shown}`"))
    };
    Err(err)
}

/// The typed model of a well-formed file and its validation problems, or `None` if anything is
/// off in the parse (then [`parse_reporting`] says what). Accepts exactly what [`parse_reporting`]
/// accepts: a top-level object, a supported version, no duplicate key anywhere (the model's maps
/// and values refuse them, and derived structs refuse a field given twice), no unknown field.
fn parse_typed(bytes: &[u8]) -> Option<(Lockfile, Vec<String>)> {
    parse_as(bytes)
}

/// [`parse_typed`] with items held as `I`.
fn parse_as<I: LockedItem>(bytes: &[u8]) -> Option<(Lockfile<I>, Vec<String>)> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    // One check of the whole text is cheaper than `from_slice`'s check of every string.
    let text = std::str::from_utf8(bytes).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    let lock = Lockfile::<I>::deserialize(&mut de).ok()?;
    de.end().ok()?;
    if !SUPPORTED_VERSIONS.contains(&lock.lockfile_version) {
        return None;
    }
    let problems = validate(&lock);
    Some((lock, problems))
}

/// Reads and validates the lockfile at `path` as [`load`] does, holding each item as an
/// [`ItemSummary`]: what `show` prints, read and checked without building the items' trees.
pub fn load_summary(path: &Path) -> Result<Lockfile<ItemSummary>> {
    load_summary_from_bytes(path, &read_bytes(path)?)
}

/// [`load_summary`] of bytes already read (`path` is only used in messages).
pub fn load_summary_from_bytes(path: &Path, bytes: &[u8]) -> Result<Lockfile<ItemSummary>> {
    if let Some((lock, problems)) = parse_as::<ItemSummary>(bytes) {
        return checked(path, bytes, lock, problems);
    }
    // Not well-formed: the full reading says what is wrong and where. (It accepts exactly what
    // the reading above accepts, so it returns an error; its result is used should it not.)
    let lock = load_from_bytes(path, bytes)?;
    Ok(Lockfile {
        lockfile_version: lock.lockfile_version,
        generator: lock.generator,
        servers: lock
            .servers
            .into_iter()
            .map(|(name, e)| (name, e.map_items(|kind, i| ItemSummary::of(kind, &i))))
            .collect(),
    })
}

/// Parses step by step for the message: strict JSON, the version, then the typed model with the
/// key path and position of the first structural problem.
fn parse_reporting(path: &Path, bytes: &[u8]) -> Result<Lockfile> {
    let shown = path.display();
    let invalid = |what: String| {
        Error::new(format!("`{shown}` is not a valid lockfile"))
            .cause(what)
            .hint(format!(
                "fix the file by hand or restore it with `git checkout -- {shown}`"
            ))
    };

    // Step 1: strict JSON (duplicate keys are errors) and the version peek.
    let value = parse_strict_slice(bytes).map_err(|e| invalid(e.to_string()))?;
    let Some(obj) = value.as_object() else {
        return Err(invalid("the top level must be a JSON object".into()));
    };
    match obj.get("lockfileVersion") {
        Some(Value::Number(n))
            if n.as_u64()
                .is_some_and(|v| SUPPORTED_VERSIONS.iter().any(|&s| u64::from(s) == v)) => {}
        Some(other) => {
            return Err(Error::new(format!(
                "`{shown}` has lockfileVersion {other}, which this mcpsum does not read"
            ))
            .cause("this build reads lockfile versions 1, 2 and 3")
            .hint("upgrade mcpsum, or re-create the file with `mcpsum lock`"));
        }
        None => return Err(invalid("missing `lockfileVersion`".into())),
    }

    // Step 2: the typed model, with the key path of the first structural problem.
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(e.to_string()))?;
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        invalid(format!(
            "{shown}:{}:{}: at `{path}`: {}",
            inner.line(),
            inner.column(),
            strip_position(&inner.to_string())
        ))
    })
}

/// Where in the file a validation problem is, found from the key path and item it names:
/// the JSON string anchors are searched in order, starting at `"servers"`.
fn locate(text: &str, problem: &str) -> Option<(usize, usize)> {
    let mut anchors: Vec<String> = Vec::new();
    if let Some(rest) = problem.strip_prefix("servers.") {
        let (path, tail) = rest.split_once(": ")?;
        anchors.extend(
            path.split('.')
                .map(|seg| seg.split('[').next().unwrap_or(seg).to_owned()),
        );
        anchors.extend(backticked(tail));
    } else if let Some(rest) = problem.strip_prefix("server `") {
        let (name, tail) = rest.split_once('`')?;
        anchors.push(name.to_owned());
        if tail.starts_with(", surface") {
            anchors.push("surface".into());
        } else {
            anchors.push("digests".into());
            match backticked(tail) {
                Some(key) => anchors.push(key),
                None => anchors.push("instructions".into()),
            }
        }
    } else {
        return None;
    }
    let mut pos = text.find("\"servers\"")?;
    for anchor in &anchors {
        let quoted = serde_json::to_string(anchor).ok()?;
        pos += text[pos..].find(&quoted)?;
    }
    let before = &text[..pos];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(pos, |i| pos - i - 1) + 1;
    Some((line, col))
}

/// The first `backticked` word of a message.
fn backticked(text: &str) -> Option<String> {
    let start = text.find('`')? + 1;
    let len = text[start..].find('`')?;
    Some(text[start..start + len].to_owned())
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

/// Checks one entry about to be written as a load would (its digests, labels and policy).
pub fn check_entry(path: &Path, name: &str, entry: &ServerEntry) -> Result<()> {
    let mut problems = Vec::new();
    validate_entry(name, entry, &mut problems);
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::new(format!(
        "the entry for server `{name}` would not be valid; `{}` was left unchanged",
        path.display()
    ))
    .details(problems)
    .hint("this is a bug in mcpsum; please report it with the server's output"))
}

/// Checks every rule of the format; returns one line per problem.
pub(crate) fn validate<I: LockedItem>(lock: &Lockfile<I>) -> Vec<String> {
    let (lockfile_version, servers) = (lock.lockfile_version, &lock.servers);
    let mut problems = Vec::new();
    let needs_v2 = servers.values().any(|e| e.supported_versions.is_some());
    if lockfile_version == 1 && needs_v2 {
        let names: Vec<&str> = servers
            .iter()
            .filter(|(_, e)| e.supported_versions.is_some())
            .map(|(n, _)| n.as_str())
            .collect();
        problems.push(format!(
            "lockfileVersion 1 cannot hold `supportedVersions` (server{} {}); such entries need version 2",
            if names.len() == 1 { "" } else { "s" },
            names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    let pinned: Vec<String> = servers
        .iter()
        .filter(|(_, e)| e.artifacts.is_some())
        .map(|(n, _)| format!("`{n}`"))
        .collect();
    if lockfile_version < 3 && !pinned.is_empty() {
        problems.push(format!(
            "lockfileVersion {lockfile_version} cannot hold `artifacts` (server{} {}); such entries need version 3",
            if pinned.len() == 1 { "" } else { "s" },
            pinned.join(", ")
        ));
    }
    for (name, entry) in servers {
        validate_entry(name, entry, &mut problems);
    }
    problems
}

/// The problems of an entry's `artifacts` and of their digest.
fn validate_artifacts<I>(name: &str, entry: &Entry<I>, problems: &mut Vec<String>) {
    let at = |key: &str| format!("servers.{name}.{key}");
    let recorded = entry.digests.artifacts;
    let Some(artifacts) = &entry.artifacts else {
        if recorded.is_some() {
            problems.push(format!(
                "server `{name}`, artifacts: digest recorded in `digests.artifacts` but the entry has no `artifacts`"
            ));
        }
        return;
    };
    let computed = artifacts.digest();
    if recorded != Some(computed) {
        problems.push(format!(
            "server `{name}`, artifacts: digest mismatch (recorded {}, computed {computed})",
            opt_digest(recorded.as_ref())
        ));
    }
    let npm = artifacts.installer == super::Installer::Npm;
    match (artifacts.installer, &artifacts.python, &artifacts.node) {
        (super::Installer::Uv, None, _) => problems.push(format!(
            "{}: a `uv` closure must record the `python` it was resolved for",
            at("artifacts")
        )),
        (super::Installer::Uv, Some(v), _) if !super::valid_python_version(v) => {
            problems.push(format!(
                "{}: `{v}` is not a `major.minor` version",
                at("artifacts.python")
            ))
        }
        (super::Installer::Uv, _, Some(_)) => problems.push(format!(
            "{}: a `uv` closure has no `node`",
            at("artifacts.node")
        )),
        (super::Installer::Npm, Some(_), _) => problems.push(format!(
            "{}: an `npm` closure has no `python`",
            at("artifacts.python")
        )),
        (super::Installer::Npm, _, None) => problems.push(format!(
            "{}: an `npm` closure must record the `node` it was resolved with",
            at("artifacts")
        )),
        (super::Installer::Npm, _, Some(v))
            if v.is_empty() || v.len() > 4 || !v.bytes().all(|b| b.is_ascii_digit()) =>
        {
            problems.push(format!(
                "{}: `{v}` is not a major version",
                at("artifacts.node")
            ))
        }
        _ => {}
    }
    if artifacts.packages.is_empty() {
        problems.push(format!("{}: must not be empty", at("artifacts.packages")));
    }
    for (i, p) in artifacts.packages.iter().enumerate() {
        let here = format!("{}[{i}]", at("artifacts.packages"));
        if !super::valid_package_name(artifacts.installer, &p.name) {
            problems.push(format!("{here}: `{}` is not a package name", p.name));
        }
        if !super::valid_package_version(&p.version) {
            problems.push(format!("{here}: `{}` is not a version", p.version));
        }
        if let Err(e) = super::check_package_hash(artifacts.installer, &p.hash) {
            problems.push(format!("{here}: {e}"));
        }
        if i > 0 && artifacts.packages[i - 1].sort_key() >= p.sort_key() {
            problems.push(format!(
                "{here}: packages must be sorted by name, each once (`{}` follows `{}`)",
                p.name,
                artifacts.packages[i - 1].name
            ));
        }
        let npm_only = p.path.is_some()
            || !p.dependencies.is_empty()
            || !p.optional_dependencies.is_empty()
            || !p.peer_dependencies.is_empty()
            || !p.optional_peers.is_empty()
            || p.optional
            || !p.os.is_empty()
            || !p.cpu.is_empty()
            || p.install_script;
        if npm_only && !npm {
            problems.push(format!(
                "{here}: `path`, dependencies, `optional`, `os`, `cpu` and `installScript` are for `npm` closures only"
            ));
        }
        if let Some(path) = &p.path
            && !super::valid_npm_path(path, &p.name)
        {
            problems.push(format!(
                "{here}: `{path}` is not a `node_modules/.../{}` path",
                p.name
            ));
        }
        for (field, ranges) in [
            ("dependencies", &p.dependencies),
            ("optionalDependencies", &p.optional_dependencies),
            ("peerDependencies", &p.peer_dependencies),
        ] {
            for (dep, range) in ranges {
                if !super::valid_package_name(super::Installer::Npm, dep) {
                    problems.push(format!("{here}.{field}: `{dep}` is not a package name"));
                }
                if range.len() > 256 || range.chars().any(char::is_control) {
                    problems.push(format!("{here}.{field}: the range of `{dep}` is not valid"));
                }
            }
        }
        for word in p.os.iter().chain(&p.cpu).chain(&p.optional_peers) {
            if word.is_empty()
                || word.len() > 214
                || !word
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!@/._-".contains(&b))
            {
                problems.push(format!(
                    "{here}: `{word}` is not valid in `os`, `cpu` or `optionalPeers`"
                ));
            }
        }
    }
}

fn validate_entry<I: LockedItem>(name: &str, entry: &Entry<I>, problems: &mut Vec<String>) {
    let at = |key: &str| format!("servers.{name}.{key}");
    if !valid_server_name(name) {
        problems.push(format!(
            "server name `{name}`: use 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        ));
    }
    if entry.command.is_empty() || entry.command[0].is_empty() {
        problems.push(format!("{}: must name a program", at("command")));
    }
    let mut seen = BTreeSet::new();
    for (i, var) in entry.env_passthrough.iter().enumerate() {
        if !valid_env_name(var) {
            problems.push(format!(
                "{}[{i}]: `{var}` is not a variable name",
                at("envPassthrough")
            ));
        }
        if !seen.insert(var) {
            problems.push(format!(
                "{}[{i}]: `{var}` is listed twice",
                at("envPassthrough")
            ));
        }
    }
    match (&entry.supported_versions, entry.protocol_version.as_str()) {
        (Some(list), v) if !list.iter().any(|s| s == v) => problems.push(format!(
            "{}: `{v}` is not among `supportedVersions`",
            at("protocolVersion")
        )),
        (None, crate::protocol::MODERN_VERSION) => problems.push(format!(
            "{}: a 2026-07-28 entry must record `supportedVersions`",
            at("protocolVersion")
        )),
        (_, "") => problems.push(format!("{}: must not be empty", at("protocolVersion"))),
        _ => {}
    }
    if entry.era() == Era::Modern && entry.protocol_version != crate::protocol::MODERN_VERSION {
        problems.push(format!(
            "{}: a `server/discover` entry must speak {}",
            at("protocolVersion"),
            crate::protocol::MODERN_VERSION
        ));
    }
    if !entry.server_info.is_object() {
        problems.push(format!("{}: must be an object", at("serverInfo")));
    }
    validate_artifacts(name, entry, problems);
    if !entry.capabilities.is_object() {
        problems.push(format!("{}: must be an object", at("capabilities")));
    }

    // Items: keys, order, duplicates, the cap; then every digest.
    let canonical = Kind::ALL.map(|kind| {
        let items = entry.items(kind);
        if items_are_canonical(kind, items) {
            return true;
        }
        match sorted_keys(kind, items) {
            // Keys are distinct here, so the items are in order exactly when the sort moved none.
            Ok(sorted) if sorted.iter().enumerate().any(|(at, (_, i))| at != *i) => {
                problems.push(format!(
                    "{}: items are not sorted by `{}`",
                    at(kind.field()),
                    kind.key_field()
                ))
            }
            Ok(_) => {}
            Err(e) => problems.push(format!("{}: {e}", at(kind.field()))),
        }
        false
    });
    let recorded = &entry.digests;
    for (kind, canonical) in Kind::ALL.into_iter().zip(canonical) {
        let (items, rec) = (entry.items(kind), recorded.of_kind(kind));
        if canonical {
            check_item_digests(name, kind, items, rec, problems);
        } else {
            check_any_item_digests(name, kind, items, rec, problems);
        }
    }
    let computed_instructions = entry.instructions.as_deref().map(Sha256Digest::of_json_str);
    if recorded.instructions != computed_instructions {
        problems.push(format!(
            "server `{name}`, instructions: digest mismatch (recorded {}, computed {})",
            opt_digest(recorded.instructions.as_ref()),
            opt_digest(computed_instructions.as_ref())
        ));
    }
    // The surface digest is checked over the recorded digests, so a consistent edit of items
    // and item digests still has to update it.
    let surface = recorded.surface_digest();
    if recorded.surface != surface {
        problems.push(format!(
            "server `{name}`, surface: digest mismatch (recorded {}, computed {surface})",
            recorded.surface
        ));
    }

    // Policy labels: every name a locked tool or one of the two wildcards.
    if let Some(taint) = entry.taint() {
        let tools: BTreeSet<&str> = entry
            .tools
            .iter()
            .filter_map(|t| t.key(Kind::Tool))
            .collect();
        for (field, labels) in [("sources", &taint.sources), ("sinks", &taint.sinks)] {
            let mut seen = BTreeSet::new();
            for (i, label) in labels.iter().enumerate() {
                let ok = label == RESOURCES_WILDCARD
                    || label == PROMPTS_WILDCARD
                    || tools.contains(label.as_str());
                if !ok {
                    problems.push(format!(
                        "{}[{i}]: `{label}` is not a locked tool of server `{name}` (nor `{RESOURCES_WILDCARD}` / `{PROMPTS_WILDCARD}`)",
                        at(&format!("policy.taint.{field}"))
                    ));
                }
                if !seen.insert(label) {
                    problems.push(format!(
                        "{}[{i}]: `{label}` is listed twice",
                        at(&format!("policy.taint.{field}"))
                    ));
                }
            }
        }
    }
    if let Some(sandbox) = entry.sandbox() {
        for problem in sandbox.syntax_problems() {
            problems.push(format!("{}: {problem}", at("policy.sandbox")));
        }
        if let Some(reason) = sandbox
            .limits
            .as_ref()
            .and_then(|l| l.tasks)
            .and_then(mcpsum_sandbox::check_tasks)
        {
            problems.push(format!("{}: {reason}", at("policy.sandbox.limits.tasks")));
        }
    }
}

/// The digest checks of any items (unsorted, keys missing or given twice): the digests per key
/// of the items that have one, against the recorded ones.
fn check_any_item_digests<I: LockedItem>(
    name: &str,
    kind: Kind,
    items: &[I],
    recorded: &DigestMap,
    problems: &mut Vec<String>,
) {
    let computed = item_digests(kind, items);
    for (key, c) in computed.iter() {
        match recorded.get(key) {
            Some(r) if r == c => {}
            Some(r) => problems.push(mismatch(name, kind, key, r, c)),
            None => problems.push(unrecorded(name, kind, key)),
        }
    }
    for key in recorded.keys().filter(|k| !computed.contains_key(k)) {
        problems.push(unlisted(name, kind, key));
    }
}

/// The digest checks of items already known canonical (sorted by key, keys distinct): one merge
/// of the items with the recorded digests, both in key order, with the same problems in the same
/// order as the general path.
fn check_item_digests<I: LockedItem>(
    name: &str,
    kind: Kind,
    items: &[I],
    recorded: &DigestMap,
    problems: &mut Vec<String>,
) {
    let mut unlisted_keys = Vec::new();
    let mut rec = recorded.iter().peekable();
    for item in items {
        let Some(key) = item.key(kind) else {
            continue;
        };
        while let Some((k, _)) = rec.next_if(|(k, _)| *k < key) {
            unlisted_keys.push(k);
        }
        let computed = item.digest();
        match rec.next_if(|(k, _)| *k == key) {
            Some((_, r)) if *r == computed => {}
            Some((_, r)) => problems.push(mismatch(name, kind, key, r, &computed)),
            None => problems.push(unrecorded(name, kind, key)),
        }
    }
    unlisted_keys.extend(rec.map(|(k, _)| k));
    for key in unlisted_keys {
        problems.push(unlisted(name, kind, key));
    }
}

fn mismatch(name: &str, kind: Kind, key: &str, r: &Sha256Digest, c: &Sha256Digest) -> String {
    format!(
        "server `{name}`, {} `{key}`: digest mismatch (recorded {r}, computed {c})",
        kind.noun()
    )
}

fn unrecorded(name: &str, kind: Kind, key: &str) -> String {
    format!(
        "server `{name}`, {} `{key}`: no digest recorded in `digests.{}`",
        kind.noun(),
        kind.field()
    )
}

fn unlisted(name: &str, kind: Kind, key: &str) -> String {
    format!(
        "server `{name}`, {} `{key}`: digest recorded for an item that is not in `{}`",
        kind.noun(),
        kind.field()
    )
}

fn opt_digest(d: Option<&super::Sha256Digest>) -> String {
    d.map_or_else(|| "null".to_owned(), ToString::to_string)
}

/// Only for parsing a `--sandbox FILE` argument: the `policy.sandbox` object alone.
pub(crate) fn parse_sandbox_policy(path: &Path, bytes: &[u8]) -> Result<super::SandboxPolicy> {
    let shown = path.display();
    let value = parse_strict_slice(bytes)
        .map_err(|e| Error::new(format!("`{shown}` is not valid JSON")).cause(e))?;
    let value = match value {
        // Accept both the bare object and `{"policy": {"sandbox": ...}}` / `{"sandbox": ...}`.
        Value::Object(ref m) if m.len() == 1 && m.contains_key("sandbox") => m["sandbox"].clone(),
        other => other,
    };
    super::SandboxPolicy::deserialize(&value).map_err(|e| {
        Error::new(format!("`{shown}` is not a valid `policy.sandbox` object"))
            .cause(e)
            .hint("expected {\"filesystem\": {\"read\": [...], \"write\": [...]}, \"network\": {\"allow\": [...]}}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    const GOLDEN: &str = include_str!("../../tests/fixtures/golden.mcp.lock");

    /// Both parsers on `text`: they must accept the same files, with the same result.
    fn accepted(text: &str) -> bool {
        accepted_bytes(text.as_bytes())
    }

    fn accepted_bytes(bytes: &[u8]) -> bool {
        let text = String::from_utf8_lossy(bytes);
        let fast = parse_typed(bytes);
        let slow = parse_reporting(Path::new("t.lock"), bytes);
        let summary = parse_as::<ItemSummary>(bytes);
        assert_eq!(
            summary.as_ref().map(|(_, p)| p),
            fast.as_ref().map(|(_, p)| p),
            "the summary reading found other problems: {text}"
        );
        match (fast, slow) {
            (Some((a, problems)), Ok(b)) => {
                assert_eq!(problems, validate(&b));
                let servers = summary.unwrap().0.servers;
                let summarized: BTreeMap<_, _> = a
                    .servers
                    .iter()
                    .map(|(n, e)| {
                        (
                            n.clone(),
                            e.clone().map_items(|kind, i| ItemSummary::of(kind, &i)),
                        )
                    })
                    .collect();
                assert_eq!(servers, summarized);
                assert_eq!(a, b);
                true
            }
            (None, Err(_)) => false,
            (a, b) => panic!(
                "one-pass {} but step by step {}: {text}",
                a.is_some(),
                b.is_ok()
            ),
        }
    }

    /// `text` with the first member `"key": VALUE` written twice (the copy first).
    fn doubled(text: &str, key: &str) -> String {
        let pat = format!("\"{key}\": ");
        let start = text.find(&pat).unwrap_or_else(|| panic!("no {pat}"));
        let value_at = start + pat.len();
        let mut values = serde_json::Deserializer::from_str(&text[value_at..])
            .into_iter::<serde::de::IgnoredAny>();
        values.next().unwrap().unwrap();
        let end = value_at + values.byte_offset();
        format!(
            "{}{}, {}",
            &text[..start],
            &text[start..end],
            &text[start..]
        )
    }

    #[test]
    fn one_pass_parse_accepts_exactly_what_the_reporting_parse_accepts() {
        assert!(accepted(GOLDEN));
        assert!(accepted(&format!(" \n\t{GOLDEN}")));
        // The same file with a policy, so that its objects can be doubled too.
        let mut v: Value = serde_json::from_str(GOLDEN).unwrap();
        v["servers"]["golden-legacy"]["policy"] = json!({
            "taint": {"sources": ["escapes"], "sinks": []},
            "sandbox": {"filesystem": {"read": ["/opt"], "write": []}, "network": {"allow": []}},
        });
        let with_policy = serde_json::to_string_pretty(&v).unwrap();
        assert!(accepted(&with_policy));

        let mut refused: Vec<String> = [
            "lockfileVersion",
            "generator",
            "servers",
            "golden-legacy",
            "command",
            "envPassthrough",
            "serverInfo",
            "name",
            "instructions",
            "capabilities",
            "tools",
            "listChanged",
            "inputSchema",
            "type",
            "surface",
            "escapes",
            "resourceTemplates",
            "supportedVersions",
            "digests",
        ]
        .iter()
        .map(|k| doubled(GOLDEN, k))
        .collect();
        refused.extend(
            [
                "policy",
                "taint",
                "sources",
                "sandbox",
                "filesystem",
                "network",
                "allow",
            ]
            .iter()
            .map(|k| doubled(&with_policy, k)),
        );
        refused.extend([
            GOLDEN.replacen("\"envPassthrough\"", "\"extra\": 1, \"envPassthrough\"", 1),
            GOLDEN.replacen("\"lockfileVersion\": 2", "\"lockfileVersion\": 4", 1),
            GOLDEN.replacen("\"lockfileVersion\": 2", "\"lockfileVersion\": 2.0", 1),
            format!("{GOLDEN} {{}}"),
            GOLDEN[..GOLDEN.len() / 2].to_owned(),
            "[]".to_owned(),
            "null".to_owned(),
        ]);
        // The struct fields in order, as an array: `serde` would take it for the struct.
        let fields: Vec<Value> = v.as_object().unwrap().values().cloned().collect();
        refused.push(serde_json::to_string(&fields).unwrap());
        for text in &refused {
            assert!(!accepted(text), "accepted: {text}");
        }
        // Not UTF-8, inside a string.
        let mut bytes = GOLDEN.as_bytes().to_vec();
        let at = GOLDEN.find("Golden fixture").unwrap();
        bytes[at] = 0xFF;
        assert!(!accepted_bytes(&bytes));
    }

    #[test]
    fn file_bytes_are_the_file_whichever_way_they_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let sizes = [0, 1, 4095, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1, 780_000];
        for size in sizes {
            let path = dir.path().join(format!("f{size}"));
            let want: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            fs_err::write(&path, &want).unwrap();
            let got = read_bytes(&path).unwrap();
            assert_eq!(&*got, &want[..], "{size} bytes");
            let mapped = matches!(got, FileBytes::Mapped { .. });
            assert_eq!(mapped, size as u64 >= FileBytes::MAP_FROM, "{size} bytes");
        }
        // A pipe has no size to go by: read to its end all the same.
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs_err::write(fifo, vec![7u8; 200_000]).unwrap())
        };
        assert_eq!(&*read_bytes(&fifo).unwrap(), &vec![7u8; 200_000][..]);
        writer.join().unwrap();
        let err = read_bytes(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot read") && err.contains("missing"),
            "{err}"
        );
    }

    #[test]
    fn surface_digest_of_the_golden_file() {
        let (lock, _) = parse_typed(GOLDEN.as_bytes()).unwrap();
        for entry in lock.servers.values() {
            assert_eq!(entry.digests.surface_digest(), entry.digests.surface);
            assert_eq!(
                entry.digests.surface,
                reference_surface_digest(&entry.digests)
            );
        }
    }

    /// The surface digest as it was first defined: the digests object without `surface`,
    /// through a `Value` and the reference canonicalizer.
    fn reference_surface_digest(d: &super::super::Digests) -> Sha256Digest {
        let mut v = serde_json::to_value(d).unwrap();
        v.as_object_mut().unwrap().remove("surface");
        Sha256Digest::of_bytes(&serde_json_canonicalizer::to_vec(&v).unwrap())
    }

    fn arb_key() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z]{1,6}",
            any::<String>(),
            prop::collection::vec(
                prop::sample::select(vec![
                    'a',
                    '\u{e000}',
                    '\u{ffff}',
                    '\u{10000}',
                    '\u{1f600}',
                    '"',
                    '\u{1}'
                ]),
                1..5
            )
            .prop_map(|cs| cs.into_iter().collect()),
        ]
    }

    fn arb_digests() -> impl Strategy<Value = DigestMap> {
        prop::collection::btree_map(
            arb_key(),
            any::<[u8; 32]>().prop_map(Sha256Digest::from_array),
            0..6,
        )
        .prop_map(|m| m.into_iter().collect())
    }

    proptest! {
        #[test]
        fn surface_digest_equals_the_reference(
            instructions in prop::option::of(any::<[u8; 32]>()),
            tools in arb_digests(),
            prompts in arb_digests(),
            resources in arb_digests(),
            resource_templates in arb_digests(),
        ) {
            let d = super::super::Digests {
                artifacts: None,
                surface: Sha256Digest::from_array([0; 32]),
                instructions: instructions.map(Sha256Digest::from_array),
                tools,
                prompts,
                resources,
                resource_templates,
            };
            prop_assert_eq!(d.surface_digest(), reference_surface_digest(&d));
        }

        #[test]
        fn merged_digest_check_equals_the_general_one(
            keys in prop::collection::btree_set("[a-e]{1,2}", 0..8),
            recorded_keys in prop::collection::btree_set("[a-e]{1,2}", 0..8),
            wrong in prop::collection::btree_set("[a-e]{1,2}", 0..4),
        ) {
            let items: Vec<Value> = keys.iter().map(|k| json!({"name": k, "d": k.len()})).collect();
            prop_assert!(items_are_canonical(Kind::Tool, &items));
            let recorded: DigestMap = recorded_keys
                .iter()
                .map(|k| {
                    let d = if wrong.contains(k) {
                        Sha256Digest::of_bytes(k.as_bytes())
                    } else {
                        Sha256Digest::of_json(&json!({"name": k, "d": k.len()}))
                    };
                    (k.clone(), d)
                })
                .collect();
            let (mut merged, mut general) = (Vec::new(), Vec::new());
            check_item_digests("s", Kind::Tool, &items, &recorded, &mut merged);
            check_any_item_digests("s", Kind::Tool, &items, &recorded, &mut general);
            prop_assert_eq!(merged, general);
        }
    }
}
