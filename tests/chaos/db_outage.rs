//! The database becomes unreachable for 20 s mid-run: the workers reach
//! PostgreSQL through a proxy the test cuts (open connections reset, new
//! ones refused). Jobs are postponed, not failed (an outage is nobody's
//! failure and must not exhaust retries), entity leases expire cleanly,
//! nothing is committed twice, and everything is compacted once the
//! database is back.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use compactor_e2e::proxy::{ChaosProxy, Mode};

use crate::harness::{
    stop_fleet, until_all_compacted, until_compacted, worker_env, Report, Scene, Targets,
    WorkerProcess,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_gone_for_20_seconds_loses_nothing() {
    let _serial = crate::SERIAL.lock().await;
    let n = 100;
    let scene = Scene::start(Duration::from_millis(100), n).await;

    let postgres: SocketAddr = "127.0.0.1:5432".parse().unwrap();
    let proxy = ChaosProxy::start(postgres).await;
    assert!(scene.db.url.contains("127.0.0.1:5432"), "{}", scene.db.url);
    let through_proxy = scene
        .db
        .url
        .replace("127.0.0.1:5432", &proxy.addr().to_string());
    let env = worker_env(&Targets {
        database_url: through_proxy,

        ..scene.targets()
    });
    let mut fleet: Vec<WorkerProcess> = (0..3).map(|_| WorkerProcess::spawn(&env)).collect();
    let started = Instant::now();
    until_compacted(&scene.db, 15, Duration::from_secs(60)).await;

    proxy.set(Mode::Cut);
    let cut_at_done = crate::harness::compacted(&scene.db).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    proxy.set(Mode::Pass);
    let restored = Instant::now();
    assert!(cut_at_done < n, "the outage came mid-run");
    until_all_compacted(&scene.db, n, Duration::from_secs(120)).await;
    let recovery = restored.elapsed();
    stop_fleet(&mut fleet).await;
    let report = Report {
        scenario: "database unreachable for 20 s mid-run",
        disruptions: 1,
        recovery,
        total: started.elapsed(),
        ..Report::default()
    };
    scene.finish(report).await;
}
