//! Step-up authorization: a 403 `insufficient_scope` re-authorizes with the union of
//! the granted and the challenged scope, at most [`MAX_STEP_UPS`] times per server
//! after its login.

use std::collections::BTreeSet;

use crate::challenge::BearerChallenge;
use crate::error::AuthError;

use super::{AuthManager, MAX_AUTHORIZATIONS, MAX_STEP_UPS, lock};

fn union_scope(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for s in a.into_iter().chain(b).flat_map(str::split_whitespace) {
        if seen.insert(s.to_string()) {
            out.push(s.to_string());
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

impl AuthManager {
    /// The server answered 403 `insufficient_scope`: re-authorize with the wider
    /// scope (at most [`MAX_STEP_UPS`] times per server after its login, which makes
    /// [`MAX_AUTHORIZATIONS`] with it).
    pub async fn step_up(
        &self,
        server: &str,
        url: &str,
        www_authenticate: &str,
    ) -> Result<Option<String>, AuthError> {
        let sa = self.server(server, url);
        if !sa.enabled() {
            return Ok(None);
        }
        let challenge = BearerChallenge::parse(www_authenticate);
        let attempts = {
            let mut m = lock(&self.inner.step_ups);
            let n = m.entry(server.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let current = self.saved(server, url)?.and_then(|l| l.token.scope);
        let wider = union_scope(current.as_deref(), challenge.scope.as_deref());
        if attempts > MAX_STEP_UPS {
            return Err(AuthError::StepUpExhausted {
                server: server.into(),
                scope: wider.unwrap_or_else(|| "unknown".into()),
                attempts: MAX_AUTHORIZATIONS,
            });
        }
        let grant = sa.grant()?;
        let _one = self.inner.renewing.lock().await;
        let login = if grant.is_machine() {
            self.machine_login(&sa, None, wider).await?
        } else {
            let ui = lock(&self.inner.login_ui).clone();
            let Some(ui) = ui else {
                return Err(AuthError::Config(format!(
                    "`{server}` needs a wider scope ({}): run `switchboard mcp login {server}{}`",
                    wider.as_deref().unwrap_or("unknown"),
                    wider
                        .as_deref()
                        .map(|w| format!(" --scope \"{w}\""))
                        .unwrap_or_default()
                )));
            };
            let mut with_scope = ui.clone();
            with_scope.scopes = wider.as_ref().map(|w| vec![w.clone()]);
            self.authorize(&sa, wider, None, &with_scope).await?
        };
        self.inner.store.put(login.clone()).await?;
        self.cache_put(&login);
        Ok(Some(login.token.access_token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes() {
        assert_eq!(
            union_scope(Some("a b"), Some("b c")).as_deref(),
            Some("a b c")
        );
        assert_eq!(union_scope(None, None), None);
    }
}
