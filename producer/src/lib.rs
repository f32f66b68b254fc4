//! Library for app code: request compactions and inspect the queue.
//!
//! - [`queue`]: the Redis queue protocol (keys, scripts, payload) and its
//!   client, used by producers and by `compactor-worker`.
//! - [`metrics`]: the names of every metric recorded.
//!
//! The storage-backed producer API (`append_messages`, `finalize_turn`,
//! `wait_until_ready`, `build_context`) is added with the storage work.

pub mod events;
pub mod metrics;
pub mod queue;
pub mod settings;
pub mod store;

pub use compactor_shared as engine;
