//! Helpers of the end-to-end tests (`tests/tests/*.rs`): a database of its
//! own per test ([`db::TestDb`], PostgreSQL schema or SQLite file), a queue
//! of its own on the machine's Redis ([`TestRedis`]), an LLM faked at the
//! HTTP boundary ([`FakeLlm`]), a worker started through the same
//! `startup::Application::build` as the binary ([`spawn_worker`],
//! [`start_worker`] when the test talks to its admin API), a `redis-server`
//! of its own to stop ([`PrivateRedis`]), a Redis Cluster of three
//! primaries ([`cluster::RedisCluster`]), and generated conversations.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)] // test support: a panic is a failed test

pub mod bench;
pub mod cluster;
#[path = "../../producer/tests/support/db.rs"]
pub mod db;
pub mod llm;
pub mod proxy;
pub mod quality;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use compactor_producer::client::IncomingMessage;
use compactor_producer::queue::{Queue, QueueConfig, QueueName};
use compactor_shared::{EntityKey, Part, Role};
use compactor_worker::settings::Settings;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use llm::{FakeLlm, Fault};

/// The machine's Redis (or `REDIS_URL`).
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A name no other test (or run) uses.
pub fn unique_name(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

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
        let Ok(client) = redis::Client::open(url) else {
            continue;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
            continue;
        };
        // The prefix is `{cq:<validated name>}:`: no glob characters.
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query(&mut conn)
            .unwrap_or_default();
        if !keys.is_empty() {
            let _: Result<(), _> = redis::cmd("DEL").arg(keys).query(&mut conn);
        }
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
    let task = tokio::spawn(app.run());
    Worker {
        shutdown,
        task,
        admin,
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

    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the worker stops")
            .expect("the worker task does not panic")
            .expect("the worker stops cleanly");
    }
}

/// A private `redis-server` on a free loopback port, for tests that stop
/// Redis under a running worker (killed on drop).
pub struct PrivateRedis {
    pub port: u16,
    child: Option<std::process::Child>,
}

impl PrivateRedis {
    /// On a free port.
    pub fn start() -> PrivateRedis {
        PrivateRedis::start_on(PrivateRedis::free_port())
    }

    /// A loopback port free now (for a test that points a worker at Redis
    /// before starting it there).
    pub fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url_for(port: u16) -> String {
        format!("redis://127.0.0.1:{port}")
    }

    /// On `port` (e.g. the port of one that was killed: Redis "coming
    /// back").
    pub fn start_on(port: u16) -> PrivateRedis {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-server must be installed for this test");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        PrivateRedis {
            port,
            child: Some(child),
        }
    }

    pub fn url(&self) -> String {
        PrivateRedis::url_for(self.port)
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
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

/// Polls `check` every 20 ms until it is true; panics after `limit`.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {limit:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn key(entity: &str) -> EntityKey {
    EntityKey::parse("chat", entity).unwrap()
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
        out.push(IncomingMessage {
            role: Role::Assistant,
            parts: vec![Part::tool_call(
                call_id.clone(),
                "bash",
                serde_json::json!({"cmd": format!("cargo test test_case_{t}")}),
            )],
            pinned: false,
            client_id: None,
        });
        out.push(IncomingMessage {
            role: Role::Tool,
            parts: vec![Part::tool_result(
                call_id,
                "bash",
                format!("running 1 test\ntest test_case_{t} ... FAILED\nassertion failed: left == right (turn {t})"),
            )],
            pinned: false,
            client_id: None,
        });
    }
    out
}
