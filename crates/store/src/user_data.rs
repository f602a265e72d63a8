//! [`UserStore`]: one user's data — MCP servers (HTTP or SSE only), OAuth tokens per
//! server (with a lease so that one instance at a time refreshes them), the model API key. Every query here is written against `self.user`: there is
//! no way to name another user's rows through this type, and no other type reaches these
//! tables. Secrets are sealed for their exact row (user, server or provider). Its
//! [`UserId`](crate::UserId) is made only by the store (a sign-in or a session), so a
//! `UserStore` exists only for a user the store vouched for.

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::account::{UserId, now, random_token};
use crate::error::{Result, StoreError};
use crate::seal::Secret;
use crate::store::{CATALOG_TOKENS, MODEL_KEY, OAUTH_TOKENS, SERVER_HEADERS, Store};

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

    pub(crate) fn parse(s: &str) -> Result<Self> {
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
    server: ServerRef,
    holder: String,
}

/// Which of a user's servers tokens are for: one of their own (`mcp_servers`) or a
/// catalog server they enabled. The two are separate namespaces (separate tables), so a
/// user's server and a catalog server of the same name never share a token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServerRef {
    /// The user's own server of this name.
    Own(String),
    /// The catalog server of this name.
    Catalog(String),
}

impl ServerRef {
    /// The user's own server `name`.
    pub fn own(name: &str) -> Self {
        Self::Own(name.to_owned())
    }

    /// The catalog server `name`.
    pub fn catalog(name: &str) -> Self {
        Self::Catalog(name.to_owned())
    }

    /// The name within its namespace.
    pub fn name(&self) -> &str {
        match self {
            Self::Own(n) | Self::Catalog(n) => n,
        }
    }

    /// Whether it is a catalog server.
    pub fn is_catalog(&self) -> bool {
        matches!(self, Self::Catalog(_))
    }
}

/// Where the tokens of a [`ServerRef`] live, and the row they must belong to.
struct TokenTable {
    sealed: crate::store::SealedColumn,
    /// The table whose row (this user + name) the tokens hang on.
    parent: &'static str,
    parent_name: &'static str,
}

impl TokenTable {
    fn of(server: &ServerRef) -> Self {
        match server {
            ServerRef::Own(_) => Self {
                sealed: OAUTH_TOKENS,
                parent: "mcp_servers",
                parent_name: "name",
            },
            ServerRef::Catalog(_) => Self {
                sealed: CATALOG_TOKENS,
                parent: "catalog_enablements",
                parent_name: "catalog_name",
            },
        }
    }
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

/// A server name (a user's or the catalog's): 1 to 100 letters, digits, `-`, `_`, `.`.
pub(crate) fn check_name(name: &str) -> Result<()> {
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
    Ok(())
}

/// An `http://` or `https://` address with a host.
pub(crate) fn is_web_url(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
}

fn check_server(server: &ServerRecord) -> Result<()> {
    let name = &server.name;
    check_name(name)?;
    let scheme_ok = is_web_url(&server.url);
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
        self.put_tokens(&ServerRef::own(server), tokens, expires_at)
            .await
    }

    /// The user's OAuth tokens for one of their servers.
    ///
    /// # Errors
    /// No secret key, tokens that do not open, or a database failure.
    pub async fn oauth_tokens(&self, server: &str) -> Result<Option<StoredTokens>> {
        self.tokens(&ServerRef::own(server)).await
    }

    /// Claim the refresh of this server's tokens (see [`UserStore::begin_tokens_refresh`]).
    ///
    /// # Errors
    /// A database failure.
    pub async fn begin_refresh(
        &self,
        server: &str,
        lease: Duration,
    ) -> Result<Option<RefreshLease>> {
        self.begin_tokens_refresh(&ServerRef::own(server), lease)
            .await
    }

    /// Forget the user's OAuth tokens for a server (logout). Says whether there were any.
    ///
    /// # Errors
    /// A database failure.
    pub async fn remove_oauth_tokens(&self, server: &str) -> Result<bool> {
        self.remove_tokens(&ServerRef::own(server)).await
    }

    /// Save the user's OAuth tokens for `server` (one of their own, or a catalog server
    /// they enabled) after a login. Cancels any refresh in flight: its result will not be
    /// written.
    ///
    /// # Errors
    /// No such server of this user (or catalog server this user enabled), no secret key,
    /// or a database failure.
    pub async fn put_tokens(
        &self,
        server: &ServerRef,
        tokens: &Secret,
        expires_at: Option<i64>,
    ) -> Result<()> {
        let t = TokenTable::of(server);
        let slot = t.sealed.slot(&self.user.0, server.name());
        let sealed = self.store.keys()?.seal(&slot, tokens.expose().as_bytes())?;
        // Written only where the server is this user's (the INSERT … SELECT finds nothing
        // otherwise), so the error below names the missing server, not a constraint.
        let sql = format!(
            "INSERT INTO {table} (user_id, {name}, tokens, expires_at, updated_at) \
             SELECT user_id, {parent_name}, $3, $4, $5 FROM {parent} \
             WHERE user_id = $1 AND {parent_name} = $2 \
             ON CONFLICT (user_id, {name}) DO UPDATE SET tokens = excluded.tokens, \
             expires_at = excluded.expires_at, updated_at = excluded.updated_at, \
             refresh_holder = NULL, refresh_until = NULL",
            table = t.sealed.table,
            name = t.sealed.key_column,
            parent = t.parent,
            parent_name = t.parent_name,
        );
        let done = sqlx::query(&sql)
            .bind(self.uid())
            .bind(server.name().to_owned())
            .bind(sealed)
            .bind(expires_at)
            .bind(now())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("saving OAuth tokens"))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Invalid(match server {
                ServerRef::Own(n) => {
                    format!("no server `{n}` to save tokens for: add the server first")
                }
                ServerRef::Catalog(n) => format!(
                    "catalog server `{n}` is not enabled: enable it before logging in to it"
                ),
            }));
        }
        Ok(())
    }

    /// The user's OAuth tokens for `server`.
    ///
    /// # Errors
    /// No secret key, tokens that do not open, or a database failure.
    pub async fn tokens(&self, server: &ServerRef) -> Result<Option<StoredTokens>> {
        let t = TokenTable::of(server);
        let sql = format!(
            "SELECT tokens, expires_at, updated_at FROM {} WHERE user_id = $1 AND {} = $2",
            t.sealed.table, t.sealed.key_column
        );
        let Some(row) = sqlx::query(&sql)
            .bind(self.uid())
            .bind(server.name().to_owned())
            .fetch_optional(&self.store.pool)
            .await
            .map_err(StoreError::query("reading OAuth tokens"))?
        else {
            return Ok(None);
        };
        let get = || StoreError::query("reading OAuth tokens");
        let sealed: Vec<u8> = row.try_get(0).map_err(get())?;
        let slot = t.sealed.slot(&self.user.0, server.name());
        let (plain, _) = self.store.keys()?.open(&slot, &sealed)?;
        Ok(Some(StoredTokens {
            tokens: Secret::new(text_of(plain, t.sealed.table, t.sealed.column)?),
            expires_at: row.try_get(1).map_err(get())?,
            updated_at: row.try_get(2).map_err(get())?,
        }))
    }

    /// Claim the refresh of `server`'s tokens for `lease` (how long the refresh may take).
    /// `None` when another instance holds an unexpired claim: wait, then read the tokens
    /// it wrote with [`UserStore::tokens`]. Only one claim exists per row at a time on any
    /// number of instances, so a rotating refresh token is spent once.
    ///
    /// # Errors
    /// A database failure.
    pub async fn begin_tokens_refresh(
        &self,
        server: &ServerRef,
        lease: Duration,
    ) -> Result<Option<RefreshLease>> {
        let t = TokenTable::of(server);
        let holder = random_token(16)?;
        let at = now();
        let sql = format!(
            "UPDATE {} SET refresh_holder = $3, refresh_until = $4 \
             WHERE user_id = $1 AND {} = $2 \
             AND (refresh_until IS NULL OR refresh_until <= $5)",
            t.sealed.table, t.sealed.key_column
        );
        let done = sqlx::query(&sql)
            .bind(self.uid())
            .bind(server.name().to_owned())
            .bind(holder.clone())
            .bind(at.saturating_add(i64::try_from(lease.as_secs()).unwrap_or(i64::MAX)))
            .bind(at)
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("claiming a token refresh"))?;
        Ok((done.rows_affected() == 1).then(|| RefreshLease {
            server: server.clone(),
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
        let t = TokenTable::of(&lease.server);
        let slot = t.sealed.slot(&self.user.0, lease.server.name());
        let sealed = self.store.keys()?.seal(&slot, tokens.expose().as_bytes())?;
        let sql = format!(
            "UPDATE {} SET tokens = $3, expires_at = $4, updated_at = $5, \
             refresh_holder = NULL, refresh_until = NULL \
             WHERE user_id = $1 AND {} = $2 AND refresh_holder = $6",
            t.sealed.table, t.sealed.key_column
        );
        let done = sqlx::query(&sql)
            .bind(self.uid())
            .bind(lease.server.name().to_owned())
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
        let t = TokenTable::of(&lease.server);
        let sql = format!(
            "UPDATE {} SET refresh_holder = NULL, refresh_until = NULL \
             WHERE user_id = $1 AND {} = $2 AND refresh_holder = $3",
            t.sealed.table, t.sealed.key_column
        );
        sqlx::query(&sql)
            .bind(self.uid())
            .bind(lease.server.name().to_owned())
            .bind(lease.holder)
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("releasing a token refresh"))?;
        Ok(())
    }

    /// Forget the user's OAuth tokens for `server` (logout). Says whether there were any.
    ///
    /// # Errors
    /// A database failure.
    pub async fn remove_tokens(&self, server: &ServerRef) -> Result<bool> {
        let t = TokenTable::of(server);
        let sql = format!(
            "DELETE FROM {} WHERE user_id = $1 AND {} = $2",
            t.sealed.table, t.sealed.key_column
        );
        let done = sqlx::query(&sql)
            .bind(self.uid())
            .bind(server.name().to_owned())
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
pub(crate) fn encode_headers(headers: &BTreeMap<String, Secret>) -> String {
    let map: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.expose().to_owned())))
        .collect();
    serde_json::Value::Object(map).to_string()
}

pub(crate) fn decode_headers(json: &str) -> Result<BTreeMap<String, Secret>> {
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
