//! What the store knows: each server's [`TokenStatus`], the [`AuthSummary`] list for
//! `mcp auth`, and logout.

use std::collections::BTreeSet;

use switchboard_mcp::TokenStatus;

use crate::error::AuthError;
use crate::store::{StoredLogin, now_ms};

use super::{AuthManager, Grant, ServerAuth};

/// One server's authorization state, for `mcp auth`.
#[derive(Debug, Clone)]
pub struct AuthSummary {
    pub server: String,
    pub url: String,
    pub grant: Option<Grant>,
    /// `authenticated`, `expired`, `not logged in`, `off`.
    pub state: &'static str,
    pub expires_at: Option<u64>,
    pub scope: Option<String>,
    pub has_refresh_token: bool,
}

impl AuthManager {
    /// Removes `server`'s saved login; whether there was one.
    pub async fn logout(&self, server: &str) -> Result<bool, AuthError> {
        self.cache_drop(server);
        self.inner.store.remove(server).await
    }

    /// The authorization state of `server` at `url` as far as the store knows.
    pub fn status(&self, server: &str, url: &str) -> Option<TokenStatus> {
        let sa = self.server(server, url);
        if !sa.enabled() {
            return None;
        }
        let now = now_ms();
        match self.saved(server, url) {
            Ok(Some(l)) if l.is_expired(now) => Some(TokenStatus::Expired),
            Ok(Some(_)) => Some(TokenStatus::Authenticated),
            Ok(None) => match sa.grant() {
                Ok(Grant::Google) => Some(if self.adc().is_ok() {
                    TokenStatus::Authenticated
                } else {
                    TokenStatus::NeedsLogin
                }),
                _ => None,
            },
            Err(_) => None,
        }
    }

    /// Every configured HTTP server and every saved login, with its state.
    pub fn summaries(&self) -> Result<Vec<AuthSummary>, AuthError> {
        let saved = self.inner.store.load_all()?;
        let now = now_ms();
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for sa in self.servers() {
            seen.insert(sa.name.clone());
            let login = saved
                .iter()
                .find(|l| l.server_name == sa.name && l.mcp_server_url == sa.url);
            out.push(summary(&sa, login, now));
        }
        for l in &saved {
            if seen.insert(l.server_name.clone()) {
                let sa = self
                    .configured(&l.server_name)
                    .unwrap_or_else(|| ServerAuth::adhoc(&l.server_name, &l.mcp_server_url));
                out.push(summary(&sa, Some(l), now));
            }
        }
        Ok(out)
    }
}

fn summary(sa: &ServerAuth, login: Option<&StoredLogin>, now: u64) -> AuthSummary {
    let grant = sa.grant().ok();
    let state = if !sa.enabled() {
        "off"
    } else {
        match login {
            Some(l) if l.is_expired(now) && l.token.refresh_token.is_some() => {
                "expired (will refresh)"
            }
            Some(l) if l.is_expired(now) => "expired",
            Some(_) => "authenticated",
            None => "not logged in",
        }
    };
    AuthSummary {
        server: sa.name.clone(),
        url: sa.url.clone(),
        grant,
        state,
        expires_at: login.and_then(|l| l.token.expires_at),
        scope: login.and_then(|l| l.token.scope.clone()),
        has_refresh_token: login.is_some_and(|l| l.token.refresh_token.is_some()),
    }
}
