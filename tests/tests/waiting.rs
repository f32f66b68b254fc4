//! Chat requests waiting on a running compaction (`wait_until_ready`):
//! woken by the release announcement within milliseconds, never blocked
//! past their timeout, and freed by the lease deadline when the worker that
//! held it died. Real Redis and PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::time::{Duration, Instant};

use compactor_e2e::db::TestDb;
use compactor_e2e::{
    conversation, eventually, key, settings, spawn_worker, FakeLlm, Fault, TestRedis,
};
use compactor_producer::client::{Compactor, IncomingMessage, Readiness};
use compactor_producer::events::{CompactionEvent, EventOutcome};
use compactor_producer::store::LeaseTaken;
use compactor_shared::Role;

async fn client(db: &TestDb, redis: &TestRedis) -> Compactor {
    Compactor::from_parts(
        db.store.clone(),
        redis.queue().await,
        compactor_shared::config::EngineConfig::default(),
    )
    .await
}

fn event(outcome: EventOutcome) -> CompactionEvent {
    CompactionEvent {
        domain: "chat".into(),
        entity_id: "w".into(),
        outcome,
        trigger: "auto".into(),
        job_id: 7,
        attempt: 1,
        tokens_before: 1_000,
        tokens_after: 100,
        messages_compacted: 10,
        chunks: 1,
        rollups: 0,
        degraded: false,
        error: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_running_compaction_the_wait_returns_at_once() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let c = client(&db, &redis).await;
    let k = key("w");
    c.append_messages(&k, vec![IncomingMessage::text(Role::User, "hi")])
        .await
        .unwrap();
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
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let c = client(&db, &redis).await;
    let k = key("w");
    c.append_messages(&k, vec![IncomingMessage::text(Role::User, "hi")])
        .await
        .unwrap();
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    let taken = db
        .store
        .take_lease(ws.id, "worker-a", Duration::from_secs(60))
        .await
        .unwrap();
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
        tokio::time::timeout(Duration::from_millis(300), &mut waiter)
            .await
            .is_err(),
        "the waiter waits while the lease is held"
    );
    let released_at = Instant::now();
    assert!(db.store.release_lease(ws.id, "worker-a").await.unwrap());
    let sent = event(EventOutcome::Compacted);
    c.queue().publish_release(&k, &sent).await.unwrap();
    let (readiness, woke_at) = waiter.await.unwrap();
    let latency = woke_at - released_at;
    println!("waiter woke {latency:?} after the release");
    let Readiness::Ready { event, .. } = readiness else {
        panic!("{readiness:?}")
    };
    assert_eq!(event, Some(sent), "the waiter gets what the compaction did");
    // Target 50 ms; asserted loosely for a shared 2-core machine.
    assert!(latency < Duration::from_millis(500), "{latency:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_lease_ends_the_wait_at_its_timeout() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let c = client(&db, &redis).await;
    let k = key("w");
    c.append_messages(&k, vec![IncomingMessage::text(Role::User, "hi")])
        .await
        .unwrap();
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    db.store
        .take_lease(ws.id, "stuck", Duration::from_secs(120))
        .await
        .unwrap();
    let started = Instant::now();
    let r = c
        .wait_until_ready(&k, Duration::from_millis(400))
        .await
        .unwrap();
    let Readiness::TimedOut { waited } = r else {
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
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let c = client(&db, &redis).await;
    let k = key("w");
    c.append_messages(&k, vec![IncomingMessage::text(Role::User, "hi")])
        .await
        .unwrap();
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    // A worker takes the lease and dies: no release, no announcement.
    db.store
        .take_lease(ws.id, "dead-worker", Duration::from_millis(800))
        .await
        .unwrap();
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
        .take_lease(ws.id, "next-worker", Duration::from_secs(30))
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
    s.engine.trigger = compactor_shared::trigger::TriggerPolicy::Threshold {
        context_window: 20_000,
        ratio: 0.7,
        output_reserve: 4_000,
        safety_margin: 1_000,
    };
    let c = Compactor::from_parts(db.store.clone(), redis.queue().await, s.engine.clone()).await;
    let k = key("busy");
    c.append_messages(&k, conversation(200)).await.unwrap();
    c.finalize_turn(&k, None).await.unwrap();
    let worker = spawn_worker(s);
    eventually(
        "the compaction holds the lease",
        Duration::from_secs(20),
        || async { c.status(&k).await.unwrap().lease.is_some() },
    )
    .await;
    let r = c
        .wait_until_ready(&k, Duration::from_secs(30))
        .await
        .unwrap();
    let Readiness::Ready { event, waited } = r else {
        panic!("{r:?}")
    };
    let event = event.expect("woken by the compaction's announcement");
    assert_eq!(event.outcome, EventOutcome::Compacted);
    assert_eq!(
        (event.domain.as_str(), event.entity_id.as_str()),
        ("chat", "busy")
    );
    assert!(event.tokens_after < event.tokens_before);
    assert!(event.messages_compacted > 0 && event.chunks >= 1);
    assert!(!event.degraded);
    println!("waited {waited:?} for a compaction: {event:?}");
    worker.stop().await;
}
