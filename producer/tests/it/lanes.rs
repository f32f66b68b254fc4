//! The priority lane (issue 15, item 6), against the real Redis: manual and
//! reactive requests are claimed ahead of automatic ones, whatever the
//! backlog and whichever domain it comes from; a coalesced urgent request
//! moves its waiting job over; follow-ups keep their request's lane; and
//! retries, recovery, hand-backs and repairs put an urgent job back in the
//! urgent lane, its back-off delay kept. Dedup and the one-follow-up rule
//! are those of `queue.rs`, whose tests cover them unchanged.

use std::time::Duration;

use compactor_producer::queue::{
    ClaimOutcome, Completion, EnqueueOutcome, FailAction, JobStage, Keys, Queue, QueueConfig,
    Recovery, Trigger,
};
use compactor_shared::EntityKey;
use redis::aio::MultiplexedConnection;

use crate::queue::{claim, del, exec, recover_until_something};
use crate::support::queue::TestQueue;

/// The backlog of automatic jobs the issue names.
const BACKLOG: usize = 10_000;

fn key(domain: &str, entity: &str) -> EntityKey {
    EntityKey::parse(domain, entity).unwrap()
}

fn manual() -> Trigger {
    Trigger::Manual {
        instructions: Some("keep the schema decisions".into()),
    }
}

/// `n` automatic requests for entities `b0`… of `domain`, in pipelined
/// batches: the backlog every scenario here is about.
async fn flood(q: &Queue, domain: &str, n: usize) {
    let requests: Vec<(EntityKey, Trigger)> = (0..n)
        .map(|i| (key(domain, &format!("b{i}")), Trigger::Auto))
        .collect();
    for chunk in requests.chunks(5_000) {
        q.enqueue_many(chunk).await.unwrap();
    }
}

/// Asserts that the next claim takes `k`, requested with `trigger`, and
/// the one after it the oldest job of the backlog (`chat:b0`): the urgent
/// request went first.
async fn claimed_before_the_backlog(q: &Queue, k: &EntityKey, trigger: Trigger) {
    let job = claim(q).await;
    assert_eq!((&job.key, &job.payload.trigger), (k, &trigger));
    assert_eq!(claim(q).await.key, key("chat", "b0"));
}

/// (all waiting, of them urgent, of them normal).
async fn waiting(q: &Queue) -> (u64, u64, u64) {
    let c = q.counts().await.unwrap();
    (c.waiting, c.waiting_urgent, c.waiting_normal)
}

/// The score of `k`'s entry in the set `set`, if it has one.
async fn score(conn: &mut MultiplexedConnection, set: &str, k: &EntityKey) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(set)
        .arg(Keys::member(k))
        .query_async(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_manual_request_overtakes_a_backlog_of_10000_automatic_jobs() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    flood(q, "chat", BACKLOG).await;
    let k = key("chat", "urgent");
    let added = q.request_compaction(&k, manual()).await.unwrap();
    assert!(matches!(added, EnqueueOutcome::Added { .. }), "{added:?}");
    assert_eq!(waiting(q).await, (10_001, 1, 10_000));
    // Claimed next; the backlog then runs in its own order.
    claimed_before_the_backlog(q, &k, manual()).await;
    assert_eq!(waiting(q).await, (9_999, 0, 9_999));
}

#[tokio::test]
async fn a_reactive_request_overtakes_a_backlog_of_10000_automatic_jobs() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    flood(q, "chat", BACKLOG).await;
    let k = key("chat", "overflowing");
    q.request_compaction(&k, Trigger::Reactive).await.unwrap();
    claimed_before_the_backlog(q, &k, Trigger::Reactive).await;
}

#[tokio::test]
async fn one_domain_flooding_automatic_jobs_cannot_starve_another_domains_manual_request() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    flood(q, "flood", BACKLOG).await;
    let quiet = key("quiet", "asks");
    q.request_compaction(&quiet, manual()).await.unwrap();
    // A worker filling several slots at once gets it first, then the
    // flood in its order.
    let settled = q.settle(&[], 3, "w1").await.unwrap();
    let keys: Vec<EntityKey> = settled
        .claimed
        .into_iter()
        .map(|c| match c {
            ClaimOutcome::Claimed(job) => job.key,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(keys, [quiet, key("flood", "b0"), key("flood", "b1")]);
    // The quiet domain's automatic request waits its turn like the flood's.
    let later = key("quiet", "later");
    q.request_compaction(&later, Trigger::Auto).await.unwrap();
    assert_eq!(claim(q).await.key, key("flood", "b2"));
}

#[tokio::test]
async fn an_urgent_request_coalesced_into_an_automatic_job_moves_it_to_the_urgent_lane() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let mut conn = t.raw().await;
    flood(q, "chat", BACKLOG).await;
    // Requested last: behind the whole backlog in the normal lane.
    let k = key("chat", "late");
    let EnqueueOutcome::Added { job_id } = q.request_compaction(&k, Trigger::Auto).await.unwrap()
    else {
        panic!("a new job")
    };
    let behind = score(&mut conn, &q.keys().waiting(), &k).await.unwrap();
    // Coalesced as before (one job per entity), now in the urgent lane at
    // the same place in time.
    assert_eq!(
        q.request_compaction(&k, manual()).await.unwrap(),
        EnqueueOutcome::Coalesced { job_id }
    );
    assert_eq!(waiting(q).await, (10_001, 1, 10_000));
    assert_eq!(score(&mut conn, &q.keys().waiting(), &k).await, None);
    assert_eq!(score(&mut conn, &q.keys().urgent(), &k).await, Some(behind));
    // A later automatic or reactive request does not move it back or take
    // its instructions.
    for trigger in [Trigger::Auto, Trigger::Reactive] {
        assert_eq!(
            q.request_compaction(&k, trigger).await.unwrap(),
            EnqueueOutcome::Coalesced { job_id }
        );
    }
    assert_eq!(waiting(q).await, (10_001, 1, 10_000));
    let job = claim(q).await;
    assert_eq!((job.key, job.job_id), (k, job_id));
    assert_eq!(job.payload.trigger, manual(), "the manual request's");

    // A reactive request moves an automatic job too, with its trigger.
    let other = key("chat", "b500");
    q.request_compaction(&other, Trigger::Reactive)
        .await
        .unwrap();
    claimed_before_the_backlog(q, &other, Trigger::Reactive).await;
}

#[tokio::test]
async fn a_follow_up_keeps_the_lane_of_the_request_that_made_it() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    // A reactive request while an automatic job runs: its follow-up runs
    // ahead of the backlog, and a later automatic request does not lower it.
    let k = key("chat", "busy");
    q.request_compaction(&k, Trigger::Auto).await.unwrap();
    let running = claim(q).await;
    q.request_compaction(&k, Trigger::Reactive).await.unwrap();
    q.request_compaction(&k, Trigger::Auto).await.unwrap();
    flood(q, "chat", 100).await;
    let Completion::FollowUpAdded { job_id } = q.complete(&running).await.unwrap() else {
        panic!("one follow-up")
    };
    assert_eq!(waiting(q).await, (101, 1, 100));
    let follow_up = claim(q).await;
    assert_eq!(follow_up.job_id, job_id);
    assert_eq!(follow_up.payload.trigger, Trigger::FollowUp);

    // An automatic request's follow-up waits behind the backlog, as before.
    q.request_compaction(&k, Trigger::Auto).await.unwrap();
    q.complete(&follow_up).await.unwrap();
    assert_eq!(waiting(q).await, (101, 0, 101));
    assert_eq!(claim(q).await.key, key("chat", "b0"));

    // A manual request's follow-up keeps its instructions and its lane.
    let other = key("chat", "b1");
    let b1 = claim(q).await;
    assert_eq!(b1.key, other);
    q.request_compaction(&other, manual()).await.unwrap();
    q.complete(&b1).await.unwrap();
    let follow_up = claim(q).await;
    assert_eq!(
        (follow_up.key, follow_up.payload.trigger),
        (other, manual())
    );
}

#[tokio::test]
async fn a_retry_in_the_urgent_lane_keeps_its_back_off_delay() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let mut conn = t.raw().await;
    let k = key("chat", "manual-retry");
    q.request_compaction(&k, manual()).await.unwrap();
    let first = claim(q).await;
    q.fail(
        &first,
        FailAction::Retry {
            delay: Duration::from_secs(60),
        },
        "429",
    )
    .await
    .unwrap();
    flood(q, "chat", 3).await;
    assert_eq!(waiting(q).await, (4, 1, 3));
    let Some(JobStage::Waiting { due_in, .. }) = q.job_progress(&k).await.unwrap().stage else {
        panic!("waiting for its retry")
    };
    assert!(due_in > Duration::from_secs(50), "{due_in:?}");
    // Not due: the automatic jobs run meanwhile.
    for i in 0..3 {
        assert_eq!(claim(q).await.key, key("chat", &format!("b{i}")));
    }
    let next_due = match q.claim("w1").await.unwrap() {
        ClaimOutcome::Empty { next_due_in } => next_due_in,
        other => panic!("the retry is not due yet: {other:?}"),
    };
    let about_a_minute = Duration::from_secs(50)..=Duration::from_secs(60);
    assert!(
        next_due.is_some_and(|d| about_a_minute.contains(&d)),
        "{next_due:?}"
    );
    // Once due (time moved on by hand), it runs, ahead of newer backlog.
    flood(q, "late", 3).await;
    exec(
        &mut conn,
        redis::cmd("ZADD")
            .arg(q.keys().urgent())
            .arg(0)
            .arg(Keys::member(&k)),
    )
    .await;
    let again = claim(q).await;
    assert_eq!((again.key, again.attempt), (k, 2));
}

#[tokio::test]
async fn recovery_release_and_repair_put_urgent_jobs_back_in_the_urgent_lane() {
    let t = TestQueue::with(QueueConfig {
        lease_ttl: Duration::from_millis(20),
        ..QueueConfig::default()
    })
    .await;
    let q = &t.queue;
    let mut conn = t.raw().await;
    flood(q, "chat", 100).await;

    // A worker takes the manual job and dies: recovery returns it to the
    // urgent lane, so it is the next job again.
    let k = key("chat", "crashed");
    q.request_compaction(&k, manual()).await.unwrap();
    let crashed = claim(q).await;
    assert_eq!(crashed.key, k);
    assert_eq!(
        recover_until_something(q).await,
        Recovery {
            recovered: 1,
            dead_lettered: 0,
            wrong_type: 0,
        }
    );
    assert_eq!(waiting(q).await, (101, 1, 100));
    let again = claim(q).await;
    assert_eq!(
        (again.key.clone(), again.job_id),
        (k.clone(), crashed.job_id)
    );

    // Handed back at shutdown: the urgent lane again.
    assert!(q.release(&again).await.unwrap());
    assert_eq!(waiting(q).await, (101, 1, 100));
    let again = claim(q).await;
    assert_eq!(again.key, k);
    q.complete(&again).await.unwrap();

    // The urgent set lost (an eviction): the named repair and the walk put
    // the job back in the urgent lane, not the normal one.
    let lost = key("chat", "evicted");
    q.request_compaction(&lost, manual()).await.unwrap();
    del(&mut conn, q.keys().urgent()).await;
    assert_eq!(waiting(q).await, (100, 0, 100));
    assert_eq!(
        q.repair_jobs(std::slice::from_ref(&lost))
            .await
            .unwrap()
            .requeued,
        1
    );
    assert_eq!(waiting(q).await, (101, 1, 100));
    del(&mut conn, q.keys().urgent()).await;
    let mut requeued = 0;
    loop {
        let step = q.repair_step(1_000).await.unwrap();
        requeued += step.requeued;
        if step.walk_ended {
            break;
        }
    }
    assert_eq!(requeued, 1);
    assert_eq!(waiting(q).await, (101, 1, 100));
    assert_eq!(claim(q).await.key, lost);

    // An urgent job also listed in the normal lane (a repair by a build
    // that knew one lane) is claimed once, and leaves both.
    let twice = key("chat", "twice");
    q.request_compaction(&twice, manual()).await.unwrap();
    exec(
        &mut conn,
        redis::cmd("ZADD")
            .arg(q.keys().waiting())
            .arg(0)
            .arg(Keys::member(&twice)),
    )
    .await;
    assert_eq!(claim(q).await.key, twice);
    assert_eq!(score(&mut conn, &q.keys().waiting(), &twice).await, None);
    assert_eq!(claim(q).await.key, key("chat", "b0"));
}
