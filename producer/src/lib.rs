//! Library for app code: store conversations, request compactions, wait
//! for them, and build the next turn's context.
//!
//! - [`client`]: [`client::Compactor`], the API a chat backend calls
//!   (`append_messages`, `finalize_turn`, `wait` / `wait_until_ready`,
//!   `build_context`, `compact_now`, `status`).
//! - [`store`]: the database (sea-orm, PostgreSQL or SQLite): workstreams,
//!   messages, memory entries, compaction runs, the entity lease and the
//!   fenced commit.
//! - [`queue`]: the Redis queue protocol (keys, scripts, payload), its
//!   client, and the registry of live workers, used by producers and by
//!   `compactor-worker`.
//! - [`events`]: everything observable — the catalogue of every metric
//!   (names, help, typed label values, buckets), the events that write a
//!   log line and their metrics from the same fields, and what a finished
//!   compaction announces ([`events::CompactionEvent`]).
//! - [`reconcile`]: re-requesting compactions the queue lost.
//! - [`recall`]: finding compacted messages again (full-text search,
//!   newest first, with the run that folded each).
//! - [`settings`]: loading configuration (file, environment).
//! - [`redact`]: hiding passwords in connection strings.
//! - [`metrics`]: the `domain` label's allow-list (the catalogue's names
//!   are re-exported there too).

pub mod backoff;
pub mod client;
pub mod events;
pub mod metrics;
pub mod queue;
mod ready;
pub mod recall;
pub mod reconcile;
pub mod redact;
pub mod settings;
pub mod store;

pub use compactor_shared as engine;
