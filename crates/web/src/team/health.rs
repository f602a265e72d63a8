//! `GET /healthz` (the process answers) and `GET /readyz` (the store answers one cheap
//! query within 500 ms, else 503), without sign-in, for load balancers and orchestrators. Neither says anything
//! about any user.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::state::TeamState;

/// `GET /healthz`.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// How long the readiness query may take, taking a connection included. Short, and for
/// this probe only: a stopped database makes the pool retry connecting until its own
/// acquire timeout (10 s, right for a user's request that may wait out a restart), and
/// an orchestrator should take a replica out of rotation within a second.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// `GET /readyz`: 200 when the store answers, 503 when it does not.
pub async fn readyz(State(state): State<TeamState>) -> (StatusCode, Json<Value>) {
    let answered = tokio::time::timeout(READY_TIMEOUT, state.store().ping()).await;
    match answered {
        Ok(Ok(())) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Ok(Err(e)) => {
            tracing::warn!("readyz: {e}");
            unavailable()
        }
        Err(_) => {
            tracing::warn!("readyz: the store did not answer within {READY_TIMEOUT:?}");
            unavailable()
        }
    }
}

fn unavailable() -> (StatusCode, Json<Value>) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"status": "unavailable", "message": "the team database does not answer"})),
    )
}
