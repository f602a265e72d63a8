//! The team gateway's calls waiting for a client's input, through [`UserStore`] only:
//! a client on protocol 2026-07-28 was answered with an `InputRequiredResult`, and its
//! retry may reach another instance than the one running the upstream call. The running
//! instance opens the row ([`UserStore::open_gateway_input`]); the retrying instance
//! writes the client's answer ([`UserStore::answer_gateway_input`]); the running
//! instance takes it ([`UserStore::take_gateway_input_answer`]), relays on and writes
//! the outcome ([`UserStore::put_gateway_input_outcome`]), which the retrying instance
//! takes, ending the row ([`UserStore::take_gateway_input_outcome`]). Meanwhile the
//! running instance writes the latest progress it hears
//! ([`UserStore::put_gateway_input_progress`]) and the retrying one reads it
//! ([`UserStore::gateway_input_progress`]).
//!
//! Every query names `self.user` and, where a retry is involved, the call's hash: a
//! state of another user or another call is "not there".
//!
//! A user's calls waiting across all instances are bounded: [`UserStore::open_gateway_input`]
//! opens a row only while the user has fewer than the limit it is given waiting
//! (unexpired rows with no outcome yet, counted and inserted in one statement; a row
//! the call replaces, its previous question, is not counted), else answers
//! [`InputRow::Full`] with how many wait. On PostgreSQL, opens of one user racing at
//! the same instant may each see the count below the limit (at most one row over per
//! racing open); rows of an instance that stopped count until they expire.
//!
//! Sizes: an answer at most 1 MiB ([`MAX_GATEWAY_ANSWER_BYTES`]), an outcome 8 MiB
//! ([`MAX_GATEWAY_OUTCOME_BYTES`]), the latest progress 16 KiB
//! ([`MAX_GATEWAY_PROGRESS_BYTES`]), as JSON; a larger one is refused.
//!
//! Must not: store the answer, the outcome or the progress in clear (all sealed), or the
//! call's name (only its SHA-256), take an answer twice, outlive its expiry
//! (`purge_expired`), or open a row for a user already at the limit.

use std::time::Duration;

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::account::{hash_hex, now, secs};
use crate::error::{Result, StoreError};
use crate::store::{
    GATEWAY_INPUT_ANSWER, GATEWAY_INPUT_OUTCOME, GATEWAY_INPUT_PROGRESS, SealedColumn,
};
use crate::user_data::UserStore;

/// Largest answer (the client's inputResponses, JSON bytes) the store takes.
pub const MAX_GATEWAY_ANSWER_BYTES: usize = 1024 * 1024;
/// Largest outcome (JSON bytes) the store takes.
pub const MAX_GATEWAY_OUTCOME_BYTES: usize = 8 * 1024 * 1024;
/// Largest progress (JSON bytes) the store takes.
pub const MAX_GATEWAY_PROGRESS_BYTES: usize = 16 * 1024;

/// Whether [`UserStore::open_gateway_input`] opened the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputRow {
    Opened,
    /// Not opened: this many of the user's calls already wait (at least the limit).
    Full {
        waiting: usize,
    },
}

/// What a row stores for the call `call` (method and name): its SHA-256, hex.
pub fn call_hash(call: &str) -> String {
    hash_hex(call)
}

impl UserStore {
    /// `value` as JSON sealed for column `col` of row `id`, refused over `max` bytes.
    fn seal_value(
        &self,
        col: SealedColumn,
        id: &str,
        value: &Value,
        (what, max): (&str, usize),
    ) -> Result<Vec<u8>> {
        let text = value.to_string();
        if text.len() > max {
            return Err(StoreError::Invalid(format!(
                "{what} is at most {max} bytes of JSON"
            )));
        }
        self.seal_for(col, id, text.as_bytes())
    }

    /// The sealed value a `RETURNING` query gave back as its first column, opened
    /// (`None` when no row matched).
    fn open_returned(
        &self,
        row: Option<AnyRow>,
        col: SealedColumn,
        id: &str,
        doing: &'static str,
    ) -> Result<Option<Value>> {
        let Some(row) = row else {
            return Ok(None);
        };
        let sealed: Vec<u8> = row.try_get(0).map_err(StoreError::query(doing))?;
        self.open_json(col, id, &sealed).map(Some)
    }

    /// Open the row for the call `call_hash` waiting under `id` (its `requestState`),
    /// valid for `ttl`, unless this user already has `at_most` calls waiting (not
    /// counting the row `replacing`: the same call's previous question). See the
    /// module doc.
    ///
    /// # Errors
    /// A database failure (an `id` already used included).
    pub async fn open_gateway_input(
        &self,
        id: &str,
        call_hash: &str,
        ttl: Duration,
        at_most: usize,
        replacing: Option<&str>,
    ) -> Result<InputRow> {
        let t = now();
        let at_most = i64::try_from(at_most).unwrap_or(i64::MAX);
        let replacing = replacing.unwrap_or_default().to_owned();
        let done = sqlx::query(
            "INSERT INTO gateway_inputs (id, user_id, call_hash, created_at, expires_at) \
             SELECT $1, $2, $3, $4, $5 \
             WHERE (SELECT COUNT(*) FROM gateway_inputs WHERE user_id = $2 \
             AND outcome IS NULL AND expires_at > $4 AND id <> $6) < $7",
        )
        .bind(id.to_owned())
        .bind(self.uid())
        .bind(call_hash.to_owned())
        .bind(t)
        .bind(t.saturating_add(secs(ttl)))
        .bind(replacing.clone())
        .bind(at_most)
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving a gateway call waiting for input"))?;
        if done.rows_affected() > 0 {
            return Ok(InputRow::Opened);
        }
        let doing = "counting a user's gateway calls waiting for input";
        let waiting: i64 = sqlx::query(
            "SELECT COUNT(*) FROM gateway_inputs WHERE user_id = $1 AND outcome IS NULL \
             AND expires_at > $2 AND id <> $3",
        )
        .bind(self.uid())
        .bind(t)
        .bind(replacing)
        .fetch_one(&self.store.pool)
        .await
        .map_err(StoreError::query(doing))?
        .try_get(0)
        .map_err(StoreError::query(doing))?;
        Ok(InputRow::Full {
            waiting: usize::try_from(waiting).unwrap_or(usize::MAX),
        })
    }

    /// Whether the call `call_hash` waits under `id` (unexpired, this user's).
    ///
    /// # Errors
    /// A database failure.
    pub async fn gateway_input_waiting(&self, id: &str, call_hash: &str) -> Result<bool> {
        let row = sqlx::query(
            "SELECT 1 FROM gateway_inputs WHERE id = $1 AND user_id = $2 AND call_hash = $3 \
             AND expires_at > $4",
        )
        .bind(id.to_owned())
        .bind(self.uid())
        .bind(call_hash.to_owned())
        .bind(now())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query(
            "reading a gateway call waiting for input",
        ))?;
        Ok(row.is_some())
    }

    /// Write the client's answer for the call waiting under `id`. `false` when there is
    /// no such unexpired, unanswered row of this user's for this call (the first answer
    /// wins).
    ///
    /// # Errors
    /// An answer over [`MAX_GATEWAY_ANSWER_BYTES`]; no secret key; a database failure.
    pub async fn answer_gateway_input(
        &self,
        id: &str,
        call_hash: &str,
        answer: &Value,
    ) -> Result<bool> {
        let sealed = self.seal_value(
            GATEWAY_INPUT_ANSWER,
            id,
            answer,
            ("a client's answer", MAX_GATEWAY_ANSWER_BYTES),
        )?;
        let done = sqlx::query(
            "UPDATE gateway_inputs SET answer = $1 WHERE id = $2 AND user_id = $3 \
             AND call_hash = $4 AND answer IS NULL AND expires_at > $5",
        )
        .bind(sealed)
        .bind(id.to_owned())
        .bind(self.uid())
        .bind(call_hash.to_owned())
        .bind(now())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("answering a gateway call"))?;
        Ok(done.rows_affected() > 0)
    }

    /// The client's answer for the call waiting under `id`, once written and not yet
    /// taken; taking it marks it taken (a second call gets `None`).
    ///
    /// # Errors
    /// No secret key, an answer that does not open, a database failure.
    pub async fn take_gateway_input_answer(&self, id: &str) -> Result<Option<Value>> {
        let row = sqlx::query(
            "UPDATE gateway_inputs SET taken_at = $1 WHERE id = $2 AND user_id = $3 \
             AND answer IS NOT NULL AND taken_at IS NULL AND expires_at > $1 RETURNING answer",
        )
        .bind(now())
        .bind(id.to_owned())
        .bind(self.uid())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("taking a gateway call's answer"))?;
        self.open_returned(
            row,
            GATEWAY_INPUT_ANSWER,
            id,
            "taking a gateway call's answer",
        )
    }

    /// Write the outcome of the call that waited under `id` (its result, its error, or
    /// its next question), for the instance the client's retry reached.
    ///
    /// # Errors
    /// An outcome over [`MAX_GATEWAY_OUTCOME_BYTES`]; no secret key; a database failure.
    pub async fn put_gateway_input_outcome(&self, id: &str, outcome: &Value) -> Result<()> {
        let sealed = self.seal_value(
            GATEWAY_INPUT_OUTCOME,
            id,
            outcome,
            ("a gateway call's outcome", MAX_GATEWAY_OUTCOME_BYTES),
        )?;
        sqlx::query("UPDATE gateway_inputs SET outcome = $1 WHERE id = $2 AND user_id = $3")
            .bind(sealed)
            .bind(id.to_owned())
            .bind(self.uid())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("saving a gateway call's outcome"))?;
        Ok(())
    }

    /// The outcome of the call `call_hash` that waited under `id`, once written; the
    /// row ends with it.
    ///
    /// # Errors
    /// No secret key, an outcome that does not open, a database failure.
    pub async fn take_gateway_input_outcome(
        &self,
        id: &str,
        call_hash: &str,
    ) -> Result<Option<Value>> {
        let row = sqlx::query(
            "DELETE FROM gateway_inputs WHERE id = $1 AND user_id = $2 AND call_hash = $3 \
             AND outcome IS NOT NULL RETURNING outcome",
        )
        .bind(id.to_owned())
        .bind(self.uid())
        .bind(call_hash.to_owned())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("taking a gateway call's outcome"))?;
        self.open_returned(
            row,
            GATEWAY_INPUT_OUTCOME,
            id,
            "taking a gateway call's outcome",
        )
    }

    /// Write the latest progress of the call that waited under `id` (it relays on here
    /// while the client's retry waits elsewhere); each write counts one more.
    ///
    /// # Errors
    /// Progress over [`MAX_GATEWAY_PROGRESS_BYTES`]; no secret key; a database failure.
    pub async fn put_gateway_input_progress(&self, id: &str, progress: &Value) -> Result<()> {
        let sealed = self.seal_value(
            GATEWAY_INPUT_PROGRESS,
            id,
            progress,
            ("a gateway call's progress", MAX_GATEWAY_PROGRESS_BYTES),
        )?;
        sqlx::query(
            "UPDATE gateway_inputs SET progress = $1, progress_seq = progress_seq + 1 \
             WHERE id = $2 AND user_id = $3",
        )
        .bind(sealed)
        .bind(id.to_owned())
        .bind(self.uid())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving a gateway call's progress"))?;
        Ok(())
    }

    /// The latest progress of the call `call_hash` that waited under `id`, with how many
    /// were written (so a reader sends only what is new); `None` before the first.
    ///
    /// # Errors
    /// No secret key, progress that does not open, a database failure.
    pub async fn gateway_input_progress(
        &self,
        id: &str,
        call_hash: &str,
    ) -> Result<Option<(i64, Value)>> {
        let doing = "reading a gateway call's progress";
        let row = sqlx::query(
            "SELECT progress_seq, progress FROM gateway_inputs WHERE id = $1 AND user_id = $2 \
             AND call_hash = $3 AND progress IS NOT NULL",
        )
        .bind(id.to_owned())
        .bind(self.uid())
        .bind(call_hash.to_owned())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query(doing))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let seq: i64 = row.try_get(0).map_err(StoreError::query(doing))?;
        let sealed: Vec<u8> = row.try_get(1).map_err(StoreError::query(doing))?;
        let value = self.open_json(GATEWAY_INPUT_PROGRESS, id, &sealed)?;
        Ok(Some((seq, value)))
    }

    /// Remove the row of the call that waited under `id` (its retry reached the instance
    /// running it, or it ended).
    ///
    /// # Errors
    /// A database failure.
    pub async fn finish_gateway_input(&self, id: &str) -> Result<()> {
        sqlx::query("DELETE FROM gateway_inputs WHERE id = $1 AND user_id = $2")
            .bind(id.to_owned())
            .bind(self.uid())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query(
                "removing a gateway call waiting for input",
            ))?;
        Ok(())
    }
}
