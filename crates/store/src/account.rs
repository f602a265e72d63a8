//! Who is signed in: users (found or created at sign-in by issuer and `sub`), sessions
//! (found by the SHA-256 of the cookie value, which is never stored), and OpenID Connect
//! logins in flight (found by the SHA-256 of `state`, taken once, PKCE verifier sealed),
//! so that a login started on one instance completes on any other.
//!
//! A user is the account an issuer vouches for: the pair (issuer, `sub`) from the
//! verified ID token ([`SignInIdentity`]). The email is a display attribute, stored in
//! lower case and rewritten at each sign-in; issuers may give an address to another
//! account later, and that account becomes a new user with nothing of the first one's
//! (servers, tokens, chats, sessions). Emails are not unique: two users may show the same.
//!
//! Users from before schema version 15 were keyed by email and have no issuer or `sub`.
//! Such a row is claimed — given the issuer and `sub` — by the first sign-in that
//! (1) has no user of its own yet (an (issuer, `sub`) already stored always signs in as
//! that user), (2) carries the row's email (compared in lower case) and (3) whose issuer
//! says the email is verified (`email_verified` true; an unverified one gets a new user
//! and the row stays unclaimed). The issuer is the one the team is configured with (the
//! sign-in accepts ID tokens from no other). After the claim only that (issuer, `sub`)
//! reaches the row; the email no longer does. The rule trusts the email once more, at
//! the claim, exactly as the email keying did before.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::digest;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine as _;
use sqlx::Row;
use sqlx::any::{AnyArguments, AnyRow};

use crate::error::{Result, StoreError};
use crate::seal::Secret;
use crate::store::{PENDING_VERIFIER, Store};

/// A user's id. Made only by the store (from a sign-in or a session), so per-user data can
/// be reached only for a user the store has vouched for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserId(pub(crate) String);

impl UserId {
    /// The id as text (for logs and URLs; it is not a secret).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of a user row a test wrote itself (a user of a schema older than
    /// [`Store::sign_in_user`] writes). Only with the `test-support` feature, which no
    /// shipped crate enables.
    #[cfg(feature = "test-support")]
    pub fn from_stored(id: &str) -> Self {
        Self(id.to_owned())
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A user of a team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The id every per-user row carries.
    pub id: UserId,
    /// The issuer that vouched for the user; `None` for a row from before schema
    /// version 15 that no sign-in has claimed yet.
    pub issuer: Option<String>,
    /// The issuer's id of the account (`sub`); `None` exactly when `issuer` is.
    pub subject: Option<String>,
    /// The email the issuer gave at the last sign-in (lower case; a display attribute,
    /// not unique).
    pub email: String,
    /// The display name.
    pub name: String,
    /// Whether the user is an admin (decided at each sign-in from the admin list).
    pub is_admin: bool,
    /// When the user first signed in (unix seconds).
    pub created_at: i64,
    /// When the user last signed in or used a session (unix seconds).
    pub last_seen_at: i64,
}

/// Who signed in, as the sign-in hands it to the store: the issuer and its `sub` from a
/// verified ID token (the user's key), and the email with the issuer's `email_verified`
/// (display; and, verified, what may claim a user from before schema version 15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignInIdentity<'a> {
    /// The issuer, exactly as it publishes itself.
    pub issuer: &'a str,
    /// The issuer's stable id of the account (`sub`).
    pub subject: &'a str,
    /// The email the issuer gave.
    pub email: &'a str,
    /// Whether the issuer says the email is verified.
    pub email_verified: bool,
}

/// A new session's cookie value. Shown once to be set as the cookie; the store keeps only
/// its hash. `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionToken(String);

impl SessionToken {
    /// The cookie value.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionToken(***)")
    }
}

/// An OpenID Connect login between the redirect and the callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLogin {
    /// The PKCE code verifier (sealed at rest).
    pub verifier: Secret,
    /// The OpenID `nonce` the ID token must carry.
    pub nonce: String,
    /// Where to send the browser after sign-in (a path on this app).
    pub return_path: String,
}

pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

pub(crate) fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// `n` random bytes, base64url without padding.
pub(crate) fn random_token(n: usize) -> Result<String> {
    let mut bytes = vec![0u8; n];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| StoreError::Key("the system random source failed".into()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// SHA-256 in hex: how session tokens and login states are found without being stored.
pub(crate) fn hash_hex(value: &str) -> String {
    digest::digest(&digest::SHA256, value.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const USER_COLUMNS: &str = "id, email, name, is_admin, created_at, last_seen_at, issuer, subject";

fn user_from(row: &AnyRow) -> Result<User> {
    let get = || StoreError::query("reading a user");
    let is_admin: i64 = row.try_get(3).map_err(get())?;
    Ok(User {
        id: UserId(row.try_get(0).map_err(get())?),
        email: row.try_get(1).map_err(get())?,
        name: row.try_get(2).map_err(get())?,
        is_admin: is_admin != 0,
        created_at: row.try_get(4).map_err(get())?,
        last_seen_at: row.try_get(5).map_err(get())?,
        issuer: row.try_get(6).map_err(get())?,
        subject: row.try_get(7).map_err(get())?,
    })
}

/// The values every sign-in statement binds, in order: $1 email (lower case), $2 name,
/// $3 admin flag, $4 now, $5 issuer, $6 `sub`.
struct SignInFields {
    email: String,
    name: String,
    is_admin: i64,
    now: i64,
    issuer: String,
    subject: String,
}

impl SignInFields {
    fn bind<'q>(&self, sql: &'q str) -> sqlx::query::Query<'q, sqlx::Any, AnyArguments<'q>> {
        sqlx::query(sql)
            .bind(self.email.clone())
            .bind(self.name.clone())
            .bind(self.is_admin)
            .bind(self.now)
            .bind(self.issuer.clone())
            .bind(self.subject.clone())
    }
}

impl Store {
    /// Record a sign-in: the user with this (issuer, `sub`); else, when the email is
    /// verified, the unclaimed user from before schema version 15 with this email, now
    /// claimed; else a new user. Email, name, admin flag and last-seen time are updated.
    /// The rule is in the module docs.
    ///
    /// # Errors
    /// An empty issuer or `sub`, an email without `@`, or a database failure.
    pub async fn sign_in_user(
        &self,
        who: &SignInIdentity<'_>,
        name: &str,
        is_admin: bool,
    ) -> Result<User> {
        let email = who.email.trim().to_lowercase();
        if email.is_empty() || !email.contains('@') {
            return Err(StoreError::Invalid(format!(
                "`{email}` is not an email address: the issuer must provide a verified email"
            )));
        }
        if who.issuer.is_empty() || who.subject.is_empty() {
            return Err(StoreError::Invalid(
                "the sign-in names no issuer or no account (`sub`): the ID token must carry both"
                    .into(),
            ));
        }
        let fields = SignInFields {
            email,
            name: name.to_owned(),
            is_admin: i64::from(is_admin),
            now: now(),
            issuer: who.issuer.to_owned(),
            subject: who.subject.to_owned(),
        };
        // The account's own user, if it has one.
        let known = format!(
            "UPDATE users SET email = $1, name = $2, is_admin = $3, last_seen_at = $4 \
             WHERE issuer = $5 AND subject = $6 RETURNING {USER_COLUMNS}"
        );
        if let Some(row) = fields
            .bind(&known)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::query("recording a sign-in"))?
        {
            return user_from(&row);
        }
        // An unclaimed user from before version 15 with this email (one at most, by a
        // unique index), claimed in one statement: of two sign-ins racing, one matches.
        if who.email_verified {
            let claim = format!(
                "UPDATE users SET issuer = $5, subject = $6, email = $1, name = $2, \
                 is_admin = $3, last_seen_at = $4 \
                 WHERE subject IS NULL AND email = $1 RETURNING {USER_COLUMNS}"
            );
            if let Some(row) = fields
                .bind(&claim)
                .fetch_optional(&self.pool)
                .await
                .map_err(StoreError::query("claiming a user from before schema 15"))?
            {
                let user = user_from(&row)?;
                tracing::info!(
                    user = %user.id,
                    "sign-in: a user from before schema version 15 is now keyed by its issuer and account"
                );
                return Ok(user);
            }
        }
        // A new user (or the one this account's sign-in on another instance made
        // meanwhile).
        let create = format!(
            "INSERT INTO users (email, name, is_admin, created_at, last_seen_at, issuer, subject, id) \
             VALUES ($1, $2, $3, $4, $4, $5, $6, $7) \
             ON CONFLICT (issuer, subject) DO UPDATE SET email = excluded.email, \
             name = excluded.name, is_admin = excluded.is_admin, \
             last_seen_at = excluded.last_seen_at \
             RETURNING {USER_COLUMNS}"
        );
        let row = fields
            .bind(&create)
            .bind(random_token(16)?)
            .fetch_one(&self.pool)
            .await
            .map_err(StoreError::query("recording a sign-in"))?;
        user_from(&row)
    }

    /// Start a session for `user`, valid for `ttl`. Returns the cookie value; only its
    /// hash is stored.
    ///
    /// # Errors
    /// A database failure (e.g. the user was deleted).
    pub async fn create_session(&self, user: &UserId, ttl: Duration) -> Result<SessionToken> {
        let token = random_token(32)?;
        let t = now();
        sqlx::query(
            "INSERT INTO sessions (id_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(hash_hex(&token))
        .bind(user.0.clone())
        .bind(t)
        .bind(t.saturating_add(secs(ttl)))
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("creating a session"))?;
        Ok(SessionToken(token))
    }

    /// The user a session cookie belongs to, if the session exists and has not expired.
    /// Marks the user as seen.
    ///
    /// # Errors
    /// A database failure.
    pub async fn session_user(&self, token: &str) -> Result<Option<User>> {
        let t = now();
        let sql = format!(
            "SELECT {} FROM sessions s JOIN users u ON u.id = s.user_id \
             WHERE s.id_hash = $1 AND s.expires_at > $2",
            USER_COLUMNS
                .split(", ")
                .map(|c| format!("u.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let Some(row) = sqlx::query(&sql)
            .bind(hash_hex(token))
            .bind(t)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::query("looking up a session"))?
        else {
            return Ok(None);
        };
        let mut user = user_from(&row)?;
        sqlx::query("UPDATE users SET last_seen_at = $1 WHERE id = $2")
            .bind(t)
            .bind(user.id.0.clone())
            .execute(&self.pool)
            .await
            .map_err(StoreError::query("marking a user as seen"))?;
        user.last_seen_at = t;
        Ok(Some(user))
    }

    /// The user with this id, if there is one.
    ///
    /// # Errors
    /// A database failure.
    pub(crate) async fn user_by_id(&self, id: &UserId) -> Result<Option<User>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1");
        sqlx::query(&sql)
            .bind(id.0.clone())
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::query("looking up a user"))?
            .map(|row| user_from(&row))
            .transpose()
    }

    /// End one session (sign-out on this browser). Says whether it existed.
    ///
    /// # Errors
    /// A database failure.
    pub async fn end_session(&self, token: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM sessions WHERE id_hash = $1")
            .bind(hash_hex(token))
            .execute(&self.pool)
            .await
            .map_err(StoreError::query("ending a session"))?;
        Ok(done.rows_affected() > 0)
    }

    /// End every session of `user` (sign-out everywhere). Returns how many ended.
    ///
    /// # Errors
    /// A database failure.
    pub async fn end_all_sessions(&self, user: &UserId) -> Result<u64> {
        let done = sqlx::query("DELETE FROM sessions WHERE user_id = $1")
            .bind(user.0.clone())
            .execute(&self.pool)
            .await
            .map_err(StoreError::query("ending a user's sessions"))?;
        Ok(done.rows_affected())
    }

    /// Remember a login in flight under its `state`, for `ttl`.
    ///
    /// # Errors
    /// A return path that is not a local path (`/…`, not `//…`), no secret key, or a
    /// database failure (a reused `state` is refused).
    pub async fn put_pending_login(
        &self,
        state: &str,
        login: &PendingLogin,
        ttl: Duration,
    ) -> Result<()> {
        let path = &login.return_path;
        if !path.starts_with('/') || path.starts_with("//") || path.contains('\\') {
            return Err(StoreError::Invalid(format!(
                "return path `{path}`: after sign-in the browser goes back to a path on this app, starting with one `/`"
            )));
        }
        let state_hash = hash_hex(state);
        let sealed = self.keys()?.seal(
            &PENDING_VERIFIER.slot("", &state_hash),
            login.verifier.expose().as_bytes(),
        )?;
        let t = now();
        sqlx::query(
            "INSERT INTO pending_logins (state_hash, verifier, nonce, return_path, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(state_hash)
        .bind(sealed)
        .bind(login.nonce.clone())
        .bind(login.return_path.clone())
        .bind(t)
        .bind(t.saturating_add(secs(ttl)))
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("saving a login in flight"))?;
        Ok(())
    }

    /// Take the login in flight for `state`: it is removed whether or not it expired, and
    /// returned only if it had not. A second take of the same state finds nothing.
    ///
    /// # Errors
    /// No secret key, a verifier that does not open, or a database failure.
    pub async fn take_pending_login(&self, state: &str) -> Result<Option<PendingLogin>> {
        let state_hash = hash_hex(state);
        let Some(row) = sqlx::query(
            "DELETE FROM pending_logins WHERE state_hash = $1 \
             RETURNING verifier, nonce, return_path, expires_at",
        )
        .bind(state_hash.clone())
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("taking a login in flight"))?
        else {
            return Ok(None);
        };
        let get = || StoreError::query("reading a login in flight");
        let sealed: Vec<u8> = row.try_get(0).map_err(get())?;
        let nonce: String = row.try_get(1).map_err(get())?;
        let return_path: String = row.try_get(2).map_err(get())?;
        let expires_at: i64 = row.try_get(3).map_err(get())?;
        if expires_at <= now() {
            return Ok(None);
        }
        let (plain, _) = self
            .keys()?
            .open(&PENDING_VERIFIER.slot("", &state_hash), &sealed)?;
        let verifier = String::from_utf8(plain).map_err(|_| StoreError::Unseal {
            table: PENDING_VERIFIER.table,
            column: PENDING_VERIFIER.column,
            reason: "it is not text",
        })?;
        Ok(Some(PendingLogin {
            verifier: Secret::new(verifier),
            nonce,
            return_path,
        }))
    }

    /// Delete expired sessions, sign-ins, server logins in flight and gateway calls
    /// waiting for input. Returns how many rows went.
    ///
    /// # Errors
    /// A database failure.
    pub async fn purge_expired(&self) -> Result<u64> {
        let t = now();
        let mut n = 0;
        for sql in [
            "DELETE FROM sessions WHERE expires_at <= $1",
            "DELETE FROM pending_logins WHERE expires_at <= $1",
            "DELETE FROM pending_server_logins WHERE expires_at <= $1",
            "DELETE FROM gateway_inputs WHERE expires_at <= $1",
        ] {
            n += sqlx::query(sql)
                .bind(t)
                .execute(&self.pool)
                .await
                .map_err(StoreError::query("deleting expired sessions"))?
                .rows_affected();
        }
        Ok(n)
    }
}
