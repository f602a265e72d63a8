//! The model API key a user's chats run with, and how the team reaches the model:
//! - `GET /api/model-key`: `{provider, model, own: {set, provider}, team: {set,
//!   provider}, available}` — whether keys are set, never a key;
//! - `PUT /api/model-key` `{key, provider?}` / `DELETE /api/model-key`: the caller's own
//!   key (it wins over the team key);
//! - `PUT /api/admin/model-key` / `DELETE /api/admin/model-key`: the team key, admins
//!   only (the route's `Admin` access, and the store checks the flag again).
//!
//! [`TeamModel`] (the provider, its base URL and the model name) is fixed by the operator
//! at start; keys come only from the store. [`model_client`] builds the client a turn
//! uses from the two.
//!
//! Must not: send a key back in any answer or log line, or take a key from the
//! environment or a request for anyone but the caller (or, for admins, the team).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, State};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_model::{ModelClient, ModelConfig, Provider};
use switchboard_store::{Secret, UserStore};

use super::session::SignedIn;
use super::state::{TeamState, store_error};
use crate::access::ApiJson;
use crate::error::{ApiError, ApiResult};

/// How the team reaches the model: the provider and its base URL (the operator's
/// environment, `GEMINI_BASE_URL` / `OPENAI_BASE_URL`, through [`ModelConfig`]) and the
/// model name. Keys in `config` are ignored: a chat runs with the user's key or the team
/// key from the store.
#[derive(Debug, Clone)]
pub struct TeamModel {
    /// Provider and base URLs.
    pub config: ModelConfig,
    /// The model every chat uses.
    pub model: String,
}

impl TeamModel {
    /// The provider from `config`, its default model unless `model` names one.
    ///
    /// # Errors
    /// The OpenAI-compatible provider without a model.
    pub fn new(mut config: ModelConfig, model: Option<String>) -> Result<Self, String> {
        config.gemini.api_key.clear();
        config.openai.api_key = None;
        let model = config
            .provider
            .model([model])
            .map_err(|e| format!("{e}: pass --model"))?;
        Ok(Self { config, model })
    }

    fn provider(&self) -> &'static str {
        self.config.provider.as_str()
    }
}

/// Longest key accepted.
const MAX_KEY_LEN: usize = 512;

/// A model key as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKey {
    key: String,
    #[serde(default)]
    provider: Option<String>,
}

/// A checked key for the team's provider.
struct NewKey {
    provider: &'static str,
    key: Secret,
}

fn check_key(state: &TeamState, raw: RawKey) -> ApiResult<NewKey> {
    let team = state.model().ok_or_else(no_model)?;
    let provider = team.provider();
    if let Some(p) = raw.provider.as_deref()
        && p.trim().to_ascii_lowercase() != provider
    {
        return Err(ApiError::bad_request(format!(
            "this team's chats use the `{provider}` provider: send a key for it"
        )));
    }
    let key = raw.key.trim();
    if key.is_empty()
        || key.len() > MAX_KEY_LEN
        || key.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(ApiError::bad_request(format!(
            "`key` must be 1 to {MAX_KEY_LEN} characters without spaces"
        )));
    }
    Ok(NewKey {
        provider,
        key: Secret::new(key),
    })
}

fn no_model() -> ApiError {
    ApiError::unavailable(
        "this team instance has no model configured: the operator starts it with a provider (GEMINI_BASE_URL / --model)",
    )
}

fn us(state: &TeamState, signed: &SignedIn) -> UserStore {
    state.store().for_user(&signed.user.id)
}

/// `GET /api/model-key`.
pub async fn status(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
) -> ApiResult<Json<Value>> {
    let us = us(&state, &signed);
    let own = us.model_key().await.map_err(store_error)?;
    let team = us.team_model_key_info().await.map_err(store_error)?;
    let model = state.model();
    let provider = model.map(TeamModel::provider);
    let usable = |p: Option<&str>| p.is_some() && p == provider;
    let available = usable(own.as_ref().map(|k| k.provider.as_str()))
        || usable(team.as_ref().map(|t| t.provider.as_str()));
    Ok(Json(json!({
        "provider": provider,
        "model": model.map(|m| m.model.clone()),
        "own": {"set": own.is_some(), "provider": own.map(|k| k.provider)},
        "team": {"set": team.is_some(), "provider": team.map(|t| t.provider)},
        "available": available,
    })))
}

/// `PUT /api/model-key`.
pub async fn put_own(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    ApiJson(raw): ApiJson<RawKey>,
) -> ApiResult<Json<Value>> {
    let k = check_key(&state, raw)?;
    us(&state, &signed)
        .put_model_key(k.provider, &k.key)
        .await
        .map_err(store_error)?;
    Ok(Json(json!({"ok": true, "provider": k.provider})))
}

/// `DELETE /api/model-key`.
pub async fn delete_own(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
) -> ApiResult<Json<Value>> {
    let removed = us(&state, &signed)
        .remove_model_key()
        .await
        .map_err(store_error)?;
    Ok(Json(json!({"ok": true, "removed": removed})))
}

/// `PUT /api/admin/model-key`.
pub async fn put_team(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    ApiJson(raw): ApiJson<RawKey>,
) -> ApiResult<Json<Value>> {
    let k = check_key(&state, raw)?;
    let saved = us(&state, &signed)
        .put_team_model_key(k.provider, &k.key)
        .await
        .map_err(store_error)?;
    if !saved {
        return Err(ApiError::forbidden("only an admin sets the team key"));
    }
    Ok(Json(json!({"ok": true, "provider": k.provider})))
}

/// `DELETE /api/admin/model-key`.
pub async fn delete_team(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
) -> ApiResult<Json<Value>> {
    let removed = us(&state, &signed)
        .remove_team_model_key()
        .await
        .map_err(store_error)?;
    Ok(Json(json!({"ok": true, "removed": removed})))
}

/// The model client and model name a turn of `us`'s runs with: the user's key, else the
/// team key, for the team's provider.
pub(crate) async fn model_client(
    state: &TeamState,
    us: &UserStore,
) -> ApiResult<(Arc<dyn ModelClient>, String)> {
    let (cfg, model) = model_config(state, us).await?;
    let client = cfg
        .build()
        .map_err(|e| ApiError::unavailable(format!("the model client: {e}")))?;
    Ok((client, model))
}

/// The model configuration (the team's provider and base URL, with the user's key, else
/// the team key; HTTP through the URL guard) and the model name `us` runs with.
pub(crate) async fn model_config(
    state: &TeamState,
    us: &UserStore,
) -> ApiResult<(ModelConfig, String)> {
    let team = state.model().ok_or_else(no_model)?;
    let Some((key, _source)) = us.chat_model_key().await.map_err(store_error)? else {
        return Err(ApiError::unavailable(
            "no model key: save your own key in the settings, or ask an admin to set the team key",
        ));
    };
    if key.provider != team.provider() {
        return Err(ApiError::unavailable(format!(
            "the saved key is for `{}` but this team's chats use `{}`: save a key for `{}`",
            key.provider,
            team.provider(),
            team.provider()
        )));
    }
    let mut cfg = team.config.clone();
    match cfg.provider {
        Provider::Gemini => key.key.expose().clone_into(&mut cfg.gemini.api_key),
        Provider::OpenAi => cfg.openai.api_key = Some(key.key.expose().to_owned()),
    }
    cfg.default_http(state.guard().inner());
    Ok((cfg, team.model.clone()))
}
