//! Editing a settings file in place (`mcp add/remove/enable/disable`).
//!
//! [`SettingsDoc`] holds the whole file as a [`serde_json::Value`] with key order
//! preserved, so unknown keys, other servers and their order are written back as
//! they were. Comments are **not** kept: they are removed on read, and a saved file
//! is plain JSON (pretty-printed, two-space indent).
//!
//! Saving never loses the file on a crash: the new content goes to a temporary file
//! in the same directory, is flushed to disk (`fsync`), then renamed over the
//! original. A new file gets mode 0600 on Unix; an existing file keeps its mode.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::jsonc;
use crate::raw::type_name;
use crate::replace::{Replace, replace_file};

/// The user settings file: `<home>/settings.json` (`home` is `$SWITCHBOARD_HOME`,
/// by default `~/.switchboard`).
pub fn user_settings_path(home: &Path) -> PathBuf {
    home.join("settings.json")
}

/// The project settings file: `<project_dir>/.switchboard/settings.json`.
pub fn project_settings_path(project_dir: &Path) -> PathBuf {
    project_dir.join(".switchboard").join("settings.json")
}

/// A settings file loaded for editing.
///
/// [`SettingsDoc`] holds the whole file as a [`serde_json::Value`] with key order
/// preserved, so unknown keys, other servers and their order are written back as
/// they were. Comments are **not** kept: they are removed on read, and a saved file
/// is plain JSON (pretty-printed, two-space indent).
///
/// Saving never loses the file on a crash: the new content goes to a temporary file
/// in the same directory, is flushed to disk (`fsync`), then renamed over the
/// original. A new file gets mode 0600 on Unix; an existing file keeps its mode.
#[derive(Debug, Clone)]
pub struct SettingsDoc {
    path: PathBuf,
    root: Map<String, Value>,
}

impl SettingsDoc {
    /// Reads `path`; a missing file is an empty document `{}`.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, ConfigError> {
        let path = path.into();
        let root = match jsonc::read(&path)? {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    path,
                    field: "(root)".into(),
                    message: format!("expected a JSON object, found {}", type_name(&other)),
                });
            }
        };
        Ok(SettingsDoc { path, root })
    }

    /// The file this document reads from and saves to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole document.
    pub fn value(&self) -> &Map<String, Value> {
        &self.root
    }

    fn servers(&self) -> Option<&Map<String, Value>> {
        self.root.get("mcpServers").and_then(Value::as_object)
    }

    fn servers_mut(&mut self) -> Result<&mut Map<String, Value>, ConfigError> {
        let entry = self
            .root
            .entry("mcpServers")
            .or_insert_with(|| Value::Object(Map::new()));
        let found = type_name(entry);
        entry.as_object_mut().ok_or_else(|| ConfigError::Invalid {
            path: self.path.clone(),
            field: "mcpServers".into(),
            message: format!("expected an object, found {found}; fix it by hand"),
        })
    }

    /// One server's entry as written.
    pub fn server(&self, name: &str) -> Option<&Value> {
        self.servers().and_then(|s| s.get(name))
    }

    /// Names under `mcpServers`, in file order.
    pub fn server_names(&self) -> Vec<String> {
        self.servers()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Adds or replaces a server (a replaced server keeps its position).
    pub fn set_server(&mut self, name: &str, value: Value) -> Result<(), ConfigError> {
        self.servers_mut()?.insert(name.to_string(), value);
        Ok(())
    }

    /// Removes a server; `false` when there was none.
    pub fn remove_server(&mut self, name: &str) -> bool {
        self.root
            .get_mut("mcpServers")
            .and_then(Value::as_object_mut)
            .and_then(|s| s.shift_remove(name))
            .is_some()
    }

    /// Sets `disabled: true`, or removes the `disabled` key when enabling.
    pub fn set_disabled(&mut self, name: &str, disabled: bool) -> Result<(), ConfigError> {
        let path = self.path.clone();
        let entry = self
            .root
            .get_mut("mcpServers")
            .and_then(Value::as_object_mut)
            .and_then(|s| s.get_mut(name))
            .ok_or_else(|| ConfigError::NoSuchServer {
                path: path.clone(),
                name: name.to_string(),
            })?;
        let found = type_name(entry);
        let obj = entry.as_object_mut().ok_or_else(|| ConfigError::Invalid {
            path,
            field: format!("mcpServers.{name}"),
            message: format!("expected an object, found {found}"),
        })?;
        if disabled {
            obj.insert("disabled".into(), Value::Bool(true));
        } else {
            obj.shift_remove("disabled");
        }
        Ok(())
    }

    /// Writes the document atomically: the new content goes to a temporary file in the
    /// same directory, is flushed to disk (`fsync`), then renamed over the original
    /// (parent directories are created). A new file gets mode 0600 on Unix; an existing
    /// file keeps its mode. Comments in the original file are not kept.
    pub fn save(&self) -> Result<(), ConfigError> {
        let mut text =
            serde_json::to_string_pretty(&Value::Object(self.root.clone())).map_err(|e| {
                ConfigError::Write {
                    path: self.path.clone(),
                    source: std::io::Error::other(e),
                }
            })?;
        text.push('\n');
        atomic_write(&self.path, text.as_bytes())
    }
}

/// Writes `bytes` to `path` with [`replace_file`] ([`Replace::SETTINGS`]: a random
/// `create_new`/`O_NOFOLLOW` temporary file, `fsync`, rename; a symlink at `path` is
/// resolved and its target replaced, the link kept).
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    Ok(replace_file(path, bytes, Replace::SETTINGS)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;

    fn only_file(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn missing_file_is_empty_and_save_creates_dirs_with_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let path = project_settings_path(tmp.path());
        let mut doc = SettingsDoc::open(&path).unwrap();
        assert!(doc.value().is_empty());
        doc.set_server("a", json!({"command": "x"})).unwrap();
        doc.save().unwrap();
        let back: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back, json!({"mcpServers": {"a": {"command": "x"}}}));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        assert_eq!(only_file(path.parent().unwrap()), vec!["settings.json"]);
    }

    #[test]
    fn keeps_unknown_fields_order_and_other_servers() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("settings.json");
        fs::write(
            &path,
            r#"{
  // from gemini
  "theme": "dark",
  "mcpServers": {
    "zeta": {"command": "z", "myExtra": [1, 2]},
    "alpha": {"httpUrl": "http://a", "timeout": 5},
    "mid": {"url": "http://m"},
  },
  "zzz": {"b": 1, "a": 2}
}"#,
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        }
        let mut doc = SettingsDoc::open(&path).unwrap();
        assert_eq!(doc.server_names(), vec!["zeta", "alpha", "mid"]);
        assert!(doc.remove_server("alpha"));
        assert!(!doc.remove_server("alpha"));
        doc.set_disabled("zeta", true).unwrap();
        doc.set_server("new", json!({"httpUrl": "http://n"}))
            .unwrap();
        assert!(matches!(
            doc.set_disabled("nope", true),
            Err(ConfigError::NoSuchServer { .. })
        ));
        doc.save().unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&String> = back.as_object().unwrap().keys().collect();
        assert_eq!(keys, vec!["theme", "mcpServers", "zzz"]);
        let servers: Vec<&String> = back["mcpServers"].as_object().unwrap().keys().collect();
        assert_eq!(servers, vec!["zeta", "mid", "new"]);
        assert_eq!(
            back["mcpServers"]["zeta"],
            json!({"command": "z", "myExtra": [1, 2], "disabled": true})
        );
        assert_eq!(back["zzz"], json!({"b": 1, "a": 2}));
        let zkeys: Vec<&String> = back["zzz"].as_object().unwrap().keys().collect();
        assert_eq!(zkeys, vec!["b", "a"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o640
            );
        }

        // Enabling removes the key; a round trip without changes is byte-identical.
        let mut doc = SettingsDoc::open(&path).unwrap();
        doc.set_disabled("zeta", false).unwrap();
        assert_eq!(
            doc.server("zeta"),
            Some(&json!({"command": "z", "myExtra": [1, 2]}))
        );
        doc.save().unwrap();
        let once = fs::read_to_string(&path).unwrap();
        SettingsDoc::open(&path).unwrap().save().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), once);
        assert_eq!(only_file(tmp.path()), vec!["settings.json"]);
    }

    #[test]
    fn replacing_a_server_keeps_position() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.json");
        fs::write(
            &path,
            r#"{"mcpServers": {"a": {"command": "1"}, "b": {"command": "2"}}}"#,
        )
        .unwrap();
        let mut doc = SettingsDoc::open(&path).unwrap();
        doc.set_server("a", json!({"command": "3"})).unwrap();
        assert_eq!(doc.server_names(), vec!["a", "b"]);
    }

    #[test]
    fn invalid_documents() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.json");
        fs::write(&path, "[1]").unwrap();
        assert!(matches!(
            SettingsDoc::open(&path),
            Err(ConfigError::Invalid { .. })
        ));
        fs::write(&path, "{\"mcpServers\": 3}").unwrap();
        let mut doc = SettingsDoc::open(&path).unwrap();
        assert!(doc.set_server("a", json!({})).is_err());
        fs::write(&path, "{ nope").unwrap();
        assert!(matches!(
            SettingsDoc::open(&path),
            Err(ConfigError::Parse { .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn save_through_symlink_replaces_target() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real.json");
        fs::write(&real, "{}").unwrap();
        let link = tmp.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut doc = SettingsDoc::open(&link).unwrap();
        doc.set_server("a", json!({"command": "x"})).unwrap();
        doc.save().unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(fs::read_to_string(&real).unwrap().contains("\"a\""));
    }
}
