//! A real OpenID provider for sign-in tests: npm `oidc-provider` run by
//! `tests/peers/oidc/provider.mjs` ([`spawn_oidc_provider`]), and a stand-in browser
//! that logs a test account in without a page ([`OidcPeer::drive_login`]): it follows
//! the redirects with its own cookie jar and stops at the redirect URI.
//!
//! Clients (all with [`OidcPeer::secret`] and the redirect URIs given, by default one
//! nothing listens on, [`OidcPeer::redirect_uri`]):
//! `switchboard` (client_secret_basic, RS256 ID tokens), `switchboard-es`
//! (client_secret_post, ES256), `other-client` (client_secret_basic, RS256).
//! Accounts: `alice` (alice@example.com, verified), `bob` (bob@other.org, verified),
//! `carol` (carol@example.com, not verified), `dave` (no email), `alice-next`
//! (alice@example.com again, verified: an address the provider gave to another account).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use crate::install::{ensure_peers, peers_dir};
use crate::process::{PeerProcess, free_port};

/// The client the sign-in tests configure.
pub const OIDC_CLIENT_ID: &str = "switchboard";
/// A client whose ID tokens are ES256 and which authenticates with `client_secret_post`.
pub const OIDC_ES256_CLIENT_ID: &str = "switchboard-es";
/// Another client of the same provider (its tokens are not for [`OIDC_CLIENT_ID`]).
pub const OIDC_OTHER_CLIENT_ID: &str = "other-client";

/// A running provider; killed on drop.
#[derive(Debug)]
pub struct OidcPeer {
    /// `http://127.0.0.1:P` (no trailing slash), exactly as the provider publishes it.
    pub issuer: String,
    /// [`OIDC_CLIENT_ID`].
    pub client_id: String,
    /// Every client's secret.
    pub secret: String,
    /// The first of the clients' redirect URIs ([`OidcPeer::drive_login`] stops when
    /// one is reached).
    pub redirect_uri: String,
    /// All of them.
    pub redirect_uris: Vec<String>,
    /// The process.
    pub process: PeerProcess,
}

/// Where the login ended: the redirect to the redirect URI and its parameters.
#[derive(Debug, Clone)]
pub struct OidcRedirect {
    /// The full redirect URL (with `code`, `state`, `iss`).
    pub url: String,
    /// Its query string.
    pub query: String,
    pub code: String,
    pub state: String,
}

/// `tests/peers/oidc`.
pub fn oidc_peer_dir() -> std::path::PathBuf {
    peers_dir().join("oidc")
}

/// How to start the provider.
#[derive(Debug, Clone, Default)]
pub struct OidcPeerOptions {
    /// The redirect URIs every client is registered with (e.g. a team server's
    /// callback); empty means one on a free port that nothing listens on.
    pub redirect_uris: Vec<String>,
    /// The account logged in when an authorization request has no `login_hint` (for a
    /// browser that cannot add one); `None` refuses such requests.
    pub default_account: Option<String>,
    /// Also the accounts `user1` … `userN` (`userK@example.com`, verified), for load
    /// benchmarks that sign many users in.
    pub numbered_users: usize,
}

/// Starts the provider on a free 127.0.0.1 port with the default options and waits
/// until it listens.
///
/// # Panics
/// If it cannot start, or does not listen within 30 s twice in a row.
pub async fn spawn_oidc_provider() -> OidcPeer {
    spawn_oidc_provider_with(OidcPeerOptions::default()).await
}

/// Starts the provider on a free 127.0.0.1 port with `options` and waits until it
/// listens.
///
/// # Panics
/// If it cannot start, or does not listen within 30 s twice in a row.
pub async fn spawn_oidc_provider_with(options: OidcPeerOptions) -> OidcPeer {
    ensure_peers();
    let secret = "oidc-test-secret".to_string();
    let mut redirect_uris = options.redirect_uris;
    if redirect_uris.is_empty() {
        redirect_uris.push(format!("http://127.0.0.1:{}/signin/callback", free_port()));
    }
    assert!(
        redirect_uris.iter().all(|u| !u.contains(' ')),
        "redirect URIs cannot contain spaces: {redirect_uris:?}"
    );
    // Twice at most, each on a fresh port: CI once saw the provider neither exit nor
    // listen within 30 s on a loaded machine (and pass at once on retry). A second
    // failure panics with what `/proc` says the process was doing.
    let mut tries = 0;
    let (port, process) = loop {
        tries += 1;
        let port = free_port();
        let mut command = Command::new("node");
        command
            .arg(oidc_peer_dir().join("provider.mjs"))
            .arg("--port")
            .arg(port.to_string())
            .current_dir(oidc_peer_dir())
            .env("OIDC_REDIRECT_URI", redirect_uris.join(" "))
            .env("OIDC_CLIENT_SECRET", &secret);
        if let Some(account) = &options.default_account {
            command.env("OIDC_DEFAULT_ACCOUNT", account);
        }
        if options.numbered_users > 0 {
            command.env("OIDC_NUMBERED_USERS", options.numbered_users.to_string());
        }
        let mut process = PeerProcess::spawn("oidc-provider", command);
        process.port = port;
        process.url = format!("http://127.0.0.1:{port}");
        match process.listens_within(port, Duration::from_secs(30)).await {
            Ok(()) => break (port, process),
            Err(why) if tries < 2 => {
                eprintln!("testkit: {why}\ntestkit: starting oidc-provider again on another port");
                process.kill();
            }
            Err(why) => panic!("{why}"),
        }
    };
    OidcPeer {
        issuer: format!("http://127.0.0.1:{port}"),
        client_id: OIDC_CLIENT_ID.into(),
        secret,
        redirect_uri: redirect_uris[0].clone(),
        redirect_uris,
        process,
    }
}

impl OidcPeer {
    /// Logs `account` in (`alice`, `bob`, `carol`, `dave`, `alice-next`) at `authorize_url`, as a
    /// browser whose user approves at once: adds `login_hint=<account>`, follows the
    /// redirects (at most 20) keeping cookies, and returns the redirect to a redirect
    /// URI (without following it).
    ///
    /// # Panics
    /// If the provider answers with anything but redirects, or never reaches the
    /// redirect URI.
    pub async fn drive_login(&self, authorize_url: &str, account: &str) -> OidcRedirect {
        self.follow(authorize_url, Some(account)).await
    }

    /// Like [`OidcPeer::drive_login`] without a `login_hint`, as a browser would: the
    /// provider logs in [`OidcPeerOptions::default_account`].
    ///
    /// # Panics
    /// As [`OidcPeer::drive_login`], and when no default account was given.
    pub async fn drive_default_login(&self, authorize_url: &str) -> OidcRedirect {
        self.follow(authorize_url, None).await
    }

    async fn follow(&self, authorize_url: &str, account: Option<&str>) -> OidcRedirect {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let mut url = reqwest::Url::parse(authorize_url).unwrap();
        if let Some(account) = account {
            url.query_pairs_mut().append_pair("login_hint", account);
        }
        let account = account.unwrap_or("the default account");
        let mut jar: BTreeMap<String, String> = BTreeMap::new();
        for _ in 0..20 {
            let mut req = client.get(url.clone());
            if !jar.is_empty() {
                let cookie = jar
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join("; ");
                req = req.header("cookie", cookie);
            }
            let resp = req.send().await.unwrap();
            for value in resp.headers().get_all("set-cookie") {
                let pair = value.to_str().unwrap().split(';').next().unwrap();
                if let Some((k, v)) = pair.split_once('=') {
                    if v.is_empty() {
                        jar.remove(k.trim());
                    } else {
                        jar.insert(k.trim().to_string(), v.to_string());
                    }
                }
            }
            let status = resp.status();
            let Some(location) = resp.headers().get("location") else {
                let body = resp.text().await.unwrap_or_default();
                panic!("the provider answered {status} without a redirect at {url}: {body}");
            };
            let next = url.join(location.to_str().unwrap()).unwrap();
            if self
                .redirect_uris
                .iter()
                .any(|r| next.as_str().starts_with(r.as_str()))
            {
                let param = |name: &str| {
                    next.query_pairs()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.into_owned())
                        .unwrap_or_else(|| panic!("no `{name}` in the redirect {next}"))
                };
                return OidcRedirect {
                    url: next.to_string(),
                    query: next.query().unwrap_or("").to_string(),
                    code: param("code"),
                    state: param("state"),
                };
            }
            url = next;
        }
        panic!(
            "the login for {account} did not reach {} within 20 redirects",
            self.redirect_uri
        );
    }

    /// Exchanges `code` (issued for [`OidcPeer::redirect_uri`]) at the token endpoint as
    /// `client_id` (client_secret_basic for `switchboard` and `other-client`,
    /// client_secret_post for `switchboard-es`), as a test playing a client would, and
    /// returns the token endpoint's JSON answer.
    ///
    /// # Panics
    /// If the request fails or the answer is not JSON.
    pub async fn exchange_code(
        &self,
        client_id: &str,
        code: &str,
        verifier: &str,
    ) -> serde_json::Value {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.redirect_uri.as_str()),
            ("code_verifier", verifier),
        ];
        let mut req = client.post(format!("{}/token", self.issuer));
        if client_id == OIDC_ES256_CLIENT_ID {
            form.push(("client_id", client_id));
            form.push(("client_secret", self.secret.as_str()));
        } else {
            req = req.basic_auth(client_id, Some(&self.secret));
        }
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", url_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        req.header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
