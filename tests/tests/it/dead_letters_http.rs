//! The `/v1/queue/dead-letters` routes against a running worker: listed by
//! reason, domain and age a page at a time, purged and retried in bulk
//! after a dry run, a POST without a filter refused, the bearer token
//! required — and a retried letter's job run to completion by the worker,
//! its `compaction.requested` event written.

use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{client, conversation, eventually, settings, start_worker, TestRedis};
use compactor_producer::queue::{ClaimOutcome, FailAction, JobState, PauseScope, Queue, Trigger};
use compactor_shared::EntityKey;
use compactor_worker::settings::AdminToken;
use reqwest::StatusCode;
use serde_json::{json, Value};

const TOKEN: &str = "dlq-admin-token";

/// Dead-letters a job of `domain`/`entity` with `reason`; its entry.
async fn dead_letter(q: &Queue, domain: &str, entity: &str, reason: &str) -> String {
    let k = EntityKey::parse(domain, entity).unwrap();
    q.request_compaction(&k, Trigger::Manual { instructions: None })
        .await
        .unwrap();
    let ClaimOutcome::Claimed(job) = q.claim("w").await.unwrap() else {
        panic!("a job")
    };
    q.fail(&job, FailAction::DeadLetter, reason).await.unwrap();
    format!("{}|{}", k.job_key(), job.job_id)
}

struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn call(&self, req: reqwest::RequestBuilder, token: bool) -> (StatusCode, Value) {
        let req = if token { req.bearer_auth(TOKEN) } else { req };
        let response = req.timeout(Duration::from_secs(30)).send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(self.http.get(format!("{}{path}", self.base)), true)
            .await
    }

    async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.call(
            self.http.post(format!("{}{path}", self.base)).json(body),
            true,
        )
        .await
    }
}

fn entries(letters: &Value) -> Vec<String> {
    let mut v: Vec<String> = letters
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["entry"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_purged_and_retried_over_http() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    // The workstreams the retried jobs compact exist.
    let c = client(&db, &redis).await;
    for entity in ["a", "b"] {
        c.append_messages(&EntityKey::parse("chat", entity).unwrap(), conversation(3))
            .await
            .unwrap();
    }
    // Letters made before the worker runs, so it claims none of them.
    let q = redis.queue().await;
    let exhausted = "gave up after 3 attempts: llm: 503";
    let chat_a = dead_letter(&q, "chat", "a", exhausted).await;
    let chat_b = dead_letter(&q, "chat", "b", exhausted).await;
    let support_c = dead_letter(&q, "support", "c", exhausted).await;
    let chat_d = dead_letter(&q, "chat", "d", "stalled: the lease expired 3 times").await;

    let mut s = settings(&db.url, &redis, None);
    s.admin.token = Some(AdminToken::new(TOKEN));
    let worker = start_worker(s).await;
    let api = Api {
        base: worker.admin_url(),
        http: reqwest::Client::new(),
    };

    // The token is required.
    for (method, path) in [
        (reqwest::Method::GET, "/v1/queue/dead-letters"),
        (reqwest::Method::POST, "/v1/queue/dead-letters/retry"),
        (reqwest::Method::POST, "/v1/queue/dead-letters/purge"),
    ] {
        let req = api
            .http
            .request(method, format!("{}{path}", api.base))
            .json(&json!({"all": true, "dry_run": false}));
        let (status, body) = api.call(req, false).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {body}");
    }
    assert_eq!(q.counts().await.unwrap().dead, 4, "nothing was touched");

    // Listing: newest first, a page at a time, and by filter.
    let (status, page) = api.get("/v1/queue/dead-letters?limit=3").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["dead_letters"].as_array().unwrap().len(), 3);
    let cursor = page["next_cursor"].as_str().unwrap();
    let (_, rest) = api
        .get(&format!(
            "/v1/queue/dead-letters?limit=3&cursor={}",
            urlencode(cursor)
        ))
        .await;
    assert_eq!(rest["dead_letters"].as_array().unwrap().len(), 1);
    assert!(rest["next_cursor"].is_null());
    let mut all = entries(&page["dead_letters"]);
    all.extend(entries(&rest["dead_letters"]));
    all.sort();
    let mut want = vec![
        chat_a.clone(),
        chat_b.clone(),
        support_c.clone(),
        chat_d.clone(),
    ];
    want.sort();
    assert_eq!(all, want, "every letter once");
    let (_, stalled) = api.get("/v1/queue/dead-letters?reason=stalled").await;
    assert_eq!(
        entries(&stalled["dead_letters"]),
        std::slice::from_ref(&chat_d)
    );
    let letter = &stalled["dead_letters"][0];
    assert_eq!(
        (&letter["kind"], &letter["domain"], &letter["attempts"]),
        (&"stalled".into(), &"chat".into(), &1.into())
    );
    let (_, exhausted_chat) = api
        .get("/v1/queue/dead-letters?reason=exhausted&domain=chat")
        .await;
    assert_eq!(
        entries(&exhausted_chat["dead_letters"]),
        [chat_a.clone(), chat_b.clone()]
    );
    let (_, old) = api.get("/v1/queue/dead-letters?older_than_secs=3600").await;
    assert!(old["dead_letters"].as_array().unwrap().is_empty(), "{old}");
    let (status, bad) = api.get("/v1/queue/dead-letters?reason=Gave%20up").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(bad["error"]["code"], "invalid_query");
    let (status, bad) = api.get("/v1/queue/dead-letters?cursor=nope").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");

    // A POST without a filter is refused unless it says "all".
    for path in [
        "/v1/queue/dead-letters/retry",
        "/v1/queue/dead-letters/purge",
    ] {
        let (status, body) = api.post(path, &json!({"dry_run": false})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(body["error"]["code"], "invalid_body");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"all\""));
    }
    let (status, all) = api
        .post(
            "/v1/queue/dead-letters/purge",
            &json!({"all": true, "dry_run": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!((&all["matched"], &all["purged"]), (&4.into(), &0.into()));
    assert_eq!(
        q.counts().await.unwrap().dead,
        4,
        "a dry run changes nothing"
    );

    // An age written as a float without a fraction is a whole number
    // (JSON Schema's integer); nothing is an hour old.
    let (status, old) = api
        .post(
            "/v1/queue/dead-letters/purge",
            &json!({"older_than_secs": 3600.0, "dry_run": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{old}");
    assert_eq!(old["matched"], 0);

    // Purge by domain.
    let (_, purged) = api
        .post(
            "/v1/queue/dead-letters/purge",
            &json!({"domain": "support", "dry_run": false}),
        )
        .await;
    assert_eq!(
        (&purged["matched"], &purged["purged"]),
        (&1.into(), &1.into())
    );
    assert_eq!(entries(&purged["sample"]), [support_c]);

    // Retry by reason and domain: dry first, then for real; the worker
    // runs both jobs to the end.
    let filter = json!({"reason": "exhausted", "domain": "chat", "dry_run": true});
    let (_, dry) = api.post("/v1/queue/dead-letters/retry", &filter).await;
    assert_eq!((&dry["matched"], &dry["retried"]), (&2.into(), &0.into()));
    assert_eq!(entries(&dry["sample"]), [chat_a.clone(), chat_b.clone()]);
    let mut real = filter.clone();
    real["dry_run"] = false.into();
    let (status, retried) = api.post("/v1/queue/dead-letters/retry", &real).await;
    assert_eq!(status, StatusCode::OK, "{retried}");
    assert_eq!(
        (
            &retried["matched"],
            &retried["retried"],
            &retried["skipped"]
        ),
        (&2.into(), &2.into(), &0.into())
    );
    for entity in ["a", "b"] {
        let k = EntityKey::parse("chat", entity).unwrap();
        eventually(
            &format!("the retried job of {entity} ran"),
            Duration::from_secs(20),
            || async { matches!(q.job_state(&k).await.unwrap(), Some(JobState::Done { .. })) },
        )
        .await;
    }
    assert_eq!(
        db.scalar(
            "SELECT COUNT(*) AS n FROM events WHERE kind = 'compaction.requested' \
             AND entity_id IN ('a', 'b') AND payload LIKE '%\"manual\"%'"
        )
        .await,
        2,
        "each retry is a request, with the trigger it had"
    );
    let (_, left) = api.get("/v1/queue/dead-letters").await;
    assert_eq!(entries(&left["dead_letters"]), [chat_d]);
    worker.stop().await;
}

/// Percent-encodes a cursor for a query string.
fn urlencode(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A bulk call works for `admin.bulk_call_budget`, then answers with where
/// it stopped (`next_cursor`), so a set of any size is worked through in
/// calls that each end within `admin.request_timeout` (one call for 30,000
/// letters was cut off by it). With a budget of 1 ns each call takes one
/// batch of 200 letters: 450 letters take three calls, each after the first
/// sent with the previous `next_cursor` as `after`, and every letter is
/// requested again exactly once. A malformed `after` is 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_call_stops_at_its_budget_and_the_next_goes_on_from_its_cursor() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let q = redis.queue().await;
    for i in 0..450 {
        dead_letter(&q, "chat", &format!("e{i}"), "gave up after 3 attempts").await;
    }
    // The retried jobs wait, so none dies again meanwhile.
    q.pause(&PauseScope::Queue).await.unwrap();
    let mut s = settings(&db.url, &redis, None);
    s.admin.token = Some(AdminToken::new(TOKEN));
    s.admin.bulk_call_budget = Some(Duration::from_nanos(1));
    let worker = start_worker(s).await;
    let api = Api {
        base: worker.admin_url(),
        http: reqwest::Client::new(),
    };

    let (status, body) = api
        .post(
            "/v1/queue/dead-letters/retry",
            &json!({"all": true, "dry_run": false, "after": "not-a-cursor"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_body");
    assert_eq!(q.counts().await.unwrap().dead, 450, "nothing was touched");

    let (mut calls, mut matched, mut retried) = (0, 0, 0);
    let mut after: Option<String> = None;
    loop {
        let mut body = json!({"all": true, "dry_run": false});
        if let Some(cursor) = &after {
            body["after"] = json!(cursor);
        }
        let (status, report) = api.post("/v1/queue/dead-letters/retry", &body).await;
        assert_eq!(status, StatusCode::OK, "{report}");
        calls += 1;
        matched += report["matched"].as_u64().unwrap();
        retried += report["retried"].as_u64().unwrap();
        match report["next_cursor"].as_str() {
            Some(cursor) => after = Some(cursor.to_owned()),
            None => break,
        }
        assert!(calls < 3, "one batch of 200 per call: {report}");
    }
    assert_eq!((calls, matched, retried), (3, 450, 450));
    let counts = q.counts().await.unwrap();
    assert_eq!((counts.dead, counts.waiting), (0, 450));
    worker.stop().await;
}
