//! Redis restarts mid-run: a private `redis-server` with AOF (fsync on
//! every write, as production's `everysec` at worst loses a second) is
//! killed and started again on the same port and data directory. Workers
//! and producers reconnect; a request made while Redis is down fails
//! loudly, never with a false success; no job is lost.

use std::time::{Duration, Instant};

use compactor_e2e::db::TestDb;
use compactor_e2e::{unique_name, FakeLlm, PrivateRedis};
use compactor_producer::client::Compactor;
use compactor_producer::queue::{Queue, Trigger};
use compactor_shared::EntityKey;

use crate::harness::{
    check_invariants, engine, queue_config, until_all_compacted, until_compacted, worker_env,
    Report, Targets, WorkerProcess, Workload,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_mid_run_loses_nothing() {
    let _serial = crate::SERIAL.lock().await;
    let db = TestDb::postgres().await;
    let mut redis = PrivateRedis::start_persistent();
    let llm = FakeLlm::start().await;
    llm.answer_after(Duration::from_millis(50));
    let name = unique_name("chaos");
    let queue = Queue::connect(&redis.url(), queue_config(&name))
        .await
        .unwrap();
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), engine()).await;
    let n = 100;
    let work = Workload::seed(&client, n).await;
    let env = worker_env(&Targets {
        database_url: db.url.clone(),
        redis_url: redis.url(),
        queue: name.clone(),
        llm_url: llm.url(),
    });
    let mut fleet: Vec<WorkerProcess> = (0..3).map(|_| WorkerProcess::spawn(&env)).collect();
    let started = Instant::now();
    until_compacted(&db, 20, Duration::from_secs(60)).await;

    redis.kill();
    // A producer's request while Redis is down fails; it does not pretend.
    let late = EntityKey::parse("chaos", "asked-while-down").unwrap();
    assert!(
        queue
            .request_compaction(&late, Trigger::Auto)
            .await
            .is_err(),
        "no false success while Redis is down"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    redis.start_again();
    let restarted = Instant::now();
    // The producer reconnects by itself.
    let deadline = Instant::now() + Duration::from_secs(15);
    while queue.counts().await.is_err() {
        assert!(Instant::now() < deadline, "the producer never reconnected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until_all_compacted(&db, n, Duration::from_secs(90)).await;
    let recovery = restarted.elapsed();
    for worker in &fleet {
        worker.terminate();
    }
    for worker in &mut fleet {
        assert!(worker.wait_exit(Duration::from_secs(15)).await.success());
    }
    let mut report = Report {
        scenario: "Redis killed and restarted (AOF) mid-run",
        disruptions: 1,
        recovery,
        total: started.elapsed(),
        ..Report::default()
    };
    check_invariants(&db, &redis.url(), &queue, &work, &llm, &mut report).await;
    report.print();
}
