//! The `mcp.lock` model: what the file holds, how entries are built from a server's surface, and
//! the digests that tie them together. Reading and validating is `read.rs`, writing `write.rs`.
//!
//! An entry in memory is always canonical: items sorted by their key, digests computed from the
//! items. `ServerEntry::from_surface` is the only constructor used for new entries, so writing is
//! pure formatting.

mod digest;
mod read;
mod span;
mod write;

use std::collections::BTreeMap;
use std::fmt;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use digest::{DigestMap, Sha256Digest};
pub(crate) use read::parse_sandbox_policy;
pub use read::{
    FileBytes, check_entry, load, load_from_bytes, load_optional, load_optional_with_bytes,
    load_summary, load_summary_from_bytes, read_bytes, reload_optional,
};
pub use span::{Locator, Position, Span};
pub use write::{LockGuard, refuse_symlink, to_bytes, write_atomic};

/// The versions of the format this build reads.
pub const SUPPORTED_VERSIONS: [u32; 3] = [1, 2, 3];

/// At most this many items of one kind are locked; a server listing more makes `lock` fail.
pub const MAX_ITEMS_PER_KIND: usize = 1000;

/// The whole file. `I` is how items are held, as in [`Entry`]: full definitions unless said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    deny_unknown_fields,
    bound(serialize = "I: Serialize", deserialize = "I: LockedItem")
)]
pub struct Lockfile<I = Value> {
    /// 1, 2 or 3; recomputed on write (the lowest that can hold every entry).
    pub lockfile_version: u32,
    /// The mcpsum that wrote the file. Informational.
    pub generator: String,
    /// One entry per server, sorted by name.
    #[serde(deserialize_with = "strict_map")]
    pub servers: BTreeMap<String, Entry<I>>,
}

impl Default for Lockfile {
    fn default() -> Self {
        Self {
            lockfile_version: 1,
            generator: generator(),
            servers: BTreeMap::new(),
        }
    }
}

/// Leaves a loaded lockfile to the operating system instead of freeing it: for a command that
/// is about to exit, freeing every item of a large file one allocation at a time costs more than
/// the rest of its work after loading. Memory is reclaimed when the process ends.
pub fn release_at_exit<T>(lock: T) {
    std::mem::forget(lock);
}

/// `mcpsum X.Y.Z`, written into `generator`.
pub fn generator() -> String {
    format!("mcpsum {}", env!("CARGO_PKG_VERSION"))
}

impl<I> Lockfile<I> {
    /// The version this file must be written as: 3 while any entry pins `artifacts`, else 2
    /// while any entry is a 2026-07-28 entry.
    pub fn required_version(&self) -> u32 {
        if self.servers.values().any(|e| e.artifacts.is_some()) {
            3
        } else if self
            .servers
            .values()
            .any(|e| e.supported_versions.is_some())
        {
            2
        } else {
            1
        }
    }
}

/// For `#[serde(deserialize_with)]`: a map that refuses a key given twice (a `BTreeMap` would keep
/// the last one silently), so the typed model is as strict as [`crate::canonical::parse_strict`].
fn strict_map<'de, D, V>(deserializer: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct StrictMap<V>(std::marker::PhantomData<V>);

    impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for StrictMap<V> {
        type Value = BTreeMap<String, V>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            use std::collections::btree_map::Entry;
            let mut out = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                match out.entry(key) {
                    Entry::Occupied(e) => {
                        return Err(serde::de::Error::custom(format_args!(
                            "duplicate key `{}`",
                            e.key()
                        )));
                    }
                    Entry::Vacant(e) => {
                        e.insert(map.next_value()?);
                    }
                }
            }
            Ok(out)
        }
    }

    deserializer.deserialize_map(StrictMap(std::marker::PhantomData))
}

/// One server's pinned surface and its policy, with its items as full definitions.
pub type ServerEntry = Entry<Value>;

/// One server's pinned surface and its policy. `I` is how an item is held: its full definition
/// ([`ServerEntry`], what every command but `show` uses) or an [`ItemSummary`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    deny_unknown_fields,
    bound(serialize = "I: Serialize", deserialize = "I: LockedItem")
)]
pub struct Entry<I> {
    /// The exact argv the proxy runs.
    pub command: Vec<String>,
    /// Names of environment variables passed to the server. Values are never stored.
    pub env_passthrough: Vec<String>,
    /// Only for a package-runner command (`uvx`, `npx`): the code it runs, pinned (version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Artifacts>,
    /// The protocol version spoken with the server.
    pub protocol_version: String,
    /// Only for a 2026-07-28 entry: the versions the server listed in `server/discover`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supported_versions: Option<Vec<String>>,
    /// What the server reported about itself. Informational.
    #[serde(deserialize_with = "crate::canonical::strict_value")]
    pub server_info: Value,
    /// The server's instructions (`null` when it gave none). Definitional.
    pub instructions: Option<String>,
    /// The server's capabilities, verbatim. Informational.
    #[serde(deserialize_with = "crate::canonical::strict_value")]
    pub capabilities: Value,
    /// Full tool definitions, sorted by `name`.
    #[serde(deserialize_with = "locked_tools")]
    pub tools: Vec<I>,
    /// Full prompt definitions, sorted by `name`.
    #[serde(deserialize_with = "locked_prompts")]
    pub prompts: Vec<I>,
    /// Full resource definitions, sorted by `uri`.
    #[serde(deserialize_with = "locked_resources")]
    pub resources: Vec<I>,
    /// Full resource template definitions, sorted by `uriTemplate`.
    #[serde(deserialize_with = "locked_templates")]
    pub resource_templates: Vec<I>,
    /// Written by people, never by servers; not covered by digests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// Digests of every item and of the whole surface.
    pub digests: Digests,
}

/// The digests of one entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Digests {
    /// Only with `artifacts`: the digest of their canonical form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Sha256Digest>,
    /// Digest of the canonical form of this object without `surface`.
    pub surface: Sha256Digest,
    /// Digest of the canonical instructions string, or `null`.
    pub instructions: Option<Sha256Digest>,
    /// Per tool name.
    pub tools: DigestMap,
    /// Per prompt name.
    pub prompts: DigestMap,
    /// Per resource URI.
    pub resources: DigestMap,
    /// Per resource template URI template.
    pub resource_templates: DigestMap,
}

/// `artifacts`: the dependency closure a package-runner command runs, resolved at lock time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Artifacts {
    /// Which installer resolved and installs the closure.
    pub installer: Installer,
    /// `uv` only: the Python version (`major.minor`) the closure was resolved for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// `npm` only: the Node.js major version the closure was resolved with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Every package of the closure, sorted by name.
    pub packages: Vec<ArtifactPackage>,
}

impl Artifacts {
    /// The digest of the canonical form, recorded in `digests.artifacts`.
    pub fn digest(&self) -> Sha256Digest {
        // Plain data: serializing it into a `Value` cannot fail.
        Sha256Digest::of_json(&serde_json::to_value(self).unwrap_or_default())
    }
}

/// `artifacts.installer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Installer {
    /// `uvx` / `uv tool run`: hashes are `sha256:<hex>` of the exact file installed.
    Uv,
    /// `npx` / `npm exec`: hashes are the registry's SRI `sha512-<base64>` integrity.
    Npm,
}

impl fmt::Display for Installer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Installer::Uv => "uv",
            Installer::Npm => "npm",
        })
    }
}

/// One package of `artifacts.packages`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArtifactPackage {
    /// The name as the registry spells it.
    pub name: String,
    /// The exact version.
    pub version: String,
    /// The hash of the exact file installed.
    pub hash: String,
    /// npm only: where it sits, when that is not `node_modules/<name>` (a nested copy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// npm only: the package's dependency ranges, which `npm ci` links the tree by.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dependencies: BTreeMap<String, String>,
    /// npm only: its optional dependency ranges.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub optional_dependencies: BTreeMap<String, String>,
    /// npm only: its peer dependency ranges.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub peer_dependencies: BTreeMap<String, String>,
    /// npm only: the peers it can do without.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optional_peers: Vec<String>,
    /// npm only: installed only where it can be (a platform-specific optional package).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// npm only: the operating systems it is for (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<String>,
    /// npm only: the CPUs it is for (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu: Vec<String>,
    /// npm only: it has an install script, and the person allowed it to run when the install
    /// is made (`lock --allow-install-scripts NAME`). Any other package with one is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub install_script: bool,
}

impl ArtifactPackage {
    /// npm: where the package sits in the install (`node_modules/<name>` unless `path` says).
    pub fn npm_path(&self) -> String {
        self.path
            .clone()
            .unwrap_or_else(|| format!("node_modules/{}", self.name))
    }

    /// The order of `packages`: by name, then (npm's nested copies) by place.
    pub fn sort_key(&self) -> (&str, &str) {
        (&self.name, self.path.as_deref().unwrap_or(""))
    }
}

/// `policy`: taint labels and a sandbox.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    /// Taint labels (I6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taint: Option<TaintPolicy>,
    /// OS sandbox (I5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxPolicy>,
}

impl Policy {
    /// True when nothing is set, so the key can be left out.
    pub fn is_empty(&self) -> bool {
        self.taint.is_none() && self.sandbox.is_none()
    }
}

/// `policy.taint`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaintPolicy {
    /// Tools (or `resources:*`, `prompts:*`) whose results may carry attacker text.
    #[serde(default)]
    pub sources: Vec<String>,
    /// Tools whose calls have consequences or can carry data out.
    #[serde(default)]
    pub sinks: Vec<String>,
}

/// The wildcard label for every `resources/read`.
pub const RESOURCES_WILDCARD: &str = "resources:*";
/// The wildcard label for every `prompts/get`.
pub const PROMPTS_WILDCARD: &str = "prompts:*";

/// `policy.sandbox`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxPolicy {
    /// Extra readable and writable paths.
    #[serde(default)]
    pub filesystem: FilesystemPolicy,
    /// Network rules; absent means no network at all.
    #[serde(default)]
    pub network: NetworkPolicy,
    /// Resource limits of the server's process tree; absent means the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsPolicy>,
}

/// `policy.sandbox.limits`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsPolicy {
    /// The most tasks (processes and threads) of the server's tree; absent means 1,024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u64>,
}

impl SandboxPolicy {
    /// The policy's strings as the sandbox crate takes them.
    pub fn raw(&self) -> mcpsum_sandbox::SandboxPolicy {
        mcpsum_sandbox::SandboxPolicy {
            read: self.filesystem.read.clone(),
            write: self.filesystem.write.clone(),
            allow: self.network.allow.clone(),
            tasks: self.limits.as_ref().and_then(|l| l.tasks),
        }
    }

    /// The problems of this policy that hold wherever the lockfile is read: the sandbox crate's
    /// path rules (absolute, `~/...` or `${TMP}/...`, no `..`, not the whole filesystem;
    /// `mcpsum_sandbox::validate`), and the `network.allow` grammar. Whether a path exists
    /// and what it covers depend on the machine that runs the server, so they are left to the
    /// launch.
    pub fn syntax_problems(&self) -> Vec<String> {
        use mcpsum_sandbox::PolicyError;
        // No protected paths and a stand-in home: only the rules on the strings themselves can
        // fail the way they would on any machine, and only those are kept.
        let protected = mcpsum_sandbox::Protected {
            lockfile: std::path::PathBuf::new(),
            state_dir: std::path::PathBuf::new(),
            binary: std::path::PathBuf::new(),
            home: Some(std::path::PathBuf::from("/")),
            other_homes: Vec::new(),
        };
        let mut problems = Vec::new();
        if let Err(errors) = mcpsum_sandbox::validate(&self.raw(), &protected) {
            problems.extend(
                errors
                    .iter()
                    .filter(|e| {
                        matches!(
                            e,
                            PolicyError::NotAbsolute { .. }
                                | PolicyError::DotDot { .. }
                                | PolicyError::Home { .. }
                                | PolicyError::WholeFilesystem { .. }
                        )
                    })
                    .map(ToString::to_string),
            );
        }
        if let Err(errors) = mcpsum_egress::Allowlist::parse(&self.network.allow) {
            problems.extend(errors.iter().map(|e| format!("network.allow: {e}")));
        }
        problems
    }
}

/// `policy.sandbox.filesystem`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilesystemPolicy {
    /// Paths readable (recursively) beyond the runtime base.
    #[serde(default)]
    pub read: Vec<String>,
    /// Paths readable and writable.
    #[serde(default)]
    pub write: Vec<String>,
}

/// `policy.sandbox.network`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkPolicy {
    /// `[]`: no network. Otherwise `host:port` entries reached through the egress proxy.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// The four kinds of items a server lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `tools/list`, keyed by `name`.
    Tool,
    /// `prompts/list`, keyed by `name`.
    Prompt,
    /// `resources/list`, keyed by `uri`.
    Resource,
    /// `resources/templates/list`, keyed by `uriTemplate`.
    ResourceTemplate,
}

impl Kind {
    /// All kinds, in file order.
    pub const ALL: [Kind; 4] = [
        Kind::Tool,
        Kind::Prompt,
        Kind::Resource,
        Kind::ResourceTemplate,
    ];

    /// The field that identifies an item.
    pub fn key_field(self) -> &'static str {
        match self {
            Kind::Tool | Kind::Prompt => "name",
            Kind::Resource => "uri",
            Kind::ResourceTemplate => "uriTemplate",
        }
    }

    /// The lockfile (and list result) field holding the array.
    pub fn field(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource => "resources",
            Kind::ResourceTemplate => "resourceTemplates",
        }
    }

    /// The list method.
    pub fn list_method(self) -> &'static str {
        match self {
            Kind::Tool => "tools/list",
            Kind::Prompt => "prompts/list",
            Kind::Resource => "resources/list",
            Kind::ResourceTemplate => "resources/templates/list",
        }
    }

    /// The server capability that gates the list.
    pub fn capability(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource | Kind::ResourceTemplate => "resources",
        }
    }

    /// Singular noun for messages.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
            Kind::ResourceTemplate => "resource template",
        }
    }

    /// Plural noun for messages.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource => "resources",
            Kind::ResourceTemplate => "resource templates",
        }
    }

    /// The key of an item, if it has a string key field.
    pub fn key_of(self, item: &Value) -> Option<&str> {
        item.get(self.key_field()).and_then(Value::as_str)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.noun())
    }
}

/// The protocol era of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` handshake (protocol versions up to 2025-11-25).
    Legacy,
    /// Stateless 2026-07-28 (`server/discover`, version in every request's `_meta`).
    Modern,
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Era::Legacy => f.write_str("legacy (initialize)"),
            Era::Modern => write!(f, "{} (server/discover)", crate::protocol::MODERN_VERSION),
        }
    }
}

/// Everything a server shows a model, as read from it (or from an entry).
#[derive(Debug, Clone, PartialEq)]
pub struct Surface {
    /// The era it was read in.
    pub era: Era,
    /// The negotiated (legacy) or picked (modern) version.
    pub protocol_version: String,
    /// Modern only: the versions the server listed.
    pub supported_versions: Option<Vec<String>>,
    /// `serverInfo`.
    pub server_info: Value,
    /// `capabilities`.
    pub capabilities: Value,
    /// `instructions`.
    pub instructions: Option<String>,
    /// Items per kind, in any order (sorted when made into an entry).
    pub items: BTreeMap<Kind, Vec<Value>>,
}

impl Surface {
    /// The items of one kind.
    pub fn items(&self, kind: Kind) -> &[Value] {
        self.items.get(&kind).map_or(&[], Vec::as_slice)
    }
}

/// An item that cannot be locked.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemError {
    /// Not an object, or its key field is missing or not a string.
    NoKey { kind: Kind, index: usize },
    /// Two items share a key.
    Duplicate { kind: Kind, key: String },
    /// More than [`MAX_ITEMS_PER_KIND`].
    TooMany { kind: Kind, count: usize },
    /// Nested deeper than `mcp.lock` can hold it ([`MAX_FILE_NESTING`]).
    TooDeep {
        /// What: an item (`tool `x``) or an entry's field (`capabilities`).
        what: String,
        depth: usize,
        max: usize,
    },
}

/// serde_json, which reads `mcp.lock`, refuses a file nested 128 levels deep: this is the most.
pub const MAX_FILE_NESTING: usize = 127;
/// Levels above an item in the file: the root, `servers`, the entry and the item's list.
const ITEM_LEVEL: usize = 4;
/// Levels above an entry's field: the root, `servers` and the entry.
const FIELD_LEVEL: usize = 3;

/// How many arrays and objects `v` nests, itself included (a scalar is 0).
fn nesting(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(nesting).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(nesting).max().unwrap_or(0),
        _ => 0,
    }
}

/// Refuses a value the file could not hold at `level`: the wire nests items and fields a
/// level or two less deep than `mcp.lock` does, so a server can send what a load would refuse.
fn check_nesting(what: impl FnOnce() -> String, v: &Value, level: usize) -> Result<(), ItemError> {
    let depth = nesting(v);
    let max = MAX_FILE_NESTING - level;
    if depth > max {
        return Err(ItemError::TooDeep {
            what: what(),
            depth,
            max,
        });
    }
    Ok(())
}

impl fmt::Display for ItemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ItemError::NoKey { kind, index } => write!(
                f,
                "{} #{index} is not an object with a string `{}`",
                kind.noun(),
                kind.key_field()
            ),
            ItemError::Duplicate { kind, key } => {
                write!(
                    f,
                    "two {} share the {} `{key}`",
                    kind.plural(),
                    kind.key_field()
                )
            }
            ItemError::TooMany { kind, count } => write!(
                f,
                "{count} {} listed; mcpsum locks at most {MAX_ITEMS_PER_KIND} of one kind",
                kind.plural()
            ),
            ItemError::TooDeep { what, depth, max } => write!(
                f,
                "{what} nests {depth} levels of arrays and objects; mcp.lock can hold at most {max} there"
            ),
        }
    }
}

/// Sorts items by key and checks keys, duplicates and the cap.
pub fn canonical_items(kind: Kind, items: &[Value]) -> Result<Vec<Value>, ItemError> {
    Ok(sorted_items(kind, items)?.into_iter().cloned().collect())
}

/// [`canonical_items`] without copying: the items in key order, borrowed.
pub fn sorted_items(kind: Kind, items: &[Value]) -> Result<Vec<&Value>, ItemError> {
    Ok(sorted_keys(kind, items)?
        .into_iter()
        .map(|(_, i)| &items[i])
        .collect())
}

/// [`canonical_items`] of items the caller gives up: they are moved, not copied.
pub fn canonical_items_owned(kind: Kind, mut items: Vec<Value>) -> Result<Vec<Value>, ItemError> {
    let order: Vec<usize> = sorted_keys(kind, &items)?
        .into_iter()
        .map(|(_, i)| i)
        .collect();
    // `order` is a permutation of the indices, so every item is taken exactly once.
    Ok(order
        .into_iter()
        .map(|i| std::mem::take(&mut items[i]))
        .collect())
}

/// Whether `items` are already canonical: within the cap, each an object with a string key,
/// keys strictly increasing. Cheaper than [`canonical_items`] and nothing is copied.
pub fn items_are_canonical<I: LockedItem>(kind: Kind, items: &[I]) -> bool {
    if items.len() > MAX_ITEMS_PER_KIND {
        return false;
    }
    let mut prev: Option<&str> = None;
    for item in items {
        let Some(key) = item.key(kind).filter(|_| item.is_object()) else {
            return false;
        };
        if prev.is_some_and(|p| p >= key) {
            return false;
        }
        prev = Some(key);
    }
    true
}

/// The keys of `items` with their indices, sorted by key; checks keys, duplicates and the cap.
pub fn sorted_keys<I: LockedItem>(
    kind: Kind,
    items: &[I],
) -> Result<Vec<(&str, usize)>, ItemError> {
    if items.len() > MAX_ITEMS_PER_KIND {
        return Err(ItemError::TooMany {
            kind,
            count: items.len(),
        });
    }
    let mut keyed: Vec<(&str, usize)> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match (item.is_object(), item.key(kind)) {
            (true, Some(key)) => keyed.push((key, index)),
            _ => return Err(ItemError::NoKey { kind, index }),
        }
    }
    keyed.sort_by(|a, b| a.0.cmp(b.0));
    for pair in keyed.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(ItemError::Duplicate {
                kind,
                key: pair[0].0.to_owned(),
            });
        }
    }
    Ok(keyed)
}

/// Digests per key of items that are already canonical.
pub fn item_digests<I: LockedItem>(kind: Kind, items: &[I]) -> DigestMap {
    items
        .iter()
        .filter_map(|item| Some((item.key(kind)?.to_owned(), item.digest())))
        .collect()
}

impl Digests {
    /// Computes every digest of an entry's surface.
    pub fn compute(
        instructions: Option<&str>,
        tools: &[Value],
        prompts: &[Value],
        resources: &[Value],
        resource_templates: &[Value],
    ) -> Self {
        let mut d = Digests {
            artifacts: None,
            surface: Sha256Digest::from_array([0; 32]),
            instructions: instructions.map(Sha256Digest::of_json_str),
            tools: item_digests(Kind::Tool, tools),
            prompts: item_digests(Kind::Prompt, prompts),
            resources: item_digests(Kind::Resource, resources),
            resource_templates: item_digests(Kind::ResourceTemplate, resource_templates),
        };
        d.surface = d.surface_digest();
        d
    }

    /// The digest of this object without its `surface` key (SPEC §3): the canonical form of
    /// `{"artifacts": …, "instructions": …, "prompts": {…}, "resourceTemplates": {…},
    /// "resources": {…}, "tools": {…}}` (`artifacts` only when recorded), written member by
    /// member into the hash.
    pub fn surface_digest(&self) -> Sha256Digest {
        let mut h = crate::canonical::CanonicalHasher::new();
        let mut text = [0u8; 71];
        if let Some(d) = &self.artifacts {
            h.raw(b"{\"artifacts\":\"");
            h.raw(d.write_text(&mut text).as_bytes());
            h.raw(b"\",\"instructions\":");
        } else {
            h.raw(b"{\"instructions\":");
        }
        match &self.instructions {
            Some(d) => {
                h.raw(b"\"");
                h.raw(d.write_text(&mut text).as_bytes());
                h.raw(b"\"");
            }
            None => h.raw(b"null"),
        }
        // Member names in UTF-16 order (`T` sorts before `s`).
        for (name, map) in [
            ("prompts", &self.prompts),
            ("resourceTemplates", &self.resource_templates),
            ("resources", &self.resources),
            ("tools", &self.tools),
        ] {
            h.raw(b",\"");
            h.raw(name.as_bytes());
            h.raw(b"\":{");
            // A `BTreeMap` is in UTF-8 order, which differs from UTF-16 order only for some
            // keys beyond the BMP; a stable sort of sorted input is one pass.
            let mut entries: Vec<(&str, &Sha256Digest)> = map.iter().collect();
            entries.sort_by(|a, b| crate::canonical::cmp_utf16(a.0, b.0));
            for (i, (key, d)) in entries.into_iter().enumerate() {
                if i > 0 {
                    h.raw(b",");
                }
                h.string(key);
                h.raw(b":\"");
                h.raw(d.write_text(&mut text).as_bytes());
                h.raw(b"\"");
            }
            h.raw(b"}");
        }
        h.raw(b"}");
        Sha256Digest::from_array(h.finish())
    }

    /// The per-item digests of one kind.
    pub fn of_kind(&self, kind: Kind) -> &DigestMap {
        match kind {
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
            Kind::Resource => &self.resources,
            Kind::ResourceTemplate => &self.resource_templates,
        }
    }
}

impl<I> Entry<I> {
    /// The era of this entry: modern exactly when it records `supportedVersions`.
    pub fn era(&self) -> Era {
        if self.supported_versions.is_some() {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    /// The items of one kind.
    pub fn items(&self, kind: Kind) -> &[I] {
        match kind {
            Kind::Tool => &self.tools,
            Kind::Prompt => &self.prompts,
            Kind::Resource => &self.resources,
            Kind::ResourceTemplate => &self.resource_templates,
        }
    }

    /// The taint policy, if any.
    pub fn taint(&self) -> Option<&TaintPolicy> {
        self.policy.as_ref().and_then(|p| p.taint.as_ref())
    }

    /// The sandbox policy, if any.
    pub fn sandbox(&self) -> Option<&SandboxPolicy> {
        self.policy.as_ref().and_then(|p| p.sandbox.as_ref())
    }

    /// The same entry with each item turned into another form.
    pub fn map_items<J>(self, f: impl Fn(Kind, I) -> J) -> Entry<J> {
        let all = |kind, items: Vec<I>| items.into_iter().map(|i| f(kind, i)).collect();
        Entry {
            command: self.command,
            env_passthrough: self.env_passthrough,
            artifacts: self.artifacts,
            protocol_version: self.protocol_version,
            supported_versions: self.supported_versions,
            server_info: self.server_info,
            instructions: self.instructions,
            capabilities: self.capabilities,
            tools: all(Kind::Tool, self.tools),
            prompts: all(Kind::Prompt, self.prompts),
            resources: all(Kind::Resource, self.resources),
            resource_templates: all(Kind::ResourceTemplate, self.resource_templates),
            policy: self.policy,
            digests: self.digests,
        }
    }
}

impl ServerEntry {
    /// Builds an entry from a surface read from a server: sorts items, rejects duplicates and
    /// oversized lists, computes digests. `policy` is the one kept from a previous entry. The
    /// surface is consumed: its items move into the entry.
    pub fn from_surface(
        command: Vec<String>,
        env_passthrough: Vec<String>,
        surface: Surface,
        policy: Option<Policy>,
    ) -> Result<Self, ItemError> {
        let Surface {
            era,
            protocol_version,
            supported_versions,
            server_info,
            capabilities,
            instructions,
            mut items,
        } = surface;
        let mut take =
            |kind: Kind| canonical_items_owned(kind, items.remove(&kind).unwrap_or_default());
        let tools = take(Kind::Tool)?;
        let prompts = take(Kind::Prompt)?;
        let resources = take(Kind::Resource)?;
        let resource_templates = take(Kind::ResourceTemplate)?;
        for (kind, list) in [
            (Kind::Tool, &tools),
            (Kind::Prompt, &prompts),
            (Kind::Resource, &resources),
            (Kind::ResourceTemplate, &resource_templates),
        ] {
            for item in list {
                let what = || {
                    format!(
                        "{} `{}`",
                        kind.noun(),
                        kind.key_of(item).unwrap_or_default()
                    )
                };
                check_nesting(what, item, ITEM_LEVEL)?;
            }
        }
        check_nesting(|| "`capabilities`".to_owned(), &capabilities, FIELD_LEVEL)?;
        check_nesting(|| "`serverInfo`".to_owned(), &server_info, FIELD_LEVEL)?;
        let digests = Digests::compute(
            instructions.as_deref(),
            &tools,
            &prompts,
            &resources,
            &resource_templates,
        );
        let mut env_passthrough = env_passthrough;
        env_passthrough.sort();
        env_passthrough.dedup();
        Ok(Self {
            command,
            env_passthrough,
            artifacts: None,
            protocol_version,
            supported_versions: match era {
                Era::Modern => Some(supported_versions.unwrap_or_default()),
                Era::Legacy => None,
            },
            server_info,
            instructions,
            capabilities,
            tools,
            prompts,
            resources,
            resource_templates,
            policy: policy.filter(|p| !p.is_empty()),
            digests,
        })
    }

    /// The locked item of `kind` with key `key`.
    pub fn item(&self, kind: Kind, key: &str) -> Option<&Value> {
        // Items are sorted by key (see the module docs), so a binary search finds one; were a
        // list ever out of order, a search could only miss, and a miss refuses the item.
        let items = self.items(kind);
        items
            .binary_search_by(|i| kind.key_of(i).unwrap_or_default().cmp(key))
            .ok()
            .map(|i| &items[i])
    }

    /// The entry with `artifacts` pinned (or none), its digests brought up to date.
    pub fn with_artifacts(mut self, artifacts: Option<Artifacts>) -> Self {
        self.digests.artifacts = artifacts.as_ref().map(Artifacts::digest);
        self.digests.surface = self.digests.surface_digest();
        self.artifacts = artifacts;
        self
    }

    /// The entry's surface, as the proxy serves it and `verify` compares it.
    pub fn surface(&self) -> Surface {
        Surface {
            era: self.era(),
            protocol_version: self.protocol_version.clone(),
            supported_versions: self.supported_versions.clone(),
            server_info: self.server_info.clone(),
            capabilities: self.capabilities.clone(),
            instructions: self.instructions.clone(),
            items: Kind::ALL
                .iter()
                .map(|&k| (k, self.items(k).to_vec()))
                .collect(),
        }
    }
}

/// How an entry holds its items, as far as reading and checking the file needs.
pub trait LockedItem: Sized {
    /// Reads a list of items of `kind` (strict: no duplicate key anywhere).
    fn deserialize_items<'de, D: serde::Deserializer<'de>>(
        d: D,
        kind: Kind,
    ) -> Result<Vec<Self>, D::Error>;
    /// The item's key (`name`, `uri` or `uriTemplate` for `kind`) if it is a string.
    fn key(&self, kind: Kind) -> Option<&str>;
    /// Whether the item is a JSON object.
    fn is_object(&self) -> bool;
    /// The digest of the item's canonical form.
    fn digest(&self) -> Sha256Digest;
}

fn locked_tools<'de, D: serde::Deserializer<'de>, I: LockedItem>(d: D) -> Result<Vec<I>, D::Error> {
    I::deserialize_items(d, Kind::Tool)
}

fn locked_prompts<'de, D: serde::Deserializer<'de>, I: LockedItem>(
    d: D,
) -> Result<Vec<I>, D::Error> {
    I::deserialize_items(d, Kind::Prompt)
}

fn locked_resources<'de, D: serde::Deserializer<'de>, I: LockedItem>(
    d: D,
) -> Result<Vec<I>, D::Error> {
    I::deserialize_items(d, Kind::Resource)
}

fn locked_templates<'de, D: serde::Deserializer<'de>, I: LockedItem>(
    d: D,
) -> Result<Vec<I>, D::Error> {
    I::deserialize_items(d, Kind::ResourceTemplate)
}

impl LockedItem for Value {
    fn deserialize_items<'de, D: serde::Deserializer<'de>>(
        d: D,
        _kind: Kind,
    ) -> Result<Vec<Self>, D::Error> {
        crate::canonical::strict_values(d)
    }

    fn key(&self, kind: Kind) -> Option<&str> {
        kind.key_of(self)
    }

    fn is_object(&self) -> bool {
        Value::is_object(self)
    }

    fn digest(&self) -> Sha256Digest {
        Sha256Digest::of_json(self)
    }
}

/// What `show` needs of a locked item, read without building the item's tree: its key, its
/// annotations and its digest, computed from the text as it is read. Small, since a lockfile
/// holds thousands: a short key is kept inline.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemSummary {
    digest: Sha256Digest,
    /// The list it was read from, which says which member is its key.
    kind: Kind,
    is_object: bool,
    /// The key member (`name`, `uri` or `uriTemplate`), where it is a string.
    key: Option<CompactString>,
    annotations: Option<Box<Value>>,
}

impl ItemSummary {
    /// The summary of a full definition from the list of `kind`.
    pub fn of(kind: Kind, item: &Value) -> Self {
        Self::new(
            kind,
            Sha256Digest::of_json(item),
            item.is_object(),
            [kind.key_field(), "annotations"].map(|k| item.get(k).cloned()),
        )
    }

    fn new(kind: Kind, digest: Sha256Digest, is_object: bool, kept: [Option<Value>; 2]) -> Self {
        let [key, annotations] = kept;
        Self {
            digest,
            kind,
            is_object,
            key: match key {
                Some(Value::String(s)) => Some(CompactString::from(s)),
                _ => None,
            },
            annotations: annotations.map(Box::new),
        }
    }

    /// The item's `annotations`, if it has them.
    pub fn annotations(&self) -> Option<&Value> {
        self.annotations.as_deref()
    }
}

/// Reads one [`ItemSummary`] of a list of `kind`.
struct SummarySeed(Kind);

impl<'de> serde::de::DeserializeSeed<'de> for SummarySeed {
    type Value = ItemSummary;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<ItemSummary, D::Error> {
        let kind = self.0;
        let mut kept = [None, None];
        let (digest, is_object) =
            crate::canonical::digest_deserialize(d, &[kind.key_field(), "annotations"], &mut kept)?;
        Ok(ItemSummary::new(
            kind,
            Sha256Digest::from_array(digest),
            is_object,
            kept,
        ))
    }
}

/// Runs `fill` on this thread's vector in `scratch` (reused from one call to the next) and
/// returns what it pushed, copied into a vector of exactly that size. For the many small lists
/// of a large lockfile: growing each list's own vector leaves a trail of freed smaller copies,
/// and fresh pages cost more than the copy (see `FileBytes`). The vector is taken out of its
/// cell while in use, so a nested call would only get an empty one of its own.
fn collect_exact<T: 'static, E>(
    scratch: &'static std::thread::LocalKey<std::cell::Cell<Vec<T>>>,
    fill: impl FnOnce(&mut Vec<T>) -> Result<(), E>,
) -> Result<Vec<T>, E> {
    let mut vec = scratch.take();
    vec.clear();
    let out = fill(&mut vec).map(|()| {
        let mut out = Vec::with_capacity(vec.len());
        out.append(&mut vec);
        out
    });
    vec.clear();
    scratch.set(vec);
    out
}

impl LockedItem for ItemSummary {
    /// Reads the list with `collect_exact`.
    fn deserialize_items<'de, D: serde::Deserializer<'de>>(
        d: D,
        kind: Kind,
    ) -> Result<Vec<Self>, D::Error> {
        struct Items(Kind);
        impl<'de> serde::de::Visitor<'de> for Items {
            type Value = Vec<ItemSummary>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                thread_local! {
                    static SCRATCH: std::cell::Cell<Vec<ItemSummary>> =
                        const { std::cell::Cell::new(Vec::new()) };
                }
                collect_exact(&SCRATCH, |scratch| {
                    while let Some(item) = seq.next_element_seed(SummarySeed(self.0))? {
                        scratch.push(item);
                    }
                    Ok(())
                })
            }
        }
        d.deserialize_seq(Items(kind))
    }

    fn key(&self, kind: Kind) -> Option<&str> {
        if kind.key_field() == self.kind.key_field() {
            self.key.as_deref()
        } else {
            None
        }
    }

    fn is_object(&self) -> bool {
        self.is_object
    }

    fn digest(&self) -> Sha256Digest {
        self.digest
    }
}

/// Whether `name` is a valid server name: 1-64 of `A-Z a-z 0-9 . _ -`, starting alphanumeric.
/// Names appear in file names, audit records and client configs, so keep them plain.
pub fn valid_server_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Whether `name` is a valid environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn valid_env_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// A Python `major.minor` version, as `artifacts.python` holds it.
pub fn valid_python_version(v: &str) -> bool {
    let mut parts = v.split('.');
    let number = |p: Option<&str>| {
        p.is_some_and(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
    };
    number(parts.next()) && number(parts.next()) && parts.next().is_none()
}

/// A package name as the registry spells it: for PyPI a PEP 508 name, for npm an optional
/// `@scope/` and a name. Never anything an installer could read as an option or a path.
pub fn valid_package_name(installer: Installer, name: &str) -> bool {
    let plain = |n: &str, extra: &[u8]| {
        let b = n.as_bytes();
        !b.is_empty()
            && b.len() <= 214
            && b[0].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c) || extra.contains(c))
    };
    match installer {
        Installer::Uv => {
            plain(name, b"") && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
        }
        Installer::Npm => match name.strip_prefix('@') {
            Some(scoped) => scoped
                .split_once('/')
                .is_some_and(|(scope, n)| plain(scope, b"~") && plain(n, b"~")),
            None => plain(name, b"~"),
        },
    }
}

/// Where an npm package sits: `node_modules/` segments, each a package name, ending in `name`.
pub fn valid_npm_path(path: &str, name: &str) -> bool {
    let Some(rest) = path.strip_prefix("node_modules/") else {
        return false;
    };
    let mut last = "";
    for part in rest.split("/node_modules/") {
        if !valid_package_name(Installer::Npm, part) {
            return false;
        }
        last = part;
    }
    last == name
}

/// An exact version: letters, digits and `.+!_-`, starting with a letter or digit.
pub fn valid_package_version(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b".+!_-".contains(c))
}

/// `uv`: `sha256:` and 64 lowercase hex digits; `npm`: `sha512-` and 88 characters of base64.
pub fn check_package_hash(installer: Installer, hash: &str) -> Result<(), String> {
    match installer {
        Installer::Uv => hash.parse::<Sha256Digest>().map(drop),
        Installer::Npm => {
            let ok = hash.strip_prefix("sha512-").is_some_and(|b64| {
                b64.len() == 88
                    && b64.ends_with("==")
                    && b64[..86]
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
            });
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "`{hash}` is not an integrity: expected `sha512-` and 88 characters of base64"
                ))
            }
        }
    }
}

/// Drops taint labels that name tools the entry no longer has; returns the dropped labels.
pub fn prune_policy(entry: &mut ServerEntry) -> Vec<String> {
    let tools: std::collections::BTreeSet<String> = entry
        .tools
        .iter()
        .filter_map(|t| Kind::Tool.key_of(t).map(str::to_owned))
        .collect();
    let mut dropped = Vec::new();
    if let Some(taint) = entry.policy.as_mut().and_then(|p| p.taint.as_mut()) {
        for (list, field) in [(&mut taint.sources, "sources"), (&mut taint.sinks, "sinks")] {
            list.retain(|label| {
                // The wildcards stay valid whatever the server lists.
                let keep = label == RESOURCES_WILDCARD
                    || label == PROMPTS_WILDCARD
                    || tools.contains(label.as_str());
                if !keep {
                    dropped.push(format!("{field}: {label}"));
                }
                keep
            });
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn arb_items() -> impl Strategy<Value = Vec<Value>> {
        let item = prop_oneof![
            8 => ("[a-d]{1,2}", any::<u8>()).prop_map(|(k, n)| json!({"name": k, "n": n})),
            1 => Just(json!({"n": 1})),
            1 => Just(json!(["name"])),
        ];
        prop::collection::vec(item, 0..8)
    }

    proptest! {
        #[test]
        fn item_orderings_agree(items in arb_items()) {
            let copied = canonical_items(Kind::Tool, &items);
            let moved = canonical_items_owned(Kind::Tool, items.clone());
            prop_assert_eq!(&copied, &moved);
            let borrowed = sorted_items(Kind::Tool, &items)
                .map(|v| v.into_iter().cloned().collect::<Vec<_>>());
            prop_assert_eq!(&copied, &borrowed);
            prop_assert_eq!(
                items_are_canonical(Kind::Tool, &items),
                copied.as_ref().is_ok_and(|c| *c == items)
            );
        }
    }
}
