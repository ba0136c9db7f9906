//! The HTTP/1.x request head a client sends to the proxy (design 6.1 step 2). Only
//! `CONNECT authority HTTP/1.x` is accepted; headers are read and ignored. Pure.

/// Why a request head was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeadError {
    /// A well-formed request with another method: 405.
    #[error("method `{0}` refused: only HTTPS via CONNECT")]
    Method(String),
    /// Anything that is not a well-formed HTTP/1.x request line: 400.
    #[error("malformed request: {0}")]
    Malformed(&'static str),
}

/// The end of the head: the index just past the first empty line, if the buffer holds one.
///
/// A line ends at LF, with or without a CR before it: RFC 9112 2.2 lets a recipient accept a bare
/// LF, as most servers do, and [`parse_head`] does. So the head ends at the first LF followed by
/// either LF or CRLF, whichever ending each line used (`\r\n\r\n`, `\n\n`, `\n\r\n`, `\r\n\n`).
/// Looking only for `\r\n\r\n` and `\n\n` left a client whose last header ended in LF and whose
/// empty line ended in CRLF waiting for the 408 of the head timeout. The terminator is at most 3 bytes and starts with LF, so a search may start
/// 2 bytes before newly read data (the proxy's incremental read relies on this).
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.iter().enumerate().find_map(|(i, &b)| {
        if b != b'\n' {
            return None;
        }
        match &buf[i + 1..] {
            [b'\n', ..] => Some(i + 2),
            [b'\r', b'\n', ..] => Some(i + 3),
            _ => None,
        }
    })
}

/// Parse a complete head (as delimited by [`head_end`]) into the `CONNECT` authority.
pub fn parse_head(head: &[u8]) -> Result<&str, HeadError> {
    let line_end = head
        .iter()
        .position(|&b| b == b'\n')
        .ok_or(HeadError::Malformed("no request line"))?;
    let line = &head[..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = std::str::from_utf8(line).map_err(|_| HeadError::Malformed("not ASCII"))?;
    if !line.is_ascii() || line.bytes().any(|b| b.is_ascii_control()) {
        return Err(HeadError::Malformed("not ASCII"));
    }
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed(
            "request line is not `METHOD target HTTP/1.x`",
        ));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
        return Err(HeadError::Malformed("bad method"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(HeadError::Malformed("not HTTP/1.x"));
    }
    if target.is_empty() {
        return Err(HeadError::Malformed("empty target"));
    }
    if method != "CONNECT" {
        return Err(HeadError::Method(method.to_owned()));
    }
    Ok(target)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn heads() {
        let cases: &[(&[u8], Result<&str, HeadError>)] = &[
            (
                b"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n",
                Ok("api.github.com:443"),
            ),
            (b"CONNECT [::1]:9443 HTTP/1.0\r\n\r\n", Ok("[::1]:9443")),
            (b"CONNECT a:1 HTTP/1.1\n\n", Ok("a:1")),
            (
                b"GET http://example.com/ HTTP/1.1\r\n\r\n",
                Err(HeadError::Method("GET".into())),
            ),
            (
                b"connect a:1 HTTP/1.1\r\n\r\n",
                Err(HeadError::Method("connect".into())),
            ),
            (
                b"CONNECT a:1 HTTP/2\r\n\r\n",
                Err(HeadError::Malformed("not HTTP/1.x")),
            ),
            (
                b"CONNECT  a:1 HTTP/1.1\r\n\r\n",
                Err(HeadError::Malformed(
                    "request line is not `METHOD target HTTP/1.x`",
                )),
            ),
            (
                b"CONNECT a:1\r\n\r\n",
                Err(HeadError::Malformed(
                    "request line is not `METHOD target HTTP/1.x`",
                )),
            ),
            (
                b"\x16\x03\x01\x00\x05hello\r\n\r\n",
                Err(HeadError::Malformed("not ASCII")),
            ),
        ];
        for (head, want) in cases {
            assert_eq!(&parse_head(head), want, "{}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn head_ends() {
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n\r\n"), Some(24));
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n\r\nxyz"), Some(24));
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\nHost: a\r\n"), None);
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\n\n"), Some(22));
        // Bare LF line ends, then an empty line ended by CRLF (or the other way round).
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\nHost: a\n\r\n"), Some(31));
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\n\r\nxyz"), Some(23));
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\nHost: a\r\n\n"), Some(32));
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\nHost: a\n\n"), Some(30));
        // A CR alone ends no line; an empty line is only one right after a line end.
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\r\n"), None);
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\nHost: a\r\n\r"), None);
        assert_eq!(head_end(b"\r\n"), None);
        // The first empty line wins, whatever its ending.
        assert_eq!(head_end(b"C\n\r\n\r\n\r\n"), Some(4));
        // Every head the parser accepts is found complete, with any mix of line endings.
        for (eol, blank) in [
            ("\r\n", "\r\n"),
            ("\n", "\r\n"),
            ("\r\n", "\n"),
            ("\n", "\n"),
        ] {
            let head = format!("CONNECT a:1 HTTP/1.1{eol}Host: a{eol}{blank}");
            assert_eq!(head_end(head.as_bytes()), Some(head.len()), "{head:?}");
            assert_eq!(parse_head(head.as_bytes()), Ok("a:1"), "{head:?}");
        }
    }
}
