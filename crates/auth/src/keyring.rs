//! The OS keyring behind the `keyring` feature: on Linux the kernel keyutils store
//! (keyring 4's `linux-keyutils-keyring-store`, no D-Bus and no Secret Service daemon
//! needed). Kernel keys live in the session keyring linked to the user's persistent
//! keyring: they survive logging out for a while but not a reboot, after which the
//! affected servers need `mcp login` again. Elsewhere the backend reports itself
//! unavailable and the token file is used.

use std::fmt;
use std::sync::Arc;

use crate::store::{KEYRING_SERVICE, SecretBackend};

/// Secrets in the OS keyring under the service [`KEYRING_SERVICE`].
pub struct OsKeyring {
    #[cfg(target_os = "linux")]
    store: Arc<linux_keyutils_keyring_store::Store>,
}

impl fmt::Debug for OsKeyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OsKeyring")
    }
}

impl OsKeyring {
    /// Open the keyring and check that it works (a probe secret is written, read back
    /// and deleted); an error says why it cannot be used.
    pub fn open() -> Result<Arc<dyn SecretBackend>, String> {
        let backend = Self::new()?;
        let probe = format!("probe-{}", std::process::id());
        backend.set(&probe, "probe")?;
        let back = backend.get(&probe);
        let _ = backend.delete(&probe);
        match back? {
            Some(v) if v == "probe" => Ok(Arc::new(backend)),
            _ => Err("the keyring did not return what was stored in it".into()),
        }
    }

    #[cfg(target_os = "linux")]
    fn new() -> Result<Self, String> {
        let store = linux_keyutils_keyring_store::Store::new().map_err(|e| e.to_string())?;
        Ok(Self { store })
    }

    #[cfg(not(target_os = "linux"))]
    fn new() -> Result<Self, String> {
        Err("this build has a keyring backend only for Linux (kernel keyutils)".into())
    }

    #[cfg(target_os = "linux")]
    fn entry(&self, account: &str) -> Result<keyring_core::Entry, String> {
        use keyring_core::api::CredentialStoreApi as _;
        self.store
            .build(KEYRING_SERVICE, account, None)
            .map_err(|e| e.to_string())
    }

    #[cfg(not(target_os = "linux"))]
    fn entry(&self, _account: &str) -> Result<keyring_core::Entry, String> {
        Err("no keyring backend on this platform".into())
    }
}

impl SecretBackend for OsKeyring {
    fn name(&self) -> &'static str {
        "keyring"
    }

    fn set(&self, account: &str, secret: &str) -> Result<(), String> {
        retried(|| {
            self.entry(account)?
                .set_password(secret)
                .map_err(|e| e.to_string())
        })
    }

    fn get(&self, account: &str) -> Result<Option<String>, String> {
        retried(|| match self.entry(account)?.get_password() {
            Ok(v) => Ok(Some(v)),
            Err(keyring_core::Error::NoEntry) => Ok(None),
            Err(e) => Err(e.to_string()),
        })
    }

    fn delete(&self, account: &str) -> Result<(), String> {
        retried(|| match self.entry(account)?.delete_credential() {
            Ok(()) | Err(keyring_core::Error::NoEntry) => Ok(()),
            Err(e) => Err(e.to_string()),
        })
    }
}

/// `op`, tried a second time when it fails: the first keyutils call of a process can be
/// refused (`AccessDenied`) while the kernel attaches the user's session and persistent
/// keyrings to it, and succeeds right after (seen in containers).
fn retried<T>(op: impl Fn() -> Result<T, String>) -> Result<T, String> {
    op().or_else(|first| {
        tracing::debug!("keyring: {first}; retrying once");
        op()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoredLogin, TokenSet, TokenStore, keyring_account, now_ms};

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
            client_secret: Some("kr-secret".into()),
            token_url: Some("http://127.0.0.1:1/token".into()),
            mcp_server_url: format!("http://127.0.0.1:1/{}", std::process::id()),
            updated_at: now_ms(),
            grant_type: Some("authorization_code".into()),
            token_endpoint_auth_method: None,
            resource: None,
            issuer: None,
            registration_url: None,
            extra: Default::default(),
        }
    }

    /// A real round trip through the kernel keyring when this machine has one; where it
    /// is unavailable (seccomp, no keyutils), the fallback to the file is checked.
    #[tokio::test]
    async fn round_trip_through_the_os_keyring() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_home(dir.path()).select(Some("keyring"));
        let server = format!("kr-test-{}", std::process::id());
        let l = login(&server, "kr-access");
        let account = keyring_account(&server, &l.mcp_server_url);
        store.put(l).await.unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        match OsKeyring::open() {
            Ok(backend) => {
                assert_eq!(store.secrets_in(), "keyring");
                assert!(!text.contains("kr-access"), "{text}");
                assert!(!text.contains("kr-secret"), "{text}");
                assert!(text.contains("\"secretStorage\": \"keyring\""), "{text}");
                let blob = backend.get(&account).unwrap().unwrap();
                assert!(blob.contains("kr-access"));
                // Another process (a fresh store) reads it back.
                let back = TokenStore::in_home(dir.path())
                    .select(Some("keyring"))
                    .load(&server)
                    .unwrap()
                    .unwrap();
                assert_eq!(back.token.access_token, "kr-access");
                assert_eq!(
                    back.token.refresh_token.as_deref(),
                    Some("refresh-kr-access")
                );
                assert_eq!(back.client_secret.as_deref(), Some("kr-secret"));
                assert!(store.remove(&server).await.unwrap());
                assert!(backend.get(&account).unwrap().is_none());
            }
            Err(e) => {
                eprintln!("OS keyring unavailable here ({e}): checked the file fallback");
                assert_eq!(store.secrets_in(), "file");
                assert!(text.contains("kr-access"));
                let back = store.load(&server).unwrap().unwrap();
                assert_eq!(back.client_secret.as_deref(), Some("kr-secret"));
            }
        }
    }
}
