//! The allowed-signers file: ssh-keygen's format (`ssh-keygen(1)`, ALLOWED SIGNERS), read to the
//! grammar of OpenSSH's `sshsig.c` so that a file `ssh-keygen -Y verify` accepts means the same
//! to mcpsum. Pure: the text in, the entries or every problem out; nothing here reads files.
//!
//! A line is `PRINCIPALS [OPTIONS] KEYTYPE BASE64 [COMMENT]`: principals a comma-separated
//! pattern list (in double quotes if it must hold spaces), options a comma-separated list of
//! `cert-authority`, `namespaces="LIST"`, `valid-after="TIME"` and `valid-before="TIME"`. Blank
//! lines and lines starting with `#` are skipped. A line that cannot be read fails the whole
//! file, as it fails ssh-keygen's verification: a typo must not silently drop a restriction.

use ssh_key::PublicKey;

use super::pattern;
use super::sshsig::SigKey;

/// One line of the file that names a key.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its line number (1-based).
    pub line: usize,
    /// The principals, a pattern list as written.
    pub principals: String,
    /// `cert-authority`: the key signs certificates, and signs nothing itself.
    pub cert_authority: bool,
    /// `namespaces=`: the namespaces (a pattern list) the key may sign for; `None` is any.
    pub namespaces: Option<String>,
    /// `valid-after=`, as seconds since the epoch.
    pub valid_after: Option<i64>,
    /// `valid-before=`, as seconds since the epoch.
    pub valid_before: Option<i64>,
    /// The key.
    pub key: PublicKey,
}

/// What one line says about a signature (see [`Entry::judge`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The line names another key.
    OtherKey,
    /// The line accepts it; for a certificate, with the certificate's principals the line's
    /// principals match (comma-separated).
    Accepted(Option<String>),
    /// The line names the key but does not accept this signature.
    Refused(Refusal),
}

/// Why a listed key does not accept a signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The line is a `cert-authority`: it accepts certificates it signed, not its own signature.
    CertAuthority,
    /// `namespaces=` does not include the signature's namespace.
    Namespace(String),
    /// `valid-after=` is later than now.
    NotYetValid(i64),
    /// `valid-before=` is earlier than now.
    Expired(i64),
    /// The certificate (by this line's CA) is a host certificate.
    CertNotUser,
    /// The certificate is not valid before this time.
    CertNotYetValid(u64),
    /// The certificate expired at this time (its `valid before`, exclusive).
    CertExpired(u64),
    /// The certificate lists no principals.
    CertNoPrincipals,
    /// None of the certificate's principals (these) matches the line's principals.
    CertPrincipal(Vec<String>),
}

impl Entry {
    /// What this line says about a signature by `key` for `namespace` at `now` (seconds since
    /// the epoch). The checks are ssh-keygen's, in its order (`sshsig.c`,
    /// `check_allowed_keys_line`): a plain key matches a line without `cert-authority` that
    /// names exactly it; a certificate matches a `cert-authority` line that names its CA, and
    /// must then be a user certificate, valid now (`valid after` inclusive, `valid before`
    /// exclusive) and list a principal the line's principals match; then the namespace, then
    /// the line's validity interval (`valid-before` and `valid-after` both inclusive).
    pub fn judge(&self, key: &SigKey, namespace: &str, now: i64) -> Verdict {
        let mut matched = None;
        match key {
            SigKey::Plain(k) if self.key.key_data() == k => {
                if self.cert_authority {
                    return Verdict::Refused(Refusal::CertAuthority);
                }
            }
            SigKey::Cert(cert)
                if self.cert_authority && self.key.key_data() == cert.signature_key() =>
            {
                if !cert.is_user() {
                    return Verdict::Refused(Refusal::CertNotUser);
                }
                let now_u = u64::try_from(now).unwrap_or(0);
                if now_u < cert.valid_after() {
                    return Verdict::Refused(Refusal::CertNotYetValid(cert.valid_after()));
                }
                if now_u >= cert.valid_before() {
                    return Verdict::Refused(Refusal::CertExpired(cert.valid_before()));
                }
                if cert.valid_principals().is_empty() {
                    return Verdict::Refused(Refusal::CertNoPrincipals);
                }
                let names: Vec<&str> = cert
                    .valid_principals()
                    .iter()
                    .map(String::as_str)
                    .filter(|p| pattern::matches_list(p, &self.principals))
                    .collect();
                if names.is_empty() {
                    return Verdict::Refused(Refusal::CertPrincipal(
                        cert.valid_principals().to_vec(),
                    ));
                }
                matched = Some(names.join(","));
            }
            _ => return Verdict::OtherKey,
        }
        let refusal = if let Some(ns) = self
            .namespaces
            .as_ref()
            .filter(|ns| !pattern::matches_list(namespace, ns))
        {
            Refusal::Namespace(ns.clone())
        } else if let Some(after) = self.valid_after.filter(|&after| now < after) {
            Refusal::NotYetValid(after)
        } else if let Some(before) = self.valid_before.filter(|&before| now > before) {
            Refusal::Expired(before)
        } else {
            return Verdict::Accepted(matched);
        };
        Verdict::Refused(refusal)
    }
}

/// How times without a trailing `Z` are read: ssh-keygen takes them as local time.
pub type LocalOffset<'a> = &'a dyn Fn(time::PrimitiveDateTime) -> Option<time::UtcOffset>;

/// Parses the whole file. Every problem is reported, one string each, as `LINE: problem`.
pub fn parse(text: &str, local: LocalOffset<'_>) -> Result<Vec<Entry>, Vec<String>> {
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        match parse_line(raw, line, local) {
            Ok(Some(e)) => entries.push(e),
            Ok(None) => {}
            Err(p) => problems.push(format!("{line}: {p}")),
        }
    }
    if problems.is_empty() {
        Ok(entries)
    } else {
        Err(problems)
    }
}

fn is_space(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn parse_line(raw: &str, line: usize, local: LocalOffset<'_>) -> Result<Option<Entry>, String> {
    // `lines()` leaves a `\r` of a CRLF file, which OpenSSH's reader strips too.
    let raw = raw.strip_suffix('\r').unwrap_or(raw);
    let rest = raw.trim_start_matches(is_space);
    if rest.is_empty() || rest.starts_with('#') {
        return Ok(None);
    }
    let (principals, rest) = principals_field(rest)?;
    if principals.is_empty() {
        return Err("empty principals".to_owned());
    }
    let rest = rest.trim_start_matches(is_space);
    if rest.is_empty() {
        return Err("missing key".to_owned());
    }
    // Options are present exactly when the next word is not a key type (sshsig.c tries the
    // key first, then options).
    let first = rest.split(is_space).next().unwrap_or_default();
    let (options, rest) = if first.parse::<ssh_key::Algorithm>().is_ok() {
        (None, rest)
    } else {
        let end = options_end(rest)?;
        (Some(&rest[..end]), rest[end..].trim_start_matches(is_space))
    };
    if rest.is_empty() {
        return Err("missing key".to_owned());
    }
    let key = key_field(rest)?;
    let mut entry = Entry {
        line,
        principals: principals.to_owned(),
        cert_authority: false,
        namespaces: None,
        valid_after: None,
        valid_before: None,
        key,
    };
    if let Some(opts) = options {
        parse_options(opts, &mut entry, local)?;
    }
    Ok(Some(entry))
}

/// The principals word: up to the next space or tab, or in double quotes (no escapes, as
/// OpenSSH's `strdelim` reads it).
fn principals_field(s: &str) -> Result<(&str, &str), String> {
    if let Some(quoted) = s.strip_prefix('"') {
        let Some(end) = quoted.find('"') else {
            return Err("missing end quote in the principals".to_owned());
        };
        let rest = &quoted[end + 1..];
        if !rest.is_empty() && !rest.starts_with(is_space) {
            return Err("text right after the quoted principals".to_owned());
        }
        return Ok((&quoted[..end], rest));
    }
    let end = s.find(is_space).unwrap_or(s.len());
    Ok((&s[..end], &s[end..]))
}

/// Where the options end: the first space or tab outside double quotes (a `\"` inside quotes
/// does not end them), as OpenSSH's `sshkey_advance_past_options` scans.
fn options_end(s: &str) -> Result<usize, String> {
    let bytes = s.as_bytes();
    let mut quoted = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' if !quoted => return Ok(i),
            b'\\' if quoted && bytes.get(i + 1) == Some(&b'"') => i += 1,
            b'"' => quoted = !quoted,
            _ => {}
        }
        i += 1;
    }
    if quoted {
        Err("missing end quote in the options".to_owned())
    } else {
        Ok(bytes.len())
    }
}

/// `KEYTYPE BASE64 [COMMENT]`; the comment is not kept.
fn key_field(s: &str) -> Result<PublicKey, String> {
    let mut words = s.split(is_space).filter(|w| !w.is_empty());
    let (Some(kind), Some(blob)) = (words.next(), words.next()) else {
        return Err("missing key".to_owned());
    };
    if kind.parse::<ssh_key::Algorithm>().is_err() {
        return Err(format!("unknown key type `{kind}`"));
    }
    let key = PublicKey::from_openssh(&format!("{kind} {blob}"))
        .map_err(|e| format!("invalid `{kind}` key ({e})"))?;
    if key.algorithm().as_str() != kind {
        return Err(format!(
            "the key is a `{}` key, not `{kind}`",
            key.algorithm().as_str()
        ));
    }
    Ok(key)
}

/// The options list (`sshsig.c`, `sshsigopt_parse`): names are case-insensitive, values are
/// double-quoted, each option at most once, `valid-before` after `valid-after`.
fn parse_options(opts: &str, entry: &mut Entry, local: LocalOffset<'_>) -> Result<(), String> {
    let mut rest = opts;
    while !rest.is_empty() {
        if let Some(after) = strip_prefix_ci(rest, "cert-authority") {
            entry.cert_authority = true;
            rest = after;
        } else if let Some(after) = strip_prefix_ci(rest, "namespaces=") {
            if entry.namespaces.is_some() {
                return Err("more than one `namespaces` option".to_owned());
            }
            let (value, after) = dequote(after, "namespaces")?;
            entry.namespaces = Some(value);
            rest = after;
        } else if let Some(after) = strip_prefix_ci(rest, "valid-after=") {
            if entry.valid_after.is_some() {
                return Err("more than one `valid-after` option".to_owned());
            }
            let (value, after) = dequote(after, "valid-after")?;
            entry.valid_after = Some(parse_time(&value, local).ok_or_else(|| {
                format!("invalid `valid-after` time `{value}` (YYYYMMDD[HHMM[SS]][Z])")
            })?);
            rest = after;
        } else if let Some(after) = strip_prefix_ci(rest, "valid-before=") {
            if entry.valid_before.is_some() {
                return Err("more than one `valid-before` option".to_owned());
            }
            let (value, after) = dequote(after, "valid-before")?;
            entry.valid_before = Some(parse_time(&value, local).ok_or_else(|| {
                format!("invalid `valid-before` time `{value}` (YYYYMMDD[HHMM[SS]][Z])")
            })?);
            rest = after;
        } else {
            let name = rest.split([',', '=']).next().unwrap_or(rest);
            return Err(format!("unknown option `{name}`"));
        }
        match rest.strip_prefix(',') {
            Some("") => return Err("the options end in a comma".to_owned()),
            Some(after) => rest = after,
            None if rest.is_empty() => {}
            None => {
                let name = rest.split([',', '=']).next().unwrap_or(rest);
                return Err(format!("unknown option `{name}`"));
            }
        }
    }
    if let (Some(after), Some(before)) = (entry.valid_after, entry.valid_before)
        && before <= after
    {
        return Err("`valid-before` is not later than `valid-after`".to_owned());
    }
    Ok(())
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// A double-quoted value, `\"` standing for a quote (OpenSSH's `opt_dequote`).
fn dequote<'a>(s: &'a str, option: &str) -> Result<(String, &'a str), String> {
    let Some(body) = s.strip_prefix('"') else {
        return Err(format!("the value of `{option}` must be in double quotes"));
    };
    let mut value = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &body[i + 1..])),
            '\\' if body[i + 1..].starts_with('"') => {
                value.push('"');
                chars.next();
            }
            c => value.push(c),
        }
    }
    Err(format!("missing end quote in the value of `{option}`"))
}

/// ssh-keygen's absolute times: `YYYYMMDD`, `YYYYMMDDHHMM` or `YYYYMMDDHHMMSS`, in UTC with a
/// trailing `Z` (either case), else in local time. Seconds since the epoch; `None` if invalid.
pub fn parse_time(s: &str, local: LocalOffset<'_>) -> Option<i64> {
    let (digits, utc) = match s.strip_suffix(['Z', 'z']) {
        Some(d) => (d, true),
        None => (s, false),
    };
    if !matches!(digits.len(), 8 | 12 | 14) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| digits.get(r).and_then(|d| d.parse::<u32>().ok());
    let year = i32::try_from(num(0..4)?).ok()?;
    let month = time::Month::try_from(u8::try_from(num(4..6)?).ok()?).ok()?;
    let day = u8::try_from(num(6..8)?).ok()?;
    let hour = if digits.len() >= 12 { num(8..10)? } else { 0 };
    let minute = if digits.len() >= 12 { num(10..12)? } else { 0 };
    let second = if digits.len() == 14 { num(12..14)? } else { 0 };
    let date = time::Date::from_calendar_date(year, month, day).ok()?;
    let clock = time::Time::from_hms(
        u8::try_from(hour).ok()?,
        u8::try_from(minute).ok()?,
        u8::try_from(second).ok()?,
    )
    .ok()?;
    let at = time::PrimitiveDateTime::new(date, clock);
    let offset = if utc {
        time::UtcOffset::UTC
    } else {
        local(at)?
    };
    let t = at.assume_offset(offset).unix_timestamp();
    // ssh-keygen refuses a time before the epoch, and `0` (it means "not set").
    (t > 0).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBi3NTjXTpvMS06VKwmO7e/luVqNar2ki2amTxHto5hl";

    fn utc(_: time::PrimitiveDateTime) -> Option<time::UtcOffset> {
        Some(time::UtcOffset::UTC)
    }

    fn one(line: &str) -> Entry {
        let mut v = parse(line, &utc).unwrap_or_else(|e| panic!("{line}: {e:?}"));
        assert_eq!(v.len(), 1, "{line}");
        v.remove(0)
    }

    fn problem(line: &str) -> String {
        parse(line, &utc).expect_err(line).join("\n")
    }

    #[test]
    fn plain_lines_comments_and_blank_lines() {
        let text = format!(
            "# team keys\n\n   \nalice@example.com {ED} alice's laptop\n\t# indented comment\nbob@example.com,*@ops.example.com {ED}\r\n"
        );
        let v = parse(&text, &utc).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].line, 4);
        assert_eq!(v[0].principals, "alice@example.com");
        assert_eq!(v[1].line, 6);
        assert_eq!(v[1].principals, "bob@example.com,*@ops.example.com");
        assert!(v[0].namespaces.is_none() && !v[0].cert_authority);
    }

    #[test]
    fn options_in_any_case_with_quotes() {
        let e = one(&format!(
            r#"alice NAMESPACES="git,mcp\"sum",valid-after="20250101",Valid-Before="20300101120000Z",cert-authority {ED}"#
        ));
        assert_eq!(e.namespaces.as_deref(), Some("git,mcp\"sum"));
        assert_eq!(e.valid_after, Some(1_735_689_600));
        assert_eq!(e.valid_before, Some(1_893_499_200));
        assert!(e.cert_authority);
        // Spaces inside a quoted value do not end the options.
        let e = one(&format!(r#"alice namespaces="a b" {ED}"#));
        assert_eq!(e.namespaces.as_deref(), Some("a b"));
        // Quoted principals.
        let e = one(&format!(r#""alice smith" {ED}"#));
        assert_eq!(e.principals, "alice smith");
    }

    #[test]
    fn every_bad_line_is_reported() {
        let text = format!(
            "alice\nbob nosuch=\"x\" {ED}\ncarol namespaces=mcpsum {ED}\ndave namespaces=\"a\",namespaces=\"b\" {ED}\nerin valid-before=\"2020\" {ED}\nfrank valid-after=\"20300101Z\",valid-before=\"20200101Z\" {ED}\ngrace ssh-ed25519 AAAA\nheidi namespaces=\"x\", {ED}\nivan ssh-rsa {}\n",
            ED.split(' ').nth(1).unwrap()
        );
        let problems = parse(&text, &utc).unwrap_err();
        assert_eq!(
            problems,
            vec![
                "1: missing key",
                "2: unknown option `nosuch`",
                "3: the value of `namespaces` must be in double quotes",
                "4: more than one `namespaces` option",
                "5: invalid `valid-before` time `2020` (YYYYMMDD[HHMM[SS]][Z])",
                "6: `valid-before` is not later than `valid-after`",
                problems[6].as_str(),
                "8: the options end in a comma",
                problems[8].as_str(),
            ]
        );
        assert!(
            problems[6].starts_with("7: invalid `ssh-ed25519` key"),
            "{}",
            problems[6]
        );
        assert!(problems[8].starts_with("9: "), "{}", problems[8]);
        assert!(problem(&format!("\"alice {ED}")).contains("missing end quote"));
        assert!(problem(&format!("alice namespaces=\"x {ED}")).contains("missing end quote"));
    }

    #[test]
    fn times_follow_ssh_keygen() {
        assert_eq!(parse_time("19700102Z", &utc), Some(86_400));
        assert_eq!(parse_time("197001020000z", &utc), Some(86_400));
        assert_eq!(parse_time("19700102000001Z", &utc), Some(86_401));
        assert_eq!(parse_time("19700101Z", &utc), None);
        assert_eq!(parse_time("20251301Z", &utc), None);
        assert_eq!(parse_time("2025010Z", &utc), None);
        assert_eq!(parse_time("2025-01-01", &utc), None);
        // Local time: the offset asked for is that of the time itself.
        let plus2 = |_: time::PrimitiveDateTime| time::UtcOffset::from_hms(2, 0, 0).ok();
        assert_eq!(parse_time("19700102", &plus2), Some(86_400 - 7_200));
        assert_eq!(parse_time("19700102", &|_| None), None);
    }

    #[test]
    fn refusals_in_ssh_keygen_order() {
        let e = one(&format!(
            r#"alice namespaces="git",valid-before="20200101Z" {ED}"#
        ));
        let key = SigKey::Plain(e.key.key_data().clone());
        assert_eq!(
            e.judge(&key, "mcpsum", 0),
            Verdict::Refused(Refusal::Namespace("git".into()))
        );
        assert_eq!(
            e.judge(&key, "git", 1_577_836_801),
            Verdict::Refused(Refusal::Expired(1_577_836_800))
        );
        assert_eq!(e.judge(&key, "git", 1_577_836_800), Verdict::Accepted(None));
        let ca = one(&format!("alice cert-authority {ED}"));
        assert_eq!(
            ca.judge(&key, "mcpsum", 0),
            Verdict::Refused(Refusal::CertAuthority)
        );
        let later = one(&format!(r#"alice valid-after="20300101Z" {ED}"#));
        assert!(matches!(
            later.judge(&key, "mcpsum", 0),
            Verdict::Refused(Refusal::NotYetValid(_))
        ));
        let other = one(
            "bob ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHOvqOkaT5wfgKUMB1pxyR3Ack3N/TQEQyvyJQJNyc8X",
        );
        assert_eq!(other.judge(&key, "mcpsum", 0), Verdict::OtherKey);
    }
}
