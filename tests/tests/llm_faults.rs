//! The compaction job against an LLM that misbehaves the way real ones do
//! (faked at the HTTP boundary): rate limits with `Retry-After`, 5xx,
//! hangs, malformed, truncated and empty answers, context-length errors,
//! auth failures. Each case checks the retries, the job's verdict, and the
//! database: either a whole commit or nothing at all. Real PostgreSQL and
//! Redis.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::time::{Duration, Instant};

use compactor_e2e::db::TestDb;
use compactor_e2e::{conversation, key, FakeLlm, Fault, TestRedis};
use compactor_producer::client::Compactor;
use compactor_producer::queue::{JobState, Trigger};
use compactor_producer::store::RunOutcome;
use compactor_shared::config::EngineConfig;
use compactor_shared::trigger::TriggerPolicy;
use compactor_shared::EntityKey;
use compactor_worker::jobs::{CompactHandler, CompactSettings, Summarizer};
use compactor_worker::llm::{LlmClient, LlmConfig, Provider};
use compactor_worker::runtime::{Job, JobError, JobHandler, Runtime, RuntimeConfig};

/// One case's world: a database, a queue, the fake LLM, a workstream over
/// its trigger, and a compaction handler using the fake.
struct Case {
    db: TestDb,
    _redis: TestRedis,
    llm: FakeLlm,
    handler: CompactHandler,
    key: EntityKey,
}

fn engine() -> EngineConfig {
    EngineConfig {
        trigger: TriggerPolicy::Threshold {
            context_window: 20_000,
            ratio: 0.7,
            output_reserve: 4_000,
            safety_margin: 1_000,
        },
        ..EngineConfig::default()
    }
}

async fn case(fallback: bool) -> Case {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let queue = redis.queue().await;
    let llm = FakeLlm::start().await;
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), engine()).await;
    let key = key("faulty");
    client
        .append_messages(&key, conversation(200))
        .await
        .unwrap();
    let config = LlmConfig {
        provider: Provider::OpenAi,
        base_url: Some(llm.url()),
        model: "fake-model".into(),
        request_timeout: Duration::from_millis(800),
        max_retries: 2,
        retry_base_delay: Duration::from_millis(10),
        retry_max_delay: Duration::from_millis(50),
        fallback_to_extractive: fallback,
        ..LlmConfig::default()
    };
    let summarizer = Summarizer::Llm(LlmClient::from_config(&config).unwrap());
    let handler = CompactHandler::new(
        db.store.clone(),
        queue,
        summarizer,
        CompactSettings {
            fallback_to_extractive: fallback,
            ..CompactSettings::new(engine())
        },
    );
    Case {
        db,
        _redis: redis,
        llm,
        handler,
        key,
    }
}

impl Case {
    async fn run(&self, attempt: u32) -> Result<(), JobError> {
        let job = Job::new(
            self.key.clone(),
            Trigger::Auto,
            1,
            attempt,
            2,
            format!("lease-{attempt}"),
        );
        self.handler.run(job).await
    }

    /// One whole commit: summary, watermark, marked messages, a run row.
    async fn assert_committed(&self, degraded: bool) {
        let ws = self.db.store.workstream(&self.key).await.unwrap().unwrap();
        assert_eq!(ws.compactions, 1);
        assert!(ws.summary.is_some());
        assert!(ws.last_compacted_message_id.is_some());
        assert!(ws.lease.is_none(), "lease released");
        let marked = self
            .db
            .scalar("SELECT COUNT(*) AS n FROM messages WHERE is_compacted = true")
            .await;
        assert_eq!(marked, 800 - 6);
        let runs = self.db.store.runs(&self.key, 10).await.unwrap();
        let committed: Vec<_> = runs
            .iter()
            .filter(|r| r.outcome == RunOutcome::Committed)
            .collect();
        assert_eq!(committed.len(), 1, "{runs:?}");
        assert_eq!(committed[0].degraded, degraded);
    }

    /// Nothing written but the audit row of the failed attempt; the lease
    /// released.
    async fn assert_untouched(&self) {
        let ws = self.db.store.workstream(&self.key).await.unwrap().unwrap();
        assert_eq!(ws.compactions, 0);
        assert_eq!(ws.version, 0);
        assert!(ws.summary.is_none());
        assert!(ws.last_compacted_message_id.is_none());
        assert!(ws.lease.is_none(), "lease released on failure");
        assert_eq!(
            self.db
                .scalar("SELECT COUNT(*) AS n FROM messages WHERE is_compacted = true")
                .await,
            0
        );
        let runs = self.db.store.runs(&self.key, 10).await.unwrap();
        assert!(
            runs.iter().all(|r| r.outcome == RunOutcome::Failed),
            "{runs:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_is_waited_out_for_its_retry_after() {
    let c = case(true).await;
    c.llm.fail_next([Fault::RateLimited {
        retry_after_secs: 1,
    }]);
    let started = Instant::now();
    c.run(1).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    assert_eq!(c.llm.calls().len(), 2, "one retry");
    c.assert_committed(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_are_retried_within_the_attempt() {
    for fault in [
        Fault::ServerError,
        Fault::Hang(Duration::from_secs(3)),
        Fault::Malformed,
        Fault::Truncated,
        Fault::Empty,
    ] {
        let c = case(true).await;
        c.llm.fail_next([fault.clone()]);
        c.run(1).await.unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        assert_eq!(c.llm.calls().len(), 2, "{fault:?}: one retry");
        c.assert_committed(false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_too_long_for_the_model_is_halved() {
    let c = case(true).await;
    let full = {
        c.run_probe().await;
        c.llm.calls()[0].user.chars().count()
    };
    // A fresh world where the whole chunk is too long but half of it fits.
    let c = case(true).await;
    c.llm.limit_prompt(full * 2 / 3);
    c.run(1).await.unwrap();
    let limit = full * 2 / 3;
    let lens: Vec<usize> = c
        .llm
        .calls()
        .iter()
        .map(|c| c.user.chars().count())
        .collect();
    println!("full prompt {full} chars, limit {limit}, prompts {lens:?}");
    assert!(lens[0] > limit, "the whole chunk was refused");
    assert!(lens.len() >= 3, "then sent in pieces: {lens:?}");
    assert!(
        lens[1..].iter().all(|&l| l <= limit),
        "each piece fits: {lens:?}"
    );
    c.assert_committed(false).await;
    let runs = c.db.store.runs(&c.key, 1).await.unwrap();
    assert_eq!(
        runs[0].chunks as usize,
        lens.len() - 1,
        "every piece folded in"
    );
}

impl Case {
    /// Runs once with a healthy fake (to measure the prompt).
    async fn run_probe(&self) {
        self.run(1).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_length_error_that_halving_cannot_fix_is_permanent() {
    let c = case(false).await;
    c.llm.limit_prompt(1_000);
    let err = c.run(1).await.unwrap_err();
    assert!(matches!(err, JobError::Permanent { .. }), "{err:?}");
    assert!(err.to_string().contains("too long for the model"), "{err}");
    c.assert_untouched().await;
    let ws = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    assert_eq!(ws.consecutive_failures, 1, "a final failure counts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_that_stays_down_fails_the_attempt_then_degrades_on_the_last() {
    let c = case(true).await;
    c.llm.fail_always(Some(Fault::ServerError));
    let err = c.run(1).await.unwrap_err();
    assert!(matches!(err, JobError::Retryable { .. }), "{err:?}");
    assert_eq!(c.llm.calls().len(), 3, "the request and its 2 retries");
    c.assert_untouched().await;
    let ws = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    assert_eq!(
        ws.consecutive_failures, 0,
        "a retried attempt does not count"
    );

    // The last attempt summarizes offline.
    c.run(2).await.unwrap();
    c.assert_committed(true).await;
    let ws = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    assert!(!ws.summary.unwrap().is_empty(), "the extractive summary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_fallback_the_last_failure_is_recorded_and_nothing_written() {
    let c = case(false).await;
    c.llm.fail_always(Some(Fault::Unauthorized));
    let err = c.run(2).await.unwrap_err();
    assert_eq!(c.llm.calls().len(), 1, "an auth failure is not retried");
    assert!(
        err.to_string().contains("401") || err.to_string().to_lowercase().contains("auth"),
        "{err}"
    );
    c.assert_untouched().await;
    let ws = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    assert_eq!(ws.consecutive_failures, 1);
    let runs = c.db.store.runs(&c.key, 1).await.unwrap();
    assert!(runs[0]
        .error
        .as_deref()
        .unwrap_or_default()
        .contains("summarizer"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_queue_a_permanent_failure_is_dead_lettered_with_its_reason() {
    let c = case(false).await;
    c.llm.limit_prompt(1_000);
    let queue = c.handler_queue().await;
    queue
        .request_compaction(&c.key, Trigger::Auto)
        .await
        .unwrap();
    let config = RuntimeConfig {
        check_interval: Duration::from_millis(200),
        renew_interval: Duration::from_millis(500),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(queue.clone(), config, c.handler.clone()).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run(async move {
        let _ = stopped.await;
    }));
    compactor_e2e::eventually("dead-lettered", Duration::from_secs(20), || async {
        matches!(
            queue.job_state(&c.key).await.unwrap(),
            Some(JobState::Dead { .. })
        )
    })
    .await;
    let dead = queue.dead_letters(5).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].reason.contains("too long for the model"),
        "{}",
        dead[0].reason
    );
    assert_eq!(dead[0].attempts, 1, "permanent: not retried");
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    c.assert_untouched().await;
}

impl Case {
    async fn handler_queue(&self) -> compactor_producer::queue::Queue {
        compactor_producer::queue::Queue::connect(&self._redis.url, self._redis.config.clone())
            .await
            .unwrap()
    }
}
