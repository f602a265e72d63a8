//! Team sign-in against a real OpenID provider (npm `oidc-provider`, tests/peers/oidc):
//! two instances on one PostgreSQL database behind one public origin, the login started
//! on one and completed on the other (the login in flight is in the store, taken once);
//! the cookie's flags; the policy (a domain outside the allowed ones is refused, the
//! admin list makes admins); an unverified email and the provider's refusal sign nobody
//! in; a replayed callback, and a callback in a browser that did not start the login
//! (login CSRF), are refused. The same suite on SQLite with one instance. A user is the
//! provider's account (issuer + `sub`): an email the provider gives to another account
//! signs that account in as a new user with none of the first one's servers.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use reqwest::Method;
use team_support::{
    Browser, COOKIE, Db, Instance, InstanceOptions, oidc_provider_for, sign_in_options,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_started_on_one_instance_completes_on_the_other_postgres() {
    signs_in(Db::postgres(), 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_on_sqlite_with_one_instance() {
    signs_in(Db::sqlite(), 1).await;
}

/// Where a response sends the browser, and the session cookie it sets, if any.
fn redirect_and_cookie(r: &reqwest::Response) -> (Option<String>, Option<String>) {
    let location = r
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned());
    let cookie = set_cookie(r, COOKIE).filter(|c| !c.starts_with(&format!("{COOKIE}=;")));
    (location, cookie)
}

/// The `Set-Cookie` header for cookie `name`, if any.
fn set_cookie(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with(&format!("{name}=")))
}

/// Starts a login at `base`: the issuer's URL and the login cookie (`name=value`).
async fn start_login(anonymous: &Browser, base: &str, path: &str) -> (String, String) {
    let r = anonymous
        .request(Method::GET, base, path)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "{:?}", r.headers());
    assert_eq!(set_cookie(&r, COOKIE), None, "no session before sign-in");
    let login = set_cookie(&r, LOGIN_COOKIE).expect("a login cookie");
    for flag in ["HttpOnly", "SameSite=Lax", "Max-Age=600"] {
        assert!(login.contains(flag), "{flag}: {login}");
    }
    let pair = login.split(';').next().unwrap().to_owned();
    (r.headers()["location"].to_str().unwrap().to_owned(), pair)
}

/// Delivers the issuer's redirect to `base`'s callback, with `login_cookie` if any.
async fn callback(
    anonymous: &Browser,
    base: &str,
    query: &str,
    login_cookie: Option<&str>,
) -> reqwest::Response {
    let mut r = anonymous.request(Method::GET, base, &format!("/auth/callback?{query}"));
    if let Some(c) = login_cookie {
        r = r.header("Cookie", c);
    }
    r.send().await.unwrap()
}

const LOGIN_COOKIE: &str = "switchboard_login";

async fn signs_in(db: Db, n: usize) {
    // The instances sit behind one public origin (a reverse proxy's): the redirect URI
    // registered at the issuer is on it; the test delivers each request to an instance.
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let peer = oidc_provider_for(&format!("{origin}/auth/callback")).await;
    let mut apps = Vec::new();
    for _ in 0..n {
        apps.push(
            Instance::start(
                &db,
                InstanceOptions {
                    public_origin: Some(origin.clone()),
                    sign_in: Some(sign_in_options(&peer, "alice@example.com")),
                    ..Default::default()
                },
            )
            .await,
        );
    }
    let at = |i: usize| apps[i % n].base.as_str();
    let anonymous = Browser::new(&origin, None);

    // Started on instance 0: a redirect to the issuer and a login cookie, no session.
    let (authorize, login) = start_login(&anonymous, at(0), "/auth/login?return=/servers").await;
    assert!(authorize.starts_with(&peer.issuer), "{authorize}");
    assert!(
        authorize.contains("code_challenge_method=S256"),
        "{authorize}"
    );
    let back = peer.drive_login(&authorize, "alice").await;
    assert!(
        back.url.starts_with(&format!("{origin}/auth/callback?")),
        "{}",
        back.url
    );

    // The same callback URL opened in a browser that did not start the login (login
    // CSRF: someone else's code and state): refused, and the login is not used up.
    let r = callback(&anonymous, at(1), &back.query, None).await;
    assert_eq!(
        (r.status().as_u16(), redirect_and_cookie(&r).1),
        (400, None)
    );
    let r = callback(
        &anonymous,
        at(1),
        &back.query,
        Some("switchboard_login=another-state"),
    )
    .await;
    assert_eq!(
        (r.status().as_u16(), redirect_and_cookie(&r).1),
        (400, None)
    );

    // Completed on instance 1 (the same one when there is one) by the browser that began it.
    let r = callback(&anonymous, at(1), &back.query, Some(&login)).await;
    let status = r.status();
    let (location, cookie) = redirect_and_cookie(&r);
    let cleared = set_cookie(&r, LOGIN_COOKIE).unwrap();
    assert!(
        cleared.starts_with("switchboard_login=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    assert_eq!(status, 303, "{:?}", r.text().await);
    assert_eq!(location.as_deref(), Some("/servers"));
    let cookie = cookie.expect("a session cookie");
    let value = cookie
        .strip_prefix(&format!("{COOKIE}="))
        .and_then(|rest| rest.split(';').next())
        .unwrap()
        .to_owned();
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age="] {
        assert!(cookie.contains(flag), "{flag} missing: {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "http origin: no Secure ({cookie})"
    );
    assert!(!value.is_empty());

    // The session works on every instance.
    let alice = Browser::new(&origin, Some(&value));
    for i in 0..2 {
        let (status, v) = alice.get(at(i), "/api/me").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            v,
            serde_json::json!({"email": "alice@example.com", "name": "Alice Example", "admin": true})
        );
    }

    // The same callback again (on the first instance), login cookie and all: the login
    // was taken once.
    let r = callback(&anonymous, at(0), &back.query, Some(&login)).await;
    let (_, cookie) = redirect_and_cookie(&r);
    assert_eq!((r.status().as_u16(), cookie), (400, None));
    let body = r.text().await.unwrap();
    assert!(body.contains("already used"), "{body}");

    // Who the policy refuses, whose email is unverified, whom the provider refused:
    // nobody signed in, whatever instance.
    for (i, account, want) in [(0, "bob", 403), (1, "carol", 502)] {
        let (authorize, login) = start_login(&anonymous, at(i), "/auth/login").await;
        let back = peer.drive_login(&authorize, account).await;
        let r = callback(&anonymous, at(i + 1), &back.query, Some(&login)).await;
        let (_, cookie) = redirect_and_cookie(&r);
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert_eq!((status, cookie), (want, None), "{account}: {body}");
        if account == "bob" {
            assert!(
                body.contains("bob@other.org") && body.contains("other.org"),
                "{body}"
            );
        }
    }
    // A browser navigating to the callback (it asks for HTML) is told on a page, under
    // the pages' CSP, with no script; still no session.
    let (authorize, login) = start_login(&anonymous, at(0), "/auth/login").await;
    let back = peer.drive_login(&authorize, "bob").await;
    let r = anonymous
        .request(
            Method::GET,
            at(1),
            &format!("/auth/callback?{}", back.query),
        )
        .header("Cookie", &login)
        .header("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert!(set_cookie(&r, "switchboard_session").is_none());
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "{:?}",
        r.headers()
    );
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    let page = r.text().await.unwrap();
    assert!(
        page.contains("You cannot sign in")
            && page.contains("bob@other.org")
            && !page.contains("<script"),
        "{page}"
    );
    let (authorize, login) = start_login(&anonymous, at(1), "/auth/login").await;
    let state = url::Url::parse(&authorize)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let r = callback(
        &anonymous,
        at(0),
        &format!("state={state}&error=access_denied&error_description=no"),
        Some(&login),
    )
    .await;
    let (_, cookie) = redirect_and_cookie(&r);
    assert_eq!((r.status().as_u16(), cookie), (403, None));

    // Signed out on one instance: signed out on all.
    let (status, _) = alice
        .send(alice.request(Method::POST, at(1), "/auth/logout"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(alice.get(at(0), "/api/me").await.0, 401);
    for app in apps {
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_the_issuer_gives_to_another_account_reaches_nothing_of_the_first_postgres() {
    reassigned_email(Db::postgres()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_the_issuer_gives_to_another_account_reaches_nothing_of_the_first_sqlite() {
    reassigned_email(Db::sqlite()).await;
}

/// Signs `account` in at `base` through the provider; the session cookie's value.
async fn provider_sign_in(
    anonymous: &Browser,
    base: &str,
    peer: &switchboard_testkit::OidcPeer,
    account: &str,
) -> String {
    let (authorize, login) = start_login(anonymous, base, "/auth/login").await;
    let back = peer.drive_login(&authorize, account).await;
    let r = callback(anonymous, base, &back.query, Some(&login)).await;
    let status = r.status();
    let (_, cookie) = redirect_and_cookie(&r);
    assert_eq!(status, 303, "{account}: {:?}", r.text().await);
    cookie
        .expect("a session cookie")
        .strip_prefix(&format!("{COOKIE}="))
        .and_then(|rest| rest.split(';').next())
        .unwrap()
        .to_owned()
}

/// The user is the provider's account (issuer + `sub`), not its email: alice signs in
/// and adds a server with a secret header; the provider then gives alice@example.com to
/// another account (`alice-next`, same verified email, another `sub`), which signs in as
/// a new user and sees none of alice's servers, while alice keeps hers.
async fn reassigned_email(db: Db) {
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let peer = oidc_provider_for(&format!("{origin}/auth/callback")).await;
    let app = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(origin.clone()),
            sign_in: Some(sign_in_options(&peer, "bob@other.org")),
            ..Default::default()
        },
    )
    .await;
    let anonymous = Browser::new(&origin, None);

    let alice = Browser::new(
        &origin,
        Some(&provider_sign_in(&anonymous, &app.base, &peer, "alice").await),
    );
    let secret = "Bearer alice-only-7f3a";
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers",
            &serde_json::json!({"name": "alices", "url": "http://127.0.0.1:9/mcp",
                                "headers": {"Authorization": secret}}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let (_, mine) = alice.get(&app.base, "/api/servers").await;
    assert_eq!(mine["servers"][0]["name"], "alices", "{mine}");

    let next = Browser::new(
        &origin,
        Some(&provider_sign_in(&anonymous, &app.base, &peer, "alice-next").await),
    );
    let (status, me) = next.get(&app.base, "/api/me").await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(
        me,
        serde_json::json!({"email": "alice@example.com", "name": "Alice Next", "admin": false})
    );
    let (status, theirs) = next.get(&app.base, "/api/servers").await;
    assert_eq!(status, 200, "{theirs}");
    assert_eq!(
        theirs["servers"],
        serde_json::json!([]),
        "the account the email went to sees alice's servers: {theirs}"
    );
    let (status, v) = next.delete(&app.base, "/api/servers/alices").await;
    assert_eq!(status, 404, "{v}");

    // Alice is still alice, with her server, after the other account signed in; and
    // signing in again brings her back to it.
    let (_, mine) = alice.get(&app.base, "/api/servers").await;
    assert_eq!(mine["servers"][0]["name"], "alices", "{mine}");
    let again = Browser::new(
        &origin,
        Some(&provider_sign_in(&anonymous, &app.base, &peer, "alice").await),
    );
    let (_, mine) = again.get(&app.base, "/api/servers").await;
    assert_eq!(mine["servers"][0]["name"], "alices", "{mine}");
    let (_, me) = again.get(&app.base, "/api/me").await;
    assert_eq!(me["name"], "Alice Example", "{me}");
    app.stop().await;
}
