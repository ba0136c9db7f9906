//! Comparing a live surface with a locked entry, classified as the lockfile format's drift table
//! says, and rendering the difference for a reviewer.
//!
//! Definitional: any item added, removed or changed; instructions; the era. Informational:
//! `serverInfo`, `capabilities`, `protocolVersion`, `supportedVersions`. A 2026-07-28 server that
//! no longer lists the locked version cannot be spoken to as locked: definitional as well.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use crate::lockfile::{Era, ItemError, Kind, ServerEntry, Sha256Digest, Surface, sorted_items};
use crate::output::{paint, style};
use crate::text::{sanitize, sanitize_line};

/// How serious a difference is; ordered by strictness so combining is `max()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Nothing changed.
    Clean,
    /// Only metadata changed; reported, allowed.
    Informational,
    /// The surface the model sees changed.
    Definitional,
}

/// One item that differs.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemChange {
    /// The kind.
    #[serde(serialize_with = "ser_kind")]
    pub kind: Kind,
    /// Its key.
    pub key: String,
    /// `added`, `removed` or `changed`.
    pub change: &'static str,
    /// The locked definition.
    #[serde(skip)]
    pub locked: Option<Value>,
    /// The live definition.
    #[serde(skip)]
    pub live: Option<Value>,
    /// Digest of the locked definition.
    pub locked_digest: Option<Sha256Digest>,
    /// Digest of the live definition.
    pub live_digest: Option<Sha256Digest>,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's signature")]
fn ser_kind<S: serde::Serializer>(kind: &Kind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind.noun())
}

/// A top-level field that differs.
#[derive(Debug, Clone, Serialize)]
pub struct FieldChange {
    /// The field (`serverInfo`, `instructions`, `era`, ...).
    pub field: &'static str,
    /// Its class.
    pub class: Class,
    /// Locked value.
    pub locked: Value,
    /// Live value.
    pub live: Value,
}

/// Every difference between an entry and a live surface.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Drift {
    /// Items added, removed or changed, by kind then key.
    pub items: Vec<ItemChange>,
    /// Top-level fields that differ.
    pub fields: Vec<FieldChange>,
}

impl Drift {
    /// The overall class.
    pub fn class(&self) -> Class {
        let items = if self.items.is_empty() {
            Class::Clean
        } else {
            Class::Definitional
        };
        self.fields.iter().map(|f| f.class).fold(items, Class::max)
    }

    /// A one-line summary such as "tool `x` changed, 2 tools added".
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = self
            .items
            .iter()
            .take(5)
            .map(|c| format!("{} `{}` {}", c.kind.noun(), sanitize_line(&c.key), c.change))
            .collect();
        if self.items.len() > 5 {
            parts.push(format!("{} more items", self.items.len() - 5));
        }
        parts.extend(
            self.fields
                .iter()
                .filter(|f| f.class == Class::Definitional)
                .map(|f| format!("{} changed", f.field)),
        );
        parts.join(", ")
    }
}

/// Compares `live` with the locked `entry`.
pub fn compare(entry: &ServerEntry, live: &Surface) -> Result<Drift, ItemError> {
    let mut drift = Drift::default();
    for kind in Kind::ALL {
        let live_items = sorted_items(kind, live.items(kind))?;
        let locked_items = entry.items(kind);
        let mut li = locked_items.iter().peekable();
        let mut ri = live_items.iter().copied().peekable();
        loop {
            let ord = match (li.peek(), ri.peek()) {
                (None, None) => break,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(a), Some(b)) => kind.key_of(a).cmp(&kind.key_of(b)),
            };
            match ord {
                std::cmp::Ordering::Less => {
                    let a = li.next().cloned();
                    drift.items.push(change(kind, "removed", a, None));
                }
                std::cmp::Ordering::Greater => {
                    let b = ri.next().cloned();
                    drift.items.push(change(kind, "added", None, b));
                }
                std::cmp::Ordering::Equal => {
                    let (a, b) = (li.next().cloned(), ri.next().cloned());
                    let (da, db) = (
                        a.as_ref().map(Sha256Digest::of_json),
                        b.as_ref().map(Sha256Digest::of_json),
                    );
                    if da != db {
                        drift.items.push(change(kind, "changed", a, b));
                    }
                }
            }
        }
    }
    if entry.era() != live.era {
        drift.fields.push(FieldChange {
            field: "era",
            class: Class::Definitional,
            locked: Value::String(entry.era().to_string()),
            live: Value::String(live.era.to_string()),
        });
    }
    if entry.instructions != live.instructions {
        drift.fields.push(FieldChange {
            field: "instructions",
            class: Class::Definitional,
            locked: entry
                .instructions
                .clone()
                .map_or(Value::Null, Value::String),
            live: live.instructions.clone().map_or(Value::Null, Value::String),
        });
    }
    if let (Era::Modern, Some(versions)) = (live.era, &live.supported_versions)
        && entry.era() == Era::Modern
        && !versions.contains(&entry.protocol_version)
    {
        drift.fields.push(FieldChange {
            field: "supportedVersions (the locked protocolVersion is no longer listed)",
            class: Class::Definitional,
            locked: Value::String(entry.protocol_version.clone()),
            live: versions.iter().cloned().map(Value::String).collect(),
        });
    }
    let info: [(&'static str, Value, Value); 4] = [
        (
            "serverInfo",
            entry.server_info.clone(),
            live.server_info.clone(),
        ),
        (
            "capabilities",
            entry.capabilities.clone(),
            live.capabilities.clone(),
        ),
        (
            "protocolVersion",
            Value::String(entry.protocol_version.clone()),
            Value::String(live.protocol_version.clone()),
        ),
        (
            "supportedVersions",
            entry
                .supported_versions
                .clone()
                .map_or(Value::Null, |v| v.into_iter().map(Value::String).collect()),
            live.supported_versions
                .clone()
                .map_or(Value::Null, |v| v.into_iter().map(Value::String).collect()),
        ),
    ];
    for (field, locked, live_v) in info {
        if Sha256Digest::of_json(&locked) != Sha256Digest::of_json(&live_v) {
            drift.fields.push(FieldChange {
                field,
                class: Class::Informational,
                locked,
                live: live_v,
            });
        }
    }
    Ok(drift)
}

fn change(
    kind: Kind,
    what: &'static str,
    locked: Option<Value>,
    live: Option<Value>,
) -> ItemChange {
    let key = locked
        .as_ref()
        .or(live.as_ref())
        .and_then(|v| kind.key_of(v))
        .unwrap_or_default()
        .to_owned();
    ItemChange {
        kind,
        key,
        change: what,
        locked_digest: locked.as_ref().map(Sha256Digest::of_json),
        live_digest: live.as_ref().map(Sha256Digest::of_json),
        locked,
        live,
    }
}

/// Strings at least this long get a word diff instead of only a line diff.
const LONG_STRING: usize = 60;

/// Renders the drift for a reviewer, each line indented by `indent`.
pub fn render(drift: &Drift, indent: &str) -> String {
    let mut out = String::new();
    for c in &drift.items {
        let head = format!("{} `{}` {}", c.kind.noun(), sanitize_line(&c.key), c.change);
        match c.change {
            "added" => {
                let _ = writeln!(out, "{indent}{}", paint(style::ADDED, format!("+ {head}")));
                if let Some(v) = &c.live {
                    for line in pretty(v).lines() {
                        let line = sanitize_line(line);
                        let _ = writeln!(
                            out,
                            "{indent}    {}",
                            paint(style::ADDED, format!("+{line}"))
                        );
                    }
                }
            }
            "removed" => {
                let _ = writeln!(
                    out,
                    "{indent}{}",
                    paint(style::REMOVED, format!("- {head}"))
                );
            }
            _ => {
                let _ = writeln!(out, "{indent}{}", paint(style::WARN, format!("~ {head}")));
                if let (Some(a), Some(b)) = (&c.locked, &c.live) {
                    out.push_str(&render_value_change(a, b, &format!("{indent}    ")));
                }
            }
        }
    }
    for f in &drift.fields {
        let label = match f.class {
            Class::Definitional => paint(style::WARN, format!("~ {}", f.field)),
            _ => paint(style::DIM, format!("~ {} (informational)", f.field)),
        };
        let _ = writeln!(out, "{indent}{label}");
        out.push_str(&render_value_change(
            &f.locked,
            &f.live,
            &format!("{indent}    "),
        ));
    }
    out
}

/// A unified diff of the pretty JSON of `a` and `b` (empty when they are equal), each line
/// indented by `indent`: how a command that edits an entry shows the change before writing it.
pub fn json_diff(a: &Value, b: &Value, indent: &str) -> String {
    if a == b {
        return String::new();
    }
    let (pa, pb) = (pretty(a), pretty(b));
    let mut out = String::new();
    let diff = TextDiff::from_lines(&pa, &pb);
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        let _ = writeln!(out, "{indent}{}", paint(style::HUNK, hunk.header()));
        for change in hunk.iter_changes() {
            let line = sanitize_line(change.value().trim_end_matches('\n'));
            let text = match change.tag() {
                ChangeTag::Delete => paint(style::REMOVED, format!("-{line}")),
                ChangeTag::Insert => paint(style::ADDED, format!("+{line}")),
                ChangeTag::Equal => format!(" {line}"),
            };
            let _ = writeln!(out, "{indent}{text}");
        }
    }
    out
}

/// Word diffs of long strings that changed, then a unified diff of the pretty JSON unless the
/// long strings were the only change.
fn render_value_change(a: &Value, b: &Value, indent: &str) -> String {
    let mut out = String::new();
    let mut long = Vec::new();
    let mut other = false;
    changed_leaves(a, b, String::new(), &mut long, &mut other);
    for (path, old, new) in &long {
        let label = if path.is_empty() {
            "text".to_owned()
        } else {
            sanitize_line(path)
        };
        let _ = writeln!(out, "{indent}{}", paint(style::BOLD, format!("{label}:")));
        let _ = writeln!(out, "{indent}  {}", word_diff(old, new));
    }
    if other || long.is_empty() {
        out.push_str(&json_diff(a, b, indent));
    }
    out
}

/// Collects long string leaves that differ; `other` is set when anything else differs.
fn changed_leaves(
    a: &Value,
    b: &Value,
    path: String,
    long: &mut Vec<(String, String, String)>,
    other: &mut bool,
) {
    match (a, b) {
        (Value::String(x), Value::String(y)) if x != y => {
            if x.chars().count().max(y.chars().count()) >= LONG_STRING {
                long.push((path, x.clone(), y.clone()));
            } else {
                *other = true;
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match y.get(k) {
                    Some(vb) => changed_leaves(va, vb, p, long, other),
                    None => *other = true,
                }
            }
            if y.keys().any(|k| !x.contains_key(k)) {
                *other = true;
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                changed_leaves(va, vb, format!("{path}[{i}]"), long, other);
            }
        }
        _ => {
            if Sha256Digest::of_json(a) != Sha256Digest::of_json(b) {
                *other = true;
            }
        }
    }
}

/// `[-removed-]{+added+}` inline, coloured when colour is on.
pub fn word_diff(old: &str, new: &str) -> String {
    let diff = TextDiff::from_words(old, new);
    let tokens: Vec<(ChangeTag, &str)> = diff
        .iter_all_changes()
        .map(|c| (c.tag(), c.value()))
        .collect();
    let mut out = String::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i].0 == ChangeTag::Equal {
            out.push_str(&sanitize(tokens[i].1));
            i += 1;
            continue;
        }
        // A changed phrase: deletions and insertions, joined across the whitespace between
        // them, so a rewritten phrase reads as one `[-…-]{+…+}` pair.
        let (mut del, mut ins) = (String::new(), String::new());
        while i < tokens.len() {
            let (tag, text) = tokens[i];
            match tag {
                ChangeTag::Delete => del.push_str(text),
                ChangeTag::Insert => ins.push_str(text),
                ChangeTag::Equal
                    if text.trim().is_empty()
                        && tokens.get(i + 1).is_some_and(|t| t.0 != ChangeTag::Equal) =>
                {
                    if !del.is_empty() {
                        del.push_str(text);
                    }
                    if !ins.is_empty() {
                        ins.push_str(text);
                    }
                }
                ChangeTag::Equal => break,
            }
            i += 1;
        }
        if !del.is_empty() {
            out.push_str(&paint(style::REMOVED, format!("[-{}-]", sanitize(&del))));
        }
        if !ins.is_empty() {
            out.push_str(&paint(style::ADDED, format!("{{+{}+}}", sanitize(&ins))));
        }
    }
    out
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_diff_marks_changed_words() {
        assert_eq!(
            anstream::adapter::strip_str(&word_diff(
                "Get the current time",
                "Get the exact time now"
            ))
            .to_string(),
            "Get the [-current-]{+exact+} time{+ now+}"
        );
    }
}
