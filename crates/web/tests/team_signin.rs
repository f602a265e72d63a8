//! Team sign-in against a real OpenID provider (npm `oidc-provider`, tests/peers/oidc):
//! two instances on one PostgreSQL database behind one public origin, the login started
//! on one and completed on the other (the login in flight is in the store, taken once);
//! the cookie's flags; the policy (a domain outside the allowed ones is refused, the
//! admin list makes admins); an unverified email and the provider's refusal sign nobody
//! in; a replayed callback is refused. The same suite on SQLite with one instance.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

mod team_support;

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
    let cookie = r
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_owned());
    (location, cookie)
}

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

    // Started on instance 0: a redirect to the issuer, nothing set on the browser.
    let r = anonymous
        .request(Method::GET, at(0), "/auth/login?return=/servers")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "{:?}", r.headers());
    let (location, cookie) = redirect_and_cookie(&r);
    let authorize = location.unwrap();
    assert!(authorize.starts_with(&peer.issuer), "{authorize}");
    assert!(
        authorize.contains("code_challenge_method=S256"),
        "{authorize}"
    );
    assert_eq!(cookie, None);
    let back = peer.drive_login(&authorize, "alice").await;
    assert!(
        back.url.starts_with(&format!("{origin}/auth/callback?")),
        "{}",
        back.url
    );

    // Completed on instance 1 (the same one when there is one).
    let r = anonymous
        .request(
            Method::GET,
            at(1),
            &format!("/auth/callback?{}", back.query),
        )
        .send()
        .await
        .unwrap();
    let status = r.status();
    let (location, cookie) = redirect_and_cookie(&r);
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

    // The same callback again (on the first instance): the login was taken once.
    let r = anonymous
        .request(
            Method::GET,
            at(0),
            &format!("/auth/callback?{}", back.query),
        )
        .send()
        .await
        .unwrap();
    let (_, cookie) = redirect_and_cookie(&r);
    assert_eq!((r.status().as_u16(), cookie), (400, None));

    // Who the policy refuses, whose email is unverified, whom the provider refused:
    // nobody signed in, whatever instance.
    for (i, account, want) in [(0, "bob", 403), (1, "carol", 502)] {
        let r = anonymous
            .request(Method::GET, at(i), "/auth/login")
            .send()
            .await
            .unwrap();
        let (location, _) = redirect_and_cookie(&r);
        let back = peer.drive_login(&location.unwrap(), account).await;
        let r = anonymous
            .request(
                Method::GET,
                at(i + 1),
                &format!("/auth/callback?{}", back.query),
            )
            .send()
            .await
            .unwrap();
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
    let r = anonymous
        .request(Method::GET, at(1), "/auth/login")
        .send()
        .await
        .unwrap();
    let (location, _) = redirect_and_cookie(&r);
    let state = url::Url::parse(&location.unwrap())
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let r = anonymous
        .request(
            Method::GET,
            at(0),
            &format!("/auth/callback?state={state}&error=access_denied&error_description=no"),
        )
        .send()
        .await
        .unwrap();
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
