//! The LLM misbehaves for a while: it hangs (requests time out), then its
//! connections are reset, then it answers garbage, then it recovers. Jobs
//! retry; those whose last attempt still meets a broken LLM are summarized
//! offline (degraded). Every workstream is compacted exactly once.

use std::time::{Duration, Instant};

use compactor_e2e::proxy::{ChaosProxy, Mode};
use compactor_e2e::Fault;

use crate::harness::{
    stop_fleet, until_all_compacted, until_compacted, worker_env, Report, Scene, Targets,
    WorkerProcess,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_that_hangs_resets_and_babbles_loses_nothing() {
    let _serial = crate::SERIAL.lock().await;
    let n = 100;
    let scene = Scene::start(Duration::from_millis(50), n).await;
    let proxy = ChaosProxy::start(*scene.llm.server.address()).await;
    let env = worker_env(&Targets {
        llm_url: format!("http://{}", proxy.addr()),
        ..scene.targets()
    });
    let mut fleet: Vec<WorkerProcess> = (0..3).map(|_| WorkerProcess::spawn(&env)).collect();
    let started = Instant::now();
    until_compacted(&scene.db, 10, Duration::from_secs(60)).await;

    proxy.set(Mode::Hang);
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.set(Mode::Cut);
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.set(Mode::Pass);
    scene.llm.fail_always(Some(Fault::Malformed));
    tokio::time::sleep(Duration::from_secs(3)).await;
    scene.llm.fail_always(None);
    let healed = Instant::now();

    until_all_compacted(&scene.db, n, Duration::from_secs(120)).await;
    let recovery = healed.elapsed();
    stop_fleet(&mut fleet).await;
    let report = Report {
        scenario: "LLM hangs, resets connections, answers garbage (9 s)",
        disruptions: 3,
        recovery,
        total: started.elapsed(),
        ..Report::default()
    };
    scene.finish(report).await;
}
