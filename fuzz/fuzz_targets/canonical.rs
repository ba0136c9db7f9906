//! The RFC 8785 canonicalizer (`mcpsum::canonical`) and its strict parser, on arbitrary bytes.
//!
//! Checked, for every input:
//! - `parse_strict_slice` agrees with plain `serde_json`: it accepts exactly what `serde_json`
//!   accepts minus documents with a duplicate key, and yields the same value;
//! - the canonical form of an accepted document is non-empty, re-parses strictly to the same
//!   value (numbers compared as the doubles RFC 8785 makes of them), is a fixed point, has its
//!   keys in UTF-16 code unit order, and equals `serde_json_canonicalizer::pipe` of the text;
//! - every number is written as ECMAScript's `Number.prototype.toString` writes it, computed
//!   here independently from Rust's shortest round-trip digits and exact expansion (RFC 8785
//!   3.2.2.3). The input's first 256 bytes are also read as IEEE-754 doubles, eight at a time,
//!   for that.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpsum::canonical::{canonicalize, parse_strict_slice};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    // The first 32 (the check is slow next to the parse; the seed of Appendix B's 24 fits).
    for bits in data.chunks_exact(8).take(32) {
        let bits = u64::from_le_bytes(bits.try_into().unwrap_or_default());
        check_number(f64::from_bits(bits));
    }

    let strict = parse_strict_slice(data);
    let loose = serde_json::from_slice::<Value>(data);
    let value = match (strict, loose) {
        (Ok(s), Ok(l)) => {
            assert_eq!(s, l, "strict and plain parses differ");
            s
        }
        (Ok(_), Err(e)) => panic!("strict parse accepted what serde_json refuses: {e}"),
        (Err(e), Ok(_)) => {
            assert!(
                e.to_string().contains("duplicate key"),
                "strict parse refused: {e}"
            );
            return;
        }
        (Err(_), Err(_)) => return,
    };
    let text = std::str::from_utf8(data).expect("accepted JSON is UTF-8");

    let once = canonicalize(&value);
    assert!(!once.is_empty(), "canonicalize failed on an accepted value");
    let reparsed = parse_strict_slice(&once).unwrap_or_else(|e| {
        panic!(
            "canonical output does not re-parse: {e}: {}",
            String::from_utf8_lossy(&once)
        )
    });
    assert!(
        same_as_doubles(&value, &reparsed),
        "canonical form changed the value"
    );
    assert_eq!(
        canonicalize(&reparsed),
        once,
        "canonical form is not a fixed point"
    );
    check_order_and_numbers(&reparsed);
    let piped = serde_json_canonicalizer::pipe(text).expect("serde_json_canonicalizer::pipe");
    assert_eq!(
        piped.as_bytes(),
        once.as_slice(),
        "differs from serde_json_canonicalizer::pipe"
    );
});

fn check_number(x: f64) {
    if !x.is_finite() {
        return;
    }
    let Some(n) = serde_json::Number::from_f64(x) else {
        return;
    };
    let got = canonicalize(&Value::Number(n));
    let got = std::str::from_utf8(&got).expect("UTF-8");
    assert_eq!(
        got,
        ecma_number(x),
        "number {x:e} (bits {:#018x})",
        x.to_bits()
    );
    let back: f64 = got.parse().expect("canonical number parses");
    assert!(back == x, "number {x:e} came back as {back:e}");
}

/// Equal, with every number compared as a double (`-0` equals `0`; integers beyond 2^53 as the
/// double nearest to them), which is all RFC 8785 keeps of a number.
fn same_as_doubles(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_as_doubles(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_as_doubles(v, w)))
        }
        _ => a == b,
    }
}

/// Keys in strictly increasing UTF-16 order at every level (the parse keeps file order), and
/// every number in ECMAScript form.
fn check_order_and_numbers(v: &Value) {
    match v {
        Value::Object(m) => {
            let keys: Vec<Vec<u16>> = m.keys().map(|k| k.encode_utf16().collect()).collect();
            assert!(
                keys.windows(2).all(|w| w[0] < w[1]),
                "keys out of order: {keys:?}"
            );
            m.values().for_each(check_order_and_numbers);
        }
        Value::Array(a) => a.iter().for_each(check_order_and_numbers),
        Value::Number(n) => check_number(n.as_f64().expect("a number is a double")),
        _ => {}
    }
}

/// ECMAScript `Number::toString(x)` for finite `x` (ECMA-262 6.1.6.1.20, as RFC 8785 3.2.2.3
/// requires), from Rust's shortest round-trip digits.
fn ecma_number(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if x < 0.0 {
        return format!("-{}", ecma_number(-x));
    }
    let (digits, exp) = shortest_digits(x);
    let k = i32::try_from(digits.len()).expect("few digits");
    let n = exp + 1;
    let zeros = |count: i32| "0".repeat(usize::try_from(count).unwrap_or(0));
    if k <= n && n <= 21 {
        format!("{digits}{}", zeros(n - k))
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(usize::try_from(n).expect("positive"));
        format!("{int}.{frac}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", zeros(-n))
    } else {
        let e = n - 1;
        let sign = if e < 0 { '-' } else { '+' };
        let (first, rest) = digits.split_at(1);
        if rest.is_empty() {
            format!("{first}e{sign}{}", e.abs())
        } else {
            format!("{first}.{rest}e{sign}{}", e.abs())
        }
    }
}

/// The fewest significant digits that read back as `x` (positive, finite) and the decimal
/// exponent of the first one. Rust's `{:e}` gives the fewest digits; when two candidates of that
/// length are exactly as close to `x` it may give either, while ECMA-262 wants the even one. A
/// tie means the exact value of `x` (which `{:.800e}` writes out in full) has one digit more,
/// a 5.
fn shortest_digits(x: f64) -> (String, i32) {
    let (digits, exp) = split_sci(&format!("{x:e}"));
    // Cheap first: one digit more, rounded, must end in 5 for a tie (the full expansion is slow).
    let one_more = format!("{x:.prec$e}", prec = digits.len());
    if !one_more
        .split_once('e')
        .is_some_and(|(m, _)| m.ends_with('5'))
    {
        return (digits, exp);
    }
    let (exact, exact_exp) = split_sci(&format!("{x:.800e}"));
    let exact = exact.trim_end_matches('0');
    if exact.len() != digits.len() + 1 || !exact.ends_with('5') {
        return (digits, exp);
    }
    let lower = exact[..digits.len()].to_owned();
    let (upper, upper_exp) = increment(&lower, exact_exp);
    let reads_back = |d: &str, e: i32| {
        let last = e + 1 - i32::try_from(d.len()).expect("few digits");
        format!("{d}e{last}").parse() == Ok(x)
    };
    let candidates: Vec<(String, i32)> = [(lower, exact_exp), (upper, upper_exp)]
        .into_iter()
        .filter(|(d, e)| reads_back(d, *e))
        .collect();
    let (chosen, chosen_exp) = match candidates.as_slice() {
        [one] => one.clone(),
        [a, b] => {
            let even = |d: &str| {
                d.bytes()
                    .last()
                    .is_some_and(|c| (c - b'0').is_multiple_of(2))
            };
            if even(&a.0) { a.clone() } else { b.clone() }
        }
        _ => return (digits, exp),
    };
    (trim_zeros(chosen), chosen_exp)
}

fn trim_zeros(mut digits: String) -> String {
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    digits
}

/// `d.ddde±x` as (`dddd` without trailing zeros, x).
fn split_sci(sci: &str) -> (String, i32) {
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` has an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    (trim_zeros(digits), exp.parse().expect("exponent"))
}

/// The digit string plus one in its last place, with the exponent of its first digit (one more
/// when it carries out: 999 + 1 is 1 at the next power of ten, which is even).
fn increment(digits: &str, exp: i32) -> (String, i32) {
    let mut bytes = digits.as_bytes().to_vec();
    for b in bytes.iter_mut().rev() {
        if *b == b'9' {
            *b = b'0';
        } else {
            *b += 1;
            return (String::from_utf8(bytes).expect("ASCII"), exp);
        }
    }
    ("1".to_owned(), exp + 1)
}
