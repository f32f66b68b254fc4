//! End to end: message branches. A chat backend forks a conversation
//! (an append after a parent, a move of the head over HTTP); the branch it
//! leaves is summarized by a `summarize_branch` job of the worker (the
//! extractive summarizer: no LLM), attached at the branch point, and the
//! context follows the current branch. Real Redis, real PostgreSQL and a
//! SQLite file.

use std::collections::BTreeSet;
use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{
    eventually, key, settings, start_worker, text_of, unique_name, FakeLlm, PrivateRedis, TestRedis,
};
use compactor_producer::client::{Compactor, IncomingMessage};
use compactor_producer::queue::{CancelThen, EnqueueOutcome, Queue};
use compactor_producer::reconcile::reconcile;
use compactor_producer::store::BranchSummaryRow;
use compactor_shared::{EntityKey, MessageId, Part, Role};
use compactor_worker::settings::Settings;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// An assistant message that says `text` and calls `tool` on `path`.
fn tool_step(text: &str, tool: &str, path: &str, call_id: &str) -> Vec<IncomingMessage> {
    vec![
        IncomingMessage::new(
            Role::Assistant,
            vec![
                Part::text(text),
                Part::tool_call(call_id, tool, json!({ "path": path })),
            ],
        ),
        IncomingMessage::new(
            Role::Tool,
            vec![Part::tool_result(
                call_id,
                tool,
                format!("contents of {path}"),
            )],
        ),
    ]
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// `POST {path}` with a JSON body: the status and the JSON answer.
async fn post(base: &str, path: &str, body: Value) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn head_path(k: &EntityKey) -> String {
    format!("/v1/workstreams/{}/{}/head", k.domain(), k.entity_id())
}

fn messages_path(k: &EntityKey) -> String {
    format!("/v1/workstreams/{}/{}/messages", k.domain(), k.entity_id())
}

/// A database of its own, a queue of its own, a worker's settings for
/// both (no LLM: the extractive summarizer) and a client on them.
async fn world(backend: Backend) -> (TestDb, TestRedis, Settings, Compactor) {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let settings = settings(&db.url, &redis, None);
    let compactor = Compactor::from_parts(
        db.store.clone(),
        redis.queue().await,
        settings.engine.clone(),
    )
    .await;
    (db, redis, settings, compactor)
}

/// Waits until `k` has `n` branch summaries; returns them.
async fn summaries(compactor: &Compactor, k: &EntityKey, n: usize) -> Vec<BranchSummaryRow> {
    eventually(
        "the branch summaries are attached",
        Duration::from_secs(60),
        || async { compactor.branch_summaries(k).await.unwrap().len() >= n },
    )
    .await;
    compactor.branch_summaries(k).await.unwrap()
}

/// How many `branch.summarized` events the outbox holds for `k`.
async fn branch_events(db: &TestDb, k: &EntityKey) -> i64 {
    db.scalar(&format!(
        "SELECT COUNT(*) AS n FROM events WHERE kind = 'branch.summarized' AND entity_id = '{}'",
        k.entity_id()
    ))
    .await
}

/// The data of `k`'s `branch.summarized` event for the branch left at
/// `leaf`, as the outbox holds it (its `payload` column).
async fn branch_event(db: &TestDb, k: &EntityKey, leaf: MessageId) -> Value {
    use sea_orm::{ConnectionTrait, Statement};
    let backend = db.store.connection().get_database_backend();
    let sql = format!(
        "SELECT payload FROM events WHERE kind = 'branch.summarized' AND entity_id = '{}'",
        k.entity_id()
    );
    let rows = db
        .store
        .connection()
        .query_all_raw(Statement::from_string(backend, sql))
        .await
        .unwrap();
    rows.iter()
        .map(|row| {
            serde_json::from_str::<Value>(&row.try_get::<String>("", "payload").unwrap()).unwrap()
        })
        .find(|data| data["leaf"] == json!(leaf.0))
        .unwrap_or_else(|| panic!("no branch.summarized event for leaf {leaf}"))
}

/// The context's stored messages (by source id) and the branch summaries
/// it shows.
async fn context_of(compactor: &Compactor, k: &EntityKey) -> (Vec<MessageId>, Vec<String>) {
    let context = compactor.build_context(k).await.unwrap();
    let sources = context.messages.iter().filter_map(|m| m.source).collect();
    let summaries = context
        .messages
        .iter()
        .filter(|m| m.source.is_none())
        .map(text_of)
        .filter(|t| t.starts_with("[branch summary:"))
        .collect();
    (sources, summaries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_abandoned_and_revisited_on_postgres() {
    abandoned_and_revisited(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_abandoned_and_revisited_on_sqlite() {
    abandoned_and_revisited(Backend::Sqlite).await;
}

/// m1 - m2 - m3 (read src/auth.rs) - m4 - m5 (branch A: edits
/// src/token.rs); the head moves back to m3 (A is summarized at m3);
/// m6 - m7 (branch B: reads tests/login.rs) continue m3; the head moves
/// to m5 (revisiting A: B is summarized at m3, carrying A's summary's
/// file operations).
async fn abandoned_and_revisited(backend: Backend) {
    let (db, _redis, settings, compactor) = world(backend).await;
    let worker = start_worker(settings).await;
    let base = worker.admin_url();
    let k = key(&unique_name("branches"));

    let mut start = vec![IncomingMessage::text(
        Role::User,
        "The login test is flaky; find out why.",
    )];
    start.extend(tool_step(
        "Reading the auth module first.",
        "read_file",
        "src/auth.rs",
        "c1",
    ));
    let start_ids = compactor.append_messages(&k, start).await.unwrap().ids;
    let m3 = start_ids[2];
    let branch_a = tool_step(
        "Approach A: retry the token refresh in the client.",
        "edit_file",
        "src/token.rs",
        "c2",
    );
    let appended_a = compactor.append_messages(&k, branch_a).await.unwrap();
    let a_ids = appended_a.ids;
    let (m4, m5) = (a_ids[0], a_ids[1]);
    assert_eq!(
        db.store
            .head(db.store.workstream(&k).await.unwrap().unwrap().id)
            .await
            .unwrap(),
        None,
        "appends without a parent keep a workstream linear"
    );

    // Leave branch A: back to m3.
    let (status, moved) = post(&base, &head_path(&k), json!({ "message_id": m3 })).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    assert_eq!(moved["head"], json!(m3.0));
    assert_eq!(
        moved["abandoned"],
        json!({ "leaf": m5.0, "branch_point": m3.0 })
    );
    assert_eq!(moved["branch_job"]["outcome"], "added", "{moved}");
    // The trigger counts the current path only.
    assert!(
        moved["uncompacted_tokens"].as_u64().unwrap() < appended_a.uncompacted_tokens,
        "{moved}"
    );

    let first = summaries(&compactor, &k, 1).await;
    assert_eq!(first.len(), 1);
    let a = &first[0];
    assert_eq!((a.branch_point, a.leaf, a.messages), (m3, m5, 2));
    assert_eq!(a.file_ops.modified, set(&["src/token.rs"]));
    assert!(a.file_ops.read.is_empty(), "{:?}", a.file_ops);
    // What branch A tried is in its summary: no evidence reads a branch's
    // messages, so the offline summary quotes them.
    assert!(
        a.summary.contains("retry the token refresh"),
        "{}",
        a.summary
    );
    eventually(
        "branch.summarized is in the outbox",
        Duration::from_secs(10),
        || async { branch_events(&db, &k).await == 1 },
    )
    .await;

    // Branch B continues m3 (over HTTP, naming its parent).
    let branch_b: Vec<Value> = tool_step(
        "Approach B: mock the clock in the test.",
        "read_file",
        "tests/login.rs",
        "c3",
    )
    .iter()
    .map(|m| serde_json::to_value(m).unwrap())
    .collect();
    let (status, appended) = post(
        &base,
        &messages_path(&k),
        json!({ "parent_id": m3, "messages": branch_b }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{appended}");
    let b_ids: Vec<MessageId> = serde_json::from_value(appended["ids"].clone()).unwrap();
    let (m6, m7) = (b_ids[0], b_ids[1]);

    // The context follows branch B: A's summary, none of A's messages.
    let (sources, shown) = context_of(&compactor, &k).await;
    assert_eq!(sources, [start_ids.clone(), vec![m6, m7]].concat());
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(
        shown[0].contains("Modified files: src/token.rs"),
        "{}",
        shown[0]
    );
    let context = compactor.build_context(&k).await.unwrap();
    let at = context
        .messages
        .iter()
        .position(|m| m.source.is_none() && text_of(m).starts_with("[branch summary:"))
        .unwrap();
    assert_eq!(
        context.messages[at - 1].source,
        Some(m3),
        "attached at the branch point"
    );

    // `/context` is the same context.
    let served: Value = reqwest::get(format!(
        "{base}/v1/workstreams/{}/{}/context",
        k.domain(),
        k.entity_id()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        served["messages"],
        serde_json::to_value(&context.messages).unwrap()
    );

    // Revisit A: B is left, at the same branch point.
    let (status, moved) = post(&base, &head_path(&k), json!({ "message_id": m5 })).await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    assert_eq!(
        moved["abandoned"],
        json!({ "leaf": m7.0, "branch_point": m3.0 })
    );
    let both = summaries(&compactor, &k, 2).await;
    let b = both.iter().find(|s| s.leaf == m7).unwrap();
    let data = branch_event(&db, &k, m7).await;
    assert_eq!(data["branch_point"], json!(m3.0));
    assert_eq!(data["messages"], json!(2));
    assert_eq!(data["carried_summaries"], json!(1));
    assert_eq!(data["degraded"], json!(false));
    assert_eq!(
        data["file_ops"],
        json!({"read": ["tests/login.rs"], "modified": ["src/token.rs"]})
    );
    assert_eq!(b.branch_point, m3);
    // Cumulative: B's own read, and A's edit carried through A's summary.
    assert_eq!(b.file_ops.read, set(&["tests/login.rs"]));
    assert_eq!(b.file_ops.modified, set(&["src/token.rs"]));

    // The context follows A again: its messages, B's summary, not A's own.
    let (sources, shown) = context_of(&compactor, &k).await;
    assert_eq!(sources, [start_ids.clone(), vec![m4, m5]].concat());
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(
        shown[0].contains("Read files: tests/login.rs"),
        "{}",
        shown[0]
    );
    assert!(!sources.contains(&m6) && !sources.contains(&m7));
    eventually(
        "two branch.summarized events",
        Duration::from_secs(10),
        || async { branch_events(&db, &k).await == 2 },
    )
    .await;
    worker.stop().await;
}

/// The same abandoned leaf requested twice is one job (and one summary);
/// another leaf is a job of its own, and neither touches the entity's
/// compaction job.
/// Four messages appended to `k` (a linear workstream): their ids.
async fn four_messages(compactor: &Compactor, k: &EntityKey) -> Vec<MessageId> {
    compactor
        .append_messages(
            k,
            (0..4)
                .map(|i| IncomingMessage::text(Role::User, format!("message {i}")))
                .collect(),
        )
        .await
        .unwrap()
        .ids
}

/// Four messages appended to `k`, then the head moved back to the second:
/// their ids, and the new `summarize_branch` job of the branch left
/// (messages 3 and 4).
async fn four_messages_left_at_the_second(
    compactor: &Compactor,
    k: &EntityKey,
) -> (Vec<MessageId>, u64) {
    let ids = four_messages(compactor, k).await;
    let left = compactor.move_head(k, ids[1]).await.unwrap();
    let Some(EnqueueOutcome::Added { job_id }) = left.branch_job else {
        panic!("a new job: {left:?}");
    };
    (ids, job_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_branch_left_twice_is_one_job() {
    let (db, redis, settings, compactor) = world(Backend::Postgres).await;
    let k = key(&unique_name("dedup"));
    // No worker yet: the request waits in the queue.
    let (ids, job_id) = four_messages_left_at_the_second(&compactor, &k).await;
    // Forward to the old leaf (nothing left), then back again: the same leaf.
    let forward = compactor.move_head(&k, ids[3]).await.unwrap();
    assert_eq!((forward.abandoned, forward.branch_job), (None, None));
    let again = compactor.move_head(&k, ids[1]).await.unwrap();
    assert_eq!(
        again.branch_job,
        Some(EnqueueOutcome::Coalesced { job_id }),
        "the same branch joins the waiting job"
    );
    // Another leaf (a fork after ids[1], left for ids[2]) is a job of its own.
    let fork = compactor
        .append_messages_after(
            &k,
            Some(ids[1]),
            vec![IncomingMessage::text(Role::User, "a fork")],
        )
        .await
        .unwrap();
    let other = compactor.move_head(&k, ids[2]).await.unwrap();
    assert_eq!(
        other.abandoned.map(|b| (b.leaf, b.branch_point)),
        Some((fork.ids[0], ids[1]))
    );
    assert!(
        matches!(other.branch_job, Some(EnqueueOutcome::Added { job_id: other }) if other != job_id)
    );
    // The entity's compaction job is separate.
    assert!(matches!(
        compactor.compact_now(&k, None).await.unwrap(),
        EnqueueOutcome::Added { .. }
    ));

    let worker = start_worker(settings).await;
    let done = summaries(&compactor, &k, 2).await;
    assert_eq!(done.len(), 2);
    eventually(
        "two branch.summarized events",
        Duration::from_secs(10),
        || async { branch_events(&db, &k).await == 2 },
    )
    .await;
    // The manual compaction may still hold the workstream's lease, and a
    // head may not leave a branch under a running compaction (409): let the
    // queue drain first.
    eventually("the queue drains", Duration::from_secs(30), || async {
        let counts = redis.queue().await.counts().await.unwrap();
        counts.waiting == 0 && counts.running == 0
    })
    .await;
    // Leaving the first branch once more after it was summarized: a job
    // runs, finds the summary, and writes nothing.
    compactor.move_head(&k, ids[3]).await.unwrap();
    compactor.move_head(&k, ids[2]).await.unwrap();
    eventually(
        "the repeated job has run",
        Duration::from_secs(30),
        || async {
            let q = redis.queue().await;
            let counts = q.counts().await.unwrap();
            counts.waiting == 0 && counts.running == 0
        },
    )
    .await;
    assert_eq!(compactor.branch_summaries(&k).await.unwrap().len(), 2);
    assert_eq!(branch_events(&db, &k).await, 2);
    worker.stop().await;
}

/// A `summarize_branch` job cancelled while its LLM call is under way
/// attaches nothing when the answer comes (it holds no entity lease: the
/// queue's mark of its revoked lease is its fence, read right before the
/// write). Retried, the job summarizes the branch, and the one
/// `branch.summarized` event is the retry's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_job_cancelled_while_it_summarizes_attaches_nothing() {
    let llm = FakeLlm::start().await;
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let mut s = settings(&db.url, &redis, Some(&llm.url()));
    // No renewal comes between the cancel and the answer: only the fence
    // before the write can stop the attempt.
    s.queue.lease_ttl = Duration::from_secs(30);
    s.worker.renew_interval = Duration::from_secs(15);
    let compactor =
        Compactor::from_parts(db.store.clone(), redis.queue().await, s.engine.clone()).await;
    let k = key(&unique_name("cancelled-branch"));
    let (ids, job_id) = four_messages_left_at_the_second(&compactor, &k).await;
    let answer_in = Duration::from_secs(2);
    llm.answer_after(answer_in);
    let worker = start_worker(s).await;
    eventually("the LLM is asked", Duration::from_secs(20), || async {
        !llm.calls().is_empty()
    })
    .await;
    let q = redis.queue().await;
    q.cancel(job_id, CancelThen::Dead).await.unwrap();
    // The attempt has ended when its completion finds the lease revoked
    // (a lost lease, counted): a write it made would be there by then.
    let metrics = format!("{}/metrics", worker.admin_url());
    eventually(
        "the cancelled attempt ends",
        Duration::from_secs(30),
        || async {
            let text = reqwest::get(&metrics).await.unwrap().text().await.unwrap();
            text.lines()
                .any(|l| l.starts_with("compactor_leases_lost_total{") && !l.ends_with(" 0"))
        },
    )
    .await;
    assert!(
        compactor.branch_summaries(&k).await.unwrap().is_empty(),
        "the cancelled attempt attached nothing"
    );
    assert_eq!(branch_events(&db, &k).await, 0);

    llm.answer_after(Duration::ZERO);
    let letters = q.dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    q.retry_dead(&letters[0].entry).await.unwrap();
    assert_eq!(summaries(&compactor, &k, 1).await.len(), 1);
    let event = branch_event(&db, &k, ids[3]).await;
    assert_ne!(
        event["job_id"],
        json!(job_id),
        "written by the retry: {event}"
    );
    worker.stop().await;
}

/// A branch left while Redis is down: the head move stands, but its
/// `summarize_branch` job cannot be requested. The reconciliation sweep
/// finds the branch without a summary or a job and requests it (once: a
/// sweep while it waits requests nothing), the worker attaches the
/// summary, and a sweep after that finds nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_left_while_redis_is_down_is_summarized_after_a_sweep() {
    let db = TestDb::new(Backend::Postgres).await;
    let mut private = PrivateRedis::start();
    let redis = TestRedis::new();
    let mut s = settings(&db.url, &redis, None);
    s.redis.url = compactor_producer::settings::ConnectionUrl::new(private.url());
    let queue = Queue::connect(&private.url(), redis.config.clone())
        .await
        .unwrap();
    let compactor = Compactor::from_parts(db.store.clone(), queue.clone(), s.engine.clone()).await;
    let k = key(&unique_name("lost-branch"));
    let ids = four_messages(&compactor, &k).await;
    private.kill();
    let left = compactor.move_head(&k, ids[1]).await.unwrap();
    assert!(left.abandoned.is_some(), "{left:?}");
    assert_eq!(left.branch_job, None, "Redis did not take the job");

    let _back = PrivateRedis::start_on(private.port);
    eventually("Redis answers again", Duration::from_secs(20), || async {
        queue.ping().await.is_ok()
    })
    .await;
    let sweep = || reconcile(&db.store, &queue, &s.engine);
    assert_eq!(sweep().await.unwrap().branches_requested, 1);
    assert_eq!(
        sweep().await.unwrap().branches_requested,
        0,
        "its job waits: not requested twice"
    );
    let worker = start_worker(s.clone()).await;
    let done = summaries(&compactor, &k, 1).await;
    assert_eq!(done[0].branch_point, ids[1]);
    eventually("the queue drains", Duration::from_secs(30), || async {
        let counts = queue.counts().await.unwrap();
        counts.waiting == 0 && counts.running == 0
    })
    .await;
    assert_eq!(sweep().await.unwrap().branches_requested, 0);
    worker.stop().await;
}

/// Bad parents and heads are typed 4xx errors, and store nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_parents_and_heads_are_refused() {
    let (db, _redis, settings, compactor) = world(Backend::Postgres).await;
    let worker = start_worker(settings).await;
    let base = worker.admin_url();
    let k = key(&unique_name("bad-branch"));
    let other = key(&unique_name("other"));
    let ids = compactor
        .append_messages(&k, vec![IncomingMessage::text(Role::User, "mine")])
        .await
        .unwrap()
        .ids;
    let foreign = compactor
        .append_messages(&other, vec![IncomingMessage::text(Role::User, "theirs")])
        .await
        .unwrap()
        .ids[0];

    for (id, what) in [
        (foreign, "another workstream's"),
        (MessageId(i64::MAX), "unknown"),
    ] {
        let (status, body) = post(&base, &head_path(&k), json!({ "message_id": id })).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{what}: {body}");
        assert_eq!(body["error"]["code"], "unknown_message", "{what}");
        let (status, body) = post(
            &base,
            &messages_path(&k),
            json!({
                "parent_id": id,
                "messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}]
            }),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{what}: {body}");
        assert_eq!(body["error"]["code"], "invalid_parent", "{what}");
    }
    let (status, body) = post(
        &base,
        &head_path(&key(&unique_name("none"))),
        json!({ "message_id": 1 }),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::NOT_FOUND, &json!("unknown_workstream"))
    );
    let (status, body) = post(&base, &head_path(&k), json!({ "message_id": "one" })).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::BAD_REQUEST, &json!("invalid_body"))
    );
    // Nothing was stored, and the workstream is still linear.
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(ws.last_message_id, Some(ids[0]));
    assert_eq!(db.store.head(ws.id).await.unwrap(), None);

    // A message folded by a compaction cannot be the head.
    let many: Vec<IncomingMessage> = (0..12)
        .map(|i| IncomingMessage::text(Role::User, format!("turn {i}: {}", "words ".repeat(40))))
        .collect();
    let many_ids = compactor.append_messages(&k, many).await.unwrap().ids;
    compactor.compact_now(&k, None).await.unwrap();
    eventually(
        "the workstream is compacted",
        Duration::from_secs(60),
        || async { compactor.status(&k).await.unwrap().compactions == 1 },
    )
    .await;
    let watermark = compactor
        .status(&k)
        .await
        .unwrap()
        .last_compacted_message_id
        .unwrap();
    assert!(watermark > many_ids[0]);
    let (status, body) = post(&base, &head_path(&k), json!({ "message_id": many_ids[0] })).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "branch_conflict");
    // The watermark itself, and a message after it, may be heads.
    let last = *many_ids.last().unwrap();
    let (status, body) = post(&base, &head_path(&k), json!({ "message_id": last })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    worker.stop().await;
}

/// A branched workstream compacts its current path only: the abandoned
/// branch is neither in the summary's span nor in the context after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_folds_the_current_path_only() {
    let (db, _redis, settings, compactor) = world(Backend::Postgres).await;
    let worker = start_worker(settings).await;
    let k = key(&unique_name("branch-compact"));
    let turn = |i: usize, topic: &str| {
        IncomingMessage::text(
            if i.is_multiple_of(2) {
                Role::User
            } else {
                Role::Assistant
            },
            format!("{topic} turn {i}: {}", "details ".repeat(40)),
        )
    };
    let trunk = compactor
        .append_messages(&k, (0..4).map(|i| turn(i, "trunk")).collect())
        .await
        .unwrap()
        .ids;
    let abandoned = compactor
        .append_messages(&k, (0..4).map(|i| turn(i, "zebra-abandoned")).collect())
        .await
        .unwrap()
        .ids;
    compactor.move_head(&k, trunk[3]).await.unwrap();
    let kept = compactor
        .append_messages(&k, (0..12).map(|i| turn(i, "current")).collect())
        .await
        .unwrap()
        .ids;
    summaries(&compactor, &k, 1).await;
    compactor.compact_now(&k, None).await.unwrap();
    eventually(
        "the workstream is compacted",
        Duration::from_secs(60),
        || async { compactor.status(&k).await.unwrap().compactions == 1 },
    )
    .await;
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    let watermark = ws.last_compacted_message_id.unwrap();
    assert!(
        trunk.contains(&watermark) || kept.contains(&watermark),
        "the watermark is on the current path"
    );
    assert!(!abandoned.contains(&watermark));
    let summary = ws.summary.unwrap().render();
    assert!(!summary.contains("zebra-abandoned"), "{summary}");
    let (sources, _) = context_of(&compactor, &k).await;
    assert!(sources.iter().all(|id| !abandoned.contains(id)));
    assert!(sources.contains(kept.last().unwrap()));
    worker.stop().await;
}

/// A branch may not be left while a compaction holds the workstream (it is
/// folding the current path): 409 `branch_conflict`. But a lease its
/// holder stopped renewing (the worker died) is no compaction: a head
/// move or a fork leaves the branch, and the leftover lease is released
/// under the row lock, so its holder, were it alive after all, fails its
/// fence instead of folding the branch left. (Before, every head move
/// answered 409 until a new compaction took the lease over.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_lease_does_not_hold_branches_but_a_live_one_does() {
    let (db, _redis, _settings, compactor) = world(Backend::Postgres).await;
    let k = key(&unique_name("leftover"));
    let say = |text: &str| vec![IncomingMessage::text(Role::User, text.to_owned())];
    let first = compactor.append_messages(&k, say("one")).await.unwrap().ids[0];
    compactor.append_messages(&k, say("two")).await.unwrap();
    let ws = db.store.workstream(&k).await.unwrap().unwrap();

    // A live lease: leaving the branch is refused, nothing changes.
    db.store
        .take_lease(ws.id, "live-holder", Duration::from_secs(60))
        .await
        .unwrap();
    let refused = compactor.move_head(&k, first).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("compaction of the workstream is running"),
        "{refused}"
    );
    let forked = compactor
        .append_messages_after(&k, Some(first), say("fork"))
        .await
        .unwrap_err();
    assert!(
        forked
            .to_string()
            .contains("compaction of the workstream is running"),
        "{forked}"
    );
    assert!(db.store.release_lease(ws.id, "live-holder").await.unwrap());

    // A lease left over by a holder that stopped renewing it.
    db.store
        .take_lease(ws.id, "dead-holder", Duration::from_millis(10))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let moved = compactor.move_head(&k, first).await.unwrap();
    assert_eq!(moved.head, first);
    assert!(moved.abandoned.is_some(), "the branch of 'two' is left");
    let row = db.store.workstream(&k).await.unwrap().unwrap();
    assert!(row.lease.is_none(), "the leftover lease is released");
    assert!(
        !db.store
            .renew_lease(ws.id, "dead-holder", Duration::from_secs(60))
            .await
            .unwrap(),
        "its holder, back, is fenced out"
    );

    // And a fork under a leftover lease goes ahead too.
    let second_fork_point = compactor
        .append_messages(&k, say("three"))
        .await
        .unwrap()
        .ids[0];
    db.store
        .take_lease(ws.id, "dead-holder-2", Duration::from_millis(10))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let fork = compactor
        .append_messages_after(&k, Some(first), say("another fork"))
        .await
        .unwrap();
    assert_ne!(fork.ids[0], second_fork_point);
    assert!(db
        .store
        .workstream(&k)
        .await
        .unwrap()
        .unwrap()
        .lease
        .is_none());
}
