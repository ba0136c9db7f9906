//! `sha256:<hex>` digests over RFC 8785 canonical JSON.

use std::fmt;
use std::str::FromStr;

use compact_str::CompactString;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::canonical;

/// A SHA-256 digest, printed as `sha256:` followed by 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// The digest of the RFC 8785 canonical form of `value`.
    pub fn of_json(value: &Value) -> Self {
        Self(canonical::digest(value))
    }

    /// The digest of the canonical JSON string `s`.
    pub fn of_json_str(s: &str) -> Self {
        let mut h = canonical::CanonicalHasher::new();
        h.string(s);
        Self(h.finish())
    }

    /// A digest computed by the caller.
    pub fn from_array(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// `sha256:` and 64 lowercase hex digits, written without allocating.
    pub fn write_text<'b>(&self, buf: &'b mut [u8; 71]) -> &'b str {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        buf[..7].copy_from_slice(b"sha256:");
        for (i, b) in self.0.iter().enumerate() {
            buf[7 + 2 * i] = HEX[usize::from(b >> 4)];
            buf[8 + 2 * i] = HEX[usize::from(b & 0xF)];
        }
        // Only ASCII was written.
        std::str::from_utf8(buf).unwrap_or_default()
    }

    /// The digest of raw bytes.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The first 12 hex digits, for compact human output.
    pub fn short(&self) -> String {
        let full = self.to_string();
        format!("{}…", &full[..19])
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.write_text(&mut [0; 71]))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Sha256Digest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let hex_part = s.strip_prefix("sha256:").ok_or_else(|| {
            format!("`{s}` is not a digest: expected `sha256:` and 64 hex digits")
        })?;
        let bad =
            || format!("`{s}` is not a digest: expected `sha256:` and 64 lowercase hex digits");
        let digits = hex_part.as_bytes();
        if digits.len() != 64 {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        let mut invalid = 0u8;
        for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
            let (hi, lo) = (
                HEX_VALUE[usize::from(pair[0])],
                HEX_VALUE[usize::from(pair[1])],
            );
            invalid |= hi | lo;
            *byte = hi << 4 | lo;
        }
        if invalid & 0xF0 != 0 {
            return Err(bad());
        }
        Ok(Self(out))
    }
}

/// The value of a lowercase hex digit; 0xFF for any other byte.
static HEX_VALUE: [u8; 256] = {
    let mut t = [0xFF; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

impl Serialize for Sha256Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(DigestVisitor)
    }
}

/// Parses the string where it lies, without copying it first.
struct DigestVisitor;

impl serde::de::Visitor<'_> for DigestVisitor {
    type Value = Sha256Digest;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string `sha256:` followed by 64 hex digits")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Sha256Digest, E> {
        s.parse().map_err(E::custom)
    }
}

/// Item digests by item key, in key order (that of a `BTreeMap<String, _>`: by UTF-8 bytes).
/// A sorted vector rather than a tree: a lockfile holds thousands of these, written in order,
/// read in order and walked in order, and a tree's nodes are several times the size. A short
/// key is kept inline rather than in an allocation of its own.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DigestMap(Vec<(CompactString, Sha256Digest)>);

impl DigestMap {
    /// The digest recorded for `key`.
    pub fn get(&self, key: &str) -> Option<&Sha256Digest> {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    /// Whether a digest is recorded for `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    /// Keys and digests, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Sha256Digest)> {
        self.0.iter().map(|(k, d)| (k.as_str(), d))
    }

    /// How many digests are recorded.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        position(&self.0, key)
    }
}

/// Where `key` is in `entries` (sorted by key), or where it would go.
fn position(entries: &[(CompactString, Sha256Digest)], key: &str) -> Result<usize, usize> {
    // Read in order, so the last is the usual place.
    match entries.last() {
        Some((last, _)) if last.as_str() < key => Err(entries.len()),
        _ => entries.binary_search_by(|(k, _)| k.as_str().cmp(key)),
    }
}

impl<K: Into<CompactString>> FromIterator<(K, Sha256Digest)> for DigestMap {
    /// As a `BTreeMap` collects: in key order, the last of equal keys kept.
    fn from_iter<T: IntoIterator<Item = (K, Sha256Digest)>>(iter: T) -> Self {
        let mut map = Self::default();
        for (key, digest) in iter {
            let key = key.into();
            match map.position(&key) {
                Ok(i) => map.0[i].1 = digest,
                Err(i) => map.0.insert(i, (key, digest)),
            }
        }
        map
    }
}

impl Serialize for DigestMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for DigestMap {
    /// Strict: a key given twice is an error (a `BTreeMap` would keep the last silently).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = DigestMap;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<DigestMap, A::Error> {
                thread_local! {
                    static SCRATCH: std::cell::Cell<Vec<(CompactString, Sha256Digest)>> =
                        const { std::cell::Cell::new(Vec::new()) };
                }
                super::collect_exact(&SCRATCH, |scratch| {
                    while let Some(key) = map.next_key_seed(KeySeed)? {
                        let Err(at) = position(scratch, &key) else {
                            return Err(serde::de::Error::custom(format_args!(
                                "duplicate key `{key}`"
                            )));
                        };
                        let digest = map.next_value()?;
                        scratch.insert(at, (key, digest));
                    }
                    Ok(())
                })
                .map(DigestMap)
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// Reads a key where it lies (a short one is kept inline, without an allocation).
struct KeySeed;

impl<'de> serde::de::DeserializeSeed<'de> for KeySeed {
    type Value = CompactString;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<CompactString, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for KeySeed {
    type Value = CompactString;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<CompactString, E> {
        Ok(CompactString::from(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn digest_of_canonical_form() {
        // sha256 of the 13 bytes `{"a":1,"b":2}`.
        let d = Sha256Digest::of_json(&serde_json::json!({"b": 2, "a": 1.0}));
        assert_eq!(d, Sha256Digest::of_bytes(br#"{"a":1,"b":2}"#));
        assert_eq!(d.to_string().parse::<Sha256Digest>().unwrap(), d);
    }

    #[test]
    fn text_forms_agree() {
        let d = Sha256Digest::of_bytes(b"abc");
        assert_eq!(
            d.to_string(),
            format!("sha256:{}", hex::encode(Sha256::digest(b"abc")))
        );
        assert_eq!(
            Sha256Digest::of_json_str("a\"\u{1}é"),
            Sha256Digest::of_json(&Value::String("a\"\u{1}é".into()))
        );
        let parsed: Sha256Digest = serde_json::from_str(&format!("\"{d}\"")).unwrap();
        assert_eq!(parsed, d);
        // An escaped form of the same text is the same digest.
        let escaped = format!("\"\\u0073{}\"", &d.to_string()[1..]);
        assert_eq!(serde_json::from_str::<Sha256Digest>(&escaped).unwrap(), d);
        assert!(serde_json::from_str::<Sha256Digest>("1").is_err());
    }

    #[test]
    fn parse_rejects_bad_forms() {
        for bad in [
            "sha256:",
            "sha1:00",
            "sha256:ABCDEF",
            &format!("sha256:{}", "A".repeat(64)),
        ] {
            assert!(bad.parse::<Sha256Digest>().is_err(), "{bad}");
        }
    }

    fn d(n: u8) -> Sha256Digest {
        Sha256Digest::from_array([n; 32])
    }

    proptest! {
        #[test]
        fn a_digest_map_is_a_btree_map(pairs in prop::collection::vec(("[a-d\u{e9}\u{1f600}]{0,3}", any::<u8>()), 0..40)) {
            let want: BTreeMap<String, Sha256Digest> = pairs.iter().map(|(k, n)| (k.clone(), d(*n))).collect();
            let got: DigestMap = pairs.iter().map(|(k, n)| (k.clone(), d(*n))).collect();
            prop_assert!(got.iter().eq(want.iter().map(|(k, v)| (k.as_str(), v))));
            prop_assert_eq!(got.len(), want.len());
            for (k, n) in &pairs {
                prop_assert_eq!(got.get(k), want.get(k));
                prop_assert!(got.contains_key(k));
                prop_assert_eq!(got.get(&format!("{k}~")), want.get(&format!("{k}~")), "{}", n);
            }
            // The file's form: written as a map, read back the same, in any order.
            let text = serde_json::to_string(&got).unwrap();
            prop_assert_eq!(&text, &serde_json::to_string(&want).unwrap());
            prop_assert_eq!(&serde_json::from_str::<DigestMap>(&text).unwrap(), &got);
            let reversed: serde_json::Map<String, Value> = want.iter().rev().map(|(k, v)| (k.clone(), Value::String(v.to_string()))).collect();
            prop_assert_eq!(&serde_json::from_value::<DigestMap>(Value::Object(reversed)).unwrap(), &got);
        }
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        let one = d(1).to_string();
        let text = format!(r#"{{"b": "{one}", "a": "{one}", "b": "{one}"}}"#);
        let err = serde_json::from_str::<DigestMap>(&text)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("duplicate key `b`"), "{err}");
        let err = serde_json::from_str::<DigestMap>(r#"{"a": "sha256:00"}"#).unwrap_err();
        assert!(err.to_string().contains("not a digest"), "{err}");
    }
}
