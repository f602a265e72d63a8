//! The token store: `$SWITCHBOARD_HOME/mcp-oauth-tokens.json`, one entry per server in
//! Gemini CLI's shape (`serverName`, `token{accessToken, refreshToken, expiresAt,
//! tokenType, scope}`, `clientId`, `tokenUrl`, `mcpServerUrl`, `updatedAt`) plus
//! Switchboard's fields (client secret, grant, auth method, resource, issuer).
//!
//! - The file is mode 0600 and replaced atomically with [`switchboard_config::replace_file`]
//!   (a random `create_new`/`O_NOFOLLOW` temp file, fsync, rename). A token file or
//!   lock file that is a symbolic link is refused, never written or locked through.
//! - Every change happens under an exclusive `flock` on `mcp-oauth-tokens.json.lock`,
//!   held across read → network → write by [`StoreLock`], so two processes refreshing
//!   a rotating refresh token at once never lose it: the second one waits, re-reads and
//!   finds the new token.
//! - Unknown fields of an entry are kept.
//! - `Debug` of an entry shows no token or secret.
//! - The secret parts of a login (access token, refresh token, client secret) can live
//!   in a [`SecretBackend`] instead of the file: the OS keyring with the `keyring`
//!   feature and `SWITCHBOARD_TOKEN_STORE=keyring` ([`TokenStore::from_env`]). The file
//!   then keeps only metadata and `"secretStorage": "keyring"`. When the backend fails,
//!   the login is written to the file whole, with a warning: a token is never dropped.

use std::fmt;
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use switchboard_config::{Replace, replace_file};

use crate::error::AuthError;

/// The file name under `$SWITCHBOARD_HOME`.
pub const TOKEN_FILE: &str = "mcp-oauth-tokens.json";

/// The keyring service under which secrets are kept.
pub const KEYRING_SERVICE: &str = "switchboard-mcp-oauth";

/// The environment variable that chooses where secrets go: `file` (the default) or
/// `keyring`.
pub const TOKEN_STORE_ENV: &str = "SWITCHBOARD_TOKEN_STORE";

/// The field marking a file entry whose secrets live in the keyring.
const SECRETS_FIELD: &str = "secretStorage";

/// Where the secret parts of logins can be kept instead of the token file. Errors are
/// human-readable reasons, shown in warnings; they never contain a secret.
pub trait SecretBackend: Send + Sync + fmt::Debug {
    /// The name written in the file's marker and in messages (`keyring`).
    fn name(&self) -> &'static str;
    /// Save `secret` under `account` (replacing what was there).
    fn set(&self, account: &str, secret: &str) -> Result<(), String>;
    /// The secret under `account`, `None` when there is none.
    fn get(&self, account: &str) -> Result<Option<String>, String>;
    /// Delete `account`'s secret (no error when there is none).
    fn delete(&self, account: &str) -> Result<(), String>;
}

/// The keyring account of a login: the server name and a hash of its URL, so that the
/// same name pointing at another server never reads the other's secrets.
pub fn keyring_account(server: &str, server_url: &str) -> String {
    use aws_lc_rs::digest;
    let hash = digest::digest(&digest::SHA256, server_url.as_bytes());
    let hex: String = hash
        .as_ref()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{server}#{hex}")
}

/// What the backend holds for one login (no `Debug`: it is all secret).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Secrets {
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
}

/// Refresh this long before expiry (or at half the lifetime of shorter tokens).
pub const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// How long to wait for another process holding the store lock.
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The tokens of one login.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenSet {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Expiry, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(default = "bearer")]
    pub token_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

fn bearer() -> String {
    "Bearer".into()
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSet")
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("token_type", &self.token_type)
            .field("scope", &self.scope)
            .finish()
    }
}

/// One server's saved login.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredLogin {
    pub server_name: String,
    pub token: TokenSet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// The MCP server URL the token was obtained for; it is sent to no other URL.
    pub mcp_server_url: String,
    /// When the token was saved (ms since the epoch).
    pub updated_at: u64,
    /// `authorization_code`, `client_credentials`, the jwt-bearer URN or
    /// `google_credentials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_method: Option<String>,
    /// The RFC 8707 resource the token was requested for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Where the client was registered (RFC 7591), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_url: Option<String>,
    /// Fields this version does not know, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl fmt::Debug for StoredLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredLogin")
            .field("server_name", &self.server_name)
            .field("token", &self.token)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("token_url", &self.token_url)
            .field("mcp_server_url", &self.mcp_server_url)
            .field("updated_at", &self.updated_at)
            .field("grant_type", &self.grant_type)
            .finish_non_exhaustive()
    }
}

impl StoredLogin {
    /// Whether the access token should be refreshed now: 5 minutes before expiry, or
    /// at half its lifetime when it lives less than 10 minutes.
    pub fn refresh_due(&self, now: u64) -> bool {
        let Some(expires_at) = self.token.expires_at else {
            return false;
        };
        let lifetime = expires_at.saturating_sub(self.updated_at);
        let margin = lifetime
            .saturating_div(2)
            .min(u64::try_from(REFRESH_MARGIN.as_millis()).unwrap_or(u64::MAX));
        now.saturating_add(margin) >= expires_at
    }

    /// Whether the access token has expired.
    pub fn is_expired(&self, now: u64) -> bool {
        self.token.expires_at.is_some_and(|e| now >= e)
    }
}

/// What [`TokenStore::stamp`] compares: writes replace the file (a new inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    ino: u64,
    len: u64,
    mtime_ns: i64,
}

/// The token file and its lock file, and where secrets go.
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
    lock_path: PathBuf,
    /// `None`: secrets are kept in the file.
    secrets: Option<Arc<dyn SecretBackend>>,
}

impl TokenStore {
    /// A store at `path` (created on first write).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let mut lock = path.clone().into_os_string();
        lock.push(".lock");
        Self {
            path,
            lock_path: PathBuf::from(lock),
            secrets: None,
        }
    }

    /// The store under a Switchboard home folder, secrets in the file.
    pub fn in_home(home: &Path) -> Self {
        Self::new(home.join(TOKEN_FILE))
    }

    /// The store under `home` with secrets where [`TOKEN_STORE_ENV`] says.
    pub fn from_env(home: &Path) -> Self {
        let choice = std::env::var(TOKEN_STORE_ENV).ok();
        Self::in_home(home).select(choice.as_deref())
    }

    /// Keep secrets where `choice` says: `None`, `""` or `file` for the file,
    /// `keyring` for the OS keyring. When that is not possible (no `keyring` feature,
    /// no usable keyring, an unknown value) it is the file, with a one-line warning.
    pub fn select(self, choice: Option<&str>) -> Self {
        match choice.map(str::trim) {
            None | Some("" | "file") => self,
            Some("keyring") => match open_keyring() {
                Ok(backend) => self.with_secret_backend(backend),
                Err(e) => {
                    tracing::warn!(
                        "{TOKEN_STORE_ENV}=keyring: the OS keyring cannot be used ({e}); keeping tokens in {}",
                        self.path.display()
                    );
                    self
                }
            },
            Some(other) => {
                tracing::warn!(
                    "{TOKEN_STORE_ENV}={other:?} is not `file` or `keyring`; keeping tokens in {}",
                    self.path.display()
                );
                self
            }
        }
    }

    /// Keep the secret parts of logins in `backend`.
    pub fn with_secret_backend(mut self, backend: Arc<dyn SecretBackend>) -> Self {
        self.secrets = Some(backend);
        self
    }

    /// Where secrets go: `file` or the backend's name.
    pub fn secrets_in(&self) -> &'static str {
        self.secrets.as_ref().map_or("file", |b| b.name())
    }

    /// The token file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's identity and modification time (`None` when it does not exist): a
    /// cheap way to tell that it has not changed.
    pub fn stamp(&self) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt as _;
        let m = fs::metadata(&self.path).ok()?;
        Some(Stamp {
            ino: m.ino(),
            len: m.len(),
            mtime_ns: m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec(),
        })
    }

    fn error(&self, reason: impl Into<String>) -> AuthError {
        AuthError::Store {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    /// Every saved login with its secrets (no lock needed: writes replace the file
    /// atomically). A login whose secrets are in a keyring that cannot give them back
    /// is left out (with a warning) but stays in the file.
    pub fn load_all(&self) -> Result<Vec<StoredLogin>, AuthError> {
        Ok(self
            .load_raw()?
            .into_iter()
            .filter_map(|e| self.resolve(e))
            .collect())
    }

    /// An entry as read from the file → the login, secrets filled in from the backend.
    fn resolve(&self, mut entry: StoredLogin) -> Option<StoredLogin> {
        let Some(place) = secrets_marker(&entry) else {
            return Some(entry);
        };
        let account = keyring_account(&entry.server_name, &entry.mcp_server_url);
        let found = match &self.secrets {
            Some(b) if b.name() == place => b.get(&account),
            _ => Err(format!(
                "they are in the {place} and this store uses the {}; set {TOKEN_STORE_ENV}={place}",
                self.secrets_in()
            )),
        };
        let secrets = match found {
            Ok(Some(text)) => serde_json::from_str::<Secrets>(&text)
                .map_err(|_| format!("the {place} entry {account} is not Switchboard's")),
            Ok(None) => Err(format!("the {place} has no entry {account}")),
            Err(e) => Err(e),
        };
        match secrets {
            Ok(s) => {
                entry.extra.remove(SECRETS_FIELD);
                entry.token.access_token = s.access_token;
                entry.token.refresh_token = s.refresh_token;
                entry.client_secret = s.client_secret;
                Some(entry)
            }
            Err(e) => {
                tracing::warn!(
                    server = %entry.server_name,
                    "the saved tokens cannot be read ({e}); log in again"
                );
                None
            }
        }
    }

    /// The login as the file gets it: without its secrets and with the marker when the
    /// backend took them, whole otherwise.
    fn file_entry(&self, mut login: StoredLogin) -> StoredLogin {
        login.extra.remove(SECRETS_FIELD);
        let Some(backend) = &self.secrets else {
            return login;
        };
        let account = keyring_account(&login.server_name, &login.mcp_server_url);
        let secrets = Secrets {
            access_token: std::mem::take(&mut login.token.access_token),
            refresh_token: login.token.refresh_token.take(),
            client_secret: login.client_secret.take(),
        };
        let saved = serde_json::to_string(&secrets)
            .map_err(|e| e.to_string())
            .and_then(|text| backend.set(&account, &text));
        match saved {
            Ok(()) => {
                login
                    .extra
                    .insert(SECRETS_FIELD.into(), Value::from(backend.name()));
            }
            Err(e) => {
                tracing::warn!(
                    server = %login.server_name,
                    "cannot save the tokens in the {} ({e}); saving them in {} instead",
                    backend.name(),
                    self.path.display()
                );
                login.token.access_token = secrets.access_token;
                login.token.refresh_token = secrets.refresh_token;
                login.client_secret = secrets.client_secret;
            }
        }
        login
    }

    /// Delete the backend secrets a file entry points to (best effort: a leftover
    /// secret is harmless, a failure only warned about).
    fn forget_secrets(&self, entry: &StoredLogin) {
        let (Some(place), Some(backend)) = (secrets_marker(entry), &self.secrets) else {
            return;
        };
        if backend.name() != place {
            return;
        }
        let account = keyring_account(&entry.server_name, &entry.mcp_server_url);
        if let Err(e) = backend.delete(&account) {
            tracing::warn!(server = %entry.server_name, "cannot delete the old {place} entry ({e})");
        }
    }

    /// The entries as they are in the file.
    fn load_raw(&self) -> Result<Vec<StoredLogin>, AuthError> {
        switchboard_config::refuse_symlink(&self.path)?;
        let text = match fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.error(format!("cannot read it: {e}"))),
        };
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_str(&text).map_err(|e| {
            self.error(format!(
                "it is not a valid token file (line {}, column {}); fix it or delete it and log in again",
                e.line(),
                e.column()
            ))
        })
    }

    /// The saved login of `server`.
    pub fn load(&self, server: &str) -> Result<Option<StoredLogin>, AuthError> {
        Ok(self
            .load_all()?
            .into_iter()
            .find(|e| e.server_name == server))
    }

    /// Take the exclusive lock (waiting up to a minute for another process).
    pub async fn lock(&self) -> Result<StoreLock<'_>, AuthError> {
        if let Some(dir) = self.path.parent() {
            create_private_dir(dir).map_err(|e| {
                self.error(format!("cannot create the folder {}: {e}", dir.display()))
            })?;
        }
        // A link in the lock file's place is refused (`O_NOFOLLOW`), never locked
        // or created through.
        let file = switchboard_config::open_owned(&self.lock_path, 0o600)?;
        let start = tokio::time::Instant::now();
        loop {
            match try_flock(&file) {
                Ok(true) => {
                    return Ok(StoreLock {
                        store: self,
                        _file: file,
                    });
                }
                Ok(false) => {}
                Err(e) => return Err(self.error(format!("cannot lock it: {e}"))),
            }
            if start.elapsed() > LOCK_WAIT {
                return Err(self.error(format!(
                    "another switchboard process has held its lock for over {} s",
                    LOCK_WAIT.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Save (add or replace) one login.
    pub async fn put(&self, login: StoredLogin) -> Result<(), AuthError> {
        self.lock().await?.put(login)
    }

    /// Remove `server`'s login; whether there was one.
    pub async fn remove(&self, server: &str) -> Result<bool, AuthError> {
        self.lock().await?.remove(server)
    }

    fn write_all(&self, entries: &[StoredLogin]) -> Result<(), AuthError> {
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        create_private_dir(dir)
            .map_err(|e| self.error(format!("cannot create the folder {}: {e}", dir.display())))?;
        let mut text = serde_json::to_string_pretty(entries)
            .map_err(|e| self.error(format!("cannot encode it: {e}")))?;
        text.push('\n');
        // A random `create_new`/`O_NOFOLLOW` 0600 temporary file, fsync, rename; a
        // token file that is a symbolic link is refused.
        replace_file(&self.path, text.as_bytes(), Replace::SECRET)?;
        Ok(())
    }
}

/// The store, locked against every other switchboard process. Read, talk to the
/// network, write: nobody else changes the file in between.
#[derive(Debug)]
pub struct StoreLock<'a> {
    store: &'a TokenStore,
    /// Closing the descriptor releases the lock.
    _file: File,
}

impl StoreLock<'_> {
    /// The saved login of `server`, read now.
    pub fn get(&self, server: &str) -> Result<Option<StoredLogin>, AuthError> {
        self.store.load(server)
    }

    /// Save (add or replace) one login. Other entries are rewritten exactly as they
    /// were, including those whose secrets cannot be read now.
    pub fn put(&self, login: StoredLogin) -> Result<(), AuthError> {
        let mut all = self.store.load_raw()?;
        let entry = self.store.file_entry(login);
        match all.iter_mut().find(|e| e.server_name == entry.server_name) {
            Some(slot) => {
                let old = std::mem::replace(slot, entry);
                let moved =
                    secrets_marker(slot).is_none() || old.mcp_server_url != slot.mcp_server_url;
                if moved {
                    self.store.forget_secrets(&old);
                }
            }
            None => all.push(entry),
        }
        self.store.write_all(&all)
    }

    /// Remove `server`'s login (and its keyring secrets); whether there was one.
    pub fn remove(&self, server: &str) -> Result<bool, AuthError> {
        let mut all = self.store.load_raw()?;
        let Some(at) = all.iter().position(|e| e.server_name == server) else {
            return Ok(false);
        };
        let old = all.remove(at);
        self.store.write_all(&all)?;
        self.store.forget_secrets(&old);
        Ok(true)
    }
}

/// Where a file entry's secrets are, when not in the file.
fn secrets_marker(entry: &StoredLogin) -> Option<&str> {
    entry.extra.get(SECRETS_FIELD).and_then(Value::as_str)
}

/// The OS keyring, checked to work.
#[cfg(feature = "keyring")]
fn open_keyring() -> Result<Arc<dyn SecretBackend>, String> {
    crate::keyring::OsKeyring::open()
}

/// No keyring in this build.
#[cfg(not(feature = "keyring"))]
fn open_keyring() -> Result<Arc<dyn SecretBackend>, String> {
    Err("this switchboard was built without the `keyring` feature".into())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// `flock(LOCK_EX | LOCK_NB)`: `Ok(true)` when taken, `Ok(false)` when another holds it.
#[allow(unsafe_code)]
fn try_flock(file: &File) -> std::io::Result<bool> {
    loop {
        // SAFETY: `file` owns a valid open descriptor for the duration of the call;
        // flock(2) touches no memory of ours.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn login(server: &str, access: &str) -> StoredLogin {
        StoredLogin {
            server_name: server.into(),
            token: TokenSet {
                access_token: access.into(),
                refresh_token: Some(format!("refresh-{access}")),
                expires_at: Some(now_ms() + 3_600_000),
                token_type: "Bearer".into(),
                scope: Some("mcp".into()),
            },
            client_id: Some("client".into()),
            client_secret: Some("very-secret".into()),
            token_url: Some("http://127.0.0.1:1/token".into()),
            mcp_server_url: "http://127.0.0.1:1/mcp".into(),
            updated_at: now_ms(),
            grant_type: Some("authorization_code".into()),
            token_endpoint_auth_method: None,
            resource: None,
            issuer: None,
            registration_url: None,
            extra: Map::new(),
        }
    }

    #[tokio::test]
    async fn round_trip_mode_and_unknown_fields() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_home(&dir.path().join("home"));
        store.put(login("a", "tok-a")).await.unwrap();
        store.put(login("b", "tok-b")).await.unwrap();
        store.put(login("a", "tok-a2")).await.unwrap();
        let mode = fs::metadata(store.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let all = store.load_all().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(
            store.load("a").unwrap().unwrap().token.access_token,
            "tok-a2"
        );

        // Gemini CLI's field names, and unknown fields survive a rewrite.
        let mut v: Value =
            serde_json::from_str(&fs::read_to_string(store.path()).unwrap()).unwrap();
        assert_eq!(v[0]["serverName"], "a");
        assert_eq!(v[0]["token"]["accessToken"], "tok-a2");
        assert!(v[0]["token"]["expiresAt"].is_u64());
        assert_eq!(v[0]["mcpServerUrl"], "http://127.0.0.1:1/mcp");
        v[0]["futureField"] = Value::from(7);
        fs::write(store.path(), v.to_string()).unwrap();
        store.put(login("b", "tok-b2")).await.unwrap();
        assert_eq!(
            store.load("a").unwrap().unwrap().extra.get("futureField"),
            Some(&Value::from(7))
        );

        assert!(store.remove("a").await.unwrap());
        assert!(!store.remove("a").await.unwrap());
        assert!(store.load("a").unwrap().is_none());
    }

    #[test]
    fn debug_hides_secrets() {
        let l = login("a", "tok-secret-value");
        let text = format!("{l:?}");
        assert!(!text.contains("tok-secret-value"), "{text}");
        assert!(!text.contains("very-secret"), "{text}");
        assert!(text.contains("<redacted>"));
    }

    #[test]
    fn corrupt_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_home(dir.path());
        fs::write(store.path(), "{not json").unwrap();
        let e = store.load("a").unwrap_err().to_string();
        assert!(e.contains("not a valid token file"), "{e}");
    }

    #[test]
    fn refresh_timing() {
        let now = 1_000_000_000u64;
        let mut l = login("a", "t");
        // A one-hour token: refreshed 5 minutes early.
        l.updated_at = now;
        l.token.expires_at = Some(now + 3_600_000);
        assert!(!l.refresh_due(now + 3_600_000 - 300_001));
        assert!(l.refresh_due(now + 3_600_000 - 300_000));
        // A 60 s token: at half its lifetime.
        l.token.expires_at = Some(now + 60_000);
        assert!(!l.refresh_due(now + 29_000));
        assert!(l.refresh_due(now + 30_000));
        assert!(!l.is_expired(now + 59_999));
        assert!(l.is_expired(now + 60_000));
        l.token.expires_at = None;
        assert!(!l.refresh_due(u64::MAX));
    }

    /// Secrets in memory, for the backend-independent tests.
    #[derive(Debug, Default)]
    struct Memory(std::sync::Mutex<std::collections::HashMap<String, String>>);

    impl SecretBackend for Memory {
        fn name(&self) -> &'static str {
            "keyring"
        }
        fn set(&self, account: &str, secret: &str) -> Result<(), String> {
            self.0.lock().unwrap().insert(account.into(), secret.into());
            Ok(())
        }
        fn get(&self, account: &str) -> Result<Option<String>, String> {
            Ok(self.0.lock().unwrap().get(account).cloned())
        }
        fn delete(&self, account: &str) -> Result<(), String> {
            self.0.lock().unwrap().remove(account);
            Ok(())
        }
    }

    /// A keyring that is there but refuses everything (a locked or absent service).
    #[derive(Debug)]
    struct Broken;

    impl SecretBackend for Broken {
        fn name(&self) -> &'static str {
            "keyring"
        }
        fn set(&self, _: &str, _: &str) -> Result<(), String> {
            Err("no Secret Service".into())
        }
        fn get(&self, _: &str) -> Result<Option<String>, String> {
            Err("no Secret Service".into())
        }
        fn delete(&self, _: &str) -> Result<(), String> {
            Err("no Secret Service".into())
        }
    }

    fn file_json(store: &TokenStore) -> (String, Value) {
        let text = fs::read_to_string(store.path()).unwrap();
        let v = serde_json::from_str(&text).unwrap();
        (text, v)
    }

    /// The file format when secrets live in a backend: metadata only, and the marker.
    #[tokio::test]
    async fn secrets_in_backend_leave_no_token_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mem = Arc::new(Memory::default());
        let store = TokenStore::in_home(dir.path()).with_secret_backend(mem.clone());
        assert_eq!(store.secrets_in(), "keyring");
        store.put(login("a", "tok-a")).await.unwrap();

        let (text, v) = file_json(&store);
        for secret in ["tok-a", "refresh-tok-a", "very-secret"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(v[0]["secretStorage"], "keyring");
        assert_eq!(v[0]["token"]["accessToken"], "");
        assert!(v[0]["token"].get("refreshToken").is_none());
        assert!(v[0].get("clientSecret").is_none());
        assert_eq!(v[0]["clientId"], "client");
        assert_eq!(v[0]["tokenUrl"], "http://127.0.0.1:1/token");
        assert_eq!(v[0]["mcpServerUrl"], "http://127.0.0.1:1/mcp");
        assert_eq!(v[0]["token"]["scope"], "mcp");
        assert!(v[0]["token"]["expiresAt"].is_u64());
        let mode = fs::metadata(store.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        // Account: server name + URL hash, under the one service.
        let account = keyring_account("a", "http://127.0.0.1:1/mcp");
        assert!(
            account.starts_with("a#") && account.len() == 2 + 16,
            "{account}"
        );
        assert_ne!(account, keyring_account("a", "http://127.0.0.1:2/mcp"));
        let blob = mem.get(&account).unwrap().unwrap();
        assert!(blob.contains("tok-a") && blob.contains("very-secret"));

        // Round trip: the login comes back whole, without the marker.
        let back = store.load("a").unwrap().unwrap();
        assert_eq!(back, login_like(&back, "a", "tok-a"));
        assert!(back.extra.get("secretStorage").is_none());

        // A new URL for the same name: the old account is deleted.
        let mut moved = login("a", "tok-a3");
        moved.mcp_server_url = "http://127.0.0.1:2/mcp".into();
        store.put(moved).await.unwrap();
        assert!(mem.get(&account).unwrap().is_none());
        assert_eq!(
            store.load("a").unwrap().unwrap().token.access_token,
            "tok-a3"
        );

        // Logout deletes the secrets too.
        assert!(store.remove("a").await.unwrap());
        assert!(mem.0.lock().unwrap().is_empty());
    }

    /// `login(server, access)` with `back`'s timestamps (they are `now_ms()`).
    fn login_like(back: &StoredLogin, server: &str, access: &str) -> StoredLogin {
        let mut l = login(server, access);
        l.updated_at = back.updated_at;
        l.token.expires_at = back.token.expires_at;
        l
    }

    /// A keyring that fails: the login goes to the file whole, nothing is lost.
    #[tokio::test]
    async fn failing_backend_falls_back_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_home(dir.path()).with_secret_backend(Arc::new(Broken));
        store.put(login("a", "tok-a")).await.unwrap();
        let (_, v) = file_json(&store);
        assert_eq!(v[0]["token"]["accessToken"], "tok-a");
        assert_eq!(v[0]["clientSecret"], "very-secret");
        assert!(v[0].get("secretStorage").is_none());
        let back = store.load("a").unwrap().unwrap();
        assert_eq!(back.token.refresh_token.as_deref(), Some("refresh-tok-a"));
        assert!(store.remove("a").await.unwrap());
    }

    /// Entries whose secrets cannot be read now are not offered, but kept in the file.
    #[tokio::test]
    async fn unreadable_keyring_entries_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mem = Arc::new(Memory::default());
        let keyring = TokenStore::in_home(dir.path()).with_secret_backend(mem.clone());
        keyring.put(login("a", "tok-a")).await.unwrap();

        // The same file with the file store (or a keyring without the entry).
        let file = TokenStore::in_home(dir.path());
        assert!(file.load("a").unwrap().is_none());
        file.put(login("b", "tok-b")).await.unwrap();
        let (_, v) = file_json(&file);
        assert_eq!(v.as_array().unwrap().len(), 2);
        assert_eq!(v[0]["secretStorage"], "keyring");
        assert_eq!(v[1]["token"]["accessToken"], "tok-b");

        // Back with the keyring: both readable.
        assert_eq!(keyring.load_all().unwrap().len(), 2);
        assert_eq!(
            keyring.load("a").unwrap().unwrap().token.access_token,
            "tok-a"
        );
        mem.0.lock().unwrap().clear();
        assert!(keyring.load("a").unwrap().is_none());
        assert_eq!(keyring.load_all().unwrap().len(), 1);
    }

    #[test]
    fn selection() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        assert_eq!(TokenStore::in_home(home).select(None).secrets_in(), "file");
        assert_eq!(
            TokenStore::in_home(home).select(Some("file")).secrets_in(),
            "file"
        );
        assert_eq!(
            TokenStore::in_home(home).select(Some("vault")).secrets_in(),
            "file"
        );
        let chosen = TokenStore::in_home(home).select(Some("keyring"));
        if cfg!(feature = "keyring") {
            // The keyring when it works here, else the file (warned about).
            let works = open_keyring().is_ok();
            assert_eq!(chosen.secrets_in(), if works { "keyring" } else { "file" });
        } else {
            assert_eq!(chosen.secrets_in(), "file");
        }
    }

    fn victim(dir: &Path) -> PathBuf {
        let v = dir.join("victim.txt");
        fs::write(&v, "precious").unwrap();
        v
    }

    /// A link placed at the token path: refused on write and read, its target untouched.
    #[tokio::test]
    async fn a_symlinked_token_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let victim = victim(dir.path());
        let store = TokenStore::in_home(&dir.path().join("home"));
        fs::create_dir_all(dir.path().join("home")).unwrap();
        std::os::unix::fs::symlink(&victim, store.path()).unwrap();
        let e = store
            .put(login("a", "tok-a"))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(e.contains(&store.path().display().to_string()), "{e}");
        assert!(e.contains("remove the link"), "{e}");
        assert!(store.load("a").is_err());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert!(
            fs::symlink_metadata(store.path())
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    /// A link placed at the temp path the store used to use (`<file>.tmp.<pid>`) is
    /// never opened: the victim is untouched, the token file is a 0600 regular file.
    #[tokio::test]
    async fn a_link_at_a_predictable_temp_path_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = victim(dir.path());
        let store = TokenStore::in_home(dir.path());
        let mut tmp = store.path().as_os_str().to_owned();
        tmp.push(format!(".tmp.{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        store.put(login("a", "tok-a")).await.unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        let meta = fs::symlink_metadata(store.path()).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            store.load("a").unwrap().unwrap().token.access_token,
            "tok-a"
        );
    }

    /// A link in the lock file's place is refused, never locked or created through.
    #[tokio::test]
    async fn a_symlinked_lock_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let victim = victim(dir.path());
        let store = TokenStore::in_home(dir.path());
        let mut lock = store.path().as_os_str().to_owned();
        lock.push(".lock");
        std::os::unix::fs::symlink(&victim, &lock).unwrap();
        let e = store
            .put(login("a", "tok-a"))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link") && e.contains(".lock"), "{e}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!store.path().exists());
    }

    #[tokio::test]
    async fn lock_is_exclusive_across_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_home(dir.path());
        let held = store.lock().await.unwrap();
        let other = store.clone();
        let waiter = tokio::spawn(async move {
            let start = std::time::Instant::now();
            let _l = other.lock().await.unwrap();
            start.elapsed()
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(held);
        let waited = waiter.await.unwrap();
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
    }
}
