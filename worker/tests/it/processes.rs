//! Worker processes (`compactor-queue-probe`, the runtime with a synthetic
//! handler) against the real Redis: no overlapping runs of one entity across
//! four processes, recovery after SIGKILL, a crash loop ending in the
//! dead-letter set, SIGTERM, and Redis that is down at start or restarts.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::{eventually, key, until_done, TestQueue};
use compactor_producer::queue::{JobState, QueueConfig, Trigger};
use compactor_testkit::{free_port, PrivateRedis};

const PROBE: &str = env!("CARGO_BIN_EXE_compactor-queue-probe");

/// A probe process, killed on drop if still running.
struct Probe {
    child: Child,
    record: PathBuf,
}

impl Probe {
    fn spawn(redis: &str, queue: &str, record: &Path, extra: &[&str]) -> Probe {
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
        args.extend(extra.iter().map(|s| (*s).to_owned()));
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

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "{test}-{}",
        compactor_testkit::unique_name("wtest")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_worker_processes_never_run_one_entity_twice_at_once() {
    let t = TestQueue::with(QueueConfig::default()).await;
    let dir = temp_dir("overlap");
    let mut probes: Vec<Probe> = (0..4)
        .map(|i| {
            Probe::spawn(
                &t.url,
                t.name(),
                &dir.join(format!("p{i}.log")),
                &[
                    "--handler",
                    "sleep",
                    "--sleep-ms",
                    "3",
                    "--concurrency",
                    "4",
                ],
            )
        })
        .collect();
    // 200 entities, requested over and over while their jobs wait and run,
    // so coalescing and follow-ups happen all the time.
    let keys: Vec<_> = (0..200).map(|i| key(&format!("e{i}"))).collect();
    let until = Instant::now() + Duration::from_secs(3);
    let mut requests = 0u64;
    while Instant::now() < until {
        let batch = keys.iter().map(|k| {
            let q = t.queue.clone();
            let k = k.clone();
            async move { q.request_compaction(&k, Trigger::Auto).await.unwrap() }
        });
        requests += futures::future::join_all(batch).await.len() as u64;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eventually("the queue drains", Duration::from_secs(30), || async {
        let c = t.queue.counts().await.unwrap();
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
            t.queue.job_state(k).await.unwrap(),
            Some(JobState::Done { .. })
        ));
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_job_runs_again_on_another_worker() {
    let t = TestQueue::with(QueueConfig::default()).await;
    let dir = temp_dir("sigkill");
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let mut a = Probe::spawn(
        &t.url,
        t.name(),
        &log_a,
        &["--handler", "sleep", "--sleep-ms", "60000"],
    );
    let k = key("victim");
    t.queue.request_compaction(&k, Trigger::Auto).await.unwrap();
    eventually("worker A runs the job", Duration::from_secs(10), || async {
        events(&log_a).iter().any(|e| e.start)
    })
    .await;
    let _b = Probe::spawn(&t.url, t.name(), &log_b, &["--handler", "noop"]);
    let killed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    eventually(
        "worker B re-runs the job",
        Duration::from_secs(15),
        || async {
            events(&log_b)
                .iter()
                .any(|e| !e.start && e.member == k.job_key())
        },
    )
    .await;
    let rerun = events(&log_b).into_iter().find(|e| e.start).unwrap();
    assert_eq!(
        rerun.attempt, 1,
        "a crash does not use up an attempt (stalls have their own bound)"
    );
    println!(
        "recovery after SIGKILL (lease TTL 1 s, check every 250 ms): {} ms",
        (rerun.micros - killed_at) / 1000
    );
    until_done(&t.queue, &k, "done").await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_crashes_every_worker_ends_in_the_dead_letter_set() {
    let t = TestQueue::with(QueueConfig::default()).await;
    let dir = temp_dir("crashloop");
    let log = dir.join("crash.log");
    let k = key("poison");
    t.queue.request_compaction(&k, Trigger::Auto).await.unwrap();
    let mut crashes = 0;
    for _ in 0..10 {
        let mut p = Probe::spawn(
            &t.url,
            t.name(),
            &log,
            &["--handler", "crash", "--max-stalls", "2"],
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if p.child.try_wait().unwrap().is_some() {
                crashes += 1;
                break;
            }
            if matches!(
                t.queue.job_state(&k).await.unwrap(),
                Some(JobState::Dead { .. })
            ) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "neither a crash nor a dead letter"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if matches!(
            t.queue.job_state(&k).await.unwrap(),
            Some(JobState::Dead { .. })
        ) {
            break;
        }
    }
    assert!(matches!(
        t.queue.job_state(&k).await.unwrap(),
        Some(JobState::Dead { .. })
    ));
    assert_eq!(crashes, 3, "two stalls allowed, the third ends it");
    let dead = t.queue.dead_letters(1).await.unwrap();
    println!("dead letter: {}", dead[0].reason);
    assert_eq!(dead[0].stalls, 3);
    assert!(
        dead[0].reason.contains("stall") || dead[0].reason.contains("lease"),
        "{}",
        dead[0].reason
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_job_in_flight_finish_and_exits_zero() {
    let t = TestQueue::with(QueueConfig::default()).await;
    let dir = temp_dir("sigterm");
    let log = dir.join("p.log");
    let mut p = Probe::spawn(
        &t.url,
        t.name(),
        &log,
        &[
            "--handler",
            "sleep",
            "--sleep-ms",
            "800",
            "--grace-ms",
            "10000",
        ],
    );
    let k = key("finish-me");
    t.queue.request_compaction(&k, Trigger::Auto).await.unwrap();
    eventually("the job runs", Duration::from_secs(10), || async {
        !events(&log).is_empty()
    })
    .await;
    p.terminate();
    let status = p.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status:?}");
    let ev = events(&log);
    assert_eq!(
        ev.iter().filter(|e| !e.start).count(),
        1,
        "it finished once"
    );
    assert!(matches!(
        t.queue.job_state(&k).await.unwrap(),
        Some(JobState::Done { .. })
    ));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_back_a_job_that_outlasts_the_grace_and_another_worker_runs_it_once() {
    let t = TestQueue::with(QueueConfig::default()).await;
    let dir = temp_dir("handback");
    let (log_a, log_b) = (dir.join("a.log"), dir.join("b.log"));
    let mut a = Probe::spawn(
        &t.url,
        t.name(),
        &log_a,
        &[
            "--handler",
            "sleep",
            "--sleep-ms",
            "60000",
            "--grace-ms",
            "300",
        ],
    );
    let k = key("hand-back");
    t.queue.request_compaction(&k, Trigger::Auto).await.unwrap();
    eventually("A runs the job", Duration::from_secs(10), || async {
        !events(&log_a).is_empty()
    })
    .await;
    a.terminate();
    assert!(a.wait_exit(Duration::from_secs(10)).success());
    assert!(matches!(
        t.queue.job_state(&k).await.unwrap(),
        Some(JobState::Waiting { .. })
    ));
    let mut b = Probe::spawn(&t.url, t.name(), &log_b, &["--handler", "noop"]);
    until_done(&t.queue, &k, "B runs it").await;
    b.terminate();
    assert!(b.wait_exit(Duration::from_secs(10)).success());
    let (ea, eb) = (events(&log_a), events(&log_b));
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
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_waits_for_redis_at_start_and_survives_a_redis_restart() {
    let port = free_port();
    let url = PrivateRedis::url_for(port);
    let dir = temp_dir("redis-down");
    let log = dir.join("p.log");
    let queue_name = compactor_testkit::unique_name("wtest");
    // Redis is not running yet.
    let mut p = Probe::spawn(&url, &queue_name, &log, &["--handler", "noop"]);
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
        || async {
            events(&log)
                .iter()
                .any(|e| !e.start && e.member == key("one").job_key())
        },
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
        || async {
            events(&log)
                .iter()
                .any(|e| !e.start && e.member == key("two").job_key())
        },
    )
    .await;
    p.terminate();
    assert!(p.wait_exit(Duration::from_secs(10)).success());
    let seen: HashSet<String> = events(&log).into_iter().map(|e| e.member).collect();
    assert!(!seen.contains(&key("lost").job_key()));
    let _ = std::fs::remove_dir_all(dir);
}
