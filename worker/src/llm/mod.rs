//! LLM clients (being written).
//!
//! - [`config`]: the `[llm]` section ([`LlmConfig`]); `extractive` (the
//!   default) makes no requests and builds no client.

pub mod config;

pub use config::{LlmConfig, LlmConfigError, Provider};
