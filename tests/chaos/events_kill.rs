//! A worker killed between commit and delivery loses no event: the
//! webhook receiver holds every request unanswered, so the first worker's
//! deliveries are in flight (and later events not yet relayed) when it is
//! killed with SIGKILL mid-run. A second worker finishes the compactions
//! and its relay re-claims what the dead one held once the claims expire:
//! every event the outbox holds reaches the receiver (once per event id
//! after deduplication) and the Redis Stream.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use compactor_e2e::webhook::{Receiver, SECRET};

use crate::harness::{
    compacted, stop_fleet, until_all_compacted, worker_env, Report, Scene, WorkerProcess,
};

const WORKSTREAMS: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_between_commit_and_delivery_loses_no_event() {
    let _serial = crate::SERIAL.lock().await;
    let scene = Scene::start(Duration::from_millis(50), WORKSTREAMS).await;
    let receiver = Receiver::start().await;
    receiver.hold();
    let config = std::env::temp_dir().join(format!(
        "compactor-chaos-events-{}.toml",
        scene.redis.config.name.as_str()
    ));
    std::fs::write(&config, events_config(&receiver.url())).unwrap();
    let mut env = worker_env(&scene.targets());
    env.push((
        "COMPACTOR_CONFIG".into(),
        config.to_string_lossy().into_owned(),
    ));

    let started = Instant::now();
    let mut first = WorkerProcess::spawn(&env);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(compacted(&scene.db).await >= WORKSTREAMS / 4 && receiver.waiting() > 0) {
        assert!(
            Instant::now() < deadline,
            "the first worker committed compactions and posted their events"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill9();
    let killed_after = compacted(&scene.db).await;
    assert!(
        receiver.all().is_empty(),
        "nothing answered before the kill"
    );
    let undelivered = scene
        .db
        .scalar("SELECT COUNT(*) AS n FROM event_deliveries WHERE state <> 'delivered'")
        .await;
    assert!(undelivered > 0, "events committed, not delivered");
    receiver.release();

    let mut fleet = vec![WorkerProcess::spawn(&env)];
    let recovery = until_all_compacted(&scene.db, WORKSTREAMS, Duration::from_secs(120)).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let open = scene
            .db
            .scalar(
                "SELECT (SELECT COUNT(*) FROM event_deliveries WHERE state <> 'delivered') \
                 + (SELECT COUNT(*) FROM events WHERE streamed_at_ms IS NULL) AS n",
            )
            .await;
        if open == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{open} events still not delivered or streamed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_fleet(&mut fleet).await;
    let _ = std::fs::remove_file(&config);

    let written = scene.db.scalar("SELECT COUNT(*) AS n FROM events").await;
    let got = receiver.unique();
    for event in &got {
        event.assert_signed();
    }
    let ids: BTreeSet<String> = got.iter().map(|e| e.id.clone()).collect();
    assert_eq!(
        i64::try_from(ids.len()).unwrap(),
        written,
        "every event the outbox holds, once per id"
    );
    let listed = ids
        .iter()
        .map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        scene
            .db
            .scalar(&format!(
                "SELECT COUNT(*) AS n FROM events WHERE event_id IN ({listed})"
            ))
            .await,
        written,
        "the ids received are the outbox's"
    );
    let streamed: BTreeSet<String> = scene
        .redis
        .event_stream()
        .await
        .into_iter()
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(
        streamed, ids,
        "the stream has every event (duplicates folded)"
    );
    for key in &scene.work.keys {
        assert!(
            receiver
                .kinds_of(key.entity_id())
                .contains("compaction.completed"),
            "{key}: its completion was delivered"
        );
    }
    let report = Report {
        scenario: "kill -9 a worker whose webhook deliveries are in flight",
        disruptions: 1,
        recovery,
        total: started.elapsed(),
        ..Report::default()
    };
    scene.finish(report).await;
    assert!(
        killed_after < WORKSTREAMS,
        "the kill came mid-run ({killed_after} compacted)"
    );
}

/// The worker's `[events]`: a fast relay, the receiver as its webhook. The
/// timeout bounds how long a dead worker's delivery claims hold (timeout +
/// 30 s).
fn events_config(url: &str) -> String {
    format!(
        r#"[events]
poll_interval = "100ms"
retry_base_delay = "200ms"
retry_max_delay = "2s"

[[events.webhooks]]
name = "timeline"
url = "{url}"
secret = "{SECRET}"
timeout = "3s"
"#
    )
}
