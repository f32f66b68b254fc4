use std::future::Future;

use super::*;
use crate::message::Role;
use crate::tokens::CharEstimator;
use crate::trigger::TriggerPolicy;

fn estimator() -> CharEstimator {
    CharEstimator::new(3)
}

/// A small model: 20 messages of ~100 tokens are over its trigger.
fn engine() -> EngineConfig {
    EngineConfig {
        trigger: TriggerPolicy::Threshold {
            context_window: 4_000,
            ratio: 0.5,
            output_reserve: 500,
            safety_margin: 100,
        },
        ..EngineConfig::default()
    }
}

fn conversation(n: i64) -> Vec<Message> {
    (1..=n)
        .map(|id| {
            let role = if id % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            Message::text(id, role, format!("message {id}: {}", "words ".repeat(50)))
        })
        .collect()
}

fn workstream(messages: &[Message]) -> Workstream {
    let e = estimator();
    Workstream {
        uncompacted_tokens: messages.iter().map(|m| e.message_tokens(m)).sum(),
        ..Workstream::default()
    }
}

fn run<S: Summarize>(
    messages: &[Message],
    engine: &EngineConfig,
    summarizer: &mut S,
    min_chunk_chars: usize,
) -> Result<Outcome, PipelineError<Never, S::Error>> {
    let e = estimator();
    let ws = workstream(messages);
    let mut pages = InMemory::new(messages, 7);
    now_or_never(compact(
        &ws,
        &Request::default(),
        engine,
        &e,
        min_chunk_chars,
        &mut pages,
        summarizer,
    ))
    .expect("in-memory pipeline is ready at once")
}

fn compacted(outcome: Outcome) -> Compacted {
    match outcome {
        Outcome::Compacted(c) => *c,
        Outcome::NothingToCut => panic!("expected a compaction"),
    }
}

#[test]
fn too_few_messages_is_nothing_to_cut() {
    let engine = engine();
    let e = estimator();
    let mut s = Extractive::new(&engine, &e);
    let out = run(&conversation(1), &engine, &mut s, 4_000).unwrap();
    assert!(matches!(out, Outcome::NothingToCut));
}

#[test]
fn compacts_up_to_the_tail_and_reports_progress() {
    let engine = engine();
    let e = estimator();
    let mut s = Extractive::new(&engine, &e);
    let messages = conversation(30);
    let c = compacted(run(&messages, &engine, &mut s, 4_000).unwrap());
    // The default tail keeps the last 6 messages verbatim.
    assert_eq!(c.watermark, MessageId(24));
    assert_eq!(c.report.messages_compacted, 24);
    assert!(c.report.chunks >= 1);
    assert!(c.report.tokens_after < c.report.tokens_before);
    assert!(c.report.progress, "{:?}", c.report);
}

#[test]
fn with_the_evidence_on_the_offline_summary_leaves_the_lines_to_the_evidence() {
    let engine = engine();
    let e = estimator();
    let said = [
        "Book a table at Firehouse Grill in Sunnyvale for 6:45 pm.",
        "Done: Firehouse Grill, 6:45 pm, reference FG-20931.",
        "Also call the dentist, Dr. Okafor, at 408-555-0199.",
        "Noted: Dr. Okafor, 408-555-0199.",
        "What time does the grill close?",
        "It closes at 11 pm.",
    ];
    let mut messages: Vec<Message> = said
        .iter()
        .zip(1..)
        .map(|(text, id)| {
            let role = if id % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            Message::text(id, role, *text)
        })
        .collect();
    // Then talk with nothing in it, the last of it the kept tail.
    messages.extend((7..=30).map(|id| {
        let role = if id % 2 == 1 {
            Role::User
        } else {
            Role::Assistant
        };
        Message::text(id, role, "Okay.")
    }));
    let mut s = Extractive::new(&engine, &e);
    let c = compacted(run(&messages, &engine, &mut s, 4_000).unwrap());
    // No second copy of the lines in the summary ...
    assert!(c.summary.key_facts.is_empty(), "{:?}", c.summary);
    assert!(c.summary.conversation_flow.is_empty(), "{:?}", c.summary);
    // ... the evidence has them.
    let evidence = c.state.evidence.render();
    for value in [
        "Firehouse Grill",
        "6:45 pm",
        "FG-20931",
        "408-555-0199",
        "11 pm",
    ] {
        assert!(evidence.contains(value), "{value} missing:\n{evidence}");
    }

    // With the evidence off, the summary is what carries them.
    let mut off = engine.clone();
    off.evidence.share_of_trigger = Some(0.0);
    let mut s = Extractive::new(&off, &e);
    let c = compacted(run(&messages, &off, &mut s, 4_000).unwrap());
    assert!(c.state.evidence.lines.is_empty());
    let summary = c.summary.render();
    for value in ["Firehouse Grill", "408-555-0199"] {
        assert!(summary.contains(value), "{value} missing:\n{summary}");
    }
}

#[test]
fn messages_appended_after_the_plan_are_not_compacted() {
    // A page source whose second pass sees more messages than the first.
    struct Growing {
        messages: Vec<Message>,
        passes: usize,
    }
    impl PageSource for Growing {
        type Error = Never;
        fn page(
            &mut self,
            after: Option<MessageId>,
        ) -> impl Future<Output = Result<Vec<Message>, Never>> + Send {
            if after.is_none() {
                self.passes += 1;
            }
            let visible = if self.passes == 1 { 20 } else { 40 };
            let start = after.map_or(0, |a| {
                self.messages[..visible].partition_point(|m| m.id <= a)
            });
            std::future::ready(Ok(self.messages[start..visible].to_vec()))
        }
    }
    let engine = engine();
    let e = estimator();
    let mut s = Extractive::new(&engine, &e);
    let messages = conversation(40);
    let mut pages = Growing {
        messages: messages.clone(),
        passes: 0,
    };
    let ws = workstream(&messages[..20]);
    let c = compacted(
        now_or_never(compact(
            &ws,
            &Request::default(),
            &engine,
            &e,
            4_000,
            &mut pages,
            &mut s,
        ))
        .unwrap()
        .unwrap(),
    );
    assert_eq!(c.watermark, MessageId(14));
    let flow = c.summary.conversation_flow.join("\n");
    assert!(!flow.contains("#21"), "{flow}");
}

/// A summarizer whose model takes at most `max_chars` of transcript.
struct Small {
    max_chars: usize,
    calls: Vec<usize>,
    rollups: u32,
}

#[derive(Debug, PartialEq, Eq)]
enum SmallError {
    TooLong,
}

impl SummarizeFailure for SmallError {
    fn is_context_length(&self) -> bool {
        *self == SmallError::TooLong
    }
}

impl Summarize for Small {
    type Error = SmallError;
    fn summarize(
        &mut self,
        input: &CompactionInput<'_>,
    ) -> impl Future<Output = Result<SummarizerOutput, SmallError>> + Send {
        let chars = input.new_messages.chars().count();
        self.calls.push(chars);
        let out = if chars > self.max_chars {
            Err(SmallError::TooLong)
        } else {
            let mut summary = input.previous_summary.cloned().unwrap_or_default();
            summary.key_facts.push(format!("chunk of {chars} chars"));
            Ok(SummarizerOutput {
                summary,
                delta: Default::default(),
            })
        };
        std::future::ready(out)
    }
    fn rollup(
        &mut self,
        summary: &Summary,
        _target_tokens: u64,
    ) -> impl Future<Output = Result<Summary, SmallError>> + Send {
        // A model that never manages to shrink the summary.
        self.rollups += 1;
        std::future::ready(Ok(summary.clone()))
    }
    fn fold_memory(
        &mut self,
        _previous: Option<&str>,
        _entries: &[String],
        _max_chars: usize,
    ) -> impl Future<Output = Result<String, SmallError>> + Send {
        std::future::ready(Ok(String::new()))
    }
}

#[test]
fn a_chunk_too_long_for_the_model_is_halved_until_it_fits() {
    let engine = engine();
    let mut s = Small {
        max_chars: 1_500,
        calls: Vec::new(),
        rollups: 0,
    };
    let c = compacted(run(&conversation(30), &engine, &mut s, 100).unwrap());
    assert!(s.calls[0] > 1_500, "{:?}", s.calls);
    assert!(c.report.chunks > 1);
    // Every accepted call fit the model.
    assert_eq!(
        s.calls.iter().filter(|&&n| n <= 1_500).count() as u32,
        c.report.chunks
    );
}

#[test]
fn below_the_minimum_chunk_a_context_length_error_is_final() {
    let engine = engine();
    let mut s = Small {
        max_chars: 10,
        calls: Vec::new(),
        rollups: 0,
    };
    let err = run(&conversation(30), &engine, &mut s, 1_000).unwrap_err();
    assert!(matches!(
        err,
        PipelineError::ChunkTooLong {
            source: SmallError::TooLong,
            ..
        }
    ));
}

#[test]
fn rollups_are_bounded_and_the_summary_is_then_cut_to_its_limit() {
    let mut engine = engine();
    engine.summary.rollup_max_tokens = 1_000;
    let e = estimator();
    let mut s = Small {
        max_chars: usize::MAX,
        calls: Vec::new(),
        rollups: 0,
    };
    // A previous summary far over the rollup limit.
    let mut ws = workstream(&conversation(30));
    let big = Summary {
        key_facts: (0..2_000).map(|i| format!("fact number {i}")).collect(),
        ..Summary::default()
    };
    ws.summary = Some(big);
    let messages = conversation(30);
    let mut pages = InMemory::new(&messages, 7);
    let c = compacted(
        now_or_never(compact(
            &ws,
            &Request::default(),
            &engine,
            &e,
            100,
            &mut pages,
            &mut s,
        ))
        .unwrap()
        .unwrap(),
    );
    assert_eq!(s.rollups, MAX_ROLLUPS);
    assert_eq!(c.report.rollups, MAX_ROLLUPS);
    assert!(c.summary.tokens(&e) <= 1_000);
}

#[test]
fn the_users_statements_are_recorded_before_the_summarizer_sees_the_span() {
    // A summarizer that writes nothing of value: the user's decision is
    // still recorded, and it already was when the chunk was summarized.
    let mut stated_seen = Vec::new();
    let mut s = Scripted(|input: &CompactionInput<'_>| {
        stated_seen.push(input.state.stated.render().contains("SQLite"));
        "some work happened".to_owned()
    });
    let engine = engine();
    let mut messages = conversation(30);
    messages[2] = Message::text(
        3,
        Role::User,
        "The config lives in services/api/config.toml",
    );
    messages[4] = Message::text(5, Role::User, "We'll go with SQLite for the job store.");
    let c = compacted(run(&messages, &engine, &mut s, 4_000).unwrap());
    assert!(
        !stated_seen.is_empty() && stated_seen.iter().all(|&seen| seen),
        "{stated_seen:?}"
    );
    assert!(
        c.state.stated.render().contains("SQLite"),
        "the user's decision is recorded: {:?}",
        c.state.stated
    );
}

#[test]
fn deterministic_for_the_same_input() {
    let engine = engine();
    let e = estimator();
    let messages = conversation(50);
    let extractive = || {
        let mut summarizer = Extractive::new(&engine, &e);
        compacted(run(&messages, &engine, &mut summarizer, 4_000).unwrap())
    };
    let once = extractive();
    let twice = extractive();
    assert_eq!(once.summary, twice.summary);
    assert_eq!(once.state, twice.state);
    assert_eq!(once.report, twice.report);
}

#[test]
fn a_summary_stored_in_the_other_format_is_converted_and_kept_by_the_next_compaction() {
    use crate::summary::SummaryFormat;

    // The default budget: nothing of this short conversation is cut. (A
    // summary that quotes the lines, as with the evidence off.)
    let mut engine = EngineConfig::default();
    engine.summary.format = SummaryFormat::Handoff9;
    engine.extractive.quote_lines = Some(true);
    let e = estimator();
    let messages = conversation(30);
    let mut ws = workstream(&messages);
    ws.summary = Some(Summary {
        key_facts: vec!["the ledger lives in Postgres 16".into()],
        open_threads: vec!["run the load test".into()],
        ..Summary::default()
    });
    let c = compacted(
        now_or_never(compact(
            &ws,
            &Request::default(),
            &engine,
            &e,
            4_000,
            &mut InMemory::new(&messages, 7),
            &mut Extractive::new(&engine, &e),
        ))
        .expect("ready")
        .unwrap(),
    );
    assert_eq!(c.summary.format, SummaryFormat::Handoff9);
    assert!(c
        .summary
        .technical_details
        .contains(&"the ledger lives in Postgres 16".to_owned()));
    assert!(c
        .summary
        .pending_work
        .contains(&"run the load test".to_owned()));
    assert!(!c.summary.user_messages.is_empty());
    assert!(c.report.progress, "{:?}", c.report);
}

/// The extractive summarizer folding each chunk afresh: no judgements kept
/// between chunks, the statement rules' answers handed over dropped (what
/// `Extractive` did before it kept them).
struct Afresh<'a>(Extractive<'a>);

impl Summarize for Afresh<'_> {
    type Error = Never;

    fn summarize(
        &mut self,
        input: &CompactionInput<'_>,
    ) -> impl Future<Output = Result<SummarizerOutput, Never>> + Send {
        let Extractive {
            engine, estimator, ..
        } = self.0;
        std::future::ready(Ok(extractive::summarize(
            input,
            &engine.extractive_config(),
            engine.summary_budget(),
            estimator,
        )))
    }

    fn rollup(
        &mut self,
        summary: &Summary,
        target_tokens: u64,
    ) -> impl Future<Output = Result<Summary, Never>> + Send {
        self.0.rollup(summary, target_tokens)
    }

    fn fold_memory(
        &mut self,
        previous: Option<&str>,
        entries: &[String],
        max_chars: usize,
    ) -> impl Future<Output = Result<String, Never>> + Send {
        self.0.fold_memory(previous, entries, max_chars)
    }
}

/// A conversation of user decisions and constraints (some superseded
/// later, some said twice, some longer than a bullet), questions, and
/// assistant answers with paths, commands and filler: everything the
/// summarizer judges.
fn judged_conversation(turns: i64) -> Vec<Message> {
    let user = [
        "From now on, reply in English and keep answers short.",
        "We decided to use PostgreSQL 16 for the ledger; never push to main without a review.",
        "Actually, use MySQL 8 for the ledger instead.",
        "Can you move the deploy to Friday? The staging box at 10.0.0.7 is down.",
        "Never mind, found it.",
        "Please don't touch src/billing/invoice.rs until the audit is over, and keep the old \
         retry policy of three attempts with a 250 ms backoff for every outbound payment call.",
        "We decided to use PostgreSQL 16 for the ledger; never push to main without a review.",
        "What does error E1042 mean?",
    ];
    let assistant = [
        "Sure, happy to help.",
        "I ran cargo test -p ledger and it fails in src/ledger/post.rs at line 88.",
        "The fix is in src/ledger/post.rs: the rounding uses f32; switching to rust_decimal fixes it.",
        "Thanks for your patience! Let me know if there is anything else.",
        "Done: the migration m20261127_000001 now runs before the backfill, and make check passes.",
    ];
    let mut out = Vec::new();
    let mut id = 0;
    for t in 0..turns {
        id += 1;
        let said = user[(t as usize) % user.len()];
        out.push(Message::text(id, Role::User, format!("{said} (turn {t})")));
        id += 1;
        let answer = assistant[(t as usize * 3) % assistant.len()];
        let also = assistant[(t as usize + 1) % assistant.len()];
        out.push(Message::text(
            id,
            Role::Assistant,
            format!("{answer} {also}"),
        ));
    }
    out
}

#[test]
fn judgements_kept_between_chunks_change_nothing_of_the_result() {
    use crate::summary::SummaryFormat;

    for format in [SummaryFormat::Sections, SummaryFormat::Handoff9] {
        let mut engine = engine();
        engine.summary.format = format;
        // Many chunks, many pages (of 7: spans extracted ahead).
        engine.chunk.max_chars = 1_500;
        let e = estimator();
        let messages = judged_conversation(160);
        let kept =
            compacted(run(&messages, &engine, &mut Extractive::new(&engine, &e), 500).unwrap());
        let afresh = compacted(
            run(
                &messages,
                &engine,
                &mut Afresh(Extractive::new(&engine, &e)),
                500,
            )
            .unwrap(),
        );
        assert!(kept.report.chunks > 10, "{:?}", kept.report);
        assert!(
            kept.state.stated.current().count() > 0 && kept.state.stated.superseded().count() > 0,
            "statements recorded, one superseded: {:?}",
            kept.state.stated
        );
        assert_eq!(kept.summary, afresh.summary, "{format:?}");
        assert_eq!(kept.state, afresh.state, "{format:?}");
        assert_eq!(kept.report, afresh.report, "{format:?}");
    }
}

#[test]
fn evidence_keeps_what_it_held_through_a_large_tail_up_to_the_hold_share() {
    let engine = engine();
    let threshold = engine.trigger.threshold().expect("a threshold");
    let target = (threshold as f64 * engine.evidence_share()) as u64;
    let hold = (threshold as f64 * EVIDENCE_HOLD_SHARE) as u64;
    let e = CharEstimator::default();
    let heading = e.count(crate::evidence::EVIDENCE_HEADING) + 1;
    let room = engine.summary_budget();
    // A tail that leaves nothing under the share: a first compaction (no
    // evidence before) still gets a summary's room past it (the offline
    // summary quotes no line), under the hold share.
    let (budget, ceiling) = evidence_budget(&engine, 0, target, 0, &e);
    assert_eq!(budget, room.min(hold - target - heading));
    assert!(budget > 0);
    assert!(ceiling.is_some_and(|c| c <= hold), "{ceiling:?}");
    // Evidence held before is kept, past the share, while the context
    // stays under the hold share.
    let held = room + 40;
    let (budget, ceiling) = evidence_budget(&engine, 0, target, held, &e);
    assert_eq!(budget, held.min(hold - target - heading));
    assert!(
        ceiling.is_some_and(|c| c > target && c <= hold),
        "{ceiling:?}"
    );
    // Never past the hold share, however much it held.
    let (budget, ceiling) = evidence_budget(&engine, 0, hold, 10_000, &e);
    assert_eq!((budget, ceiling), (0, Some(hold)));
}

/// A summarizer whose one key fact `write` gives for each chunk, and whose
/// rollups change nothing.
struct Scripted<F>(F);

impl<F> Summarize for Scripted<F>
where
    F: FnMut(&CompactionInput<'_>) -> String + Send,
{
    type Error = Never;
    fn summarize(
        &mut self,
        input: &CompactionInput<'_>,
    ) -> impl Future<Output = Result<SummarizerOutput, Never>> + Send {
        let mut summary = Summary::default();
        summary.key_facts.push((self.0)(input));
        std::future::ready(Ok(SummarizerOutput {
            summary,
            delta: Default::default(),
        }))
    }
    fn rollup(
        &mut self,
        summary: &Summary,
        _: u64,
    ) -> impl Future<Output = Result<Summary, Never>> + Send {
        std::future::ready(Ok(summary.clone()))
    }
    fn fold_memory(
        &mut self,
        _: Option<&str>,
        _: &[String],
        _: usize,
    ) -> impl Future<Output = Result<String, Never>> + Send {
        std::future::ready(Ok(String::new()))
    }
}

const BOOKING: &str = "The venue contact is Margarethe Okonkwo of Harbourside Events in Tromsø.";

#[test]
fn evidence_keeps_a_line_the_summary_said_at_one_compaction_only() {
    let engine = engine();
    let e = estimator();
    let mut messages = conversation(60);
    messages[3] = Message::text(4, Role::Assistant, BOOKING);
    // A summarizer that says the contact at the first compaction and
    // something else afterwards, as summaries rewritten at every
    // compaction do.
    let mut calls = 0;
    let mut s = Scripted(|_: &CompactionInput<'_>| {
        calls += 1;
        if calls == 1 {
            format!("Assistant: {BOOKING}")
        } else {
            "The user went through the filler messages one by one.".into()
        }
    });
    // The first compaction: the summary says the contact; the evidence
    // says it too, as it is chosen without regard to the summary, which
    // the next compaction rewrites.
    let first = compacted(run(&messages[..30], &engine, &mut s, 4_000).unwrap());
    let evidence = first.state.evidence.render();
    assert!(evidence.contains("Okonkwo"), "{evidence}");
    // The second compaction's summary no longer says it: the evidence
    // still does.
    let rest: Vec<Message> = messages
        .iter()
        .filter(|m| m.id > first.watermark || first.keep.contains(&m.id))
        .cloned()
        .collect();
    let ws = Workstream {
        summary: Some(first.summary.clone()),
        state: first.state.clone(),
        summary_tokens: first.summary_tokens,
        uncompacted_tokens: rest.iter().map(|m| e.message_tokens(m)).sum(),
        ..Workstream::default()
    };
    let mut pages = InMemory::new(&rest, 7);
    let second = compacted(
        now_or_never(compact(
            &ws,
            &Request::default(),
            &engine,
            &e,
            4_000,
            &mut pages,
            &mut s,
        ))
        .expect("ready")
        .unwrap(),
    );
    assert!(calls >= 2);
    for value in ["Margarethe Okonkwo", "Harbourside Events", "Tromsø"] {
        assert!(
            second.state.evidence.render().contains(value),
            "{value}: {}",
            second.state.evidence.render()
        );
    }
}
