//! The database is the source of truth: when Redis loses its data in the
//! middle of a run (here a private `redis-server` is flushed), the workers'
//! reconciliation sweep finds every workstream still over its trigger and
//! requests it again, so all of them end up compacted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::time::Duration;

use compactor_e2e::db::TestDb;
use compactor_e2e::{conversation, eventually, settings, spawn_worker, PrivateRedis, TestRedis};
use compactor_producer::client::{Compactor, TurnOutcome};
use compactor_producer::queue::Queue;
use compactor_shared::trigger::TriggerPolicy;
use compactor_shared::EntityKey;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_redis_loses_its_data_every_workstream_over_its_trigger_is_compacted() {
    let db = TestDb::postgres().await;
    let redis = PrivateRedis::start();
    let test_redis = TestRedis::new();
    let mut s = settings(&db.url, &test_redis, None);
    s.redis.url = compactor_producer::settings::ConnectionUrl::new(redis.url());
    s.reconcile.interval = Duration::from_millis(500);
    s.worker.concurrency = 1;
    s.engine.trigger = TriggerPolicy::Threshold {
        context_window: 8_000,
        ratio: 0.7,
        output_reserve: 2_000,
        safety_margin: 500,
    };
    let queue = Queue::connect(&redis.url(), s.queue.clone()).await.unwrap();
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), s.engine.clone()).await;
    let keys: Vec<EntityKey> = (0..30)
        .map(|i| EntityKey::parse("chat", &format!("lost{i}")).unwrap())
        .collect();
    for k in &keys {
        client.append_messages(k, conversation(50)).await.unwrap();
        let turn = client.finalize_turn(k, None).await.unwrap();
        assert!(matches!(turn, TurnOutcome::Requested { .. }), "{turn:?}");
    }
    let worker = spawn_worker(s);
    // Some are compacted; then Redis loses everything.
    eventually("a first compaction", Duration::from_secs(20), || async {
        db.scalar("SELECT COUNT(*) AS n FROM workstreams WHERE compactions > 0")
            .await
            > 0
    })
    .await;
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    let done_at_flush = db
        .scalar("SELECT COUNT(*) AS n FROM workstreams WHERE compactions > 0")
        .await;
    println!("{done_at_flush} of 30 compacted when Redis lost its data");
    assert!(done_at_flush < 30, "the flush came mid-run");
    eventually(
        "every workstream compacted",
        Duration::from_secs(60),
        || async {
            db.scalar("SELECT COUNT(*) AS n FROM workstreams WHERE compactions > 0")
                .await
                == 30
        },
    )
    .await;
    for k in &keys {
        assert!(
            matches!(
                client.finalize_turn(k, None).await.unwrap(),
                TurnOutcome::NotDue { .. }
            ),
            "{k} is below its trigger"
        );
    }
    assert_eq!(
        db.scalar("SELECT COUNT(*) AS n FROM workstreams WHERE compactions > 1")
            .await,
        0,
        "none compacted twice"
    );
    worker.stop().await;
}
