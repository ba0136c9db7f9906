//! Address classes (design 6.3). A name that resolves to anything but a public address is refused
//! unless that exact `IP:port` is listed: otherwise a hostile or rebinding DNS answer would turn an
//! allowed name into a way to reach the host's loopback services, the LAN or a cloud metadata
//! endpoint. Pure; no I/O.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

/// The class of an address, as far as egress is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AddressClass {
    /// Globally routable: allowed for a listed name.
    Public,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// `169.254/16`, `fe80::/10`.
    LinkLocal,
    /// `fec0::/10` (deprecated site-local).
    SiteLocal,
    /// `100.64/10` (carrier-grade NAT).
    SharedCgnat,
    /// `fc00::/7`.
    UniqueLocal,
    /// `192.0.0.0/24`, `2001::/23` (IETF protocol assignments, incl. Teredo), `64:ff9b:1::/48`
    /// (local-use NAT64), `100::/64` (discard), `5f00::/16` (SRv6 SIDs, RFC 9602).
    Special,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18/15`.
    Benchmark,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `240/4` (incl. broadcast); IPv6 outside `2000::/3` that no other class names (`::/16`
    /// forms, the rest of `64:ff9b::/16` and `100::/8`, space IANA has not allocated).
    Reserved,
    /// An address of this host itself, public or not (its global IPv6 or public IPv4 address,
    /// or one routed to it locally). No range says which addresses a host has, so [`classify`]
    /// never returns this: the proxy finds it once a connection is open (see
    /// [`crate::connection_is_local`]).
    HostLocal,
}

impl AddressClass {
    /// True only for [`AddressClass::Public`].
    pub fn is_public(self) -> bool {
        self == AddressClass::Public
    }

    /// The snake_case name used in audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Public => "public",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link_local",
            AddressClass::SiteLocal => "site_local",
            AddressClass::SharedCgnat => "shared_cgnat",
            AddressClass::UniqueLocal => "unique_local",
            AddressClass::Special => "special",
            AddressClass::Documentation => "documentation",
            AddressClass::Benchmark => "benchmark",
            AddressClass::Multicast => "multicast",
            AddressClass::Reserved => "reserved",
            AddressClass::HostLocal => "host_local",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Classify an address. IPv4-mapped (`::ffff:a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4
/// (`2002::/16`) addresses are judged by the IPv4 address inside them, since that is where the
/// packets end up. Any other IPv6 address is public only inside `2000::/3`, the only space IANA
/// has allocated for global unicast (IPv6 Address Space registry), and outside the
/// special-purpose ranges there.
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    use AddressClass as C;
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (0, _, _) => C::Unspecified,
        (10, _, _) => C::Private,
        (172, 16..=31, _) => C::Private,
        (192, 168, _) => C::Private,
        (127, _, _) => C::Loopback,
        (169, 254, _) => C::LinkLocal,
        (100, 64..=127, _) => C::SharedCgnat,
        (192, 0, 0) => C::Special,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => C::Documentation,
        (198, 18..=19, _) => C::Benchmark,
        (224..=239, _, _) => C::Multicast,
        (240..=255, _, _) => C::Reserved,
        _ => C::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    use AddressClass as C;
    let s = ip.segments();
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => C::Unspecified,
        [0, 0, 0, 0, 0, 0, 0, 1] => C::Loopback,
        // Everything else in ::/16: IPv4-compatible (deprecated), IPv4-translated, ...
        [0, ..] => C::Reserved,
        [0x64, 0xff9b, 1, ..] => C::Special,
        [0x100, 0, 0, 0, ..] => C::Special,
        [0x2001, 0xdb8, ..] => C::Documentation,
        [0x2001, x, ..] if x < 0x200 => C::Special,
        [0x3fff, x, ..] if x < 0x1000 => C::Documentation,
        // The 6bone test network, returned in 2006 (RFC 3701) and not routed since.
        [0x3ffe, ..] => C::Reserved,
        [0x5f00, ..] => C::Special,
        [x, ..] if x & 0xfe00 == 0xfc00 => C::UniqueLocal,
        [x, ..] if x & 0xffc0 == 0xfe80 => C::LinkLocal,
        [x, ..] if x & 0xffc0 == 0xfec0 => C::SiteLocal,
        [x, ..] if x & 0xff00 == 0xff00 => C::Multicast,
        [x, ..] if x & 0xe000 == 0x2000 => C::Public,
        // Deny by default: space outside 2000::/3 is unallocated or reserved by the IETF, and a
        // later assignment there (as 5f00::/16 for SRv6 SIDs was) need not be globally routed. A
        // resolver answering with such an address is refused, not trusted to mean the internet.
        _ => C::Reserved,
    }
}

/// The IPv4 address carried by an IPv4-mapped, NAT64 well-known-prefix or 6to4 address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => {
            Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]))
        }
        [0x2002, _, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;
    use AddressClass as C;

    #[test]
    fn classes() {
        let cases: &[(&str, AddressClass)] = &[
            ("0.0.0.0", C::Unspecified),
            ("0.1.2.3", C::Unspecified),
            ("10.0.0.1", C::Private),
            ("10.255.255.255", C::Private),
            ("172.15.255.255", C::Public),
            ("172.16.0.1", C::Private),
            ("172.31.255.255", C::Private),
            ("172.32.0.0", C::Public),
            ("192.168.1.1", C::Private),
            ("127.0.0.1", C::Loopback),
            ("127.255.0.1", C::Loopback),
            ("169.254.169.254", C::LinkLocal),
            ("100.63.255.255", C::Public),
            ("100.64.0.1", C::SharedCgnat),
            ("100.127.255.255", C::SharedCgnat),
            ("100.128.0.0", C::Public),
            ("192.0.0.8", C::Special),
            ("192.0.2.1", C::Documentation),
            ("198.51.100.7", C::Documentation),
            ("203.0.113.9", C::Documentation),
            ("198.18.0.1", C::Benchmark),
            ("198.19.255.255", C::Benchmark),
            ("198.20.0.0", C::Public),
            ("224.0.0.1", C::Multicast),
            ("239.255.255.250", C::Multicast),
            ("240.0.0.1", C::Reserved),
            ("255.255.255.255", C::Reserved),
            ("8.8.8.8", C::Public),
            ("140.82.112.6", C::Public),
            ("::", C::Unspecified),
            ("::1", C::Loopback),
            ("::2", C::Reserved),
            ("::127.0.0.1", C::Reserved),
            ("::ffff:0:7f00:1", C::Reserved),
            ("fc00::1", C::UniqueLocal),
            ("fd12:3456::1", C::UniqueLocal),
            ("fe80::1", C::LinkLocal),
            ("febf::1", C::LinkLocal),
            ("fec0::1", C::SiteLocal),
            ("feff::1", C::SiteLocal),
            ("ff02::1", C::Multicast),
            ("ff0e::1", C::Multicast),
            ("2001:db8::1", C::Documentation),
            ("3fff::1", C::Documentation),
            ("100::1", C::Special),
            // The dummy prefix of RFC 9780, and the rest of 100::/8.
            ("100:0:0:1::1", C::Reserved),
            ("100:1::1", C::Reserved),
            ("2001::1", C::Special),
            ("2001:1ff::1", C::Special),
            ("64:ff9b:1::1", C::Special),
            ("2606:4700::1111", C::Public),
            ("2a00:1450::1", C::Public),
            // The low edge of 2000::/3, and just past or inside its special ranges.
            ("2000::", C::Public),
            ("2000::1", C::Public),
            ("2001:200::1", C::Public),
            ("3fff:fff::1", C::Documentation),
            // 3fff::/20 is documentation (RFC 9637), not all of 3ff0::/12.
            ("3fff:1000::1", C::Public),
            ("3ffe::1", C::Reserved),
            ("3ff0::1", C::Public),
            ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::Public),
            // Outside 2000::/3: unallocated, reserved, or special, never public.
            ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::Reserved),
            ("4000::", C::Reserved),
            ("64:ff9b:2::1", C::Reserved),
            ("64:ff9b:5::2", C::Reserved),
            ("64:ff9b:0:0:1::808:808", C::Reserved),
            ("200::1", C::Reserved),
            ("400::1", C::Reserved),
            ("800::1", C::Reserved),
            ("1000::1", C::Reserved),
            ("4000::1", C::Reserved),
            ("5f00::1", C::Special),
            ("5f00:ffff::1", C::Special),
            ("5eff::1", C::Reserved),
            ("6000::1", C::Reserved),
            ("8000::1", C::Reserved),
            ("a000::1", C::Reserved),
            ("c000::1", C::Reserved),
            ("e000::1", C::Reserved),
            ("f000::1", C::Reserved),
            ("f800::1", C::Reserved),
            ("fe00::1", C::Reserved),
            // Judged by the IPv4 inside.
            ("::ffff:127.0.0.1", C::Loopback),
            ("::ffff:10.0.0.5", C::Private),
            ("::ffff:8.8.8.8", C::Public),
            ("64:ff9b::169.254.169.254", C::LinkLocal),
            ("64:ff9b::8.8.8.8", C::Public),
            ("2002:7f00:1::1", C::Loopback),
            ("2002:c0a8:101::1", C::Private),
            ("2002:0808:0808::1", C::Public),
        ];
        for (text, want) in cases {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(classify(ip), *want, "{text}");
        }
    }

    #[test]
    fn no_ipv6_outside_2000_slash_3_is_public() {
        // Every first segment outside 2000::/3, with a few tails. (`::ffff:0:0/96` and
        // `64:ff9b::/96` are judged by the IPv4 address inside; `classes` covers them.)
        for head in 0..=u16::MAX {
            for tail in [
                [0, 0, 0, 0, 0, 0, 1],
                [0, 0, 0, 0, 0, 0x0808, 0x0808],
                [0xffff; 7],
            ] {
                let ip = Ipv6Addr::new(
                    head, tail[0], tail[1], tail[2], tail[3], tail[4], tail[5], tail[6],
                );
                if head & 0xe000 != 0x2000 {
                    assert_ne!(classify(IpAddr::V6(ip)), C::Public, "{ip}");
                }
            }
        }
    }
}
