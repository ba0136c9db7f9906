//! A strict one-pass scan of a JSON-RPC message that builds no values.
//!
//! The proxy relays most messages unchanged but for their `id`; parsing a 10 MB tool result into
//! a `serde_json::Value` and serializing it again costs far more than the relay itself.
//! [`Scan::message`] checks the whole line exactly as strictly as
//! [`crate::canonical::parse_strict_slice`] does (UTF-8, the JSON grammar, escapes and surrogate
//! pairs, finite numbers, nesting depth, and no duplicate key in any object, compared after
//! unescaping) and records where the members of the top-level object and of each object directly
//! under it (`params`, `result`, `error`) are. The proxy reads the few members it decides on and
//! copies the rest as the peer wrote it.
//!
//! Duplicate keys are refused at every depth, not only where the proxy looks: with two `name`
//! members in `params`, or two `id` members, mcpsum's check could read one and the server the
//! other (which one wins differs between JSON parsers), and a locked-item check would be
//! smuggled past.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;

use serde_json::Value;

/// Containers nested deeper than this are refused, as `serde_json` refuses them.
const MAX_DEPTH: usize = 127;
/// Keys per object checked for duplicates pairwise; larger objects use a set.
const LINEAR_KEYS: usize = 32;

/// Why a line is not a strict JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanError {
    /// Byte offset in the line.
    pub offset: usize,
    /// What is wrong there.
    pub reason: &'static str,
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

impl std::error::Error for ScanError {}

/// Reusable scanner state: the recorded members and the scratch of the duplicate check.
#[derive(Debug, Default)]
pub struct Scan {
    members: Vec<Member>,
    decoded: Vec<String>,
    keys: Vec<Key>,
}

#[derive(Debug, Clone)]
struct Member {
    /// Index (in `members`) of the top-level member whose object value holds this one.
    parent: Option<usize>,
    key: Key,
    value: Range<usize>,
}

/// A key: its raw text between the quotes, and its unescaped text when it had escapes.
#[derive(Debug, Clone)]
struct Key {
    raw: Range<usize>,
    decoded: Option<usize>,
}

impl Key {
    fn text<'a>(&self, text: &'a str, decoded: &'a [String]) -> &'a str {
        match self.decoded {
            Some(i) => decoded.get(i).map_or("", String::as_str),
            None => &text[self.raw.clone()],
        }
    }
}

/// Which members of an object to record.
#[derive(Clone, Copy)]
enum Record {
    Top,
    Under(usize),
    Off,
}

impl Scan {
    /// Checks that `line` is one strict JSON object (surrounding whitespace allowed) and records
    /// its members.
    pub fn message<'a>(&'a mut self, line: &'a [u8]) -> Result<Message<'a>, ScanError> {
        self.members.clear();
        self.decoded.clear();
        self.keys.clear();
        let text = std::str::from_utf8(line).map_err(|e| ScanError {
            offset: e.valid_up_to(),
            reason: "invalid UTF-8",
        })?;
        let mut p = Parser {
            text,
            b: line,
            i: 0,
            scan: self,
        };
        p.ws();
        if p.peek() != Some(b'{') {
            return Err(p.err("not a JSON object"));
        }
        p.object(1, Record::Top)?;
        p.ws();
        if p.i != line.len() {
            return Err(p.err("trailing characters"));
        }
        Ok(Message { text, scan: self })
    }
}

/// The envelope of a message cut short, as [`Scan::head`] reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Head {
    /// The top-level `id`, when it is a string or a number whose value ended before the cut.
    pub id: Option<Value>,
    /// Whether a top-level `method` member began before the cut.
    pub method: bool,
}

impl Scan {
    /// The envelope of a message of which only the first bytes are at hand (one over the size
    /// limit is never read whole): its top-level `id` and whether it has a top-level `method`.
    /// The bytes are scanned as [`Scan::message`] scans a whole line, up to the cut or the
    /// first error, whichever comes first; members inside nested values never count, so an
    /// `id` inside a result is not the message's.
    pub fn head(&mut self, head: &[u8]) -> Head {
        self.members.clear();
        self.decoded.clear();
        self.keys.clear();
        // The cut may split a character: the scan stops before it.
        let text = match std::str::from_utf8(head) {
            Ok(t) => t,
            Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
        };
        let mut p = Parser {
            text,
            b: text.as_bytes(),
            i: 0,
            scan: self,
        };
        p.ws();
        if p.peek() != Some(b'{') {
            return Head::default();
        }
        // An error is expected (the cut): what was recorded before it is read below.
        let _ = p.object(1, Record::Top);
        let mut out = Head::default();
        for m in self.members.iter().filter(|m| m.parent.is_none()) {
            match m.key.text(text, &self.decoded) {
                "method" => out.method = true,
                // A value that runs to the cut may be truncated (`12` of `123`): not an id then.
                "id" if m.value.start < m.value.end && m.value.end < text.len() => {
                    out.id = serde_json::from_str::<Value>(&text[m.value.clone()])
                        .ok()
                        .filter(|v| v.is_string() || v.is_number());
                }
                _ => {}
            }
        }
        out
    }
}

/// A scanned message: lookups of its recorded members.
#[derive(Clone, Copy)]
pub struct Message<'a> {
    text: &'a str,
    scan: &'a Scan,
}

/// A member's value as the peer wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw<'a> {
    text: &'a str,
    start: usize,
}

/// A recorded member.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The key, unescaped.
    pub key: &'a str,
    /// The key as written, with its quotes.
    pub key_json: &'a str,
    /// The value.
    pub value: Raw<'a>,
}

impl<'a> Message<'a> {
    /// The whole line.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The top-level member `key`.
    pub fn get(&self, key: &str) -> Option<Raw<'a>> {
        self.find(None, key).map(|i| self.raw(i))
    }

    /// The member `key` of the object that is the top-level member `parent`.
    pub fn get_in(&self, parent: &str, key: &str) -> Option<Raw<'a>> {
        let p = self.find(None, parent)?;
        self.find(Some(p), key).map(|i| self.raw(i))
    }

    /// The members of the object that is the top-level member `parent`, in order (none when
    /// that member is absent or not an object).
    pub fn entries_in(&self, parent: &str) -> impl Iterator<Item = Entry<'a>> + 'a {
        let p = self.find(None, parent);
        let (text, scan) = (self.text, self.scan);
        scan.members
            .iter()
            .filter(move |m| p.is_some() && m.parent == p)
            .map(move |m| Entry {
                key: m.key.text(text, &scan.decoded),
                key_json: &text[m.key.raw.start - 1..m.key.raw.end + 1],
                value: Raw {
                    text: &text[m.value.clone()],
                    start: m.value.start,
                },
            })
    }

    fn find(&self, parent: Option<usize>, key: &str) -> Option<usize> {
        let (text, decoded) = (self.text.as_bytes(), &self.scan.decoded);
        self.scan.members.iter().position(|m| {
            m.parent == parent
                && match m.key.decoded {
                    None => text.get(m.key.raw.clone()) == Some(key.as_bytes()),
                    Some(i) => decoded.get(i).is_some_and(|d| d == key),
                }
        })
    }

    fn raw(&self, i: usize) -> Raw<'a> {
        let r = self.scan.members[i].value.clone();
        Raw {
            text: &self.text[r.clone()],
            start: r.start,
        }
    }
}

impl<'a> Raw<'a> {
    /// The value's JSON text.
    pub fn json(&self) -> &'a str {
        self.text
    }

    /// Where the value is in the line.
    pub fn range(&self) -> Range<usize> {
        self.start..self.start + self.text.len()
    }

    /// Whether it is an object.
    pub fn is_object(&self) -> bool {
        self.text.starts_with('{')
    }

    /// Whether it is `null`.
    pub fn is_null(&self) -> bool {
        self.text == "null"
    }

    /// The string it is, unescaped; `None` when it is not a string.
    pub fn as_str(&self) -> Option<Cow<'a, str>> {
        let inner = self.text.strip_prefix('"')?.strip_suffix('"')?;
        if inner.contains('\\') {
            serde_json::from_str::<String>(self.text)
                .ok()
                .map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(inner))
        }
    }

    /// The value as a `serde_json::Value` (it was checked, so this only fails on memory).
    pub fn to_value(&self) -> Option<Value> {
        crate::canonical::parse_strict(self.text).ok()
    }
}

struct Parser<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
    scan: &'a mut Scan,
}

impl Parser<'_> {
    fn err(&self, reason: &'static str) -> ScanError {
        ScanError {
            offset: self.i,
            reason,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize, record: Record) -> Result<(), ScanError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1, record),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(drop),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("expected a value")),
            None => Err(self.err("unexpected end of the message")),
        }
    }

    fn object(&mut self, depth: usize, record: Record) -> Result<(), ScanError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        let base = self.scan.keys.len();
        let mut large: Option<HashSet<String>> = None;
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a key"));
            }
            let open = self.i;
            let escaped = self.string()?;
            let key = Key {
                raw: open + 1..self.i - 1,
                decoded: if escaped {
                    Some(self.decode_key(open)?)
                } else {
                    None
                },
            };
            self.unique(base, &mut large, key.clone(), open)?;
            self.ws();
            if self.peek() != Some(b':') {
                return Err(self.err("expected `:`"));
            }
            self.i += 1;
            self.ws();
            let start = self.i;
            let (slot, inner) = match record {
                Record::Top => (Some(None), Record::Under(self.scan.members.len())),
                Record::Under(p) => (Some(Some(p)), Record::Off),
                Record::Off => (None, Record::Off),
            };
            let index = self.scan.members.len();
            if let Some(parent) = slot {
                self.scan.members.push(Member {
                    parent,
                    key,
                    value: start..start,
                });
            }
            self.value(depth, inner)?;
            if slot.is_some() {
                self.scan.members[index].value.end = self.i;
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                _ => return Err(self.err("expected `,` or `}`")),
            }
        }
        self.scan.keys.truncate(base);
        Ok(())
    }

    /// Refuses a key already seen in the object whose keys start at `base`.
    fn unique(
        &mut self,
        base: usize,
        large: &mut Option<HashSet<String>>,
        key: Key,
        at: usize,
    ) -> Result<(), ScanError> {
        let dup = ScanError {
            offset: at,
            reason: "duplicate key",
        };
        let text = key.text(self.text, &self.scan.decoded);
        if let Some(set) = large.as_mut() {
            return if set.insert(text.to_owned()) {
                Ok(())
            } else {
                Err(dup)
            };
        }
        let seen = &self.scan.keys[base..];
        if seen
            .iter()
            .any(|k| k.text(self.text, &self.scan.decoded) == text)
        {
            return Err(dup);
        }
        if seen.len() >= LINEAR_KEYS {
            // Pairwise checks would be quadratic in a hostile object with many keys.
            let mut set: HashSet<String> = seen
                .iter()
                .map(|k| k.text(self.text, &self.scan.decoded).to_owned())
                .collect();
            set.insert(text.to_owned());
            *large = Some(set);
            return Ok(());
        }
        self.scan.keys.push(key);
        Ok(())
    }

    /// Unescapes the key whose opening quote is at `open` (the scan is just past its closing
    /// quote); returns its index in `decoded`.
    fn decode_key(&mut self, open: usize) -> Result<usize, ScanError> {
        let key =
            serde_json::from_str::<String>(&self.text[open..self.i]).map_err(|_| ScanError {
                offset: open,
                reason: "invalid key",
            })?;
        self.scan.decoded.push(key);
        Ok(self.scan.decoded.len() - 1)
    }

    fn array(&mut self, depth: usize) -> Result<(), ScanError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            self.value(depth, Record::Off)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.err("expected `,` or `]`")),
            }
        }
    }

    /// Scans a string from its opening quote; returns whether it has escapes.
    fn string(&mut self) -> Result<bool, ScanError> {
        self.i += 1;
        let mut escaped = false;
        loop {
            self.i += crate::canonical::plain_run(&self.b[self.i..]);
            match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    self.escape()?;
                }
                Some(_) => return Err(self.err("control character in a string")),
                None => return Err(self.err("unterminated string")),
            }
        }
    }

    fn escape(&mut self) -> Result<(), ScanError> {
        match self.b.get(self.i + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                self.i += 2;
                Ok(())
            }
            Some(b'u') => {
                let unit = self.hex4(self.i + 2)?;
                self.i += 6;
                if (0xDC00..=0xDFFF).contains(&unit) {
                    return Err(self.err("lone trailing surrogate"));
                }
                if (0xD800..=0xDBFF).contains(&unit) {
                    if self.b.get(self.i..self.i + 2) != Some(b"\\u") {
                        return Err(self.err("lone leading surrogate"));
                    }
                    let low = self.hex4(self.i + 2)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return Err(self.err("lone leading surrogate"));
                    }
                    self.i += 6;
                }
                Ok(())
            }
            _ => Err(self.err("invalid escape")),
        }
    }

    fn hex4(&self, at: usize) -> Result<u16, ScanError> {
        let digits = self
            .b
            .get(at..at + 4)
            .ok_or_else(|| self.err("invalid \\u escape"))?;
        let mut n = 0u16;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.err("invalid \\u escape")),
            };
            n = n << 4 | u16::from(v);
        }
        Ok(n)
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), ScanError> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(self.err("expected a value"))
        }
    }

    fn number(&mut self) -> Result<(), ScanError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err("invalid number")),
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("invalid number"));
            }
            self.digits();
            float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("invalid number"));
            }
            self.digits();
            float = true;
        }
        // Like serde_json: an integer beyond 64 bits becomes a float, and a float must be finite.
        if (float || self.i - start > 19)
            && !self.text[start..self.i]
                .parse::<f64>()
                .is_ok_and(f64::is_finite)
        {
            return Err(ScanError {
                offset: start,
                reason: "number out of range",
            });
        }
        Ok(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::parse_strict_slice;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;
    use serde_json::json;

    fn ok(line: &str) -> bool {
        Scan::default().message(line.as_bytes()).is_ok()
    }

    /// What the strict parser says: an object, or refused.
    fn strict_ok(line: &[u8]) -> bool {
        parse_strict_slice(line).is_ok_and(|v| v.is_object())
    }

    /// The scan agrees with the strict parser, and every recorded member is the value the
    /// parser reads there.
    fn agrees(line: &[u8]) {
        let mut scan = Scan::default();
        let scanned = scan.message(line);
        let parsed = parse_strict_slice(line).ok().filter(Value::is_object);
        assert_eq!(
            scanned.is_ok(),
            parsed.is_some(),
            "scan {:?} vs parse for {:?}",
            scanned.as_ref().err(),
            String::from_utf8_lossy(line)
        );
        let (Ok(m), Some(Value::Object(obj))) = (scanned, parsed) else {
            return;
        };
        let mut top = Vec::new();
        for (k, v) in &obj {
            let raw = m.get(k).expect("top-level member");
            assert_eq!(raw.to_value().as_ref(), Some(v), "member {k}");
            assert_eq!(&m.text()[raw.range()], raw.json());
            top.push(k.as_str());
            let inner: Vec<(String, Value)> = m
                .entries_in(k)
                .map(|e| (e.key.to_owned(), e.value.to_value().expect("member value")))
                .collect();
            let expected: Vec<(String, Value)> = match v {
                Value::Object(o) => o.iter().map(|(a, b)| (a.clone(), b.clone())).collect(),
                _ => Vec::new(),
            };
            assert_eq!(inner, expected, "members of {k}");
        }
        assert_eq!(
            top.len(),
            m.scan.members.iter().filter(|x| x.parent.is_none()).count()
        );
    }

    #[test]
    fn a_head_gives_the_top_level_id_only() {
        let cases: [(&str, Option<Value>, bool); 10] = [
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"xxxx"#,
                Some(json!(7)),
                false,
            ),
            (
                r#"{"result":{"id":5,"x":"y"},"id":"a\"b","#,
                Some(json!("a\"b")),
                false,
            ),
            (r#"{"result":{"id":5,"x":"#, None, false),
            (
                r#"{ "id" : 12 , "method":"tools/call","params":{"arguments":{"pad":"xx"#,
                Some(json!(12)),
                true,
            ),
            (
                r#"{"method":"notifications/message","params":{"id":3,"data":"xxx"#,
                None,
                true,
            ),
            (r#"{"jsonrpc":"2.0","id":1"#, None, false),
            (r#"{"jsonrpc":"2.0","id":1}"#, Some(json!(1)), false),
            (r#"{"text":"{\"id\":9}","id":null,"#, None, false),
            (r#"not json at all "id":4"#, None, false),
            // A cut inside a character: the scan stops before it.
            (
                "{\"id\":3,\"method\":\"x\",\"p\":\"\u{e9}",
                Some(json!(3)),
                true,
            ),
        ];
        let mut scan = Scan::default();
        for (head, id, method) in cases {
            let bytes = head.as_bytes();
            let bytes = if head.ends_with('\u{e9}') {
                &bytes[..bytes.len() - 1]
            } else {
                bytes
            };
            assert_eq!(scan.head(bytes), Head { id, method }, "{head}");
        }
    }

    #[test]
    fn envelope_members_are_found_and_deep_ids_ignored() {
        let line = br#"{"jsonrpc":"2.0","result":{"content":[{"id":5,"text":"{\"id\":9}"}],"id":"inner"},"id":7}"#;
        let mut scan = Scan::default();
        let m = scan.message(line).unwrap();
        assert_eq!(m.get("id").unwrap().json(), "7");
        assert_eq!(m.get_in("result", "id").unwrap().json(), r#""inner""#);
        assert!(m.get("method").is_none());
        let keys: Vec<&str> = m.entries_in("result").map(|e| e.key).collect();
        assert_eq!(keys, ["content", "id"]);
        assert_eq!(
            m.get("result").unwrap().to_value().unwrap(),
            json!({"content":[{"id":5,"text":"{\"id\":9}"}],"id":"inner"})
        );
    }

    #[test]
    fn escaped_keys_and_strings_are_unescaped() {
        let line = br#"{"\u0069d":"a\"b\\c","met\u0068od":"tools\/call","params":{"n\u0061me":"\ud83d\ude00"}}"#;
        let mut scan = Scan::default();
        let m = scan.message(line).unwrap();
        assert_eq!(m.get("id").unwrap().as_str().unwrap(), "a\"b\\c");
        assert_eq!(m.get("method").unwrap().as_str().unwrap(), "tools/call");
        assert_eq!(m.get_in("params", "name").unwrap().as_str().unwrap(), "😀");
        let e = m.entries_in("params").next().unwrap();
        assert_eq!((e.key, e.key_json), ("name", r#""n\u0061me""#));
    }

    #[test]
    fn duplicate_keys_are_refused_at_every_depth_even_when_escaped() {
        for line in [
            r#"{"id":1,"id":2}"#,
            r#"{"id":1,"\u0069d":2}"#,
            r#"{"params":{"name":"echo","name":"rm"}}"#,
            r#"{"params":{"name":"echo","n\u0061me":"rm"}}"#,
            r#"{"result":{"content":[{"a":1,"a":1}]}}"#,
            r#"{"x":[[[{"k":{},"k":[]}]]]}"#,
        ] {
            assert!(!ok(line), "{line}");
            assert!(!strict_ok(line.as_bytes()), "{line}");
        }
        // The same key in different objects is fine.
        assert!(ok(r#"{"id":1,"params":{"id":2,"x":{"id":3}}}"#));
        // A large object switches to the set.
        let many: Vec<String> = (0..100).map(|i| format!("\"k{i}\":{i}")).collect();
        assert!(ok(&format!("{{{}}}", many.join(","))));
        assert!(!ok(&format!("{{{},\"k7\":0}}", many.join(","))));
        assert!(!ok(&format!("{{{},\"k\\u0037\":0}}", many.join(","))));
    }

    #[test]
    fn ids_of_every_json_type_are_read_as_written() {
        for id in [
            "0",
            "-1",
            "1.5",
            "1e3",
            "18446744073709551615",
            "\"x\"",
            "\"\"",
            "null",
            "true",
            "[1]",
            "{\"a\":1}",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let mut scan = Scan::default();
            let m = scan.message(line.as_bytes()).unwrap();
            assert_eq!(m.get("id").unwrap().json(), id);
            agrees(line.as_bytes());
        }
    }

    #[test]
    fn matches_the_strict_parser_on_edge_cases() {
        let depth = |n: usize| format!("{}{}", "[".repeat(n - 1), "]".repeat(n - 1));
        let cases = [
            "{}".to_owned(),
            " \t\r\n{ } \n".to_owned(),
            r#"{"a":1,}"#.to_owned(),
            r#"{"a" 1}"#.to_owned(),
            r#"{"a":01}"#.to_owned(),
            r#"{"a":-}"#.to_owned(),
            r#"{"a":1.}"#.to_owned(),
            r#"{"a":.5}"#.to_owned(),
            r#"{"a":1e}"#.to_owned(),
            r#"{"a":1e+5,"b":-0.0e-0,"c":-0}"#.to_owned(),
            r#"{"a":1e400}"#.to_owned(),
            r#"{"a":1e-400}"#.to_owned(),
            format!(r#"{{"a":{}}}"#, "9".repeat(400)),
            format!(r#"{{"a":{}}}"#, "9".repeat(25)),
            r#"{"a":"\ud800"}"#.to_owned(),
            r#"{"a":"\udc00"}"#.to_owned(),
            r#"{"a":"\ud800\u0041"}"#.to_owned(),
            r#"{"a":"\ud800\n"}"#.to_owned(),
            r#"{"a":"\ud83d\ude00"}"#.to_owned(),
            r#"{"a":"\x"}"#.to_owned(),
            r#"{"a":"\u12"}"#.to_owned(),
            r#"{"a":"\u12G4"}"#.to_owned(),
            "{\"a\":\"tab\there\"}".to_owned(),
            "{\"a\":\"nul\u{0}\"}".to_owned(),
            "{\"a\":\"é ☃ 😀\"}".to_owned(),
            r#"{"a":tru}"#.to_owned(),
            r#"{"a":nulll}"#.to_owned(),
            r#"{"a":[1,]}"#.to_owned(),
            r#"{"a":[,1]}"#.to_owned(),
            r#"{"a":1}{"b":2}"#.to_owned(),
            r#"{"a":1} x"#.to_owned(),
            r#"{"a":"#.to_owned(),
            r#"{"a":"abc"#.to_owned(),
            "[1]".to_owned(),
            "\"s\"".to_owned(),
            String::new(),
            format!(r#"{{"a":{}}}"#, depth(126)),
            format!(r#"{{"a":{}}}"#, depth(127)),
            format!(r#"{{"a":{}}}"#, depth(128)),
        ];
        for c in &cases {
            agrees(c.as_bytes());
        }
        agrees(b"{\"a\":\"\xff\"}");
        agrees(b"{\"a\":\"\xc3\"}");
    }

    #[test]
    fn long_strings_find_their_end_and_their_control_characters() {
        for n in [0, 1, 15, 16, 17, 63, 64, 65, 200, 5000] {
            let plain = format!(r#"{{"a":"{}"}}"#, "x".repeat(n));
            agrees(plain.as_bytes());
            let escaped = format!(r#"{{"a":"{}\"{}"}}"#, "x".repeat(n), "y".repeat(n));
            agrees(escaped.as_bytes());
            for at in [0, n / 2, n.saturating_sub(1)] {
                let mut s = "x".repeat(n.max(1)).into_bytes();
                let last = s.len() - 1;
                s[at.min(last)] = 0x1f;
                let mut line = br#"{"a":""#.to_vec();
                line.extend_from_slice(&s);
                line.extend_from_slice(br#""}"#);
                agrees(&line);
            }
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-c\\\\\"é]{0,3}", inner), 0..6)
                    .prop_map(|kv| { Value::Object(kv.into_iter().collect()) }),
            ]
        })
    }

    /// Pieces of JSON, valid and not, that random concatenation turns into near-JSON.
    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just(",".to_owned()),
            Just(":".to_owned()),
            Just(" ".to_owned()),
            Just("\"a\"".to_owned()),
            Just("\"a\":".to_owned()),
            Just("\"id\":".to_owned()),
            Just("\"\\u0061\":".to_owned()),
            Just("\"\\ud800\\udc00\"".to_owned()),
            Just("\"\\ud800\"".to_owned()),
            Just("\"\\".to_owned()),
            Just("\"".to_owned()),
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("-".to_owned()),
            Just("0".to_owned()),
            Just("12".to_owned()),
            Just(".5".to_owned()),
            Just("e9".to_owned()),
            Just("1e999".to_owned()),
            "[ -~]{1,3}",
        ]
    }

    proptest! {
        #[test]
        fn valid_objects_are_accepted_and_members_read_back(v in json_value(), pretty in any::<bool>()) {
            let obj = match v {
                Value::Object(o) => Value::Object(o),
                other => json!({"id": 1, "result": other, "params": {"x": other}}),
            };
            let line = if pretty { serde_json::to_vec_pretty(&obj) } else { serde_json::to_vec(&obj) }.unwrap();
            agrees(&line);
            prop_assert!(Scan::default().message(&line).is_ok());
        }

        #[test]
        fn near_json_is_judged_as_the_strict_parser_judges_it(parts in prop::collection::vec(token(), 1..24)) {
            let line = format!("{{{}", parts.concat());
            agrees(line.as_bytes());
        }

        #[test]
        fn mutated_json_is_judged_as_the_strict_parser_judges_it(
            v in json_value(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let mut line = serde_json::to_vec(&json!({"id": 1, "result": v})).unwrap();
            for (at, byte) in edits {
                let i = at.index(line.len());
                line[i] = byte;
            }
            agrees(&line);
        }
    }
}
