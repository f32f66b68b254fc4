//! Compaction events, delivered durably: each state change of a
//! compaction writes its event in the transaction that makes it, and the
//! worker's relay puts it on the Redis Stream and posts it, signed, to a
//! webhook receiver on loopback (`compactor_e2e::webhook`). A receiver that is down
//! gets every event once it is back; events committed while no relay runs
//! (the worker died between commit and delivery) are delivered by the next
//! relay; a commit that lost its fence writes no event; deliveries are
//! listed and retried over HTTP. Real Redis, PostgreSQL and SQLite.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::webhook::{Receiver, SECRET};
use compactor_e2e::{
    conversation, eventually, key, request_compaction, settings, small_window, spawn_worker,
    start_worker, FenceRace, TestRedis,
};
use compactor_producer::client::Compactor;
use compactor_producer::queue::{ClaimOutcome, Trigger};
use compactor_shared::EntityKey;
use compactor_worker::jobs::{CompactHandler, CompactSettings, Summarizer};
use compactor_worker::outbox::{EventsSettings, Relay, Webhook, WebhookSecret, WebhookSettings};
use compactor_worker::runtime::{Job, JobHandler};
use compactor_worker::settings::Settings;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long the receiver stays down in the outage test: the 30 s.
const OUTAGE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_the_stream_and_a_signed_webhook_on_postgres() {
    events_reach_the_stream_and_a_signed_webhook(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_the_stream_and_a_signed_webhook_on_sqlite() {
    events_reach_the_stream_and_a_signed_webhook(Backend::Sqlite).await;
}

async fn events_reach_the_stream_and_a_signed_webhook(backend: Backend) {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let receiver = Receiver::start().await;
    let worker = spawn_worker(with_webhook(
        settings(&db.url, &redis, None),
        &receiver.url(),
    ));
    let client = Compactor::from_parts(db.store.clone(), redis.queue().await, small_window()).await;
    let k = key("timeline");
    let job_id = request_compaction(&client, &k).await;

    eventually(
        "the completed event reaches the webhook",
        Duration::from_secs(60),
        || async {
            receiver
                .kinds()
                .contains(&"compaction.completed".to_owned())
        },
    )
    .await;
    let got = receiver.unique();
    assert_eq!(receiver.kinds_of("timeline"), every_kind());
    for event in &got {
        event.assert_signed();
        assert_eq!(event.body["domain"], "chat");
        assert_eq!(event.body["entity_id"], "timeline");
        assert_eq!(event.body["data"]["job_id"], job_id);
        // `request_compaction`'s 800 messages do not fit the 20k window at
        // all: the turn asked for a reactive compaction.
        assert_eq!(event.body["data"]["trigger"], "reactive");
    }
    // What a timeline shows.
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    let run = &db.store.runs(&k, 1).await.unwrap()[0];
    let done = &got
        .iter()
        .find(|e| e.body["type"] == "compaction.completed")
        .unwrap()
        .body["data"];
    assert_eq!(done["run_id"], run.id);
    assert_eq!(done["version"], ws.version);
    assert_eq!(done["tokens_before"], run.run.tokens_before);
    assert_eq!(done["tokens_after"], run.run.tokens_after);
    assert_eq!(
        done["tokens_freed"],
        run.run.tokens_before - run.run.tokens_after
    );
    assert_eq!(done["messages_compacted"], run.run.messages_compacted);
    assert!(run.run.messages_compacted > 0);
    assert_eq!(done["degraded"], false);
    assert_eq!(done["degraded_reason"], Value::Null);
    let sections: Vec<&str> = done["summary"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(sections, ["KEY FACTS", "CONVERSATION FLOW", "OPEN THREADS"]);
    let facts = done["summary"]["sections"][0]["text"].as_str().unwrap();
    assert_eq!(
        facts.lines().count(),
        ws.summary.as_ref().unwrap().key_facts.len(),
        "one line per bullet"
    );

    // The same events on the Redis Stream, in the order they were
    // written.
    // (A job whose queue lease was lost under load runs again: its second
    // attempt takes the lease, finds the work done and writes one more
    // `compaction.started`.)
    let stream = redis.event_stream().await;
    let kinds: Vec<&str> = stream.iter().map(|(_, kind, _)| kind.as_str()).collect();
    let first = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
    assert!(
        first("compaction.requested") < first("compaction.started")
            && first("compaction.started") < first("compaction.completed"),
        "{kinds:?}"
    );
    eventually(
        "every event on the stream reaches the webhook",
        Duration::from_secs(30),
        || async { receiver.unique().len() == stream.len() },
    )
    .await;
    let got = receiver.unique();
    for (id, _, json) in &stream {
        let event = got.iter().find(|e| &e.id == id).expect("on both");
        assert_eq!(&serde_json::from_str::<Value>(json).unwrap(), &event.body);
    }
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_down_for_a_while_gets_every_event_once_it_is_back() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let mut receiver = Receiver::start().await;
    receiver.stop().await;
    let down_since = Instant::now();
    let mut settings = with_webhook(settings(&db.url, &redis, None), &receiver.url());
    // Enough attempts for the outage (one every 2 s at most).
    settings.events.max_attempts = 100;
    let worker = spawn_worker(settings);
    let client = Compactor::from_parts(db.store.clone(), redis.queue().await, small_window()).await;
    let keys = [key("outage-a"), key("outage-b")];
    for k in &keys {
        request_compaction(&client, k).await;
    }
    // A webhook that is down does not hold compaction back: both compact
    // before it comes back.
    for k in &keys {
        eventually(
            "compacted while the webhook is down",
            Duration::from_secs(120),
            || async { client.status(k).await.unwrap().compactions >= 1 },
        )
        .await;
    }
    tokio::time::sleep(OUTAGE.saturating_sub(down_since.elapsed())).await;
    assert!(
        receiver.all().is_empty(),
        "nothing reached a receiver that is down"
    );
    let failing = failed_attempts(&db).await;
    assert!(failing > 0, "deliveries were tried during the outage");

    receiver.restart().await;
    let written = events_written(&db).await;
    assert!(written >= 6, "requested, started and completed of each");
    eventually(
        "every event arrives once the receiver is back",
        Duration::from_secs(30),
        || async { receiver.unique().len() as i64 == written },
    )
    .await;
    let got = receiver.unique();
    for event in &got {
        event.assert_signed();
    }
    for k in &keys {
        assert_eq!(receiver.kinds_of(k.entity_id()), every_kind(), "{k}");
    }
    // At least once: any duplicate carries an id already seen.
    let ids: BTreeSet<String> = receiver.all().into_iter().map(|e| e.id).collect();
    assert_eq!(
        ids.len() as i64,
        written,
        "exactly once per event id after deduplication"
    );
    eventually(
        "every delivery is recorded as delivered",
        Duration::from_secs(10),
        || async {
            db.scalar("SELECT COUNT(*) AS n FROM event_deliveries WHERE state = 'delivered'")
                .await
                == written
        },
    )
    .await;
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_committed_while_no_relay_runs_are_delivered_by_the_next_relay() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let receiver = Receiver::start().await;
    let queue = redis.queue().await;
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), small_window()).await;
    let k = key("no-relay");
    let job_id = request_compaction(&client, &k).await;
    // The compaction commits in a worker that dies before its relay runs:
    // here, its job handler alone, with no relay at all.
    let handler = CompactHandler::new(
        db.store.clone(),
        queue.clone(),
        Summarizer::Extractive,
        CompactSettings::new(small_window()),
    );
    handler
        .run(Job::new(
            k.clone(),
            Trigger::Auto,
            job_id,
            1,
            2,
            "dead-worker",
        ))
        .await
        .unwrap();
    assert_eq!(client.status(&k).await.unwrap().compactions, 1);
    assert_eq!(
        db.scalar("SELECT COUNT(*) AS n FROM events WHERE streamed_at_ms IS NULL")
            .await,
        3,
        "requested, started and completed wait in the outbox"
    );
    // A relay that claimed them and died too: its claim expires.
    let claimed = db
        .store
        .claim_unrelayed("dead-relay", 10, Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    assert!(redis.event_stream().await.is_empty());

    // The next worker's relay delivers them all.
    let stop = CancellationToken::new();
    let relay = Relay::new(
        db.store.clone(),
        queue,
        test_events(&receiver.url()),
        vec![webhook(&receiver.url())],
        "next-relay".into(),
        Arc::new(Notify::new()),
    );
    let running = tokio::spawn(relay.run(stop.clone()));
    eventually(
        "the next relay delivers every event",
        Duration::from_secs(30),
        || async { receiver.unique().len() == 3 },
    )
    .await;
    let got = receiver.unique();
    for event in &got {
        event.assert_signed();
    }
    let ids: BTreeSet<&str> = got.iter().map(|e| e.id.as_str()).collect();
    let stream = redis.event_stream().await;
    assert_eq!(
        stream
            .iter()
            .map(|(id, _, _)| id.as_str())
            .collect::<BTreeSet<_>>(),
        ids
    );
    assert_eq!(receiver.kinds_of("no-relay"), every_kind());
    stop.cancel();
    running.await.unwrap();
}

/// A job the recovery sweep dead-letters for stalling (its worker died
/// holding it, more often than `max_stalls` allows) writes
/// `compaction.dead_lettered`, as a job that failed its last attempt does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_dead_lettered_for_stalling_writes_its_event() {
    let db = TestDb::postgres().await;
    let mut redis = TestRedis::new();
    redis.config.max_stalls = 0;
    redis.config.lease_ttl = Duration::from_millis(200);
    let queue = redis.queue().await;
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), small_window()).await;
    let k = key("stalled");
    let job_id = request_compaction(&client, &k).await;
    // A worker claims it and dies: its lease is never renewed.
    let ClaimOutcome::Claimed(job) = queue.claim("dead-worker").await.unwrap() else {
        panic!("the job is claimed")
    };
    assert_eq!(job.job_id, job_id);
    let mut s = settings(&db.url, &redis, None);
    s.engine = small_window();
    let worker = spawn_worker(s);
    eventually(
        "the sweep dead-letters the stalled job and writes its event",
        Duration::from_secs(20),
        || async { events_of_kind(&db, "compaction.dead_lettered").await == 1 },
    )
    .await;
    worker.stop().await;
    let dead = queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(dead[0].reason.starts_with("stalled"), "{dead:?}");
    assert_eq!(
        db.scalar(&format!(
            "SELECT COUNT(*) AS n FROM events WHERE kind = 'compaction.dead_lettered' \
             AND entity_id = '{}' AND payload LIKE '%stalled%' \
             AND payload LIKE '%\"job_id\":{job_id}%'",
            k.entity_id()
        ))
        .await,
        1,
        "the event names the job and why it died"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_lost_its_fence_writes_no_event() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let queue = redis.queue().await;
    let client = Compactor::from_parts(db.store.clone(), queue.clone(), small_window()).await;
    let k = EntityKey::parse("chat", "fenced").unwrap();
    client.append_messages(&k, conversation(200)).await.unwrap();

    let race = FenceRace::start(&db, queue, &k, small_window()).await;
    race.finish().await.0.unwrap();

    assert_eq!(client.status(&k).await.unwrap().compactions, 1);
    assert_eq!(
        events_of_kind(&db, "compaction.started").await,
        2,
        "both took the lease"
    );
    assert_eq!(
        events_of_kind(&db, "compaction.completed").await,
        1,
        "only the commit that held its fence"
    );
    assert_eq!(events_of_kind(&db, "compaction.failed").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_listed_and_retried_over_http() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let receiver = Receiver::start().await;
    receiver.answer(StatusCode::INTERNAL_SERVER_ERROR);
    let mut settings = with_webhook(settings(&db.url, &redis, None), &receiver.url());
    settings.events.max_attempts = 2;
    settings.events.retry_base_delay = Duration::from_millis(50);
    settings.events.retry_max_delay = Duration::from_millis(100);
    let worker = start_worker(settings).await;
    let client = Compactor::from_parts(db.store.clone(), redis.queue().await, small_window()).await;
    request_compaction(&client, &key("retried")).await;
    let http = reqwest::Client::new();
    let base = format!("{}/v1/events/deliveries", worker.admin_url());
    let list = |query: &'static str| {
        let (http, url) = (http.clone(), format!("{base}{query}"));
        async move {
            let answer = http.get(url).send().await.unwrap();
            assert_eq!(answer.status(), 200);
            answer.json::<Value>().await.unwrap()
        }
    };
    eventually("every delivery fails", Duration::from_secs(60), || async {
        let written = events_written(&db).await;
        written >= 3
            && list("?state=failed").await["deliveries"]
                .as_array()
                .unwrap()
                .len() as i64
                == written
    })
    .await;
    let written = events_written(&db).await;
    let failed = list("?state=failed&limit=2").await;
    assert_eq!(failed["deliveries"].as_array().unwrap().len(), 2);
    let first = &failed["deliveries"][0];
    assert_eq!(first["endpoint"], "timeline");
    assert_eq!(first["attempts"], 2);
    assert_eq!(first["last_status"], 500);
    // The oldest delivery: `requested` follows Redis's change, so a worker
    // quick to claim the job may write `started` first.
    assert!(
        ["compaction.requested", "compaction.started"].contains(&first["kind"].as_str().unwrap()),
        "{first}"
    );
    let after = failed["next_after"].as_i64().expect("a next page");
    let rest = list_after(&http, &base, after).await;
    assert_eq!(
        rest["deliveries"].as_array().unwrap().len() as i64,
        written - 2
    );

    receiver.answer(StatusCode::NO_CONTENT);
    let id = first["id"].as_i64().unwrap();
    let retried = post_json(&http, &format!("{base}/{id}/retry")).await;
    assert_eq!(retried["outcome"], "requeued");
    eventually(
        "the retried delivery arrives",
        Duration::from_secs(30),
        || async { receiver.unique().len() == 1 },
    )
    .await;
    let unknown = http
        .post(format!("{base}/999999999/retry"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        unknown.json::<Value>().await.unwrap()["error"]["code"],
        "unknown_delivery"
    );
    let bulk = post_json(&http, &format!("{base}/retry?state=failed")).await;
    assert_eq!(bulk["requeued"], written - 1);
    eventually(
        "every delivery arrives",
        Duration::from_secs(30),
        || async {
            list("?state=delivered").await["deliveries"]
                .as_array()
                .unwrap()
                .len() as i64
                == written
        },
    )
    .await;
    assert_eq!(receiver.unique().len() as i64, written);
    let refused = http
        .post(format!("{base}/retry?state=pending"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    worker.stop().await;
}

// ---------------------------------------------------------------- helpers

/// The page of deliveries after id `after` (`GET …?after=`).
async fn list_after(http: &reqwest::Client, base: &str, after: i64) -> Value {
    http.get(format!("{base}?state=failed&after={after}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The JSON answer of a POST without a body to `url`.
async fn post_json(http: &reqwest::Client, url: &str) -> Value {
    http.post(url)
        .send()
        .await
        .expect("the worker answers")
        .json()
        .await
        .expect("a JSON answer")
}

/// How many events of `kind` the outbox holds.
async fn events_of_kind(db: &TestDb, kind: &str) -> i64 {
    db.scalar(&format!(
        "SELECT COUNT(*) AS n FROM events WHERE kind = '{kind}'"
    ))
    .await
}

/// How many events the outbox holds.
async fn events_written(db: &TestDb) -> i64 {
    db.scalar("SELECT COUNT(*) AS n FROM events").await
}

/// The three kinds one compaction writes: requested, started, completed.
fn every_kind() -> BTreeSet<String> {
    [
        "compaction.requested",
        "compaction.started",
        "compaction.completed",
    ]
    .map(str::to_owned)
    .into()
}

/// Delivery attempts recorded so far that did not deliver.
async fn failed_attempts(db: &TestDb) -> i64 {
    db.scalar(
        "SELECT COALESCE(SUM(attempts), 0) AS n FROM event_deliveries WHERE state <> 'delivered'",
    )
    .await
}

/// `[events]` for tests: a fast relay, short backoff.
fn test_events(url: &str) -> EventsSettings {
    EventsSettings {
        poll_interval: Duration::from_millis(100),
        retry_base_delay: Duration::from_millis(200),
        retry_max_delay: Duration::from_secs(2),
        webhooks: vec![WebhookSettings {
            name: "timeline".into(),
            url: url.to_owned(),
            secret: Some(WebhookSecret::parse(SECRET).unwrap()),
            secret_env: None,
            timeout: Duration::from_secs(2),
        }],
        ..EventsSettings::default()
    }
}

/// The one webhook of [`test_events`], as a relay takes it.
fn webhook(url: &str) -> Webhook {
    Webhook {
        name: "timeline".into(),
        url: url.to_owned(),
        secret: WebhookSecret::parse(SECRET).unwrap(),
        timeout: Duration::from_secs(2),
    }
}

/// `settings` with the small window and a webhook at `url`.
fn with_webhook(mut settings: Settings, url: &str) -> Settings {
    settings.engine = small_window();
    settings.events = test_events(url);
    settings
}
