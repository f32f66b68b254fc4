//! End to end: a chat backend appends a long conversation and finishes a
//! turn; a worker (started as the binary starts it) compacts it through the
//! LLM in several chunks; the next context is summary + tail. Real Redis,
//! real PostgreSQL and a SQLite file, the LLM faked at the HTTP boundary.

use std::time::Duration;

use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{
    conversation, eventually, key, requested_job, settings, small_model, spawn_worker, text_of,
    FakeLlm, TestRedis,
};
use compactor_producer::client::{Compactor, IncomingMessage, Readiness, TurnOutcome};
use compactor_shared::boundary;
use compactor_shared::chunk;
use compactor_shared::transcript;
use compactor_shared::{CharEstimator, EntityKey, Message, MessageId, Role};

/// `incoming` as the store holds it, under the `ids` it gave: what the
/// engine's functions take, to compute independently what it will do.
fn as_stored(incoming: &[IncomingMessage], ids: &[MessageId]) -> Vec<Message> {
    incoming
        .iter()
        .zip(ids)
        .map(|(m, id)| Message {
            id: *id,
            role: m.role,
            parts: m.parts.clone(),
            pinned: false,
        })
        .collect()
}

/// Waits until the worker has committed `k`'s first compaction.
async fn until_compacted(compactor: &Compactor, k: &EntityKey) {
    eventually(
        "the workstream is compacted",
        Duration::from_secs(60),
        || async { compactor.status(k).await.unwrap().compactions == 1 },
    )
    .await;
}

async fn three_thousand_messages_compact_in_chunks(backend: Backend) {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let llm = FakeLlm::start().await;
    let mut settings = settings(&db.url, &redis, Some(&llm.url()));
    // A 100k-token model: the trigger is at 60k tokens.
    settings.engine.trigger = compactor_shared::trigger::TriggerPolicy::Threshold {
        context_window: 100_000,
        ratio: 0.7,
        output_reserve: 32_000,
        safety_margin: 8_000,
    };
    let engine = settings.engine.clone();
    let compactor =
        Compactor::from_parts(db.store.clone(), redis.queue().await, engine.clone()).await;
    let k = key("long");

    let incoming = conversation(750);
    assert_eq!(incoming.len(), 3_000);
    let appended = compactor
        .append_messages(&k, incoming.clone())
        .await
        .unwrap();
    assert_eq!(appended.ids.len(), 3_000);

    // What the engine will do with these messages, computed independently.
    let messages = as_stored(&incoming, &appended.ids);
    let plan = boundary::plan(&messages, &engine.boundary, &CharEstimator::default()).unwrap();
    assert_eq!(plan.tail_start, 2_994, "the last 6 messages stay verbatim");
    let compacted = &messages[..plan.tail_start];
    let expected_chunks = chunk::chunk(
        &transcript::extract(compacted, &engine.transcript),
        engine.chunk.max_chars,
        CharEstimator::new(engine.chars_per_token),
    )
    .len();
    assert!(expected_chunks >= 3, "several chunks: {expected_chunks}");
    println!("{backend:?}: {expected_chunks} chunks expected");

    requested_job(&compactor.finalize_turn(&k, None).await.unwrap());

    let worker = spawn_worker(settings);
    until_compacted(&compactor, &k).await;
    let ready = compactor
        .wait_until_ready(&k, Duration::from_secs(5))
        .await
        .unwrap();
    // The job may still be settling in the queue after the commit: then the
    // wait answers `compacted` once it has.
    assert!(
        matches!(ready, Readiness::Ready { .. } | Readiness::Compacted { .. }),
        "{ready:?}"
    );
    worker.stop().await;

    // One LLM call per chunk, each carrying the summary of the one before.
    let calls = llm.calls();
    assert_eq!(calls.len(), expected_chunks, "one call per chunk");
    assert!(calls[0]
        .user
        .contains("<previous-summary>\n(none)\n</previous-summary>"));
    for (i, call) in calls.iter().enumerate().skip(1) {
        assert!(
            call.user.contains(&format!("summary generation {i}\n")),
            "chunk {} carried the previous summary",
            i + 1
        );
    }
    assert!(
        calls[expected_chunks - 1].user.contains("[#"),
        "transcript sent"
    );

    // The commit marked exactly the prefix.
    let compacted_rows = db.compacted_messages().await;
    assert_eq!(compacted_rows, 2_994);
    let watermark = plan.watermark.0;
    let kept = db
        .scalar("SELECT COUNT(*) AS n FROM messages WHERE kept")
        .await;
    assert_eq!(
        kept, 0,
        "nothing pinned: compacted ⇔ at or before the watermark"
    );
    let status = compactor.status(&k).await.unwrap();
    assert_eq!(status.last_compacted_message_id, Some(MessageId(watermark)));
    assert!(status.lease.is_none(), "lease released");
    let runs = db.store.runs(&k, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].run.chunks as usize, expected_chunks);
    assert_eq!(runs[0].run.messages_compacted, 2_994);
    // Distinct paths and commands: some candidate evidence lines are kept,
    // exactly the lines the committed state holds, and most are left out.
    let stored = db.store.workstream(&k).await.unwrap().unwrap();
    assert!(runs[0].run.evidence_kept > 0, "{runs:?}");
    assert_eq!(
        runs[0].run.evidence_kept,
        stored.state.evidence.lines.len() as u64
    );
    assert!(runs[0].run.evidence_dropped > 0, "{runs:?}");
    // The context shrinks to what the summary, the kept evidence and the
    // tail take: evidence fills at most its share of the trigger.
    let engine = compactor.engine();
    let threshold = engine.trigger.threshold().expect("a threshold trigger");
    let evidence_limit = (threshold as f64 * engine.evidence_share()) as u64;
    assert!(
        runs[0].run.tokens_after <= evidence_limit.max(runs[0].run.tokens_before / 10),
        "{runs:?} (evidence limit {evidence_limit})"
    );
    assert_eq!(runs[0].run.llm_model.as_deref(), Some("fake-model"));

    // The next turn's context: the summary first, then the 6-message tail.
    let context = compactor.build_context(&k).await.unwrap();
    assert_eq!(context.messages.len(), 7, "summary + 6 messages");
    assert_eq!(context.messages[0].role, Role::System);
    let preamble = text_of(&context.messages[0]);
    assert!(preamble.contains(&format!("summary generation {expected_chunks}")));
    assert!(
        preamble.contains("src/module_"),
        "exact values carried by the evidence"
    );
    assert_eq!(context.orphans_neutralized, 0, "no orphan tool halves");
    for (got, want) in context.messages[1..].iter().zip(&messages[2_994..]) {
        assert_eq!(got.source, Some(want.id));
    }
    assert!(!context.over_budget);
    assert!(context.tokens <= engine.trigger.context_window());
    assert!(matches!(
        compactor.finalize_turn(&k, None).await.unwrap(),
        TurnOutcome::NotDue { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_conversation_is_compacted_in_chunks_on_postgres() {
    three_thousand_messages_compact_in_chunks(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_conversation_is_compacted_in_chunks_on_sqlite() {
    three_thousand_messages_compact_in_chunks(Backend::Sqlite).await;
}

/// The worker's compaction job runs the engine's one pipeline
/// (`compactor_shared::pipeline::compact`): what it commits is exactly what
/// that function computes for the same stored workstream. The planted-fact
/// test and the quality benchmark drive the same function (directly, and
/// through this worker), so they measure what production does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_commits_exactly_what_the_pipeline_computes() {
    use compactor_shared::{evidence, pipeline};

    let db = TestDb::new(Backend::Sqlite).await;
    let redis = TestRedis::new();
    let mut settings = settings(&db.url, &redis, None);
    settings.engine.trigger = small_model().trigger;
    let engine = settings.engine.clone();
    let compactor =
        Compactor::from_parts(db.store.clone(), redis.queue().await, engine.clone()).await;
    let k = key("same-pipeline");
    let incoming = conversation(60);
    let appended = compactor
        .append_messages(&k, incoming.clone())
        .await
        .unwrap();
    let messages = as_stored(&incoming, &appended.ids);

    // What the pipeline computes, in memory, with the offline summarizer.
    let stored = db.store.workstream(&k).await.unwrap().unwrap();
    let e = CharEstimator::new(engine.chars_per_token);
    let expected = pipeline::now_or_never(pipeline::compact(
        &pipeline::Workstream {
            summary: stored.summary.clone(),
            state: stored.state.clone(),
            memory_block_summary: stored.memory_block_summary.clone(),
            memory_entries: Vec::new(),
            summary_tokens: stored.summary_tokens,
            uncompacted_tokens: stored.uncompacted_tokens,
        },
        &pipeline::Request::default(),
        &engine,
        &e,
        4_000,
        &mut pipeline::InMemory::new(&messages, 1_000),
        &mut pipeline::Extractive::new(&engine, &e),
    ))
    .unwrap()
    .unwrap();
    let pipeline::Outcome::Compacted(expected) = expected else {
        panic!("over the trigger: something to compact")
    };

    // What the worker commits.
    assert!(matches!(
        compactor.finalize_turn(&k, None).await.unwrap(),
        TurnOutcome::Requested { .. }
    ));
    let worker = spawn_worker(settings);
    until_compacted(&compactor, &k).await;
    worker.stop().await;
    let committed = db.store.workstream(&k).await.unwrap().unwrap();
    assert_eq!(
        committed.last_compacted_message_id,
        Some(expected.watermark)
    );
    assert_eq!(committed.summary.as_ref(), Some(&expected.summary));
    assert_eq!(committed.state, expected.state);
    assert_eq!(committed.summary_tokens, expected.summary_tokens);
    let runs = db.store.runs(&k, 10).await.unwrap();
    assert_eq!(runs[0].run.tokens_after, expected.report.tokens_after);
    assert_eq!(
        runs[0].run.messages_compacted,
        expected.report.messages_compacted
    );
    // The evidence figures the pipeline reported are the run's: kept ones
    // are the lines the committed state holds, and kept + dropped are all
    // the candidates — the lines of the compacted messages (a first
    // compaction: no evidence shown before), counted here by choosing with
    // no budget, which keeps none.
    let run = &runs[0].run;
    assert!(run.evidence_kept > 0, "{run:?}");
    assert_eq!(
        (run.evidence_kept, run.evidence_dropped),
        (
            expected.report.evidence_kept,
            expected.report.evidence_dropped
        )
    );
    assert_eq!(
        run.evidence_kept,
        committed.state.evidence.lines.len() as u64
    );
    let compacted: Vec<Message> = messages
        .iter()
        .filter(|m| m.id <= expected.watermark && !expected.keep.contains(&m.id))
        .cloned()
        .collect();
    assert_eq!(compacted.len() as u64, run.messages_compacted);
    let mut gathering = evidence::Gathering::default();
    gathering.add(
        evidence::read(&compacted, engine.evidence.max_line_chars),
        0,
    );
    let candidates = gathering
        .choose(
            &evidence::Evidence::default(),
            &[],
            "",
            0,
            &engine.evidence,
            &e,
        )
        .dropped;
    assert_eq!(run.evidence_kept + run.evidence_dropped, candidates);
}

/// `[engine.summary] format = "handoff9"` end to end on PostgreSQL, with
/// the offline summarizer: the worker stores a summary with CoWork's nine
/// sections, the next context opens with the hand-off framing, and after
/// the operator switches back to `sections` the stored summary still
/// renders as written until the next compaction converts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff9_summary_has_the_nine_sections_and_the_context_opens_with_the_framing() {
    use compactor_shared::context::{HANDOFF9_FRAMING, SUMMARY_HEADER};
    use compactor_shared::summary::{Section, SummaryFormat};

    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let mut settings = settings(&db.url, &redis, None);
    // A 32k-token model: room for a summary of 2,560 tokens, enough to
    // show every section.
    settings.engine.trigger = compactor_shared::trigger::TriggerPolicy::Threshold {
        context_window: 32_000,
        ratio: 0.7,
        output_reserve: 4_000,
        safety_margin: 1_000,
    };
    settings.engine.summary.format = SummaryFormat::Handoff9;
    // A summary that quotes the conversation's lines, as the offline one
    // does with the evidence off: every section has bullets of its own.
    settings.engine.extractive.quote_lines = Some(true);
    let engine = settings.engine.clone();
    let compactor =
        Compactor::from_parts(db.store.clone(), redis.queue().await, engine.clone()).await;
    let k = key("handoff9");
    compactor
        .append_messages(&k, conversation(160))
        .await
        .unwrap();
    requested_job(&compactor.finalize_turn(&k, None).await.unwrap());
    let worker = spawn_worker(settings.clone());
    until_compacted(&compactor, &k).await;
    worker.stop().await;

    let stored = db.store.workstream(&k).await.unwrap().unwrap();
    let summary = stored.summary.expect("a summary is stored");
    assert_eq!(summary.format, SummaryFormat::Handoff9);
    let listed: Vec<(Option<usize>, &str)> = summary
        .sections()
        .map(|(s, _)| (s.number(), s.heading()))
        .collect();
    let nine: Vec<(Option<usize>, &str)> = Section::HANDOFF9
        .iter()
        .enumerate()
        .map(|(i, s)| (Some(i + 1), s.heading()))
        .collect();
    assert_eq!(listed, nine);
    // Errors, pending work and the current state: every turn of this
    // conversation is one template whose error and request are the user's
    // own words, so those sections' bullets repeat the user messages' (the
    // current state is "turn in progress: <the last user message>") and
    // are left out: no context repeats itself (asserted below).
    for section in [
        Section::PrimaryRequest,
        Section::UserMessages,
        Section::WorkCompleted,
        Section::NextStep,
    ] {
        assert!(
            !summary.section(section).is_empty(),
            "{section:?} is empty: {summary:?}"
        );
    }
    // The errors the user reported are in the summary once: every turn
    // of this conversation reports its error in the user's own request,
    // so errors-and-fixes bullets would repeat the user messages' ones
    // and are left out (no context repeats itself).
    let lines: Vec<&String> = summary.sections().flat_map(|(_, b)| b).collect();
    assert!(
        lines.iter().any(|l| l.contains("fails with error E0")),
        "{summary:?}"
    );
    for (i, a) in lines.iter().enumerate() {
        assert!(
            lines[i + 1..].iter().all(|b| a != b),
            "{a} stands twice: {summary:?}"
        );
    }
    assert!(
        summary.primary_request[0].contains(" user: Turn 0: please look at"),
        "the first request: {:?}",
        summary.primary_request
    );
    assert!(summary.key_facts.is_empty() && summary.conversation_flow.is_empty());
    let runs = db.store.runs(&k, 10).await.unwrap();
    let rendered = runs[0].run.summary.as_deref().expect("the run's summary");
    assert!(
        rendered.starts_with("## 1. Primary Request and Intent\n"),
        "{rendered}"
    );
    assert!(rendered.contains("\n## 9. Recommended Next Step\n"));

    let preamble = text_of(&compactor.build_context(&k).await.unwrap().messages[0]);
    assert!(preamble.starts_with(HANDOFF9_FRAMING), "{preamble}");
    for section in Section::HANDOFF9 {
        assert!(preamble.contains(section.heading()), "{section:?}");
    }
    assert!(!preamble.contains("KEY FACTS") && !preamble.contains(SUMMARY_HEADER));

    // The operator switches back to `sections`: the stored summary renders
    // as written until the next compaction converts it.
    let mut switched = settings;
    switched.engine.summary.format = SummaryFormat::Sections;
    compactor
        .append_messages(&k, conversation(3))
        .await
        .unwrap();
    let preamble = text_of(&compactor.build_context(&k).await.unwrap().messages[0]);
    assert!(preamble.starts_with(HANDOFF9_FRAMING), "{preamble}");
    compactor.compact_now(&k, None).await.unwrap();
    let worker = spawn_worker(switched);
    eventually(
        "the workstream is compacted again",
        Duration::from_secs(60),
        || async { compactor.status(&k).await.unwrap().compactions == 2 },
    )
    .await;
    worker.stop().await;
    let again = db.store.workstream(&k).await.unwrap().unwrap();
    let converted = again.summary.expect("a summary is stored");
    assert_eq!(converted.format, SummaryFormat::Sections);
    let before: Vec<&String> = summary.sections().flat_map(|(_, b)| b).collect();
    assert!(
        converted
            .sections()
            .flat_map(|(_, b)| b)
            .any(|bullet| before.contains(&bullet)),
        "the stored summary's content is carried over: {converted:?}"
    );
    let preamble = text_of(&compactor.build_context(&k).await.unwrap().messages[0]);
    assert!(
        preamble.starts_with(SUMMARY_HEADER) && preamble.contains("KEY FACTS:"),
        "{preamble}"
    );
}
