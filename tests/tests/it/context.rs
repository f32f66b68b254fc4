//! The context's history read at sizes past a page: `build_context` reads
//! the bounded window in one statement (a branched workstream: its path
//! once, then the window by id). What it returns must be what the store's
//! keyset pages from the window's first message give, built by
//! `context::build` — whole, cut by the message bound, cut by the token
//! bound, and along a branch — on PostgreSQL and SQLite.

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{conversation, key, TestRedis};
use compactor_producer::client::{ClientError, Compactor, TurnContext};
use compactor_producer::settings::DatabaseSettings;
use compactor_producer::store::{NewMessage, Store, StoreError};
use compactor_shared::config::EngineConfig;
use compactor_shared::context::{self, ContextInput};
use compactor_shared::{CharEstimator, EntityKey, Message, MessageId};

/// `n` messages of the coding conversation (tool pairs included), with
/// estimates as the client makes them.
fn history(n: usize) -> Vec<NewMessage> {
    let estimator = CharEstimator::default();
    conversation(n.div_ceil(4))
        .into_iter()
        .take(n)
        .map(|m| NewMessage {
            token_estimate: m
                .parts
                .iter()
                .map(|p| compactor_shared::TokenEstimator::part_tokens(&estimator, p))
                .sum(),
            role: m.role,
            parts: m.parts,
            pinned: false,
            client_id: None,
        })
        .collect()
}

/// A client on `db` whose store has the bound `configure` sets.
async fn bounded_client(
    db: &TestDb,
    redis: &TestRedis,
    configure: impl FnOnce(&mut DatabaseSettings),
) -> Compactor {
    let mut settings = DatabaseSettings::for_url(&db.url);
    configure(&mut settings);
    let store = Store::connect_with(&settings).await.unwrap();
    Compactor::from_parts(store, redis.queue().await, EngineConfig::default()).await
}

/// The context as it was read before: the window, then keyset pages of a
/// thousand from its first message, then `context::build`.
async fn paged_context(client: &Compactor, k: &EntityKey) -> TurnContext {
    let store = client.store();
    let ws = store.workstream(k).await.unwrap().unwrap();
    let window = store.uncompacted_window(ws.id).await.unwrap();
    let mut messages: Vec<Message> = Vec::new();
    let mut after = window.first.map(|first| MessageId(first.0 - 1));
    loop {
        let page = store.uncompacted_page(ws.id, after, 1_000).await.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        messages.extend(page);
    }
    let engine = client.engine();
    let built = context::build(
        &ContextInput {
            summary: ws.summary.as_ref(),
            state: &ws.state,
            memory_block_summary: ws.memory_block_summary.as_deref(),
            memory_entries: &[],
            messages: &messages,
            just_auto_compacted: ws.just_auto_compacted,
            context_window: engine.trigger.context_window(),
            state_text: None,
        },
        &engine.context,
        &CharEstimator::new(engine.chars_per_token),
    );
    TurnContext {
        context: built,
        truncated: window.truncated(),
        omitted_messages: window.omitted_messages,
        omitted_tokens: window.omitted_tokens,
    }
}

/// Asserts the context of `k` through `client` is the paged one, and
/// returns how many messages it holds.
async fn same_as_pages(client: &Compactor, k: &EntityKey, what: &str) -> usize {
    let turn = client.build_context(k).await.unwrap();
    let expected = paged_context(client, k).await;
    assert_eq!(turn.truncated, expected.truncated, "{what}");
    assert_eq!(turn.omitted_messages, expected.omitted_messages, "{what}");
    assert_eq!(turn.omitted_tokens, expected.omitted_tokens, "{what}");
    assert_eq!(turn.messages.len(), expected.messages.len(), "{what}");
    assert!(turn == expected, "{what}: the contexts differ");
    turn.messages.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_history_reads_as_its_pages_whole_or_bounded() {
    for backend in [Backend::Postgres, Backend::Sqlite] {
        let db = TestDb::new(backend).await;
        let redis = TestRedis::new();
        let k = key("long-history");
        let all = history(2_500);
        for batch in all.chunks(500) {
            db.store.append_messages(&k, batch).await.unwrap();
        }
        let total: u64 = all.iter().map(|m| m.token_estimate).sum();

        let whole = bounded_client(&db, &redis, |_| {}).await;
        let n = same_as_pages(&whole, &k, "whole").await;
        assert_eq!(n, 2_500, "every message, no preamble");

        let by_count = bounded_client(&db, &redis, |s| s.context_max_messages = 1_500).await;
        let n = same_as_pages(&by_count, &k, "cut by the message bound").await;
        assert_eq!(n, 1_500);

        // Within the message bound, over the token bound (the workstream's
        // count says so): the window is computed first, from estimates.
        let by_tokens = bounded_client(&db, &redis, |s| s.context_max_tokens = total * 3 / 5).await;
        let turn = by_tokens.build_context(&k).await.unwrap();
        assert!(turn.truncated && turn.messages.len() > 1_000);
        same_as_pages(&by_tokens, &k, "cut by the token bound").await;

        // Both bounds at once, the message bound the tighter.
        let both = bounded_client(&db, &redis, |s| {
            s.context_max_tokens = total * 3 / 5;
            s.context_max_messages = 1_200;
        })
        .await;
        assert_eq!(same_as_pages(&both, &k, "both bounds").await, 1_200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_branch_reads_as_its_pages() {
    for backend in [Backend::Postgres, Backend::Sqlite] {
        let db = TestDb::new(backend).await;
        let redis = TestRedis::new();
        let k = key("long-branch");
        let all = history(3_000);
        let first = db.store.append_messages(&k, &all[..1_200]).await.unwrap();
        // Forks after message 800: the messages 801..=1200 are left.
        db.store
            .append_messages_at(&k, Some(first.ids[799]), &all[1_200..1_300])
            .await
            .unwrap();
        for batch in all[1_300..].chunks(500) {
            db.store.append_messages(&k, batch).await.unwrap();
        }

        let whole = bounded_client(&db, &redis, |_| {}).await;
        let n = same_as_pages(&whole, &k, "the branch whole").await;
        assert_eq!(n, 800 + 1_800, "the path: 800 before the fork, 1800 after");

        let by_count = bounded_client(&db, &redis, |s| s.context_max_messages = 1_100).await;
        assert_eq!(
            same_as_pages(&by_count, &k, "the branch by the message bound").await,
            1_100
        );

        let by_tokens = bounded_client(&db, &redis, |s| s.context_max_tokens = 20_000).await;
        same_as_pages(&by_tokens, &k, "the branch by the token bound").await;
    }
}

/// Turn after turn, a client keeps a linear workstream's history between
/// reads (`[database] context_cache_bytes`) and reads only the messages
/// appended since. What it returns must stay the stored history, as pages
/// read it: after appends through another store (another process), after
/// a compaction commits (the version bumped: messages compacted), when the
/// appended messages take it past the message bound or the token bound
/// (the kept window moves on), and along a branch — on PostgreSQL and
/// SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_history_stays_the_stored_one_turn_after_turn() {
    use compactor_e2e::{eventually, settings, start_worker};
    use std::time::Duration;

    for backend in [Backend::Postgres, Backend::Sqlite] {
        let db = TestDb::new(backend).await;
        let redis = TestRedis::new();
        let k = key("kept");
        let all = history(1_000);
        let reader = bounded_client(&db, &redis, |_| {}).await;
        db.store.append_messages(&k, &all[..600]).await.unwrap();
        assert_eq!(same_as_pages(&reader, &k, "the first read").await, 600);
        assert_eq!(same_as_pages(&reader, &k, "nothing new").await, 600);
        // `db.store` is another store, as another process's would be.
        db.store.append_messages(&k, &all[600..605]).await.unwrap();
        assert_eq!(same_as_pages(&reader, &k, "5 appended").await, 605);
        db.store.append_messages(&k, &all[605..606]).await.unwrap();
        assert_eq!(same_as_pages(&reader, &k, "1 appended").await, 606);

        // A compaction commits: the history read next is the tail.
        let worker = start_worker(settings(&db.url, &redis, None)).await;
        reader.compact_now(&k, None).await.unwrap();
        eventually(
            "the compaction commits",
            Duration::from_secs(60),
            || async { reader.status(&k).await.unwrap().compactions == 1 },
        )
        .await;
        worker.stop().await;
        let tail = same_as_pages(&reader, &k, "after the commit").await;
        assert!(
            tail < 606,
            "the context is the summary and the tail: {tail}"
        );
        db.store.append_messages(&k, &all[606..610]).await.unwrap();
        same_as_pages(&reader, &k, "appended after the commit").await;

        // Past the bound: the window is cut, as the database cuts it.
        let n = same_as_pages(&reader, &k, "before the bound").await;
        let turn = reader.build_context(&k).await.unwrap();
        let loaded = turn.messages.iter().filter(|m| m.source.is_some()).count();
        assert_eq!(loaded, n - 1, "the summary first, then the messages loaded");
        let bounded = bounded_client(&db, &redis, |s| {
            s.context_max_messages = u64::try_from(loaded).unwrap() + 2;
        })
        .await;
        assert_eq!(same_as_pages(&bounded, &k, "within the bound").await, n);
        db.store.append_messages(&k, &all[610..615]).await.unwrap();
        assert!(
            same_as_pages(&bounded, &k, "past the bound").await == n + 2,
            "the summary and the newest loaded + 2"
        );
        let turn = bounded.build_context(&k).await.unwrap();
        assert!(turn.truncated && turn.omitted_messages == 3);
        // The window moves on with each append, as a read cuts it.
        db.store.append_messages(&k, &all[615..617]).await.unwrap();
        same_as_pages(&bounded, &k, "moved on by 2").await;
        let by_tokens = bounded_client(&db, &redis, |s| s.context_max_tokens = 3_000).await;
        same_as_pages(&by_tokens, &k, "cut by the token bound").await;
        for (i, batch) in all[617..660].chunks(9).enumerate() {
            db.store.append_messages(&k, batch).await.unwrap();
            same_as_pages(&by_tokens, &k, &format!("by tokens, append {i}")).await;
            same_as_pages(&bounded, &k, &format!("by count, append {i}")).await;
        }

        // A branch: a fork two messages back; the path is what the reader
        // shows.
        let ws = db.store.workstream(&k).await.unwrap().unwrap();
        let newest = ws.last_message_id.unwrap();
        let branch = db
            .store
            .append_messages_at(&k, Some(MessageId(newest.0 - 2)), &all[700..703])
            .await
            .unwrap();
        assert!(branch.abandoned.is_some(), "a fork");
        let on_branch = same_as_pages(&reader, &k, "on the branch").await;
        db.store.append_messages(&k, &all[703..705]).await.unwrap();
        assert_eq!(
            same_as_pages(&reader, &k, "appended on the branch").await,
            on_branch + 2
        );
    }
}

/// The part of a history kept between reads is not read again: a row of
/// it changed behind the store's back (here: made undecodable) goes
/// unnoticed by the reader that keeps it, while a reader that keeps
/// nothing (`context_cache_bytes = 0`) reads every row and refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_what_was_appended_since_is_read_again() {
    use sea_orm::ConnectionTrait;

    for backend in [Backend::Postgres, Backend::Sqlite] {
        let db = TestDb::new(backend).await;
        let redis = TestRedis::new();
        let k = key("read-again");
        let all = history(50);
        let keeps = bounded_client(&db, &redis, |_| {}).await;
        let keeps_nothing = bounded_client(&db, &redis, |s| s.context_cache_bytes = 0).await;
        let stored = db.store.append_messages(&k, &all[..40]).await.unwrap();
        assert_eq!(keeps.build_context(&k).await.unwrap().messages.len(), 40);
        assert_eq!(
            keeps_nothing
                .build_context(&k)
                .await
                .unwrap()
                .messages
                .len(),
            40
        );

        db.store
            .connection()
            .execute_unprepared(&format!(
                "UPDATE messages SET role = 'robot' WHERE id = {}",
                stored.ids[3].0
            ))
            .await
            .unwrap();
        let appended = db.store.append_messages(&k, &all[40..]).await.unwrap();
        let turn = keeps.build_context(&k).await.unwrap();
        assert_eq!(turn.messages.len(), 50);
        assert_eq!(
            turn.messages[49].source,
            Some(*appended.ids.last().unwrap())
        );
        let err = keeps_nothing.build_context(&k).await.unwrap_err();
        assert!(
            matches!(
                err,
                ClientError::Store(StoreError::CorruptRow { id, .. }) if id == stored.ids[3].0
            ),
            "{err:?}"
        );
    }
}

/// What the last compaction left (the summary and the state) is read again
/// only after a commit: a state changed behind the store's back (here:
/// made undecodable) at the same version goes unnoticed by the reader
/// that keeps it, while a reader that keeps nothing refuses it; once the
/// version moves (as a commit moves it), the keeping reader reads the row
/// again and refuses it too. A turn's finalize and a status read neither.
/// On PostgreSQL and SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_and_state_are_read_again_only_when_the_version_moves() {
    use sea_orm::ConnectionTrait;

    for backend in [Backend::Postgres, Backend::Sqlite] {
        let db = TestDb::new(backend).await;
        let redis = TestRedis::new();
        let k = key("state-kept");
        let all = history(20);
        let keeps = bounded_client(&db, &redis, |_| {}).await;
        let keeps_nothing = bounded_client(&db, &redis, |s| s.context_cache_bytes = 0).await;
        db.store.append_messages(&k, &all).await.unwrap();
        let first = keeps.build_context(&k).await.unwrap();
        keeps_nothing.build_context(&k).await.unwrap();

        let ws = db.store.workstream(&k).await.unwrap().unwrap();
        let update = |set: &str| format!("UPDATE workstreams SET {set} WHERE id = {}", ws.id);
        let sql = db.store.connection();
        sql.execute_unprepared(&update("state = 'not json'"))
            .await
            .unwrap();
        assert!(
            keeps.build_context(&k).await.unwrap() == first,
            "the same version: the kept state"
        );
        let refused = |err: ClientError| matches!(err, ClientError::Store(StoreError::CorruptRow { id, .. }) if id == ws.id);
        let err = keeps_nothing.build_context(&k).await.unwrap_err();
        assert!(refused(err), "a reader that keeps nothing reads the row");
        // Ending a turn and a status need neither, and read neither.
        keeps_nothing.finalize_turn(&k, None).await.unwrap();
        keeps_nothing.status(&k).await.unwrap();

        sql.execute_unprepared(&update("version = version + 1"))
            .await
            .unwrap();
        let err = keeps.build_context(&k).await.unwrap_err();
        assert!(refused(err), "another version: the row is read again");
    }
}
