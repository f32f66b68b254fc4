//! Recovering jobs whose worker died: a lease that expired without being
//! renewed returns its job to the queue at its original place in line, and
//! a job that has stalled `max_stalls` times is dead-lettered instead (it
//! may be what kills its workers). Every worker sweeps; each expired job
//! is handled once, whichever sweep sees it first.

use super::convert::millis;
use super::error::{redis_error, QueueError};
use super::handle::Queue;
use crate::events::{InternalEvent, QueueKeyOfWrongType};

/// Result of one recovery sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Jobs whose lease expired, returned to the queue.
    pub recovered: u64,
    /// Jobs over the stall bound, dead-lettered.
    pub dead_lettered: u64,
    /// Jobs over the stall bound left running as they were, because their
    /// dead letter's record key holds another type (a hand edit): never
    /// overwritten, each counted in `compactor_queue_wrong_type_keys_total`
    /// and logged by name, met again by every sweep until it is moved aside.
    pub wrong_type: u64,
}

impl Queue {
    /// Returns jobs with an expired lease to the queue (at most `batch` per
    /// call), dead-lettering those over `max_stalls`. Safe to run from every
    /// worker concurrently: each expired job is handled once.
    pub async fn recover(&self, batch: u32) -> Result<Recovery, QueueError> {
        self.recover_listing(batch)
            .await
            .map(|(recovery, _)| recovery)
    }

    /// [`Queue::recover`], with the entries of the dead letters it made
    /// (`<member>|<job_id>`, as [`Queue::dead_letter`] reads them), so the
    /// caller can tell what died: the worker's sweep writes their
    /// `compaction.dead_lettered` events.
    pub async fn recover_listing(&self, batch: u32) -> Result<(Recovery, Vec<String>), QueueError> {
        let mut conn = self.conn.clone();
        let (recovered, dead_lettered, entries, wrong_type): (u64, u64, Vec<String>, Vec<String>) =
            self.scripts
                .recover
                .key(self.keys.running())
                .key(self.keys.waiting())
                .key(self.keys.dead())
                .key(self.keys.seq())
                .key(self.keys.urgent())
                .arg(self.keys.prefix())
                .arg(self.config.max_stalls)
                .arg(batch.max(1))
                .arg(self.config.dead_max_count.max(1))
                .arg(millis(self.config.dead_max_age))
                .arg(self.keys.wake_channel())
                .invoke_async(&mut conn)
                .await
                .map_err(redis_error("recover"))?;
        for key in &wrong_type {
            QueueKeyOfWrongType {
                op: "recover",
                key: Some(key),
            }
            .emit();
        }
        Ok((
            Recovery {
                recovered,
                dead_lettered,
                wrong_type: wrong_type.len() as u64,
            },
            entries,
        ))
    }
}
