//! Redis work per queue operation, counted: each operation runs once on a
//! private Redis, and `INFO commandstats` before and after tells how many
//! commands it executed (inside scripts included) and how many it sent.
//! Counts, not timings: the same on any machine, and the next feature that
//! adds a command to every job fails here first (issue 32).

use std::collections::BTreeMap;
use std::time::Duration;

use compactor_producer::queue::{ClaimOutcome, FailAction, PauseScope, QueueConfig, Trigger};
use compactor_shared::{Domain, EntityKey};
use compactor_testkit::PrivateRedis;
use redis::aio::MultiplexedConnection;

use crate::queue::claim;
use crate::support::queue::TestQueue;

/// Calls per command name (`fcall`, `hset`, …), `info` left out.
type Calls = BTreeMap<String, u64>;

/// Calls, and the server's µs in them, per command name.
async fn commandstats(conn: &mut MultiplexedConnection) -> (Calls, Calls) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    let (mut out, mut usec) = (Calls::new(), Calls::new());
    for line in info.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        if name == "info" {
            continue;
        }
        let field = |key: &str| -> u64 {
            rest.split(',')
                .find_map(|f| f.strip_prefix(key))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        out.insert(name.to_owned(), field("calls="));
        usec.insert(name.to_owned(), field("usec="));
    }
    (out, usec)
}

/// What one operation cost.
#[derive(Debug)]
struct Work {
    /// Commands sent by the client (its round trips, pipelining aside).
    sent: u64,
    /// Commands executed, those run by scripts included.
    executed: u64,
    by_command: Calls,
    /// The server's µs in its scripts (shown, never asserted: a timing).
    script_usec: u64,
}

/// Commands a client sends itself: the others were run by scripts.
const SENT: &[&str] = &[
    "evalsha",
    "eval",
    "fcall",
    "fcall_ro",
    "script|load",
    "script",
];

async fn measure<F, Fut>(conn: &mut MultiplexedConnection, op: F) -> Work
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (before, usec_before) = commandstats(conn).await;
    op().await;
    let (after, usec_after) = commandstats(conn).await;
    let script_usec = ["evalsha", "fcall"]
        .iter()
        .map(|c| {
            usec_after.get(*c).copied().unwrap_or(0) - usec_before.get(*c).copied().unwrap_or(0)
        })
        .sum();
    let by_command: Calls = after
        .iter()
        .filter_map(|(k, n)| {
            let d = n - before.get(k).copied().unwrap_or(0);
            (d > 0).then(|| (k.clone(), d))
        })
        .collect();
    let executed = by_command.values().sum();
    let sent = by_command
        .iter()
        .filter(|(k, _)| SENT.contains(&k.as_str()))
        .map(|(_, n)| n)
        .sum();
    Work {
        sent,
        executed,
        by_command,
        script_usec,
    }
}

fn key(entity: &str) -> EntityKey {
    EntityKey::parse("chat", entity).unwrap()
}

/// The budget: per operation, the commands it may send (its round trips)
/// and execute, scripts' commands included, on a queue with nothing
/// paused. The one place these numbers live; each says what it pays for.
/// An operation now cheaper fails nothing; one dearer fails here.
const BUDGET: &[(&str, u64, u64)] = &[
    // FCALL; the dedup lookup (HMGET), the job id counter (GET, INCR),
    // TIME, the entity's old record replaced (DEL, HSET) and the id index
    // (HSET), the lane's ZADD, the wake-up PUBLISH.
    ("enqueue a new job", 1, 10),
    // FCALL; the entity's record (HMGET) and its place in the lane
    // (ZSCORE): nothing else is touched.
    ("enqueue onto a waiting job", 1, 3),
    // FCALL; the record (HMGET), the follow-up flag (HSET), the entity's
    // place (ZSCORE).
    ("enqueue a follow-up of a running job", 1, 4),
    // FCALL; TIME, the pause record (HGETALL), both lanes
    // (ZRANGEBYSCORE ×2: the reads that also refuse a lane of the wrong
    // type before anything is written), the record read (HMGET), the
    // lease (ZADD running, the first write, refusing a running set of the
    // wrong type; HSET), out of both lanes (ZREM ×2). No TYPE call.
    ("claim", 1, 10),
    // As a claim that finds nothing: the pause record, both lanes and the
    // next due job of each (ZRANGE ×2).
    ("claim with nothing due", 1, 7),
    // FCALL; the lease (HMGET, refusing a record of the wrong type),
    // TIME, the deadline (ZADD, the first write, refusing a running set of
    // the wrong type; HSET). No TYPE call.
    ("renew", 1, 5),
    // FCALL; TIME, the lease (HMGET), the done set's size (ZCARD, which
    // also refuses it of the wrong type), the counter and both lanes
    // checked because there is a follow-up (GET, TYPE ×2), out of running
    // (ZREM) and into done (ZADD), the follow-up job's counter, lane,
    // record, index and wake-up (INCR, ZADD, DEL, HSET ×2, PUBLISH), the
    // settled notice (PUBLISH), the age bound's oldest entry (ZRANGE).
    ("complete, adding the follow-up", 1, 17),
    // FCALL; the lease (HMGET, refusing a record of the wrong type), the
    // lane the retry goes back to (TYPE: it is written after the running
    // set), TIME, out of running (ZREM, the first write, refusing a
    // running set of the wrong type), the retry's record (HSET, HDEL) and
    // delayed place (ZADD), the wake-up and settled publishes.
    ("fail with a retry", 1, 10),
    // One script for both, in one round trip: the completion (TIME,
    // HMGET, ZCARD, ZREM, ZADD, HSET, PEXPIRE, PUBLISH, ZRANGE) and the
    // claim (HGETALL, ZRANGEBYSCORE ×2, HMGET, ZADD, ZREM ×2, HSET),
    // without a TYPE call: the completion's reads and first write checked
    // the keys it writes, the claim's reads check the lanes.
    ("complete and claim the next", 1, 18),
    // One FCALL for the whole batch (was one per request, pipelined);
    // each request as "enqueue a new job" without its FCALL: 1 + 100 × 9.
    ("enqueue 100 new jobs in one batch", 1, 901),
];

fn budget(op: &str) -> (u64, u64) {
    BUDGET
        .iter()
        .find(|(name, _, _)| *name == op)
        .map(|(_, sent, executed)| (*sent, *executed))
        .unwrap_or_else(|| panic!("{op} has no budget"))
}

#[track_caller]
fn within(op: &str, work: &Work) {
    let (sent, executed) = budget(op);
    // The scripts run as the library's functions, not by SHA (whose
    // every call remakes the prelude's closures).
    assert!(
        work.by_command.contains_key("fcall") && !work.by_command.contains_key("evalsha"),
        "{op}: {:?}",
        work.by_command
    );
    // (Shown with --nocapture: the table of docs/BENCHMARK_NOTES.md.)
    println!(
        "| {op} | {} | {} | {} | {:?} |",
        work.sent, work.executed, work.script_usec, work.by_command
    );
    assert_eq!(
        work.sent, sent,
        "{op}: {} round trips, budget {sent}: {:?}",
        work.sent, work.by_command
    );
    assert!(
        work.executed <= executed,
        "{op}: {} commands executed, budget {executed}: {:?}",
        work.executed,
        work.by_command
    );
}

#[tokio::test]
async fn each_queue_operation_stays_within_its_redis_budget() {
    // Private: `INFO commandstats` counts the whole server's commands.
    let redis = PrivateRedis::start();
    let tq = TestQueue::at(&redis.url(), QueueConfig::default()).await;
    let q = &tq.queue;
    let mut conn = tq.raw().await;
    // Scripts loaded and the counter made before anything is counted.
    let warm = key("warm");
    q.request_compaction(&warm, Trigger::Auto).await.unwrap();
    let job = claim(q).await;
    q.complete(&job).await.unwrap();

    // One entity's request, made new, onto its waiting job, then as the
    // follow-up of its running one.
    let k = key("a");
    let request = || async {
        q.request_compaction(&k, Trigger::Auto).await.unwrap();
    };
    within("enqueue a new job", &measure(&mut conn, request).await);
    within(
        "enqueue onto a waiting job",
        &measure(&mut conn, request).await,
    );
    let mut claimed = None;
    let w = measure(&mut conn, || async {
        claimed = Some(claim(q).await);
    })
    .await;
    within("claim", &w);
    let job = claimed.unwrap();
    let w = measure(&mut conn, || async {
        assert!(q.renew(&job).await.unwrap());
    })
    .await;
    within("renew", &w);
    within(
        "enqueue a follow-up of a running job",
        &measure(&mut conn, request).await,
    );
    let w = measure(&mut conn, || async {
        q.complete(&job).await.unwrap();
    })
    .await;
    within("complete, adding the follow-up", &w);
    let job = claim(q).await;
    let w = measure(&mut conn, || async {
        let retry = FailAction::Retry {
            delay: Duration::from_secs(60),
        };
        q.fail(&job, retry, "budget test").await.unwrap();
    })
    .await;
    within("fail with a retry", &w);
    let w = measure(&mut conn, || async {
        assert!(matches!(
            q.claim("w1").await.unwrap(),
            ClaimOutcome::Empty { .. }
        ));
    })
    .await;
    within("claim with nothing due", &w);
    let other = key("b");
    q.request_compaction(&other, Trigger::Auto).await.unwrap();
    let job = claim(q).await;
    q.request_compaction(&key("c"), Trigger::Auto)
        .await
        .unwrap();
    let w = measure(&mut conn, || async {
        let (_, next) = q.complete_and_claim(&job, "w1").await.unwrap();
        assert!(matches!(next, ClaimOutcome::Claimed(_)), "{next:?}");
    })
    .await;
    within("complete and claim the next", &w);
    let batch: Vec<(EntityKey, Trigger)> = (0..100)
        .map(|i| (key(&format!("many{i}")), Trigger::Auto))
        .collect();
    let w = measure(&mut conn, || async {
        q.enqueue_many(&batch).await.unwrap();
    })
    .await;
    within("enqueue 100 new jobs in one batch", &w);
}

/// A paused domain's backlog is set aside and put back in bounded script
/// calls, never in one that holds Redis for the whole backlog (a claim
/// meeting 100,000 jobs of a paused domain took 0.93 s in one script, the
/// resume 0.55 s): a claim parks at most 1,000 and answers that the next
/// job is due at once; a resume moves 1,000 per call until none is left.
/// 2,500 jobs: three claims, three script calls of one resume, and every
/// job back in line at its place.
#[tokio::test]
async fn a_paused_domain_s_backlog_is_parked_and_put_back_in_bounded_calls() {
    let redis = PrivateRedis::start();
    let tq = TestQueue::at(&redis.url(), QueueConfig::default()).await;
    let q = &tq.queue;
    let mut conn = tq.raw().await;
    let requests: Vec<(EntityKey, Trigger)> = (0..2_500)
        .map(|i| (key(&format!("p{i}")), Trigger::Auto))
        .collect();
    q.enqueue_many(&requests).await.unwrap();
    let chat = PauseScope::Domain(Domain::parse("chat").unwrap());
    q.pause(&chat).await.unwrap();

    let first = q.claim("w1").await.unwrap();
    assert!(
        matches!(first, ClaimOutcome::Empty { next_due_in: Some(due) } if due.is_zero()),
        "{first:?}"
    );
    assert_eq!(q.counts().await.unwrap().waiting_parked, 1_000);
    // The second parks 1,000 more, the third the last 500 and finds the
    // lane empty.
    let mut claims = 1;
    loop {
        let claimed = q.claim("w1").await.unwrap();
        claims += 1;
        if matches!(claimed, ClaimOutcome::Empty { next_due_in: None }) {
            break;
        }
        assert!(claims < 3, "{claimed:?}");
    }
    assert_eq!(claims, 3);
    assert_eq!(q.counts().await.unwrap().waiting_parked, 2_500);

    let w = measure(&mut conn, || async {
        q.resume(&chat).await.unwrap();
    })
    .await;
    assert_eq!(w.sent, 3, "1,000 put back per script call: {w:?}");
    let counts = q.counts().await.unwrap();
    assert_eq!((counts.waiting_parked, counts.waiting_normal), (0, 2_500));
    for i in 0..3 {
        assert_eq!(claim(q).await.key, key(&format!("p{i}")), "at its place");
    }
}
