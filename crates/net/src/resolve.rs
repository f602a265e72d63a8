//! The DNS stage of the guard: a host name is allowed only if every address it
//! resolves to is. [`NameResolver`] is injectable so tests (and callers with their own
//! DNS) can map names to addresses without touching the network.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;

use crate::blocked::Blocked;
use crate::check::{GuardedHost, NameKind, check_host_name, check_ip, check_url, normalize_name};
use crate::policy::UrlPolicy;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Turns a host name into addresses. The guard checks whatever this returns.
pub trait NameResolver: Send + Sync + fmt::Debug {
    /// All addresses of `host` (a name, never an IP literal).
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>>;
}

/// The system resolver (`getaddrinfo` through [`tokio::net::lookup_host`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl NameResolver for SystemResolver {
    // The one place a name is resolved; its callers check every address it returns.
    #[allow(clippy::disallowed_methods)]
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// A fixed name → addresses table; names not in it do not resolve. For tests, and
/// for callers that pin names to addresses.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    names: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Map `name` (case-insensitive, trailing dot ignored) to `addrs`.
    pub fn with(mut self, name: &str, addrs: &[IpAddr]) -> Self {
        self.insert(name, addrs);
        self
    }

    /// Map `name` (case-insensitive, trailing dot ignored) to `addrs`.
    pub fn insert(&mut self, name: &str, addrs: &[IpAddr]) {
        self.names.insert(table_key(name), addrs.to_vec());
    }
}

fn table_key(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    lower.strip_suffix('.').unwrap_or(&lower).to_owned()
}

impl NameResolver for StaticResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        let found = self.names.get(&table_key(host)).cloned();
        Box::pin(async move {
            found.ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "name not in the static table")
            })
        })
    }
}

/// The addresses of `host`, unchecked: `localhost` and `*.localhost` are loopback
/// without asking DNS (RFC 6761); other names go to `resolver`. An empty answer or
/// a lookup error is [`Blocked::Resolution`].
pub(crate) async fn lookup_unchecked(
    host: &str,
    resolver: &dyn NameResolver,
) -> Result<Vec<IpAddr>, Blocked> {
    let resolution = |reason: String| Blocked::Resolution {
        host: host.to_owned(),
        reason,
    };
    let normalized = normalize_name(host).map_err(resolution)?;
    if crate::check::name_kind(&normalized) == NameKind::Localhost {
        return Ok(vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]);
    }
    let mut addrs = resolver
        .lookup(host)
        .await
        .map_err(|e| resolution(e.to_string()))?;
    let mut seen = std::collections::HashSet::new();
    addrs.retain(|a| seen.insert(*a));
    if addrs.is_empty() {
        return Err(resolution("the name has no addresses".to_owned()));
    }
    Ok(addrs)
}

/// Resolve `host` and check the name and every address under `policy`; returns
/// exactly the checked addresses, so a caller that connects to them connects to what
/// was checked.
pub async fn lookup_checked(
    host: &str,
    policy: UrlPolicy,
    resolver: &dyn NameResolver,
) -> Result<Vec<IpAddr>, Blocked> {
    check_host_name(host, policy)?;
    let addrs = lookup_unchecked(host, resolver).await?;
    for addr in &addrs {
        check_ip(*addr, Some(host), policy)?;
    }
    Ok(addrs)
}

/// Both stages with the system resolver: [`check_url`], then every address the host
/// resolves to. A name that does not resolve is [`Blocked::Resolution`]. IP literals
/// are not looked up. Host-less URLs (only possible under `off`) give no addresses.
pub async fn resolve_and_check(url: &str, policy: UrlPolicy) -> Result<Vec<SocketAddr>, Blocked> {
    resolve_and_check_with(url, policy, &SystemResolver).await
}

/// [`resolve_and_check`] with a chosen resolver.
pub async fn resolve_and_check_with(
    url: &str,
    policy: UrlPolicy,
    resolver: &dyn NameResolver,
) -> Result<Vec<SocketAddr>, Blocked> {
    let guarded = check_url(url, policy)?;
    let port = guarded.port().unwrap_or(0);
    let ips = match guarded.host() {
        None => Vec::new(),
        Some(GuardedHost::Ip(ip)) => vec![*ip],
        Some(GuardedHost::Name(name)) => lookup_checked(name, policy, resolver).await?,
    };
    Ok(ips
        .into_iter()
        .map(|ip| SocketAddr::new(ip, port))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[tokio::test]
    async fn name_to_loopback_blocked_under_strict_allowed_under_local() {
        let r = StaticResolver::new().with("app.test", &[ip("127.0.0.1")]);
        let err = resolve_and_check_with("https://app.test/", UrlPolicy::Strict, &r)
            .await
            .unwrap_err();
        assert_eq!(err.rule(), "loopback");
        assert!(err.to_string().contains("`app.test` resolves to 127.0.0.1"));
        let ok = resolve_and_check_with("https://app.test:8443/", UrlPolicy::Local, &r)
            .await
            .unwrap();
        assert_eq!(ok, vec!["127.0.0.1:8443".parse::<SocketAddr>().unwrap()]);
    }

    #[tokio::test]
    async fn name_to_metadata_blocked_under_local() {
        let r = StaticResolver::new().with("rebind.test", &[ip("169.254.169.254")]);
        let err = resolve_and_check_with("http://rebind.test/", UrlPolicy::Local, &r)
            .await
            .unwrap_err();
        assert_eq!(err.rule(), "metadata");
        let ok = resolve_and_check_with("http://rebind.test/", UrlPolicy::Off, &r)
            .await
            .unwrap();
        assert_eq!(ok.len(), 1);
    }

    #[tokio::test]
    async fn every_address_must_pass() {
        let r = StaticResolver::new().with("mixed.test", &[ip("93.184.216.34"), ip("10.0.0.1")]);
        let err = resolve_and_check_with("https://mixed.test/", UrlPolicy::Strict, &r)
            .await
            .unwrap_err();
        assert_eq!(err.rule(), "private");
        let ok = resolve_and_check_with("https://mixed.test/", UrlPolicy::Local, &r)
            .await
            .unwrap();
        assert_eq!(ok.len(), 2);
    }

    #[tokio::test]
    async fn unresolvable_is_a_resolution_error() {
        let r = StaticResolver::new();
        let err = resolve_and_check_with("https://nowhere.test/", UrlPolicy::Strict, &r)
            .await
            .unwrap_err();
        assert_eq!(err.rule(), "resolution");
        assert!(!err.is_policy_verdict());
        let empty = StaticResolver::new().with("empty.test", &[]);
        let err = resolve_and_check_with("https://empty.test/", UrlPolicy::Strict, &empty)
            .await
            .unwrap_err();
        assert_eq!(err.rule(), "resolution");
    }

    #[tokio::test]
    async fn localhost_never_asks_the_resolver() {
        // The static table would send `localhost` to a public address; RFC 6761 wins.
        let r = StaticResolver::new().with("localhost", &[ip("93.184.216.34")]);
        let ok = resolve_and_check_with("http://api.localhost:9/", UrlPolicy::Local, &r)
            .await
            .unwrap();
        assert!(ok.iter().all(|a| a.ip().is_loopback()));
        let err = resolve_and_check_with("https://localhost/", UrlPolicy::Strict, &r)
            .await
            .unwrap_err();
        assert_eq!(err.rule(), "localhost");
    }

    #[tokio::test]
    async fn system_entry_point_without_dns() {
        // IP literals and localhost names never reach the system resolver.
        let ok = resolve_and_check("http://127.0.0.1:9/", UrlPolicy::Local)
            .await
            .unwrap();
        assert_eq!(ok, vec!["127.0.0.1:9".parse::<SocketAddr>().unwrap()]);
        let ok = resolve_and_check("http://localhost:9/", UrlPolicy::Local)
            .await
            .unwrap();
        assert_eq!(ok.len(), 2);
        let err = resolve_and_check("https://localhost/", UrlPolicy::Strict)
            .await
            .unwrap_err();
        assert_eq!(err.rule(), "localhost");
    }

    #[tokio::test]
    async fn ip_literals_are_not_looked_up() {
        let r = StaticResolver::new();
        let ok = resolve_and_check_with("http://10.1.2.3:81/", UrlPolicy::Local, &r)
            .await
            .unwrap();
        assert_eq!(ok, vec!["10.1.2.3:81".parse::<SocketAddr>().unwrap()]);
    }
}
