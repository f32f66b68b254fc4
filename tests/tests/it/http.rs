//! The admin HTTP API of a worker started as the binary starts it, called
//! over a real socket (reqwest against the port the worker bound, or a raw
//! TCP stream where a client must misbehave): every route, the bearer
//! token, malformed keys, bodies and queries, `/readyz` and
//! `/readyz/worker` when Redis goes away or the schema falls behind, the
//! server's bounds (body size without reading, slow and idle connections,
//! the connection limit, the long-poll limit, request and statement
//! timeouts, the context's history bound), and `/metrics` after end-to-end
//! compactions. Real Redis, PostgreSQL and SQLite; the LLM faked at the HTTP
//! boundary.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{
    conversation, eventually, settings, start_worker, FakeLlm, Fault, PrivateRedis, TestRedis,
    Worker,
};
use compactor_producer::metrics::{Family, Kind};
use compactor_worker::settings::{AdminToken, Settings};
use compactor_worker::startup::{Application, StartupError};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// A 20,000-token model: `conversation(200)` is over its trigger.
fn small_window(s: &mut Settings) {
    s.engine.trigger = compactor_e2e::small_window().trigger;
}

/// Starts a worker on `db`, `redis` and the fake `llm` (extractive
/// without), its settings changed by `configure`, and a client of its
/// admin API: how the tests here begin.
async fn serve(
    db: &TestDb,
    redis: &TestRedis,
    llm: Option<&FakeLlm>,
    configure: impl FnOnce(&mut Settings),
) -> (Worker, Api) {
    let mut s = settings(&db.url, redis, llm.map(FakeLlm::url).as_deref());
    configure(&mut s);
    let worker = start_worker(s).await;
    let api = Api::new(&worker);
    (worker, api)
}

/// A client of one worker's admin API.
struct Api {
    base: String,
    client: reqwest::Client,
    token: Option<String>,
}

/// A response: status, JSON body (`Null` when not JSON), and headers.
struct Reply {
    status: StatusCode,
    body: Value,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Reply {
    /// The `error.code` of an error body, checking its shape.
    fn code(&self) -> &str {
        let code = self.body["error"]["code"].as_str();
        assert!(
            self.body["error"]["message"].is_string(),
            "an error body has a message: {}",
            self.text
        );
        assert!(
            self.headers[reqwest::header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "errors are JSON"
        );
        code.unwrap_or_else(|| panic!("an error body: {} {}", self.status, self.text))
    }

    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }

    /// Asserts this is an error: `status`, `code`, and a message that
    /// says `says`.
    fn assert_error(&self, status: StatusCode, code: &str, says: &str) {
        assert_eq!(self.status, status, "{}", self.text);
        assert_eq!(self.code(), code, "{}", self.text);
        assert!(self.message().contains(says), "{}", self.text);
    }
}

impl Api {
    fn new(worker: &Worker) -> Api {
        Api {
            base: worker.admin_url(),
            client: reqwest::Client::new(),
            token: None,
        }
    }

    fn with_token(mut self, token: &str) -> Api {
        self.token = Some(token.to_owned());
        self
    }

    async fn call(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Reply {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .timeout(Duration::from_secs(30));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            body,
            headers,
            text,
        }
    }

    async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: &Value) -> Reply {
        self.call(Method::POST, path, Some(serde_json::to_vec(body).unwrap()))
            .await
    }

    async fn post_raw(&self, path: &str, body: &[u8]) -> Reply {
        self.call(Method::POST, path, Some(body.to_vec())).await
    }
}

/// `/v1/workstreams/chat/<entity>/<route>`.
fn ws(entity: &str, route: &str) -> String {
    format!("/v1/workstreams/chat/{entity}/{route}")
}

fn messages(turns: usize) -> Value {
    serde_json::to_value(conversation(turns)).unwrap()
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Appends a long conversation (`messages(200)`, over the small window's
/// trigger) to `entity` and ends the turn; the reply, which must say a
/// compaction was requested.
async fn finalize_long(api: &Api, entity: &str) -> Reply {
    let reply = api
        .post(
            &ws(entity, "messages"),
            &json!({"messages": messages(200), "finalize": true}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["turn"]["outcome"], "requested", "{}", reply.text);
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workstream_routes_store_compact_wait_and_serve_the_context() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let (worker, api) = serve(&db, &redis, Some(&llm), small_window).await;

    let health = api.get("/healthz").await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.body, json!({"status": "ok"}));
    let ready = api.get("/readyz").await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.text);
    assert_eq!(
        ready.body,
        json!({"ready": true, "checks": {"database": "ok", "schema": "ok"}})
    );
    let worker_side = api.get("/readyz/worker").await;
    assert_eq!(worker_side.status, StatusCode::OK, "{}", worker_side.text);
    assert_eq!(
        worker_side.body,
        json!({"ready": true, "checks": {"redis": "ok", "runtime": "running"}})
    );

    // Store a long conversation; nothing is requested yet.
    let stored = api
        .post(
            &ws("http-1", "messages"),
            &json!({"messages": messages(200)}),
        )
        .await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.text);
    assert_eq!(stored.body["ids"].as_array().unwrap().len(), 800);
    assert!(stored.body["uncompacted_tokens"].as_u64().unwrap() > 14_000);
    assert!(
        stored.body.get("turn").is_none(),
        "no turn without finalize"
    );
    let status = api.get(&ws("http-1", "status")).await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.text);
    assert_one_job_key(&status.text);
    assert_eq!(status.body["domain"], "chat");
    assert_eq!(status.body["entity_id"], "http-1");
    assert_eq!(status.body["compactions"], 0);
    assert_eq!(status.body["job"], Value::Null);
    assert_eq!(status.body["lease"], Value::Null);

    // The next turn ends over the trigger: a compaction is requested. The
    // LLM's first answer takes a while, so the wait below finds it running.
    llm.fail_next([Fault::Hang(Duration::from_millis(1_500))]);
    let turn = api
        .post(
            &ws("http-1", "messages"),
            &json!({
                "messages": [{"role": "user", "parts": [{"type": "text", "text": "and now?"}]}],
                "finalize": true
            }),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    assert_eq!(turn.body["ids"].as_array().unwrap().len(), 1);
    assert_eq!(turn.body["turn"]["outcome"], "requested", "{}", turn.text);
    assert_eq!(turn.body["turn"]["enqueue"]["outcome"], "added");
    let job_id = turn.body["turn"]["enqueue"]["job_id"].as_u64().unwrap();
    eventually("the compaction runs", Duration::from_secs(20), || async {
        api.get(&ws("http-1", "status")).await.body["lease"].is_object()
    })
    .await;
    let running = api.get(&ws("http-1", "status")).await;
    assert_one_job_key(&running.text);
    assert_eq!(running.body["job"]["job_id"], job_id);
    assert_eq!(running.body["job"]["state"], "running");

    let waited = api.get(&ws("http-1", "wait?timeout_ms=30000")).await;
    assert_eq!(waited.status, StatusCode::OK, "{}", waited.text);
    assert_eq!(waited.body["outcome"], "compacted", "{}", waited.text);
    assert!(waited.body["waited_ms"].is_u64());
    let event = &waited.body["event"];
    assert_eq!(event["outcome"], "compacted", "{}", waited.text);
    // The 800 messages do not fit the 20k window at all: the turn asked
    // for a reactive compaction (the priority lane), not an automatic one.
    assert_eq!(event["trigger"], "reactive");
    assert_eq!(event["job_id"], job_id);
    assert!(event["tokens_after"].as_u64().unwrap() < event["tokens_before"].as_u64().unwrap());

    let done = api.get(&ws("http-1", "status")).await;
    assert_one_job_key(&done.text);
    assert_eq!(done.body["compactions"], 1, "{}", done.text);
    assert_eq!(done.body["lease"], Value::Null);
    assert_eq!(done.body["breaker_open"], false);
    assert!(done.body["last_compacted_at"].is_string());
    assert_eq!(done.body["job"]["state"], "done", "{}", done.text);

    // The next turn's context: the summary first, then the 6-message tail.
    let context = api.get(&ws("http-1", "context")).await;
    assert_eq!(context.status, StatusCode::OK, "{}", context.text);
    let messages = context.body["messages"].as_array().unwrap();
    // The 6-message tail grows to 7 so as not to separate the last tool
    // call from its result.
    assert_eq!(messages.len(), 8, "summary + tail");
    assert_eq!(messages[0]["role"], "system");
    // The summary the (slow) fake LLM wrote.
    let preamble = messages[0]["parts"][0]["text"].as_str().unwrap();
    assert!(preamble.contains("- late"), "{preamble}");
    assert_eq!(messages[7]["parts"][0]["text"], "and now?");
    assert!(context.body["tokens"].as_u64().unwrap() > 0);
    assert_eq!(context.body["over_budget"], false);

    // Nothing runs now: a wait returns at once, without an event, in
    // either mode.
    for query in ["timeout_ms=5000", "timeout_ms=5000&mode=running"] {
        let idle = api.get(&ws("http-1", &format!("wait?{query}"))).await;
        assert_eq!(idle.status, StatusCode::OK, "{}", idle.text);
        assert_eq!(
            idle.body,
            json!({"outcome": "ready", "waited_ms": idle.body["waited_ms"], "event": null}),
            "{query}"
        );
    }

    // A manual compaction, with instructions; a second request joins it
    // (or follows it, if it started already).
    let compact = api
        .post(
            &ws("http-1", "compact"),
            &json!({"instructions": "keep the release decisions"}),
        )
        .await;
    assert_eq!(compact.status, StatusCode::ACCEPTED, "{}", compact.text);
    assert_eq!(compact.body["outcome"], "added");
    let manual_job = compact.body["job_id"].as_u64().unwrap();
    assert!(manual_job > job_id);
    let again = api.post_raw(&ws("http-1", "compact"), b"").await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    // The document's optional, nullable body: `null` is no body.
    let null_body = api.post_raw(&ws("http-1", "compact"), b"null").await;
    assert_eq!(null_body.status, StatusCode::ACCEPTED, "{}", null_body.text);
    assert!(
        ["coalesced", "followup", "added"].contains(&again.body["outcome"].as_str().unwrap()),
        "{}",
        again.text
    );
    eventually(
        "the manual compaction ran",
        Duration::from_secs(20),
        || async {
            let status = api.get(&ws("http-1", "status")).await.body;
            status["job"]["state"] == "done" && status["job"]["job_id"].as_u64() >= Some(manual_job)
        },
    )
    .await;

    // Ending a turn that added nothing, with the provider's usage.
    let turn = api
        .post(
            &ws("http-1", "messages"),
            &json!({"messages": [], "finalize": true, "usage": {"input_tokens": 900, "output_tokens": 100}}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    assert_eq!(turn.body["ids"], json!([]));
    assert_eq!(turn.body["turn"]["outcome"], "not_due", "{}", turn.text);
    assert!(turn.body["turn"]["current_tokens"].as_u64().unwrap() >= 1_000);

    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v1_routes_need_the_bearer_token_when_one_is_set() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let token = "s3cret-admin-token";
    let (worker, anonymous) = serve(&db, &redis, None, |s| {
        s.admin.token = Some(AdminToken::new(token));
    })
    .await;
    let wrong = Api::new(&worker).with_token("s3cret-admin-tokeN");
    let authorized = Api::new(&worker).with_token(token);

    for (method, path) in [
        (Method::GET, ws("auth", "status")),
        (Method::GET, ws("auth", "context")),
        (Method::GET, ws("auth", "wait?timeout_ms=10")),
        (Method::POST, ws("auth", "messages")),
        (Method::POST, ws("auth", "compact")),
    ] {
        let missing = anonymous
            .call(method.clone(), &path, Some(b"not even JSON".to_vec()))
            .await;
        assert_eq!(missing.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(missing.code(), "unauthorized");
        assert!(missing.message().contains("missing"), "{}", missing.text);
        assert!(missing.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer"));
        let refused = wrong.call(method.clone(), &path, None).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(refused.code(), "unauthorized");
        assert!(refused.message().contains("invalid"), "{}", refused.text);
    }
    // Another scheme is no bearer token.
    let basic = reqwest::Client::new()
        .get(format!("{}{}", worker.admin_url(), ws("auth", "status")))
        .basic_auth("admin", Some(token))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);

    // The right token gets through (to a workstream that does not exist).
    let through = authorized.get(&ws("auth", "status")).await;
    assert_eq!(through.status, StatusCode::NOT_FOUND, "{}", through.text);
    assert_eq!(through.code(), "unknown_workstream");
    let stored = authorized
        .post(
            &ws("auth", "messages"),
            &json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]}),
        )
        .await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.text);

    // Probes, the scrape and the API's document need none.
    for path in [
        "/healthz",
        "/readyz",
        "/readyz/worker",
        "/metrics",
        "/openapi.json",
    ] {
        assert_eq!(anonymous.get(path).await.status, StatusCode::OK, "{path}");
    }
    let served_doc = anonymous.get("/openapi.json").await;
    assert_eq!(served_doc.body, compactor_worker::http::openapi::document());
    worker.stop().await;

    // A token variable that is configured but not set stops the start,
    // before anything is connected, naming the variable.
    let mut s = settings(&db.url, &redis, None);
    let variable = format!("COMPACTOR_E2E_UNSET_{}", std::process::id());
    s.admin.token_env = Some(variable.clone());
    let err = Application::build(s, CancellationToken::new())
        .await
        .err()
        .expect("a missing token variable is a start-up error");
    assert!(matches!(err, StartupError::AdminToken(_)), "{err:?}");
    assert!(err.to_string().contains(&variable), "{err}");

    // Disabled: no API, no address.
    let mut s = settings(&db.url, &redis, None);
    s.admin.enabled = false;
    s.admin.token_env = Some(variable);
    let app = Application::build(s, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(app.admin_addr(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_clear_json_errors() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let (worker, api) = serve(&db, &redis, None, |s| s.admin.max_body_bytes = 64 * 1024).await;
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    assert_eq!(
        api.post(&ws("known", "messages"), &one).await.status,
        StatusCode::OK
    );

    // Keys that are not workstream keys, on every route.
    let long = "e".repeat(200);
    for (domain, entity, expected) in [
        ("chat", "BAD%20KEY", "entity"),
        ("chat", long.as_str(), "at most 128"),
        ("chat", "%7B", "entity"),
        ("Chat", "x", "domain"),
        ("chat", "%FF", ""),
    ] {
        for (method, route) in [
            (Method::GET, "status"),
            (Method::GET, "context"),
            (Method::GET, "wait"),
            (Method::POST, "messages"),
            (Method::POST, "compact"),
        ] {
            let path = format!("/v1/workstreams/{domain}/{entity}/{route}");
            let reply = api
                .call(method, &path, Some(serde_json::to_vec(&one).unwrap()))
                .await;
            assert_eq!(
                reply.status,
                StatusCode::BAD_REQUEST,
                "{path}: {}",
                reply.text
            );
            assert_eq!(reply.code(), "invalid_key", "{path}");
            assert!(reply.message().contains(expected), "{path}: {}", reply.text);
        }
    }

    // Bodies.
    let path = ws("known", "messages");
    let invalid = |body: &'static [u8], expected: &'static str, code: &'static str| {
        let api = &api;
        let path = &path;
        async move {
            let reply = api.post_raw(path, body).await;
            assert_eq!(
                reply.status,
                StatusCode::BAD_REQUEST,
                "{}: {}",
                String::from_utf8_lossy(body),
                reply.text
            );
            assert_eq!(reply.code(), code, "{}", reply.text);
            assert!(
                reply.message().contains(expected),
                "{}: {}",
                String::from_utf8_lossy(body),
                reply.text
            );
        }
    };
    invalid(b"not JSON", "expected", "invalid_body").await;
    invalid(b"", "EOF", "invalid_body").await;
    invalid(
        br#"{"messages": [{"role": "user", "parts": [{"type": "video", "uri": "x"}]}]}"#,
        "unknown variant `video`",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [], "finalise": true}"#,
        "unknown field `finalise`",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}], "colour": 1}]}"#,
        "unknown field `colour`",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [{"role": "robot", "parts": [{"type": "text", "text": "x"}]}]}"#,
        "unknown variant `robot`",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": []}"#,
        "at least one message",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}], "usage": {"input_tokens": 1}}"#,
        "finalize",
        "invalid_body",
    )
    .await;
    invalid(
        br#"{"messages": [{"role": "user", "parts": []}]}"#,
        "at least one part",
        "invalid_message",
    )
    .await;
    let compact = api
        .post(&ws("known", "compact"), &json!({"instruction": "typo"}))
        .await;
    assert_eq!(compact.status, StatusCode::BAD_REQUEST, "{}", compact.text);
    assert_eq!(compact.code(), "invalid_body");
    assert!(compact.message().contains("unknown field `instruction`"));

    // A body over admin.max_body_bytes.
    let big = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "x".repeat(100 * 1024)}]}]});
    let too_large = api.post(&path, &big).await;
    assert_eq!(
        too_large.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        too_large.text
    );
    assert_eq!(too_large.code(), "payload_too_large");

    // Queries.
    for (query, expected) in [
        ("timeout_ms=60001", "above the maximum of 60000"),
        ("timeout_ms=soon", "timeout_ms"),
        ("timeout=5", "unknown field `timeout`"),
        ("mode=soon", "unknown variant `soon`"),
    ] {
        let reply = api.get(&ws("known", &format!("wait?{query}"))).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            reply.text
        );
        assert_eq!(reply.code(), "invalid_query");
        assert!(
            reply.message().contains(expected),
            "{query}: {}",
            reply.text
        );
    }

    // Workstreams that do not exist.
    for (method, route) in [
        (Method::GET, "status"),
        (Method::GET, "context"),
        (Method::GET, "wait?timeout_ms=10"),
        (Method::POST, "compact"),
    ] {
        let reply = api.call(method, &ws("ghost", route), None).await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{route}: {}",
            reply.text
        );
        assert_eq!(reply.code(), "unknown_workstream");
        assert!(reply.message().contains("chat/ghost"), "{}", reply.text);
    }
    let finalize_ghost = api
        .post(
            &ws("ghost", "messages"),
            &json!({"messages": [], "finalize": true}),
        )
        .await;
    assert_eq!(finalize_ghost.status, StatusCode::NOT_FOUND);
    assert_eq!(finalize_ghost.code(), "unknown_workstream");

    // Routes and methods that do not exist.
    let nowhere = api.get("/v2/workstreams").await;
    assert_eq!(nowhere.status, StatusCode::NOT_FOUND);
    assert_eq!(nowhere.code(), "not_found");
    let wrong_method = api.call(Method::DELETE, &ws("known", "status"), None).await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong_method.code(), "method_not_allowed");
    let get_messages = api.get(&ws("known", "messages")).await;
    assert_eq!(get_messages.status, StatusCode::METHOD_NOT_ALLOWED);

    // The workstream that was stored is untouched by all of the above.
    let status = api.get(&ws("known", "status")).await;
    assert_eq!(status.status, StatusCode::OK);
    assert!(status.body["uncompacted_tokens"].as_u64().unwrap() > 0);
    worker.stop().await;
}

/// The issue: `/readyz` depended on Redis, so a Redis outage pulled every
/// pod out of its Service although appends and `/context` need only the
/// database. Now `/readyz` (the chat routes) stays 200 and they keep
/// working; `/readyz/worker` reports the outage.
/// A key of the queue holding another Redis type (here the urgent lane,
/// a string) is not an outage: a compact request is a 500
/// `queue_key_wrong_type` naming the key, without `Retry-After`, the key
/// is left as it was, and the refusal is counted by key on `/metrics`.
/// Moved aside, the same request is accepted.
#[tokio::test]
async fn a_queue_key_of_another_type_is_a_500_naming_it_and_counted() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let (worker, api) = serve(&db, &redis, None, |_| {}).await;
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    assert_eq!(
        api.post(&ws("typed", "messages"), &one).await.status,
        StatusCode::OK
    );
    let urgent = compactor_producer::queue::Keys::new(&redis.config.name).urgent();
    let mut conn = compactor_testkit::redis::connection(&redis.url).await;
    let () = redis::cmd("SET")
        .arg(&urgent)
        .arg("planted")
        .query_async(&mut conn)
        .await
        .unwrap();

    let refused = api.post_raw(&ws("typed", "compact"), b"").await;
    assert_eq!(
        refused.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        refused.text
    );
    assert_eq!(refused.code(), "queue_key_wrong_type");
    assert!(refused.message().contains(&urgent), "{}", refused.text);
    assert!(
        refused.message().contains("holds a string"),
        "{}",
        refused.text
    );
    assert!(refused.headers.get(reqwest::header::RETRY_AFTER).is_none());
    let kept: String = redis::cmd("GET")
        .arg(&urgent)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(kept, "planted", "never overwritten");
    let metrics = api.get("/metrics").await.text;
    let series = format!(
        "compactor_queue_wrong_type_keys_total{{queue=\"{}\",key=\"urgent\"}}",
        redis.config.name.as_str()
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with(&series) && !l.ends_with(" 0")),
        "{series} counted:\n{}",
        metrics
            .lines()
            .filter(|l| l.contains("wrong_type"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    let () = redis::cmd("DEL")
        .arg(&urgent)
        .query_async(&mut conn)
        .await
        .unwrap();
    let accepted = api.post_raw(&ws("typed", "compact"), b"").await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_leaves_the_chat_routes_ready_and_the_worker_side_says_so() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let mut private = PrivateRedis::start();
    let (worker, api) = serve(&db, &redis, None, |s| {
        s.redis.url = compactor_producer::settings::ConnectionUrl::new(private.url());
    })
    .await;
    assert_eq!(api.get("/readyz").await.status, StatusCode::OK);
    assert_eq!(api.get("/readyz/worker").await.status, StatusCode::OK);
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    assert_eq!(
        api.post(&ws("r", "messages"), &one).await.status,
        StatusCode::OK
    );

    private.kill();
    eventually(
        "/readyz/worker says 503",
        Duration::from_secs(20),
        || async { api.get("/readyz/worker").await.status == StatusCode::SERVICE_UNAVAILABLE },
    )
    .await;
    let started = Instant::now();
    let not_ready = api.get("/readyz/worker").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the probe is bounded: {:?}",
        started.elapsed()
    );
    assert_eq!(not_ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(not_ready.code(), "not_ready");
    assert!(
        not_ready.message().starts_with("redis: "),
        "{}",
        not_ready.text
    );
    assert_eq!(not_ready.body["ready"], false);
    assert_ne!(not_ready.body["checks"]["redis"], "ok");
    assert_eq!(not_ready.body["checks"]["runtime"], "running");

    // The chat side: ready, and serving.
    let ready = api.get("/readyz").await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.text);
    assert_eq!(ready.body["checks"]["database"], "ok");
    let stored = api.post(&ws("r", "messages"), &one).await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.text);
    let context = api.get(&ws("r", "context")).await;
    assert_eq!(context.status, StatusCode::OK, "{}", context.text);
    assert_eq!(context.body["messages"].as_array().unwrap().len(), 2);
    // Alive all the same: no restart for a dependency's outage.
    assert_eq!(api.get("/healthz").await.status, StatusCode::OK);
    // A route that needs Redis says so.
    let status = api.get(&ws("r", "status")).await;
    assert_eq!(
        status.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        status.text
    );
    assert_eq!(status.code(), "redis_unavailable");

    // Redis back on the same port: the worker side is ready again.
    let _back = PrivateRedis::start_on(private.port);
    eventually(
        "/readyz/worker says 200 again",
        Duration::from_secs(30),
        || async { api.get("/readyz/worker").await.status == StatusCode::OK },
    )
    .await;
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_503_when_the_schema_falls_behind() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let (worker, api) = serve(&db, &redis, None, |_| {}).await;
    assert_eq!(api.get("/readyz").await.status, StatusCode::OK);
    let last = compactor_migrations::migration_names().pop().unwrap();
    db.exec(&format!(
        "DELETE FROM seaql_migrations WHERE version = '{last}'"
    ))
    .await;
    let reply = api.get("/readyz").await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.text
    );
    assert_eq!(reply.code(), "not_ready");
    assert_eq!(reply.body["checks"]["database"], "ok");
    let schema = reply.body["checks"]["schema"].as_str().unwrap();
    assert!(
        schema.contains(&last) && schema.contains("compactor migrate"),
        "{schema}"
    );
    worker.stop().await;
}

/// `host:port` of a worker's admin API, for raw TCP clients.
fn admin_addr(worker: &Worker) -> String {
    worker.admin_url().trim_start_matches("http://").to_owned()
}

/// Reads from `stream` until it holds `needle` (or the stream ends);
/// everything read.
async fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if String::from_utf8_lossy(&seen).contains(needle) {
            break;
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// Whether the server closed `stream` (a read sees the end, or a reset)
/// within `limit`; what it sent meanwhile is skipped.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 4096];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// The issue: a body over the limit was drained (up to 256 MiB, for up to
/// 10 s) before the 413. Now the declared length is refused at once: the
/// 413 arrives while the client has sent only its headers and a few bytes
/// of a 100 MiB body, and the server closes the connection instead of
/// reading the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_is_refused_before_it_is_sent() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let (worker, _) = serve(&db, &redis, None, |s| s.admin.max_body_bytes = 64 * 1024).await;
    let mut stream = TcpStream::connect(admin_addr(&worker)).await.unwrap();
    let declared = 100 * 1024 * 1024;
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
         Content-Length: {declared}\r\n\r\n{{\"messages\": [",
        ws("big", "messages")
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Nothing more of the body is sent: the answer must not wait for it
    // (the drain waited 10 s).
    let answer = tokio::time::timeout(Duration::from_secs(5), read_until(&mut stream, "}}"))
        .await
        .expect("answered before the body was sent");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("application/json"), "{answer}");
    assert!(answer.contains("\"payload_too_large\""), "{answer}");
    assert!(answer.contains(&declared.to_string()), "{answer}");
    assert!(
        closed_within(&mut stream, Duration::from_secs(5)).await,
        "the connection is closed, the body never read"
    );
    // A chunked body (no length declared) is cut when it passes the limit.
    let mut stream = TcpStream::connect(admin_addr(&worker)).await.unwrap();
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n",
        ws("big", "messages")
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 8 * 1024];
    for _ in 0..10 {
        let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
        framed.extend_from_slice(&chunk);
        framed.extend_from_slice(b"\r\n");
        if stream.write_all(&framed).await.is_err() {
            break;
        }
    }
    let answer = tokio::time::timeout(Duration::from_secs(5), read_until(&mut stream, "}}"))
        .await
        .expect("answered");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"payload_too_large\""), "{answer}");
    worker.stop().await;
}

/// The chaos finding: 50 slowloris connections stayed open for 36 s and,
/// past the file-descriptor limit, took `/healthz` down. Now a client that
/// trickles its headers is cut off after `admin.header_read_timeout`, at
/// most `admin.max_connections` are served at once, and `/healthz` still
/// answers while 50 slow clients try; a keep-alive connection left idle is
/// closed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_clients_are_cut_off_and_healthz_still_answers() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let (worker, _) = serve(&db, &redis, None, |s| {
        s.admin.max_connections = 8;
        s.admin.max_long_polls = 4;
        s.admin.header_read_timeout = Duration::from_millis(500);
    })
    .await;
    let addr = admin_addr(&worker);

    // 50 clients, each sending a request's headers one byte every 200 ms:
    // never finished in time. Each must be closed by the server.
    let request =
        b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        slow.push(tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            for byte in request {
                tokio::select! {
                    read = stream.read(&mut buf) => match read {
                        Ok(0) | Err(_) => return true,
                        Ok(_) => {}
                    },
                    () = tokio::time::sleep(Duration::from_millis(200)) => {
                        if stream.write_all(&[*byte]).await.is_err() {
                            return true;
                        }
                    }
                }
            }
            // Every byte sent (14 s): the server let it dribble through.
            false
        }));
    }
    // Meanwhile the probe gets through (it may wait for a slot).
    let healthz = reqwest::Client::new()
        .get(format!("{}/healthz", worker.admin_url()))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("/healthz answers while slow clients try");
    assert_eq!(healthz.status(), StatusCode::OK);
    for client in slow {
        assert!(
            client.await.unwrap(),
            "a slow client was cut off before it sent its headers"
        );
    }

    // A keep-alive connection that goes quiet after a request is closed.
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until(&mut idle, "\"ok\"").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        closed_within(&mut idle, Duration::from_secs(10)).await,
        "an idle keep-alive connection is closed"
    );
    worker.stop().await;
}

/// At `admin.max_connections`, a new connection sheds the one that has
/// waited longest on its client (it sent nothing): the new one is served
/// at once, the shed one is closed, the other keeps its connection. (It
/// used to wait in the backlog until one closed: two idle clients kept a
/// probe out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_the_slowest_client_is_shed_for_a_new_one() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let (worker, _) = serve(&db, &redis, None, |s| {
        s.admin.max_connections = 2;
        s.admin.max_long_polls = 1;
        s.admin.header_read_timeout = Duration::from_secs(60);
    })
    .await;
    let addr = admin_addr(&worker);
    // Two connections that send nothing hold both slots, the first longer.
    let mut first = TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut second = TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let served = reqwest::Client::new()
        .get(format!("{}/healthz", worker.admin_url()))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("a third connection is served at the cap");
    assert_eq!(served.status(), StatusCode::OK);
    assert!(
        closed_within(&mut first, Duration::from_secs(10)).await,
        "the slowest client is shed"
    );
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until(&mut second, "\"ok\"").await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the other one is kept: {answer}"
    );
    let metrics = reqwest::get(format!("{}/metrics", worker.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.lines().any(|l| l
            .starts_with("compactor_http_connections_shed_total{listener=\"api\"}")
            && !l.ends_with(" 0")),
        "the shed connection is counted"
    );
    worker.stop().await;
}

/// When every connection at the cap has a request being answered (two
/// context reads stuck on a table lock), none is shed: a new connection
/// waits in the backlog until one is answered. The probe listener
/// (`admin.health_listen`), with connections of its own, answers
/// `/healthz`, `/readyz` and `/metrics` meanwhile, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_connection_busy_new_ones_wait_and_the_probe_listener_answers() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let (worker, api) = serve(&db, &redis, None, |s| {
        s.admin.max_connections = 2;
        s.admin.max_long_polls = 1;
        s.admin.health_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    assert_eq!(
        api.post(&ws("busy", "messages"), &one).await.status,
        StatusCode::OK
    );
    let lock = lock_messages(&db).await;
    let stuck: Vec<_> = (0..2)
        .map(|_| {
            let api = Api::new(&worker);
            tokio::spawn(async move { api.get(&ws("busy", "context")).await })
        })
        .collect();
    // Both in flight: their statements wait for the table's lock.
    compactor_e2e::eventually(
        "both context reads wait on the lock",
        Duration::from_secs(10),
        || async {
            db.scalar("SELECT count(*) AS n FROM pg_locks WHERE relation = 'messages'::regclass AND NOT granted")
                .await
                == 2
        },
    )
    .await;
    assert!(stuck.iter().all(|s| !s.is_finished()));
    let healthz = |base: String, limit: Duration| async move {
        reqwest::Client::new()
            .get(format!("{base}/healthz"))
            .timeout(limit)
            .send()
            .await
    };
    let waited = healthz(worker.admin_url(), Duration::from_millis(700)).await;
    assert!(
        waited.is_err(),
        "no connection is shed while every one is being answered: {waited:?}"
    );
    let probes = worker.probe_url();
    let alive = healthz(probes.clone(), Duration::from_secs(10))
        .await
        .expect("the probe listener answers");
    assert_eq!(alive.status(), StatusCode::OK);
    for (path, status) in [
        ("/readyz", StatusCode::OK),
        ("/metrics", StatusCode::OK),
        ("/v1/workstreams/chat/busy/context", StatusCode::NOT_FOUND),
        ("/openapi.json", StatusCode::NOT_FOUND),
    ] {
        let reply = reqwest::get(format!("{probes}{path}")).await.unwrap();
        assert_eq!(reply.status(), status, "{path} on the probe listener");
    }
    lock.rollback().await.unwrap();
    for request in stuck {
        assert_eq!(request.await.unwrap().status, StatusCode::OK);
    }
    let served = healthz(worker.admin_url(), Duration::from_secs(10))
        .await
        .expect("served once the requests are answered");
    assert_eq!(served.status(), StatusCode::OK);
    worker.stop().await;
}

/// Long polls beyond `admin.max_long_polls` are refused at once (503
/// `overloaded`, `Retry-After`), not queued; once one ends, the next is
/// served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_over_the_limit_are_refused_at_once() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let (worker, api) = serve(&db, &redis, None, |s| s.admin.max_long_polls = 2).await;
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    assert_eq!(
        api.post(&ws("polled", "messages"), &one).await.status,
        StatusCode::OK
    );
    // A compaction holds the workstream: waits block.
    let k = compactor_e2e::key("polled");
    let row = db.store.workstream(&k).await.unwrap().unwrap();
    db.store
        .take_lease(row.id, "test-holder", Duration::from_secs(60))
        .await
        .unwrap();
    let hold = || {
        let api = Api::new(&worker);
        tokio::spawn(async move { api.get(&ws("polled", "wait?timeout_ms=5000")).await })
    };
    let mut held = vec![hold(), hold()];
    // Once both hold their slots, a third is refused at once. (A probe can
    // take a slot before a holder does; a holder refused so is sent again.)
    let deadline = Instant::now() + Duration::from_secs(20);
    let refused = loop {
        for waiter in &mut held {
            if waiter.is_finished() {
                // Refused (a probe had its slot), or it timed out.
                let reply = (&mut *waiter).await.unwrap();
                if reply.status != StatusCode::OK {
                    assert_eq!(reply.code(), "overloaded", "{}", reply.text);
                }
                *waiter = hold();
            }
        }
        let started = Instant::now();
        let reply = api.get(&ws("polled", "wait?timeout_ms=100")).await;
        if reply.status == StatusCode::SERVICE_UNAVAILABLE {
            break Some((reply, started.elapsed()));
        }
        // Admitted: both slots were not taken yet; it timed out.
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        if Instant::now() > deadline {
            break None;
        }
    };
    let (reply, took) = refused.expect("a third long poll is refused within 20 s");
    assert_eq!(reply.code(), "overloaded", "{}", reply.text);
    assert_eq!(reply.headers["retry-after"], "1");
    assert!(took < Duration::from_millis(100), "not queued: {took:?}");
    // Other routes are not limited by it.
    assert_eq!(
        api.get(&ws("polled", "context")).await.status,
        StatusCode::OK
    );

    // The compaction ends: the two waits return (at their timeout, seeing
    // the lease gone), and a wait is served again.
    assert!(db.store.release_lease(row.id, "test-holder").await.unwrap());
    for wait in held {
        let reply = wait.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        assert_eq!(reply.body["outcome"], "ready", "{}", reply.text);
    }
    let again = api.get(&ws("polled", "wait?timeout_ms=200")).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    worker.stop().await;
}

/// A transaction of the test's own holding an exclusive lock on the
/// `messages` table of `db`, so every read of messages blocks until it is
/// dropped (rolled back).
async fn lock_messages(db: &TestDb) -> sea_orm::DatabaseTransaction {
    use sea_orm::{ConnectionTrait, TransactionTrait};
    let conn = sea_orm::Database::connect(db.url.as_str()).await.unwrap();
    let txn = conn.begin().await.unwrap();
    txn.execute_unprepared("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    txn
}

/// A request stuck on the database is answered 503 after
/// `admin.request_timeout`, not held for as long as the lock lasts; with a
/// shorter `database.statement_timeout`, PostgreSQL cancels the statement
/// first (503 `database_timeout`, a kind of its own, with `Retry-After`).
/// Before, both waited for the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_statements_stuck_on_a_lock_time_out() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});

    // The request timeout (statements may run 30 s).
    let (worker, api) = serve(&db, &redis, None, |s| {
        s.admin.request_timeout = Duration::from_millis(800);
    })
    .await;
    assert_eq!(
        api.post(&ws("locked", "messages"), &one).await.status,
        StatusCode::OK
    );
    let lock = lock_messages(&db).await;
    let reply = api.get(&ws("locked", "context")).await;
    reply.assert_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "request_timeout",
        "admin.request_timeout",
    );
    // Probes do not touch the locked table.
    assert_eq!(api.get("/healthz").await.status, StatusCode::OK);
    lock.rollback().await.unwrap();
    assert_eq!(
        api.get(&ws("locked", "context")).await.status,
        StatusCode::OK
    );
    worker.stop().await;

    // The statement timeout, shorter than the request timeout.
    let (worker, api) = serve(&db, &redis, None, |s| {
        s.database.statement_timeout = Duration::from_millis(300);
    })
    .await;
    let lock = lock_messages(&db).await;
    let reply = api.get(&ws("locked", "context")).await;
    reply.assert_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "database_timeout",
        "statement_timeout",
    );
    assert_eq!(reply.headers[reqwest::header::RETRY_AFTER], "2");
    lock.rollback().await.unwrap();
    worker.stop().await;
}

/// PostgreSQL cut off behind a loopback proxy (its connections reset, new
/// ones refused): an append, a context read and a compact request are each
/// a 503 `database_unavailable` with `Retry-After`, saying the kind of
/// failure and the operation, never the driver's text (the issue saw a 500
/// `internal` quoting "peer closed connection without sending TLS
/// close_notify"); with the database back, they succeed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_cut_off_is_a_503_database_unavailable_with_retry_after() {
    use compactor_e2e::proxy::{ChaosProxy, Mode};
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let proxy = ChaosProxy::start("127.0.0.1:5432".parse().unwrap()).await;
    let through = db
        .url
        .replace("127.0.0.1:5432", &format!("127.0.0.1:{}", proxy.port()));
    assert_ne!(through, db.url, "the test database is on 127.0.0.1:5432");
    let (worker, api) = serve(&db, &redis, None, |s| {
        s.database.url = compactor_producer::settings::ConnectionUrl::new(through.clone());
    })
    .await;
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    assert_eq!(
        api.post(&ws("cut", "messages"), &one).await.status,
        StatusCode::OK
    );

    proxy.set(Mode::Cut);
    let replies = [
        ("append", api.post(&ws("cut", "messages"), &one).await),
        ("context", api.get(&ws("cut", "context")).await),
        ("compact", api.post(&ws("cut", "compact"), &json!({})).await),
    ];
    for (route, reply) in &replies {
        println!("{route}: {} {}", reply.status, reply.text);
        reply.assert_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "database_unavailable",
            "try again shortly",
        );
        assert_eq!(reply.headers[reqwest::header::RETRY_AFTER], "2", "{route}");
        let said = reply.message().to_lowercase();
        for driver in [
            "os error",
            "close_notify",
            "eof",
            "reset by peer",
            "sqlx",
            "postgres",
        ] {
            assert!(!said.contains(driver), "{route} quotes the driver: {said}");
        }
    }

    proxy.set(Mode::Pass);
    eventually(
        "the routes answer again",
        Duration::from_secs(30),
        || async { api.get(&ws("cut", "context")).await.status == StatusCode::OK },
    )
    .await;
    assert_eq!(
        api.post(&ws("cut", "messages"), &one).await.status,
        StatusCode::OK
    );
    worker.stop().await;
}

/// `database.statement_timeout` is set on every connection of the store's
/// pool: PostgreSQL reports it and cancels a statement that outlasts it;
/// SQLite gets it as its busy timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statement_timeout_is_set_on_the_stores_connections() {
    use compactor_producer::settings::DatabaseSettings;
    use sea_orm::{ConnectionTrait, Statement};
    let pg = TestDb::new(Backend::Postgres).await;
    let mut settings = DatabaseSettings::for_url(&pg.url);
    settings.statement_timeout = Duration::from_millis(250);
    let store = compactor_producer::store::Store::connect_with(&settings)
        .await
        .unwrap();
    let conn = store.connection();
    let backend = conn.get_database_backend();
    let shown = conn
        .query_one_raw(Statement::from_string(backend, "SHOW statement_timeout"))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index::<String>(0)
        .unwrap();
    assert_eq!(shown, "250ms");
    let err = conn
        .execute_unprepared("SELECT pg_sleep(5)")
        .await
        .expect_err("cancelled after 250 ms");
    assert!(err.to_string().contains("statement timeout"), "{err}");
    // The test's own search_path option is kept beside it.
    assert!(store.schema_status().await.is_ok());

    let lite = TestDb::new(Backend::Sqlite).await;
    let mut settings = DatabaseSettings::for_url(&lite.url);
    settings.statement_timeout = Duration::from_millis(1_500);
    let store = compactor_producer::store::Store::connect_with(&settings)
        .await
        .unwrap();
    let conn = store.connection();
    let busy = conn
        .query_one_raw(Statement::from_string(
            conn.get_database_backend(),
            "PRAGMA busy_timeout",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index::<i64>(0)
        .unwrap();
    assert_eq!(busy, 1_500);
}

/// The issue: `build_context` loaded every un-compacted message. Now it
/// loads the newest within `database.context_max_messages` /
/// `context_max_tokens`, and the context says what it left out — in the
/// Rust client and over HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_loads_a_bounded_history_and_says_what_it_left_out() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let (worker, api) = serve(&db, &redis, None, |s| s.database.context_max_messages = 10).await;
    let appended = api
        .post(&ws("long", "messages"), &json!({"messages": messages(10)}))
        .await;
    assert_eq!(appended.status, StatusCode::OK, "{}", appended.text);
    let ids: Vec<u64> = appended.body["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_u64().unwrap())
        .collect();
    assert_eq!(ids.len(), 40);

    let context = api.get(&ws("long", "context")).await;
    assert_eq!(context.status, StatusCode::OK, "{}", context.text);
    assert_eq!(context.body["truncated"], true, "{}", context.text);
    assert_eq!(context.body["omitted_messages"], 30);
    let sources: Vec<u64> = context.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["source"].as_u64())
        .collect();
    assert_eq!(sources, ids[30..].to_vec(), "the newest 10, in order");

    // The same through the Rust client on a store with the same bound, and
    // the token bound: only as many of the newest as fit.
    let mut bounded = compactor_producer::settings::DatabaseSettings::for_url(&db.url);
    bounded.context_max_tokens = 1;
    let store = compactor_producer::store::Store::connect_with(&bounded)
        .await
        .unwrap();
    let client = compactor_producer::client::Compactor::from_parts(
        store,
        redis.queue().await,
        compactor_shared::config::EngineConfig::default(),
    )
    .await;
    let k = compactor_e2e::key("long");
    let turn = client.build_context(&k).await.unwrap();
    assert!(turn.truncated);
    assert_eq!(turn.omitted_messages, 39, "the newest message always fits");
    let row = db.store.workstream(&k).await.unwrap().unwrap();
    assert!(turn.omitted_tokens > 0 && turn.omitted_tokens < row.uncompacted_tokens);
    assert_eq!(turn.messages.len(), 1);
    assert_eq!(
        turn.messages[0].source.map(|id| id.0 as u64),
        ids.last().copied()
    );

    // Under the bound: the whole history, and it says so.
    let short = api
        .post(&ws("short", "messages"), &json!({"messages": messages(2)}))
        .await;
    assert_eq!(short.status, StatusCode::OK);
    let context = api.get(&ws("short", "context")).await;
    assert_eq!(context.body["truncated"], false, "{}", context.text);
    assert_eq!(context.body["omitted_messages"], 0);
    assert_eq!(context.body["omitted_tokens"], 0);
    assert_eq!(context.body["messages"].as_array().unwrap().len(), 8);
    worker.stop().await;
}

/// Scrapes `/metrics` after compactions driven through the API, and finds
/// every family of both catalogues with its kind.
///
/// How each family gets a series: at start-up the worker creates, at zero,
/// the series whose labels are all known then (the runtime's queue-labelled
/// counters — recovered, released, leases lost, queue errors by op, its own
/// dead letters — release-announcement errors by op, and the LLM client's
/// counters for the configured provider); the sweep samples the gauges at
/// once. Everything labelled by domain is driven below: a compaction whose
/// first attempt fails at the LLM and is retried, a turn held back by an
/// open breaker, a wait that times out on a held lease, a commit refused by
/// the fence, and an entity lease lost mid-compaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_end_to_end_compactions_have_every_family() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let (worker, api) = serve(&db, &redis, Some(&llm), small_window).await;
    let compactions = |entity: &'static str| {
        let api = &api;
        async move { api.get(&ws(entity, "status")).await.body["compactions"].as_i64() }
    };

    // 1. The first attempt fails at the LLM (a 500, retried, then a 401,
    //    not retried; a third failure in a row would mark the provider
    //    unhealthy and commit offline at once); the second commits.
    llm.fail_next([Fault::ServerError, Fault::Unauthorized]);
    finalize_long(&api, "m-retried").await;
    eventually(
        "compacted on the second attempt",
        Duration::from_secs(30),
        || async { compactions("m-retried").await == Some(1) },
    )
    .await;
    let waited = api.get(&ws("m-retried", "wait?timeout_ms=1000")).await;
    assert_eq!(waited.body["outcome"], "ready", "{}", waited.text);

    // 2. An open circuit breaker holds the automatic request back.
    let stored = api
        .post(
            &ws("m-breaker", "messages"),
            &json!({"messages": messages(200)}),
        )
        .await;
    assert_eq!(stored.status, StatusCode::OK);
    db.exec(
        "UPDATE workstreams SET consecutive_failures = 3, breaker_message_id = last_message_id \
         WHERE entity_id = 'm-breaker'",
    )
    .await;
    let held_back = api
        .post(
            &ws("m-breaker", "messages"),
            &json!({"messages": [], "finalize": true}),
        )
        .await;
    assert_eq!(
        held_back.body["turn"]["outcome"], "breaker_open",
        "{}",
        held_back.text
    );
    assert_eq!(held_back.body["turn"]["consecutive_failures"], 3);
    let status = api.get(&ws("m-breaker", "status")).await;
    assert_eq!(status.body["breaker_open"], true);

    // 3. A wait that times out on a lease someone holds.
    let one = json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    api.post(&ws("m-held", "messages"), &one).await;
    db.exec(&format!(
        "UPDATE workstreams SET is_compacting = true, lease_owner = 'someone-else', \
         lease_deadline_ms = {} WHERE entity_id = 'm-held'",
        now_ms() + 60_000
    ))
    .await;
    let timed_out = api.get(&ws("m-held", "wait?timeout_ms=50")).await;
    assert_eq!(timed_out.status, StatusCode::OK);
    assert_eq!(timed_out.body["outcome"], "timed_out", "{}", timed_out.text);
    assert_eq!(timed_out.body["phase"], "running");
    assert_eq!(
        timed_out.body["job_id"],
        Value::Null,
        "a lease without a job"
    );
    assert!(api.get(&ws("m-held", "status")).await.body["lease"].is_object());

    // 4. The watermark moves while the LLM answers: the commit is fenced off.
    let calls = llm.calls().len();
    llm.fail_next([Fault::Hang(Duration::from_millis(1_500))]);
    finalize_long(&api, "m-fenced").await;
    eventually("the LLM is asked", Duration::from_secs(20), || async {
        llm.calls().len() > calls
    })
    .await;
    db.exec(
        "UPDATE workstreams SET last_compacted_message_id = last_message_id \
         WHERE entity_id = 'm-fenced'",
    )
    .await;
    eventually("the fenced run ends", Duration::from_secs(20), || async {
        api.get(&ws("m-fenced", "status")).await.body["job"]["state"] == "done"
    })
    .await;
    assert_eq!(compactions("m-fenced").await, Some(0), "nothing committed");

    // 5. Another owner takes the entity lease while the LLM answers: the
    //    renewal is refused, the attempt fails, the retry commits.
    let calls = llm.calls().len();
    llm.fail_next([Fault::Hang(Duration::from_millis(2_000))]);
    finalize_long(&api, "m-stolen").await;
    eventually("the LLM is asked", Duration::from_secs(20), || async {
        llm.calls().len() > calls
    })
    .await;
    db.exec(&format!(
        "UPDATE workstreams SET lease_owner = 'thief', lease_deadline_ms = {} \
         WHERE entity_id = 'm-stolen'",
        now_ms() + 1_000
    ))
    .await;
    eventually(
        "compacted after the lost lease",
        Duration::from_secs(30),
        || async { compactions("m-stolen").await == Some(1) },
    )
    .await;

    let scrape = api.get("/metrics").await;
    assert_eq!(scrape.status, StatusCode::OK);
    assert!(scrape.headers[reqwest::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = scrape.text;
    let families: Vec<&Family> = compactor_producer::metrics::FAMILIES
        .iter()
        .chain(compactor_worker::llm::metrics::FAMILIES)
        .collect();
    assert_eq!(families.len(), 45, "every family of both catalogues");
    let mut missing = Vec::new();
    for family in &families {
        let kind = match family.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        if !text.contains(&format!("# TYPE {} {kind}\n", family.name)) {
            missing.push(family.name);
        }
        assert!(
            text.contains(&format!("# HELP {} {}\n", family.name, family.help)),
            "{} has its help text",
            family.name
        );
        if family.kind == Kind::Histogram {
            assert!(
                text.contains(&format!("{}_bucket{{", family.name)),
                "{} is a histogram with buckets",
                family.name
            );
        }
    }
    assert!(missing.is_empty(), "families not in /metrics: {missing:?}");
    assert!(!text.contains("quantile="), "no summaries");

    // What the scenario drove is counted (other tests of this binary only
    // add to the same process-wide recorder).
    for (name, label) in [
        ("compactor_jobs_failed_total", "domain=\"chat\""),
        ("compactor_jobs_retried_total", "domain=\"chat\""),
        ("compactor_llm_retries_total", "provider=\"openai\""),
        ("compactor_breaker_skips_total", "domain=\"chat\""),
        ("compactor_lease_wait_timeouts_total", "domain=\"chat\""),
        ("compactor_fence_conflicts_total", "domain=\"chat\""),
        ("compactor_entity_leases_lost_total", "domain=\"chat\""),
        ("compactor_compactions_total", "domain=\"chat\""),
        ("compactor_turns_total", "domain=\"chat\""),
        (
            "compactor_compaction_evidence_lines_count",
            "outcome=\"kept\"",
        ),
        (
            "compactor_compaction_evidence_lines_sum",
            "outcome=\"kept\"",
        ),
    ] {
        let total: f64 = text
            .lines()
            .filter(|l| l.starts_with(name) && l.contains(label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        assert!(total > 0.0, "{name}{{{label}}} counted: {total}");
    }
    // Labels are bounded: never an entity id.
    for entity in ["m-retried", "m-breaker", "m-held", "m-fenced", "m-stolen"] {
        assert!(!text.contains(entity), "{entity} in /metrics");
    }
    worker.stop().await;
}

/// Every sample of a Prometheus text scrape: name, labels, value.
fn samples(text: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    let label = regex::Regex::new(r#"([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)""#).unwrap();
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("name and value");
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = label
                .captures_iter(labels)
                .map(|c| (c[1].to_owned(), c[2].to_owned()))
                .collect();
            (name.to_owned(), labels, value.parse().expect("a number"))
        })
        .collect()
}

/// The value of the one series of `name` with exactly `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples(text)
        .into_iter()
        .find(|(n, l, _)| n == name && *l == want)
        .map(|(_, _, v)| v)
}

/// Issue 13: counters exist at 0 from start-up with every label set they
/// can take (so `increase()` sees the first event), the `domain` label is
/// bounded by the allow-list (`other` for the rest, never empty, never a
/// caller's), HTTP requests are counted by route template and status
/// class, a zero-timeout poll is no timeout, and build and process
/// metrics are served. The queue and the allowed domain are this test's
/// own, so their series are exact although other tests of this binary
/// share the recorder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_start_at_zero_and_no_caller_creates_a_label() {
    use compactor_producer::metrics::{labels, names};

    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let queue = redis.config.name.as_str().to_owned();
    let domain = compactor_e2e::unique_name("zero");
    let (worker, api) = serve(&db, &redis, None, |s| {
        s.metrics.domains = vec![domain.clone()]
    })
    .await;

    // 1. At start-up, before anything happened.
    let text = api.get("/metrics").await.text;
    let q = ("queue", queue.as_str());
    for d in [domain.as_str(), "other"] {
        let d = ("domain", d);
        for name in [
            names::JOBS_STARTED_TOTAL,
            names::JOBS_COMPLETED_TOTAL,
            names::JOBS_RETRIED_TOTAL,
        ] {
            assert_eq!(sample(&text, name, &[q, d]), Some(0.0), "{name} {d:?}");
        }
        for reason in labels::FAILURE_REASONS {
            let labels = [q, d, ("reason", reason)];
            assert_eq!(
                sample(&text, names::JOBS_FAILED_TOTAL, &labels),
                Some(0.0),
                "{labels:?}"
            );
        }
        for reason in ["permanent", "exhausted"] {
            let labels = [q, d, ("reason", reason)];
            assert_eq!(
                sample(&text, names::JOBS_DEAD_LETTERED_TOTAL, &labels),
                Some(0.0),
                "{labels:?}"
            );
        }
    }
    for reason in ["unusable", "stalled"] {
        let labels = [q, ("domain", "other"), ("reason", reason)];
        assert_eq!(
            sample(&text, names::JOBS_DEAD_LETTERED_TOTAL, &labels),
            Some(0.0)
        );
    }
    let d = ("domain", domain.as_str());
    for (outcome, degraded) in labels::COMPACTION_OUTCOMES {
        let labels = [d, ("outcome", outcome), ("degraded", degraded)];
        assert_eq!(
            sample(&text, names::COMPACTIONS_TOTAL, &labels),
            Some(0.0),
            "{labels:?}"
        );
    }
    for outcome in labels::TURN_OUTCOMES {
        assert_eq!(
            sample(&text, names::TURNS_TOTAL, &[d, ("outcome", outcome)]),
            Some(0.0)
        );
    }
    for name in [
        names::FENCE_CONFLICTS_TOTAL,
        names::ENTITY_LEASES_LOST_TOTAL,
        names::BREAKER_SKIPS_TOTAL,
        names::LEASE_WAIT_TIMEOUTS_TOTAL,
    ] {
        assert_eq!(sample(&text, name, &[d]), Some(0.0), "{name}");
    }
    for outcome in labels::ENQUEUE_OUTCOMES {
        assert_eq!(
            sample(&text, names::ENQUEUE_TOTAL, &[q, ("outcome", outcome)]),
            Some(0.0)
        );
    }
    for name in [
        names::JOBS_RECOVERED_TOTAL,
        names::JOBS_RELEASED_TOTAL,
        names::LEASES_LOST_TOTAL,
        names::RECONCILE_REQUESTED_TOTAL,
    ] {
        assert_eq!(sample(&text, name, &[q]), Some(0.0), "{name}");
    }
    for op in compactor_worker::runtime::QUEUE_ERROR_OPS {
        assert_eq!(
            sample(&text, names::QUEUE_ERRORS_TOTAL, &[q, ("op", op)]),
            Some(0.0),
            "{op}"
        );
    }
    for (_, route) in compactor_worker::http::served_routes() {
        for status in labels::HTTP_STATUS_CLASSES {
            let labels = [("route", route), ("status", status)];
            assert!(
                sample(&text, names::HTTP_REQUESTS_TOTAL, &labels).is_some(),
                "{labels:?}"
            );
        }
    }
    // Every counter family of both catalogues has a series from the start
    // (the LLM's only with an LLM configured: this worker summarizes
    // offline).
    let all = samples(&text);
    for family in compactor_producer::metrics::FAMILIES {
        if family.kind == Kind::Counter {
            assert!(
                all.iter().any(|(n, _, _)| n == family.name),
                "{} has no series at start-up",
                family.name
            );
        }
    }
    assert_eq!(
        sample(
            &text,
            names::BUILD_INFO,
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    for (name, kind, _) in compactor_worker::observability::process::FAMILIES {
        assert!(text.contains(&format!("# TYPE {name} {kind}\n")), "{name}");
    }
    assert!(
        sample(&text, "process_resident_memory_bytes", &[]).unwrap() > 0.0,
        "RSS"
    );

    // 2. A domain not in the allow-list is labelled `other`: a manual
    //    compaction in it runs on this test's queue.
    let unlisted =
        |entity: &str, route: &str| format!("/v1/workstreams/unlisted-domain/{entity}/{route}");
    let stored = api
        .post(
            &unlisted("u-1", "messages"),
            &json!({"messages": [one_message("hi")]}),
        )
        .await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.text);
    let requested = api.post(&unlisted("u-1", "compact"), &json!({})).await;
    assert_eq!(requested.status, StatusCode::ACCEPTED, "{}", requested.text);
    let other = ("domain", "other");
    eventually("the job completed", Duration::from_secs(20), || async {
        let text = api.get("/metrics").await.text;
        sample(&text, names::JOBS_COMPLETED_TOTAL, &[q, other]) == Some(1.0)
    })
    .await;
    let text = api.get("/metrics").await.text;
    assert_eq!(
        sample(&text, names::JOBS_STARTED_TOTAL, &[q, other]),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, names::ENQUEUE_TOTAL, &[q, ("outcome", "added")]),
        Some(1.0)
    );
    assert_eq!(sample(&text, names::JOBS_STARTED_TOTAL, &[q, d]), Some(0.0));
    assert!(!text.contains("unlisted"), "a caller's domain is no label");
    assert!(
        !text.contains("domain=\"\""),
        "the empty domain is no label"
    );

    // 3. A poll (timeout 0) of a compaction pending in the allowed domain
    //    is no timeout; a wait that gives up is.
    let held = |route: &str| format!("/v1/workstreams/{domain}/w-held/{route}");
    let stored = api
        .post(&held("messages"), &json!({"messages": [one_message("hi")]}))
        .await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.text);
    db.exec(&format!(
        "UPDATE workstreams SET is_compacting = true, lease_owner = 'someone-else', \
         lease_deadline_ms = {} WHERE domain = '{domain}' AND entity_id = 'w-held'",
        now_ms() + 60_000
    ))
    .await;
    let polled = api.get(&held("wait?timeout_ms=0")).await;
    assert_eq!(polled.body["outcome"], "timed_out", "{}", polled.text);
    let text = api.get("/metrics").await.text;
    let count = format!("{}_count", names::LEASE_WAIT_SECONDS);
    assert_eq!(
        sample(&text, &count, &[d, ("outcome", "polled")]),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, names::LEASE_WAIT_TIMEOUTS_TOTAL, &[d]),
        Some(0.0),
        "a poll is no timeout"
    );
    let timed_out = api.get(&held("wait?timeout_ms=50")).await;
    assert_eq!(timed_out.body["outcome"], "timed_out", "{}", timed_out.text);
    let text = api.get("/metrics").await.text;
    assert_eq!(
        sample(&text, &count, &[d, ("outcome", "timeout")]),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, names::LEASE_WAIT_TIMEOUTS_TOTAL, &[d]),
        Some(1.0)
    );

    // 4. Requests are counted by route template and status class; a path
    //    no route matches is `unmatched`, never itself. (Other tests of
    //    this binary share these series, so they can only grow.)
    let status_route = "/v1/workstreams/{domain}/{entity}/status";
    let ok = [("route", status_route), ("status", "2xx")];
    let missing = [("route", status_route), ("status", "4xx")];
    let unmatched = [("route", "unmatched"), ("status", "4xx")];
    let text = api.get("/metrics").await.text;
    let before = |labels: &[(&str, &str)]| {
        sample(&text, names::HTTP_REQUESTS_TOTAL, labels).expect("a series")
    };
    let (ok_before, missing_before, unmatched_before) =
        (before(&ok), before(&missing), before(&unmatched));
    assert_eq!(api.get(&held("status")).await.status, StatusCode::OK);
    let unknown = api
        .get(&format!("/v1/workstreams/{domain}/no-such-ws/status"))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let stray = api.get("/no/such/path-x7q").await;
    assert_eq!(stray.status, StatusCode::NOT_FOUND);
    let text = api.get("/metrics").await.text;
    let after = |labels: &[(&str, &str)]| {
        sample(&text, names::HTTP_REQUESTS_TOTAL, labels).expect("a series")
    };
    assert!(after(&ok) >= ok_before + 1.0);
    assert!(after(&missing) >= missing_before + 1.0);
    assert!(after(&unmatched) >= unmatched_before + 1.0);
    let histogram = format!("{}_count", names::HTTP_REQUEST_SECONDS);
    assert!(sample(&text, &histogram, &ok).unwrap_or(0.0) >= 1.0);
    assert!(text.contains(&format!(
        "{}_bucket{{route=\"{status_route}\",status=\"2xx\",le=\"0.001\"}}",
        names::HTTP_REQUEST_SECONDS
    )));
    assert!(!text.contains("path-x7q"), "a raw path is no label");
    assert!(!text.contains("no-such-ws"), "an entity is no label");
    let routes: BTreeSet<String> = samples(&text)
        .into_iter()
        .filter(|(n, _, _)| n == names::HTTP_REQUESTS_TOTAL)
        .map(|(_, l, _)| l["route"].clone())
        .collect();
    let known: BTreeSet<String> = compactor_worker::http::served_routes()
        .into_iter()
        .map(|(_, r)| r.to_owned())
        .chain([
            "unmatched".to_owned(),
            compactor_worker::http::CONSOLE_ROUTE.to_owned(),
        ])
        .collect();
    assert_eq!(
        routes, known,
        "routes are templates of the table, the console's one label, or unmatched"
    );
    worker.stop().await;
}

/// `/status` names its `job` once: strict JSON parsers refuse a key twice
/// (and lenient ones keep either).
fn assert_one_job_key(text: &str) {
    assert_eq!(text.matches("\"job\":").count(), 1, "{text}");
}

fn one_message(text: &str) -> Value {
    json!({"role": "user", "parts": [{"type": "text", "text": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_append_stores_nothing_twice() {
    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let (worker, api) = serve(&db, &redis, None, |_| {}).await;
    let path = ws("idem", "messages");
    let with_key = |key: &'static str, body: &Value| {
        let (api, path, body) = (&api, &path, serde_json::to_vec(body).unwrap());
        async move {
            let response = api
                .client
                .post(format!("{}{path}", api.base))
                .header("Idempotency-Key", key)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            let text = response.text().await.unwrap();
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
                text,
            )
        }
    };
    let body = json!({"messages": [one_message("a"), one_message("b"), one_message("c")]});

    // The same request sent three times (the client never saw an answer):
    // stored once, the same ids each time.
    let (status, first, text) = with_key("req-1", &body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(first["already_stored"], 0);
    for _ in 0..2 {
        let (status, again, text) = with_key("req-1", &body).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        assert_eq!(again["ids"], first["ids"]);
        assert_eq!(again["already_stored"], 3);
        assert_eq!(again["uncompacted_tokens"], first["uncompacted_tokens"]);
    }
    // Another key is another request.
    let (_, other, _) = with_key("req-2", &body).await;
    assert_eq!(other["already_stored"], 0);
    assert_ne!(other["ids"], first["ids"]);

    // Client ids per message, without the header: the same.
    let mine = json!({"messages": [
        {"role": "user", "parts": [{"type": "text", "text": "x"}], "client_id": "msg-1"},
        {"role": "assistant", "parts": [{"type": "text", "text": "y"}], "client_id": "msg-2"}
    ]});
    let stored = api.post(&path, &mine).await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.text);
    let again = api.post(&path, &mine).await;
    assert_eq!(again.body["ids"], stored.body["ids"]);
    assert_eq!(again.body["already_stored"], 2);

    // A client id (or key) reused for other content is a conflict, and
    // nothing of that request is stored.
    let before = api.get(&ws("idem", "status")).await.body["uncompacted_tokens"].clone();
    let clash = api
        .post(
            &path,
            &json!({"messages": [
                one_message("new"),
                {"role": "user", "parts": [{"type": "text", "text": "changed"}], "client_id": "msg-1"}
            ]}),
        )
        .await;
    assert_eq!(clash.status, StatusCode::CONFLICT, "{}", clash.text);
    assert_eq!(clash.code(), "client_id_conflict");
    assert!(clash.message().contains("msg-1"), "{}", clash.text);
    let (status, _, text) = with_key("req-1", &json!({"messages": [one_message("not a")]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    assert_eq!(
        api.get(&ws("idem", "status")).await.body["uncompacted_tokens"],
        before
    );
    let context = api.get(&ws("idem", "context")).await;
    assert_eq!(context.body["messages"].as_array().unwrap().len(), 8);

    // Malformed keys and ids.
    let (status, bad, text) = with_key("", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert_eq!(bad["error"]["code"], "invalid_header");
    let long_id = api
        .post(
            &path,
            &json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}], "client_id": "i".repeat(256)}]}),
        )
        .await;
    assert_eq!(long_id.status, StatusCode::BAD_REQUEST, "{}", long_id.text);
    assert_eq!(long_id.code(), "invalid_message");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_during_a_redis_outage_is_stored_and_says_compaction_is_unavailable() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let mut private = PrivateRedis::start();
    let (worker, api) = serve(&db, &redis, None, |s| {
        small_window(s);
        s.redis.url = compactor_producer::settings::ConnectionUrl::new(private.url());
        s.queue.response_timeout = Duration::from_secs(1);
    })
    .await;
    let path = ws("outage", "messages");
    let turn = json!({"messages": messages(200), "finalize": true});
    let send = || {
        let (api, path, body) = (&api, &path, serde_json::to_vec(&turn).unwrap());
        async move {
            let response = api
                .client
                .post(format!("{}{path}", api.base))
                .header("Idempotency-Key", "turn-17")
                .body(body)
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .unwrap();
            let status = response.status();
            let text = response.text().await.unwrap();
            (status, serde_json::from_str::<Value>(&text).unwrap(), text)
        }
    };

    private.kill();
    let (status, stored, text) = send().await;
    assert_eq!(status, StatusCode::OK, "stored, so not a 503: {text}");
    assert_eq!(stored["ids"].as_array().unwrap().len(), 800);
    assert_eq!(stored["turn"]["outcome"], "unavailable", "{text}");
    assert!(stored["turn"]["current_tokens"].as_u64().unwrap() > 14_000);
    assert!(
        stored["turn"]["reason"]
            .as_str()
            .unwrap()
            .contains("enqueue"),
        "{text}"
    );
    // Waiting needs Redis for the requested compaction; the lease alone
    // does not.
    let wait = api.get(&ws("outage", "wait?timeout_ms=1000")).await;
    assert_eq!(
        wait.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        wait.text
    );
    assert_eq!(wait.code(), "redis_unavailable");
    let running_only = api
        .get(&ws("outage", "wait?timeout_ms=1000&mode=running"))
        .await;
    assert_eq!(running_only.status, StatusCode::OK, "{}", running_only.text);
    assert_eq!(running_only.body["outcome"], "ready");

    // Redis is back, without its data; the worker registers again at its
    // next heartbeat. The client retries the same request: nothing is
    // stored twice, and the compaction is requested this time.
    let _back = PrivateRedis::start_on(private.port);
    let queue = compactor_producer::queue::Queue::connect(&private.url(), redis.config.clone())
        .await
        .unwrap();
    eventually(
        "the worker registers again",
        Duration::from_secs(20),
        || async { !queue.live_workers().await.unwrap().is_empty() },
    )
    .await;
    let mut retried = None;
    for _ in 0..100 {
        let (status, body, text) = send().await;
        assert_eq!(status, StatusCode::OK, "{text}");
        if body["turn"]["outcome"] != "unavailable" {
            retried = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let retried = retried.expect("Redis takes requests again");
    assert_eq!(retried["ids"], stored["ids"], "the same messages");
    assert_eq!(retried["already_stored"], 800);
    assert_eq!(retried["uncompacted_tokens"], stored["uncompacted_tokens"]);
    assert_eq!(retried["turn"]["outcome"], "requested", "{retried}");
    let compacted = api.get(&ws("outage", "wait?timeout_ms=30000")).await;
    assert_eq!(compacted.body["outcome"], "compacted", "{}", compacted.text);
    let context = api.get(&ws("outage", "context")).await;
    assert!(
        context.body["messages"].as_array().unwrap().len() < 20,
        "summary + tail: nothing was stored twice"
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_behind_a_busy_worker_says_queued_then_compacted() {
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    llm.answer_after(Duration::from_millis(1_500));
    let (worker, api) = serve(&db, &redis, Some(&llm), |s| {
        small_window(s);
        s.worker.concurrency = 1;
    })
    .await;
    finalize_long(&api, "busy-a").await;
    eventually(
        "the worker is busy with a",
        Duration::from_secs(20),
        || async { api.get(&ws("busy-a", "status")).await.body["lease"].is_object() },
    )
    .await;
    let job_b = finalize_long(&api, "busy-b").await.body["turn"]["enqueue"]["job_id"]
        .as_u64()
        .unwrap();

    let queued = api.get(&ws("busy-b", "wait?timeout_ms=300")).await;
    assert_eq!(queued.status, StatusCode::OK, "{}", queued.text);
    assert_eq!(
        queued.body,
        json!({"outcome": "timed_out", "waited_ms": queued.body["waited_ms"], "phase": "queued", "job_id": job_b})
    );
    assert!(queued.body["waited_ms"].as_u64().unwrap() >= 300);
    let running_only = api
        .get(&ws("busy-b", "wait?timeout_ms=300&mode=running"))
        .await;
    assert_eq!(
        running_only.body["outcome"], "ready",
        "{}",
        running_only.text
    );

    let compacted = api.get(&ws("busy-b", "wait?timeout_ms=30000")).await;
    assert_eq!(compacted.body["outcome"], "compacted", "{}", compacted.text);
    assert_eq!(compacted.body["event"]["job_id"], job_b);
    assert_eq!(compacted.body["event"]["entity_id"], "busy-b");
    assert_eq!(
        api.get(&ws("busy-b", "status")).await.body["compactions"],
        1
    );
    worker.stop().await;
}

/// The (method, path) pairs of an OpenAPI document's `paths`.
fn documented_routes(doc: &Value) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete", "head", "options"]
                .contains(&method.as_str())
            {
                routes.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    routes
}

/// The generated document (served at `/openapi.json`, committed as
/// `docs/openapi.json`) names exactly the routes the router serves.
#[test]
fn the_openapi_document_names_every_route_the_router_serves() {
    let doc = compactor_worker::http::openapi::document();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let documented = documented_routes(&doc);
    let served: BTreeSet<(String, String)> = compactor_worker::http::served_routes()
        .into_iter()
        .map(|(method, path)| (method.to_string(), path.to_owned()))
        .collect();
    assert_eq!(served.len(), 27);
    assert_eq!(documented, served);
    let committed: Value =
        serde_json::from_str(include_str!("../../../docs/openapi.json")).unwrap();
    assert_eq!(committed, doc);
}

/// `GET …/context` writes a kept history's messages as they were written
/// when read, and computes only the rest: turn after turn it must answer
/// what a client that keeps nothing builds — with a result whose call is
/// not in the history (an orphan, shown as text), a call still running in
/// the last message, then that call's result — on PostgreSQL and SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_over_http_is_the_one_built_from_scratch_turn_after_turn() {
    for backend in [Backend::Postgres, Backend::Sqlite] {
        let db = TestDb::new(backend).await;
        let redis = TestRedis::new();
        let (worker, api) = serve(&db, &redis, None, |_| {}).await;
        let mut scratch = compactor_producer::settings::DatabaseSettings::for_url(&db.url);
        scratch.context_cache_bytes = 0;
        let from_scratch = compactor_producer::client::Compactor::from_parts(
            compactor_producer::store::Store::connect_with(&scratch)
                .await
                .unwrap(),
            redis.queue().await,
            compactor_shared::config::EngineConfig::default(),
        )
        .await;
        let k = compactor_e2e::key("turns");
        let turns = [
            json!([
                {"role": "tool", "parts": [{"type": "tool_result", "call_id": "gone",
                    "tool_name": "bash", "output": "from before"}]},
                {"role": "user", "parts": [{"type": "text", "text": "build it \"now\" \u{e9}"}]},
            ]),
            messages(3),
            json!([{"role": "assistant", "parts": [{"type": "tool_call", "call_id": "run-1",
                "tool_name": "bash", "input": {"cmd": "make"}}]}]),
            json!([{"role": "tool", "parts": [{"type": "tool_result", "call_id": "run-1",
                "tool_name": "bash", "output": "ok"}]}]),
            json!([{"role": "user", "parts": [{"type": "text", "text": "thanks"}]}]),
        ];
        for (turn, batch) in turns.iter().enumerate() {
            let appended = api
                .post(&ws("turns", "messages"), &json!({ "messages": batch }))
                .await;
            assert_eq!(appended.status, StatusCode::OK, "{}", appended.text);
            // Twice: the first read of a turn catches up, the second has
            // nothing new.
            for read in 0..2 {
                let context = api.get(&ws("turns", "context")).await;
                assert_eq!(context.status, StatusCode::OK, "{}", context.text);
                let expected = from_scratch.build_context(&k).await.unwrap();
                assert_eq!(
                    context.body,
                    serde_json::to_value(&expected).unwrap(),
                    "{backend:?}, turn {turn}, read {read}"
                );
            }
        }
        let last = api.get(&ws("turns", "context")).await;
        assert_eq!(
            last.body["orphans_neutralized"], 1,
            "the result from before"
        );
        worker.stop().await;
    }
}
