//! mcpsum's egress proxy: allow-listed HTTPS `CONNECT` only, audited.
//!
//! A server whose `policy.sandbox.network.allow` lists hosts runs in its own network namespace
//! with loopback only. The sandbox launcher binds a listener there and hands it to mcpsum, which
//! runs [`serve`] on it; the server's proxy variables point at it. For every connection the proxy
//! (design 6.1):
//!
//! 1. accepts only `CONNECT host:port HTTP/1.x` (405 otherwise, 400 when malformed);
//! 2. refuses a target no [`Allowlist`] entry admits, before any name lookup (403);
//! 3. resolves names itself and keeps only public addresses, or those whose `IP:port` is listed
//!    ([`classify`]); nothing left is a 403;
//! 4. connects to the kept addresses in order and pins the first that answers (no second lookup),
//!    skipping any that turns out to be this host's own unless its `IP:port` is listed;
//! 5. replies 200, then requires a TLS ClientHello whose SNI names the requested host, read with
//!    `rustls::server::Acceptor` and forwarded unchanged: TLS is never terminated;
//! 6. relays both ways and hands one [`EgressRecord`] per connection to the audit sink.
//!
//! This is the only crate of mcpsum that speaks TLS. It needs no crypto provider.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// The std calls the workspace's `clippy.toml` steers to `fs-err`, and the environment setters.
#![deny(clippy::disallowed_methods)]

mod allowlist;
mod class;
mod decide;
mod head;
mod hello;
mod proxy;
mod record;

pub use allowlist::{Allowlist, AllowlistError, Entry, EntryProblem, Host, Pattern, Target};
pub use class::{AddressClass, classify};
pub use decide::{
    TargetDecision, Vetted, connection_is_local, decide_target, sni_matches, vet_addresses,
};
pub use head::HeadError;
// The request-head parser, public for the fuzz targets in `fuzz/` (the proxy is its only user).
#[doc(hidden)]
pub use head::{head_end, parse_head};
pub use hello::{ClientHelloInfo, ECH_EXTENSION, HelloError, HelloReader, read_client_hello};
pub use proxy::{
    AuditSink, BoxFuture, EgressConfig, Limits, RELAY_BUFFER_START, Resolver, SystemResolver,
    Timeouts, serve,
};
pub use record::{Decision, Dropped, EgressRecord, Reason};
