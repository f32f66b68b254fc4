//! Library for app code: append messages, finish turns, enqueue compaction
//! and build the next turn's context.
//!
//! Today this crate re-exports the engine; the Redis queue client and the
//! storage-backed producer API are added by the queue and end-to-end work.

pub use compactor_shared as engine;
