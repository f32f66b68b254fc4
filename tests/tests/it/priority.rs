//! The priority lane end to end (issue 15, item 6): a turn whose context
//! no longer fits the model's window requests a reactive compaction, which
//! is claimed ahead of a backlog of automatic requests, and the worker that
//! runs it records it as reactive. A turn over the trigger but within the
//! window stays automatic. Real Redis; PostgreSQL and a SQLite file.

use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{
    conversation, eventually, key, settings, small_model, spawn_worker, TestRedis,
};
use compactor_producer::client::{Compactor, TurnOutcome};
use compactor_producer::queue::{ClaimOutcome, EnqueueOutcome, Trigger};
use compactor_shared::EntityKey;

/// `(current_tokens, trigger)` of a turn that requested a compaction.
fn requested(turn: TurnOutcome) -> (u64, String) {
    match turn {
        TurnOutcome::Requested {
            current_tokens,
            trigger,
            enqueue: EnqueueOutcome::Added { .. },
            ..
        } => (current_tokens, trigger),
        other => panic!("a new job requested: {other:?}"),
    }
}

async fn a_turn_past_the_window_is_reactive_and_runs_first(backend: Backend) {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let mut settings = settings(&db.url, &redis, None);
    // An 8k-token model, its trigger at 5.5k tokens.
    settings.engine.trigger = small_model().trigger;
    let engine = settings.engine.clone();
    let window = engine.trigger.context_window();
    let queue = redis.queue().await;
    let compactor = Compactor::from_parts(db.store.clone(), queue.clone(), engine).await;
    // A backlog of automatic requests of workstreams that are not there
    // (the worker dead-letters them).
    let backlog: Vec<(EntityKey, Trigger)> = (0..1_000)
        .map(|i| (key(&format!("backlog{i}")), Trigger::Auto))
        .collect();
    queue.enqueue_many(&backlog).await.unwrap();

    // Over the trigger, within the window: automatic, behind the backlog.
    let due = key("due");
    compactor
        .append_messages(&due, conversation(45))
        .await
        .unwrap();
    let (tokens, trigger) = requested(compactor.finalize_turn(&due, None).await.unwrap());
    assert!(tokens <= window, "{tokens} tokens fit the {window} window");
    assert_eq!(trigger, "auto");

    // Past the window: reactive, in the urgent lane.
    let over = key("over");
    compactor
        .append_messages(&over, conversation(100))
        .await
        .unwrap();
    let (tokens, trigger) = requested(compactor.finalize_turn(&over, None).await.unwrap());
    assert!(
        tokens > window,
        "{tokens} tokens are past the {window} window"
    );
    assert_eq!(trigger, "reactive");
    let counts = queue.counts().await.unwrap();
    assert_eq!(
        (counts.waiting, counts.waiting_urgent, counts.waiting_normal),
        (1_002, 1, 1_001)
    );

    // It is the next job a worker takes…
    let ClaimOutcome::Claimed(job) = queue.claim("probe").await.unwrap() else {
        panic!("a job to claim")
    };
    assert_eq!(
        (&job.key, &job.payload.trigger),
        (&over, &Trigger::Reactive)
    );
    assert!(
        queue.release(&job).await.unwrap(),
        "handed back, in its lane"
    );

    // …and the worker compacts it, recording the trigger.
    let worker = spawn_worker(settings);
    eventually(
        "the reactive compaction is committed",
        Duration::from_secs(60),
        || async { compactor.status(&over).await.unwrap().compactions == 1 },
    )
    .await;
    worker.stop().await;
    let runs = db.store.runs(&over, 10).await.unwrap();
    assert_eq!(runs.last().unwrap().run.trigger, "reactive", "{runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_past_the_window_is_reactive_and_runs_first_on_postgres() {
    a_turn_past_the_window_is_reactive_and_runs_first(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_past_the_window_is_reactive_and_runs_first_on_sqlite() {
    a_turn_past_the_window_is_reactive_and_runs_first(Backend::Sqlite).await;
}
