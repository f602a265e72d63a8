//! The team gateway's authorization server state: the MCP clients that registered
//! themselves, what a user approved for a client (a *grant*: the gateway's resource URL
//! and scope, bound to the sign-in session that approved it), authorization codes between
//! the consent and the token request, and the access and refresh tokens of each grant.
//! Every step is a row, so any instance answers any step of a client's authorization.
//!
//! Codes and tokens are random (32 bytes) and stored only as SHA-256 hashes. A code is
//! taken once. A refresh token is spent once: a spent one presented again ends its whole
//! grant (reuse detection). A grant, with its codes and tokens, ends with the session that
//! approved it (sign-out on one device or everywhere, or expiry), and a token is honoured
//! only while that session lives.
//!
//! A client may revoke its own tokens (RFC 7009, [`Store::revoke_gateway_token`]): a refresh
//! token ends its whole grant, an access token only itself. A user sees and ends their own
//! grants (the connected clients, [`UserStore::gateway_grants`]); each grant records when its
//! access tokens last reached the gateway (at most one write a minute).
//!
//! Registration is bounded in the store, so the bound holds across instances: a client
//! that registered and was never approved is *pending*, and at most a fixed number of
//! pending clients are kept ([`MAX_PENDING_GATEWAY_CLIENTS`] unless the caller names
//! another, [`Store::register_gateway_client_within`]); each registration purges the
//! oldest pending ones past the cap (by registration time in microseconds, never the one
//! just registered) and says how many went. A client's first approval marks it granted
//! for good. A client identified by its Client ID Metadata Document (its `client_id` is
//! the document's URL, checked by the web layer) gets a row only when a user approves it
//! ([`Store::put_document_client`]), already granted: it never counts as pending.
//!
//! Must not: store a code or token in clear, return a token's user when its session ended,
//! or decide what a redirect URI or resource may be (the web layer checks those).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::Row;

use crate::account::{User, UserId, hash_hex, now, random_token, secs};
use crate::error::{Result, StoreError};
use crate::store::Store;
use crate::user_data::UserStore;

/// How often (seconds) a grant's `last_used_at` is written at most.
const LAST_USED_EVERY: i64 = 60;

/// At most this many registered clients wait for their first approval (pending) unless
/// the caller names another cap: about 8 MB of rows at the web layer's 8 KiB per
/// registration.
pub const MAX_PENDING_GATEWAY_CLIENTS: u64 = 1000;

/// A registration and what it cost: the pending clients purged to keep the cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredClient {
    /// The new client.
    pub client: GatewayClient,
    /// How many older pending clients (registered, never approved) were deleted, oldest
    /// first, to keep at most the cap.
    pub purged: u64,
}

/// Now in microseconds since the epoch (orders registrations within one second).
fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// A client that registered itself (public: no secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayClient {
    /// The id the store gave it.
    pub client_id: String,
    /// The name it gave (shown on the consent page, as text).
    pub client_name: String,
    /// The redirect URIs it registered (already checked by the caller).
    pub redirect_uris: Vec<String>,
    /// When it registered (unix seconds).
    pub created_at: i64,
}

/// A grant's id (not a secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantId(String);

impl GrantId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a signed-in user approved on the consent page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayApproval {
    /// The client.
    pub client_id: String,
    /// The registered redirect URI the code goes to (the token request must repeat it).
    pub redirect_uri: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    /// The RFC 8707 resource (the gateway's `/mcp` URL).
    pub resource: String,
    /// The scope granted.
    pub scope: String,
}

/// An authorization code taken back at the token endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenCode {
    /// The grant the code belongs to.
    pub grant: GrantId,
    /// The client it was issued to.
    pub client_id: String,
    /// The redirect URI it was sent to.
    pub redirect_uri: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    /// The grant's resource.
    pub resource: String,
    /// The grant's scope.
    pub scope: String,
}

/// An access token and its refresh token, shown once to the client.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedTokens {
    /// The bearer token for the resource.
    pub access_token: String,
    /// Spent once for the next pair.
    pub refresh_token: String,
    /// The access token's lifetime in seconds.
    pub expires_in: u64,
    /// The grant's scope.
    pub scope: String,
    /// The grant's resource.
    pub resource: String,
}

impl fmt::Debug for IssuedTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedTokens")
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

/// How long tokens live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenLifetimes {
    /// The access token.
    pub access: Duration,
    /// The refresh token (never beyond the approving session either).
    pub refresh: Duration,
}

/// What a refresh token bought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshOutcome {
    /// A new pair; the presented refresh token is spent.
    Issued(IssuedTokens),
    /// Unknown, expired, another client's, or its session ended.
    Invalid,
    /// Spent before: the grant and all its tokens are ended.
    Reused,
}

/// Who an access token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayAccess {
    /// The user who approved the grant.
    pub user: User,
    /// The resource the token is for.
    pub resource: String,
    /// The client it was issued to.
    pub client_id: String,
    /// The grant's scope.
    pub scope: String,
}

/// What a revocation request (RFC 7009) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// A refresh token: its grant, with every code and token of it, is ended.
    Grant,
    /// An access token: that token alone is gone.
    AccessToken,
    /// No such token (unknown, expired and purged, or already revoked): nothing to do.
    Unknown,
    /// The token was issued to another client: left alone.
    OtherClient,
}

/// Which kind of token a revocation request says it holds (RFC 7009 `token_type_hint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenHint {
    /// `access_token`.
    Access,
    /// `refresh_token`.
    Refresh,
}

/// One of a user's connected clients: a grant whose approving session lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayGrant {
    /// The grant (what the user revokes).
    pub id: GrantId,
    /// The client's self-chosen name (text, not trusted).
    pub client_name: String,
    /// The client's registered redirect URIs.
    pub redirect_uris: Vec<String>,
    /// When the user approved it (unix seconds).
    pub created_at: i64,
    /// When one of its access tokens last reached the gateway (unix seconds, to the
    /// minute), if ever.
    pub last_used_at: Option<i64>,
}

const ACCESS: &str = "access";
const REFRESH: &str = "refresh";

fn read_err() -> impl FnOnce(sqlx::Error) -> StoreError {
    StoreError::query("reading the gateway's authorization state")
}

fn uris_json(redirect_uris: &[String]) -> Result<String> {
    if redirect_uris.is_empty() {
        return Err(StoreError::Invalid(
            "a client needs at least one redirect URI".into(),
        ));
    }
    serde_json::to_string(redirect_uris)
        .map_err(|_| StoreError::Invalid("redirect URIs that are not text".into()))
}

impl Store {
    /// Register a client (RFC 7591) with checked redirect URIs, keeping at most
    /// [`MAX_PENDING_GATEWAY_CLIENTS`] pending clients
    /// ([`Store::register_gateway_client_within`]).
    ///
    /// # Errors
    /// No redirect URI, or a database failure.
    pub async fn register_gateway_client(
        &self,
        client_name: &str,
        redirect_uris: &[String],
    ) -> Result<GatewayClient> {
        Ok(self
            .register_gateway_client_within(client_name, redirect_uris, MAX_PENDING_GATEWAY_CLIENTS)
            .await?
            .client)
    }

    /// Register a client (RFC 7591) with checked redirect URIs, then delete the oldest
    /// pending clients (registered, never approved) beyond `max_pending` (at least 1: the
    /// new client is never the one deleted). Each registration trims after its own insert,
    /// so instances registering at once never leave more than the cap once they are done.
    ///
    /// # Errors
    /// No redirect URI, or a database failure.
    pub async fn register_gateway_client_within(
        &self,
        client_name: &str,
        redirect_uris: &[String],
        max_pending: u64,
    ) -> Result<RegisteredClient> {
        let uris = uris_json(redirect_uris)?;
        let client_id = format!("sbc_{}", random_token(18)?);
        let t = now();
        sqlx::query(
            "INSERT INTO gateway_clients \
             (client_id, client_name, redirect_uris, created_at, registered_us) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(client_id.clone())
        .bind(client_name.to_owned())
        .bind(uris)
        .bind(t)
        .bind(now_us())
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("registering a gateway client"))?;
        // Keep the newest `max_pending - 1` others and the new one.
        let others = i64::try_from(max_pending.max(1) - 1).unwrap_or(i64::MAX);
        let purged = sqlx::query(
            "DELETE FROM gateway_clients WHERE granted_at IS NULL AND client_id <> $1 \
             AND client_id NOT IN (SELECT client_id FROM gateway_clients \
               WHERE granted_at IS NULL AND client_id <> $1 \
               ORDER BY registered_us DESC, client_id DESC LIMIT $2)",
        )
        .bind(client_id.clone())
        .bind(others)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query(
            "purging the oldest never-approved gateway clients",
        ))?
        .rows_affected();
        Ok(RegisteredClient {
            client: GatewayClient {
                client_id,
                client_name: client_name.to_owned(),
                redirect_uris: redirect_uris.to_vec(),
                created_at: t,
            },
            purged,
        })
    }

    /// How many registered clients wait for their first approval.
    ///
    /// # Errors
    /// A database failure.
    pub async fn pending_gateway_clients(&self) -> Result<u64> {
        let n: i64 = sqlx::query("SELECT COUNT(*) FROM gateway_clients WHERE granted_at IS NULL")
            .fetch_one(&self.pool)
            .await
            .map_err(read_err())?
            .try_get(0)
            .map_err(read_err())?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Record a client a user is approving that identified itself by its Client ID
    /// Metadata Document (`client_id` is the document's URL; name and redirect URIs as the
    /// web layer checked them in the document): created granted, or its name and redirect
    /// URIs brought up to date. Grants and the connected-clients list refer to this row.
    ///
    /// # Errors
    /// No redirect URI, or a database failure.
    pub async fn put_document_client(&self, client: &GatewayClient) -> Result<()> {
        let uris = uris_json(&client.redirect_uris)?;
        let t = now();
        sqlx::query(
            "INSERT INTO gateway_clients \
             (client_id, client_name, redirect_uris, created_at, registered_us, granted_at) \
             VALUES ($1, $2, $3, $4, $5, $4) \
             ON CONFLICT (client_id) DO UPDATE SET client_name = excluded.client_name, \
             redirect_uris = excluded.redirect_uris, \
             granted_at = COALESCE(gateway_clients.granted_at, excluded.granted_at)",
        )
        .bind(client.client_id.clone())
        .bind(client.client_name.clone())
        .bind(uris)
        .bind(t)
        .bind(now_us())
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("recording a metadata-document client"))?;
        Ok(())
    }

    /// A registered client.
    ///
    /// # Errors
    /// A database failure.
    pub async fn gateway_client(&self, client_id: &str) -> Result<Option<GatewayClient>> {
        let Some(row) = sqlx::query(
            "SELECT client_id, client_name, redirect_uris, created_at FROM gateway_clients \
             WHERE client_id = $1",
        )
        .bind(client_id.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(read_err())?
        else {
            return Ok(None);
        };
        let uris: String = row.try_get(2).map_err(read_err())?;
        Ok(Some(GatewayClient {
            client_id: row.try_get(0).map_err(read_err())?,
            client_name: row.try_get(1).map_err(read_err())?,
            redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
            created_at: row.try_get(3).map_err(read_err())?,
        }))
    }

    /// Record what the user of the live session `session` (the cookie value) approved,
    /// and return an authorization code for it, valid for `ttl`.
    ///
    /// # Errors
    /// The session ended or expired, the client is unknown, or a database failure.
    pub async fn approve_gateway_grant(
        &self,
        session: &str,
        approval: &GatewayApproval,
        ttl: Duration,
    ) -> Result<String> {
        let t = now();
        let session_hash = hash_hex(session);
        let user: Option<String> =
            sqlx::query("SELECT user_id FROM sessions WHERE id_hash = $1 AND expires_at > $2")
                .bind(session_hash.clone())
                .bind(t)
                .fetch_optional(&self.pool)
                .await
                .map_err(read_err())?
                .map(|r| r.try_get(0))
                .transpose()
                .map_err(read_err())?;
        let Some(user) = user else {
            return Err(StoreError::Invalid(
                "the sign-in session ended: sign in again and approve the client again".into(),
            ));
        };
        // The client is granted from now on (never pending again, so never purged as
        // one); gone means its registration was purged meanwhile.
        let marked = sqlx::query(
            "UPDATE gateway_clients SET granted_at = COALESCE(granted_at, $1) \
             WHERE client_id = $2",
        )
        .bind(t)
        .bind(approval.client_id.clone())
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("marking a gateway client approved"))?
        .rows_affected();
        if marked == 0 {
            return Err(StoreError::Invalid(
                "this client's registration is gone (a registration nobody approves is removed after a day, or sooner when many wait): let the MCP client register again".into(),
            ));
        }
        let grant = format!("sbg_{}", random_token(18)?);
        sqlx::query(
            "INSERT INTO gateway_grants (id, client_id, user_id, session_hash, resource, scope, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(grant.clone())
        .bind(approval.client_id.clone())
        .bind(user)
        .bind(session_hash)
        .bind(approval.resource.clone())
        .bind(approval.scope.clone())
        .bind(t)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("saving an approval for a gateway client"))?;
        let code = random_token(32)?;
        sqlx::query(
            "INSERT INTO gateway_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(hash_hex(&code))
        .bind(grant)
        .bind(approval.redirect_uri.clone())
        .bind(approval.code_challenge.clone())
        .bind(t.saturating_add(secs(ttl)))
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("saving an authorization code"))?;
        Ok(code)
    }

    /// Take an authorization code: removed whether or not it is still good; returned
    /// only if it had not expired and its grant's session lives. A second take finds
    /// nothing.
    ///
    /// # Errors
    /// A database failure.
    pub async fn take_gateway_code(&self, code: &str) -> Result<Option<TakenCode>> {
        let Some(row) = sqlx::query(
            "DELETE FROM gateway_codes WHERE code_hash = $1 \
             RETURNING grant_id, redirect_uri, code_challenge, expires_at",
        )
        .bind(hash_hex(code))
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("taking an authorization code"))?
        else {
            return Ok(None);
        };
        let grant: String = row.try_get(0).map_err(read_err())?;
        let redirect_uri: String = row.try_get(1).map_err(read_err())?;
        let code_challenge: String = row.try_get(2).map_err(read_err())?;
        let expires_at: i64 = row.try_get(3).map_err(read_err())?;
        if expires_at <= now() {
            return Ok(None);
        }
        let Some((client_id, resource, scope)) = self.live_grant(&grant).await? else {
            return Ok(None);
        };
        Ok(Some(TakenCode {
            grant: GrantId(grant),
            client_id,
            redirect_uri,
            code_challenge,
            resource,
            scope,
        }))
    }

    /// A grant whose session still lives: client, resource, scope.
    async fn live_grant(&self, grant: &str) -> Result<Option<(String, String, String)>> {
        let row = sqlx::query(
            "SELECT g.client_id, g.resource, g.scope FROM gateway_grants g \
             JOIN sessions s ON s.id_hash = g.session_hash \
             WHERE g.id = $1 AND s.expires_at > $2",
        )
        .bind(grant.to_owned())
        .bind(now())
        .fetch_optional(&self.pool)
        .await
        .map_err(read_err())?;
        row.map(|r| -> Result<(String, String, String)> {
            Ok((
                r.try_get(0).map_err(read_err())?,
                r.try_get(1).map_err(read_err())?,
                r.try_get(2).map_err(read_err())?,
            ))
        })
        .transpose()
    }

    /// A new access and refresh token for a live grant.
    ///
    /// # Errors
    /// The grant or its session ended, or a database failure.
    pub async fn issue_gateway_tokens(
        &self,
        grant: &GrantId,
        lifetimes: TokenLifetimes,
    ) -> Result<IssuedTokens> {
        let Some((_, resource, scope)) = self.live_grant(&grant.0).await? else {
            return Err(StoreError::Invalid(
                "the approval ended (its sign-in session ended): authorize the client again".into(),
            ));
        };
        let access_token = format!("sbat_{}", random_token(32)?);
        let refresh_token = format!("sbrt_{}", random_token(32)?);
        let t = now();
        for (token, kind, ttl) in [
            (&access_token, ACCESS, lifetimes.access),
            (&refresh_token, REFRESH, lifetimes.refresh),
        ] {
            sqlx::query(
                "INSERT INTO gateway_tokens (token_hash, grant_id, kind, used, expires_at) \
                 VALUES ($1, $2, $3, 0, $4)",
            )
            .bind(hash_hex(token))
            .bind(grant.0.clone())
            .bind(kind)
            .bind(t.saturating_add(secs(ttl)))
            .execute(&self.pool)
            .await
            .map_err(StoreError::query("saving a gateway token"))?;
        }
        Ok(IssuedTokens {
            access_token,
            refresh_token,
            expires_in: lifetimes.access.as_secs(),
            scope,
            resource,
        })
    }

    /// Spend a refresh token of `client_id` for a new pair (rotation). A refresh token
    /// spent before ends its grant.
    ///
    /// # Errors
    /// A database failure.
    pub async fn refresh_gateway_tokens(
        &self,
        refresh_token: &str,
        client_id: &str,
        lifetimes: TokenLifetimes,
    ) -> Result<RefreshOutcome> {
        let hash = hash_hex(refresh_token);
        // Only the client the token was issued to can spend it (another client's attempt
        // leaves it alone).
        let spent = sqlx::query(
            "UPDATE gateway_tokens SET used = 1 \
             WHERE token_hash = $1 AND kind = 'refresh' AND used = 0 AND expires_at > $2 \
             AND grant_id IN (SELECT id FROM gateway_grants WHERE client_id = $3) \
             RETURNING grant_id",
        )
        .bind(hash.clone())
        .bind(now())
        .bind(client_id.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("spending a refresh token"))?;
        let Some(row) = spent else {
            let reused = sqlx::query(
                "SELECT grant_id FROM gateway_tokens \
                 WHERE token_hash = $1 AND kind = 'refresh' AND used = 1 \
                 AND grant_id IN (SELECT id FROM gateway_grants WHERE client_id = $2)",
            )
            .bind(hash)
            .bind(client_id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(read_err())?;
            return match reused {
                Some(row) => {
                    let grant: String = row.try_get(0).map_err(read_err())?;
                    self.end_gateway_grant(&GrantId(grant)).await?;
                    Ok(RefreshOutcome::Reused)
                }
                None => Ok(RefreshOutcome::Invalid),
            };
        };
        let grant = GrantId(row.try_get(0).map_err(read_err())?);
        match self.live_grant(&grant.0).await? {
            Some((owner, _, _)) if owner == client_id => {}
            _ => return Ok(RefreshOutcome::Invalid),
        }
        Ok(RefreshOutcome::Issued(
            self.issue_gateway_tokens(&grant, lifetimes).await?,
        ))
    }

    /// End a grant and every code and token of it.
    ///
    /// # Errors
    /// A database failure.
    pub async fn end_gateway_grant(&self, grant: &GrantId) -> Result<()> {
        for sql in [
            "DELETE FROM gateway_tokens WHERE grant_id = $1",
            "DELETE FROM gateway_codes WHERE grant_id = $1",
            "DELETE FROM gateway_grants WHERE id = $1",
        ] {
            sqlx::query(sql)
                .bind(grant.0.clone())
                .execute(&self.pool)
                .await
                .map_err(StoreError::query("ending a gateway grant"))?;
        }
        Ok(())
    }

    /// Who an access token speaks for: only an unexpired access token (never a refresh
    /// token) of a grant whose session lives.
    ///
    /// # Errors
    /// A database failure.
    pub async fn gateway_access(&self, access_token: &str) -> Result<Option<GatewayAccess>> {
        let t = now();
        let Some(row) = sqlx::query(
            "SELECT g.user_id, g.resource, g.client_id, g.scope, g.id, g.last_used_at \
             FROM gateway_tokens k \
             JOIN gateway_grants g ON g.id = k.grant_id \
             JOIN sessions s ON s.id_hash = g.session_hash \
             WHERE k.token_hash = $1 AND k.kind = 'access' AND k.expires_at > $2 \
             AND s.expires_at > $2",
        )
        .bind(hash_hex(access_token))
        .bind(t)
        .fetch_optional(&self.pool)
        .await
        .map_err(read_err())?
        else {
            return Ok(None);
        };
        let user_id: String = row.try_get(0).map_err(read_err())?;
        let Some(user) = self.user_by_id(&UserId(user_id)).await? else {
            return Ok(None);
        };
        let grant: String = row.try_get(4).map_err(read_err())?;
        let last_used: Option<i64> = row.try_get(5).map_err(read_err())?;
        if last_used.is_none_or(|at| at <= t.saturating_sub(LAST_USED_EVERY)) {
            sqlx::query(
                "UPDATE gateway_grants SET last_used_at = $1 WHERE id = $2 \
                 AND (last_used_at IS NULL OR last_used_at <= $3)",
            )
            .bind(t)
            .bind(grant)
            .bind(t.saturating_sub(LAST_USED_EVERY))
            .execute(&self.pool)
            .await
            .map_err(StoreError::query("recording a gateway grant's use"))?;
        }
        Ok(Some(GatewayAccess {
            user,
            resource: row.try_get(1).map_err(read_err())?,
            client_id: row.try_get(2).map_err(read_err())?,
            scope: row.try_get(3).map_err(read_err())?,
        }))
    }

    /// Revoke a token `client_id` holds (RFC 7009): a refresh token ends its grant (and
    /// every token of it), an access token only itself. `hint` says where to look first;
    /// the other kind is searched too. A token of another client is left alone.
    ///
    /// # Errors
    /// A database failure.
    pub async fn revoke_gateway_token(
        &self,
        token: &str,
        client_id: &str,
        hint: Option<TokenHint>,
    ) -> Result<Revocation> {
        let hash = hash_hex(token);
        let order = match hint {
            Some(TokenHint::Access) => [ACCESS, REFRESH],
            Some(TokenHint::Refresh) | None => [REFRESH, ACCESS],
        };
        for kind in order {
            let Some(row) = sqlx::query(
                "SELECT k.grant_id, g.client_id FROM gateway_tokens k \
                 JOIN gateway_grants g ON g.id = k.grant_id \
                 WHERE k.token_hash = $1 AND k.kind = $2",
            )
            .bind(hash.clone())
            .bind(kind)
            .fetch_optional(&self.pool)
            .await
            .map_err(read_err())?
            else {
                continue;
            };
            let grant: String = row.try_get(0).map_err(read_err())?;
            let owner: String = row.try_get(1).map_err(read_err())?;
            if owner != client_id {
                return Ok(Revocation::OtherClient);
            }
            if kind == REFRESH {
                self.end_gateway_grant(&GrantId(grant)).await?;
                return Ok(Revocation::Grant);
            }
            sqlx::query("DELETE FROM gateway_tokens WHERE token_hash = $1 AND kind = 'access'")
                .bind(hash)
                .execute(&self.pool)
                .await
                .map_err(StoreError::query("revoking a gateway access token"))?;
            return Ok(Revocation::AccessToken);
        }
        Ok(Revocation::Unknown)
    }

    /// Delete the gateway's expired codes and tokens, and clients that registered more
    /// than a day ago and hold no grant. Returns how many rows went.
    ///
    /// # Errors
    /// A database failure.
    pub async fn purge_gateway_expired(&self) -> Result<u64> {
        let t = now();
        let mut n = 0;
        for (sql, at) in [
            ("DELETE FROM gateway_codes WHERE expires_at <= $1", t),
            ("DELETE FROM gateway_tokens WHERE expires_at <= $1", t),
            (
                "DELETE FROM gateway_clients WHERE created_at <= $1 \
                 AND client_id NOT IN (SELECT client_id FROM gateway_grants)",
                t.saturating_sub(86_400),
            ),
        ] {
            n += sqlx::query(sql)
                .bind(at)
                .execute(&self.pool)
                .await
                .map_err(StoreError::query("deleting expired gateway tokens"))?
                .rows_affected();
        }
        Ok(n)
    }
}

impl UserStore {
    /// The user's connected clients: their grants whose approving session lives, newest
    /// first.
    ///
    /// # Errors
    /// A database failure.
    pub async fn gateway_grants(&self) -> Result<Vec<GatewayGrant>> {
        let rows = sqlx::query(
            "SELECT g.id, c.client_name, c.redirect_uris, g.created_at, g.last_used_at \
             FROM gateway_grants g \
             JOIN gateway_clients c ON c.client_id = g.client_id \
             JOIN sessions s ON s.id_hash = g.session_hash \
             WHERE g.user_id = $1 AND s.expires_at > $2 \
             ORDER BY g.created_at DESC, g.id",
        )
        .bind(self.uid())
        .bind(now())
        .fetch_all(&self.store.pool)
        .await
        .map_err(read_err())?;
        rows.iter()
            .map(|r| {
                let uris: String = r.try_get(2).map_err(read_err())?;
                Ok(GatewayGrant {
                    id: GrantId(r.try_get(0).map_err(read_err())?),
                    client_name: r.try_get(1).map_err(read_err())?,
                    redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
                    created_at: r.try_get(3).map_err(read_err())?,
                    last_used_at: r.try_get(4).map_err(read_err())?,
                })
            })
            .collect()
    }

    /// End the user's grant `id` with every code and token of it. False when the user
    /// has no such grant (another user's grant is "none").
    ///
    /// # Errors
    /// A database failure.
    pub async fn end_gateway_grant(&self, id: &str) -> Result<bool> {
        let owned = sqlx::query("SELECT id FROM gateway_grants WHERE id = $1 AND user_id = $2")
            .bind(id.to_owned())
            .bind(self.uid())
            .fetch_optional(&self.store.pool)
            .await
            .map_err(read_err())?;
        if owned.is_none() {
            return Ok(false);
        }
        self.store
            .end_gateway_grant(&GrantId(id.to_owned()))
            .await?;
        Ok(true)
    }
}
