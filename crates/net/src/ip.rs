//! Address classes: every IPv4 and IPv6 special-purpose range (IANA registries), with
//! IPv4 addresses embedded in IPv6 (mapped, translated, NAT64, 6to4) judged as the IPv4
//! address they stand for. Written by hand: no crate we found covers every
//! special-purpose range and embedded IPv4 form.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};
use serde::Serialize;

/// What kind of address an IP is, as far as the URL guard cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum IpClass {
    /// Public unicast: everything not listed below.
    Public,
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// RFC 1918 (10/8, 172.16/12, 192.168/16) and unique local fc00::/7.
    Private,
    /// Shared address space for carrier-grade NAT, 100.64.0.0/10.
    SharedAddress,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// Cloud metadata endpoints: 169.254.169.254 (AWS, GCP, Azure, OCI…), 169.254.170.2
    /// (ECS), 100.100.100.200 (Alibaba), 168.63.129.16 (Azure WireServer), fd00:ec2::254.
    Metadata,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 0.0.0.0, ::.
    Unspecified,
    /// "This network", 0.0.0.0/8.
    ThisNetwork,
    /// IETF protocol assignments, 192.0.0.0/24 and 2001::/23 (Teredo included).
    ProtocolAssignment,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20.
    Documentation,
    /// Benchmarking, 198.18.0.0/15.
    Benchmarking,
    /// The deprecated 6to4 relay anycast prefix, 192.88.99.0/24.
    #[serde(rename = "6to4-relay")]
    SixToFourRelay,
    /// Discard-only, 100::/64.
    Discard,
    /// Deprecated IPv6 site-local, fec0::/10.
    SiteLocal,
    /// Reserved or unassigned: 240.0.0.0/4, IPv4-compatible IPv6 (::/96), IPv6 outside
    /// 2000::/3.
    Reserved,
}

impl IpClass {
    /// The machine-readable rule name, e.g. `private` or `link-local`.
    pub fn rule(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::SharedAddress => "shared-address",
            Self::LinkLocal => "link-local",
            Self::Metadata => "metadata",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Unspecified => "unspecified",
            Self::ThisNetwork => "this-network",
            Self::ProtocolAssignment => "protocol-assignment",
            Self::Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::SixToFourRelay => "6to4-relay",
            Self::Discard => "discard",
            Self::SiteLocal => "site-local",
            Self::Reserved => "reserved",
        }
    }

    /// A noun phrase for messages ("a private address (RFC 1918)"). `v6` picks the
    /// IPv6 wording where the ranges differ.
    pub fn describe(self, v6: bool) -> &'static str {
        match (self, v6) {
            (Self::Public, _) => "a public unicast address",
            (Self::Loopback, _) => "a loopback address",
            (Self::Private, false) => "a private address (RFC 1918)",
            (Self::Private, true) => "a private address (unique local, fc00::/7)",
            (Self::SharedAddress, _) => "a shared carrier-grade NAT address (100.64.0.0/10)",
            (Self::LinkLocal, false) => "a link-local address (169.254.0.0/16)",
            (Self::LinkLocal, true) => "a link-local address (fe80::/10)",
            (Self::Metadata, _) => "a cloud metadata endpoint",
            (Self::Multicast, _) => "a multicast address",
            (Self::Broadcast, _) => "the broadcast address",
            (Self::Unspecified, _) => "the unspecified address",
            (Self::ThisNetwork, _) => "a \"this network\" address (0.0.0.0/8)",
            (Self::ProtocolAssignment, false) => {
                "an IETF protocol assignment address (192.0.0.0/24)"
            }
            (Self::ProtocolAssignment, true) => "an IETF protocol assignment address (2001::/23)",
            (Self::Documentation, _) => "a documentation address",
            (Self::Benchmarking, _) => "a benchmarking address (198.18.0.0/15)",
            (Self::SixToFourRelay, _) => "a deprecated 6to4 relay address (192.88.99.0/24)",
            (Self::Discard, _) => "a discard-only address (100::/64)",
            (Self::SiteLocal, _) => "a deprecated site-local address (fec0::/10)",
            (Self::Reserved, _) => "a reserved address",
        }
    }
}

/// How an IPv4 address is carried inside an IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ipv4Embedding {
    /// IPv4-mapped, ::ffff:0:0/96.
    Mapped,
    /// IPv4-translated (SIIT), ::ffff:0:0:0/96.
    Translated,
    /// IPv4-compatible (deprecated), ::/96.
    Compatible,
    /// NAT64 well-known prefix, 64:ff9b::/96.
    Nat64,
    /// NAT64 local-use prefix, 64:ff9b:1::/48 (IPv4 in the last 32 bits).
    Nat64Local,
    /// 6to4, 2002::/16.
    SixToFour,
}

impl Ipv4Embedding {
    /// A phrase for messages ("an IPv4-mapped IPv6 address").
    pub fn describe(self) -> &'static str {
        match self {
            Self::Mapped => "an IPv4-mapped IPv6 address",
            Self::Translated => "an IPv4-translated IPv6 address",
            Self::Compatible => "a deprecated IPv4-compatible IPv6 address",
            Self::Nat64 => "a NAT64 address",
            Self::Nat64Local => "a local-use NAT64 address",
            Self::SixToFour => "a 6to4 address",
        }
    }
}

/// The IPv4 address inside an IPv6 address, and how it is embedded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct EmbeddedIpv4 {
    /// The embedding form.
    pub form: Ipv4Embedding,
    /// The IPv4 address it stands for.
    pub v4: Ipv4Addr,
}

/// The IPv4 address an IPv6 address stands for, if it embeds one.
pub fn embedded_ipv4(ip: Ipv6Addr) -> Option<EmbeddedIpv4> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let form = match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Ipv4Embedding::Mapped,
        [0, 0, 0, 0, 0xffff, 0, _, _] => Ipv4Embedding::Translated,
        // :: and ::1 are the unspecified and loopback addresses, not embeddings.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => return None,
        [0, 0, 0, 0, 0, 0, _, _] => Ipv4Embedding::Compatible,
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Ipv4Embedding::Nat64,
        [0x64, 0xff9b, 1, ..] => Ipv4Embedding::Nat64Local,
        [0x2002, hi, lo, ..] => {
            let v4 = Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
            return Some(EmbeddedIpv4 {
                form: Ipv4Embedding::SixToFour,
                v4,
            });
        }
        _ => return None,
    };
    Some(EmbeddedIpv4 { form, v4: low })
}

/// Cloud metadata endpoints by address.
const METADATA_V4: [Ipv4Addr; 4] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(168, 63, 129, 16),
];
const METADATA_V6: [Ipv6Addr; 1] = [Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)];

/// IPv4 special-purpose ranges, most specific first.
const V4_RANGES: &[(Ipv4Addr, u8, IpClass)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, IpClass::ThisNetwork),
    (Ipv4Addr::new(10, 0, 0, 0), 8, IpClass::Private),
    (Ipv4Addr::new(100, 64, 0, 0), 10, IpClass::SharedAddress),
    (Ipv4Addr::new(127, 0, 0, 0), 8, IpClass::Loopback),
    (Ipv4Addr::new(169, 254, 0, 0), 16, IpClass::LinkLocal),
    (Ipv4Addr::new(172, 16, 0, 0), 12, IpClass::Private),
    (Ipv4Addr::new(192, 0, 0, 0), 24, IpClass::ProtocolAssignment),
    (Ipv4Addr::new(192, 0, 2, 0), 24, IpClass::Documentation),
    (Ipv4Addr::new(192, 88, 99, 0), 24, IpClass::SixToFourRelay),
    (Ipv4Addr::new(192, 168, 0, 0), 16, IpClass::Private),
    (Ipv4Addr::new(198, 18, 0, 0), 15, IpClass::Benchmarking),
    (Ipv4Addr::new(198, 51, 100, 0), 24, IpClass::Documentation),
    (Ipv4Addr::new(203, 0, 113, 0), 24, IpClass::Documentation),
    (Ipv4Addr::new(224, 0, 0, 0), 4, IpClass::Multicast),
    (Ipv4Addr::new(240, 0, 0, 0), 4, IpClass::Reserved),
];

/// IPv6 special-purpose ranges (after embedded IPv4 forms are handled).
const V6_RANGES: &[(Ipv6Addr, u8, IpClass)] = &[
    (
        Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0),
        64,
        IpClass::Discard,
    ),
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        IpClass::Documentation,
    ),
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        IpClass::ProtocolAssignment,
    ),
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0),
        20,
        IpClass::Documentation,
    ),
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        IpClass::Private,
    ),
    (
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        10,
        IpClass::LinkLocal,
    ),
    (
        Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
        10,
        IpClass::SiteLocal,
    ),
    (
        Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
        8,
        IpClass::Multicast,
    ),
];

/// Classify an address. IPv4 embedded in IPv6 (mapped, translated, NAT64, 6to4) is
/// judged as the IPv4 address it stands for; IPv4-compatible addresses are reserved.
pub fn classify_ip(ip: IpAddr) -> IpClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> IpClass {
    if ip == Ipv4Addr::UNSPECIFIED {
        return IpClass::Unspecified;
    }
    if ip == Ipv4Addr::BROADCAST {
        return IpClass::Broadcast;
    }
    if METADATA_V4.contains(&ip) {
        return IpClass::Metadata;
    }
    V4_RANGES
        .iter()
        .find(|(net, len, _)| Ipv4Net::new(*net, *len).is_ok_and(|n| n.contains(&ip)))
        .map_or(IpClass::Public, |(_, _, class)| *class)
}

fn classify_v6(ip: Ipv6Addr) -> IpClass {
    if ip == Ipv6Addr::UNSPECIFIED {
        return IpClass::Unspecified;
    }
    if ip == Ipv6Addr::LOCALHOST {
        return IpClass::Loopback;
    }
    if let Some(embedded) = embedded_ipv4(ip) {
        let inner = classify_v4(embedded.v4);
        return match embedded.form {
            Ipv4Embedding::Compatible => IpClass::Reserved,
            // A local-use translation prefix leads into a private network at best.
            Ipv4Embedding::Nat64Local if inner == IpClass::Public => IpClass::Private,
            _ => inner,
        };
    }
    if METADATA_V6.contains(&ip) {
        return IpClass::Metadata;
    }
    if let Some((_, _, class)) = V6_RANGES
        .iter()
        .find(|(net, len, _)| Ipv6Net::new(*net, *len).is_ok_and(|n| n.contains(&ip)))
    {
        return *class;
    }
    // Global unicast is 2000::/3; the rest is unassigned or reserved.
    if ip.segments()[0] & 0xe000 == 0x2000 {
        IpClass::Public
    } else {
        IpClass::Reserved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> IpClass {
        classify_ip(s.parse().unwrap())
    }

    #[test]
    fn ipv4_special_purpose_ranges() {
        let table = [
            ("0.0.0.0", IpClass::Unspecified),
            ("0.1.2.3", IpClass::ThisNetwork),
            ("0.255.255.255", IpClass::ThisNetwork),
            ("10.0.0.5", IpClass::Private),
            ("10.255.255.255", IpClass::Private),
            ("100.63.255.255", IpClass::Public),
            ("100.64.0.1", IpClass::SharedAddress),
            ("100.127.255.255", IpClass::SharedAddress),
            ("100.128.0.0", IpClass::Public),
            ("100.100.100.200", IpClass::Metadata),
            ("127.0.0.1", IpClass::Loopback),
            ("127.255.255.254", IpClass::Loopback),
            ("169.254.0.1", IpClass::LinkLocal),
            ("169.254.169.254", IpClass::Metadata),
            ("169.254.170.2", IpClass::Metadata),
            ("172.15.255.255", IpClass::Public),
            ("172.16.0.1", IpClass::Private),
            ("172.31.255.255", IpClass::Private),
            ("172.32.0.0", IpClass::Public),
            ("192.0.0.8", IpClass::ProtocolAssignment),
            ("192.0.2.1", IpClass::Documentation),
            ("192.88.99.1", IpClass::SixToFourRelay),
            ("192.168.1.1", IpClass::Private),
            ("198.17.255.255", IpClass::Public),
            ("198.18.0.1", IpClass::Benchmarking),
            ("198.19.255.255", IpClass::Benchmarking),
            ("198.20.0.0", IpClass::Public),
            ("198.51.100.7", IpClass::Documentation),
            ("203.0.113.9", IpClass::Documentation),
            ("224.0.0.1", IpClass::Multicast),
            ("239.255.255.250", IpClass::Multicast),
            ("240.0.0.1", IpClass::Reserved),
            ("255.255.255.254", IpClass::Reserved),
            ("255.255.255.255", IpClass::Broadcast),
            ("168.63.129.16", IpClass::Metadata),
            ("8.8.8.8", IpClass::Public),
            ("1.1.1.1", IpClass::Public),
            ("93.184.216.34", IpClass::Public),
        ];
        for (ip, want) in table {
            assert_eq!(c(ip), want, "{ip}");
        }
    }

    #[test]
    fn ipv6_special_purpose_ranges() {
        let table = [
            ("::", IpClass::Unspecified),
            ("::1", IpClass::Loopback),
            ("::ffff:127.0.0.1", IpClass::Loopback),
            ("::ffff:10.1.2.3", IpClass::Private),
            ("::ffff:169.254.169.254", IpClass::Metadata),
            ("::ffff:8.8.8.8", IpClass::Public),
            ("::ffff:0:127.0.0.1", IpClass::Loopback),
            ("::127.0.0.1", IpClass::Reserved),
            ("::8.8.8.8", IpClass::Reserved),
            ("::2", IpClass::Reserved),
            ("64:ff9b::127.0.0.1", IpClass::Loopback),
            ("64:ff9b::a9fe:a9fe", IpClass::Metadata),
            ("64:ff9b::8.8.8.8", IpClass::Public),
            ("64:ff9b:1::10.0.0.1", IpClass::Private),
            ("64:ff9b:1::8.8.8.8", IpClass::Private),
            ("64:ff9b:1::169.254.169.254", IpClass::Metadata),
            ("64:ff9b:2::", IpClass::Reserved),
            ("100::1", IpClass::Discard),
            ("100:0:0:1::", IpClass::Reserved),
            ("2001::1", IpClass::ProtocolAssignment),
            ("2001:1ff:ffff::1", IpClass::ProtocolAssignment),
            ("2001:200::1", IpClass::Public),
            ("2001:db8::1", IpClass::Documentation),
            ("3fff::1", IpClass::Documentation),
            ("2002:7f00:1::", IpClass::Loopback),
            ("2002:a9fe:a9fe::1", IpClass::Metadata),
            ("2002:0808:0808::1", IpClass::Public),
            ("2002:c0a8:0101::", IpClass::Private),
            ("fc00::1", IpClass::Private),
            ("fd12:3456::1", IpClass::Private),
            ("fd00:ec2::254", IpClass::Metadata),
            ("fe80::1", IpClass::LinkLocal),
            ("febf::1", IpClass::LinkLocal),
            ("fec0::1", IpClass::SiteLocal),
            ("ff02::1", IpClass::Multicast),
            ("ff0e::1", IpClass::Multicast),
            ("2606:4700:4700::1111", IpClass::Public),
            ("2a00:1450::1", IpClass::Public),
            ("4000::1", IpClass::Reserved),
            ("5f00::1", IpClass::Reserved),
        ];
        for (ip, want) in table {
            assert_eq!(c(ip), want, "{ip}");
        }
    }

    #[test]
    fn embedded_forms() {
        let e = embedded_ipv4("2002:a9fe:a9fe::1".parse().unwrap()).unwrap();
        assert_eq!(e.form, Ipv4Embedding::SixToFour);
        assert_eq!(e.v4, Ipv4Addr::new(169, 254, 169, 254));
        let e = embedded_ipv4("::ffff:1.2.3.4".parse().unwrap()).unwrap();
        assert_eq!(e.form, Ipv4Embedding::Mapped);
        assert_eq!(e.v4, Ipv4Addr::new(1, 2, 3, 4));
        assert!(embedded_ipv4(Ipv6Addr::LOCALHOST).is_none());
        assert!(embedded_ipv4("2001:db8::1".parse().unwrap()).is_none());
    }

    #[test]
    fn rules_are_kebab_and_match_serde() {
        for class in [
            IpClass::Public,
            IpClass::SharedAddress,
            IpClass::SixToFourRelay,
            IpClass::LinkLocal,
        ] {
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.rule()));
        }
    }
}
