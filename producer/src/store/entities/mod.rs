//! sea-orm entities, one per table of `compactor-migrations`.
//!
//! They mirror the schema column for column and stay private to the store:
//! JSON columns are plain `String`s here and are decoded (with a typed
//! [`CorruptRow`](super::StoreError::CorruptRow) error) where the store
//! turns a row into a domain value, so a bad row is reported, not a panic
//! deep inside the ORM.

pub(crate) mod branch_summary;
pub(crate) mod compaction_run;
pub(crate) mod event;
pub(crate) mod event_delivery;
pub(crate) mod memory_block_entry;
pub(crate) mod message;
pub(crate) mod workstream;
