//! Team mode's Prometheus metrics ([`TeamMetrics`]), served at `GET /metrics` in the
//! OpenMetrics text format through `prometheus-client` (the Prometheus project's Rust
//! client):
//! - `switchboard_http_requests_total{method, route, status}` and
//!   `switchboard_http_request_duration_seconds{method, route}`: every request, by route
//!   *template* (`/api/servers/{name}/call`, never the path a client sent; `unmatched` for
//!   paths outside the route table) and status class (`2xx` … `5xx`);
//! - `switchboard_mcp_calls_total{method, outcome}` and
//!   `switchboard_mcp_call_duration_seconds{method}`: MCP requests made for users
//!   (`tools/list`, `tools/call`) by outcome — `ok`, `tool_error` (the tool answered with
//!   `isError`), `failed` (no connection, or an error answer), `timeout`;
//! - `switchboard_mcp_sessions_open`: upstream MCP sessions in this instance's client
//!   cache (kept current by the cache itself);
//! - `switchboard_signins_total{outcome}`: finished `/auth/callback`s — `ok` (a session),
//!   `refused` (the policy or the issuer said no), `invalid` (a callback that belongs to
//!   no login of this browser: missing, unknown, replayed, forged), `failed` (the issuer
//!   or the database did not answer as it should).
//!
//! Who may read them: only a scraper presenting `Authorization: Bearer <token>` with the
//! token the operator configured ([`MetricsToken`], `SWITCHBOARD_METRICS_TOKEN` or a file
//! named by `SWITCHBOARD_METRICS_TOKEN_FILE`; at least [`METRICS_TOKEN_MIN_LEN`] (24)
//! characters, compared in constant time), never a session; without
//! a configured token `/metrics` answers 404. Not "loopback only": behind a reverse proxy
//! on the same machine every request arrives from loopback.
//!
//! Must not: put anything of a user's in a label — no email, user id, server name, URL,
//! tool name or path parameter. Every label value is a route template from the route
//! table, an HTTP method, a status class or one of the fixed outcomes here, so the
//! number of series is bounded whatever clients send.

use std::fmt;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use switchboard_mcp::{ConnectError, RequestError};

use super::SIGNIN_CALLBACK_PATH;
use super::state::TeamState;
use crate::error::{ApiError, WebError};
use crate::random::constant_time_eq;

/// The bearer token a scraper must present at `/metrics`. Never printed.
#[derive(Clone)]
pub struct MetricsToken(String);

/// The shortest token accepted (a guessable token would open the metrics to anyone).
pub const METRICS_TOKEN_MIN_LEN: usize = 24;

impl MetricsToken {
    /// A token of at least [`METRICS_TOKEN_MIN_LEN`] visible ASCII characters (it travels
    /// in an HTTP header).
    ///
    /// # Errors
    /// A token that is too short or has spaces or control characters.
    pub fn new(token: &str) -> Result<Self, WebError> {
        let token = token.trim();
        if token.len() < METRICS_TOKEN_MIN_LEN {
            return Err(WebError::Settings(format!(
                "the metrics token has {} characters: use at least {METRICS_TOKEN_MIN_LEN} (e.g. `openssl rand -hex 32`)",
                token.len()
            )));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(WebError::Settings(
                "the metrics token may hold only visible ASCII characters (no spaces): e.g. `openssl rand -hex 32`".into(),
            ));
        }
        Ok(Self(token.to_owned()))
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MetricsToken(<redacted>)")
    }
}

/// A label value from a fixed set.
macro_rules! label_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum $name { $($variant),+ }

        impl $name {
            pub(crate) fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
                EncodeLabelValue::encode(&self.as_str(), encoder)
            }
        }
    };
}

label_enum!(
    /// An HTTP method (anything unusual is `other`).
    HttpMethod {
        Get => "GET", Post => "POST", Put => "PUT", Delete => "DELETE", Head => "HEAD",
        Options => "OPTIONS", Patch => "PATCH", Other => "other",
    }
);

impl HttpMethod {
    fn of(m: &Method) -> Self {
        match *m {
            Method::GET => Self::Get,
            Method::POST => Self::Post,
            Method::PUT => Self::Put,
            Method::DELETE => Self::Delete,
            Method::HEAD => Self::Head,
            Method::OPTIONS => Self::Options,
            Method::PATCH => Self::Patch,
            _ => Self::Other,
        }
    }
}

label_enum!(
    /// A status class.
    StatusClass { Info => "1xx", Success => "2xx", Redirect => "3xx", Client => "4xx", Server => "5xx" }
);

impl StatusClass {
    fn of(s: StatusCode) -> Self {
        match s.as_u16() {
            ..=199 => Self::Info,
            200..=299 => Self::Success,
            300..=399 => Self::Redirect,
            400..=499 => Self::Client,
            _ => Self::Server,
        }
    }
}

label_enum!(
    /// An MCP request made for a user.
    McpMethod { ListTools => "tools/list", CallTool => "tools/call", ReadResource => "resources/read", ListOther => "lists" }
);

label_enum!(
    /// How an MCP request ended.
    McpOutcome { Ok => "ok", ToolError => "tool_error", Failed => "failed", Timeout => "timeout" }
);

impl McpOutcome {
    /// A connection that could not be made.
    pub(crate) fn of_connect(e: &ConnectError) -> Self {
        match e {
            ConnectError::StartupTimeout { .. } => Self::Timeout,
            _ => Self::Failed,
        }
    }

    /// A request that got no result.
    pub(crate) fn of_request(e: &RequestError) -> Self {
        match e {
            RequestError::Timeout { .. } => Self::Timeout,
            _ => Self::Failed,
        }
    }

    /// A request's answer; `tool_error` tells whether a result is the tool's own error.
    pub(crate) fn of_answer<T>(
        answer: &Result<T, RequestError>,
        tool_error: impl FnOnce(&T) -> bool,
    ) -> Self {
        match answer {
            Ok(r) if tool_error(r) => Self::ToolError,
            Ok(_) => Self::Ok,
            Err(e) => Self::of_request(e),
        }
    }
}

label_enum!(
    /// How a sign-in callback ended.
    SignInOutcome { Ok => "ok", Refused => "refused", Invalid => "invalid", Failed => "failed" }
);

impl SignInOutcome {
    /// From the callback's answer (`signin::callback`): a redirect with a session is the
    /// only success; 403 is the policy's or the issuer's refusal; 400 a callback that
    /// belongs to no login of this browser; anything else a failure on the way.
    fn of(status: StatusCode) -> Self {
        match status.as_u16() {
            300..=399 => Self::Ok,
            403 => Self::Refused,
            400 => Self::Invalid,
            _ => Self::Failed,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HttpLabels {
    method: HttpMethod,
    route: &'static str,
    status: StatusClass,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RouteLabels {
    method: HttpMethod,
    route: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct McpLabels {
    method: McpMethod,
    outcome: McpOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct McpMethodLabels {
    method: McpMethod,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct SignInLabels {
    outcome: SignInOutcome,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The route label of a path no route matched.
const UNMATCHED: &str = "unmatched";

fn http_histogram() -> Histogram {
    // 5 ms … ~10 s.
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

fn mcp_histogram() -> Histogram {
    // 10 ms … 120 s (the cache's request time limit).
    Histogram::new([
        0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
    ])
}

/// This instance's metrics and who may read them.
pub(crate) struct TeamMetrics {
    registry: Registry,
    token: Option<MetricsToken>,
    routes: Vec<&'static str>,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: HistogramFamily<RouteLabels>,
    mcp_calls: Family<McpLabels, Counter>,
    mcp_duration: HistogramFamily<McpMethodLabels>,
    signins: Family<SignInLabels, Counter>,
}

impl TeamMetrics {
    /// Metrics over the route table's templates; `open_sessions` is the client cache's
    /// gauge.
    pub(crate) fn new(token: Option<MetricsToken>, open_sessions: Gauge) -> Self {
        let mut registry = Registry::with_prefix("switchboard");
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template and status class",
            http_requests.clone(),
        );
        let http_duration: HistogramFamily<RouteLabels> =
            Family::new_with_constructor(http_histogram);
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request, by route template",
            http_duration.clone(),
        );
        let mcp_calls = Family::<McpLabels, Counter>::default();
        registry.register(
            "mcp_calls",
            "MCP requests made for users, by outcome (ok, tool_error, failed, timeout)",
            mcp_calls.clone(),
        );
        let mcp_duration: HistogramFamily<McpMethodLabels> =
            Family::new_with_constructor(mcp_histogram);
        registry.register(
            "mcp_call_duration_seconds",
            "Time of an MCP request made for a user, connecting included",
            mcp_duration.clone(),
        );
        registry.register(
            "mcp_sessions_open",
            "Upstream MCP sessions open in this instance's client cache",
            open_sessions,
        );
        let signins = Family::<SignInLabels, Counter>::default();
        registry.register(
            "signins",
            "Finished sign-in callbacks, by outcome (ok, refused, invalid, failed)",
            signins.clone(),
        );
        // Every outcome shows from the start (at 0), so rates and alerts need no series
        // to appear first.
        for outcome in [
            SignInOutcome::Ok,
            SignInOutcome::Refused,
            SignInOutcome::Invalid,
            SignInOutcome::Failed,
        ] {
            signins.get_or_create(&SignInLabels { outcome }).inc_by(0);
        }
        for method in [McpMethod::ListTools, McpMethod::CallTool] {
            for outcome in [
                McpOutcome::Ok,
                McpOutcome::ToolError,
                McpOutcome::Failed,
                McpOutcome::Timeout,
            ] {
                mcp_calls
                    .get_or_create(&McpLabels { method, outcome })
                    .inc_by(0);
            }
        }
        Self {
            registry,
            token,
            routes: super::route_table().into_iter().map(|r| r.path).collect(),
            http_requests,
            http_duration,
            mcp_calls,
            mcp_duration,
            signins,
        }
    }

    /// The route table's template for a matched path (`unmatched` for anything else).
    fn route(&self, matched: Option<&MatchedPath>) -> &'static str {
        matched
            .and_then(|m| self.routes.iter().find(|r| **r == m.as_str()))
            .copied()
            .unwrap_or(UNMATCHED)
    }

    fn answered(&self, method: HttpMethod, route: &'static str, status: StatusCode, secs: f64) {
        self.http_requests
            .get_or_create(&HttpLabels {
                method,
                route,
                status: StatusClass::of(status),
            })
            .inc();
        self.http_duration
            .get_or_create(&RouteLabels { method, route })
            .observe(secs);
        if route == SIGNIN_CALLBACK_PATH {
            self.signins
                .get_or_create(&SignInLabels {
                    outcome: SignInOutcome::of(status),
                })
                .inc();
        }
    }

    /// One MCP request made for a user, `started` before connecting.
    pub(crate) fn mcp_call(&self, method: McpMethod, outcome: McpOutcome, started: Instant) {
        self.mcp_calls
            .get_or_create(&McpLabels { method, outcome })
            .inc();
        self.mcp_duration
            .get_or_create(&McpMethodLabels { method })
            .observe(started.elapsed().as_secs_f64());
    }

    /// The OpenMetrics text.
    fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

impl TeamState {
    pub(crate) fn metrics(&self) -> &TeamMetrics {
        &self.inner.metrics
    }
}

/// Middleware around the whole router: counts and times every answer by route template.
pub(crate) async fn track(
    State(state): State<TeamState>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = HttpMethod::of(request.method());
    let route = state
        .metrics()
        .route(request.extensions().get::<MatchedPath>());
    let response = next.run(request).await;
    state.metrics().answered(
        method,
        route,
        response.status(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// `GET /metrics`: the OpenMetrics text for a scraper with the metrics token.
pub async fn scrape(State(state): State<TeamState>, headers: HeaderMap) -> Response {
    let metrics = state.metrics();
    let Some(token) = &metrics.token else {
        return ApiError::not_found(
            "metrics are off on this instance: set SWITCHBOARD_METRICS_TOKEN (or SWITCHBOARD_METRICS_TOKEN_FILE) and scrape with `Authorization: Bearer <token>`",
        )
        .into_response();
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.split_once(' ')
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        })
        .map(|(_, t)| t.trim());
    if !presented.is_some_and(|t| constant_time_eq(t, token.expose())) {
        let mut response = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "/metrics needs `Authorization: Bearer <the metrics token>` (SWITCHBOARD_METRICS_TOKEN on the instance)",
        )
        .into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"switchboard-metrics\""),
        );
        return response;
    }
    match metrics.encode() {
        Ok(body) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    ),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::warn!("encoding metrics: {e}");
            ApiError::internal("the metrics could not be encoded").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_visible_and_never_printed() {
        assert!(MetricsToken::new("short").is_err());
        assert!(MetricsToken::new("a token with spaces in it, long enough").is_err());
        let t = MetricsToken::new(&"x".repeat(32)).unwrap();
        assert!(!format!("{t:?}").contains("xxxx"));
    }

    #[test]
    fn outcomes_and_classes() {
        assert_eq!(StatusClass::of(StatusCode::SEE_OTHER).as_str(), "3xx");
        assert_eq!(StatusClass::of(StatusCode::BAD_GATEWAY).as_str(), "5xx");
        assert_eq!(SignInOutcome::of(StatusCode::SEE_OTHER), SignInOutcome::Ok);
        assert_eq!(
            SignInOutcome::of(StatusCode::FORBIDDEN),
            SignInOutcome::Refused
        );
        assert_eq!(
            SignInOutcome::of(StatusCode::BAD_REQUEST),
            SignInOutcome::Invalid
        );
        assert_eq!(
            SignInOutcome::of(StatusCode::BAD_GATEWAY),
            SignInOutcome::Failed
        );
        let timeout = RequestError::Timeout {
            method: "tools/call".into(),
            after: std::time::Duration::from_secs(1),
        };
        assert_eq!(McpOutcome::of_request(&timeout), McpOutcome::Timeout);
        assert_eq!(
            McpOutcome::of_request(&RequestError::Closed(None)),
            McpOutcome::Failed
        );
        assert_eq!(
            McpOutcome::of_connect(&ConnectError::StartupTimeout {
                after: std::time::Duration::from_secs(1),
                stderr: Vec::new(),
            }),
            McpOutcome::Timeout
        );
        assert_eq!(
            HttpMethod::of(&Method::from_bytes(b"BREW").unwrap()).as_str(),
            "other"
        );
    }
}
