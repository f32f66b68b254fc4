//! The jobs the worker runs.
//!
//! - [`compact`]: compacting one workstream (the only job).
//! - [`summarizer`]: the extractive summarizer or an LLM, behind one type.

pub mod compact;
pub mod summarizer;

pub use compact::{CompactHandler, CompactSettings, Hooks};
pub use summarizer::Summarizer;
