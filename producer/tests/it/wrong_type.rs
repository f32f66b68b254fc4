//! A key of the queue holding another Redis type (a hand edit, or another
//! program's key of the same name) is never overwritten (issue 36, item
//! 3): for each key the scripts touch, the operation that meets it is
//! refused with [`QueueError::WrongType`] naming that key, and every key of
//! the queue is left exactly as it was (type and serialized value). Where a
//! batch meets a derived key (a sweep, a bulk retry), that one item is left
//! as it is and reported, and the batch goes on.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;

use compactor_producer::queue::{
    CancelThen, ClaimOutcome, ClaimedJob, FailAction, JobStage, JobState, PauseScope, Queue,
    QueueConfig, QueueError, Trigger,
};
use compactor_shared::{Domain, EntityKey};
use redis::aio::MultiplexedConnection;

use crate::queue::{claim, recover_until_something, registration};
use crate::support::queue::TestQueue;

fn key(entity: &str) -> EntityKey {
    EntityKey::parse("chat", entity).unwrap()
}

/// Every key of the queue, with its type and its content in a canonical
/// form (`DUMP` is not one: a large hash's field order follows its
/// table's rehashing, not its writes).
type Snapshot = BTreeMap<String, (String, Vec<String>)>;

async fn snapshot(conn: &mut MultiplexedConnection, q: &Queue) -> Snapshot {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*", q.keys().prefix()))
        .query_async(conn)
        .await
        .unwrap();
    let mut out = Snapshot::new();
    for k in keys {
        let kind: String = redis::cmd("TYPE").arg(&k).query_async(conn).await.unwrap();
        let read = match kind.as_str() {
            "string" => redis::cmd("GET").arg(&k).clone(),
            "hash" => redis::cmd("HGETALL").arg(&k).clone(),
            "zset" => redis::cmd("ZRANGE")
                .arg(&k)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .clone(),
            other => panic!("{k}: a {other} in the queue's keys"),
        };
        let mut content: Vec<String> = match kind.as_str() {
            "string" => vec![read.query_async(conn).await.unwrap()],
            _ => read.query_async(conn).await.unwrap(),
        };
        if kind == "hash" {
            let mut pairs: Vec<String> = content
                .chunks(2)
                .map(|p| format!("{}={}", p[0], p[1]))
                .collect();
            pairs.sort();
            content = pairs;
        }
        out.insert(k, (kind, content));
    }
    out
}

/// Puts a value of another type than `kept` (the type the queue keeps
/// there) at `key`.
async fn plant(conn: &mut MultiplexedConnection, key: &str, kept: &str) {
    let cmd = if kept == "string" {
        redis::cmd("HSET").arg(key).arg("planted").arg("1").clone()
    } else {
        redis::cmd("SET").arg(key).arg("planted").clone()
    };
    let () = cmd.query_async(conn).await.unwrap();
}

/// Plants a value of another type than `kept` at `key`, runs `op`, and
/// asserts it was refused naming `key` with every key of the queue as it
/// was before. The key's own value, if it had one, is kept aside outside
/// the queue's keys meanwhile and put back after, so the scenario goes on
/// from where it was.
async fn refused<T: Debug>(
    t: &TestQueue,
    key: &str,
    kept: &str,
    op: impl Future<Output = Result<T, QueueError>>,
) {
    let mut conn = t.raw().await;
    let aside = format!("aside:{key}");
    let had: bool = redis::cmd("EXISTS")
        .arg(key)
        .query_async::<u64>(&mut conn)
        .await
        .unwrap()
        == 1;
    if had {
        let () = redis::cmd("RENAME")
            .arg(key)
            .arg(&aside)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    plant(&mut conn, key, kept).await;
    let before = snapshot(&mut conn, &t.queue).await;
    let result = op.await;
    let after = snapshot(&mut conn, &t.queue).await;
    match &result {
        Err(error @ QueueError::WrongType { key: refused, .. }) => {
            assert_eq!(refused.key.as_deref(), Some(key), "{error}");
            assert!(error.to_string().contains(key), "{error}");
            assert!(!error.is_unavailable(), "{error}");
        }
        other => panic!("{key}: expected a refusal naming it, got {other:?}"),
    }
    assert_eq!(before, after, "{key}: nothing may change");
    // Put right: the key's own value back, or none.
    let mut put_right = redis::pipe();
    put_right.cmd("DEL").arg(key).ignore();
    if had {
        put_right.cmd("RENAME").arg(&aside).arg(key).ignore();
    }
    let () = put_right.query_async(&mut conn).await.unwrap();
}

async fn running(q: &Queue, entity: &str) -> ClaimedJob {
    q.request_compaction(&key(entity), Trigger::Auto)
        .await
        .unwrap();
    claim(q).await
}

#[tokio::test]
async fn a_request_refuses_a_job_record_lane_or_counter_of_another_type_by_name() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("a");
    let manual = Trigger::Manual { instructions: None };
    refused(
        &t,
        &q.keys().job(&k),
        "hash",
        q.request_compaction(&k, Trigger::Auto),
    )
    .await;
    refused(
        &t,
        &q.keys().waiting(),
        "zset",
        q.request_compaction(&k, Trigger::Auto),
    )
    .await;
    refused(
        &t,
        &q.keys().urgent(),
        "zset",
        q.request_compaction(&k, manual.clone()),
    )
    .await;
    refused(
        &t,
        &q.keys().seq(),
        "string",
        q.request_compaction(&k, Trigger::Auto),
    )
    .await;
    q.request_compaction(&k, manual).await.unwrap();
}

#[tokio::test]
async fn a_running_job_s_calls_refuse_a_set_or_record_of_another_type_by_name() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let job = running(q, "a").await;
    refused(&t, &q.keys().running(), "zset", q.renew(&job)).await;
    refused(&t, &q.keys().done(), "zset", q.complete(&job)).await;
    refused(
        &t,
        &q.keys().dead(),
        "zset",
        q.fail(&job, FailAction::DeadLetter, "boom"),
    )
    .await;
    // The dead letter's own record, named after the job.
    let record = q
        .keys()
        .dead_record(&format!("{}|{}", job.member(), job.job_id));
    refused(
        &t,
        &record,
        "hash",
        q.fail(&job, FailAction::DeadLetter, "boom"),
    )
    .await;
    refused(&t, &q.keys().job(&job.key), "hash", q.release(&job)).await;
    assert!(q.renew(&job).await.unwrap(), "the run kept its lease");
    q.complete(&job).await.unwrap();
}

#[tokio::test]
async fn lookups_and_cancels_refuse_the_index_and_the_revoked_mark_by_name() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let job = running(q, "a").await;
    refused(&t, &q.keys().job_ids(), "hash", q.job(job.job_id)).await;
    refused(
        &t,
        &q.keys().job_ids(),
        "hash",
        q.cancel(job.job_id, CancelThen::Dead),
    )
    .await;
    let mark = q.keys().revoked_lease(&job.lease_token);
    refused(&t, &mark, "string", q.cancel(job.job_id, CancelThen::Dead)).await;
    let record = q
        .keys()
        .dead_record(&format!("{}|{}", job.member(), job.job_id));
    refused(&t, &record, "hash", q.cancel(job.job_id, CancelThen::Dead)).await;
    // Plain reads name the key too: Redis' own refusal does not.
    refused(&t, &q.keys().job(&job.key), "hash", q.job_state(&job.key)).await;
    refused(&t, &q.keys().dead(), "zset", q.counts()).await;
    refused(&t, &q.keys().workers(), "zset", q.job_progress(&job.key)).await;
    let cancelled = q.cancel(job.job_id, CancelThen::Dead).await.unwrap();
    assert_eq!(cancelled.job_id, job.job_id);
}

#[tokio::test]
async fn pause_repair_and_heartbeat_refuse_their_keys_of_another_type_by_name() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let chat = PauseScope::Domain(Domain::parse("chat").unwrap());
    refused(&t, &q.keys().paused(), "hash", q.pause(&PauseScope::Queue)).await;
    refused(&t, &q.keys().repair_cursor(), "string", q.repair_step(100)).await;
    let ttl = std::time::Duration::from_secs(30);
    refused(
        &t,
        &q.keys().workers(),
        "zset",
        q.heartbeat(&registration("w1"), ttl),
    )
    .await;
    refused(
        &t,
        &q.keys().worker("w1"),
        "hash",
        q.heartbeat(&registration("w1"), ttl),
    )
    .await;

    // A paused domain whose parked set is of another type: a claim can
    // neither park its job (that would overwrite the key) nor run it (the
    // domain is paused), so it claims nothing and names the key; resuming
    // names it too.
    q.pause(&chat).await.unwrap();
    q.request_compaction(&key("parked"), Trigger::Auto)
        .await
        .unwrap();
    let parked = q.keys().parked(&Domain::parse("chat").unwrap());
    refused(&t, &parked, "zset", q.claim("w1")).await;
    refused(&t, &parked, "zset", q.resume(&chat)).await;
    // Put right: the job waits parked, and runs once its domain resumes.
    assert!(matches!(
        q.claim("w1").await.unwrap(),
        ClaimOutcome::Empty { .. }
    ));
    q.resume(&chat).await.unwrap();
    assert_eq!(claim(q).await.key, key("parked"));
}

/// The recovery sweep meets a job over its stall bound whose dead letter's
/// record key holds another type: that job stays as it is (running, its
/// lease expired) and is reported, nothing of the queue changes, and the
/// sweep dead-letters it once the key is moved aside.
#[tokio::test]
async fn a_sweep_leaves_a_job_whose_dead_record_is_of_another_type_as_it_is_and_reports_it() {
    let t = TestQueue::with(QueueConfig {
        lease_ttl: std::time::Duration::from_millis(20),
        max_stalls: 0,
        ..QueueConfig::default()
    })
    .await;
    let q = &t.queue;
    let job = running(q, "stalled").await;
    let record = q
        .keys()
        .dead_record(&format!("{}|{}", job.member(), job.job_id));
    let mut conn = t.raw().await;
    plant(&mut conn, &record, "hash").await;
    let before = snapshot(&mut conn, q).await;
    // Sweeps before the lease expires find nothing and write nothing.
    let swept = recover_until_something(q).await;
    assert_eq!(
        (swept.recovered, swept.dead_lettered, swept.wrong_type),
        (0, 0, 1)
    );
    assert_eq!(before, snapshot(&mut conn, q).await, "nothing may change");
    let () = redis::cmd("DEL")
        .arg(&record)
        .query_async(&mut conn)
        .await
        .unwrap();
    let swept = q.recover(100).await.unwrap();
    assert_eq!((swept.dead_lettered, swept.wrong_type), (1, 0));
    assert_eq!(q.dead_letters(10).await.unwrap().len(), 1);
}

/// Retrying a dead letter whose record, or whose entity's job record,
/// holds another type refuses by name and keeps the letter.
#[tokio::test]
async fn a_dead_letter_retry_refuses_a_record_of_another_type_by_name_and_keeps_the_letter() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let job = running(q, "dead").await;
    q.fail(&job, FailAction::DeadLetter, "boom").await.unwrap();
    let entry = format!("{}|{}", job.member(), job.job_id);
    refused(&t, &q.keys().job(&job.key), "hash", q.retry_dead(&entry)).await;
    refused(
        &t,
        &q.keys().dead_record(&entry),
        "hash",
        q.retry_dead(&entry),
    )
    .await;
    // Put right, the letter is retried.
    assert!(q.retry_dead(&entry).await.unwrap().is_some());
    let progress = q.job_progress(&job.key).await.unwrap();
    assert!(
        matches!(progress.stage, Some(JobStage::Waiting { .. })),
        "{progress:?}"
    );
}

/// A batch of requests is decided in order in one script call: a request
/// meeting a job record of another type is refused by name before it
/// writes anything, the requests before it stand and those after it are
/// not made (the caller sees the refusal, and its retry finds the first
/// ones coalesced).
#[tokio::test]
async fn a_batch_of_requests_stops_at_a_record_of_another_type_keeping_those_before() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let (a, b, c) = (key("a"), key("b"), key("c"));
    let batch = [
        (a.clone(), Trigger::Auto),
        (b.clone(), Trigger::Auto),
        (c.clone(), Trigger::Auto),
    ];
    // Alone, the refused request changes nothing.
    refused(&t, &q.keys().job(&b), "hash", q.enqueue_many(&batch[1..2])).await;

    let mut conn = t.raw().await;
    plant(&mut conn, &q.keys().job(&b), "hash").await;
    match q.enqueue_many(&batch).await {
        Err(QueueError::WrongType { key: refused, .. }) => {
            assert_eq!(refused.key.as_deref(), Some(q.keys().job(&b).as_str()));
        }
        other => panic!("expected a refusal naming b's record, got {other:?}"),
    }
    assert!(
        matches!(
            q.job_state(&a).await.unwrap(),
            Some(JobState::Waiting { .. })
        ),
        "the request before it stands"
    );
    assert!(
        q.job_state(&c).await.unwrap().is_none(),
        "none after it was made"
    );
    let planted: String = redis::cmd("GET")
        .arg(q.keys().job(&b))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(planted, "planted");
}
