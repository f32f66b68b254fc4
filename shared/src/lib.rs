//! The domain model and the pure compaction engine of compactor.
//!
//! Nothing in this crate does I/O: every rule of compaction (when to
//! trigger, where to cut, what the summarizer sees, how its answer is parsed
//! and merged, what the next turn's context is) is a function of its inputs,
//! so it can be unit- and property-tested without Redis, a database or an
//! LLM.
//!
//! # Layout
//! - [`key`]: `EntityKey`, the validated `(domain, entity_id)`.
//! - [`payload`]: the versioned job payload a queue carries.
//! - [`message`]: messages and their typed parts.
//! - [`tokens`]: token estimation (`chars / 3`, or a real tokenizer).
//! - [`trigger`]: when a workstream is due for compaction.
//! - [`branch`]: what is kept of a branch the user left (file operations,
//!   budget, rendering).
//! - [`boundary`]: which messages are compacted and which stay verbatim.
//! - [`prune`]: soft compaction of old tool output.
//! - [`transcript`]: the compacted span rendered for the summarizer.
//! - [`chunk`]: the transcript cut into summarizer-sized chunks.
//! - [`prompt`]: the prompts sent to a summarizer.
//! - [`parse`]: salvaging sections and a state delta from its answer.
//! - [`summary`]: the structured summary.
//! - [`state`]: workstream state, its delta and the capped merge.
//! - [`stated`]: the user's decisions and constraints, and what superseded them.
//! - [`evidence`]: lines of compacted messages kept verbatim, chosen by
//!   form, rarity and coverage under the budget the context leaves.
//! - [`extractive`]: the offline summarizer.
//! - [`repeats`]: no line of a context nearly repeats another.
//! - [`context`]: what the next turn is sent, and the guards around it.
//! - [`memory`]: when memory-block entries are folded.
//! - [`pipeline`]: one compaction, start to end, driven by a page source
//!   and a summarizer (the worker, the tests and the benchmarks run it).
//! - [`config`]: every engine setting with its default.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod boundary;
pub mod branch;
pub mod chunk;
pub mod config;
pub mod context;
pub mod domain;
pub mod evidence;
pub mod extractive;
pub mod key;
pub mod memory;
pub mod message;
pub mod parse;
pub mod payload;
pub mod pipeline;
pub mod prompt;
pub mod prune;
pub mod repeats;
pub mod state;
pub mod stated;
pub mod summary;
pub mod text;
pub mod tokens;
pub mod transcript;
pub mod trigger;

pub use domain::Domain;
pub use key::{EntityKey, KeyError};
pub use message::{Message, MessageId, Part, Role};
pub use state::{StateCaps, StateDelta, StateItem, WorkstreamState};
pub use summary::Summary;
pub use tokens::{CharEstimator, TokenEstimator};
