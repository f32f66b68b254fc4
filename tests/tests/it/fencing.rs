//! The fenced commit, forced into a race: two runs compact one workstream
//! at once (the first stalls past its lease at the commit, the second takes
//! the expired lease over). Exactly one commit lands; the other is refused
//! by the fence, writes nothing and is counted; running the job again after
//! the commit changes nothing. Real PostgreSQL and Redis.

use compactor_e2e::db::TestDb;
use compactor_e2e::{conversation, small_window, FenceRace, TestRedis};
use compactor_producer::client::Compactor;
use compactor_producer::metrics::names;
use compactor_producer::queue::Trigger;
use compactor_producer::store::RunOutcome;
use compactor_shared::EntityKey;
use compactor_worker::runtime::{Job, JobHandler};

/// The value of the counter `name` whose labels include `label`.
fn counter(rendered: &str, name: &str, label: &str) -> f64 {
    rendered
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_runs_commit_once_and_the_loser_is_fenced_off() {
    // The process's recorder, shared with the other tests of this binary
    // (installed once, as a worker installs it): the `fencing` domain is
    // this test's alone, which keeps its series apart.
    let metrics = compactor_worker::observability::install().unwrap();
    // The domain is a label only when allowed ([metrics] domains).
    compactor_producer::metrics::allow_domains(["fencing"]);

    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let queue = redis.queue().await;
    let engine = small_window();
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), engine.clone()).await;
    let k = EntityKey::parse("fencing", "race").unwrap();
    client.append_messages(&k, conversation(200)).await.unwrap();

    // Run A stops right before its commit; B takes over and commits.
    let race = FenceRace::start(&db, queue.clone(), &k, engine).await;
    let after_b = db.store.workstream(&k).await.unwrap().unwrap();
    let compacted_after_b = db.compacted_messages().await;
    assert_eq!(after_b.compactions, 1);

    let (run_a, b) = race.finish().await;
    run_a.expect("a fenced-off run is not an error to retry");

    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(ws.compactions, 1, "exactly one commit");
    assert_eq!(ws.version, after_b.version, "the loser wrote nothing");
    assert_eq!(ws.summary, after_b.summary);
    assert_eq!(
        ws.last_compacted_message_id,
        after_b.last_compacted_message_id
    );
    assert!(ws.lease.is_none(), "no lease left held");
    assert_eq!(db.compacted_messages().await, compacted_after_b);
    let runs = db.store.runs(&k, 10).await.unwrap();
    let outcomes: Vec<RunOutcome> = runs.iter().map(|r| r.run.outcome).collect();
    assert_eq!(outcomes, vec![RunOutcome::Conflict, RunOutcome::Committed]);
    let rendered = metrics.render();
    assert_eq!(
        counter(
            &rendered,
            names::FENCE_CONFLICTS_TOTAL,
            "domain=\"fencing\""
        ),
        1.0,
        "{rendered}"
    );

    // The job runs again (its acknowledgement was lost, say): a no-op.
    b.run(Job::new(k.clone(), Trigger::Auto, 2, 2, 2, "lease-b2"))
        .await
        .unwrap();
    let again = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(again.version, ws.version);
    assert_eq!(db.store.runs(&k, 10).await.unwrap().len(), 2, "no new run");
}
