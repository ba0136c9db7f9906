//! The MCP client side used by `lock`, `verify` and the proxy's server link: framing, starting
//! servers, era detection and reading a whole surface.
//!
//! # What mcpsum presents to servers
//!
//! Some servers list more to clients that declare more, so the surface must be compared like for
//! like: `lock`, `verify` and `proxy` present one fixed identity, [`client_info`], and one fixed
//! capability set, [`client_capabilities`] (roots, sampling and form elicitation, so that the
//! proxy can relay those requests to a client that declared them). The only exception is the
//! era probe, which sends `"io.modelcontextprotocol/clientCapabilities": {}` as the lockfile
//! format requires.

pub mod client;
pub mod envelope;
pub mod framing;
pub mod process;

use serde_json::{Value, json};

// The protocol's constants live below the lockfile and the wire layer, which both need them;
// re-exported here so `mcp::MODERN_VERSION` and friends keep working.
pub use crate::protocol::{
    LATEST_LEGACY, LEGACY_VERSIONS, META_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL,
    META_SERVER_INFO, META_VERSION, MODERN_VERSION,
};

/// The identity mcpsum presents to every server.
pub fn client_info() -> Value {
    json!({"name": "mcpsum", "version": env!("CARGO_PKG_VERSION")})
}

/// The capability set mcpsum presents to every server (see the module docs). `roots` declares
/// `listChanged`: the proxy sends `notifications/roots/list_changed` to a legacy server when a
/// client that has roots of its own connects (the server asked mcpsum before any client came),
/// and relays the client's own.
pub fn client_capabilities() -> Value {
    json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {"form": {}}})
}

/// JSON-RPC error codes mcpsum uses or recognizes.
pub mod codes {
    /// Invalid request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Method not found.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid params.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL: i64 = -32603;
    /// Parse error.
    pub const PARSE: i64 = -32700;
    /// mcpsum: the server is quarantined (fixed by the lockfile format).
    pub const QUARANTINED: i64 = -32002;
    /// 2026-07-28: missing required client capability.
    pub const MISSING_CAPABILITY: i64 = -32021;
    /// 2026-07-28: unsupported protocol version.
    pub const UNSUPPORTED_VERSION: i64 = -32022;
}
