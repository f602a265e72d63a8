//! One user's saved workflows and their run logs, through [`UserStore`] only: a workflow
//! is a name (unique per user) and its YAML source, sealed; a run is a row written when
//! it starts (so every instance sees it running) and finished with its outcome and its
//! run log (JSON, sealed, at most [`MAX_RUN_LOG_BYTES`]). Only the newest
//! [`MAX_RUNS_PER_USER`] (50) finished runs of a user are kept, and at most
//! [`MAX_RUNNING_PER_USER`] (3) run at once. A run row carries a deadline and a cancel
//! request; one still running past its deadline (its instance stopped) reads as
//! `interrupted`. Other caps: a source of [`MAX_WORKFLOW_BYTES`] (256 KiB), a run log of
//! 1 MiB, [`MAX_WORKFLOWS_PER_USER`] (500) workflows.
//!
//! Every query names `self.user`: a workflow or run of another user is "not there"
//! (`None` / `false`), never an error that would confirm it exists.
//!
//! Must not: store a workflow's source or a run log in clear, or run anything (the
//! runner lives in the web crate).

use std::time::Duration;

use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::account::{now, random_token, secs};
use crate::error::{Result, StoreError};
use crate::store::{WORKFLOW_RUN_LOG, WORKFLOW_SOURCE};
use crate::user_data::{UserStore, check_name, text_of};

/// Largest workflow source (bytes) the store takes.
pub const MAX_WORKFLOW_BYTES: usize = 256 * 1024;
/// Largest run log (JSON bytes) the store takes; the runner trims a log to fit.
pub const MAX_RUN_LOG_BYTES: usize = 1024 * 1024;
/// At most this many finished runs are kept per user (the oldest are deleted).
pub const MAX_RUNS_PER_USER: usize = 50;
/// At most this many runs of one user run at once (on all instances together).
pub const MAX_RUNNING_PER_USER: usize = 3;
/// At most this many workflows per user.
pub const MAX_WORKFLOWS_PER_USER: usize = 500;

/// A saved workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedWorkflow {
    /// Its name, unique per user.
    pub name: String,
    /// The YAML source (opened from its sealed form; empty in listings).
    pub source: String,
    /// Created (unix seconds).
    pub created_at: i64,
    /// Last saved (unix seconds).
    pub updated_at: i64,
}

/// How a run ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Running (on some instance) and before its deadline.
    Running,
    /// Every node ran.
    Ok,
    /// A node failed.
    Failed,
    /// Stopped by a cancel.
    Cancelled,
    /// Never finished: past its deadline without an outcome (the instance running it
    /// stopped).
    Interrupted,
}

impl RunState {
    /// `running`, `ok`, `failed`, `cancelled` or `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }

    fn stored(self) -> Result<&'static str> {
        match self {
            Self::Ok | Self::Failed | Self::Cancelled => Ok(self.as_str()),
            Self::Running | Self::Interrupted => Err(StoreError::Invalid(format!(
                "a run cannot finish as `{}`: finish it as ok, failed or cancelled",
                self.as_str()
            ))),
        }
    }
}

/// One run, without its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowRun {
    /// Its id (random, URL-safe).
    pub id: String,
    /// The workflow's name when it started.
    pub workflow_name: String,
    /// Started (unix seconds).
    pub started_at: i64,
    /// Finished (unix seconds), once it has.
    pub finished_at: Option<i64>,
    /// Running, or how it ended.
    pub state: RunState,
    /// When a cancel was asked for (unix seconds), if one was.
    pub cancel_requested_at: Option<i64>,
}

const RUN_COLUMNS: &str =
    "id, workflow_name, started_at, finished_at, outcome, deadline_at, cancel_requested_at";

fn run_from(row: &AnyRow, t: i64) -> Result<WorkflowRun> {
    let get = || StoreError::query("reading a workflow run");
    let outcome: Option<String> = row.try_get(4).map_err(get())?;
    let deadline: i64 = row.try_get(5).map_err(get())?;
    let state = match outcome.as_deref() {
        None if t > deadline => RunState::Interrupted,
        None => RunState::Running,
        Some("ok") => RunState::Ok,
        Some("failed") => RunState::Failed,
        Some("cancelled") => RunState::Cancelled,
        Some(other) => {
            return Err(StoreError::Invalid(format!(
                "stored run outcome `{other}` is not ok, failed or cancelled"
            )));
        }
    };
    Ok(WorkflowRun {
        id: row.try_get(0).map_err(get())?,
        workflow_name: row.try_get(1).map_err(get())?,
        started_at: row.try_get(2).map_err(get())?,
        finished_at: row.try_get(3).map_err(get())?,
        state,
        cancel_requested_at: row.try_get(6).map_err(get())?,
    })
}

/// A workflow name: as a server name (1 to 100 letters, digits, `-`, `_`, `.`).
fn check_workflow_name(name: &str) -> Result<()> {
    check_name(name).map_err(|_| {
        StoreError::Invalid(format!(
            "workflow name `{}`: use 1 to 100 letters, digits, `-`, `_` or `.`",
            name.chars().take(100).collect::<String>()
        ))
    })
}

impl UserStore {
    /// The user's workflows by name, without their sources.
    ///
    /// # Errors
    /// A database failure.
    pub async fn workflows(&self) -> Result<Vec<SavedWorkflow>> {
        let rows = sqlx::query(
            "SELECT name, created_at, updated_at FROM workflows WHERE user_id = $1 ORDER BY name",
        )
        .bind(self.uid())
        .fetch_all(&self.store.pool)
        .await
        .map_err(StoreError::query("listing workflows"))?;
        let get = || StoreError::query("listing workflows");
        rows.iter()
            .map(|r| {
                Ok(SavedWorkflow {
                    name: r.try_get(0).map_err(get())?,
                    source: String::new(),
                    created_at: r.try_get(1).map_err(get())?,
                    updated_at: r.try_get(2).map_err(get())?,
                })
            })
            .collect()
    }

    /// The user's workflow `name` with its source (`None`: the user has none by that name).
    ///
    /// # Errors
    /// No secret key, a source that does not open, a database failure.
    pub async fn workflow(&self, name: &str) -> Result<Option<SavedWorkflow>> {
        let row = sqlx::query(
            "SELECT name, source, created_at, updated_at FROM workflows \
             WHERE user_id = $1 AND name = $2",
        )
        .bind(self.uid())
        .bind(name.to_owned())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("reading a workflow"))?;
        let Some(r) = row else { return Ok(None) };
        let get = || StoreError::query("reading a workflow");
        let name: String = r.try_get(0).map_err(get())?;
        let sealed: Vec<u8> = r.try_get(1).map_err(get())?;
        let (plain, _) = self
            .store
            .keys()?
            .open(&WORKFLOW_SOURCE.slot(&self.user.0, &name), &sealed)?;
        Ok(Some(SavedWorkflow {
            source: text_of(plain, WORKFLOW_SOURCE.table, WORKFLOW_SOURCE.column)?,
            created_at: r.try_get(2).map_err(get())?,
            updated_at: r.try_get(3).map_err(get())?,
            name,
        }))
    }

    /// Save the user's workflow `name` (added, or its source replaced). `false` when the
    /// user already has [`MAX_WORKFLOWS_PER_USER`] others.
    ///
    /// # Errors
    /// A bad name, a source over [`MAX_WORKFLOW_BYTES`], no secret key, a database failure.
    pub async fn put_workflow(&self, name: &str, source: &str) -> Result<bool> {
        check_workflow_name(name)?;
        if source.len() > MAX_WORKFLOW_BYTES {
            return Err(StoreError::Invalid(format!(
                "the workflow is {} bytes; at most {MAX_WORKFLOW_BYTES} are kept: split it",
                source.len()
            )));
        }
        let sealed = self
            .store
            .keys()?
            .seal(&WORKFLOW_SOURCE.slot(&self.user.0, name), source.as_bytes())?;
        let t = now();
        let done = sqlx::query(
            "INSERT INTO workflows (user_id, name, source, created_at, updated_at) \
             SELECT $1, $2, $3, $4, $4 WHERE (SELECT COUNT(*) FROM workflows \
               WHERE user_id = $1 AND name <> $2) < $5 \
             ON CONFLICT (user_id, name) DO UPDATE SET source = excluded.source, \
             updated_at = excluded.updated_at",
        )
        .bind(self.uid())
        .bind(name.to_owned())
        .bind(sealed)
        .bind(t)
        .bind(i64::try_from(MAX_WORKFLOWS_PER_USER).unwrap_or(i64::MAX))
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving a workflow"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Remove the user's workflow `name` and its finished runs; `false` when there was none.
    ///
    /// # Errors
    /// A database failure.
    pub async fn delete_workflow(&self, name: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM workflows WHERE user_id = $1 AND name = $2")
            .bind(self.uid())
            .bind(name.to_owned())
            .execute(&self.store.pool)
            .await
            .map_err(StoreError::query("removing a workflow"))?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "DELETE FROM workflow_runs WHERE user_id = $1 AND workflow_name = $2 \
             AND outcome IS NOT NULL",
        )
        .bind(self.uid())
        .bind(name.to_owned())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("removing a workflow's runs"))?;
        Ok(true)
    }

    /// Record the start of a run of workflow `name` that may take up to `limit`: its id,
    /// or `None` when the user already has [`MAX_RUNNING_PER_USER`] runs running.
    ///
    /// # Errors
    /// A bad name; a database failure.
    pub async fn start_workflow_run(&self, name: &str, limit: Duration) -> Result<Option<String>> {
        check_workflow_name(name)?;
        let id = random_token(16)?;
        let t = now();
        let done = sqlx::query(
            "INSERT INTO workflow_runs (id, user_id, workflow_name, started_at, deadline_at) \
             SELECT $1, $2, $3, $4, $5 WHERE (SELECT COUNT(*) FROM workflow_runs \
               WHERE user_id = $2 AND outcome IS NULL AND deadline_at >= $4) < $6",
        )
        .bind(id.clone())
        .bind(self.uid())
        .bind(name.to_owned())
        .bind(t)
        .bind(t.saturating_add(secs(limit)).saturating_add(1))
        .bind(i64::try_from(MAX_RUNNING_PER_USER).unwrap_or(i64::MAX))
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("recording a workflow run"))?;
        Ok((done.rows_affected() > 0).then_some(id))
    }

    /// Finish run `id` with `state` (ok, failed or cancelled) and its run log; then keep
    /// only the user's newest [`MAX_RUNS_PER_USER`] finished runs. `false` when the run is
    /// not the user's or already finished.
    ///
    /// # Errors
    /// Another state, a log over [`MAX_RUN_LOG_BYTES`], no secret key, a database failure.
    pub async fn finish_workflow_run(
        &self,
        id: &str,
        state: RunState,
        log: &Value,
    ) -> Result<bool> {
        let outcome = state.stored()?;
        let text = log.to_string();
        if text.len() > MAX_RUN_LOG_BYTES {
            return Err(StoreError::Invalid(format!(
                "the run log is {} bytes; at most {MAX_RUN_LOG_BYTES} are kept: trim it",
                text.len()
            )));
        }
        let sealed = self
            .store
            .keys()?
            .seal(&WORKFLOW_RUN_LOG.slot(&self.user.0, id), text.as_bytes())?;
        let done = sqlx::query(
            "UPDATE workflow_runs SET outcome = $1, log = $2, finished_at = $3 \
             WHERE user_id = $4 AND id = $5 AND outcome IS NULL",
        )
        .bind(outcome)
        .bind(sealed)
        .bind(now())
        .bind(self.uid())
        .bind(id.to_owned())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("saving a workflow run"))?;
        sqlx::query(
            "DELETE FROM workflow_runs WHERE user_id = $1 AND outcome IS NOT NULL AND id NOT IN \
             (SELECT id FROM workflow_runs WHERE user_id = $1 AND outcome IS NOT NULL \
              ORDER BY started_at DESC, id DESC LIMIT $2)",
        )
        .bind(self.uid())
        .bind(i64::try_from(MAX_RUNS_PER_USER).unwrap_or(i64::MAX))
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("dropping old workflow runs"))?;
        Ok(done.rows_affected() > 0)
    }

    /// The user's runs, newest first (of workflow `name` only, when given).
    ///
    /// # Errors
    /// A database failure.
    pub async fn workflow_runs(&self, name: Option<&str>) -> Result<Vec<WorkflowRun>> {
        let filter = if name.is_some() {
            " AND workflow_name = $2"
        } else {
            ""
        };
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM workflow_runs WHERE user_id = $1{filter} \
             ORDER BY started_at DESC, id DESC"
        );
        let mut q = sqlx::query(&sql).bind(self.uid());
        if let Some(n) = name {
            q = q.bind(n.to_owned());
        }
        let rows = q
            .fetch_all(&self.store.pool)
            .await
            .map_err(StoreError::query("listing workflow runs"))?;
        let t = now();
        rows.iter().map(|r| run_from(r, t)).collect()
    }

    /// The user's run `id` and its log once it finished (`None`: not the user's).
    ///
    /// # Errors
    /// No secret key, a log that does not open, a database failure.
    pub async fn workflow_run(&self, id: &str) -> Result<Option<(WorkflowRun, Option<Value>)>> {
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS}, log FROM workflow_runs WHERE user_id = $1 AND id = $2"
        ))
        .bind(self.uid())
        .bind(id.to_owned())
        .fetch_optional(&self.store.pool)
        .await
        .map_err(StoreError::query("reading a workflow run"))?;
        let Some(r) = row else { return Ok(None) };
        let run = run_from(&r, now())?;
        let sealed: Option<Vec<u8>> = r
            .try_get(7)
            .map_err(StoreError::query("reading a workflow run"))?;
        let log = match sealed {
            None => None,
            Some(sealed) => {
                let (plain, _) = self
                    .store
                    .keys()?
                    .open(&WORKFLOW_RUN_LOG.slot(&self.user.0, id), &sealed)?;
                let text = text_of(plain, WORKFLOW_RUN_LOG.table, WORKFLOW_RUN_LOG.column)?;
                Some(serde_json::from_str(&text).map_err(|_| StoreError::Unseal {
                    table: WORKFLOW_RUN_LOG.table,
                    column: WORKFLOW_RUN_LOG.column,
                    reason: "it is not JSON",
                })?)
            }
        };
        Ok(Some((run, log)))
    }

    /// Ask the user's run `id` (running on any instance) to stop; `false` when it is not
    /// the user's or has finished.
    ///
    /// # Errors
    /// A database failure.
    pub async fn request_run_cancel(&self, id: &str) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE workflow_runs SET cancel_requested_at = $1 \
             WHERE user_id = $2 AND id = $3 AND outcome IS NULL",
        )
        .bind(now())
        .bind(self.uid())
        .bind(id.to_owned())
        .execute(&self.store.pool)
        .await
        .map_err(StoreError::query("asking a workflow run to stop"))?;
        Ok(done.rows_affected() > 0)
    }
}
