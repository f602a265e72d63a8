//! The loopback listener that receives the authorization response (RFC 8252 §7.3):
//! bound to the redirect URI's port on the loopback interface before the browser is
//! opened, answering only the redirect path, with a time limit.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

use crate::error::AuthError;

/// Switchboard's default redirect URI (Gemini CLI's).
pub const DEFAULT_REDIRECT_URI: &str = "http://localhost:7777/oauth/callback";

/// What arrived at the redirect URI.
#[derive(Clone, Default)]
pub struct CallbackParams {
    pub code: Option<String>,
    pub state: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
    pub iss: Option<String>,
}

impl std::fmt::Debug for CallbackParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackParams")
            .field("code", &self.code.as_ref().map(|_| "<redacted>"))
            .field("error", &self.error)
            .field("iss", &self.iss)
            .finish_non_exhaustive()
    }
}

/// A bound callback listener.
#[derive(Debug)]
pub struct CallbackListener {
    listeners: Vec<TcpListener>,
    path: String,
    redirect_uri: String,
}

impl CallbackListener {
    /// Binds the loopback address(es) of `redirect_uri` (`http://localhost:P/path`,
    /// `127.0.0.1` or `[::1]`; port 0 picks a free port).
    pub async fn bind(redirect_uri: &str, server: &str) -> Result<Self, AuthError> {
        let url = Url::parse(redirect_uri).map_err(|e| {
            AuthError::Config(format!(
                "`mcpServers.{server}.oauth.redirectUri` `{redirect_uri}` is not a URL: {e}"
            ))
        })?;
        if url.scheme() != "http" {
            return Err(AuthError::Config(format!(
                "`mcpServers.{server}.oauth.redirectUri` must be an http://localhost URL (a loopback redirect, RFC 8252), not `{redirect_uri}`"
            )));
        }
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let addrs: Vec<IpAddr> = match host.as_str() {
            "localhost" => vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ],
            "127.0.0.1" => vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
            "[::1]" | "::1" => vec![IpAddr::V6(Ipv6Addr::LOCALHOST)],
            other => {
                return Err(AuthError::Config(format!(
                    "`mcpServers.{server}.oauth.redirectUri` must point at this machine (localhost, 127.0.0.1 or [::1]), not `{other}`"
                )));
            }
        };
        let mut port = url.port_or_known_default().unwrap_or(80);
        let mut listeners = Vec::new();
        for (i, ip) in addrs.iter().enumerate() {
            let addr = SocketAddr::new(*ip, port);
            match TcpListener::bind(addr).await {
                Ok(l) => {
                    if port == 0 {
                        port = l.local_addr().map(|a| a.port()).unwrap_or(0);
                    }
                    listeners.push(l);
                }
                // The first address must work; IPv6 is a bonus.
                Err(e) if i == 0 => {
                    return Err(AuthError::Listen {
                        server: server.into(),
                        addr: addr.to_string(),
                        detail: e.to_string(),
                    });
                }
                Err(e) => tracing::debug!("not listening on {addr} too: {e}"),
            }
        }
        let mut actual = url.clone();
        let _ = actual.set_port(Some(port));
        let path = url.path().to_string();
        Ok(Self {
            listeners,
            path,
            redirect_uri: actual.to_string(),
        })
    }

    /// The redirect URI to send (with the port actually bound).
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits for the authorization response, at most `limit`. Requests to other paths
    /// get a 404 and are ignored.
    pub async fn wait(self, limit: Duration) -> Result<CallbackParams, AuthError> {
        let redirect_uri = self.redirect_uri.clone();
        let fut = async move {
            loop {
                let accepted = match self.listeners.as_slice() {
                    [one] => one.accept().await,
                    [a, b, ..] => tokio::select! {
                        r = a.accept() => r,
                        r = b.accept() => r,
                    },
                    [] => return None,
                };
                let Ok((stream, _)) = accepted else {
                    continue;
                };
                if let Some(params) = handle(stream, &self.path).await {
                    return Some(params);
                }
            }
        };
        match tokio::time::timeout(limit, fut).await {
            Ok(Some(p)) => Ok(p),
            Ok(None) | Err(_) => Err(AuthError::CallbackTimeout {
                redirect_uri,
                after: limit,
            }),
        }
    }
}

const PAGE_OK: &str = "<!doctype html><meta charset=utf-8><title>Switchboard</title><p>Switchboard received the authorization. You can close this window.</p>";
const PAGE_ERROR: &str = "<!doctype html><meta charset=utf-8><title>Switchboard</title><p>The authorization failed; see the terminal for details. You can close this window.</p>";

/// Reads one request; the callback's parameters when it is for `path`.
async fn handle(mut stream: TcpStream, path: &str) -> Option<CallbackParams> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    let read = async {
        loop {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return Some(());
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.len() > 16 * 1024 {
                return Some(());
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()??;
    let text = String::from_utf8_lossy(&buf);
    let line = text.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default();
    let target = parts.next().unwrap_or_default();
    let parsed = Url::parse(&format!("http://localhost{target}")).ok();
    let ours = method == "GET" && parsed.as_ref().is_some_and(|u| u.path() == path);
    if !ours {
        let _ = respond(&mut stream, "404 Not Found", "<p>Not found</p>").await;
        return None;
    }
    let query: HashMap<String, String> = parsed
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let params = CallbackParams {
        code: query.get("code").cloned(),
        state: query.get("state").cloned(),
        error: query.get("error").cloned(),
        error_description: query.get("error_description").cloned(),
        iss: query.get("iss").cloned(),
    };
    let page = if params.code.is_some() && params.error.is_none() {
        PAGE_OK
    } else {
        PAGE_ERROR
    };
    let _ = respond(&mut stream, "200 OK", page).await;
    Some(params)
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    async fn get(url: &str) -> (u16, String) {
        let u = Url::parse(url).unwrap();
        let mut s = TcpStream::connect(("127.0.0.1", u.port().unwrap()))
            .await
            .unwrap();
        let target = match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        };
        s.write_all(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let status = out[9..12].parse().unwrap();
        (status, out)
    }

    #[tokio::test]
    async fn receives_the_code_and_ignores_other_paths() {
        let l = CallbackListener::bind("http://localhost:0/oauth/callback", "s")
            .await
            .unwrap();
        let uri = l.redirect_uri().to_string();
        assert!(uri.starts_with("http://localhost:") && uri.ends_with("/oauth/callback"));
        let waiter = tokio::spawn(l.wait(Duration::from_secs(5)));
        let base = uri.trim_end_matches("/oauth/callback");
        let (status, _) = get(&format!("{base}/favicon.ico")).await;
        assert_eq!(status, 404);
        let (status, body) = get(&format!("{uri}?code=c%20d&state=st&iss=http%3A%2F%2Fas")).await;
        assert_eq!(status, 200);
        assert!(body.contains("close this window"));
        let p = waiter.await.unwrap().unwrap();
        assert_eq!(p.code.as_deref(), Some("c d"));
        assert_eq!(p.state.as_deref(), Some("st"));
        assert_eq!(p.iss.as_deref(), Some("http://as"));
        assert!(!format!("{p:?}").contains("c d"));
    }

    #[tokio::test]
    async fn times_out_and_refuses_non_loopback() {
        let l = CallbackListener::bind("http://127.0.0.1:0/cb", "s")
            .await
            .unwrap();
        let e = l.wait(Duration::from_millis(100)).await.unwrap_err();
        assert!(e.to_string().contains("no authorization response"), "{e}");
        let e = CallbackListener::bind("http://example.com:7777/cb", "s")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("must point at this machine"), "{e}");
        let e = CallbackListener::bind("https://localhost:7777/cb", "s")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("http://localhost"), "{e}");
    }

    #[tokio::test]
    async fn busy_port_names_the_setting() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = CallbackListener::bind(&format!("http://localhost:{port}/cb"), "srv")
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("mcpServers.srv.oauth.redirectUri"),
            "{e}"
        );
    }
}
