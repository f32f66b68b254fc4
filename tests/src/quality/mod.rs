//! The quality benchmark (`bench/quality`, `cargo bench -p compactor-e2e
//! --bench quality`): how much of what matters survives successive
//! compactions through the real pipeline and commit path.
//!
//! - [`sessions`]: generated sessions and their planted facts, with the
//!   generators [`coding`] (an agent with tools) and [`support`] (a
//!   support / assistant chat of short turns), laid out by [`weave`].
//! - [`sgd`]: sessions of third-party data, Schema-Guided Dialogue task
//!   dialogues (train split for tuning, test split held out), facts from
//!   their slot annotations.
//! - [`claude_code`]: sessions of two real Claude Code transcripts (one
//!   for tuning, one held out), facts by written rules.
//! - [`fake_llms`]: the summarizers: extractive, and two fake LLMs at the
//!   HTTP boundary (value-free, malformed every third call).
//! - [`drive`]: a session through the product, one compaction per slice.
//! - [`score`]: a built context against the planted facts.
//! - [`report`]: human tables, `BENCH_RESULT` lines, Markdown.

pub mod claude_code;
pub mod coding;
pub mod drive;
pub mod fake_llms;
pub mod report;
pub mod score;
pub mod sessions;
pub mod sgd;
pub mod support;
pub mod weave;

pub use drive::{run, RunSpec, SessionRun};
pub use fake_llms::Mode;
pub use score::{score, ContextView, Score};
pub use sessions::{Class, Fact, Kind, Session, SessionSpec, Shape, Source};
