//! The syntax stage of the guard: [`check_url`] parses a URL the way browsers do
//! (WHATWG, so `http://0x7f.1/`, `http://2130706433/` and `http://127.1/` are all
//! 127.0.0.1, and `http://good.com@127.0.0.1/` goes to 127.0.0.1), then judges the
//! scheme, the real host (IP literals fully; names by the `localhost` and metadata
//! rules) and credentials before `@`.

use std::net::IpAddr;

use url::{Host, Url};

use crate::blocked::Blocked;
use crate::ip::{classify_ip, embedded_ipv4};
use crate::policy::UrlPolicy;

/// Cloud metadata host names, refused by name (their addresses are refused too).
const METADATA_NAMES: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
];

/// The host of a checked URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardedHost {
    /// A host name, as the URL spells it after normalization (lower case, IDNA,
    /// a trailing dot kept).
    Name(String),
    /// An IP literal; the syntax stage has already judged it.
    Ip(IpAddr),
}

impl std::fmt::Display for GuardedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Name(n) => f.write_str(n),
            Self::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A URL that passed the syntax stage of a policy. For a host name, the addresses it
/// resolves to still have to pass (see [`crate::resolve_and_check`]; the clients built
/// here do that in their DNS resolver).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedUrl {
    url: Url,
    host: Option<GuardedHost>,
}

impl GuardedUrl {
    /// The parsed, normalized URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The parsed URL, by value.
    pub fn into_url(self) -> Url {
        self.url
    }

    /// The host the request goes to (`None` only for host-less URLs under `off`).
    pub fn host(&self) -> Option<&GuardedHost> {
        self.host.as_ref()
    }

    /// The port the request goes to (explicit, or the scheme's default).
    pub fn port(&self) -> Option<u16> {
        self.url.port_or_known_default()
    }

    /// The normalized URL as a string.
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }
}

/// Syntax stage: parse `url` and judge its scheme, host and credentials under
/// `policy`. IP-literal hosts are judged completely here; host names only by name
/// (`localhost`, `*.localhost`, metadata names), their addresses at the DNS stage.
pub fn check_url(url: &str, policy: UrlPolicy) -> Result<GuardedUrl, Blocked> {
    let parsed = Url::parse(url.trim()).map_err(|e| Blocked::InvalidUrl {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    check_parsed_url(&parsed, policy)
}

/// [`check_url`] for an already parsed URL (redirect targets, request URLs).
pub fn check_parsed_url(url: &Url, policy: UrlPolicy) -> Result<GuardedUrl, Blocked> {
    let scheme = url.scheme();
    if !policy.allows_scheme(scheme) {
        return Err(Blocked::Scheme {
            policy,
            scheme: scheme.to_owned(),
        });
    }
    let host = match url.host() {
        Some(Host::Ipv4(v4)) => Some(GuardedHost::Ip(IpAddr::V4(v4))),
        Some(Host::Ipv6(v6)) => Some(GuardedHost::Ip(IpAddr::V6(v6))),
        // Hosts of non-special schemes (only under `off`) are opaque: an IPv4 literal
        // there is still an address, not a name.
        Some(Host::Domain(d)) => Some(match d.parse::<IpAddr>() {
            Ok(ip) => GuardedHost::Ip(ip),
            Err(_) => GuardedHost::Name(d.to_owned()),
        }),
        None => None,
    };
    let guarded = GuardedUrl {
        url: url.clone(),
        host,
    };
    if policy == UrlPolicy::Off {
        return Ok(guarded);
    }
    let host_text = match &guarded.host {
        None => return Err(Blocked::MissingHost { policy }),
        Some(GuardedHost::Ip(ip)) => {
            check_ip(*ip, None, policy)?;
            ip.to_string()
        }
        Some(GuardedHost::Name(name)) => {
            check_host_name(name, policy)?;
            name.clone()
        }
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Blocked::Credentials {
            policy,
            host: host_text,
        });
    }
    Ok(guarded)
}

/// Judge one address. `host` is the name it was resolved from, for the message.
pub fn check_ip(ip: IpAddr, host: Option<&str>, policy: UrlPolicy) -> Result<(), Blocked> {
    let class = classify_ip(ip);
    if policy.allows_class(class) {
        return Ok(());
    }
    let embedded = match ip {
        IpAddr::V6(v6) => embedded_ipv4(v6),
        IpAddr::V4(_) => None,
    };
    Err(Blocked::Address {
        policy,
        host: host.map(str::to_owned),
        addr: ip,
        class,
        embedded,
    })
}

/// What a host name is, by name alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameKind {
    /// `localhost` or `*.localhost` (RFC 6761): always loopback, never sent to DNS.
    Localhost,
    /// A cloud metadata host name.
    Metadata,
    /// Anything else: judged on what it resolves to.
    Other,
}

/// Normalize a host name for the name rules: lower case, one trailing dot removed.
/// Fails on empty labels (`a..b`, `.a`, `a..`).
pub(crate) fn normalize_name(name: &str) -> Result<String, String> {
    let lower = name.to_ascii_lowercase();
    let trimmed = lower.strip_suffix('.').unwrap_or(&lower);
    if trimmed.is_empty() {
        return Err("empty host name".to_owned());
    }
    if trimmed.split('.').any(str::is_empty) {
        return Err("empty label".to_owned());
    }
    Ok(trimmed.to_owned())
}

pub(crate) fn name_kind(normalized: &str) -> NameKind {
    if normalized == "localhost" || normalized.ends_with(".localhost") {
        NameKind::Localhost
    } else if METADATA_NAMES.contains(&normalized) {
        NameKind::Metadata
    } else {
        NameKind::Other
    }
}

/// The name rules: `localhost` and `*.localhost` need a policy that allows loopback;
/// metadata names are refused by every policy but `off`. Returns the kind of name.
pub(crate) fn check_host_name(name: &str, policy: UrlPolicy) -> Result<NameKind, Blocked> {
    let normalized = normalize_name(name).map_err(|reason| Blocked::InvalidHost {
        host: name.to_owned(),
        reason,
    })?;
    let kind = name_kind(&normalized);
    if policy == UrlPolicy::Off {
        return Ok(kind);
    }
    match kind {
        NameKind::Localhost if !policy.allows_class(crate::IpClass::Loopback) => {
            Err(Blocked::LocalhostName {
                policy,
                host: name.to_owned(),
            })
        }
        NameKind::Metadata => Err(Blocked::MetadataName {
            policy,
            host: name.to_owned(),
        }),
        _ => Ok(kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_crate_normalizes_ipv4_spellings() {
        // Verified here so that a change in the url crate cannot silently open a hole.
        for (input, host) in [
            ("http://2130706433/", "127.0.0.1"),
            ("http://0x7f.1/", "127.0.0.1"),
            ("http://0177.0.0.1/", "127.0.0.1"),
            ("http://127.1/", "127.0.0.1"),
            ("http://0x7f000001/", "127.0.0.1"),
            ("http://017700000001/", "127.0.0.1"),
            ("http://127.0.0.1./", "127.0.0.1"),
            ("http://%31%32%37.0.0.1/", "127.0.0.1"),
            ("http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/", "127.0.0.1"),
            ("http://0/", "0.0.0.0"),
            ("http://169.254.43518/", "169.254.169.254"),
            ("http://0xa9.0xfe.0xa9.0xfe/", "169.254.169.254"),
            ("http://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]"),
            ("http://good.com@127.0.0.1/", "127.0.0.1"),
            ("http://127.0.0.1\\@good.com/", "127.0.0.1"),
            ("http://good.com#@127.0.0.1/", "good.com"),
            ("http://LOCALHOST./", "localhost."),
        ] {
            let url = Url::parse(input).unwrap();
            assert_eq!(url.host_str(), Some(host), "{input}");
        }
        for bad in [
            "http://1.2.3.4.5/",
            "http://256.0.0.1/",
            "http://[fe80::1%25eth0]/",
            "http://[::1/",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(normalize_name("LocalHost.").unwrap(), "localhost");
        assert!(normalize_name("a..b").is_err());
        assert!(normalize_name("localhost..").is_err());
        assert_eq!(name_kind("api.localhost"), NameKind::Localhost);
        assert_eq!(name_kind("localhost"), NameKind::Localhost);
        assert_eq!(name_kind("notlocalhost"), NameKind::Other);
        assert_eq!(name_kind("metadata.google.internal"), NameKind::Metadata);
    }

    #[test]
    fn guarded_url_keeps_the_real_host() {
        let g = check_url("https://user@example.com:8443/x", UrlPolicy::Off).unwrap();
        assert_eq!(g.host(), Some(&GuardedHost::Name("example.com".into())));
        assert_eq!(g.port(), Some(8443));
        let err = check_url("https://good.com@example.com/", UrlPolicy::Strict).unwrap_err();
        assert!(matches!(err, Blocked::Credentials { ref host, .. } if host == "example.com"));
    }
}
