//! [`UserStore`]: one user's data — MCP servers (HTTP or SSE only), OAuth tokens per
//! server (with a lease so that one instance at a time refreshes them), the model API key. Every query here is written against `self.user`: there is
//! no way to name another user's rows through this type, and no other type reaches these
//! tables. Secrets are sealed for their exact row (user, server or provider).

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::account::{UserId, now, random_token};
use crate::error::{Result, StoreError};
use crate::seal::Secret;
use crate::store::{MODEL_KEY, OAUTH_TOKENS, SERVER_HEADERS, Store};

/// How Switchboard talks to a user's server. Team mode has no stdio for users: a browser
/// user never makes the server run a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP.
    Http,
    /// Legacy HTTP + SSE.
    Sse,
}

impl Transport {
    /// `http` or `sse`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Sse => "sse",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        match s {
            "http" => Ok(Self::Http),
            "sse" => Ok(Self::Sse),
            other => Err(StoreError::Invalid(format!(
                "stored transport `{other}` is not http or sse"
            ))),
        }
    }
}

/// One of a user's MCP servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRecord {
    /// The name, unique per user.
    pub name: String,
    /// The endpoint (`http://` or `https://`).
    pub url: String,
    /// Streamable HTTP or SSE.
    pub transport: Transport,
    /// Extra request headers (values sealed at rest).
    pub headers: BTreeMap<String, Secret>,
    /// Whether the user's chats use it.
    pub enabled: bool,
}

/// A user's OAuth tokens for one server, as the caller serialised them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTokens {
    /// The token set (e.g. JSON with access and refresh tokens), sealed at rest.
    pub tokens: Secret,
    /// When the access token expires (unix seconds), if known.
    pub expires_at: Option<i64>,
    /// When they were saved (unix seconds).
    pub updated_at: i64,
}

/// A claim on refreshing one server's tokens, from [`UserStore::begin_refresh`]. Spend it
/// with [`UserStore::finish_refresh`] or [`UserStore::abandon_refresh`]; a claim that is
/// dropped runs out at the end of its lease.
#[derive(Debug, PartialEq, Eq)]
pub struct RefreshLease {
    server: String,
    holder: String,
}

/// A user's own model API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelKey {
    /// The provider it is for (e.g. `gemini`, `openai`).
    pub provider: String,
    /// The key, sealed at rest.
    pub key: Secret,
}

/// One user's data. Made by [`Store::for_user`] from a [`UserId`] the store issued; owns
/// a clone of the store (cheap), so it can move into a spawned task.
#[derive(Debug, Clone)]
pub struct UserStore {
    pub(crate) store: Store,
    pub(crate) user: UserId,
}

impl Store {
    /// The data of `user`, and nobody else's.
    pub fn for_user(&self, user: &UserId) -> UserStore {
        UserStore {
            store: self.clone(),
            user: user.clone(),
        }
    }
}

const MAX_NAME: usize = 100;

fn check_server(server: &ServerRecord) -> Result<()> {
    let name = &server.name;
    if name.is_empty()
        || name.len() > MAX_NAME
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(StoreError::Invalid(format!(
            "server name `{name}`: use 1 to {MAX_NAME} letters, digits, `-`, `_` or `.`"
        )));
    }
    let scheme_ok = url::Url::parse(&server.url)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
    if !scheme_ok {
        return Err(StoreError::Invalid(format!(
            "server `{name}`: the URL must be an http:// or https:// address"
        )));
    }
    Ok(())
}

pub(crate) fn text_of(plain: Vec<u8>, table: &'static str, column: &'static str) -> Result<String> {
    String::from_utf8(plain).map_err(|_| StoreError::Unseal {
        table,
        column,
        reason: "it is not text",
    })
}

impl UserStore {
    /// Whose data this is.
    pub fn user(&self) -> &UserId {
        &self.user
    }

    pub(crate) fn uid(&self) -> String {
        self.user.0.clone()
    }

    fn server_from(&self, row: &AnyRow) -> Result<ServerRecord> {
        let get = || StoreError::query("reading a server");
        let name: String = row.try_get(0).map_err(get())?;
        let transport: String = row.try_get(2).map_err(get())?;
        let sealed: Option<Vec<u8>> = row.try_get(3).map_err(get())?;
        let enabled: i64 = row.try_get(4).map_err(get())?;
        let headers = match sealed {
            None => BTreeMap::new(),
            Some(sealed) => {
                let slot = SERVER_HEADERS.slot(&self.user.0, &name);
                let (plain, _) = self.store.keys()?.open(&slot, &sealed)?;
                let json = text_of(plain, SERVER_HEADERS.table, SERVER_HEADERS.column)?;
                decode_headers(&json)?
            }
        };
        Ok(ServerRecord {
            url: row.try_get(1).map_err(get())?,
            transport: Transport::parse(&transport)?,
            headers,
            enabled: enabled != 0,
            name,
        })
    }

    /// The user's servers, by name.
    ///
    /// # Errors
    /// A database failure, or headers that do not open.
    pub async fn servers(&self) -> Result<Vec<ServerRecord>> {
        let rows = sqlx::query(
            "SELECT name, url, transport, headers, enabled FROM mcp_servers \
             WHERE user_id = $1 ORDER BY name",
        )
        .bind(self.uid())
        .fetch_all(&self.store.pool)
        .await
        .map_err(StoreError::query("listing servers"))?;
        rows.iter().map(|r| self.server_from(r)).collect()
    }

    /// One of the user's servers.
    ///
    /// # Errors
    /// A database failure, or headers that do not open.
    pub async fn server(&self, name: &str) -> Result<Option<ServerRecord>> {
        let row = sqlx::query(
            "SELECT name, url, transport, headers, enabled FROM mcp_servers \
             WHERE user_id = $1 AND name = $2",
        )
        .bind(self.uid())
        .bind(name.to_owned())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("reading a server"))?;
        row.map(|r| self.server_from(&r)).transpose()
    }

    /// Add or replace a server. When its URL changes, its saved OAuth tokens are deleted
    /// (they were issued for the old address).
    ///
    /// # Errors
    /// A bad name or URL, no secret key (when there are headers), or a database failure.
    pub async fn put_server(&self, server: &ServerRecord) -> Result<()> {
        check_server(server)?;
        let headers = if server.headers.is_empty() {
            None
        } else {
            let json = encode_headers(&server.headers);
            let slot = SERVER_HEADERS.slot(&self.user.0, &server.name);
            Some(self.store.keys()?.seal(&slot, json.as_bytes())?)
        };
        let t = now();
        let mut tx = self
            .store
            .pool
            .begin()
            .await
            .map_err(StoreError::query("saving a server"))?;
        let old_url: Option<String> =
            sqlx::query("SELECT url FROM mcp_servers WHERE user_id = $1 AND name = $2")
                .bind(self.uid())
                .bind(server.name.clone())
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::query("saving a server"))?
                .map(|r| r.try_get(0))
                .transpose()
                .map_err(StoreError::query("saving a server"))?;
        if old_url.as_ref().is_some_and(|u| *u != server.url) {
            sqlx::query("DELETE FROM oauth_tokens WHERE user_id = $1 AND server_name = $2")
                .bind(self.uid())
                .bind(server.name.clone())
                .execute(&mut *tx)
                .await
                .map_err(StoreError::query("dropping tokens for a server's old URL"))?;
        }
        sqlx::query(
            "INSERT INTO mcp_servers (user_id, name, url, transport, headers, enabled, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
             ON CONFLICT (user_id, name) DO UPDATE SET url = excluded.url, \
             transport = excluded.transport, headers = excluded.headers, \
             enabled = excluded.enabled, updated_at = excluded.updated_at",
        )
        .bind(self.uid())
        .bind(server.name.clone())
        .bind(server.url.clone())
        .bind(server.transport.as_str())
        .bind(headers)
        .bind(i64::from(server.enabled))
        .bind(t)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("saving a server"))?;
        tx.commit()
            .await
            .map_err(StoreError::query("saving a server"))?;
        Ok(())
    }

    /// Remove a server and its tokens. Says whether it existed.
    ///
    /// # Errors
    /// A database failure.
    pub async fn remove_server(&self, name: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM mcp_servers WHERE user_id = $1 AND name = $2")
            .bind(self.uid())
            .bind(name.to_owned())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("removing a server"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Save the user's OAuth tokens for one of their servers (after a login). Cancels any
    /// refresh in flight: its result will not be written.
    ///
    /// # Errors
    /// No such server for this user, no secret key, or a database failure.
    pub async fn put_oauth_tokens(
        &self,
        server: &str,
        tokens: &Secret,
        expires_at: Option<i64>,
    ) -> Result<()> {
        let slot = OAUTH_TOKENS.slot(&self.user.0, server);
        let sealed = self.store.keys()?.seal(&slot, tokens.expose().as_bytes())?;
        // Written only where the server is this user's (the INSERT … SELECT finds nothing
        // otherwise), so the error below names the missing server, not a constraint.
        let done = sqlx::query(
            "INSERT INTO oauth_tokens (user_id, server_name, tokens, expires_at, updated_at) \
             SELECT user_id, name, $3, $4, $5 FROM mcp_servers WHERE user_id = $1 AND name = $2 \
             ON CONFLICT (user_id, server_name) DO UPDATE SET tokens = excluded.tokens, \
             expires_at = excluded.expires_at, updated_at = excluded.updated_at, \
             refresh_holder = NULL, refresh_until = NULL",
        )
        .bind(self.uid())
        .bind(server.to_owned())
        .bind(sealed)
        .bind(expires_at)
        .bind(now())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving OAuth tokens"))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Invalid(format!(
                "no server `{server}` to save tokens for: add the server first"
            )));
        }
        Ok(())
    }

    /// The user's OAuth tokens for one of their servers.
    ///
    /// # Errors
    /// No secret key, tokens that do not open, or a database failure.
    pub async fn oauth_tokens(&self, server: &str) -> Result<Option<StoredTokens>> {
        let Some(row) = sqlx::query(
            "SELECT tokens, expires_at, updated_at FROM oauth_tokens \
             WHERE user_id = $1 AND server_name = $2",
        )
        .bind(self.uid())
        .bind(server.to_owned())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("reading OAuth tokens"))?
        else {
            return Ok(None);
        };
        let get = || StoreError::query("reading OAuth tokens");
        let sealed: Vec<u8> = row.try_get(0).map_err(get())?;
        let slot = OAUTH_TOKENS.slot(&self.user.0, server);
        let (plain, _) = self.store.keys()?.open(&slot, &sealed)?;
        Ok(Some(StoredTokens {
            tokens: Secret::new(text_of(plain, OAUTH_TOKENS.table, OAUTH_TOKENS.column)?),
            expires_at: row.try_get(1).map_err(get())?,
            updated_at: row.try_get(2).map_err(get())?,
        }))
    }

    /// Claim the refresh of this server's tokens for `lease` (how long the refresh may
    /// take). `None` when another instance holds an unexpired claim: wait, then read the
    /// tokens it wrote with [`UserStore::oauth_tokens`]. Only one claim exists per row at a
    /// time on any number of instances, so a rotating refresh token is spent once.
    ///
    /// # Errors
    /// A database failure.
    pub async fn begin_refresh(
        &self,
        server: &str,
        lease: Duration,
    ) -> Result<Option<RefreshLease>> {
        let holder = random_token(16)?;
        let t = now();
        let done = sqlx::query(
            "UPDATE oauth_tokens SET refresh_holder = $3, refresh_until = $4 \
             WHERE user_id = $1 AND server_name = $2 \
             AND (refresh_until IS NULL OR refresh_until <= $5)",
        )
        .bind(self.uid())
        .bind(server.to_owned())
        .bind(holder.clone())
        .bind(t.saturating_add(i64::try_from(lease.as_secs()).unwrap_or(i64::MAX)))
        .bind(t)
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("claiming a token refresh"))?;
        Ok((done.rows_affected() == 1).then(|| RefreshLease {
            server: server.to_owned(),
            holder,
        }))
    }

    /// Write the refreshed tokens and release the claim. `false` (nothing written) when the
    /// claim was lost meanwhile: it ran out and another instance took it, or a new login
    /// replaced the tokens.
    ///
    /// # Errors
    /// No secret key, or a database failure.
    pub async fn finish_refresh(
        &self,
        lease: RefreshLease,
        tokens: &Secret,
        expires_at: Option<i64>,
    ) -> Result<bool> {
        let slot = OAUTH_TOKENS.slot(&self.user.0, &lease.server);
        let sealed = self.store.keys()?.seal(&slot, tokens.expose().as_bytes())?;
        let done = sqlx::query(
            "UPDATE oauth_tokens SET tokens = $3, expires_at = $4, updated_at = $5, \
             refresh_holder = NULL, refresh_until = NULL \
             WHERE user_id = $1 AND server_name = $2 AND refresh_holder = $6",
        )
        .bind(self.uid())
        .bind(lease.server)
        .bind(sealed)
        .bind(expires_at)
        .bind(now())
        .bind(lease.holder)
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving refreshed tokens"))?;
        Ok(done.rows_affected() == 1)
    }

    /// Release a claim without writing (the refresh failed), so another instance may try
    /// at once.
    ///
    /// # Errors
    /// A database failure.
    pub async fn abandon_refresh(&self, lease: RefreshLease) -> Result<()> {
        sqlx::query(
            "UPDATE oauth_tokens SET refresh_holder = NULL, refresh_until = NULL \
             WHERE user_id = $1 AND server_name = $2 AND refresh_holder = $3",
        )
        .bind(self.uid())
        .bind(lease.server)
        .bind(lease.holder)
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("releasing a token refresh"))?;
        Ok(())
    }

    /// Forget the user's OAuth tokens for a server (logout). Says whether there were any.
    ///
    /// # Errors
    /// A database failure.
    pub async fn remove_oauth_tokens(&self, server: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM oauth_tokens WHERE user_id = $1 AND server_name = $2")
            .bind(self.uid())
            .bind(server.to_owned())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("removing OAuth tokens"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Save the user's model API key (replacing any previous one).
    ///
    /// # Errors
    /// An empty provider, no secret key, or a database failure.
    pub async fn put_model_key(&self, provider: &str, key: &Secret) -> Result<()> {
        if provider.is_empty() {
            return Err(StoreError::Invalid("the model provider is empty".into()));
        }
        let slot = MODEL_KEY.slot(&self.user.0, provider);
        let sealed = self.store.keys()?.seal(&slot, key.expose().as_bytes())?;
        sqlx::query(
            "INSERT INTO model_keys (user_id, provider, api_key, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (user_id) DO UPDATE SET provider = excluded.provider, \
             api_key = excluded.api_key, updated_at = excluded.updated_at",
        )
        .bind(self.uid())
        .bind(provider.to_owned())
        .bind(sealed)
        .bind(now())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving the model API key"))?;
        Ok(())
    }

    /// The user's model API key, if set.
    ///
    /// # Errors
    /// No secret key, a key that does not open, or a database failure.
    pub async fn model_key(&self) -> Result<Option<ModelKey>> {
        let Some(row) = sqlx::query("SELECT provider, api_key FROM model_keys WHERE user_id = $1")
            .bind(self.uid())
            .fetch_optional(&self.store.pool)
            .await
            .map_err(StoreError::query("reading the model API key"))?
        else {
            return Ok(None);
        };
        let get = || StoreError::query("reading the model API key");
        let provider: String = row.try_get(0).map_err(get())?;
        let sealed: Vec<u8> = row.try_get(1).map_err(get())?;
        let (plain, _) = self
            .store
            .keys()?
            .open(&MODEL_KEY.slot(&self.user.0, &provider), &sealed)?;
        Ok(Some(ModelKey {
            key: Secret::new(text_of(plain, MODEL_KEY.table, MODEL_KEY.column)?),
            provider,
        }))
    }

    /// Forget the user's model API key. Says whether there was one.
    ///
    /// # Errors
    /// A database failure.
    pub async fn remove_model_key(&self) -> Result<bool> {
        let done = sqlx::query("DELETE FROM model_keys WHERE user_id = $1")
            .bind(self.uid())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("removing the model API key"))?;
        Ok(done.rows_affected() > 0)
    }
}

/// Headers as a JSON object (names to values).
fn encode_headers(headers: &BTreeMap<String, Secret>) -> String {
    let map: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.expose().to_owned())))
        .collect();
    serde_json::Value::Object(map).to_string()
}

fn decode_headers(json: &str) -> Result<BTreeMap<String, Secret>> {
    let bad = || StoreError::Unseal {
        table: SERVER_HEADERS.table,
        column: SERVER_HEADERS.column,
        reason: "it is not a JSON object of strings",
    };
    let value: serde_json::Value = serde_json::from_str(json).map_err(|_| bad())?;
    let serde_json::Value::Object(map) = value else {
        return Err(bad());
    };
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, Secret::new(s))),
            _ => Err(bad()),
        })
        .collect()
}
