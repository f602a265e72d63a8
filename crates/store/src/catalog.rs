//! The team catalog: MCP servers an admin publishes for everyone, and which users enabled
//! which. Writes ([`Store::publish_catalog_server`], [`Store::unpublish_catalog_server`])
//! take the acting user's id and are refused unless that user is an admin in the
//! database at the moment of the write. Reads for a user go through [`Store::for_user`]
//! ([`UserStore::catalog`], [`UserStore::catalog_server`]) and carry that user's
//! enablement; a user's OAuth tokens for a catalog server are theirs alone
//! (`catalog_oauth_tokens`, reached with [`crate::ServerRef::Catalog`]).
//!
//! A catalog server is HTTP/SSE (URL + sealed headers) or stdio (program, arguments,
//! working folder and a sealed environment that is the process's whole environment).
//! Whether an instance runs stdio entries is the operator's decision, made by the web
//! layer; the store only keeps what the admin published.
//!
//! A user's tokens for a catalog server go when that user disables it, when an admin
//! unpublishes it, and for every user when its transport, URL, command, arguments or
//! working folder changes. Per entry: at
//! most 64 arguments, environment variables or headers, each value at most 4096 bytes.
//!
//! Must not: let a non-admin write the catalog; return one user's enablement or tokens
//! to another; keep a user's tokens past a change of the server's address or launch
//! (they were issued for the old one).

use std::collections::BTreeMap;

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::account::{UserId, now};
use crate::error::{Result, StoreError};
use crate::seal::Secret;
use crate::store::{CATALOG_ENV, CATALOG_HEADERS, SealedColumn, Store};
use crate::user_data::{Transport, UserStore, check_name, is_web_url, text_of};

/// At most this many stdio arguments, environment variables or headers.
const MAX_ITEMS: usize = 64;
/// At most this long, any one argument, value or description.
const MAX_TEXT: usize = 4096;

/// How a catalog server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogLaunch {
    /// An HTTP endpoint.
    Http {
        /// The endpoint (`http://` or `https://`).
        url: String,
        /// Streamable HTTP or SSE.
        transport: Transport,
        /// Extra request headers (values sealed at rest).
        headers: BTreeMap<String, Secret>,
    },
    /// A process on the server, run once per user who enabled it.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments, exactly as the admin gave them.
        args: Vec<String>,
        /// Its working folder (absolute), if set.
        cwd: Option<String>,
        /// Its whole environment (values sealed at rest): nothing else is inherited.
        env: BTreeMap<String, Secret>,
    },
}

impl CatalogLaunch {
    /// `http`, `sse` or `stdio`.
    pub fn transport_name(&self) -> &'static str {
        match self {
            Self::Http { transport, .. } => transport.as_str(),
            Self::Stdio { .. } => "stdio",
        }
    }

    /// Whether it runs a command on the server.
    pub fn is_stdio(&self) -> bool {
        matches!(self, Self::Stdio { .. })
    }
}

/// A catalog server as an admin publishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogServer {
    /// The name, unique in the catalog (its own namespace, apart from users' servers).
    pub name: String,
    /// What it is for, shown to users.
    pub description: String,
    /// How it is reached.
    pub launch: CatalogLaunch,
}

/// A published catalog server and its bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogRecord {
    /// The server.
    pub server: CatalogServer,
    /// The admin who last published it (`None` once that user is deleted).
    pub published_by: Option<UserId>,
    /// When it was first published (unix seconds).
    pub created_at: i64,
    /// When it was last changed (unix seconds).
    pub updated_at: i64,
}

/// A catalog server as one user sees it: with whether they enabled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// The published server.
    pub record: CatalogRecord,
    /// Whether this user enabled it.
    pub enabled: bool,
}

fn check_map(what: &str, map: &BTreeMap<String, Secret>) -> Result<()> {
    if map.len() > MAX_ITEMS {
        return Err(StoreError::Invalid(format!(
            "{} {what}: at most {MAX_ITEMS}",
            map.len()
        )));
    }
    for (k, v) in map {
        if k.is_empty() || k.contains(['=', '\0']) || k.len() > 256 {
            return Err(StoreError::Invalid(format!(
                "{what} name `{}` is empty, too long or holds `=` or NUL",
                k.escape_debug()
            )));
        }
        if v.expose().contains('\0') || v.expose().len() > MAX_TEXT {
            return Err(StoreError::Invalid(format!(
                "the value of {what} `{k}` holds NUL or is longer than {MAX_TEXT} bytes"
            )));
        }
    }
    Ok(())
}

fn check(server: &CatalogServer) -> Result<()> {
    check_name(&server.name)?;
    let name = &server.name;
    if server.description.len() > MAX_TEXT {
        return Err(StoreError::Invalid(format!(
            "catalog server `{name}`: the description is longer than {MAX_TEXT} bytes"
        )));
    }
    match &server.launch {
        CatalogLaunch::Http { url, headers, .. } => {
            if !is_web_url(url) {
                return Err(StoreError::Invalid(format!(
                    "catalog server `{name}`: the URL must be an http:// or https:// address"
                )));
            }
            check_map("header", headers)
        }
        CatalogLaunch::Stdio {
            command,
            args,
            cwd,
            env,
        } => {
            if command.trim().is_empty() || command.contains('\0') || command.len() > MAX_TEXT {
                return Err(StoreError::Invalid(format!(
                    "catalog server `{name}`: give the `command` to run (no NUL)"
                )));
            }
            if args.len() > MAX_ITEMS || args.iter().any(|a| a.contains('\0') || a.len() > MAX_TEXT)
            {
                return Err(StoreError::Invalid(format!(
                    "catalog server `{name}`: at most {MAX_ITEMS} arguments, each without NUL and at most {MAX_TEXT} bytes"
                )));
            }
            if let Some(cwd) = cwd
                && (!cwd.starts_with('/') || cwd.contains('\0'))
            {
                return Err(StoreError::Invalid(format!(
                    "catalog server `{name}`: the working folder `{cwd}` must be an absolute path"
                )));
            }
            check_map("environment variable", env)
        }
    }
}

fn encode_map(map: &BTreeMap<String, Secret>) -> String {
    let obj: serde_json::Map<String, serde_json::Value> = map
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.expose().to_owned())))
        .collect();
    serde_json::Value::Object(obj).to_string()
}

fn decode_map(json: &str, col: SealedColumn) -> Result<BTreeMap<String, Secret>> {
    let bad = || StoreError::Unseal {
        table: col.table,
        column: col.column,
        reason: "it is not a JSON object of strings",
    };
    let value: serde_json::Value = serde_json::from_str(json).map_err(|_| bad())?;
    let serde_json::Value::Object(map) = value else {
        return Err(bad());
    };
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, Secret::new(s))),
            _ => Err(bad()),
        })
        .collect()
}

const COLUMNS: &str = "c.name, c.transport, c.url, c.command, c.args, c.cwd, c.headers, c.env, \
                       c.description, c.published_by, c.created_at, c.updated_at";

impl Store {
    fn seal_map(
        &self,
        col: SealedColumn,
        name: &str,
        map: &BTreeMap<String, Secret>,
    ) -> Result<Option<Vec<u8>>> {
        if map.is_empty() {
            return Ok(None);
        }
        let slot = col.slot("", name);
        Ok(Some(self.keys()?.seal(&slot, encode_map(map).as_bytes())?))
    }

    fn open_map(
        &self,
        col: SealedColumn,
        name: &str,
        sealed: Option<Vec<u8>>,
    ) -> Result<BTreeMap<String, Secret>> {
        let Some(sealed) = sealed else {
            return Ok(BTreeMap::new());
        };
        let (plain, _) = self.keys()?.open(&col.slot("", name), &sealed)?;
        decode_map(&text_of(plain, col.table, col.column)?, col)
    }

    fn catalog_from(&self, row: &AnyRow) -> Result<CatalogRecord> {
        let get = || StoreError::query("reading a catalog server");
        let name: String = row.try_get(0).map_err(get())?;
        let transport: String = row.try_get(1).map_err(get())?;
        let url: Option<String> = row.try_get(2).map_err(get())?;
        let command: Option<String> = row.try_get(3).map_err(get())?;
        let args: Option<String> = row.try_get(4).map_err(get())?;
        let cwd: Option<String> = row.try_get(5).map_err(get())?;
        let headers: Option<Vec<u8>> = row.try_get(6).map_err(get())?;
        let env: Option<Vec<u8>> = row.try_get(7).map_err(get())?;
        let launch = match (transport.as_str(), url, command) {
            ("stdio", None, Some(command)) => CatalogLaunch::Stdio {
                command,
                args: match args {
                    None => Vec::new(),
                    Some(a) => serde_json::from_str(&a).map_err(|_| {
                        StoreError::Invalid(format!(
                            "catalog server `{name}`: the stored arguments are not a JSON array of strings; publish it again"
                        ))
                    })?,
                },
                cwd,
                env: self.open_map(CATALOG_ENV, &name, env)?,
            },
            (t, Some(url), None) => CatalogLaunch::Http {
                url,
                transport: Transport::parse(t)?,
                headers: self.open_map(CATALOG_HEADERS, &name, headers)?,
            },
            _ => {
                return Err(StoreError::Invalid(format!(
                    "catalog server `{name}` is stored inconsistently: publish it again"
                )));
            }
        };
        let published_by: Option<String> = row.try_get(9).map_err(get())?;
        Ok(CatalogRecord {
            server: CatalogServer {
                description: row.try_get(8).map_err(get())?,
                name,
                launch,
            },
            published_by: published_by.map(UserId),
            created_at: row.try_get(10).map_err(get())?,
            updated_at: row.try_get(11).map_err(get())?,
        })
    }

    /// Every catalog server, by name (what admins manage; secrets included, for the
    /// caller to mask).
    ///
    /// # Errors
    /// A database failure, or sealed values that do not open.
    pub async fn catalog_servers(&self) -> Result<Vec<CatalogRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM catalog_servers c ORDER BY c.name"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("listing the catalog"))?;
        rows.iter().map(|r| self.catalog_from(r)).collect()
    }

    /// One catalog server.
    ///
    /// # Errors
    /// A database failure, or sealed values that do not open.
    pub async fn catalog_server(&self, name: &str) -> Result<Option<CatalogRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM catalog_servers c WHERE c.name = $1"
        ))
        .bind(name.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("reading a catalog server"))?;
        row.map(|r| self.catalog_from(&r)).transpose()
    }

    /// Publish (add or replace) a catalog server as `admin`, who must be an admin in the
    /// database now. When its URL or launch changes, every user's tokens for it are
    /// deleted (they were issued for the old one); enablements stay.
    ///
    /// # Errors
    /// [`StoreError::Forbidden`] when `admin` is not an admin; a bad name, URL, command or
    /// map; no secret key (when there are headers or env); a database failure.
    pub async fn publish_catalog_server(
        &self,
        admin: &UserId,
        server: &CatalogServer,
    ) -> Result<()> {
        check(server)?;
        let name = server.name.clone();
        let (transport, url, command, args, cwd, headers, env) = match &server.launch {
            CatalogLaunch::Http {
                url,
                transport,
                headers,
            } => (
                transport.as_str(),
                Some(url.clone()),
                None,
                None,
                None,
                self.seal_map(CATALOG_HEADERS, &name, headers)?,
                None,
            ),
            CatalogLaunch::Stdio {
                command,
                args,
                cwd,
                env,
            } => (
                "stdio",
                None,
                Some(command.clone()),
                Some(serde_json::Value::from(args.clone()).to_string()),
                cwd.clone(),
                None,
                self.seal_map(CATALOG_ENV, &name, env)?,
            ),
        };
        let doing = "publishing a catalog server";
        let mut tx = self.pool.begin().await.map_err(StoreError::query(doing))?;
        let is_admin = sqlx::query("SELECT 1 FROM users WHERE id = $1 AND is_admin = 1")
            .bind(admin.0.clone())
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::query(doing))?
            .is_some();
        if !is_admin {
            return Err(StoreError::Forbidden(
                "only a team admin may publish catalog servers".into(),
            ));
        }
        let old = sqlx::query(
            "SELECT transport, url, command, args, cwd FROM catalog_servers WHERE name = $1",
        )
        .bind(name.clone())
        .fetch_optional(&mut *tx)
        .await
        .map_err(StoreError::query(doing))?;
        if let Some(old) = old {
            let get = || StoreError::query(doing);
            let same = old.try_get::<String, _>(0).map_err(get())? == transport
                && old.try_get::<Option<String>, _>(1).map_err(get())? == url
                && old.try_get::<Option<String>, _>(2).map_err(get())? == command
                && old.try_get::<Option<String>, _>(3).map_err(get())? == args
                && old.try_get::<Option<String>, _>(4).map_err(get())? == cwd;
            if !same {
                sqlx::query("DELETE FROM catalog_oauth_tokens WHERE catalog_name = $1")
                    .bind(name.clone())
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::query(
                        "dropping tokens for a catalog server's old address",
                    ))?;
            }
        }
        sqlx::query(
            "INSERT INTO catalog_servers (name, transport, url, command, args, cwd, headers, env, \
             description, published_by, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) \
             ON CONFLICT (name) DO UPDATE SET transport = excluded.transport, url = excluded.url, \
             command = excluded.command, args = excluded.args, cwd = excluded.cwd, \
             headers = excluded.headers, env = excluded.env, description = excluded.description, \
             published_by = excluded.published_by, updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(transport)
        .bind(url)
        .bind(command)
        .bind(args)
        .bind(cwd)
        .bind(headers)
        .bind(env)
        .bind(server.description.clone())
        .bind(admin.0.clone())
        .bind(now())
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query(doing))?;
        tx.commit().await.map_err(StoreError::query(doing))?;
        Ok(())
    }

    /// Remove a catalog server as `admin`, with every user's enablement and tokens for it.
    /// Says whether it existed.
    ///
    /// # Errors
    /// [`StoreError::Forbidden`] when `admin` is not an admin; a database failure.
    pub async fn unpublish_catalog_server(&self, admin: &UserId, name: &str) -> Result<bool> {
        let doing = "unpublishing a catalog server";
        let mut tx = self.pool.begin().await.map_err(StoreError::query(doing))?;
        let is_admin = sqlx::query("SELECT 1 FROM users WHERE id = $1 AND is_admin = 1")
            .bind(admin.0.clone())
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::query(doing))?
            .is_some();
        if !is_admin {
            return Err(StoreError::Forbidden(
                "only a team admin may unpublish catalog servers".into(),
            ));
        }
        let done = sqlx::query("DELETE FROM catalog_servers WHERE name = $1")
            .bind(name.to_owned())
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query(doing))?;
        tx.commit().await.map_err(StoreError::query(doing))?;
        Ok(done.rows_affected() > 0)
    }
}

impl UserStore {
    /// The catalog as this user sees it: every published server, with whether they
    /// enabled it.
    ///
    /// # Errors
    /// A database failure, or sealed values that do not open.
    pub async fn catalog(&self) -> Result<Vec<CatalogEntry>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS}, e.user_id FROM catalog_servers c \
             LEFT JOIN catalog_enablements e ON e.catalog_name = c.name AND e.user_id = $1 \
             ORDER BY c.name"
        ))
        .bind(self.uid())
        .fetch_all(&self.store.pool)
        .await
        .map_err(StoreError::query("listing the catalog"))?;
        rows.iter().map(|r| self.entry_from(r)).collect()
    }

    /// One catalog server as this user sees it.
    ///
    /// # Errors
    /// A database failure, or sealed values that do not open.
    pub async fn catalog_server(&self, name: &str) -> Result<Option<CatalogEntry>> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS}, e.user_id FROM catalog_servers c \
             LEFT JOIN catalog_enablements e ON e.catalog_name = c.name AND e.user_id = $1 \
             WHERE c.name = $2"
        ))
        .bind(self.uid())
        .bind(name.to_owned())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("reading a catalog server"))?;
        row.map(|r| self.entry_from(&r)).transpose()
    }

    fn entry_from(&self, row: &AnyRow) -> Result<CatalogEntry> {
        let enabled_by: Option<String> = row
            .try_get(12)
            .map_err(StoreError::query("reading a catalog server"))?;
        Ok(CatalogEntry {
            record: self.store.catalog_from(row)?,
            enabled: enabled_by.is_some(),
        })
    }

    /// Enable the catalog server `name` for this user. `false` when there is no such
    /// catalog server; enabling twice is the same as once.
    ///
    /// # Errors
    /// A database failure.
    pub async fn enable_catalog_server(&self, name: &str) -> Result<bool> {
        sqlx::query(
            "INSERT INTO catalog_enablements (user_id, catalog_name, enabled_at) \
             SELECT $1, name, $3 FROM catalog_servers WHERE name = $2 \
             ON CONFLICT (user_id, catalog_name) DO NOTHING",
        )
        .bind(self.uid())
        .bind(name.to_owned())
        .bind(now())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("enabling a catalog server"))?;
        Ok(self.catalog_server(name).await?.is_some())
    }

    /// Disable the catalog server `name` for this user, which also forgets their tokens
    /// for it. Says whether it was enabled.
    ///
    /// # Errors
    /// A database failure.
    pub async fn disable_catalog_server(&self, name: &str) -> Result<bool> {
        let done =
            sqlx::query("DELETE FROM catalog_enablements WHERE user_id = $1 AND catalog_name = $2")
                .bind(self.uid())
                .bind(name.to_owned())
                .execute(&self.store.pool)
                .await
                .map_err(StoreError::query("disabling a catalog server"))?;
        Ok(done.rows_affected() > 0)
    }
}
