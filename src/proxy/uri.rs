//! Does a URI match a locked RFC 6570 URI template? Used to decide whether `resources/read`
//! may reach the server. Conservative: simple expressions (`{id}`) match one path segment's worth
//! of characters (no `/`, `?`, `#`); reserved (`{+x}`) and fragment (`{#x}`) expressions match
//! anything; other operators match what their expansion can produce.

/// The longest URI considered for a template match (the client's input is hostile: a longer one
/// is refused rather than searched).
pub const MAX_URI: usize = 8 * 1024;

/// Whether `uri` is a possible expansion of `template`.
pub fn matches(template: &str, uri: &str) -> bool {
    if uri.len() > MAX_URI {
        return false;
    }
    match parse(template) {
        Some(parts) => match_parts(&parts, uri.as_bytes()),
        None => false,
    }
}

#[derive(Debug)]
enum Part<'a> {
    Literal(&'a [u8]),
    /// An expression; `true` when it may expand to `/`, `?` and `#`.
    Var {
        reserved: bool,
        prefix: &'a [u8],
    },
}

fn parse(template: &str) -> Option<Vec<Part<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let end = rest.find('}')?;
                let expr = &rest[1..end];
                let (reserved, prefix): (bool, &[u8]) = match expr.as_bytes().first() {
                    Some(b'+') => (true, b""),
                    Some(b'#') => (true, b"#"),
                    Some(b'/') => (true, b"/"),
                    Some(b'?') => (true, b"?"),
                    Some(b'&') => (true, b"&"),
                    Some(b'.') => (false, b"."),
                    Some(b';') => (false, b";"),
                    _ => (false, b""),
                };
                parts.push(Part::Var { reserved, prefix });
                rest = &rest[end + 1..];
            }
            Some(i) => {
                parts.push(Part::Literal(&rest.as_bytes()[..i]));
                rest = &rest[i..];
            }
            None => {
                parts.push(Part::Literal(rest.as_bytes()));
                rest = "";
            }
        }
    }
    Some(parts)
}

/// Whether `uri` matches `parts`, by dynamic programming from the end: `next[pos]` says whether
/// the parts after the current one match `uri[pos..]`. Linear in the URI per part, so no
/// template and no URI can make it backtrack exponentially.
fn match_parts(parts: &[Part<'_>], uri: &[u8]) -> bool {
    let n = uri.len();
    // first_stop[b]: the first `/`, `?` or `#` at or after b (n if none).
    let mut first_stop = vec![n; n + 1];
    for b in (0..n).rev() {
        first_stop[b] = if matches!(uri[b], b'/' | b'?' | b'#') {
            b
        } else {
            first_stop[b + 1]
        };
    }
    let mut next = vec![false; n + 1];
    next[n] = true;
    for part in parts.iter().rev() {
        // count[q]: how many of next[q..=n] are true, to ask "any in a range" in O(1).
        let mut count = vec![0usize; n + 2];
        for q in (0..=n).rev() {
            count[q] = count[q + 1] + usize::from(next[q]);
        }
        let any = |lo: usize, hi: usize| lo <= hi && count[lo] > count[hi + 1];
        let mut cur = vec![false; n + 1];
        for (pos, slot) in cur.iter_mut().enumerate() {
            let here = &uri[pos..];
            *slot = match part {
                Part::Literal(lit) => here.starts_with(lit) && next[pos + lit.len()],
                Part::Var { reserved, prefix } => {
                    // An expression may expand to nothing at all, or to its prefix and a body.
                    next[pos]
                        || (here.starts_with(prefix) && {
                            let body = pos + prefix.len();
                            let last = if *reserved { n } else { first_stop[body] };
                            any(body + 1, last)
                        })
                }
            };
        }
        next = cur;
    }
    next[0]
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn template_matching() {
        assert!(matches("notes://note/{id}", "notes://note/42"));
        assert!(!matches("notes://note/{id}", "notes://note/42/../../etc"));
        assert!(!matches("notes://note/{id}", "notes://other/42"));
        assert!(matches("file:///{+path}", "file:///home/a/b.txt"));
        assert!(matches(
            "demo://resource/dynamic/text/{resourceId}",
            "demo://resource/dynamic/text/7"
        ));
        assert!(matches("x://{a}/{b}", "x://1/2"));
        assert!(!matches("x://{a}/{b}", "x://1/2/3"));
        assert!(matches("search{?q,lang}", "search?q=a&lang=en"));
        assert!(!matches("", "x"));
    }

    #[test]
    fn hostile_uris_are_decided_quickly() {
        // Backtracking over adjacent expressions is polynomial with memoization, and a URI no
        // sane template produces is refused outright.
        let started = std::time::Instant::now();
        let long = format!("x://{}", "a".repeat(3000));
        assert!(!matches("x://{+a}{+b}{+c}{+d}{+e}{+f}/end", &long));
        assert!(!matches("x://{a}{b}{c}{d}{e}{f}/end", &long));
        assert!(matches("x://{+a}{+b}{+c}{+d}{+e}{+f}", &long));
        let huge = format!("x://{}", "a".repeat(super::MAX_URI + 1));
        assert!(!matches("x://{+a}", &huge));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
