//! MCP App sessions of one user's chats, through [`UserStore`] only: an app a tool
//! result in a team chat linked (`_meta.ui.resourceUri`), bound to its user, chat,
//! server (own or catalog), tool call and `ui://` resource, with the host methods it may
//! use and the tool input and result it starts with (sealed). Any instance reads the
//! session to serve the app's page and to answer the app's requests.
//!
//! Every query names `self.user`: another user's session is "not there" (`None` /
//! `false`), never an error that would confirm it exists.
//!
//! At most [`MAX_APP_SESSIONS_PER_USER`] (500) per user; a session goes with its chat.
//! The app's model context is sealed too, at most [`MAX_APP_CONTEXT_BYTES`] (256 KiB).
//!
//! Must not: store the tool's arguments or result in clear, or let a session name a
//! conversation that is not its user's.

use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::account::{now, random_token};
use crate::error::{Result, StoreError};
use crate::store::{APP_CONTEXT, APP_INIT};
use crate::user_data::{ServerRef, UserStore, text_of};

/// At most this many app sessions are kept per user; the oldest go first.
pub const MAX_APP_SESSIONS_PER_USER: i64 = 500;
/// Largest tool input + result (JSON bytes) an app session keeps.
pub const MAX_APP_INIT_BYTES: usize = 4 * 1024 * 1024;
/// Largest model context (bytes) an app may leave for the chat's next turn.
pub const MAX_APP_CONTEXT_BYTES: usize = 256 * 1024;

/// What a new app session binds.
#[derive(Debug, Clone)]
pub struct NewAppSession {
    /// The user's conversation the tool call ran in.
    pub conversation_id: String,
    /// The server that produced the UI resource (its tools are the only ones the app
    /// reaches).
    pub server: ServerRef,
    /// The tool whose result linked the app.
    pub tool: String,
    /// The tool call's id in the chat.
    pub call_id: String,
    /// The `ui://` resource.
    pub resource_uri: String,
    /// The host methods the app may use (`tools/call`, `resources/read`, …).
    pub allowed: Vec<String>,
    /// The tool's arguments.
    pub input: Value,
    /// The tool's result (the MCP `CallToolResult` JSON).
    pub result: Value,
}

/// A stored app session.
#[derive(Debug, Clone, PartialEq)]
pub struct AppSession {
    /// Its id (random; what the page and the app's requests name).
    pub id: String,
    /// The conversation it belongs to.
    pub conversation_id: String,
    /// Its server.
    pub server: ServerRef,
    /// The tool whose result linked it.
    pub tool: String,
    /// The tool call's id in the chat.
    pub call_id: String,
    /// The `ui://` resource.
    pub resource_uri: String,
    /// The host methods the app may use.
    pub allowed: Vec<String>,
    /// The tool's arguments.
    pub input: Value,
    /// The tool's result.
    pub result: Value,
    /// The sandbox's Content-Security-Policy, once the app was opened.
    pub csp_header: Option<String>,
    /// The conversation's last message when the session was made.
    pub after_seq: i64,
    /// Unix seconds.
    pub created_at: i64,
}

impl AppSession {
    /// Whether the app may use host method `method`.
    pub fn allows(&self, method: &str) -> bool {
        self.allowed.iter().any(|m| m == method)
    }
}

const COLUMNS: &str = "id, conversation_id, server_kind, server_name, tool_name, call_id, \
     resource_uri, allowed, init, csp_header, after_seq, created_at";

impl UserStore {
    /// Open an app session in the user's conversation `new.conversation_id`. `None` when
    /// the conversation is not the user's (or no longer exists). The user's oldest
    /// sessions beyond [`MAX_APP_SESSIONS_PER_USER`] are removed.
    ///
    /// # Errors
    /// Input and result over [`MAX_APP_INIT_BYTES`]; no secret key; a database failure.
    pub async fn create_app_session(&self, new: &NewAppSession) -> Result<Option<String>> {
        let init = json!({"input": new.input, "result": new.result}).to_string();
        if init.len() > MAX_APP_INIT_BYTES {
            return Err(StoreError::Invalid(format!(
                "an app session's tool input and result are at most {MAX_APP_INIT_BYTES} bytes of JSON"
            )));
        }
        let id = random_token(24)?;
        let sealed = self
            .store
            .keys()?
            .seal(&APP_INIT.slot(&self.uid(), &id), init.as_bytes())?;
        let (kind, name) = match &new.server {
            ServerRef::Own(n) => ("own", n.clone()),
            ServerRef::Catalog(n) => ("catalog", n.clone()),
        };
        let allowed = serde_json::to_string(&new.allowed).unwrap_or_else(|_| "[]".to_owned());
        let done = sqlx::query(
            "INSERT INTO app_sessions \
             (id, user_id, conversation_id, server_kind, server_name, tool_name, call_id, \
             resource_uri, allowed, init, csp_header, after_seq, created_at) \
             SELECT $1, c.user_id, c.id, $4, $5, $6, $7, $8, $9, $10, NULL, \
             COALESCE((SELECT MAX(m.seq) FROM chat_messages m WHERE m.conversation_id = c.id), 0), $11 \
             FROM conversations c WHERE c.user_id = $2 AND c.id = $3",
        )
        .bind(id.clone())
        .bind(self.uid())
        .bind(new.conversation_id.clone())
        .bind(kind.to_owned())
        .bind(name)
        .bind(new.tool.clone())
        .bind(new.call_id.clone())
        .bind(new.resource_uri.clone())
        .bind(allowed)
        .bind(sealed)
        .bind(now())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving an app session"))?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        sqlx::query(
            "DELETE FROM app_sessions WHERE user_id = $1 AND id NOT IN \
             (SELECT id FROM app_sessions WHERE user_id = $1 \
             ORDER BY created_at DESC, id DESC LIMIT $2)",
        )
        .bind(self.uid())
        .bind(MAX_APP_SESSIONS_PER_USER)
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("removing the oldest app sessions"))?;
        Ok(Some(id))
    }

    /// The user's app session `id`, or `None`.
    ///
    /// # Errors
    /// A sealed value that opens under no key; a database failure.
    pub async fn app_session(&self, id: &str) -> Result<Option<AppSession>> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM app_sessions WHERE user_id = $1 AND id = $2"
        ))
        .bind(self.uid())
        .bind(id.to_owned())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("reading an app session"))?;
        row.map(|r| self.app_from(&r)).transpose()
    }

    /// The app sessions of the user's conversation `conversation_id`, oldest first
    /// (empty for another user's).
    ///
    /// # Errors
    /// As [`UserStore::app_session`].
    pub async fn app_sessions_of(&self, conversation_id: &str) -> Result<Vec<AppSession>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM app_sessions WHERE user_id = $1 AND conversation_id = $2 \
             ORDER BY created_at, id"
        ))
        .bind(self.uid())
        .bind(conversation_id.to_owned())
        .fetch_all(&self.store.pool)
        .await
        .map_err(StoreError::query("reading app sessions"))?;
        rows.iter().map(|r| self.app_from(r)).collect()
    }

    /// Record the sandbox CSP of the user's app session `id`; `false` when there is none.
    ///
    /// # Errors
    /// A database failure.
    pub async fn set_app_csp(&self, id: &str, csp_header: &str) -> Result<bool> {
        let done =
            sqlx::query("UPDATE app_sessions SET csp_header = $1 WHERE user_id = $2 AND id = $3")
                .bind(csp_header.to_owned())
                .bind(self.uid())
                .bind(id.to_owned())
                .execute(&self.store.pool)
                .await
                .map_err(StoreError::query("saving an app's CSP"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Remove the user's app session `id`; `false` when there was none.
    ///
    /// # Errors
    /// A database failure.
    pub async fn remove_app_session(&self, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM app_sessions WHERE user_id = $1 AND id = $2")
            .bind(self.uid())
            .bind(id.to_owned())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("removing an app session"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Leave `text` (an app's `ui/update-model-context`, replacing its previous one) for
    /// the next turn of the session's chat; `false` when the user has no session `id`.
    ///
    /// # Errors
    /// Text over [`MAX_APP_CONTEXT_BYTES`]; no secret key; a database failure.
    pub async fn set_app_context(&self, id: &str, text: &str) -> Result<bool> {
        if text.len() > MAX_APP_CONTEXT_BYTES {
            return Err(StoreError::Invalid(format!(
                "an app's model context is at most {MAX_APP_CONTEXT_BYTES} bytes"
            )));
        }
        let sealed = self
            .store
            .keys()?
            .seal(&APP_CONTEXT.slot(&self.uid(), id), text.as_bytes())?;
        let done = sqlx::query(
            "UPDATE app_sessions SET model_context = $1 WHERE user_id = $2 AND id = $3",
        )
        .bind(sealed)
        .bind(self.uid())
        .bind(id.to_owned())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving an app's model context"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Take the model contexts the apps of the user's conversation left (oldest session
    /// first), clearing each: the turn that reads them is the only one that gets them
    /// (a context written meanwhile stays for the next turn).
    ///
    /// # Errors
    /// A sealed value that opens under no key; a database failure.
    pub async fn take_app_contexts(&self, conversation_id: &str) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT id, model_context FROM app_sessions WHERE user_id = $1              AND conversation_id = $2 AND model_context IS NOT NULL ORDER BY created_at, id",
        )
        .bind(self.uid())
        .bind(conversation_id.to_owned())
        .fetch_all(&self.store.pool)
        .await
        .map_err(StoreError::query("reading app model contexts"))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let get = || StoreError::query("reading app model contexts");
            let id: String = row.try_get(0).map_err(get())?;
            let sealed: Vec<u8> = row.try_get(1).map_err(get())?;
            let taken = sqlx::query(
                "UPDATE app_sessions SET model_context = NULL                  WHERE user_id = $1 AND id = $2 AND model_context = $3",
            )
            .bind(self.uid())
            .bind(id.clone())
            .bind(sealed.clone())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("taking an app's model context"))?;
            if taken.rows_affected() == 0 {
                continue;
            }
            let (plain, _) = self
                .store
                .keys()?
                .open(&APP_CONTEXT.slot(&self.uid(), &id), &sealed)?;
            out.push(text_of(plain, APP_CONTEXT.table, APP_CONTEXT.column)?);
        }
        Ok(out)
    }

    fn app_from(&self, row: &AnyRow) -> Result<AppSession> {
        let get = || StoreError::query("reading an app session");
        let id: String = row.try_get(0).map_err(get())?;
        let kind: String = row.try_get(2).map_err(get())?;
        let name: String = row.try_get(3).map_err(get())?;
        let server = match kind.as_str() {
            "own" => ServerRef::Own(name),
            "catalog" => ServerRef::Catalog(name),
            other => {
                return Err(StoreError::Invalid(format!(
                    "stored app session server kind `{other}` is not own or catalog"
                )));
            }
        };
        let allowed: String = row.try_get(7).map_err(get())?;
        let allowed: Vec<String> = serde_json::from_str(&allowed).map_err(|_| {
            StoreError::Invalid("a stored app session's `allowed` is not a list".into())
        })?;
        let sealed: Vec<u8> = row.try_get(8).map_err(get())?;
        let (plain, _) = self
            .store
            .keys()?
            .open(&APP_INIT.slot(&self.uid(), &id), &sealed)?;
        let init: Value = serde_json::from_str(&text_of(plain, APP_INIT.table, APP_INIT.column)?)
            .map_err(|_| StoreError::Unseal {
            table: APP_INIT.table,
            column: APP_INIT.column,
            reason: "it is not JSON",
        })?;
        Ok(AppSession {
            conversation_id: row.try_get(1).map_err(get())?,
            server,
            tool: row.try_get(4).map_err(get())?,
            call_id: row.try_get(5).map_err(get())?,
            resource_uri: row.try_get(6).map_err(get())?,
            allowed,
            input: init.get("input").cloned().unwrap_or(Value::Null),
            result: init.get("result").cloned().unwrap_or(Value::Null),
            csp_header: row.try_get(9).map_err(get())?,
            after_seq: row.try_get(10).map_err(get())?,
            created_at: row.try_get(11).map_err(get())?,
            id,
        })
    }
}
