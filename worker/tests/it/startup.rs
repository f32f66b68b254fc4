//! The `compactor-worker` process at start-up and in its logs: the exit
//! status says whether a restart can help (2: the configuration must
//! change; 1: it may), credentials Redis refuses stop the start instead of
//! being retried for ever, the last line names the cause of a failed
//! start, and JSON logs carry numbers (`*_ms` durations), an access log
//! and job lines with their entity and duration.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use compactor_producer::queue::QueueName;
use compactor_testkit::{free_port, redis_url, unique_name, PrivateRedis, TestDatabase};
use serde_json::Value;

pub(crate) const WORKER: &str = env!("CARGO_BIN_EXE_compactor-worker");

/// How long a process may take to do what a test waits for before the test
/// gives up (a bound against hanging, not a measurement: each of these
/// steps takes well under a second).
const PATIENCE: Duration = Duration::from_secs(60);

/// The worker binary with a clean environment: no inherited `COMPACTOR__`
/// settings or keys, its own queue, the admin API on a free port.
pub(crate) fn worker(database_url: &str, redis: &str) -> Command {
    configured(Command::new(WORKER), database_url, redis)
}

/// `command` (the worker binary, or a program that runs it) set up as
/// [`worker`] sets it up.
pub(crate) fn configured(mut command: Command, database_url: &str, redis: &str) -> Command {
    for (name, _) in std::env::vars() {
        if name.starts_with("COMPACTOR") || name.ends_with("_API_KEY") || name == "RUST_LOG" {
            command.env_remove(name);
        }
    }
    command
        .env("DATABASE_URL", database_url)
        .env("REDIS_URL", redis)
        .env("COMPACTOR__QUEUE__NAME", unique_name("startup"))
        .env("COMPACTOR__ADMIN__LISTEN", "127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// A running worker process (killed on drop), its stderr read line by line.
pub(crate) struct Running {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    pub(crate) fn start(mut command: Command) -> Running {
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads stderr until a line satisfies `wanted`; that line.
    pub(crate) fn until(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "no line {what} within {PATIENCE:?}:\n{}",
                        self.seen.join("\n")
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the worker exited before a line {what}:\n{}",
                        self.seen.join("\n")
                    )
                }
            }
        }
    }

    pub(crate) fn terminate(&self) {
        compactor_testkit::process::sigterm(&self.child);
    }

    /// Waits for the exit (bounded by [`PATIENCE`]: a start that retries
    /// for ever fails here); the status and every stderr line.
    pub(crate) fn exit(mut self) -> (ExitStatus, Vec<String>) {
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {PATIENCE:?} (retrying for ever?):\n{}",
                self.seen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader ends at end of file, after the last line.
        while let Ok(line) = self.lines.recv_timeout(PATIENCE) {
            self.seen.push(line);
        }
        (status, std::mem::take(&mut self.seen))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The keys of a queue of the test's own, deleted on drop.
pub(crate) struct QueueKeys(pub(crate) String);

impl Drop for QueueKeys {
    fn drop(&mut self) {
        if let Ok(name) = QueueName::parse(&self.0) {
            compactor_e2e::delete_queue_keys(&redis_url(), &name);
        }
    }
}

/// A configuration that cannot work until someone changes it exits 2
/// (systemd's `RestartPreventExitStatus=2`), before waiting for anything:
/// here the database and Redis do not even exist.
#[test]
fn a_missing_admin_token_or_api_key_exits_2_at_once() {
    let dead_db = format!("postgres://nobody@127.0.0.1:{}/none", free_port());
    let dead_redis = format!("redis://127.0.0.1:{}", free_port());

    let mut command = worker(&dead_db, &dead_redis);
    command
        .env(
            "COMPACTOR__ADMIN__TOKEN_ENV",
            "COMPACTOR_TEST_TOKEN_NOBODY_SET",
        )
        .env_remove("COMPACTOR_TEST_TOKEN_NOBODY_SET");
    let (status, lines) = Running::start(command).exit();
    assert_eq!(status.code(), Some(2), "{lines:#?}");
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("compactor-worker: ") && last.contains("COMPACTOR_TEST_TOKEN_NOBODY_SET"),
        "{lines:#?}"
    );

    let mut command = worker(&dead_db, &dead_redis);
    command
        .env("COMPACTOR__LLM__PROVIDER", "openai")
        .env("COMPACTOR__LLM__MODEL", "gpt-4o-mini")
        .env_remove("OPENAI_API_KEY");
    let (status, lines) = Running::start(command).exit();
    assert_eq!(status.code(), Some(2), "{lines:#?}");
    assert!(
        lines.last().unwrap().contains("OPENAI_API_KEY"),
        "names the variable: {lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("not reachable yet")),
        "no waiting for the database first: {lines:#?}"
    );
}

/// Credentials Redis refuses are not an outage: the start stops with exit
/// 2 and says so, never showing the password, instead of retrying for
/// ever. Both refusals: a wrong password (`WRONGPASS`) and none given to a
/// server that requires one (`NOAUTH`).
#[test]
fn credentials_redis_refuses_stop_the_start_with_exit_2() {
    let redis = PrivateRedis::start_with_password("the-right-one");
    for (url, case) in [
        (
            format!("redis://:wrong-secret-42@127.0.0.1:{}", redis.port),
            "wrong password",
        ),
        (format!("redis://127.0.0.1:{}", redis.port), "no password"),
    ] {
        let db = TestDatabase::sqlite();
        let (status, lines) = Running::start(worker(&db.url, &url)).exit();
        assert_eq!(status.code(), Some(2), "{case}: {lines:#?}");
        let last = lines.last().unwrap();
        assert!(
            last.contains("Redis refused the credentials"),
            "{case}: {lines:#?}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("not reachable yet")),
            "{case}: not retried as an outage: {lines:#?}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("wrong-secret-42")),
            "{case}: {lines:#?}"
        );
    }
}

/// Credentials or a database name PostgreSQL refuses (a role that does
/// not exist, SQLSTATE 28000; a database that does not exist, 3D000)
/// stop the start with exit status 2 and the cause on the last line,
/// instead of being retried for ever as an outage.
#[test]
fn credentials_or_a_database_postgres_refuses_stop_the_start_with_exit_2() {
    let redis = PrivateRedis::start();
    for (url, said) in [
        (
            "postgres://no_such_role_q7@127.0.0.1:5432/test",
            "the database refused the credentials",
        ),
        (
            "postgres://root@127.0.0.1:5432/no_such_database_q7",
            "names does not exist",
        ),
    ] {
        let (status, lines) = Running::start(worker(url, &redis.url())).exit();
        assert_eq!(status.code(), Some(2), "{url}: {lines:#?}");
        let last = lines.last().unwrap();
        assert!(last.contains(said), "{url}: {lines:#?}");
        assert!(last.contains("[database] url"), "{url}: {lines:#?}");
        assert!(
            !lines.iter().any(|l| l.contains("not reachable yet")),
            "{url}: not retried as an outage: {lines:#?}"
        );
    }
}

/// A start that never got its database, stopped by SIGTERM, ends with a
/// line naming what it waited for and why it failed (the driver's error),
/// not just "stopped".
#[test]
fn a_start_stopped_while_the_database_is_down_names_the_cause() {
    let port = free_port();
    let dead_db = format!("postgres://nobody@127.0.0.1:{port}/none");
    let mut running = Running::start(worker(&dead_db, &redis_url()));
    running.until("saying the database is not reachable", |l| {
        l.contains("database not reachable yet")
    });
    running.terminate();
    let (status, lines) = running.exit();
    assert_eq!(status.code(), Some(1), "a restart may help: {lines:#?}");
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("compactor-worker: stopped while waiting for the database")
            && last.contains(&format!("127.0.0.1:{port}")),
        "{lines:#?}"
    );
}

/// Every field named `*_ms`, anywhere in a JSON log line (span fields
/// included), is a JSON number.
fn assert_ms_fields_are_numbers(line: &str, value: &Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields {
                if name.ends_with("_ms") {
                    assert!(field.is_number(), "{name} is not a number: {line}");
                }
                assert_ms_fields_are_numbers(line, field);
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| assert_ms_fields_are_numbers(line, item)),
        _ => {}
    }
}

/// With `[log] format = "json"`: one access line per `/v1` request (method,
/// route template, status, `duration_ms`), the compaction's line with its
/// entity and `duration_ms`, and every `*_ms` field a number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_numbers_an_access_log_and_job_durations() {
    let db = TestDatabase::sqlite();
    let queue = QueueKeys(unique_name("startup_json"));
    let mut command = worker(&db.url, &redis_url());
    command
        .env("COMPACTOR__LOG__FORMAT", "json")
        .env("COMPACTOR__QUEUE__NAME", &queue.0);
    let mut running = Running::start(command);
    let ready = running.until("saying the worker is ready", |l| {
        l.contains("compactor-worker ready")
    });
    let ready: Value = serde_json::from_str(&ready).unwrap();
    let admin = format!("http://{}", ready["admin"].as_str().unwrap());

    let http = reqwest::Client::new();
    let ws = format!("{admin}/v1/workstreams/chat/log-entity-7");
    let missing = http.get(format!("{ws}/status")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let messages: Vec<Value> = (0..40)
        .map(|i| {
            serde_json::json!({
                "role": if i % 2 == 0 { "user" } else { "assistant" },
                "parts": [{"type": "text", "text": format!("step {i}: check src/lib.rs line {i}, error E0{i:03}")}],
            })
        })
        .collect();
    let appended = http
        .post(format!("{ws}/messages"))
        .json(&serde_json::json!({ "messages": messages }))
        .send()
        .await
        .unwrap();
    assert_eq!(appended.status(), 200, "{:?}", appended.text().await);
    let compact = http.post(format!("{ws}/compact")).send().await.unwrap();
    assert_eq!(compact.status(), 202);
    running.until("about the compaction's end", |l| {
        l.contains("\"compacted\"") || l.contains("skipped: ")
    });
    running.terminate();
    let (status, lines) = running.exit();
    assert_eq!(status.code(), Some(0), "{lines:#?}");

    let json: Vec<(String, Value)> = lines
        .iter()
        .map(|l| {
            (
                l.clone(),
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")),
            )
        })
        .collect();
    for (line, value) in &json {
        assert_ms_fields_are_numbers(line, value);
    }
    let access: Vec<&Value> = json
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["message"] == "admin request" && v["level"] == "INFO")
        .collect();
    let of = |route: &str, method: &str| -> &Value {
        access
            .iter()
            .find(|v| v["route"] == route && v["method"] == method)
            .unwrap_or_else(|| panic!("no access line for {method} {route}: {lines:#?}"))
    };
    let status_line = of("/v1/workstreams/{domain}/{entity}/status", "GET");
    assert_eq!(status_line["status"], 404);
    assert!(status_line["duration_ms"].is_u64(), "{status_line}");
    assert_eq!(
        of("/v1/workstreams/{domain}/{entity}/messages", "POST")["status"],
        200
    );
    assert_eq!(
        of("/v1/workstreams/{domain}/{entity}/compact", "POST")["status"],
        202
    );
    for line in &access {
        let text = line.to_string();
        assert!(
            !text.contains("log-entity-7"),
            "the template, not the path: {text}"
        );
        assert!(!text.contains("E0001"), "no bodies: {text}");
    }

    let (line, job) = json
        .iter()
        .find(|(_, v)| {
            v["message"] == "compacted"
                || v["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("skipped: "))
        })
        .unwrap();
    assert!(job["duration_ms"].is_u64(), "{line}");
    assert_eq!(job["span"]["entity_id"], "log-entity-7", "{line}");
    assert_eq!(job["span"]["domain"], "chat", "{line}");
}
