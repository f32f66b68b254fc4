//! The queue semantics of ARCHITECTURE.md §4, against the real Redis
//! (127.0.0.1:6379, or `REDIS_URL`). Each test runs on its own queue name
//! and deletes its keys when done, so tests run in parallel and re-run.

use std::time::Duration;

use compactor_producer::queue::{
    ClaimOutcome, ClaimedJob, Completion, EnqueueOutcome, FailAction, Failure, JobStage, JobState,
    Keys, Notice, PauseScope, Queue, QueueConfig, QueueError, Recovery, Subscription, Trigger,
    WorkerRegistration, ENQUEUE_BATCH,
};
use compactor_shared::EntityKey;
use compactor_testkit::{redis_url, PrivateRedis};
use redis::aio::MultiplexedConnection;
use redis::ToRedisArgs;

use crate::support::queue::TestQueue;

fn key(entity: &str) -> EntityKey {
    EntityKey::parse("chat", entity).unwrap()
}

pub(crate) async fn claim(q: &Queue) -> ClaimedJob {
    claimed(q.claim("w1").await.unwrap())
}

/// The job a claim took, where the scenario needs one to have been there
/// (`claim`, `complete_and_claim` and `settle` answer alike).
fn claimed(outcome: ClaimOutcome) -> ClaimedJob {
    match outcome {
        ClaimOutcome::Claimed(job) => job,
        other => panic!("expected a job, got {other:?}"),
    }
}

/// An automatic request for `k`'s compaction: the request most scenarios
/// make, in one line instead of three.
async fn request(q: &Queue, k: &EntityKey) -> EnqueueOutcome {
    q.request_compaction(k, Trigger::Auto).await.unwrap()
}

/// Requests `k`'s compaction and claims the next job (`k`'s, where nothing
/// else waits): the run in flight that most scenarios start from.
async fn request_and_claim(q: &Queue, k: &EntityKey) -> ClaimedJob {
    request(q, k).await;
    claim(q).await
}

/// `n` automatic requests for `k` at once, each on a task of its own: the
/// race that must make one job. Their outcomes in the order of the tasks.
async fn request_concurrently(q: &Queue, k: &EntityKey, n: usize) -> Vec<EnqueueOutcome> {
    let tasks = (0..n).map(|_| {
        let (q, k) = (q.clone(), k.clone());
        tokio::spawn(async move { request(&q, &k).await })
    });
    futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

/// A retry after `delay`, in one line where the literal takes three.
fn retry_after(delay: Duration) -> FailAction {
    FailAction::Retry { delay }
}

/// Leases that expire at once, as a crashed worker's do.
fn short_leases() -> QueueConfig {
    QueueConfig {
        lease_ttl: Duration::from_millis(20),
        ..QueueConfig::default()
    }
}

/// A recovery sweep that returned one expired lease to the queue.
const ONE_RECOVERED: Recovery = Recovery {
    recovered: 1,
    dead_lettered: 0,
    wrong_type: 0,
};

/// A recovery sweep that dead-lettered one job over its stall bound.
const ONE_DEAD_LETTERED: Recovery = Recovery {
    recovered: 0,
    dead_lettered: 1,
    wrong_type: 0,
};

/// Asserts that a claim now finds nothing to run (how a scenario checks
/// that a job is gone from the line).
async fn assert_nothing_to_claim(q: &Queue) {
    assert!(matches!(
        q.claim("w1").await.unwrap(),
        ClaimOutcome::Empty { .. }
    ));
}

/// The next notice on `sub` within 5 s (the subscription checked every
/// second); `what` says in the panic which notice did not come.
async fn next_notice(sub: &mut Subscription, what: &str) -> Notice {
    tokio::time::timeout(Duration::from_secs(5), sub.next(Duration::from_secs(1)))
        .await
        .expect(what)
        .unwrap()
}

#[tokio::test]
async fn a_request_adds_then_coalesces_while_waiting() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("a");
    let first = request(q, &k).await;
    let EnqueueOutcome::Added { job_id } = first else {
        panic!("{first:?}")
    };
    assert_eq!(request(q, &k).await, EnqueueOutcome::Coalesced { job_id });
    assert_eq!(
        q.job_state(&k).await.unwrap(),
        Some(JobState::Waiting { job_id })
    );
    assert_eq!(q.counts().await.unwrap().waiting, 1);
}

#[tokio::test]
async fn a_thousand_concurrent_requests_while_waiting_make_one_job() {
    let t = TestQueue::new().await;
    let k = key("hot");
    let mut added = 0;
    let mut coalesced = 0;
    for outcome in request_concurrently(&t.queue, &k, 1_000).await {
        match outcome {
            EnqueueOutcome::Added { .. } => added += 1,
            EnqueueOutcome::Coalesced { .. } => coalesced += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((added, coalesced), (1, 999));
    let counts = t.queue.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.running), (1, 0));
    claim(&t.queue).await;
    assert!(matches!(
        t.queue.claim("w2").await.unwrap(),
        ClaimOutcome::Empty { .. }
    ));
}

#[tokio::test]
async fn requests_while_running_add_exactly_one_follow_up_after_it() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("busy");
    let job = request_and_claim(q, &k).await;
    assert_eq!(job.attempt, 1);
    assert_eq!(job.payload.trigger, Trigger::Auto);

    for outcome in request_concurrently(q, &k, 1_000).await {
        assert_eq!(
            outcome,
            EnqueueOutcome::FollowUpRecorded { job_id: job.job_id }
        );
    }
    assert_eq!(
        q.counts().await.unwrap().waiting,
        0,
        "nothing runs beside it"
    );
    assert!(matches!(
        q.job_state(&k).await.unwrap(),
        Some(JobState::Running {
            followup_pending: true,
            ..
        })
    ));

    let Completion::FollowUpAdded { job_id } = q.complete(&job).await.unwrap() else {
        panic!("expected a follow-up")
    };
    assert_ne!(job_id, job.job_id);
    assert_eq!(
        q.counts().await.unwrap().waiting,
        1,
        "exactly one follow-up"
    );
    let follow_up = claim(q).await;
    assert_eq!(follow_up.job_id, job_id);
    assert_eq!(follow_up.payload.trigger, Trigger::FollowUp);
    assert_eq!(q.complete(&follow_up).await.unwrap(), Completion::Done);
    assert!(matches!(
        q.claim("w1").await.unwrap(),
        ClaimOutcome::Empty { next_due_in: None }
    ));
    assert!(matches!(
        q.job_state(&k).await.unwrap(),
        Some(JobState::Done { .. })
    ));
    // After it is done, a new request adds a new job.
    assert!(matches!(request(q, &k).await, EnqueueOutcome::Added { .. }));
}

#[tokio::test]
async fn a_manual_request_keeps_its_instructions_when_coalesced_or_following_up() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("m");
    let manual = Trigger::Manual {
        instructions: Some("focus on the migration".into()),
    };
    request(q, &k).await;
    q.request_compaction(&k, manual.clone()).await.unwrap();
    let job = claim(q).await;
    assert_eq!(
        job.payload.trigger, manual,
        "manual upgrades the waiting job"
    );

    q.request_compaction(&k, manual.clone()).await.unwrap();
    request(q, &k).await;
    q.complete(&job).await.unwrap();
    let follow_up = claim(q).await;
    assert_eq!(
        follow_up.payload.trigger, manual,
        "a later auto request does not erase it"
    );
}

#[tokio::test]
async fn only_the_lease_holder_can_renew_or_complete() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("fenced");
    let job = request_and_claim(q, &k).await;
    assert!(q.renew(&job).await.unwrap());
    let impostor = ClaimedJob {
        lease_token: format!("{}x", job.lease_token),
        ..job.clone()
    };
    assert!(!q.renew(&impostor).await.unwrap());
    assert_eq!(q.complete(&impostor).await.unwrap(), Completion::LeaseLost);
    assert!(matches!(
        q.job_state(&k).await.unwrap(),
        Some(JobState::Running { .. })
    ));
    assert_eq!(q.complete(&job).await.unwrap(), Completion::Done);
    assert_eq!(
        q.complete(&job).await.unwrap(),
        Completion::LeaseLost,
        "not twice"
    );
}

/// More requests than one script call takes (`ENQUEUE_BATCH`): decided in
/// order, within a call and across the calls of the round trip, so a later
/// request of an entity joins the job an earlier one added, in its own
/// batch or another.
#[tokio::test]
async fn enqueue_many_keeps_request_order_within_and_across_batches() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let n = ENQUEUE_BATCH * 2 + 100;
    let mut requests: Vec<(EntityKey, Trigger)> = (0..n)
        .map(|i| (key(&format!("e{i}")), Trigger::Auto))
        .collect();
    // e1 again in the first batch, e0 and e{n-1} in the last.
    requests.insert(2, (key("e1"), Trigger::Auto));
    requests.push((key("e0"), Trigger::Auto));
    requests.push((key(&format!("e{}", n - 1)), Trigger::Auto));
    let outcomes = q.enqueue_many(&requests).await.unwrap();
    assert_eq!(outcomes.len(), n + 3);
    let added = |i: usize| match outcomes[i] {
        EnqueueOutcome::Added { job_id } => job_id,
        ref other => panic!("request {i}: {other:?}"),
    };
    assert_eq!(outcomes[2], EnqueueOutcome::Coalesced { job_id: added(1) });
    let ids: Vec<u64> = (0..n + 1).filter(|i| *i != 2).map(added).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in request order");
    assert_eq!(
        outcomes[n + 1],
        EnqueueOutcome::Coalesced { job_id: added(0) }
    );
    assert_eq!(
        outcomes[n + 2],
        EnqueueOutcome::Coalesced { job_id: added(n) }
    );
    assert_eq!(q.counts().await.unwrap().waiting, n as u64);
}

/// The library of functions and the scripts' cache both lost (a restart
/// without persistence, a flush): a call loads the code again and runs,
/// and so does a pipeline. On a private server, so that the flush reaches
/// no other test's calls.
#[tokio::test]
async fn lost_code_is_loaded_again_after_a_flush() {
    let redis = PrivateRedis::start();
    let t = TestQueue::at(&redis.url(), QueueConfig::default()).await;
    let q = &t.queue;
    let mut conn = t.raw().await;
    let flush = || async {
        let mut conn = t.raw().await;
        exec(&mut conn, redis::cmd("FUNCTION").arg("FLUSH")).await;
        exec(&mut conn, redis::cmd("SCRIPT").arg("FLUSH")).await;
    };
    let libraries = |conn: &mut MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            query::<Vec<redis::Value>>(&mut conn, redis::cmd("FUNCTION").arg("LIST"))
                .await
                .len()
        }
    };
    assert_eq!(libraries(&mut conn).await, 1, "loaded at connect");
    flush().await;
    assert_eq!(libraries(&mut conn).await, 0);
    assert!(matches!(
        request(q, &key("s")).await,
        EnqueueOutcome::Added { .. }
    ));
    assert_eq!(libraries(&mut conn).await, 1, "loaded again by the call");
    flush().await;
    let outcomes = q.enqueue_many(&[(key("s2"), Trigger::Auto)]).await.unwrap();
    assert!(matches!(outcomes[0], EnqueueOutcome::Added { .. }));
    flush().await;
    let job = claim(q).await;
    q.complete(&job).await.unwrap();
    assert_eq!(q.counts().await.unwrap().waiting, 1);
}

/// A server that refuses functions to this user (an ACL without
/// `FUNCTION`; Redis before 7 has no such command): the queue calls its
/// scripts by SHA instead, and reloads them by SHA when they are lost.
#[tokio::test]
async fn without_functions_the_scripts_run_by_sha() {
    let redis = PrivateRedis::start();
    let mut admin = compactor_testkit::redis::connection(&redis.url()).await;
    exec(
        &mut admin,
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg("default")
            .arg("-function"),
    )
    .await;
    let t = TestQueue::at(&redis.url(), QueueConfig::default()).await;
    let q = &t.queue;
    request(q, &key("a")).await;
    exec(&mut admin, redis::cmd("SCRIPT").arg("FLUSH")).await;
    request(q, &key("b")).await;
    let job = claim(q).await;
    q.complete(&job).await.unwrap();
    assert_eq!(q.counts().await.unwrap().waiting, 1);
    let stats: String = query(&mut admin, redis::cmd("INFO").arg("commandstats")).await;
    assert!(stats.contains("cmdstat_evalsha:"), "{stats}");
    assert!(!stats.contains("cmdstat_fcall:"), "{stats}");
}

#[tokio::test]
async fn a_malformed_payload_in_redis_is_reported_not_run() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("bad");
    request(q, &k).await;
    exec(
        &mut raw().await,
        redis::cmd("HSET")
            .arg(q.keys().job(&k))
            .arg("payload")
            .arg(r#"{"v":9,"key":{"domain":"chat","entity_id":"bad"},"trigger":{"kind":"auto"}}"#),
    )
    .await;
    match q.claim("w1").await.unwrap() {
        ClaimOutcome::Unusable { member, error } => {
            assert_eq!(member, "compact:chat:bad");
            assert!(error.contains("version 9"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    let dead = q.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1, "dead-lettered, never retried");
    assert!(dead[0].reason.contains("version 9"));
    assert_nothing_to_claim(q).await;
}

#[tokio::test]
async fn an_unreachable_redis_is_a_typed_error_without_the_password() {
    let config = QueueConfig::default();
    // Port 1 on loopback: nothing listens there.
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        Queue::connect("redis://user:hunter2@127.0.0.1:1/0", config),
    )
    .await
    .expect("fails fast")
    .unwrap_err();
    assert!(matches!(err, QueueError::Connect { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("127.0.0.1:1") && !text.contains("hunter2"),
        "{text}"
    );
}

#[tokio::test]
async fn a_retryable_failure_runs_again_after_its_delay() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let job = request_and_claim(q, &key("retry")).await;
    let failure = q
        .fail(&job, retry_after(Duration::ZERO), "llm timeout")
        .await
        .unwrap();
    assert_eq!(failure, Failure::RetryScheduled);
    let again = claim(q).await;
    assert_eq!((again.job_id, again.attempt), (job.job_id, 2));
    assert_ne!(again.lease_token, job.lease_token);
    assert_eq!(
        q.fail(&job, FailAction::DeadLetter, "stale").await.unwrap(),
        Failure::LeaseLost
    );

    let delayed = q
        .fail(&again, retry_after(Duration::from_secs(60)), "429")
        .await
        .unwrap();
    assert_eq!(delayed, Failure::RetryScheduled);
    let ClaimOutcome::Empty {
        next_due_in: Some(next),
    } = q.claim("w1").await.unwrap()
    else {
        panic!("the retry is not due yet")
    };
    assert!(
        next > Duration::from_secs(50) && next <= Duration::from_secs(60),
        "due in about a minute, not {next:?}"
    );
}

#[tokio::test]
async fn a_permanent_failure_is_dead_lettered_with_its_reason_and_can_be_retried() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("perm");
    let job = request_and_claim(q, &k).await;
    let failure = q
        .fail(&job, FailAction::DeadLetter, "unknown workstream")
        .await
        .unwrap();
    assert_eq!(failure, Failure::DeadLettered);
    assert_eq!(
        q.job_state(&k).await.unwrap(),
        Some(JobState::Dead { job_id: job.job_id })
    );
    let dead = q.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].member.as_str(), dead[0].job_id),
        ("compact:chat:perm", job.job_id)
    );
    assert_eq!(
        (dead[0].reason.as_str(), dead[0].attempts),
        ("unknown workstream", 1)
    );
    assert_eq!(q.counts().await.unwrap().dead, 1);

    let retried = q.retry_dead(&dead[0].entry).await.unwrap();
    assert!(matches!(retried, Some(EnqueueOutcome::Added { .. })));
    assert_eq!(q.counts().await.unwrap().dead, 0);
    assert_eq!(
        q.retry_dead(&dead[0].entry).await.unwrap(),
        None,
        "gone after retry"
    );
    let rerun = claim(q).await;
    assert_eq!(rerun.payload.trigger, Trigger::Auto);
    assert_eq!(rerun.attempt, 1);

    q.fail(&rerun, FailAction::DeadLetter, "again")
        .await
        .unwrap();
    assert_eq!(q.purge_dead(None).await.unwrap(), 1);
    assert!(q.dead_letters(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_dead_lettered_run_still_gets_its_follow_up() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("dead-follow");
    let job = request_and_claim(q, &k).await;
    request(q, &k).await;
    let failure = q.fail(&job, FailAction::DeadLetter, "boom").await.unwrap();
    assert!(matches!(failure, Failure::DeadLetteredFollowUpAdded { .. }));
    let follow_up = claim(q).await;
    assert_eq!(follow_up.payload.trigger, Trigger::FollowUp);
}

/// Calls `recover` until it reports something (the lease must expire on
/// the server clock first); bounded by a timeout.
pub(crate) async fn recover_until_something(q: &Queue) -> Recovery {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let r = q.recover(100).await.unwrap();
            if r != Recovery::default() {
                return r;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the lease expires")
}

#[tokio::test]
async fn an_expired_lease_returns_the_job_and_stalls_end_in_the_dead_letter_set() {
    let t = TestQueue::with(QueueConfig {
        max_stalls: 2,
        ..short_leases()
    })
    .await;
    let q = &t.queue;
    // A worker claims it and "crashes": it never renews or completes.
    let first = request_and_claim(q, &key("crashy")).await;
    assert_eq!(recover_until_something(q).await, ONE_RECOVERED);
    assert!(
        !q.renew(&first).await.unwrap(),
        "the crashed worker's lease is gone"
    );
    let second = claim(q).await;
    assert_eq!(
        (second.job_id, second.attempt),
        (first.job_id, 1),
        "a stall does not use up an attempt (stalls have their own bound)"
    );
    assert_ne!(second.lease_token, first.lease_token);
    assert_eq!(
        q.complete(&first).await.unwrap(),
        Completion::LeaseLost,
        "fenced"
    );
    assert_eq!(recover_until_something(q).await, ONE_RECOVERED);
    claim(q).await;
    assert_eq!(recover_until_something(q).await, ONE_DEAD_LETTERED);
    let dead = q.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].stalls, 3);
    assert!(dead[0].reason.starts_with("stalled"), "{}", dead[0].reason);
    assert_nothing_to_claim(q).await;
}

#[tokio::test]
async fn dead_letters_are_bounded_by_count() {
    let t = TestQueue::with(QueueConfig {
        dead_max_count: 3,
        ..QueueConfig::default()
    })
    .await;
    let q = &t.queue;
    for i in 0..5 {
        let job = request_and_claim(q, &key(&format!("d{i}"))).await;
        q.fail(&job, FailAction::DeadLetter, &format!("reason {i}"))
            .await
            .unwrap();
    }
    let dead = q.dead_letters(10).await.unwrap();
    let reasons: Vec<&str> = dead.iter().map(|d| d.reason.as_str()).collect();
    assert_eq!(
        reasons,
        ["reason 4", "reason 3", "reason 2"],
        "newest first, oldest evicted"
    );
}

#[tokio::test]
async fn a_released_job_runs_again_without_losing_an_attempt_or_instructions() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("shutdown");
    let job = request_and_claim(q, &k).await;
    let manual = Trigger::Manual {
        instructions: Some("keep the API names".into()),
    };
    q.request_compaction(&k, manual.clone()).await.unwrap();
    assert!(q.release(&job).await.unwrap());
    assert!(!q.release(&job).await.unwrap(), "only once");
    assert_eq!(q.counts().await.unwrap().running, 0);
    let again = claim(q).await;
    assert_eq!(
        (again.job_id, again.attempt),
        (job.job_id, 1),
        "the attempt was not used up"
    );
    assert_eq!(
        again.payload.trigger, manual,
        "the manual follow-up is folded in"
    );
    assert_eq!(
        q.complete(&again).await.unwrap(),
        Completion::Done,
        "no extra follow-up"
    );
}

#[tokio::test]
async fn when_redis_goes_away_requests_fail_instead_of_pretending() {
    let mut redis = PrivateRedis::start();
    let config = QueueConfig {
        response_timeout: Duration::from_secs(2),
        ..QueueConfig::default()
    };
    let q = Queue::connect(&redis.url(), config).await.unwrap();
    assert!(matches!(
        request(&q, &key("x")).await,
        EnqueueOutcome::Added { .. }
    ));
    redis.kill();
    let err = q
        .request_compaction(&key("y"), Trigger::Auto)
        .await
        .unwrap_err();
    assert!(
        matches!(err, QueueError::Redis { op: "enqueue", .. }),
        "{err}"
    );
    assert!(q.enqueue_many(&[(key("z"), Trigger::Auto)]).await.is_err());
    assert!(q.claim("w1").await.is_err());
}

#[tokio::test]
async fn complete_and_claim_acks_and_takes_the_next_job_in_one_step() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    request(q, &key("one")).await;
    request(q, &key("two")).await;
    let first = claim(q).await;
    // A request for the running entity: its follow-up goes behind "two".
    request(q, &first.key).await;
    let (completion, next) = q.complete_and_claim(&first, "w1").await.unwrap();
    assert!(matches!(completion, Completion::FollowUpAdded { .. }));
    let second = claimed(next);
    assert_eq!(second.key, key("two"));
    // A stale holder completes nothing.
    assert_eq!(q.complete(&first).await.unwrap(), Completion::LeaseLost);
    assert_eq!(
        q.counts().await.unwrap().waiting,
        1,
        "the follow-up is still waiting"
    );
    let (_, next) = q.complete_and_claim(&second, "w1").await.unwrap();
    let follow_up = claimed(next);
    assert_eq!(
        (follow_up.key, follow_up.payload.trigger),
        (key("one"), Trigger::FollowUp)
    );
}

#[tokio::test]
async fn a_backlog_of_100k_waiting_jobs_is_served_oldest_first() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let requests: Vec<(EntityKey, Trigger)> = (0..100_000)
        .map(|i| (key(&format!("b{i}")), Trigger::Auto))
        .collect();
    for chunk in requests.chunks(5_000) {
        q.enqueue_many(chunk).await.unwrap();
    }
    assert_eq!(q.counts().await.unwrap().waiting, 100_000);
    // Served in the order they were added, also within one millisecond
    // (b10 sorts before b2 by name, so name order would fail here).
    let mut job = claim(q).await;
    for i in 0..12 {
        assert_eq!(job.key, key(&format!("b{i}")));
        if i == 11 {
            break;
        }
        let (_, next) = q.complete_and_claim(&job, "w1").await.unwrap();
        job = claimed(next);
    }
    let counts = q.counts().await.unwrap();
    assert_eq!(
        (counts.waiting, counts.running, counts.done),
        (99_988, 1, 11)
    );
}

#[tokio::test]
async fn settle_acknowledges_many_jobs_and_fills_their_slots_in_one_step() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    for e in ["a", "b", "c", "d", "e"] {
        request(q, &key(e)).await;
    }
    let settled = q.settle(&[], 3, "w1").await.unwrap();
    let running: Vec<ClaimedJob> = settled.claimed.into_iter().map(claimed).collect();
    assert_eq!(
        running.iter().map(|j| j.key.clone()).collect::<Vec<_>>(),
        vec![key("a"), key("b"), key("c")],
        "oldest first"
    );
    // "b" gets a follow-up request; "c" lost its lease to someone else.
    request(q, &key("b")).await;
    let stale_c = ClaimedJob {
        lease_token: "stale".into(),
        ..running[2].clone()
    };
    let settled = q
        .settle(&[&running[0], &running[1], &stale_c], 3, "w1")
        .await
        .unwrap();
    assert_eq!(settled.completions.len(), 3);
    assert_eq!(settled.completions[0], Completion::Done);
    assert!(matches!(
        settled.completions[1],
        Completion::FollowUpAdded { .. }
    ));
    assert_eq!(settled.completions[2], Completion::LeaseLost);
    let next: Vec<EntityKey> = settled
        .claimed
        .into_iter()
        .map(|c| claimed(c).key)
        .collect();
    assert_eq!(
        next,
        vec![key("d"), key("e"), key("b")],
        "the follow-up queues behind the jobs added before it"
    );
    assert_eq!(settled.next_due_in, None, "nothing else waits");
    assert!(matches!(
        q.job_state(&key("c")).await.unwrap(),
        Some(JobState::Running { .. })
    ));
    let counts = q.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.running, counts.done), (0, 4, 2));
}

#[tokio::test]
async fn a_wake_up_is_announced_for_every_job_that_becomes_ready() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let mut wake = q.subscribe_wakeups().await.unwrap();
    request(q, &key("w")).await;
    next_notice(&mut wake, "announced when added").await;
    // Coalesced and follow-up requests add nothing: no announcement.
    request(q, &key("w")).await;
    let job = claim(q).await;
    request(q, &key("w")).await;
    assert!(
        tokio::time::timeout(
            Duration::from_millis(300),
            wake.next(Duration::from_secs(1))
        )
        .await
        .is_err(),
        "nothing new was ready"
    );
    // The follow-up is added when the run ends.
    q.complete(&job).await.unwrap();
    next_notice(&mut wake, "announced when the follow-up was added").await;
    // A retry is announced so idle workers learn when it is due.
    let follow_up = claim(q).await;
    q.fail(&follow_up, retry_after(Duration::from_millis(10)), "503")
        .await
        .unwrap();
    next_notice(&mut wake, "announced when retried").await;
}

#[tokio::test]
async fn a_handed_back_job_keeps_its_place_in_line() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let first = request_and_claim(q, &key("first")).await;
    request(q, &key("second")).await;
    assert!(q.release(&first).await.unwrap());
    let again = claim(q).await;
    assert_eq!(again.key, key("first"), "ahead of the job added after it");
    assert_eq!(again.attempt, 1, "the hand-back did not use an attempt");
}

#[tokio::test]
async fn finished_records_beyond_the_count_bound_are_deleted() {
    let t = TestQueue::with(QueueConfig {
        done_max_count: 2,
        ..QueueConfig::default()
    })
    .await;
    let q = &t.queue;
    for e in ["d1", "d2", "d3"] {
        let job = request_and_claim(q, &key(e)).await;
        assert_eq!(q.complete(&job).await.unwrap(), Completion::Done);
    }
    assert_eq!(q.counts().await.unwrap().done, 2);
    assert_eq!(
        q.job_state(&key("d1")).await.unwrap(),
        None,
        "the oldest record is gone, not just unindexed"
    );
    assert!(matches!(
        q.job_state(&key("d3")).await.unwrap(),
        Some(JobState::Done { .. })
    ));
    // An entity whose record is trimmed while it has a newer job keeps it.
    request(q, &key("d2")).await;
    request(q, &key("d4")).await;
    let d2 = claim(q).await;
    assert_eq!(d2.key, key("d2"));
    let d4 = claim(q).await;
    q.complete(&d4).await.unwrap();
    assert!(
        matches!(
            q.job_state(&key("d2")).await.unwrap(),
            Some(JobState::Running { .. })
        ),
        "the running job of d2 survives the trim of its old record"
    );
}

/// At its bound a busy queue trims its finished records once every 64th
/// of the bound, not on each completion: the done set holds at most that
/// many over the bound, and each trim brings it back to the bound.
#[tokio::test]
async fn finished_records_are_trimmed_in_batches_a_64th_over_the_bound() {
    let t = TestQueue::with(QueueConfig {
        done_max_count: 128,
        ..QueueConfig::default()
    })
    .await;
    let q = &t.queue;
    let mut sizes = Vec::new();
    for i in 0..140 {
        let job = request_and_claim(q, &key(&format!("batch{i}"))).await;
        assert_eq!(q.complete(&job).await.unwrap(), Completion::Done);
        sizes.push(q.counts().await.unwrap().done);
    }
    assert_eq!(*sizes.iter().max().unwrap(), 130, "{sizes:?}");
    // 130 kept (128 and two over), the 131st brings it back to 128.
    assert_eq!(sizes[129], 130);
    assert_eq!(sizes[130], 128, "{sizes:?}");
    assert_eq!(&sizes[131..134], &[129, 130, 128], "{sizes:?}");
    // The oldest records went, not just their entries.
    assert_eq!(q.job_state(&key("batch0")).await.unwrap(), None);
    assert!(matches!(
        q.job_state(&key("batch139")).await.unwrap(),
        Some(JobState::Done { .. })
    ));
}

#[tokio::test]
async fn dead_letters_past_their_age_leave_the_set_even_in_a_quiet_queue() {
    let t = TestQueue::with(QueueConfig {
        dead_max_age: Duration::from_millis(200),
        ..QueueConfig::default()
    })
    .await;
    let q = &t.queue;
    let job = request_and_claim(q, &key("old")).await;
    q.fail(&job, FailAction::DeadLetter, "bad").await.unwrap();
    assert_eq!(q.counts().await.unwrap().dead, 1);
    // No new dead letter arrives; the recovery sweep trims by age.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        q.recover(10).await.unwrap();
        if q.counts().await.unwrap().dead == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never trimmed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(q.dead_letters(10).await.unwrap().is_empty());
}

// ------------------------------------------------ worker registry, progress

pub(crate) fn registration(id: &str) -> WorkerRegistration {
    WorkerRegistration {
        id: id.to_owned(),
        name: "compactor-worker".to_owned(),
        host: "box-1".to_owned(),
        pid: 4242,
        version: "0.1.0".to_owned(),
        concurrency: 4,
        started_at_ms: 1_700_000_000_000,
    }
}

#[tokio::test]
async fn workers_are_live_while_they_beat_and_drop_out_when_they_stop() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    assert!(q.live_workers().await.unwrap().is_empty());
    let a = registration("worker-a-1");
    let b = registration("worker-b-2");
    q.heartbeat(&a, Duration::from_secs(30)).await.unwrap();
    q.heartbeat(&b, Duration::from_millis(300)).await.unwrap();
    let mut live = q.live_workers().await.unwrap();
    live.sort_by(|x, y| x.registration.id.cmp(&y.registration.id));
    assert_eq!(live.len(), 2);
    assert_eq!(live[0].registration, a, "listed as it registered");
    assert!(live[0].heartbeat_at_ms > 0);
    assert_eq!(live[0].expires_at_ms, live[0].heartbeat_at_ms + 30_000);
    let before = live[0].heartbeat_at_ms;

    // b stops beating: it drops out once its TTL has passed; a beats on.
    tokio::time::sleep(Duration::from_millis(400)).await;
    q.heartbeat(&a, Duration::from_secs(30)).await.unwrap();
    let live = q.live_workers().await.unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0].registration.id, "worker-a-1");
    assert!(live[0].heartbeat_at_ms >= before + 400);
    let progress = q.job_progress(&key("any")).await.unwrap();
    assert_eq!(progress.live_workers, 1);

    // A stopping worker leaves at once.
    assert!(q.deregister("worker-a-1").await.unwrap());
    assert!(!q.deregister("worker-a-1").await.unwrap());
    assert!(q.live_workers().await.unwrap().is_empty());
    assert_eq!(q.job_progress(&key("any")).await.unwrap().live_workers, 0);
}

#[tokio::test]
async fn job_progress_follows_a_job_from_queued_to_backing_off_to_done() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let k = key("progress");
    let none = q.job_progress(&k).await.unwrap();
    assert_eq!(none.stage, None);
    assert!(!none.pending());

    request(q, &k).await;
    let queued = q.job_progress(&k).await.unwrap();
    let Some(JobStage::Waiting {
        job_id,
        attempts: 0,
        due_in,
        paused: false,
    }) = queued.stage
    else {
        panic!("{queued:?}")
    };
    assert_eq!(due_in, Duration::ZERO, "due at once");
    assert!(queued.pending());
    // Paused, whether the queue or the entity's domain is: it says so.
    for scope in [
        PauseScope::Queue,
        PauseScope::parse(Some(k.domain())).unwrap(),
    ] {
        q.pause(&scope).await.unwrap();
        let held = q.job_progress(&k).await.unwrap();
        assert!(
            matches!(held.stage, Some(JobStage::Waiting { paused: true, .. })),
            "{scope:?}: {held:?}"
        );
        q.resume(&scope).await.unwrap();
    }

    let job = claim(q).await;
    let running = q.job_progress(&k).await.unwrap();
    let Some(JobStage::Running {
        job_id: running_id,
        attempt: 1,
        lease_left,
    }) = running.stage
    else {
        panic!("{running:?}")
    };
    assert_eq!(running_id, job_id);
    assert!(lease_left > Duration::from_secs(20), "{lease_left:?}");

    q.fail(&job, retry_after(Duration::from_secs(60)), "503")
        .await
        .unwrap();
    let backing_off = q.job_progress(&k).await.unwrap();
    let Some(JobStage::Waiting {
        attempts: 1,
        due_in,
        ..
    }) = backing_off.stage
    else {
        panic!("{backing_off:?}")
    };
    assert!(
        due_in > Duration::from_secs(50) && due_in <= Duration::from_secs(60),
        "{due_in:?}"
    );

    q.fail(
        &claim_when_due(q, &k).await,
        FailAction::DeadLetter,
        "gave up",
    )
    .await
    .unwrap();
    let dead = q.job_progress(&k).await.unwrap();
    assert_eq!(dead.stage, Some(JobStage::Dead { job_id }));
    assert!(!dead.pending());

    let again = request_and_claim(q, &k).await;
    q.complete(&again).await.unwrap();
    let done = q.job_progress(&k).await.unwrap();
    assert_eq!(
        done.stage,
        Some(JobStage::Done {
            job_id: again.job_id
        })
    );
}

/// Moves `k`'s delayed retry to now (as time passing would) and claims it.
async fn claim_when_due(q: &Queue, k: &EntityKey) -> ClaimedJob {
    exec(
        &mut raw().await,
        redis::cmd("ZADD")
            .arg(q.keys().waiting())
            .arg(0)
            .arg(Keys::member(k)),
    )
    .await;
    claim(q).await
}

/// The next notice on `sub` for `member`'s release channel, as text.
async fn next_release_notice(q: &Queue, sub: &mut Subscription, k: &EntityKey) -> String {
    let channel = q.keys().released_channel(k);
    loop {
        let notice = next_notice(sub, "a notice within 5 s").await;
        if notice.channel == channel {
            return String::from_utf8(notice.payload).unwrap();
        }
    }
}

#[tokio::test]
async fn the_queue_announces_every_job_that_settles_on_its_release_channel() {
    let t = TestQueue::with(QueueConfig {
        max_stalls: 0,
        ..short_leases()
    })
    .await;
    let q = &t.queue;
    let k = key("settles");
    let mut sub = q.subscribe_releases().await.unwrap();

    let job = request_and_claim(q, &k).await;
    request(q, &k).await;
    q.complete(&job).await.unwrap();
    assert_eq!(
        next_release_notice(q, &mut sub, &k).await,
        r#"{"settled":"followup"}"#
    );
    let follow_up = claim(q).await;
    q.fail(&follow_up, retry_after(Duration::ZERO), "503")
        .await
        .unwrap();
    assert_eq!(
        next_release_notice(q, &mut sub, &k).await,
        r#"{"settled":"retry"}"#
    );
    let retry = claim(q).await;
    q.complete(&retry).await.unwrap();
    assert_eq!(
        next_release_notice(q, &mut sub, &k).await,
        r#"{"settled":"done"}"#
    );
    let doomed = request_and_claim(q, &k).await;
    q.fail(&doomed, FailAction::DeadLetter, "permanent")
        .await
        .unwrap();
    assert_eq!(
        next_release_notice(q, &mut sub, &k).await,
        r#"{"settled":"dead"}"#
    );
    // A stall over the bound (0 here) dead-letters it in the sweep.
    request_and_claim(q, &k).await;
    assert_eq!(recover_until_something(q).await.dead_lettered, 1);
    assert_eq!(
        next_release_notice(q, &mut sub, &k).await,
        r#"{"settled":"dead"}"#
    );
}

/// A plain connection for tampering with a queue's keys.
async fn raw() -> MultiplexedConnection {
    compactor_testkit::redis::connection(&redis_url()).await
}

/// Runs `cmd` on `conn` and returns its reply: one tampering step in one
/// call instead of five lines.
async fn query<T: redis::FromRedisValue>(conn: &mut MultiplexedConnection, cmd: &redis::Cmd) -> T {
    cmd.query_async(conn).await.unwrap()
}

/// Runs `cmd` on `conn`, a tampering step whose reply does not matter.
pub(crate) async fn exec(conn: &mut MultiplexedConnection, cmd: &redis::Cmd) {
    query::<()>(conn, cmd).await
}

/// `SET key value`: a string where a script expects another type, or a
/// counter put right.
async fn set(conn: &mut MultiplexedConnection, key: impl ToRedisArgs, value: impl ToRedisArgs) {
    exec(conn, redis::cmd("SET").arg(key).arg(value)).await
}

/// `DEL key`: a set lost (evicted), or a tampered key put right.
pub(crate) async fn del(conn: &mut MultiplexedConnection, key: impl ToRedisArgs) {
    exec(conn, redis::cmd("DEL").arg(key)).await
}

/// The fields of a job record, as stored.
async fn record(
    conn: &mut MultiplexedConnection,
    q: &Queue,
    k: &EntityKey,
) -> std::collections::HashMap<String, String> {
    query(conn, redis::cmd("HGETALL").arg(q.keys().job(k))).await
}

/// Asserts that `job` still runs under its lease, its record and its
/// place in the running set untouched by a refused call.
async fn assert_still_running(
    conn: &mut MultiplexedConnection,
    q: &Queue,
    k: &EntityKey,
    job: &ClaimedJob,
) {
    let fields = record(conn, q, k).await;
    assert_eq!(fields.get("state").map(String::as_str), Some("running"));
    assert_eq!(fields.get("lease"), Some(&job.lease_token));
    let in_running: Option<f64> = query(
        conn,
        redis::cmd("ZSCORE")
            .arg(q.keys().running())
            .arg(Keys::member(k)),
    )
    .await;
    assert!(in_running.is_some(), "still tracked as running");
}

/// Asserts that `error` refuses `key` for holding another type, by name.
fn assert_wrong_type(error: &QueueError, key: &str) {
    match error {
        QueueError::WrongType { key: refused, .. } => {
            assert_eq!(refused.key.as_deref(), Some(key), "{error}")
        }
        other => panic!("expected a refusal of {key}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_script_that_meets_a_key_of_the_wrong_type_changes_nothing() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let mut conn = raw().await;
    let k = key("tampered");
    // The waiting set replaced by a string (tampered with, or a clash of
    // names): the request fails, and leaves no record behind that would
    // coalesce every later request into a job that never runs.
    set(&mut conn, q.keys().waiting(), "not a sorted set").await;
    let error = q.request_compaction(&k, Trigger::Auto).await.unwrap_err();
    println!("{error}");
    assert_wrong_type(&error, &q.keys().waiting());
    assert!(!error.is_unavailable(), "not an outage: {error}");
    assert_eq!(q.job_state(&k).await.unwrap(), None, "nothing was written");
    let seq: Option<String> = query(&mut conn, redis::cmd("GET").arg(q.keys().seq())).await;
    assert_eq!(seq, None, "no job id was used up");
    del(&mut conn, q.keys().waiting()).await;
    assert!(matches!(request(q, &k).await, EnqueueOutcome::Added { .. }));

    // A retry whose waiting set is not a set: the run keeps its lease and
    // its place in the running set, as if the call had not been made.
    let job = claim(q).await;
    set(&mut conn, q.keys().waiting(), "not a sorted set").await;
    let delay = retry_after(Duration::from_millis(1));
    let error = q.fail(&job, delay, "boom").await.unwrap_err();
    assert_wrong_type(&error, &q.keys().waiting());
    assert_still_running(&mut conn, q, &k, &job).await;
    assert_eq!(record(&mut conn, q, &k).await.get("last_error"), None);
    del(&mut conn, q.keys().waiting()).await;
    assert_eq!(
        q.fail(&job, delay, "boom").await.unwrap(),
        Failure::RetryScheduled
    );

    // A dead-letter whose dead-letter set is not a set: checked only on
    // that path, and still before the first write.
    let job = claim_when_due(q, &k).await;
    set(&mut conn, q.keys().dead(), "not a sorted set").await;
    let error = q
        .fail(&job, FailAction::DeadLetter, "boom")
        .await
        .unwrap_err();
    assert_wrong_type(&error, &q.keys().dead());
    assert_still_running(&mut conn, q, &k, &job).await;
    del(&mut conn, q.keys().dead()).await;
    assert_eq!(
        q.fail(&job, FailAction::DeadLetter, "boom").await.unwrap(),
        Failure::DeadLettered
    );
    request(q, &k).await;

    // A completion whose running set is not a set: the record is not
    // marked done while the running set still lists it.
    let job = claim_when_due(q, &k).await;
    set(&mut conn, q.keys().done(), "not a sorted set").await;
    let error = q.complete(&job).await.unwrap_err();
    assert_wrong_type(&error, &q.keys().done());
    let fields = record(&mut conn, q, &k).await;
    assert_eq!(fields.get("state").map(String::as_str), Some("running"));
    del(&mut conn, q.keys().done()).await;
    assert_eq!(q.complete(&job).await.unwrap(), Completion::Done);

    // A job id counter that is not a number: refused before the record is
    // replaced.
    let other = key("counter");
    set(&mut conn, q.keys().seq(), "not a number").await;
    let error = q
        .request_compaction(&other, Trigger::Auto)
        .await
        .unwrap_err();
    assert_wrong_type(&error, &q.keys().seq());
    assert_eq!(q.job_state(&other).await.unwrap(), None);
    set(&mut conn, q.keys().seq(), 100).await;

    // A waiting entry whose job key holds a string: the claim reports it
    // unusable and goes on to the next job, instead of failing half-way.
    let clash = "compact:chat:clash";
    let _: () = redis::pipe()
        .cmd("SET")
        .arg(q.keys().job_of_member(clash))
        .arg("a string")
        .ignore()
        .cmd("ZADD")
        .arg(q.keys().waiting())
        .arg(0)
        .arg(clash)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();
    request(q, &other).await;
    let settled = q.settle(&[], 2, "w1").await.unwrap();
    assert_eq!(settled.claimed.len(), 2, "{:?}", settled.claimed);
    assert!(
        matches!(&settled.claimed[0], ClaimOutcome::Unusable { member, .. } if member == clash),
        "{:?}",
        settled.claimed
    );
    assert!(
        matches!(&settled.claimed[1], ClaimOutcome::Claimed(job) if job.key == other),
        "{:?}",
        settled.claimed
    );
}

/// A renew whose running set is not a set is refused before it writes the
/// record's new deadline: the running set is its first write.
#[tokio::test]
async fn a_renew_that_meets_a_running_set_of_the_wrong_type_changes_nothing() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let mut conn = raw().await;
    let k = key("renewing");
    let job = request_and_claim(q, &k).await;
    let before = record(&mut conn, q, &k).await;
    set(&mut conn, q.keys().running(), "not a sorted set").await;
    let error = q.renew(&job).await.unwrap_err();
    assert_wrong_type(&error, &q.keys().running());
    let after = record(&mut conn, q, &k).await;
    assert_eq!(after.get("deadline"), before.get("deadline"), "{after:?}");
    del(&mut conn, q.keys().running()).await;
    assert!(q.renew(&job).await.unwrap());
}

/// The claim of a `settle` that completed jobs first meets a lane of the
/// wrong type after the completions were written: the completions stand
/// (each whole), nothing is claimed, and the next claim alone, which has
/// written nothing yet, is refused as before.
#[tokio::test]
async fn a_lane_of_the_wrong_type_met_after_a_completion_claims_nothing_and_loses_nothing() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let mut conn = raw().await;
    for (lane, k) in [
        (q.keys().waiting(), key("finishing")),
        (q.keys().urgent(), key("finishing-urgent")),
    ] {
        let job = request_and_claim(q, &k).await;
        set(&mut conn, &lane, "not a sorted set").await;
        let settled = q.settle(&[&job], 1, "w1").await.unwrap();
        assert_eq!(settled.completions, vec![Completion::Done], "{lane}");
        assert!(settled.claimed.is_empty(), "{lane}: {:?}", settled.claimed);
        assert!(matches!(
            q.job_state(&k).await.unwrap(),
            Some(JobState::Done { .. })
        ));
        let error = q.claim("w1").await.unwrap_err();
        assert_wrong_type(&error, &lane);
        del(&mut conn, &lane).await;
        // The same job, completed again: its lease is gone, nothing changes.
        assert_eq!(q.complete(&job).await.unwrap(), Completion::LeaseLost);
    }
    let other = key("after");
    request(q, &other).await;
    assert_eq!(claim(q).await.key, other, "the queue works again");
}

#[tokio::test]
async fn the_repair_walk_puts_back_every_record_its_set_lost() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let mut conn = raw().await;
    let keys: Vec<EntityKey> = (0..50).map(|i| key(&format!("walk{i}"))).collect();
    for k in &keys {
        request(q, k).await;
    }
    del(&mut conn, q.keys().waiting()).await;
    assert_eq!(q.counts().await.unwrap().waiting, 0);
    // One walk over the whole keyspace (other tests' keys included).
    let mut requeued = 0;
    loop {
        let step = q.repair_step(1_000).await.unwrap();
        requeued += step.requeued;
        assert_eq!(step.relisted, 0);
        if step.walk_ended {
            break;
        }
    }
    assert_eq!(requeued, 50);
    assert_eq!(q.counts().await.unwrap().waiting, 50);
    // Nothing more to repair: a second walk changes nothing.
    loop {
        let step = q.repair_step(1_000).await.unwrap();
        assert_eq!(step.repaired(), 0);
        if step.walk_ended {
            break;
        }
    }
    // In their original order.
    let first = claim(q).await;
    assert_eq!(first.key, keys[0]);
    assert_eq!(
        q.repair_jobs(&keys).await.unwrap().repaired(),
        0,
        "named records in their sets are left alone"
    );
}

#[tokio::test]
async fn a_waiting_record_missing_from_the_waiting_set_is_put_back_by_the_next_request() {
    let t = TestQueue::new().await;
    let q = &t.queue;
    let mut conn = raw().await;
    let k = key("evicted");
    let EnqueueOutcome::Added { job_id } = request(q, &k).await else {
        panic!("a new job")
    };
    // The waiting set is lost (evicted), the record survives.
    del(&mut conn, q.keys().waiting()).await;
    assert_nothing_to_claim(q).await;
    assert_eq!(
        request(q, &k).await,
        EnqueueOutcome::Coalesced { job_id },
        "the request joins the job the record names…"
    );
    let job = claim(q).await;
    assert_eq!(job.job_id, job_id, "…and that job is in line again");
    assert_eq!(job.key, k);
}

#[tokio::test]
async fn a_running_record_missing_from_the_running_set_is_recovered_as_an_expired_lease() {
    let t = TestQueue::with(short_leases()).await;
    let q = &t.queue;
    let mut conn = raw().await;
    let k = key("untracked");
    let crashed = request_and_claim(q, &k).await;
    // Its worker died, and the running set lost its entry: no sweep would
    // ever find the expired lease.
    exec(
        &mut conn,
        redis::cmd("ZREM")
            .arg(q.keys().running())
            .arg(Keys::member(&k)),
    )
    .await;
    assert_eq!(
        request(q, &k).await,
        EnqueueOutcome::FollowUpRecorded {
            job_id: crashed.job_id
        }
    );
    assert_eq!(
        recover_until_something(q).await,
        ONE_RECOVERED,
        "the request put the lease back where the sweep finds it"
    );
    let again = claim(q).await;
    assert_eq!(again.job_id, crashed.job_id);
    assert_ne!(again.lease_token, crashed.lease_token);
}
