//! `compactor queue jobs|job|cancel|workers`, run as a process against the
//! real Redis and a SQLite database of the test's own: jobs listed by state
//! a page at a time (JSON and the table for people), one job by id, a
//! running job cancelled (its lease revoked, a dead letter of reason
//! `cancelled`) and a waiting one requeued, the workers with their running
//! jobs; and the exit codes (1 for an unknown or finished job, 2 for a bad
//! cursor).

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_producer::queue::{
    ClaimOutcome, ClaimedJob, EnqueueOutcome, Queue, QueueConfig, QueueName, Trigger,
    WorkerRegistration,
};
use compactor_shared::EntityKey;
use compactor_testkit::{redis_url, unique_name};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_compactor");

/// A queue and a database of the test's own; the queue's keys go on drop.
struct World {
    db: TestDb,
    queue: QueueName,
}

impl World {
    async fn new() -> World {
        World {
            db: TestDb::new(Backend::Sqlite).await,
            queue: QueueName::parse(&unique_name("qcli")).unwrap(),
        }
    }

    async fn queue(&self) -> Queue {
        let config = QueueConfig {
            name: self.queue.clone(),
            ..QueueConfig::default()
        };
        Queue::connect(&redis_url(), config).await.unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .env("DATABASE_URL", &self.db.url)
            .env("REDIS_URL", redis_url())
            .env("COMPACTOR__QUEUE__NAME", self.queue.as_str())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `compactor --json <args>`, which must succeed: its answer.
    fn ok(&self, args: &[&str]) -> Value {
        let out = self.run(&[&["--json"], args].concat());
        assert!(
            out.status.success(),
            "{args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `compactor <args>` for people, which must succeed: its stdout.
    fn text(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {:?}", out.status);
        String::from_utf8(out.stdout).unwrap()
    }

    /// `compactor --json <args>`, which must fail: its exit code and error
    /// code.
    fn fails(&self, args: &[&str]) -> (i32, String) {
        let out = self.run(&[&["--json"], args].concat());
        let err: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            out.status.code().unwrap(),
            err["error"]["code"].as_str().unwrap().to_owned(),
        )
    }
}

impl Drop for World {
    fn drop(&mut self) {
        compactor_e2e::delete_queue_keys(&redis_url(), &self.queue);
    }
}

async fn claim(q: &Queue, worker: &str) -> ClaimedJob {
    match q.claim(worker).await.unwrap() {
        ClaimOutcome::Claimed(job) => job,
        other => panic!("expected a job, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_listed_looked_up_cancelled_and_workers_shown() {
    let w = World::new().await;
    let q = w.queue().await;
    let mut ids = Vec::new();
    for e in ["a", "b", "c", "d"] {
        let k = EntityKey::parse("chat", e).unwrap();
        let EnqueueOutcome::Added { job_id } =
            q.request_compaction(&k, Trigger::Auto).await.unwrap()
        else {
            panic!("added")
        };
        ids.push(job_id);
    }
    let registration = WorkerRegistration {
        id: "cli-w1".to_owned(),
        name: "cli".to_owned(),
        host: "box".to_owned(),
        pid: 42,
        version: "9.9.9".to_owned(),
        concurrency: 4,
        started_at_ms: 0,
    };
    q.heartbeat(&registration, Duration::from_secs(60))
        .await
        .unwrap();
    let running = claim(&q, "cli-w1").await;
    assert_eq!(running.job_id, ids[0]);

    // Pages of waiting jobs, following the cursor.
    let first = w.ok(&["queue", "jobs", "--limit", "2"]);
    let page: Vec<u64> = first["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_u64().unwrap())
        .collect();
    assert_eq!(page, ids[1..3]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = w.ok(&["queue", "jobs", "--limit", "2", "--cursor", cursor]);
    assert_eq!(second["jobs"][0]["job_id"], ids[3]);
    assert_eq!(second["next_cursor"], Value::Null);
    // Running, with the worker holding it; the table for people.
    let run = w.ok(&["queue", "jobs", "--state", "running"]);
    assert_eq!(run["jobs"][0]["worker"], "cli-w1");
    let table = w.text(&["queue", "jobs", "--state", "running"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("JOB") && lines[0].contains("WORKER"),
        "{table}"
    );
    assert!(
        lines[1].contains("chat/a") && lines[1].contains("cli-w1"),
        "{table}"
    );

    // One job by id.
    let job = w.ok(&["queue", "job", &ids[2].to_string()]);
    assert_eq!(
        (job["state"].as_str(), job["entity_id"].as_str()),
        (Some("waiting"), Some("c"))
    );
    assert!(w
        .text(&["queue", "job", &ids[0].to_string()])
        .contains("worker     cli-w1"));
    assert_eq!(
        w.fails(&["queue", "job", "999999"]),
        (1, "unknown_job".to_owned())
    );

    // The workers, with the job it runs.
    let workers = w.ok(&["queue", "workers"]);
    assert_eq!(workers[0]["id"], "cli-w1");
    assert_eq!(workers[0]["running_jobs"], 1);
    assert_eq!(workers[0]["gone"], false);
    assert!(w.text(&["queue", "workers"]).contains("live"));

    // The running job cancelled: its lease is revoked, it is a dead letter.
    let cancelled = w.ok(&["queue", "cancel", &ids[0].to_string()]);
    assert_eq!(cancelled["was"], "running");
    assert_eq!(cancelled["then"], "dead");
    assert!(!q.renew(&running).await.unwrap());
    let dead = w.ok(&["queue", "jobs", "--state", "dead"]);
    assert_eq!(dead["jobs"][0]["last_error"], "cancelled");
    assert_eq!(
        w.fails(&["queue", "cancel", &ids[0].to_string()]),
        (1, "job_finished".to_owned())
    );
    // A waiting one requeued stays in line.
    let requeued = w.ok(&["queue", "cancel", "--requeue", &ids[3].to_string()]);
    assert_eq!(
        (requeued["was"].as_str(), requeued["then"].as_str()),
        (Some("waiting"), Some("requeue"))
    );
    assert_eq!(
        w.ok(&["queue", "job", &ids[3].to_string()])["state"],
        "waiting"
    );

    assert_eq!(
        w.fails(&["queue", "jobs", "--cursor", "not a cursor"]),
        (2, "invalid_query".to_owned())
    );
}
