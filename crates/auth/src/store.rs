//! The token store: `$SWITCHBOARD_HOME/mcp-oauth-tokens.json`, one entry per server in
//! Gemini CLI's shape (`serverName`, `token{accessToken, refreshToken, expiresAt,
//! tokenType, scope}`, `clientId`, `tokenUrl`, `mcpServerUrl`, `updatedAt`) plus
//! Switchboard's fields (client secret, grant, auth method, resource, issuer).
//!
//! - The file is mode 0600 and replaced atomically (temp file, fsync, rename).
//! - Every change happens under an exclusive `flock` on `mcp-oauth-tokens.json.lock`,
//!   held across read → network → write by [`StoreLock`], so two processes refreshing
//!   a rotating refresh token at once never lose it: the second one waits, re-reads and
//!   finds the new token.
//! - Unknown fields of an entry are kept.
//! - `Debug` of an entry shows no token or secret.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::AuthError;

/// The file name under `$SWITCHBOARD_HOME`.
pub const TOKEN_FILE: &str = "mcp-oauth-tokens.json";

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

/// The token file and its lock file.
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
    lock_path: PathBuf,
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
        }
    }

    /// The store under a Switchboard home folder.
    pub fn in_home(home: &Path) -> Self {
        Self::new(home.join(TOKEN_FILE))
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

    /// Every saved login (no lock needed: writes replace the file atomically).
    pub fn load_all(&self) -> Result<Vec<StoredLogin>, AuthError> {
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
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&self.lock_path)
            .map_err(|e| {
                self.error(format!(
                    "cannot open the lock file {}: {e}",
                    self.lock_path.display()
                ))
            })?;
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
        let text = serde_json::to_string_pretty(entries)
            .map_err(|e| self.error(format!("cannot encode it: {e}")))?;
        let mut tmp_name = self.path.clone().into_os_string();
        tmp_name.push(format!(".tmp.{}", std::process::id()));
        let tmp = PathBuf::from(tmp_name);
        let result = (|| -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(self.error(format!("cannot write it: {e}")));
        }
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

    /// Save (add or replace) one login.
    pub fn put(&self, login: StoredLogin) -> Result<(), AuthError> {
        let mut all = self.store.load_all()?;
        match all.iter_mut().find(|e| e.server_name == login.server_name) {
            Some(slot) => *slot = login,
            None => all.push(login),
        }
        self.store.write_all(&all)
    }

    /// Remove `server`'s login; whether there was one.
    pub fn remove(&self, server: &str) -> Result<bool, AuthError> {
        let mut all = self.store.load_all()?;
        let before = all.len();
        all.retain(|e| e.server_name != server);
        if all.len() == before {
            return Ok(false);
        }
        self.store.write_all(&all)?;
        Ok(true)
    }
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
#[allow(clippy::unwrap_used, clippy::expect_used)]
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
