//! Input requests for clients on protocol 2026-07-28 (SEP-2322, multi round-trip
//! requests). That revision has no server-to-client requests: a server that needs
//! input answers the call with an `InputRequiredResult` naming what it asks, and the
//! client calls again with `inputResponses` and the `requestState` it was given.
//!
//! When an upstream server asks for elicitation, sampling or roots during such a
//! client's call, the call is **parked** here: the upstream request keeps running
//! (its question still waits for an answer), and the client gets an
//! `InputRequiredResult` with the question and a `requestState`. The client's retry
//! takes the parked call back, hands each answer to the upstream question that waits
//! for it, and goes on relaying: the next question, or the result. Progress goes down
//! on whichever request of the client is current; a client that disconnects while its
//! request runs cancels the upstream call, as on older protocols.
//!
//! `requestState` is a random 128-bit handle to state kept in this process, never
//! data the client could forge. A retry naming a state this table did not hand out,
//! one that timed out (the [`InputTable`]'s timeout: the upstream call is then
//! cancelled), or one parked for another call (method and name) or another owner is
//! refused with a message saying to call again.
//!
//! Limits: at most [`MAX_PARKED`] (256) calls parked in one table (the instance's
//! bound: a question beyond it is answered `decline`, or an error for sampling, and the
//! call goes on), and at most [`MAX_PARKED_PER_USER`] (32) of one user's (one
//! [`CallKey::owner`]: the one user of `switchboard gateway --http`, each member of a
//! team). A user at their own limit does not take the instance's places from the
//! others: the call that would park
//! is refused with [`user_limit_error`] (their limit, how many wait, answer or cancel
//! them), its question declined and its upstream request cancelled. The same holds for a
//! retry that asks again (it gave its place back while it ran). A team counts the user's
//! calls across its instances in the store too (`switchboard-web`'s `gateway_input`),
//! with the same limit and error, and gives a call refused there back with
//! [`InputTable::refuse`]. While a call is parked, at most 64 of its upstream's progress
//! notifications are kept (newer ones beyond that are dropped), so a server that floods
//! cannot grow memory.
//!
//! Must not: keep more than [`MAX_PARKED`] calls parked, or more than
//! [`MAX_PARKED_PER_USER`] of one owner's, keep a parked call past its deadline, or ask a
//! client for what it did not declare (elicitation and sampling are then declined as
//! before; roots are answered with an empty list).
#![allow(deprecated)] // sampling and roots: deprecated by SEP-2577, still in use

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequest, CreateMessageResult, ElicitRequest, ErrorCode,
    ErrorData, InputRequest, InputRequests, InputRequiredResult, InputResponses, ListRootsRequest,
    ListRootsResult, ProgressToken, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleServer};
use switchboard_mcp::{CallOptions, Progress, RequestError, decline_elicitation};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::gateway::Forwarded;
use crate::server::send_progress;

/// At most this many calls parked at once in one table.
pub const MAX_PARKED: usize = 256;
/// At most this many calls of one user ([`CallKey::owner`]) parked at once, in one
/// table and (for a team) across its instances. An eighth of [`MAX_PARKED`]: a person
/// answers questions one at a time and an agent's client answers each at once, so 32
/// waiting at once is far beyond honest use, while one member (or one leaked token) can
/// hold at most an eighth of an instance's places.
pub const MAX_PARKED_PER_USER: usize = 32;
/// At most this many progress notifications kept for a call while it is parked (the
/// newest beyond that are dropped: a server that floods cannot grow memory).
const PROGRESS_BACKLOG: usize = 64;
/// How long the progress still on its way when a result arrives is waited for.
const PROGRESS_DRAIN: Duration = Duration::from_millis(200);

/// Whether the request's client speaks 2026-07-28 or later (and so takes input
/// requests as an `InputRequiredResult`, not as requests of the server's own).
pub fn takes_input_required(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// What a call's retry carries (`requestState`, `inputResponses`).
#[derive(Debug, Default, Clone)]
pub struct Retry {
    pub state: Option<String>,
    pub responses: Option<InputResponses>,
}

/// Which call a parked call is: only a retry of the same call (by the same owner)
/// takes it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallKey {
    /// Who may take it back: empty for a one-user gateway, the user's id in a team.
    pub owner: String,
    /// The method and what it names (`tools/call NAME`, `resources/read URI`, …).
    pub call: String,
}

/// One upstream request, started by the caller for [`InputTable::relay`].
pub struct Upstream<T> {
    /// The request itself; it must watch `cancel` (through its `CallOptions`).
    pub call: BoxFuture<'static, Result<T, RequestError>>,
    pub progress: mpsc::UnboundedReceiver<Progress>,
    /// The questions the upstream server asks during this call.
    pub asks: mpsc::UnboundedReceiver<Forwarded>,
    /// Cancels the upstream request.
    pub cancel: CancellationToken,
    /// Kept as long as the call lives (the registration that routes `asks` here).
    pub keep: Box<dyn Send>,
}

impl<T> Upstream<T> {
    /// Starts nothing yet: `start` makes the request with `opts` (its cancel replaced
    /// by the call's own, so that a parked call outlives the request that began it),
    /// and `register` routes the server's questions to the channel it is given, for
    /// as long as what it returns is kept.
    pub fn new(
        mut opts: CallOptions,
        progress: mpsc::UnboundedReceiver<Progress>,
        start: impl FnOnce(CallOptions) -> BoxFuture<'static, Result<T, RequestError>>,
        register: impl FnOnce(mpsc::UnboundedSender<Forwarded>) -> Box<dyn Send>,
    ) -> Self {
        let cancel = CancellationToken::new();
        opts.cancel = Some(cancel.clone());
        let (asks_tx, asks) = mpsc::unbounded_channel();
        Self {
            keep: register(asks_tx),
            call: start(opts),
            progress,
            asks,
            cancel,
        }
    }
}

/// What [`InputTable::relay`] answers the client.
pub enum Relayed<T> {
    Done(Result<T, RequestError>),
    InputRequired(InputRequiredResult),
}

type Finished = Box<dyn Any + Send>;

/// A call whose upstream request runs in its own task.
struct Parked {
    key: CallKey,
    result: oneshot::Receiver<Finished>,
    /// The upstream's progress, through a bounded backlog (see [`PROGRESS_BACKLOG`]).
    progress: mpsc::Receiver<Progress>,
    asks: mpsc::UnboundedReceiver<Forwarded>,
    /// Questions sent to the client, by the key they were sent under.
    waiting: BTreeMap<String, Forwarded>,
    next_key: u64,
    /// What the client declared it can answer (from its latest request).
    caps: ClientCapabilities,
    /// Turns the result into JSON, for a retry that reached another instance.
    encode: Encoder,
    cancel: CancellationToken,
    _keep: Box<dyn Send>,
}

type Encoder = fn(
    Result<Finished, oneshot::error::RecvError>,
    &CallKey,
) -> Result<serde_json::Value, RequestError>;

impl Drop for Parked {
    fn drop(&mut self) {
        // Dropped without a result (timed out, the client went away mid-request, or
        // the table was full): the upstream request ends too.
        self.cancel.cancel();
    }
}

/// Parked calls, by `requestState`.
pub struct InputTable {
    timeout: Duration,
    parked: Mutex<HashMap<String, Box<Parked>>>,
}

impl std::fmt::Debug for InputTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputTable")
            .field("timeout", &self.timeout)
            .field("parked", &self.lock().len())
            .finish()
    }
}

/// What a user's call is answered when `waiting` of their calls already wait for their
/// client's input (at least [`MAX_PARKED_PER_USER`]); those wait at most `timeout`.
pub fn user_limit_error(waiting: usize, timeout: Duration) -> ErrorData {
    ErrorData::invalid_request(
        format!(
            "{waiting} calls of yours already wait for your client's input, your own limit \
             on this gateway is {MAX_PARKED_PER_USER} (other users have theirs): answer or \
             cancel the waiting calls (retry each with its requestState and \
             inputResponses; an elicitation answered `cancel` ends its call), or let them \
             time out after {} s, then call again",
            timeout.as_secs()
        ),
        None,
    )
}

/// Why [`InputTable::park`] gave a call back.
enum Full {
    /// The table holds [`MAX_PARKED`] calls.
    Table,
    /// This many calls of the owner's are parked (at least [`MAX_PARKED_PER_USER`]).
    Owner(usize),
}

/// What [`InputTable::park_asking`] did with a call that asked.
enum Parking {
    /// Parked: the client is asked.
    Asked(InputRequiredResult),
    /// The table is full: the question was declined, the call goes on.
    GoOn(Box<Parked>),
    /// The owner is at their own limit: the call ended, the client gets this.
    Refused(ErrorData),
}

fn no_state(why: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("requestState {why}: call again without requestState and inputResponses"),
        None,
    )
}

impl InputTable {
    /// A table whose parked calls wait at most `timeout` for the client's retry.
    pub fn new(timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            timeout,
            parked: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Box<Parked>>> {
        match self.parked.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// How many calls are parked.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no call is parked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parks `p` under a fresh `requestState`, dropped (its upstream request
    /// cancelled) if the client does not come back in time; `Err` gives it back when
    /// the table is full, or its owner's share of it.
    fn park(self: &Arc<Self>, p: Box<Parked>) -> Result<String, (Box<Parked>, Full)> {
        let Ok(id) = crate::http::generate_token() else {
            return Err((p, Full::Table));
        };
        let id = id[..32].to_owned();
        {
            let mut map = self.lock();
            if map.len() >= MAX_PARKED {
                return Err((p, Full::Table));
            }
            let owner = &p.key.owner;
            let mine = map.values().filter(|q| q.key.owner == *owner).count();
            if mine >= MAX_PARKED_PER_USER {
                return Err((p, Full::Owner(mine)));
            }
            map.insert(id.clone(), p);
        }
        let table: Weak<Self> = Arc::downgrade(self);
        let timeout = self.timeout;
        let expiring = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            if let Some(t) = table.upgrade() {
                let gone = t.lock().remove(&expiring);
                if gone.is_some() {
                    tracing::info!(
                        "a call waiting for its client's input gave up after {} s",
                        timeout.as_secs()
                    );
                }
                drop(gone);
            }
        });
        Ok(id)
    }

    fn take(&self, state: &str, key: &CallKey) -> Result<Box<Parked>, ErrorData> {
        let mut map = self.lock();
        match map.get(state) {
            None => Err(no_state(
                "names no call waiting for input here (it timed out, or waits on another \
                 instance of a team server)",
            )),
            Some(p) if p.key != *key => Err(no_state("belongs to another call")),
            Some(_) => map.remove(state).ok_or_else(|| no_state("was just taken")),
        }
    }

    /// How long a parked call waits for its client's retry.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether a call is parked here under `state`.
    pub fn holds(&self, state: &str) -> bool {
        self.lock().contains_key(state)
    }

    /// How many calls of `owner`'s are parked here.
    pub fn parked_of(&self, owner: &str) -> usize {
        self.lock()
            .values()
            .filter(|p| p.key.owner == owner)
            .count()
    }

    /// Ends the call parked under `state` (its owner's limit was found reached
    /// elsewhere, e.g. across a team's instances): its questions are declined and its
    /// upstream request cancelled. `false` when no call is parked under `state`.
    pub fn refuse(&self, state: &str) -> bool {
        let gone = self.lock().remove(state);
        match gone {
            Some(mut p) => {
                p.refuse_waiting();
                true
            }
            None => false,
        }
    }

    /// Parks `parked` after it asked `requests` (see [`Parking`]).
    fn park_asking(self: &Arc<Self>, parked: Box<Parked>, requests: InputRequests) -> Parking {
        match self.park(parked) {
            Ok(state) => Parking::Asked(InputRequiredResult::new(Some(requests), Some(state))),
            Err((mut p, Full::Table)) => {
                tracing::warn!("{MAX_PARKED} calls already wait for input: declined");
                p.refuse_waiting();
                Parking::GoOn(p)
            }
            Err((mut p, Full::Owner(waiting))) => {
                tracing::warn!(
                    "{waiting} calls of one user already wait for input (the most one user \
                     may have): this one refused"
                );
                p.refuse_waiting();
                drop(p);
                Parking::Refused(user_limit_error(waiting, self.timeout))
            }
        }
    }

    /// Relays one upstream request for a client on 2026-07-28 (see the module doc):
    /// a first call starts `start()`'s request, a retry takes its parked call back.
    /// `Err`: a retry naming no call parked for it, or a call that asked with its
    /// owner at their own limit ([`user_limit_error`]).
    pub async fn relay<T: Send + serde::Serialize + 'static>(
        self: &Arc<Self>,
        ctx: &RequestContext<RoleServer>,
        key: CallKey,
        retry: Retry,
        start: impl FnOnce() -> Upstream<T>,
    ) -> Result<Relayed<T>, ErrorData> {
        let caps = ctx.client_capabilities().unwrap_or_default();
        let mut parked = match retry.state {
            Some(state) => {
                let mut p = self.take(&state, &key)?;
                p.answer(retry.responses.unwrap_or_default());
                p.caps = caps;
                p
            }
            None => Box::new(Parked::start(key, caps, start())),
        };
        loop {
            match parked.drive(To::Client(ctx)).await {
                Step::Finished(r) => return Ok(Relayed::Done(downcast(r, &parked.key))),
                Step::Asked(requests) => match self.park_asking(parked, requests) {
                    Parking::Asked(asked) => return Ok(Relayed::InputRequired(asked)),
                    Parking::GoOn(p) => parked = p,
                    Parking::Refused(e) => return Err(e),
                },
            }
        }
    }

    /// Takes the call parked under `state` back for a retry that reached another
    /// instance (which handed over `responses`), answers it, and relays on with no
    /// client attached until the next step: the result, JSON-encoded, or the next
    /// question, parked again here. Its progress meanwhile goes to `progress` (the
    /// latest only: the instance the client waits on sends it on). `None` when no call
    /// of `key` is parked under `state` (taken by a retry that reached this instance, or
    /// timed out).
    pub async fn resume_detached(
        self: &Arc<Self>,
        state: &str,
        key: &CallKey,
        responses: InputResponses,
        progress: &watch::Sender<Option<Progress>>,
    ) -> Option<Detached> {
        let mut parked = self.take(state, key).ok()?;
        parked.answer(responses);
        loop {
            match parked.drive(To::Elsewhere(progress)).await {
                Step::Finished(r) => {
                    let encode = parked.encode;
                    return Some(Detached::Done(encode(r, &parked.key)));
                }
                Step::Asked(requests) => match self.park_asking(parked, requests) {
                    Parking::Asked(asked) => return Some(Detached::InputRequired(asked)),
                    Parking::GoOn(p) => parked = p,
                    Parking::Refused(e) => return Some(Detached::Refused(e)),
                },
            }
        }
    }
}

/// What [`InputTable::resume_detached`] comes to.
pub enum Detached {
    /// The upstream request's result as JSON, or its error.
    Done(Result<serde_json::Value, RequestError>),
    /// It asked again: parked under the result's new `requestState`.
    InputRequired(InputRequiredResult),
    /// It asked again with its owner at their limit ([`user_limit_error`]): ended.
    Refused(ErrorData),
}

/// Where [`Parked::drive`] stops.
enum Step {
    Finished(Result<Finished, oneshot::error::RecvError>),
    Asked(InputRequests),
}

/// The upstream request's result of type `T`, as JSON.
fn encode<T: serde::Serialize + 'static>(
    r: Result<Finished, oneshot::error::RecvError>,
    key: &CallKey,
) -> Result<serde_json::Value, RequestError> {
    let r: Result<T, RequestError> = downcast(r, key);
    r.and_then(|v| {
        serde_json::to_value(v).map_err(|e| RequestError::Unexpected {
            method: format!("{} ({e})", key.call),
        })
    })
}

/// The upstream request's own result (a task that ended without one: cancelled).
fn downcast<T: 'static>(
    r: Result<Finished, oneshot::error::RecvError>,
    key: &CallKey,
) -> Result<T, RequestError> {
    let cancelled = || RequestError::Cancelled {
        method: key.call.split(' ').next().unwrap_or_default().to_owned(),
    };
    match r {
        Ok(b) => match b.downcast::<Result<T, RequestError>>() {
            Ok(r) => *r,
            Err(_) => Err(cancelled()),
        },
        Err(_) => Err(cancelled()),
    }
}

/// A question the client did not declare the capability for, answered here (declined,
/// an error, or no roots); `Some` gives back one to send.
fn answer_undeclared(f: Forwarded, caps: &ClientCapabilities) -> Option<Forwarded> {
    match f {
        Forwarded::Elicit(_, tx) if caps.elicitation.is_none() => {
            tracing::info!("elicitation declined: the client did not declare the capability");
            let _ = tx.send(decline_elicitation());
            None
        }
        Forwarded::Sample(_, tx) if caps.sampling.is_none() => {
            let _ = tx.send(Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                "sampling declined: the client connected to switchboard gateway did not \
                 declare the sampling capability",
                None,
            )));
            None
        }
        Forwarded::Roots(tx) if caps.roots.is_none() => {
            let _ = tx.send(Ok(Vec::new()));
            None
        }
        f => Some(f),
    }
}

/// Where a driven call's progress goes.
#[derive(Clone, Copy)]
enum To<'a> {
    /// The client of this request, under its own token (dropped without one).
    Client(&'a RequestContext<RoleServer>),
    /// No client here: the latest progress, for another instance to send on.
    Elsewhere(&'a watch::Sender<Option<Progress>>),
}

impl To<'_> {
    async fn progress(self, token: Option<&ProgressToken>, p: Progress) {
        match self {
            To::Client(ctx) => send_progress(ctx, token, p).await,
            To::Elsewhere(latest) => {
                latest.send_replace(Some(p));
            }
        }
    }
}

impl Parked {
    /// Relays until the upstream request ends or asks what the client can answer:
    /// progress where `to` says, and the client's disconnect cancelling the upstream
    /// request.
    async fn drive(&mut self, to: To<'_>) -> Step {
        let ctx = match to {
            To::Client(ctx) => Some(ctx),
            To::Elsewhere(_) => None,
        };
        let token = ctx.and_then(|c| c.meta.get_progress_token());
        let gone = ctx.map(|c| c.ct.clone()).unwrap_or_default();
        let mut cancelled = false;
        loop {
            tokio::select! {
                r = &mut self.result => {
                    // The upstream request has ended, so its progress channel closes
                    // once what is on its way has come through.
                    let rest = async {
                        while let Some(p) = self.progress.recv().await {
                            to.progress(token.as_ref(), p).await;
                        }
                    };
                    let _ = tokio::time::timeout(PROGRESS_DRAIN, rest).await;
                    return Step::Finished(r);
                }
                Some(p) = self.progress.recv() => to.progress(token.as_ref(), p).await,
                Some(f) = self.asks.recv() => {
                    let mut requests = InputRequests::new();
                    let mut next = Some(f);
                    while let Some(f) = next.take() {
                        if let Some(f) = answer_undeclared(f, &self.caps) {
                            let name = self.ask(f, &mut requests);
                            tracing::debug!("asking the client for input ({name})");
                        }
                        next = self.asks.try_recv().ok();
                    }
                    if !requests.is_empty() {
                        return Step::Asked(requests);
                    }
                }
                () = gone.cancelled(), if !cancelled => {
                    cancelled = true;
                    self.cancel.cancel();
                }
            }
        }
    }

    fn start<T: Send + serde::Serialize + 'static>(
        key: CallKey,
        caps: ClientCapabilities,
        up: Upstream<T>,
    ) -> Self {
        let (tx, rx) = oneshot::channel::<Finished>();
        let call = up.call;
        tokio::spawn(async move {
            let r: Result<T, RequestError> = call.await;
            let _ = tx.send(Box::new(r));
        });
        // Drained all the time, parked or not; what the client cannot take yet waits
        // in a bounded backlog.
        let (backlog, progress) = mpsc::channel(PROGRESS_BACKLOG);
        let mut upstream = up.progress;
        tokio::spawn(async move {
            while let Some(p) = upstream.recv().await {
                let _ = backlog.try_send(p);
            }
        });
        Self {
            key,
            result: rx,
            progress,
            asks: up.asks,
            waiting: BTreeMap::new(),
            next_key: 0,
            caps,
            encode: encode::<T>,
            cancel: up.cancel,
            _keep: up.keep,
        }
    }

    /// Adds `f` to `requests` under a fresh key, kept to be answered by the retry;
    /// returns the key.
    fn ask(&mut self, f: Forwarded, requests: &mut InputRequests) -> String {
        self.next_key += 1;
        let (kind, request) = match &f {
            Forwarded::Elicit(params, _) => (
                "elicitation",
                InputRequest::Elicitation(ElicitRequest::new(params.clone())),
            ),
            Forwarded::Sample(params, _) => (
                "sampling",
                InputRequest::CreateMessage(CreateMessageRequest::new(params.clone())),
            ),
            Forwarded::Roots(_) => (
                "roots",
                InputRequest::ListRoots(ListRootsRequest::default()),
            ),
        };
        let key = format!("{kind}-{}", self.next_key);
        requests.insert(key.clone(), request);
        self.waiting.insert(key.clone(), f);
        key
    }

    /// Hands each waiting question its answer from `responses` (one missing or not of
    /// the right shape: declined, or an error for sampling and roots).
    fn answer(&mut self, mut responses: InputResponses) {
        for (key, f) in std::mem::take(&mut self.waiting) {
            let got = responses.remove(&key);
            let refused = || {
                ErrorData::invalid_params(
                    format!("the client's answer to `{key}` was missing or not a result"),
                    None,
                )
            };
            match f {
                Forwarded::Elicit(_, tx) => {
                    let r = got
                        .and_then(|v| serde_json::from_value(v).ok())
                        .unwrap_or_else(decline_elicitation);
                    let _ = tx.send(r);
                }
                Forwarded::Sample(_, tx) => {
                    let r = match got {
                        Some(v) => match serde_json::from_value::<CreateMessageResult>(v.clone()) {
                            Ok(r) => Ok(r),
                            Err(_) => Err(serde_json::from_value::<ErrorData>(v)
                                .unwrap_or_else(|_| refused())),
                        },
                        None => Err(refused()),
                    };
                    let _ = tx.send(r);
                }
                Forwarded::Roots(tx) => {
                    let r = got
                        .and_then(|v| serde_json::from_value::<ListRootsResult>(v).ok())
                        .map(|r| r.roots)
                        .ok_or_else(refused);
                    let _ = tx.send(r);
                }
            }
        }
    }

    /// Answers every question waiting as if the client had not answered.
    fn refuse_waiting(&mut self) {
        self.answer(InputResponses::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked(owner: &str, call: &str) -> (Parked, CancellationToken) {
        let (_t, asks) = mpsc::unbounded_channel();
        let (_p, progress) = mpsc::channel(1);
        let (_r, result) = oneshot::channel();
        let cancel = CancellationToken::new();
        let p = Parked {
            key: CallKey {
                owner: owner.into(),
                call: call.into(),
            },
            result,
            progress,
            asks,
            waiting: BTreeMap::new(),
            next_key: 0,
            caps: ClientCapabilities::default(),
            encode: encode::<()>,
            cancel: cancel.clone(),
            _keep: Box::new(()),
        };
        (p, cancel)
    }

    #[tokio::test]
    async fn a_state_is_taken_back_only_by_its_own_call_and_owner_once() {
        let table = InputTable::new(Duration::from_secs(60));
        let (p, _) = parked("alice", "tools/call a__b");
        let state = table.park(Box::new(p)).ok().unwrap();
        assert_eq!(state.len(), 32);
        let key = |owner: &str, call: &str| CallKey {
            owner: owner.into(),
            call: call.into(),
        };
        let e = table.take(
            "0123456789abcdef0123456789abcdef",
            &key("alice", "tools/call a__b"),
        );
        assert!(e.err().unwrap().message.contains("names no call waiting"));
        let e = table.take(&state, &key("bob", "tools/call a__b"));
        assert!(e.err().unwrap().message.contains("belongs to another call"));
        let e = table.take(&state, &key("alice", "tools/call a__c"));
        assert!(e.err().unwrap().message.contains("belongs to another call"));
        assert_eq!(table.len(), 1, "a refused retry leaves the call parked");
        assert!(table.take(&state, &key("alice", "tools/call a__b")).is_ok());
        assert!(
            table
                .take(&state, &key("alice", "tools/call a__b"))
                .is_err()
        );
        assert!(table.is_empty());
    }

    #[tokio::test]
    async fn a_parked_call_that_is_not_retried_in_time_is_cancelled() {
        let table = InputTable::new(Duration::from_millis(300));
        let (p, cancel) = parked("", "tools/call a__b");
        let _state = table.park(Box::new(p)).ok().unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!cancel.is_cancelled());
        tokio::time::timeout(Duration::from_secs(10), cancel.cancelled())
            .await
            .expect("cancelled when the wait ends");
        assert!(
            cancel.is_cancelled(),
            "the upstream request ends with the wait"
        );
        assert!(table.is_empty());
    }

    #[tokio::test]
    async fn a_flood_of_progress_while_parked_keeps_a_bounded_backlog() {
        let (ptx, progress) = mpsc::unbounded_channel();
        let (_atx, asks) = mpsc::unbounded_channel();
        let up: Upstream<()> = Upstream {
            call: Box::pin(std::future::pending()),
            progress,
            asks,
            cancel: CancellationToken::new(),
            keep: Box::new(()),
        };
        let mut p = Parked::start(
            CallKey {
                owner: String::new(),
                call: "tools/call x".into(),
            },
            ClientCapabilities::default(),
            up,
        );
        for i in 0..100_000 {
            ptx.send(Progress {
                progress: f64::from(i),
                total: None,
                message: None,
            })
            .unwrap();
        }
        // The forwarder drains the unbounded channel into the backlog, dropping the rest.
        tokio::time::timeout(Duration::from_secs(10), async {
            while !ptx.is_closed() && p.progress.len() < PROGRESS_BACKLOG {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(p.progress.len(), PROGRESS_BACKLOG);
        let first = p.progress.recv().await.unwrap();
        assert_eq!(first.progress, 0.0, "the oldest are kept, in order");
    }

    #[tokio::test]
    async fn a_full_table_gives_the_call_back() {
        let table = InputTable::new(Duration::from_secs(60));
        for i in 0..MAX_PARKED {
            let (p, _) = parked(&format!("user{}", i % 8), "tools/call x");
            assert!(table.park(Box::new(p)).is_ok());
        }
        let (p, cancel) = parked("another", "tools/call x");
        let back = table.park(Box::new(p));
        assert!(
            matches!(back, Err((_, Full::Table))),
            "the 257th is refused"
        );
        assert!(
            !cancel.is_cancelled(),
            "and given back alive, to be answered as declined"
        );
    }

    #[tokio::test]
    async fn one_owner_at_their_limit_leaves_the_others_their_places() {
        let table = InputTable::new(Duration::from_secs(60));
        for _ in 0..MAX_PARKED_PER_USER {
            let (p, _) = parked("alice", "tools/call x");
            assert!(table.park(Box::new(p)).is_ok());
        }
        assert_eq!(table.parked_of("alice"), MAX_PARKED_PER_USER);
        let (p, _) = parked("alice", "tools/call x");
        let back = table.park(Box::new(p));
        assert!(
            matches!(back, Err((_, Full::Owner(n))) if n == MAX_PARKED_PER_USER),
            "alice's next call is refused as over her own limit"
        );
        let (p, _) = parked("bob", "tools/call x");
        assert!(table.park(Box::new(p)).is_ok(), "bob's still parks");
        // Through `park_asking`: alice's call ends, with an error saying why.
        let (p, cancel) = parked("alice", "tools/call x");
        match table.park_asking(Box::new(p), InputRequests::new()) {
            Parking::Refused(e) => {
                let m = e.message;
                assert!(m.contains("32 calls of yours"), "{m}");
                assert!(m.contains("your own limit"), "{m}");
                assert!(m.contains("answer or cancel"), "{m}");
                assert!(m.contains("60 s"), "{m}");
            }
            _ => panic!("refused"),
        }
        assert!(cancel.is_cancelled(), "its upstream request ends");
        // A call refused elsewhere (a team's store) is given back and ended.
        let (p, cancel) = parked("bob", "tools/call y");
        let state = table.park(Box::new(p)).ok().unwrap();
        assert!(table.refuse(&state));
        assert!(cancel.is_cancelled());
        assert!(!table.holds(&state));
        assert!(!table.refuse(&state));
    }

    #[test]
    fn answers_reach_their_questions_and_bad_ones_are_refused() {
        let (mut p, cancel) = parked("", "tools/call x");
        let (etx, mut erx) = oneshot::channel();
        let (stx, mut srx) = oneshot::channel();
        let (rtx, mut rrx) = oneshot::channel();
        let mut requests = InputRequests::new();
        let params: rmcp::model::ElicitRequestParams = serde_json::from_value(serde_json::json!({
            "mode": "form", "message": "name?",
            "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}
        }))
        .unwrap();
        let e = p.ask(Forwarded::Elicit(params, etx), &mut requests);
        let sample: rmcp::model::CreateMessageRequestParams =
            serde_json::from_value(serde_json::json!({"messages": [], "maxTokens": 5})).unwrap();
        let s = p.ask(Forwarded::Sample(sample, stx), &mut requests);
        let r = p.ask(Forwarded::Roots(rtx), &mut requests);
        assert_eq!(
            (e.as_str(), s.as_str(), r.as_str()),
            ("elicitation-1", "sampling-2", "roots-3")
        );
        let wire = serde_json::to_value(&requests).unwrap();
        assert_eq!(wire["elicitation-1"]["method"], "elicitation/create");
        assert_eq!(wire["sampling-2"]["method"], "sampling/createMessage");
        assert_eq!(wire["roots-3"]["method"], "roots/list");
        let mut responses = InputResponses::new();
        responses.insert(
            e,
            serde_json::json!({"action": "accept", "content": {"n": "Ada"}}),
        );
        responses.insert(s, serde_json::json!({"not": "a result"}));
        p.answer(responses);
        let got = erx.try_recv().unwrap();
        assert_eq!(serde_json::to_value(&got).unwrap()["content"]["n"], "Ada");
        assert!(
            srx.try_recv().unwrap().is_err(),
            "a malformed sampling answer"
        );
        assert!(rrx.try_recv().unwrap().is_err(), "a missing roots answer");
        assert!(p.waiting.is_empty());
        drop(p);
        assert!(
            cancel.is_cancelled(),
            "a dropped call cancels its upstream request"
        );
    }
}
