//! One user's chat elicitations, through [`UserStore`] only: a server's request for
//! input during a chat's tool call, written by the instance running the turn, answered
//! (accept with content, decline, cancel) through any instance, and read back by the
//! turn, which then removes it (answered, timed out, or its turn ended); it also goes
//! with its chat. An answer's content is at most 64 KiB, a request 256 KiB.
//!
//! Every query names `self.user`: another user's elicitation is "not there".
//!
//! Must not: store the request or the answer's content in clear (both sealed), or take
//! an answer for an elicitation that is answered already or past its time.

use std::time::Duration;

use serde_json::Value;
use sqlx::Row;

use crate::account::{now, random_token, secs};
use crate::chat::Question;
use crate::error::{Result, StoreError};
use crate::store::{ELICIT_CONTENT, ELICIT_REQUEST};
use crate::user_data::UserStore;

/// Elicitations (`chat_elicitations`).
const ELICITATIONS: Question = Question {
    request: ELICIT_REQUEST,
    answer_column: "action",
    listing: "listing elicitations",
    removing: "removing an elicitation",
};

/// Largest answer content (JSON bytes) the store takes.
pub const MAX_ELICIT_CONTENT_BYTES: usize = 64 * 1024;
/// Largest request (JSON bytes) the store takes.
pub const MAX_ELICIT_REQUEST_BYTES: usize = 256 * 1024;

/// How a person answered an elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitAction {
    /// Gave the content asked for.
    Accept,
    /// Said no.
    Decline,
    /// Dismissed it (or it timed out, or the turn ended).
    Cancel,
}

impl ElicitAction {
    /// `accept`, `decline` or `cancel`, as stored and as MCP names them.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Decline => "decline",
            Self::Cancel => "cancel",
        }
    }

    /// The action named `s`.
    ///
    /// # Errors
    /// Any other word.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "accept" => Ok(Self::Accept),
            "decline" => Ok(Self::Decline),
            "cancel" => Ok(Self::Cancel),
            other => Err(StoreError::Invalid(format!(
                "`action` must be accept, decline or cancel, not `{other}`"
            ))),
        }
    }
}

/// An answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitAnswer {
    /// What the person did.
    pub action: ElicitAction,
    /// With `accept`: the values given (a JSON object), checked by the caller against
    /// the requested schema before it was written.
    pub content: Option<Value>,
}

/// An elicitation waiting for its user's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingElicitation {
    /// Its id (what an answer names).
    pub id: String,
    /// What the turn wrote (server, message, mode, requested schema or URL).
    pub request: Value,
}

impl UserStore {
    /// Record an elicitation the turn in conversation `id` waits for, valid for `ttl`.
    /// `None` when the conversation is not the user's.
    ///
    /// # Errors
    /// A request over [`MAX_ELICIT_REQUEST_BYTES`]; no secret key; a database failure.
    pub async fn ask_elicitation(
        &self,
        id: &str,
        request: &Value,
        ttl: Duration,
    ) -> Result<Option<String>> {
        let text = request.to_string();
        if text.len() > MAX_ELICIT_REQUEST_BYTES {
            return Err(StoreError::Invalid(format!(
                "an elicitation request is at most {MAX_ELICIT_REQUEST_BYTES} bytes of JSON"
            )));
        }
        let elicit_id = random_token(16)?;
        let sealed = self.seal_for(ELICIT_REQUEST, &elicit_id, text.as_bytes())?;
        let t = now();
        let done = sqlx::query(
            "INSERT INTO chat_elicitations \
             (id, conversation_id, user_id, request, action, content, created_at, expires_at) \
             SELECT $1, id, user_id, $4, NULL, NULL, $5, $6 FROM conversations \
             WHERE user_id = $2 AND id = $3",
        )
        .bind(elicit_id.clone())
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(sealed)
        .bind(t)
        .bind(t.saturating_add(secs(ttl)))
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving an elicitation request"))?;
        Ok((done.rows_affected() > 0).then_some(elicit_id))
    }

    /// The request of elicitation `elicit_id` in conversation `id` while it waits for
    /// an answer (`None`: no such unanswered, unexpired elicitation of this user's).
    ///
    /// # Errors
    /// No secret key, a request that does not open, a database failure.
    pub async fn waiting_elicitation(&self, id: &str, elicit_id: &str) -> Result<Option<Value>> {
        let row = sqlx::query(
            "SELECT request FROM chat_elicitations WHERE id = $1 AND user_id = $2 \
             AND conversation_id = $3 AND action IS NULL AND expires_at > $4",
        )
        .bind(elicit_id.to_owned())
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(now())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("reading an elicitation"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let sealed: Vec<u8> = row
            .try_get(0)
            .map_err(StoreError::query("reading an elicitation"))?;
        self.open_json(ELICIT_REQUEST, elicit_id, &sealed).map(Some)
    }

    /// Answer elicitation `elicit_id` of conversation `id`. `false` when there is no
    /// such unanswered, unexpired elicitation of this user's (the first answer wins).
    ///
    /// # Errors
    /// Content with an action other than accept, or over
    /// [`MAX_ELICIT_CONTENT_BYTES`]; no secret key; a database failure.
    pub async fn answer_elicitation(
        &self,
        id: &str,
        elicit_id: &str,
        answer: &ElicitAnswer,
    ) -> Result<bool> {
        let sealed = match (&answer.content, answer.action) {
            (None, _) => None,
            (Some(c), ElicitAction::Accept) => {
                let text = c.to_string();
                if text.len() > MAX_ELICIT_CONTENT_BYTES {
                    return Err(StoreError::Invalid(format!(
                        "an elicitation answer is at most {MAX_ELICIT_CONTENT_BYTES} bytes of JSON"
                    )));
                }
                Some(self.seal_for(ELICIT_CONTENT, elicit_id, text.as_bytes())?)
            }
            (Some(_), _) => {
                return Err(StoreError::Invalid(
                    "only an `accept` answer carries `content`".into(),
                ));
            }
        };
        let done = sqlx::query(
            "UPDATE chat_elicitations SET action = $1, content = $2 \
             WHERE id = $3 AND user_id = $4 AND conversation_id = $5 \
             AND action IS NULL AND expires_at > $6",
        )
        .bind(answer.action.as_str())
        .bind(sealed)
        .bind(elicit_id.to_owned())
        .bind(self.uid())
        .bind(id.to_owned())
        .bind(now())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("answering an elicitation"))?;
        Ok(done.rows_affected() > 0)
    }

    /// The answer to elicitation `elicit_id`, once given (`None` while it waits or when
    /// it is gone).
    ///
    /// # Errors
    /// No secret key, content that does not open, a stored action that is not one of
    /// the three, a database failure.
    pub async fn elicitation_answer(&self, elicit_id: &str) -> Result<Option<ElicitAnswer>> {
        let row = sqlx::query(
            "SELECT action, content FROM chat_elicitations WHERE id = $1 AND user_id = $2",
        )
        .bind(elicit_id.to_owned())
        .bind(self.uid())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("reading an elicitation answer"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let get = || StoreError::query("reading an elicitation answer");
        let action: Option<String> = row.try_get(0).map_err(get())?;
        let Some(action) = action else {
            return Ok(None);
        };
        let sealed: Option<Vec<u8>> = row.try_get(1).map_err(get())?;
        let content = sealed
            .map(|s| self.open_json(ELICIT_CONTENT, elicit_id, &s))
            .transpose()?;
        Ok(Some(ElicitAnswer {
            action: ElicitAction::parse(&action)?,
            content,
        }))
    }

    /// Remove elicitation `elicit_id` (answered, timed out, or its turn ended).
    ///
    /// # Errors
    /// A database failure.
    pub async fn finish_elicitation(&self, elicit_id: &str) -> Result<()> {
        self.finish_question(&ELICITATIONS, elicit_id).await
    }

    /// The unanswered, unexpired elicitations of conversation `id`, oldest first.
    ///
    /// # Errors
    /// No secret key, a request that does not open, a database failure.
    pub async fn pending_elicitations(&self, id: &str) -> Result<Vec<PendingElicitation>> {
        Ok(self
            .pending_questions(&ELICITATIONS, id)
            .await?
            .into_iter()
            .map(|(id, request)| PendingElicitation { id, request })
            .collect())
    }
}
