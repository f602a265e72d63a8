//! The one way Switchboard rewrites a file it owns (settings, trusted folders, the
//! token store, the transport cache, run logs): [`replace_file`].
//!
//! - The new content goes to a temporary file in the target's directory, under a
//!   random name, opened `O_CREAT | O_EXCL` (`create_new`) and `O_NOFOLLOW`: a file or
//!   link someone placed there beforehand is never opened, let alone truncated.
//! - The temporary file is created with the requested mode (0600 for secrets), written,
//!   `fsync`ed, and renamed over the target; the directory is `fsync`ed after.
//! - A target that is a symbolic link is refused ([`Links::Refuse`], for files only
//!   Switchboard writes) or resolved first and its final file replaced
//!   ([`Links::ReplaceTarget`], for settings files people keep in their dotfiles).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// What [`replace_file`] does when the target path is a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Fail with [`ReplaceError::Symlink`]: the file is Switchboard's own.
    Refuse,
    /// Resolve the link and replace the file it finally points to (the link stays).
    ReplaceTarget,
}

/// How [`replace_file`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replace {
    /// The mode of a new file (and of a replaced one unless `keep_mode`).
    pub mode: u32,
    /// Give the new file the mode the replaced file had.
    pub keep_mode: bool,
    /// What to do with a symbolic link at the target path.
    pub links: Links,
}

impl Replace {
    /// A file holding secrets (tokens): always 0600, a link at its path refused.
    pub const SECRET: Self = Self {
        mode: 0o600,
        keep_mode: false,
        links: Links::Refuse,
    };
    /// A file only Switchboard writes (cache, run logs, trusted folders): new files
    /// 0600, an existing file's mode kept, a link at its path refused.
    pub const OWNED: Self = Self {
        mode: 0o600,
        keep_mode: true,
        links: Links::Refuse,
    };
    /// A settings file the user may keep behind a link: new files 0600, an existing
    /// file's mode kept, a link resolved and its target replaced.
    pub const SETTINGS: Self = Self {
        mode: 0o600,
        keep_mode: true,
        links: Links::ReplaceTarget,
    };
}

/// Why a file could not be replaced. Each message names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    /// The target is a symbolic link and the file is Switchboard's own.
    #[error(
        "{} is a symbolic link; Switchboard does not write its own files through links. \
         Check where it points ({}), remove the link and run the command again: the file \
         will be created in its place",
        path.display(),
        target.as_ref().map_or_else(|| "unreadable link".to_owned(), |t| t.display().to_string())
    )]
    Symlink {
        /// The link.
        path: PathBuf,
        /// Where it points, when that can be read.
        target: Option<PathBuf>,
    },
    /// A file system operation failed.
    #[error("cannot write {}: {what}: {source}; check the folder exists and is writable by you", path.display())]
    Io {
        /// The file being replaced.
        path: PathBuf,
        /// The step that failed.
        what: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl ReplaceError {
    fn io(path: &Path, what: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            what: what.into(),
            source,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::Symlink { path, .. } | Self::Io { path, .. } => path,
        }
    }
}

/// Fails with [`ReplaceError::Symlink`] when `path` is a symbolic link (a missing path
/// is fine). Use it for companion files such as lock files.
pub fn refuse_symlink(path: &Path) -> Result<(), ReplaceError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(ReplaceError::Symlink {
            path: path.to_path_buf(),
            target: fs::read_link(path).ok(),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ReplaceError::io(path, "cannot look at it", e)),
    }
}

/// Opens (creating it with `mode` when missing) a file that must not be a symbolic
/// link, for reading and writing, without truncating it: lock files. A link at `path`
/// is refused with [`ReplaceError::Symlink`].
pub fn open_owned(path: &Path, mode: u32) -> Result<File, ReplaceError> {
    refuse_symlink(path)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // A link placed between the check and the open.
            Some(libc::ELOOP) => ReplaceError::Symlink {
                path: path.to_path_buf(),
                target: fs::read_link(path).ok(),
            },
            _ => ReplaceError::io(path, "cannot open it", e),
        })
}

/// Atomically replaces (or creates) `path` with `bytes`, as described in the module
/// documentation. The folder is created (0700) when missing.
pub fn replace_file(path: &Path, bytes: &[u8], how: Replace) -> Result<(), ReplaceError> {
    let target = match how.links {
        Links::Refuse => {
            refuse_symlink(path)?;
            path.to_path_buf()
        }
        Links::ReplaceTarget => match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path)
                .map_err(|e| ReplaceError::io(path, "cannot resolve the link", e))?,
            _ => path.to_path_buf(),
        },
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                ReplaceError::io(
                    path,
                    format!("cannot create the folder {}", dir.display()),
                    e,
                )
            })?;
    }
    let mode = match fs::symlink_metadata(&target) {
        Ok(m) if how.keep_mode && m.is_file() => m.permissions().mode() & 0o777,
        _ => how.mode,
    };
    let name = target
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let (tmp, mut file) = create_temp(&dir, &name, mode).map_err(|e| {
        ReplaceError::io(
            path,
            format!("cannot create a temporary file in {}", dir.display()),
            e,
        )
    })?;
    let written = (|| -> io::Result<()> {
        // The umask may have narrowed the mode given to open(2).
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    drop(file);
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(ReplaceError::io(path, "cannot write the temporary file", e));
    }
    if let Err(e) = fs::rename(&tmp, &target) {
        let _ = fs::remove_file(&tmp);
        return Err(ReplaceError::io(
            path,
            "cannot move the new file into place",
            e,
        ));
    }
    // Make the rename durable; failing here is not worth failing the write.
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A new file `.<name>.<random>.tmp` in `dir`, opened `create_new` + `O_NOFOLLOW`.
fn create_temp(dir: &Path, name: &str, mode: u32) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..8 {
        let tmp = dir.join(format!(".{name}.{}.tmp", random_hex()?));
        match open_new(&tmp, mode) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

/// Creates `path` exclusively: fails when anything (a file, a link) is already there.
fn open_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// 16 random bytes from the kernel, as hex.
fn random_hex() -> io::Result<String> {
    let mut buf = [0u8; 16];
    File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn creates_replaces_and_sets_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/file.json");
        replace_file(&path, b"one", Replace::SECRET).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "one");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A secret file is always 0600, even when it had become wider.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        replace_file(&path, b"two", Replace::SECRET).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // An owned file keeps its mode.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        replace_file(&path, b"three", Replace::OWNED).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // No temporary file is left behind.
        let left: Vec<_> = fs::read_dir(dir.path().join("sub")).unwrap().collect();
        assert_eq!(left.len(), 1);
    }

    #[test]
    fn a_link_at_the_target_is_refused_and_its_victim_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let path = dir.path().join("tokens.json");
        symlink(&victim, &path).unwrap();
        for how in [Replace::SECRET, Replace::OWNED] {
            let e = replace_file(&path, b"secret", how).unwrap_err();
            assert!(matches!(e, ReplaceError::Symlink { .. }), "{e}");
            let text = e.to_string();
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains("remove the link"), "{text}");
        }
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert!(
            fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn the_temporary_file_never_opens_a_placed_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let placed = dir.path().join(".tokens.json.tmp");
        symlink(&victim, &placed).unwrap();
        let e = open_new(&placed, 0o600).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        // A dangling link too: create_new does not create through it.
        let dangling = dir.path().join(".dangling.tmp");
        let nowhere = dir.path().join("nowhere");
        symlink(&nowhere, &dangling).unwrap();
        assert!(open_new(&dangling, 0o600).is_err());
        assert!(!nowhere.exists());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        // Random names: two calls do not collide.
        assert_ne!(random_hex().unwrap(), random_hex().unwrap());
    }

    #[test]
    fn settings_links_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        fs::write(&real, "{}").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.path().join("link.json");
        symlink(&real, &link).unwrap();
        replace_file(&link, b"{\"a\":1}", Replace::SETTINGS).unwrap();
        assert_eq!(fs::read_to_string(&real).unwrap(), "{\"a\":1}");
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let mode = fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    #[test]
    fn lock_files_must_not_be_links() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let lock = dir.path().join("x.lock");
        symlink(&victim, &lock).unwrap();
        let e = open_owned(&lock, 0o600).unwrap_err();
        assert!(matches!(e, ReplaceError::Symlink { .. }), "{e}");
        fs::remove_file(&lock).unwrap();
        open_owned(&lock, 0o600).unwrap();
        let mode = fs::metadata(&lock).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
