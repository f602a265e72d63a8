//! Dialing: choosing and opening the transport of one server and completing its
//! handshake within the start-up limit. stdio spawns the child; Streamable HTTP tries
//! the stateless 2026-07-28 revision (`server/discover`) before `initialize`; legacy
//! SSE refreshes a rejected token once; `Auto` falls back from Streamable HTTP to SSE
//! only when another transport could help.
//!
//! The `server/discover` probe may take 5 s (less when the start-up limit is shorter).
//! A 401 or a connection that could not be made ends the attempt there; any other
//! failure, or the probe's timeout, falls back to `initialize` on a fresh transport,
//! offering 2025-11-25 and accepting an older revision the server answers with. The host
//! remembers which worked (`ConnectOptions::transport_hint`), so the probe is skipped
//! for a server known to be older. `Auto` tries legacy SSE after Streamable HTTP unless
//! the failure was about auth, a bad URL or header, or an unreachable host.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use rmcp::model::ProtocolVersion;
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, RoleClient, RunningService,
    serve_client_with_lifecycle,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::failure::{connect_failure, init_error_message, is_connect_failure};
use super::http_setup::{auth_source, check_url, header_map, http_client, preflight};
use super::tap::ProgressTap;
use super::watch;
use super::{ConnectOptions, Connection};
use crate::error::ConnectError;
use crate::handler::{Declared, HostHandler, ProgressRouter, client_info};
use crate::http_bounds::BoundedHttpClient;
use crate::sse::{SseError, SseOptions, SseTransport};
use crate::stdio::{self, ChildGuard, SharedDiagnostics};
use crate::target::{StdioTarget, Target, TransportKind};
use crate::token::TokenHttpClient;

/// How long the stateless-revision probe may take before we fall back to `initialize`.
const DISCOVER_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

fn handler(opts: &ConnectOptions) -> HostHandler {
    HostHandler {
        server: Arc::from(opts.name.as_str()),
        hooks: opts.hooks.clone(),
        info: client_info(
            &opts.client_name,
            &opts.client_version,
            Declared {
                sampling: opts.hooks.supports_sampling(),
                ui_extension: opts.ui_extension,
                roots_list_changed: opts.hooks.roots_list_changed(),
            },
        ),
    }
}

impl Connection {
    /// A connection whose handshake has completed.
    fn ready(
        opts: &ConnectOptions,
        service: RunningService<RoleClient, HostHandler>,
        kind: TransportKind,
        progress: Arc<ProgressRouter>,
        child: Option<(Arc<ChildGuard>, SharedDiagnostics)>,
    ) -> Connection {
        let (child, diag) = match child {
            Some((guard, diag)) => (Some(guard), Some(diag)),
            None => (None, None),
        };
        let name: Arc<str> = Arc::from(opts.name.as_str());
        let peer = service.peer().clone();
        let watch = opts
            .watch_lists
            .then(|| peer.peer_info())
            .flatten()
            .filter(|i| i.protocol_version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
            .and_then(|i| watch::filter_for(&i.capabilities))
            .map(|filter| {
                watch::Watch::spawn(peer.clone(), name.clone(), opts.hooks.clone(), Some(filter))
            });
        Connection {
            name,
            peer,
            service: std::sync::Mutex::new(Some(service)),
            kind,
            child,
            diag,
            progress,
            hooks: opts.hooks.clone(),
            request_timeout: opts.request_timeout,
            raw: None,
            watch: std::sync::Mutex::new(watch),
            resources: std::sync::Mutex::new(None),
        }
    }

    /// Connects to the server described by `opts`, within its start-up timeout.
    pub async fn connect(opts: ConnectOptions) -> Result<Connection, ConnectError> {
        match opts.target.clone() {
            Target::Stdio(t) => connect_stdio(&opts, &t).await,
            Target::Http { url, headers } => connect_http(&opts, &url, &headers).await,
            Target::Sse { url, headers } => connect_sse(&opts, &url, &headers).await,
            Target::Auto { url, headers } => {
                if opts.transport_hint == Some(TransportKind::Sse) {
                    return connect_sse(&opts, &url, &headers).await;
                }
                match connect_http(&opts, &url, &headers).await {
                    Ok(c) => Ok(c),
                    Err(e) if should_try_sse(&e) => {
                        tracing::debug!(server = %opts.name, "Streamable HTTP failed ({e}); trying legacy SSE");
                        match connect_sse(&opts, &url, &headers).await {
                            Ok(c) => Ok(c),
                            Err(sse) if sse.is_auth() => Err(sse),
                            Err(sse) => Err(ConnectError::AutoFailed {
                                http: e.to_string(),
                                sse: sse.to_string(),
                            }),
                        }
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }
}

async fn connect_stdio(
    opts: &ConnectOptions,
    target: &StdioTarget,
) -> Result<Connection, ConnectError> {
    let stdio::Spawned {
        transport,
        lane,
        guard,
        diag,
    } = stdio::spawn(&opts.name, target, opts.max_message_bytes)?;
    let progress = Arc::new(ProgressRouter::default());
    let handler = handler(opts);
    let attempt = tokio::time::timeout(
        opts.startup_limit(),
        serve_client_with_lifecycle(
            handler,
            ProgressTap::new(transport, &progress),
            ClientLifecycleMode::Initialize,
        ),
    )
    .await;
    match attempt {
        Ok(Ok(service)) => {
            let mut conn = Connection::ready(
                opts,
                service,
                TransportKind::Stdio,
                progress,
                Some((guard, diag)),
            );
            conn.raw = Some(lane);
            Ok(conn)
        }
        Ok(Err(e)) => {
            let status = guard.wait_exit(Duration::from_millis(500)).await;
            // Let the stderr reader drain what the process wrote before it went.
            tokio::time::sleep(Duration::from_millis(50)).await;
            guard.terminate(Duration::from_millis(200)).await;
            let stderr = stdio::stderr_tail(&diag);
            // An error reply (the server's own, or one standing in for a reply that
            // could not be read) is the cause, even if the process then went away.
            if let ClientInitializeError::JsonRpcError(data) = &e {
                return Err(ConnectError::Initialize {
                    message: data.message.to_string(),
                    stderr,
                });
            }
            match status {
                Some(status) => Err(ConnectError::ExitedDuringInit { status, stderr }),
                None => Err(ConnectError::Initialize {
                    message: init_error_message(&e),
                    stderr,
                }),
            }
        }
        Err(_) => {
            guard.terminate(Duration::from_millis(200)).await;
            Err(ConnectError::StartupTimeout {
                after: opts.startup_limit(),
                stderr: stdio::stderr_tail(&diag),
            })
        }
    }
}

async fn connect_http(
    opts: &ConnectOptions,
    url: &str,
    headers: &[(String, String)],
) -> Result<Connection, ConnectError> {
    check_url(url)?;
    preflight(opts, url).await?;
    let map = header_map(headers)?;
    let source = auth_source(opts, url, headers).await?.map(|(s, _)| s);
    let client = TokenHttpClient::new(http_client(opts)?, source, &opts.name, url, &map);
    let bounded = BoundedHttpClient::new(client.clone(), &opts.name, opts.max_message_bytes);
    let make = || {
        let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .custom_headers(map.clone())
            .reinit_on_expired_session(true);
        cfg.max_sse_event_size = opts.max_message_bytes;
        StreamableHttpClientTransport::with_client(bounded.clone(), cfg)
    };
    let deadline = tokio::time::Instant::now() + opts.startup_limit();

    // 1. The stateless 2026-07-28 revision, unless we know this server is older.
    if opts.transport_hint != Some(TransportKind::StreamableHttp) {
        let progress = Arc::new(ProgressRouter::default());
        let probe = tokio::time::timeout(
            DISCOVER_PROBE_TIMEOUT.min(opts.startup_limit()),
            serve_client_with_lifecycle(
                handler(opts),
                ProgressTap::new(make(), &progress),
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            ),
        )
        .await;
        if matches!(probe, Ok(Err(_)))
            && let Some(reason) = client.take_failure()
        {
            return Err(ConnectError::AuthFailed {
                server: opts.name.clone(),
                reason,
            });
        }
        match probe {
            Ok(Ok(service)) => {
                return Ok(Connection::ready(
                    opts,
                    service,
                    TransportKind::StatelessHttp,
                    progress,
                    None,
                ));
            }
            Ok(Err(e)) if e.is_authorization_required() => {
                return Err(ConnectError::AuthRequired {
                    server: opts.name.clone(),
                    www_authenticate: e.auth_challenge().map(str::to_string),
                });
            }
            Ok(Err(e)) if is_connect_failure(&e) => {
                return Err(connect_failure(opts, url, &e).await);
            }
            Ok(Err(e)) => {
                tracing::debug!(server = %opts.name, "server/discover probe declined ({e}); using initialize");
            }
            Err(_) => {
                tracing::debug!(server = %opts.name, "server/discover probe timed out; using initialize");
            }
        }
    }

    // 2. The initialize handshake (2025-11-25 offered, older accepted).
    let progress = Arc::new(ProgressRouter::default());
    let attempt = tokio::time::timeout_at(
        deadline,
        serve_client_with_lifecycle(
            handler(opts),
            ProgressTap::new(make(), &progress),
            ClientLifecycleMode::Initialize,
        ),
    )
    .await;
    if matches!(attempt, Ok(Err(_)))
        && let Some(reason) = client.take_failure()
    {
        return Err(ConnectError::AuthFailed {
            server: opts.name.clone(),
            reason,
        });
    }
    match attempt {
        Ok(Ok(service)) => Ok(Connection::ready(
            opts,
            service,
            TransportKind::StreamableHttp,
            progress,
            None,
        )),
        Ok(Err(e)) if e.is_authorization_required() => Err(ConnectError::AuthRequired {
            server: opts.name.clone(),
            www_authenticate: e.auth_challenge().map(str::to_string),
        }),
        Ok(Err(e)) if is_connect_failure(&e) => Err(connect_failure(opts, url, &e).await),
        Ok(Err(e)) => Err(ConnectError::Initialize {
            message: init_error_message(&e),
            stderr: vec![],
        }),
        Err(_) => Err(ConnectError::StartupTimeout {
            after: opts.startup_limit(),
            stderr: vec![],
        }),
    }
}

fn should_try_sse(e: &ConnectError) -> bool {
    match e {
        ConnectError::AuthRequired { .. }
        | ConnectError::AuthFailed { .. }
        | ConnectError::Blocked { .. }
        | ConnectError::BadHeader { .. }
        | ConnectError::BadUrl { .. }
        | ConnectError::Unreachable { .. } => false,
        ConnectError::Initialize { message, .. } => {
            let m = message.to_ascii_lowercase();
            !(m.contains("connection refused") || m.contains("error trying to connect"))
        }
        _ => true,
    }
}

async fn connect_sse(
    opts: &ConnectOptions,
    url: &str,
    headers: &[(String, String)],
) -> Result<Connection, ConnectError> {
    check_url(url)?;
    preflight(opts, url).await?;
    let parsed = url::Url::parse(url).map_err(|e| ConnectError::BadUrl {
        url: url.into(),
        reason: e.to_string(),
    })?;
    let mut base = http::HeaderMap::new();
    for (k, v) in header_map(headers)? {
        base.insert(k, v);
    }
    let deadline = tokio::time::Instant::now() + opts.startup_limit();
    // The legacy transport sends the token fixed at connect time (no refresh mid-session).
    let (source, mut bearer) = match auth_source(opts, url, headers).await? {
        Some((s, b)) => (Some(s), b),
        None => (None, None),
    };
    let mut refreshed = false;
    let transport = loop {
        let mut hmap = base.clone();
        if let Some(token) = &bearer {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                ConnectError::AuthFailed {
                    server: opts.name.clone(),
                    reason: "the access token is not a valid header value".into(),
                }
            })?;
            hmap.insert(http::header::AUTHORIZATION, value);
        }
        let sse_opts = SseOptions {
            headers: hmap,
            connect_timeout: opts.startup_limit(),
            max_message_bytes: opts.max_message_bytes,
            server: opts.name.clone(),
            ..Default::default()
        };
        match tokio::time::timeout_at(
            deadline,
            SseTransport::connect(http_client(opts)?, parsed.clone(), sse_opts),
        )
        .await
        {
            Ok(Ok(t)) => break t,
            Ok(Err(e)) => {
                if e.status() == Some(401)
                    && !refreshed
                    && let Some(source) = &source
                {
                    refreshed = true;
                    match source
                        .unauthorized(&opts.name, url, bearer.clone(), None)
                        .await
                    {
                        Ok(Some(t)) if Some(&t) != bearer.as_ref() => {
                            bearer = Some(t);
                            continue;
                        }
                        Ok(_) => {}
                        Err(reason) => {
                            return Err(ConnectError::AuthFailed {
                                server: opts.name.clone(),
                                reason,
                            });
                        }
                    }
                }
                if e.status() == Some(401) || e.status() == Some(403) {
                    return Err(ConnectError::AuthRequired {
                        server: opts.name.clone(),
                        www_authenticate: None,
                    });
                }
                if let SseError::Http(re) = &e
                    && re.is_connect()
                {
                    return Err(connect_failure(opts, url, re).await);
                }
                return Err(ConnectError::Initialize {
                    message: format!("legacy SSE: {e}"),
                    stderr: vec![],
                });
            }
            Err(_) => {
                return Err(ConnectError::StartupTimeout {
                    after: opts.startup_limit(),
                    stderr: vec![],
                });
            }
        }
    };
    let progress = Arc::new(ProgressRouter::default());
    let attempt = tokio::time::timeout_at(
        deadline,
        serve_client_with_lifecycle(
            handler(opts),
            ProgressTap::new(transport, &progress),
            ClientLifecycleMode::Initialize,
        ),
    )
    .await;
    match attempt {
        Ok(Ok(service)) => Ok(Connection::ready(
            opts,
            service,
            TransportKind::Sse,
            progress,
            None,
        )),
        Ok(Err(e)) => Err(ConnectError::Initialize {
            message: format!("legacy SSE: {}", init_error_message(&e)),
            stderr: vec![],
        }),
        Err(_) => Err(ConnectError::StartupTimeout {
            after: opts.startup_limit(),
            stderr: vec![],
        }),
    }
}
