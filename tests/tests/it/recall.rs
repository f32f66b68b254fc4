//! Recall of compacted history, end to end: a worker (extractive summaries,
//! no LLM) compacts a workstream five times; a value stated before the
//! first compaction is found again by `GET …/recall` and by the client,
//! verbatim, with the run that folded it. Hostile queries are a 400 or an
//! empty answer, never a 500; an unknown workstream is a 404. Real Redis,
//! real PostgreSQL and a SQLite file.

use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{chat, eventually, key, settings, start_worker, TestRedis};
use compactor_producer::client::{Compactor, IncomingMessage};
use compactor_producer::recall::{RecallLimit, RecallQuery};
use compactor_shared::{EntityKey, Part, Role};
use reqwest::StatusCode;
use serde_json::Value;

const VALUE: &str = "the vault combination is ZEBRA-7731, keep it safe";

/// One round: 120 messages of chatter, then a manual compaction, waited
/// until the workstream counts `round` compactions.
async fn compact_round(c: &Compactor, k: &EntityKey, round: i64) {
    c.append_messages(
        k,
        chat(120, |i| {
            format!("round {round} message {i}: the weather and the build logs")
        }),
    )
    .await
    .unwrap();
    c.compact_now(k, None).await.unwrap();
    eventually(
        "the manual compaction commits",
        Duration::from_secs(60),
        || async { c.status(k).await.unwrap().compactions == round },
    )
    .await;
}

async fn get(url: &str) -> (StatusCode, Value) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

async fn recall_finds_a_value_five_compactions_after_it_was_folded(backend: Backend) {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let worker = start_worker(settings(&db.url, &redis, None)).await;
    let c = Compactor::from_parts(
        db.store.clone(),
        redis.queue().await,
        compactor_shared::config::EngineConfig::default(),
    )
    .await;
    let k = key(&compactor_e2e::unique_name("recall"));

    let stated = c
        .append_messages(
            &k,
            vec![
                IncomingMessage::text(Role::User, VALUE),
                // A backslash before "u0000" (JSON `\\u0000`), which the
                // index must not take for an escaped NUL.
                IncomingMessage::text(Role::User, "a \\u0000 literal for Müller"),
                IncomingMessage::new(
                    Role::Assistant,
                    vec![Part::tool_call(
                        "c1",
                        "shell",
                        serde_json::json!({"cmd": "open vault", "args": ["--dial", "QUOKKA42"]}),
                    )],
                ),
                IncomingMessage::new(
                    Role::Tool,
                    vec![Part::tool_result("c1", "shell", "vault opened")],
                ),
            ],
        )
        .await
        .unwrap();
    let value_id = stated.ids[0];
    for round in 1..=5 {
        compact_round(&c, &k, round).await;
    }
    // A NUL (JSON `\u0000`, which PostgreSQL's jsonb refuses and SQLite's
    // JSON functions end text at) is stored and indexed as a space.
    let nul = c
        .append_messages(
            &k,
            vec![IncomingMessage::text(Role::User, "nul\u{0}byte then tapir")],
        )
        .await
        .unwrap();
    let runs = db.store.runs(&k, 10).await.unwrap();
    let first_run = runs.iter().map(|r| r.id).min().unwrap();
    assert!(runs.len() >= 5, "{} runs", runs.len());

    let base = format!(
        "{}/v1/workstreams/{}/{}/recall",
        worker.admin_url(),
        k.domain(),
        k.entity_id()
    );
    let (status, body) = get(&format!("{base}?q=zebra-7731")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let found = body["messages"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{body}");
    assert_eq!(found[0]["id"], value_id.0);
    assert_eq!(found[0]["role"], "user");
    assert_eq!(found[0]["parts"][0]["text"], VALUE, "verbatim");
    assert_eq!(found[0]["compacted"], true);
    assert_eq!(
        found[0]["folded_by"]["run_id"], first_run,
        "folded by the first run"
    );
    assert!(found[0]["folded_by"]["at"].is_string());

    // The client says the same.
    let recall = c
        .recall(
            &k,
            &RecallQuery::parse("ZEBRA-7731").unwrap(),
            RecallLimit::default(),
        )
        .await
        .unwrap();
    assert_eq!(recall.messages.len(), 1);
    assert_eq!(recall.messages[0].id, value_id);
    assert_eq!(
        recall.messages[0].folded_by.as_ref().unwrap().run_id,
        first_run
    );

    // Tool call input and non-ASCII text are searchable; every word must
    // match.
    let (_, body) = get(&format!("{base}?q=quokka42")).await;
    assert_eq!(body["messages"][0]["id"], stated.ids[2].0, "{body}");
    let (_, body) = get(&format!("{base}?q=m%C3%BCller%20literal")).await;
    assert_eq!(body["messages"][0]["id"], stated.ids[1].0, "{body}");
    let (_, body) = get(&format!("{base}?q=byte%20tapir")).await;
    assert_eq!(body["messages"][0]["id"], nul.ids[0].0, "{body}");
    let (_, body) = get(&format!("{base}?q=zebra-7731%20quokka42")).await;
    assert_eq!(body["messages"].as_array().unwrap().len(), 0, "{body}");

    // Newest first, bounded by `limit`; un-compacted messages have no run.
    let (_, body) = get(&format!("{base}?q=weather&limit=3")).await;
    let ids: Vec<i64> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{body}");
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    let newest = &body["messages"][0];
    assert_eq!(
        newest["compacted"], false,
        "the tail stays verbatim: {newest}"
    );
    assert_eq!(newest["folded_by"], Value::Null);

    // Hostile queries: a 400 (`invalid_query`) or an answer, never a 500.
    let long = "a".repeat(600);
    let hostile = [
        "%22",
        "*",
        "NEAR(zebra%20vault)",
        "(",
        ")",
        "zebra*",
        "%22zebra",
        "zebra%22%20OR%20%22x",
        "'",
        "%5C",
        "-zebra",
        "body:zebra",
        "%5Ezebra",
        "zebra%20AND",
        "a%00b",
        "%E6%9D%B1%E4%BA%AC",
        "%F0%9F%94%A5",
        "%3A%26%7C!%3C-%3E",
        &long,
    ];
    for q in hostile {
        let (status, body) = get(&format!("{base}?q={q}")).await;
        assert!(
            status == StatusCode::OK || status == StatusCode::BAD_REQUEST,
            "{q}: {status} {body}"
        );
        if status == StatusCode::BAD_REQUEST {
            assert_eq!(body["error"]["code"], "invalid_query", "{q}: {body}");
        } else {
            assert!(body["messages"].is_array(), "{q}: {body}");
        }
    }
    for q in ["", "%20%20", "*%20(%20)", long.as_str()] {
        let (status, body) = get(&format!("{base}?q={q}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{q:?}: {body}");
        assert_eq!(body["error"]["code"], "invalid_query");
    }
    for limit in ["0", "101", "-1", "x"] {
        let (status, _) = get(&format!("{base}?q=zebra&limit={limit}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "limit={limit}");
    }
    // Quote-wrapped, operator-laden text still finds the value.
    let (_, body) = get(&format!("{base}?q=%22ZEBRA-7731%22")).await;
    assert_eq!(body["messages"][0]["id"], value_id.0, "{body}");

    // An unknown workstream is a 404.
    let (status, body) = get(&format!(
        "{}/v1/workstreams/chat/no-such-entity/recall?q=zebra",
        worker.admin_url()
    ))
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "unknown_workstream");

    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_finds_a_value_five_compactions_after_it_was_folded_on_postgres() {
    recall_finds_a_value_five_compactions_after_it_was_folded(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_finds_a_value_five_compactions_after_it_was_folded_on_sqlite() {
    recall_finds_a_value_five_compactions_after_it_was_folded(Backend::Sqlite).await;
}

/// Recall names its workstream inside the full-text index (migration
/// `m20261127_000005_scope_message_search`): a word written 50 times in
/// another workstream and once, long ago, in this one is found once, from
/// the older-matches step (past the newest 5,000 messages), through the
/// scoped index; the workstream lexeme (`ws <id>`) is never a word a query
/// can match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_is_scoped_to_its_workstream_inside_the_index_on_postgres() {
    let db = TestDb::postgres().await;
    let a = db
        .store
        .ensure_workstream(&key("scoped-a"))
        .await
        .unwrap()
        .id;
    let b = db
        .store
        .ensure_workstream(&key("scoped-b"))
        .await
        .unwrap()
        .id;
    let text =
        |t: &str| format!("json_build_array(json_build_object('type', 'text', 'text', {t}))::text");
    // A: 6,000 messages; the 10th says the word, and names B's lexeme as
    // plain words.
    db.exec(&format!(
        "INSERT INTO messages (workstream_id, role, parts, token_estimate, created_at) \
         SELECT {a}, 'user', {}, 5, now() FROM generate_series(1, 6000) AS i",
        text(&format!(
            "CASE WHEN i = 10 THEN 'the harbor-ox ledger, ws {b}' ELSE 'filler ' || i END"
        ))
    ))
    .await;
    // B: 50 messages with the word, newer than all of A's.
    db.exec(&format!(
        "INSERT INTO messages (workstream_id, role, parts, token_estimate, created_at) \
         SELECT {b}, 'user', {}, 5, now() FROM generate_series(1, 50) AS i",
        text("'harbor-ox again ' || i")
    ))
    .await;
    db.exec("ANALYZE messages").await;

    let q = RecallQuery::parse("harbor-ox").unwrap();
    let in_a = db
        .store
        .recall(a, &q, RecallLimit::default())
        .await
        .unwrap();
    assert_eq!(in_a.len(), 1, "only A's own match: {in_a:?}");
    let first_of_a: i64 = db
        .scalar(&format!(
            "SELECT min(id) AS n FROM messages WHERE workstream_id = {a}"
        ))
        .await;
    assert_eq!(in_a[0].id.0, first_of_a + 9, "the 10th message of A");
    let in_b = db
        .store
        .recall(b, &q, RecallLimit::default())
        .await
        .unwrap();
    assert_eq!(in_b.len(), 20, "B's newest 20 of 50");
    let last_of_b: i64 = db
        .scalar(&format!(
            "SELECT max(id) AS n FROM messages WHERE workstream_id = {b}"
        ))
        .await;
    assert_eq!(in_b[0].id.0, last_of_b, "newest first");

    // `ws <id>` as a user writes it is two plain words: A's message has
    // them, B's lexeme matches nothing in B.
    let ws = RecallQuery::parse(&format!("ws {b}")).unwrap();
    assert_eq!(
        db.store
            .recall(a, &ws, RecallLimit::default())
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(db
        .store
        .recall(b, &ws, RecallLimit::default())
        .await
        .unwrap()
        .is_empty());

    let plan = db.store.recall_older_plan(a, &q).await.unwrap().unwrap();
    assert!(
        plan.contains("idx_messages_search_scoped"),
        "the older-matches step uses the scoped index:\n{plan}"
    );
}
