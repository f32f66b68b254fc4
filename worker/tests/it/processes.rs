//! Worker processes (`compactor-queue-probe`, the runtime with a synthetic
//! handler) against the real Redis: no overlapping runs of one entity across
//! four processes, recovery after SIGKILL, a crash loop ending in the
//! dead-letter set, SIGTERM, and Redis that is down at start or restarts.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::{eventually, key, request, state, until_done, TestQueue};
use compactor_producer::queue::{JobState, QueueConfig, Trigger};
use compactor_shared::EntityKey;
use compactor_testkit::{free_port, PrivateRedis};

const PROBE: &str = env!("CARGO_BIN_EXE_compactor-queue-probe");

/// A probe process, killed on drop if still running.
struct Probe {
    child: Child,
    record: PathBuf,
}

impl Probe {
    /// `extra`: more arguments, separated by spaces.
    fn spawn(redis: &str, queue: &str, record: &Path, extra: &str) -> Probe {
        let mut args: Vec<String> = vec![
            "--redis".into(),
            redis.into(),
            "--queue".into(),
            queue.into(),
            "--record".into(),
            record.display().to_string(),
            "--lease-ttl-ms".into(),
            "1000".into(),
            "--renew-ms".into(),
            "300".into(),
            "--check-ms".into(),
            "250".into(),
        ];
        args.extend(extra.split_whitespace().map(str::to_owned));
        let child = Command::new(PROBE)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        Probe {
            child,
            record: record.to_owned(),
        }
    }

    fn terminate(&self) {
        compactor_testkit::process::sigterm(&self.child);
    }

    /// SIGTERM, then the process exits with success within `limit`.
    fn terminate_cleanly(&mut self, limit: Duration) {
        self.terminate();
        let status = self.wait_exit(limit);
        assert!(status.success(), "{status:?}");
    }

    /// Waits until the probe recorded something: it runs a job.
    async fn until_recorded(&self, what: &str) {
        eventually(what, Duration::from_secs(10), || async {
            !events(&self.record).is_empty()
        })
        .await;
    }

    fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the process did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One recorded line: `start|end member job_id attempt micros`.
#[derive(Debug, Clone)]
struct Event {
    start: bool,
    member: String,
    job_id: u64,
    attempt: u32,
    micros: u128,
}

/// When one attempt started and ended (µs since the epoch).
#[derive(Debug, Default)]
struct Span {
    start: Option<u128>,
    end: Option<u128>,
}

fn events(path: &Path) -> Vec<Event> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f.len(), 5, "malformed record line {line:?}");
            Event {
                start: f[0] == "start",
                member: f[1].to_owned(),
                job_id: f[2].parse().unwrap(),
                attempt: f[3].parse().unwrap(),
                micros: f[4].parse().unwrap(),
            }
        })
        .collect()
}

/// Whether the record at `path` shows a run of `key`'s job that ended.
fn finished(path: &Path, key: &EntityKey) -> bool {
    events(path)
        .iter()
        .any(|e| !e.start && e.member == key.job_key())
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "{test}-{}",
        compactor_testkit::unique_name("wtest")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A queue of the test's own and a directory for its probes' records:
/// what the tests here start from (but the one whose Redis is not up yet).
struct Fixture {
    t: TestQueue,
    dir: PathBuf,
}

impl Fixture {
    async fn new(test: &str) -> Fixture {
        Fixture {
            t: TestQueue::with(QueueConfig::default()).await,
            dir: temp_dir(test),
        }
    }

    /// A probe on this queue recording into `record` in the directory.
    fn probe(&self, record: &str, extra: &str) -> Probe {
        Probe::spawn(&self.t.url, self.t.name(), &self.dir.join(record), extra)
    }

    /// Requests a compaction of `entity`; its key.
    async fn request(&self, entity: &str) -> EntityKey {
        let k = key(entity);
        request(&self.t.queue, &k).await;
        k
    }

    /// Removes the records (kept when the test fails, to look at).
    fn remove_records(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_worker_processes_never_run_one_entity_twice_at_once() {
    let f = Fixture::new("overlap").await;
    let mut probes: Vec<Probe> = (0..4)
        .map(|i| {
            let record = format!("p{i}.log");
            f.probe(&record, "--handler sleep --sleep-ms 3 --concurrency 4")
        })
        .collect();
    // 200 entities, requested over and over while their jobs wait and run,
    // so coalescing and follow-ups happen all the time.
    let keys: Vec<_> = (0..200).map(|i| key(&format!("e{i}"))).collect();
    let until = Instant::now() + Duration::from_secs(3);
    let mut requests = 0u64;
    while Instant::now() < until {
        let batch = keys.iter().map(|k| {
            let q = f.t.queue.clone();
            let k = k.clone();
            async move { q.request_compaction(&k, Trigger::Auto).await.unwrap() }
        });
        requests += futures::future::join_all(batch).await.len() as u64;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eventually("the queue drains", Duration::from_secs(30), || async {
        let c = f.t.queue.counts().await.unwrap();
        c.waiting == 0 && c.running == 0
    })
    .await;
    for p in &probes {
        p.terminate();
    }
    for p in &mut probes {
        assert!(p.wait_exit(Duration::from_secs(10)).success());
    }

    let mut runs: BTreeMap<(String, u64, u32), Span> = BTreeMap::new();
    let mut busy_processes = 0;
    for p in &probes {
        let ev = events(&p.record);
        if !ev.is_empty() {
            busy_processes += 1;
        }
        for e in ev {
            let slot = runs
                .entry((e.member.clone(), e.job_id, e.attempt))
                .or_default();
            if e.start {
                slot.start = Some(e.micros);
            } else {
                slot.end = Some(e.micros);
            }
        }
    }
    let mut per_entity: BTreeMap<String, Vec<(u128, u128)>> = BTreeMap::new();
    for ((member, _, _), span) in &runs {
        per_entity.entry(member.clone()).or_default().push((
            span.start.expect("start recorded"),
            span.end.expect("every run ended"),
        ));
    }
    let mut overlaps = 0;
    for intervals in per_entity.values_mut() {
        intervals.sort();
        for w in intervals.windows(2) {
            if w[1].0 < w[0].1 {
                overlaps += 1;
            }
        }
    }
    println!(
        "{requests} requests, {} runs of {} entities on {busy_processes} processes",
        runs.len(),
        per_entity.len()
    );
    assert_eq!(overlaps, 0, "two runs of one entity overlapped");
    assert_eq!(per_entity.len(), 200, "every entity ran");
    assert!(runs.len() > 200, "follow-ups ran too");
    assert!(busy_processes >= 2, "the work was shared");
    for k in &keys {
        assert!(matches!(
            state(&f.t.queue, k).await,
            Some(JobState::Done { .. })
        ));
    }
    f.remove_records();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_job_runs_again_on_another_worker() {
    let f = Fixture::new("sigkill").await;
    let mut a = f.probe("a.log", "--handler sleep --sleep-ms 60000");
    let k = f.request("victim").await;
    eventually("worker A runs the job", Duration::from_secs(10), || async {
        events(&a.record).iter().any(|e| e.start)
    })
    .await;
    let b = f.probe("b.log", "--handler noop");
    let killed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    eventually(
        "worker B re-runs the job",
        Duration::from_secs(15),
        || async { finished(&b.record, &k) },
    )
    .await;
    let rerun = events(&b.record).into_iter().find(|e| e.start).unwrap();
    assert_eq!(
        rerun.attempt, 1,
        "a crash does not use up an attempt (stalls have their own bound)"
    );
    println!(
        "recovery after SIGKILL (lease TTL 1 s, check every 250 ms): {} ms",
        (rerun.micros - killed_at) / 1000
    );
    until_done(&f.t.queue, &k, "done").await;
    f.remove_records();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_crashes_every_worker_ends_in_the_dead_letter_set() {
    let f = Fixture::new("crashloop").await;
    let k = f.request("poison").await;
    let mut crashes = 0;
    for _ in 0..10 {
        let mut p = f.probe("crash.log", "--handler crash --max-stalls 2");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if p.child.try_wait().unwrap().is_some() {
                crashes += 1;
                break;
            }
            if matches!(state(&f.t.queue, &k).await, Some(JobState::Dead { .. })) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "neither a crash nor a dead letter"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if matches!(state(&f.t.queue, &k).await, Some(JobState::Dead { .. })) {
            break;
        }
    }
    assert!(matches!(
        state(&f.t.queue, &k).await,
        Some(JobState::Dead { .. })
    ));
    assert_eq!(crashes, 3, "two stalls allowed, the third ends it");
    let dead = f.t.queue.dead_letters(1).await.unwrap();
    println!("dead letter: {}", dead[0].reason);
    assert_eq!(dead[0].stalls, 3);
    assert!(
        dead[0].reason.contains("stall") || dead[0].reason.contains("lease"),
        "{}",
        dead[0].reason
    );
    f.remove_records();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_job_in_flight_finish_and_exits_zero() {
    let f = Fixture::new("sigterm").await;
    let mut p = f.probe("p.log", "--handler sleep --sleep-ms 800 --grace-ms 10000");
    let k = f.request("finish-me").await;
    p.until_recorded("the job runs").await;
    p.terminate_cleanly(Duration::from_secs(15));
    let ev = events(&p.record);
    assert_eq!(
        ev.iter().filter(|e| !e.start).count(),
        1,
        "it finished once"
    );
    let done = state(&f.t.queue, &k).await;
    assert!(matches!(done, Some(JobState::Done { .. })));
    f.remove_records();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_back_a_job_that_outlasts_the_grace_and_another_worker_runs_it_once() {
    let f = Fixture::new("handback").await;
    let mut a = f.probe("a.log", "--handler sleep --sleep-ms 60000 --grace-ms 300");
    let k = f.request("hand-back").await;
    a.until_recorded("A runs the job").await;
    a.terminate_cleanly(Duration::from_secs(10));
    let handed_back = state(&f.t.queue, &k).await;
    assert!(matches!(handed_back, Some(JobState::Waiting { .. })));
    let mut b = f.probe("b.log", "--handler noop");
    until_done(&f.t.queue, &k, "B runs it").await;
    b.terminate_cleanly(Duration::from_secs(10));
    let (ea, eb) = (events(&a.record), events(&b.record));
    assert_eq!(
        ea.iter().filter(|e| !e.start).count(),
        0,
        "A never finished it"
    );
    assert_eq!(
        eb.iter().filter(|e| !e.start).count(),
        1,
        "B finished it once"
    );
    assert_eq!(eb[0].attempt, 1, "the handed-back attempt was not counted");
    f.remove_records();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_waits_for_redis_at_start_and_survives_a_redis_restart() {
    let port = free_port();
    let url = PrivateRedis::url_for(port);
    let dir = temp_dir("redis-down");
    let log = dir.join("p.log");
    let queue_name = compactor_testkit::unique_name("wtest");
    // Redis is not running yet.
    let mut p = Probe::spawn(&url, &queue_name, &log, "--handler noop");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        p.child.try_wait().unwrap().is_none(),
        "the worker waits, it does not exit"
    );

    let mut redis = PrivateRedis::start_on(port);
    let config = QueueConfig {
        name: compactor_producer::queue::QueueName::parse(&queue_name).unwrap(),
        ..QueueConfig::default()
    };
    let queue = compactor_producer::queue::Queue::connect(&url, config)
        .await
        .unwrap();
    queue
        .request_compaction(&key("one"), Trigger::Auto)
        .await
        .unwrap();
    eventually(
        "the job ran once Redis came up",
        Duration::from_secs(20),
        || async { finished(&log, &key("one")) },
    )
    .await;

    // Redis restarts (losing its data: no persistence).
    redis.kill();
    let refused = queue.request_compaction(&key("lost"), Trigger::Auto).await;
    assert!(refused.is_err(), "no false success while Redis is down");
    let _redis = PrivateRedis::start_on(port);
    eventually(
        "the producer reconnects",
        Duration::from_secs(10),
        || async {
            queue
                .request_compaction(&key("two"), Trigger::Auto)
                .await
                .is_ok()
        },
    )
    .await;
    eventually(
        "the worker reconnected and ran it",
        Duration::from_secs(20),
        || async { finished(&log, &key("two")) },
    )
    .await;
    p.terminate_cleanly(Duration::from_secs(10));
    let seen: HashSet<String> = events(&log).into_iter().map(|e| e.member).collect();
    assert!(!seen.contains(&key("lost").job_key()));
    let _ = std::fs::remove_dir_all(dir);
}
