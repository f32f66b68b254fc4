//! The evidence packet end to end: an exact value the user gave early on is
//! shown in every later context with the id of the message it was said in,
//! the id the store's append returned (and recall returns), however many
//! compactions pass. Real Redis, real PostgreSQL and a SQLite file; the
//! extractive summarizer and an LLM faked at the HTTP boundary, since both
//! render their context the same way.

use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{
    conversation, eventually, key, requested_job, settings, spawn_worker, text_of, FakeLlm,
    TestRedis,
};
use compactor_producer::client::{Compactor, IncomingMessage};
use compactor_shared::evidence::EVIDENCE_HEADING;
use compactor_shared::{EntityKey, MessageId, Role};

/// Appends `messages` (a user's opening lines, then a long conversation),
/// ends the turn and lets a worker commit compaction number `n`; returns
/// the ids the store gave the messages.
async fn append_and_compact(
    compactor: &Compactor,
    k: &EntityKey,
    messages: Vec<IncomingMessage>,
    settings: &compactor_worker::settings::Settings,
    n: i64,
) -> Vec<MessageId> {
    let appended = compactor.append_messages(k, messages).await.unwrap();
    requested_job(&compactor.finalize_turn(k, None).await.unwrap());
    let worker = spawn_worker(settings.clone());
    eventually(
        "the workstream is compacted",
        Duration::from_secs(60),
        || async { compactor.status(k).await.unwrap().compactions == n },
    )
    .await;
    worker.stop().await;
    appended.ids
}

/// The evidence's lines of a built context's preamble.
fn evidence_lines(preamble: &str) -> Vec<&str> {
    let at = preamble
        .find(EVIDENCE_HEADING)
        .unwrap_or_else(|| panic!("no evidence in\n{preamble}"));
    preamble[at..]
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty() && *l != "Memory:")
        .collect()
}

async fn early_values_cite_their_message(backend: Backend, with_llm: bool) {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let llm_url = llm.url();
    let mut settings = settings(&db.url, &redis, with_llm.then_some(llm_url.as_str()));
    // A 32k-token model: 160 turns are over its trigger.
    settings.engine.trigger = compactor_shared::trigger::TriggerPolicy::Threshold {
        context_window: 32_000,
        ratio: 0.7,
        output_reserve: 4_000,
        safety_margin: 1_000,
    };
    let engine = settings.engine.clone();
    let compactor = Compactor::from_parts(db.store.clone(), redis.queue().await, engine).await;
    let k = key(&format!("evidence-{backend:?}-{with_llm}").to_lowercase());

    // Round 1: the reference and the timeout are said once, at the start.
    let mut first = vec![
        IncomingMessage::text(
            Role::User,
            "My customer number is KD-5512-0937, keep it handy.",
        ),
        IncomingMessage::text(Role::User, "Please set the timeout to 37s."),
    ];
    first.extend(conversation(160));
    let ids1 = append_and_compact(&compactor, &k, first, &settings, 1).await;

    // Round 2: the timeout changes; everything of round 1 is compacted.
    let mut second = vec![IncomingMessage::text(
        Role::User,
        "Actually, make the timeout 45s",
    )];
    second.extend(conversation(160));
    let ids2 = append_and_compact(&compactor, &k, second, &settings, 2).await;

    let context = compactor.build_context(&k).await.unwrap();
    assert_eq!(context.messages[0].source, None, "the preamble comes first");
    let preamble = text_of(&context.messages[0]);
    println!("{backend:?}, LLM {with_llm}: the preamble\n{preamble}");

    // The reference is shown on a line that cites the message the append
    // returned for it.
    let cites = |line: &str, id: MessageId| line.contains(&format!("#{} ", id.0));
    assert!(
        preamble
            .lines()
            .any(|l| l.contains("KD-5512-0937") && cites(l, ids1[0])),
        "KD-5512-0937 with #{} in\n{preamble}",
        ids1[0]
    );
    // The setting's current value is shown where it was said, and its old
    // value only as history.
    assert!(
        preamble
            .lines()
            .any(|l| l.contains("45s") && cites(l, ids2[0]) && !l.contains("superseded")),
        "45s with #{} in\n{preamble}",
        ids2[0]
    );
    for line in preamble.lines().filter(|l| l.contains("37s")) {
        assert!(line.contains("superseded"), "shown as current: {line}");
    }
    // Every line of the evidence says where it was said: a message of
    // this workstream.
    let known: Vec<i64> = ids1.iter().chain(&ids2).map(|id| id.0).collect();
    let evidence = evidence_lines(&preamble);
    assert!(!evidence.is_empty(), "{preamble}");
    for line in evidence.iter().filter(|l| l.starts_with('#')) {
        let cited = line
            .strip_prefix('#')
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<i64>().ok());
        let cited = cited.unwrap_or_else(|| panic!("no citation: {line}"));
        assert!(known.contains(&cited), "{line} cites an unknown message");
    }
    if with_llm {
        assert!(!llm.calls().is_empty(), "the LLM summarized");
    } else {
        assert!(llm.calls().is_empty(), "the extractive summarizer did");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_value_cites_its_message_after_two_compactions_on_postgres_extractive() {
    early_values_cite_their_message(Backend::Postgres, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_value_cites_its_message_after_two_compactions_on_sqlite_with_an_llm() {
    early_values_cite_their_message(Backend::Sqlite, true).await;
}
