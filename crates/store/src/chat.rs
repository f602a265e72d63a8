//! One user's chats, through [`UserStore`] only: conversations (title, per-chat server
//! toggles, "always allow" answers, a cancel request), their messages in order (content
//! sealed), tool-call confirmations waiting for an answer from any instance, and the
//! model key a chat runs with (the user's own, else the team key an admin set).
//!
//! Every query names `self.user`: a conversation, message or confirmation of another
//! user is "not there" (`None` / `false`), never an error that would confirm it exists.
//!
//! Bounds, checked at insert: [`MAX_CHAT_MESSAGES`] (2,000) messages and [`MAX_CHAT_BYTES`]
//! (32 MiB sealed) per chat, [`MAX_CHATS_PER_USER`] (500) chats per user; past them,
//! [`StoreError::Full`](crate::StoreError::Full) naming the limit. The team model key is
//! written only by a user who is an admin, checked again in the statement itself. Each
//! chat stores the nonce of its untrusted-data marker, so every instance wraps server
//! text the same way. In clear: titles, server names and the person's decisions.
//!
//! Must not: store message content, confirmation arguments or a key in clear, or return
//! a key anywhere but to the chat that runs with it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::account::{now, random_token, secs};
use crate::error::{Result, StoreError};
use crate::seal::Secret;
use crate::store::{CHAT_CONTENT, CONFIRM_REQUEST, SealedColumn, TEAM_MODEL_KEY};
use crate::user_data::{ModelKey, UserStore, text_of};

/// Longest conversation title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// Largest message content (JSON bytes) the store takes.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// At most this many messages in one conversation: a turn writes the person's message,
/// each model reply and each tool result (one to ~40 rows), so this is room for
/// hundreds of turns, far more than the model is sent ([`UserStore::messages`] reads
/// them all into memory, which this bounds).
pub const MAX_CHAT_MESSAGES: i64 = 2_000;
/// At most this many sealed content bytes in one conversation (eight messages of the
/// largest size): bounds the database row space and the memory of reading a chat.
pub const MAX_CHAT_BYTES: i64 = 32 * 1024 * 1024;
/// At most this many conversations per user.
pub const MAX_CHATS_PER_USER: i64 = 500;

/// How much one conversation holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatSize {
    /// Saved messages.
    pub messages: i64,
    /// Sealed content bytes.
    pub bytes: i64,
}

impl ChatSize {
    /// Whether a message of `content_bytes` (sealed) still fits.
    pub fn fits(&self, content_bytes: i64) -> bool {
        self.messages < MAX_CHAT_MESSAGES
            && self.bytes.saturating_add(content_bytes) <= MAX_CHAT_BYTES
    }

    /// Why a message does not fit, naming the limit and the next step.
    pub fn full_message(&self) -> String {
        if self.messages >= MAX_CHAT_MESSAGES {
            format!(
                "this chat has reached its limit of {MAX_CHAT_MESSAGES} messages; start a new chat to go on"
            )
        } else {
            format!(
                "this chat has reached its limit of {} MiB of saved messages; start a new chat to go on",
                MAX_CHAT_BYTES / (1024 * 1024)
            )
        }
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageRole {
    /// The person.
    User,
    /// The model (text and function calls).
    Model,
    /// One tool result (a function response), written as soon as the call ends.
    Tool,
}

impl MessageRole {
    /// `user`, `model` or `tool`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Model => "model",
            Self::Tool => "tool",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        match s {
            "user" => Ok(Self::User),
            "model" => Ok(Self::Model),
            "tool" => Ok(Self::Tool),
            other => Err(StoreError::Invalid(format!(
                "stored message role `{other}` is not user, model or tool"
            ))),
        }
    }
}

/// "Always allow" answers given in one conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approvals {
    /// (server, tool) pairs allowed without asking.
    pub tools: Vec<(String, String)>,
    /// Servers whose tools are all allowed without asking.
    pub servers: Vec<String>,
}

impl Approvals {
    /// Whether a call of `tool` on `server` needs no confirmation.
    pub fn allows(&self, server: &str, tool: &str) -> bool {
        self.servers.iter().any(|s| s == server)
            || self.tools.iter().any(|(s, t)| s == server && t == tool)
    }

    fn to_json(&self) -> String {
        json!({"tools": self.tools, "servers": self.servers}).to_string()
    }

    fn from_json(text: &str) -> Self {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let strings = |a: &Value| -> Vec<String> {
            a.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        Self {
            servers: strings(&v["servers"]),
            tools: v["tools"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| {
                            let p = strings(p);
                            (p.len() == 2).then(|| (p[0].clone(), p[1].clone()))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// One conversation (without its messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// Its id (random, URL-safe).
    pub id: String,
    /// Its title.
    pub title: String,
    /// Per-chat server switches: a server named here is on or off in this chat whatever
    /// its own `enabled` says.
    pub server_toggles: BTreeMap<String, bool>,
    /// "Always allow" answers given in this chat.
    pub approvals: Approvals,
    /// When a cancel was asked for the running turn (unix seconds), if one was.
    pub cancel_requested_at: Option<i64>,
    /// Created (unix seconds).
    pub created_at: i64,
    /// Last changed: a message, a rename, a toggle (unix seconds).
    pub updated_at: i64,
    /// The nonce of this chat's marker around server text for the model (the same on
    /// every instance; never sent to a server).
    pub marker_nonce: String,
}

/// One saved message.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    /// Its place in the conversation (1, 2, …).
    pub seq: i64,
    /// Who wrote it.
    pub role: MessageRole,
    /// The model API's content JSON (opened from its sealed form).
    pub content: Value,
    /// Saved (unix seconds).
    pub created_at: i64,
}

/// A confirmation waiting for its user's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingConfirmation {
    /// Its id (what an answer names).
    pub id: String,
    /// What the turn asked (server, tool, arguments, hints), as the turn wrote it.
    pub request: Value,
}

/// One kind of question a turn asks the person through the store (a confirmation, an
/// elicitation): rows of one user's conversation with a sealed request, an answer column
/// that stays NULL until answered, and an expiry. The names are constants of this crate.
pub(crate) struct Question {
    /// The table and its sealed request column.
    pub request: SealedColumn,
    /// The column that holds the answer (NULL while unanswered).
    pub answer_column: &'static str,
    /// What a failed listing or removal was doing, for its error.
    pub listing: &'static str,
    pub removing: &'static str,
}

/// Tool-call confirmations (`chat_confirmations`).
const CONFIRMATIONS: Question = Question {
    request: CONFIRM_REQUEST,
    answer_column: "decision",
    listing: "listing confirmations",
    removing: "removing a confirmation",
};

/// Where the key a chat runs with came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// The user's own key.
    User,
    /// The team key an admin set.
    Team,
}

/// The team key's public facts: whether set, for which provider, when (never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamKeyInfo {
    /// The provider it is for.
    pub provider: String,
    /// When it was set (unix seconds).
    pub updated_at: i64,
}

const CONVERSATION_COLUMNS: &str = "id, title, server_toggles, approvals, cancel_requested_at, \
     created_at, updated_at, marker_nonce";

fn conversation_from(row: &AnyRow) -> Result<Conversation> {
    let get = || StoreError::query("reading a conversation");
    let toggles: String = row.try_get(2).map_err(get())?;
    let approvals: String = row.try_get(3).map_err(get())?;
    Ok(Conversation {
        id: row.try_get(0).map_err(get())?,
        title: row.try_get(1).map_err(get())?,
        server_toggles: serde_json::from_str(&toggles).unwrap_or_default(),
        approvals: Approvals::from_json(&approvals),
        cancel_requested_at: row.try_get(4).map_err(get())?,
        created_at: row.try_get(5).map_err(get())?,
        updated_at: row.try_get(6).map_err(get())?,
        marker_nonce: row.try_get(7).map_err(get())?,
    })
}

fn check_title(title: &str) -> Result<String> {
    let t = title.trim();
    if t.is_empty() || t.chars().count() > MAX_TITLE_CHARS || t.chars().any(char::is_control) {
        return Err(StoreError::Invalid(format!(
            "a chat title is 1 to {MAX_TITLE_CHARS} characters without control characters"
        )));
    }
    Ok(t.to_owned())
}

fn toggles_json(toggles: &BTreeMap<String, bool>) -> String {
    serde_json::to_string(toggles).unwrap_or_else(|_| "{}".into())
}

impl UserStore {
    pub(crate) fn seal_for(&self, col: SealedColumn, row: &str, plain: &[u8]) -> Result<Vec<u8>> {
        self.store.keys()?.seal(&col.slot(&self.user.0, row), plain)
    }

    pub(crate) fn open_json(&self, col: SealedColumn, row: &str, sealed: &[u8]) -> Result<Value> {
        let (plain, _) = self
            .store
            .keys()?
            .open(&col.slot(&self.user.0, row), sealed)?;
        let text = text_of(plain, col.table, col.column)?;
        serde_json::from_str(&text).map_err(|_| StoreError::Unseal {
            table: col.table,
            column: col.column,
            reason: "it is not JSON",
        })
    }

    /// Start a conversation titled `title`, with no server toggles.
    ///
    /// # Errors
    /// A title that is empty, too long or has control characters; a database failure.
    pub async fn create_conversation(&self, title: &str) -> Result<Conversation> {
        let title = check_title(title)?;
        let held: i64 = sqlx::query("SELECT COUNT(*) FROM conversations WHERE user_id = $1")
            .bind(self.uid())
            .fetch_one(&self.store.pool)
            .await
            .map_err(StoreError::query("counting conversations"))?
            .try_get(0)
            .map_err(StoreError::query("counting conversations"))?;
        if held >= MAX_CHATS_PER_USER {
            return Err(StoreError::Full(format!(
                "you have {MAX_CHATS_PER_USER} chats, the most one person may keep; delete old chats to start a new one"
            )));
        }
        let id = random_token(16)?;
        let marker_nonce: String = random_token(24)?
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        let t = now();
        sqlx::query(
            "INSERT INTO conversations \
             (id, user_id, title, server_toggles, approvals, cancel_requested_at, created_at, \
             updated_at, marker_nonce) VALUES ($1, $2, $3, $4, $5, NULL, $6, $6, $7)",
        )
        .bind(id.clone())
        .bind(self.uid())
        .bind(title.clone())
        .bind("{}".to_owned())
        .bind(Approvals::default().to_json())
        .bind(t)
        .bind(marker_nonce.clone())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("creating a conversation"))?;
        Ok(Conversation {
            id,
            title,
            server_toggles: BTreeMap::new(),
            approvals: Approvals::default(),
            cancel_requested_at: None,
            created_at: t,
            updated_at: t,
            marker_nonce,
        })
    }

    /// The user's conversations, most recently changed first.
    ///
    /// # Errors
    /// A database failure.
    pub async fn conversations(&self) -> Result<Vec<Conversation>> {
        let rows = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE user_id = $1 \
             ORDER BY updated_at DESC, id"
        ))
        .bind(self.uid())
        .fetch_all(&self.store.pool)
        .await
        .map_err(StoreError::query("listing conversations"))?;
        rows.iter().map(conversation_from).collect()
    }

    /// The user's conversation `id` (`None` for an unknown id or another user's).
    ///
    /// # Errors
    /// A database failure.
    pub async fn conversation(&self, id: &str) -> Result<Option<Conversation>> {
        let row = sqlx::query(&format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE user_id = $1 AND id = $2"
        ))
        .bind(self.uid())
        .bind(id.to_owned())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("reading a conversation"))?;
        row.as_ref().map(conversation_from).transpose()
    }

    async fn update_conversation(
        &self,
        id: &str,
        set: &str,
        value: Option<String>,
        doing: &'static str,
    ) -> Result<bool> {
        let sql = format!(
            "UPDATE conversations SET {set}, updated_at = $1 WHERE user_id = $2 AND id = $3"
        );
        let mut q = sqlx::query(&sql)
            .bind(now())
            .bind(self.uid())
            .bind(id.to_owned());
        if let Some(v) = value {
            q = q.bind(v);
        }
        let done = q
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query(doing))?;
        Ok(done.rows_affected() > 0)
    }

    /// Rename the user's conversation `id`; `false` when there is none.
    ///
    /// # Errors
    /// A bad title; a database failure.
    pub async fn rename_conversation(&self, id: &str, title: &str) -> Result<bool> {
        let title = check_title(title)?;
        self.update_conversation(id, "title = $4", Some(title), "renaming a conversation")
            .await
    }

    /// Set the per-chat server switches of conversation `id` (replacing them).
    ///
    /// # Errors
    /// A database failure.
    pub async fn set_server_toggles(
        &self,
        id: &str,
        toggles: &BTreeMap<String, bool>,
    ) -> Result<bool> {
        self.update_conversation(
            id,
            "server_toggles = $4",
            Some(toggles_json(toggles)),
            "saving a chat's server switches",
        )
        .await
    }

    /// Set the "always allow" answers of conversation `id` (replacing them).
    ///
    /// # Errors
    /// A database failure.
    pub async fn set_approvals(&self, id: &str, approvals: &Approvals) -> Result<bool> {
        self.update_conversation(
            id,
            "approvals = $4",
            Some(approvals.to_json()),
            "saving a chat's approvals",
        )
        .await
    }

    /// Ask the turn running in conversation `id` (on any instance) to stop.
    ///
    /// # Errors
    /// A database failure.
    pub async fn request_cancel(&self, id: &str) -> Result<bool> {
        let t = now();
        let done = sqlx::query(
            "UPDATE conversations SET cancel_requested_at = $1 WHERE user_id = $2 AND id = $3",
        )
        .bind(t)
        .bind(self.uid())
        .bind(id.to_owned())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("asking a turn to stop"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Take the turn lease of the user's conversation `id` for `holder` (a random id of
    /// one turn) for `lease`: `false` while another turn holds an unexpired one (on any
    /// instance), or when the conversation is not the user's.
    ///
    /// # Errors
    /// A database failure.
    pub async fn claim_turn(&self, id: &str, holder: &str, lease: Duration) -> Result<bool> {
        let t = now();
        let done = sqlx::query(
            "UPDATE conversations SET turn_holder = $1, turn_until = $2 \
             WHERE user_id = $3 AND id = $4 AND (turn_until IS NULL OR turn_until < $5)",
        )
        .bind(holder.to_owned())
        .bind(t + lease_secs(lease))
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(t)
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("taking a chat's turn lease"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Extend `holder`'s turn lease of conversation `id`; `false` when it holds none.
    ///
    /// # Errors
    /// A database failure.
    pub async fn renew_turn(&self, id: &str, holder: &str, lease: Duration) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE conversations SET turn_until = $1 \
             WHERE user_id = $2 AND id = $3 AND turn_holder = $4",
        )
        .bind(now() + lease_secs(lease))
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(holder.to_owned())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("renewing a chat's turn lease"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Give back `holder`'s turn lease of conversation `id` (nothing when it holds none).
    ///
    /// # Errors
    /// A database failure.
    pub async fn release_turn(&self, id: &str, holder: &str) -> Result<()> {
        sqlx::query(
            "UPDATE conversations SET turn_holder = NULL, turn_until = NULL \
             WHERE user_id = $1 AND id = $2 AND turn_holder = $3",
        )
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(holder.to_owned())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("giving back a chat's turn lease"))?;
        Ok(())
    }

    /// Forget a cancel request (a new turn starts).
    ///
    /// # Errors
    /// A database failure.
    pub async fn clear_cancel(&self, id: &str) -> Result<bool> {
        self.update_conversation(
            id,
            "cancel_requested_at = NULL",
            None,
            "clearing a cancel request",
        )
        .await
    }

    /// Delete the user's conversation `id` with its messages and confirmations.
    ///
    /// # Errors
    /// A database failure.
    pub async fn delete_conversation(&self, id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM conversations WHERE user_id = $1 AND id = $2")
            .bind(self.uid())
            .bind(id.to_owned())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("deleting a conversation"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Append a message to the user's conversation `id`, sealed, as the next in order.
    /// `None` when the conversation is not the user's (or no longer exists).
    ///
    /// # Errors
    /// Content over [`MAX_MESSAGE_BYTES`]; no secret key; a database failure (two
    /// writers taking the same place: the second fails and may retry).
    pub async fn append_message(
        &self,
        id: &str,
        role: MessageRole,
        content: &Value,
    ) -> Result<Option<i64>> {
        let text = content.to_string();
        if text.len() > MAX_MESSAGE_BYTES {
            return Err(StoreError::Invalid(format!(
                "a chat message is at most {MAX_MESSAGE_BYTES} bytes of JSON"
            )));
        }
        let msg_id = random_token(16)?;
        let sealed = self.seal_for(CHAT_CONTENT, &msg_id, text.as_bytes())?;
        let sealed_len = i64::try_from(sealed.len()).unwrap_or(i64::MAX);
        let t = now();
        // The caps are checked in the insert itself (one turn at a time writes to a
        // chat, under its lease).
        let row = sqlx::query(
            "INSERT INTO chat_messages (id, conversation_id, user_id, seq, role, content, created_at) \
             SELECT $1, c.id, c.user_id, \
               COALESCE((SELECT MAX(m.seq) FROM chat_messages m WHERE m.conversation_id = c.id), 0) + 1, \
               $4, $5, $6 \
             FROM conversations c WHERE c.user_id = $2 AND c.id = $3 \
             AND (SELECT COUNT(*) FROM chat_messages m WHERE m.conversation_id = c.id) < $7 \
             AND (SELECT COALESCE(SUM(LENGTH(m.content)), 0) FROM chat_messages m \
                  WHERE m.conversation_id = c.id) + $8 <= $9 \
             RETURNING seq",
        )
        .bind(msg_id)
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(role.as_str())
        .bind(sealed)
        .bind(t)
        .bind(MAX_CHAT_MESSAGES)
        .bind(sealed_len)
        .bind(MAX_CHAT_BYTES)
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("saving a chat message"))?;
        let Some(row) = row else {
            return match self.chat_size(id).await? {
                Some(size) => Err(StoreError::Full(size.full_message())),
                None => Ok(None),
            };
        };
        let seq: i64 = row
            .try_get(0)
            .map_err(StoreError::query("saving a chat message"))?;
        sqlx::query("UPDATE conversations SET updated_at = $1 WHERE user_id = $2 AND id = $3")
            .bind(t)
            .bind(self.uid())
            .bind(id.to_owned())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("saving a chat message"))?;
        Ok(Some(seq))
    }

    /// How much the user's conversation `id` holds (`None`: not the user's).
    ///
    /// # Errors
    /// A database failure.
    pub async fn chat_size(&self, id: &str) -> Result<Option<ChatSize>> {
        if self.conversation(id).await?.is_none() {
            return Ok(None);
        }
        let row = sqlx::query(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(content)), 0) FROM chat_messages \
             WHERE user_id = $1 AND conversation_id = $2",
        )
        .bind(self.uid())
        .bind(id.to_owned())
        .fetch_one(&self.store.pool)
        .await
        .map_err(StoreError::query("measuring a chat"))?;
        let get = || StoreError::query("measuring a chat");
        Ok(Some(ChatSize {
            messages: row.try_get(0).map_err(get())?,
            bytes: row.try_get(1).map_err(get())?,
        }))
    }

    /// The messages of the user's conversation `id`, in order (`None`: not the user's).
    ///
    /// # Errors
    /// No secret key, content that does not open, a database failure.
    pub async fn messages(&self, id: &str) -> Result<Option<Vec<ChatMessage>>> {
        if self.conversation(id).await?.is_none() {
            return Ok(None);
        }
        let rows = sqlx::query(
            "SELECT id, seq, role, content, created_at FROM chat_messages \
             WHERE user_id = $1 AND conversation_id = $2 ORDER BY seq",
        )
        .bind(self.uid())
        .bind(id.to_owned())
        .fetch_all(&self.store.pool)
        .await
        .map_err(StoreError::query("reading chat messages"))?;
        let get = || StoreError::query("reading chat messages");
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let msg_id: String = row.try_get(0).map_err(get())?;
            let role: String = row.try_get(2).map_err(get())?;
            let sealed: Vec<u8> = row.try_get(3).map_err(get())?;
            out.push(ChatMessage {
                seq: row.try_get(1).map_err(get())?,
                role: MessageRole::parse(&role)?,
                content: self.open_json(CHAT_CONTENT, &msg_id, &sealed)?,
                created_at: row.try_get(4).map_err(get())?,
            });
        }
        Ok(Some(out))
    }

    /// Record a confirmation the turn in conversation `id` waits for, valid for `ttl`.
    /// `None` when the conversation is not the user's.
    ///
    /// # Errors
    /// No secret key; a database failure.
    pub async fn ask_confirmation(
        &self,
        id: &str,
        request: &Value,
        ttl: Duration,
    ) -> Result<Option<String>> {
        let confirm_id = random_token(16)?;
        let sealed = self.seal_for(CONFIRM_REQUEST, &confirm_id, request.to_string().as_bytes())?;
        let t = now();
        let done = sqlx::query(
            "INSERT INTO chat_confirmations \
             (id, conversation_id, user_id, request, decision, created_at, expires_at) \
             SELECT $1, id, user_id, $4, NULL, $5, $6 FROM conversations \
             WHERE user_id = $2 AND id = $3",
        )
        .bind(confirm_id.clone())
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(sealed)
        .bind(t)
        .bind(t.saturating_add(secs(ttl)))
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving a confirmation request"))?;
        Ok((done.rows_affected() > 0).then_some(confirm_id))
    }

    /// Answer confirmation `confirm_id` of conversation `id` with `decision` (`once`,
    /// `tool`, `server` or `cancel`). `false` when there is no such unanswered, unexpired
    /// confirmation of this user's.
    ///
    /// # Errors
    /// Another decision word; a database failure.
    pub async fn answer_confirmation(
        &self,
        id: &str,
        confirm_id: &str,
        decision: &str,
    ) -> Result<bool> {
        if !matches!(decision, "once" | "tool" | "server" | "cancel") {
            return Err(StoreError::Invalid(format!(
                "`decision` must be once, tool, server or cancel, not `{decision}`"
            )));
        }
        let done = sqlx::query(
            "UPDATE chat_confirmations SET decision = $1 \
             WHERE id = $2 AND user_id = $3 AND conversation_id = $4 \
             AND decision IS NULL AND expires_at > $5",
        )
        .bind(decision.to_owned())
        .bind(confirm_id.to_owned())
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(now())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("answering a confirmation"))?;
        Ok(done.rows_affected() > 0)
    }

    /// The decision on confirmation `confirm_id`, once answered (`None` while it waits or
    /// when it is gone).
    ///
    /// # Errors
    /// A database failure.
    pub async fn confirmation_decision(&self, confirm_id: &str) -> Result<Option<String>> {
        let row =
            sqlx::query("SELECT decision FROM chat_confirmations WHERE id = $1 AND user_id = $2")
                .bind(confirm_id.to_owned())
                .bind(self.uid())
                .fetch_optional(&self.store.pool)
                .await
                .map_err(StoreError::query("reading a confirmation"))?;
        match row {
            None => Ok(None),
            Some(r) => r
                .try_get::<Option<String>, _>(0)
                .map_err(StoreError::query("reading a confirmation")),
        }
    }

    /// Remove confirmation `confirm_id` (answered, timed out, or its turn ended).
    ///
    /// # Errors
    /// A database failure.
    pub async fn finish_confirmation(&self, confirm_id: &str) -> Result<()> {
        self.finish_question(&CONFIRMATIONS, confirm_id).await
    }

    /// The unanswered, unexpired confirmations of conversation `id`, oldest first.
    ///
    /// # Errors
    /// No secret key, a request that does not open, a database failure.
    pub async fn pending_confirmations(&self, id: &str) -> Result<Vec<PendingConfirmation>> {
        Ok(self
            .pending_questions(&CONFIRMATIONS, id)
            .await?
            .into_iter()
            .map(|(id, request)| PendingConfirmation { id, request })
            .collect())
    }

    /// Remove question `question_id` of kind `q` (answered, timed out, or its turn ended).
    pub(crate) async fn finish_question(&self, q: &Question, question_id: &str) -> Result<()> {
        let table = q.request.table;
        sqlx::query(&format!(
            "DELETE FROM {table} WHERE id = $1 AND user_id = $2"
        ))
        .bind(question_id.to_owned())
        .bind(self.uid())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query(q.removing))?;
        Ok(())
    }

    /// The unanswered, unexpired questions of kind `q` in conversation `id`, oldest
    /// first, as (id, opened request).
    pub(crate) async fn pending_questions(
        &self,
        q: &Question,
        id: &str,
    ) -> Result<Vec<(String, Value)>> {
        let (table, answer) = (q.request.table, q.answer_column);
        let rows = sqlx::query(&format!(
            "SELECT id, {request} FROM {table} WHERE user_id = $1 \
             AND conversation_id = $2 AND {answer} IS NULL AND expires_at > $3 \
             ORDER BY created_at, id",
            request = q.request.column,
        ))
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(now())
        .fetch_all(&self.store.pool)
        .await
        .map_err(StoreError::query(q.listing))?;
        rows.iter()
            .map(|row| {
                let qid: String = row.try_get(0).map_err(StoreError::query(q.listing))?;
                let sealed: Vec<u8> = row.try_get(1).map_err(StoreError::query(q.listing))?;
                let request = self.open_json(q.request, &qid, &sealed)?;
                Ok((qid, request))
            })
            .collect()
    }

    /// Set the team's model key; only an admin may (`false` when this user is not one).
    ///
    /// # Errors
    /// An empty provider; no secret key; a database failure.
    pub async fn put_team_model_key(&self, provider: &str, key: &Secret) -> Result<bool> {
        if provider.trim().is_empty() {
            return Err(StoreError::Invalid("the model provider is empty".into()));
        }
        let sealed = self
            .store
            .keys()?
            .seal(&TEAM_MODEL_KEY.slot("", "team"), key.expose().as_bytes())?;
        let done = sqlx::query(
            "INSERT INTO team_model_key (slot, provider, api_key, set_by, updated_at) \
             SELECT 'team', $1, $2, id, $3 FROM users WHERE id = $4 AND is_admin = 1 \
             ON CONFLICT (slot) DO UPDATE SET provider = excluded.provider, \
             api_key = excluded.api_key, set_by = excluded.set_by, updated_at = excluded.updated_at",
        )
        .bind(provider.trim().to_owned())
        .bind(sealed)
        .bind(now())
        .bind(self.uid())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving the team model key"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Remove the team's model key; only an admin may (`false` when this user is not
    /// one, or there was none).
    ///
    /// # Errors
    /// A database failure.
    pub async fn remove_team_model_key(&self) -> Result<bool> {
        let done = sqlx::query(
            "DELETE FROM team_model_key WHERE slot = 'team' \
             AND EXISTS (SELECT 1 FROM users WHERE id = $1 AND is_admin = 1)",
        )
        .bind(self.uid())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("removing the team model key"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Whether a team key is set, and for which provider (never the key).
    ///
    /// # Errors
    /// A database failure.
    pub async fn team_model_key_info(&self) -> Result<Option<TeamKeyInfo>> {
        let row =
            sqlx::query("SELECT provider, updated_at FROM team_model_key WHERE slot = 'team'")
                .fetch_optional(&self.store.pool)
                .await
                .map_err(StoreError::query("reading the team model key"))?;
        let get = || StoreError::query("reading the team model key");
        row.map(|r| {
            Ok(TeamKeyInfo {
                provider: r.try_get(0).map_err(get())?,
                updated_at: r.try_get(1).map_err(get())?,
            })
        })
        .transpose()
    }

    /// The key this user's chats run with: their own, else the team's.
    ///
    /// # Errors
    /// No secret key, a key that does not open, a database failure.
    pub async fn chat_model_key(&self) -> Result<Option<(ModelKey, KeySource)>> {
        if let Some(own) = self.model_key().await? {
            return Ok(Some((own, KeySource::User)));
        }
        let Some(row) =
            sqlx::query("SELECT provider, api_key FROM team_model_key WHERE slot = 'team'")
                .fetch_optional(&self.store.pool)
                .await
                .map_err(StoreError::query("reading the team model key"))?
        else {
            return Ok(None);
        };
        let get = || StoreError::query("reading the team model key");
        let provider: String = row.try_get(0).map_err(get())?;
        let sealed: Vec<u8> = row.try_get(1).map_err(get())?;
        let (plain, _) = self
            .store
            .keys()?
            .open(&TEAM_MODEL_KEY.slot("", "team"), &sealed)?;
        Ok(Some((
            ModelKey {
                key: Secret::new(text_of(plain, TEAM_MODEL_KEY.table, TEAM_MODEL_KEY.column)?),
                provider,
            },
            KeySource::Team,
        )))
    }
}

/// A lease in whole seconds, at least one.
fn lease_secs(lease: Duration) -> i64 {
    i64::try_from(lease.as_secs())
        .unwrap_or(i64::MAX / 2)
        .max(1)
}
