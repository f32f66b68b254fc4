//! Workstreams listed for operators by state — breaker open, over the
//! trigger, degraded last time — by domain and entity id prefix, a page at
//! a time in key order: the store's query on PostgreSQL and on SQLite, and
//! `GET /v1/workstreams` against a running worker.

use chrono::Utc;
use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{client, conversation, settings, start_worker, TestRedis};
use compactor_producer::client::Compactor;
use compactor_producer::store::{
    DegradedReason, NewRun, RunOutcome, WorkstreamListing, WorkstreamQuery, WorkstreamStateFilter,
};
use compactor_shared::EntityKey;
use compactor_worker::settings::AdminToken;
use reqwest::StatusCode;
use serde_json::Value;

fn ws(domain: &str, entity: &str) -> EntityKey {
    EntityKey::parse(domain, entity).unwrap()
}

fn run(outcome: RunOutcome, degraded: Option<DegradedReason>) -> NewRun {
    NewRun {
        job_id: 7,
        attempt: 1,
        trigger: "auto".to_owned(),
        started_at: Utc::now(),
        finished_at: Utc::now(),
        outcome,
        degraded: degraded.is_some(),
        degraded_reason: degraded,
        tokens_before: 1000,
        tokens_after: 200,
        messages_compacted: 5,
        chunks: 1,
        rollups: 0,
        evidence_kept: 0,
        evidence_dropped: 0,
        llm_model: None,
        llm_calls: 0,
        llm_failed_calls: 0,
        llm_tokens_in: 0,
        llm_tokens_out: 0,
        error: None,
        summary: None,
        hook: Default::default(),
    }
}

/// The workstreams every test lists; returns the tokens of `chat/big`
/// (the only one at or over them).
async fn seed(db: &TestDb, c: &Compactor) -> u64 {
    let mut big_tokens = 0;
    for (domain, entity, turns) in [
        ("chat", "alpha", 2),
        ("chat", "al_x", 1),
        ("chat", "ALpha", 1),
        ("chat", "beta", 1),
        ("chat", "big", 40),
        ("support", "brk", 1),
        ("support", "brk2", 1),
    ] {
        let appended = c
            .append_messages(&ws(domain, entity), conversation(turns))
            .await
            .unwrap();
        if entity == "big" {
            big_tokens = appended.uncompacted_tokens;
        }
    }
    let store = c.store();
    let id = |e: &'static str, d: &'static str| async move {
        store.workstream(&ws(d, e)).await.unwrap().unwrap().id
    };
    // alpha: degraded last time; beta: degraded once, then not.
    let alpha = id("alpha", "chat").await;
    store
        .record_run(alpha, &run(RunOutcome::Committed, None))
        .await
        .unwrap();
    store
        .record_run(
            alpha,
            &run(RunOutcome::Committed, Some(DegradedReason::LlmUnavailable)),
        )
        .await
        .unwrap();
    let beta = id("beta", "chat").await;
    store
        .record_run(
            beta,
            &run(RunOutcome::Committed, Some(DegradedReason::LlmRefused)),
        )
        .await
        .unwrap();
    store
        .record_run(beta, &run(RunOutcome::Committed, None))
        .await
        .unwrap();
    // brk: the breaker open at its newest message; brk2: a newer message
    // arrived since it opened (closed again).
    db.exec(
        "UPDATE workstreams SET consecutive_failures = 3, \
         breaker_message_id = last_message_id WHERE entity_id = 'brk'",
    )
    .await;
    db.exec(
        "UPDATE workstreams SET consecutive_failures = 3, \
         breaker_message_id = last_message_id - 1 WHERE entity_id = 'brk2'",
    )
    .await;
    big_tokens
}

fn query() -> WorkstreamQuery {
    WorkstreamQuery {
        state: None,
        domain: None,
        entity_prefix: None,
        after: None,
        limit: 50,
        trigger_tokens: None,
    }
}

fn names(rows: &[WorkstreamListing]) -> Vec<String> {
    rows.iter()
        .map(|w| format!("{}/{}", w.key.domain(), w.key.entity_id()))
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

async fn lists_by_state_domain_and_prefix(backend: Backend) {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let c = client(&db, &redis).await;
    let big_tokens = seed(&db, &c).await;
    let store = c.store();
    let list = |q: WorkstreamQuery| async move { store.list_workstreams(&q).await.unwrap() };

    // Everything, in key order (the database's order of domain, then
    // entity id: PostgreSQL's collation may not be byte order).
    let all = list(query()).await;
    assert_eq!(
        sorted(names(&all.workstreams)),
        [
            "chat/ALpha",
            "chat/al_x",
            "chat/alpha",
            "chat/beta",
            "chat/big",
            "support/brk",
            "support/brk2"
        ]
    );
    assert!(all.next_after.is_none());
    let find = |name: &str| {
        all.workstreams
            .iter()
            .find(|w| w.key.entity_id() == name)
            .unwrap()
    };
    let alpha = find("alpha");
    assert_eq!(alpha.uncompacted_messages, 8, "conversation(2): 8 messages");
    assert!(alpha.uncompacted_tokens > 0);
    let last = alpha.last_run.as_ref().unwrap();
    assert_eq!(
        (last.outcome, last.degraded, last.degraded_reason),
        (
            RunOutcome::Committed,
            true,
            Some(DegradedReason::LlmUnavailable)
        )
    );
    assert!(find("ALpha").last_run.is_none(), "never compacted");

    let by_state = |state, trigger_tokens| WorkstreamQuery {
        state: Some(state),
        trigger_tokens,
        ..query()
    };
    let degraded = list(by_state(WorkstreamStateFilter::Degraded, None)).await;
    assert_eq!(names(&degraded.workstreams), ["chat/alpha"]);
    let open = list(by_state(WorkstreamStateFilter::BreakerOpen, None)).await;
    assert_eq!(names(&open.workstreams), ["support/brk"]);
    assert!(open.workstreams[0].breaker_open);
    assert_eq!(open.workstreams[0].consecutive_failures, 3);
    let over = list(by_state(
        WorkstreamStateFilter::OverTrigger,
        Some(big_tokens),
    ))
    .await;
    assert_eq!(names(&over.workstreams), ["chat/big"]);
    let unlimited = list(by_state(WorkstreamStateFilter::OverTrigger, None)).await;
    assert!(unlimited.workstreams.is_empty(), "an unlimited model");

    // Domain, and an entity prefix: exact and case-sensitive, `_` a
    // character like any other.
    let support = list(WorkstreamQuery {
        domain: Some("support".into()),
        ..query()
    })
    .await;
    assert_eq!(names(&support.workstreams), ["support/brk", "support/brk2"]);
    let prefixed = |p: &str| WorkstreamQuery {
        domain: Some("chat".into()),
        entity_prefix: Some(p.into()),
        ..query()
    };
    assert_eq!(
        names(&list(prefixed("al_")).await.workstreams),
        ["chat/al_x"]
    );
    assert_eq!(
        sorted(names(&list(prefixed("al")).await.workstreams)),
        ["chat/al_x", "chat/alpha"]
    );
    assert_eq!(
        names(&list(prefixed("ALp")).await.workstreams),
        ["chat/ALpha"]
    );
    // A state and a domain together.
    let none = list(WorkstreamQuery {
        domain: Some("chat".into()),
        ..by_state(WorkstreamStateFilter::BreakerOpen, None)
    })
    .await;
    assert!(none.workstreams.is_empty());

    // Pages of 3 by key: every workstream once, in the listing's order.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = list(WorkstreamQuery {
            after: after.clone(),
            limit: 3,
            ..query()
        })
        .await;
        assert!(page.workstreams.len() <= 3);
        seen.extend(names(&page.workstreams));
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, names(&all.workstreams));
}

#[tokio::test]
async fn workstreams_are_listed_by_state_domain_and_prefix_on_postgres() {
    lists_by_state_domain_and_prefix(Backend::Postgres).await;
}

#[tokio::test]
async fn workstreams_are_listed_by_state_domain_and_prefix_on_sqlite() {
    lists_by_state_domain_and_prefix(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workstreams_are_listed_over_http() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let c = client(&db, &redis).await;
    seed(&db, &c).await;
    let mut s = settings(&db.url, &redis, None);
    s.admin.token = Some(AdminToken::new("ws-token"));
    let worker = start_worker(s).await;
    let http = reqwest::Client::new();
    let get = |path: &str, token: bool| {
        let mut req = http.get(format!("{}{path}", worker.admin_url()));
        if token {
            req = req.bearer_auth("ws-token");
        }
        async move {
            let response = req.send().await.unwrap();
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (status, _) = get("/v1/workstreams", false).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, open) = get("/v1/workstreams?state=breaker_open", true).await;
    assert_eq!(status, StatusCode::OK, "{open}");
    let rows = open["workstreams"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            &rows[0]["domain"],
            &rows[0]["entity_id"],
            &rows[0]["breaker"]
        ),
        (&"support".into(), &"brk".into(), &"open".into())
    );
    assert!(open["next_cursor"].is_null());

    let (_, degraded) = get("/v1/workstreams?state=degraded&domain=chat", true).await;
    let row = &degraded["workstreams"][0];
    assert_eq!(row["entity_id"], "alpha");
    assert_eq!(row["uncompacted_messages"], 8);
    assert_eq!(row["last_run"]["degraded_reason"], "llm_unavailable");
    assert_eq!(row["last_run"]["outcome"], "committed");

    let (_, first) = get("/v1/workstreams?domain=chat&q=al&limit=1", true).await;
    assert_eq!(first["workstreams"][0]["entity_id"], "al_x");
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    assert_eq!(cursor, "chat/al_x");
    let (_, second) = get(
        &format!("/v1/workstreams?domain=chat&q=al&limit=1&cursor={cursor}"),
        true,
    )
    .await;
    assert_eq!(second["workstreams"][0]["entity_id"], "alpha");

    for bad in [
        "/v1/workstreams?state=open",
        "/v1/workstreams?domain=Chat",
        "/v1/workstreams?q=a%2Fb",
        "/v1/workstreams?cursor=nope",
        "/v1/workstreams?limit=0",
    ] {
        let (status, body) = get(bad, true).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "invalid_query", "{bad}");
    }
    worker.stop().await;
}
