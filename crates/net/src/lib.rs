//! Switchboard's outbound HTTP: the URL guard every request goes through (against
//! SSRF) and the one HTTP client builder.
//!
//! - [`UrlPolicy`]: `strict` (https, public addresses only), `local` (also http,
//!   loopback, private, CGNAT), `off`.
//! - [`classify_ip`]: every IPv4/IPv6 special-purpose range, with IPv4 embedded in
//!   IPv6 judged as the IPv4 address.
//! - [`check_url`]: the syntax stage (scheme, real host after WHATWG parsing, the
//!   `localhost` and metadata names, credentials before `@`).
//! - [`resolve_and_check`]: the DNS stage (every address a name resolves to).
//! - [`GuardedClient`] / [`http_client`]: a reqwest client whose resolver checks
//!   and returns exactly the checked addresses, with redirects re-checked per hop;
//!   [`ClientOptions::trusted_origins`] lets exactly the origins an operator named
//!   (team mode's OpenID issuer) through on a client built for them only.
//! - [`explain`]: the verdict behind `switchboard url-check`.
//! - [`read_limited`]: an answer's body read up to a limit, for every caller that reads
//!   a whole body.
//! - [`no_delay`]: the inbound side, every served HTTP listener with `TCP_NODELAY` on
//!   its accepted connections.
//!
//! One door to the network: outbound sockets, name resolution and HTTP clients come only
//! from here. The workspace's `clippy.toml` (`disallowed-methods`) fails the build when
//! other code calls `TcpStream::connect`, `TcpSocket::connect`, `lookup_host`,
//! `to_socket_addrs` or builds a `reqwest::Client`; this crate allows them where it builds
//! its client and resolver, and test code that plays a peer allows them per file.

mod blocked;
mod body;
mod check;
mod client;
mod error;
mod explain;
mod ip;
mod listen;
mod policy;
mod resolve;

pub use blocked::Blocked;
pub use body::{LimitedBody, read_limited};
pub use check::{GuardedHost, GuardedUrl, check_ip, check_parsed_url, check_url};
pub use client::{
    ClientOptions, DEFAULT_CONNECT_TIMEOUT, GuardedClient, MAX_REDIRECTS, ProxySetting, http_client,
};
pub use error::{NetError, find_blocked, redacted};
pub use explain::{AddressVerdict, Verdict, explain, explain_with};
pub use ip::{EmbeddedIpv4, IpClass, Ipv4Embedding, classify_ip, embedded_ipv4};
pub use listen::{NoDelayListener, no_delay};
pub use policy::{
    ALL_POLICIES, ParsePolicyError, PolicyChoice, PolicySources, UrlPolicy, choose_policy,
};
pub use resolve::{
    BoxFuture, NameResolver, StaticResolver, SystemResolver, lookup_checked, resolve_and_check,
    resolve_and_check_with,
};
