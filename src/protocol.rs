//! The MCP protocol's fixed names: the revisions of both eras and the `_meta` keys of a
//! 2026-07-28 request. A leaf module: the lockfile (which records an era and a version), the wire
//! layer (`mcp`) and the proxy all read these, and it imports nothing of theirs.

/// The stateless protocol revision.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Legacy revisions mcpsum speaks, oldest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The legacy revision mcpsum asks for in `initialize`.
pub const LATEST_LEGACY: &str = "2025-11-25";

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
