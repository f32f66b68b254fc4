//! A rolling restart under load: each of three workers gets SIGTERM in
//! turn, exits 0 once its running jobs are done (or handed back), and a
//! replacement starts. No job runs again after it finished: every
//! workstream is summarized by exactly one LLM call.

use std::time::{Duration, Instant};

use crate::harness::{
    stop_fleet, until_all_compacted, until_compacted, worker_env, Report, Scene, WorkerProcess,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_reruns_nothing() {
    let _serial = crate::SERIAL.lock().await;
    let n = 150;
    let scene = Scene::start(Duration::from_millis(150), n).await;
    let env = worker_env(&scene.targets());
    let mut fleet: Vec<WorkerProcess> = (0..3).map(|_| WorkerProcess::spawn(&env)).collect();
    let started = Instant::now();
    until_compacted(&scene.db, 10, Duration::from_secs(30)).await;
    for (i, worker) in fleet.iter_mut().enumerate() {
        worker.terminate();
        let status = worker.wait_exit(Duration::from_secs(15)).await;
        assert!(
            status.success(),
            "worker {i} exits 0 on SIGTERM: {status:?}"
        );
        *worker = WorkerProcess::spawn(&env);
    }
    let restarted_at = Instant::now();
    until_all_compacted(&scene.db, n, Duration::from_secs(120)).await;
    stop_fleet(&mut fleet).await;
    let report = Report {
        scenario: "rolling restart (SIGTERM each of 3 workers in turn)",
        disruptions: 3,
        recovery: restarted_at.elapsed(),
        total: started.elapsed(),
        ..Report::default()
    };
    let report = scene.finish(report).await;
    assert_eq!(
        report.llm_calls, n,
        "one LLM call per workstream: nothing re-ran"
    );
}
