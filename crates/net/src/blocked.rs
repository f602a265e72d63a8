//! [`Blocked`]: why the URL guard refused a URL, as a message naming the rule and the
//! way out, plus a machine-readable [`Blocked::rule`].

use std::net::IpAddr;

use crate::ip::{EmbeddedIpv4, IpClass};
use crate::policy::UrlPolicy;

/// Why a URL may not be contacted.
///
/// Every variant but [`Blocked::InvalidUrl`], [`Blocked::InvalidHost`] and
/// [`Blocked::Resolution`] is an SSRF verdict of a policy; those say the URL could not
/// be judged at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Blocked {
    /// The URL does not parse.
    #[error("invalid URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// The scheme is not allowed by the policy.
    #[error("blocked by URL policy `{policy}`: scheme `{scheme}` is not allowed; {}", scheme_hint(*.policy, .scheme))]
    Scheme { policy: UrlPolicy, scheme: String },
    /// The URL has no host to check.
    #[error("blocked by URL policy `{policy}`: the URL has no host")]
    MissingHost { policy: UrlPolicy },
    /// The host is not a usable host name (empty labels and the like).
    #[error("invalid host name `{host}`: {reason}")]
    InvalidHost { host: String, reason: String },
    /// `localhost` or a name under `.localhost`.
    #[error(
        "blocked by URL policy `{policy}`: `{host}` is a loopback name (RFC 6761); use --url-policy local to allow loopback addresses"
    )]
    LocalhostName { policy: UrlPolicy, host: String },
    /// A cloud metadata host name such as `metadata.google.internal`.
    #[error(
        "blocked by URL policy `{policy}`: `{host}` is a cloud metadata host name; only --url-policy off allows it"
    )]
    MetadataName { policy: UrlPolicy, host: String },
    /// The URL carries a user name or password before `@`.
    #[error(
        "blocked by URL policy `{policy}`: the URL carries credentials before `@` (the request would go to `{host}`); send credentials in a header instead"
    )]
    Credentials { policy: UrlPolicy, host: String },
    /// The host is, or resolves to, an address the policy does not allow.
    #[error("blocked by URL policy `{policy}`: {}", address_message(*.policy, .host.as_deref(), *.addr, *.class, .embedded.as_ref()))]
    Address {
        policy: UrlPolicy,
        /// The host name that resolved to `addr`; `None` for an IP-literal URL.
        host: Option<String>,
        addr: IpAddr,
        class: IpClass,
        /// The IPv4 address `addr` stands for, when it is an IPv6 embedding.
        embedded: Option<EmbeddedIpv4>,
    },
    /// The host name does not resolve: a resolution error, not an SSRF verdict.
    #[error("could not resolve `{host}`: {reason}")]
    Resolution { host: String, reason: String },
    /// A redirect chain longer than allowed.
    #[error(
        "blocked by URL policy `{policy}`: too many redirects (at most {max} are followed; the next one was to {url})"
    )]
    TooManyRedirects {
        policy: UrlPolicy,
        max: usize,
        url: String,
    },
    /// A redirect to another origin on the library-facing client, which cannot drop
    /// custom headers (use [`crate::GuardedClient::execute`] to follow such hops).
    #[error(
        "redirect from {from} to another origin ({to}) not followed: the request's credentials and custom headers would go with it"
    )]
    CrossOriginRedirect { from: String, to: String },
}

impl Blocked {
    /// A machine-readable name of the rule that refused the URL, e.g. `scheme`,
    /// `credentials`, `localhost`, `metadata-host`, `private`, `link-local`,
    /// `metadata`, `resolution`, `too-many-redirects`.
    pub fn rule(&self) -> &'static str {
        match self {
            Self::InvalidUrl { .. } => "invalid-url",
            Self::Scheme { .. } => "scheme",
            Self::MissingHost { .. } => "missing-host",
            Self::InvalidHost { .. } => "invalid-host",
            Self::LocalhostName { .. } => "localhost",
            Self::MetadataName { .. } => "metadata-host",
            Self::Credentials { .. } => "credentials",
            Self::Address { class, .. } => class.rule(),
            Self::Resolution { .. } => "resolution",
            Self::TooManyRedirects { .. } => "too-many-redirects",
            Self::CrossOriginRedirect { .. } => "cross-origin-redirect",
        }
    }

    /// Whether this is a policy verdict (SSRF blocked) rather than a URL that could
    /// not be judged (unparsable, an invalid host name, a name that does not resolve).
    pub fn is_policy_verdict(&self) -> bool {
        !matches!(
            self,
            Self::InvalidUrl { .. } | Self::InvalidHost { .. } | Self::Resolution { .. }
        )
    }
}

fn scheme_hint(policy: UrlPolicy, scheme: &str) -> String {
    match (policy, scheme) {
        (UrlPolicy::Strict, "http") => {
            "strict allows https only; use https, or --url-policy local to allow http".to_owned()
        }
        (UrlPolicy::Strict, _) => "strict allows https only".to_owned(),
        _ => format!("`{policy}` allows http and https only"),
    }
}

fn address_message(
    policy: UrlPolicy,
    host: Option<&str>,
    addr: IpAddr,
    class: IpClass,
    embedded: Option<&EmbeddedIpv4>,
) -> String {
    let what = match embedded {
        Some(e) => format!(
            "{}, {} for {}, {}",
            addr,
            e.form.describe(),
            e.v4,
            class.describe(false)
        ),
        None => format!("{addr}, {}", class.describe(addr.is_ipv6())),
    };
    let subject = match host {
        Some(h) => format!("`{h}` resolves to {what}"),
        // "10.0.0.5 is a private address": drop the comma after the bare address.
        None => match what.split_once(", ") {
            Some((a, rest)) => format!("{a} is {rest}"),
            None => what,
        },
    };
    let hint = if policy == UrlPolicy::Strict && UrlPolicy::Local.allows_class(class) {
        let kind = match class {
            IpClass::Loopback => "loopback",
            IpClass::SharedAddress => "carrier-grade NAT",
            _ => "private",
        };
        format!("use --url-policy local to allow {kind} addresses")
    } else {
        "only --url-policy off allows it".to_owned()
    };
    format!("{subject}; {hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip::Ipv4Embedding;

    #[test]
    fn private_message_names_the_rule_and_the_way_out() {
        let b = Blocked::Address {
            policy: UrlPolicy::Strict,
            host: None,
            addr: "10.0.0.5".parse().unwrap(),
            class: IpClass::Private,
            embedded: None,
        };
        assert_eq!(
            b.to_string(),
            "blocked by URL policy `strict`: 10.0.0.5 is a private address (RFC 1918); use --url-policy local to allow private addresses"
        );
        assert_eq!(b.rule(), "private");
        assert!(b.is_policy_verdict());
    }

    #[test]
    fn resolved_and_embedded_messages() {
        let b = Blocked::Address {
            policy: UrlPolicy::Local,
            host: Some("evil.test".into()),
            addr: "::ffff:a9fe:a9fe".parse().unwrap(),
            class: IpClass::Metadata,
            embedded: Some(EmbeddedIpv4 {
                form: Ipv4Embedding::Mapped,
                v4: "169.254.169.254".parse().unwrap(),
            }),
        };
        assert_eq!(
            b.to_string(),
            "blocked by URL policy `local`: `evil.test` resolves to ::ffff:169.254.169.254, an IPv4-mapped IPv6 address for 169.254.169.254, a cloud metadata endpoint; only --url-policy off allows it"
        );
        assert_eq!(b.rule(), "metadata");
    }

    #[test]
    fn scheme_message() {
        let b = Blocked::Scheme {
            policy: UrlPolicy::Strict,
            scheme: "http".into(),
        };
        assert!(b.to_string().contains("use https, or --url-policy local"));
        assert_eq!(b.rule(), "scheme");
    }

    #[test]
    fn resolution_is_not_a_verdict() {
        let b = Blocked::Resolution {
            host: "nope.invalid".into(),
            reason: "no addresses".into(),
        };
        assert!(!b.is_policy_verdict());
        assert_eq!(b.rule(), "resolution");
        assert!(!b.to_string().contains("blocked"));
    }
}
