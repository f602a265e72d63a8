//! [`DatabaseUrl`]: which database the store opens — a checked `sqlite://` or
//! `postgres://` URL whose `Display` and `Debug` never show the password — and the
//! default SQLite file for a one-machine team.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

const FIX: &str = "write sqlite://PATH (e.g. sqlite:///var/lib/switchboard/team.db) for one machine, or postgres://USER:PASSWORD@HOST:PORT/DATABASE";

/// The database engine behind a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An embedded SQLite file (one machine).
    Sqlite,
    /// A PostgreSQL server (several instances).
    Postgres,
}

impl Backend {
    /// `sqlite` or `postgres`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// A database URL the store can open. Holds the URL with its password; shows it only
/// with the password replaced by `***`.
#[derive(Clone)]
pub struct DatabaseUrl {
    backend: Backend,
    /// The URL handed to the driver (may hold a password).
    full: String,
    /// The URL as shown to people.
    shown: String,
    /// The SQLite file, for [`Backend::Sqlite`].
    file: Option<PathBuf>,
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DatabaseUrl").field(&self.shown).finish()
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl DatabaseUrl {
    /// Check a URL: `sqlite://PATH[?mode=rwc]` (a relative PATH is relative to the current
    /// directory) or `postgres://` / `postgresql://` with a host and a database name.
    ///
    /// # Errors
    /// [`StoreError::Url`] naming the problem and the form to use; the password is never
    /// part of the message.
    pub fn parse(url: &str) -> Result<Self> {
        let url = url.trim();
        let shown = redact(url);
        let bad = |problem: String| StoreError::Url {
            url: shown.clone(),
            problem,
            fix: FIX,
        };
        let Some((scheme, _)) = url.split_once(':') else {
            return Err(bad("no scheme".into()));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" => {
                let rest = &url[scheme.len() + 1..];
                let rest = rest.strip_prefix("//").unwrap_or(rest);
                let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
                if path.is_empty() {
                    return Err(bad("no file path".into()));
                }
                if path == ":memory:" || query.split('&').any(|kv| kv == "mode=memory") {
                    return Err(bad(
                        "an in-memory database would be lost at exit and differ per connection"
                            .into(),
                    ));
                }
                for kv in query.split('&').filter(|kv| !kv.is_empty()) {
                    if kv.starts_with("mode=") && kv != "mode=rwc" && kv != "mode=rw" {
                        return Err(bad(format!(
                            "`{kv}`: the store writes, so the mode is rwc (created if missing) or rw"
                        )));
                    }
                }
                let file = PathBuf::from(path);
                let mut full = format!("sqlite://{path}");
                // The file is created by `Store::open` (0600) before the driver sees it.
                full.push_str(if query.is_empty() { "?mode=rw" } else { "?" });
                if !query.is_empty() {
                    full.push_str(&query.replace("mode=rwc", "mode=rw"));
                }
                Ok(Self {
                    backend: Backend::Sqlite,
                    full,
                    shown,
                    file: Some(file),
                })
            }
            "postgres" | "postgresql" => {
                let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
                if parsed.host_str().is_none_or(str::is_empty) {
                    return Err(bad("no host".into()));
                }
                if parsed.path().trim_start_matches('/').is_empty() {
                    return Err(bad("no database name after the host".into()));
                }
                Ok(Self {
                    backend: Backend::Postgres,
                    full: url.to_owned(),
                    shown,
                    file: None,
                })
            }
            other => Err(bad(format!("unsupported scheme `{other}`"))),
        }
    }

    /// `sqlite://<dir>/team.db?mode=rwc`: the default for a one-machine team, in
    /// Switchboard's home folder (`~/.switchboard`).
    ///
    /// # Errors
    /// When the path is not UTF-8.
    pub fn default_sqlite(home: &Path) -> Result<Self> {
        let file = home.join("team.db");
        let Some(path) = file.to_str() else {
            return Err(StoreError::File {
                path: file.display().to_string(),
                problem: "the path is not UTF-8: pass --database sqlite://PATH".into(),
            });
        };
        Self::parse(&format!("sqlite://{path}?mode=rwc"))
    }

    /// Which engine.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The SQLite file (`None` for PostgreSQL).
    pub fn sqlite_file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    pub(crate) fn driver_url(&self) -> &str {
        &self.full
    }
}

/// The URL with its password (if any) replaced by `***`. Unparseable URLs are cut at the
/// first `@`, so a password can never slip through a syntax error.
pub(crate) fn redact(url: &str) -> String {
    if let Ok(mut parsed) = url::Url::parse(url)
        && parsed.password().is_some()
    {
        if parsed.set_password(Some("***")).is_ok() {
            return parsed.to_string();
        }
    } else if let Ok(parsed) = url::Url::parse(url)
        && parsed.has_host()
    {
        return parsed.to_string();
    } else if !url.contains('@') {
        return url.to_owned();
    }
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => "<database URL with credentials>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls() {
        let u = DatabaseUrl::parse("sqlite:///tmp/x/team.db?mode=rwc").unwrap();
        assert_eq!(u.backend(), Backend::Sqlite);
        assert_eq!(u.sqlite_file(), Some(Path::new("/tmp/x/team.db")));
        assert_eq!(u.driver_url(), "sqlite:///tmp/x/team.db?mode=rw");
        let rel = DatabaseUrl::parse("sqlite://team.db").unwrap();
        assert_eq!(rel.sqlite_file(), Some(Path::new("team.db")));
        assert_eq!(rel.driver_url(), "sqlite://team.db?mode=rw");
    }

    #[test]
    fn bad_urls_name_the_problem_and_the_fix() {
        for (url, problem) in [
            ("mysql://u@h/db", "unsupported scheme `mysql`"),
            ("team.db", "no scheme"),
            ("sqlite://", "no file path"),
            ("sqlite::memory:", "in-memory"),
            ("sqlite://x.db?mode=ro", "`mode=ro`"),
            ("postgres://user:hunter2@/db", "hunter2-never"),
            ("postgres://user:hunter2@host", "no database name"),
        ] {
            let err = DatabaseUrl::parse(url).unwrap_err().to_string();
            assert!(!err.contains("hunter2"), "{err}");
            if problem != "hunter2-never" {
                assert!(err.contains(problem), "{url}: {err}");
            }
            assert!(err.contains("postgres://USER:PASSWORD@HOST"), "{err}");
        }
    }

    #[test]
    fn the_password_is_never_shown() {
        let u = DatabaseUrl::parse("postgres://sb:hunter2@db.example:5432/team").unwrap();
        assert_eq!(u.to_string(), "postgres://sb:***@db.example:5432/team");
        assert!(!format!("{u:?}").contains("hunter2"));
        assert_eq!(u.driver_url(), "postgres://sb:hunter2@db.example:5432/team");
        assert_eq!(
            redact("postgres://sb:hun@ter2@[bad/db"),
            "postgres://***@[bad/db"
        );
    }
}
