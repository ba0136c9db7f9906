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

/// The end of the head: the index just past the blank line, if the buffer holds one.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    // Bare LF line ends are tolerated (RFC 9112 2.2), as most servers do.
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
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
    }
}
