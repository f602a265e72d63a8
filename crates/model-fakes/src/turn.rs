//! The script both fakes answer from: [`FakeTurn`], one scripted answer per accepted
//! request, and how a [`FakeTurn::Dynamic`] turn is resolved against the request body.

use std::fmt;

use serde_json::Value;

/// Decides a turn from the request body.
pub type DynamicTurn = Box<dyn Fn(&Value) -> FakeTurn + Send + Sync>;

/// One scripted answer; each accepted request consumes the next one.
pub enum FakeTurn {
    /// Answer with this text (streamed in several increments).
    Text(String),
    /// Call these functions (name, args) in parallel, in one model turn.
    Calls(Vec<(String, Value)>),
    /// Answer with this HTTP status and an error body holding `message`.
    Error { status: u16, message: String },
    /// 429 `RESOURCE_EXHAUSTED`, with a `Retry-After` header (seconds) and/or a
    /// `RetryInfo.retryDelay` (such as `"0.2s"`) in the body when given.
    RateLimited {
        retry_after: Option<String>,
        retry_delay: Option<String>,
    },
    /// Answer with exactly this response JSON (one chunk when streamed).
    Raw(Value),
    /// Streamed requests only: send these strings as the SSE body, each its own write
    /// (a few milliseconds apart), so event boundaries can fall anywhere.
    RawSse(Vec<String>),
    /// Decide from the request body (for example "if the last function response is an
    /// error, call again with other arguments").
    Dynamic(DynamicTurn),
}

impl fmt::Debug for FakeTurn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Self::Calls(c) => f.debug_tuple("Calls").field(c).finish(),
            Self::Error { status, message } => f
                .debug_struct("Error")
                .field("status", status)
                .field("message", message)
                .finish(),
            Self::RateLimited {
                retry_after,
                retry_delay,
            } => f
                .debug_struct("RateLimited")
                .field("retry_after", retry_after)
                .field("retry_delay", retry_delay)
                .finish(),
            Self::Raw(v) => f.debug_tuple("Raw").field(v).finish(),
            Self::RawSse(c) => f.debug_tuple("RawSse").field(c).finish(),
            Self::Dynamic(_) => f.write_str("Dynamic(..)"),
        }
    }
}

impl FakeTurn {
    /// [`FakeTurn::Text`].
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// [`FakeTurn::Calls`] with one call.
    pub fn call(name: impl Into<String>, args: Value) -> Self {
        Self::Calls(vec![(name.into(), args)])
    }

    /// [`FakeTurn::Calls`].
    pub fn calls<N: Into<String>>(calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        Self::Calls(calls.into_iter().map(|(n, a)| (n.into(), a)).collect())
    }

    /// [`FakeTurn::Error`].
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self::Error {
            status,
            message: message.into(),
        }
    }

    /// [`FakeTurn::Dynamic`].
    pub fn dynamic(f: impl Fn(&Value) -> FakeTurn + Send + Sync + 'static) -> Self {
        Self::Dynamic(Box::new(f))
    }

    /// The arguments a call of [`FakeTurn::Calls`] is sent with: its `args` when they
    /// are an object, `{}` otherwise (both APIs carry an object).
    pub(crate) fn call_args(args: &Value) -> Value {
        if args.is_object() {
            args.clone()
        } else {
            Value::Object(serde_json::Map::new())
        }
    }

    /// Runs [`FakeTurn::Dynamic`] turns against the request body until a fixed turn
    /// comes out; past 16 levels, a 500 error turn naming `fake`.
    pub(crate) fn resolve(self, request: &Value, fake: &str) -> FakeTurn {
        let mut turn = self;
        for _ in 0..16 {
            match turn {
                FakeTurn::Dynamic(f) => turn = f(request),
                other => return other,
            }
        }
        FakeTurn::Error {
            status: 500,
            message: format!("{fake}: Dynamic turns nested too deeply"),
        }
    }
}
