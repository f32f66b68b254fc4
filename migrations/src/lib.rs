//! The database schema of compactor. The sea-orm migrations (workstreams,
//! messages, memory_block_entries, compaction_runs) are added with the
//! storage work; this crate exists now so the workspace has its final shape.
