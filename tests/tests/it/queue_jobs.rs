//! The operator's job protocol on the real Redis and on a Redis Cluster
//! (every scenario on both): pages of jobs by state with a stable cursor,
//! a job by the id its logs show, its index cleaned with the done and dead
//! sets, and cancelling — a waiting job leaves its lane, a running job's
//! lease is revoked so nothing its attempt reports lands, and the job ends
//! dead with reason `cancelled` (retryable) or requeued. Then the fence in
//! the database: a compaction cancelled right before its commit writes
//! nothing (real PostgreSQL), and the retried job commits.

use std::collections::HashSet;
use std::time::Duration;

use compactor_e2e::cluster::RedisCluster;
use compactor_e2e::db::TestDb;
use compactor_e2e::{conversation, small_window, TestRedis};
use compactor_producer::client::Compactor;
use compactor_producer::queue::{
    CancelThen, ClaimOutcome, ClaimedJob, Completion, FailAction, Failure, JobCursor, JobView,
    Queue, QueueError, Trigger, CANCELLED_REASON,
};
use compactor_producer::store::RunOutcome;
use compactor_shared::EntityKey;
use compactor_worker::runtime::{Job, JobHandler};

fn key(entity: &str) -> EntityKey {
    EntityKey::parse("ops", entity).unwrap()
}

async fn claim(q: &Queue) -> ClaimedJob {
    match q.claim("w1").await.unwrap() {
        ClaimOutcome::Claimed(job) => job,
        other => panic!("expected a job, got {other:?}"),
    }
}

fn added(outcome: compactor_producer::queue::EnqueueOutcome) -> u64 {
    match outcome {
        compactor_producer::queue::EnqueueOutcome::Added { job_id } => job_id,
        other => panic!("expected a new job, got {other:?}"),
    }
}

/// Every job of `state`, `limit` per page, following the cursor.
async fn all_pages(q: &Queue, state: JobView, limit: usize) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut cursor: Option<JobCursor> = None;
    loop {
        let page = q.list_jobs(state, limit, cursor.as_ref()).await.unwrap();
        assert!(page.jobs.len() <= limit);
        ids.extend(page.jobs.iter().map(|j| j.job_id));
        match page.next_cursor {
            Some(c) => cursor = Some(JobCursor::parse(&c).unwrap()),
            None => return ids,
        }
    }
}

/// The queues every scenario runs on: the machine's Redis, and a queue on
/// each node of the shared cluster.
fn redises() -> Vec<TestRedis> {
    let cluster = RedisCluster::shared();
    let mut all = vec![TestRedis::new()];
    all.extend((0..compactor_e2e::cluster::NODES).map(|n| TestRedis::on_cluster(cluster, n)));
    all
}

/// Jobs in each state, listed and looked up with what an operator needs.
async fn lists_each_state(redis: &TestRedis) {
    let q = redis.queue().await;
    // Six automatic requests (normal lane), two manual (urgent lane).
    let mut normal = Vec::new();
    for e in ["n1", "n2", "n3", "n4", "n5", "n6"] {
        normal.push(added(
            q.request_compaction(&key(e), Trigger::Auto).await.unwrap(),
        ));
    }
    let mut urgent = Vec::new();
    for e in ["u1", "u2"] {
        urgent.push(added(
            q.request_compaction(&key(e), Trigger::Manual { instructions: None })
                .await
                .unwrap(),
        ));
    }
    // u1 runs; u2 fails and backs off for a minute; n1 and n2 finish: one
    // done, one dead.
    let running = claim(&q).await;
    assert_eq!(running.job_id, urgent[0]);
    let retried = claim(&q).await;
    let failure = q
        .fail(
            &retried,
            FailAction::Retry {
                delay: Duration::from_secs(60),
            },
            "llm: 503",
        )
        .await
        .unwrap();
    assert_eq!(failure, Failure::RetryScheduled);
    let done = claim(&q).await;
    assert_eq!(q.complete(&done).await.unwrap(), Completion::Done);
    let dead = claim(&q).await;
    q.fail(&dead, FailAction::DeadLetter, "bad payload")
        .await
        .unwrap();

    // Waiting: due jobs, urgent lane first, in claim order, across pages.
    let waiting = all_pages(&q, JobView::Waiting, 2).await;
    assert_eq!(waiting, normal[2..].to_vec());
    let page = q.list_jobs(JobView::Waiting, 50, None).await.unwrap();
    let first = &page.jobs[0];
    assert_eq!(first.state, JobView::Waiting);
    assert_eq!(first.domain.as_deref(), Some("ops"));
    assert_eq!(first.entity_id.as_deref(), Some("n3"));
    assert_eq!(first.kind.as_deref(), Some("compact"));
    assert_eq!(first.trigger.as_deref(), Some("auto"));
    assert_eq!(first.lane, "normal");
    assert!(first.age_ms.is_some() && first.due_at_ms.is_some());
    assert_eq!(page.next_cursor, None);

    // Delayed: the back-off, with its error and a due time ahead.
    let delayed = q.list_jobs(JobView::Delayed, 50, None).await.unwrap().jobs;
    assert_eq!(delayed.len(), 1);
    assert_eq!(delayed[0].job_id, urgent[1]);
    assert_eq!(delayed[0].lane, "urgent");
    assert_eq!(delayed[0].last_error.as_deref(), Some("llm: 503"));
    assert_eq!(delayed[0].attempts, 1);
    assert!(delayed[0].due_at_ms > delayed[0].enqueued_at_ms);

    // Running: the worker holding the lease and its deadline.
    let run = q.list_jobs(JobView::Running, 50, None).await.unwrap().jobs;
    assert_eq!(run.len(), 1);
    assert_eq!(run[0].job_id, running.job_id);
    assert_eq!(run[0].worker.as_deref(), Some("w1"));
    assert!(run[0].lease_deadline_ms.is_some() && run[0].started_at_ms.is_some());
    assert_eq!(run[0].trigger.as_deref(), Some("manual"));

    // Done and dead, newest first, the dead one with its reason.
    let done_jobs = q.list_jobs(JobView::Done, 50, None).await.unwrap().jobs;
    assert_eq!(
        done_jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        [done.job_id]
    );
    assert!(done_jobs[0].finished_at_ms.is_some());
    let dead_jobs = q.list_jobs(JobView::Dead, 50, None).await.unwrap().jobs;
    assert_eq!(dead_jobs[0].job_id, dead.job_id);
    assert_eq!(dead_jobs[0].last_error.as_deref(), Some("bad payload"));

    // By id, whatever the state.
    for (id, state) in [
        (normal[3], JobView::Waiting),
        (urgent[1], JobView::Delayed),
        (running.job_id, JobView::Running),
        (done.job_id, JobView::Done),
        (dead.job_id, JobView::Dead),
    ] {
        let job = q.job(id).await.unwrap().unwrap();
        assert_eq!((job.job_id, job.state), (id, state));
    }
    assert_eq!(q.job(999_999).await.unwrap(), None);
}

/// A cursor is a position: jobs claimed ahead of it neither shift nor
/// repeat the next page, and jobs added behind it show up on it.
async fn pages_are_stable(redis: &TestRedis) {
    let q = redis.queue().await;
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(added(
            q.request_compaction(&key(&format!("p{i}")), Trigger::Auto)
                .await
                .unwrap(),
        ));
    }
    let first = q.list_jobs(JobView::Waiting, 3, None).await.unwrap();
    assert_eq!(
        first.jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        ids[..3]
    );
    let cursor = JobCursor::parse(first.next_cursor.as_deref().unwrap()).unwrap();
    // Two jobs of the first page are claimed, one more is added.
    claim(&q).await;
    claim(&q).await;
    let late = added(
        q.request_compaction(&key("late"), Trigger::Auto)
            .await
            .unwrap(),
    );
    let second = q
        .list_jobs(JobView::Waiting, 3, Some(&cursor))
        .await
        .unwrap();
    assert_eq!(
        second.jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        ids[3..6]
    );
    let rest = q
        .list_jobs(
            JobView::Waiting,
            3,
            Some(&JobCursor::parse(second.next_cursor.as_deref().unwrap()).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(
        rest.jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        [ids[6], late]
    );
    assert_eq!(rest.next_cursor, None);
    assert!(matches!(
        q.list_jobs(JobView::Waiting, 0, None).await,
        Err(QueueError::InvalidLimit { .. })
    ));
}

/// Cancelling: a running job's lease is revoked and nothing its attempt
/// reports lands; a waiting job leaves its lane; dead letters of reason
/// `cancelled` retry like any other; a requeued job runs again.
async fn cancels(redis: &TestRedis) {
    let q = redis.queue().await;
    // A running job, cancelled to the dead-letter set.
    let id = added(
        q.request_compaction(&key("c1"), Trigger::Auto)
            .await
            .unwrap(),
    );
    let run = claim(&q).await;
    assert_eq!(run.job_id, id);
    let cancelled = q.cancel(id, CancelThen::Dead).await.unwrap();
    assert_eq!(cancelled.was, JobView::Running);
    assert_eq!(
        cancelled.revoked_lease.as_deref(),
        Some(run.lease_token.as_str())
    );
    assert!(!q.renew(&run).await.unwrap(), "the lease is revoked");
    assert_eq!(q.complete(&run).await.unwrap(), Completion::LeaseLost);
    assert_eq!(
        q.fail(&run, FailAction::DeadLetter, "late").await.unwrap(),
        Failure::LeaseLost
    );
    assert!(!q.release(&run).await.unwrap());
    let job = q.job(id).await.unwrap().unwrap();
    assert_eq!(job.state, JobView::Dead);
    assert_eq!(job.last_error.as_deref(), Some(CANCELLED_REASON));
    let letters = q.dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].reason, CANCELLED_REASON);
    assert!(q
        .list_jobs(JobView::Running, 10, None)
        .await
        .unwrap()
        .jobs
        .is_empty());
    // Cancelled twice, or never there: typed errors.
    assert!(matches!(
        q.cancel(id, CancelThen::Dead).await,
        Err(QueueError::JobFinished { state: "dead", .. })
    ));
    assert!(matches!(
        q.cancel(424_242, CancelThen::Dead).await,
        Err(QueueError::JobNotFound { job_id: 424_242 })
    ));
    // Retried, it runs and completes.
    q.retry_dead(&letters[0].entry).await.unwrap().unwrap();
    let again = claim(&q).await;
    assert_eq!(again.member(), run.member());
    assert_eq!(q.complete(&again).await.unwrap(), Completion::Done);
    assert_eq!(
        q.job(id).await.unwrap(),
        None,
        "a purged dead letter's id is dropped from the index"
    );

    // A running job, requeued: the old lease is revoked, the attempt given
    // back, the same job claimed again.
    let id = added(
        q.request_compaction(&key("c2"), Trigger::Auto)
            .await
            .unwrap(),
    );
    let run = claim(&q).await;
    let requeued = q.cancel(id, CancelThen::Requeue).await.unwrap();
    assert_eq!(requeued.then, CancelThen::Requeue);
    assert!(!q.renew(&run).await.unwrap());
    let waiting = q.job(id).await.unwrap().unwrap();
    assert_eq!((waiting.state, waiting.attempts), (JobView::Waiting, 0));
    let rerun = claim(&q).await;
    assert_eq!((rerun.job_id, rerun.attempt), (id, 1));
    assert_eq!(q.complete(&run).await.unwrap(), Completion::LeaseLost);
    assert_eq!(q.complete(&rerun).await.unwrap(), Completion::Done);

    // A waiting job, cancelled: out of its lane, never claimed.
    let id = added(
        q.request_compaction(&key("c3"), Trigger::Auto)
            .await
            .unwrap(),
    );
    let cancelled = q.cancel(id, CancelThen::Dead).await.unwrap();
    assert_eq!(
        (cancelled.was, cancelled.revoked_lease),
        (JobView::Waiting, None)
    );
    assert!(matches!(
        q.claim("w1").await.unwrap(),
        ClaimOutcome::Empty { .. }
    ));
    assert_eq!(q.job(id).await.unwrap().unwrap().state, JobView::Dead);
}

/// The id index shrinks with the done set: trimmed jobs are not found and
/// leave no entry behind.
async fn index_follows_trimming(mut redis: TestRedis) {
    redis.config.done_max_count = 2;
    let q = redis.queue().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = added(
            q.request_compaction(&key(&format!("t{i}")), Trigger::Auto)
                .await
                .unwrap(),
        );
        let run = claim(&q).await;
        assert_eq!(q.complete(&run).await.unwrap(), Completion::Done);
        ids.push(id);
    }
    let found: Vec<bool> = futures::future::join_all(ids.iter().map(|id| q.job(*id)))
        .await
        .into_iter()
        .map(|j| j.unwrap().is_some())
        .collect();
    assert_eq!(found, [false, false, false, true, true]);
    let index = q.keys().job_ids();
    let mut conn = if redis.cluster {
        let cluster = RedisCluster::shared();
        cluster.connection(cluster.owner_of(&index))
    } else {
        redis::Client::open(redis.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap()
    };
    let indexed: HashSet<String> = redis::cmd("HKEYS").arg(&index).query(&mut conn).unwrap();
    assert_eq!(
        indexed,
        ids[3..].iter().map(u64::to_string).collect::<HashSet<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_listed_by_state_and_found_by_id() {
    for redis in redises() {
        lists_each_state(&redis).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_cursor_is_a_stable_position() {
    for redis in redises() {
        pages_are_stable(&redis).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_revokes_the_lease_and_dead_letters_or_requeues() {
    for redis in redises() {
        cancels(&redis).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_id_index_is_trimmed_with_the_done_set() {
    for redis in redises() {
        index_follows_trimming(redis).await;
    }
}

/// The fence: a compaction cancelled while it is about to commit writes
/// nothing (its entity lease, owned by the revoked token, is revoked too),
/// and the retried job commits. Real PostgreSQL and Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_compaction_cannot_commit_and_its_retry_does() {
    use compactor_e2e::CommitGate;
    use compactor_worker::jobs::{CompactHandler, CompactSettings, Hooks, Summarizer};

    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let queue = redis.queue().await;
    let engine = small_window();
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), engine.clone()).await;
    let k = key("fence");
    client.append_messages(&k, conversation(200)).await.unwrap();
    let job_id = added(queue.request_compaction(&k, Trigger::Auto).await.unwrap());
    let run = claim(&queue).await;

    // The attempt stops right before its commit.
    let gate = CommitGate::new();
    let settings = CompactSettings {
        lease_ttl: Duration::from_secs(30),
        ..CompactSettings::new(engine)
    };
    let handler = CompactHandler::new(
        db.store.clone(),
        queue.clone(),
        Summarizer::Extractive,
        settings.clone(),
    );
    let a = handler.clone().with_hooks(Hooks {
        before_commit: Some(gate.hook()),
    });
    let attempt = {
        let job = Job::new(k.clone(), Trigger::Auto, job_id, 1, 2, &run.lease_token);
        tokio::spawn(async move { a.run(job).await })
    };
    gate.at_commit.notified().await;

    let cancelled = client.cancel_job(job_id, CancelThen::Dead).await.unwrap();
    assert!(cancelled.entity_lease_revoked, "it held the entity lease");
    gate.go.notify_one();
    attempt
        .await
        .unwrap()
        .expect("a fenced-off commit is not an error to retry");

    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(ws.compactions, 0, "the cancelled attempt wrote nothing");
    assert!(ws.lease.is_none());
    let runs = db.store.runs(&k, 10).await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.run.outcome).collect::<Vec<_>>(),
        [RunOutcome::Conflict]
    );
    assert_eq!(queue.complete(&run).await.unwrap(), Completion::LeaseLost);
    let letter = &queue.dead_letters(10).await.unwrap()[0];
    assert_eq!(letter.reason, CANCELLED_REASON);

    // Retried, the job runs again and commits.
    queue.retry_dead(&letter.entry).await.unwrap().unwrap();
    let rerun = claim(&queue).await;
    handler
        .run(Job::new(
            k.clone(),
            Trigger::Auto,
            rerun.job_id,
            rerun.attempt,
            2,
            &rerun.lease_token,
        ))
        .await
        .unwrap();
    assert_eq!(queue.complete(&rerun).await.unwrap(), Completion::Done);
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(ws.compactions, 1);
}

/// The other order: the job is cancelled while its attempt has not taken
/// the entity lease yet (nothing to revoke in the database). The attempt
/// reads the queue's mark of the revoked lease once it holds the entity
/// lease and stops there: nothing is committed, the lease is left free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_cancelled_before_it_took_the_entity_lease_does_not_run() {
    use compactor_worker::jobs::{CompactHandler, CompactSettings, Summarizer};

    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let queue = redis.queue().await;
    let engine = small_window();
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), engine.clone()).await;
    let k = key("early");
    client.append_messages(&k, conversation(200)).await.unwrap();
    let job_id = added(queue.request_compaction(&k, Trigger::Auto).await.unwrap());
    let run = claim(&queue).await;
    let cancelled = client
        .cancel_job(job_id, CancelThen::Requeue)
        .await
        .unwrap();
    assert!(!cancelled.entity_lease_revoked, "nobody held it yet");
    assert!(queue.lease_revoked(&run.lease_token).await.unwrap());

    let handler = CompactHandler::new(
        db.store.clone(),
        queue.clone(),
        Summarizer::Extractive,
        CompactSettings::new(engine),
    );
    handler
        .run(Job::new(
            k.clone(),
            Trigger::Auto,
            job_id,
            1,
            2,
            &run.lease_token,
        ))
        .await
        .expect("a fenced-off attempt is not an error to retry");
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(ws.compactions, 0);
    assert!(ws.lease.is_none());
    // The requeued job runs under a new lease and commits.
    let rerun = claim(&queue).await;
    assert_eq!(rerun.job_id, job_id);
    assert!(!queue.lease_revoked(&rerun.lease_token).await.unwrap());
    handler
        .run(Job::new(
            k.clone(),
            Trigger::Auto,
            job_id,
            rerun.attempt,
            2,
            &rerun.lease_token,
        ))
        .await
        .unwrap();
    assert_eq!(
        db.store.workstream(&k).await.unwrap().unwrap().compactions,
        1
    );
}

/// A dead letter retried writes its `compaction.requested` before a worker
/// that takes the job again can write `compaction.started`: the
/// workstream's row is held from before the request until the event is
/// written, as every request holds it. The retry goes through a database
/// link made slow (150 ms each way, a loopback proxy); a racer with a fast
/// link claims each retried job as soon as it is back and takes the
/// workstream's lease with its `started` event at once. The racer waits
/// for the row, and the outbox has the request first (the retry used to
/// write the event after Redis answered: the racer's `started` came first
/// by the slow link's round trips). Real PostgreSQL and Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_dead_letter_writes_its_request_before_a_worker_can_start_it() {
    use compactor_e2e::proxy::{ChaosProxy, Mode};
    use compactor_producer::client::retry_dead_recorded;
    use compactor_producer::store::{EventKind, NewEvent, Store};

    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let queue = redis.queue().await;
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), small_window()).await;
    let k = key("retried-order");
    client.append_messages(&k, conversation(4)).await.unwrap();
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    let proxy = ChaosProxy::start("127.0.0.1:5432".parse().unwrap()).await;
    let through = db
        .url
        .replace("127.0.0.1:5432", &format!("127.0.0.1:{}", proxy.port()));
    assert_ne!(through, db.url, "the test database is on 127.0.0.1:5432");
    let slow = Store::connect(&through).await.unwrap();
    slow.ping().await.unwrap();
    proxy.set(Mode::Delay(Duration::from_millis(150)));

    for round in 0..3 {
        let job_id = added(queue.request_compaction(&k, Trigger::Auto).await.unwrap());
        claim(&queue).await;
        client.cancel_job(job_id, CancelThen::Dead).await.unwrap();
        let letter = queue.dead_letters(10).await.unwrap().remove(0);

        let racer = {
            let (queue, store, k) = (queue.clone(), db.store.clone(), k.clone());
            tokio::spawn(async move {
                loop {
                    if let ClaimOutcome::Claimed(job) = queue.claim("racer").await.unwrap() {
                        let started = NewEvent::new(
                            EventKind::CompactionStarted,
                            &k,
                            serde_json::json!({ "job_id": job.job_id }),
                        );
                        store
                            .take_free_lease_with_event(
                                ws.id,
                                &job.lease_token,
                                Duration::from_secs(30),
                                Some(&started),
                            )
                            .await
                            .unwrap()
                            .expect("the lease is free");
                        return job;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        };
        retry_dead_recorded(&slow, &queue, &letter.entry)
            .await
            .unwrap()
            .expect("the letter is retried");
        let job = racer.await.unwrap();
        let order = |kind: &str| {
            format!(
                "SELECT MAX(id) AS n FROM events WHERE kind = '{kind}' \
                 AND (payload::jsonb ->> 'job_id')::bigint = {}",
                job.job_id
            )
        };
        let requested = db.scalar(&order("compaction.requested")).await;
        let started = db.scalar(&order("compaction.started")).await;
        assert!(
            requested > 0 && requested < started,
            "round {round}: requested #{requested}, started #{started}"
        );
        // The racer's attempt ends: the lease and the job go.
        assert!(db
            .store
            .release_lease(ws.id, &job.lease_token)
            .await
            .unwrap());
        queue.complete(&job).await.unwrap();
    }
}
