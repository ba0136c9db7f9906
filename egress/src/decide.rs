//! The pure decisions of design 6.1 steps 4-6 and 9: may this target be tried, which resolved
//! addresses may be connected to, did a connection end on this host, and does the ClientHello's
//! SNI fit the target. No I/O, so each is a table test.

use std::net::{IpAddr, SocketAddr};

use crate::allowlist::{Allowlist, Host, Target};
use crate::class::{AddressClass, classify};

/// What to do with a `CONNECT` target before any network activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetDecision {
    /// No entry admits the target: 403, without any name lookup.
    NotListed,
    /// A listed name: resolve it, then [`vet_addresses`].
    Resolve {
        /// The matching entry, as written in canonical form.
        rule: String,
    },
    /// A listed address: connect to it directly (it is listed, so its class does not matter).
    Connect {
        /// The matching entry.
        rule: String,
        /// The address to connect to.
        addr: SocketAddr,
    },
}

/// Decide whether `target` may be tried at all.
pub fn decide_target(allowlist: &Allowlist, target: &Target) -> TargetDecision {
    let Some(entry) = allowlist.find(target) else {
        return TargetDecision::NotListed;
    };
    let rule = entry.to_string();
    match target.host {
        Host::Name(_) => TargetDecision::Resolve { rule },
        Host::Ip(ip) => TargetDecision::Connect {
            rule,
            addr: SocketAddr::new(ip, target.port),
        },
    }
}

/// The resolved addresses of a listed name, split into those that may be connected to and those
/// that were dropped with their class.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vetted {
    /// Public addresses and listed `IP:port`s, in resolver order, without duplicates.
    pub kept: Vec<SocketAddr>,
    /// Non-public addresses that are not listed.
    pub dropped: Vec<(IpAddr, AddressClass)>,
}

/// Keep an address if it is public or if exactly `IP:port` is listed; drop the others.
pub fn vet_addresses(allowlist: &Allowlist, port: u16, addrs: &[IpAddr]) -> Vetted {
    let mut out = Vetted::default();
    for &ip in addrs {
        let class = classify(ip);
        if class.is_public() || allowlist.lists_ip(ip, port) {
            let sa = SocketAddr::new(ip, port);
            if !out.kept.contains(&sa) {
                out.kept.push(sa);
            }
        } else if !out.dropped.iter().any(|(d, _)| *d == ip) {
            out.dropped.push((ip, class));
        }
    }
    out
}

/// Whether an open connection from `local` to `peer` reached this host itself.
///
/// A name that resolves to one of the host's own public addresses passes [`vet_addresses`], but a
/// tunnel there would reach every host service bound to `0.0.0.0` or `::`, which the server's
/// own network namespace is meant to keep out of reach. Which addresses are the host's is for the
/// kernel's routing to say, and it shows in the source address it picked: a connection to an
/// address of the host is sourced from that same address (for IPv4 also one in a range routed
/// to the host with `ip route add local ...`), and one sourced from loopback never left the host
/// (an IPv6 range routed locally, on a host without a global IPv6 address). Comparing with the
/// interface addresses would add nothing: every address on an interface is caught here.
///
/// Not caught: an IPv6 range routed locally on a host that also has a global IPv6 address (the
/// kernel sources from that address), and a local route with an explicit `src`. Telling those
/// apart needs a route lookup (`RTM_GETROUTE` answering `RTN_LOCAL`).
pub fn connection_is_local(local: IpAddr, peer: IpAddr) -> bool {
    local.to_canonical() == peer.to_canonical() || classify(local) == AddressClass::Loopback
}

/// Whether the SNI of the ClientHello fits the target: a name target needs SNI equal to the host
/// (so a client cannot tunnel to an allowed address and then talk to another virtual host); an IP
/// target needs none (RFC 6066 forbids IP literals as SNI), and any SNI it sends goes to the listed
/// address anyway.
pub fn sni_matches(target: &Target, sni: Option<&str>) -> bool {
    match &target.host {
        Host::Name(host) => sni.is_some_and(|s| {
            let s = s.strip_suffix('.').unwrap_or(s);
            s.eq_ignore_ascii_case(host)
        }),
        Host::Ip(_) => true,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn list(entries: &[&str]) -> Allowlist {
        Allowlist::parse(&entries.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    #[test]
    fn target_decisions() {
        let l = list(&[
            "api.github.com:443",
            "*.example.com:443",
            "10.0.0.5:8080",
            "[::1]:9443",
        ]);
        let resolve = |r: &str| TargetDecision::Resolve { rule: r.into() };
        let connect = |r: &str, a: &str| TargetDecision::Connect {
            rule: r.into(),
            addr: a.parse().unwrap(),
        };
        let cases = [
            ("api.github.com:443", resolve("api.github.com:443")),
            ("API.github.com.:443", resolve("api.github.com:443")),
            ("api.github.com:80", TargetDecision::NotListed),
            ("github.com:443", TargetDecision::NotListed),
            ("x.example.com:443", resolve("*.example.com:443")),
            ("example.com:443", TargetDecision::NotListed),
            ("10.0.0.5:8080", connect("10.0.0.5:8080", "10.0.0.5:8080")),
            ("10.0.0.6:8080", TargetDecision::NotListed),
            ("[::1]:9443", connect("[::1]:9443", "[::1]:9443")),
            ("127.0.0.1:9443", TargetDecision::NotListed),
        ];
        for (target, want) in cases {
            assert_eq!(decide_target(&l, &t(target)), want, "{target}");
        }
        assert_eq!(
            decide_target(&list(&[]), &t("api.github.com:443")),
            TargetDecision::NotListed
        );
    }

    #[test]
    fn address_vetting() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let sa = |s: &str| s.parse::<SocketAddr>().unwrap();
        let l = list(&["localhost:8443", "127.0.0.1:8443"]);
        assert_eq!(
            vet_addresses(
                &l,
                8443,
                &[ip("::1"), ip("127.0.0.1"), ip("127.0.0.1"), ip("8.8.8.8")]
            ),
            Vetted {
                kept: vec![sa("127.0.0.1:8443"), sa("8.8.8.8:8443")],
                dropped: vec![(ip("::1"), AddressClass::Loopback)],
            }
        );
        // Listed for another port only: still dropped.
        assert_eq!(
            vet_addresses(&l, 9000, &[ip("127.0.0.1")]),
            Vetted {
                kept: vec![],
                dropped: vec![(ip("127.0.0.1"), AddressClass::Loopback)],
            }
        );
        // A mapped form of a listed address is not the listed address.
        assert_eq!(
            vet_addresses(&l, 8443, &[ip("::ffff:127.0.0.1"), ip("169.254.169.254")]),
            Vetted {
                kept: vec![],
                dropped: vec![
                    (ip("::ffff:127.0.0.1"), AddressClass::Loopback),
                    (ip("169.254.169.254"), AddressClass::LinkLocal)
                ],
            }
        );
    }

    #[test]
    fn local_connections() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let cases = [
            // (local, peer, reached this host)
            ("198.20.0.1", "198.20.0.1", true),
            ("2a00::1", "2a00::1", true),
            ("::ffff:198.20.0.1", "198.20.0.1", true),
            // An IPv6 range routed locally, on a host without a global IPv6 address.
            ("::1", "2a00:1::7", true),
            ("127.0.0.1", "198.20.1.5", true),
            ("::ffff:127.0.0.1", "198.20.1.5", true),
            ("192.168.1.10", "140.82.112.6", false),
            ("2a00::1", "2606:4700::1111", false),
            ("10.0.0.5", "10.0.0.6", false),
        ];
        for (local, peer, want) in cases {
            assert_eq!(
                connection_is_local(ip(local), ip(peer)),
                want,
                "{local} -> {peer}"
            );
        }
    }

    #[test]
    fn sni_rule() {
        let name = t("api.github.com:443");
        let ip = t("10.0.0.5:443");
        assert!(sni_matches(&name, Some("api.github.com")));
        assert!(sni_matches(&name, Some("API.github.com")));
        assert!(!sni_matches(&name, Some("evil.example")));
        assert!(!sni_matches(&name, Some("github.com")));
        assert!(!sni_matches(&name, None));
        assert!(sni_matches(&ip, None));
        assert!(sni_matches(&ip, Some("whatever.example")));
    }
}
