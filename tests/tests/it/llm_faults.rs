//! The compaction job against an LLM that misbehaves the way real ones do
//! (faked at the HTTP boundary): rate limits with `Retry-After`, 5xx,
//! hangs, malformed, truncated and empty answers, context-length errors,
//! auth failures, answers that are no summary, answers cut off at the
//! output limit, a provider that goes down. Each case checks the retries,
//! the job's verdict, and the database: either a whole commit or nothing at
//! all, and a run row that says what happened (why degraded, which model,
//! how many calls and tokens). Real PostgreSQL and Redis.

use std::time::{Duration, Instant};

use compactor_e2e::db::TestDb;
use compactor_e2e::{conversation, key, small_window, FakeLlm, Fault, TestRedis};
use compactor_producer::client::Compactor;
use compactor_producer::queue::{JobState, Trigger};
use compactor_producer::store::{DegradedReason, RunOutcome, RunRow};
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

async fn case(fallback: bool) -> Case {
    case_with(fallback, |_| {}).await
}

/// A case whose LLM settings `tune` adjusts.
async fn case_with(fallback: bool, tune: impl FnOnce(&mut LlmConfig)) -> Case {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let queue = redis.queue().await;
    let llm = FakeLlm::start().await;
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), small_window()).await;
    let key = key("faulty");
    client
        .append_messages(&key, conversation(200))
        .await
        .unwrap();
    let mut config = LlmConfig {
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
    tune(&mut config);
    let summarizer = Summarizer::Llm(LlmClient::from_config(&config).unwrap());
    let handler = CompactHandler::new(
        db.store.clone(),
        queue,
        summarizer,
        CompactSettings {
            fallback_to_extractive: fallback,
            ..CompactSettings::new(small_window())
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
        let marked = self.db.compacted_messages().await;
        assert_eq!(marked, 800 - 6);
        let runs = self.db.store.runs(&self.key, 10).await.unwrap();
        let committed: Vec<_> = runs
            .iter()
            .filter(|r| r.run.outcome == RunOutcome::Committed)
            .collect();
        assert_eq!(committed.len(), 1, "{runs:?}");
        assert_eq!(committed[0].run.degraded, degraded);
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
        assert_eq!(self.db.compacted_messages().await, 0);
        let runs = self.db.store.runs(&self.key, 10).await.unwrap();
        assert!(
            runs.iter().all(|r| r.run.outcome == RunOutcome::Failed),
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
        runs[0].run.chunks as usize,
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
    // Without the health state (see the next tests for it).
    let c = case_with(true, |l| l.unhealthy_after = 0).await;
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
    let run = c.last_run().await;
    assert_eq!(
        run.run.degraded_reason,
        Some(DegradedReason::LlmUnavailable)
    );
    assert_eq!((run.run.llm_calls, run.run.llm_failed_calls), (3, 3));
    assert_eq!(run.run.llm_model.as_deref(), Some("fake-model"));
    assert!(
        run.run.error.as_deref().unwrap_or_default().contains("500"),
        "{run:?}"
    );
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
        .run
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

impl Case {
    async fn last_run(&self) -> RunRow {
        self.db.store.runs(&self.key, 1).await.unwrap().remove(0)
    }

    /// More messages, so the workstream is over its trigger again (plain
    /// text: tool call ids of their own would need numbering).
    async fn grow(&self) {
        let client = Compactor::from_parts(
            self.db.store.clone(),
            self.handler_queue().await,
            small_window(),
        )
        .await;
        let round = self
            .db
            .store
            .workstream(&self.key)
            .await
            .unwrap()
            .unwrap()
            .version;
        let messages = compactor_e2e::chat(400, |i| {
            format!(
                "Round {round}, message {i}: the deploy of service-{i} to eu-west-1 \
                 waits on the cache TTL review; keep the retry budget at 5 attempts."
            )
        });
        client.append_messages(&self.key, messages).await.unwrap();
    }

    /// Compaction requests the fake received (probes left out).
    fn summarizations(&self) -> usize {
        self.llm.calls().iter().filter(|c| !c.is_probe()).count()
    }
}

/// An answer the checks refuse: unrelated JSON.
fn junk() -> Fault {
    Fault::Answer(r#"{"result": "success", "data": {"foo": [1, 2, 3]}}"#.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_answers_fail_the_attempt_then_the_fallback_commits_with_reason_invalid_output() {
    let c = case(true).await;
    c.llm.fail_always(Some(junk()));
    let err = c.run(1).await.unwrap_err();
    assert!(matches!(err, JobError::Retryable { .. }), "{err:?}");
    assert!(err.to_string().contains("invalid_output"), "{err}");
    c.assert_untouched().await;
    let failed = c.last_run().await;
    assert_eq!(failed.run.outcome, RunOutcome::Failed);
    let error = failed.run.error.clone().unwrap_or_default();
    assert!(
        error.contains("invalid_output") && error.contains("no_sections"),
        "the run row says why: {error}"
    );
    assert!(!error.contains("foo"), "never the answer itself: {error}");
    assert_eq!((failed.run.llm_calls, failed.run.llm_failed_calls), (1, 1));
    assert_eq!(
        failed.run.llm_tokens_in, 100,
        "a rejected call's tokens count"
    );
    assert_eq!(failed.run.llm_model.as_deref(), Some("fake-model"));

    // The last attempt: rejected again, then the extractive summary.
    c.run(2).await.unwrap();
    c.assert_committed(true).await;
    let run = c.last_run().await;
    assert!(run.run.degraded);
    assert_eq!(run.run.degraded_reason, Some(DegradedReason::InvalidOutput));
    assert_eq!((run.run.llm_calls, run.run.llm_failed_calls), (1, 1));
    assert!(
        run.run.llm_tokens_in > 0 && run.run.llm_tokens_out > 0,
        "{run:?}"
    );
    assert!(
        run.run
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("no_sections"),
        "{run:?}"
    );
    let summary =
        c.db.store
            .workstream(&c.key)
            .await
            .unwrap()
            .unwrap()
            .summary
            .unwrap();
    assert!(!summary.is_empty());
    assert!(
        !summary.render().contains("result"),
        "nothing of the junk answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_answer_never_replaces_a_summary_with_content() {
    let c = case(false).await;
    c.run(1).await.unwrap();
    let before = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    let summary = before.summary.clone().unwrap();
    assert!(!summary.is_empty());

    c.grow().await;
    c.llm.fail_always(Some(Fault::Answer(
        "KEY FACTS:\n- (none)\nCONVERSATION FLOW:\n- (none)\nOPEN THREADS:\n- (none)\nSTATE DELTA:\n```json\n{}\n```"
            .to_owned(),
    )));
    assert!(c.run(1).await.is_err());
    let after = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    assert_eq!(after.summary, Some(summary), "the summary is kept");
    assert_eq!(after.compactions, 1);
    let run = c.last_run().await;
    assert_eq!(run.run.outcome, RunOutcome::Failed);
    assert!(
        run.run
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("emptied"),
        "{run:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_off_at_the_output_limit_is_asked_again_with_a_larger_budget() {
    let c = case(false).await;
    c.llm.fail_next([Fault::AtLimit]);
    c.run(1).await.unwrap();
    c.assert_committed(false).await;
    let calls = c.llm.calls();
    assert_eq!(calls.len(), 2);
    let (first, second) = (calls[0].max_tokens.unwrap(), calls[1].max_tokens.unwrap());
    assert_eq!(second, first * 2);
    let run = c.last_run().await;
    assert_eq!((run.run.llm_calls, run.run.llm_failed_calls), (2, 1));
    assert_eq!(run.run.degraded_reason, None);
    let ws = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    assert!(
        !ws.summary.unwrap().render().contains("the failing te\n"),
        "the cut-off answer was not used"
    );

    // Cut off twice: rejected, nothing written by this attempt.
    c.grow().await;
    c.llm.fail_next([Fault::AtLimit, Fault::AtLimit]);
    let err = c.run(1).await.unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
    let run = c.last_run().await;
    assert_eq!(run.run.outcome, RunOutcome::Failed);
    assert_eq!((run.run.llm_calls, run.run.llm_failed_calls), (2, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_goes_down_is_skipped_until_a_probe_is_answered() {
    let c = case_with(true, |l| {
        l.max_retries = 4;
        l.unhealthy_after = 3;
        l.probe_interval = Duration::from_millis(100);
    })
    .await;
    // A compaction while the provider is up.
    c.run(1).await.unwrap();
    assert!(!c.last_run().await.run.degraded);

    // It goes down: the next compaction meets the outage on its first
    // attempt (not the last), stops after 3 failed requests of the 5
    // allowed, and commits offline.
    c.grow().await;
    c.llm.fail_always(Some(Fault::ServerError));
    let before = c.summarizations();
    c.run(1).await.unwrap();
    assert_eq!(c.summarizations() - before, 3);
    let run = c.last_run().await;
    assert!(run.run.degraded);
    assert_eq!(
        run.run.degraded_reason,
        Some(DegradedReason::LlmUnavailable)
    );
    assert_eq!((run.run.llm_calls, run.run.llm_failed_calls), (3, 3));

    // While it is unhealthy, compactions do not ask it at all.
    c.grow().await;
    let before = c.summarizations();
    c.run(1).await.unwrap();
    assert_eq!(c.summarizations(), before, "no request while unhealthy");
    let run = c.last_run().await;
    assert!(run.run.degraded);
    assert_eq!(run.run.degraded_reason, Some(DegradedReason::LlmUnhealthy));
    assert_eq!((run.run.llm_calls, run.run.llm_failed_calls), (0, 0));
    assert_eq!(run.run.llm_model.as_deref(), Some("fake-model"));
    assert!(c.llm.calls().iter().any(|call| call.is_probe()), "probed");

    // It comes back: a probe is answered, and compactions use it again.
    c.llm.fail_always(None);
    compactor_e2e::eventually(
        "a compaction uses the LLM again",
        Duration::from_secs(20),
        || async {
            c.grow().await;
            c.run(1).await.unwrap();
            !c.last_run().await.run.degraded
        },
    )
    .await;
    let run = c.last_run().await;
    assert_eq!(run.run.degraded_reason, None);
    assert_eq!((run.run.llm_calls, run.run.llm_failed_calls), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_too_long_even_at_the_minimum_falls_back_at_once_with_reason_context_length() {
    let c = case(true).await;
    c.llm.limit_prompt(1_000);
    c.run(1).await.unwrap();
    c.assert_committed(true).await;
    let run = c.last_run().await;
    assert_eq!(run.run.degraded_reason, Some(DegradedReason::ContextLength));
    assert!(run.run.llm_calls >= 1);
    assert_eq!(run.run.llm_calls, run.run.llm_failed_calls);
}
