//! The queue on a Redis Cluster of three primaries, started by this test
//! binary on loopback ports (`compactor_e2e::cluster`; one cluster shared
//! by the tests of this file, killed when the process ends). Every test
//! uses queue names of its own, chosen so that their slots land on the
//! node the test wants: semantics are shown on every node, and the
//! announcements a test waits for are published on a node other than the
//! one its subscriptions use (classic `PUBLISH` is broadcast to the whole
//! cluster).
//!
//! Shown here: enqueue added / coalesced / follow-up, `enqueue_many` (also
//! after the scripts were flushed), the worker runtime running jobs and the
//! follow-up recorded meanwhile, an expired lease recovered and re-run,
//! dead letters listed and retried, an idle worker woken without polling,
//! one compaction end to end with a chat request woken by the release
//! announcement, and the urgent lane (manual and reactive requests claimed
//! ahead of automatic ones, retried in their lane) on every node.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::worker_support::{
    enqueue_each_until_done, eventually, fails_permanently_once, fast_queue, fast_runtime,
    retry_the_dead_letter, until_dead, until_done, FnHandler, Running,
};
use compactor_e2e::cluster::{RedisCluster, NODES};
use compactor_e2e::db::TestDb;
use compactor_e2e::{
    key, request_compaction, settings, small_window, spawn_worker, wait_through_compaction,
    FakeLlm, Fault, TestRedis,
};
use compactor_producer::client::{ClientSettings, Compactor};
use compactor_producer::events::EventOutcome;
use compactor_producer::queue::{
    ClaimOutcome, Completion, EnqueueOutcome, FailAction, JobState, Queue, QueueConfig, QueueName,
    Trigger,
};
use compactor_producer::settings::RedisSettings;
use compactor_worker::runtime::RuntimeConfig;

fn cluster() -> &'static RedisCluster {
    RedisCluster::shared()
}

/// A queue of its own on the shared cluster, in a slot of node `node`;
/// its keys are deleted on drop.
struct ClusterQueue {
    queue: Queue,
    name: QueueName,
}

impl ClusterQueue {
    async fn on(node: usize, config: QueueConfig) -> ClusterQueue {
        let name = cluster().queue_name_on(node, "cl");
        let queue = cluster().queue(&name, config).await;
        ClusterQueue { queue, name }
    }
}

impl Drop for ClusterQueue {
    fn drop(&mut self) {
        cluster().delete_queue(&self.name);
    }
}

/// `(job_id, attempt)` of every attempt a handler started.
#[derive(Default, Clone)]
struct Runs(Arc<Mutex<Vec<(u64, u32)>>>);

impl Runs {
    fn record(&self, job: &compactor_worker::runtime::Job) {
        self.0.lock().unwrap().push((job.job_id, job.attempt));
    }
    fn all(&self) -> Vec<(u64, u32)> {
        self.0.lock().unwrap().clone()
    }
    /// A handler that records every attempt here and succeeds: what most
    /// tests run, looking only at which attempts there were.
    fn recorder(&self) -> FnHandler {
        let r = self.clone();
        FnHandler::new(move |job| {
            let r = r.clone();
            async move {
                r.record(&job);
                Ok(())
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_added_coalesced_and_followed_up_on_every_node() {
    for node in 0..NODES {
        let t = ClusterQueue::on(node, QueueConfig::default()).await;
        let q = &t.queue;
        q.ping().await.unwrap();
        let k = key("a");
        let first = q.request_compaction(&k, Trigger::Auto).await.unwrap();
        let EnqueueOutcome::Added { job_id } = first else {
            panic!("{first:?}")
        };
        // The queue's keys live on the node its name was chosen for.
        let exists: bool = redis::cmd("EXISTS")
            .arg(q.keys().job(&k))
            .query(&mut cluster().connection(node))
            .unwrap();
        assert!(exists, "the job hash is on node {node}");
        assert_eq!(
            q.request_compaction(&k, Trigger::Auto).await.unwrap(),
            EnqueueOutcome::Coalesced { job_id },
            "node {node}"
        );
        let ClaimOutcome::Claimed(job) = q.claim("w1").await.unwrap() else {
            panic!("a job to claim on node {node}")
        };
        assert_eq!(job.job_id, job_id);
        for _ in 0..3 {
            assert_eq!(
                q.request_compaction(&k, Trigger::Auto).await.unwrap(),
                EnqueueOutcome::FollowUpRecorded { job_id },
                "node {node}"
            );
        }
        assert_eq!(
            q.job_state(&k).await.unwrap(),
            Some(JobState::Running {
                job_id,
                attempt: 1,
                followup_pending: true
            })
        );
        let Completion::FollowUpAdded { job_id: next } = q.complete(&job).await.unwrap() else {
            panic!("one follow-up on node {node}")
        };
        assert!(next > job_id);
        assert_eq!(
            q.job_state(&k).await.unwrap(),
            Some(JobState::Waiting { job_id: next })
        );
        let counts = q.counts().await.unwrap();
        assert_eq!((counts.waiting, counts.running, counts.done), (1, 0, 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_many_pipelines_on_the_cluster_even_after_the_scripts_are_flushed() {
    let t = ClusterQueue::on(1, QueueConfig::default()).await;
    let q = &t.queue;
    let requests: Vec<_> = (0..50)
        .map(|i| (key(&format!("m{i}")), Trigger::Auto))
        .collect();
    let outcomes = q.enqueue_many(&requests).await.unwrap();
    assert_eq!(outcomes.len(), 50);
    assert!(outcomes
        .iter()
        .all(|o| matches!(o, EnqueueOutcome::Added { .. })));
    let again = q.enqueue_many(&requests[..10]).await.unwrap();
    for (first, second) in outcomes.iter().zip(&again) {
        let EnqueueOutcome::Added { job_id } = first else {
            unreachable!()
        };
        assert_eq!(second, &EnqueueOutcome::Coalesced { job_id: *job_id });
    }
    // Every node forgets the code (a restart, a failover to a node that
    // never loaded it): the pipeline loads it again and goes through, and
    // a single call does so on its own. Other tests sharing the cluster
    // ride through this the same way.
    let forget = || {
        for node in 0..NODES {
            for cache in ["FUNCTION", "SCRIPT"] {
                let _: () = redis::cmd(cache)
                    .arg("FLUSH")
                    .query(&mut cluster().connection(node))
                    .unwrap();
            }
        }
    };
    forget();
    let more: Vec<_> = (50..60)
        .map(|i| (key(&format!("m{i}")), Trigger::Auto))
        .collect();
    let outcomes = q.enqueue_many(&more).await.unwrap();
    assert!(outcomes
        .iter()
        .all(|o| matches!(o, EnqueueOutcome::Added { .. })));
    forget();
    assert!(matches!(
        q.request_compaction(&key("single"), Trigger::Auto)
            .await
            .unwrap(),
        EnqueueOutcome::Added { .. }
    ));
    assert_eq!(q.counts().await.unwrap().waiting, 61);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_runs_jobs_and_then_the_follow_up_recorded_while_one_ran() {
    let t = ClusterQueue::on(2, fast_queue()).await;
    let runs = Runs::default();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (r, g) = (runs.clone(), gate.clone());
    let running = Running::start(
        &t.queue,
        fast_runtime(),
        FnHandler::new(move |job| {
            let (r, g) = (r.clone(), g.clone());
            async move {
                r.record(&job);
                if job.key.entity_id() == "gated" {
                    g.acquire().await.unwrap().forget();
                }
                Ok(())
            }
        }),
    );
    for entity in ["x", "y", "z"] {
        t.queue
            .request_compaction(&key(entity), Trigger::Auto)
            .await
            .unwrap();
    }
    for entity in ["x", "y", "z"] {
        until_done(&t.queue, &key(entity), "a plain job ran").await;
    }

    let k = key("gated");
    let EnqueueOutcome::Added { job_id } =
        t.queue.request_compaction(&k, Trigger::Auto).await.unwrap()
    else {
        panic!("added")
    };
    eventually("the gated job runs", Duration::from_secs(10), || async {
        matches!(
            t.queue.job_state(&k).await.unwrap(),
            Some(JobState::Running { .. })
        )
    })
    .await;
    for _ in 0..5 {
        assert_eq!(
            t.queue.request_compaction(&k, Trigger::Auto).await.unwrap(),
            EnqueueOutcome::FollowUpRecorded { job_id }
        );
    }
    gate.add_permits(2);
    eventually("the follow-up ran", Duration::from_secs(10), || async {
        match t.queue.job_state(&k).await.unwrap() {
            Some(JobState::Done { job_id: done }) => done > job_id,
            _ => false,
        }
    })
    .await;
    let gated: Vec<u64> = runs
        .all()
        .into_iter()
        .map(|(id, _)| id)
        .filter(|id| *id >= job_id)
        .collect();
    assert_eq!(gated.len(), 2, "the job, then exactly one follow-up");
    assert_eq!(gated[0], job_id);
    assert!(gated[1] > job_id);
    assert_eq!(runs.all().len(), 5);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_recovered_and_the_job_run_again() {
    let t = ClusterQueue::on(0, fast_queue()).await;
    let k = key("orphaned");
    let EnqueueOutcome::Added { job_id } =
        t.queue.request_compaction(&k, Trigger::Auto).await.unwrap()
    else {
        panic!("added")
    };
    // A worker claims it and dies: never renewed, never acknowledged.
    let ClaimOutcome::Claimed(ghost) = t.queue.claim("ghost").await.unwrap() else {
        panic!("claimed")
    };
    assert_eq!(ghost.job_id, job_id);

    let runs = Runs::default();
    let running = Running::start(&t.queue, fast_runtime(), runs.recorder());
    until_done(&t.queue, &k, "the recovered job ran").await;
    // The stall gave its attempt back: the re-run is attempt 1 again.
    assert_eq!(runs.all(), vec![(job_id, 1)]);
    assert!(
        !t.queue.renew(&ghost).await.unwrap(),
        "the dead worker's lease is gone"
    );
    assert_eq!(
        t.queue.complete(&ghost).await.unwrap(),
        Completion::LeaseLost,
        "and its late acknowledgement changes nothing"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_and_retried() {
    let t = ClusterQueue::on(1, fast_queue()).await;
    let runs = Arc::new(AtomicU32::new(0));
    let running = Running::start(&t.queue, fast_runtime(), fails_permanently_once(&runs));
    let k = key("doomed");
    t.queue.request_compaction(&k, Trigger::Auto).await.unwrap();
    until_dead(&t.queue, &k, "dead-lettered").await;
    let dead = t.queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, "unknown workstream");
    assert_eq!(dead[0].member, k.job_key());
    assert_eq!(t.queue.counts().await.unwrap().dead, 1);

    retry_the_dead_letter(&t.queue, &dead[0].entry, &k, &runs).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_is_woken_without_waiting_for_the_check_interval() {
    // The queue on node 2; the worker subscribes on the first seed that
    // answers: not the dead one listed first, but node 0, which sees node
    // 2's announcements only through the cluster bus.
    let dead_seed = compactor_e2e::PrivateRedis::url_for(compactor_testkit::free_port());
    let name = cluster().queue_name_on(2, "wake");
    let settings = RedisSettings::cluster(
        std::iter::once(dead_seed).chain((0..NODES).map(|i| cluster().node_url(i))),
    );
    let queue = Queue::connect_with(
        &settings,
        QueueConfig {
            name: name.clone(),
            ..fast_queue()
        },
    )
    .await
    .expect("connects through the live seeds");
    let t = ClusterQueue { queue, name };

    let runs = Runs::default();
    // A minute between fallback claims: only the wake-up can be this fast.
    let config = RuntimeConfig {
        check_interval: Duration::from_secs(60),
        ..fast_runtime()
    };
    let running = Running::start(&t.queue, config, runs.recorder());
    // Each job finds the worker idle: it ran the one before and found the
    // queue empty since.
    enqueue_each_until_done(&t.queue, &["a", "b", "c"], "the job is picked up").await;
    assert_eq!(runs.all().len(), 3);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_compacted_end_to_end_and_the_waiter_woken_by_the_release() {
    let db = TestDb::postgres().await;
    // The queue on node 1; subscriptions (the worker's wake-ups, the
    // client's release announcements) on node 0.
    let redis = TestRedis::on_cluster(cluster(), 1);
    let llm = FakeLlm::start().await;
    // The first summary takes a while: long enough to start waiting on it.
    llm.fail_next([Fault::Hang(Duration::from_secs(3))]);
    let mut settings = settings(&db.url, &redis, Some(&llm.url()));
    assert!(settings.redis.cluster);
    settings.engine.trigger = small_window().trigger;
    let client = Compactor::connect(&ClientSettings {
        engine: settings.engine.clone(),
        queue: settings.queue.clone(),
        database: settings.database.clone(),
        redis: settings.redis.clone(),
    })
    .await
    .expect("the client connects to the database and the cluster");
    let k = key("long");
    request_compaction(&client, &k).await;

    let worker = spawn_worker(settings);
    let (event, waited) = wait_through_compaction(&client, &k, Duration::from_secs(30)).await;
    assert_eq!(event.outcome, EventOutcome::Compacted, "{event:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    let status = client.status(&k).await.unwrap();
    assert_eq!(status.compactions, 1);
    assert!(status.lease.is_none());
    assert!(
        client.build_context(&k).await.unwrap().messages.len() < 50,
        "the next context is summary + tail"
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_record_its_set_lost_is_put_back_and_run_on_every_node() {
    for node in 0..NODES {
        let t = ClusterQueue::on(node, fast_queue()).await;
        let k = key("evicted");
        let EnqueueOutcome::Added { job_id } =
            t.queue.request_compaction(&k, Trigger::Auto).await.unwrap()
        else {
            panic!("added")
        };
        let mut conn = cluster().connection(cluster().owner_of(&t.queue.keys().waiting()));
        let _: () = redis::cmd("DEL")
            .arg(t.queue.keys().waiting())
            .query(&mut conn)
            .unwrap();
        assert_eq!(t.queue.counts().await.unwrap().waiting, 0);
        // The workers' sweep walks the job records (a SCAN inside the
        // script, on the node that owns the queue's slot) and puts it back.
        let runs = Runs::default();
        let running = Running::start(&t.queue, fast_runtime(), runs.recorder());
        until_done(&t.queue, &k, "the put-back job ran").await;
        assert_eq!(runs.all(), vec![(job_id, 1)], "node {node}");
        running.stop().await;
    }
}

/// The job the next claim on `q` takes; `node` names the node in the panic.
async fn claimed_on(q: &Queue, node: usize) -> compactor_producer::queue::ClaimedJob {
    match q.claim("w1").await.unwrap() {
        ClaimOutcome::Claimed(job) => job,
        other => panic!("a job to claim on node {node}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urgent_requests_overtake_automatic_ones_on_every_node() {
    for node in 0..NODES {
        let t = ClusterQueue::on(node, QueueConfig::default()).await;
        let q = &t.queue;
        let backlog: Vec<_> = (0..100)
            .map(|i| (key(&format!("b{i}")), Trigger::Auto))
            .collect();
        q.enqueue_many(&backlog).await.unwrap();
        let k = key("urgent");
        q.request_compaction(&k, Trigger::Manual { instructions: None })
            .await
            .unwrap();
        // The urgent lane's set is in the queue's slot, beside the others.
        assert_eq!(cluster().owner_of(&q.keys().urgent()), node);
        let job = claimed_on(q, node).await;
        assert_eq!(job.key, k, "node {node}");
        // Retried in the urgent lane: next again, ahead of the backlog.
        let retry = FailAction::Retry {
            delay: Duration::ZERO,
        };
        q.fail(&job, retry, "503").await.unwrap();
        let again = claimed_on(q, node).await;
        assert_eq!((again.key, again.attempt), (k, 2), "node {node}");
        // A reactive request moves a waiting automatic job to the lane.
        q.request_compaction(&key("b50"), Trigger::Reactive)
            .await
            .unwrap();
        let moved = claimed_on(q, node).await;
        assert_eq!(
            (moved.key, moved.payload.trigger),
            (key("b50"), Trigger::Reactive),
            "node {node}"
        );
        assert_eq!(claimed_on(q, node).await.key, key("b0"), "node {node}");
        let counts = q.counts().await.unwrap();
        assert_eq!(
            (counts.waiting, counts.waiting_urgent, counts.waiting_normal),
            (98, 0, 98),
            "node {node}"
        );
    }
}
