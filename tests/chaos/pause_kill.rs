//! An operator pauses the queue with jobs waiting and some running, a
//! worker is killed with SIGKILL in the middle of a job, and the operator
//! resumes: the running jobs of the live worker finish, the killed
//! worker's job comes back when its lease expires and waits with the rest
//! (paused: no worker takes it, not even one started meanwhile), and once
//! resumed every workstream is compacted exactly once — nothing lost,
//! nothing run twice (the invariants of `check_invariants`, read from the
//! database's compaction runs and committed state).

use std::time::{Duration, Instant};

use compactor_e2e::{eventually, eventually_some};
use compactor_producer::queue::{PauseScope, Queue};

use crate::harness::{
    compacted, stop_fleet, until_all_compacted, until_compacted, worker_env, Report, Scene,
    WorkerProcess,
};

const WORKSTREAMS: usize = 60;

/// The worker id holding one running job, if any runs.
async fn holder_of_a_running_job(redis_url: &str, queue: &Queue) -> Option<String> {
    let client = redis::Client::open(redis_url).expect("redis url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let running: Vec<String> = redis::cmd("ZRANGE")
        .arg(queue.keys().running())
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .expect("running set");
    for member in running {
        let worker: Option<String> = redis::cmd("HGET")
            .arg(queue.keys().job_of_member(&member))
            .arg("worker")
            .query_async(&mut conn)
            .await
            .expect("job record");
        if worker.is_some() {
            return worker;
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_while_the_queue_is_paused_loses_nothing_and_runs_nothing_twice() {
    let _serial = crate::SERIAL.lock().await;
    // The LLM takes 400 ms a call: jobs are caught running.
    let scene = Scene::start(Duration::from_millis(400), WORKSTREAMS).await;
    let env = worker_env(&scene.targets());
    let mut fleet: Vec<WorkerProcess> = (0..2).map(|_| WorkerProcess::spawn(&env)).collect();
    let started = Instant::now();
    until_compacted(&scene.db, 5, Duration::from_secs(60)).await;

    // Paused with jobs running and jobs waiting.
    let victim_id = eventually_some("a job runs", Duration::from_secs(30), || {
        holder_of_a_running_job(&scene.redis.url, &scene.queue)
    })
    .await;
    let paused = scene.queue.pause(&PauseScope::Queue).await.expect("pause");
    assert!(paused.queue_paused);
    let counts = scene.queue.counts().await.expect("counts");
    assert!(counts.waiting > 0, "jobs wait when paused: {counts:?}");

    // SIGKILL the worker holding a running job, mid-job.
    let workers = scene.queue.live_workers().await.expect("workers");
    let victim_pid = workers
        .iter()
        .find(|w| w.registration.id == victim_id)
        .map(|w| w.registration.pid)
        .expect("the holder is registered");
    let victim = fleet
        .iter()
        .position(|w| w.pid() == victim_pid)
        .expect("the holder is one of the fleet");
    fleet[victim].kill9();
    // A replacement starts, as an orchestrator would start one.
    fleet[victim] = WorkerProcess::spawn(&env);

    // While paused: the live worker's jobs finish, the killed one's comes
    // back (its lease expires: 2 s) and waits; nothing is claimed.
    eventually(
        "the running jobs end or come back",
        Duration::from_secs(30),
        || async { scene.queue.counts().await.expect("counts").running == 0 },
    )
    .await;
    // Every workstream is compacted or has its job waiting: none lost.
    // One may be both: the killed worker can die after its commit and
    // before its acknowledgement, so its job comes back to run again (and
    // then finds nothing to do: `finish` checks nothing commits twice).
    let held = compacted(&scene.db).await;
    let counts = scene.queue.counts().await.expect("counts");
    let covered = held + usize::try_from(counts.waiting).unwrap();
    assert!(
        (WORKSTREAMS..=WORKSTREAMS + 1).contains(&covered),
        "every workstream compacted or waiting, none lost ({held} compacted): {counts:?}"
    );
    let runs_while_paused = scene
        .db
        .scalar("SELECT COUNT(*) AS n FROM compaction_runs")
        .await;
    // Two sweeps and many claim attempts later, still nothing started: an
    // absence, so a fixed window to watch, not a condition to wait for.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        scene.queue.counts().await.expect("counts").running,
        0,
        "no worker claims a paused job"
    );
    assert_eq!(
        scene
            .db
            .scalar("SELECT COUNT(*) AS n FROM compaction_runs")
            .await,
        runs_while_paused,
        "no run started while paused"
    );
    let state = scene.queue.pause_state().await.expect("pause state");
    assert!(state.queue_paused && state.oldest_waiting_ms.is_some());

    // Resumed: the idle workers are woken and every job runs, once.
    scene
        .queue
        .resume(&PauseScope::Queue)
        .await
        .expect("resume");
    let recovery = until_all_compacted(&scene.db, WORKSTREAMS, Duration::from_secs(120)).await;
    stop_fleet(&mut fleet).await;
    let report = Report {
        scenario: "pause, kill -9 a worker mid-job, resume",
        disruptions: 1,
        recovery,
        total: started.elapsed(),
        ..Report::default()
    };
    let report = scene.finish(report).await;
    assert!(
        report.stalls >= 1,
        "the killed worker's job was recovered from its expired lease"
    );
}
