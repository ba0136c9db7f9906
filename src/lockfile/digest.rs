//! `sha256:<hex>` digests over RFC 8785 canonical JSON.

use std::fmt;
use std::str::FromStr;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
