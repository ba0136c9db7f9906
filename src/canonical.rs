//! RFC 8785 (JCS) canonical JSON and strict JSON parsing.
//!
//! Canonical bytes are what digests are computed over; they are never written to a file. The
//! serializer here writes them straight into SHA-256 (through a small buffer) for digests, or into
//! a vector for [`canonicalize`]:
//!
//! - numbers are IEEE-754 doubles printed as ECMAScript `Number.prototype.toString` does, through
//!   `ryu-js`; integers beyond 2^53 are first rounded to the nearest double, as a JSON parser in
//!   JavaScript would; integers up to 2^53 are exact doubles and print as their digits;
//! - strings escape only `"`, `\` and U+0000-U+001F (`\b \t \n \f \r`, else `\u00xx`), everything
//!   else is written as UTF-8;
//! - object members are sorted by the UTF-16 code units of their names ([`cmp_utf16`]).
//!
//! `serde_json_canonicalizer` is the reference it is tested against (RFC 8785's own vectors and a
//! property test over arbitrary JSON), so a change that breaks either fails here first. This one
//! stays because it is faster on the same items (1.86× to 4.35× `serde_json_canonicalizer`'s
//! throughput, `BENCHMARKS.md`'s canonicalizer table) and can stream into SHA-256 without
//! building the canonical bytes.
//!
//! [`parse_strict`] is the only way mcpsum reads JSON from a file or a peer: RFC 8785 requires
//! I-JSON input, so duplicate object keys are rejected instead of silently keeping the last one
//! (`serde_json`'s default). Lone surrogates are already rejected by `serde_json`.

use std::cmp::Ordering;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};
use sha2::{Digest as _, Sha256};

/// The RFC 8785 canonical form of `value`.
pub fn canonicalize(value: &Value) -> Vec<u8> {
    let mut w = Writer::new(Vec::new());
    w.value(value);
    w.sink
}

/// SHA-256 of the RFC 8785 canonical form of `value`, without building that form in memory.
pub fn digest(value: &Value) -> [u8; 32] {
    let mut w = Writer::new(HashSink::new());
    w.value(value);
    w.sink.finish()
}

/// Compares two strings by their UTF-16 code units (RFC 8785 §3.2.3), without re-encoding them.
///
/// UTF-8 byte order is code point order, and UTF-16 order differs from it only between a code
/// point in U+E000-U+FFFF (one unit, 0xE000-0xFFFF) and a supplementary one (a surrogate pair
/// starting 0xD800-0xDBFF, so it sorts first). At the first differing byte both strings are at
/// the same character boundary whenever that byte starts a character, and such a pair is exactly
/// lead bytes 0xEE/0xEF against 0xF0-0xF4.
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    match x.iter().zip(y).position(|(p, q)| p != q) {
        None => x.len().cmp(&y.len()),
        Some(i) => match (x[i], y[i]) {
            (0xEE | 0xEF, 0xF0..) => Ordering::Greater,
            (0xF0.., 0xEE | 0xEF) => Ordering::Less,
            (p, q) => p.cmp(&q),
        },
    }
}

/// Builds a digest from canonical pieces: whole values, or an object written member by member
/// by a caller that knows its keys are already in [`cmp_utf16`] order.
pub struct CanonicalHasher {
    sink: HashSink,
}

impl CanonicalHasher {
    /// An empty hasher.
    pub fn new() -> Self {
        Self {
            sink: HashSink::new(),
        }
    }

    /// Appends bytes that are already canonical (punctuation, `null`, a plain ASCII string).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.sink.put(bytes);
    }

    /// Appends a canonical JSON string.
    pub fn string(&mut self, s: &str) {
        Writer::new(&mut self.sink).string(s);
    }

    /// Appends the canonical form of a value.
    pub fn value(&mut self, v: &Value) {
        Writer::new(&mut self.sink).value(v);
    }

    /// The SHA-256 of everything appended.
    pub fn finish(self) -> [u8; 32] {
        self.sink.finish()
    }
}

impl Default for CanonicalHasher {
    fn default() -> Self {
        Self::new()
    }
}

/// Where canonical bytes go.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl<S: Sink> Sink for &mut S {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        (**self).put(bytes);
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// SHA-256 fed in blocks of [`HASH_CHUNK`] bytes: many small writes cost one copy each. The
/// buffer lives inline, so a digest allocates nothing.
struct HashSink {
    hasher: Sha256,
    buf: [u8; HASH_CHUNK],
    len: usize,
}

const HASH_CHUNK: usize = 1024;

impl HashSink {
    fn new() -> Self {
        Self {
            hasher: Sha256::new(),
            buf: [0; HASH_CHUNK],
            len: 0,
        }
    }

    fn finish(mut self) -> [u8; 32] {
        self.hasher.update(&self.buf[..self.len]);
        self.hasher.finalize().into()
    }
}

impl Sink for HashSink {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if let Some(room) = self.buf.get_mut(self.len..self.len + bytes.len()) {
            room.copy_from_slice(bytes);
            self.len += bytes.len();
            return;
        }
        self.hasher.update(&self.buf[..self.len]);
        self.len = 0;
        if bytes.len() >= HASH_CHUNK {
            self.hasher.update(bytes);
        } else {
            self.buf[..bytes.len()].copy_from_slice(bytes);
            self.len = bytes.len();
        }
    }
}

/// The serializer. `members` is one stack shared by every object being written, so sorting an
/// object's members allocates nothing once the stack has grown to the widest nesting.
struct Writer<'a, S> {
    sink: S,
    members: Vec<(&'a str, &'a Value)>,
}

/// For each byte, 0 when it is written as it is, else the letter of its short escape, or `u`.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0A] = b'n';
    t[0x0C] = b'f';
    t[0x0D] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Integers of at most this magnitude are exact doubles.
const EXACT_INT: u64 = 1 << 53;

impl<'a, S: Sink> Writer<'a, S> {
    fn new(sink: S) -> Self {
        Self {
            sink,
            members: Vec::new(),
        }
    }

    fn value(&mut self, v: &'a Value) {
        match v {
            Value::Null => self.sink.put(b"null"),
            Value::Bool(true) => self.sink.put(b"true"),
            Value::Bool(false) => self.sink.put(b"false"),
            Value::Number(n) => self.number(n),
            Value::String(s) => self.string(s),
            Value::Array(items) => {
                self.sink.put(b"[");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.sink.put(b",");
                    }
                    self.value(item);
                }
                self.sink.put(b"]");
            }
            Value::Object(map) => self.object(map),
        }
    }

    fn object(&mut self, map: &'a Map<String, Value>) {
        if map.len() <= 1 {
            // Nothing to sort (common in schemas: `{"type": "string"}`).
            self.sink.put(b"{");
            if let Some((key, value)) = map.iter().next() {
                self.string(key);
                self.sink.put(b":");
                self.value(value);
            }
            self.sink.put(b"}");
            return;
        }
        let start = self.members.len();
        self.members
            .extend(map.iter().map(|(k, v)| (k.as_str(), v)));
        // Keys of one object are distinct, so an unstable sort gives the one order there is.
        self.members[start..].sort_unstable_by(|a, b| cmp_utf16(a.0, b.0));
        self.sink.put(b"{");
        for i in start..self.members.len() {
            let (key, value) = self.members[i];
            if i > start {
                self.sink.put(b",");
            }
            self.string(key);
            self.sink.put(b":");
            self.value(value);
        }
        self.members.truncate(start);
        self.sink.put(b"}");
    }

    fn number(&mut self, n: &Number) {
        if let Some(u) = n.as_u64() {
            if u <= EXACT_INT {
                self.sink.put(itoa::Buffer::new().format(u).as_bytes());
            } else {
                // Rounded to the nearest double, as the number means in I-JSON.
                #[allow(clippy::cast_precision_loss)]
                self.double(u as f64);
            }
        } else if let Some(i) = n.as_i64() {
            if i.unsigned_abs() <= EXACT_INT {
                self.sink.put(itoa::Buffer::new().format(i).as_bytes());
            } else {
                #[allow(clippy::cast_precision_loss)]
                self.double(i as f64);
            }
        } else if let Some(f) = n.as_f64() {
            self.double(f);
        }
    }

    fn double(&mut self, f: f64) {
        // A `serde_json::Number` is never NaN or infinite; print such a value as `null` (as
        // ECMAScript's JSON.stringify does) rather than panic, should that ever change: the
        // digest would then mismatch and be reported, never accepted.
        if f.is_finite() {
            self.sink
                .put(ryu_js::Buffer::new().format_finite(f).as_bytes());
        } else {
            self.sink.put(b"null");
        }
    }

    fn string(&mut self, s: &str) {
        let bytes = s.as_bytes();
        self.sink.put(b"\"");
        // The escaped bytes are exactly those that end a plain run in JSON text.
        let plain = plain_run(bytes);
        if plain == bytes.len() {
            self.sink.put(bytes);
            self.sink.put(b"\"");
            return;
        }
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate().skip(plain) {
            let esc = ESCAPE[usize::from(b)];
            if esc == 0 {
                continue;
            }
            if start < i {
                self.sink.put(&bytes[start..i]);
            }
            if esc == b'u' {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                self.sink.put(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xF)],
                ]);
            } else {
                self.sink.put(&[b'\\', esc]);
            }
            start = i + 1;
        }
        if start < bytes.len() {
            self.sink.put(&bytes[start..]);
        }
        self.sink.put(b"\"");
    }
}

/// The digest of the value `deserializer` yields, computed while it is read: the canonical form
/// is written as the text is parsed (members sorted in place), and no tree of the value is
/// built. Only the top-level members named in `capture` are kept, in `captured` at the same
/// index; it also says whether the value was an object. As strict as [`parse_strict`]: a
/// duplicate key anywhere is an error.
pub fn digest_deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
    capture: &[&str],
    captured: &mut [Option<Value>],
) -> Result<([u8; 32], bool), D::Error> {
    // The buffers are kept per thread, so that digesting many small items allocates nothing.
    thread_local! {
        static BUFFERS: std::cell::RefCell<TextCanon> = std::cell::RefCell::default();
    }
    BUFFERS.with_borrow_mut(|st| {
        st.out.clear();
        st.keys.clear();
        st.members.clear();
        let is_object = deserializer.deserialize_any(CanonSeed {
            st: &mut *st,
            capture: Some((capture, captured)),
        })?;
        Ok((Sha256::digest(&st.out).into(), is_object))
    })
}

/// The state of [`digest_deserialize`]: the canonical bytes so far, a buffer for re-ordering an
/// object's members, the keys of the objects being read, and one stack of members (the key's
/// range in `keys`, the member's range in `out`) shared by every object being read.
#[derive(Default)]
struct TextCanon {
    out: Vec<u8>,
    scratch: Vec<u8>,
    keys: String,
    members: Vec<Member>,
}

/// One member of an object being read: where its key is in `keys` and its canonical
/// `"key":value` in `out`.
#[derive(Clone, Copy)]
struct Member {
    key: (usize, usize),
    start: usize,
    end: usize,
}

/// Writes the canonical form of one value into `st.out`; yields whether it was an object.
struct CanonSeed<'s> {
    st: &'s mut TextCanon,
    /// Only for the top-level value: the member names to keep and where to keep their values.
    capture: Option<(&'s [&'s str], &'s mut [Option<Value>])>,
}

impl<'de> DeserializeSeed<'de> for CanonSeed<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CanonSeed<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<bool, E> {
        self.st.out.put(if v { b"true" } else { b"false" });
        Ok(false)
    }

    fn visit_i64<E>(self, v: i64) -> Result<bool, E> {
        Writer::new(&mut self.st.out).number(&Number::from(v));
        Ok(false)
    }

    fn visit_u64<E>(self, v: u64) -> Result<bool, E> {
        Writer::new(&mut self.st.out).number(&Number::from(v));
        Ok(false)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<bool, E> {
        let n = Number::from_f64(v).ok_or_else(|| E::custom("number out of range"))?;
        Writer::new(&mut self.st.out).number(&n);
        Ok(false)
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Writer::new(&mut self.st.out).string(v);
        Ok(false)
    }

    fn visit_unit<E>(self) -> Result<bool, E> {
        self.st.out.put(b"null");
        Ok(false)
    }

    fn visit_none<E>(self) -> Result<bool, E> {
        self.st.out.put(b"null");
        Ok(false)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let st = self.st;
        st.out.push(b'[');
        let mut first = true;
        loop {
            let mark = st.out.len();
            if !first {
                st.out.push(b',');
            }
            let seed = CanonSeed {
                st: &mut *st,
                capture: None,
            };
            if seq.next_element_seed(seed)?.is_none() {
                st.out.truncate(mark);
                break;
            }
            first = false;
        }
        st.out.push(b']');
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let (st, mut capture) = (self.st, self.capture);
        st.out.push(b'{');
        let body = st.out.len();
        let base = st.members.len();
        let keys_base = st.keys.len();
        loop {
            let key_start = st.keys.len();
            if map.next_key_seed(KeySeed(&mut st.keys))?.is_none() {
                break;
            }
            let key = (key_start, st.keys.len());
            if st.members.len() > base {
                st.out.push(b',');
            }
            let start = st.out.len();
            Writer::new(&mut st.out).string(&st.keys[key.0..key.1]);
            st.out.push(b':');
            let kept = capture.as_mut().and_then(|(names, values)| {
                let i = names.iter().position(|n| *n == &st.keys[key.0..key.1])?;
                Some((i, values))
            });
            match kept {
                Some((i, values)) => {
                    let StrictValue(v) = map.next_value()?;
                    Writer::new(&mut st.out).value(&v);
                    values[i] = Some(v);
                }
                None => {
                    map.next_value_seed(CanonSeed {
                        st: &mut *st,
                        capture: None,
                    })?;
                }
            }
            let end = st.out.len();
            st.members.push(Member { key, start, end });
        }
        let TextCanon {
            out,
            scratch,
            keys,
            members,
        } = st;
        let this = &mut members[base..];
        let key = |m: &Member| &keys[m.key.0..m.key.1];
        let ordered = this
            .windows(2)
            .all(|w| cmp_utf16(key(&w[0]), key(&w[1])) == Ordering::Less);
        if !ordered {
            this.sort_unstable_by(|a, b| cmp_utf16(key(a), key(b)));
            if let Some(w) = this.windows(2).find(|w| key(&w[0]) == key(&w[1])) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    key(&w[0])
                )));
            }
            scratch.clear();
            scratch.extend_from_slice(&out[body..]);
            out.truncate(body);
            for (i, m) in this.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&scratch[m.start - body..m.end - body]);
            }
        }
        members.truncate(base);
        keys.truncate(keys_base);
        out.push(b'}');
        Ok(true)
    }
}

/// An object key, appended to the keys being read.
struct KeySeed<'k>(&'k mut String);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.push_str(v);
        Ok(())
    }
}

/// Parses JSON text, rejecting duplicate object keys anywhere in the document.
pub fn parse_strict(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictValue::deserialize(&mut de)?;
    de.end()?;
    Ok(value.0)
}

/// Like [`parse_strict`], from bytes (which must be UTF-8).
pub fn parse_strict_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue::deserialize(&mut de)?;
    de.end()?;
    Ok(value.0)
}

/// For `#[serde(deserialize_with)]`: a `Value` that refuses duplicate keys anywhere in it.
pub fn strict_value<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
    StrictValue::deserialize(deserializer).map(|v| v.0)
}

/// For `#[serde(deserialize_with)]`: an array of values that refuse duplicate keys.
pub fn strict_values<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Value>, D::Error> {
    let values = Vec::<StrictValue>::deserialize(deserializer)?;
    Ok(values.into_iter().map(|v| v.0).collect())
}

/// A `Value` whose deserializer refuses duplicate keys.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Ok(Value::Object(Map::new()));
        };
        let StrictValue(value) = map.next_value_seed(StrictSeed)?;
        let mut next = map.next_key::<String>()?;
        // Objects of one member are the most common in schemas (`{"type": "string"}`): give them
        // a map of that size rather than the default first allocation of three.
        let mut out = if next.is_none() {
            Map::with_capacity(1)
        } else {
            Map::new()
        };
        out.insert(first, value);
        while let Some(key) = next {
            match out.entry(key) {
                Entry::Occupied(e) => {
                    return Err(de::Error::custom(format_args!(
                        "duplicate key `{}`",
                        e.key()
                    )));
                }
                Entry::Vacant(e) => {
                    let StrictValue(v) = map.next_value_seed(StrictSeed)?;
                    e.insert(v);
                }
            }
            next = map.next_key::<String>()?;
        }
        Ok(Value::Object(out))
    }
}

struct StrictSeed;

impl<'de> DeserializeSeed<'de> for StrictSeed {
    type Value = StrictValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<StrictValue, D::Error> {
        StrictValue::deserialize(deserializer)
    }
}

/// Length of the run of string bytes that need no attention: up to the first `"`, `\` or
/// control character (or the end). Both the writer here and the wire layer's envelope scanner
/// (`mcp::envelope`) stop on exactly these bytes.
pub(crate) fn plain_run(s: &[u8]) -> usize {
    const SHORT: usize = 16;
    let special = |c: u8| c == b'"' || c == b'\\' || c < 0x20;
    // Keys and small values end within a few bytes: a plain loop beats the set-up of memchr.
    let head = s.len().min(SHORT);
    if let Some(k) = s[..head].iter().position(|&c| special(c)) {
        return k;
    }
    let rest = &s[head..];
    let stop = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
    // Control characters before the stop: checked in blocks without early exit, which the
    // compiler vectorizes; the exact place is looked for only in a block that has one.
    let mut at = 0;
    for block in rest[..stop].chunks(64) {
        if block.iter().fold(false, |any, &c| any | (c < 0x20)) {
            let k = block.iter().position(|&c| c < 0x20).unwrap_or(0);
            return head + at + k;
        }
        at += block.len();
    }
    head + stop
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn jcs(text: &str) -> String {
        String::from_utf8(canonicalize(&parse_strict(text).unwrap())).unwrap()
    }

    /// RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
    const APPENDIX_B: &[(u64, &str)] = &[
        (0x0000000000000000, "0"),
        (0x8000000000000000, "0"),
        (0x0000000000000001, "5e-324"),
        (0x8000000000000001, "-5e-324"),
        (0x7fefffffffffffff, "1.7976931348623157e+308"),
        (0xffefffffffffffff, "-1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"),
        (0xc340000000000000, "-9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x44b52d02c7e14af5, "9.999999999999997e+22"),
        (0x44b52d02c7e14af6, "1e+23"),
        (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
        (0x444b1ae4d6e2ef4e, "999999999999999700000"),
        (0x444b1ae4d6e2ef4f, "999999999999999900000"),
        (0x444b1ae4d6e2ef50, "1e+21"),
        (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
        (0x3eb0c6f7a0b5ed8d, "0.000001"),
        (0x41b3de4355555553, "333333333.3333332"),
        (0x41b3de4355555554, "333333333.33333325"),
        (0x41b3de4355555555, "333333333.3333333"),
        (0x41b3de4355555556, "333333333.3333334"),
        (0x41b3de4355555557, "333333333.33333343"),
        (0xbecbf647612f3696, "-0.0000033333333333333333"),
        (0x43143ff3c1cb0959, "1424953923781206.2"),
    ];

    #[test]
    fn rfc8785_appendix_b_numbers() {
        for &(bits, expected) in APPENDIX_B {
            let v = Value::from(f64::from_bits(bits));
            let got = String::from_utf8(canonicalize(&v)).unwrap();
            assert_eq!(got, expected, "bits {bits:#018x}");
        }
    }

    #[test]
    fn rfc8785_number_array_example() {
        assert_eq!(
            jcs("[56, 1.0e+21, 1.0e-7, -0.0, 1e30, 4.50, 2e-3, 0.000000000000000000000000001]"),
            "[56,1e+21,1e-7,0,1e+30,4.5,0.002,1e-27]"
        );
    }

    #[test]
    fn rfc8785_sorting_example() {
        // §3.2.3: keys sorted by UTF-16 code units (U+1F600 sorts before U+FB33).
        let input = r#"{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}"#;
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(jcs(input), expected);
    }

    #[test]
    fn utf16_order_differs_from_utf8_order() {
        // U+E000 is one UTF-16 unit (0xE000); U+10000 is a surrogate pair starting 0xD800.
        assert_eq!(
            jcs(r#"{"\ue000": 1, "\ud800\udc00": 2}"#),
            "{\"\u{10000}\":2,\"\u{e000}\":1}"
        );
    }

    #[test]
    fn rfc8785_string_escaping() {
        assert_eq!(
            jcs(r#"["\u0000\u001f\u007f", "\"\\/", "\b\f\n\r\t", "\u00e9\u2028"]"#),
            "[\"\\u0000\\u001f\u{7f}\",\"\\\"\\\\/\",\"\\b\\f\\n\\r\\t\",\"é\u{2028}\"]"
        );
    }

    #[test]
    fn large_integers_become_doubles() {
        assert_eq!(jcs("9007199254740993"), "9007199254740992");
        assert_eq!(jcs("18446744073709551615"), "18446744073709552000");
        assert_eq!(jcs("-9223372036854775808"), "-9223372036854776000");
        // Out of the double range: an error, never an infinity.
        assert!(parse_strict("1e400").is_err());
    }

    #[test]
    fn duplicate_keys_and_lone_surrogates_are_rejected() {
        let err = parse_strict(r#"{"a": 1, "b": {"c": 1, "c": 2}}"#).unwrap_err();
        assert!(err.to_string().contains("duplicate key `c`"), "{err}");
        assert!(parse_strict(r#"["\ud800"]"#).is_err());
        assert!(parse_strict(r#"{"\udc00": 1}"#).is_err());
        assert!(parse_strict("[1] [2]").is_err());
    }

    /// What [`digest_deserialize`] gives for `text`: digest, whether an object, captured values.
    #[allow(clippy::type_complexity)]
    fn text_digest(
        text: &str,
        capture: &[&str],
    ) -> Result<([u8; 32], bool, Vec<Option<Value>>), serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        let mut captured = vec![None; capture.len()];
        let (digest, is_object) = digest_deserialize(&mut de, capture, &mut captured)?;
        de.end()?;
        Ok((digest, is_object, captured))
    }

    /// `text` with every non-ASCII character and every ASCII letter inside strings written as a
    /// `\u` escape, so that the parser hands out owned rather than borrowed strings.
    fn escape_all(text: &str) -> String {
        let mut out = String::new();
        let mut in_string = false;
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => {
                    in_string = !in_string;
                    out.push(c);
                }
                '\\' if in_string => {
                    out.push(c);
                    let next = chars.next();
                    out.extend(next);
                    if next == Some('u') {
                        out.extend(chars.by_ref().take(4));
                    }
                }
                c if in_string && (c.is_ascii_alphabetic() || !c.is_ascii()) => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out
    }

    #[test]
    fn digest_from_text_refuses_duplicate_keys_and_keeps_captured_members() {
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"[{"x": {"b": 1, "c": 2, "b": 3}}]"#,
            r#"{"b": 1, "\u0062": 2}"#,
        ] {
            let err = text_digest(text, &[]).unwrap_err();
            assert!(err.to_string().contains("duplicate key"), "{text}: {err}");
        }
        let (digest, is_object, captured) = text_digest(
            r#"{"name": "t", "x": [1, {"z": 2, "y": 3}], "annotations": {"readOnlyHint": true}}"#,
            &["name", "annotations", "uri"],
        )
        .unwrap();
        assert_eq!(
            captured,
            vec![
                Some(serde_json::json!("t")),
                Some(serde_json::json!({"readOnlyHint": true})),
                None
            ]
        );
        assert!(is_object);
        assert_eq!(
            digest,
            Sha256::digest(
                br#"{"annotations":{"readOnlyHint":true},"name":"t","x":[1,{"y":3,"z":2}]}"#
            )
            .as_slice()
        );
        assert!(text_digest("[1e400]", &[]).is_err());
        assert_eq!(text_digest("[]", &["a"]).unwrap().2, vec![None]);
    }

    /// The reference implementation.
    fn oracle(v: &Value) -> Vec<u8> {
        serde_json_canonicalizer::to_vec(v).unwrap()
    }

    /// Numbers where formatting goes wrong first: signed zero, the exponent thresholds of
    /// ECMAScript's `Number.prototype.toString`, the extremes of the double range, and integers
    /// around 2^53 and the ends of i64/u64.
    fn edge_numbers() -> Vec<Value> {
        let mut v: Vec<Value> = [
            -0.0,
            0.0,
            1e21,
            -1e21,
            1e21 * (1.0 - f64::EPSILON),
            1e-7,
            1e-6,
            f64::from_bits(1e-6f64.to_bits() - 1),
            f64::from_bits(1e21f64.to_bits() - 1),
            5e-324,
            -5e-324,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            0.1,
            0.3,
            1.5,
            -2.5e-300,
            123_456_789_012_345_680_000.0,
            9_007_199_254_740_993.0,
        ]
        .into_iter()
        .map(Value::from)
        .collect();
        let two53: u64 = 1 << 53;
        v.extend(
            [
                0,
                1,
                two53 - 1,
                two53,
                two53 + 1,
                two53 + 2,
                u64::MAX,
                u64::MAX - 1,
            ]
            .into_iter()
            .map(Value::from),
        );
        v.extend(
            [
                -1,
                -(two53 as i64),
                -(two53 as i64) - 1,
                -(two53 as i64) - 3,
                i64::MIN,
                i64::MIN + 1,
                i64::MAX,
            ]
            .into_iter()
            .map(Value::from),
        );
        v
    }

    /// Strings heavy in what escaping and UTF-16 ordering care about.
    fn arb_string() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            prop::collection::vec(
                prop_oneof![
                    Just('a'),
                    Just('"'),
                    Just('\\'),
                    Just('/'),
                    Just('\u{7f}'),
                    Just('\u{d7ff}'),
                    Just('\u{e000}'),
                    Just('\u{ffff}'),
                    Just('\u{10000}'),
                    Just('\u{1f600}'),
                    Just('\u{10ffff}'),
                    (0u8..0x20).prop_map(char::from),
                ],
                0..12
            )
            .prop_map(|cs| cs.into_iter().collect()),
        ]
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let edges = edge_numbers();
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            prop::sample::select(edges),
            arb_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(arb_string(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// RFC 8785's own vectors (Appendix B's numbers, the number array, the sorting and the
    /// escaping examples) through `serde_json_canonicalizer`: the crate we are compared with in
    /// `BENCHMARKS.md` writes the same bytes as we do.
    #[test]
    fn the_reference_writes_the_rfc_vectors_as_we_do() {
        for &(bits, expected) in APPENDIX_B {
            let v = Value::from(f64::from_bits(bits));
            assert_eq!(oracle(&v), expected.as_bytes(), "bits {bits:#018x}");
            assert_eq!(canonicalize(&v), oracle(&v), "bits {bits:#018x}");
        }
        for text in [
            "[56, 1.0e+21, 1.0e-7, -0.0, 1e30, 4.50, 2e-3, 0.000000000000000000000000001]",
            r#"{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}"#,
            r#"["\u0000\u001f\u007f", "\"\\/", "\b\f\n\r\t", "\u00e9\u2028"]"#,
            r#"{"\ue000": 1, "\ud800\udc00": 2}"#,
            "[9007199254740993, 18446744073709551615, -9223372036854775808]",
        ] {
            let v = parse_strict(text).unwrap();
            assert_eq!(String::from_utf8(oracle(&v)).unwrap(), jcs(text), "{text}");
        }
    }

    #[test]
    fn edge_numbers_match_the_reference() {
        for n in edge_numbers() {
            let got = String::from_utf8(canonicalize(&n)).unwrap();
            let want = String::from_utf8(oracle(&n)).unwrap();
            assert_eq!(got, want, "{n:?}");
        }
        let spot: &[(Value, &str)] = &[
            (Value::from(-0.0), "0"),
            (Value::from(1e21), "1e+21"),
            (Value::from(1e-7), "1e-7"),
            (Value::from(5e-324), "5e-324"),
            (Value::from(f64::MAX), "1.7976931348623157e+308"),
            (Value::from((1u64 << 53) + 1), "9007199254740992"),
            (Value::from(i64::MIN), "-9223372036854776000"),
            (Value::from(u64::MAX), "18446744073709552000"),
        ];
        for (v, want) in spot {
            assert_eq!(String::from_utf8(canonicalize(v)).unwrap(), *want, "{v:?}");
        }
    }

    #[test]
    fn digest_streams_long_values_through_the_buffer() {
        // Strings longer than the hash buffer, and many small pieces that straddle it.
        let long = "é\"\u{1}x".repeat(5_000);
        let v = serde_json::json!({
            "long": long,
            "many": (0..3_000).map(|i| serde_json::json!({"k": i, "s": "ab\n"})).collect::<Vec<_>>(),
        });
        let want: [u8; 32] = Sha256::digest(oracle(&v)).into();
        assert_eq!(digest(&v), want);
    }

    #[test]
    fn hasher_pieces_equal_the_whole() {
        let v = serde_json::json!({"a": [1, "x\u{0}"], "b": null});
        let mut h = CanonicalHasher::new();
        h.raw(b"{\"a\":");
        h.value(&v["a"]);
        h.raw(b",");
        h.string("b");
        h.raw(b":null}");
        assert_eq!(h.finish(), digest(&v));
    }

    proptest! {
        #[test]
        fn canonical_form_equals_the_reference(v in arb_json()) {
            prop_assert_eq!(canonicalize(&v), oracle(&v));
            let want: [u8; 32] = Sha256::digest(oracle(&v)).into();
            prop_assert_eq!(digest(&v), want);
        }

        #[test]
        fn utf16_comparison_equals_reencoding(a in arb_string(), b in arb_string()) {
            prop_assert_eq!(cmp_utf16(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
            prop_assert_eq!(cmp_utf16(&a, &a), Ordering::Equal);
        }

        #[test]
        fn canonical_form_reparses_and_is_a_fixed_point(v in arb_json()) {
            let once = canonicalize(&v);
            let reparsed = parse_strict_slice(&once).unwrap();
            let twice = canonicalize(&reparsed);
            prop_assert_eq!(&once, &twice);
        }

        #[test]
        fn key_order_and_whitespace_do_not_matter(v in arb_json()) {
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            let reversed = reverse_keys(&v);
            prop_assert_eq!(canonicalize(&v), canonicalize(&parse_strict(&pretty).unwrap()));
            prop_assert_eq!(canonicalize(&v), canonicalize(&reversed));
        }

        #[test]
        fn digest_from_text_equals_digest_of_the_parsed_value(v in arb_json()) {
            let reversed = reverse_keys(&v);
            for text in [
                serde_json::to_string(&v).unwrap(),
                serde_json::to_string_pretty(&reversed).unwrap(),
                escape_all(&serde_json::to_string(&v).unwrap()),
            ] {
                let want = digest(&parse_strict(&text).unwrap());
                let (got, is_object, captured) = text_digest(&text, &["a", ""]).unwrap();
                prop_assert_eq!(got, want, "{}", text);
                prop_assert_eq!(is_object, v.is_object());
                prop_assert_eq!(&captured, &vec![v.get("a").cloned(), v.get("").cloned()]);
            }
        }

        #[test]
        fn keys_sort_by_utf16_code_units(keys in prop::collection::btree_set(any::<String>(), 1..12)) {
            let obj: Map<String, Value> = keys.iter().map(|k| (k.clone(), Value::Null)).collect();
            let canon = parse_strict_slice(&canonicalize(&Value::Object(obj))).unwrap();
            let got: Vec<&String> = canon.as_object().unwrap().keys().collect();
            let mut want: Vec<&String> = keys.iter().collect();
            want.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            prop_assert_eq!(got, want);
        }
    }

    fn reverse_keys(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .rev()
                    .map(|(k, v)| (k.clone(), reverse_keys(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(reverse_keys).collect()),
            other => other.clone(),
        }
    }
}
