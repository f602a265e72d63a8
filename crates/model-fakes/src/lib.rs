//! `switchboard-model-fakes` (test support, never shipped): fakes of the model APIs that
//! cannot run here.
//!
//! - [`gemini`]: a fake Gemini REST API (`generateContent`, `streamGenerateContent`);
//! - [`openai`]: a fake OpenAI-compatible chat-completions server.
//!
//! Both follow the real wire formats, answer from one script of [`FakeTurn`]s, and
//! reject what the real services reject, using `switchboard-model`'s own declaration
//! rules, so a test against them can fail the way a real call would.

pub mod gemini;
pub mod openai;

pub use gemini::FakeTurn;
