//! SIGKILL: one of three workers is killed every 700 ms while 300
//! workstreams are compacted; a replacement starts each time. The killed
//! worker's jobs come back when their leases expire (2 s here) and run on
//! another worker.
//!
//! A job can be unlucky: recovered just before the next kill, it may land
//! on the next victim again and again. After `max_stalls` (3) such stalls
//! the queue dead-letters it as "stalled" — it cannot tell a job whose
//! workers were killed under it from one that crashes them, and the second
//! kind must not loop forever. Such a job is not lost: it waits in the
//! dead-letter set with its reason, and the operator's retry runs it. The
//! scenario does what the operator would, and still requires every
//! workstream compacted exactly once.

use std::time::{Duration, Instant};

use crate::harness::{
    compacted, stop_fleet, until_all_compacted, until_all_compacted_or_stalled, worker_env, Report,
    Scene, WorkerProcess,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_again_and_again_lose_nothing() {
    let _serial = crate::SERIAL.lock().await;
    let scene = Scene::start(Duration::from_millis(50), 300).await;
    let env = worker_env(&scene.targets());
    let mut fleet: Vec<WorkerProcess> = (0..3).map(|_| WorkerProcess::spawn(&env)).collect();
    let started = Instant::now();
    let mut kills = 0;
    while compacted(&scene.db).await < 300 && kills < 12 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let victim = kills % fleet.len();
        fleet[victim].kill9();
        fleet[victim] = WorkerProcess::spawn(&env);
        kills += 1;
    }
    let recovery =
        until_all_compacted_or_stalled(&scene.db, &scene.queue, 300, Duration::from_secs(120))
            .await;
    let stalled = scene.queue.dead_letters(300).await.expect("dead letters");
    for dead in &stalled {
        assert!(
            dead.reason.starts_with("stalled"),
            "only the stall bound may dead-letter here: {dead:?}"
        );
        scene
            .queue
            .retry_dead(&dead.entry)
            .await
            .expect("retry a dead letter")
            .expect("the dead letter is there");
    }
    until_all_compacted(&scene.db, 300, Duration::from_secs(60)).await;
    stop_fleet(&mut fleet).await;
    let report = Report {
        scenario: "kill -9 one of 3 workers repeatedly",
        disruptions: kills,
        recovery,
        retried_dead_letters: stalled.len(),
        total: started.elapsed(),
        ..Report::default()
    };
    scene.finish(report).await;
    assert!(kills >= 3, "the chaos happened: {kills} kills");
}
