//! The queue routes of the admin API against a running worker: a
//! compaction whose LLM is slow (wiremock) is found running with the worker
//! holding it, cancelled over HTTP while the LLM answers, and does not
//! commit; the job is a dead letter of reason `cancelled`; retried, it
//! runs and commits. The workers route names the worker and its running
//! job. Real PostgreSQL and Redis.

use std::time::Duration;

use compactor_e2e::db::TestDb;
use compactor_e2e::{
    eventually, key, request_compaction, settings, small_window, start_worker, FakeLlm, Fault,
    TestRedis,
};
use compactor_producer::store::RunOutcome;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// `GET` or `POST` (with a JSON body) on the admin API: status and body.
async fn call(base: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let http = reqwest::Client::new();
    let url = format!("{base}{path}");
    let request = match body {
        Some(body) => http.post(url).json(&body),
        None => http.get(url),
    };
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_compaction_cancelled_over_http_does_not_commit_and_its_retry_does() {
    let db = TestDb::postgres().await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    s.engine = small_window();
    // One slow answer (within the LLM timeout): the run is cancelled
    // while it waits for it.
    llm.fail_next([Fault::Hang(Duration::from_millis(4_000))]);
    let worker = start_worker(s).await;
    let base = worker.admin_url();
    let c = compactor_producer::client::Compactor::from_parts(
        db.store.clone(),
        redis.queue().await,
        small_window(),
    )
    .await;
    let k = key("q-cancel");
    let job_id = request_compaction(&c, &k).await;

    // Running, held by the worker, while the LLM is asked.
    eventually("the LLM is asked", Duration::from_secs(20), || async {
        !llm.calls().is_empty()
    })
    .await;
    let (status, running) = call(&base, "/v1/queue/jobs?state=running", None).await;
    assert_eq!(status, StatusCode::OK, "{running}");
    let job = &running["jobs"][0];
    assert_eq!(job["job_id"], job_id, "{running}");
    assert_eq!(job["domain"], "chat");
    assert_eq!(job["entity_id"], "q-cancel");
    let holder = job["worker"].as_str().unwrap().to_owned();
    let (_, workers) = call(&base, "/v1/queue/workers", None).await;
    let me = workers["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == holder.as_str())
        .unwrap_or_else(|| panic!("{holder} in {workers}"));
    assert_eq!(me["running_jobs"], 1);
    assert_eq!(me["gone"], false);

    // Cancelled while the LLM answers.
    let (status, cancelled) = call(
        &base,
        &format!("/v1/queue/jobs/{job_id}/cancel"),
        Some(json!({"then": "dead"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["was"], "running");
    assert_eq!(cancelled["entity_lease_revoked"], true);
    let (_, dead) = call(&base, &format!("/v1/queue/jobs/{job_id}"), None).await;
    assert_eq!(dead["state"], "dead", "{dead}");
    assert_eq!(dead["last_error"], "cancelled");
    let (status, again) = call(
        &base,
        &format!("/v1/queue/jobs/{job_id}/cancel"),
        Some(json!({"then": "dead"})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(again["error"]["code"], "job_finished");

    // The cancelled attempt ends without committing: its run is recorded,
    // and not as a commit.
    eventually(
        "the cancelled attempt ends",
        Duration::from_secs(30),
        || async { !db.store.runs(&k, 10).await.unwrap().is_empty() },
    )
    .await;
    let runs = db.store.runs(&k, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_ne!(runs[0].run.outcome, RunOutcome::Committed, "{runs:?}");
    assert_eq!(
        db.store.workstream(&k).await.unwrap().unwrap().compactions,
        0
    );

    // Retried, the job runs and commits.
    let (_, letters) = call(&base, "/v1/queue/jobs?state=dead", None).await;
    assert_eq!(letters["jobs"][0]["job_id"], job_id);
    let letter = &c.queue().dead_letters(10).await.unwrap()[0];
    assert_eq!(letter.reason, "cancelled");
    c.queue().retry_dead(&letter.entry).await.unwrap().unwrap();
    eventually("the retry commits", Duration::from_secs(30), || async {
        db.store.workstream(&k).await.unwrap().unwrap().compactions == 1
    })
    .await;
    let runs = db.store.runs(&k, 10).await.unwrap();
    let committed: Vec<i64> = runs
        .iter()
        .filter(|r| r.run.outcome == RunOutcome::Committed)
        .map(|r| r.run.job_id)
        .collect();
    assert_eq!(committed.len(), 1);
    assert_ne!(committed[0], i64::try_from(job_id).unwrap(), "the retry's");
    worker.stop().await;
}
