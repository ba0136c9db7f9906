//! The `network.allow` grammar (design 6.2): parsing entries at load time, parsing the target of a
//! `CONNECT`, and matching one against the other. Pure; no I/O.
//!
//! Entries: `host:port`, `*.suffix:port` (one or more labels in front of the suffix, never the
//! apex; so the suffix has at most 251 bytes), `a.b.c.d:port`, `[v6]:port`. Names match only name
//! entries and IP targets only IP entries: there is no reverse lookup, and `::ffff:10.0.0.5` does
//! not match `10.0.0.5`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A validated allowlist, built by [`Allowlist::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allowlist {
    entries: Vec<Entry>,
}

/// One allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// What the entry admits.
    pub pattern: Pattern,
    /// The port, 1-65535.
    pub port: u16,
}

/// The host part of an [`Entry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// Exactly this (lower-case) name.
    Name(String),
    /// Any name with one or more labels in front of this suffix (`*.example.com` stores
    /// `example.com`); never the suffix itself.
    Wildcard(String),
    /// Exactly this address.
    Ip(IpAddr),
}

/// Why an entry of `network.allow` was refused. Displays as one line naming the entry and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network.allow[{index}] `{entry}`: {problem}")]
pub struct AllowlistError {
    /// Position of the entry in the list, from 0.
    pub index: usize,
    /// The entry as written.
    pub entry: String,
    /// What is wrong with it.
    pub problem: EntryProblem,
}

/// What is wrong with one allowlist entry (or `CONNECT` target); each message says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryProblem {
    /// No `:port` at the end.
    #[error("the port is missing; write `host:port`, e.g. `api.example.com:443`")]
    MissingPort,
    /// The port is not a number from 1 to 65535.
    #[error("port `{0}` is not a number from 1 to 65535")]
    BadPort(String),
    /// An IPv6 address without brackets.
    #[error("an IPv6 address needs brackets: `{0}`")]
    UnbracketedIpv6(String),
    /// Brackets around something that is not an IPv6 address.
    #[error("`[{0}]` is not an IPv6 address; brackets are only for IPv6")]
    BadIpv6(String),
    /// `0.0.0.0` or `::`.
    #[error("the unspecified address `{0}` is not a destination; list the real address")]
    Unspecified(IpAddr),
    /// A multicast address.
    #[error("multicast address `{0}` cannot be reached over TCP; remove it")]
    Multicast(IpAddr),
    /// A `*` anywhere but as the whole first label.
    #[error("a wildcard must be the whole first label, as in `*.example.com:443`")]
    BadWildcard,
    /// `*.com` and the like.
    #[error(
        "wildcard suffix `{0}` has fewer than two labels; it would cover a whole top-level \
         domain: list `*.example.{0}` or exact names"
    )]
    WildcardTooBroad(String),
    /// A wildcard suffix longer than 251 bytes: every name below it would be over 253 bytes, so
    /// the entry could match nothing.
    #[error(
        "wildcard suffix is {0} bytes, so no name fits below it (names have at most 253); \
         shorten the suffix to 251 bytes or list exact names"
    )]
    WildcardTooLong(usize),
    /// Empty host.
    #[error("the host is empty; write `host:port`")]
    EmptyHost,
    /// Longer than 253 bytes.
    #[error("the name is longer than 253 bytes")]
    NameTooLong,
    /// An empty label or one longer than 63 bytes.
    #[error("label `{0}` is empty or longer than 63 bytes")]
    BadLabelLength(String),
    /// A character other than a-z, 0-9, `-` (IDNs must be written in punycode).
    #[error(
        "label `{0}` has a character other than letters, digits and `-`; write \
         internationalised names in punycode (`xn--...`)"
    )]
    BadLabelChar(String),
    /// A label starting or ending with `-`.
    #[error("label `{0}` starts or ends with `-`")]
    BadLabelHyphen(String),
    /// The last label is numeric, so resolvers could read the name as an IPv4 address.
    #[error(
        "the last label `{0}` is numeric, which resolvers may read as an IPv4 address; write \
         IPv4 addresses as four decimal parts, `a.b.c.d:port`"
    )]
    NumericLastLabel(String),
}

impl Allowlist {
    /// Parse and validate every entry, reporting all bad entries in one pass.
    ///
    /// Names are lower-cased and one trailing dot is removed. Duplicates are kept once.
    pub fn parse(entries: &[String]) -> Result<Allowlist, Vec<AllowlistError>> {
        let mut ok = Vec::with_capacity(entries.len());
        let mut errors = Vec::new();
        for (index, text) in entries.iter().enumerate() {
            match parse_entry(text) {
                Ok(entry) => {
                    if !ok.contains(&entry) {
                        ok.push(entry);
                    }
                }
                Err(problem) => errors.push(AllowlistError {
                    index,
                    entry: text.clone(),
                    problem,
                }),
            }
        }
        if errors.is_empty() {
            Ok(Allowlist { entries: ok })
        } else {
            Err(errors)
        }
    }

    /// The entries, in the order given (duplicates removed).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// True when no entry is listed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The first entry admitting `target`, if any.
    pub fn find(&self, target: &Target) -> Option<&Entry> {
        self.entries.iter().find(|e| e.matches(target))
    }

    /// True when exactly `ip:port` is listed (what un-refuses a non-public resolved address).
    pub fn lists_ip(&self, ip: IpAddr, port: u16) -> bool {
        self.entries
            .iter()
            .any(|e| e.port == port && e.pattern == Pattern::Ip(ip))
    }
}

impl Entry {
    /// Whether this entry admits `target`.
    pub fn matches(&self, target: &Target) -> bool {
        if self.port != target.port {
            return false;
        }
        match (&self.pattern, &target.host) {
            (Pattern::Name(n), Host::Name(h)) => n == h,
            (Pattern::Wildcard(suffix), Host::Name(h)) => h
                .strip_suffix(suffix.as_str())
                .and_then(|front| front.strip_suffix('.'))
                .is_some_and(|front| !front.is_empty()),
            (Pattern::Ip(a), Host::Ip(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Pattern::Name(n) => write!(f, "{n}:{}", self.port),
            Pattern::Wildcard(s) => write!(f, "*.{s}:{}", self.port),
            Pattern::Ip(IpAddr::V4(a)) => write!(f, "{a}:{}", self.port),
            Pattern::Ip(IpAddr::V6(a)) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

/// The normalised target of a `CONNECT` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Name or address.
    pub host: Host,
    /// Port, 1-65535.
    pub port: u16,
}

/// The host of a [`Target`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A validated LDH name, lower-case, without a trailing dot.
    Name(String),
    /// A literal address (strict dotted quad, or bracketed IPv6).
    Ip(IpAddr),
}

impl Target {
    /// Parse the authority form of a `CONNECT` request (`host:port`, `[v6]:port`): lower-case,
    /// drop one trailing dot, refuse anything that is not a strict IP literal or an LDH name.
    pub fn parse(authority: &str) -> Result<Target, EntryProblem> {
        let (host, port) = split_host_port(authority)?;
        let host = match host {
            HostText::Bracketed(inner) => Host::Ip(IpAddr::V6(parse_v6(inner)?)),
            HostText::Plain(h) => match h.parse::<Ipv4Addr>() {
                Ok(v4) => Host::Ip(IpAddr::V4(v4)),
                Err(_) => Host::Name(normalise_name(h)?),
            },
        };
        Ok(Target { host, port })
    }

    /// The host as text: the name, or the address (IPv6 without brackets).
    pub fn host_text(&self) -> String {
        match &self.host {
            Host::Name(n) => n.clone(),
            Host::Ip(ip) => ip.to_string(),
        }
    }
}

fn parse_entry(text: &str) -> Result<Entry, EntryProblem> {
    let (host, port) = split_host_port(text)?;
    let pattern = match host {
        HostText::Bracketed(inner) => Pattern::Ip(check_ip(IpAddr::V6(parse_v6(inner)?))?),
        HostText::Plain(h) => {
            if let Ok(v4) = h.parse::<Ipv4Addr>() {
                Pattern::Ip(check_ip(IpAddr::V4(v4))?)
            } else if let Some(suffix) = h.strip_prefix("*.") {
                let suffix = normalise_name(suffix).map_err(|p| match p {
                    EntryProblem::BadLabelChar(l) if l.contains('*') => EntryProblem::BadWildcard,
                    other => other,
                })?;
                if !suffix.contains('.') {
                    return Err(EntryProblem::WildcardTooBroad(suffix));
                }
                // `x.` plus the suffix must still be a valid name, or the entry matches nothing.
                if suffix.len() > MAX_NAME - 2 {
                    return Err(EntryProblem::WildcardTooLong(suffix.len()));
                }
                Pattern::Wildcard(suffix)
            } else if h.contains('*') {
                return Err(EntryProblem::BadWildcard);
            } else {
                Pattern::Name(normalise_name(h)?)
            }
        }
    };
    Ok(Entry { pattern, port })
}

enum HostText<'a> {
    Plain(&'a str),
    Bracketed(&'a str),
}

fn split_host_port(text: &str) -> Result<(HostText<'_>, u16), EntryProblem> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return Err(EntryProblem::BadIpv6(rest.to_owned()));
        };
        let Some(port) = after.strip_prefix(':') else {
            return Err(if after.is_empty() {
                EntryProblem::MissingPort
            } else {
                EntryProblem::BadPort(after.to_owned())
            });
        };
        (HostText::Bracketed(inner), port)
    } else {
        let Some((host, port)) = text.rsplit_once(':') else {
            return Err(EntryProblem::MissingPort);
        };
        if host.contains(':') {
            // `::1:443` or `2001:db8::1`: the last colon may belong to the address.
            // Suggest the reading where the last colon separates the port, unless that leaves
            // no address (`::1`, `fe80::`).
            return Err(EntryProblem::UnbracketedIpv6(if host.ends_with(':') {
                format!("[{text}]:PORT")
            } else {
                format!("[{host}]:{port}")
            }));
        }
        (HostText::Plain(host), port)
    };
    let port = parse_port(port)?;
    if let HostText::Plain("") = host {
        return Err(EntryProblem::EmptyHost);
    }
    Ok((host, port))
}

fn parse_port(text: &str) -> Result<u16, EntryProblem> {
    if text.is_empty() {
        return Err(EntryProblem::MissingPort);
    }
    // Digits only: `u16::from_str` would accept a leading `+`.
    if text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(EntryProblem::BadPort(text.to_owned()));
    }
    match text.parse::<u16>() {
        Ok(p) if p != 0 => Ok(p),
        _ => Err(EntryProblem::BadPort(text.to_owned())),
    }
}

fn parse_v6(inner: &str) -> Result<Ipv6Addr, EntryProblem> {
    // No zone ids (`fe80::1%eth0`): an interface name means nothing in another namespace.
    inner
        .parse::<Ipv6Addr>()
        .map_err(|_| EntryProblem::BadIpv6(inner.to_owned()))
}

fn check_ip(ip: IpAddr) -> Result<IpAddr, EntryProblem> {
    if ip.is_unspecified() {
        return Err(EntryProblem::Unspecified(ip));
    }
    if ip.is_multicast() {
        return Err(EntryProblem::Multicast(ip));
    }
    Ok(ip)
}

/// The longest name DNS allows, in bytes, without the trailing dot (RFC 1035 2.3.4).
const MAX_NAME: usize = 253;

/// Lower-case, drop one trailing dot, and check LDH rules. The last label may not be numeric
/// (nor hex such as `0x7f`): glibc's `inet_aton` reads `2130706433` or `0x7f.1` as IPv4.
fn normalise_name(raw: &str) -> Result<String, EntryProblem> {
    let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    if name.is_empty() {
        return Err(EntryProblem::EmptyHost);
    }
    if name.len() > MAX_NAME {
        return Err(EntryProblem::NameTooLong);
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(EntryProblem::BadLabelLength(label.to_owned()));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(EntryProblem::BadLabelChar(label.to_owned()));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(EntryProblem::BadLabelHyphen(label.to_owned()));
        }
    }
    let last = name.rsplit('.').next().unwrap_or_default();
    let hex = last
        .strip_prefix("0x")
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    if last.bytes().all(|b| b.is_ascii_digit()) || hex {
        return Err(EntryProblem::NumericLastLabel(last.to_owned()));
    }
    Ok(name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn one(text: &str) -> Result<Entry, EntryProblem> {
        parse_entry(text)
    }

    fn name(n: &str, port: u16) -> Entry {
        Entry {
            pattern: Pattern::Name(n.into()),
            port,
        }
    }

    #[test]
    fn good_entries() {
        let cases: &[(&str, Entry)] = &[
            ("api.github.com:443", name("api.github.com", 443)),
            ("API.GitHub.com.:443", name("api.github.com", 443)),
            ("localhost:8443", name("localhost", 8443)),
            ("xn--bcher-kva.example:1", name("xn--bcher-kva.example", 1)),
            ("a-b.c1:65535", name("a-b.c1", 65535)),
            (
                "*.example.com:443",
                Entry {
                    pattern: Pattern::Wildcard("example.com".into()),
                    port: 443,
                },
            ),
            (
                "10.0.0.5:8080",
                Entry {
                    pattern: Pattern::Ip("10.0.0.5".parse().unwrap()),
                    port: 8080,
                },
            ),
            (
                "[::1]:9000",
                Entry {
                    pattern: Pattern::Ip("::1".parse().unwrap()),
                    port: 9000,
                },
            ),
            (
                "[2001:DB8::1]:443",
                Entry {
                    pattern: Pattern::Ip("2001:db8::1".parse().unwrap()),
                    port: 443,
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(one(text).as_ref(), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_entries() {
        use EntryProblem as P;
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let cases: &[(&str, EntryProblem)] = &[
            ("api.github.com", P::MissingPort),
            ("api.github.com:", P::MissingPort),
            ("api.github.com:0", P::BadPort("0".into())),
            ("api.github.com:65536", P::BadPort("65536".into())),
            ("api.github.com:+443", P::BadPort("+443".into())),
            ("api.github.com:https", P::BadPort("https".into())),
            (":443", P::EmptyHost),
            (".:443", P::EmptyHost),
            ("::1:443", P::UnbracketedIpv6("[::1]:443".into())),
            (
                "2001:db8::1:443",
                P::UnbracketedIpv6("[2001:db8::1]:443".into()),
            ),
            ("::1", P::UnbracketedIpv6("[::1]:PORT".into())),
            ("[::1]", P::MissingPort),
            ("[::1]443", P::BadPort("443".into())),
            ("[10.0.0.1]:443", P::BadIpv6("10.0.0.1".into())),
            ("[fe80::1%eth0]:443", P::BadIpv6("fe80::1%eth0".into())),
            ("[::1:443", P::BadIpv6("::1:443".into())),
            ("0.0.0.0:443", P::Unspecified(ip("0.0.0.0"))),
            ("[::]:443", P::Unspecified(ip("::"))),
            ("224.0.0.1:443", P::Multicast(ip("224.0.0.1"))),
            ("[ff02::1]:443", P::Multicast(ip("ff02::1"))),
            ("*:443", P::BadWildcard),
            ("a.*.example.com:443", P::BadWildcard),
            ("*example.com:443", P::BadWildcard),
            ("**.example.com:443", P::BadWildcard),
            ("*.com:443", P::WildcardTooBroad("com".into())),
            // The `allowlist` fuzz target's check that a wildcard admits a name one label below
            // it caught these: a suffix this long admitted no name at all.
            (
                &format!("*.{}:443", long_name(252)),
                P::WildcardTooLong(252),
            ),
            (
                &format!("*.{}.:443", long_name(253)),
                P::WildcardTooLong(253),
            ),
            ("*.com.:443", P::WildcardTooBroad("com".into())),
            (&format!("{}.com:443", "a.".repeat(125)), P::NameTooLong),
            (
                &format!("{}.com:443", "a".repeat(64)),
                P::BadLabelLength("a".repeat(64)),
            ),
            ("a..com:443", P::BadLabelLength(String::new())),
            ("a_b.com:443", P::BadLabelChar("a_b".into())),
            ("bücher.de:443", P::BadLabelChar("bücher".into())),
            ("-a.com:443", P::BadLabelHyphen("-a".into())),
            ("a-.com:443", P::BadLabelHyphen("a-".into())),
            ("2130706433:443", P::NumericLastLabel("2130706433".into())),
            ("0x7f.1:443", P::NumericLastLabel("1".into())),
            ("0x7f:443", P::NumericLastLabel("0x7f".into())),
            ("127.1:443", P::NumericLastLabel("1".into())),
            ("010.0.0.1:443", P::NumericLastLabel("1".into())),
            ("1.2.3.256:443", P::NumericLastLabel("256".into())),
        ];
        for (text, want) in cases {
            assert_eq!(one(text), Err(want.clone()), "{text}");
        }
    }

    /// A valid name of exactly `len` bytes: labels of 63 `a`s and a last one of `b`s.
    fn long_name(len: usize) -> String {
        let mut name = String::new();
        while len - name.len() > 64 {
            name.push_str(&"a".repeat(63));
            name.push('.');
        }
        name.push_str(&"b".repeat(len - name.len()));
        name
    }

    #[test]
    fn longest_wildcard_admits_the_longest_names() {
        let suffix = long_name(251);
        let list = Allowlist::parse(&[format!("*.{suffix}:443")]).unwrap();
        let below = Target::parse(&format!("x.{suffix}:443")).unwrap();
        assert_eq!(below.host_text().len(), 253);
        assert!(list.find(&below).is_some());
        assert!(Target::parse(&format!("xy.{suffix}:443")).is_err());
    }

    #[test]
    fn all_errors_in_one_pass_with_index_and_fix() {
        let entries: Vec<String> = ["ok.example:443", "nope", "*.com:443", "[::]:1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let errs = Allowlist::parse(&entries).unwrap_err();
        let lines: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            vec![
                "network.allow[1] `nope`: the port is missing; write `host:port`, e.g. \
                 `api.example.com:443`"
                    .to_string(),
                "network.allow[2] `*.com:443`: wildcard suffix `com` has fewer than two \
                 labels; it would cover a whole top-level domain: list `*.example.com` or \
                 exact names"
                    .to_string(),
                "network.allow[3] `[::]:1`: the unspecified address `::` is not a \
                 destination; list the real address"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn wildcard_matching() {
        let list = Allowlist::parse(&["*.example.com:443".to_string()]).unwrap();
        let t = |s: &str| Target::parse(s).unwrap();
        for (target, want) in [
            ("a.example.com:443", true),
            ("a.b.example.com:443", true),
            ("A.Example.COM.:443", true),
            ("example.com:443", false),
            ("badexample.com:443", false),
            ("a.badexample.com:443", false),
            ("a.example.com:444", false),
            ("example.com.evil.net:443", false),
        ] {
            assert_eq!(list.find(&t(target)).is_some(), want, "{target}");
        }
    }

    #[test]
    fn names_and_ips_never_cross() {
        let list = Allowlist::parse(&[
            "10.0.0.5:443".to_string(),
            "[::1]:443".to_string(),
            "host.example:443".to_string(),
        ])
        .unwrap();
        let t = |s: &str| Target::parse(s).unwrap();
        assert!(list.find(&t("10.0.0.5:443")).is_some());
        assert!(list.find(&t("[::ffff:10.0.0.5]:443")).is_none());
        assert!(list.find(&t("[::1]:443")).is_some());
        assert!(list.find(&t("[0:0::1]:443")).is_some());
        assert!(list.find(&t("host.example:443")).is_some());
        assert!(list.find(&t("10.0.0.5:80")).is_none());
        assert!(list.lists_ip("10.0.0.5".parse().unwrap(), 443));
        assert!(!list.lists_ip("10.0.0.5".parse().unwrap(), 80));
    }

    #[test]
    fn targets() {
        assert_eq!(
            Target::parse("Api.GitHub.com.:443"),
            Ok(Target {
                host: Host::Name("api.github.com".into()),
                port: 443
            })
        );
        assert_eq!(
            Target::parse("[::1]:9443").map(|t| t.host),
            Ok(Host::Ip("::1".parse().unwrap()))
        );
        assert_eq!(
            Target::parse("127.0.0.1:1").map(|t| t.host),
            Ok(Host::Ip("127.0.0.1".parse().unwrap()))
        );
        assert!(Target::parse("2130706433:443").is_err());
        assert!(Target::parse("example.com").is_err());
        assert!(Target::parse("exa mple.com:443").is_err());
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "a.example:1",
            "*.example.com:443",
            "10.0.0.5:80",
            "[::1]:9000",
        ] {
            assert_eq!(one(text).unwrap().to_string(), text);
        }
    }
}
