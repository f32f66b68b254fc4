//! The database is the source of truth: when Redis loses its data in the
//! middle of a run (here a private `redis-server` is flushed), the workers'
//! reconciliation sweep finds every workstream still over its trigger and
//! requests it again, so all of them end up compacted.

use std::time::Duration;

use compactor_e2e::db::TestDb;
use compactor_e2e::{conversation, eventually, settings, spawn_worker, PrivateRedis, TestRedis};
use compactor_producer::client::{Compactor, TurnOutcome};
use compactor_producer::queue::Queue;
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
    s.engine.trigger = compactor_e2e::small_model().trigger;
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

/// A workstream over its trigger whose job record says waiting (or
/// running) while the queue's set has no entry for it is not "in hand":
/// nothing would ever run it. The sweep puts the job back in line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_record_missing_from_its_set_is_repaired_not_counted_in_hand() {
    let db = TestDb::postgres().await;
    let test_redis = TestRedis::new();
    let engine = compactor_e2e::small_model();
    let queue = test_redis.queue().await;
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), engine.clone()).await;
    let (waiting, running) = (
        EntityKey::parse("chat", "wedged-waiting").unwrap(),
        EntityKey::parse("chat", "wedged-running").unwrap(),
    );
    for k in [&running, &waiting] {
        client.append_messages(k, conversation(50)).await.unwrap();
        let turn = client.finalize_turn(k, None).await.unwrap();
        assert!(matches!(turn, TurnOutcome::Requested { .. }), "{turn:?}");
    }
    // `running` is claimed by a worker that then dies; both set entries
    // are lost.
    let compactor_producer::queue::ClaimOutcome::Claimed(crashed) =
        queue.claim("crashed").await.unwrap()
    else {
        panic!("a job to claim")
    };
    assert_eq!(crashed.key, running);
    let mut conn = redis::Client::open(test_redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::pipe()
        .cmd("ZREM")
        .arg(queue.keys().waiting())
        .arg(waiting.job_key())
        .ignore()
        .cmd("ZREM")
        .arg(queue.keys().running())
        .arg(running.job_key())
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();

    let report = compactor_producer::reconcile::reconcile(&db.store, &queue, &engine)
        .await
        .unwrap();
    println!("{report:?}");
    assert_eq!(report.over_trigger, 2, "{report:?}");
    assert_eq!(report.in_hand, 0, "neither is in hand: {report:?}");
    assert_eq!(report.repaired, 2, "{report:?}");
    let compactor_producer::queue::ClaimOutcome::Claimed(job) = queue.claim("w").await.unwrap()
    else {
        panic!("the waiting job is in line again")
    };
    assert_eq!(job.key, waiting);
    // The running one is tracked again at its lease deadline, so the
    // recovery sweep returns it once that has passed.
    let counts = queue.counts().await.unwrap();
    assert_eq!(counts.running, 2, "{counts:?}");
}
