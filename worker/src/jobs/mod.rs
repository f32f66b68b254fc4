//! The jobs the worker runs.
//!
//! - [`compact`]: compacting one workstream; its handler also runs the
//!   `summarize_branch` jobs (`branch`), which share the queue.
//! - [`summarizer`]: the extractive summarizer or an LLM, behind one type.
//! - `hooked`: asking the pre-compaction hook, and what its answer means.

mod branch;
pub mod compact;
mod hooked;
pub mod summarizer;

pub use compact::{CompactHandler, CompactSettings, Hooks};
pub use summarizer::Summarizer;
