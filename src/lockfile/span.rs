//! Where things are in the lockfile's text: the line and column of a server entry, one of its
//! fields or one of its items, for reports that point into `mcp.lock` (SARIF results, GitHub
//! annotations). It reads the same bytes the lockfile was loaded from; it never validates them
//! (`read` did) and answers `None` for anything it cannot find.
//!
//! Positions come from `serde_json`'s raw values, which borrow the exact slice of the text each
//! value was parsed from, so a string inside a description that happens to equal a tool name
//! cannot be mistaken for the tool.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use super::Kind;

/// A position in the text: 1-based line and 1-based column, counted in UTF-16 code units (the
/// unit SARIF's `utf16CodeUnits` column kind and GitHub use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1, in UTF-16 code units.
    pub column: usize,
}

/// A JSON value's extent: `start` is its first character, `end` the position just after its
/// last one (SARIF's exclusive `endColumn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The value's first character.
    pub start: Position,
    /// Just after its last character.
    pub end: Position,
}

/// Finds server entries, fields and items in one lockfile's text. The text is indexed once, so
/// asking for every item of a large lockfile costs one pass over it.
pub struct Locator {
    servers: BTreeMap<String, EntrySpans>,
}

/// Where one entry, its fields and its items are.
struct EntrySpans {
    entry: Span,
    fields: BTreeMap<String, Span>,
    /// By kind field (`tools`, ...) and item key.
    items: BTreeMap<(String, String), Span>,
}

impl Locator {
    /// Indexes `text` (the bytes `lockfile::load_from_bytes` accepted).
    pub fn new(text: &str) -> Self {
        let lines = Lines::new(text);
        let raw_servers = object(text)
            .and_then(|top| top.get("servers").copied())
            .and_then(|s| object(s.get()))
            .unwrap_or_default();
        let mut servers = BTreeMap::new();
        for (name, raw) in raw_servers {
            let Some(entry) = lines.span(raw.get()) else {
                continue;
            };
            let members = object(raw.get()).unwrap_or_default();
            let mut fields = BTreeMap::new();
            let mut items = BTreeMap::new();
            for (field, value) in &members {
                if let Some(span) = lines.span(value.get()) {
                    fields.insert(field.clone(), span);
                }
                let Some(kind) = Kind::ALL.into_iter().find(|k| k.field() == field) else {
                    continue;
                };
                let list: Vec<&RawValue> = serde_json::from_str(value.get()).unwrap_or_default();
                for item in list {
                    let key = object(item.get())
                        .and_then(|f| f.get(kind.key_field()).copied())
                        .and_then(|k| serde_json::from_str::<String>(k.get()).ok());
                    if let (Some(key), Some(span)) = (key, lines.span(item.get())) {
                        items.entry((field.clone(), key)).or_insert(span);
                    }
                }
            }
            servers.insert(
                name,
                EntrySpans {
                    entry,
                    fields,
                    items,
                },
            );
        }
        Self { servers }
    }

    /// The entry `servers.<name>`.
    pub fn server(&self, name: &str) -> Option<Span> {
        self.servers.get(name).map(|e| e.entry)
    }

    /// The value of `servers.<name>.<field>`.
    pub fn field(&self, name: &str, field: &str) -> Option<Span> {
        self.servers.get(name)?.fields.get(field).copied()
    }

    /// The item of `kind` whose key is `key`, in `servers.<name>.<kind field>`.
    pub fn item(&self, name: &str, kind: Kind, key: &str) -> Option<Span> {
        self.servers
            .get(name)?
            .items
            .get(&(kind.field().to_owned(), key.to_owned()))
            .copied()
    }
}

/// Line starts of a text, to turn byte offsets into positions.
struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { text, starts }
    }

    /// The span of `slice`, which must be a sub-slice of the text.
    fn span(&self, slice: &str) -> Option<Span> {
        let start = (slice.as_ptr() as usize).checked_sub(self.text.as_ptr() as usize)?;
        let end = start + slice.len();
        if end > self.text.len() {
            return None;
        }
        Some(Span {
            start: self.position(start)?,
            end: self.position(end)?,
        })
    }

    fn position(&self, offset: usize) -> Option<Position> {
        let line = self.starts.partition_point(|&s| s <= offset);
        let line_start = *self.starts.get(line.checked_sub(1)?)?;
        let before = self.text.get(line_start..offset)?;
        Some(Position {
            line,
            column: before.encode_utf16().count() + 1,
        })
    }
}

/// A JSON object's members as raw values borrowed from `text`.
fn object(text: &str) -> Option<BTreeMap<String, &RawValue>> {
    serde_json::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"{
  "lockfileVersion": 1,
  "servers": {
    "a": {
      "instructions": "tools: \"b\" and é",
      "tools": [
        {
          "description": "not the b you want",
          "name": "zz"
        },
        {"name": "b", "description": "é"}
      ]
    }
  }
}
"#;

    fn pos(line: usize, column: usize) -> Position {
        Position { line, column }
    }

    #[test]
    fn finds_servers_fields_and_items_by_structure() {
        let l = Locator::new(TEXT);
        assert_eq!(
            l.server("a"),
            Some(Span {
                start: pos(4, 10),
                end: pos(13, 6)
            })
        );
        assert_eq!(l.field("a", "instructions").unwrap().start, pos(5, 23));
        assert_eq!(
            l.item("a", Kind::Tool, "zz"),
            Some(Span {
                start: pos(7, 9),
                end: pos(10, 10)
            })
        );
        // Not the string "b" inside the instructions or a description: the item keyed "b".
        assert_eq!(
            l.item("a", Kind::Tool, "b"),
            Some(Span {
                start: pos(11, 9),
                end: pos(11, 42)
            })
        );
        assert_eq!(l.item("a", Kind::Prompt, "b"), None);
        assert_eq!(l.item("a", Kind::Tool, "c"), None);
        assert_eq!(l.server("b"), None);
    }

    #[test]
    fn columns_count_utf16_code_units() {
        let text = "{\"servers\": {\"\u{10000}\": 1, \"x\": {\"é\u{10000}\": 0, \"tools\": []}}}";
        let l = Locator::new(text);
        // `{"servers": {"𐀀": 1, "x": ` is 27 UTF-16 units (the astral character counts 2).
        assert_eq!(l.server("x").unwrap().start, pos(1, 28));
        assert_eq!(l.field("x", "tools").unwrap().start, pos(1, 48));
    }

    #[test]
    fn unparseable_text_finds_nothing() {
        let l = Locator::new("{\"servers\": ");
        assert_eq!(l.server("a"), None);
    }
}
