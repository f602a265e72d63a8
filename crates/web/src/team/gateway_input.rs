//! The team gateway's calls waiting for a client's input, across instances. A client on
//! 2026-07-28 answered with an `InputRequiredResult` sends its retry wherever the load
//! balancer puts it; the call itself (the upstream request, still waiting for the answer)
//! stays in the `InputTable` of the instance that started it. The store's
//! `gateway_inputs` row is the mailbox between the two:
//!
//! - [`offer`] (the running instance, when a call parks): opens the row for the
//!   `requestState` and watches it every [`POLL_EVERY`]: when another instance has
//!   written the client's answer, takes the call back (`InputTable::resume_detached`),
//!   relays on with no client attached, and writes the outcome (the result, the error,
//!   or the next question — then watches the next `requestState` the same way).
//!   Meanwhile it writes the call's latest progress to the row (at most every
//!   [`POLL_EVERY`], and once more before the outcome). A retry that reaches this
//!   instance takes the call from the table itself, and the watch ends.
//! - [`retry_elsewhere`] (an instance a retry reached, holding no such call): writes the
//!   client's answer, then waits up to [`WAIT_FOR_OUTCOME`] for the outcome, sending the
//!   client each new progress the row shows (under the retry's own progress token);
//!   with no outcome yet it answers an `InputRequiredResult` carrying only the
//!   `requestState`, which the client's SDK retries after a short backoff.
//!
//! The call stays on its instance, and its row in the store, for as long as its parked
//! timeout (the `InputTable`'s, `TeamOptions::elicitation_timeout`: 100 s by default).
//! In the store an answer is at most 1 MiB, an outcome 8 MiB and the latest progress
//! 16 KiB (its message cut to 1000 characters first), all sealed.
//!
//! A user's calls waiting across the instances are bounded by the same
//! [`MAX_PARKED_PER_USER`] as each instance's table: [`offer`] opens the row only while
//! the user has fewer waiting in the store (counted there), else the call parked here is
//! given back ([`InputTable::refuse`](switchboard_gateway::InputTable::refuse)) and the
//! client answered [`user_limit_error`]; a call that asks again while relaying here for
//! a retry elsewhere is bounded the same way (its previous row not counted), its outcome
//! then that error.
//!
//! Must not: take a state of another user or another call (every row query names the
//! token's user and the call's hash), wait past the call's own timeout, or let one user
//! hold more than [`MAX_PARKED_PER_USER`] waiting calls across the instances.

use std::time::{Duration, Instant};

use rmcp::model::{ErrorData, InputRequiredResult, InputResponses};
use rmcp::service::{RequestContext, RoleServer};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use switchboard_gateway::{
    CallKey, Detached, MAX_PARKED_PER_USER, Relayed, send_progress, upstream_error,
    user_limit_error,
};
use switchboard_mcp::Progress;
use switchboard_store::{InputRow, UserId, UserStore, call_hash};
use tokio::sync::watch;

use super::progress::with_message_cut;
use super::state::TeamState;

/// How often the store is read for an answer or an outcome.
pub const POLL_EVERY: Duration = Duration::from_millis(200);
/// The longest progress message (characters) handed to another instance.
const MAX_PROGRESS_MESSAGE: usize = 1000;
/// How long a retry that reached another instance waits for the outcome before it
/// answers with the `requestState` alone (the client calls again).
pub const WAIT_FOR_OUTCOME: Duration = Duration::from_secs(25);

fn unavailable(e: switchboard_store::StoreError) -> ErrorData {
    tracing::warn!("team store (gateway input): {e}");
    ErrorData::internal_error("the team database did not answer; call again", None)
}

/// Opens the row of a call parked here under `request_state` and watches it (see the
/// module doc). A row that cannot be written leaves the call reachable from this
/// instance only. `Err` (the client's answer) when the user already has
/// [`MAX_PARKED_PER_USER`] calls waiting across the instances: the call is then ended.
pub(crate) async fn offer(
    state: &TeamState,
    user: &UserId,
    request_state: String,
    key: CallKey,
    server: String,
) -> Result<(), ErrorData> {
    let us = state.store().for_user(user);
    let hash = call_hash(&key.call);
    let ttl = state.inputs().timeout();
    match us
        .open_gateway_input(&request_state, &hash, ttl, MAX_PARKED_PER_USER, None)
        .await
    {
        Ok(InputRow::Opened) => {}
        Ok(InputRow::Full { waiting }) => {
            tracing::warn!(
                "{waiting} calls of one user already wait for input across the instances: \
                 this one refused"
            );
            state.inputs().refuse(&request_state);
            return Err(user_limit_error(waiting, ttl));
        }
        Err(e) => {
            tracing::warn!("team store (gateway input): {e}: a retry must reach this instance");
            return Ok(());
        }
    }
    let inputs = state.inputs().clone();
    tokio::spawn(async move {
        let mut watched = request_state;
        let mut deadline = Instant::now() + ttl;
        while Instant::now() < deadline {
            tokio::time::sleep(POLL_EVERY).await;
            if !inputs.holds(&watched) {
                return; // taken by a retry here, or timed out
            }
            let answer = match us.take_gateway_input_answer(&watched).await {
                Ok(Some(a)) => a,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!("team store (gateway input): {e}");
                    continue;
                }
            };
            let responses: InputResponses = serde_json::from_value(answer).unwrap_or_default();
            let (latest, mut heard) = watch::channel(None);
            let resumed = inputs.resume_detached(&watched, &key, responses, &latest);
            let step = tokio::select! {
                step = resumed => step,
                () = write_progress(&us, &watched, &mut heard) => None,
            };
            // The latest goes before the outcome, even if its write was cut short (the
            // reader sends only progress that moved forward).
            let p = heard.borrow_and_update().clone();
            put_progress(&us, &watched, &p).await;
            let Some(step) = step else {
                return;
            };
            let (outcome, next) = match step {
                Detached::Done(Ok(result)) => (json!({"result": result}), None),
                Detached::Done(Err(e)) => (json!({"error": upstream_error(&server, e)}), None),
                Detached::Refused(e) => (json!({"error": e}), None),
                Detached::InputRequired(asked) => match asked.request_state.clone() {
                    Some(n) => {
                        let opened = us
                            .open_gateway_input(&n, &hash, ttl, MAX_PARKED_PER_USER, Some(&watched))
                            .await;
                        match opened {
                            Ok(InputRow::Full { waiting }) => {
                                inputs.refuse(&n);
                                (json!({"error": user_limit_error(waiting, ttl)}), None)
                            }
                            Ok(InputRow::Opened) => (json!({"inputRequired": asked}), Some(n)),
                            Err(e) => {
                                tracing::warn!("team store (gateway input): {e}");
                                (json!({"inputRequired": asked}), Some(n))
                            }
                        }
                    }
                    None => (json!({"inputRequired": asked}), None),
                },
            };
            put_outcome(&us, &watched, &outcome).await;
            match next {
                Some(n) => {
                    watched = n;
                    deadline = Instant::now() + ttl;
                }
                None => return,
            }
        }
    });
    Ok(())
}

/// Writes each progress `heard` to the row of `request_state`, at most every
/// [`POLL_EVERY`] (the latest wins); never ends while the call relays.
async fn write_progress(
    us: &UserStore,
    request_state: &str,
    heard: &mut watch::Receiver<Option<Progress>>,
) {
    while heard.changed().await.is_ok() {
        let p = heard.borrow_and_update().clone();
        put_progress(us, request_state, &p).await;
        tokio::time::sleep(POLL_EVERY).await;
    }
    std::future::pending::<()>().await;
}

async fn put_progress(us: &UserStore, request_state: &str, p: &Option<Progress>) {
    let Some(p) = p else {
        return;
    };
    // A message is cut so that the row always takes it (the store caps progress).
    let value =
        serde_json::to_value(with_message_cut(p, MAX_PROGRESS_MESSAGE)).unwrap_or(Value::Null);
    if let Err(e) = us.put_gateway_input_progress(request_state, &value).await {
        tracing::debug!("team store (gateway input progress): {e}");
    }
}

/// Writes `outcome`; one too big for the store becomes an error saying so.
async fn put_outcome(us: &UserStore, request_state: &str, outcome: &Value) {
    if let Err(e) = us.put_gateway_input_outcome(request_state, outcome).await {
        tracing::warn!("team store (gateway input): {e}");
        let error = ErrorData::internal_error(
            format!(
                "the call's result could not be handed to the instance your retry reached \
                 ({e}); call again"
            ),
            None,
        );
        if let Err(e) = us
            .put_gateway_input_outcome(request_state, &json!({"error": error}))
            .await
        {
            tracing::warn!("team store (gateway input): {e}");
        }
    }
}

/// A retry whose call is parked here: the row is not needed any more.
pub(crate) fn taken_here(state: &TeamState, user: &UserId, request_state: &str) {
    let us = state.store().for_user(user);
    let id = request_state.to_owned();
    tokio::spawn(async move {
        if let Err(e) = us.finish_gateway_input(&id).await {
            tracing::warn!("team store (gateway input): {e}");
        }
    });
}

/// A retry whose call is parked on another instance (see the module doc).
pub(crate) async fn retry_elsewhere<T: DeserializeOwned>(
    state: &TeamState,
    ctx: &RequestContext<RoleServer>,
    user: &UserId,
    request_state: &str,
    key: &CallKey,
    responses: Option<InputResponses>,
) -> Result<Relayed<T>, ErrorData> {
    let us = state.store().for_user(user);
    let hash = call_hash(&key.call);
    let answered = match &responses {
        Some(r) => {
            let value = serde_json::to_value(r).unwrap_or(Value::Null);
            us.answer_gateway_input(request_state, &hash, &value)
                .await
                .map_err(unavailable)?
        }
        None => false,
    };
    if !answered
        && !us
            .gateway_input_waiting(request_state, &hash)
            .await
            .map_err(unavailable)?
    {
        return Err(ErrorData::invalid_params(
            "requestState names no call waiting for input (it timed out, or belongs to \
             another call): call again without requestState and inputResponses",
            None,
        ));
    }
    let deadline = Instant::now() + WAIT_FOR_OUTCOME;
    let token = ctx.meta.get_progress_token();
    let (mut sent_seq, mut sent) = (0, f64::NEG_INFINITY);
    loop {
        // Progress first: what was written just before the outcome still goes first.
        // Only progress that moved forward is sent (MCP's progress only increases).
        if token.is_some()
            && let Ok(Some((seq, value))) = us.gateway_input_progress(request_state, &hash).await
            && seq > sent_seq
        {
            sent_seq = seq;
            let p = serde_json::from_value::<Progress>(value).ok();
            if let Some(p) = p.filter(|p| p.progress > sent) {
                sent = p.progress;
                send_progress(ctx, token.as_ref(), p).await;
            }
        }
        if let Some(outcome) = us
            .take_gateway_input_outcome(request_state, &hash)
            .await
            .map_err(unavailable)?
        {
            return decode(outcome);
        }
        if Instant::now() >= deadline {
            return Ok(Relayed::InputRequired(
                InputRequiredResult::from_request_state(request_state),
            ));
        }
        tokio::select! {
            () = tokio::time::sleep(POLL_EVERY) => {}
            () = ctx.ct.cancelled() => {
                return Err(ErrorData::internal_error("the client went away", None));
            }
        }
    }
}

/// An outcome as written by [`offer`]'s watch.
fn decode<T: DeserializeOwned>(mut outcome: Value) -> Result<Relayed<T>, ErrorData> {
    let broken = || ErrorData::internal_error("the call's stored outcome did not read", None);
    if let Some(v) = outcome.get_mut("result").map(Value::take) {
        return serde_json::from_value(v)
            .map(|r| Relayed::Done(Ok(r)))
            .map_err(|_| broken());
    }
    if let Some(v) = outcome.get_mut("inputRequired").map(Value::take) {
        return serde_json::from_value(v)
            .map(Relayed::InputRequired)
            .map_err(|_| broken());
    }
    match outcome.get_mut("error").map(Value::take) {
        Some(v) => Err(serde_json::from_value(v).unwrap_or_else(|_| broken())),
        None => Err(broken()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;

    #[test]
    fn outcomes_decode_to_their_kind() {
        let r: Relayed<CallToolResult> =
            decode(json!({"result": {"content": [{"type": "text", "text": "x"}]}})).unwrap();
        assert!(matches!(r, Relayed::Done(Ok(_))));
        let r: Relayed<CallToolResult> = decode(json!({"inputRequired": {
            "resultType": "input_required", "requestState": "abc"}}))
        .unwrap();
        assert!(
            matches!(r, Relayed::InputRequired(ir) if ir.request_state.as_deref() == Some("abc"))
        );
        let e = decode::<CallToolResult>(json!({"error": {"code": -32602, "message": "nope"}}));
        assert_eq!(e.err().unwrap().message, "nope");
        let e = decode::<CallToolResult>(json!({"something": 1}));
        assert!(e.err().unwrap().message.contains("did not read"));
    }
}
