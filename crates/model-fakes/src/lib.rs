//! `switchboard-model-fakes` (test support, never shipped): fakes of the model APIs that
//! cannot run here.
//!
//! - [`gemini`]: a fake Gemini REST API (`generateContent`, `streamGenerateContent`);
//! - [`openai`]: a fake OpenAI-compatible chat-completions server.
//!
//! Both follow the real wire formats, answer from one script of [`FakeTurn`]s, and
//! reject what the real services reject, using `switchboard-model`'s own declaration
//! rules, so a test against them can fail the way a real call would. Both are a
//! [`FakeServer`] (bind, shut down, script, log of [`FakeRequest`]s) specialised by their
//! [`FakeApi`]: each API module holds only its routes, its request checks, its answers
//! and its error bodies.
//!
//! Private modules behind these re-exports: `server` (the shared server core), `turn`
//! (the script), `reply` (JSON and SSE answers, streamed text increments).

pub mod gemini;
pub mod openai;
mod reply;
mod server;
mod turn;

pub use server::{FakeApi, FakeRequest, FakeServer};
pub use turn::{DynamicTurn, FakeTurn};
