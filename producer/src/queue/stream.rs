//! The event stream: compaction events, put on a Redis Stream by the
//! worker's outbox relay for consumers inside the cluster
//! (`XREADGROUP`/`XREAD` on [`Keys::events_stream`]).
//!
//! The stream's key is under the queue's hash tag, so it lives on the
//! queue's shard of a cluster. It is bounded with `MAXLEN ~ N`: Redis trims
//! whole macro-nodes, so the stream holds at least `N` entries and a few
//! more, never fewer. Each entry has three fields: `id` (the event id,
//! the key consumers deduplicate on: a relay that dies after `XADD` and
//! before recording it adds the entry again), `type` and `event` (the
//! event's JSON, as a webhook receives it).

use super::error::redis_error;
use super::handle::Queue;
use super::keys::Keys;
use super::QueueError;

/// One entry to add: the event's id, its type and its JSON.
#[derive(Debug, Clone, Copy)]
pub struct StreamEntry<'a> {
    pub id: &'a str,
    pub kind: &'a str,
    pub json: &'a str,
}

impl Queue {
    /// Adds `entries` to the event stream, in order, in one pipelined round
    /// trip, trimming it to about `maxlen` entries. Returns the stream ids
    /// Redis gave them.
    pub async fn add_events(
        &self,
        entries: &[StreamEntry<'_>],
        maxlen: usize,
    ) -> Result<Vec<String>, QueueError> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.keys.events_stream();
        let mut pipe = redis::pipe();
        for entry in entries {
            pipe.cmd("XADD")
                .arg(&key)
                .arg("MAXLEN")
                .arg("~")
                .arg(maxlen)
                .arg("*")
                .arg("id")
                .arg(entry.id)
                .arg("type")
                .arg(entry.kind)
                .arg("event")
                .arg(entry.json);
        }
        let mut conn = self.conn.clone();
        pipe.query_async(&mut conn)
            .await
            .map_err(redis_error("add_events"))
    }
}

impl Keys {
    /// The Redis Stream of compaction events: `{cq:<queue>}:events`.
    pub fn events_stream(&self) -> String {
        format!("{}events", self.prefix())
    }
}
