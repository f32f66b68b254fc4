//! Putting job records back in their set. A record whose state says
//! waiting while the waiting set has no entry for it is never claimed, and
//! every request for its entity is coalesced into it; a running record
//! with no running-set entry is never recovered when its worker dies. Sets
//! lose entries when Redis evicts or someone edits keys by hand (and did
//! when a script could fail half-way; scripts now check before they
//! write). The next request for the entity repairs its record (see
//! `enqueue.lua`); these calls do it without one: for named entities (the
//! reconciliation sweep, which knows every workstream over its trigger),
//! and by walking every job record of the queue a bounded step at a time
//! (the workers' recovery sweep).

use compactor_shared::EntityKey;

use super::call::Call;
use super::error::{redis_error, QueueError};
use super::handle::Queue;
use super::keys::Keys;

/// What a repair did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repair {
    /// Waiting jobs put back in line, at their original place.
    pub requeued: u64,
    /// Running jobs tracked again at their lease deadline: recovery
    /// returns them as expired leases once it has passed, unless their
    /// worker is alive and renews them.
    pub relisted: u64,
    /// Whether this step ended a walk over every job record (the next step
    /// starts a new one). Always false for named entities.
    pub walk_ended: bool,
}

impl Repair {
    /// Records put back, of either kind.
    pub fn repaired(&self) -> u64 {
        self.requeued + self.relisted
    }
}

impl Queue {
    /// Repairs the job records of `keys` (see the module docs).
    pub async fn repair_jobs(&self, keys: &[EntityKey]) -> Result<Repair, QueueError> {
        if keys.is_empty() {
            return Ok(Repair::default());
        }
        let mut invocation = self.repair_invocation("members");
        for key in keys {
            invocation.arg(Keys::member(key));
        }
        self.run_repair(invocation).await
    }

    /// One step of the walk over every job record of the queue: looks at
    /// about `count` keys of the Redis keyspace (`SCAN … COUNT`; the
    /// queue's own keys are a part of it) from where the previous step
    /// stopped, and repairs the records among them. Every process may walk:
    /// they share the cursor, and a repair is done once.
    pub async fn repair_step(&self, count: u32) -> Result<Repair, QueueError> {
        let mut invocation = self.repair_invocation("scan");
        invocation.arg(count.max(1));
        self.run_repair(invocation).await
    }

    fn repair_invocation(&self, mode: &str) -> Call<'_> {
        let keys = self.keys();
        let mut invocation = self.scripts.repair.prepare_invoke();
        invocation
            .key(keys.waiting())
            .key(keys.running())
            .key(keys.repair_cursor())
            .key(keys.urgent())
            .arg(keys.prefix())
            .arg(keys.wake_channel())
            .arg(mode);
        invocation
    }

    async fn run_repair(&self, invocation: Call<'_>) -> Result<Repair, QueueError> {
        let mut conn = self.conn.clone();
        let (requeued, relisted, wrapped): (u64, u64, u64) = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error("repair"))?;
        Ok(Repair {
            requeued,
            relisted,
            walk_ended: wrapped == 1,
        })
    }
}
