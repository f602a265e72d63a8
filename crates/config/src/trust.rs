//! Folder trust: a project settings file applies only once the user trusts that
//! project folder (until then nothing in it is applied; see [`crate::load`]).
//!
//! Trusted folders live in `$SWITCHBOARD_HOME/trustedFolders.json` as
//! `{"trustedFolders": ["/abs/path", ...]}` (other keys are kept). A folder is
//! trusted when it or one of its ancestors is listed.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::jsonc;
use crate::replace::{Replace, replace_file};

/// `<home>/trustedFolders.json`.
pub fn trusted_folders_path(home: &Path) -> PathBuf {
    home.join("trustedFolders.json")
}

fn read_doc(home: &Path) -> Result<Map<String, Value>, ConfigError> {
    let path = trusted_folders_path(home);
    match jsonc::read(&path)? {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(ConfigError::Invalid {
            path,
            field: "(root)".into(),
            message: "expected an object like {\"trustedFolders\": [\"/path\"]}".into(),
        }),
    }
}

/// The trusted folders as listed.
pub fn trusted_folders(home: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let doc = read_doc(home)?;
    match doc.get("trustedFolders") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => Ok(a
            .iter()
            .filter_map(Value::as_str)
            .map(PathBuf::from)
            .collect()),
        Some(_) => Err(ConfigError::Invalid {
            path: trusted_folders_path(home),
            field: "trustedFolders".into(),
            message: "expected a list of absolute paths".into(),
        }),
    }
}

fn canonical_or_absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// Whether `path` (or an ancestor) is trusted. An unreadable trust file trusts nothing.
pub fn is_trusted(home: &Path, path: &Path) -> bool {
    let Ok(list) = trusted_folders(home) else {
        return false;
    };
    let target = canonical_or_absolute(path);
    list.iter().any(|t| {
        t.is_absolute() && (target.starts_with(t) || target.starts_with(canonical_or_absolute(t)))
    })
}

/// Trusts `path` (canonicalized; it must exist) by adding it to
/// `<home>/trustedFolders.json` (`{"trustedFolders": ["/abs/path", ...]}`, other
/// keys kept); the folder and everything below it become trusted. Returns the path
/// recorded.
/// Already-trusted paths are not added twice. The file is written atomically.
pub fn trust_folder(home: &Path, path: &Path) -> Result<PathBuf, ConfigError> {
    let canonical = std::fs::canonicalize(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let s = canonical.to_string_lossy().into_owned();
    edit_list(home, |arr| {
        if !arr.iter().any(|v| v.as_str() == Some(s.as_str())) {
            arr.push(Value::String(s.clone()));
        }
    })?;
    Ok(canonical)
}

/// What [`revoke_folder`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revoked {
    /// The entries removed from the list (the folder as given and as canonicalized).
    pub removed: Vec<PathBuf>,
    /// Listed ancestors that still trust the folder (revoke those to untrust it).
    pub still_trusted_by: Vec<PathBuf>,
}

/// Stops trusting `path`: removes it from `<home>/trustedFolders.json` (as written
/// and as canonicalized; the folder need not exist any more), keeping other keys.
/// The answer names listed ancestors that still make it trusted.
pub fn revoke_folder(home: &Path, path: &Path) -> Result<Revoked, ConfigError> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let canonical = canonical_or_absolute(path);
    let mut removed = Vec::new();
    edit_list(home, |arr| {
        arr.retain(|v| {
            let listed = v.as_str().map(PathBuf::from);
            match listed {
                Some(l) if l == absolute || l == canonical => {
                    removed.push(l);
                    false
                }
                _ => true,
            }
        });
    })?;
    let still_trusted_by = trusted_folders(home)?
        .into_iter()
        .filter(|t| t.is_absolute() && (canonical.starts_with(t) || absolute.starts_with(t)))
        .collect();
    Ok(Revoked {
        removed,
        still_trusted_by,
    })
}

/// Reads the trust file, lets `edit` change the `trustedFolders` list, and writes
/// the file back atomically (other keys kept).
fn edit_list(home: &Path, edit: impl FnOnce(&mut Vec<Value>)) -> Result<(), ConfigError> {
    let file = trusted_folders_path(home);
    let mut doc = read_doc(home)?;
    let list = doc
        .entry("trustedFolders")
        .or_insert_with(|| Value::Array(Vec::new()));
    if list.is_null() {
        *list = Value::Array(Vec::new());
    }
    let Some(arr) = list.as_array_mut() else {
        return Err(ConfigError::Invalid {
            path: file,
            field: "trustedFolders".into(),
            message: "expected a list of absolute paths; fix it by hand".into(),
        });
    };
    edit(arr);
    let mut text =
        serde_json::to_string_pretty(&Value::Object(doc)).map_err(|e| ConfigError::Write {
            path: file.clone(),
            source: std::io::Error::other(e),
        })?;
    text.push('\n');
    // Switchboard's own file: a link in its place is refused, not followed.
    Ok(replace_file(&file, text.as_bytes(), Replace::OWNED)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_ancestor_and_not_siblings() {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let proj = root.path().join("work");
        let child = proj.join("sub/deeper");
        let sibling = root.path().join("workshop");
        std::fs::create_dir_all(&child).unwrap();
        std::fs::create_dir_all(&sibling).unwrap();
        assert!(!is_trusted(home.path(), &proj));
        let recorded = trust_folder(home.path(), &proj.join("sub/..")).unwrap();
        assert_eq!(recorded, std::fs::canonicalize(&proj).unwrap());
        assert!(is_trusted(home.path(), &proj));
        assert!(is_trusted(home.path(), &child));
        assert!(
            !is_trusted(home.path(), &sibling),
            "prefix match must be per component"
        );
        assert!(!is_trusted(home.path(), root.path()));
        // Idempotent.
        trust_folder(home.path(), &proj).unwrap();
        assert_eq!(trusted_folders(home.path()).unwrap().len(), 1);
    }

    #[test]
    fn keeps_other_keys_and_rejects_bad_file() {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            trusted_folders_path(home.path()),
            r#"{"other": 1, "trustedFolders": []}"#,
        )
        .unwrap();
        trust_folder(home.path(), dir.path()).unwrap();
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(trusted_folders_path(home.path())).unwrap(),
        )
        .unwrap();
        assert_eq!(v["other"], 1);
        std::fs::write(
            trusted_folders_path(home.path()),
            r#"{"trustedFolders": "x"}"#,
        )
        .unwrap();
        assert!(trust_folder(home.path(), dir.path()).is_err());
        assert!(!is_trusted(home.path(), dir.path()));
        assert!(trust_folder(home.path(), &dir.path().join("missing")).is_err());
    }

    #[test]
    fn revoke_removes_the_folder_and_names_trusting_ancestors() {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let proj = root.path().join("work");
        std::fs::create_dir_all(&proj).unwrap();
        trust_folder(home.path(), &proj).unwrap();
        trust_folder(home.path(), root.path()).unwrap();
        let r = revoke_folder(home.path(), &proj).unwrap();
        assert_eq!(r.removed, vec![std::fs::canonicalize(&proj).unwrap()]);
        assert_eq!(
            r.still_trusted_by,
            vec![std::fs::canonicalize(root.path()).unwrap()]
        );
        assert!(
            is_trusted(home.path(), &proj),
            "still trusted by its parent"
        );
        revoke_folder(home.path(), root.path()).unwrap();
        assert!(!is_trusted(home.path(), &proj));
        // A folder that is gone can still be revoked.
        trust_folder(home.path(), &proj).unwrap();
        std::fs::remove_dir_all(&proj).unwrap();
        let r = revoke_folder(home.path(), &proj).unwrap();
        assert_eq!(r.removed.len(), 1, "{r:?}");
        assert!(trusted_folders(home.path()).unwrap().is_empty());
    }
}
