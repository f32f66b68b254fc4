//! The bad-input matrix (`docs/BAD_INPUT.md`): each row here is input a
//! buggy or hostile producer can send — through the Rust client, the admin
//! HTTP API or straight into Redis — and each test checks that it gets a
//! clear, typed error (or is handled safely), that nothing is stored or
//! half-written because of it, and that the same worker keeps serving: a
//! good workstream is compacted afterwards. Real Redis and SQLite; the
//! extractive summarizer (no LLM).

use std::collections::HashSet;
use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{conversation, eventually, key, settings, start_worker, TestRedis, Worker};
use compactor_producer::client::{ClientError, Compactor, IncomingMessage, Readiness};
use compactor_shared::context::BuiltContext;
use compactor_shared::payload::{Payload, PayloadError};
use compactor_shared::{EntityKey, Part, Role};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A worker with its admin API, and a client on the same queue and store.
struct World {
    _db: TestDb,
    _redis: TestRedis,
    worker: Worker,
    client: Compactor,
    http: reqwest::Client,
    base: String,
}

impl World {
    async fn start() -> World {
        let db = TestDb::new(Backend::Sqlite).await;
        let redis = TestRedis::new();
        let worker = start_worker(settings(&db.url, &redis, None)).await;
        let client = compactor_e2e::client(&db, &redis).await;
        let base = worker.admin_url();
        World {
            _db: db,
            _redis: redis,
            worker,
            client,
            http: reqwest::Client::new(),
            base,
        }
    }

    /// `POST` of raw bytes as JSON; the status and the `error` object.
    async fn post_raw(&self, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        let (status, body) = send(request).await;
        (status, body["error"].clone())
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        send(self.http.get(format!("{}{path}", self.base))).await
    }

    /// Compacts `entity` through the worker and returns its next context.
    async fn compact(&self, entity: &str) -> BuiltContext {
        let k = key(entity);
        self.client.compact_now(&k, None).await.unwrap();
        eventually(entity, Duration::from_secs(30), || async {
            self.client.status(&k).await.unwrap().compactions > 0
        })
        .await;
        // The commit is seen; the job may still be settling in the queue,
        // in which case the wait answers `compacted` when it has.
        let ready = self
            .client
            .wait_until_ready(&k, Duration::from_secs(30))
            .await
            .unwrap();
        assert!(
            matches!(ready, Readiness::Ready { .. } | Readiness::Compacted { .. }),
            "{entity}: the lease is released after the commit: {ready:?}"
        );
        assert_eq!(self.client.status(&k).await.unwrap().compactions, 1);
        let turn = self.client.build_context(&k).await.unwrap();
        assert!(!turn.truncated, "{entity}: a short history is loaded whole");
        turn.into_inner()
    }

    /// The worker still serves after the bad input: alive, ready, and a
    /// good workstream is compacted end to end.
    async fn still_serving(self, entity: &str) {
        assert_eq!(self.get("/healthz").await.0, StatusCode::OK);
        let (status, ready) = self.get("/readyz").await;
        assert_eq!(status, StatusCode::OK, "{ready}");
        self.client
            .append_messages(&key(entity), conversation(20))
            .await
            .unwrap();
        let context = self.compact(entity).await;
        assert_eq!(context.messages[0].role, Role::System, "summary first");
        assert_no_orphans(&context);
        self.worker.stop().await;
    }
}

/// Sends `request`; the status and the JSON body (every reply is JSON,
/// errors included).
async fn send(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("every reply is JSON, even errors: {status} {text}"));
    (status, body)
}

/// Every tool result sent to the model follows a call with its id, and
/// every call is answered.
fn assert_no_orphans(context: &BuiltContext) {
    let mut calls = HashSet::new();
    let mut results = HashSet::new();
    for m in &context.messages {
        for p in &m.parts {
            match p {
                Part::ToolCall { call_id, .. } => {
                    calls.insert(call_id.clone());
                }
                Part::ToolResult { call_id, .. } => {
                    assert!(
                        calls.contains(call_id),
                        "result {call_id} sent without its call"
                    );
                    results.insert(call_id.clone());
                }
                _ => {}
            }
        }
    }
    assert_eq!(calls, results, "every call sent is answered");
}

/// A 400 with error `code` whose message contains `fragment`.
fn assert_refused(status: StatusCode, error: &Value, code: &str, fragment: &str) {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["code"], code, "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains(fragment), "{error}");
}

fn text_message(text: &str) -> Value {
    json!({"role": "user", "parts": [{"type": "text", "text": text}]})
}

/// Row "operator instructions over 4,096 bytes": over HTTP a 400
/// `invalid_body` (it was a 500 `internal`), through the client a typed
/// `ClientError::InvalidInstructions` (which the CLI maps to exit status 2);
/// nothing is enqueued. At the limit they are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_instructions_are_a_bad_request_not_a_server_error() {
    let w = World::start().await;
    let k = key("instructed");
    w.client
        .append_messages(&k, vec![IncomingMessage::text(Role::User, "hi")])
        .await
        .unwrap();
    let path = "/v1/workstreams/chat/instructed/compact";
    let long = "i".repeat(4_097);
    let body = serde_json::to_vec(&json!({ "instructions": long })).unwrap();
    let (status, error) = w.post_raw(path, body).await;
    assert_refused(status, &error, "invalid_body", "at most 4096");
    let err = w.client.compact_now(&k, Some(long)).await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::InvalidInstructions(PayloadError::InstructionsTooLong { len: 4_097 })
        ),
        "{err}"
    );
    let counts = w.client.queue().counts().await.unwrap();
    assert_eq!(counts.waiting + counts.running, 0, "nothing enqueued");

    let at_limit = serde_json::to_vec(&json!({ "instructions": "i".repeat(4_096) })).unwrap();
    let (status, error) = w.post_raw(path, at_limit).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{error}");
    w.still_serving("after-long-instructions").await;
}

/// Row "connection URL with a typo": a URL whose scheme lost its colon
/// (`redis//:pw@host`) was shown whole — with its password — by `Display`
/// and `Debug`, so in every CLI error and every retry warning, and
/// `Serialize` wrote passwords as given. Now the password is hidden
/// everywhere, and a Redis URL that does not parse is refused at once as a
/// URL problem instead of being retried as an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_connection_url_never_shows_its_password() {
    use compactor_producer::client::ClientSettings;
    use compactor_producer::queue::{Queue, QueueConfig, QueueError};
    use compactor_producer::settings::RedisSettings;

    let secret = "hunter2typo";
    let shown = |text: String| {
        assert!(!text.contains(secret), "the password is shown: {text}");
        text
    };
    let env = vec![
        (
            "REDIS_URL".to_owned(),
            format!("redis//:{secret}@127.0.0.1:6379"),
        ),
        (
            "DATABASE_URL".to_owned(),
            format!("postgres//app:{secret}@127.0.0.1:5432/x"),
        ),
    ];
    let settings: ClientSettings =
        compactor_producer::settings::load_from(None, env.clone()).unwrap();
    shown(format!("{settings:?}"));
    shown(format!("{} {}", settings.redis.url, settings.database.url));
    shown(serde_json::to_string(&settings).unwrap());
    let worker_settings = compactor_worker::settings::Settings::load_from(None, env).unwrap();
    shown(format!("{worker_settings:?}"));

    // Redis: refused at once, by every path that connects.
    let redis = RedisSettings::single(format!("redis//:{secret}@127.0.0.1:6379"));
    let err = Queue::connect_with(&redis, QueueConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(err, QueueError::Url { .. }), "{err:?}");
    let text = shown(err.to_string());
    assert!(text.contains("not a Redis URL"), "{text}");
    shown(format!("{err:?}"));
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        compactor_worker::connect::connect_with_retry(
            &redis,
            QueueConfig::default(),
            std::future::pending(),
        ),
    )
    .await
    .expect("not retried as if Redis were down")
    .unwrap_err();
    shown(err.to_string());
    // The database: the driver's message is scrubbed too.
    let err = compactor_producer::store::Store::connect_with(&settings.database)
        .await
        .unwrap_err();
    shown(err.to_string());
    shown(format!("{err:?}"));
    let err = compactor_producer::client::Compactor::connect(&settings)
        .await
        .unwrap_err();
    shown(err.to_string());
}

/// Rows "invalid domain/entity ids" and "non-UTF-8 ids": each refused with
/// the reason, by the key type, by every HTTP route, and by the client
/// before anything reaches Redis or the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_keys_are_refused_with_the_reason_everywhere() {
    let w = World::start().await;
    let ten_kb = "k".repeat(10 * 1024);
    for (entity, reason) in [
        ("", "empty"),
        (ten_kb.as_str(), "at most 128"),
        ("a:b", "':'"),
        ("a*b", "'*'"),
        ("a{b}", "'{'"),
        ("a\nb", "'\\n'"),
        ("a\0b", "'\\0'"),
    ] {
        let err = EntityKey::parse("chat", entity).unwrap_err().to_string();
        assert!(
            err.contains(reason),
            "{:?}: {err}",
            &entity[..entity.len().min(8)]
        );
    }
    for (domain, reason) in [("", "empty"), ("Chat", "domain"), ("a:b", "domain")] {
        let err = EntityKey::parse(domain, "1").unwrap_err().to_string();
        assert!(err.contains(reason), "{domain:?}: {err}");
    }
    let err = EntityKey::parse_bytes(b"chat", &[b'a', 0xff, 0xfe])
        .unwrap_err()
        .to_string();
    assert!(err.contains("UTF-8"), "{err}");

    // Over HTTP, percent-encoded into the path.
    let encoded_10kb = "k".repeat(10 * 1024);
    for (entity, reason) in [
        (encoded_10kb.as_str(), "at most 128"),
        ("a%3Ab", "':'"),
        ("a%2Ab", "'*'"),
        ("a%7Bb%7D", "'{'"),
        ("a%0Ab", "'\\n'"),
        ("a%00b", "'\\0'"),
        ("a%FF%FE", "UTF-8"),
    ] {
        for route in ["messages", "compact"] {
            let path = format!("/v1/workstreams/chat/{entity}/{route}");
            let body = serde_json::to_vec(&json!({"messages": [text_message("hi")]})).unwrap();
            let (status, error) = w.post_raw(&path, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{route} {entity:.12}");
            assert_eq!(error["code"], "invalid_key", "{route} {entity:.12}");
            let message = error["message"].as_str().unwrap();
            assert!(message.contains(reason), "{entity:.12}: {message}");
        }
        let (status, body) = w
            .get(&format!("/v1/workstreams/chat/{entity}/status"))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["code"], "invalid_key");
    }
    // An empty path segment is an empty id.
    let (status, body) = w.get("/v1/workstreams/chat//status").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_key");
    assert_eq!(body["error"]["message"], "entity id is empty");

    // Nothing of the above reached the queue.
    let counts = w.client.queue().counts().await.unwrap();
    assert_eq!(
        counts.waiting + counts.running + counts.dead,
        0,
        "{counts:?}"
    );
    w.still_serving("after-bad-keys").await;
}

/// Rows "payload not JSON" and "payload of an unknown version" (written
/// straight into Redis, as a buggy producer in another language might):
/// the real worker dead-letters each with the reason instead of running or
/// dropping it, and goes on compacting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_that_are_not_json_or_of_another_version_are_dead_lettered_with_the_reason() {
    let w = World::start().await;
    let keys = w.client.queue().keys().clone();
    let mut raw = redis::Client::open(compactor_e2e::redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let entries = [
        ("compact:chat:garbage", "not json at all".to_owned()),
        (
            "compact:chat:future",
            r#"{"v":2,"key":{"domain":"chat","entity_id":"future"},"trigger":{"kind":"auto"}}"#
                .to_owned(),
        ),
        ("compact:chat:deep", deep),
        (
            "compact:chat:wrongkey",
            r#"{"v":1,"key":{"domain":"chat","entity_id":"a*b"},"trigger":{"kind":"auto"}}"#
                .to_owned(),
        ),
    ];
    for (member, payload) in &entries {
        compactor_e2e::write_raw_job(&mut raw, &keys, member, payload).await;
    }
    // The same inputs, decoded directly: typed errors.
    assert!(matches!(
        Payload::decode(entries[0].1.as_bytes()),
        Err(PayloadError::Malformed(_))
    ));
    assert!(matches!(
        Payload::decode(entries[1].1.as_bytes()),
        Err(PayloadError::UnknownVersion { found: 2 })
    ));
    let deep_error = Payload::decode(entries[2].1.as_bytes()).unwrap_err();
    assert!(
        deep_error.to_string().contains("recursion limit"),
        "{deep_error}"
    );

    eventually(
        "every bad entry is dead-lettered",
        Duration::from_secs(10),
        || async { w.client.queue().dead_letters(10).await.unwrap().len() == entries.len() },
    )
    .await;
    let dead = w.client.queue().dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), entries.len(), "{dead:?}");
    let reason = |member: &str| {
        dead.iter()
            .find(|d| d.member == member)
            .unwrap_or_else(|| panic!("{member} dead-lettered: {dead:?}"))
            .reason
            .clone()
    };
    assert!(reason("compact:chat:garbage").contains("not valid JSON"));
    assert!(reason("compact:chat:future").contains("version 2 is not supported"));
    assert!(reason("compact:chat:deep").contains("recursion limit"));
    assert!(reason("compact:chat:wrongkey").contains("'*'"));
    w.still_serving("after-bad-payloads").await;
}

/// Row "50 MB single message": refused whole (the caller decides what to
/// drop; nothing is truncated behind its back), by the client and by the
/// HTTP API, and nothing of the batch is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mb_message_is_refused_and_nothing_of_its_batch_is_stored() {
    let w = World::start().await;
    let k = key("huge");
    w.client
        .append_messages(&k, vec![IncomingMessage::text(Role::User, "before")])
        .await
        .unwrap();
    let before = w.client.status(&k).await.unwrap().uncompacted_tokens;

    let fifty_mb = "x".repeat(50 * 1024 * 1024);
    let err = w
        .client
        .append_messages(
            &k,
            vec![
                IncomingMessage::text(Role::User, "fine"),
                IncomingMessage::text(Role::Tool, fifty_mb.clone()),
            ],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::InvalidMessage { index: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("at most 16777216"), "{err}");
    assert_eq!(
        w.client.status(&k).await.unwrap().uncompacted_tokens,
        before
    );

    // Over HTTP the body limit (32 MiB by default) refuses it before it is
    // read whole…
    let body = serde_json::to_vec(&json!({"messages": [text_message(&fifty_mb)]})).unwrap();
    drop(fifty_mb);
    let (status, error) = w.post_raw("/v1/workstreams/chat/huge/messages", body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{error}");
    assert_eq!(error["code"], "payload_too_large");
    // …and a 20 MB message in a body under that limit gets the message
    // limit, with its index.
    let twenty_mb = "y".repeat(20 * 1024 * 1024);
    let body =
        serde_json::to_vec(&json!({"messages": [text_message("fine"), text_message(&twenty_mb)]}))
            .unwrap();
    let (status, error) = w.post_raw("/v1/workstreams/chat/huge/messages", body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["code"], "invalid_message");
    assert!(
        error["message"].as_str().unwrap().starts_with("message 1:"),
        "{error}"
    );
    assert_eq!(
        w.client.status(&k).await.unwrap().uncompacted_tokens,
        before
    );
    w.still_serving("after-huge").await;
}

/// Rows "deeply nested JSON" and "non-UTF-8 content": a request body
/// nested 100,000 deep is refused without a stack overflow; a tool call
/// whose input nests 100 deep (within serde's limit) is stored, compacted
/// and sent back intact; invalid UTF-8 in a body is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_nesting_and_invalid_utf8_in_bodies_are_refused_or_handled() {
    let w = World::start().await;
    let path = "/v1/workstreams/chat/nested/messages";
    // In the one free-form field (a tool call's input), where only the
    // parser's depth limit stands between the input and the stack.
    let mut deep = br#"{"messages": [{"role": "assistant", "parts": [{"type": "tool_call", "call_id": "c", "tool_name": "bash", "input": "#.to_vec();
    deep.extend(std::iter::repeat_n(b'[', 100_000));
    deep.extend(std::iter::repeat_n(b']', 100_000));
    deep.extend(b"}]}]}");
    let (status, error) = w.post_raw(path, deep).await;
    assert_refused(status, &error, "invalid_body", "recursion limit");

    let mut non_utf8 =
        br#"{"messages": [{"role": "user", "parts": [{"type": "text", "text": "caf"#.to_vec();
    non_utf8.extend([0xff, 0xfe]);
    non_utf8.extend(br#""}]}]}"#);
    let (status, error) = w.post_raw(path, non_utf8).await;
    assert_refused(
        status,
        &error,
        "invalid_body",
        "invalid unicode code point at line 1",
    );

    // Too deep to be read back from the database (serde_json reads at most
    // 128 levels): refused at append, not stored as a row that would stop
    // its workstream from ever being compacted.
    let nested = |levels: usize| {
        let mut input = json!("bottom");
        for i in 0..levels / 2 {
            input = json!({ format!("level{i}"): [input] });
        }
        input
    };
    let k = key("nested");
    let err = w
        .client
        .append_messages(
            &k,
            vec![IncomingMessage::new(
                Role::Assistant,
                vec![Part::tool_call("deep-0", "bash", nested(200))],
            )],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::InvalidMessage { index: 0, .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("nests 200 levels deep, at most 100 allowed"),
        "{err}"
    );
    // The same over HTTP, within the parser's limit but over the bound.
    let body = serde_json::to_vec(&json!({"messages": [{"role": "assistant", "parts": [
        Part::tool_call("deep-0", "bash", nested(110))
    ]}]}))
    .unwrap();
    let (status, error) = w.post_raw(path, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["code"], "invalid_message");

    // Deep but within the bound: an input nested 100 levels, in the
    // compacted part, is stored, compacted and read back.
    let input = nested(100);
    let mut messages = vec![
        IncomingMessage::text(Role::User, "run the nested tool"),
        IncomingMessage::new(
            Role::Assistant,
            vec![Part::tool_call("deep-1", "bash", input)],
        ),
        IncomingMessage::new(Role::Tool, vec![Part::tool_result("deep-1", "bash", "ok")]),
    ];
    messages.extend(conversation(20));
    w.client.append_messages(&k, messages).await.unwrap();
    let context = w.compact("nested").await;
    assert_no_orphans(&context);
    w.still_serving("after-nested").await;
}

/// Row "tool results without calls": stored as given (the history is the
/// app's), summarized, and never sent to a model as an orphan — in the
/// compacted part they become transcript text, in the tail they are turned
/// into plain text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_results_without_calls_are_never_sent_as_orphans() {
    let w = World::start().await;
    let k = key("orphans");
    let orphan = |id: &str| {
        IncomingMessage::new(
            Role::Tool,
            vec![Part::tool_result(id, "bash", format!("output of {id}"))],
        )
    };
    let mut messages = vec![orphan("early-orphan")];
    messages.extend(conversation(20));
    messages.push(IncomingMessage::text(Role::User, "one more"));
    messages.push(orphan("late-orphan"));
    messages.push(IncomingMessage::text(Role::Assistant, "done"));
    w.client.append_messages(&k, messages).await.unwrap();
    let context = w.compact("orphans").await;
    assert_no_orphans(&context);
    assert!(
        context.orphans_neutralized >= 1,
        "the orphan in the tail was neutralized: {context:?}"
    );
    let rendered = serde_json::to_string(&context.messages).unwrap();
    assert!(
        rendered.contains("output of late-orphan"),
        "its content is kept, as text"
    );
    w.still_serving("after-orphans").await;
}

/// Row "duplicate message ids": ids belong to the store, so a message that
/// carries one is refused (the client type has no such field; the HTTP API
/// names it); duplicate tool call ids within a workstream (a provider
/// reusing ids) do not break compaction or the context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_ids_cannot_be_chosen_and_reused_call_ids_are_handled() {
    let w = World::start().await;
    let body = serde_json::to_vec(&json!({"messages": [
        {"id": 7, "role": "user", "parts": [{"type": "text", "text": "a"}]},
        {"id": 7, "role": "user", "parts": [{"type": "text", "text": "b"}]}
    ]}))
    .unwrap();
    let (status, error) = w
        .post_raw("/v1/workstreams/chat/dupes/messages", body)
        .await;
    assert_refused(status, &error, "invalid_body", "unknown field `id`");
    let as_client = serde_json::from_value::<IncomingMessage>(
        json!({"id": 7, "role": "user", "parts": [{"type": "text", "text": "a"}]}),
    )
    .unwrap_err();
    assert!(as_client.to_string().contains("unknown field `id`"));

    // Every turn reuses the call id "call-1", in the compacted part and in
    // the tail.
    let k = key("dupes");
    let mut messages = Vec::new();
    for t in 0..30 {
        messages.push(IncomingMessage::text(Role::User, format!("turn {t}")));
        messages.push(IncomingMessage::new(
            Role::Assistant,
            vec![Part::tool_call(
                "call-1",
                "bash",
                json!({"cmd": format!("ls {t}")}),
            )],
        ));
        messages.push(IncomingMessage::new(
            Role::Tool,
            vec![Part::tool_result("call-1", "bash", format!("listing {t}"))],
        ));
    }
    let ids = w.client.append_messages(&k, messages).await.unwrap().ids;
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        90,
        "the store's ids are unique"
    );
    let context = w.compact("dupes").await;
    assert_no_orphans(&context);
    // Results pair with the nearest earlier unanswered call of their id, so
    // the reused id blocks no cut: everything but the tail is compacted
    // (pairing with the first "call-1" made one pair span all 90 messages).
    assert!(
        context.messages.len() <= 8,
        "summary + a tail of about 6 messages, got {}",
        context.messages.len()
    );
    let rendered = serde_json::to_string(&context.messages).unwrap();
    assert!(rendered.contains("listing 29"), "the latest turn is kept");
    w.still_serving("after-dupes").await;
}
