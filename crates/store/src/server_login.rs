//! A user's OAuth login to one of their MCP servers while the browser is at the
//! authorization server (the popup): created by [`UserStore::start_server_login`] with a
//! fresh `state` and PKCE verifier, taken once by [`UserStore::take_server_login`] on any
//! instance. The row is found by the SHA-256 of `state` *and* the user it belongs to, so a
//! callback arriving with another user's session finds nothing and leaves the login in
//! place. The verifier is sealed for its exact row; the client details are not secret.
//! A login is bound to the user, the server name and the URL the server had when it
//! began (a `catalog` flag marks a login to a catalog server), and lives for the `ttl`
//! the caller gives (team mode: 10 minutes).
//!
//! Must not: return a login to anyone but its user, or return one twice or after it
//! expired.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Row;

use crate::account::{hash_hex, now, random_token, secs};
use crate::error::{Result, StoreError};
use crate::seal::Secret;
use crate::store::SERVER_LOGIN_VERIFIER;
use crate::user_data::{ServerRef, UserStore};

/// The OAuth client a server login runs with (nothing secret: a public client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLoginClient {
    /// The client id (registered, configured or the fallback).
    pub client_id: String,
    /// The authorization server's token endpoint.
    pub token_url: String,
    /// The redirect URI the authorization request named (the code exchange repeats it).
    pub redirect_uri: String,
    /// The RFC 8707 resource, when the server published one.
    pub resource: Option<String>,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The authorization server's issuer identifier: an `iss` in the authorization
    /// response must equal it (RFC 9207, the mix-up defence).
    pub issuer: Option<String>,
    /// The authorization server promised `iss` in its responses
    /// (`authorization_response_iss_parameter_supported`): a response without it is
    /// refused.
    pub iss_required: bool,
}

/// What a server login is started for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewServerLogin {
    /// One of the user's servers.
    pub server_name: String,
    /// Its URL when the login began (the tokens are for that address only).
    pub server_url: String,
    /// The client.
    pub client: ServerLoginClient,
}

/// A started server login: the `state` for the authorization URL and the PKCE verifier
/// (its S256 challenge goes in the URL; the verifier itself stays in the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedServerLogin {
    /// The authorization request's `state` (only its hash is stored).
    pub state: String,
    /// The PKCE code verifier (43 characters, sealed at rest).
    pub verifier: Secret,
}

/// A server login taken back at the callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingServerLogin {
    /// The server it is for: one of the user's own, or a catalog server they enabled.
    pub server: ServerRef,
    /// The server's name (as in `server`).
    pub server_name: String,
    /// The server's URL when it began.
    pub server_url: String,
    /// The PKCE code verifier.
    pub verifier: Secret,
    /// The client.
    pub client: ServerLoginClient,
}

fn client_json(c: &ServerLoginClient) -> String {
    json!({
        "clientId": c.client_id,
        "tokenUrl": c.token_url,
        "redirectUri": c.redirect_uri,
        "resource": c.resource,
        "scopes": c.scopes,
        "issuer": c.issuer,
        "issRequired": c.iss_required,
    })
    .to_string()
}

fn client_from(text: &str) -> Result<ServerLoginClient> {
    let bad = || {
        StoreError::Invalid(
            "a stored server login's client is not the expected JSON: start the login again".into(),
        )
    };
    let v: Value = serde_json::from_str(text).map_err(|_| bad())?;
    let text_field = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Ok(ServerLoginClient {
        client_id: text_field("clientId").ok_or_else(bad)?,
        token_url: text_field("tokenUrl").ok_or_else(bad)?,
        redirect_uri: text_field("redirectUri").ok_or_else(bad)?,
        resource: text_field("resource"),
        scopes: v
            .get("scopes")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        issuer: text_field("issuer"),
        iss_required: v
            .get("issRequired")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

impl UserStore {
    /// Start a login to the user's server `login.server_name`, valid for `ttl`: a fresh
    /// `state` and PKCE verifier, stored (state hashed, verifier sealed) for this user.
    ///
    /// # Errors
    /// No such server for this user (or its URL changed since the caller read it), no
    /// secret key, or a database failure.
    pub async fn start_server_login(
        &self,
        login: &NewServerLogin,
        ttl: Duration,
    ) -> Result<StartedServerLogin> {
        self.start_login(login, false, ttl).await
    }

    /// [`UserStore::start_server_login`] for the catalog server `login.server_name`, which
    /// this user must have enabled, at the URL it is published at.
    ///
    /// # Errors
    /// No such catalog server enabled by this user (or its URL changed since the caller
    /// read it), no secret key, or a database failure.
    pub async fn start_catalog_login(
        &self,
        login: &NewServerLogin,
        ttl: Duration,
    ) -> Result<StartedServerLogin> {
        self.start_login(login, true, ttl).await
    }

    async fn start_login(
        &self,
        login: &NewServerLogin,
        catalog: bool,
        ttl: Duration,
    ) -> Result<StartedServerLogin> {
        let state = random_token(32)?;
        let verifier = random_token(32)?;
        let state_hash = hash_hex(&state);
        let sealed = self.store.keys()?.seal(
            &SERVER_LOGIN_VERIFIER.slot(&self.user.0, &state_hash),
            verifier.as_bytes(),
        )?;
        let t = now();
        // Written only while the server is this user's (or enabled by this user) at this URL.
        let sql = if catalog {
            "INSERT INTO pending_server_logins \
             (state_hash, user_id, server_name, server_url, verifier, client, created_at, expires_at, catalog) \
             SELECT $1, e.user_id, c.name, c.url, $5, $6, $7, $8, 1 FROM catalog_servers c \
             JOIN catalog_enablements e ON e.catalog_name = c.name \
             WHERE e.user_id = $2 AND c.name = $3 AND c.url = $4"
        } else {
            "INSERT INTO pending_server_logins \
             (state_hash, user_id, server_name, server_url, verifier, client, created_at, expires_at, catalog) \
             SELECT $1, user_id, name, url, $5, $6, $7, $8, 0 FROM mcp_servers \
             WHERE user_id = $2 AND name = $3 AND url = $4"
        };
        let done = sqlx::query(sql)
            .bind(state_hash)
            .bind(self.uid())
            .bind(login.server_name.clone())
            .bind(login.server_url.clone())
            .bind(sealed)
            .bind(client_json(&login.client))
            .bind(t)
            .bind(t.saturating_add(secs(ttl)))
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("saving a server login in flight"))?;
        if done.rows_affected() == 0 {
            let whose = if catalog {
                "enabled catalog server"
            } else {
                "server"
            };
            return Err(StoreError::Invalid(format!(
                "no {whose} `{}` at {} to log in to: reload the page and try again",
                login.server_name, login.server_url
            )));
        }
        Ok(StartedServerLogin {
            state,
            verifier: Secret::new(verifier),
        })
    }

    /// Take this user's server login for `state`: removed whether or not it expired,
    /// returned only if it had not. Another user's login, an unknown state or a second
    /// take find nothing — and another user's login stays in place for its owner.
    ///
    /// # Errors
    /// No secret key, a verifier that does not open, or a database failure.
    pub async fn take_server_login(&self, state: &str) -> Result<Option<PendingServerLogin>> {
        let state_hash = hash_hex(state);
        let Some(row) = sqlx::query(
            "DELETE FROM pending_server_logins WHERE state_hash = $1 AND user_id = $2 \
             RETURNING server_name, server_url, verifier, client, expires_at, catalog",
        )
        .bind(state_hash.clone())
        .bind(self.uid())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("taking a server login in flight"))?
        else {
            return Ok(None);
        };
        let get = || StoreError::query("reading a server login in flight");
        let server_name: String = row.try_get(0).map_err(get())?;
        let server_url: String = row.try_get(1).map_err(get())?;
        let sealed: Vec<u8> = row.try_get(2).map_err(get())?;
        let client: String = row.try_get(3).map_err(get())?;
        let expires_at: i64 = row.try_get(4).map_err(get())?;
        let catalog: i64 = row.try_get(5).map_err(get())?;
        if expires_at <= now() {
            return Ok(None);
        }
        let (plain, _) = self.store.keys()?.open(
            &SERVER_LOGIN_VERIFIER.slot(&self.user.0, &state_hash),
            &sealed,
        )?;
        let verifier = String::from_utf8(plain).map_err(|_| StoreError::Unseal {
            table: SERVER_LOGIN_VERIFIER.table,
            column: SERVER_LOGIN_VERIFIER.column,
            reason: "it is not text",
        })?;
        Ok(Some(PendingServerLogin {
            server: if catalog == 0 {
                ServerRef::own(&server_name)
            } else {
                ServerRef::catalog(&server_name)
            },
            server_name,
            server_url,
            verifier: Secret::new(verifier),
            client: client_from(&client)?,
        }))
    }
}
