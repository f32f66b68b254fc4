//! The pre-compaction hook, end to end: a real worker (`start_worker`) on
//! real Redis and PostgreSQL (SQLite for the replacement), the hook a
//! wiremock server on loopback, the LLM the fake OpenAI-compatible server.
//! The hook adds instructions and context (they reach the LLM's request,
//! and the extractive summary), replaces the summary (no LLM call), skips
//! (nothing compacted, a `skipped` run), times out and answers junk (the
//! compaction goes ahead without it); each run row says what it did, and
//! `GET …/runs` shows it.

use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{
    key, request_compaction, settings, small_window, start_worker, FakeLlm, TestRedis, Worker,
};
use compactor_producer::client::Compactor;
use compactor_producer::store::{HookOutcome, RunOutcome, RunRow};
use compactor_shared::EntityKey;
use compactor_worker::outbox::{sign, WebhookSecret};
use serde_json::{json, Value};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One case: a database, a queue, the hook answering `answer`, maybe the
/// fake LLM, and a worker using them.
struct Case {
    db: TestDb,
    _redis: TestRedis,
    hook: MockServer,
    llm: Option<FakeLlm>,
    worker: Worker,
    client: Compactor,
    key: EntityKey,
}

async fn case(backend: Backend, answer: ResponseTemplate, with_llm: bool) -> Case {
    case_with(backend, answer, with_llm, Duration::from_secs(2)).await
}

async fn case_with(
    backend: Backend,
    answer: ResponseTemplate,
    with_llm: bool,
    timeout: Duration,
) -> Case {
    case_tuned(backend, answer, with_llm, timeout, |_| {}).await
}

/// [`case_with`], the worker's settings adjusted by `tune`.
async fn case_tuned(
    backend: Backend,
    answer: ResponseTemplate,
    with_llm: bool,
    timeout: Duration,
    tune: impl FnOnce(&mut compactor_worker::settings::Settings),
) -> Case {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let hook = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(answer)
        .mount(&hook)
        .await;
    let llm = if with_llm {
        Some(FakeLlm::start().await)
    } else {
        None
    };
    let mut s = settings(&db.url, &redis, llm.as_ref().map(FakeLlm::url).as_deref());
    s.engine = small_window();
    s.hook.url = Some(format!("{}/pre-compact", hook.uri()));
    s.hook.timeout = timeout;
    s.hook.secret = Some(WebhookSecret::parse(SECRET).unwrap());
    tune(&mut s);
    let worker = start_worker(s).await;
    let client = Compactor::from_parts(db.store.clone(), redis.queue().await, small_window()).await;
    Case {
        db,
        _redis: redis,
        hook,
        llm,
        worker,
        client,
        key: key("hooked"),
    }
}

impl Case {
    /// Requests a compaction and waits for its run row.
    async fn compact(&self) -> RunRow {
        request_compaction(&self.client, &self.key).await;
        let store = self.db.store.clone();
        let k = self.key.clone();
        compactor_e2e::eventually("the compaction's run row", Duration::from_secs(60), || {
            let store = store.clone();
            let k = k.clone();
            async move { !store.runs(&k, 1).await.unwrap().is_empty() }
        })
        .await;
        self.db.store.runs(&self.key, 1).await.unwrap().remove(0)
    }

    /// The bodies the hook received, checking each one's signature.
    async fn hook_requests(&self) -> Vec<Value> {
        let key = WebhookSecret::parse(SECRET).unwrap();
        let mut bodies = Vec::new();
        for request in self.hook.received_requests().await.unwrap() {
            let header = |name: &str| {
                request
                    .headers
                    .get(name)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned()
            };
            let body = String::from_utf8(request.body.clone()).unwrap();
            let expected = sign::signature(
                key.key(),
                &header("webhook-id"),
                header("webhook-timestamp").parse().unwrap(),
                &body,
            );
            assert_eq!(header("webhook-signature"), expected, "signed");
            bodies.push(serde_json::from_str(&body).unwrap());
        }
        bodies
    }

    /// Summarization requests the LLM received (not health probes).
    fn llm_prompts(&self) -> Vec<String> {
        self.llm
            .as_ref()
            .map(|l| {
                l.calls()
                    .into_iter()
                    .filter(|c| !c.is_probe())
                    .map(|c| c.user)
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn stop(self) {
        self.worker.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hooks_instructions_and_context_reach_the_llm_request() {
    let answer = ResponseTemplate::new(200).set_body_json(json!({
        "instructions": "Keep order number SKU-7731 verbatim",
        "context": ["The customer is on the enterprise plan"],
    }));
    let c = case(Backend::Postgres, answer, true).await;
    let run = c.compact().await;
    assert_eq!(run.run.outcome, RunOutcome::Committed);
    assert_eq!(run.run.hook.outcome, Some(HookOutcome::Instructions));
    assert!(run.run.hook.duration_ms.is_some());
    let prompts = c.llm_prompts();
    assert!(!prompts.is_empty());
    let first = &prompts[0];
    assert!(
        first.contains("<operator-instructions>\nKeep order number SKU-7731 verbatim"),
        "{first}"
    );
    assert!(first.contains("[#0 CONTEXT]"), "{first}");
    assert!(first.contains("- The customer is on the enterprise plan"));
    // Once, with the first chunk only.
    let with_context = prompts
        .iter()
        .filter(|p| p.contains("[#0 CONTEXT]"))
        .count();
    assert_eq!(with_context, 1);

    // What the hook was told: the workstream, the job, the span.
    let requests = c.hook_requests().await;
    assert_eq!(requests.len(), 1);
    let body = &requests[0];
    assert_eq!(
        body["workstream"],
        json!({"domain": "chat", "entity_id": "hooked"})
    );
    assert_eq!(body["job_id"], run.run.job_id);
    assert_eq!(body["trigger"], "reactive");
    assert_eq!(body["summary_format"], "sections");
    assert_eq!(body["previous_summary"], Value::Null);
    assert_eq!(body["span"]["message_count"], run.run.messages_compacted);
    let ws = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    assert_eq!(
        body["span"]["last_message_id"],
        ws.last_compacted_message_id.unwrap().0
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["id"], body["span"]["first_message_id"]);
    assert!(!messages[0]["text"].as_str().unwrap().is_empty());
    c.stop().await;
}

/// A run that fails after the hook answered records what the hook did, as
/// a committed one does (the failed run's row had no hook outcome).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_fails_after_the_hook_answered_records_the_hooks_outcome() {
    let answer = ResponseTemplate::new(200).set_body_json(json!({
        "instructions": "Keep order number SKU-7731 verbatim",
    }));
    let c = case_tuned(
        Backend::Postgres,
        answer,
        true,
        Duration::from_secs(2),
        |s| {
            s.llm.fallback_to_extractive = false;
        },
    )
    .await;
    // A key the provider refuses: the attempt fails for good, at once.
    c.llm
        .as_ref()
        .unwrap()
        .fail_always(Some(compactor_e2e::Fault::Unauthorized));
    let run = c.compact().await;
    assert_eq!(run.run.outcome, RunOutcome::Failed, "{:?}", run.run.error);
    assert_eq!(run.run.hook.outcome, Some(HookOutcome::Instructions));
    assert!(run.run.hook.duration_ms.is_some());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_lines_reach_the_extractive_summary() {
    let answer = ResponseTemplate::new(200)
        .set_body_json(json!({"context": ["The customer is on the enterprise plan"]}));
    let c = case(Backend::Postgres, answer, false).await;
    let run = c.compact().await;
    assert_eq!(run.run.outcome, RunOutcome::Committed);
    assert_eq!(run.run.hook.outcome, Some(HookOutcome::Context));
    let ws = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    let facts = &ws.summary.unwrap().key_facts;
    assert!(
        facts
            .iter()
            .any(|f| f == "Context: The customer is on the enterprise plan"),
        "{facts:?}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_summary_is_stored_and_the_llm_is_not_called_on_sqlite() {
    let summary = "KEY FACTS:\n- The hook wrote this summary for order SKU-7731\n\
                   CONVERSATION FLOW:\n- The user and the assistant debugged the tests\n\
                   OPEN THREADS:\n- Ship the fix\n";
    let answer = ResponseTemplate::new(200).set_body_json(json!({ "replace": summary }));
    let c = case(Backend::Sqlite, answer, true).await;
    let run = c.compact().await;
    assert_eq!(run.run.hook.outcome, Some(HookOutcome::Replaced));
    assert!(matches!(
        run.run.outcome,
        RunOutcome::Committed | RunOutcome::NoProgress
    ));
    assert_eq!(run.run.llm_calls, 0);
    assert!(c.llm_prompts().is_empty(), "the LLM was not asked");
    let ws = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    assert!(ws.last_compacted_message_id.is_some(), "compacted");
    let stored = ws.summary.unwrap();
    assert_eq!(
        stored.key_facts,
        ["The hook wrote this summary for order SKU-7731"]
    );
    assert_eq!(stored.open_threads, ["Ship the fix"]);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_that_does_not_parse_fails_open() {
    let answer = ResponseTemplate::new(200)
        .set_body_json(json!({ "replace": "just some prose, no sections at all" }));
    let c = case(Backend::Postgres, answer, true).await;
    let run = c.compact().await;
    assert_eq!(run.run.hook.outcome, Some(HookOutcome::InvalidReplacement));
    assert_eq!(run.run.outcome, RunOutcome::Committed);
    assert!(!c.llm_prompts().is_empty(), "summarized by the LLM instead");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_leaves_the_messages_uncompacted_and_records_a_skipped_run() {
    let answer = ResponseTemplate::new(200).set_body_json(json!({"skip": true}));
    let c = case(Backend::Postgres, answer, true).await;
    let run = c.compact().await;
    assert_eq!(run.run.outcome, RunOutcome::Skipped);
    assert_eq!(run.run.hook.outcome, Some(HookOutcome::Skipped));
    assert!(c.llm_prompts().is_empty());
    let ws = c.db.store.workstream(&c.key).await.unwrap().unwrap();
    assert_eq!(ws.last_compacted_message_id, None);
    assert!(ws.summary.is_none());
    assert_eq!(ws.version, 0, "the workstream is as it was");
    // The job is done, and the skip asked for no new one: no loop.
    compactor_e2e::eventually("the job is done", Duration::from_secs(10), || async {
        let status = c.client.status(&c.key).await.unwrap();
        status.lease.is_none()
            && serde_json::to_value(&status.job).unwrap()["state"] == json!("done")
    })
    .await;
    assert_eq!(c.hook_requests().await.len(), 1);

    // Operators see it over HTTP.
    let url = format!(
        "{}/v1/workstreams/chat/hooked/runs?limit=5",
        c.worker.admin_url()
    );
    let page: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert_eq!(page["runs"][0]["outcome"], "skipped");
    assert_eq!(page["runs"][0]["hook_outcome"], "skipped");
    assert_eq!(page["runs"][0]["trigger"], "reactive");
    // Nothing was compacted: no candidate evidence line kept or dropped.
    assert_eq!(page["runs"][0]["evidence_kept"], 0);
    assert_eq!(page["runs"][0]["evidence_dropped"], 0);
    assert_eq!(page["next_before"], Value::Null);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_slower_than_its_timeout_is_compacted_past() {
    let slow = ResponseTemplate::new(200)
        .set_body_json(json!({"skip": true}))
        .set_delay(Duration::from_secs(20));
    let c = case_with(Backend::Postgres, slow, true, Duration::from_millis(300)).await;
    let run = c.compact().await;
    assert_eq!(run.run.hook.outcome, Some(HookOutcome::Timeout));
    assert_eq!(
        run.run.outcome,
        RunOutcome::Committed,
        "the skip came too late"
    );
    assert!(!c.llm_prompts().is_empty());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_answering_garbage_fails_open_and_is_counted() {
    let garbage = ResponseTemplate::new(200).set_body_string("<html>oops</html>");
    let c = case(Backend::Postgres, garbage, true).await;
    let run = c.compact().await;
    assert_eq!(run.run.hook.outcome, Some(HookOutcome::Malformed));
    assert_eq!(run.run.outcome, RunOutcome::Committed);
    assert!(!c.llm_prompts().is_empty());
    let metrics = reqwest::get(format!("{}/metrics", c.worker.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("compactor_hook_calls_total{outcome=\"malformed\"}"))
        .unwrap_or_else(|| panic!("no malformed counter in\n{metrics}"));
    let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 1.0, "{line}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_answering_an_error_status_fails_open() {
    let c = case(Backend::Postgres, ResponseTemplate::new(503), true).await;
    let run = c.compact().await;
    assert_eq!(run.run.hook.outcome, Some(HookOutcome::HttpError));
    assert_eq!(run.run.outcome, RunOutcome::Committed);
    c.stop().await;
}
