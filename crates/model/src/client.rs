//! The model behind a chat: anything that answers a Gemini-shaped `GenerateRequest`.
//! [`GeminiClient`] speaks it natively; other providers (an OpenAI-compatible
//! chat-completions endpoint) translate to and from it, so the chat loop, the tool
//! registry and the result mapping stay one code path.

use futures::future::BoxFuture;
use futures::stream::BoxStream;

use crate::error::ModelError;
use crate::gemini::GeminiClient;
use crate::types::{GenerateRequest, GenerateResponse};

/// A stream of response chunks, each a complete `GenerateResponse` increment.
pub type ChunkStream = BoxStream<'static, Result<GenerateResponse, ModelError>>;

/// A model provider.
pub trait ModelClient: Send + Sync {
    /// One whole answer.
    fn generate<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<GenerateResponse, ModelError>>;

    /// The answer as it is produced.
    fn stream<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<ChunkStream, ModelError>>;
}

impl ModelClient for GeminiClient {
    fn generate<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<GenerateResponse, ModelError>> {
        Box::pin(GeminiClient::generate(self, model, request))
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<ChunkStream, ModelError>> {
        Box::pin(async move {
            let s = GeminiClient::stream(self, model, request).await?;
            Ok(Box::pin(s) as ChunkStream)
        })
    }
}
