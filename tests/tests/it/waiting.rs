//! Chat requests waiting on a requested compaction (`Compactor::wait`):
//! the whole of it — queued, running, backing off between attempts — woken
//! by announcements within milliseconds, never blocked past their timeout,
//! told at once when no worker is live to run it, and freed by the lease
//! deadline when the worker that held it died. The running-only mode keeps
//! to the entity lease. Real Redis and PostgreSQL; the LLM faked at the
//! HTTP boundary.

use std::time::{Duration, Instant};

use compactor_e2e::db::TestDb;
use compactor_e2e::{
    client, compaction_event, conversation, eventually, key, request_compaction, settings,
    spawn_worker, still_waiting, take_lease, wait_through_compaction, FakeLlm, Fault, TestRedis,
};
use compactor_producer::client::{Compactor, IncomingMessage, Readiness, WaitMode, WaitPhase};
use compactor_producer::events::{CompactionEvent, EventOutcome};
use compactor_producer::queue::{
    ClaimOutcome, EnqueueOutcome, JobStage, PauseScope, Queue, WorkerRegistration,
};
use compactor_producer::store::LeaseTaken;
use compactor_shared::{EntityKey, Role};
use compactor_worker::settings::Settings;

fn event(outcome: EventOutcome) -> CompactionEvent {
    compaction_event("chat", "w", outcome, 7)
}

/// A client on a database and queue of their own, and workstream `entity`
/// holding one message: where the tests that hold its lease or its job by
/// hand start.
async fn one_message(entity: &str) -> (TestDb, TestRedis, Compactor, EntityKey) {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let c = client(&db, &redis).await;
    let k = key(entity);
    c.append_messages(&k, vec![IncomingMessage::text(Role::User, "hi")])
        .await
        .unwrap();
    (db, redis, c, k)
}

/// Registers a worker that is live but takes nothing (paused, or busy),
/// for `ttl`: a queued job stays queued, and is not said to have no worker.
async fn register_paused_worker(queue: &Queue, id: &str, ttl: Duration) {
    let paused = WorkerRegistration {
        id: id.to_owned(),
        name: "paused".to_owned(),
        host: "test".to_owned(),
        pid: 1,
        version: "test".to_owned(),
        concurrency: 1,
        started_at_ms: 0,
    };
    queue.heartbeat(&paused, ttl).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_running_compaction_the_wait_returns_at_once() {
    let (_db, _redis, c, k) = one_message("w").await;
    let ready = c
        .wait_until_ready(&k, Duration::from_secs(5))
        .await
        .unwrap();
    let Readiness::Ready { waited, event } = ready else {
        panic!("{ready:?}")
    };
    assert!(event.is_none());
    assert!(waited < Duration::from_secs(1), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_as_soon_as_the_lease_is_released() {
    let (db, _redis, c, k) = one_message("w").await;
    let (ws_id, taken) = take_lease(&db, &k, "worker-a", Duration::from_secs(60)).await;
    assert!(matches!(taken, LeaseTaken::Taken { .. }));

    let waiter = {
        let (c, k) = (c.clone(), k.clone());
        tokio::spawn(async move {
            let r = c
                .wait_until_ready(&k, Duration::from_secs(30))
                .await
                .unwrap();
            (r, Instant::now())
        })
    };
    let mut waiter = waiter;
    assert!(
        still_waiting(&mut waiter, Duration::from_millis(300)).await,
        "the waiter waits while the lease is held"
    );
    let released_at = Instant::now();
    assert!(db.store.release_lease(ws_id, "worker-a").await.unwrap());
    let sent = event(EventOutcome::Compacted);
    c.queue().publish_release(&k, &sent).await.unwrap();
    let (readiness, woke_at) = waiter.await.unwrap();
    let latency = woke_at - released_at;
    println!("waiter woke {latency:?} after the release");
    let Readiness::Compacted { event, .. } = readiness else {
        panic!("{readiness:?}")
    };
    assert_eq!(event, sent, "the waiter gets what the compaction did");
    // Target 50 ms; asserted loosely for a shared 2-core machine.
    assert!(latency < Duration::from_millis(500), "{latency:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_lease_ends_the_wait_at_its_timeout() {
    let (db, _redis, c, k) = one_message("w").await;
    take_lease(&db, &k, "stuck", Duration::from_secs(120)).await;
    let started = Instant::now();
    let r = c
        .wait_until_ready(&k, Duration::from_millis(400))
        .await
        .unwrap();
    let Readiness::TimedOut {
        waited,
        phase: WaitPhase::Running,
        job_id: None,
    } = r
    else {
        panic!("{r:?}")
    };
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "never blocked past the timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_lease_frees_waiters_at_its_deadline_and_is_taken_over() {
    let (db, _redis, c, k) = one_message("w").await;
    // A worker takes the lease and dies: no release, no announcement.
    let (ws_id, _) = take_lease(&db, &k, "dead-worker", Duration::from_millis(800)).await;
    let r = c
        .wait_until_ready(&k, Duration::from_secs(20))
        .await
        .unwrap();
    let Readiness::Ready { waited, event } = r else {
        panic!("{r:?}")
    };
    assert!(event.is_none());
    assert!(waited >= Duration::from_millis(500), "{waited:?}");
    assert!(
        waited < Duration::from_secs(5),
        "freed at the deadline: {waited:?}"
    );
    match db
        .store
        .take_lease(ws_id, "next-worker", Duration::from_secs(30))
        .await
        .unwrap()
    {
        LeaseTaken::Taken {
            reclaimed: Some(old),
        } => assert_eq!(old.owner, "dead-worker"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_during_a_real_compaction_gets_its_event() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    // Each LLM call takes a second: the compaction holds the lease a while.
    llm.fail_next([Fault::Hang(Duration::from_millis(1_500))]);
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    s.llm.request_timeout = Duration::from_secs(10);
    s.engine.trigger = compactor_e2e::small_window().trigger;
    let c = Compactor::from_parts(db.store.clone(), redis.queue().await, s.engine.clone()).await;
    let k = key("busy");
    c.append_messages(&k, conversation(200)).await.unwrap();
    c.finalize_turn(&k, None).await.unwrap();
    let worker = spawn_worker(s);
    let (event, waited) = wait_through_compaction(&c, &k, Duration::from_secs(20)).await;
    assert_eq!(event.outcome, EventOutcome::Compacted);
    assert_eq!(
        (event.domain.as_str(), event.entity_id.as_str()),
        ("chat", "busy")
    );
    assert!(event.tokens_after < event.tokens_before);
    assert!(event.messages_compacted > 0 && event.chunks >= 1);
    // The announced evidence figures are the run row's.
    let run = db.store.runs(&k, 1).await.unwrap().remove(0).run;
    assert!(event.evidence_kept > 0, "{event:?}");
    assert_eq!(
        (event.evidence_kept, event.evidence_dropped),
        (run.evidence_kept, run.evidence_dropped)
    );
    assert!(!event.degraded);
    println!("waited {waited:?} for a compaction: {event:?}");
    worker.stop().await;
}

/// A 20,000-token model: `conversation(200)` is over its trigger.
fn small_window(s: &mut Settings) {
    s.engine.trigger = compactor_e2e::small_window().trigger;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_compaction_is_waited_for_only_while_a_worker_is_live() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    small_window(&mut s);
    let c = Compactor::from_parts(db.store.clone(), redis.queue().await, s.engine.clone()).await;
    let k = key("queued");
    let job_id = request_compaction(&c, &k).await;

    // No worker at all: said at once, not after the timeout.
    let nobody = c
        .wait(&k, WaitMode::Requested, Duration::from_secs(20))
        .await
        .unwrap();
    let Readiness::NoLiveWorker {
        waited,
        phase: WaitPhase::Queued,
        job_id: waited_for,
    } = nobody
    else {
        panic!("{nobody:?}")
    };
    assert_eq!(waited_for, job_id);
    assert!(
        waited < Duration::from_secs(10),
        "not the whole timeout: {waited:?}"
    );
    // Running only: nothing holds the workstream, as before.
    let running_only = c
        .wait(&k, WaitMode::Running, Duration::from_secs(20))
        .await
        .unwrap();
    assert!(
        matches!(running_only, Readiness::Ready { event: None, .. }),
        "{running_only:?}"
    );

    // A worker is registered but takes nothing (paused, or busy): the
    // wait is the caller's to bound, and says where the job stood.
    let queue = redis.queue().await;
    register_paused_worker(&queue, "paused-worker-1", Duration::from_secs(60)).await;
    let still_queued = c
        .wait(&k, WaitMode::Requested, Duration::from_millis(300))
        .await
        .unwrap();
    let Readiness::TimedOut {
        waited,
        phase: WaitPhase::Queued,
        job_id: Some(waited_for),
    } = still_queued
    else {
        panic!("{still_queued:?}")
    };
    assert_eq!(waited_for, job_id);
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    // With the workstream's domain paused, the wait says so (it used to
    // say "queued", as if a worker would take it soon).
    let domain = PauseScope::parse(Some(k.domain())).unwrap();
    queue.pause(&domain).await.unwrap();
    let held = c
        .wait(&k, WaitMode::Requested, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(
        matches!(
            held,
            Readiness::TimedOut {
                phase: WaitPhase::Paused,
                job_id: Some(j),
                ..
            } if j == job_id
        ),
        "{held:?}"
    );
    queue.resume(&domain).await.unwrap();

    // A waiter that starts now sees the compaction through: a worker comes
    // up, runs it, and the waiter answers with what it committed.
    let waiter = {
        let (c, k) = (c.clone(), k.clone());
        tokio::spawn(async move {
            c.wait(&k, WaitMode::Requested, Duration::from_secs(45))
                .await
        })
    };
    let worker = spawn_worker(s);
    let done = waiter.await.unwrap().unwrap();
    let Readiness::Compacted { event, .. } = done else {
        panic!("{done:?}")
    };
    assert_eq!(event.job_id, job_id);
    assert_eq!(event.outcome, EventOutcome::Compacted);
    assert!(event.tokens_after < event.tokens_before, "{event:?}");
    let status = c.status(&k).await.unwrap();
    assert_eq!(
        status.compactions, 1,
        "it had committed when the wait answered"
    );
    worker.stop().await;
    queue.deregister("paused-worker-1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_covers_the_back_off_between_attempts() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    small_window(&mut s);
    // The first attempt fails at the LLM (the call and the client's two
    // retries); the second runs after a back-off of 2-4 s.
    s.worker.retry.base_delay = Duration::from_secs(2);
    // Three failed requests in a row would mark the provider unhealthy and
    // commit at once, degraded (the fast path): keep it off here, this test
    // is about the back-off.
    s.llm.unhealthy_after = 0;
    llm.fail_next([Fault::ServerError, Fault::ServerError, Fault::ServerError]);
    let c = Compactor::from_parts(db.store.clone(), redis.queue().await, s.engine.clone()).await;
    let k = key("backoff");
    let worker = spawn_worker(s);
    let job_id = request_compaction(&c, &k).await;
    let queue = redis.queue().await;
    eventually(
        "the first attempt failed",
        Duration::from_secs(30),
        || async {
            matches!(
                queue.job_progress(&k).await.unwrap().stage,
                Some(JobStage::Waiting { attempts: 1, .. })
            )
        },
    )
    .await;

    let r = c
        .wait(&k, WaitMode::Requested, Duration::from_millis(200))
        .await
        .unwrap();
    let Readiness::TimedOut {
        phase: WaitPhase::BackingOff,
        job_id: Some(waited_for),
        ..
    } = r
    else {
        panic!("{r:?}")
    };
    assert_eq!(waited_for, job_id);
    // Running only: nothing holds the workstream between attempts.
    let running_only = c
        .wait(&k, WaitMode::Running, Duration::from_secs(5))
        .await
        .unwrap();
    let Readiness::Ready { waited, .. } = running_only else {
        panic!("{running_only:?}")
    };
    assert!(waited < Duration::from_secs(1), "{waited:?}");

    let r = c
        .wait(&k, WaitMode::Requested, Duration::from_secs(45))
        .await
        .unwrap();
    let Readiness::Compacted { event, .. } = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        (event.job_id, event.attempt),
        (job_id, 2),
        "the retry committed"
    );
    assert!(!event.degraded);
    assert_eq!(c.status(&k).await.unwrap().compactions, 1);
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_job_is_waited_for_before_it_holds_the_workstream() {
    // The gap the issue found: a worker has claimed the job but not yet
    // taken the entity lease. Waiting for the lease alone answered "ready"
    // there; the requested compaction is still to run.
    let (_db, redis, c, k) = one_message("claimed").await;
    let job_id = match c.compact_now(&k, None).await.unwrap() {
        EnqueueOutcome::Added { job_id } => job_id,
        other => panic!("{other:?}"),
    };
    let queue = redis.queue().await;
    let ClaimOutcome::Claimed(job) = queue.claim("slow-worker").await.unwrap() else {
        panic!("the job is there")
    };
    assert!(c.status(&k).await.unwrap().lease.is_none());

    let r = c
        .wait(&k, WaitMode::Requested, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(
        matches!(
            r,
            Readiness::TimedOut {
                phase: WaitPhase::Running,
                job_id: Some(id),
                ..
            } if id == job_id
        ),
        "{r:?}"
    );
    let running_only = c
        .wait(&k, WaitMode::Running, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(
        matches!(running_only, Readiness::Ready { .. }),
        "{running_only:?}"
    );

    // The run ends without ever taking the workstream (nothing to do): the
    // queue's own announcement wakes the waiter.
    let waiter = {
        let (c, k) = (c.clone(), k.clone());
        tokio::spawn(async move {
            let r = c
                .wait(&k, WaitMode::Requested, Duration::from_secs(30))
                .await;
            (r, Instant::now())
        })
    };
    let mut waiter = waiter;
    assert!(
        still_waiting(&mut waiter, Duration::from_millis(300)).await,
        "the waiter waits while the job runs"
    );
    let completed_at = Instant::now();
    queue.complete(&job).await.unwrap();
    let (r, woke_at) = waiter.await.unwrap();
    let r = r.unwrap();
    assert!(matches!(r, Readiness::Ready { event: None, .. }), "{r:?}");
    println!("woken {:?} after the completion", woke_at - completed_at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_worker_is_in_the_registry_and_leaves_it_when_it_stops() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let mut s = settings(&db.url, &redis, None);
    s.worker.concurrency = 3;
    s.worker.name = "registry-test".to_owned();
    let queue = redis.queue().await;
    assert!(queue.live_workers().await.unwrap().is_empty());
    let worker = spawn_worker(s);
    eventually("the worker registers", Duration::from_secs(20), || async {
        !queue.live_workers().await.unwrap().is_empty()
    })
    .await;
    let live = queue.live_workers().await.unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    let me = &live[0];
    assert_eq!(me.registration.name, "registry-test");
    assert!(me.registration.id.starts_with("registry-test-"), "{me:?}");
    assert_eq!(me.registration.pid, std::process::id());
    assert_eq!(me.registration.concurrency, 3);
    assert_eq!(me.registration.version, env!("CARGO_PKG_VERSION"));
    assert!(me.registration.started_at_ms > 0);
    assert!(me.expires_at_ms > me.heartbeat_at_ms);
    // It beats on.
    let first_beat = me.heartbeat_at_ms;
    eventually("a later heartbeat", Duration::from_secs(10), || async {
        queue.live_workers().await.unwrap()[0].heartbeat_at_ms > first_beat
    })
    .await;
    worker.stop().await;
    assert!(
        queue.live_workers().await.unwrap().is_empty(),
        "a stopped worker is not live"
    );
}

/// A Redis outage does not end a wait: the waiter holds on while Redis is
/// down, and when Redis comes back (here empty, as a restart without
/// persistence leaves it: the job changed without any announcement) it
/// subscribes again and looks at once, and answers with what it finds —
/// well before its own timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_rides_out_a_redis_outage_and_looks_again_when_redis_returns() {
    let db = TestDb::postgres().await;
    let mut redis = compactor_e2e::PrivateRedis::start();
    let port = redis.port;
    let test_redis = TestRedis::new();
    let mut s = settings(&db.url, &test_redis, None);
    small_window(&mut s);
    let queue = compactor_producer::queue::Queue::connect(&redis.url(), s.queue.clone())
        .await
        .unwrap();
    let c = Compactor::from_parts(db.store.clone(), queue.clone(), s.engine.clone()).await;
    let k = key("outage");
    let job_id = request_compaction(&c, &k).await;
    // A worker is live but takes nothing: the job stays queued.
    register_paused_worker(&queue, "paused-worker-outage", Duration::from_secs(600)).await;
    let timeout = Duration::from_secs(60);
    let mut waiter = {
        let (c, k) = (c.clone(), k.clone());
        tokio::spawn(async move { c.wait(&k, WaitMode::Requested, timeout).await })
    };
    assert!(
        still_waiting(&mut waiter, Duration::from_millis(300)).await,
        "the waiter waits while the job is queued"
    );
    assert!(matches!(
        queue.job_progress(&k).await.unwrap().stage,
        Some(JobStage::Waiting { job_id: j, .. }) if j == job_id
    ));

    redis.kill();
    // Longer than a waiter's periodic look, so it looks during the outage.
    tokio::time::sleep(compactor_producer::client::WAIT_RECHECK_EVERY + Duration::from_secs(1))
        .await;
    assert!(
        !waiter.is_finished(),
        "an outage does not end the wait: {:?}",
        waiter.await
    );

    let back = Instant::now();
    let _redis = compactor_e2e::PrivateRedis::start_on(port);
    let readiness = tokio::time::timeout(timeout, waiter)
        .await
        .expect("the wait answers within its own timeout")
        .unwrap()
        .expect("the wait answers, not an error");
    println!("answered {:?} after Redis came back", back.elapsed());
    let Readiness::Ready { waited, .. } = readiness else {
        panic!("nothing is pending once Redis came back empty: {readiness:?}")
    };
    assert!(waited < timeout, "{waited:?}");
}

/// How Redis goes away under a waiter.
#[derive(Debug, Clone, Copy)]
enum Outage {
    /// SIGSTOP: connections stay open and every command hangs.
    Freeze,
    /// SIGKILL: connections are refused.
    Kill,
}

/// A commit that lands while Redis is frozen or down ends the waits on it:
/// a waiter whose look at the queue gets no answer (or an error) also reads
/// the workstream's row, and answers `compacted` from it while Redis is
/// still away (the issue measured waiters released 15 s after their commit,
/// when Redis came back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_during_a_redis_freeze_ends_the_wait_without_redis() {
    a_commit_during_an_outage_ends_the_wait(Outage::Freeze).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_while_redis_is_down_ends_the_wait_without_redis() {
    a_commit_during_an_outage_ends_the_wait(Outage::Kill).await;
}

async fn a_commit_during_an_outage_ends_the_wait(outage: Outage) {
    let db = TestDb::postgres().await;
    let mut redis = compactor_e2e::PrivateRedis::start();
    let llm = FakeLlm::start().await;
    // The run holds the workstream for a while: Redis is frozen meanwhile.
    llm.answer_after(Duration::from_millis(1_500));
    let test_redis = TestRedis::new();
    let mut s = settings(&db.url, &test_redis, Some(&llm.url()));
    s.redis = compactor_producer::settings::RedisSettings::single(redis.url());
    s.llm.request_timeout = Duration::from_secs(10);
    small_window(&mut s);
    let queue = Queue::connect(&redis.url(), s.queue.clone()).await.unwrap();
    let c = Compactor::from_parts(db.store.clone(), queue, s.engine.clone()).await;
    let k = key("frozen");
    c.append_messages(&k, conversation(200)).await.unwrap();
    c.finalize_turn(&k, None).await.unwrap();
    let worker = spawn_worker(s);
    eventually(
        "the run holds the workstream",
        Duration::from_secs(20),
        || async {
            db.store.workstream(&k).await.unwrap().is_some_and(|ws| {
                ws.lease_live(chrono::Utc::now().timestamp_millis())
                    .is_some()
            })
        },
    )
    .await;
    let mut waiter = {
        let (c, k) = (c.clone(), k.clone());
        tokio::spawn(async move {
            c.wait(&k, WaitMode::Requested, Duration::from_secs(60))
                .await
        })
    };
    assert!(still_waiting(&mut waiter, Duration::from_millis(100)).await);
    match outage {
        Outage::Freeze => redis.freeze(),
        Outage::Kill => redis.kill(),
    }
    let frozen = Instant::now();
    let readiness = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the wait ends while Redis is away")
        .unwrap()
        .expect("an answer, not an error");
    let (answered, answered_after) = (chrono::Utc::now(), frozen.elapsed());
    if let Outage::Freeze = outage {
        redis.thaw();
    }
    let Readiness::Compacted { event, .. } = readiness else {
        panic!("the commit ends the wait: {readiness:?}")
    };
    assert_eq!(event.outcome, EventOutcome::Compacted);
    assert_eq!(
        db.store.workstream(&k).await.unwrap().unwrap().compactions,
        1
    );
    let run = db.store.runs(&k, 1).await.unwrap().remove(0).run;
    println!(
        "{outage:?}: answered {answered_after:?} after Redis went, {} ms after the commit",
        (answered - run.finished_at).num_milliseconds()
    );
    worker.stop().await;
}
