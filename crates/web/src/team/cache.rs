//! [`ClientCache`]: this instance's open MCP connections to users' servers, keyed by
//! user id + server name + a SHA-256 over the server record and its credentials (URL,
//! transport, header values, the saved OAuth tokens). A changed record or token is a new
//! key: the stale connection is closed when the new one is stored. Entries idle longer
//! than [`CacheLimits::idle`] are closed by a sweep; a user holding their share
//! ([`CacheLimits::per_user`]) has their own least recently used closed for a new one;
//! past [`CacheLimits::max_entries`] the least recently used is closed. So a member with
//! many servers churns only their own connections and cannot close, alone, the one
//! another member's call runs or waits on (the same per-user rule as the gateway's
//! parked calls). Losing the cache (a restart, another instance)
//! costs a reconnect, never data. The open-sessions gauge of `/metrics` follows the
//! number of entries.
//!
//! Catalog servers are cached under `catalog:NAME` per user (no user server name has a
//! `:`); a stdio catalog server is one process per user who uses it, closed by the same
//! idle sweep and cap.
//!
//! Its connections keep no list watch (`ConnectOptions::watch_lists` stays off): the team
//! gateway lists afresh instead of listening for a 2026-07-28 server's changes.
//!
//! Must not: hold its lock across `.await` (connecting happens outside it), or print a
//! key (its digest covers secrets).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

use switchboard_mcp::{ConnectError, ConnectOptions, Connection, StdioTarget, Target};
use switchboard_net::GuardedClient;
use switchboard_store::{
    CatalogLaunch, CatalogServer, ServerRecord, ServerRef, StoredTokens, UserId,
};

use crate::test_conn::http_target;

/// How many connections an instance keeps, and for how long unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// At most this many open connections (the least recently used goes first), of
    /// which one user holds at most [`Self::per_user`].
    pub max_entries: usize,
    /// A connection unused this long is closed.
    pub idle: Duration,
}

/// One user holds at most this fraction (1/n) of the cache.
const USER_SHARE: usize = 4;

impl CacheLimits {
    /// At most this many of the open connections are one user's: a quarter of
    /// [`Self::max_entries`] (64 by default: more servers than most users enable, so
    /// a user's catalog is built without closing their own connections, while no one
    /// user fills the cache).
    pub fn per_user(&self) -> usize {
        (self.max_entries / USER_SHARE).max(1)
    }
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self {
            max_entries: 256,
            idle: Duration::from_secs(10 * 60),
        }
    }
}

/// Time limits of cached connections: connecting, and each request on them.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a closed connection may take to say goodbye.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    user: String,
    server: String,
    digest: [u8; 32],
}

struct Entry {
    conn: Arc<Connection>,
    last_used: Instant,
}

/// The per-instance MCP client cache.
pub struct ClientCache {
    limits: CacheLimits,
    guard: GuardedClient,
    entries: Mutex<HashMap<Key, Entry>>,
    /// Open connections, for `/metrics` (set under the lock, after each change).
    open: Gauge,
    /// Routes a server's elicitation to the chat call running on its connection.
    elicit: Option<Arc<super::elicit::ElicitRouter>>,
}

/// A SHA-256 over length-prefixed fields, ending with the user's credentials.
struct Fields(Sha256);

impl Fields {
    fn field(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_be_bytes());
        self.0.update(bytes);
    }

    fn tokens(mut self, tokens: Option<&StoredTokens>) -> [u8; 32] {
        match tokens {
            Some(t) => {
                self.field(b"tokens");
                self.field(t.tokens.expose().as_bytes());
                self.field(&t.updated_at.to_be_bytes());
            }
            None => self.field(b"no tokens"),
        }
        self.0.finalize().into()
    }
}

/// SHA-256 over the record and credentials, each field length-prefixed.
fn digest(record: &ServerRecord, tokens: Option<&StoredTokens>) -> [u8; 32] {
    let mut h = Fields(Sha256::new());
    let mut field = |bytes: &[u8]| h.field(bytes);
    field(record.url.as_bytes());
    field(record.transport.as_str().as_bytes());
    for (name, value) in &record.headers {
        field(name.as_bytes());
        field(value.expose().as_bytes());
    }
    h.tokens(tokens)
}

/// The cache's name for catalog server `name`: `catalog:` is no user server's name (a
/// user's server names have no `:`), so the two namespaces never share an entry.
pub(crate) fn catalog_key(name: &str) -> String {
    format!("catalog:{name}")
}

/// The cache's name for a user's server or catalog server.
pub(crate) fn server_key(server: &ServerRef) -> String {
    match server {
        ServerRef::Own(n) => n.clone(),
        ServerRef::Catalog(n) => catalog_key(n),
    }
}

/// SHA-256 over a catalog server's launch and the user's credentials, each field
/// length-prefixed.
fn catalog_digest(server: &CatalogServer, tokens: Option<&StoredTokens>) -> [u8; 32] {
    let mut h = Fields(Sha256::new());
    let mut field = |bytes: &[u8]| h.field(bytes);
    field(server.launch.transport_name().as_bytes());
    match &server.launch {
        CatalogLaunch::Http { url, headers, .. } => {
            field(url.as_bytes());
            for (name, value) in headers {
                field(name.as_bytes());
                field(value.expose().as_bytes());
            }
        }
        CatalogLaunch::Stdio {
            command,
            args,
            cwd,
            env,
        } => {
            field(command.as_bytes());
            field(&(args.len() as u64).to_be_bytes());
            for a in args {
                field(a.as_bytes());
            }
            field(cwd.as_deref().unwrap_or("").as_bytes());
            for (name, value) in env {
                field(name.as_bytes());
                field(value.expose().as_bytes());
            }
        }
    }
    h.tokens(tokens)
}

/// How to connect to a catalog server: its URL with the admin's headers and the user's
/// own access token, or its command with exactly the admin's arguments and environment
/// (nothing of the user's goes into a process's argv or env).
pub(crate) fn catalog_options(
    guard: &GuardedClient,
    server: &CatalogServer,
    tokens: Option<&StoredTokens>,
) -> ConnectOptions {
    match &server.launch {
        CatalogLaunch::Http {
            url,
            transport,
            headers,
        } => target_options(
            guard,
            PlannedTarget {
                name: &server.name,
                url,
                transport: Some(transport.as_str()),
                headers: headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                    .collect(),
            },
            tokens,
        ),
        CatalogLaunch::Stdio {
            command,
            args,
            cwd,
            env,
        } => ConnectOptions::new(
            &server.name,
            Target::Stdio(StdioTarget {
                program: command.clone(),
                args: args.clone(),
                env: env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                    .collect(),
                cwd: cwd.as_ref().map(PathBuf::from),
            }),
        ),
    }
}

/// The saved OAuth access token, when the tokens are a `switchboard-auth` token set.
fn bearer(tokens: Option<&StoredTokens>) -> Option<String> {
    let set: switchboard_auth::TokenSet = serde_json::from_str(tokens?.tokens.expose()).ok()?;
    Some(format!("Bearer {}", set.access_token))
}

/// How to connect to a user's server: its URL, transport and headers, with the saved
/// OAuth access token as `Authorization` unless a header sets one.
pub(crate) fn connect_options(
    guard: &GuardedClient,
    record: &ServerRecord,
    tokens: Option<&StoredTokens>,
) -> ConnectOptions {
    let headers: Vec<(String, String)> = record
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.expose().to_owned()))
        .collect();
    target_options(
        guard,
        PlannedTarget {
            name: &record.name,
            url: &record.url,
            transport: Some(record.transport.as_str()),
            headers,
        },
        tokens,
    )
}

/// A server to connect to that may not be saved yet.
pub(crate) struct PlannedTarget<'a> {
    pub name: &'a str,
    pub url: &'a str,
    /// `http`, `sse`, or `None` to try Streamable HTTP, then SSE.
    pub transport: Option<&'a str>,
    pub headers: Vec<(String, String)>,
}

/// [`connect_options`] for a server that may not be saved yet.
pub(crate) fn target_options(
    guard: &GuardedClient,
    target: PlannedTarget<'_>,
    tokens: Option<&StoredTokens>,
) -> ConnectOptions {
    let PlannedTarget {
        name,
        url,
        transport,
        mut headers,
    } = target;
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        && let Some(b) = bearer(tokens)
    {
        headers.push(("Authorization".into(), b));
    }
    let mut opts = ConnectOptions::new(name, http_target(url, transport, headers));
    opts.guard = Some(guard.clone());
    opts
}

impl ClientCache {
    pub(crate) fn new(guard: GuardedClient, limits: CacheLimits) -> Self {
        Self {
            limits,
            guard,
            entries: Mutex::new(HashMap::new()),
            open: Gauge::default(),
            elicit: None,
        }
    }

    /// The same cache, giving each connection it opens hooks that route the server's
    /// elicitations through `router` to the user's chat call on it.
    pub(crate) fn with_elicitations(mut self, router: Arc<super::elicit::ElicitRouter>) -> Self {
        self.elicit = Some(router);
        self
    }

    /// The elicitation router, when there is one.
    pub(crate) fn elicitations(&self) -> Option<&Arc<super::elicit::ElicitRouter>> {
        self.elicit.as_ref()
    }

    /// The gauge of open connections (a handle on the same value).
    pub(crate) fn open_gauge(&self) -> Gauge {
        self.open.clone()
    }

    fn publish(&self, entries: &HashMap<Key, Entry>) {
        self.open
            .set(i64::try_from(entries.len()).unwrap_or(i64::MAX));
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Entry>> {
        match self.entries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Open connections.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// The cached connection for this user's server as recorded now, or a new one.
    pub(crate) async fn connection(
        &self,
        user: &UserId,
        record: &ServerRecord,
        tokens: Option<&StoredTokens>,
    ) -> Result<Arc<Connection>, ConnectError> {
        self.connect_with(
            user,
            &record.name,
            digest(record, tokens),
            connect_options(&self.guard, record, tokens),
        )
        .await
    }

    /// The cached connection for this user's catalog server as published now (and with
    /// the user's own tokens), or a new one: a stdio entry is a process of this user's
    /// alone, closed by the idle sweep and the cap like any other entry.
    pub(crate) async fn catalog_connection(
        &self,
        user: &UserId,
        server: &CatalogServer,
        tokens: Option<&StoredTokens>,
    ) -> Result<Arc<Connection>, ConnectError> {
        self.connect_with(
            user,
            &catalog_key(&server.name),
            catalog_digest(server, tokens),
            catalog_options(&self.guard, server, tokens),
        )
        .await
    }

    /// The connection under (user, `server`, `digest`), or a new one made with `opts`.
    async fn connect_with(
        &self,
        user: &UserId,
        server: &str,
        digest: [u8; 32],
        mut opts: ConnectOptions,
    ) -> Result<Arc<Connection>, ConnectError> {
        let key = Key {
            user: user.as_str().to_owned(),
            server: server.to_owned(),
            digest,
        };
        let closed = {
            let mut entries = self.lock();
            match entries.get_mut(&key) {
                Some(e) if !e.conn.is_closed() => {
                    e.last_used = Instant::now();
                    return Ok(e.conn.clone());
                }
                Some(_) => {
                    let closed = entries.remove(&key).map(|e| e.conn);
                    self.publish(&entries);
                    closed
                }
                None => None,
            }
        };
        close_all(closed.into_iter().collect());
        opts.startup_timeout = CONNECT_TIMEOUT;
        opts.request_timeout = REQUEST_TIMEOUT;
        if let Some(router) = &self.elicit {
            opts.hooks = router.hooks_for(user.as_str(), server);
        }
        let fresh = Arc::new(Connection::connect(opts).await?);
        let (conn, evicted) = self.insert(key, fresh);
        close_all(evicted);
        Ok(conn)
    }

    /// Store `fresh` under `key` (unless another request stored one first: that one is
    /// kept and `fresh` closed); drop the same server's stale keys, idle entries, and the
    /// least recently used beyond the cap. Returns the connection to use and those to close.
    fn insert(&self, key: Key, fresh: Arc<Connection>) -> (Arc<Connection>, Vec<Arc<Connection>>) {
        let now = Instant::now();
        let mut entries = self.lock();
        let mut evicted = Vec::new();
        if let Some(e) = entries.get_mut(&key)
            && !e.conn.is_closed()
        {
            e.last_used = now;
            evicted.push(fresh);
            return (e.conn.clone(), evicted);
        }
        let stale: Vec<Key> = entries
            .iter()
            .filter(|(k, e)| {
                (k.user == key.user && k.server == key.server)
                    || now.duration_since(e.last_used) >= self.limits.idle
                    || e.conn.is_closed()
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            evicted.extend(entries.remove(&k).map(|e| e.conn));
        }
        // The user's own share first: at it, their own least recently used goes.
        loop {
            let mine = entries.iter().filter(|(k, _)| k.user == key.user);
            if mine.clone().count() < self.limits.per_user() {
                break;
            }
            let Some(oldest) = mine
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            tracing::info!(
                "a user holds {} connections, their share of this instance's: closing their \
                 least recently used",
                self.limits.per_user()
            );
            evicted.extend(entries.remove(&oldest).map(|e| e.conn));
        }
        while entries.len() >= self.limits.max_entries.max(1) {
            let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            evicted.extend(entries.remove(&oldest).map(|e| e.conn));
        }
        entries.insert(
            key,
            Entry {
                conn: fresh.clone(),
                last_used: now,
            },
        );
        self.publish(&entries);
        (fresh, evicted)
    }

    /// Close every connection of this user's server `name` (it was removed).
    pub(crate) fn forget(&self, user: &UserId, name: &str) {
        let gone: Vec<Arc<Connection>> = {
            let mut entries = self.lock();
            let keys: Vec<Key> = entries
                .keys()
                .filter(|k| k.user == user.as_str() && k.server == name)
                .cloned()
                .collect();
            let gone = keys
                .iter()
                .filter_map(|k| entries.remove(k).map(|e| e.conn))
                .collect();
            self.publish(&entries);
            gone
        };
        close_all(gone);
    }

    /// Close every user's connections to the catalog server `name` on this instance (it
    /// was unpublished or changed; other instances stop finding it in the store and close
    /// theirs at the idle sweep).
    pub(crate) fn forget_catalog(&self, name: &str) {
        let server = catalog_key(name);
        let gone: Vec<Arc<Connection>> = {
            let mut entries = self.lock();
            let keys: Vec<Key> = entries
                .keys()
                .filter(|k| k.server == server)
                .cloned()
                .collect();
            let gone = keys
                .iter()
                .filter_map(|k| entries.remove(k).map(|e| e.conn))
                .collect();
            self.publish(&entries);
            gone
        };
        close_all(gone);
    }

    /// Close connections idle longer than the limit, and closed ones.
    pub(crate) fn sweep(&self) {
        let now = Instant::now();
        let gone: Vec<Arc<Connection>> = {
            let mut entries = self.lock();
            let keys: Vec<Key> = entries
                .iter()
                .filter(|(_, e)| {
                    now.duration_since(e.last_used) >= self.limits.idle || e.conn.is_closed()
                })
                .map(|(k, _)| k.clone())
                .collect();
            let gone = keys
                .iter()
                .filter_map(|k| entries.remove(k).map(|e| e.conn))
                .collect();
            self.publish(&entries);
            gone
        };
        close_all(gone);
    }

    /// How often the background sweep runs.
    pub(crate) fn sweep_every(&self) -> Duration {
        (self.limits.idle / 2).clamp(Duration::from_millis(100), Duration::from_secs(60))
    }

    /// Close everything (shutdown).
    pub(crate) fn clear(&self) {
        let all: Vec<Arc<Connection>> = {
            let mut entries = self.lock();
            let all = entries.drain().map(|(_, e)| e.conn).collect();
            self.publish(&entries);
            all
        };
        close_all(all);
    }
}

fn close_all(conns: Vec<Arc<Connection>>) {
    if conns.is_empty() {
        return;
    }
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(async move {
            for c in conns {
                c.close(CLOSE_GRACE).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use switchboard_store::{Secret, Transport};

    fn record(url: &str, header: &str) -> ServerRecord {
        ServerRecord {
            name: "s".into(),
            url: url.into(),
            transport: Transport::Http,
            headers: BTreeMap::from([("X-Key".to_owned(), Secret::new(header))]),
            enabled: true,
        }
    }

    #[test]
    fn any_change_of_record_or_credentials_is_a_new_key() {
        let base = record("https://a.example/mcp", "k1");
        let d = digest(&base, None);
        assert_eq!(d, digest(&base.clone(), None));
        assert_ne!(d, digest(&record("https://b.example/mcp", "k1"), None));
        assert_ne!(d, digest(&record("https://a.example/mcp", "k2"), None));
        let mut sse = base.clone();
        sse.transport = Transport::Sse;
        assert_ne!(d, digest(&sse, None));
        let tokens = |t: &str, at: i64| StoredTokens {
            tokens: Secret::new(t),
            expires_at: None,
            updated_at: at,
        };
        let with = digest(&base, Some(&tokens("{\"accessToken\":\"a\"}", 1)));
        assert_ne!(d, with);
        assert_ne!(
            with,
            digest(&base, Some(&tokens("{\"accessToken\":\"b\"}", 1)))
        );
        assert_ne!(
            with,
            digest(&base, Some(&tokens("{\"accessToken\":\"a\"}", 2)))
        );
    }

    #[test]
    fn a_stdio_catalog_server_runs_with_the_admins_argv_and_env_only() {
        let guard = GuardedClient::new(switchboard_net::ClientOptions::new(
            switchboard_net::UrlPolicy::Local,
        ))
        .unwrap();
        let server = CatalogServer {
            name: "tool".into(),
            description: String::new(),
            launch: CatalogLaunch::Stdio {
                command: "/usr/bin/tool".into(),
                args: vec!["--flag".into()],
                cwd: Some("/srv".into()),
                env: BTreeMap::from([("KEY".to_owned(), Secret::new("v"))]),
            },
        };
        // A user's tokens change the cache key but never reach the process.
        let tokens = StoredTokens {
            tokens: Secret::new("{\"accessToken\":\"user-token\"}"),
            expires_at: None,
            updated_at: 1,
        };
        let o = catalog_options(&guard, &server, Some(&tokens));
        match &o.target {
            switchboard_mcp::Target::Stdio(t) => {
                assert_eq!(t.program, "/usr/bin/tool");
                assert_eq!(t.args, ["--flag"]);
                assert_eq!(t.env, [("KEY".to_owned(), "v".to_owned())]);
                assert_eq!(t.cwd.as_deref(), Some(std::path::Path::new("/srv")));
            }
            other => panic!("{other:?}"),
        }
        assert_ne!(
            catalog_digest(&server, None),
            catalog_digest(&server, Some(&tokens))
        );
        // The two namespaces never share a cache name.
        assert_eq!(server_key(&ServerRef::catalog("x")), "catalog:x");
        assert_eq!(server_key(&ServerRef::own("x")), "x");
    }

    #[test]
    fn a_saved_token_becomes_the_bearer_unless_a_header_sets_one() {
        let guard = GuardedClient::new(switchboard_net::ClientOptions::new(
            switchboard_net::UrlPolicy::Local,
        ))
        .unwrap();
        let tokens = StoredTokens {
            tokens: Secret::new("{\"accessToken\":\"tok\",\"tokenType\":\"Bearer\"}"),
            expires_at: None,
            updated_at: 1,
        };
        let mut rec = record("http://127.0.0.1:9/mcp", "k");
        let headers = |o: &ConnectOptions| match &o.target {
            switchboard_mcp::Target::Http { headers, .. } => headers.clone(),
            other => panic!("{other:?}"),
        };
        let o = connect_options(&guard, &rec, Some(&tokens));
        assert!(headers(&o).contains(&("Authorization".into(), "Bearer tok".into())));
        rec.headers
            .insert("authorization".into(), Secret::new("Basic x"));
        let o = connect_options(&guard, &rec, Some(&tokens));
        let h = headers(&o);
        assert!(!h.iter().any(|(_, v)| v == "Bearer tok"), "{h:?}");
    }
}
