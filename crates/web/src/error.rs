//! Errors: [`WebError`] for starting the app, [`ApiError`] for API answers (a status
//! and a JSON body `{"error": <code>, "message": <text>}` that says what to do).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Why the web app could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("cannot listen on {addr}: {source} (is another program using the port? try --port 0)")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make a random access token: {0}")]
    Random(#[source] std::io::Error),
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    #[error("{0}")]
    Settings(String),
    #[error("the server stopped: {0}")]
    Serve(#[source] std::io::Error),
    #[error("{0}")]
    Origins(String),
    #[error("team database: {0}")]
    Store(String),
    #[error("sign-in: {0}")]
    SignIn(String),
}

/// An API failure: HTTP status, a short machine code and a message for people.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The server answered with an error, or the request to it failed.
    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, "server_error", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"error": self.code, "message": self.message})),
        )
            .into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
