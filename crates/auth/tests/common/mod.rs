//! Helpers shared by the auth crate's integration tests: a guarded client, a manager
//! over a temporary store, an in-process "browser", and MCP connections that use the
//! manager as their token source.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Duration;

use switchboard_auth::{AuthManager, LoginOptions, OpenUrl, ServerAuth, TokenStore};
use switchboard_config::OAuthConfig;
use switchboard_mcp::{ConnectOptions, Connection, Target, TokenSource};
use switchboard_net::{ClientOptions, GuardedClient, UrlPolicy};

pub fn guard() -> GuardedClient {
    GuardedClient::new(ClientOptions::new(UrlPolicy::Local)).unwrap()
}

/// A manager over a fresh store in `dir`.
pub fn manager(dir: &std::path::Path) -> AuthManager {
    AuthManager::new(TokenStore::in_home(dir), guard())
}

/// A server entry with a loopback callback on a free port chosen at bind time.
pub fn server(name: &str, url: &str) -> ServerAuth {
    let mut s = ServerAuth::adhoc(name, url);
    s.oauth = OAuthConfig {
        redirect_uri: Some("http://localhost:0/oauth/callback".into()),
        ..Default::default()
    };
    s
}

/// A "browser" that GETs the URL and follows redirects (to our callback).
pub fn following_browser() -> OpenUrl {
    Arc::new(|url: &str| {
        let url = url.to_string();
        tokio::spawn(async move {
            let client = reqwest::Client::builder().build().unwrap();
            let _ = client.get(url).send().await;
        });
        true
    })
}

/// A "browser" that follows the authorization redirect by hand and changes the
/// callback's `state` to `forged`.
pub fn forging_browser(forged: &'static str) -> OpenUrl {
    Arc::new(move |url: &str| {
        let url = url.to_string();
        tokio::spawn(async move {
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap();
            let resp = client.get(url).send().await.unwrap();
            let location = resp.headers()["location"].to_str().unwrap().to_string();
            let mut cb = url::Url::parse(&location).unwrap();
            let pairs: Vec<(String, String)> = cb
                .query_pairs()
                .map(|(k, v)| {
                    let v = if k == "state" {
                        forged.to_string()
                    } else {
                        v.into_owned()
                    };
                    (k.into_owned(), v)
                })
                .collect();
            cb.query_pairs_mut().clear().extend_pairs(pairs);
            let _ = client.get(cb.as_str()).send().await;
        });
        true
    })
}

pub fn login_opts(open: OpenUrl) -> LoginOptions {
    LoginOptions {
        timeout: Duration::from_secs(20),
        open_url: open,
        ..Default::default()
    }
}

/// An MCP connection to `url` that asks `source` for tokens.
pub async fn connect(
    name: &str,
    url: &str,
    source: Arc<dyn TokenSource>,
) -> Result<Connection, switchboard_mcp::ConnectError> {
    let mut opts = ConnectOptions::new(
        name,
        Target::Http {
            url: url.into(),
            headers: vec![],
        },
    );
    opts.guard = Some(guard());
    opts.token_source = Some(source);
    opts.startup_timeout = Duration::from_secs(20);
    opts.request_timeout = Duration::from_secs(20);
    Connection::connect(opts).await
}

/// The text of a tool result.
pub async fn call_text(conn: &Connection, tool: &str, args: serde_json::Value) -> String {
    let args = args.as_object().cloned();
    let r = conn
        .call_tool(tool, args, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let v = serde_json::to_value(&r).unwrap();
    v["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// GET a JSON document.
pub async fn get_json(url: &str) -> serde_json::Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

/// POST with no body.
pub async fn post(url: &str) {
    let s = reqwest::Client::new()
        .post(url)
        .send()
        .await
        .unwrap()
        .status();
    assert!(s.is_success(), "{url}: {s}");
}
