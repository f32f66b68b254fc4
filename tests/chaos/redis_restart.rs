//! Redis restarts mid-run: a private `redis-server` with AOF (fsync on
//! every write, as production's `everysec` at worst loses a second) is
//! killed and started again on the same port and data directory. Workers
//! and producers reconnect; a request made while Redis is down fails
//! loudly, never with a false success; no job is lost.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use compactor_e2e::db::TestDb;
use compactor_e2e::{unique_name, FakeLlm};
use compactor_producer::client::Compactor;
use compactor_producer::queue::{Queue, Trigger};
use compactor_shared::EntityKey;

use crate::harness::{
    check_invariants, engine, queue_config, until_all_compacted, until_compacted, worker_env,
    Report, Targets, WorkerProcess, Workload,
};

/// A `redis-server` with AOF in a directory of its own (removed on drop).
struct PersistentRedis {
    port: u16,
    dir: std::path::PathBuf,
    child: Option<Child>,
}

impl PersistentRedis {
    fn start() -> PersistentRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(unique_name("chaos-redis"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut redis = PersistentRedis {
            port,
            dir,
            child: None,
        };
        redis.up();
        redis
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts (again) on the same port and directory.
    fn up(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .args(["--dir", self.dir.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child = Some(child);
    }

    /// SIGKILL: no goodbye, no final fsync.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PersistentRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_mid_run_loses_nothing() {
    let _serial = crate::SERIAL.lock().await;
    let db = TestDb::postgres().await;
    let mut redis = PersistentRedis::start();
    let llm = FakeLlm::start().await;
    llm.answer_after(Duration::from_millis(50));
    let name = unique_name("chaos");
    let queue = Queue::connect(&redis.url(), queue_config(&name))
        .await
        .unwrap();
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), engine()).await;
    let n = 100;
    let work = Workload::seed(&client, n).await;
    let env = worker_env(&Targets {
        database_url: db.url.clone(),
        redis_url: redis.url(),
        queue: name.clone(),
        llm_url: llm.url(),
    });
    let mut fleet: Vec<WorkerProcess> = (0..3).map(|_| WorkerProcess::spawn(&env)).collect();
    let started = Instant::now();
    until_compacted(&db, 20, Duration::from_secs(60)).await;

    redis.kill();
    // A producer's request while Redis is down fails; it does not pretend.
    let late = EntityKey::parse("chaos", "asked-while-down").unwrap();
    assert!(
        queue
            .request_compaction(&late, Trigger::Auto)
            .await
            .is_err(),
        "no false success while Redis is down"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    redis.up();
    let restarted = Instant::now();
    // The producer reconnects by itself.
    let deadline = Instant::now() + Duration::from_secs(15);
    while queue.counts().await.is_err() {
        assert!(Instant::now() < deadline, "the producer never reconnected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until_all_compacted(&db, n, Duration::from_secs(90)).await;
    let recovery = restarted.elapsed();
    for worker in &fleet {
        worker.terminate();
    }
    for worker in &mut fleet {
        assert!(worker.wait_exit(Duration::from_secs(15)).await.success());
    }
    let mut report = Report {
        scenario: "Redis killed and restarted (AOF) mid-run",
        disruptions: 1,
        recovery,
        total: started.elapsed(),
        ..Report::default()
    };
    check_invariants(&db, &redis.url(), &queue, &work, &llm, &mut report).await;
    report.print();
}
