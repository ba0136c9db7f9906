//! `sha256:<hex>` digests over RFC 8785 canonical JSON.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::canonical::canonicalize;

/// A SHA-256 digest, printed as `sha256:` followed by 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// The digest of the RFC 8785 canonical form of `value`.
    pub fn of_json(value: &Value) -> Self {
        Self::of_bytes(&canonicalize(value))
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
        write!(f, "sha256:{}", hex::encode(self.0))
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
        if hex_part.len() != 64
            || !hex_part
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(format!(
                "`{s}` is not a digest: expected `sha256:` and 64 lowercase hex digits"
            ));
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).map_err(|e| e.to_string())?;
        Ok(Self(out))
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
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
