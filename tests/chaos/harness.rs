//! What every chaos scenario shares: a fleet of real `compactor-worker`
//! processes, workstreams over their trigger, an LLM faked on loopback
//! that records when it was asked to summarize whose messages, and the
//! invariants checked at the end.

use std::collections::HashMap;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use compactor_e2e::db::TestDb;
use compactor_e2e::{conversation, FakeLlm, TestRedis};
use compactor_producer::client::{Compactor, TurnOutcome};
use compactor_producer::queue::{Queue, QueueConfig, QueueName};
use compactor_shared::EntityKey;

const WORKER: &str = env!("CARGO_BIN_EXE_compactor-worker");

/// A small model: 200 messages (≈ 7k tokens) are over its trigger.
pub use compactor_e2e::small_model as engine;

/// Where the fleet's services are.
#[derive(Debug, Clone)]
pub struct Targets {
    pub database_url: String,
    pub redis_url: String,
    pub queue: String,
    pub llm_url: String,
}

/// A scenario's world: a PostgreSQL schema, a queue on the machine's
/// Redis, the fake LLM answering after a delay, and workstreams over
/// their trigger.
pub struct Scene {
    pub db: TestDb,
    pub redis: TestRedis,
    pub llm: FakeLlm,
    pub queue: Queue,
    pub work: Workload,
}

impl Scene {
    /// With the LLM answering after `llm_delay` and `n` workstreams.
    pub async fn start(llm_delay: Duration, n: usize) -> Scene {
        let db = TestDb::postgres().await;
        let redis = TestRedis::new();
        let llm = FakeLlm::start().await;
        llm.answer_after(llm_delay);
        let queue = redis.queue().await;
        let client = Compactor::from_parts(db.store.clone(), queue.clone(), engine()).await;
        let work = Workload::seed(&client, n).await;
        Scene {
            db,
            redis,
            llm,
            queue,
            work,
        }
    }

    /// Checks the invariants after the scenario ([`check_invariants`])
    /// and prints its report, which it returns with what the check found.
    pub async fn finish(&self, mut report: Report) -> Report {
        check_invariants(
            &self.db,
            &self.redis.url,
            &self.queue,
            &self.work,
            &self.llm,
            &mut report,
        )
        .await;
        report.print();
        report
    }

    /// The fleet pointed straight at this scene's services.
    pub fn targets(&self) -> Targets {
        Targets {
            database_url: self.db.url.clone(),
            redis_url: self.redis.url.clone(),
            queue: self.redis.config.name.as_str().to_owned(),
            llm_url: self.llm.url(),
        }
    }
}

/// Stops every worker of `fleet` with SIGTERM (all at once, as a
/// deployment would) and requires each to exit 0.
pub async fn stop_fleet(fleet: &mut [WorkerProcess]) {
    for worker in fleet.iter() {
        worker.terminate();
    }
    for worker in fleet.iter_mut() {
        assert!(worker.wait_exit(Duration::from_secs(15)).await.success());
    }
}

/// The environment of a worker process: short leases and check intervals
/// so recovery shows within a test, the small model, the fake LLM.
pub fn worker_env(t: &Targets) -> Vec<(String, String)> {
    [
        ("DATABASE_URL", t.database_url.as_str()),
        ("REDIS_URL", t.redis_url.as_str()),
        ("COMPACTOR__QUEUE__NAME", t.queue.as_str()),
        ("COMPACTOR__QUEUE__LEASE_TTL", "2s"),
        ("COMPACTOR__QUEUE__CONNECT_TIMEOUT", "2s"),
        ("COMPACTOR__QUEUE__RESPONSE_TIMEOUT", "2s"),
        ("COMPACTOR__WORKER__RENEW_INTERVAL", "500ms"),
        ("COMPACTOR__WORKER__CHECK_INTERVAL", "250ms"),
        ("COMPACTOR__WORKER__SHUTDOWN_GRACE", "5s"),
        ("COMPACTOR__WORKER__LOCK_DURATION", "60s"),
        ("COMPACTOR__WORKER__RETRY__BASE_DELAY", "200ms"),
        ("COMPACTOR__ENGINE__TRIGGER__CONTEXT_WINDOW", "8000"),
        ("COMPACTOR__ENGINE__TRIGGER__OUTPUT_RESERVE", "2000"),
        ("COMPACTOR__ENGINE__TRIGGER__SAFETY_MARGIN", "500"),
        // One summarization call must fit the 8k window (at most 17,556).
        ("COMPACTOR__ENGINE__CHUNK__MAX_CHARS", "16000"),
        ("COMPACTOR__LLM__PROVIDER", "openai"),
        ("COMPACTOR__LLM__BASE_URL", t.llm_url.as_str()),
        ("COMPACTOR__LLM__MODEL", "fake-model"),
        ("COMPACTOR__LLM__REQUEST_TIMEOUT", "1s"),
        ("COMPACTOR__LLM__MAX_RETRIES", "1"),
        ("COMPACTOR__LLM__RETRY_BASE_DELAY", "50ms"),
        ("COMPACTOR__LLM__RETRY_MAX_DELAY", "200ms"),
        ("COMPACTOR__ADMIN__ENABLED", "false"),
        ("COMPACTOR__RECONCILE__INTERVAL", "0s"),
        ("COMPACTOR__LOG__LEVEL", "error"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// One `compactor-worker` process; killed on drop if still running.
pub struct WorkerProcess {
    child: Child,
}

impl WorkerProcess {
    pub fn spawn(env: &[(String, String)]) -> WorkerProcess {
        let child = Command::new(WORKER)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start compactor-worker");
        WorkerProcess { child }
    }

    /// The process id (what the worker registry records of it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
    }

    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the worker did not exit within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The workstreams of a scenario and whose messages are whose.
pub struct Workload {
    pub keys: Vec<EntityKey>,
    /// (first message id, last message id) of each workstream, by index.
    ranges: Vec<(i64, i64)>,
}

impl Workload {
    /// `n` workstreams of 200 messages each, every one over its trigger
    /// and requested.
    pub async fn seed(client: &Compactor, n: usize) -> Workload {
        let mut keys = Vec::with_capacity(n);
        let mut ranges = Vec::with_capacity(n);
        let messages = conversation(50);
        for i in 0..n {
            let key = EntityKey::parse("chaos", &format!("w{i}")).expect("a valid key");
            let appended = client
                .append_messages(&key, messages.clone())
                .await
                .expect("append");
            let first = appended.ids.first().map_or(0, |id| id.0);
            let last = appended.ids.last().map_or(0, |id| id.0);
            let turn = client.finalize_turn(&key, None).await.expect("finalize");
            assert!(matches!(turn, TurnOutcome::Requested { .. }), "{turn:?}");
            keys.push(key);
            ranges.push((first, last));
        }
        Workload { keys, ranges }
    }

    /// The workstream (index) whose messages include `message`.
    fn owner(&self, message: i64) -> Option<usize> {
        self.ranges
            .iter()
            .position(|(first, last)| (*first..=*last).contains(&message))
    }
}

/// How many workstreams have been compacted at least once.
pub async fn compacted(db: &TestDb) -> usize {
    usize::try_from(
        db.scalar("SELECT COUNT(*) AS n FROM workstreams WHERE compactions > 0")
            .await,
    )
    .unwrap_or(0)
}

/// Waits until all `n` workstreams are compacted; the time it took.
pub async fn until_all_compacted(db: &TestDb, n: usize, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let done = compacted(db).await;
        if done == n {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "only {done} of {n} workstreams compacted within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until each of the `n` workstreams is compacted or its job is
/// dead-lettered, with nothing left waiting or running; the time it took.
/// The panic message shows the queue's state.
pub async fn until_all_compacted_or_stalled(
    db: &TestDb,
    queue: &Queue,
    n: usize,
    limit: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let done = compacted(db).await;
        let counts = queue.counts().await.expect("queue counts");
        let dead = usize::try_from(counts.dead).unwrap_or(usize::MAX);
        if done + dead == n && counts.waiting == 0 && counts.running == 0 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "only {done} of {n} workstreams compacted within {limit:?}; queue: {counts:?}; \
             dead letters: {:?}",
            queue.dead_letters(5).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until at least `n` workstreams are compacted.
pub async fn until_compacted(db: &TestDb, n: usize, limit: Duration) {
    let started = Instant::now();
    while compacted(db).await < n {
        assert!(
            started.elapsed() < limit,
            "not {n} compacted within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Figures of a scenario, printed as one report line.
#[derive(Debug, Default)]
pub struct Report {
    pub scenario: &'static str,
    pub workstreams: usize,
    pub committed: i64,
    pub failed_attempts: i64,
    pub degraded: i64,
    pub stalls: i64,
    pub llm_calls: usize,
    pub disruptions: usize,
    pub recovery: Duration,
    /// Jobs dead-lettered by the stall bound and retried as an operator would.
    pub retried_dead_letters: usize,
    pub total: Duration,
}

impl Report {
    pub fn print(&self) {
        println!(
            "CHAOS | {} | {} workstreams | {} compactions committed ({} degraded) | {} failed attempts retried | {} stalls recovered | {} stalled dead letters retried | {} LLM calls | {} disruptions | recovered in {:.1} s | {:.1} s in all",
            self.scenario,
            self.workstreams,
            self.committed,
            self.degraded,
            self.failed_attempts,
            self.stalls,
            self.retried_dead_letters,
            self.llm_calls,
            self.disruptions,
            self.recovery.as_secs_f64(),
            self.total.as_secs_f64(),
        );
    }
}

/// Checks the invariants every scenario must keep, and fills the report's
/// counts:
/// - no job lost: every workstream compacted, the queue empty, no dead
///   letter;
/// - no entity compacted twice: exactly one commit each, and no two LLM
///   calls for one workstream overlapping in time;
/// - no lease left held;
/// - no half-written commit: no message kept below the watermark (the
///   scenarios pin nothing, so a commit keeps nothing), the token count
///   matches the un-compacted rows, a summary iff a commit.
pub async fn check_invariants(
    db: &TestDb,
    redis_url: &str,
    queue: &Queue,
    work: &Workload,
    llm: &FakeLlm,
    report: &mut Report,
) {
    let n = work.keys.len() as i64;
    assert_eq!(
        db.scalar("SELECT COUNT(*) AS n FROM workstreams WHERE compactions = 1")
            .await,
        n,
        "every workstream compacted exactly once"
    );
    let counts = queue.counts().await.expect("queue counts");
    assert_eq!(
        (counts.waiting, counts.running),
        (0, 0),
        "nothing left in the queue"
    );
    assert_eq!(
        counts.dead,
        0,
        "no job dead-lettered: {:?}",
        queue.dead_letters(5).await
    );
    // Leases are released by the commit; give a last in-flight release a
    // moment (a lease whose holder died expires within the 2 s TTL).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let held = db
            .scalar("SELECT COUNT(*) AS n FROM workstreams WHERE is_compacting = true")
            .await;
        if held == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{held} entity leases still held");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let half_written = db
        .scalar(
            "SELECT COUNT(*) AS n FROM workstreams w WHERE \
             (w.compactions > 0) <> (w.compaction_summary IS NOT NULL) \
             OR EXISTS (SELECT 1 FROM messages m WHERE m.workstream_id = w.id AND m.kept) \
             OR w.uncompacted_tokens <> (SELECT COALESCE(SUM(m.token_estimate), 0) FROM messages m \
                        WHERE m.workstream_id = w.id \
                          AND (m.kept OR m.id > COALESCE(w.last_compacted_message_id, 0)))",
        )
        .await;
    assert_eq!(half_written, 0, "workstreams with a half-written commit");

    // No two LLM calls for one workstream at once.
    let calls = llm.calls();
    let mut by_owner: HashMap<usize, Vec<(Instant, Instant)>> = HashMap::new();
    for call in &calls {
        if let Some(owner) = call.first_message.and_then(|m| work.owner(m)) {
            by_owner
                .entry(owner)
                .or_default()
                .push((call.at, call.at + call.delay));
        }
    }
    for (owner, mut spans) in by_owner {
        spans.sort();
        for pair in spans.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "two runs of {} at once",
                work.keys[owner]
            );
        }
    }

    report.workstreams = work.keys.len();
    report.committed = db
        .scalar("SELECT COUNT(*) AS n FROM compaction_runs WHERE outcome = 'committed'")
        .await;
    report.failed_attempts = db
        .scalar("SELECT COUNT(*) AS n FROM compaction_runs WHERE outcome = 'failed'")
        .await;
    report.degraded = db
        .scalar("SELECT COUNT(*) AS n FROM compaction_runs WHERE degraded = true")
        .await;
    report.llm_calls = calls.len();
    report.stalls = stalls(redis_url, queue, work).await;
}

/// Expired leases the queue recovered (each job record keeps its count).
async fn stalls(redis_url: &str, queue: &Queue, work: &Workload) -> i64 {
    let Ok(client) = redis::Client::open(redis_url) else {
        return 0;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    let mut total = 0;
    for key in &work.keys {
        let stalls: Option<i64> = redis::cmd("HGET")
            .arg(queue.keys().job(key))
            .arg("stalls")
            .query_async(&mut conn)
            .await
            .unwrap_or(None);
        total += stalls.unwrap_or(0);
    }
    total
}

/// A queue config with `name`.
pub fn queue_config(name: &str) -> QueueConfig {
    QueueConfig {
        name: QueueName::parse(name).expect("a valid queue name"),
        ..QueueConfig::default()
    }
}
