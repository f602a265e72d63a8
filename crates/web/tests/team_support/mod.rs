//! Shared fixtures for team mode's tests: a database (an SQLite file, or a database on a
//! throwaway PostgreSQL cluster), team instances on it (real listeners on 127.0.0.1),
//! users signed in through the store, a browser-like client (cookie, `Origin`), and the
//! demo MCP server over Streamable HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
// A test plays the client side of the network with its own HTTP client; the
// one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
use switchboard_net::UrlPolicy;
use switchboard_store::{SecretKeys, SignInIdentity, Store, UserId};
use switchboard_testkit::PgCluster;
use switchboard_web::{
    CacheLimits, MetricsToken, RunningTeam, SignInOptions, TeamOptions, start_team,
};

/// A database for one test.
pub enum Db {
    Sqlite(tempfile::TempDir, String),
    Postgres(PgCluster, String),
}

impl Db {
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/team.db?mode=rwc", dir.path().display());
        Self::Sqlite(dir, url)
    }

    pub fn postgres() -> Self {
        let cluster = PgCluster::start();
        let url = cluster.create_database("team");
        Self::Postgres(cluster, url)
    }

    pub fn url(&self) -> &str {
        match self {
            Self::Sqlite(_, u) | Self::Postgres(_, u) => u,
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Self::Postgres(..))
    }

    /// A store of its own (as each instance opens one), with the team's key.
    pub async fn store(&self) -> Store {
        let keys = SecretKeys::from_base64(&team_key(), None).unwrap();
        Store::open(self.url()).await.unwrap().with_keys(keys)
    }
}

/// The team's secret key (the same for every instance of a test run).
pub fn team_key() -> String {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| SecretKeys::generate_base64().unwrap())
        .clone()
}

/// How to start an instance in a test.
#[derive(Default)]
pub struct InstanceOptions {
    /// Shared by the instances of one "deployment" (they sit behind one origin).
    pub public_origin: Option<String>,
    pub cache: CacheLimits,
    pub sign_in: Option<SignInOptions>,
    /// The bearer token `/metrics` asks for (`None`: `/metrics` is off).
    pub metrics_token: Option<String>,
    /// How chats reach the model (`None`: the chat routes answer 503).
    pub model: Option<switchboard_web::TeamModel>,
    /// `--allow-catalog-stdio`.
    pub allow_catalog_stdio: bool,
    /// The URL policy (`None`: `local`, so the demo servers on loopback are reachable).
    pub url_policy: Option<UrlPolicy>,
    /// How long a chat's elicitation waits (`None`: the default).
    pub elicitation_timeout: Option<Duration>,
}

/// A running team instance and how to reach it.
pub struct Instance {
    pub running: RunningTeam,
    /// `http://127.0.0.1:PORT`: where requests are sent.
    pub base: String,
}

impl Instance {
    pub async fn start(db: &Db, opts: InstanceOptions) -> Self {
        let mut o = TeamOptions::new(db.store().await);
        o.port = 0;
        o.url_policy = opts.url_policy.unwrap_or(UrlPolicy::Local);
        o.public_origin = opts.public_origin;
        o.cache = opts.cache;
        o.sign_in = opts.sign_in;
        o.metrics_token = opts.metrics_token.map(|t| MetricsToken::new(&t).unwrap());
        o.model = opts.model;
        o.allow_catalog_stdio = opts.allow_catalog_stdio;
        if let Some(t) = opts.elicitation_timeout {
            o.elicitation_timeout = t;
        }
        let running = start_team(o).await.unwrap();
        let base = format!("http://{}", running.addr);
        Self { running, base }
    }

    /// The origin the page runs under (what the `Origin` header carries).
    pub fn origin(&self) -> &str {
        &self.running.app_origin
    }

    pub async fn stop(self) {
        self.running.shutdown().await;
    }
}

/// Chats on Gemini at `base_url` (a fake, or an address nothing answers on).
pub fn gemini_at(base_url: &str) -> switchboard_web::TeamModel {
    let mut cfg = switchboard_model::ModelConfig::default();
    cfg.gemini.base_url = base_url.to_owned();
    switchboard_web::TeamModel::new(cfg, Some("gemini-2.5-flash".into())).unwrap()
}

/// The issuer of the users [`sign_in`] makes (no provider runs there).
pub const STORE_ISSUER: &str = "https://issuer.test";

/// A user signed in through the store, as the callback does: the account of
/// [`STORE_ISSUER`] whose `sub` is `email` (verified). The cookie value.
pub async fn sign_in(store: &Store, email: &str, admin: bool) -> (UserId, String) {
    let who = SignInIdentity {
        issuer: STORE_ISSUER,
        subject: email,
        email,
        email_verified: true,
    };
    let user = store
        .sign_in_user(&who, email.split('@').next().unwrap(), admin)
        .await
        .unwrap();
    let token = store
        .create_session(&user.id, Duration::from_secs(3600))
        .await
        .unwrap();
    (user.id, token.expose().to_owned())
}

/// A browser-like client: the session cookie and the page's `Origin`, sent to whichever
/// instance a request names. Redirects are not followed.
#[derive(Clone)]
pub struct Browser {
    pub http: reqwest::Client,
    pub cookie: Option<String>,
    pub origin: String,
}

/// The session cookie's name over http.
pub const COOKIE: &str = "switchboard_session";

impl Browser {
    pub fn new(origin: &str, cookie: Option<&str>) -> Self {
        Self {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
            cookie: cookie.map(str::to_owned),
            origin: origin.to_owned(),
        }
    }

    pub fn request(&self, method: Method, base: &str, path: &str) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .request(method.clone(), format!("{base}{path}"))
            .header("Origin", &self.origin);
        if method == Method::GET {
            r = r.header("Sec-Fetch-Site", "same-origin");
        }
        if let Some(c) = &self.cookie {
            r = r.header("Cookie", format!("{COOKIE}={c}"));
        }
        r
    }

    /// Send and return the status and JSON body (`Null` when there is none).
    pub async fn send(&self, r: reqwest::RequestBuilder) -> (u16, Value) {
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get(&self, base: &str, path: &str) -> (u16, Value) {
        self.send(self.request(Method::GET, base, path)).await
    }

    pub async fn post(&self, base: &str, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.request(Method::POST, base, path).json(body))
            .await
    }

    pub async fn put(&self, base: &str, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.request(Method::PUT, base, path).json(body))
            .await
    }

    pub async fn delete(&self, base: &str, path: &str) -> (u16, Value) {
        self.send(self.request(Method::DELETE, base, path)).await
    }
}

/// Starts the bundled demo server over Streamable HTTP; returns its `/mcp` URL.
pub async fn demo_http() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = switchboard_demo_server::serve_http(
            listener,
            switchboard_demo_server::DemoOptions::default(),
        )
        .await;
    });
    format!("http://{addr}/mcp")
}

/// Run each scenario on SQLite and on PostgreSQL.
#[macro_export]
macro_rules! on_both {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::team_support::Db::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::team_support::Db::postgres()).await;
                }
            )*
        }
    };
}

/// The real OpenID provider (`tests/peers/oidc`) with its clients registered for
/// `redirect_uri` (the team app's `<public origin>/auth/callback`).
pub async fn oidc_provider_for(redirect_uri: &str) -> switchboard_testkit::OidcPeer {
    switchboard_testkit::spawn_oidc_provider_with(switchboard_testkit::OidcPeerOptions {
        redirect_uris: vec![redirect_uri.to_owned()],
        default_account: None,
        ..Default::default()
    })
    .await
}

/// The identity `peer` vouches for its test `account` (`alice`, `bob`, …: the `sub`)
/// with `email`, as the callback hands it to the store.
pub fn provider_account<'a>(
    peer: &'a switchboard_testkit::OidcPeer,
    account: &'a str,
    email: &'a str,
) -> SignInIdentity<'a> {
    SignInIdentity {
        issuer: &peer.issuer,
        subject: account,
        email,
        email_verified: true,
    }
}

/// Sign-in with `peer` for the team: `example.com` addresses may enter, `admin` is an admin.
pub fn sign_in_options(peer: &switchboard_testkit::OidcPeer, admin: &str) -> SignInOptions {
    SignInOptions {
        issuer: peer.issuer.parse().unwrap(),
        client_id: peer.client_id.clone(),
        client_secret: Some(switchboard_auth::ClientSecret::new(peer.secret.clone())),
        scopes: Vec::new(),
        policy: switchboard_auth::SignInPolicy {
            allowed_domains: vec!["example.com".into()],
            admins: vec![admin.into()],
            ..Default::default()
        },
    }
}

/// RFC 7636 appendix B's PKCE pair (verifier, S256 challenge).
pub const PKCE_VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
pub const PKCE_CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

/// A gateway client registered through the store with one loopback redirect URI.
pub async fn gateway_client(store: &Store, redirect_uri: &str) -> String {
    store
        .register_gateway_client("isolation client", &[redirect_uri.to_owned()])
        .await
        .unwrap()
        .client_id
}

/// Gateway tokens (access, refresh) for the user of `session`, issued through the store
/// as the consent + code exchange would, for `resource`, the access token living `access`.
pub async fn gateway_tokens(
    store: &Store,
    session: &str,
    client_id: &str,
    resource: &str,
    access: Duration,
) -> (String, String) {
    let client = store.gateway_client(client_id).await.unwrap().unwrap();
    let approval = switchboard_store::GatewayApproval {
        client_id: client_id.into(),
        redirect_uri: client.redirect_uris[0].clone(),
        code_challenge: PKCE_CHALLENGE.into(),
        resource: resource.into(),
        scope: "mcp".into(),
    };
    let code = store
        .approve_gateway_grant(session, &approval, Duration::from_secs(60))
        .await
        .unwrap();
    let taken = store.take_gateway_code(&code).await.unwrap().unwrap();
    let t = store
        .issue_gateway_tokens(
            &taken.grant,
            switchboard_store::TokenLifetimes {
                access,
                refresh: Duration::from_secs(600),
            },
        )
        .await
        .unwrap();
    (t.access_token, t.refresh_token)
}

/// A JSON-RPC request to `/mcp` at `base` with `token` (none when empty): the status,
/// the `WWW-Authenticate` header and the JSON body (`Null` when there is none).
pub async fn mcp_request(
    base: &str,
    token: &str,
    method: Method,
    body: Value,
) -> (u16, String, Value) {
    let mut r = reqwest::Client::new()
        .request(method.clone(), format!("{base}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-06-18")
        .timeout(Duration::from_secs(30));
    if !token.is_empty() {
        r = r.bearer_auth(token);
    }
    if method == Method::POST {
        r = r.json(&body);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let www = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = r.text().await.unwrap();
    (
        status,
        www,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// The hidden fields of the consent form, unescaped.
pub fn hidden_fields(html: &str) -> Vec<(String, String)> {
    html.split("<input type=\"hidden\" name=\"")
        .skip(1)
        .map(|part| {
            let (name, rest) = part.split_once("\" value=\"").unwrap();
            let value = rest.split_once('"').unwrap().0;
            let value = value
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&");
            (name.to_owned(), value)
        })
        .collect()
}
