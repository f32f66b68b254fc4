//! A workstream's life around its compactions: the schema check at worker
//! start, the circuit breaker after repeated failures, memory-block folding.
//! Real databases and Redis; the LLM faked at the HTTP boundary.

use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{
    conversation, key, requested_job, settings, small_window, take_lease, text_of, until_leased,
    FakeLlm, Fault, TestRedis,
};
use compactor_producer::client::{Compactor, IncomingMessage, TurnOutcome};
use compactor_producer::queue::{Queue, Trigger};
use compactor_producer::store::SchemaStatus;
use compactor_shared::{EntityKey, Role};
use compactor_worker::jobs::{CompactHandler, CompactSettings, Summarizer};
use compactor_worker::llm::{LlmClient, LlmConfig, Provider};
use compactor_worker::runtime::{Job, JobHandler};
use compactor_worker::startup::{self, StartupError};
use tokio_util::sync::CancellationToken;

/// A queue and a client (on the small window) on `db` and `redis`, and
/// `messages` stored in workstream `entity`: where the tests that run
/// attempts by hand start.
async fn stored(
    db: &TestDb,
    redis: &TestRedis,
    entity: &str,
    messages: Vec<IncomingMessage>,
) -> (Queue, Compactor, EntityKey) {
    let queue = redis.queue().await;
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), small_window()).await;
    let k = key(entity);
    client.append_messages(&k, messages).await.unwrap();
    (queue, client, k)
}

/// The compaction job as a worker runs it, summarizing offline
/// (extractive) on the small window: attempts run by hand, without an LLM.
fn extractive_handler(db: &TestDb, queue: Queue) -> CompactHandler {
    CompactHandler::new(
        db.store.clone(),
        queue,
        Summarizer::Extractive,
        CompactSettings::new(small_window()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_database_gets_its_schema_and_one_behind_is_refused() {
    // A brand-new SQLite file (the first run on a fresh machine).
    let fresh = TestDb::unmigrated(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let shutdown = CancellationToken::new();
    let worker = tokio::spawn(startup::run(
        settings(&fresh.url, &redis, None),
        shutdown.clone(),
    ));
    compactor_e2e::eventually("the schema is created", Duration::from_secs(20), || async {
        matches!(fresh.store.schema_status().await, Ok(SchemaStatus::Current))
    })
    .await;
    shutdown.cancel();
    worker.await.unwrap().unwrap();

    // A database one migration behind (an upgrade not applied yet).
    let behind = TestDb::new(Backend::Postgres).await;
    let last = compactor_migrations::migration_names().pop().unwrap();
    behind
        .exec(&format!(
            "DELETE FROM seaql_migrations WHERE version = '{last}'"
        ))
        .await;
    let err = startup::run(
        settings(&behind.url, &redis, None),
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, StartupError::SchemaBehind(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains(&last) && message.contains("compactor migrate"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_compactions_open_the_breaker_until_new_messages_or_a_manual_request() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    llm.fail_always(Some(Fault::Unauthorized));
    let (queue, client, k) = stored(&db, &redis, "broken", conversation(200)).await;
    let llm_config = LlmConfig {
        provider: Provider::OpenAi,
        base_url: Some(llm.url()),
        model: "fake-model".into(),
        fallback_to_extractive: false,
        ..LlmConfig::default()
    };
    let handler = CompactHandler::new(
        db.store.clone(),
        queue.clone(),
        Summarizer::Llm(LlmClient::from_config(&llm_config).unwrap()),
        CompactSettings {
            fallback_to_extractive: false,
            ..CompactSettings::new(small_window())
        },
    );
    for job_id in 1..=3 {
        // Each job's last attempt fails.
        let job = Job::new(
            k.clone(),
            Trigger::Auto,
            job_id,
            2,
            2,
            format!("lease-{job_id}"),
        );
        assert!(handler.run(job).await.is_err());
    }
    let status = client.status(&k).await.unwrap();
    assert_eq!(status.consecutive_failures, 3);
    assert!(status.breaker_open, "visible in status");
    let turn = client.finalize_turn(&k, None).await.unwrap();
    assert!(
        matches!(
            turn,
            TurnOutcome::BreakerOpen {
                consecutive_failures: 3,
                ..
            }
        ),
        "{turn:?}"
    );
    assert_eq!(queue.job_state(&k).await.unwrap(), None, "nothing enqueued");

    // A new message closes it for automatic requests.
    client
        .append_messages(
            &k,
            vec![IncomingMessage::text(Role::User, "one more thing")],
        )
        .await
        .unwrap();
    assert!(!client.status(&k).await.unwrap().breaker_open);
    requested_job(&client.finalize_turn(&k, None).await.unwrap());

    // Failing again reopens it; a manual request resets it.
    let job = Job::new(k.clone(), Trigger::Auto, 4, 2, 2, "lease-4");
    assert!(handler.run(job).await.is_err());
    assert!(client.status(&k).await.unwrap().breaker_open);
    client
        .compact_now(&k, Some("keep the API decisions".into()))
        .await
        .unwrap();
    let status = client.status(&k).await.unwrap();
    assert!(!status.breaker_open);
    assert_eq!(status.consecutive_failures, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_entries_are_folded_when_fifteen_accumulate() {
    let db = TestDb::sqlite().await;
    let redis = TestRedis::new();
    let (queue, client, k) = stored(&db, &redis, "memory", conversation(50)).await;
    let entries: Vec<String> = (0..15)
        .map(|i| format!("The user prefers answer style number {i}."))
        .collect();
    assert_eq!(client.append_memory_entries(&k, entries).await.unwrap(), 15);
    let handler = extractive_handler(&db, queue);
    let job = Job::new(
        k.clone(),
        Trigger::Manual { instructions: None },
        1,
        1,
        2,
        "lease-m",
    );
    handler.run(job).await.unwrap();
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    let folded = ws.memory_block_summary.expect("the oldest 10 folded");
    assert!(folded.contains("style number 0") && folded.contains("style number 9"));
    assert!(!folded.contains("style number 10"));
    let left = db.store.unfolded_memory_entries(ws.id).await.unwrap();
    assert_eq!(left.len(), 5);
    let context = client.build_context(&k).await.unwrap();
    let preamble = text_of(&context.messages[0]);
    assert!(preamble.contains("style number 3") && preamble.contains("style number 14"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_left_by_a_crashed_attempt_is_waited_out_not_failed() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let (queue, _client, k) = stored(&db, &redis, "after-crash", conversation(200)).await;
    // The previous attempt's worker died holding the entity lease.
    take_lease(&db, &k, "crashed-attempt", Duration::from_millis(1_000)).await;
    let handler = extractive_handler(&db, queue);
    let started = std::time::Instant::now();
    // The re-run is the last attempt: failing it would dead-letter the job.
    handler
        .run(Job::new(k.clone(), Trigger::Auto, 1, 2, 2, "rerun"))
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
    let runs = db.store.runs(&k, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0].run.outcome,
        compactor_producer::store::RunOutcome::Committed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_handed_back_wakes_the_next_taker_before_its_deadline() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let (queue, _client, k) = stored(&db, &redis, "handed-back", conversation(200)).await;
    // An attempt holds the lease for 20 s more, then is handed back at a
    // shutdown: its lease is released after 300 ms.
    let (ws_id, _) = take_lease(&db, &k, "handed-back-attempt", Duration::from_secs(20)).await;
    let store = db.store.clone();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        store
            .release_lease(ws_id, "handed-back-attempt")
            .await
            .unwrap();
    });
    let handler = extractive_handler(&db, queue);
    let started = std::time::Instant::now();
    handler
        .run(Job::new(k.clone(), Trigger::Auto, 1, 1, 2, "next"))
        .await
        .unwrap();
    release.await.unwrap();
    // Woken by the release, not by the deadline 20 s away (a generous
    // bound: the point is which of the two it waited for).
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited {:?} for a released lease",
        started.elapsed()
    );
    let runs = db.store.runs(&k, 10).await.unwrap();
    assert_eq!(
        runs[0].run.outcome,
        compactor_producer::store::RunOutcome::Committed
    );
}

/// The next release announcement for `key`, as its event's outcome.
async fn next_release(
    sub: &mut compactor_producer::queue::Subscription,
) -> compactor_producer::events::CompactionEvent {
    let notice = tokio::time::timeout(Duration::from_secs(10), sub.next(Duration::from_secs(5)))
        .await
        .expect("an announcement")
        .unwrap();
    serde_json::from_slice(&notice.payload).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_with_nothing_to_cut_still_wakes_waiters() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let hello = vec![IncomingMessage::text(Role::User, "hello")];
    let (queue, client, k) = stored(&db, &redis, "short", hello).await;
    let mut releases = queue.subscribe_releases().await.unwrap();
    let handler = extractive_handler(&db, queue);
    let job = Job::new(
        k.clone(),
        Trigger::Manual { instructions: None },
        1,
        1,
        2,
        "lease-s",
    );
    handler.run(job).await.unwrap();
    let event = next_release(&mut releases).await;
    assert_eq!(
        event.outcome,
        compactor_producer::events::EventOutcome::Skipped
    );
    assert!(client.status(&k).await.unwrap().lease.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_attempt_releases_the_lease_records_the_run_and_says_so() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let (queue, client, k) = stored(&db, &redis, "cancelled", conversation(200)).await;
    let mut releases = queue.subscribe_releases().await.unwrap();
    // The attempt stops at its commit until it is cancelled.
    let at_commit = std::sync::Arc::new(tokio::sync::Notify::new());
    let hook: compactor_worker::jobs::compact::BeforeCommit = {
        let at_commit = at_commit.clone();
        std::sync::Arc::new(move |_key| {
            let at_commit = at_commit.clone();
            Box::pin(async move {
                at_commit.notify_one();
                std::future::pending::<()>().await;
            })
        })
    };
    let handler = extractive_handler(&db, queue).with_hooks(compactor_worker::jobs::Hooks {
        before_commit: Some(hook),
    });
    let task = {
        let k = k.clone();
        tokio::spawn(async move {
            handler
                .run(Job::new(k, Trigger::Auto, 1, 1, 2, "lease-c"))
                .await
        })
    };
    at_commit.notified().await;
    assert!(
        client.status(&k).await.unwrap().lease.is_some(),
        "held while it runs"
    );
    // What the runtime does at the lock duration or the end of the grace.
    task.abort();
    let event = next_release(&mut releases).await;
    assert_eq!(
        event.outcome,
        compactor_producer::events::EventOutcome::Failed
    );
    compactor_e2e::eventually("the lease is released", Duration::from_secs(5), || async {
        client.status(&k).await.unwrap().lease.is_none()
    })
    .await;
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(ws.compactions, 0, "nothing committed");
    assert_eq!(
        ws.consecutive_failures, 0,
        "a cancellation is not the workstream's failure"
    );
    // Recorded as any failed attempt: a run row and its event, written
    // with the release.
    assert_eq!(
        db.scalar(&format!(
            "SELECT COUNT(*) AS n FROM compaction_runs WHERE workstream_id = {} \
             AND outcome = 'failed' AND error LIKE 'the attempt was cancelled%'",
            ws.id
        ))
        .await,
        1,
        "the cancelled attempt's run"
    );
    assert_eq!(
        db.scalar(&format!(
            "SELECT COUNT(*) AS n FROM events WHERE kind = 'compaction.failed' \
             AND entity_id = '{}' AND payload LIKE '%cancelled%'",
            k.entity_id()
        ))
        .await,
        1,
        "its compaction.failed event"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_handed_back_at_shutdown_releases_its_lease_before_the_worker_exits() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    // The summary takes longer than the shutdown grace.
    llm.answer_after(Duration::from_secs(30));
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    s.engine = small_window();
    s.llm.request_timeout = Duration::from_secs(60);
    s.worker.shutdown_grace = Duration::from_millis(300);
    let client = Compactor::from_parts(db.store.clone(), redis.queue().await, small_window()).await;
    let k = key("handed-back");
    client.append_messages(&k, conversation(200)).await.unwrap();
    client.finalize_turn(&k, None).await.unwrap();
    let worker = compactor_e2e::spawn_worker(s);
    until_leased(&client, &k, Duration::from_secs(20)).await;
    worker.stop().await;
    let status = client.status(&k).await.unwrap();
    assert!(
        status.lease.is_none(),
        "released before the worker exited, not at its deadline"
    );
    assert!(
        matches!(
            status.job,
            Some(compactor_producer::queue::JobState::Waiting { .. })
        ),
        "handed back to the queue: {:?}",
        status.job
    );
}
