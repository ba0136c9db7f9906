//! OpenSSH's pattern lists (`match.c`): comma-separated patterns with `*` and `?` wildcards and
//! `!` negation, as an allowed-signers file uses them for principals and `namespaces=`.

/// Whether `name` matches the comma-separated `list` the way OpenSSH's `match_pattern_list`
/// decides it: a negated pattern (`!pat`) that matches refuses the name whatever else matches;
/// otherwise any positive pattern that matches accepts it. Case-sensitive, as ssh-keygen
/// matches namespaces and principals.
pub fn matches_list(name: &str, list: &str) -> bool {
    let mut accepted = false;
    for pattern in list.split(',') {
        if let Some(negated) = pattern.strip_prefix('!') {
            if matches(name.as_bytes(), negated.as_bytes()) {
                return false;
            }
        } else if matches(name.as_bytes(), pattern.as_bytes()) {
            accepted = true;
        }
    }
    accepted
}

/// Whether `name` matches one pattern: `*` any run of bytes, `?` one byte, anything else
/// itself. Iterative with one backtrack point, so a hostile pattern cannot take exponential
/// time.
pub fn matches(name: &[u8], pattern: &[u8]) -> bool {
    let (mut n, mut p) = (0, 0);
    // Where the last `*` was, and the name position it currently stands for up to.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                n += 1;
                p += 1;
            }
            _ => match star {
                // Let the last `*` take one more byte and try again from there.
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    p = sp + 1;
                    n = sn + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(matches(b"alice@example.com", b"*@example.com"));
        assert!(matches(b"mcpsum", b"mcp*"));
        assert!(matches(b"mcpsum", b"m?psum"));
        assert!(matches(b"mcpsum", b"*"));
        assert!(!matches(b"mcpsum", b"mcp"));
        assert!(!matches(b"mcp", b"mcp?"));
        assert!(matches(b"", b"*"));
        assert!(!matches(b"", b"?"));
        assert!(matches(b"aXbXc", b"a*b*c"));
        assert!(!matches(b"aXbXd", b"a*b*c"));
        // A pattern built to make naive backtracking explode still answers at once.
        let name = "a".repeat(200);
        let pattern = format!("{}b", "*a".repeat(50));
        assert!(!matches(name.as_bytes(), pattern.as_bytes()));
    }

    #[test]
    fn lists_and_negation() {
        assert!(matches_list("mcpsum", "git,mcpsum"));
        assert!(matches_list("mcpsum", "git,mcp*"));
        assert!(!matches_list("mcpsum", "git,file"));
        assert!(!matches_list("mcpsum", "*,!mcpsum"));
        assert!(!matches_list("mcpsum", "!mcpsum,*"));
        assert!(matches_list("mcpsum", "!git,*"));
        // A list of negations alone accepts nothing.
        assert!(!matches_list("mcpsum", "!git"));
        assert!(!matches_list("MCPSUM", "mcpsum"));
    }
}
