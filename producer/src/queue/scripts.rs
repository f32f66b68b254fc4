//! The Lua scripts of the queue, one per transition (`scripts/*.lua`),
//! each with the shared prelude (`scripts/prelude.lua`) in front: Redis Lua
//! has no includes. Built once per [`Queue`](super::Queue) and loaded on
//! every node at connect time, so pipelines can call them by SHA;
//! `redis::Script` reloads a script on `NOSCRIPT` by itself.

use redis::Script;

use super::conn::Conn;
use super::error::{redis_error, QueueError};

/// Every script of the queue. The operations that call them live in the
/// module of their operation.
pub(super) struct Scripts {
    pub(super) enqueue: Script,
    /// Completes finished jobs and claims due ones (`settle` module).
    pub(super) settle: Script,
    pub(super) renew: Script,
    pub(super) fail: Script,
    pub(super) recover: Script,
    pub(super) release: Script,
    /// The worker registry (`workers` module).
    pub(super) heartbeat: Script,
    pub(super) workers: Script,
    /// A job's progress, for chat-side waiters (`progress` module).
    pub(super) progress: Script,
    /// Puts records back in their set (`repair` module).
    pub(super) repair: Script,
}

/// Builds a script from `scripts/<name>.lua` with the shared prelude
/// (server time, adding, completing, claiming and dead-lettering jobs).
macro_rules! script {
    ($name:literal) => {
        Script::new(concat!(
            include_str!("scripts/prelude.lua"),
            include_str!(concat!("scripts/", $name, ".lua"))
        ))
    };
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            enqueue: script!("enqueue"),
            settle: script!("settle"),
            renew: script!("renew"),
            fail: script!("fail"),
            recover: script!("recover"),
            release: script!("release"),
            heartbeat: script!("heartbeat"),
            workers: script!("workers"),
            progress: script!("progress"),
            repair: script!("repair"),
        }
    }

    /// `SCRIPT LOAD`s every script, so pipelines can call them by SHA. On a
    /// cluster the client sends `SCRIPT LOAD` to every node, so whichever
    /// node owns the queue's slot (now, or after a failover) has them.
    pub(super) async fn load(&self, conn: &Conn) -> Result<(), QueueError> {
        let mut conn = conn.clone();
        for script in [
            &self.enqueue,
            &self.settle,
            &self.renew,
            &self.fail,
            &self.recover,
            &self.release,
            &self.heartbeat,
            &self.workers,
            &self.progress,
            &self.repair,
        ] {
            script
                .prepare_invoke()
                .load_async(&mut conn)
                .await
                .map_err(redis_error("SCRIPT LOAD"))?;
        }
        Ok(())
    }
}
