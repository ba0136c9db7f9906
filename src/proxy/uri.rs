//! Does a URI match a locked RFC 6570 URI template? Used to decide whether `resources/read`
//! may reach the server. Conservative: simple expressions (`{id}`) match one path segment's worth
//! of characters (no `/`, `?`, `#`); reserved (`{+x}`) and fragment (`{#x}`) expressions match
//! anything; other operators match what their expansion can produce.

/// Whether `uri` is a possible expansion of `template`.
pub fn matches(template: &str, uri: &str) -> bool {
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

fn match_parts(parts: &[Part<'_>], uri: &[u8]) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return uri.is_empty();
    };
    match first {
        Part::Literal(lit) => uri.starts_with(lit) && match_parts(rest, &uri[lit.len()..]),
        Part::Var { reserved, prefix } => {
            // An expression may expand to nothing at all.
            if match_parts(rest, uri) {
                return true;
            }
            let Some(body) = uri.strip_prefix(*prefix) else {
                return false;
            };
            let offset = uri.len() - body.len();
            for end in 1..=body.len() {
                let c = body[end - 1];
                if !reserved && matches!(c, b'/' | b'?' | b'#') {
                    break;
                }
                if match_parts(rest, &uri[offset + end..]) {
                    return true;
                }
            }
            false
        }
    }
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
}
