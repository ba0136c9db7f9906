//! RFC 8785 (JCS) canonical JSON and strict JSON parsing.
//!
//! Canonical bytes are what digests are computed over; they are never written to a file. The
//! number formatting and the UTF-16 key order come from `serde_json_canonicalizer`, which formats
//! through `ryu-js` (ECMAScript `Number.prototype.toString`); the tests below pin the RFC's own
//! vectors so a dependency bump that breaks them fails here first.
//!
//! [`parse_strict`] is the only way mcpsum reads JSON from a file or a peer: RFC 8785 requires
//! I-JSON input, so duplicate object keys are rejected instead of silently keeping the last one
//! (`serde_json`'s default). Lone surrogates are already rejected by `serde_json`.

use std::fmt;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The RFC 8785 canonical form of `value`.
pub fn canonicalize(value: &Value) -> Vec<u8> {
    // Serializing a `Value` cannot fail: every key is a string and NaN/infinity cannot occur in
    // a `serde_json::Value`. Fall back to an empty vector rather than panic if that ever changes;
    // the digest would then mismatch and be reported, never accepted.
    serde_json_canonicalizer::to_vec(value).unwrap_or_default()
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
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key `{key}`")));
            }
            let StrictValue(v) = map.next_value_seed(StrictSeed)?;
            out.insert(key, v);
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn jcs(text: &str) -> String {
        String::from_utf8(canonicalize(&parse_strict(text).unwrap())).unwrap()
    }

    /// RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
    #[test]
    fn rfc8785_appendix_b_numbers() {
        let cases: &[(u64, &str)] = &[
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
        for &(bits, expected) in cases {
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

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
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
