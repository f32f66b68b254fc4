//! The `compactor` CLI, run as a process against the real Redis and a real
//! database (a SQLite file or a PostgreSQL schema of the test's own), every
//! command with `--json` so its answer can be checked, and the exit codes
//! scripts rely on (0 done, 1 "no", 2 bad usage, 3 unavailable).

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_producer::queue::{
    ClaimOutcome, FailAction, Keys, Queue, QueueConfig, QueueName, Trigger,
};
use compactor_shared::EntityKey;
use compactor_testkit::{redis_url, unique_name};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_compactor");

/// A database and a queue of the test's own, and the CLI pointed at both.
struct World {
    db: TestDb,
    queue: String,
}

impl World {
    async fn new(backend: Backend) -> World {
        World::on(TestDb::new(backend).await)
    }

    fn on(db: TestDb) -> World {
        World {
            db,
            queue: unique_name("cli"),
        }
    }

    fn queue_config(&self) -> QueueConfig {
        QueueConfig {
            name: QueueName::parse(&self.queue).unwrap(),
            ..QueueConfig::default()
        }
    }

    async fn queue(&self) -> Queue {
        Queue::connect(&redis_url(), self.queue_config())
            .await
            .unwrap()
    }

    /// Runs `compactor --json <args>`, feeding `stdin`.
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.run_env(args, stdin, &[])
    }

    /// [`World::run`] with more environment variables (which win over the
    /// world's own).
    fn run_env(&self, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
        let mut child = Command::new(BIN)
            .arg("--json")
            .args(args)
            .env("DATABASE_URL", &self.db.url)
            .env("REDIS_URL", redis_url())
            .env("COMPACTOR__QUEUE__NAME", &self.queue)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        drop(child.stdin.take());
        child.wait_with_output().unwrap()
    }

    /// Runs `compactor <args>` without `--json` (the text for people),
    /// which must succeed; its stdout.
    fn text(&self, args: &[&str]) -> String {
        let out = Command::new(BIN)
            .args(args)
            .env("DATABASE_URL", &self.db.url)
            .env("REDIS_URL", redis_url())
            .env("COMPACTOR__QUEUE__NAME", &self.queue)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs a command that must succeed; its JSON answer.
    fn ok(&self, args: &[&str], stdin: Option<&str>) -> Value {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "{args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Ok(name) = QueueName::parse(&self.queue) {
            compactor_e2e::delete_queue_keys(&redis_url(), &name);
        }
    }
}

const LINES: &str = r#"{"role": "user", "parts": [{"type": "text", "text": "Why does src/main.rs panic?"}]}

{"role": "assistant", "parts": [{"type": "tool_call", "call_id": "c1", "tool_name": "bash", "input": {"cmd": "cargo run"}}]}
{"role": "tool", "parts": [{"type": "tool_result", "call_id": "c1", "tool_name": "bash", "output": "thread main panicked"}]}
"#;

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_reports_then_applies_then_is_current() {
    let w = World::on(TestDb::unmigrated(Backend::Sqlite).await);
    let out = w.run(&["migrate", "--check"], None);
    assert_eq!(code(&out), 1, "pending migrations: exit 1");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "behind");
    assert_eq!(
        report["pending"].as_array().unwrap().len(),
        compactor_migrations::migration_names().len()
    );
    let applied = w.ok(&["migrate"], None);
    assert_eq!(
        applied["applied"].as_array().unwrap().len(),
        compactor_migrations::migration_names().len()
    );
    assert_eq!(w.ok(&["migrate", "--check"], None)["status"], "current");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_reads_json_lines_and_refuses_bad_ones_by_line() {
    let w = World::new(Backend::Postgres).await;
    let appended = w.ok(&["append", "chat", "c1"], Some(LINES));
    assert_eq!(appended["appended"], 3);
    assert!(appended["uncompacted_tokens"].as_u64().unwrap() > 0);

    let dir = std::env::temp_dir().join(format!("{}.jsonl", w.queue));
    std::fs::write(&dir, LINES).unwrap();
    let appended = w.ok(
        &[
            "append",
            "chat",
            "c1",
            "--file",
            dir.to_str().unwrap(),
            "--finalize",
        ],
        None,
    );
    std::fs::remove_file(&dir).unwrap();
    assert_eq!(appended["appended"], 3);
    assert_eq!(appended["turn"]["outcome"], "not_due");

    let bad = "{\"role\": \"user\", \"parts\": [{\"type\": \"text\", \"text\": \"ok\"}]}\n{\"role\": \"user\", \"parts\": [{\"type\": \"image\", \"url\": \"x\"}]}\n";
    let out = w.run(&["append", "chat", "c1"], Some(bad));
    assert_eq!(code(&out), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2") && err.contains("image"), "{err}");
    let out = w.run(&["append", "chat", "BAD KEY"], Some(LINES));
    assert_eq!(code(&out), 2, "an invalid entity id is a usage error");
    // Nothing of the refused batches was stored.
    let status = w.ok(&["status", "chat", "c1"], None);
    assert_eq!(status["uncompacted_tokens"], appended["uncompacted_tokens"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_run_again_with_its_idempotency_key_stores_nothing_twice() {
    let w = World::new(Backend::Sqlite).await;
    let args = ["append", "chat", "i1", "--idempotency-key", "batch-7"];
    let first = w.ok(&args, Some(LINES));
    assert_eq!(first["appended"], 3);
    assert_eq!(first["already_stored"], 0);
    let again = w.ok(&args, Some(LINES));
    assert_eq!(again["appended"], 3);
    assert_eq!(again["already_stored"], 3, "{again}");
    assert_eq!(again["first_id"], first["first_id"]);
    assert_eq!(again["last_id"], first["last_id"]);
    assert_eq!(again["uncompacted_tokens"], first["uncompacted_tokens"]);
    // The same key over other messages is refused: exit 2, nothing stored.
    let out = w.run(&args, Some(&LINES.replace("panic?", "crash?")));
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("batch-7#"));
    let status = w.ok(&["status", "chat", "i1"], None);
    assert_eq!(status["uncompacted_tokens"], first["uncompacted_tokens"]);
    let out = w.run(
        &["append", "chat", "i1", "--idempotency-key", "caf\u{e9}"],
        Some(LINES),
    );
    assert_eq!(code(&out), 2, "not printable ASCII");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_status_wait_context_and_queue_stats() {
    let w = World::new(Backend::Sqlite).await;
    w.ok(&["append", "chat", "s1"], Some(LINES));
    assert_eq!(w.ok(&["enqueue", "chat", "s1"], None)["outcome"], "added");
    assert_eq!(
        w.ok(&["enqueue", "chat", "s1"], None)["outcome"],
        "coalesced"
    );
    assert_eq!(
        w.db.scalar(
            "SELECT COUNT(*) AS n FROM events \
             WHERE kind = 'compaction.requested' AND entity_id = 's1'"
        )
        .await,
        1,
        "the added request wrote its event, the coalesced one none"
    );
    w.ok(&["append", "chat", "s2"], Some(LINES));
    let manual = w.ok(
        &[
            "compact-now",
            "chat",
            "s2",
            "--instructions",
            "keep the panic",
        ],
        None,
    );
    assert_eq!(manual["outcome"], "added");

    let status = w.ok(&["status", "chat", "s1"], None);
    assert_eq!(status["job"]["state"], "waiting");
    assert_eq!(status["breaker_open"], false);
    assert!(status["lease"].is_null());
    // For people: one row per line, words, no Rust `Debug` text.
    let text = w.text(&["status", "chat", "s1"]);
    assert!(text.contains("compacting   no\n"), "{text}");
    assert!(text.contains("compactions  none yet\n"), "{text}");
    assert!(text.contains("breaker      closed (0 failed"), "{text}");
    assert!(text.contains("queue job    waiting (job "), "{text}");
    assert!(!text.contains('{') && !text.contains("Waiting"), "{text}");
    let out = w.run(&["status", "chat", "nobody"], None);
    assert_eq!(code(&out), 1, "unknown workstream");
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], "unknown_workstream", "as HTTP's 404");

    assert_eq!(w.ok(&["queue", "stats"], None)["waiting"], 2);

    // s1's compaction is queued and no worker runs: said at once, exit 1.
    let out = w.run(&["wait", "chat", "s1", "--timeout-ms", "20000"], None);
    assert_eq!(code(&out), 1, "nobody will run it");
    let nobody: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(nobody["outcome"], "no_live_worker", "{nobody}");
    assert_eq!(nobody["phase"], "queued");
    assert!(nobody["waited_ms"].as_u64().unwrap() < 10_000, "{nobody}");
    // Running only: nothing holds the workstream.
    let ready = w.ok(
        &[
            "wait",
            "chat",
            "s1",
            "--timeout-ms",
            "2000",
            "--mode",
            "running",
        ],
        None,
    );
    assert_eq!(ready["outcome"], "ready", "{ready}");
    let ws =
        w.db.store
            .workstream(&EntityKey::parse("chat", "s1").unwrap())
            .await
            .unwrap()
            .unwrap();
    w.db.store
        .take_lease(ws.id, "someone", Duration::from_secs(60))
        .await
        .unwrap();
    // The lease's end as a date and how far off, not epoch milliseconds.
    let text = w.text(&["status", "chat", "s1"]);
    let leased = text.lines().find(|l| l.starts_with("compacting")).unwrap();
    assert!(
        leased.contains("yes, by someone; its lease ends ")
            && leased.contains(" UTC (in ")
            && leased.ends_with(" s)"),
        "{text}"
    );
    let deadline_ms = w.ok(&["status", "chat", "s1"], None)["lease"]["deadline_ms"]
        .as_i64()
        .unwrap();
    assert!(!text.contains(&deadline_ms.to_string()), "{text}");
    let out = w.run(
        &[
            "wait",
            "chat",
            "s1",
            "--timeout-ms",
            "300",
            "--mode",
            "running",
        ],
        None,
    );
    assert_eq!(code(&out), 1, "timed out");
    let waited: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(waited["outcome"], "timed_out", "{waited}");
    assert_eq!(waited["phase"], "running");

    let context = w.ok(&["context", "chat", "s1"], None);
    let messages = context["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "no summary yet: the 3 messages alone");
    assert_eq!(context["orphans_neutralized"], 0);
}

/// Over-long instructions are bad usage (exit 2, as HTTP's 400), not an
/// unavailable service (3); a mistyped URL is never echoed with its
/// password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_instructions_exit_2_and_a_mistyped_url_hides_its_password() {
    let w = World::new(Backend::Sqlite).await;
    w.ok(&["append", "chat", "i1"], Some(LINES));
    let long = "i".repeat(4_097);
    let out = w.run(
        &["compact-now", "chat", "i1", "--instructions", &long],
        None,
    );
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at most 4096"), "{err}");
    assert_eq!(w.ok(&["queue", "stats"], None)["waiting"], 0);

    let secret = "hunter2typo";
    let out = w.run_env(
        &["status", "chat", "i1"],
        None,
        &[("REDIS_URL", &format!("redis//:{secret}@127.0.0.1:6379"))],
    );
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        code(&out),
        2,
        "a URL that cannot work is bad usage: {printed}"
    );
    assert!(!printed.contains(secret), "{printed}");
    assert!(printed.contains("not a Redis URL"), "{printed}");
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], "invalid_config", "{err}");
}

/// One vocabulary with the admin HTTP API and the metrics: a request
/// recorded to run after the running job is `followup`, and `--json`
/// errors carry HTTP's string codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_and_error_codes_are_the_http_api_words() {
    let w = World::new(Backend::Sqlite).await;
    let added = w.ok(&["enqueue", "chat", "v1"], None);
    assert_eq!(added["outcome"], "added");
    let q = w.queue().await;
    let ClaimOutcome::Claimed(job) = q.claim("w").await.unwrap() else {
        panic!("a job")
    };
    assert_eq!(job.job_id, added["job_id"].as_u64().unwrap());
    let followup = w.ok(&["enqueue", "chat", "v1"], None);
    assert_eq!(followup["outcome"], "followup", "{followup}");
    assert_eq!(followup["job_id"], added["job_id"]);
    assert_eq!(
        w.text(&["enqueue", "chat", "v1"]).trim(),
        "compact:chat:v1: followup"
    );

    let error = |args: &[&str], stdin: Option<&str>| -> (i32, Value) {
        let out = w.run(args, stdin);
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        (code(&out), json["error"]["code"].clone())
    };
    assert_eq!(
        error(&["status", "chat", "BAD KEY"], None),
        (2, "invalid_key".into())
    );
    assert_eq!(
        error(&["append", "chat", "v1"], Some("{\"role\": \"user\"}\n")),
        (2, "invalid_body".into())
    );
    assert_eq!(
        error(
            &["append", "chat", "v1", "--idempotency-key", "caf\u{e9}"],
            Some(LINES)
        ),
        (2, "invalid_argument".into())
    );
    assert_eq!(
        error(&["dlq", "purge"], None),
        (2, "invalid_argument".into())
    );
    let out = w.run_env(
        &["queue", "stats"],
        None,
        &[("REDIS_URL", "redis://127.0.0.1:1")],
    );
    assert_eq!(code(&out), 3, "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], "redis_unavailable", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_retried_and_purged() {
    let w = World::new(Backend::Sqlite).await;
    let q = w.queue().await;
    for entity in ["d1", "d2"] {
        let k = EntityKey::parse("chat", entity).unwrap();
        q.request_compaction(&k, Trigger::Auto).await.unwrap();
        let ClaimOutcome::Claimed(job) = q.claim("w").await.unwrap() else {
            panic!("a job")
        };
        q.fail(&job, FailAction::DeadLetter, "the LLM said no")
            .await
            .unwrap();
    }
    let list = w.ok(&["dlq", "list"], None);
    let letters = list.as_array().unwrap();
    assert_eq!(letters.len(), 2);
    assert_eq!(letters[0]["reason"], "the LLM said no");
    let entry = letters[0]["entry"].as_str().unwrap().to_owned();
    // For people: a table with the failure time as a date and how long ago.
    let text = w.text(&["dlq", "list"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two letters: {text}");
    assert!(
        lines[0].starts_with("FAILED") && lines[0].ends_with("REASON"),
        "{text}"
    );
    for (line, letter) in lines[1..].iter().zip(letters) {
        assert!(line.contains(" UTC ("), "{line}");
        assert!(
            line.contains(" ago)") || line.contains("(just now)"),
            "{line}"
        );
        assert!(line.contains(letter["entry"].as_str().unwrap()), "{line}");
        assert!(line.ends_with("the LLM said no"), "{line}");
        let failed_ms = letter["failed_at_ms"].as_u64().unwrap().to_string();
        assert!(!line.contains(&failed_ms), "no epoch ms: {line}");
    }
    let out = w.run(&["dlq", "retry", "compact:chat:nobody|1"], None);
    assert_eq!(code(&out), 1);
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], "not_found");

    assert_eq!(
        w.db.scalar("SELECT COUNT(*) AS n FROM events WHERE kind = 'compaction.requested'")
            .await,
        0
    );
    assert_eq!(w.ok(&["dlq", "retry", &entry], None)["outcome"], "added");
    let entity = entry.split('|').next().unwrap().rsplit(':').next().unwrap();
    assert_eq!(
        w.db.scalar(&format!(
            "SELECT COUNT(*) AS n FROM events WHERE kind = 'compaction.requested' \
             AND entity_id = '{entity}' AND payload LIKE '%\"auto\"%'"
        ))
        .await,
        1,
        "the retry is a request: its event, with the trigger it had"
    );
    assert_eq!(code(&w.run(&["dlq", "retry", &entry], None)), 1, "gone now");
    assert_eq!(code(&w.run(&["dlq", "purge"], None)), 2, "which one?");
    assert_eq!(w.ok(&["dlq", "purge", "--all"], None)["purged"], 1);
    assert!(w.ok(&["dlq", "list"], None).as_array().unwrap().is_empty());
}

/// Dead-letters a job of `domain`/`entity` with `reason`; its entry.
async fn dead_letter(q: &Queue, domain: &str, entity: &str, reason: &str) -> String {
    let k = EntityKey::parse(domain, entity).unwrap();
    q.request_compaction(&k, Trigger::Auto).await.unwrap();
    let ClaimOutcome::Claimed(job) = q.claim("w").await.unwrap() else {
        panic!("a job")
    };
    q.fail(&job, FailAction::DeadLetter, reason).await.unwrap();
    format!("{}|{}", k.job_key(), job.job_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_retried_and_purged_in_bulk_by_reason_domain_and_age() {
    let w = World::new(Backend::Sqlite).await;
    let q = w.queue().await;
    let exhausted = "gave up after 3 attempts: llm: 503";
    let chat_a = dead_letter(&q, "chat", "a", exhausted).await;
    let chat_b = dead_letter(&q, "chat", "b", exhausted).await;
    let support_c = dead_letter(&q, "support", "c", exhausted).await;
    let chat_d = dead_letter(&q, "chat", "d", "stalled: the lease expired 3 times").await;

    // Listing by filter.
    let listed = w.ok(&["dlq", "list", "--reason", "stalled"], None);
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["entry"], chat_d.as_str());

    // A dry run counts and changes nothing.
    let dry = w.ok(
        &[
            "dlq",
            "retry",
            "--reason",
            "exhausted",
            "--domain",
            "chat",
            "--dry-run",
        ],
        None,
    );
    assert_eq!(
        (&dry["matched"], &dry["retried"], &dry["dry_run"]),
        (&2.into(), &0.into(), &true.into()),
        "{dry}"
    );
    let mut sample: Vec<&str> = dry["sample"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["entry"].as_str().unwrap())
        .collect();
    sample.sort_unstable();
    assert_eq!(sample, [chat_a.as_str(), chat_b.as_str()]);
    assert_eq!(w.ok(&["dlq", "list"], None).as_array().unwrap().len(), 4);
    let text = w.text(&["dlq", "retry", "--reason", "exhausted", "--dry-run"]);
    assert!(
        text.starts_with("dry run: 3 dead letters match (none retried)"),
        "{text}"
    );

    // Nothing is older than an hour; the age filter alone matches none.
    let old = w.ok(&["dlq", "purge", "--older-than", "1h"], None);
    assert_eq!((&old["matched"], &old["purged"]), (&0.into(), &0.into()));

    // The retry: each letter requested again, its event written.
    let retried = w.ok(
        &["dlq", "retry", "--reason", "exhausted", "--domain", "chat"],
        None,
    );
    assert_eq!(
        (
            &retried["matched"],
            &retried["retried"],
            &retried["skipped"]
        ),
        (&2.into(), &2.into(), &0.into()),
        "{retried}"
    );
    assert_eq!(
        w.db.scalar(
            "SELECT COUNT(*) AS n FROM events WHERE kind = 'compaction.requested' \
             AND entity_id IN ('a', 'b')"
        )
        .await,
        2,
        "one compaction.requested event per retried letter"
    );
    let left: Vec<String> = w
        .ok(&["dlq", "list"], None)
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["entry"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(left.len(), 2);
    assert!(left.contains(&support_c) && left.contains(&chat_d));

    // No filter: refused, unless --all.
    let out = w.run(&["dlq", "retry"], None);
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    let out = w.run(&["dlq", "purge", "--dry-run"], None);
    assert_eq!(code(&out), 2);
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], "invalid_argument");
    let out = w.run(&["dlq", "purge", "--reason", "Not A Token"], None);
    assert_eq!(code(&out), 2);

    let all = w.ok(&["dlq", "retry", "--all", "--dry-run"], None);
    assert_eq!(all["matched"], 2);
    let purged = w.ok(&["dlq", "purge", "--domain", "support"], None);
    assert_eq!(
        (&purged["matched"], &purged["purged"]),
        (&1.into(), &1.into())
    );
    let retried = w.ok(&["dlq", "retry", "--all"], None);
    assert_eq!(retried["retried"], 1);
    assert_eq!(retried["sample"][0]["entry"], chat_d.as_str());
    assert!(w.ok(&["dlq", "list"], None).as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workstreams_are_listed_by_state_and_domain() {
    let w = World::new(Backend::Sqlite).await;
    for (domain, entity) in [("chat", "calm"), ("chat", "stuck"), ("support", "other")] {
        w.ok(&["append", domain, entity], Some(LINES));
    }
    // The breaker of chat/stuck opened at its newest message.
    w.db.exec(
        "UPDATE workstreams SET consecutive_failures = 3, \
         breaker_message_id = last_message_id WHERE entity_id = 'stuck'",
    )
    .await;
    let open = w.ok(&["workstreams", "--state", "breaker_open"], None);
    let rows = open["workstreams"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{open}");
    assert_eq!(
        (
            &rows[0]["domain"],
            &rows[0]["entity_id"],
            &rows[0]["breaker"]
        ),
        (&"chat".into(), &"stuck".into(), &"open".into())
    );
    assert_eq!(rows[0]["uncompacted_messages"], 3);
    assert!(rows[0]["last_run"].is_null());
    let chat = w.ok(&["workstreams", "--domain", "chat", "--limit", "1"], None);
    assert_eq!(chat["workstreams"][0]["entity_id"], "calm");
    assert_eq!(chat["next_cursor"], "chat/calm");
    let next = w.ok(
        &[
            "workstreams",
            "--domain",
            "chat",
            "--limit",
            "1",
            "--after",
            "chat/calm",
        ],
        None,
    );
    assert_eq!(next["workstreams"][0]["entity_id"], "stuck");
    let text = w.text(&["workstreams", "--q", "stu"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("WORKSTREAM"), "{text}");
    assert!(
        lines[1].starts_with("chat/stuck") && lines[1].contains("open"),
        "{text}"
    );
    assert_eq!(code(&w.run(&["workstreams", "--state", "nope"], None)), 2);
    assert_eq!(code(&w.run(&["workstreams", "--domain", "Chat"], None)), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_is_compacted_by_a_running_worker_and_shows_it() {
    let w = World::new(Backend::Sqlite).await;
    // Without a worker the demo says what to do, and exits 1.
    let out = w.run(&["demo", "--turns", "10", "--timeout-secs", "1"], None);
    assert_eq!(code(&out), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("compactor-worker"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut settings = compactor_worker::settings::Settings::default();
    settings.database.url = compactor_producer::settings::ConnectionUrl::new(&w.db.url);
    settings.redis.url = compactor_producer::settings::ConnectionUrl::new(redis_url());
    settings.queue = w.queue_config();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let worker = tokio::spawn(compactor_worker::startup::run(settings, shutdown.clone()));

    let out = tokio::task::spawn_blocking({
        let (db_url, queue) = (w.db.url.clone(), w.queue.clone());
        move || {
            Command::new(BIN)
                .args(["--json", "demo", "--turns", "40", "--timeout-secs", "60"])
                .env("DATABASE_URL", db_url)
                .env("REDIS_URL", redis_url())
                .env("COMPACTOR__QUEUE__NAME", queue)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["messages"], 160);
    assert_eq!(report["messages_compacted"], 154);
    assert!(report["tokens_after"].as_u64() < report["tokens_before"].as_u64());
    assert!(report["summary"].as_str().unwrap().contains("KEY FACTS"));
    let entity = report["entity_id"].as_str().unwrap().to_owned();

    let runs = w.ok(&["runs", "demo", &entity], None);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["outcome"], "committed");
    assert_eq!(runs[0]["trigger"], "manual");
    // For people: words and dates.
    let text = w.text(&["runs", "demo", &entity]);
    assert!(text.contains("outcome   committed\n"), "{text}");
    assert!(!text.contains("Committed"), "{text}");
    assert!(text.contains("job       "), "{text}");
    assert!(text.contains(", manual\n"), "{text}");
    let started = text.lines().find(|l| l.starts_with("started")).unwrap();
    assert!(
        started.contains(" UTC (")
            && (started.ends_with(" ago)") || started.ends_with("(just now)")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "tokens    {} → {}\n",
            report["tokens_before"], report["tokens_after"]
        )),
        "{text}"
    );
    // The demo's values are distinct: some candidate evidence lines are
    // kept, and the text says how many of each.
    let kept = runs[0]["evidence_kept"].as_u64().unwrap();
    let dropped = runs[0]["evidence_dropped"].as_u64().unwrap();
    assert!(kept > 0, "{runs:?}");
    assert!(
        text.contains(&format!("evidence  {kept} lines kept, {dropped} dropped\n")),
        "{text}"
    );
    let text = w.text(&["status", "demo", &entity]);
    assert!(text.contains("compactions  1, the last "), "{text}");

    shutdown.cancel();
    worker.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_requests_what_the_queue_lost_and_nothing_twice() {
    let w = World::new(Backend::Postgres).await;
    // A small model: a few messages are over its trigger.
    let small = [
        ("COMPACTOR__ENGINE__TRIGGER__CONTEXT_WINDOW", "1000"),
        ("COMPACTOR__ENGINE__TRIGGER__OUTPUT_RESERVE", "200"),
        ("COMPACTOR__ENGINE__TRIGGER__SAFETY_MARGIN", "100"),
    ];
    let long: String = LINES.repeat(40);
    for entity in ["r1", "r2"] {
        let out = w.run_env(
            &["append", "chat", entity, "--finalize"],
            Some(&long),
            &small,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let appended: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(appended["turn"]["outcome"], "requested", "{appended}");
    }
    w.run_env(&["append", "chat", "small"], Some(LINES), &small);
    // Redis loses its data (here: this queue's keys).
    drop(World::on_queue_only(&w.queue));
    let reconcile = |w: &World| -> Value {
        let out = w.run_env(&["reconcile"], None, &small);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let first = reconcile(&w);
    assert_eq!(first["over_trigger"], 2);
    assert_eq!(first["requested"], 2, "{first}");
    let second = reconcile(&w);
    assert_eq!(second["requested"], 0, "nothing requested twice: {second}");
    assert_eq!(second["in_hand"], 2);
    assert_eq!(w.ok(&["queue", "stats"], None)["waiting"], 2);
}

impl World {
    /// Deletes the queue's keys (as a Redis that lost its data would).
    fn on_queue_only(queue: &str) -> QueueWipe {
        QueueWipe(queue.to_owned())
    }
}

/// Deletes a queue's keys when dropped.
struct QueueWipe(String);

impl Drop for QueueWipe {
    fn drop(&mut self) {
        let client = redis::Client::open(redis_url()).unwrap();
        let mut conn = client.get_connection().unwrap();
        let prefix = Keys::new(&QueueName::parse(&self.0).unwrap())
            .prefix()
            .to_owned();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query(&mut conn)
            .unwrap();
        assert!(!keys.is_empty(), "the jobs were there");
        let _: () = redis::cmd("DEL").arg(keys).query(&mut conn).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_deliveries_are_listed_and_retried() {
    use std::sync::Arc;

    use compactor_producer::store::{EventKind, NewEvent};
    use compactor_worker::outbox::{EventsSettings, Relay, Webhook, WebhookSecret};

    let w = World::new(Backend::Sqlite).await;
    let k = EntityKey::parse("chat", "events").unwrap();
    w.db.store
        .record_event(&NewEvent::new(
            EventKind::CompactionRequested,
            &k,
            serde_json::json!({ "trigger": "manual" }),
        ))
        .await
        .unwrap();
    // A relay whose webhook is down and that gives up after one attempt:
    // the delivery is failed.
    let relay = Relay::new(
        w.db.store.clone(),
        w.queue().await,
        EventsSettings {
            max_attempts: 1,
            ..EventsSettings::default()
        },
        vec![Webhook {
            name: "audit".into(),
            url: format!("http://127.0.0.1:{}/hook", compactor_testkit::free_port()),
            secret: WebhookSecret::parse("whsec_c2VjcmV0").unwrap(),
            timeout: Duration::from_secs(2),
        }],
        "cli-relay".into(),
        Arc::new(tokio::sync::Notify::new()),
    );
    relay.round().await;

    let failed = w.ok(&["events", "deliveries", "--state", "failed"], None);
    let failed = failed.as_array().unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["endpoint"], "audit");
    assert_eq!(failed[0]["state"], "failed");
    assert_eq!(failed[0]["attempts"], 1);
    assert_eq!(failed[0]["kind"], "compaction.requested");
    assert!(failed[0]["last_error"].as_str().is_some());
    let id = failed[0]["id"].as_i64().unwrap().to_string();
    let text = w.text(&["events", "deliveries"]);
    assert!(
        text.lines().next().unwrap().starts_with("ID"),
        "a table for people: {text}"
    );
    assert!(text.contains("audit") && text.contains("failed"), "{text}");

    assert_eq!(w.ok(&["events", "retry", &id], None)["outcome"], "requeued");
    let pending = w.ok(&["events", "deliveries", "--state", "pending"], None);
    assert_eq!(pending.as_array().unwrap().len(), 1);
    assert_eq!(pending[0]["attempts"], 0, "attempts counted from 0");
    assert_eq!(
        w.ok(&["events", "retry", "--all-failed"], None)["requeued"],
        0,
        "nothing failed any more"
    );
    relay.round().await;
    assert_eq!(
        w.ok(&["events", "retry", "--all-failed"], None)["requeued"],
        1
    );
    let out = w.run(&["events", "retry", "999999"], None);
    assert_eq!(code(&out), 1);
    assert_eq!(code(&w.run(&["events", "retry"], None)), 2, "which one?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_pause_and_resume_hold_and_release_jobs() {
    let w = World::new(Backend::Sqlite).await;
    let q = w.queue().await;
    let chat = EntityKey::parse("chat", "p1").unwrap();
    let support = EntityKey::parse("support", "p2").unwrap();
    for k in [&chat, &support] {
        q.request_compaction(k, Trigger::Auto).await.unwrap();
    }
    let stats = w.ok(&["queue", "stats"], None);
    assert_eq!(stats["waiting"], 2);
    assert_eq!(stats["queue_paused"], false);
    assert!(stats["oldest_waiting_ms"].is_u64(), "{stats}");

    let paused = w.ok(&["queue", "pause"], None);
    assert_eq!(paused["queue_paused"], true, "{paused}");
    assert!(matches!(
        q.claim("w1").await.unwrap(),
        ClaimOutcome::Empty { .. }
    ));
    let paused = w.ok(&["queue", "pause", "--domain", "chat"], None);
    assert_eq!(paused["paused_domains"][0]["domain"], "chat", "{paused}");
    let text = w.text(&["queue", "stats"]);
    assert!(
        text.contains("waiting 2 (urgent 0, normal 2, parked 0)"),
        "{text}"
    );
    assert!(text.contains("queue paused for "), "{text}");
    assert!(text.contains("domain chat paused for "), "{text}");
    assert!(text.contains("oldest waiting "), "{text}");

    // The queue resumes; the chat domain stays paused: its job is parked.
    let resumed = w.ok(&["queue", "resume"], None);
    assert_eq!(resumed["queue_paused"], false, "{resumed}");
    let ClaimOutcome::Claimed(job) = q.claim("w1").await.unwrap() else {
        panic!("the support job runs")
    };
    assert_eq!(job.key, support);
    assert!(matches!(
        q.claim("w1").await.unwrap(),
        ClaimOutcome::Empty { .. }
    ));
    let stats = w.ok(&["queue", "stats"], None);
    assert_eq!(
        (stats["waiting"].as_u64(), stats["waiting_parked"].as_u64()),
        (Some(1), Some(1)),
        "{stats}"
    );
    assert_eq!(stats["paused_domains"][0]["parked"], 1);
    let text = w.text(&["queue", "resume", "--domain", "chat"]);
    assert!(
        text.starts_with("domain chat resumed\nqueue running\n"),
        "{text}"
    );
    let ClaimOutcome::Claimed(job) = q.claim("w1").await.unwrap() else {
        panic!("the chat job runs once resumed")
    };
    assert_eq!(job.key, chat);

    // A domain that is not one is bad usage.
    let out = w.run(&["queue", "pause", "--domain", "Not:One"], None);
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stdout));
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], "invalid_argument");
}
