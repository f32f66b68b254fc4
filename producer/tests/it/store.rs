//! The repository (`compactor_producer::store`) against real databases:
//! every scenario runs on PostgreSQL (its own schema) and on SQLite (its
//! own file). See `support/db.rs`.

use std::time::{Duration, Instant};

use crate::support::db::{Backend, TestDb};
use chrono::Utc;
use compactor_migrations::{migration_names, Migrator, MigratorTrait};
use compactor_producer::store::{
    Commit, CommitOutcome, ConflictReason, DegradedReason, DeliveryFilter, DeliveryResult,
    DeliveryState, EventKind, LeaseTaken, MemoryFold, NewEvent, NewMessage, NewRun, PrunedMessage,
    RetryOutcome, RunOutcome, SchemaStatus, Store, StoreError, WorkstreamQuery, WorkstreamRow,
};
use compactor_shared::state::StateItem;
use compactor_shared::{EntityKey, Message, MessageId, Part, Role, Summary, WorkstreamState};
use sea_orm::ConnectionTrait;

/// Runs each listed scenario `async fn name(backend: Backend)` once per
/// backend, as `postgres::name` and `sqlite::name`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Postgres).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Sqlite).await
                }
            )*
        }
    };
}

on_both_backends!(
    migrate_twice_is_a_no_op_and_status_follows,
    a_database_ahead_of_the_build_is_reported_and_not_migrated,
    racing_ensure_workstream_creates_one_row,
    ten_thousand_messages_append_in_one_call,
    awkward_content_and_client_ids_round_trip_exactly,
    pages_stream_in_order_and_respect_after,
    pages_are_bounded_by_the_tokens_they_hold,
    a_reader_ends_its_pass_after_a_page_that_held_everything,
    pages_read_ahead_are_the_pages_read_in_turn,
    a_corrupt_row_is_an_error_not_a_panic_or_a_gap,
    lease_take_hold_expire_renew_release,
    a_free_lease_is_taken_and_read_in_one_statement,
    the_fenced_commit_writes_exactly_what_it_says,
    a_stale_watermark_conflicts_and_writes_nothing,
    a_lost_lease_conflicts_and_writes_nothing,
    racing_commits_commit_exactly_once,
    an_error_inside_the_commit_leaves_nothing_half_written,
    failures_open_the_breaker_and_new_messages_close_it,
    a_commit_without_progress_counts_towards_the_breaker,
    memory_entries_append_and_fold,
    runs_are_listed_newest_first,
    a_run_row_says_why_it_was_degraded_and_what_the_llm_cost,
    runs_recorded_before_the_llm_audit_columns_still_read,
    runs_recorded_before_the_evidence_columns_read_zero,
    flags_written_before_the_watermark_migration_read_the_same_after_it,
    a_retried_append_with_client_ids_stores_nothing_twice,
    a_client_id_with_other_content_is_refused_and_nothing_is_stored,
    racing_tries_of_one_append_store_it_once,
    the_outbox_relays_each_event_once_and_delivers_with_retries,
    outbox_deliveries_are_listed_retried_and_pruned_when_done,
    an_event_is_written_only_with_the_change_it_reports,
    a_held_request_writes_its_event_before_the_lease_can_be_taken,
);

// ---------------------------------------------------------------- helpers

fn key(entity: &str) -> EntityKey {
    EntityKey::parse("chat", entity).unwrap()
}

fn msg(text: &str, tokens: u64) -> NewMessage {
    NewMessage {
        role: Role::User,
        parts: vec![Part::text(text)],
        pinned: false,
        token_estimate: tokens,
        client_id: None,
    }
}

fn msg_with_id(text: &str, tokens: u64, client_id: &str) -> NewMessage {
    NewMessage {
        client_id: Some(client_id.to_owned()),
        ..msg(text, tokens)
    }
}

fn make_run(outcome: RunOutcome) -> NewRun {
    NewRun {
        job_id: 7,
        attempt: 1,
        trigger: "auto".to_owned(),
        started_at: Utc::now(),
        finished_at: Utc::now(),
        outcome,
        degraded: false,
        degraded_reason: None,
        tokens_before: 1000,
        tokens_after: 200,
        messages_compacted: 5,
        chunks: 1,
        rollups: 0,
        evidence_kept: 12,
        evidence_dropped: 30,
        llm_model: Some("extractive".to_owned()),
        llm_calls: 1,
        llm_failed_calls: 0,
        llm_tokens_in: 900,
        llm_tokens_out: 100,
        error: None,
        summary: Some("KEY FACTS\n- x".to_owned()),
        hook: Default::default(),
    }
}

fn make_summary(fact: &str) -> Summary {
    Summary {
        key_facts: vec![fact.to_owned()],
        ..Summary::default()
    }
}

fn make_state(decision: &str) -> WorkstreamState {
    WorkstreamState {
        key_decisions: vec![StateItem::new(decision)],
        ..WorkstreamState::default()
    }
}

/// A commit of `(expected, new]` by `owner` with no extras.
fn plain_commit<'a>(
    ws: &WorkstreamRow,
    owner: &'a str,
    expected: Option<MessageId>,
    new: MessageId,
    summary: &'a Summary,
    state: &'a WorkstreamState,
    run: &'a NewRun,
) -> Commit<'a> {
    Commit {
        workstream_id: ws.id,
        lease_owner: owner,
        expected_watermark: expected,
        new_watermark: new,
        keep: &[],
        compacted_tokens: 0,
        summary,
        summary_tokens: 10,
        state,
        memory_fold: None,
        pruned: &[],
        just_auto_compacted: true,
        progress: true,
        run,
    }
}

/// The summary, state and run of a commit (the fact and decision tell
/// commits apart), made in one line instead of five.
fn commit_parts(
    fact: &str,
    decision: &str,
    outcome: RunOutcome,
) -> (Summary, WorkstreamState, NewRun) {
    (make_summary(fact), make_state(decision), make_run(outcome))
}

const TTL: Duration = Duration::from_secs(30);

/// The row of `entity`'s workstream, which the scenario made.
async fn workstream(db: &TestDb, entity: &str) -> WorkstreamRow {
    db.store.workstream(&key(entity)).await.unwrap().unwrap()
}

/// Up to `limit` uncompacted messages of a workstream after `after`.
async fn uncompacted_page(
    db: &TestDb,
    workstream_id: i64,
    after: Option<MessageId>,
    limit: u64,
) -> Vec<Message> {
    db.store
        .uncompacted_page(workstream_id, after, limit)
        .await
        .unwrap()
}

/// The ids of `messages`, in order.
fn ids_of(messages: &[Message]) -> Vec<MessageId> {
    messages.iter().map(|m| m.id).collect()
}

/// Moves the deadline of a workstream's lease into the past, as a holder
/// that stalled would.
async fn expire_lease(db: &TestDb, workstream_id: i64) {
    db.exec(&format!(
        "UPDATE workstreams SET lease_deadline_ms = 1 WHERE id = {workstream_id}"
    ))
    .await;
}

/// `(id, compacted, token_estimate)` of every message of a workstream;
/// compacted: at or below the watermark and not kept (the rule of
/// `store::compacted`, spelled out here so that the test checks it).
async fn message_rows(db: &TestDb, workstream_id: i64) -> Vec<(i64, bool, i64)> {
    let sql = format!(
        "SELECT id, (NOT kept AND id <= COALESCE((SELECT last_compacted_message_id \
           FROM workstreams w WHERE w.id = messages.workstream_id), 0)) AS is_compacted, \
           token_estimate \
         FROM messages WHERE workstream_id = {workstream_id} ORDER BY id"
    );
    db.store
        .connection()
        .query_all_raw(sea_orm::Statement::from_string(db.db_backend(), sql))
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.try_get::<i64>("", "id").unwrap(),
                r.try_get::<bool>("", "is_compacted").unwrap(),
                r.try_get::<i64>("", "token_estimate").unwrap(),
            )
        })
        .collect()
}

async fn count(db: &TestDb, table: &str, workstream_id: i64) -> i64 {
    db.scalar(&format!(
        "SELECT COUNT(*) AS n FROM {table} WHERE workstream_id = {workstream_id}"
    ))
    .await
}

async fn all_uncompacted(store: &Store, workstream_id: i64) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .uncompacted_page(workstream_id, after, 1000)
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        ids.extend(page.iter().map(|m| m.id.0));
    }
    ids
}

/// A workstream with `n` messages of 10 tokens each, and the ids.
async fn with_messages(db: &TestDb, entity: &str, n: usize) -> (WorkstreamRow, Vec<MessageId>) {
    let messages: Vec<NewMessage> = (0..n).map(|i| msg(&format!("m{i}"), 10)).collect();
    let appended = db
        .store
        .append_messages(&key(entity), &messages)
        .await
        .unwrap();
    let ws = workstream(db, entity).await;
    (ws, appended.ids)
}

// ---------------------------------------------------------------- schema

async fn migrate_twice_is_a_no_op_and_status_follows(backend: Backend) {
    let db = TestDb::unmigrated(backend).await;
    assert_eq!(
        db.store.schema_status().await.unwrap(),
        SchemaStatus::Behind {
            pending: migration_names()
        }
    );
    assert_eq!(db.store.migrate().await.unwrap(), migration_names());
    assert_eq!(
        db.store.schema_status().await.unwrap(),
        SchemaStatus::Current
    );
    assert!(db.store.migrate().await.unwrap().is_empty());
    assert_eq!(
        db.store.schema_status().await.unwrap(),
        SchemaStatus::Current
    );
    // The schema works after the second run.
    db.store.ensure_workstream(&key("a")).await.unwrap();
}

async fn a_database_ahead_of_the_build_is_reported_and_not_migrated(backend: Backend) {
    let db = TestDb::new(backend).await;
    db.exec(
        "INSERT INTO seaql_migrations (version, applied_at) VALUES ('m29990101_000001_from_the_future', 0)",
    )
    .await;
    assert_eq!(
        db.store.schema_status().await.unwrap(),
        SchemaStatus::Ahead {
            unknown: vec!["m29990101_000001_from_the_future".to_owned()]
        }
    );
    let err = db.store.migrate().await.unwrap_err();
    assert!(err.to_string().contains("from_the_future"), "{err}");
}

// ---------------------------------------------------------------- workstreams and messages

async fn racing_ensure_workstream_creates_one_row(backend: Backend) {
    let db = TestDb::new(backend).await;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let store = db.store.clone();
            tokio::spawn(async move { store.ensure_workstream(&key("race")).await.unwrap() })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap().id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(db.scalar("SELECT COUNT(*) AS n FROM workstreams").await, 1);
    let row = workstream(&db, "race").await;
    assert_eq!(row.key, key("race"));
    assert_eq!(row.state, WorkstreamState::default());
    assert_eq!(row.summary, None);
    assert_eq!(row.version, 0);
    assert_eq!(row.lease, None);
    assert!(db.store.workstream(&key("other")).await.unwrap().is_none());
}

async fn ten_thousand_messages_append_in_one_call(backend: Backend) {
    let db = TestDb::new(backend).await;
    let messages: Vec<NewMessage> = (0..10_000).map(|i| msg(&format!("m{i}"), 3)).collect();
    let appended = db
        .store
        .append_messages(&key("big"), &messages)
        .await
        .unwrap();
    assert_eq!(appended.ids.len(), 10_000);
    assert!(appended.ids.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(appended.uncompacted_tokens, 30_000);
    let ws = workstream(&db, "big").await;
    assert_eq!(ws.id, appended.workstream_id);
    assert_eq!(ws.last_message_id, appended.ids.last().copied());
    assert_eq!(ws.uncompacted_tokens, 30_000);
    // Ids are given in the order of the input: message i says "m{i}".
    let page = uncompacted_page(&db, ws.id, Some(appended.ids[4_999]), 3).await;
    assert_eq!(page[0].id, appended.ids[5_000]);
    assert_eq!(page[0].parts, vec![Part::text("m5000")]);
    assert_eq!(
        all_uncompacted(&db.store, ws.id).await,
        appended.ids.iter().map(|m| m.0).collect::<Vec<_>>()
    );
}

/// Text that array literals, SQL and JSON each treat specially is stored
/// and read back as given (PostgreSQL binds a batch as array literals), and
/// a retry finds every message by its client id.
async fn awkward_content_and_client_ids_round_trip_exactly(backend: Backend) {
    let db = TestDb::new(backend).await;
    let k = key("awkward");
    let texts = [
        r#"quote " and backslash \ and \" and \\"#,
        "{braces}, commas, (parens) and 'single quotes'",
        "NULL",
        "",
        "  spaces around  ",
        "new\nline\ttab\r\u{1}\u{7f}",
        "ünïcödé, 中文, emoji 😀",
        r#"{"json": ["in", "text"], "esc": "\u0000"}"#,
    ];
    let client_ids = [
        r#"id "quoted""#,
        r"id \ back\slash",
        "NULL",
        "{x,y}",
        " ",
        "plain",
        "ü-😀",
        "last",
    ];
    let mut batch: Vec<NewMessage> = texts
        .iter()
        .zip(client_ids)
        .enumerate()
        .map(|(i, (text, client_id))| NewMessage {
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            parts: vec![Part::text(*text)],
            pinned: i % 3 == 0,
            token_estimate: i as u64,
            client_id: Some(client_id.to_owned()),
        })
        .collect();
    batch.push(NewMessage {
        role: Role::Assistant,
        parts: vec![Part::tool_call(
            "c\"1",
            "bash",
            serde_json::json!({"cmd": "echo \"{a,b}\" \\ NULL", "n": [1, null]}),
        )],
        pinned: false,
        token_estimate: 1 << 40,
        client_id: None,
    });
    let first = db.store.append_messages(&k, &batch).await.unwrap();
    assert_eq!(first.ids.len(), batch.len());
    assert!(first.ids.windows(2).all(|w| w[0] < w[1]));
    let stored = uncompacted_page(&db, first.workstream_id, None, 100).await;
    assert_eq!(ids_of(&stored), first.ids);
    for (m, given) in stored.iter().zip(&batch) {
        assert_eq!(m.parts, given.parts);
        assert_eq!(m.role, given.role);
        assert_eq!(m.pinned, given.pinned);
    }
    // Each client id names its message: a retry stores nothing again.
    let again = db
        .store
        .append_messages(&k, &batch[..texts.len()])
        .await
        .unwrap();
    assert_eq!(again.ids[..], first.ids[..texts.len()]);
    assert_eq!(again.already_stored, texts.len());
    assert_eq!(count_messages(&db, "awkward").await, batch.len() as i64);
}

async fn pages_stream_in_order_and_respect_after(backend: Backend) {
    let db = TestDb::new(backend).await;
    let first = db
        .store
        .append_messages(
            &key("p"),
            &[
                NewMessage {
                    role: Role::Assistant,
                    parts: vec![
                        Part::text("running it"),
                        Part::tool_call("c1", "bash", serde_json::json!({"cmd": "ls"})),
                    ],
                    pinned: true,
                    token_estimate: 5,
                    client_id: None,
                },
                NewMessage {
                    role: Role::Tool,
                    parts: vec![Part::tool_result("c1", "bash", "Cargo.toml")],
                    pinned: false,
                    token_estimate: 4,
                    client_id: None,
                },
            ],
        )
        .await
        .unwrap();
    // Another workstream's messages interleave; they never show up.
    db.store
        .append_messages(&key("q"), &[msg("other", 1)])
        .await
        .unwrap();
    let second = db
        .store
        .append_messages(&key("p"), &[msg("a", 1), msg("b", 1), msg("c", 1)])
        .await
        .unwrap();
    assert_eq!(second.uncompacted_tokens, 12);
    let ws = first.workstream_id;
    let all: Vec<MessageId> = first.ids.iter().chain(&second.ids).copied().collect();

    let page1 = uncompacted_page(&db, ws, None, 2).await;
    assert_eq!(ids_of(&page1), all[..2]);
    assert_eq!(page1[0].role, Role::Assistant);
    assert!(page1[0].pinned);
    assert_eq!(page1[0].tool_calls().collect::<Vec<_>>(), ["c1"]);
    assert_eq!(page1[1].role, Role::Tool);
    assert!(!page1[1].pinned);
    let page2 = uncompacted_page(&db, ws, Some(page1[1].id), 2).await;
    assert_eq!(ids_of(&page2), all[2..4]);
    let page3 = uncompacted_page(&db, ws, Some(page2[1].id), 2).await;
    assert_eq!(ids_of(&page3), all[4..]);
    assert!(uncompacted_page(&db, ws, Some(page3[0].id), 2)
        .await
        .is_empty());
}

async fn pages_are_bounded_by_the_tokens_they_hold(backend: Backend) {
    let db = TestDb::new(backend).await;
    let sizes = [10u64, 10, 500, 10, 10, 10];
    let messages: Vec<NewMessage> = sizes
        .iter()
        .enumerate()
        .map(|(i, &t)| msg(&format!("m{i}"), t))
        .collect();
    let appended = db
        .store
        .append_messages(&key("b"), &messages)
        .await
        .unwrap();
    let ws = workstream(&db, "b").await;
    let page = |after: Option<MessageId>| {
        let store = db.store.clone();
        async move {
            store
                .uncompacted_page_within(ws.id, after, 100, 100)
                .await
                .unwrap()
                .iter()
                .map(|m| m.id)
                .collect::<Vec<_>>()
        }
    };
    let ids = &appended.ids;
    // 10 + 10 fit; the 500-token message would not: the page stops.
    assert_eq!(page(None).await, ids[..2].to_vec());
    // A message bigger than the budget alone still makes a page.
    assert_eq!(page(Some(ids[1])).await, ids[2..3].to_vec());
    assert_eq!(page(Some(ids[2])).await, ids[3..].to_vec());
    assert!(page(Some(ids[5])).await.is_empty());
}

/// A page that held every message left ends the pass: the page after it
/// is empty without a query, even if a message was appended meanwhile (it
/// is newer than the pass); a full page or a new reader reads on.
async fn a_reader_ends_its_pass_after_a_page_that_held_everything(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (ws, ids) = with_messages(&db, "ended", 3).await;
    let ids_read = |page: Vec<Message>| page.iter().map(|m| m.id).collect::<Vec<_>>();

    // A full page (3 of at most 3) may have more after it: the reader asks.
    let mut full = db.store.uncompacted_reader(ws.id);
    let first = full.page_within(None, 3, 1_000).await.unwrap();
    assert_eq!(ids_read(first), ids);
    db.store
        .append_messages(&key("ended"), &[msg("late", 1)])
        .await
        .unwrap();
    let late = all_uncompacted(&db.store, ws.id).await[3];
    let next = full.page_within(Some(ids[2]), 3, 1_000).await.unwrap();
    assert_eq!(ids_read(next), [MessageId(late)]);

    // A page short of its bound held everything: the pass ends there.
    let mut short = db.store.uncompacted_reader(ws.id);
    let first = short.page_within(None, 10, 1_000).await.unwrap();
    assert_eq!(first.len(), 4);
    db.store
        .append_messages(&key("ended"), &[msg("later", 1)])
        .await
        .unwrap();
    assert!(short
        .page_within(Some(MessageId(late)), 10, 1_000)
        .await
        .unwrap()
        .is_empty());
    // A page cut by its token bound is not the end either.
    let mut cut = db.store.uncompacted_reader(ws.id);
    let first = cut.page_within(None, 10, 20).await.unwrap();
    assert_eq!(first.len(), 2);
    assert_eq!(
        cut.page_within(Some(ids[1]), 10, 1_000)
            .await
            .unwrap()
            .len(),
        3
    );
    // The next pass (a new reader) sees what was appended.
    assert_eq!(all_uncompacted(&db.store, ws.id).await.len(), 5);
}

/// A reader that reads the next page ahead returns the pages a plain
/// reader returns, pass after pass; a corrupt row in a page read ahead is
/// that page's error, when it is asked for, and the reader reads on.
async fn pages_read_ahead_are_the_pages_read_in_turn(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (ws, ids) = with_messages(&db, "ahead", 7).await;
    let mut ahead = db.store.uncompacted_reader(ws.id).read_ahead(3, 1_000);
    for pass in 0..2 {
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = ahead.page(after).await.unwrap();
            let Some(last) = page.last() else { break };
            assert!(page.len() <= 3);
            after = Some(last.id);
            seen.extend(page.iter().map(|m| m.id));
        }
        assert_eq!(seen, ids, "pass {pass}");
    }

    db.exec(&format!(
        "UPDATE messages SET parts = '[{{\"type\":\"image\"}}' WHERE id = {}",
        ids[6]
    ))
    .await;
    let mut ahead = db.store.uncompacted_reader(ws.id).read_ahead(3, 1_000);
    assert_eq!(ids_of(&ahead.page(None).await.unwrap()), ids[..3]);
    // The third page (the corrupt row) is being read now.
    assert_eq!(ids_of(&ahead.page(Some(ids[2])).await.unwrap()), ids[3..6]);
    match ahead.page(Some(ids[5])).await {
        Err(StoreError::CorruptRow { id, .. }) => assert_eq!(id, ids[6].0),
        other => panic!("expected CorruptRow, got {other:?}"),
    }
    assert_eq!(ids_of(&ahead.page(None).await.unwrap()), ids[..3]);
}

async fn a_corrupt_row_is_an_error_not_a_panic_or_a_gap(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (ws, ids) = with_messages(&db, "corrupt", 3).await;
    db.exec(&format!(
        "UPDATE messages SET parts = '[{{\"type\":\"image\"}}' WHERE id = {}",
        ids[1]
    ))
    .await;
    match db.store.uncompacted_page(ws.id, None, 10).await {
        Err(StoreError::CorruptRow { table, id, detail }) => {
            assert_eq!((table, id), ("messages", ids[1].0));
            assert!(detail.starts_with("parts"), "{detail}");
        }
        other => panic!("expected CorruptRow, got {other:?}"),
    }
    // The rows before it still read.
    assert_eq!(uncompacted_page(&db, ws.id, None, 1).await.len(), 1);
    db.exec(&format!(
        "UPDATE messages SET role = 'robot' WHERE id = {}",
        ids[2]
    ))
    .await;
    assert!(matches!(
        db.store.uncompacted_page(ws.id, Some(ids[1]), 10).await,
        Err(StoreError::CorruptRow { id, .. }) if id == ids[2].0
    ));
    db.exec(&format!(
        "UPDATE workstreams SET state = 'nope' WHERE id = {}",
        ws.id
    ))
    .await;
    assert!(matches!(
        db.store.workstream(&key("corrupt")).await,
        Err(StoreError::CorruptRow {
            table: "workstreams",
            ..
        })
    ));
}

// ---------------------------------------------------------------- lease

async fn lease_take_hold_expire_renew_release(backend: Backend) {
    let db = TestDb::new(backend).await;
    let ws = db.store.ensure_workstream(&key("lease")).await.unwrap();
    let s = &db.store;

    assert_eq!(
        s.take_lease(ws.id, "a", TTL).await.unwrap(),
        LeaseTaken::Taken { reclaimed: None }
    );
    let held = workstream(&db, "lease").await;
    let lease = held.lease.clone().unwrap();
    assert_eq!(lease.owner, "a");
    let now_ms = Utc::now().timestamp_millis();
    assert!(lease.deadline_ms > now_ms + 20_000, "{lease:?}");
    assert_eq!(held.lease_live(now_ms), Some(&lease));

    match s.take_lease(ws.id, "b", TTL).await.unwrap() {
        LeaseTaken::Held(l) => assert_eq!(l.owner, "a"),
        other => panic!("{other:?}"),
    }
    // The holder re-taking extends its lease.
    assert_eq!(
        s.take_lease(ws.id, "a", Duration::from_secs(60))
            .await
            .unwrap(),
        LeaseTaken::Taken { reclaimed: None }
    );
    let extended = workstream(&db, "lease").await.lease.unwrap();
    assert!(extended.deadline_ms >= lease.deadline_ms + 25_000);

    assert!(!s.renew_lease(ws.id, "b", TTL).await.unwrap());
    assert!(!s.release_lease(ws.id, "b").await.unwrap());
    assert!(s.renew_lease(ws.id, "a", TTL).await.unwrap());

    // "a" stalls: its deadline passes, "b" reclaims the lease.
    expire_lease(&db, ws.id).await;
    let expired = workstream(&db, "lease").await;
    assert!(expired.lease.is_some());
    assert_eq!(expired.lease_live(Utc::now().timestamp_millis()), None);
    match s.take_lease(ws.id, "b", TTL).await.unwrap() {
        LeaseTaken::Taken {
            reclaimed: Some(old),
        } => assert_eq!((old.owner.as_str(), old.deadline_ms), ("a", 1)),
        other => panic!("{other:?}"),
    }
    assert!(!s.renew_lease(ws.id, "a", TTL).await.unwrap());
    assert!(!s.release_lease(ws.id, "a").await.unwrap());
    assert!(s.release_lease(ws.id, "b").await.unwrap());
    assert_eq!(workstream(&db, "lease").await.lease, None);
    assert!(!s.release_lease(ws.id, "b").await.unwrap());
    // A free lease is taken without reclaiming anything.
    assert_eq!(
        s.take_lease(ws.id, "c", TTL).await.unwrap(),
        LeaseTaken::Taken { reclaimed: None }
    );
    assert!(matches!(
        s.take_lease(ws.id + 1000, "c", TTL).await,
        Err(StoreError::UnknownWorkstream { .. })
    ));
}

async fn a_free_lease_is_taken_and_read_in_one_statement(backend: Backend) {
    let db = TestDb::new(backend).await;
    let s = &db.store;
    let k = key("free-lease");
    s.append_messages(&k, &[msg("hello", 10)]).await.unwrap();
    let ws = s.workstream(&k).await.unwrap().unwrap();
    let started = event(EventKind::CompactionStarted, &k, 0);
    let count = || events_of_kind(&db, "compaction.started");

    // Free: taken, with its event, and the row comes back as taken.
    let taken = s
        .take_free_lease_with_event(ws.id, "job-1", TTL, Some(&started))
        .await
        .unwrap()
        .expect("a free lease is taken");
    assert_eq!(taken, workstream(&db, "free-lease").await);
    let lease = taken.lease.clone().expect("the row carries the new lease");
    assert_eq!(lease.owner, "job-1");
    assert!(lease.deadline_ms > Utc::now().timestamp_millis() + 20_000);
    assert_eq!(taken.uncompacted_tokens, ws.uncompacted_tokens);
    assert_eq!(count().await, 1);

    // Held, by another or by the caller, even expired: not this path's to
    // decide; nothing is written.
    for owner in ["job-2", "job-1"] {
        let again = s
            .take_free_lease_with_event(ws.id, owner, TTL, Some(&started))
            .await
            .unwrap();
        assert_eq!(again, None, "{owner}");
    }
    expire_lease(&db, ws.id).await;
    assert_eq!(
        s.take_free_lease_with_event(ws.id, "job-2", TTL, None)
            .await
            .unwrap(),
        None
    );
    assert_eq!(count().await, 1);
    assert_eq!(
        workstream(&db, "free-lease").await.lease.unwrap().owner,
        "job-1"
    );

    // Released: free again, without an event this time.
    assert!(s.release_lease(ws.id, "job-1").await.unwrap());
    let taken = s
        .take_free_lease_with_event(ws.id, "job-2", TTL, None)
        .await
        .unwrap()
        .expect("a released lease is free");
    assert_eq!(taken.lease.unwrap().owner, "job-2");
    assert_eq!(count().await, 1);

    // No such workstream: nothing to take.
    assert_eq!(
        s.take_free_lease_with_event(ws.id + 1000, "job-3", TTL, None)
            .await
            .unwrap(),
        None
    );
}

// ---------------------------------------------------------------- the fenced commit

async fn the_fenced_commit_writes_exactly_what_it_says(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (ws, ids) = with_messages(&db, "commit", 10).await;
    assert_eq!(ws.uncompacted_tokens, 100);
    db.store.take_lease(ws.id, "job-1", TTL).await.unwrap();

    let (summary, state, run) = commit_parts("uses postgres", "ship it", RunOutcome::Committed);
    let pruned = [PrunedMessage {
        id: ids[8],
        parts: vec![Part::text("[pruned]")],
        token_estimate: 4,
    }];
    let commit = Commit {
        keep: &[ids[2]],
        compacted_tokens: 50, // ids[0..6] minus ids[2]
        pruned: &pruned,
        ..plain_commit(&ws, "job-1", None, ids[5], &summary, &state, &run)
    };
    assert_eq!(
        db.store.commit(&commit).await.unwrap(),
        CommitOutcome::Committed { version: 1 }
    );

    let rows = message_rows(&db, ws.id).await;
    let compacted: Vec<i64> = rows.iter().filter(|r| r.1).map(|r| r.0).collect();
    assert_eq!(
        compacted,
        [ids[0], ids[1], ids[3], ids[4], ids[5]].map(|m| m.0)
    );
    assert_eq!(rows[8].2, 4, "pruned estimate");
    let after = workstream(&db, "commit").await;
    assert_eq!(after.last_compacted_message_id, Some(ids[5]));
    assert_eq!(after.uncompacted_tokens, 100 - 50 - 6);
    assert_eq!(after.version, 1);
    assert_eq!(after.compactions, 1);
    assert_eq!(after.lease, None, "the commit releases the lease");
    assert_eq!(after.summary, Some(summary.clone()));
    assert_eq!(after.summary_tokens, 10);
    assert_eq!(after.state, state);
    assert!(after.just_auto_compacted);
    assert!(after.last_compacted_at.is_some());
    assert_eq!(
        all_uncompacted(&db.store, ws.id).await,
        [ids[2], ids[6], ids[7], ids[8], ids[9]].map(|m| m.0)
    );
    let listed = db
        .store
        .list_workstreams(&WorkstreamQuery {
            state: None,
            domain: None,
            entity_prefix: Some("commit".to_owned()),
            after: None,
            limit: 10,
            trigger_tokens: None,
        })
        .await
        .unwrap();
    assert_eq!(
        listed.workstreams[0].uncompacted_messages, 5,
        "the listing counts the kept message and those above the watermark"
    );
    let page = uncompacted_page(&db, ws.id, Some(ids[7]), 1).await;
    assert_eq!(page[0].parts, vec![Part::text("[pruned]")]);
    let runs = db.store.runs(&key("commit"), 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].run.outcome, RunOutcome::Committed);
    assert_eq!(runs[0].workstream_id, ws.id);
    assert_eq!(runs[0].run.llm_model.as_deref(), Some("extractive"));
    assert_eq!(
        (runs[0].run.evidence_kept, runs[0].run.evidence_dropped),
        (12, 30)
    );

    // A second compaction continues from the new watermark; compacted
    // tokens never take the counter below zero.
    db.append_and_check_just_auto_compacted_resets().await;
    db.store.take_lease(ws.id, "job-2", TTL).await.unwrap();
    let commit = Commit {
        compacted_tokens: 1_000_000,
        ..plain_commit(
            &after,
            "job-2",
            Some(ids[5]),
            ids[7],
            &summary,
            &state,
            &run,
        )
    };
    assert_eq!(
        db.store.commit(&commit).await.unwrap(),
        CommitOutcome::Committed { version: 2 }
    );
    let after2 = workstream(&db, "commit").await;
    assert_eq!(after2.uncompacted_tokens, 0);
    assert_eq!(after2.compactions, 2);
    assert_eq!(
        all_uncompacted(&db.store, ws.id).await[..3],
        [ids[2], ids[8], ids[9]].map(|m| m.0)
    );
}

impl TestDb {
    /// Appending after a commit clears `just_auto_compacted`.
    async fn append_and_check_just_auto_compacted_resets(&self) {
        assert!(workstream(self, "commit").await.just_auto_compacted);
        self.store
            .append_messages(&key("commit"), &[msg("new", 1)])
            .await
            .unwrap();
        assert!(!workstream(self, "commit").await.just_auto_compacted);
    }
}

async fn a_stale_watermark_conflicts_and_writes_nothing(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (ws, ids) = with_messages(&db, "stale", 6).await;
    let (summary, state, run) = commit_parts("a", "b", RunOutcome::Committed);
    db.store.take_lease(ws.id, "job-1", TTL).await.unwrap();
    let first = plain_commit(&ws, "job-1", None, ids[2], &summary, &state, &run);
    assert!(matches!(
        db.store.commit(&first).await.unwrap(),
        CommitOutcome::Committed { .. }
    ));

    // The same job (or a retry of it) commits again from what it loaded.
    db.store.take_lease(ws.id, "job-1", TTL).await.unwrap();
    let before = workstream(&db, "stale").await;
    let messages_before = message_rows(&db, ws.id).await;
    let (other_summary, other_state) = (make_summary("other"), make_state("other"));
    let stale = Commit {
        compacted_tokens: 30,
        ..plain_commit(
            &ws,
            "job-1",
            None,
            ids[5],
            &other_summary,
            &other_state,
            &run,
        )
    };
    assert_eq!(
        db.store.commit(&stale).await.unwrap(),
        CommitOutcome::Conflict(ConflictReason::WatermarkMoved)
    );
    assert_eq!(
        workstream(&db, "stale").await,
        before,
        "nothing of the refused commit was written"
    );
    assert_eq!(message_rows(&db, ws.id).await, messages_before);
    let runs = db.store.runs(&key("stale"), 10).await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.run.outcome).collect::<Vec<_>>(),
        [RunOutcome::Conflict, RunOutcome::Committed],
        "the conflict is audited"
    );
}

async fn a_lost_lease_conflicts_and_writes_nothing(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (ws, ids) = with_messages(&db, "lost", 4).await;
    let (summary, state, run) = commit_parts("a", "b", RunOutcome::Committed);

    // Never taken.
    let commit = plain_commit(&ws, "job-1", None, ids[1], &summary, &state, &run);
    assert_eq!(
        db.store.commit(&commit).await.unwrap(),
        CommitOutcome::Conflict(ConflictReason::LeaseLost)
    );
    // Taken over by another job after it expired.
    db.store.take_lease(ws.id, "job-1", TTL).await.unwrap();
    expire_lease(&db, ws.id).await;
    db.store.take_lease(ws.id, "job-2", TTL).await.unwrap();
    let before = workstream(&db, "lost").await;
    assert_eq!(
        db.store.commit(&commit).await.unwrap(),
        CommitOutcome::Conflict(ConflictReason::LeaseLost)
    );
    assert_eq!(workstream(&db, "lost").await, before);
    assert!(message_rows(&db, ws.id).await.iter().all(|r| !r.1));
    assert_eq!(
        before.lease.unwrap().owner,
        "job-2",
        "the new holder keeps it"
    );
    assert_eq!(count(&db, "compaction_runs", ws.id).await, 2);
}

async fn racing_commits_commit_exactly_once(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (ws, ids) = with_messages(&db, "racing", 20).await;
    db.store.take_lease(ws.id, "job", TTL).await.unwrap();
    let tasks: Vec<_> = (0..2)
        .map(|i| {
            let store = db.store.clone();
            let ws = ws.clone();
            let new = ids[10 + i];
            tokio::spawn(async move {
                let (summary, state, run) = commit_parts("s", "d", RunOutcome::Committed);
                let commit = plain_commit(&ws, "job", None, new, &summary, &state, &run);
                store.commit(&commit).await.unwrap()
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    let committed = outcomes
        .iter()
        .filter(|o| matches!(o, CommitOutcome::Committed { version: 1 }))
        .count();
    assert_eq!(committed, 1, "{outcomes:?}");
    assert!(outcomes
        .iter()
        .any(|o| matches!(o, CommitOutcome::Conflict(_))));
    let after = workstream(&db, "racing").await;
    assert_eq!(after.version, 1);
    let marked = message_rows(&db, ws.id)
        .await
        .iter()
        .filter(|r| r.1)
        .count();
    let watermark = after.last_compacted_message_id.unwrap();
    assert_eq!(marked, ids.iter().filter(|id| **id <= watermark).count());
}

async fn an_error_inside_the_commit_leaves_nothing_half_written(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (ws, ids) = with_messages(&db, "atomic", 6).await;
    let (_, other_ids) = with_messages(&db, "neighbour", 1).await;
    db.store.take_lease(ws.id, "job", TTL).await.unwrap();
    let before = workstream(&db, "atomic").await;
    let (summary, state, run) = commit_parts("a", "b", RunOutcome::Committed);
    for bad in [MessageId(ids[5].0 + 100_000), other_ids[0]] {
        let pruned = [PrunedMessage {
            id: bad,
            parts: vec![Part::text("x")],
            token_estimate: 1,
        }];
        let commit = Commit {
            keep: &[],
            compacted_tokens: 30,
            pruned: &pruned,
            ..plain_commit(&ws, "job", None, ids[2], &summary, &state, &run)
        };
        match db.store.commit(&commit).await {
            Err(StoreError::UnknownMessage { message_id, .. }) => assert_eq!(message_id, bad),
            other => panic!("expected UnknownMessage, got {other:?}"),
        }
        assert_eq!(
            workstream(&db, "atomic").await,
            before,
            "still leased, same watermark, version, summary"
        );
        assert!(message_rows(&db, ws.id).await.iter().all(|r| !r.1));
        assert_eq!(count(&db, "compaction_runs", ws.id).await, 0);
    }
    // The job can still commit properly.
    let commit = plain_commit(&ws, "job", None, ids[2], &summary, &state, &run);
    assert!(matches!(
        db.store.commit(&commit).await.unwrap(),
        CommitOutcome::Committed { version: 1 }
    ));
}

// ---------------------------------------------------------------- breaker

/// Takes the lease of workstream `ws_id` as "job", then records `failed`
/// as `owner`'s failure (`counted` towards the breaker or not): whether it
/// was taken as the holder's (a stranger's failure is only audited).
async fn fail_under_lease(
    db: &TestDb,
    ws_id: i64,
    owner: &str,
    failed: &NewRun,
    counted: bool,
) -> bool {
    db.store.take_lease(ws_id, "job", TTL).await.unwrap();
    db.store
        .record_failure(ws_id, owner, failed, counted)
        .await
        .unwrap()
}

async fn failures_open_the_breaker_and_new_messages_close_it(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (ws, ids) = with_messages(&db, "breaker", 3).await;
    let failed = NewRun {
        error: Some("LLM said 500".to_owned()),
        ..make_run(RunOutcome::Failed)
    };
    for n in 1..=3u32 {
        assert!(fail_under_lease(&db, ws.id, "job", &failed, true).await);
        let row = workstream(&db, "breaker").await;
        assert_eq!(row.consecutive_failures, n);
        assert_eq!(row.lease, None, "the failure path releases the lease");
        assert_eq!(row.breaker_open(), n == 3);
        assert_eq!(
            row.breaker_message_id,
            (n == 3).then_some(ids[2]),
            "opens at the newest message"
        );
    }
    // Not counted (e.g. a cancelled attempt): recorded, no change.
    assert!(fail_under_lease(&db, ws.id, "job", &failed, false).await);
    assert_eq!(workstream(&db, "breaker").await.consecutive_failures, 3);
    // A stranger's failure only leaves its audit row.
    assert!(!fail_under_lease(&db, ws.id, "ghost", &failed, true).await);
    let row = workstream(&db, "breaker").await;
    assert_eq!(row.consecutive_failures, 3);
    assert_eq!(row.lease.unwrap().owner, "job");
    assert_eq!(count(&db, "compaction_runs", ws.id).await, 5);
    db.store.release_lease(ws.id, "job").await.unwrap();

    db.store
        .append_messages(&key("breaker"), &[msg("new", 1)])
        .await
        .unwrap();
    let row = workstream(&db, "breaker").await;
    assert!(!row.breaker_open(), "a newer message closes the breaker");
    assert_eq!(row.consecutive_failures, 3);

    db.store.reset_breaker(ws.id).await.unwrap();
    let row = workstream(&db, "breaker").await;
    assert_eq!(
        (row.consecutive_failures, row.breaker_message_id),
        (0, None)
    );
    assert!(matches!(
        db.store.reset_breaker(ws.id + 1000).await,
        Err(StoreError::UnknownWorkstream { .. })
    ));
}

async fn a_commit_without_progress_counts_towards_the_breaker(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (mut ws, ids) = with_messages(&db, "noprogress", 8).await;
    let (summary, state, run) = commit_parts("a", "b", RunOutcome::NoProgress);
    for (n, &new_watermark) in (1..=3usize).zip(&ids[1..]) {
        db.store.take_lease(ws.id, "job", TTL).await.unwrap();
        let commit = Commit {
            progress: false,
            ..plain_commit(
                &ws,
                "job",
                ws.last_compacted_message_id,
                new_watermark,
                &summary,
                &state,
                &run,
            )
        };
        assert!(matches!(
            db.store.commit(&commit).await.unwrap(),
            CommitOutcome::Committed { .. }
        ));
        ws = workstream(&db, "noprogress").await;
        assert_eq!(ws.consecutive_failures as usize, n);
    }
    assert!(ws.breaker_open());
    assert_eq!(ws.breaker_message_id, Some(ids[7]));
    // A commit with progress clears it.
    db.store.take_lease(ws.id, "job", TTL).await.unwrap();
    let commit = plain_commit(
        &ws,
        "job",
        ws.last_compacted_message_id,
        ids[5],
        &summary,
        &state,
        &run,
    );
    db.store.commit(&commit).await.unwrap();
    let ws = workstream(&db, "noprogress").await;
    assert_eq!((ws.consecutive_failures, ws.breaker_message_id), (0, None));
}

// ---------------------------------------------------------------- memory and runs

async fn memory_entries_append_and_fold(backend: Backend) {
    let db = TestDb::new(backend).await;
    let entries: Vec<String> = (0..4).map(|i| format!("entry {i}")).collect();
    assert_eq!(
        db.store
            .append_memory_entries(&key("mem"), &entries[..3])
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        db.store
            .append_memory_entries(&key("mem"), &entries[3..])
            .await
            .unwrap(),
        4
    );
    let ws = workstream(&db, "mem").await;
    let unfolded = db.store.unfolded_memory_entries(ws.id).await.unwrap();
    assert_eq!(
        unfolded
            .iter()
            .map(|e| e.content.as_str())
            .collect::<Vec<_>>(),
        ["entry 0", "entry 1", "entry 2", "entry 3"]
    );

    let (ws, ids) = {
        let appended = db
            .store
            .append_messages(&key("mem"), &[msg("x", 1)])
            .await
            .unwrap();
        (workstream(&db, "mem").await, appended.ids)
    };
    db.store.take_lease(ws.id, "job", TTL).await.unwrap();
    let (summary, state, run) = commit_parts("a", "b", RunOutcome::Committed);
    let folded = [unfolded[0].id, unfolded[1].id];
    let commit = Commit {
        memory_fold: Some(MemoryFold {
            summary: "entries 0 and 1",
            folded: &folded,
        }),
        ..plain_commit(&ws, "job", None, ids[0], &summary, &state, &run)
    };
    db.store.commit(&commit).await.unwrap();
    let ws = workstream(&db, "mem").await;
    assert_eq!(ws.memory_block_summary.as_deref(), Some("entries 0 and 1"));
    assert_eq!(
        db.store
            .unfolded_memory_entries(ws.id)
            .await
            .unwrap()
            .iter()
            .map(|e| e.content.as_str())
            .collect::<Vec<_>>(),
        ["entry 2", "entry 3"]
    );
    assert_eq!(
        db.store
            .append_memory_entries(&key("mem"), &[])
            .await
            .unwrap(),
        2
    );
}

async fn runs_are_listed_newest_first(backend: Backend) {
    let db = TestDb::new(backend).await;
    let ws = db.store.ensure_workstream(&key("runs")).await.unwrap();
    for attempt in 1..=3 {
        let run = NewRun {
            attempt,
            ..make_run(RunOutcome::Failed)
        };
        db.store.record_run(ws.id, &run).await.unwrap();
    }
    let runs = db.store.runs(&key("runs"), 2).await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.run.attempt).collect::<Vec<_>>(),
        [3, 2]
    );
    assert_eq!(runs[0].run.outcome, RunOutcome::Failed);
    assert_eq!(runs[0].run.trigger, "auto");
    assert_eq!(runs[0].run.summary.as_deref(), Some("KEY FACTS\n- x"));
    assert!(db.store.runs(&key("none"), 10).await.unwrap().is_empty());
}

async fn a_run_row_says_why_it_was_degraded_and_what_the_llm_cost(backend: Backend) {
    let db = TestDb::new(backend).await;
    let ws = db.store.ensure_workstream(&key("audit")).await.unwrap();
    for reason in DegradedReason::ALL {
        let run = NewRun {
            degraded: true,
            degraded_reason: Some(reason),
            llm_model: Some("gpt-test".to_owned()),
            llm_calls: 4,
            llm_failed_calls: 3,
            llm_tokens_in: 1_234,
            llm_tokens_out: 56,
            error: Some("summarizer: the answer was rejected".to_owned()),
            ..make_run(RunOutcome::Committed)
        };
        db.store.record_run(ws.id, &run).await.unwrap();
        let row = db.store.runs(&key("audit"), 1).await.unwrap().remove(0);
        assert_eq!(row.run.degraded_reason, Some(reason));
        assert_eq!(DegradedReason::parse(reason.as_str()), Some(reason));
        assert!(row.run.degraded);
        assert_eq!(row.run.llm_model.as_deref(), Some("gpt-test"));
        assert_eq!((row.run.llm_calls, row.run.llm_failed_calls), (4, 3));
        assert_eq!((row.run.llm_tokens_in, row.run.llm_tokens_out), (1_234, 56));
        assert_eq!(row.run.error, run.error);
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["degraded_reason"], reason.as_str());
        assert_eq!(json["llm_failed_calls"], 3);
    }

    // An unknown reason (a manual edit, a newer build) is a typed error.
    db.exec("UPDATE compaction_runs SET degraded_reason = 'gremlins'")
        .await;
    match db.store.runs(&key("audit"), 1).await {
        Err(StoreError::CorruptRow { table, detail, .. }) => {
            assert_eq!(table, "compaction_runs");
            assert!(detail.contains("gremlins"), "{detail}");
        }
        other => panic!("expected CorruptRow, got {other:?}"),
    }
}

/// A database with every migration before `migration` applied, and a
/// workstream `chat`/`entity` written in SQL (this build's entities may
/// name later columns); every migration's name and `migration`'s index.
async fn migrated_before(
    backend: Backend,
    migration: &str,
    entity: &str,
) -> (TestDb, Vec<String>, usize) {
    let db = TestDb::unmigrated(backend).await;
    let names = migration_names();
    let before = names.iter().position(|n| n == migration).unwrap();
    Migrator::up(db.store.connection(), Some(u32::try_from(before).unwrap()))
        .await
        .unwrap();
    db.exec(&format!(
        "INSERT INTO workstreams (domain, entity_id, state, created_at, updated_at) VALUES \
         ('chat', '{entity}', '{{}}', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00')"
    ))
    .await;
    (db, names, before)
}

/// A database migrated by the previous build holds runs without the audit
/// columns; after `migrate` they read as not degraded for a known reason,
/// with no calls counted.
async fn runs_recorded_before_the_llm_audit_columns_still_read(backend: Backend) {
    // Every migration before the audit columns' (the later ones add
    // columns this build's entities read, so the rows of that time are
    // written in SQL).
    let (db, names, before) = migrated_before(
        backend,
        "m20261122_000005_add_compaction_run_llm_audit",
        "old",
    )
    .await;
    db.exec(
        "INSERT INTO compaction_runs (workstream_id, job_id, attempt, \"trigger\", started_at, \
         finished_at, outcome, degraded, tokens_before, tokens_after, messages_compacted, chunks, \
         rollups, llm_model, llm_tokens_in, llm_tokens_out, error, summary) VALUES ((SELECT id \
         FROM workstreams WHERE entity_id = 'old'), 3, 2, \
         'auto', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:05+00:00', 'committed', true, \
         900, 300, 12, 1, 0, 'old-model', 800, 90, NULL, 'KEY FACTS:')",
    )
    .await;
    assert_eq!(db.store.migrate().await.unwrap(), names[before..]);
    let ws = db.store.ensure_workstream(&key("old")).await.unwrap();
    let row = db.store.runs(&key("old"), 1).await.unwrap().remove(0);
    assert!(row.run.degraded);
    assert_eq!(row.run.degraded_reason, None);
    assert_eq!((row.run.llm_calls, row.run.llm_failed_calls), (0, 0));
    assert_eq!(row.run.llm_model.as_deref(), Some("old-model"));
    assert_eq!((row.run.llm_tokens_in, row.run.llm_tokens_out), (800, 90));
    assert_eq!((row.run.evidence_kept, row.run.evidence_dropped), (0, 0));
    assert_eq!(row.run.outcome, RunOutcome::Committed);

    // And new rows are written beside it.
    let run = NewRun {
        degraded_reason: Some(DegradedReason::LlmUnhealthy),
        degraded: true,
        ..make_run(RunOutcome::Committed)
    };
    db.store.record_run(ws.id, &run).await.unwrap();
    let rows = db.store.runs(&key("old"), 10).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0].run.degraded_reason,
        Some(DegradedReason::LlmUnhealthy)
    );

    // The migration is reversible: down removes the columns again (and
    // every later migration before it).
    Migrator::down(
        db.store.connection(),
        Some(u32::try_from(names.len() - before).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(
        db.store.schema_status().await.unwrap(),
        SchemaStatus::Behind {
            pending: names[before..].to_vec()
        }
    );
}

/// A run recorded before `m20261201_000001` reads as having kept and
/// dropped no evidence line; new rows record both counts beside it, and
/// `down` removes the columns again.
async fn runs_recorded_before_the_evidence_columns_read_zero(backend: Backend) {
    let (db, names, before) = migrated_before(
        backend,
        "m20261201_000001_add_compaction_run_evidence",
        "pre-evidence",
    )
    .await;
    db.exec(
        "INSERT INTO compaction_runs (workstream_id, job_id, attempt, \"trigger\", started_at, \
         finished_at, outcome, degraded, tokens_before, tokens_after, messages_compacted, chunks, \
         rollups, llm_tokens_in, llm_tokens_out) VALUES ((SELECT id FROM workstreams \
         WHERE entity_id = 'pre-evidence'), 3, 1, 'auto', '2026-01-01T00:00:00+00:00', \
         '2026-01-01T00:00:05+00:00', 'committed', false, 900, 300, 12, 1, 0, 0, 0)",
    )
    .await;
    assert_eq!(db.store.migrate().await.unwrap(), names[before..]);
    let ws = db
        .store
        .ensure_workstream(&key("pre-evidence"))
        .await
        .unwrap();
    let old = db
        .store
        .runs(&key("pre-evidence"), 1)
        .await
        .unwrap()
        .remove(0);
    assert_eq!((old.run.evidence_kept, old.run.evidence_dropped), (0, 0));
    assert_eq!(old.run.messages_compacted, 12);

    let run = NewRun {
        evidence_kept: 7,
        evidence_dropped: 40,
        ..make_run(RunOutcome::Committed)
    };
    db.store.record_run(ws.id, &run).await.unwrap();
    let rows = db.store.runs(&key("pre-evidence"), 10).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].run.evidence_kept, rows[0].run.evidence_dropped),
        (7, 40)
    );
    let json = serde_json::to_value(&rows[0]).unwrap();
    assert_eq!(json["evidence_kept"], 7);
    assert_eq!(json["evidence_dropped"], 40);

    Migrator::down(
        db.store.connection(),
        Some(u32::try_from(names.len() - before).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(
        db.store.schema_status().await.unwrap(),
        SchemaStatus::Behind {
            pending: names[before..].to_vec()
        }
    );
    assert!(
        db.store
            .connection()
            .execute_unprepared("SELECT evidence_kept FROM compaction_runs")
            .await
            .is_err(),
        "down drops the columns"
    );
    let rows = db.scalar("SELECT COUNT(*) AS n FROM compaction_runs").await;
    assert_eq!(rows, 2, "the rows survive the columns' removal");
}

/// A database whose commits marked every compacted message (before
/// `m20261127_000008`): after `migrate` the same messages are compacted,
/// kept and folded by the same runs, as pages, recall and the compaction
/// reader see them; `down` writes the flags back.
async fn flags_written_before_the_watermark_migration_read_the_same_after_it(backend: Backend) {
    let (db, names, before) = migrated_before(
        backend,
        "m20261127_000008_compacted_below_watermark",
        "flags",
    )
    .await;
    let ws = "(SELECT id FROM workstreams WHERE entity_id = 'flags')";
    for run in 1..=2 {
        db.exec(&format!(
            "INSERT INTO compaction_runs (workstream_id, job_id, attempt, \"trigger\", \
             started_at, finished_at, outcome, degraded, tokens_before, tokens_after, \
             messages_compacted, chunks, rollups, llm_tokens_in, llm_tokens_out) VALUES \
             ({ws}, {run}, 1, 'auto', '2026-01-01T00:00:00+00:00', \
             '2026-01-01T00:00:0{run}+00:00', 'committed', false, 0, 0, 0, 1, 0, 0, 0)"
        ))
        .await;
    }
    let run_of = |job: i64| format!("(SELECT id FROM compaction_runs WHERE job_id = {job})");
    // Eight messages: run 1 folded #1 and #3 and kept the pinned #2; run 2
    // folded #4 and #5; #6–#8 are un-compacted.
    for i in 1..=8 {
        let parts = serde_json::to_string(&[Part::text(format!("word{i}"))]).unwrap();
        let (compacted, by) = match i {
            1 | 3 => (true, run_of(1)),
            4 | 5 => (true, run_of(2)),
            _ => (false, "NULL".to_owned()),
        };
        db.exec(&format!(
            "INSERT INTO messages (workstream_id, role, parts, token_estimate, pinned, \
             is_compacted, created_at, compacted_by_run_id) VALUES ({ws}, 'user', '{parts}', \
             10, {}, {compacted}, '2026-01-01T00:00:00+00:00', {by})",
            i == 2,
        ))
        .await;
    }
    let first = db.scalar("SELECT MIN(id) AS n FROM messages").await;
    let id = |i: i64| first + i - 1;
    db.exec(&format!(
        "UPDATE workstreams SET last_compacted_message_id = {}, uncompacted_tokens = 40",
        id(5)
    ))
    .await;
    db.store.migrate().await.unwrap();

    let ws = db.store.ensure_workstream(&key("flags")).await.unwrap();
    let uncompacted = [id(2), id(6), id(7), id(8)];
    assert_eq!(all_uncompacted(&db.store, ws.id).await, uncompacted);
    let page = db
        .store
        .uncompacted_reader(ws.id)
        .page_within(None, 100, u64::MAX)
        .await
        .unwrap();
    assert_eq!(page.iter().map(|m| m.id.0).collect::<Vec<_>>(), uncompacted);
    let runs = db.store.runs(&key("flags"), 10).await.unwrap();
    let run_id = |job: i64| runs.iter().find(|r| r.run.job_id == job).unwrap().id;
    let recalled = |i: i64| {
        let store = &db.store;
        async move {
            let query =
                compactor_producer::recall::RecallQuery::parse(&format!("word{i}")).unwrap();
            let limit = compactor_producer::recall::RecallLimit::new(5).unwrap();
            let mut found = store.recall(ws.id, &query, limit).await.unwrap();
            assert_eq!(found.len(), 1, "word{i}");
            let m = found.remove(0);
            (m.compacted, m.folded_by.map(|f| f.run_id))
        }
    };
    assert_eq!(recalled(1).await, (true, Some(run_id(1))));
    assert_eq!(recalled(2).await, (false, None), "kept");
    assert_eq!(recalled(3).await, (true, Some(run_id(1))));
    assert_eq!(recalled(5).await, (true, Some(run_id(2))));
    assert_eq!(recalled(6).await, (false, None));

    // Down writes the flags back from the same rule (the later migrations
    // are undone first).
    Migrator::down(
        db.store.connection(),
        Some(u32::try_from(names.len() - before).unwrap()),
    )
    .await
    .unwrap();
    let flagged = |sql: &str| {
        let db = &db;
        let sql = sql.to_owned();
        async move {
            db.store
                .connection()
                .query_all_raw(sea_orm::Statement::from_string(db.db_backend(), sql))
                .await
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r.try_get::<i64>("", "id").unwrap(),
                        r.try_get::<Option<i64>>("", "compacted_by_run_id").unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        flagged("SELECT id, compacted_by_run_id FROM messages WHERE is_compacted ORDER BY id")
            .await,
        [
            (id(1), Some(run_id(1))),
            (id(3), Some(run_id(1))),
            (id(4), Some(run_id(2))),
            (id(5), Some(run_id(2))),
        ]
    );
}

/// Buffers a plan of `EXPLAIN (ANALYZE, BUFFERS)` read in all (its first
/// `Buffers:` line is the top node's: hit + read).
fn buffers_of(plan: &str) -> u64 {
    let line = plan
        .lines()
        .find(|l| l.trim_start().starts_with("Buffers:"))
        .unwrap_or_else(|| panic!("no buffers in the plan:\n{plan}"));
    ["hit=", "read="]
        .iter()
        .filter_map(|k| {
            let at = line.find(k)? + k.len();
            line[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Reads "after an id" keep to the workstream's index even in PostgreSQL's
/// generic plan, which a prepared statement may switch to after five runs
/// (`store::keyset`), and a compaction's pages start their scans at the id:
/// - through the primary key, the read of what a turn appended would walk
///   every message of every workstream appended since;
/// - with only `workstream_id = $1` to position it, the scan of a page
///   starts at the workstream's first message and checks each entry up to
///   the id: a compaction of a long history read its pages in quadratic
///   time.
///
/// The quiet workstream has 50,000 messages (about 150 pages of its index);
/// a page positioned at the id reads a few dozen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reads_after_an_id_keep_to_the_workstream_in_a_generic_plan() {
    let db = TestDb::new(Backend::Postgres).await;
    let mut ids = Vec::new();
    for batch in 0..50 {
        let messages: Vec<NewMessage> = (0..1000)
            .map(|i| msg(&format!("quiet {batch} {i}"), 10))
            .collect();
        let appended = db
            .store
            .append_messages(&key("quiet"), &messages)
            .await
            .unwrap();
        ids.extend(appended.ids);
    }
    let a = workstream(&db, "quiet").await;
    // Others append much more afterwards.
    for batch in 0..20 {
        let messages: Vec<NewMessage> = (0..1000)
            .map(|i| msg(&format!("busy {batch} {i}"), 10))
            .collect();
        db.store
            .append_messages(&key("busy"), &messages)
            .await
            .unwrap();
    }
    // Fresh tables (never analyzed: right after a bulk append) and then
    // analyzed: a generic plan is chosen on the statistics there are.
    reads_after_an_id_start_at_the_id(&db, a.id, &ids, "before ANALYZE").await;
    db.exec("ANALYZE messages").await;
    reads_after_an_id_start_at_the_id(&db, a.id, &ids, "after ANALYZE").await;

    // The first page after a compaction: the scan above the watermark
    // starts at the watermark, not at the first message.
    let watermark = ids[48_999];
    db.exec(&format!(
        "UPDATE workstreams SET last_compacted_message_id = {} WHERE id = {}",
        watermark.0, a.id
    ))
    .await;
    let plan = db
        .store
        .uncompacted_page_generic_plan(a.id, None, 1000, u64::MAX)
        .await
        .unwrap()
        .unwrap();
    assert!(
        buffers_of(&plan) < 60,
        "the first page starts at the watermark:\n{plan}"
    );
    let page = db
        .store
        .uncompacted_page_within(a.id, None, 1000, u64::MAX)
        .await
        .unwrap();
    assert_eq!(page.iter().map(|m| m.id).collect::<Vec<_>>(), ids[49_000..]);
}

/// The probes of [`postgres_reads_after_an_id_keep_to_the_workstream_in_a_generic_plan`]
/// on the quiet workstream `ws` of `ids`, whose watermark is not set yet.
async fn reads_after_an_id_start_at_the_id(db: &TestDb, ws: i64, ids: &[MessageId], when: &str) {
    // What a turn appended since it last read.
    let after = ids[ids.len() - 3];
    let plan = db
        .store
        .appended_after_generic_plan(ws, after, 1000)
        .await
        .unwrap()
        .unwrap();
    assert!(
        plan.contains("idx_messages_workstream_id") && !plan.contains("messages_pkey"),
        "{when}: the workstream's index, not the primary key:\n{plan}"
    );
    let read = db.store.appended_after(ws, after, 1000).await.unwrap();
    assert_eq!(
        read.messages.iter().map(|m| m.id).collect::<Vec<_>>(),
        ids[ids.len() - 2..]
    );

    // A compaction's page near the end of the history.
    let after = ids[48_000];
    let plan = db
        .store
        .uncompacted_page_generic_plan(ws, Some(after), 1000, u64::MAX)
        .await
        .unwrap()
        .unwrap();
    assert!(
        buffers_of(&plan) < 60,
        "{when}: the page's scans start at the id:\n{plan}"
    );
    let page = db
        .store
        .uncompacted_page_within(ws, Some(after), 1000, u64::MAX)
        .await
        .unwrap();
    assert_eq!(
        page.iter().map(|m| m.id).collect::<Vec<_>>(),
        ids[48_001..49_001]
    );
}

/// PostgreSQL's `search` vector follows a message's content: computed on
/// append and when its parts are rewritten (pruning), left alone when the
/// message is marked compacted (migration `m20261127_000007`: a stored
/// generated column was computed again by every update of the row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_search_vector_follows_content_not_flags() {
    let db = TestDb::new(Backend::Postgres).await;
    let appended = db
        .store
        .append_messages(&key("search"), &[msg("alpha", 1)])
        .await
        .unwrap();
    let id = appended.ids[0].0;
    let matches = |term: &'static str| {
        let db = &db;
        async move {
            db.scalar(&format!(
                "SELECT (search @@ to_tsquery('simple', '{term}'))::int::int8 AS n \
                 FROM messages WHERE id = {id}"
            ))
            .await
        }
    };
    assert_eq!(matches("alpha").await, 1, "computed on append");

    // A plain column now: blank it, then flag the message as a commit
    // flags the messages it keeps.
    db.exec(&format!(
        "UPDATE messages SET search = ''::tsvector WHERE id = {id}"
    ))
    .await;
    db.exec(&format!(
        "UPDATE messages SET kept = true, pinned = true WHERE id = {id}"
    ))
    .await;
    assert_eq!(matches("alpha").await, 0, "flagging left the vector alone");

    let parts = serde_json::to_string(&[Part::text("beta")]).unwrap();
    db.exec(&format!(
        "UPDATE messages SET parts = '{parts}' WHERE id = {id}"
    ))
    .await;
    assert_eq!(matches("beta").await, 1, "computed when the parts change");
    assert_eq!(matches("alpha").await, 0);
}

// ---------------------------------------------------------------- connecting

#[tokio::test]
async fn an_unreachable_postgres_is_a_prompt_typed_error_without_the_password() {
    let started = Instant::now();
    let err = Store::connect("postgres://postgres:hunter2@127.0.0.1:1/x")
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            StoreError::Connect { .. } | StoreError::ConnectTimeout { .. }
        ),
        "{err:?}"
    );
    let text = format!("{err} {err:?}");
    eprintln!("after {:?}: {err}", started.elapsed());
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains("postgres://postgres:***@127.0.0.1:1/x"),
        "{text}"
    );
    assert!(err.is_transient());
}

#[tokio::test]
async fn a_database_that_never_answers_times_out_with_a_typed_error() {
    // Accepts TCP connections (the kernel does) but never speaks.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let started = Instant::now();
    let err = Store::connect(&format!("postgres://postgres:hunter2@127.0.0.1:{port}/x"))
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(err, StoreError::ConnectTimeout { .. }),
        "{err:?} after {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
    assert!(!format!("{err} {err:?}").contains("hunter2"));
    drop(silent);
}

#[tokio::test]
async fn an_unsupported_or_unopenable_url_is_a_connect_error_without_the_password() {
    let err = Store::connect("mysql://root:hunter2@127.0.0.1/x")
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(matches!(err, StoreError::Connect { .. }), "{text}");
    assert!(!text.contains("hunter2"), "{text}");

    let err = Store::connect("sqlite:///nonexistent-dir-for-compactor-tests/x.db?mode=rwc")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Connect { .. }), "{err:?}");
}

#[tokio::test]
async fn a_sqlite_file_is_created_and_shared_by_two_stores() {
    let db = TestDb::sqlite().await;
    let other = Store::connect(&db.url).await.unwrap();
    assert_eq!(other.schema_status().await.unwrap(), SchemaStatus::Current);
    // Two stores writing the same file concurrently wait for each other.
    let a = db.store.clone();
    let writers = [a, other].map(|store| {
        tokio::spawn(async move {
            for i in 0..20 {
                store
                    .append_messages(&key("shared"), &[msg(&format!("m{i}"), 1)])
                    .await
                    .unwrap();
            }
        })
    });
    for writer in writers {
        writer.await.unwrap();
    }
    let ws = workstream(&db, "shared").await;
    assert_eq!(ws.uncompacted_tokens, 40);
    assert_eq!(all_uncompacted(&db.store, ws.id).await.len(), 40);
}

// ------------------------------------------------------- idempotent appends

async fn count_messages(db: &TestDb, entity: &str) -> i64 {
    let ws = workstream(db, entity).await;
    db.scalar(&format!(
        "SELECT COUNT(*) AS n FROM messages WHERE workstream_id = {}",
        ws.id
    ))
    .await
}

async fn a_retried_append_with_client_ids_stores_nothing_twice(backend: Backend) {
    let db = TestDb::new(backend).await;
    let k = key("idem");
    let batch = [
        msg_with_id("one", 10, "req-1#0"),
        msg("no id: stored every time", 1),
        msg_with_id("two", 20, "req-1#2"),
    ];
    let first = db.store.append_messages(&k, &batch).await.unwrap();
    assert_eq!(first.ids.len(), 3);
    assert_eq!(first.already_stored, 0);
    assert_eq!(first.uncompacted_tokens, 31);

    let again = db.store.append_messages(&k, &batch).await.unwrap();
    assert_eq!(again.ids[0], first.ids[0], "the stored message's id");
    assert_eq!(again.ids[2], first.ids[2]);
    assert!(
        again.ids[1] > first.ids[2],
        "a message without an id is new"
    );
    assert_eq!(again.already_stored, 2);
    assert_eq!(again.uncompacted_tokens, 32, "only the new message counts");
    assert_eq!(count_messages(&db, "idem").await, 4);

    // A retry that also carries a message the first try did not: the
    // stored ones keep their ids, the new one is stored after them.
    let mut longer = vec![batch[0].clone(), batch[2].clone()];
    longer.push(msg_with_id("three", 5, "req-1#3"));
    let third = db.store.append_messages(&k, &longer).await.unwrap();
    assert_eq!(third.ids[..2], [first.ids[0], first.ids[2]]);
    assert!(third.ids[2] > again.ids[1]);
    assert_eq!(third.already_stored, 2);
    assert_eq!(count_messages(&db, "idem").await, 5);
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(ws.last_message_id, Some(third.ids[2]));
    assert_eq!(ws.uncompacted_tokens, 37);

    // Everything stored already: nothing changes, the ids come back.
    let replay = db.store.append_messages(&k, &longer).await.unwrap();
    assert_eq!(replay.ids, third.ids);
    assert_eq!(replay.already_stored, 3);
    assert_eq!(replay.uncompacted_tokens, 37);
    let after = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(after.last_message_id, ws.last_message_id);

    // The same id twice in one append names one message.
    let twice = db
        .store
        .append_messages(
            &k,
            &[
                msg_with_id("four", 3, "req-2#0"),
                msg_with_id("four", 3, "req-2#0"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(twice.ids[0], twice.ids[1]);
    assert_eq!(twice.already_stored, 1);
    assert_eq!(count_messages(&db, "idem").await, 6);

    // Client ids are per workstream: another one may use the same.
    let other = db
        .store
        .append_messages(&key("idem-other"), &[msg_with_id("one", 10, "req-1#0")])
        .await
        .unwrap();
    assert_eq!(other.already_stored, 0);
    assert_ne!(other.ids[0], first.ids[0]);
}

async fn a_client_id_with_other_content_is_refused_and_nothing_is_stored(backend: Backend) {
    let db = TestDb::new(backend).await;
    let k = key("clash");
    db.store
        .append_messages(&k, &[msg_with_id("original", 4, "m-1")])
        .await
        .unwrap();
    for (index, clash) in [
        msg_with_id("edited", 4, "m-1"),
        NewMessage {
            role: Role::Assistant,
            ..msg_with_id("original", 4, "m-1")
        },
        NewMessage {
            pinned: true,
            ..msg_with_id("original", 4, "m-1")
        },
    ]
    .into_iter()
    .enumerate()
    {
        let err = db
            .store
            .append_messages(&k, &[msg("new", 1), clash])
            .await
            .unwrap_err();
        match err {
            StoreError::ClientIdConflict {
                client_id,
                index: at,
                ..
            } => {
                assert_eq!(client_id, "m-1", "case {index}");
                assert_eq!(at, 1, "case {index}");
            }
            other => panic!("case {index}: {other:?}"),
        }
    }
    // Within one append too.
    let err = db
        .store
        .append_messages(
            &k,
            &[msg_with_id("a", 1, "m-2"), msg_with_id("b", 1, "m-2")],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::ClientIdConflict { index: 1, .. }),
        "{err:?}"
    );
    assert_eq!(count_messages(&db, "clash").await, 1, "nothing else stored");
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(ws.uncompacted_tokens, 4);
}

async fn racing_tries_of_one_append_store_it_once(backend: Backend) {
    let db = TestDb::new(backend).await;
    let k = key("race");
    // The workstream exists, as it does when a client retries.
    db.store
        .append_messages(&k, &[msg("hello", 1)])
        .await
        .unwrap();
    let batch: Vec<NewMessage> = (0..50)
        .map(|i| msg_with_id(&format!("m{i}"), 2, &format!("req#{i}")))
        .collect();
    let tries = (0..8).map(|_| {
        let store = db.store.clone();
        let (k, batch) = (k.clone(), batch.clone());
        tokio::spawn(async move { store.append_messages(&k, &batch).await.unwrap() })
    });
    let results: Vec<_> = futures::future::join_all(tries)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for r in &results {
        assert_eq!(r.ids, results[0].ids, "every try answers the same ids");
    }
    assert_eq!(
        results.iter().filter(|r| r.already_stored == 0).count(),
        1,
        "one try stored them"
    );
    assert_eq!(count_messages(&db, "race").await, 51);
    let ws = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(ws.uncompacted_tokens, 101);
}

// ------------------------------------------------------------------ outbox

/// An event of `kind` about `k`, with `n` as its data.
fn event(kind: EventKind, k: &EntityKey, n: u64) -> NewEvent {
    NewEvent::new(kind, k, serde_json::json!({ "n": n }))
}

async fn the_outbox_relays_each_event_once_and_delivers_with_retries(backend: Backend) {
    let db = TestDb::new(backend).await;
    let s = &db.store;
    let k = key("outbox");
    let ids = [
        s.record_event(&event(EventKind::CompactionRequested, &k, 1))
            .await
            .unwrap(),
        s.record_event(&event(EventKind::CompactionStarted, &k, 2))
            .await
            .unwrap(),
    ];
    assert_ne!(ids[0], ids[1], "every event has an id of its own");
    let backlog = s.outbox_backlog().await.unwrap();
    assert_eq!(backlog.unrelayed, 2);
    assert!(backlog.oldest_undelivered_ms.is_some());

    // Two relays race: each event is claimed by one of them only.
    let claim = Duration::from_secs(30);
    let a = s.claim_unrelayed("relay-a", 10, claim).await.unwrap();
    let b = s.claim_unrelayed("relay-b", 10, claim).await.unwrap();
    assert_eq!(a.len(), 2);
    assert!(b.is_empty(), "claimed by relay-a");
    assert_eq!(a[0].event.id, ids[0], "oldest first");
    assert_eq!(a[0].event.kind, "compaction.requested");
    assert_eq!(a[0].event.domain, "chat");
    assert_eq!(a[0].event.entity_id, "outbox");
    assert_eq!(a[0].event.data, serde_json::json!({ "n": 1 }));
    // A relay that could not relay them takes its own claims again.
    assert_eq!(
        s.claim_unrelayed("relay-a", 10, claim).await.unwrap().len(),
        2
    );

    let hooks = vec!["audit".to_owned(), "timeline".to_owned()];
    for u in &a {
        assert!(s.mark_relayed(u.row_id, &hooks).await.unwrap());
        assert!(
            !s.mark_relayed(u.row_id, &hooks).await.unwrap(),
            "relayed once"
        );
    }
    assert!(s
        .claim_unrelayed("relay-b", 10, claim)
        .await
        .unwrap()
        .is_empty());
    let backlog = s.outbox_backlog().await.unwrap();
    assert_eq!((backlog.unrelayed, backlog.pending), (0, 4));

    // Only the configured endpoints' deliveries are claimed, once.
    let audit = vec!["audit".to_owned()];
    let due = s
        .claim_due_deliveries("relay-a", &audit, 10, claim)
        .await
        .unwrap();
    assert_eq!(due.len(), 2);
    assert!(due.iter().all(|d| d.endpoint == "audit" && d.attempts == 0));
    assert!(s
        .claim_due_deliveries("relay-b", &audit, 10, claim)
        .await
        .unwrap()
        .is_empty());

    // The first fails and is retried later; the second is delivered.
    let later = Utc::now().timestamp_millis() + 60_000;
    let failed = DeliveryResult::Failed {
        status: Some(503),
        error: "HTTP 503".into(),
        retry_at_ms: Some(later),
    };
    assert!(
        !s.finish_delivery(due[0].id, "relay-b", &failed)
            .await
            .unwrap(),
        "not relay-b's claim"
    );
    assert!(s
        .finish_delivery(due[0].id, "relay-a", &failed)
        .await
        .unwrap());
    assert!(s
        .finish_delivery(
            due[1].id,
            "relay-a",
            &DeliveryResult::Delivered { status: 204 }
        )
        .await
        .unwrap());
    assert!(
        s.claim_due_deliveries("relay-b", &audit, 10, claim)
            .await
            .unwrap()
            .is_empty(),
        "the retry is not due yet, the other is delivered"
    );
    let rows = s
        .deliveries(&DeliveryFilter {
            endpoint: Some("audit".into()),
            limit: 10,
            ..DeliveryFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let retried = rows.iter().find(|r| r.id == due[0].id).unwrap();
    assert_eq!(retried.state, DeliveryState::Pending);
    assert_eq!(retried.attempts, 1);
    assert_eq!(retried.last_status, Some(503));
    assert_eq!(retried.last_error.as_deref(), Some("HTTP 503"));
    assert_eq!(retried.next_attempt_at.timestamp_millis(), later);
    let delivered = rows.iter().find(|r| r.id == due[1].id).unwrap();
    assert_eq!(delivered.state, DeliveryState::Delivered);
    assert!(delivered.delivered_at.is_some());
    assert_eq!(delivered.event_id, ids[1]);
    assert_eq!(delivered.kind, "compaction.started");
}

async fn outbox_deliveries_are_listed_retried_and_pruned_when_done(backend: Backend) {
    let db = TestDb::new(backend).await;
    let s = &db.store;
    let k = key("prune");
    for n in 0..3 {
        s.record_event(&event(EventKind::CompactionCompleted, &k, n))
            .await
            .unwrap();
    }
    let hooks = vec!["audit".to_owned()];
    let claim = Duration::from_secs(30);
    for u in s.claim_unrelayed("relay", 10, claim).await.unwrap() {
        s.mark_relayed(u.row_id, &hooks).await.unwrap();
    }
    let due = s
        .claim_due_deliveries("relay", &hooks, 10, claim)
        .await
        .unwrap();
    assert_eq!(due.len(), 3);
    // One delivered, one given up (failed), one still pending.
    s.finish_delivery(
        due[0].id,
        "relay",
        &DeliveryResult::Delivered { status: 200 },
    )
    .await
    .unwrap();
    let gave_up = DeliveryResult::Failed {
        status: None,
        error: "connection refused".into(),
        retry_at_ms: None,
    };
    s.finish_delivery(due[1].id, "relay", &gave_up)
        .await
        .unwrap();
    let later = DeliveryResult::Failed {
        status: Some(500),
        error: "HTTP 500".into(),
        retry_at_ms: Some(Utc::now().timestamp_millis() + 60_000),
    };
    s.finish_delivery(due[2].id, "relay", &later).await.unwrap();

    let by_state = |state| DeliveryFilter {
        state: Some(state),
        limit: 10,
        ..DeliveryFilter::default()
    };
    let failed = s
        .deliveries(&by_state(DeliveryState::Failed))
        .await
        .unwrap();
    assert_eq!(failed.iter().map(|d| d.id).collect::<Vec<_>>(), [due[1].id]);
    let backlog = s.outbox_backlog().await.unwrap();
    assert_eq!((backlog.pending, backlog.failed), (1, 1));
    // Paginated by id.
    let first = s
        .deliveries(&DeliveryFilter {
            limit: 2,
            ..DeliveryFilter::default()
        })
        .await
        .unwrap();
    let rest = s
        .deliveries(&DeliveryFilter {
            after: Some(first[1].id),
            limit: 2,
            ..DeliveryFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(first.len() + rest.len(), 3);
    assert_eq!(rest[0].id, due[2].id);

    // Only the delivered event is pruned; the others are kept.
    let future = Utc::now().timestamp_millis() + 1_000;
    assert_eq!(s.prune_events(future).await.unwrap(), 1);
    assert_eq!(s.prune_events(future).await.unwrap(), 0);
    assert_eq!(
        s.deliveries(&DeliveryFilter {
            limit: 10,
            ..DeliveryFilter::default()
        })
        .await
        .unwrap()
        .len(),
        2
    );

    // Retried by an operator: due now, attempts from 0.
    assert_eq!(
        s.retry_delivery(due[1].id).await.unwrap(),
        RetryOutcome::Requeued
    );
    assert_eq!(
        s.retry_delivery(due[0].id).await.unwrap(),
        RetryOutcome::NotFound,
        "pruned"
    );
    assert_eq!(
        s.retry_delivery(i64::MAX).await.unwrap(),
        RetryOutcome::NotFound
    );
    let again = s
        .claim_due_deliveries("relay", &hooks, 10, claim)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].id, again[0].attempts), (due[1].id, 0));
    s.finish_delivery(again[0].id, "relay", &gave_up)
        .await
        .unwrap();
    assert_eq!(s.retry_failed_deliveries(Some("other")).await.unwrap(), 0);
    assert_eq!(s.retry_failed_deliveries(None).await.unwrap(), 1);
    let requeued = s
        .claim_due_deliveries("relay", &hooks, 10, claim)
        .await
        .unwrap();
    assert_eq!(
        requeued.iter().map(|d| d.id).collect::<Vec<_>>(),
        [due[1].id],
        "due again, the other still waits for its retry time"
    );
}

async fn an_event_is_written_only_with_the_change_it_reports(backend: Backend) {
    let db = TestDb::new(backend).await;
    let s = &db.store;
    let k = key("with-change");
    s.append_messages(&k, &[msg("hello", 10), msg("world", 10)])
        .await
        .unwrap();
    let ws = s.workstream(&k).await.unwrap().unwrap();
    let started = event(EventKind::CompactionStarted, &k, 0);
    let count = |kind: &'static str| events_of_kind(&db, kind);

    // Taken: one event. Held by another: none.
    s.take_lease_with_event(ws.id, "job-1", TTL, Some(&started))
        .await
        .unwrap();
    let held = s
        .take_lease_with_event(ws.id, "job-2", TTL, Some(&started))
        .await
        .unwrap();
    assert!(matches!(held, LeaseTaken::Held(_)));
    assert_eq!(count("compaction.started").await, 1);

    // A commit that lost its fence writes no event; one that holds it does,
    // with its run and version.
    let completed = event(EventKind::CompactionCompleted, &k, 0);
    let summary = Summary::default();
    let state = WorkstreamState::default();
    let run = make_run(RunOutcome::Committed);
    let losing = Commit {
        workstream_id: ws.id,
        lease_owner: "job-2",
        expected_watermark: None,
        new_watermark: ws.last_message_id.unwrap(),
        keep: &[],
        compacted_tokens: 20,
        summary: &summary,
        summary_tokens: 5,
        state: &state,
        memory_fold: None,
        pruned: &[],
        just_auto_compacted: true,
        progress: true,
        run: &run,
    };
    let winning = Commit {
        lease_owner: "job-1",
        ..losing.clone()
    };
    let lost = s
        .commit_with_event(&losing, Some(&completed))
        .await
        .unwrap();
    assert!(matches!(lost, CommitOutcome::Conflict(_)));
    assert_eq!(count("compaction.completed").await, 0);
    let CommitOutcome::Committed { version } = s
        .commit_with_event(&winning, Some(&completed))
        .await
        .unwrap()
    else {
        panic!("job-1 holds the lease")
    };
    assert_eq!(count("compaction.completed").await, 1);
    let relayed = s
        .claim_unrelayed("relay", 10, Duration::from_secs(30))
        .await
        .unwrap();
    let data = &relayed
        .iter()
        .find(|u| u.event.kind == "compaction.completed")
        .unwrap()
        .event
        .data;
    assert_eq!(data["version"], version);
    assert_eq!(data["run_id"], s.runs(&k, 1).await.unwrap()[0].id);
    assert_eq!(data["n"], 0, "the caller's data is kept");

    // A failure that no longer holds the lease writes none; one that gives
    // it back does.
    let failed = event(EventKind::CompactionFailed, &k, 0);
    let failure = make_run(RunOutcome::Failed);
    assert!(!s
        .record_failure_with_event(ws.id, "job-1", &failure, false, Some(&failed))
        .await
        .unwrap());
    assert_eq!(count("compaction.failed").await, 0);
    s.take_lease(ws.id, "job-3", TTL).await.unwrap();
    assert!(s
        .record_failure_with_event(ws.id, "job-3", &failure, false, Some(&failed))
        .await
        .unwrap());
    assert_eq!(count("compaction.failed").await, 1);
}

/// How many events of `kind` the outbox holds.
async fn events_of_kind(db: &TestDb, kind: &str) -> i64 {
    db.scalar(&format!(
        "SELECT COUNT(*) AS n FROM events WHERE kind = '{kind}'"
    ))
    .await
}

/// The race behind events out of order: a worker picked a job up and wrote
/// its `compaction.started` before the request's `compaction.requested`
/// was written (that event follows Redis's change). While a request holds
/// the workstream (`hold_for_request`: from before the queue takes it until
/// its event is written), taking the lease waits; the events are then in
/// order. A request that changed nothing lets the row go without an event,
/// and a workstream without a row is not held.
async fn a_held_request_writes_its_event_before_the_lease_can_be_taken(backend: Backend) {
    let db = TestDb::new(backend).await;
    let s = &db.store;
    let k = key("held");
    s.append_messages(&k, &[msg("hello", 10)]).await.unwrap();
    let ws = s.workstream(&k).await.unwrap().unwrap();
    assert!(s.hold_for_request(&key("no-row")).await.unwrap().is_none());

    let held = s
        .hold_for_request(&k)
        .await
        .unwrap()
        .expect("a row to hold");
    let store = s.clone();
    let started = event(EventKind::CompactionStarted, &k, 2);
    let mut take = tokio::spawn(async move {
        store
            .take_free_lease_with_event(ws.id, "job-1", TTL, Some(&started))
            .await
    });
    // Blocked: it does not complete while the request holds the row (on a
    // slow machine it only waits longer; this cannot fail spuriously).
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut take)
            .await
            .is_err(),
        "taking the lease waits for the held request"
    );
    let requested = held
        .record(&event(EventKind::CompactionRequested, &k, 1))
        .await
        .unwrap();
    let taken = tokio::time::timeout(Duration::from_secs(10), &mut take)
        .await
        .expect("the lease is taken once the event is written")
        .unwrap()
        .unwrap();
    assert!(taken.is_some());
    let first = db
        .scalar("SELECT MIN(id) AS n FROM events WHERE kind = 'compaction.started'")
        .await;
    let before = db
        .scalar(&format!(
            "SELECT id AS n FROM events WHERE event_id = '{requested}'"
        ))
        .await;
    assert!(
        before < first,
        "requested ({before}) before started ({first})"
    );

    // Nothing to write: the row goes, no event.
    s.release_lease(ws.id, "job-1").await.unwrap();
    let held = s.hold_for_request(&k).await.unwrap().unwrap();
    held.release().await.unwrap();
    assert_eq!(events_of_kind(&db, "compaction.requested").await, 1);
    assert!(s
        .take_free_lease_with_event(ws.id, "job-2", TTL, None)
        .await
        .unwrap()
        .is_some());
}
