//! [`explain`]: the verdict behind `switchboard url-check`: allowed, or blocked by
//! which rule, with every resolved address and its class (serializable for `--json`).

use std::fmt;
use std::net::IpAddr;

use serde::Serialize;
use url::Url;

use crate::blocked::Blocked;
use crate::check::{GuardedHost, check_host_name, check_ip, check_url};
use crate::ip::{EmbeddedIpv4, IpClass, classify_ip, embedded_ipv4};
use crate::policy::UrlPolicy;
use crate::resolve::{NameResolver, SystemResolver, lookup_unchecked};

/// One address a URL's host stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddressVerdict {
    /// The address.
    pub address: IpAddr,
    /// Its class.
    pub class: IpClass,
    /// The IPv4 address it stands for, when it is an IPv6 embedding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded: Option<EmbeddedIpv4>,
    /// Whether the policy allows it.
    pub allowed: bool,
}

/// The guard's verdict on one URL under one policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The URL as given.
    pub url: String,
    /// The policy it was judged by.
    pub policy: UrlPolicy,
    /// Whether a request to it would be sent.
    pub allowed: bool,
    /// The rule that blocked it ([`Blocked::rule`]), `null` when allowed.
    pub rule: Option<&'static str>,
    /// The message naming the rule, `null` when allowed.
    pub message: Option<String>,
    /// Whether the block is an SSRF verdict (`false` for unparsable URLs and names
    /// that do not resolve), `null` when allowed.
    pub policy_verdict: Option<bool>,
    /// The host the request would go to (after normalization), if known.
    pub host: Option<String>,
    /// The addresses the host is (IP literal) or resolves to, each judged. Empty when
    /// the syntax stage already blocked a name (nothing is looked up then).
    pub addresses: Vec<AddressVerdict>,
    /// The blocking error itself.
    #[serde(skip)]
    pub blocked: Option<Blocked>,
}

impl Verdict {
    fn new(url: &str, policy: UrlPolicy, host: Option<String>) -> Self {
        Self {
            url: url.to_owned(),
            policy,
            allowed: true,
            rule: None,
            message: None,
            policy_verdict: None,
            host,
            addresses: Vec::new(),
            blocked: None,
        }
    }

    fn block(mut self, blocked: Blocked) -> Self {
        self.allowed = false;
        self.rule = Some(blocked.rule());
        self.message = Some(blocked.to_string());
        self.policy_verdict = Some(blocked.is_policy_verdict());
        self.blocked = Some(blocked);
        self
    }

    fn judge(&mut self, addrs: &[IpAddr]) {
        self.addresses = addrs
            .iter()
            .map(|&address| AddressVerdict {
                address,
                class: classify_ip(address),
                embedded: match address {
                    IpAddr::V6(v6) => embedded_ipv4(v6),
                    IpAddr::V4(_) => None,
                },
                allowed: self.policy.allows_class(classify_ip(address)),
            })
            .collect();
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            None => write!(f, "allowed by URL policy `{}`: {}", self.policy, self.url)?,
            Some(m) => f.write_str(m)?,
        }
        for a in &self.addresses {
            let mark = if a.allowed { "allowed" } else { "blocked" };
            write!(f, "\n  {} ({}, {mark})", a.address, a.class.rule())?;
        }
        Ok(())
    }
}

/// Explain the verdict on `url` under `policy`, resolving names with the system
/// resolver. Never sends a request.
pub async fn explain(url: &str, policy: UrlPolicy) -> Verdict {
    explain_with(url, policy, &SystemResolver).await
}

/// [`explain`] with a chosen resolver.
pub async fn explain_with(url: &str, policy: UrlPolicy, resolver: &dyn NameResolver) -> Verdict {
    let guarded = match check_url(url, policy) {
        Ok(g) => g,
        Err(blocked) => {
            let parsed = Url::parse(url.trim()).ok();
            let host = parsed
                .as_ref()
                .and_then(|u| u.host_str())
                .map(str::to_owned);
            let mut verdict = Verdict::new(url, policy, host);
            if let Blocked::Address { addr, .. } = &blocked {
                verdict.judge(&[*addr]);
            }
            return verdict.block(blocked);
        }
    };
    let host = guarded.host().map(ToString::to_string);
    let mut verdict = Verdict::new(url, policy, host);
    match guarded.host() {
        None => verdict,
        Some(GuardedHost::Ip(ip)) => {
            verdict.judge(&[*ip]);
            verdict
        }
        Some(GuardedHost::Name(name)) => {
            if let Err(b) = check_host_name(name, policy) {
                return verdict.block(b);
            }
            let addrs = match lookup_unchecked(name, resolver).await {
                Ok(a) => a,
                Err(b) => return verdict.block(b),
            };
            verdict.judge(&addrs);
            match addrs
                .iter()
                .find_map(|a| check_ip(*a, Some(name), policy).err())
            {
                Some(b) => verdict.block(b),
                None => verdict,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::StaticResolver;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[tokio::test]
    async fn allowed_with_addresses() {
        let r = StaticResolver::new().with("mcp.example", &[ip("93.184.216.34")]);
        let v = explain_with("https://mcp.example/mcp", UrlPolicy::Strict, &r).await;
        assert!(v.allowed);
        assert_eq!(v.rule, None);
        assert_eq!(v.addresses.len(), 1);
        assert_eq!(v.addresses[0].class, IpClass::Public);
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["allowed"], true);
        assert_eq!(json["policy"], "strict");
        assert_eq!(json["addresses"][0]["address"], "93.184.216.34");
        assert_eq!(json["addresses"][0]["class"], "public");
        assert!(json["rule"].is_null());
        assert!(v.to_string().starts_with("allowed by URL policy `strict`"));
    }

    #[tokio::test]
    async fn blocked_lists_every_address() {
        let r = StaticResolver::new().with("mixed.example", &[ip("93.184.216.34"), ip("10.0.0.5")]);
        let v = explain_with("https://mixed.example/", UrlPolicy::Strict, &r).await;
        assert!(!v.allowed);
        assert_eq!(v.rule, Some("private"));
        assert_eq!(v.policy_verdict, Some(true));
        assert_eq!(v.addresses.len(), 2);
        assert!(v.addresses[0].allowed);
        assert!(!v.addresses[1].allowed);
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["rule"], "private");
        assert!(json["message"].as_str().unwrap().contains("RFC 1918"));
        assert!(json.get("blocked").is_none());
    }

    #[tokio::test]
    async fn literal_and_syntax_blocks() {
        let r = StaticResolver::new();
        let v = explain_with("http://[::ffff:169.254.169.254]/", UrlPolicy::Local, &r).await;
        assert_eq!(v.rule, Some("metadata"));
        assert_eq!(v.addresses.len(), 1);
        assert!(v.addresses[0].embedded.is_some());
        let v = explain_with("http://example.com/", UrlPolicy::Strict, &r).await;
        assert_eq!(v.rule, Some("scheme"));
        assert!(v.addresses.is_empty());
        let v = explain_with("not a url", UrlPolicy::Strict, &r).await;
        assert_eq!(v.rule, Some("invalid-url"));
        assert_eq!(v.policy_verdict, Some(false));
    }

    #[tokio::test]
    async fn system_entry_point_without_dns() {
        let v = explain("https://10.0.0.5/", UrlPolicy::Strict).await;
        assert_eq!(v.rule, Some("private"));
        assert!(v.to_string().contains("10.0.0.5 (private, blocked)"), "{v}");
        let v = explain("http://localhost:1/", UrlPolicy::Local).await;
        assert!(v.allowed);
        assert_eq!(v.addresses.len(), 2);
    }

    #[tokio::test]
    async fn unresolvable() {
        let v = explain_with(
            "https://nowhere.example/",
            UrlPolicy::Strict,
            &StaticResolver::new(),
        )
        .await;
        assert!(!v.allowed);
        assert_eq!(v.rule, Some("resolution"));
        assert_eq!(v.policy_verdict, Some(false));
    }
}
