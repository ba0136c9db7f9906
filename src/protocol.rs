//! The MCP protocol's fixed names: the revisions of both eras and the `_meta` keys of a
//! 2026-07-28 request. A leaf module: the lockfile (which records an era and a version), the wire
//! layer (`mcp`) and the proxy all read these, and it imports nothing of theirs.

/// The stateless protocol revision.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Legacy revisions mcpsum speaks, oldest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The legacy revision mcpsum asks for in `initialize`.
pub const LATEST_LEGACY: &str = LEGACY_VERSIONS[LEGACY_VERSIONS.len() - 1];

/// The one revision that allows JSON-RPC batches (each peer MUST accept them).
pub const BATCH_VERSION: &str = LEGACY_VERSIONS[1];

/// The revisions before elicitation (it came with 2025-06-18): a session of one of them cannot
/// be asked anything, whatever its capabilities say.
pub const BEFORE_ELICITATION: [&str; 2] = [LEGACY_VERSIONS[0], LEGACY_VERSIONS[1]];

/// `_meta` key: protocol version of a 2026-07-28 request.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: client capabilities of a 2026-07-28 request.
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: client identity of a 2026-07-28 request.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: the log level a 2026-07-28 request asks for (`notifications/message` while it runs).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key: server identity in a 2026-07-28 result.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

#[cfg(test)]
mod tests {
    use super::{LEGACY_VERSIONS, MODERN_VERSION};

    /// The revisions are named here only: no other file of the crate writes one as a string
    /// (tests aside, which speak to servers in a chosen version).
    #[test]
    fn no_other_module_spells_a_revision() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut stack = vec![src.clone()];
        let mut found = Vec::new();
        while let Some(dir) = stack.pop() {
            for entry in fs_err::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let rel = path
                    .strip_prefix(&src)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if rel == "protocol.rs" || rel.ends_with("tests.rs") || !rel.ends_with(".rs") {
                    continue;
                }
                let text = fs_err::read_to_string(&path).unwrap();
                let code = outside_test_modules(&text);
                for v in LEGACY_VERSIONS.iter().chain([&MODERN_VERSION]) {
                    if code.contains(&format!("\"{v}")) {
                        found.push(format!("{rel}: {v}"));
                    }
                }
            }
        }
        assert!(found.is_empty(), "revisions outside protocol.rs: {found:?}");
    }

    /// The lines of a formatted file outside its `#[cfg(test)] mod` blocks (each closes with a
    /// `}` in the first column), wherever they are in the file.
    fn outside_test_modules(text: &str) -> String {
        let mut out = String::new();
        let (mut attr, mut inside) = (false, false);
        for line in text.lines() {
            if inside {
                inside = line != "}";
                continue;
            }
            if attr && line.starts_with("mod ") && line.ends_with('{') {
                inside = true;
                attr = false;
                continue;
            }
            attr = line == "#[cfg(test)]";
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}
