//! The queue's metrics (ARCHITECTURE.md §6), rendered by the Prometheus
//! exporter after real jobs ran against the real Redis. The recorder is the
//! process's global one, installed once by `observability::install` as the
//! worker installs it, and shared with every other test of this binary
//! running at the same time: each series asserted here carries this test's
//! unique `queue` label, which keeps it apart from theirs.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{eventually, fast_queue, fast_runtime, key, FnHandler, TestQueue};
use compactor_producer::metrics::names;
use compactor_producer::queue::{JobState, Trigger};
use compactor_worker::runtime::{JobError, Runtime};

/// The value of the series of `name` whose labels include all of `labels`.
fn value(rendered: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    rendered.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let (label_part, number) = match rest.strip_prefix('{') {
            Some(r) => {
                let (l, n) = r.split_once("} ")?;
                (l, n)
            }
            None => ("", rest.strip_prefix(' ')?),
        };
        let all = labels
            .iter()
            .all(|(k, v)| label_part.contains(&format!("{k}=\"{v}\"")));
        all.then(|| number.trim().parse().ok()).flatten()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_requests_are_counted_and_queue_depth_is_sampled() {
    let handle = compactor_worker::observability::install().unwrap();
    // The domain is a label only when allowed ([metrics] domains).
    compactor_producer::metrics::allow_domains(["chat"]);

    let t = TestQueue::with(fast_queue()).await;
    let q = t.name().to_owned();
    let flaky = Arc::new(AtomicU32::new(0));
    let f = flaky.clone();
    let handler = FnHandler::new(move |job| {
        let f = f.clone();
        async move {
            match job.key.entity_id() {
                "bad" => Err(JobError::permanent("unknown workstream")),
                "flaky" if f.fetch_add(1, Ordering::SeqCst) == 0 => Err(JobError::retryable("503")),
                _ => Ok(()),
            }
        }
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let runtime = Runtime::new(t.queue.clone(), fast_runtime(), handler).unwrap();
    let task = tokio::spawn(runtime.run(async move {
        let _ = rx.await;
    }));
    for entity in ["ok", "bad", "flaky"] {
        t.queue
            .request_compaction(&key(entity), Trigger::Auto)
            .await
            .unwrap();
    }
    eventually("all settled", Duration::from_secs(10), || async {
        matches!(
            t.queue.job_state(&key("ok")).await.unwrap(),
            Some(JobState::Done { .. })
        ) && matches!(
            t.queue.job_state(&key("bad")).await.unwrap(),
            Some(JobState::Dead { .. })
        ) && matches!(
            t.queue.job_state(&key("flaky")).await.unwrap(),
            Some(JobState::Done { .. })
        )
    })
    .await;
    // The sweep samples queue depth every check interval.
    eventually(
        "the depth gauges caught up",
        Duration::from_secs(5),
        || async {
            let rendered = handle.render();
            value(
                &rendered,
                names::QUEUE_DEPTH,
                &[("queue", &q), ("state", "dead")],
            ) == Some(1.0)
                && value(
                    &rendered,
                    names::QUEUE_DEPTH,
                    &[("queue", &q), ("state", "done")],
                ) == Some(2.0)
        },
    )
    .await;
    tx.send(()).unwrap();
    task.await.unwrap().unwrap();

    let rendered = handle.render();
    let queue = ("queue", q.as_str());
    let chat = ("domain", "chat");
    let get = |name: &str, labels: &[(&str, &str)]| {
        value(&rendered, name, labels)
            .unwrap_or_else(|| panic!("{name} {labels:?} missing from:\n{rendered}"))
    };
    assert_eq!(
        get(names::ENQUEUE_TOTAL, &[queue, ("outcome", "added")]),
        3.0
    );
    assert_eq!(get(names::JOBS_STARTED_TOTAL, &[queue, chat]), 4.0);
    assert_eq!(get(names::JOBS_COMPLETED_TOTAL, &[queue, chat]), 2.0);
    assert_eq!(
        get(
            names::JOBS_FAILED_TOTAL,
            &[queue, chat, ("reason", "permanent")]
        ),
        1.0
    );
    assert_eq!(
        get(
            names::JOBS_FAILED_TOTAL,
            &[queue, chat, ("reason", "error")]
        ),
        1.0
    );
    assert_eq!(get(names::JOBS_RETRIED_TOTAL, &[queue, chat]), 1.0);
    assert_eq!(
        get(
            names::JOBS_DEAD_LETTERED_TOTAL,
            &[queue, chat, ("reason", "permanent")]
        ),
        1.0
    );
    assert_eq!(get(names::QUEUE_DEPTH, &[queue, ("state", "dead")]), 1.0);
    assert_eq!(get(names::QUEUE_DEPTH, &[queue, ("state", "waiting")]), 0.0);
    assert_eq!(get(names::DEAD_LETTER_SIZE, &[queue]), 1.0);
    // Histograms (with the worker's buckets) render a count per series.
    assert_eq!(
        get(
            &format!("{}_count", names::JOB_QUEUE_WAIT_SECONDS),
            &[queue, chat]
        ),
        4.0
    );
    assert_eq!(
        get(
            &format!("{}_count", names::JOB_RUN_SECONDS),
            &[queue, chat, ("outcome", "completed")]
        ),
        2.0
    );
    assert!(
        !rendered.contains("compact:chat:"),
        "no entity id in any label"
    );
}
