//! Compaction events, delivered durably: the worker's side of the
//! transactional outbox (`compactor_producer::store`'s `events` and
//! `event_deliveries`).
//!
//! Every state change of a compaction writes its event in the transaction
//! that makes the change (the job's lease, its fenced commit, its failure
//! path; requests and dead letters right after Redis took them). The
//! [`relay`] of each worker then puts the events on a Redis Stream and
//! posts them, signed ([`sign`]), to the configured webhooks
//! ([`config`]), retrying with backoff; `docs/INTERNALS.md` explains the
//! design and its guarantees.

pub mod config;
pub mod relay;
pub mod sign;

pub use config::{EventsSettings, WebhookSecret, WebhookSettings};
pub use relay::{Relay, Webhook};
