//! The one way to build the model behind a chat: every front end (the CLI's `chat` and
//! `run`, the web app's chat, the workflow `command` node) turns a [`ModelConfig`] into
//! an `Arc<dyn ModelClient>` here, so `provider: "openai"` works the same everywhere.
//!
//! Precedence, the same in every front end:
//! - provider: `--provider` (CLI `chat` only), else `provider` in the settings, else
//!   Gemini ([`Provider::choose`]);
//! - model: `--model` (or a workflow node's `model`), else `model` in the settings, else
//!   [`DEFAULT_MODEL`] for Gemini; the OpenAI-compatible provider has no default and
//!   needs one ([`Provider::model`]);
//! - base URL: `--base-url` ([`ModelConfig::set_base_url`]), else `GEMINI_BASE_URL` /
//!   `OPENAI_BASE_URL`, else the provider's public API;
//! - key: `GEMINI_API_KEY` (required) / `OPENAI_API_KEY` (optional: local servers need
//!   none). Keys and base URLs never come from a settings file, so a project's settings
//!   cannot send a key to another server.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::client::ModelClient;
use crate::error::{ApiKind, ModelError};
use crate::gemini::{DEFAULT_MODEL, GeminiClient, GeminiOptions};
use crate::openai::{OpenAiClient, OpenAiOptions};

/// Which model API a chat talks to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Provider {
    /// The Gemini REST API (`GEMINI_API_KEY`).
    #[default]
    Gemini,
    /// An OpenAI-compatible chat-completions endpoint (llama.cpp, Ollama, vLLM…;
    /// `OPENAI_API_KEY` optional).
    OpenAi,
}

impl Provider {
    /// How `provider` is written in the settings and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gemini => "gemini",
            Self::OpenAi => "openai",
        }
    }

    /// The kind of API, for error wording.
    pub fn api(self) -> ApiKind {
        match self {
            Self::Gemini => ApiKind::Gemini,
            Self::OpenAi => ApiKind::OpenAi,
        }
    }

    /// The provider in force: the flag when given, else `provider` from the settings,
    /// else Gemini.
    ///
    /// # Errors
    /// [`ModelConfigError::UnknownProvider`] for a settings value that is neither
    /// `gemini` nor `openai`.
    pub fn choose(flag: Option<Provider>, setting: Option<&str>) -> Result<Self, ModelConfigError> {
        match (flag, setting) {
            (Some(p), _) => Ok(p),
            (None, Some(s)) => s.parse(),
            (None, None) => Ok(Self::default()),
        }
    }

    /// The model to use: the first of `chosen` that is set and not blank (flag or node,
    /// then settings), else the provider's default.
    ///
    /// # Errors
    /// [`ModelConfigError::NoModel`] for the OpenAI-compatible provider when none is set:
    /// it has no default model.
    pub fn model<I>(self, chosen: I) -> Result<String, ModelConfigError>
    where
        I: IntoIterator<Item = Option<String>>,
    {
        if let Some(m) = chosen.into_iter().flatten().find(|m| !m.trim().is_empty()) {
            return Ok(m);
        }
        match self {
            Self::Gemini => Ok(DEFAULT_MODEL.to_owned()),
            Self::OpenAi => Err(ModelConfigError::NoModel),
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Provider {
    type Err = ModelConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gemini" => Ok(Self::Gemini),
            "openai" => Ok(Self::OpenAi),
            _ => Err(ModelConfigError::UnknownProvider(s.to_owned())),
        }
    }
}

/// What went wrong choosing or building the model client. Every message names the
/// provider it is about.
#[derive(Debug, thiserror::Error)]
pub enum ModelConfigError {
    /// `provider` is not a known one.
    #[error("unknown model provider `{0}` (`provider` in the settings): use `gemini` or `openai`")]
    UnknownProvider(String),
    /// The OpenAI-compatible provider without a model.
    #[error(
        "the OpenAI-compatible provider (`provider: openai`) needs a model: set `model` in the settings to the name the server serves (e.g. `llama3.2` for Ollama)"
    )]
    NoModel,
    /// The client could not be built (no Gemini key, a bad base URL, no HTTP client).
    #[error("{source}")]
    Client {
        /// The provider whose client failed.
        provider: Provider,
        #[source]
        source: ModelError,
    },
}

impl ModelConfigError {
    /// What to do about it, in terms of the environment (front ends with flags add
    /// their own).
    pub fn hint(&self) -> &'static str {
        match self {
            Self::UnknownProvider(_) => "set `provider` to `gemini` or `openai`",
            Self::NoModel => "set `model` in the settings",
            Self::Client {
                provider: Provider::Gemini,
                ..
            } => {
                "set GEMINI_API_KEY (create a key at https://aistudio.google.com/apikey); GEMINI_BASE_URL points at a proxy or a local fake"
            }
            Self::Client {
                provider: Provider::OpenAi,
                ..
            } => {
                "OPENAI_BASE_URL is the server's API base up to and including /v1, e.g. http://127.0.0.1:8080/v1; OPENAI_API_KEY is optional"
            }
        }
    }
}

/// How to build the model client: the provider, and the options of each provider as
/// the environment (and flags) give them. Both are kept so that a front end whose
/// settings can change (the web app) can switch provider without restarting.
#[derive(Debug, Clone, Default)]
pub struct ModelConfig {
    /// The provider [`build`](Self::build) uses.
    pub provider: Provider,
    /// The Gemini client's options.
    pub gemini: GeminiOptions,
    /// The OpenAI-compatible client's options.
    pub openai: OpenAiOptions,
}

impl ModelConfig {
    /// Gemini, with both providers' keys and base URLs from the environment
    /// (`GEMINI_API_KEY`, `GEMINI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`).
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`from_env`](Self::from_env), reading variables through `get`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Self {
        Self {
            provider: Provider::Gemini,
            gemini: GeminiOptions::from_vars(&get),
            openai: OpenAiOptions::from_vars(&get),
        }
    }

    /// Gemini with these options.
    pub fn gemini(opts: GeminiOptions) -> Self {
        Self {
            provider: Provider::Gemini,
            gemini: opts,
            openai: OpenAiOptions::default(),
        }
    }

    /// The OpenAI-compatible provider with these options.
    pub fn openai(opts: OpenAiOptions) -> Self {
        Self {
            provider: Provider::OpenAi,
            gemini: GeminiOptions::default(),
            openai: opts,
        }
    }

    /// The same options with another provider.
    #[must_use]
    pub fn with_provider(mut self, provider: Provider) -> Self {
        self.provider = provider;
        self
    }

    /// The base URL for the current provider (a `--base-url` flag), in place of the
    /// environment's.
    pub fn set_base_url(&mut self, url: &str) {
        match self.provider {
            Provider::Gemini => url.clone_into(&mut self.gemini.base_url),
            Provider::OpenAi => url.clone_into(&mut self.openai.base_url),
        }
    }

    /// Both providers send through `http` (the URL guard's client) unless one was
    /// already given.
    pub fn default_http(&mut self, http: &reqwest::Client) {
        if self.gemini.http.is_none() {
            self.gemini.http = Some(http.clone());
        }
        if self.openai.http.is_none() {
            self.openai.http = Some(http.clone());
        }
    }

    /// The model client for [`provider`](Self::provider).
    ///
    /// # Errors
    /// [`ModelConfigError::Client`], naming the provider: no Gemini key, a base URL that
    /// is not `http(s)`, or an HTTP client that cannot be built.
    pub fn build(&self) -> Result<Arc<dyn ModelClient>, ModelConfigError> {
        let provider = self.provider;
        let wrap = |source| ModelConfigError::Client { provider, source };
        Ok(match provider {
            Provider::Gemini => Arc::new(GeminiClient::new(self.gemini.clone()).map_err(wrap)?),
            Provider::OpenAi => Arc::new(OpenAiClient::new(self.openai.clone()).map_err(wrap)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_flag_wins_over_the_settings_and_gemini_is_the_default() {
        assert_eq!(Provider::choose(None, None).unwrap(), Provider::Gemini);
        assert_eq!(
            Provider::choose(None, Some("openai")).unwrap(),
            Provider::OpenAi
        );
        assert_eq!(
            Provider::choose(None, Some(" OpenAI ")).unwrap(),
            Provider::OpenAi
        );
        assert_eq!(
            Provider::choose(Some(Provider::Gemini), Some("openai")).unwrap(),
            Provider::Gemini
        );
        let err = Provider::choose(None, Some("anthropic")).unwrap_err();
        assert!(err.to_string().contains("`anthropic`"), "{err}");
        assert!(err.to_string().contains("`openai`"), "{err}");
    }

    #[test]
    fn the_model_is_the_first_one_set_and_openai_has_no_default() {
        let p = Provider::Gemini;
        assert_eq!(p.model([None, None]).unwrap(), DEFAULT_MODEL);
        assert_eq!(
            p.model([Some(" ".into()), Some("settings".into())])
                .unwrap(),
            "settings"
        );
        assert_eq!(
            p.model([Some("flag".into()), Some("settings".into())])
                .unwrap(),
            "flag"
        );
        let err = Provider::OpenAi.model([None, None]).unwrap_err();
        assert!(matches!(err, ModelConfigError::NoModel), "{err:?}");
        assert!(err.to_string().contains("OpenAI-compatible"), "{err}");
    }

    #[test]
    fn the_environment_fills_both_providers_and_build_picks_one() {
        let cfg = ModelConfig::from_vars(vars(&[
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
            ("OPENAI_API_KEY", "sk-local"),
        ]));
        // Gemini without a key: the error names Gemini and the variable.
        let err = cfg.build().map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("Gemini"), "{err}");
        assert!(err.hint().contains("GEMINI_API_KEY"), "{}", err.hint());
        // The same configuration with `provider: openai` builds: no key needed.
        let cfg = cfg.with_provider(Provider::OpenAi);
        assert_eq!(cfg.openai.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(cfg.openai.api_key.as_deref(), Some("sk-local"));
        assert!(cfg.build().is_ok());
    }

    #[test]
    fn an_openai_misconfiguration_names_openai_not_gemini() {
        let mut cfg = ModelConfig::openai(OpenAiOptions::default());
        cfg.set_base_url("ftp://127.0.0.1/v1");
        let err = cfg.build().map(|_| ()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("OpenAI-compatible"), "{text}");
        assert!(!text.contains("Gemini"), "{text}");
        assert!(err.hint().contains("OPENAI_BASE_URL"), "{}", err.hint());
        // The client's own error says the same (it was "invalid Gemini base URL").
        let direct = OpenAiClient::new(OpenAiOptions {
            base_url: "not a url".into(),
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert!(!direct.contains("Gemini"), "{direct}");
        assert!(direct.contains("OpenAI-compatible"), "{direct}");
    }
}
