//! The worker runtime against the real Redis (127.0.0.1:6379 or
//! `REDIS_URL`): pickup, follow-ups, retries, dead letters, lost leases,
//! the lock-duration cap, panics, shutdown, unusable payloads. Each test
//! has its own queue.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{
    enqueue_each_until_done, eventually, fails_permanently_once, fast_queue, fast_runtime, key,
    request, retry_the_dead_letter, state, until_dead, until_done, FnHandler, Running, TestQueue,
};
use compactor_producer::queue::{ClaimOutcome, EnqueueOutcome, JobState, QueueConfig, Trigger};
use compactor_worker::runtime::{Job, JobError, RuntimeConfig};
use tokio::sync::{oneshot, Notify};

/// One attempt as the handler saw it.
#[derive(Debug, Clone)]
struct Attempt {
    job_id: u64,
    attempt: u32,
    started: Instant,
    ended: Option<Instant>,
}

/// Records each attempt's start and end.
#[derive(Default, Clone)]
struct Log(Arc<Mutex<Vec<Attempt>>>);

impl Log {
    fn start(&self, job: &Job) -> usize {
        let mut v = self.0.lock().unwrap();
        v.push(Attempt {
            job_id: job.job_id,
            attempt: job.attempt,
            started: Instant::now(),
            ended: None,
        });
        v.len() - 1
    }
    fn end(&self, i: usize) {
        self.0.lock().unwrap()[i].ended = Some(Instant::now());
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn get(&self, i: usize) -> Attempt {
        self.0.lock().unwrap()[i].clone()
    }

    /// A handler that records each attempt's start, runs `body` (given the
    /// job and the attempt's place in the log), then records its end: the
    /// tests differ only in what happens in between.
    fn handler<F, Fut>(&self, body: F) -> FnHandler
    where
        F: Fn(Job, usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), JobError>> + Send + 'static,
    {
        let (log, body) = (self.clone(), Arc::new(body));
        FnHandler::new(move |job| {
            let (log, body) = (log.clone(), body.clone());
            async move {
                let i = log.start(&job);
                let outcome = body(job, i).await;
                log.end(i);
                outcome
            }
        })
    }

    /// Waits until `n` attempts have started.
    async fn until_started(&self, n: usize, what: &str) {
        eventually(what, Duration::from_secs(5), || async { self.len() == n }).await;
    }
}

/// A queue whose leases outlast a loaded machine's scheduling delays (and
/// a panic hook's backtrace), where an expiry would rightly run an
/// attempt again.
async fn long_lease_queue() -> TestQueue {
    TestQueue::with(QueueConfig {
        lease_ttl: Duration::from_secs(10),
        ..fast_queue()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_is_woken_for_a_new_job_without_polling() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    // A minute between fallback claims: only the wake-up can be this fast.
    let config = RuntimeConfig {
        check_interval: Duration::from_secs(60),
        ..fast_runtime()
    };
    let running = Running::start(&t.queue, config, log.handler(|_, _| async { Ok(()) }));
    // Each job finds the worker idle: it ran the one before and found the
    // queue empty since.
    enqueue_each_until_done(&t.queue, &["a", "b", "c"], "the job is done").await;
    assert_eq!(log.len(), 3);
    assert_eq!(log.get(0).attempt, 1, "first attempt");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_while_a_job_runs_give_exactly_one_follow_up_run() {
    // The first run waits on a gate while 1,000 requests are made.
    let t = long_lease_queue().await;
    let log = Log::default();
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let running = Running::start(
        &t.queue,
        fast_runtime(),
        log.handler(move |_, i| {
            let g = g.clone();
            async move {
                if i == 0 {
                    g.notified().await;
                }
                Ok(())
            }
        }),
    );
    let k = key("busy");
    request(&t.queue, &k).await;
    log.until_started(1, "the first run started").await;
    let requests = (0..1_000).map(|_| {
        let q = t.queue.clone();
        let k = k.clone();
        tokio::spawn(async move { q.request_compaction(&k, Trigger::Auto).await.unwrap() })
    });
    for r in futures::future::join_all(requests).await {
        assert!(matches!(
            r.unwrap(),
            EnqueueOutcome::FollowUpRecorded { .. }
        ));
    }
    gate.notify_one();
    eventually("the follow-up ran", Duration::from_secs(5), || async {
        matches!(state(&t.queue, &k).await, Some(JobState::Done { .. })) && log.len() == 2
    })
    .await;
    let (first, second) = (log.get(0), log.get(1));
    assert_ne!(
        first.job_id, second.job_id,
        "the follow-up is a job of its own"
    );
    assert!(
        second.started >= first.ended.unwrap(),
        "the follow-up started after the first run ended"
    );
    let counts = t.queue.counts().await.unwrap();
    assert_eq!(
        (counts.waiting, counts.running),
        (0, 0),
        "nothing more to run"
    );
    running.stop().await;
    assert_eq!(log.len(), 2, "exactly one follow-up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_failure_is_retried_after_the_backoff_then_dead_lettered() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    let mut config = fast_runtime();
    config.retry.base_delay = Duration::from_millis(400);
    let handler = log.handler(|_, _| async { Err(JobError::retryable("upstream 503")) });
    let running = Running::start(&t.queue, config, handler);
    let k = key("flaky");
    request(&t.queue, &k).await;
    until_dead(&t.queue, &k, "the job is dead-lettered").await;
    assert_eq!(log.len(), 2, "two attempts in all");
    let (first, second) = (log.get(0), log.get(1));
    assert_eq!((first.attempt, second.attempt), (1, 2));
    let gap = second.started - first.ended.unwrap();
    assert!(
        gap >= Duration::from_millis(400),
        "backoff honoured: {gap:?}"
    );
    println!("retry gap with a 400 ms base: {gap:?}");
    let dead = t.queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].reason.contains("gave up after 2 attempts") && dead[0].reason.contains("503"),
        "{}",
        dead[0].reason
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_when_longer_than_the_backoff() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    let mut config = fast_runtime();
    config.retry.base_delay = Duration::from_millis(50);
    let handler = log.handler(|job, _| async move {
        if job.attempt == 1 {
            Err(JobError::retry_after("429", Duration::from_millis(1_200)))
        } else {
            Ok(())
        }
    });
    let running = Running::start(&t.queue, config, handler);
    let k = key("limited");
    request(&t.queue, &k).await;
    until_done(&t.queue, &k, "the second attempt succeeded").await;
    let gap = log.get(1).started - log.get(0).ended.unwrap();
    assert!(
        gap >= Duration::from_millis(1_200),
        "Retry-After honoured: {gap:?}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_failure_is_dead_lettered_at_once_and_can_be_retried_from_the_api() {
    let t = TestQueue::with(fast_queue()).await;
    let runs = Arc::new(AtomicU32::new(0));
    let running = Running::start(&t.queue, fast_runtime(), fails_permanently_once(&runs));
    let k = key("gone");
    request(&t.queue, &k).await;
    until_dead(&t.queue, &k, "dead-lettered").await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "never retried");
    let dead = t.queue.dead_letters(10).await.unwrap();
    assert_eq!(dead[0].reason, "unknown workstream");

    // The operator fixes the cause and retries it.
    retry_the_dead_letter(&t.queue, &dead[0].entry, &k, &runs).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_fails_the_attempt_and_the_worker_goes_on() {
    // A lease long enough to outlast the panic hook: with RUST_BACKTRACE set
    // it symbolizes a backtrace on the panicking thread, which on a loaded
    // machine took over a second (the 1 s lease of `fast_queue` then expired
    // and recovery rightly ran the attempt again).
    let t = long_lease_queue().await;
    let log = Log::default();
    let handler = log.handler(|job, _| async move {
        if job.key.entity_id() == "boom" && job.attempt == 1 {
            panic!("handler bug");
        }
        Ok(())
    });
    let running = Running::start(&t.queue, fast_runtime(), handler);
    let (boom, after) = (key("boom"), key("after"));
    request(&t.queue, &boom).await;
    until_done(&t.queue, &boom, "the second attempt succeeded").await;
    request(&t.queue, &after).await;
    until_done(&t.queue, &after, "the worker still runs jobs").await;
    assert_eq!(log.len(), 3);
    running.stop().await;
}

/// Signals when dropped: shows a handler's future was cancelled.
struct DropSignal(Option<oneshot::Sender<()>>);
impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_cancels_the_attempt_and_its_commit_is_refused() {
    let t = TestQueue::with(fast_queue()).await;
    let (dropped_tx, dropped_rx) = oneshot::channel();
    let dropped_tx = Arc::new(Mutex::new(Some(dropped_tx)));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let (d, tk) = (dropped_tx.clone(), tokens.clone());
    let running = Running::start(
        &t.queue,
        fast_runtime(),
        FnHandler::new(move |job| {
            let guard = DropSignal(d.lock().unwrap().take());
            tk.lock().unwrap().push(job.lease_token.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(())
            }
        }),
    );
    let k = key("stolen");
    request(&t.queue, &k).await;
    eventually("the job runs", Duration::from_secs(5), || async {
        !tokens.lock().unwrap().is_empty()
    })
    .await;
    // Someone else now holds the entity (as after an expiry and reclaim).
    let mut raw = t.raw().await;
    let _: () = redis::cmd("HSET")
        .arg(t.queue.keys().job(&k))
        .arg("lease")
        .arg("another-worker-token")
        .query_async(&mut raw)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), dropped_rx)
        .await
        .expect("the attempt is cancelled within a renew interval or two")
        .unwrap();
    let lease: String = redis::cmd("HGET")
        .arg(t.queue.keys().job(&k))
        .arg("lease")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(lease, "another-worker-token", "the new holder is untouched");
    assert!(matches!(
        state(&t.queue, &k).await,
        Some(JobState::Running { .. })
    ));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_longer_than_the_lock_duration_is_cancelled_and_retried() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    let mut config = fast_runtime();
    config.lock_duration = Duration::from_millis(600);
    let handler = log.handler(|job, _| async move {
        if job.attempt == 1 {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Ok(())
    });
    let running = Running::start(&t.queue, config, handler);
    let k = key("slow");
    request(&t.queue, &k).await;
    until_done(&t.queue, &k, "the second attempt succeeded").await;
    assert_eq!(log.len(), 2);
    assert!(
        log.get(0).ended.is_none(),
        "the first attempt never finished"
    );
    assert_eq!(log.get(1).attempt, 2);
    running.stop().await;
}

/// An attempt that keeps its thread busy for longer than the lease (CPU
/// work that does not yield, as the offline summarizer over a long span
/// on a loaded machine) keeps its lease: the renewals run in a task of
/// their own. Were they polled beside the attempt, the lease would expire,
/// the sweep would hand the job to a second attempt, and the first one's
/// completion would be refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_busy_on_its_thread_for_longer_than_the_lease_keeps_it() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    let handler = log.handler(|_, _| async move {
        // Three lease lengths (1 s each) without yielding.
        std::thread::sleep(Duration::from_secs(3));
        Ok(())
    });
    let running = Running::start(&t.queue, fast_runtime(), handler);
    let k = key("busy");
    request(&t.queue, &k).await;
    until_done(&t.queue, &k, "the busy attempt completed").await;
    running.stop().await;
    assert_eq!(log.len(), 1, "one attempt, never handed to another");
    assert!(log.get(0).ended.is_some(), "it finished");
    assert_eq!(log.get(0).attempt, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_an_in_flight_job_finish_and_claims_nothing_more() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    let gate = Arc::new(Notify::new());
    let g = gate.clone();
    let handler = log.handler(move |_, _| {
        let g = g.clone();
        async move {
            g.notified().await;
            Ok(())
        }
    });
    let mut running = Running::start(&t.queue, fast_runtime(), handler);
    let (inflight, later) = (key("inflight"), key("later"));
    request(&t.queue, &inflight).await;
    log.until_started(1, "the job runs").await;
    running.signal();
    // Arrives during the grace period, with a slot free: must not start.
    request(&t.queue, &later).await;
    gate.notify_one();
    running.stop().await;
    assert!(log.get(0).ended.is_some(), "it finished");
    let done = state(&t.queue, &inflight).await;
    assert!(matches!(done, Some(JobState::Done { .. })));
    assert_eq!(log.len(), 1, "nothing was started after the signal");
    let waiting = state(&t.queue, &later).await;
    assert!(matches!(waiting, Some(JobState::Waiting { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_hands_back_a_job_that_outlasts_the_grace_period() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    let mut config = fast_runtime();
    config.shutdown_grace = Duration::from_millis(300);
    let handler = log.handler(|_, _| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(())
    });
    let running = Running::start(&t.queue, config, handler);
    let k = key("long");
    let EnqueueOutcome::Added { job_id } = request(&t.queue, &k).await else {
        panic!()
    };
    log.until_started(1, "the job runs").await;
    let stopped = Instant::now();
    running.stop().await;
    println!("stopped {:?} after the signal", stopped.elapsed());
    assert_eq!(
        state(&t.queue, &k).await,
        Some(JobState::Waiting { job_id }),
        "handed back, not lost"
    );
    // The hand-back did not use up an attempt.
    match t.queue.claim("next-worker").await.unwrap() {
        ClaimOutcome::Claimed(job) => assert_eq!((job.job_id, job.attempt), (job_id, 1)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_queue_entries_are_dead_lettered_and_the_worker_goes_on() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    let mut raw = t.raw().await;
    let keys = t.queue.keys().clone();
    // A payload that is not JSON, one of an unknown version, one naming an
    // invalid key: written straight into Redis as a buggy producer might.
    for (member, payload) in [
        ("compact:chat:garbage", "not json at all".to_owned()),
        (
            "compact:chat:future",
            r#"{"v":99,"key":"compact:chat:future","trigger":{"kind":"auto"}}"#.to_owned(),
        ),
        (
            "compact:chat:badkey",
            r#"{"v":1,"key":{"domain":"BAD KEY{x}","entity_id":"1"},"trigger":{"kind":"auto"}}"#
                .to_owned(),
        ),
    ] {
        compactor_e2e::write_raw_job(&mut raw, &keys, member, &payload).await;
    }
    let running = Running::start(
        &t.queue,
        fast_runtime(),
        log.handler(|_, _| async { Ok(()) }),
    );
    let k = key("fine");
    request(&t.queue, &k).await;
    until_done(&t.queue, &k, "the valid job ran").await;
    assert_eq!(log.len(), 1, "only the valid job reached the handler");
    let dead = t.queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 3, "{dead:?}");
    for d in &dead {
        assert!(!d.reason.is_empty());
        println!("{}: {}", d.member, d.reason);
    }
    assert!(
        dead.iter().any(|d| d.reason.contains("version")),
        "{dead:?}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_dependency_postpones_without_using_up_attempts() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    let handler = log.handler(|_, i| async move {
        // Down for the first four attempts: more than max_attempts.
        if i < 4 {
            Err(JobError::unavailable("database unreachable"))
        } else {
            Ok(())
        }
    });
    let running = Running::start(&t.queue, fast_runtime(), handler);
    let k = key("outage");
    request(&t.queue, &k).await;
    until_done(&t.queue, &k, "done once the database is back").await;
    assert_eq!(log.len(), 5);
    assert!(
        (0..5).all(|i| log.get(i).attempt == 1),
        "no attempt was counted"
    );
    assert!(t.queue.dead_letters(10).await.unwrap().is_empty());
    running.stop().await;
}

/// One run: which worker ran which entity, and when.
#[derive(Debug, Clone)]
struct Run {
    worker: &'static str,
    entity: String,
    started: Instant,
    ended: Option<Instant>,
}

/// Every run, in start order.
#[derive(Default, Clone)]
struct Runs(Arc<Mutex<Vec<Run>>>);

impl Runs {
    /// A handler for worker `who`: entities named `slow…` take 2 s, others
    /// return at once.
    fn handler(&self, who: &'static str) -> FnHandler {
        let runs = self.clone();
        FnHandler::new(move |job| {
            let runs = runs.clone();
            async move {
                let entity = job.key.entity_id().to_owned();
                let i = {
                    let mut v = runs.0.lock().unwrap();
                    v.push(Run {
                        worker: who,
                        entity: entity.clone(),
                        started: Instant::now(),
                        ended: None,
                    });
                    v.len() - 1
                };
                if entity.starts_with("slow") {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                runs.0.lock().unwrap()[i].ended = Some(Instant::now());
                Ok(())
            }
        })
    }

    fn all(&self) -> Vec<Run> {
        self.0.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_claimed_ahead_that_finds_no_slot_goes_back_to_the_queue_for_another_worker() {
    let t = TestQueue::with(fast_queue()).await;
    let runs = Runs::default();
    let mut wakeups = t.queue.subscribe_wakeups().await.unwrap();
    // Worker A: one slot and two jobs ahead. Its short jobs make it claim
    // ahead, so when a slow job takes its slot, A holds slow jobs it
    // cannot start.
    let a = Running::start(
        &t.queue,
        RuntimeConfig {
            concurrency: 1,
            claim_ahead: 2,
            ..fast_runtime()
        },
        runs.handler("A"),
    );
    let mut requests: Vec<_> = (0..20)
        .map(|i| (key(&format!("short{i}")), Trigger::Auto))
        .collect();
    for i in 0..3 {
        requests.push((key(&format!("slow{i}")), Trigger::Auto));
    }
    let outcomes = t.queue.enqueue_many(&requests).await.unwrap();
    let slow_ids: Vec<Vec<u8>> = outcomes[20..]
        .iter()
        .map(|o| match o {
            EnqueueOutcome::Added { job_id } => job_id.to_string().into_bytes(),
            other => panic!("{other:?}"),
        })
        .collect();
    // A job is announced when added and again when it goes back to the
    // queue: wait for a slow job's second announcement.
    let mut announced = [0; 3];
    let handed_back = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let notice = wakeups.next(Duration::from_secs(1)).await.unwrap();
            if let Some(i) = slow_ids.iter().position(|id| *id == notice.payload) {
                announced[i] += 1;
                if announced[i] == 2 {
                    return i;
                }
            }
        }
    })
    .await
    .expect("a slow job claimed ahead by A goes back to the queue");
    // Handed back, not recovered after its lease expired: recovery would
    // have counted a stall.
    let mut conn = redis::Client::open(t.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let stalls: Option<u32> = redis::cmd("HGET")
        .arg(t.queue.keys().job(&key(&format!("slow{handed_back}"))))
        .arg("stalls")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        stalls, None,
        "slow{handed_back} was handed back, not recovered"
    );
    // Worker B, idle, takes what A handed back while A's slot is busy.
    eventually("A runs a slow job", Duration::from_secs(5), || async {
        runs.all()
            .iter()
            .any(|r| r.worker == "A" && r.entity.starts_with("slow"))
    })
    .await;
    let b = Running::start(&t.queue, fast_runtime(), runs.handler("B"));
    for i in 0..3 {
        until_done(
            &t.queue,
            &key(&format!("slow{i}")),
            "the slow jobs are done",
        )
        .await;
    }
    let all = runs.all();
    for (entity, _) in &requests {
        let n = all
            .iter()
            .filter(|r| r.entity == entity.entity_id())
            .count();
        assert_eq!(n, 1, "{entity} ran once: {all:?}");
    }
    let on_a = all
        .iter()
        .find(|r| r.worker == "A" && r.entity.starts_with("slow"))
        .unwrap();
    let a_slot_free = on_a.ended.unwrap();
    assert!(
        all.iter()
            .any(|r| r.worker == "B" && r.entity.starts_with("slow") && r.started < a_slot_free),
        "a slow job A had claimed ahead ran on B without waiting for A's slot: {all:?}"
    );
    a.stop().await;
    b.stop().await;
    let counts = t.queue.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.running), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_puts_back_jobs_whose_set_entry_was_lost() {
    let t = TestQueue::with(fast_queue()).await;
    let log = Log::default();
    let mut raw = t.raw().await;
    let keys = t.queue.keys().clone();
    // A waiting job whose waiting-set entry is gone (an eviction, a
    // tampered set): nothing would ever claim it, and no request comes to
    // put it back.
    let waiting = key("lost-waiting");
    request(&t.queue, &waiting).await;
    zrem(&mut raw, &keys.waiting(), &waiting.job_key()).await;
    // A running job whose worker died, and whose running-set entry is gone
    // too: no sweep would find its expired lease.
    let running_key = key("lost-running");
    request(&t.queue, &running_key).await;
    let ClaimOutcome::Claimed(crashed) = t.queue.claim("crashed-worker").await.unwrap() else {
        panic!("the job is claimed")
    };
    assert_eq!(crashed.key, running_key);
    zrem(&mut raw, &keys.running(), &running_key.job_key()).await;
    let counts = t.queue.counts().await.unwrap();
    assert_eq!((counts.waiting, counts.running), (0, 0), "both untracked");

    let running = Running::start(
        &t.queue,
        fast_runtime(),
        log.handler(|_, _| async { Ok(()) }),
    );
    until_done(&t.queue, &waiting, "the lost waiting job ran").await;
    until_done(&t.queue, &running_key, "the lost running job ran").await;
    assert_eq!(log.len(), 2, "each ran once");
    let attempt = (0..log.len())
        .map(|i| log.get(i))
        .find(|a| a.job_id == crashed.job_id)
        .unwrap();
    assert_eq!(
        attempt.attempt, 1,
        "the crashed claim was a stall, not a failed attempt"
    );
    running.stop().await;
}

/// Removes `member` from the sorted set `set` behind the queue's back, as
/// an eviction or a tampered set would.
async fn zrem(raw: &mut redis::aio::MultiplexedConnection, set: &str, member: &str) {
    let _: () = redis::cmd("ZREM")
        .arg(set)
        .arg(member)
        .query_async(raw)
        .await
        .unwrap();
}

/// Calls of each command the server ran (`INFO commandstats`), by name.
async fn command_calls(conn: &mut redis::aio::MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|f| f.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// Short jobs are settled and claimed in batches: while attempts are short
/// a worker leases ahead what its slots finish in one round trip, so each
/// settle call completes and claims many jobs, and a job pays a small part
/// of the call's own work (issue 32: that work was most of what a no-op job
/// cost Redis). Counted on a private Redis: each completion batch reads the
/// done set's size once (`ZCARD`), each claim the pause record once
/// (`HGETALL`). With a fixed two jobs ahead, as before, both counts are
/// over half the jobs (1,070–1,190 of 2,000 in a debug build); leasing
/// ahead for a round trip took 140–536 in runs alone, beside the other
/// tests and under CPU load, and 721 in the project's CI, so the bound is
/// half: how many a batch holds depends on the scheduler, that a batch
/// holds more than two does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_short_jobs_is_settled_and_claimed_in_batches() {
    let redis = compactor_testkit::PrivateRedis::start();
    let t = TestQueue::at(&redis.url(), QueueConfig::default()).await;
    let n: u32 = 2_000;
    let requests: Vec<_> = (0..n)
        .map(|i| (key(&format!("short{i}")), Trigger::Auto))
        .collect();
    for chunk in requests.chunks(500) {
        t.queue.enqueue_many(chunk).await.unwrap();
    }
    let seen = Arc::new(AtomicU32::new(0));
    let all = Arc::new(Notify::new());
    let handler = {
        let (seen, all) = (Arc::clone(&seen), Arc::clone(&all));
        FnHandler::new(move |_job| {
            let (seen, all) = (Arc::clone(&seen), Arc::clone(&all));
            async move {
                if seen.fetch_add(1, Ordering::SeqCst) + 1 == n {
                    all.notify_one();
                }
                Ok(())
            }
        })
    };
    let mut conn = t.raw().await;
    let before = command_calls(&mut conn).await;
    // The default runtime but two slots (its queue sampling and sweeps
    // every 5 s stay out of the count).
    let running = Running::start(
        &t.queue,
        RuntimeConfig {
            concurrency: 2,
            ..RuntimeConfig::default()
        },
        handler,
    );
    tokio::time::timeout(Duration::from_secs(60), all.notified())
        .await
        .expect("every job runs");
    // Stopping settles every completion still on its way.
    running.stop().await;
    let after = command_calls(&mut conn).await;
    let calls = |name: &str| after.get(name).unwrap_or(&0) - before.get(name).unwrap_or(&0);
    let counts = t.queue.counts().await.unwrap();
    assert_eq!(
        (counts.waiting, counts.running, counts.done),
        (0, 0, u64::from(n)),
        "every job ran once and was completed"
    );
    let (completions, claims) = (calls("zcard"), calls("hgetall"));
    assert!(
        completions < u64::from(n / 2) && claims < u64::from(n / 2),
        "{n} jobs took {completions} completion batches and {claims} claims"
    );
}
