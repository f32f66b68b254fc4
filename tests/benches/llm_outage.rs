//! How long a compaction requested while the LLM is down takes to commit
//! (degraded, by the extractive fallback), at the default `[llm]` and
//! `[worker.retry]` settings: from the request (`finalize_turn`) to the
//! committed row. One in-process worker (as the binary starts it), an
//! OpenAI-compatible LLM faked on loopback, PostgreSQL and Redis.
//!
//! Scenarios:
//! - `refused_from_start`: nothing listens on the LLM's port;
//! - `5xx_from_start`: the LLM answers every request with HTTP 500;
//! - `5xx_mid_session`: one compaction with a healthy LLM, then it answers
//!   500: the first compaction that meets the outage;
//! - `while_unhealthy`: the next compaction, once the provider is marked
//!   unhealthy (the LLM is not asked);
//! - with `OUTAGE_BENCH_BASELINE=1`, `refused_from_start` again with the
//!   health state off (`llm.unhealthy_after = 0`): the behaviour before it
//!   (every attempt's retries, then the fallback on the last attempt).
//!
//! Run: `cargo bench -p compactor-e2e --bench llm_outage` (`BENCH_RUNS`,
//! default 3). Besides the human lines, one `BENCH_RESULT` JSON line per
//! measurement.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{bench_runs, result};
use compactor_e2e::db::TestDb;
use compactor_e2e::{settings, start_worker, FakeLlm, Fault, TestRedis};
use compactor_producer::client::{Compactor, IncomingMessage, TurnOutcome};
use compactor_producer::store::RunRow;
use compactor_shared::EntityKey;
use compactor_worker::llm::{LlmConfig, Provider};
use compactor_worker::settings::Settings;

/// Where the LLM is, and how it fails.
enum Llm {
    /// A port nothing listens on.
    Refused,
    /// The fake, answering 500 from the start (`true`) or after one good
    /// compaction.
    ServerErrors { from_start: bool },
}

/// Plain-text messages enough to be over the trigger.
fn messages(round: usize) -> Vec<IncomingMessage> {
    compactor_e2e::chat(300, |i| {
        format!(
            "Round {round}, message {i}: the deploy of service-{i} to eu-west-1 waits on \
             the cache TTL review; keep the retry budget at 5 attempts and log to /var/log/app-{i}.log."
        )
    })
}

/// Requests a compaction of `key` and waits for its commit; returns the
/// time it took and the run row.
async fn compact(db: &TestDb, client: &Compactor, key: &EntityKey, round: usize) -> (f64, RunRow) {
    let before = db
        .store
        .workstream(key)
        .await
        .unwrap()
        .map_or(0, |w| w.compactions);
    client.append_messages(key, messages(round)).await.unwrap();
    let started = Instant::now();
    let turn = client.finalize_turn(key, None).await.unwrap();
    assert!(matches!(turn, TurnOutcome::Requested { .. }), "{turn:?}");
    loop {
        let ws = db.store.workstream(key).await.unwrap().unwrap();
        if ws.compactions > before {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "never committed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed().as_secs_f64();
    let run = db.store.runs(key, 1).await.unwrap().remove(0);
    (took, run)
}

/// One world; returns (scenario, seconds, run row) per measured compaction.
async fn run_once(llm: Llm, health: bool) -> Vec<(&'static str, f64, RunRow)> {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let fake = FakeLlm::start().await;
    let base_url = match llm {
        Llm::Refused => format!("http://127.0.0.1:{}/v1", compactor_e2e::bench::free_port()),
        Llm::ServerErrors { .. } => fake.url(),
    };
    let mut s = settings(&db.url, &redis, None);
    // The defaults of [llm] and [worker.retry]: what is measured.
    let defaults = Settings::default();
    s.worker.retry = defaults.worker.retry.clone();
    s.llm = LlmConfig {
        provider: Provider::OpenAi,
        base_url: Some(base_url),
        model: "fake-model".into(),
        unhealthy_after: if health {
            defaults.llm.unhealthy_after
        } else {
            0
        },
        ..defaults.llm.clone()
    };
    s.engine.trigger = compactor_e2e::small_model().trigger;
    let client =
        Compactor::from_parts(db.store.clone(), redis.queue().await, s.engine.clone()).await;
    let worker = start_worker(s).await;
    let key = EntityKey::parse("bench", "outage").unwrap();
    let mut out = Vec::new();
    match llm {
        Llm::Refused => {
            let (took, run) = compact(&db, &client, &key, 0).await;
            out.push(("refused_from_start", took, run));
        }
        Llm::ServerErrors { from_start: true } => {
            fake.fail_always(Some(Fault::ServerError));
            let (took, run) = compact(&db, &client, &key, 0).await;
            out.push(("5xx_from_start", took, run));
        }
        Llm::ServerErrors { from_start: false } => {
            let (_, run) = compact(&db, &client, &key, 0).await;
            assert!(!run.run.degraded, "the first compaction used the LLM");
            fake.fail_always(Some(Fault::ServerError));
            let (took, run) = compact(&db, &client, &key, 1).await;
            out.push(("5xx_mid_session", took, run));
            let (took, run) = compact(&db, &client, &key, 2).await;
            out.push(("while_unhealthy", took, run));
        }
    }
    worker.stop().await;
    out
}

fn main() {
    let rt = compactor_e2e::bench::runtime();
    let baseline = std::env::var("OUTAGE_BENCH_BASELINE").is_ok_and(|v| v == "1");
    rt.block_on(async {
        let mut all: Vec<(String, Vec<f64>)> = Vec::new();
        let mut record = |name: String, took: f64, run: &RunRow| {
            println!(
                "{name}: committed in {took:.2} s (degraded {:?}, reason {:?}, {} LLM calls, {} failed, attempt {})",
                run.run.degraded,
                run.run.degraded_reason.map(|r| r.as_str()),
                run.run.llm_calls,
                run.run.llm_failed_calls,
                run.run.attempt
            );
            result("llm_outage", &name, took, "s");
            match all.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => v.push(took),
                None => all.push((name, vec![took])),
            }
        };
        for _ in 0..bench_runs(3) {
            for llm in [
                Llm::Refused,
                Llm::ServerErrors { from_start: true },
                Llm::ServerErrors { from_start: false },
            ] {
                for (name, took, run) in run_once(llm, true).await {
                    record(name.to_owned(), took, &run);
                }
            }
            if baseline {
                for (name, took, run) in run_once(Llm::Refused, false).await {
                    record(format!("{name}_without_health"), took, &run);
                }
            }
        }
        println!("\ncompaction requested while the LLM is down → degraded commit, default settings (seconds, min / median / max):");
        for (name, mut v) in all {
            v.sort_by(f64::total_cmp);
            println!(
                "  {name:32} {:.2} / {:.2} / {:.2}",
                v[0],
                v[v.len() / 2],
                v[v.len() - 1]
            );
        }
    });
}
