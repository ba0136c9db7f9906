//! Text made safe to show: server- and file-controlled strings escaped so that they cannot
//! conceal text, erase lines or start a line that reads like mcpsum's own. A leaf: it imports
//! nothing from the crate, so the error type and the terminal writer (`output`) can both use it.

/// Server-controlled text made safe for a terminal: control characters (C0 except newline and
/// tab, DEL, C1) and bidirectional overrides are shown as `\u{..}` escapes, so a description
/// cannot conceal text, erase lines or reorder what a reviewer reads.
pub fn sanitize(text: &str) -> String {
    if text
        .bytes()
        .all(|b| matches!(b, b' '..=b'~' | b'\n' | b'\t'))
    {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}');
        if (c.is_control() && c != '\n' && c != '\t') || bidi {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Like [`sanitize`], for one line: newlines and tabs are escaped too.
pub fn sanitize_line(text: &str) -> String {
    let mut out = String::new();
    push_sanitized_line(&mut out, text);
    out
}

/// [`sanitize_line`] appended to `out`.
pub fn push_sanitized_line(out: &mut String, text: &str) {
    if text.bytes().all(|b| matches!(b, b' '..=b'~')) {
        out.push_str(text);
    } else {
        out.push_str(&sanitize(text).replace('\n', "\\n").replace('\t', "\\t"));
    }
}

/// JSON text made safe for a terminal and equal as JSON. In valid JSON, the characters that
/// [`sanitize`] escapes can only be inside strings (where they become `\uXXXX` escapes) or be
/// whitespace between tokens (where a tab or carriage return becomes a space; a newline stays).
pub fn terminal_json(text: &str) -> std::borrow::Cow<'_, str> {
    if sanitize(text) == text && !text.contains(['\t', '\r']) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        let mut one = [0; 4];
        let one = c.encode_utf8(&mut one);
        if matches!(c, '\t' | '\r') {
            out.push(' ');
        } else if c != '\n' && sanitize(one) != *one {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `text` cut to `max` characters, the last of them an ellipsis.
pub fn ellipsize(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::terminal_json;
    use serde_json::Value;
    use std::borrow::Cow;

    #[test]
    fn terminal_json_escapes_inside_strings_and_keeps_the_value() {
        let line = "{\"reason\":\"a\u{202e}b\u{9b}c\u{7f}\",\t\"x\":1}";
        let safe = terminal_json(line);
        assert_eq!(safe, "{\"reason\":\"a\\u202eb\\u009bc\\u007f\", \"x\":1}");
        let a: Value = serde_json::from_str(line).unwrap();
        let b: Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(a, b);
        assert!(matches!(terminal_json("{\"a\":\"é\"}"), Cow::Borrowed(_)));
        // Pretty JSON keeps its lines.
        let pretty = "{\n  \"a\": \"\u{2066}x\"\n}\n";
        assert_eq!(terminal_json(pretty), "{\n  \"a\": \"\\u2066x\"\n}\n");
    }
}
