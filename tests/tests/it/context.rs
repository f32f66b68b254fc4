//! The context's history read at sizes past a page: `build_context` reads
//! the bounded window in one statement (a branched workstream: its path
//! once, then the window by id). What it returns must be what the store's
//! keyset pages from the window's first message give, built by
//! `context::build` — whole, cut by the message bound, cut by the token
//! bound, and along a branch — on PostgreSQL and SQLite.

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{conversation, key, TestRedis};
use compactor_producer::client::{Compactor, TurnContext};
use compactor_producer::settings::DatabaseSettings;
use compactor_producer::store::{NewMessage, Store};
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
