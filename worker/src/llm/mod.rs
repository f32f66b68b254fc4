//! LLM clients: one completion (`system` + `user` prompt, an output-token
//! budget) from an OpenAI-compatible server or Anthropic, with retries,
//! timeouts bounded by the caller's deadline, metrics and redacted secrets.
//!
//! - [`config`]: the `[llm]` section ([`LlmConfig`]); `extractive` (the
//!   default) makes no requests and builds no client.
//! - [`client`]: [`LlmClient::complete`], the retry loop and one HTTP
//!   attempt.
//! - [`error`]: [`LlmError`], and how a reply is classified (retry, shrink
//!   the prompt, give up).
//! - [`openai`], [`anthropic`]: the two wire formats.
//! - [`health`]: whether the provider answers at all; after consecutive
//!   failures requests pause, and compactions fall back at once, until a
//!   background probe is answered.
//! - [`retry_after`]: `Retry-After` / `retry-after-ms` parsing.
//! - [`metrics`]: metric names and the only place they are recorded.
//!
//! Prompts and replies are never logged above debug, and at debug only
//! their lengths; the key lives in a [`secrecy::SecretString`], is sent in a
//! header marked sensitive, and is redacted from error excerpts.

pub mod anthropic;
pub mod client;
pub mod completion;
pub mod config;
pub mod error;
pub mod health;
pub mod metrics;
pub mod openai;
pub mod retry_after;
mod wire;

pub use client::LlmClient;
pub use completion::{Calls, LlmRequest, LlmResponse, TokenUsage};
pub use config::{LlmConfig, LlmConfigError, Provider};
pub use error::LlmError;
pub use health::Health;
