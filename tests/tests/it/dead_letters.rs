//! Dead letters by filter, in the protocol: bulk retry and purge by
//! reason, domain and age (each alone and combined), the dry run that
//! counts first, pages of a filtered listing, and a walk over more letters
//! than one batch whose scores are all equal — on one Redis and on every
//! node of a Redis Cluster (the scripts touch only keys of the queue's
//! hash tag).
//!
//! Letters are made as the runtime makes them (claim, then fail with the
//! reason the runtime records); their age is set by rewriting their score
//! and `failed_at`, so no test waits for time to pass.

use std::time::Duration;

use compactor_e2e::cluster::{RedisCluster, NODES};
use compactor_e2e::{key, TestRedis};
use compactor_producer::queue::{
    BulkAction, BulkReport, ClaimOutcome, DeadFilter, DeadReason, EnqueueOutcome, FailAction,
    JobState, Queue, Trigger,
};
use compactor_shared::EntityKey;

const HOUR_MS: u64 = 3_600_000;

/// The queue under test and a plain connection to the server holding its
/// keys (for backdating letters).
struct Dlq {
    queue: Queue,
    conn: redis::Connection,
}

impl Dlq {
    /// Dead-letters a job of `domain`/`entity` with `reason`, `age_ms` ago
    /// (0: now). Returns its entry.
    async fn letter(&mut self, domain: &str, entity: &str, reason: &str, age_ms: u64) -> String {
        let k = EntityKey::parse(domain, entity).unwrap();
        self.queue
            .request_compaction(&k, Trigger::Auto)
            .await
            .unwrap();
        let ClaimOutcome::Claimed(job) = self.queue.claim("w").await.unwrap() else {
            panic!("claimed")
        };
        self.queue
            .fail(&job, FailAction::DeadLetter, reason)
            .await
            .unwrap();
        let entry = format!("{}|{}", k.job_key(), job.job_id);
        if age_ms > 0 {
            let letter = self.queue.dead_letter(&entry).await.unwrap().unwrap();
            self.backdate(&entry, letter.failed_at_ms - age_ms);
        }
        entry
    }

    /// Sets when `entry` died to `at_ms`.
    fn backdate(&mut self, entry: &str, at_ms: u64) {
        let keys = self.queue.keys();
        redis::pipe()
            .cmd("ZADD")
            .arg(keys.dead())
            .arg("XX")
            .arg(at_ms)
            .arg(entry)
            .cmd("HSET")
            .arg(keys.dead_record(entry))
            .arg("failed_at")
            .arg(at_ms)
            .exec(&mut self.conn)
            .unwrap();
    }

    async fn entries(&self) -> Vec<String> {
        let mut entries: Vec<String> = self
            .queue
            .dead_letters(1_000)
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.entry)
            .collect();
        entries.sort();
        entries
    }

    async fn bulk(&self, filter: &DeadFilter, action: BulkAction, dry_run: bool) -> BulkReport {
        self.queue
            .dead_letters_bulk(filter, action, dry_run)
            .await
            .unwrap()
    }
}

fn reason(r: &str) -> Option<DeadReason> {
    Some(DeadReason::parse(r).unwrap())
}

fn sample_entries(report: &BulkReport) -> Vec<String> {
    let mut entries: Vec<String> = report.sample.iter().map(|d| d.entry.clone()).collect();
    entries.sort();
    entries
}

fn sorted(entries: &[&String]) -> Vec<String> {
    let mut v: Vec<String> = entries.iter().map(|e| (*e).clone()).collect();
    v.sort();
    v
}

/// The whole story, on whichever Redis `t` is on.
async fn bulk_retry_and_purge(mut t: Dlq) {
    let exhausted = "gave up after 3 attempts: llm: 503";
    let old_chat = t.letter("chat", "a", exhausted, 2 * HOUR_MS).await;
    let new_chat = t.letter("chat", "b", "unknown workstream", 0).await;
    let old_support = t
        .letter(
            "support",
            "c",
            "stalled: the lease expired 3 times",
            2 * HOUR_MS,
        )
        .await;
    let new_support = t.letter("support", "d", exhausted, 0).await;
    let cancelled = t.letter("chat", "e", "cancelled", 0).await;
    assert_eq!(t.entries().await.len(), 5);

    // A dry run counts and shows, and changes nothing.
    let by_reason = DeadFilter {
        reason: reason("exhausted"),
        ..DeadFilter::default()
    };
    let dry = t.bulk(&by_reason, BulkAction::Retry, true).await;
    assert_eq!((dry.matched, dry.applied), (2, 0));
    assert_eq!(sample_entries(&dry), sorted(&[&old_chat, &new_support]));
    assert!(dry.retried.is_empty());
    assert_eq!(t.entries().await.len(), 5);

    // Reason and domain together: one letter, requested again like any
    // request (a new job, its trigger kept) and gone from the set.
    let chat_exhausted = DeadFilter {
        domain: Some("chat".into()),
        ..by_reason.clone()
    };
    let retried = t.bulk(&chat_exhausted, BulkAction::Retry, false).await;
    assert_eq!(
        (retried.matched, retried.applied, retried.skipped),
        (1, 1, 0)
    );
    assert_eq!(retried.retried.len(), 1);
    let r = &retried.retried[0];
    assert_eq!(r.entry, old_chat);
    assert_eq!(r.key, key("a"));
    assert_eq!(r.trigger, Some(Trigger::Auto));
    let EnqueueOutcome::Added { job_id } = r.outcome else {
        panic!("a new job: {:?}", r.outcome)
    };
    assert_eq!(
        t.queue.job_state(&key("a")).await.unwrap(),
        Some(JobState::Waiting { job_id })
    );
    assert!(t.queue.dead_letter(&old_chat).await.unwrap().is_none());
    assert_eq!(t.entries().await.len(), 4);

    // Age alone: only the old stalled letter is left past an hour.
    let old = DeadFilter {
        older_than: Some(Duration::from_secs(3_600)),
        ..DeadFilter::default()
    };
    let dry = t.bulk(&old, BulkAction::Purge, true).await;
    assert_eq!((dry.matched, dry.applied), (1, 0));
    assert_eq!(sample_entries(&dry), std::slice::from_ref(&old_support));

    // Dedup against a live job: the entity has a waiting job already, the
    // retry joins it (no second job).
    let EnqueueOutcome::Added { job_id: live } = t
        .queue
        .request_compaction(&EntityKey::parse("support", "d").unwrap(), Trigger::Auto)
        .await
        .unwrap()
    else {
        panic!("added")
    };
    let retried = t.bulk(&by_reason, BulkAction::Retry, false).await;
    assert_eq!((retried.matched, retried.applied), (1, 1));
    assert_eq!(retried.retried[0].entry, new_support);
    assert_eq!(
        retried.retried[0].outcome,
        EnqueueOutcome::Coalesced { job_id: live }
    );

    // Purge by domain and age together, then by a reason another build
    // records (`cancelled`), read as an opaque token.
    let old_support_only = DeadFilter {
        domain: Some("support".into()),
        ..old.clone()
    };
    let purged = t.bulk(&old_support_only, BulkAction::Purge, false).await;
    assert_eq!((purged.matched, purged.applied), (1, 1));
    assert!(t.queue.dead_letter(&old_support).await.unwrap().is_none());
    let by_cancelled = DeadFilter {
        reason: reason("cancelled"),
        ..DeadFilter::default()
    };
    let purged = t.bulk(&by_cancelled, BulkAction::Purge, false).await;
    assert_eq!((purged.matched, purged.applied), (1, 1));
    assert_eq!(sample_entries(&purged), [cancelled]);

    // One entry, by name; a second retry of it finds nothing.
    let one = DeadFilter {
        entry: Some(new_chat.clone()),
        ..DeadFilter::default()
    };
    let dry = t.bulk(&one, BulkAction::Retry, true).await;
    assert_eq!((dry.matched, dry.applied), (1, 0));
    let retried = t.bulk(&one, BulkAction::Retry, false).await;
    assert_eq!((retried.matched, retried.applied), (1, 1));
    assert_eq!(t.bulk(&one, BulkAction::Retry, false).await.matched, 0);
    assert!(t.entries().await.is_empty());
}

#[tokio::test]
async fn bulk_retry_and_purge_by_reason_domain_and_age_on_redis() {
    let redis = TestRedis::new();
    let conn = redis::Client::open(redis.url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    bulk_retry_and_purge(Dlq {
        queue: redis.queue().await,
        conn,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_retry_and_purge_by_reason_domain_and_age_on_every_cluster_node() {
    let cluster = RedisCluster::shared();
    for node in 0..NODES {
        let redis = TestRedis::on_cluster(cluster, node);
        bulk_retry_and_purge(Dlq {
            queue: redis.queue().await,
            conn: cluster.connection(node),
        })
        .await;
    }
}

/// More letters than one batch, all dead in the same millisecond: the
/// filtered page walks past them with its cursor, and a bulk purge takes
/// every match however the batches fall, past batches of entries whose
/// records are gone.
async fn walk_many_equal_scores(mut t: Dlq) {
    let mut entries = Vec::new();
    for i in 0..450 {
        let domain = if i % 3 == 0 { "support" } else { "chat" };
        entries.push(
            t.letter(domain, &format!("e{i}"), "unknown workstream", 0)
                .await,
        );
    }
    let at = t
        .queue
        .dead_letter(&entries[0])
        .await
        .unwrap()
        .unwrap()
        .failed_at_ms;
    for entry in &entries {
        t.backdate(entry, at);
    }
    let support = DeadFilter {
        domain: Some("support".into()),
        ..DeadFilter::default()
    };
    // Pages of 40, newest first: each support letter once.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = t
            .queue
            .dead_letters_page(&support, cursor, 40)
            .await
            .unwrap();
        assert!(page.letters.len() <= 40);
        seen.extend(page.letters.into_iter().map(|d| d.entry));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let mut want: Vec<String> = entries.iter().step_by(3).cloned().collect();
    want.sort();
    let mut got = seen.clone();
    got.sort();
    got.dedup();
    assert_eq!(got.len(), seen.len(), "no letter listed twice");
    assert_eq!(got, want);

    // The chat letters' records are gone (expired before a sweep trimmed
    // the set): whole batches of entries without records, which the walk
    // steps past.
    let keys = t.queue.keys();
    let mut pipe = redis::pipe();
    for entry in entries.iter().filter(|e| e.starts_with("compact:chat:")) {
        pipe.del(keys.dead_record(entry)).ignore();
    }
    pipe.exec(&mut t.conn).unwrap();
    let purged = t.bulk(&support, BulkAction::Purge, false).await;
    assert_eq!((purged.matched, purged.applied), (150, 150));
    assert_eq!(purged.sample.len(), 10);
    let every = t
        .bulk(&DeadFilter::default(), BulkAction::Purge, true)
        .await;
    assert_eq!(every.matched, 0, "no letter with a record is left");
    let indexed: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys.dead())
        .arg(0)
        .arg(-1)
        .query(&mut t.conn)
        .unwrap();
    assert_eq!(
        indexed.len(),
        300,
        "entries without records are the sweep's"
    );
    assert!(indexed.iter().all(|e| e.starts_with("compact:chat:")));
}

#[tokio::test]
async fn a_walk_goes_past_batches_of_equal_scores_on_redis() {
    let redis = TestRedis::new();
    let conn = redis::Client::open(redis.url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    walk_many_equal_scores(Dlq {
        queue: redis.queue().await,
        conn,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_goes_past_batches_of_equal_scores_on_a_cluster() {
    let cluster = RedisCluster::shared();
    let redis = TestRedis::on_cluster(cluster, 2);
    walk_many_equal_scores(Dlq {
        queue: redis.queue().await,
        conn: cluster.connection(2),
    })
    .await;
}
