//! Helpers of the end-to-end tests (`tests/tests/it/`), built on
//! `compactor-testkit` (Redis, databases, the fake LLM, ports, `eventually`,
//! re-exported here) with what needs the compactor crates: a database of
//! its own per test holding a `Store` ([`db::TestDb`]), a queue of its own
//! on the machine's Redis ([`TestRedis`]), a worker started through the
//! same `startup::Application::build` as the binary ([`spawn_worker`],
//! [`start_worker`] when the test talks to its admin API), a Redis Cluster
//! of three primaries ([`cluster::RedisCluster`]), generated
//! conversations, and the steps several test files share (a compaction
//! requested, [`request_compaction`]; a lease taken by hand, [`take_lease`];
//! a chat request waiting through a compaction, [`wait_through_compaction`]).

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test support: a panic is a failed test

pub mod bench;
pub mod cluster;
pub mod console;
#[path = "../../producer/tests/it/support/db.rs"]
pub mod db;
pub mod proxy;
pub mod quality;
pub mod webdriver;
pub mod webhook;

use std::net::SocketAddr;
use std::time::Duration;

use compactor_producer::client::{Compactor, IncomingMessage, Readiness, TurnOutcome};
use compactor_producer::events::{CompactionEvent, EventOutcome};
use compactor_producer::queue::{EnqueueOutcome, Queue, QueueConfig, QueueName};
use compactor_shared::config::EngineConfig;
use compactor_shared::context::ContextMessage;
use compactor_shared::trigger::TriggerPolicy;
use compactor_shared::{EntityKey, Part, Role};
use compactor_worker::settings::Settings;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use compactor_testkit::llm;
pub use compactor_testkit::{
    eventually, eventually_some, redis_url, unique_name, within, FakeLlm, Fault, PrivateRedis,
};

/// A queue of its own on the machine's Redis (or on a Redis Cluster); its
/// keys are deleted on drop.
pub struct TestRedis {
    /// One server's URL, or a cluster's comma-separated seed nodes.
    pub url: String,
    /// Whether `url` is a Redis Cluster (`[redis] cluster`).
    pub cluster: bool,
    pub config: QueueConfig,
}

impl TestRedis {
    pub fn new() -> TestRedis {
        TestRedis {
            url: redis_url(),
            cluster: false,
            config: QueueConfig {
                name: QueueName::parse(&unique_name("e2e")).unwrap(),
                ..QueueConfig::default()
            },
        }
    }

    /// A queue of its own on `cluster`, in a slot that node `node` serves.
    pub fn on_cluster(cluster: &cluster::RedisCluster, node: usize) -> TestRedis {
        TestRedis {
            url: cluster.url(),
            cluster: true,
            config: QueueConfig {
                name: cluster.queue_name_on(node, "e2e"),
                ..QueueConfig::default()
            },
        }
    }

    /// `[redis]` for this queue's Redis.
    pub fn settings(&self) -> compactor_producer::settings::RedisSettings {
        compactor_producer::settings::RedisSettings {
            url: compactor_producer::settings::ConnectionUrl::new(self.url.clone()),
            cluster: self.cluster,
        }
    }

    pub async fn queue(&self) -> Queue {
        Queue::connect_with(&self.settings(), self.config.clone())
            .await
            .unwrap()
    }

    /// The entries of the queue's event stream, oldest first: `(event id,
    /// type, JSON)`.
    pub async fn event_stream(&self) -> Vec<(String, String, String)> {
        let queue = self.queue().await;
        let mut conn = compactor_testkit::redis::connection(&self.url).await;
        let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
            .arg(queue.keys().events_stream())
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap();
        entries
            .into_iter()
            .map(|(_, fields)| {
                let field = |name: &str| {
                    fields
                        .chunks(2)
                        .find(|pair| pair[0] == name)
                        .map(|pair| pair[1].clone())
                        .unwrap_or_else(|| panic!("field {name} in {fields:?}"))
                };
                (field("id"), field("type"), field("event"))
            })
            .collect()
    }
}

impl Default for TestRedis {
    fn default() -> Self {
        TestRedis::new()
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        delete_queue_keys(&self.url, &self.config.name);
    }
}

/// Deletes every key of queue `name` from the Redis at `urls` (one URL, or
/// a cluster's nodes: the keys share one slot, so they are all on one of
/// them, which each is asked).
pub fn delete_queue_keys(urls: &str, name: &QueueName) {
    let prefix = compactor_producer::queue::Keys::new(name)
        .prefix()
        .to_owned();
    for url in compactor_producer::store::split_url_list(urls) {
        compactor_testkit::redis::delete_prefix(url, &prefix);
    }
}

/// Settings for a worker on `db_url`, `redis`'s queue and the fake LLM at
/// `llm_url` (extractive when `None`), with timings short enough for tests.
pub fn settings(db_url: &str, redis: &TestRedis, llm_url: Option<&str>) -> Settings {
    let mut s = Settings::default();
    s.database.url = compactor_producer::settings::ConnectionUrl::new(db_url);
    s.redis = redis.settings();
    s.queue = redis.config.clone();
    s.queue.lease_ttl = Duration::from_secs(5);
    s.worker.renew_interval = Duration::from_millis(500);
    s.worker.check_interval = Duration::from_millis(500);
    s.worker.shutdown_grace = Duration::from_secs(5);
    s.worker.retry.base_delay = Duration::from_millis(100);
    // Tests run in parallel: each admin API on a port of its own.
    s.admin.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    // The tests' workstreams are in domain `chat` (`key`): labelled as
    // itself in metrics, every other domain as `other`.
    s.metrics.domains = vec!["chat".to_owned()];
    if let Some(url) = llm_url {
        s.llm.provider = compactor_worker::llm::Provider::OpenAi;
        s.llm.base_url = Some(url.to_owned());
        s.llm.model = "fake-model".to_owned();
        s.llm.request_timeout = Duration::from_secs(5);
        s.llm.max_retries = 2;
        s.llm.retry_base_delay = Duration::from_millis(20);
        s.llm.retry_max_delay = Duration::from_millis(200);
    }
    s
}

/// A worker running in this process; stopped (gracefully) by [`Worker::stop`].
pub struct Worker {
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), compactor_worker::startup::StartupError>>,
    admin: Option<SocketAddr>,
    probes: Option<SocketAddr>,
    proxy: Option<SocketAddr>,
}

/// Starts a worker through `startup::run`, as `compactor-worker` does
/// (connecting happens in the background).
pub fn spawn_worker(settings: Settings) -> Worker {
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(compactor_worker::startup::run(settings, shutdown.clone()));
    Worker {
        shutdown,
        task,
        admin: None,
        probes: None,
        proxy: None,
    }
}

/// Builds a worker (connected, schema ready, admin API bound) and runs it
/// in the background: its admin API answers as soon as this returns.
pub async fn start_worker(settings: Settings) -> Worker {
    let shutdown = CancellationToken::new();
    let app = compactor_worker::startup::Application::build(settings, shutdown.clone())
        .await
        .expect("the worker starts");
    let admin = app.admin_addr();
    let probes = app.probe_addr();
    let proxy = app.proxy_addr();
    let task = tokio::spawn(app.run());
    Worker {
        shutdown,
        task,
        admin,
        probes,
        proxy,
    }
}

impl Worker {
    /// `http://127.0.0.1:<port>` of the admin API (of a [`start_worker`]).
    pub fn admin_url(&self) -> String {
        let addr = self
            .admin
            .expect("a worker from start_worker, admin enabled");
        format!("http://{addr}")
    }

    /// `http://127.0.0.1:<port>` of the probe listener
    /// (`admin.health_listen`, of a [`start_worker`]).
    pub fn probe_url(&self) -> String {
        let addr = self
            .probes
            .expect("a worker from start_worker, admin.health_listen set");
        format!("http://{addr}")
    }

    /// `http://127.0.0.1:<port>` of the drop-in proxy (`proxy.listen`, of
    /// a [`start_worker`]).
    pub fn proxy_url(&self) -> String {
        let addr = self
            .proxy
            .expect("a worker from start_worker, proxy.listen set");
        format!("http://{addr}")
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the worker stops")
            .expect("the worker task does not panic")
            .expect("the worker stops cleanly");
    }
}

/// Writes a waiting job with `payload` for `member` straight into the
/// queue's keys — as a buggy producer in another language might — and
/// announces it, bypassing every check of [`Queue::request_compaction`].
pub async fn write_raw_job(
    conn: &mut redis::aio::MultiplexedConnection,
    keys: &compactor_producer::queue::Keys,
    member: &str,
    payload: &str,
) {
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg(keys.job_of_member(member))
        .arg("state")
        .arg("waiting")
        .arg("job_id")
        .arg(1)
        .arg("payload")
        .arg(payload)
        .arg("attempts")
        .arg(0)
        .arg("enqueued_at")
        .arg(0)
        .cmd("ZADD")
        .arg(keys.waiting())
        .arg(0)
        .arg(member)
        .cmd("PUBLISH")
        .arg(keys.wake_channel())
        .arg("1")
        .query_async(conn)
        .await
        .expect("the raw job is written");
}

/// The engine for a model with a 20k-token window (trigger at 10.5k
/// tokens): a few hundred messages of [`conversation`] are over it.
pub fn small_window() -> EngineConfig {
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

/// The engine for a small model (an 8k window, trigger at 5.5k tokens):
/// 200 messages (≈ 7k tokens, `conversation(50)`) are over it.
pub fn small_model() -> EngineConfig {
    EngineConfig {
        trigger: TriggerPolicy::Threshold {
            context_window: 8_000,
            ratio: 0.7,
            output_reserve: 2_000,
            safety_margin: 500,
        },
        ..EngineConfig::default()
    }
}

/// A client on `db` and `redis`'s queue, with the default engine.
pub async fn client(db: &db::TestDb, redis: &TestRedis) -> Compactor {
    Compactor::from_parts(
        db.store.clone(),
        redis.queue().await,
        EngineConfig::default(),
    )
    .await
}

/// The event a worker announces when job `job_id` of `domain:entity_id`
/// ends with `outcome` (its first attempt, 10 messages folded).
pub fn compaction_event(
    domain: &str,
    entity_id: &str,
    outcome: EventOutcome,
    job_id: u64,
) -> CompactionEvent {
    CompactionEvent {
        domain: domain.into(),
        entity_id: entity_id.into(),
        outcome,
        trigger: "auto".into(),
        job_id,
        attempt: 1,
        tokens_before: 1_000,
        tokens_after: 100,
        messages_compacted: 10,
        chunks: 1,
        rollups: 0,
        evidence_kept: 0,
        evidence_dropped: 0,
        degraded: false,
        error: None,
    }
}

pub fn key(entity: &str) -> EntityKey {
    EntityKey::parse("chat", entity).unwrap()
}

/// The job a turn that ended over the trigger requested: anything but a
/// new job fails the test.
pub fn requested_job(turn: &TurnOutcome) -> u64 {
    match turn {
        TurnOutcome::Requested {
            enqueue: EnqueueOutcome::Added { job_id },
            ..
        } => *job_id,
        other => panic!("over the trigger: {other:?}"),
    }
}

/// Stores a long conversation (`conversation(200)`, over the trigger of
/// [`small_window`]) in `k` and ends the turn: a compaction is requested.
/// Returns its job id.
pub async fn request_compaction(c: &Compactor, k: &EntityKey) -> u64 {
    c.append_messages(k, conversation(200)).await.unwrap();
    requested_job(&c.finalize_turn(k, None).await.unwrap())
}

/// Waits (at most `limit`) until a compaction holds `k`'s lease: from
/// then on a waiter finds it running.
pub async fn until_leased(c: &Compactor, k: &EntityKey, limit: Duration) {
    eventually("the compaction holds the lease", limit, || async {
        c.status(k).await.unwrap().lease.is_some()
    })
    .await;
}

/// Waits as a chat request does (at most 30 s) for the compaction that
/// holds `k` to end, once one holds it (see [`until_leased`]): what it
/// committed, and how long the chat request waited.
pub async fn wait_through_compaction(
    c: &Compactor,
    k: &EntityKey,
    limit: Duration,
) -> (CompactionEvent, Duration) {
    until_leased(c, k, limit).await;
    let ready = c
        .wait_until_ready(k, Duration::from_secs(30))
        .await
        .unwrap();
    let Readiness::Compacted { event, waited } = ready else {
        panic!("{ready:?}")
    };
    (event, waited)
}

/// Takes `k`'s entity lease for `owner` by hand, as an attempt that then
/// stalls, dies or is handed back holds it: the workstream's id (to
/// release or take it again) and what taking it did.
pub async fn take_lease(
    db: &db::TestDb,
    k: &EntityKey,
    owner: &str,
    ttl: Duration,
) -> (i64, compactor_producer::store::LeaseTaken) {
    let ws = db.store.workstream(k).await.unwrap().unwrap();
    let taken = db.store.take_lease(ws.id, owner, ttl).await.unwrap();
    (ws.id, taken)
}

/// A gate in front of a compaction's fenced commit: the attempt whose
/// `before_commit` hook is [`CommitGate::hook`] stops right before it
/// commits, says so on `at_commit`, and goes on when `go` is notified.
pub struct CommitGate {
    pub at_commit: std::sync::Arc<tokio::sync::Notify>,
    pub go: std::sync::Arc<tokio::sync::Notify>,
}

impl CommitGate {
    pub fn new() -> CommitGate {
        CommitGate {
            at_commit: std::sync::Arc::new(tokio::sync::Notify::new()),
            go: std::sync::Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// The `before_commit` hook that stops at this gate.
    pub fn hook(&self) -> compactor_worker::jobs::compact::BeforeCommit {
        let (at_commit, go) = (self.at_commit.clone(), self.go.clone());
        std::sync::Arc::new(move |_key| {
            let (at_commit, go) = (at_commit.clone(), go.clone());
            Box::pin(async move {
                at_commit.notify_one();
                go.notified().await;
            })
        })
    }
}

impl Default for CommitGate {
    fn default() -> CommitGate {
        CommitGate::new()
    }
}

/// Two runs of one compaction race past the fenced commit: run A stops
/// right before its commit, its lease expires (as a paused or partitioned
/// worker's would), and run B takes the workstream over and commits.
/// [`FenceRace::start`] returns with B committed and A still waiting;
/// [`FenceRace::finish`] lets A go and returns its result.
pub struct FenceRace {
    a: JoinHandle<Result<(), compactor_worker::runtime::JobError>>,
    go: std::sync::Arc<tokio::sync::Notify>,
    /// Run B's handler (to run the job again).
    pub b: compactor_worker::jobs::CompactHandler,
}

impl FenceRace {
    /// Races A and B over `key` on `db` (extractive summaries, 30 s lease).
    pub async fn start(
        db: &db::TestDb,
        queue: Queue,
        key: &EntityKey,
        engine: EngineConfig,
    ) -> FenceRace {
        use compactor_producer::queue::Trigger;
        use compactor_worker::jobs::{CompactHandler, CompactSettings, Hooks, Summarizer};
        use compactor_worker::runtime::{Job, JobHandler};
        let gate = CommitGate::new();
        let settings = CompactSettings {
            lease_ttl: Duration::from_secs(30),
            ..CompactSettings::new(engine)
        };
        let a = CompactHandler::new(
            db.store.clone(),
            queue.clone(),
            Summarizer::Extractive,
            settings.clone(),
        )
        .with_hooks(Hooks {
            before_commit: Some(gate.hook()),
        });
        let b = CompactHandler::new(db.store.clone(), queue, Summarizer::Extractive, settings);
        let a = {
            let k = key.clone();
            tokio::spawn(async move { a.run(Job::new(k, Trigger::Auto, 1, 1, 2, "lease-a")).await })
        };
        gate.at_commit.notified().await;
        db.exec("UPDATE workstreams SET lease_deadline_ms = 1")
            .await;
        b.run(Job::new(key.clone(), Trigger::Auto, 2, 1, 2, "lease-b"))
            .await
            .expect("run B commits");
        FenceRace { a, go: gate.go, b }
    }

    /// Lets run A go on to its commit; its result.
    pub async fn finish(
        self,
    ) -> (
        Result<(), compactor_worker::runtime::JobError>,
        compactor_worker::jobs::CompactHandler,
    ) {
        self.go.notify_one();
        (self.a.await.expect("run A does not panic"), self.b)
    }
}

/// Whether `task` is still running after `within`: a waiter that must be
/// blocked (on a lease held, a job running) has not returned.
pub async fn still_waiting<T>(task: &mut JoinHandle<T>, within: Duration) -> bool {
    tokio::time::timeout(within, task).await.is_err()
}

/// The text parts of `message` joined: what a summary preamble says.
pub fn text_of(message: &ContextMessage) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// `n` plain-text messages, user and assistant in turn, message `i`
/// saying `text(i)`: a chat without tool pairs, cut anywhere.
pub fn chat(n: usize, text: impl Fn(usize) -> String) -> Vec<IncomingMessage> {
    (0..n)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            IncomingMessage::text(role, text(i))
        })
        .collect()
}

/// A coding conversation of `turns` turns, 4 messages each: the user asks,
/// the assistant answers, runs a tool, and the tool's result comes back.
/// Every turn ends on a complete tool pair, so the default cut (keep the
/// last 6 messages) is a valid one.
pub fn conversation(turns: usize) -> Vec<IncomingMessage> {
    let mut out = Vec::with_capacity(turns * 4);
    for t in 0..turns {
        out.push(IncomingMessage::text(
            Role::User,
            format!(
                "Turn {t}: please look at src/module_{t}.rs and explain why the test \
                 `test_case_{t}` fails with error E{:04}; we need it fixed before the release.",
                t % 10_000
            ),
        ));
        out.push(IncomingMessage::text(
            Role::Assistant,
            format!(
                "Looking at src/module_{t}.rs: the failure comes from an off-by-one in the \
                 loop bound; I will run the test to confirm before changing anything (turn {t})."
            ),
        ));
        let call_id = format!("call-{t}");
        out.push(IncomingMessage::new(
            Role::Assistant,
            vec![Part::tool_call(
                call_id.clone(),
                "bash",
                serde_json::json!({"cmd": format!("cargo test test_case_{t}")}),
            )],
        ));
        out.push(IncomingMessage::new(Role::Tool, vec![Part::tool_result(
                call_id,
                "bash",
                format!("running 1 test\ntest test_case_{t} ... FAILED\nassertion failed: left == right (turn {t})"),
            )]));
    }
    out
}
