//! The one HTTP client builder ([`http_client`], [`GuardedClient`]): a reqwest client
//! whose DNS resolver checks every address against the policy and hands back exactly
//! the checked ones (so the connection goes to what was checked: no DNS-rebinding
//! window), plus redirects followed by hand, at most [`MAX_REDIRECTS`], each hop
//! re-checked, with credentials and custom headers dropped when the origin changes.
//!
//! What covers what:
//! - **Host names**: the resolver (every connection, every redirect hop).
//! - **IP literals**: the resolver is not called for them, so [`check_url`] judges
//!   them; [`GuardedClient::execute`] calls it for the request and every hop, and the
//!   redirect policy of [`GuardedClient::inner`] for every hop. Whoever hands a URL to
//!   a library using `inner()` (rmcp) must call [`GuardedClient::preflight`] on it
//!   first.
//! - **Proxies** (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, read as
//!   reqwest reads them): a proxied target is resolved by the proxy, not by us, so
//!   [`GuardedClient::preflight`] (called by `execute`) resolves and checks it before
//!   sending. The proxy's own host is configuration the user chose and is exempt.
//!   The proxy resolves the name again after our check, so with a proxy the
//!   rebinding window is the proxy's.
//! - **Trusted origins** ([`ClientOptions::trusted_origins`]): endpoints the operator
//!   named on the command line (team mode's OpenID issuer), on a client built for them
//!   only. A URL on exactly such an origin (scheme, host and port) passes whatever the
//!   policy; every other URL, redirect hop and address is judged by the policy as
//!   before. The resolver resolves a trusted host name unchecked, so a URL on another
//!   port or scheme of that name gets its addresses checked in
//!   [`GuardedClient::preflight`] instead (resolved again at connect time: for those,
//!   the rebinding window is the operator's own DNS).
//! - **Redirects on `inner()`**: reqwest follows them, but the policy refuses any hop
//!   to another origin, and the sixth hop. (reqwest itself drops `Authorization`,
//!   `Cookie`, `Proxy-Authorization` and `WWW-Authenticate` when the host or port
//!   changes (the scheme is not compared), but keeps custom headers such as
//!   `X-Api-Key` or `Mcp-Session-Id`; the test
//!   `plain_reqwest_keeps_custom_headers_across_origins` pins that down.)

use std::collections::HashSet;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderName};
use http::{Method, StatusCode};
use hyper_util::client::proxy::matcher::Matcher;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Certificate, Request, RequestBuilder, Response, redirect};
use url::Url;

use crate::blocked::Blocked;
use crate::check::{GuardedHost, GuardedUrl, check_parsed_url, check_url};
use crate::error::{NetError, redacted};
use crate::policy::UrlPolicy;
use crate::resolve::{NameResolver, SystemResolver, lookup_checked, lookup_unchecked};

/// At most this many redirects are followed; the next one is refused.
pub const MAX_REDIRECTS: usize = 5;

/// Default time to establish a connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Headers kept on a redirect to another origin; everything else (credentials,
/// cookies, custom headers, `Host`) is dropped.
const CROSS_ORIGIN_SAFE_HEADERS: [HeaderName; 5] = [
    header::ACCEPT,
    header::ACCEPT_ENCODING,
    header::ACCEPT_LANGUAGE,
    header::USER_AGENT,
    header::CONTENT_TYPE,
];

/// Headers that describe a body, dropped when a redirect drops the body.
const BODY_HEADERS: [HeaderName; 4] = [
    header::CONTENT_TYPE,
    header::CONTENT_LENGTH,
    header::CONTENT_ENCODING,
    header::TRANSFER_ENCODING,
];

/// Which proxy to use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProxySetting {
    /// `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` / `NO_PROXY` (and lower-case forms),
    /// as reqwest reads them. The default.
    #[default]
    FromEnv,
    /// No proxy, whatever the environment says.
    Disabled,
    /// This proxy for http and https, except hosts matching `no_proxy` (same syntax as
    /// `NO_PROXY`).
    Explicit {
        url: String,
        no_proxy: Option<String>,
    },
}

/// How to build a client.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The URL policy every request, hop and resolved address is checked against.
    pub policy: UrlPolicy,
    /// Extra CA certificates (PEM, one or more) added to the system roots: the
    /// `caFile` setting. An unreadable or empty file is an error.
    pub ca_file: Option<PathBuf>,
    /// Also add the certificates of the file named by `SSL_CERT_FILE`, if set (an
    /// unreadable file there is a warning, as it is for the system verifier).
    pub use_ssl_cert_file: bool,
    /// Proxy configuration.
    pub proxy: ProxySetting,
    /// Total time limit per request (none by default; callers set per-request ones).
    pub timeout: Option<Duration>,
    /// Time limit to connect.
    pub connect_timeout: Duration,
    /// `User-Agent`; default `switchboard/<version>`.
    pub user_agent: Option<String>,
    /// The name resolver; default the system's.
    pub resolver: Option<Arc<dyn NameResolver>>,
    /// Origins the operator trusts whatever the policy (only each URL's scheme, host and
    /// port count): allowed exactly, not loosening the policy for anything else. For a
    /// client used only with endpoints the operator named, never for URLs users give.
    pub trusted_origins: Vec<Url>,
}

impl ClientOptions {
    /// Defaults for `policy`: system roots plus `SSL_CERT_FILE`, proxies from the
    /// environment, the system resolver.
    pub fn new(policy: UrlPolicy) -> Self {
        Self {
            policy,
            ca_file: None,
            use_ssl_cert_file: true,
            proxy: ProxySetting::FromEnv,
            timeout: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            user_agent: None,
            resolver: None,
            trusted_origins: Vec::new(),
        }
    }

    fn resolver(&self) -> Arc<dyn NameResolver> {
        self.resolver
            .clone()
            .unwrap_or_else(|| Arc::new(SystemResolver))
    }
}

/// The origins a client trusts whatever its policy ([`ClientOptions::trusted_origins`]).
#[derive(Debug, Clone, Default)]
struct Trusted {
    /// ASCII serializations (`http://127.0.0.1:5556`).
    origins: HashSet<String>,
    /// Their host names (lower case, no trailing dot): resolved unchecked.
    names: HashSet<String>,
}

impl Trusted {
    fn new(urls: &[Url]) -> Self {
        let mut t = Self::default();
        for url in urls {
            let origin = url.origin();
            if !origin.is_tuple() {
                continue;
            }
            t.origins.insert(origin.ascii_serialization());
            if let Some(url::Host::Domain(d)) = url.host() {
                t.names.insert(host_key(d));
            }
        }
        t
    }

    fn allows(&self, url: &Url) -> bool {
        let origin = url.origin();
        origin.is_tuple() && self.origins.contains(&origin.ascii_serialization())
    }

    fn has_http(&self) -> bool {
        self.origins.iter().any(|o| o.starts_with("http://"))
    }
}

fn host_key(host: &str) -> String {
    let key = host.to_ascii_lowercase();
    key.strip_suffix('.').unwrap_or(&key).to_owned()
}

/// The syntax stage for `url`: passes a trusted origin, else [`check_parsed_url`].
fn check_with(url: &Url, policy: UrlPolicy, trusted: &Trusted) -> Result<GuardedUrl, Blocked> {
    if trusted.allows(url) {
        return check_parsed_url(url, UrlPolicy::Off);
    }
    check_parsed_url(url, policy)
}

/// The reqwest DNS resolver that checks: the name rules, then every address.
#[derive(Debug, Clone)]
struct GuardResolver {
    policy: UrlPolicy,
    resolver: Arc<dyn NameResolver>,
    /// Proxy host names (configuration, not targets) and trusted origins' host names:
    /// resolved unchecked.
    exempt: Arc<HashSet<String>>,
}

impl Resolve for GuardResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let key = host.to_ascii_lowercase();
            let key = key.strip_suffix('.').unwrap_or(&key);
            let ips = if this.exempt.contains(key) {
                lookup_unchecked(&host, &*this.resolver).await
            } else {
                lookup_checked(&host, this.policy, &*this.resolver).await
            };
            match ips {
                Ok(ips) => {
                    tracing::debug!(host, ?ips, "resolved and checked");
                    let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
                    Ok(addrs)
                }
                Err(blocked) => Err(Box::new(blocked) as Box<dyn std::error::Error + Send + Sync>),
            }
        })
    }
}

fn proxy_matcher(setting: &ProxySetting) -> Matcher {
    match setting {
        ProxySetting::FromEnv => Matcher::from_system(),
        ProxySetting::Disabled => Matcher::builder().build(),
        ProxySetting::Explicit { url, no_proxy } => Matcher::builder()
            .all(url.clone())
            .no(no_proxy.clone().unwrap_or_default())
            .build(),
    }
}

/// The host names of the configured proxies (found by asking the matcher about a
/// name no `NO_PROXY` list plausibly holds).
fn proxy_hosts(matcher: &Matcher) -> HashSet<String> {
    let mut hosts = HashSet::new();
    for probe in [
        "http://switchboard-proxy-probe.invalid/",
        "https://switchboard-proxy-probe.invalid/",
    ] {
        let Ok(uri) = probe.parse::<http::Uri>() else {
            continue;
        };
        if let Some(host) = matcher
            .intercept(&uri)
            .as_ref()
            .and_then(|i| i.uri().host())
        {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let host = host.to_ascii_lowercase();
            hosts.insert(host.strip_suffix('.').unwrap_or(&host).to_owned());
        }
    }
    hosts
}

/// The CA files to add: the `caFile` setting (errors are errors) and `SSL_CERT_FILE`
/// (errors are warnings).
fn extra_roots(
    opts: &ClientOptions,
    ssl_cert_file: Option<OsString>,
) -> Result<Vec<Certificate>, NetError> {
    let mut certs = Vec::new();
    if let Some(path) = &opts.ca_file {
        certs.extend(load_pem_file(path, "caFile")?);
    }
    if opts.use_ssl_cert_file
        && let Some(path) = ssl_cert_file.filter(|p| !p.is_empty())
    {
        match load_pem_file(Path::new(&path), "SSL_CERT_FILE") {
            Ok(more) => certs.extend(more),
            Err(e) => tracing::warn!("{e}; continuing without it"),
        }
    }
    Ok(certs)
}

/// Every certificate in a PEM file.
fn load_pem_file(path: &Path, origin: &'static str) -> Result<Vec<Certificate>, NetError> {
    let pem = std::fs::read(path).map_err(|source| NetError::CaFile {
        path: path.to_owned(),
        origin,
        source,
    })?;
    let invalid = |reason: Option<String>| NetError::InvalidCaFile {
        path: path.to_owned(),
        origin,
        reason,
    };
    let certs = Certificate::from_pem_bundle(&pem).map_err(|e| invalid(Some(e.to_string())))?;
    if certs.is_empty() {
        return Err(invalid(None));
    }
    Ok(certs)
}

struct Built {
    inner: reqwest::Client,
    manual: reqwest::Client,
    matcher: Matcher,
    resolver: Arc<dyn NameResolver>,
    trusted: Trusted,
}

fn build(opts: &ClientOptions, with_manual: bool) -> Result<Built, NetError> {
    let matcher = proxy_matcher(&opts.proxy);
    let resolver = opts.resolver();
    let trusted = Trusted::new(&opts.trusted_origins);
    let mut exempt = proxy_hosts(&matcher);
    exempt.extend(trusted.names.iter().cloned());
    let guard = Arc::new(GuardResolver {
        policy: opts.policy,
        resolver: resolver.clone(),
        exempt: Arc::new(exempt),
    });
    let roots = extra_roots(opts, std::env::var_os("SSL_CERT_FILE"))?;
    let user_agent = opts
        .user_agent
        .clone()
        .unwrap_or_else(|| format!("switchboard/{}", env!("CARGO_PKG_VERSION")));

    // The one place an HTTP client is built: with the guard as its resolver.
    #[allow(clippy::disallowed_methods)]
    let make = |redirects: redirect::Policy| -> Result<reqwest::Client, NetError> {
        let mut b = reqwest::Client::builder()
            .dns_resolver(guard.clone())
            .redirect(redirects)
            .referer(false)
            // Belt and braces: `check_with` refuses http under `strict` anyway, but
            // for a trusted http origin.
            .https_only(opts.policy == UrlPolicy::Strict && !trusted.has_http())
            .user_agent(user_agent.clone())
            .connect_timeout(opts.connect_timeout)
            // Drop idle pooled connections before servers do: Node's default
            // keepAliveTimeout is 5 s, and reusing a connection the server is closing
            // fails the request (and, for rmcp's Streamable HTTP, the whole session).
            .pool_idle_timeout(Duration::from_secs(4));
        if let Some(t) = opts.timeout {
            b = b.timeout(t);
        }
        if !roots.is_empty() {
            b = b.tls_certs_merge(roots.iter().cloned());
        }
        match &opts.proxy {
            ProxySetting::FromEnv => {}
            ProxySetting::Disabled => b = b.no_proxy(),
            ProxySetting::Explicit { url, no_proxy } => {
                let proxy = reqwest::Proxy::all(url.as_str())
                    .map_err(|source| NetError::Proxy {
                        url: redacted(url),
                        source,
                    })?
                    .no_proxy(no_proxy.as_deref().and_then(reqwest::NoProxy::from_string));
                b = b.proxy(proxy);
            }
        }
        b.build().map_err(NetError::Build)
    };

    let inner = make(inner_redirect_policy(opts.policy, trusted.clone()))?;
    let manual = if with_manual {
        make(redirect::Policy::none())?
    } else {
        inner.clone()
    };
    Ok(Built {
        inner,
        manual,
        matcher,
        resolver,
        trusted,
    })
}

/// The redirect policy of the library-facing client: at most [`MAX_REDIRECTS`]
/// hops, each URL checked, same origin only.
fn inner_redirect_policy(policy: UrlPolicy, trusted: Trusted) -> redirect::Policy {
    redirect::Policy::custom(move |attempt| {
        // `previous` holds the original URL and every hop so far.
        if attempt.previous().len() > MAX_REDIRECTS {
            let url = redacted(attempt.url().as_str());
            return attempt.error(Blocked::TooManyRedirects {
                policy,
                max: MAX_REDIRECTS,
                url,
            });
        }
        if let Err(blocked) = check_with(attempt.url(), policy, &trusted) {
            return attempt.error(blocked);
        }
        if let Some(prev) = attempt.previous().last()
            && prev.origin() != attempt.url().origin()
        {
            let (from, to) = (redacted(prev.as_str()), redacted(attempt.url().as_str()));
            return attempt.error(Blocked::CrossOriginRedirect { from, to });
        }
        attempt.follow()
    })
}

/// Build the library-facing reqwest client: checked DNS resolver, checked redirects
/// (same origin only, at most [`MAX_REDIRECTS`]), proxies and extra CA certificates.
///
/// IP-literal URLs never reach the resolver: call [`check_url`] (or
/// [`GuardedClient::preflight`], which also covers proxied targets) on every URL
/// before handing it to this client. Prefer [`GuardedClient`], which does that.
pub fn http_client(opts: ClientOptions) -> Result<reqwest::Client, NetError> {
    Ok(build(&opts, false)?.inner)
}

/// A reqwest client behind the URL guard. [`GuardedClient::execute`] checks the
/// request URL, follows redirects by hand (each hop checked, at most
/// [`MAX_REDIRECTS`], credentials and custom headers dropped on an origin change),
/// and connects only to addresses the resolver checked.
#[derive(Debug, Clone)]
pub struct GuardedClient {
    /// Follows same-origin redirects itself; for libraries.
    inner: reqwest::Client,
    /// Follows no redirects; `execute` does.
    manual: reqwest::Client,
    policy: UrlPolicy,
    resolver: Arc<dyn NameResolver>,
    matcher: Arc<Matcher>,
    trusted: Arc<Trusted>,
}

impl GuardedClient {
    /// Build the client.
    pub fn new(opts: ClientOptions) -> Result<Self, NetError> {
        let built = build(&opts, true)?;
        Ok(Self {
            inner: built.inner,
            manual: built.manual,
            policy: opts.policy,
            resolver: built.resolver,
            matcher: Arc::new(built.matcher),
            trusted: Arc::new(built.trusted),
        })
    }

    /// The policy.
    pub fn policy(&self) -> UrlPolicy {
        self.policy
    }

    /// The underlying reqwest client, for libraries that need one (rmcp). Its
    /// resolver checks names and its redirect policy checks hops (same origin only);
    /// call [`GuardedClient::preflight`] on every URL you hand to the library, since
    /// IP literals and proxied targets never reach the resolver.
    pub fn inner(&self) -> &reqwest::Client {
        &self.inner
    }

    /// Start a request; send it with [`GuardedClient::send`].
    pub fn request(&self, method: Method, url: &str) -> RequestBuilder {
        self.manual.request(method, url)
    }

    /// Start a GET request.
    pub fn get(&self, url: &str) -> RequestBuilder {
        self.request(Method::GET, url)
    }

    /// Start a POST request.
    pub fn post(&self, url: &str) -> RequestBuilder {
        self.request(Method::POST, url)
    }

    /// Build and [`execute`](GuardedClient::execute) a request.
    pub async fn send(&self, request: RequestBuilder) -> Result<Response, NetError> {
        let request = request.build().map_err(NetError::from_reqwest)?;
        self.execute(request).await
    }

    /// Build and send a request through the guard (the same checks as
    /// [`GuardedClient::execute`] on the request's URL) **without following redirects**:
    /// a 3xx answer is returned as it is. For fetches a specification forbids to follow,
    /// such as an OAuth client's metadata document (draft-ietf-oauth-client-id-metadata-
    /// document: the authorization server must not follow redirects).
    pub async fn send_without_redirects(
        &self,
        request: RequestBuilder,
    ) -> Result<Response, NetError> {
        let request = request.build().map_err(NetError::from_reqwest)?;
        self.preflight_parsed(request.url()).await?;
        self.manual
            .execute(request)
            .await
            .map_err(NetError::from_reqwest)
    }

    /// Whether requests to `url` go through a proxy.
    pub fn is_proxied(&self, url: &Url) -> bool {
        match url.as_str().parse::<http::Uri>() {
            Ok(uri) => self.matcher.intercept(&uri).is_some(),
            // Cannot tell: assume proxied, so the target gets checked here.
            Err(_) => true,
        }
    }

    /// Everything that must pass before a request to `url` may be sent, beyond what
    /// the resolver checks at connect time: the syntax stage, and for a proxied
    /// target (which the proxy resolves, not us) the DNS stage too.
    pub async fn preflight(&self, url: &str) -> Result<GuardedUrl, Blocked> {
        let parsed = Url::parse(url.trim()).map_err(|e| Blocked::InvalidUrl {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
        self.preflight_parsed(&parsed).await
    }

    /// The guard's whole verdict on `url`, both stages, whether or not a proxy is in
    /// the way: the syntax stage, then every address the host name resolves to through
    /// the guard's resolver. Nothing is connected to. Used to word a failure whose
    /// cause a transport did not keep: a destination the policy refuses is reported
    /// as blocked, not as unreachable.
    pub async fn check_destination(&self, url: &str) -> Result<GuardedUrl, Blocked> {
        let guarded = check_url(url, self.policy);
        let guarded = match guarded {
            Err(_) if Url::parse(url.trim()).is_ok_and(|u| self.trusted.allows(&u)) => {
                check_url(url, UrlPolicy::Off)?
            }
            other => other?,
        };
        if self.policy != UrlPolicy::Off
            && !self.trusted.allows(guarded.url())
            && let Some(GuardedHost::Name(name)) = guarded.host()
        {
            lookup_checked(name, self.policy, &*self.resolver).await?;
        }
        Ok(guarded)
    }

    async fn preflight_parsed(&self, url: &Url) -> Result<GuardedUrl, Blocked> {
        let guarded = check_with(url, self.policy, &self.trusted)?;
        self.preflight_guarded(guarded).await
    }

    async fn preflight_guarded(&self, guarded: GuardedUrl) -> Result<GuardedUrl, Blocked> {
        if self.policy != UrlPolicy::Off
            && !self.trusted.allows(guarded.url())
            && let Some(GuardedHost::Name(name)) = guarded.host()
            // A proxy resolves the target itself; the resolver does not check a
            // trusted origin's host name, which another origin may share.
            && (self.is_proxied(guarded.url()) || self.trusted.names.contains(&host_key(name)))
        {
            lookup_checked(name, self.policy, &*self.resolver).await?;
        }
        Ok(guarded)
    }

    /// Send `request` through the guard, following redirects by hand.
    ///
    /// - The URL of the request and of every hop passes [`GuardedClient::preflight`].
    /// - At most [`MAX_REDIRECTS`] redirects are followed; the next is
    ///   [`Blocked::TooManyRedirects`].
    /// - 303 (and 301/302 after POST) become GET without a body; 307/308 keep method
    ///   and body (a streaming body cannot be sent again: error).
    /// - On a hop to another origin (scheme, host or port) only `Accept*`,
    ///   `User-Agent` and `Content-Type` survive: `Authorization`, `Cookie`,
    ///   `Proxy-Authorization` and every custom header are dropped.
    /// - Redirects with other statuses or without `Location` are returned as they are.
    pub async fn execute(&self, request: Request) -> Result<Response, NetError> {
        let mut request = request;
        let mut followed = 0usize;
        loop {
            self.preflight_parsed(request.url()).await?;
            let from = request.url().clone();
            let method = request.method().clone();
            let headers = request.headers().clone();
            let had_body = request.body().is_some();
            let replay = request.try_clone();

            let response = self
                .manual
                .execute(request)
                .await
                .map_err(NetError::from_reqwest)?;

            let status = response.status();
            if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                return Ok(response);
            }
            let Some(location) = response.headers().get(header::LOCATION) else {
                return Ok(response);
            };
            let redirect_error = |reason: String| NetError::Redirect {
                from: redacted(from.as_str()),
                reason,
            };
            let location = location
                .to_str()
                .map_err(|_| redirect_error("the Location header is not valid text".into()))?;
            let next = from
                .join(location)
                .map_err(|e| redirect_error(format!("bad Location `{location}`: {e}")))?;
            if followed >= MAX_REDIRECTS {
                return Err(Blocked::TooManyRedirects {
                    policy: self.policy,
                    max: MAX_REDIRECTS,
                    url: redacted(next.as_str()),
                }
                .into());
            }
            followed += 1;
            tracing::debug!(
                from = %redacted(from.as_str()),
                to = %redacted(next.as_str()),
                %status,
                "following redirect"
            );

            let (next_method, keep_body) = redirected_method(status, &method);
            let body = if keep_body && had_body {
                match replay.and_then(|mut r| r.body_mut().take()) {
                    Some(body) => Some(body),
                    None => {
                        return Err(redirect_error(
                            "the request body is a stream and cannot be sent again".into(),
                        ));
                    }
                }
            } else {
                None
            };
            let same_origin = from.origin() == next.origin();
            let mut next_request = Request::new(next_method, next);
            *next_request.headers_mut() = redirected_headers(headers, keep_body, same_origin);
            *next_request.body_mut() = body;
            request = next_request;
        }
    }
}

/// The method of the next request, and whether the body goes with it.
fn redirected_method(status: StatusCode, method: &Method) -> (Method, bool) {
    match status {
        StatusCode::SEE_OTHER if *method == Method::HEAD => (Method::HEAD, false),
        StatusCode::SEE_OTHER => (Method::GET, false),
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND if *method == Method::POST => {
            (Method::GET, false)
        }
        _ => (method.clone(), true),
    }
}

/// The headers of the next request.
fn redirected_headers(headers: HeaderMap, keep_body: bool, same_origin: bool) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in &headers {
        if !keep_body && BODY_HEADERS.contains(name) {
            continue;
        }
        if !same_origin && !CROSS_ORIGIN_SAFE_HEADERS.contains(name) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
    }

    #[test]
    fn ca_bundle_with_several_certificates() {
        let mut opts = ClientOptions::new(UrlPolicy::Local);
        opts.ca_file = Some(fixture("ca-bundle.pem"));
        let certs = extra_roots(&opts, None).unwrap();
        assert_eq!(certs.len(), 2);
        // SSL_CERT_FILE adds to caFile.
        let certs = extra_roots(&opts, Some(fixture("ca.pem").into())).unwrap();
        assert_eq!(certs.len(), 3);
        opts.use_ssl_cert_file = false;
        let certs = extra_roots(&opts, Some(fixture("ca.pem").into())).unwrap();
        assert_eq!(certs.len(), 2);
    }

    #[test]
    fn ca_file_errors_are_clear() {
        let mut opts = ClientOptions::new(UrlPolicy::Local);
        opts.ca_file = Some(fixture("does-not-exist.pem"));
        let err = extra_roots(&opts, None).unwrap_err();
        assert!(matches!(
            err,
            NetError::CaFile {
                origin: "caFile",
                ..
            }
        ));
        assert!(err.to_string().contains("does-not-exist.pem"));
        opts.ca_file = Some(fixture("not-a-cert.txt"));
        let err = extra_roots(&opts, None).unwrap_err();
        assert!(matches!(err, NetError::InvalidCaFile { .. }), "{err}");
        // A broken SSL_CERT_FILE is only a warning.
        opts.ca_file = None;
        let certs = extra_roots(&opts, Some(fixture("does-not-exist.pem").into())).unwrap();
        assert!(certs.is_empty());
    }

    #[test]
    fn proxy_hosts_are_found() {
        let m = proxy_matcher(&ProxySetting::Explicit {
            url: "http://Proxy.Corp.example:3128".into(),
            no_proxy: Some("localhost,.internal".into()),
        });
        let hosts = proxy_hosts(&m);
        assert!(hosts.contains("proxy.corp.example"), "{hosts:?}");
        assert!(proxy_hosts(&proxy_matcher(&ProxySetting::Disabled)).is_empty());
    }

    fn trusting(urls: &[&str], resolver: StaticResolverArc) -> GuardedClient {
        let mut opts = ClientOptions::new(UrlPolicy::Strict);
        opts.proxy = ProxySetting::Disabled;
        opts.resolver = Some(resolver);
        opts.trusted_origins = urls.iter().map(|u| Url::parse(u).unwrap()).collect();
        GuardedClient::new(opts).unwrap()
    }

    type StaticResolverArc = Arc<dyn NameResolver>;

    #[tokio::test]
    async fn a_trusted_origin_passes_exactly_and_nothing_else_does() {
        let resolver: StaticResolverArc = Arc::new(
            crate::StaticResolver::new().with("idp.corp.example", &["10.0.0.5".parse().unwrap()]),
        );
        let c = trusting(
            &["http://127.0.0.1:5556/realms/x", "https://idp.corp.example"],
            resolver.clone(),
        );
        for ok in [
            "http://127.0.0.1:5556/.well-known/openid-configuration",
            "http://127.0.0.1:5556",
            "https://idp.corp.example/token",
            "https://IDP.corp.example:443/jwks",
        ] {
            assert!(c.preflight(ok).await.is_ok(), "{ok}");
            assert!(c.check_destination(ok).await.is_ok(), "{ok}");
        }
        for refused in [
            // Another port, another scheme, another loopback address.
            "http://127.0.0.1:5557/",
            "https://127.0.0.1:5556/",
            "http://localhost:5556/",
            // The trusted name on another port or scheme: its addresses are checked.
            "https://idp.corp.example:8443/",
            "http://idp.corp.example/",
        ] {
            let e = c.preflight(refused).await.unwrap_err();
            assert!(e.is_policy_verdict(), "{refused}: {e}");
            assert!(
                e.to_string().contains("URL policy `strict`"),
                "{refused}: {e}"
            );
            assert!(c.check_destination(refused).await.is_err(), "{refused}");
        }
        // Without the allowance, the same client refuses the issuer.
        let plain = trusting(&[], resolver);
        assert!(
            plain
                .preflight("http://127.0.0.1:5556/.well-known/openid-configuration")
                .await
                .is_err()
        );
        assert!(
            plain
                .check_destination("https://idp.corp.example/")
                .await
                .is_err()
        );
    }

    /// A real request to a trusted loopback http origin under `strict`, and a refusal of
    /// a redirect from there to another loopback port.
    #[tokio::test]
    #[allow(clippy::disallowed_methods)]
    async fn a_trusted_loopback_origin_is_reached_under_strict() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                let reply = if head.starts_with("GET /away") {
                    "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                } else {
                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                };
                let _ = sock.write_all(reply.as_bytes()).await;
            }
        });
        let origin = format!("http://{addr}");
        let c = trusting(&[&origin], Arc::new(crate::StaticResolver::new()));
        let r = c.send(c.get(&format!("{origin}/x"))).await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().await.unwrap(), "ok");
        let e = c.send(c.get(&format!("{origin}/away"))).await.unwrap_err();
        assert!(e.to_string().contains("URL policy `strict`"), "{e}");
    }

    #[test]
    fn redirect_methods() {
        assert_eq!(
            redirected_method(StatusCode::SEE_OTHER, &Method::POST),
            (Method::GET, false)
        );
        assert_eq!(
            redirected_method(StatusCode::FOUND, &Method::POST),
            (Method::GET, false)
        );
        assert_eq!(
            redirected_method(StatusCode::TEMPORARY_REDIRECT, &Method::POST),
            (Method::POST, true)
        );
        assert_eq!(
            redirected_method(StatusCode::PERMANENT_REDIRECT, &Method::PUT),
            (Method::PUT, true)
        );
        assert_eq!(
            redirected_method(StatusCode::SEE_OTHER, &Method::HEAD),
            (Method::HEAD, false)
        );
    }

    #[test]
    fn redirect_headers() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "Bearer t".parse().unwrap());
        h.insert(header::COOKIE, "a=b".parse().unwrap());
        h.insert("x-api-key", "k".parse().unwrap());
        h.insert(header::ACCEPT, "application/json".parse().unwrap());
        h.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
        let same = redirected_headers(h.clone(), true, true);
        assert_eq!(same.len(), 5);
        let cross = redirected_headers(h.clone(), true, false);
        assert_eq!(cross.len(), 2);
        assert!(cross.contains_key(header::ACCEPT));
        assert!(cross.contains_key(header::CONTENT_TYPE));
        let cross_no_body = redirected_headers(h, false, false);
        assert_eq!(cross_no_body.len(), 1);
    }
}
