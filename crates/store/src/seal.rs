//! Secrets at rest: [`SecretKeys`] (the current key and an optional previous one) seal a
//! value with AES-256-GCM (aws-lc-rs, the crypto library rustls already uses) into
//! `version ‖ key id ‖ random nonce ‖ ciphertext+tag`, with the row it belongs to
//! ([`Slot`]: table, column, user id, row key) as associated data. A sealed value copied to
//! another row or user, or changed by one bit, does not open. [`Secret`] carries plaintext
//! through the API and never prints it.
//!
//! The key comes from `SWITCHBOARD_SECRET_KEY` (or `_FILE`). Rotation: set the new key,
//! the old one as `SWITCHBOARD_SECRET_KEY_PREVIOUS` (or `_FILE`), run `switchboard db
//! reencrypt`, then drop the old key. An instance whose keys do not open what the
//! database holds refuses to start (`Store::check_keys`), so every replica of one
//! database needs the same key. A dump of the database thus shows emails, server
//! URLs and hashes, never a token, API key, header value, PKCE verifier or session.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::digest;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine as _;

use crate::error::{Result, StoreError};

/// The format byte at the start of every sealed value.
const VERSION: u8 = 1;
const KEY_ID_LEN: usize = 8;
const HEADER_LEN: usize = 1 + KEY_ID_LEN + NONCE_LEN;

/// The environment variable holding the current key (base64 of 32 bytes).
pub const KEY_ENV: &str = "SWITCHBOARD_SECRET_KEY";
/// The environment variable naming a file that holds the current key.
pub const KEY_FILE_ENV: &str = "SWITCHBOARD_SECRET_KEY_FILE";
/// The environment variable holding the previous key, still accepted for opening.
pub const PREVIOUS_KEY_ENV: &str = "SWITCHBOARD_SECRET_KEY_PREVIOUS";
/// The environment variable naming a file that holds the previous key.
pub const PREVIOUS_KEY_FILE_ENV: &str = "SWITCHBOARD_SECRET_KEY_PREVIOUS_FILE";

const KEY_HELP: &str = "a key is 32 random bytes in base64, e.g. from `openssl rand -base64 32`";

/// A plaintext secret (token, API key, header values, PKCE verifier). `Debug` shows
/// `Secret(***)`; the value is read only through [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a plaintext value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The plaintext.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// One 256-bit key and its id (the first 8 bytes of a SHA-256 over a label and the key).
struct Key {
    id: [u8; KEY_ID_LEN],
    aead: LessSafeKey,
}

impl Key {
    fn from_base64(text: &str, source: &str) -> Result<Self> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| StoreError::Key(format!("{source} is not base64: {KEY_HELP}")))?;
        if bytes.len() != 32 {
            return Err(StoreError::Key(format!(
                "{source} is {} bytes, not 32: {KEY_HELP}",
                bytes.len()
            )));
        }
        let mut ctx = digest::Context::new(&digest::SHA256);
        ctx.update(b"switchboard secret key id v1\0");
        ctx.update(&bytes);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&ctx.finish().as_ref()[..KEY_ID_LEN]);
        let unbound = UnboundKey::new(&AES_256_GCM, &bytes)
            .map_err(|_| StoreError::Key(format!("{source}: not an AES-256 key")))?;
        Ok(Self {
            id,
            aead: LessSafeKey::new(unbound),
        })
    }
}

/// The keys the store seals and opens with: the current one seals and opens; the previous
/// one (during a rotation) only opens. `Debug` shows key ids, never key bytes.
pub struct SecretKeys {
    current: Key,
    previous: Option<Key>,
}

impl fmt::Debug for SecretKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretKeys")
            .field("current", &hex(&self.current.id))
            .field("previous", &self.previous.as_ref().map(|k| hex(&k.id)))
            .finish()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl SecretKeys {
    /// Keys from base64 text (the current key, and the previous one during a rotation).
    ///
    /// # Errors
    /// [`StoreError::Key`] when a key is not base64 of 32 bytes, or both keys are the same.
    pub fn from_base64(current: &str, previous: Option<&str>) -> Result<Self> {
        let current = Key::from_base64(current, "the current secret key")?;
        let previous = previous
            .map(|p| Key::from_base64(p, "the previous secret key"))
            .transpose()?;
        if previous.as_ref().is_some_and(|p| p.id == current.id) {
            return Err(StoreError::Key(
                "the previous secret key is the current one: set the new key as SWITCHBOARD_SECRET_KEY and the old one as SWITCHBOARD_SECRET_KEY_PREVIOUS".into(),
            ));
        }
        Ok(Self { current, previous })
    }

    /// Keys from the environment: the current key from `SWITCHBOARD_SECRET_KEY` or the
    /// file named by `SWITCHBOARD_SECRET_KEY_FILE`; the previous one, if any, from
    /// `SWITCHBOARD_SECRET_KEY_PREVIOUS` or `SWITCHBOARD_SECRET_KEY_PREVIOUS_FILE`.
    /// `env` reads a variable (pass `|k| std::env::var(k).ok()`).
    ///
    /// # Errors
    /// When no current key is set, both forms of one key are set, a key file is readable
    /// by others or missing, or a key is malformed.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let current = read_key(env, KEY_ENV, KEY_FILE_ENV)?
            .ok_or_else(|| StoreError::Key(Self::missing_help()))?;
        let previous = read_key(env, PREVIOUS_KEY_ENV, PREVIOUS_KEY_FILE_ENV)?;
        Self::from_base64(&current, previous.as_deref())
    }

    /// Whether a current key is set at all (`SWITCHBOARD_SECRET_KEY` or `_FILE`, not
    /// blank), so that a front end can list it among other missing settings before
    /// [`SecretKeys::from_env`] judges it.
    pub fn is_configured(env: &dyn Fn(&str) -> Option<String>) -> bool {
        [KEY_ENV, KEY_FILE_ENV]
            .iter()
            .any(|k| env(k).is_some_and(|v| !v.trim().is_empty()))
    }

    /// What to do when no current key is set: what the key is for and both ways to set it.
    pub fn missing_help() -> String {
        format!(
            "the secret key that encrypts tokens and API keys in the team database: set {KEY_ENV} to 32 random bytes in base64 (`export {KEY_ENV}=\"$(openssl rand -base64 32)\"`), or {KEY_FILE_ENV} to a 0600 file holding one (`openssl rand -base64 32 > FILE && chmod 600 FILE`); every replica of one database needs the same key"
        )
    }

    /// A new random key, in base64 (what `SWITCHBOARD_SECRET_KEY` holds).
    ///
    /// # Errors
    /// When the system's random source fails.
    pub fn generate_base64() -> Result<String> {
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| StoreError::Key("the system random source failed".into()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// The current key's id, in hex (as recorded in every value it seals).
    pub fn current_id(&self) -> String {
        hex(&self.current.id)
    }

    /// The previous key's id, in hex, during a rotation.
    pub fn previous_id(&self) -> Option<String> {
        self.previous.as_ref().map(|p| hex(&p.id))
    }

    /// Seal `plain` for `slot`.
    pub(crate) fn seal(&self, slot: &Slot<'_>, plain: &[u8]) -> Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| StoreError::Key("the system random source failed".into()))?;
        let mut out = Vec::with_capacity(HEADER_LEN + plain.len() + AES_256_GCM.tag_len());
        out.push(VERSION);
        out.extend_from_slice(&self.current.id);
        out.extend_from_slice(&nonce);
        let mut body = plain.to_vec();
        self.current
            .aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(slot.associated_data()),
                &mut body,
            )
            .map_err(|_| StoreError::Key("sealing failed".into()))?;
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Open a value sealed for `slot`, under the current or the previous key. Also says
    /// whether it was sealed under the current key.
    pub(crate) fn open(&self, slot: &Slot<'_>, sealed: &[u8]) -> Result<(Vec<u8>, bool)> {
        let refuse = |reason| StoreError::Unseal {
            table: slot.table,
            column: slot.column,
            reason,
        };
        if sealed.len() < HEADER_LEN + AES_256_GCM.tag_len() || sealed[0] != VERSION {
            return Err(refuse("not a sealed value"));
        }
        let id = &sealed[1..=KEY_ID_LEN];
        let (key, current) = if id == self.current.id {
            (&self.current, true)
        } else if let Some(prev) = self.previous.as_ref().filter(|p| p.id == id) {
            (prev, false)
        } else {
            return Err(refuse("it was sealed under a key that is not configured"));
        };
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&sealed[1 + KEY_ID_LEN..HEADER_LEN]);
        let mut body = sealed[HEADER_LEN..].to_vec();
        let plain = key
            .aead
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(slot.associated_data()),
                &mut body,
            )
            .map_err(|_| refuse("it was changed or belongs to another row"))?;
        Ok((plain.to_vec(), current))
    }
}

/// The id (hex) of the key a sealed value names, if it has the sealed format.
pub(crate) fn sealed_key_id(sealed: &[u8]) -> Option<String> {
    (sealed.len() >= HEADER_LEN && sealed[0] == VERSION).then(|| hex(&sealed[1..=KEY_ID_LEN]))
}

/// Read one key from `var`, or from the file named by `file_var`.
fn read_key(
    env: &dyn Fn(&str) -> Option<String>,
    var: &str,
    file_var: &str,
) -> Result<Option<String>> {
    let inline = env(var).filter(|v| !v.trim().is_empty());
    let file = env(file_var).filter(|v| !v.trim().is_empty());
    match (inline, file) {
        (Some(_), Some(_)) => Err(StoreError::Key(format!(
            "both {var} and {file_var} are set: keep one"
        ))),
        (Some(key), None) => Ok(Some(key)),
        (None, Some(path)) => read_key_file(Path::new(&path), file_var).map(Some),
        (None, None) => Ok(None),
    }
}

fn read_key_file(path: &Path, var: &str) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| {
        StoreError::Key(format!(
            "{var}={}: cannot read it ({e}): create it with `openssl rand -base64 32 > FILE && chmod 600 FILE`",
            path.display()
        ))
    })?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(StoreError::Key(format!(
            "{var}={}: other users may read it: run `chmod 600 {}`",
            path.display(),
            path.display()
        )));
    }
    std::fs::read_to_string(path)
        .map_err(|e| StoreError::Key(format!("{var}={}: cannot read it ({e})", path.display())))
}

/// Where a sealed value lives. The associated data binds it there: a value copied to
/// another table, column, user or row does not open.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot<'a> {
    pub table: &'static str,
    pub column: &'static str,
    /// The owning user's id, or `""` for rows owned by no user yet (pending sign-ins).
    pub user: &'a str,
    /// The row's own key within the user (server name, provider, state hash).
    pub row: &'a str,
}

impl Slot<'_> {
    fn associated_data(&self) -> Vec<u8> {
        let mut aad = b"switchboard sealed v1".to_vec();
        for part in [self.table, self.column, self.user, self.row] {
            // Length-prefixed, so no two different slots give the same bytes.
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> (String, String) {
        (
            SecretKeys::generate_base64().unwrap(),
            SecretKeys::generate_base64().unwrap(),
        )
    }

    const SLOT: Slot<'static> = Slot {
        table: "oauth_tokens",
        column: "tokens",
        user: "u1",
        row: "server",
    };

    #[test]
    fn round_trip_and_fresh_nonce() {
        let (k, _) = keys();
        let keys = SecretKeys::from_base64(&k, None).unwrap();
        let a = keys.seal(&SLOT, b"access-token").unwrap();
        let b = keys.seal(&SLOT, b"access-token").unwrap();
        assert_ne!(a, b, "every seal draws a new nonce");
        assert_eq!(
            keys.open(&SLOT, &a).unwrap(),
            (b"access-token".to_vec(), true)
        );
    }

    #[test]
    fn another_slot_or_a_flipped_bit_is_refused() {
        let (k, _) = keys();
        let keys = SecretKeys::from_base64(&k, None).unwrap();
        let sealed = keys.seal(&SLOT, b"access-token").unwrap();
        for other in [
            Slot { user: "u2", ..SLOT },
            Slot {
                row: "other",
                ..SLOT
            },
            Slot {
                column: "api_key",
                ..SLOT
            },
            Slot {
                table: "model_keys",
                ..SLOT
            },
            // Length prefixes: moving a byte between parts changes the data.
            Slot {
                user: "u1s",
                row: "erver",
                ..SLOT
            },
        ] {
            assert!(keys.open(&other, &sealed).is_err(), "{other:?}");
        }
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 1;
            assert!(keys.open(&SLOT, &bad).is_err(), "bit flipped at {i}");
        }
    }

    #[test]
    fn previous_key_opens_but_unknown_key_does_not() {
        let (old, new) = keys();
        let sealed = SecretKeys::from_base64(&old, None)
            .unwrap()
            .seal(&SLOT, b"x")
            .unwrap();
        let rotated = SecretKeys::from_base64(&new, Some(&old)).unwrap();
        assert_eq!(
            rotated.open(&SLOT, &sealed).unwrap(),
            (b"x".to_vec(), false)
        );
        let only_new = SecretKeys::from_base64(&new, None).unwrap();
        let err = only_new.open(&SLOT, &sealed).unwrap_err().to_string();
        assert!(err.contains("SWITCHBOARD_SECRET_KEY_PREVIOUS"), "{err}");
    }

    #[test]
    fn keys_from_env_and_files() {
        let (k, p) = keys();
        let none = |_: &str| None;
        let err = SecretKeys::from_env(&none).unwrap_err().to_string();
        assert!(
            err.contains("SWITCHBOARD_SECRET_KEY") && err.contains("openssl rand"),
            "{err}"
        );
        let short = |v: &str| (v == KEY_ENV).then(|| "c2hvcnQ=".to_owned());
        assert!(
            SecretKeys::from_env(&short)
                .unwrap_err()
                .to_string()
                .contains("not 32")
        );

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, format!("{p}\n")).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let path = file.to_str().unwrap().to_owned();
        let k2 = k.clone();
        let env = move |v: &str| match v {
            KEY_ENV => Some(k2.clone()),
            PREVIOUS_KEY_FILE_ENV => Some(path.clone()),
            _ => None,
        };
        let err = SecretKeys::from_env(&env).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let keys = SecretKeys::from_env(&env).unwrap();
        let shown = format!("{keys:?}");
        assert!(!shown.contains(&k) && !shown.contains(&p), "{shown}");
        assert!(keys.previous.is_some());
        let same = |v: &str| (v == KEY_ENV || v == PREVIOUS_KEY_ENV).then(|| k.clone());
        assert!(SecretKeys::from_env(&same).is_err());
    }

    #[test]
    fn secret_debug_hides_the_value() {
        assert_eq!(format!("{:?}", Secret::new("sk-live-1")), "Secret(***)");
    }
}
